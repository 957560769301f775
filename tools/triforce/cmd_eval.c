/*
 * cmd_eval.c — `triforce eval accept` and `triforce eval passkey`: the tables
 * that choose TriForce's settings for a model, measured on the model itself.
 *
 * accept: for each context length L, the first L tokens of a text (-f), or
 * without one a passkey prompt of L tokens (the key half-way: the needle
 * task), are prefilled once; every configuration then
 * starts from a copy of that cache (tf_decoder_prefill_from) and decodes -n
 * tokens with the target verifying a middle level that runs the target's
 * weights over a small cache: a retrieval cache (budget B, chunk c) or a
 * StreamingLLM cache of the same B tokens (16 sinks + B - 16 recent). The
 * figure is the middle level's acceptance rate, accepted / (accepted +
 * rejected): each candidate is judged only while all before it were
 * accepted, so this counts judged candidates only.
 *
 * passkey: a haystack of filler sentences with a five-digit number stated at
 * a chosen depth, then a question; greedy decoding must reproduce the number.
 * Accuracy by context length and depth, for each decoding mode asked (all
 * lossless modes give the same text, so the modes differ only in time).
 */
#include "cli.h"
#include "eval_text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EVAL_MAX_LIST CLI_INTS_MAX

typedef struct eval_lists {
    int ctx[EVAL_MAX_LIST], n_ctx;
    int budget[EVAL_MAX_LIST], n_budget;
    int chunk[EVAL_MAX_LIST], n_chunk;
    double depth[EVAL_MAX_LIST];
    int n_depth;
    bool cache_retrieval, cache_streaming;
    const char *format; /* md, json, csv */
} eval_lists;

/* A list flag's values, or the default list when it was not given. */
static void list_or(const cli_ints *given, const int *dflt, int n_dflt, int *out, int *n) {
    if (given->n > 0) {
        memcpy(out, given->v, sizeof(int) * (size_t)given->n);
        *n = given->n;
    } else {
        memcpy(out, dflt, sizeof(int) * (size_t)n_dflt);
        *n = n_dflt;
    }
}

static bool parse_depths(const char *s, double *out, int *n) {
    *n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        double v = strtod(p, &end);
        if (end == p || (*end && *end != ',') || !(v >= 0 && v <= 1) || *n == EVAL_MAX_LIST) {
            fprintf(stderr, "triforce eval: --depths '%s': expected up to %d comma-separated fractions in [0, 1]\n",
                    s, EVAL_MAX_LIST);
            return false;
        }
        out[(*n)++] = v;
        p = *end ? end + 1 : end;
    }
    return *n > 0;
}

static bool parse_lists(const cli_opts *o, eval_lists *l) {
    memset(l, 0, sizeof *l);
    static const int ctx[] = {2048, 4096, 8000}, budget[] = {256, 512, 1024, 2048}, chunk[] = {8};
    list_or(&o->eval_contexts, ctx, 3, l->ctx, &l->n_ctx);
    list_or(&o->eval_budgets, budget, 4, l->budget, &l->n_budget);
    list_or(&o->eval_chunks, chunk, 1, l->chunk, &l->n_chunk);
    if (!parse_depths(o->eval_depths ? o->eval_depths : "0,0.25,0.5,0.75,1", l->depth, &l->n_depth)) return false;
    const char *caches = o->eval_caches ? o->eval_caches : "retrieval,streaming";
    for (const char *p = caches; *p;) {
        size_t n = strcspn(p, ",");
        if (n == 9 && !strncmp(p, "retrieval", 9)) l->cache_retrieval = true;
        else if (n == 9 && !strncmp(p, "streaming", 9)) l->cache_streaming = true;
        else {
            fprintf(stderr, "triforce eval: --caches '%s': expected retrieval and/or streaming, comma-separated\n",
                    caches);
            return false;
        }
        p += n + (p[n] == ',');
    }
    l->format = o->output ? o->output : "md";
    if (strcmp(l->format, "md") && strcmp(l->format, "json") && strcmp(l->format, "csv")) {
        fprintf(stderr, "triforce eval: -o '%s': expected md, json or csv\n", l->format);
        return false;
    }
    return true;
}

/* ---- shared set-up ---- */

typedef struct eval_run {
    const cli_opts *o;
    tf_model *model;
    tf_model_info info;
    const char *format; /* md, json, csv */
    tf_device device;   /* --device (default the CPU) */
} eval_run;

static tf_decoder_params base_params(const eval_run *er, int n_ctx) {
    tf_decoder_params dp = cli_decoder_params(er->o);
    dp.n_ctx = n_ctx;
    dp.device = er->device;
    dp.sampling.seed = er->o->seed >= 0 ? (uint64_t)er->o->seed : 1;
    return dp;
}

typedef struct progress_state {
    cli_progress line;
    const char *what;
} progress_state;

static bool show_prefill(void *ud, uint64_t done, uint64_t total) {
    progress_state *ps = ud;
    if (total >= 1024) cli_progress_show(&ps->line, done, total, "%s: prefill %llu/%llu", ps->what,
                                         (unsigned long long)done, (unsigned long long)total);
    return true;
}

/* Decode n tokens (or until the context is full); *out_toks (if not NULL)
 * receives up to cap of them. Returns false with a message on failure. */
static bool decode_n(tf_decoder *dec, int n, int32_t *out_toks, int cap, int *n_got) {
    int got = 0;
    while (got < n) {
        int32_t buf[64], k;
        tf_status st = tf_decoder_step(dec, buf, 64, &k);
        if (st == TF_ERR_RANGE) break;
        if (st != TF_OK) {
            fprintf(stderr, "triforce eval: %s\n", tf_decoder_error(dec));
            return false;
        }
        for (int i = 0; i < k && got < n; i++, got++)
            if (out_toks && got < cap) out_toks[got] = buf[i];
    }
    *n_got = got;
    return true;
}

/* ---- accept ---- */

/* The passkey prompt tokenized, grown until it is just below ctx tokens;
 * malloc'ed, *n its length; NULL with a message on failure. */
static int32_t *passkey_tokens(const eval_run *er, int ctx, double depth, unsigned key, size_t *n) {
    size_t cap = (size_t)ctx + 64, len;
    int32_t *toks = malloc(sizeof(int32_t) * cap);
    int chars = ctx * 3;
    char *text = NULL;
    *n = 0;
    for (int tries = 0; toks && tries < 12; tries++) {
        free(text);
        text = eval_passkey_prompt(chars, depth, key, &len);
        if (!text || tf_model_tokenize(er->model, text, len, true, false, toks, cap, n) != TF_OK) *n = cap;
        if (*n <= (size_t)ctx && *n + 64 > (size_t)ctx * 31 / 32) break;
        chars = (int)((double)chars * ((double)ctx * 0.98) / (double)(*n ? *n : 1));
    }
    free(text);
    if (toks && *n > (size_t)ctx) { /* the instruction, the key and the question alone are longer */
        size_t least = cap;
        text = eval_passkey_prompt(0, depth, key, &len);
        if (text && tf_model_tokenize(er->model, text, len, true, false, toks, cap, &least) != TF_OK) least = cap;
        free(text);
        fprintf(stderr, "triforce eval: a passkey prompt of at most %d tokens cannot be built: the instruction, the "
                "key and the question alone take %zu%s tokens with this tokenizer\n", ctx, least, least >= cap ? "+" : "");
        free(toks);
        return NULL;
    }
    if (!toks) {
        fprintf(stderr, "triforce eval: out of memory for a passkey prompt of %d tokens\n", ctx);
        free(toks);
        return NULL;
    }
    return toks;
}


typedef struct accept_row {
    int ctx, budget, chunk;
    const char *cache;
    int64_t accepted, rejected, passes, generated;
    double seconds, middle_seconds, target_seconds;
} accept_row;

static void accept_header(const char *fmt) {
    if (!strcmp(fmt, "md")) {
        printf("| context | cache | budget | chunk | acceptance | accepted | rejected | tokens/target pass | "
               "middle ms/pass | target ms/pass |\n");
        printf("|---|---|---|---|---|---|---|---|---|---|\n");
    } else if (!strcmp(fmt, "csv")) {
        printf("context,cache,budget,chunk,acceptance,accepted,rejected,tokens_per_target_pass,middle_ms_per_pass,"
               "target_ms_per_pass,generated\n");
    }
}

static void accept_print(const char *fmt, const char *model, const accept_row *r, const tf_level_info *lv) {
    double acc = r->accepted + r->rejected > 0 ? (double)r->accepted / (double)(r->accepted + r->rejected) : NAN;
    double tpp = r->passes > 0 ? (double)r->generated / (double)r->passes : NAN;
    double mid = lv[1].passes > 0 ? 1e3 * lv[1].seconds / (double)lv[1].passes : NAN;
    double tgt = lv[0].passes > 0 ? 1e3 * lv[0].seconds / (double)lv[0].passes : NAN;
    char chunk[16];
    snprintf(chunk, sizeof chunk, "%d", r->chunk);
    if (!strcmp(fmt, "md"))
        printf("| %d | %s | %d | %s | %.4f | %lld | %lld | %.2f | %.2f | %.2f |\n", r->ctx, r->cache, r->budget,
               r->chunk ? chunk : "-", acc, (long long)r->accepted, (long long)r->rejected, tpp, mid, tgt);
    else if (!strcmp(fmt, "csv"))
        printf("%d,%s,%d,%d,%.4f,%lld,%lld,%.3f,%.3f,%.3f,%lld\n", r->ctx, r->cache, r->budget, r->chunk, acc,
               (long long)r->accepted, (long long)r->rejected, tpp, mid, tgt, (long long)r->generated);
    else
        printf("{\"eval\": \"accept\", \"model\": \"%s\", \"context\": %d, \"cache\": \"%s\", \"budget\": %d, "
               "\"chunk\": %d, \"acceptance\": %.4f, \"accepted\": %lld, \"rejected\": %lld, "
               "\"tokens_per_target_pass\": %.3f, \"middle_ms_per_pass\": %.3f, \"target_ms_per_pass\": %.3f, "
               "\"generated\": %lld}\n",
               model, r->ctx, r->cache, r->budget, r->chunk, acc, (long long)r->accepted, (long long)r->rejected, tpp,
               mid, tgt, (long long)r->generated);
    fflush(stdout);
}

/* One configuration from the prefilled base decoder. */
static bool accept_one(eval_run *er, const tf_decoder *base, int ctx, bool retrieval, int budget, int chunk) {
    const cli_opts *o = er->o;
    tf_decoder_params dp = base_params(er, ctx + o->n_predict + 32);
    if (retrieval) {
        dp.mode = TF_MODE_RETRIEVAL;
        dp.budget = budget;
        dp.chunk = chunk;
    } else {
        dp.mode = TF_MODE_DRAFT;
        dp.sinks = budget >= 64 ? 16 : budget / 4;
        dp.window = budget - dp.sinks;
    }
    char err[1024];
    tf_decoder *dec;
    if (tf_decoder_init(&dec, er->model, retrieval ? NULL : er->model /* the model as its own draft */, &dp, err, sizeof err) != TF_OK) {
        fprintf(stderr, "triforce eval: %s\n", err);
        return false;
    }
    bool ok = tf_decoder_prefill_from(dec, base) == TF_OK;
    if (!ok) fprintf(stderr, "triforce eval: %s\n", tf_decoder_error(dec));
    int got = 0;
    if (ok) ok = decode_n(dec, o->n_predict, NULL, 0, &got);
    if (ok) {
        tf_level_info lv[2];
        tf_decoder_level(dec, 0, &lv[0]);
        tf_decoder_level(dec, 1, &lv[1]);
        accept_row r = {.ctx = ctx, .budget = budget, .chunk = retrieval ? chunk : 0,
                        .cache = retrieval ? "retrieval" : "streaming", .accepted = lv[0].accepted,
                        .rejected = lv[0].rejected, .passes = lv[0].passes, .generated = got};
        accept_print(er->format, o->model, &r, lv);
    }
    tf_decoder_free(dec);
    return ok;
}

/* text_toks: the tokens of -f TEXT (the first L are each context's prompt);
 * NULL: a passkey prompt of L tokens with the key half-way, so the
 * continuation must retrieve it (the needle task). */
static int eval_accept(eval_run *er, const eval_lists *l, const int32_t *text_toks, size_t n_text) {
    const cli_opts *o = er->o;
    accept_header(l->format);
    for (int ci = 0; ci < l->n_ctx; ci++) {
        int ctx = l->ctx[ci];
        if (text_toks && (size_t)ctx > n_text) {
            fprintf(stderr, "triforce eval: the text has %zu tokens; --contexts asks for %d\n", n_text, ctx);
            return 1;
        }
        size_t n_pk = 0;
        int32_t *pk = text_toks ? NULL : passkey_tokens(er, ctx, 0.5, eval_passkey_number((unsigned)ctx), &n_pk);
        if (!text_toks && !pk) return 1;
        const int32_t *toks = text_toks ? text_toks : pk;
        int n_prompt = text_toks ? ctx : (int)n_pk;
        /* the base: retrieval mode, so that its newest query is kept for the copies */
        tf_decoder_params dp = base_params(er, ctx + o->n_predict + 32);
        dp.mode = TF_MODE_RETRIEVAL;
        dp.budget = l->budget[0];
        progress_state ps = {.line = cli_progress_make(NULL), .what = "eval accept"};
        dp.progress = show_prefill;
        dp.progress_user_data = &ps;
        char err[1024];
        tf_decoder *base;
        if (tf_decoder_init(&base, er->model, NULL, &dp, err, sizeof err) != TF_OK) {
            fprintf(stderr, "triforce eval: %s\n", err);
            free(pk);
            return 1;
        }
        if (tf_decoder_prefill(base, toks, n_prompt) != TF_OK) {
            cli_progress_break();
            fprintf(stderr, "triforce eval: %s\n", tf_decoder_error(base));
            tf_decoder_free(base);
            free(pk);
            return 1;
        }
        bool ok = true;
        for (int bi = 0; bi < l->n_budget && ok; bi++) {
            if (l->budget[bi] >= ctx) continue; /* the whole context fits: nothing to choose */
            for (int ki = 0; ki < l->n_chunk && ok && l->cache_retrieval; ki++)
                ok = accept_one(er, base, ctx, true, l->budget[bi], l->chunk[ki]);
            if (ok && l->cache_streaming) ok = accept_one(er, base, ctx, false, l->budget[bi], 0);
        }
        tf_decoder_free(base);
        free(pk);
        if (!ok) return 1;
    }
    return 0;
}

/* ---- passkey ---- */

static int eval_passkey(eval_run *er, const eval_lists *l) {
    const cli_opts *o = er->o;
    const char *fmt = l->format;
    if (!strcmp(fmt, "md")) {
        printf("| context | depth | passkey | answer | correct | prompt tokens |\n|---|---|---|---|---|---|\n");
    } else if (!strcmp(fmt, "csv")) {
        printf("context,depth,passkey,answer,correct,prompt_tokens\n");
    }
    int total = 0, right = 0;
    for (int ci = 0; ci < l->n_ctx; ci++)
        for (int di = 0; di < l->n_depth; di++) {
            int ctx = l->ctx[ci];
            unsigned key = eval_passkey_number((unsigned)(ci * 131 + di * 7 + 1));
            size_t n = 0;
            int32_t *toks = passkey_tokens(er, ctx, l->depth[di], key, &n);
            if (!toks) return 1;
            tf_decoder_params dp = base_params(er, (int)n + 16);
            dp.sampling.temp = 0;
            const char *mode = o->mode ? o->mode : "ar";
            if (!tf_decode_mode_from_name(mode, &dp.mode) || dp.mode == TF_MODE_DRAFT || dp.mode == TF_MODE_TRIFORCE ||
                dp.mode == TF_MODE_STREAMING) {
                fprintf(stderr, "triforce eval passkey: --mode %s: expected ar or retrieval\n", mode);
                free(toks);
                return 2;
            }
            progress_state ps = {.line = cli_progress_make(NULL), .what = "eval passkey"};
            dp.progress = show_prefill;
            dp.progress_user_data = &ps;
            char err[1024];
            tf_decoder *dec;
            int got = 0;
            int32_t out[16];
            bool ok = tf_decoder_init(&dec, er->model, NULL, &dp, err, sizeof err) == TF_OK;
            if (!ok) fprintf(stderr, "triforce eval: %s\n", err);
            if (ok && tf_decoder_prefill(dec, toks, (int32_t)n) != TF_OK) {
                cli_progress_break();
                fprintf(stderr, "triforce eval: %s\n", tf_decoder_error(dec));
                ok = false;
            }
            if (ok) ok = decode_n(dec, 8, out, 16, &got);
            if (dec) tf_decoder_free(dec);
            free(toks);
            if (!ok) return 1;
            char answer[128] = "";
            size_t al = 0;
            for (int i = 0; i < got; i++) {
                char piece[64];
                int32_t k = tf_model_token_to_piece(er->model, out[i], false, piece, (int32_t)sizeof piece);
                for (int j = 0; j < k && al + 1 < sizeof answer; j++) answer[al++] = piece[j];
            }
            answer[al] = 0;
            unsigned got_key = 0;
            int digits = 0;
            for (const char *p = answer; *p && digits < 9; p++)
                if (*p >= '0' && *p <= '9') got_key = got_key * 10 + (unsigned)(*p - '0'), digits++;
                else if (digits) break;
            bool correct = digits == 5 && got_key == key;
            total++;
            right += correct;
            for (char *p = answer; *p; p++)
                if (*p == '\n' || *p == '|' || *p == '"' || *p == ',' || *p == '\\') *p = ' ';
            if (!strcmp(fmt, "md"))
                printf("| %d | %.2f | %05u | %s | %s | %zu |\n", ctx, l->depth[di], key, answer, correct ? "yes" : "no",
                       n);
            else if (!strcmp(fmt, "csv"))
                printf("%d,%.2f,%05u,%s,%d,%zu\n", ctx, l->depth[di], key, answer, correct, n);
            else
                printf("{\"eval\": \"passkey\", \"model\": \"%s\", \"context\": %d, \"depth\": %.2f, \"passkey\": "
                       "\"%05u\", \"answer\": \"%s\", \"correct\": %s, \"prompt_tokens\": %zu}\n",
                       o->model, ctx, l->depth[di], key, answer, correct ? "true" : "false", n);
            fflush(stdout);
        }
    fprintf(stderr, "eval passkey: %d of %d correct\n", right, total);
    return 0;
}

static const char *k_usage = "accept|passkey -m MODEL [-f TEXT] [options]";

int cmd_eval(int argc, char **argv) {
    cli_opts o;
    int r = cli_parse(&o, CMD_EVAL, "eval", k_usage, 1, argc, argv);
    if (r) return r > 0 ? 0 : 2;
    if (o.n_pos != 1 || (strcmp(o.pos[0], "accept") && strcmp(o.pos[0], "passkey"))) {
        fprintf(stderr, "triforce eval: expected a task, accept or passkey (see --help)\n");
        return 2;
    }
    if (!o.model) {
        fprintf(stderr, "triforce eval: -m MODEL is required (see --help)\n");
        return 2;
    }
    eval_lists l;
    if (!parse_lists(&o, &l)) return 2;
    bool temp_given = false; /* eval measures greedy decoding unless --temp says otherwise */
    for (int i = 0; i < argc; i++) temp_given |= !strncmp(argv[i], "--temp", 6);
    if (!temp_given) o.temp = 0;
    tf_device device = TF_DEVICE_CPU; /* reproducible figures unless asked */
    if (o.device && !tf_device_from_name(o.device, &device)) {
        fprintf(stderr, "triforce eval: --device '%s': expected cuda, cpu or auto\n", o.device);
        return 2;
    }
    tf_decoder_params dp = cli_decoder_params(&o);
    dp.mode = TF_MODE_RETRIEVAL;
    dp.device = device;
    if (!cli_check_decoder_params("eval", &dp)) return 2;
    tf_model_params mp = tf_model_default_params();
    mp.log_fn = cli_log;
    mp.log_level = TF_LOG_WARN;
    char err[1024];
    eval_run er = {.o = &o, .format = l.format, .device = device};
    if (tf_model_load_file(&er.model, o.model, &mp, err, sizeof err) != TF_OK) {
        fprintf(stderr, "triforce: %s\n", err);
        return 1;
    }
    if (!cli_extend_context("eval", &o, er.model)) {
        tf_model_close(er.model);
        return 1;
    }
    tf_model_get_info(er.model, &er.info);
    int rc = 1;
    if (!strcmp(o.pos[0], "passkey")) {
        rc = eval_passkey(&er, &l);
    } else {
        size_t len = 0, n = 0;
        char *text = o.file ? cli_read_text(o.file, &len) : NULL;
        int32_t *toks = text ? cli_tokenize(er.model, text, len, true, false, &n) : NULL;
        if (o.file && !toks)
            fprintf(stderr, "triforce eval: cannot read or tokenize %s\n", o.file);
        else
            rc = eval_accept(&er, &l, toks, n);
        free(toks);
        free(text);
    }
    tf_model_close(er.model);
    return rc;
}
