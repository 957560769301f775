/* cmd_generate.c — `triforce generate`: prefill a prompt, stream a continuation. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct progress_state {
    double t0;
    bool shown;
} progress_state;

static bool show_progress(void *ud, uint64_t done, uint64_t total) {
    progress_state *ps = ud;
    if (total < 2048) return true;
    double el = cli_now() - ps->t0;
    fprintf(stderr, "\rprefill: %llu/%llu tokens (%.0f%%, %.0f tok/s)", (unsigned long long)done,
            (unsigned long long)total, 100.0 * (double)done / (double)total, el > 0 ? (double)done / el : 0.0);
    if (done == total) fprintf(stderr, "\n");
    ps->shown = true;
    return true;
}

/* Writes bytes to stdout, holding back an incomplete UTF-8 sequence at the
 * end until the next piece completes it, so the stream is valid UTF-8 at every
 * flush. Invalid bytes are written as U+FFFD. */
typedef struct utf8_out {
    unsigned char held[4];
    int n_held;
} utf8_out;

static int utf8_len(unsigned char c) {
    return c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
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

static bool load_progress(void *ud, uint64_t done, uint64_t total) {
    (void)ud;
    if (total < (256u << 20)) return true; /* small models load instantly */
    fprintf(stderr, "\rloading: %.0f of %.0f MiB", (double)done / (1 << 20), (double)total / (1 << 20));
    if (done == total) fprintf(stderr, "\n");
    return true;
}

static const char *k_usage = "-m MODEL (-p TEXT | -f FILE) [options]";

int cmd_generate(int argc, char **argv) {
    cli_opts o;
    int r = cli_parse(&o, CMD_GENERATE, "generate", k_usage, 0, argc, argv);
    if (r) return r > 0 ? 0 : 2;
    if (!o.model) {
        fprintf(stderr, "triforce generate: -m MODEL is required (see --help)\n");
        return 2;
    }
    size_t text_len;
    char *text = cli_prompt_text(&o, &text_len);
    if (!text) return 2;
    tf_model_params mp = tf_model_default_params();
    mp.log_fn = cli_log;
    mp.log_level = o.verbose ? TF_LOG_DEBUG : TF_LOG_WARN;
    mp.progress = load_progress;
    char err[1024];
    tf_model *model;
    if (tf_model_load_file(&model, o.model, &mp, err, sizeof err) != TF_OK) {
        fprintf(stderr, "triforce: %s\n", err);
        free(text);
        return 1;
    }
    tf_model_info info;
    tf_model_get_info(model, &info);
    int rc = 1;
    tf_context *ctx = NULL;
    tf_sampler *smp = NULL;
    int32_t *toks = NULL;
    if (!info.has_tokenizer) {
        fprintf(stderr, "triforce: %s has no tokenizer; generate needs one\n", o.model);
        goto done;
    }
    size_t n_tok = 0, cap = text_len + 16;
    toks = malloc(sizeof(int32_t) * cap);
    if (!toks || tf_model_tokenize(model, text, text_len, !o.no_bos, true, toks, cap, &n_tok) != TF_OK) {
        fprintf(stderr, "triforce: cannot tokenize the prompt\n");
        goto done;
    }
    if (n_tok == 0) {
        fprintf(stderr, "triforce: the prompt is empty (and no BOS token is added)\n");
        goto done;
    }
    tf_context_params cp = tf_context_default_params();
    cp.n_threads = o.n_threads;
    cp.n_batch = o.n_batch;
    cp.kv_type = strcmp(o.kv_type, "f32") == 0 ? TF_KV_F32 : TF_KV_F16;
    cp.isa = o.isa;
    int64_t need = (int64_t)n_tok + o.n_predict;
    if (o.n_ctx > 0) {
        if ((int64_t)n_tok >= o.n_ctx) {
            fprintf(stderr, "triforce: the prompt is %zu tokens, longer than the context of %d (-c); raise -c\n",
                    n_tok, o.n_ctx);
            goto done;
        }
        cp.n_ctx = o.n_ctx;
    } else {
        cp.n_ctx = (int32_t)(need > (1 << 28) ? (1 << 28) : need);
    }
    if (cp.n_ctx > info.n_ctx_train)
        fprintf(stderr, "triforce: warning: context %d is longer than the model's trained context of %d\n", cp.n_ctx,
                info.n_ctx_train);
    progress_state ps = {0};
    cp.progress = show_progress;
    cp.progress_user_data = &ps;
    if (tf_context_init(&ctx, model, &cp, err, sizeof err) != TF_OK) {
        fprintf(stderr, "triforce: %s\n", err);
        goto done;
    }
    uint64_t seed = o.seed >= 0 ? (uint64_t)o.seed : (uint64_t)time(NULL);
    tf_sampler_params sp = {.temp = o.temp, .top_k = o.top_k, .top_p = o.top_p, .min_p = o.min_p, .seed = seed};
    if (tf_sampler_init(&smp, model, &sp, err, sizeof err) != TF_OK) {
        fprintf(stderr, "triforce: %s\n", err);
        goto done;
    }
    fprintf(stderr,
            "triforce generate: model %s (%s, %.1fM params), prompt %zu tokens, n_predict %d, n_ctx %d, "
            "threads %d, batch %d, kv %s, temp %.2f, top-k %d, top-p %.2f, min-p %.2f, seed %llu\n",
            o.model, info.name, (double)info.n_params / 1e6, n_tok, o.n_predict, cp.n_ctx,
            o.n_threads ? o.n_threads : 0, cp.n_batch, o.kv_type, o.temp, o.top_k, o.top_p, o.min_p,
            (unsigned long long)seed);
    /* echo the prompt, then stream the continuation */
    fwrite(text, 1, text_len, stdout);
    fflush(stdout);
    ps.t0 = cli_now();
    double t0 = ps.t0;
    if (tf_context_eval(ctx, toks, (int32_t)n_tok, NULL) != TF_OK) {
        fprintf(stderr, "\ntriforce: %s\n", tf_context_error(ctx));
        goto done;
    }
    double t1 = cli_now();
    utf8_out out = {0};
    int n_gen = 0, n_eval = 0;
    double t_decode = 0;
    const float *logits = tf_context_logits(ctx);
    while (n_gen < o.n_predict) {
        int32_t tok = tf_sampler_sample(smp, logits);
        n_gen++;
        if (!o.ignore_eos && tf_model_is_eog(model, tok)) break;
        char piece[256];
        int32_t np = tf_model_token_to_piece(model, tok, false, piece, sizeof piece);
        if (np > (int32_t)sizeof piece) np = 0; /* absurdly long piece: skip rather than truncate mid-UTF-8 */
        utf8_write(&out, piece, np > 0 ? np : 0);
        if (n_gen >= o.n_predict) break;
        if (tf_context_n_past(ctx) >= tf_context_n_ctx(ctx)) {
            fprintf(stderr, "\ntriforce: context full after %d tokens (raise -c)\n", tf_context_n_past(ctx));
            break;
        }
        double ta = cli_now();
        if (tf_context_eval(ctx, &tok, 1, NULL) != TF_OK) {
            fprintf(stderr, "\ntriforce: %s\n", tf_context_error(ctx));
            goto done;
        }
        t_decode += cli_now() - ta;
        n_eval++;
        logits = tf_context_logits(ctx);
    }
    utf8_flush(&out);
    printf("\n");
    fflush(stdout);
    double tp = t1 - t0;
    fprintf(stderr, "prefill: %zu tokens in %.2f s (%.1f tok/s) | decode: %d tokens in %.2f s (%.1f tok/s, %.2f ms/tok)\n",
            n_tok, tp, tp > 0 ? (double)n_tok / tp : 0.0, n_eval, t_decode,
            t_decode > 0 ? n_eval / t_decode : 0.0, n_eval ? 1e3 * t_decode / n_eval : 0.0);
    rc = 0;
done:
    tf_sampler_free(smp);
    tf_context_free(ctx);
    tf_model_close(model);
    free(toks);
    free(text);
    return rc;
}
