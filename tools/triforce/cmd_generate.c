/* cmd_generate.c — `triforce generate`: prefill a prompt, stream a continuation. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

/* Prefill progress, for prompts of PREFILL_PROGRESS_MIN tokens or more. */
#define PREFILL_PROGRESS_MIN 2048

typedef struct progress_state {
    double t0;
    cli_progress line;
} progress_state;

static bool show_progress(void *ud, uint64_t done, uint64_t total) {
    progress_state *ps = ud;
    if (total < PREFILL_PROGRESS_MIN) return true;
    double el = cli_now() - ps->t0;
    cli_progress_show(&ps->line, done, total, "prefill: %llu/%llu tokens (%.0f%%, %.0f tok/s)",
                      (unsigned long long)done, (unsigned long long)total, 100.0 * (double)done / (double)total,
                      el > 0 ? (double)done / el : 0.0);
    return true;
}

/* Writes the prompt's bytes to stdout as valid UTF-8 (the generated text that
 * follows comes from tf_detokenizer): an incomplete sequence at the end of one
 * chunk is held for the next; invalid bytes are written as U+FFFD. */
typedef struct utf8_out {
    unsigned char held[4];
    int n_held;
} utf8_out;

static int utf8_len(unsigned char c) {
    /* 0xC0, 0xC1 and 0xF5.. never start a valid sequence */
    return c < 0x80 ? 1 : (c >> 5) == 6 && c >= 0xC2 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 && c <= 0xF4 ? 4 : 0;
}

static void utf8_write(utf8_out *u, const char *s, int n) {
    for (int i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (u->n_held > 0) {
            if ((c & 0xC0) == 0x80) {
                u->held[u->n_held++] = c;
                if (u->n_held == utf8_len(u->held[0])) {
                    fwrite(u->held, 1, (size_t)u->n_held, stdout);
                    u->n_held = 0;
                }
                continue;
            }
            fputs("\xEF\xBF\xBD", stdout); /* truncated sequence */
            u->n_held = 0;
        }
        int L = utf8_len(c);
        if (L == 1) fputc(c, stdout);
        else if (L == 0) fputs("\xEF\xBF\xBD", stdout);
        else u->held[u->n_held++] = c;
    }
    fflush(stdout);
}

static void utf8_flush(utf8_out *u) {
    if (u->n_held) fputs("\xEF\xBF\xBD", stdout);
    u->n_held = 0;
}

/* Loading progress in MiB; ud is a cli_progress *. */
static bool load_progress(void *ud, uint64_t done, uint64_t total) {
    if (total < (256u << 20)) return true; /* small models load instantly */
    cli_progress_show(ud, done, total, "loading: %.0f of %.0f MiB", (double)done / (1 << 20),
                      (double)total / (1 << 20));
    return true;
}

static const char *k_usage = "-m MODEL (-p TEXT | -f FILE) [options]";

/* One generation with the decoder: prefill, then steps until n_predict tokens
 * (or an end-of-generation token); streams text when `stream`. */
typedef struct gen_result {
    int32_t *toks;
    int n;
    double t_prefill, t_decode;
    int n_levels;
    tf_level_info lv[4];
    int64_t via_middle, skipping_middle; /* target passes by route (three-level modes) */
} gen_result;

static int run_one(const cli_opts *o, const tf_model *model, const tf_model *draft, tf_decoder_params dp,
                   const int32_t *prompt, size_t n_prompt, bool stream, gen_result *res) {
    char err[1024];
    tf_decoder *dec;
    progress_state ps = {0};
    if (stream) {
        dp.progress = show_progress;
        dp.progress_user_data = &ps;
    }
    if (tf_decoder_init(&dec, model, draft, &dp, err, sizeof err) != TF_OK) {
        fprintf(stderr, "triforce: %s\n", err);
        return 1;
    }
    if (stream) fprintf(stderr, "triforce generate: device %s\n", tf_decoder_device(dec));
    res->toks = malloc(sizeof(int32_t) * (size_t)(o->n_predict + 64));
    res->n = 0;
    ps.t0 = cli_now();
    double t0 = ps.t0;
    ps.line = cli_progress_make(NULL);
    if (tf_decoder_prefill(dec, prompt, (int32_t)n_prompt) != TF_OK) {
        cli_progress_break();
        fprintf(stderr, "triforce: %s\n", tf_decoder_error(dec));
        tf_decoder_free(dec);
        return 1;
    }
    double t1 = cli_now();
    /* the continuation streams as whole UTF-8 characters (its first space kept) */
    tf_detokenizer *dt = NULL;
    char *piece = NULL;
    size_t piece_cap = 0;
    if (stream) {
        if (tf_detokenizer_init(&dt, model, true) != TF_OK || !(piece = malloc(tf_detokenizer_max_bytes(dt)))) {
            fprintf(stderr, "triforce: out of memory\n");
            tf_detokenizer_free(dt);
            tf_decoder_free(dec);
            return 1;
        }
        piece_cap = tf_detokenizer_max_bytes(dt);
    }
    bool done = false;
    int rc = 0;
    while (!done && res->n < o->n_predict) {
        int32_t buf[64], k;
        tf_status st = tf_decoder_step(dec, buf, 64, &k);
        if (st == TF_ERR_RANGE) { /* fewer tokens than asked for: a failure, not a success */
            fprintf(stderr, "\ntriforce: context full after %zu + %d of the %d tokens asked for (raise -c)\n",
                    n_prompt, res->n, o->n_predict);
            rc = 1;
            break;
        }
        if (st != TF_OK) {
            fprintf(stderr, "\ntriforce: %s\n", tf_decoder_error(dec));
            rc = 1;
            break;
        }
        for (int32_t i = 0; i < k && res->n < o->n_predict; i++) {
            res->toks[res->n++] = buf[i];
            if (!o->ignore_eos && tf_model_is_eog(model, buf[i])) {
                done = true;
                break;
            }
            size_t np = 0;
            if (stream && tf_detokenizer_push(dt, buf[i], piece, piece_cap, &np) == TF_OK && np > 0) {
                fwrite(piece, 1, np, stdout);
                fflush(stdout);
            }
        }
    }
    if (stream) {
        size_t np = 0;
        if (tf_detokenizer_flush(dt, piece, piece_cap, &np) == TF_OK && np > 0) fwrite(piece, 1, np, stdout);
        printf("\n");
        fflush(stdout);
        tf_detokenizer_free(dt);
        free(piece);
    }
    res->t_prefill = t1 - t0;
    res->t_decode = cli_now() - t1;
    res->n_levels = tf_decoder_n_levels(dec);
    for (int i = 0; i < res->n_levels && i < 4; i++) tf_decoder_level(dec, i, &res->lv[i]);
    tf_decoder_routes(dec, &res->via_middle, &res->skipping_middle);
    tf_decoder_free(dec);
    return rc;
}

static void print_levels(const gen_result *r) {
    double total = 0;
    for (int i = 0; i < r->n_levels; i++) total += r->lv[i].seconds;
    for (int i = 0; i < r->n_levels; i++) {
        const tf_level_info *L = &r->lv[i];
        if (strcmp(L->cache, "lookup") == 0) /* no model, no cache: proposals by text lookup */
            fprintf(stderr, "  %-6s (text lookup): %lld proposals, %lld tokens", L->name, (long long)L->passes,
                    (long long)L->tokens);
        else
            fprintf(stderr, "  %-6s (%s cache): %lld passes, %lld tokens", L->name, L->cache, (long long)L->passes,
                    (long long)L->tokens);
        if (L->verified > 0)
            fprintf(stderr, ", accepted %lld of %lld candidates (%.1f%%)", (long long)L->accepted,
                    (long long)L->verified, 100.0 * (double)L->accepted / (double)L->verified);
        if (L->rebuilds) fprintf(stderr, ", %lld rebuilds", (long long)L->rebuilds);
        if (L->bypassed) fprintf(stderr, ", %lld proposed alone (draft bypassed)", (long long)L->bypassed);
        fprintf(stderr, ", %.0f%% of level time\n", total > 0 ? 100.0 * L->seconds / total : 0.0);
    }
    if (r->via_middle + r->skipping_middle > 0)
        fprintf(stderr, "  target passes: %lld with the middle level's candidates, %lld with the draft's (middle skipped)\n",
                (long long)r->via_middle, (long long)r->skipping_middle);
    if (r->n_levels > 1 && r->lv[0].passes > 0)
        fprintf(stderr, "  mean tokens per target pass: %.2f\n", (double)r->n / (double)r->lv[0].passes);
}

/* Writes and closes f (opened before the run, so that a path that cannot be
 * created fails before any work); false, with a message, when the file could
 * not be written whole. */
static bool write_json(FILE *f, const char *path, const cli_opts *o, const char *mode, size_t n_prompt,
                       const gen_result *r, const gen_result *ar, int identical) {
    fprintf(f, "{\n  \"mode\": \"%s\",\n  \"prompt_tokens\": %zu,\n  \"generated_tokens\": %d,\n", mode, n_prompt, r->n);
    fprintf(f, "  \"prefill_s\": %.6f,\n  \"decode_s\": %.6f,\n  \"decode_tok_s\": %.3f,\n", r->t_prefill, r->t_decode,
            r->t_decode > 0 ? r->n / r->t_decode : 0.0);
    fprintf(f, "  \"temp\": %g,\n  \"gamma1\": %d,\n  \"gamma2\": %d,\n  \"budget\": %d,\n  \"chunk\": %d,\n", o->temp,
            o->gamma1, cli_gamma2(o), o->budget, o->chunk);
    fprintf(f, "  \"rebuild_stride\": %d,\n  \"bypass_accept\": %g,\n  \"sinks\": %d,\n  \"window\": %d,\n",
            o->rebuild_stride, o->bypass_accept, o->sinks, o->window);
    fprintf(f, "  \"middle\": \"%s\",\n  \"passes_via_middle\": %lld,\n  \"passes_skipping_middle\": %lld,\n",
            o->middle, (long long)r->via_middle, (long long)r->skipping_middle);
    if (ar)
        fprintf(f, "  \"ar_decode_s\": %.6f,\n  \"speedup\": %.4f,\n  \"identical\": %s,\n", ar->t_decode,
                r->t_decode > 0 ? (ar->t_decode / ar->n) / (r->t_decode / r->n) : 0.0,
                identical < 0 ? "null" : identical ? "true" : "false");
    fprintf(f, "  \"levels\": [\n");
    for (int i = 0; i < r->n_levels; i++) {
        const tf_level_info *L = &r->lv[i];
        fprintf(f,
                "    {\"name\": \"%s\", \"cache\": \"%s\", \"passes\": %lld, \"tokens\": %lld, \"verified\": %lld, "
                "\"accepted\": %lld, \"acceptance\": %.4f, \"rebuilds\": %lld, \"bypassed\": %lld, \"seconds\": %.6f}%s\n",
                L->name, L->cache, (long long)L->passes, (long long)L->tokens, (long long)L->verified,
                (long long)L->accepted, L->verified ? (double)L->accepted / (double)L->verified : 0.0,
                (long long)L->rebuilds, (long long)L->bypassed, L->seconds, i + 1 < r->n_levels ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    errno = 0;
    int bad = fflush(f) != 0 || ferror(f);
    int e = errno;
    if (fclose(f) != 0 && !bad) bad = 1, e = errno;
    if (bad) fprintf(stderr, "triforce: --stats-json %s: write failed: %s\n", path, e ? strerror(e) : "write error");
    return !bad;
}

int cmd_generate(int argc, char **argv) {
    cli_opts o;
    int r = cli_parse(&o, CMD_GENERATE, "generate", k_usage, 0, argc, argv);
    if (r) return r > 0 ? 0 : 2;
    if (!o.model) {
        fprintf(stderr, "triforce generate: -m MODEL is required (see --help)\n");
        return 2;
    }
    if (o.chat_template && !o.chat) {
        fprintf(stderr, "triforce generate: --chat-template is used with --chat only\n");
        return 2;
    }
    if (o.system && !o.chat) {
        fprintf(stderr, "triforce generate: --system is used with --chat only\n");
        return 2;
    }
    tf_decode_mode mode;
    if (!cli_decode_mode("generate", &o, &mode)) return 2;
    tf_decoder_params dp = cli_decoder_params(&o);
    dp.mode = mode;
    dp.n_ctx = o.n_ctx;
    if (o.device && !tf_device_from_name(o.device, &dp.device)) {
        fprintf(stderr, "triforce generate: --device '%s': expected cuda, cpu or auto\n", o.device);
        return 2;
    }
    if (!cli_check_decoder_params("generate", &dp)) return 2;
    size_t text_len;
    char *text = cli_prompt_text(&o, &text_len);
    if (!text) return 2;
    FILE *stats = NULL;
    if (o.stats_json) {
        if (!(stats = fopen(o.stats_json, "w"))) {
            fprintf(stderr, "triforce generate: --stats-json %s: cannot create: %s\n", o.stats_json, strerror(errno));
            free(text);
            return 2;
        }
    }
    tf_model_params mp = tf_model_default_params();
    mp.log_fn = cli_log;
    mp.log_level = o.verbose ? TF_LOG_DEBUG : TF_LOG_WARN;
    cli_progress load_line = cli_progress_make(NULL);
    mp.progress = load_progress;
    mp.progress_user_data = &load_line;
    char err[1024];
    tf_model *model = NULL, *draft = NULL;
    int rc = 1;
    int32_t *toks = NULL;
    gen_result res = {0}, ar = {0};
    if (!cli_load_models(&o, "generate", &mp, &load_line, &model, &draft)) goto done;
    tf_model_info info;
    tf_model_get_info(model, &info);
    if (!info.has_tokenizer) {
        fprintf(stderr, "triforce: %s has no tokenizer; generate needs one\n", o.model);
        goto done;
    }
    if (o.chat) {
        char *formatted;
        tf_chat_message msgs[2] = {{"system", o.system}, {"user", text}};
        if (tf_model_chat_format_as(model, o.chat_template, o.system ? msgs : msgs + 1, o.system ? 2 : 1,
                                    &formatted, err, sizeof err) != TF_OK) {
            fprintf(stderr, "triforce: --chat: %s\n", err);
            goto done;
        }
        free(text);
        text = formatted;
        text_len = strlen(text);
    }
    size_t n_tok = 0;
    if (!(toks = cli_tokenize(model, text, text_len, !o.no_bos, true, &n_tok))) {
        fprintf(stderr, "triforce: cannot tokenize the prompt\n");
        goto done;
    }
    if (n_tok == 0) {
        fprintf(stderr, "triforce: the prompt is empty (and no BOS token is added)\n");
        goto done;
    }
    uint64_t seed = o.seed >= 0 ? (uint64_t)o.seed : (uint64_t)time(NULL);
    dp.sampling.seed = seed;
    int64_t need = (int64_t)n_tok + o.n_predict + 1;
    if (o.n_ctx > 0) {
        if ((int64_t)n_tok >= o.n_ctx) {
            fprintf(stderr, "triforce: the prompt is %zu tokens, longer than the context of %d (-c); raise -c\n",
                    n_tok, o.n_ctx);
            goto done;
        }
        dp.n_ctx = o.n_ctx;
    } else {
        dp.n_ctx = (int32_t)(need > (1 << 28) ? (1 << 28) : need);
    }
    if (dp.n_ctx > info.n_ctx_train)
        fprintf(stderr, "triforce: warning: context %d is longer than the model's trained context of %d\n", dp.n_ctx,
                info.n_ctx_train);
    fprintf(stderr,
            "triforce generate: model %s (%s, %.1fM params)%s%s, mode %s, prompt %zu tokens, n_predict %d, n_ctx %d, "
            "threads %d, kv %s, temp %.2f, top-k %d, top-p %.2f, min-p %.2f, seed %llu",
            o.model, info.name, (double)info.n_params / 1e6, cli_has_draft(&o) ? ", draft " : "",
            cli_draft_name(&o),
            tf_decode_mode_name(mode), n_tok, o.n_predict, dp.n_ctx, o.n_threads > 0 ? o.n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN), o.kv_type, o.temp, o.top_k,
            o.top_p, o.min_p, (unsigned long long)seed);
    if (mode != TF_MODE_AR)
        fprintf(stderr, ", gamma1 %d, gamma2 %d, budget %d%s, chunk %d, rebuild-stride %d, bypass-accept %g, sinks %d, "
                "window %d", o.gamma1, cli_gamma2(&o), o.budget, o.budget ? "" : " (an eighth of the context)", o.chunk,
                o.rebuild_stride, o.bypass_accept, o.sinks, o.window);
    fprintf(stderr, "\n");
    /* the prompt is echoed as the generated text is written: invalid bytes as U+FFFD */
    utf8_out echo = {0};
    for (size_t at = 0; at < text_len; at += 1 << 20)
        utf8_write(&echo, text + at, (int)(text_len - at < (1u << 20) ? text_len - at : 1u << 20));
    utf8_flush(&echo);
    fflush(stdout);
    if (run_one(&o, model, draft, dp, toks, n_tok, true, &res) != 0) goto done;
    fprintf(stderr,
            "prefill: %zu tokens in %.2f s (%.1f tok/s) | decode: %d tokens in %.2f s (%.1f tok/s, %.2f ms/tok)\n",
            n_tok, res.t_prefill, res.t_prefill > 0 ? (double)n_tok / res.t_prefill : 0.0, res.n, res.t_decode,
            res.t_decode > 0 ? res.n / res.t_decode : 0.0, res.n ? 1e3 * res.t_decode / res.n : 0.0);
    if (mode != TF_MODE_AR) print_levels(&res);
    int identical = -1;
    if (o.compare) {
        dp.mode = TF_MODE_AR;
        if (run_one(&o, model, NULL, dp, toks, n_tok, false, &ar) != 0) goto done;
        double ms_ar = ar.n ? 1e3 * ar.t_decode / ar.n : 0, ms = res.n ? 1e3 * res.t_decode / res.n : 0;
        int same = ar.n == res.n && memcmp(ar.toks, res.toks, sizeof(int32_t) * (size_t)res.n) == 0;
        const bool comparable = cli_text_is_ars(&o);
        if (comparable) identical = same;
        fprintf(stderr, "compare: ar %.2f ms/tok, %s %.2f ms/tok: speedup %.2fx; outputs %s\n", ms_ar,
                tf_decode_mode_name(mode), ms, ms > 0 ? ms_ar / ms : 0.0,
                comparable ? (same ? "identical" : "DIFFERENT")
                           : (same ? "identical (sampled, residual coupling)"
                                   : "differ (sampled, residual coupling: equal in distribution, not token for token)"));
    }
    rc = identical == 0 ? 1 : 0;
    if (stats) {
        if (!write_json(stats, o.stats_json, &o, tf_decode_mode_name(mode), n_tok, &res, o.compare ? &ar : NULL,
                        identical))
            rc = 1;
        stats = NULL;
    }
done:
    if (stats) { /* the run failed before the statistics: no file left (a device such as /dev/stdout stays) */
        struct stat sb;
        fclose(stats);
        if (stat(o.stats_json, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size == 0) remove(o.stats_json);
    }
    free(res.toks);
    free(ar.toks);
    tf_model_close(draft); /* a layer view goes before the model it borrows from */
    tf_model_close(model);
    free(toks);
    free(text);
    return rc;
}
