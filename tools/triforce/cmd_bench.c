/*
 * cmd_bench.c — `triforce bench`: llama-bench-style measurements of a model on
 * this machine, each beside its bound at the read bandwidth measured in the
 * same run (tools/triforce/membw.c):
 *
 *   prefill  tok/s and GFLOP/s of each -p prompt size into an empty cache;
 *   pass     ms of one target forward pass of k rows (--rows) over a cache of
 *            `depth` tokens (-d), the cache filled with random keys and values
 *            (tf_context_fill_random: a pass costs the same whatever they hold);
 *   decode   ms/token of each --mode after prefilling `depth` tokens of the
 *            text (once per depth: every mode and repetition starts from a
 *            copy of those caches, tf_decoder_prefill_from), -n tokens
 *            generated greedily; speculative modes add their
 *            speedup over ar (same run, modes interleaved over the -r
 *            repetitions), acceptance and time per pass at each level, tokens
 *            per target pass, and whether the output equals ar's. With
 *            --fill random (mode ar only) the cache is filled with random
 *            keys and values up to each depth instead (as for the pass
 *            tests), and the rows say so ("random K/V").
 *
 * Rows go to stdout as they finish (bench_report.c); the configuration and
 * progress go to stderr. Everything runs on --device (default the CPU). The
 * bounds use the host read bandwidth probed first, or the bandwidth --bw-gbs
 * gives (a device's, measured by the caller in the same run); a cuda run
 * without --bw-gbs reports no bounds.
 */
#include "bench_report.h"
#include "bench_text.h"
#include "cli.h"
#include "membw.h"
#include "bench_floor.h"
#include "peak.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *k_usage =
    "-m MODEL [-md DRAFT | --draft-layers K | --draft-lookup N] [-f TEXT] [-p N,..] [-n N] [-d N,..] [--rows K,..] [--mode M,..] "
    "[-r N] [-o md|json|csv] [options]\n\n"
    "Measures, after a read-bandwidth probe (--bw-mib) and a compute-peak probe (int8 vpdpbusd, bf16 vdpbf16ps\n"
    "and f32 FMA operations a second; on the CPU): prefill tok/s and GFLOP/s for each -p; the time of one target pass\n"
    "of k rows for each --rows at each depth -d, over a cache of random keys and values, next to its compute floor\n"
    "(its multiply-adds at those peaks) as well as its bytes floor; decode ms/token for each\n"
    "--mode at each depth (the first max(depth, 1) tokens of the text prefilled, then -n tokens generated greedily,\n"
    "or sampled with --temp T [--top-k --top-p --min-p -s], the modes interleaved over the -r repetitions), with\n"
    "the speedup over ar, acceptance and time per pass of each level and whether the greedy output equals ar's; --fill random: ar only, after a cache of random keys and values\n"
    "instead of a prefill. Each value comes with its bound at the measured bandwidth (or at --bw-gbs).\n"
    "Results on stdout (-o), progress on stderr; everything runs on --device (default cpu).";

/* Prefill progress lines for prompts of this many tokens or more. */
#define BENCH_PROGRESS_MIN 2048

/* What the bounds need to know about the model. */
typedef struct bench_model {
    const tf_model *m, *draft;
    tf_model_info info;
    double w_bytes;    /* bytes a pass reads of the weights (an untied embedding table is gathered, not read) */
    double kv_per_tok; /* KV-cache bytes per token */
    double bw;         /* measured read bandwidth, bytes/s (NAN: no bounds) */
    tf_device device;  /* where contexts and decoders run */
    bench_compute cr;  /* the multiply-add rates of a pass's kernels (the compute floor; CPU only) */
} bench_model;

/* ---- prefill ---- */

typedef struct prefill_progress {
    cli_progress line;
    double t0;
    int rep, reps;
} prefill_progress;

static bool show_prefill(void *ud, uint64_t done, uint64_t total) {
    prefill_progress *pp = ud;
    if (total < BENCH_PROGRESS_MIN) return true;
    double el = cli_now() - pp->t0;
    cli_progress_show(&pp->line, done, total, "%s, repetition %d/%d: prefill %llu/%llu tokens (%.0f tok/s)",
                      pp->line.label, pp->rep + 1, pp->reps, (unsigned long long)done, (unsigned long long)total,
                      el > 0 ? (double)done / el : 0.0);
    return true;
}

static tf_context_params context_params(const cli_opts *o, tf_device dev) {
    tf_context_params cp = tf_context_default_params();
    cp.n_threads = o->n_threads;
    cp.n_batch = cli_batch(o, dev);
    cp.kv_type = cli_kv_type(o);
    cp.isa = o->isa;
    return cp;
}

static int run_prefill(const cli_opts *o, const bench_model *bm, const bench_tokens *t, bench_report *rep) {
    const tf_model_info *in = &bm->info;
    for (int i = 0; i < o->bench_prompt.n; i++) {
        const int p = o->bench_prompt.v[i];
        if (p == 0) continue;
        char label[64], err[1024];
        snprintf(label, sizeof label, "bench: pp%d", p);
        fprintf(stderr, "%s\n", label);
        prefill_progress pp = {.reps = o->reps};
        tf_context_params cp = context_params(o, bm->device);
        cp.n_ctx = p;
        cp.progress = show_prefill;
        cp.progress_user_data = &pp;
        tf_context *ctx;
        if (tf_context_init_on(&ctx, bm->m, &cp, bm->device, err, sizeof err) != TF_OK) {
            fprintf(stderr, "triforce bench: -p %d: %s\n", p, err);
            return 1;
        }
        double *tps = malloc(sizeof(double) * (size_t)o->reps);
        for (int r = 0; r < o->reps; r++) {
            tf_context_truncate(ctx, 0);
            pp.line = cli_progress_make(label);
            pp.rep = r;
            pp.t0 = cli_now();
            if (tf_context_eval(ctx, t->ids, p, NULL) != TF_OK) {
                cli_progress_break();
                fprintf(stderr, "triforce bench: -p %d: %s\n", p, tf_context_error(ctx));
                free(tps);
                tf_context_free(ctx);
                return 1;
            }
            tps[r] = p / (cli_now() - pp.t0);
        }
        const int nb = cli_batch(o, bm->device), n_batch = nb < p ? nb : p;
        /* FLOPs: matrix products of every layer, the logits of the last token, causal attention (QK and PV) */
        double layer_params = (double)in->n_embd * in->head_dim * (2.0 * in->n_head + 2.0 * in->n_head_kv) +
                              3.0 * in->n_embd * in->n_ff;
        double flops = 2.0 * p * in->n_layer * layer_params + 2.0 * in->n_embd * in->n_vocab +
                       4.0 * in->n_layer * in->n_head * in->head_dim * ((double)p * (p + 1) / 2.0);
        /* bytes: the weights once per batch, the KV cache written once and read by every batch */
        int n_b = (p + n_batch - 1) / n_batch;
        double kv_read = 0;
        for (int b = 1; b <= n_b; b++) kv_read += b * n_batch < p ? b * n_batch : p;
        double bytes = n_b * bm->w_bytes + bm->kv_per_tok * (p + kv_read);
        bench_row row = bench_row_make(BENCH_PREFILL, "", 0, p, o->reps, "tok/s");
        row.value = bench_spread_of(tps, o->reps);
        row.gflops = flops * row.value.med / p / 1e9;
        row.bound = p / (bytes / bm->bw);
        row.pct_of_bound = 100.0 * row.value.med / row.bound;
        row.fill = t->fill;
        bench_report_row(rep, &row);
        free(tps);
        tf_context_free(ctx);
    }
    return 0;
}

/* ---- k-row passes over a random cache ---- */

/* The seed of sampled decode tests: -s, or 1 (bench's default, reproducible). */
static long long bench_seed(const cli_opts *o) { return o->seed >= 0 ? (long long)o->seed : 1; }

static int run_passes(const cli_opts *o, const bench_model *bm, const bench_tokens *t, bench_report *rep) {
    int max_rows = 0, max_depth = 0;
    for (int i = 0; i < o->rows.n; i++) max_rows = o->rows.v[i] > max_rows ? o->rows.v[i] : max_rows;
    for (int i = 0; i < o->depths.n; i++) max_depth = o->depths.v[i] > max_depth ? o->depths.v[i] : max_depth;
    if (max_rows == 0) return 0;
    char err[1024];
    tf_context_params cp = context_params(o, bm->device);
    cp.n_ctx = max_depth + max_rows;
    cp.n_batch = max_rows;
    cp.logits_all = true; /* a verification pass computes the logits of every row */
    tf_context *ctx;
    if (tf_context_init_on(&ctx, bm->m, &cp, bm->device, err, sizeof err) != TF_OK) {
        fprintf(stderr, "triforce bench: --rows / -d: %s\n", err);
        return 1;
    }
    double *ms = malloc(sizeof(double) * (size_t)o->reps);
    int rc = 0;
    for (int di = 0; di < o->depths.n && rc == 0; di++) {
        const int d = o->depths.v[di];
        fprintf(stderr, "bench: passes at depth %d (a cache of random keys and values)\n", d);
        if (tf_context_fill_random(ctx, d, 1) != TF_OK) {
            fprintf(stderr, "triforce bench: -d %d: %s\n", d, tf_context_error(ctx));
            rc = 1;
            break;
        }
        for (int ri = 0; ri < o->rows.n && rc == 0; ri++) {
            const int k = o->rows.v[ri];
            if (k == 0) continue;
            for (int r = -1; r < o->reps; r++) { /* one warm-up */
                tf_context_truncate(ctx, d);
                double t0 = cli_now();
                if (tf_context_eval(ctx, t->ids, k, NULL) != TF_OK) {
                    fprintf(stderr, "triforce bench: --rows %d at -d %d: %s\n", k, d, tf_context_error(ctx));
                    rc = 1;
                    break;
                }
                if (r >= 0) ms[r] = 1e3 * (cli_now() - t0);
            }
            if (rc) break;
            bench_row row = bench_row_make(BENCH_PASS, "", d, k, o->reps, "ms");
            row.value = bench_spread_of(ms, o->reps);
            row.bound = 1e3 * (bm->w_bytes + bm->kv_per_tok * (d + k)) / bm->bw;
            row.compute_bound = bench_pass_compute_ms(&bm->cr, &bm->info, d, k);
            /* against the larger floor: the bytes, or the arithmetic of many rows */
            row.pct_of_bound = 100.0 * fmax(row.bound, row.compute_bound) / row.value.med; /* fmax skips a NaN */
            row.fill = "random";
            bench_report_row(rep, &row);
        }
    }
    free(ms);
    tf_context_free(ctx);
    return rc;
}

/* ---- decoding ---- */

/* One generation: the time and tokens of -n greedy tokens after a prefill. */
typedef struct dec_run {
    double seconds;
    int n;          /* tokens emitted (a last step may pass n_gen) */
    int32_t *toks;  /* the first n_gen of them */
    int n_levels;
    tf_level_info lv[BENCH_MAX_LEVELS];
} dec_run;

/* base: a decoder holding the prompt already (prefilled once per depth); its
 * caches are copied instead of prefilling again. NULL: prefill here. */
static int decode_once(const bench_model *bm, tf_decoder_params dp, const bench_tokens *t, int n_prompt,
                       int n_gen, prefill_progress *pp, const tf_decoder *base, dec_run *out) {
    char err[1024];
    tf_decoder *dec;
    const bool needs_draft = dp.mode == TF_MODE_DRAFT || dp.mode == TF_MODE_STREAMING || dp.mode == TF_MODE_TRIFORCE;
    dp.n_ctx = n_prompt + n_gen + 64; /* a last step emits at most gamma2 + 1 past n_gen */
    dp.progress = show_prefill;
    dp.progress_user_data = pp;
    if (tf_decoder_init(&dec, bm->m, needs_draft ? bm->draft : NULL, &dp, err, sizeof err) != TF_OK) {
        fprintf(stderr, "triforce bench: --mode %s: %s\n", tf_decode_mode_name(dp.mode), err);
        return 1;
    }
    pp->t0 = cli_now();
    if ((base ? tf_decoder_prefill_from(dec, base) : tf_decoder_prefill(dec, t->ids, n_prompt)) != TF_OK) {
        cli_progress_break();
        fprintf(stderr, "triforce bench: --mode %s at -d %d: %s\n", tf_decode_mode_name(dp.mode), n_prompt,
                tf_decoder_error(dec));
        tf_decoder_free(dec);
        return 1;
    }
    out->n = 0;
    double t0 = cli_now();
    while (out->n < n_gen) {
        int32_t buf[64], k;
        if (tf_decoder_step(dec, buf, 64, &k) != TF_OK) {
            fprintf(stderr, "triforce bench: --mode %s: %s\n", tf_decode_mode_name(dp.mode), tf_decoder_error(dec));
            tf_decoder_free(dec);
            return 1;
        }
        for (int32_t i = 0; i < k; i++, out->n++)
            if (out->n < n_gen) out->toks[out->n] = buf[i];
    }
    out->seconds = cli_now() - t0;
    out->n_levels = tf_decoder_n_levels(dec);
    if (out->n_levels > BENCH_MAX_LEVELS) out->n_levels = BENCH_MAX_LEVELS;
    for (int i = 0; i < out->n_levels; i++) tf_decoder_level(dec, i, &out->lv[i]);
    tf_decoder_free(dec);
    return 0;
}

/* The row of mode `mi` at depth d from its repetitions (and ar's, ar >= 0). */
static bench_row decode_row(const cli_opts *o, const bench_model *bm, const tf_decode_mode *modes, int mi, int ar,
                            int d, dec_run *const *runs, const bench_tokens *t) {
    const int reps = o->reps, n_gen = o->n_predict;
    bench_row row = bench_row_make(BENCH_DECODE, tf_decode_mode_name(modes[mi]), d, n_gen, reps, "ms/tok");
    double ms[1000], sp[1000];
    for (int r = 0; r < reps; r++) ms[r] = 1e3 * runs[mi][r].seconds / runs[mi][r].n;
    if (ar >= 0 && ar != mi) {
        row.same_as_ar = cli_text_is_ars(o) ? 1 : -1; /* sampled under the residual coupling: not compared */
        for (int r = 0; r < reps; r++) {
            sp[r] = (1e3 * runs[ar][r].seconds / runs[ar][r].n) / ms[r];
            if (row.same_as_ar == 1 && memcmp(runs[ar][r].toks, runs[mi][r].toks, sizeof(int32_t) * (size_t)n_gen) != 0)
                row.same_as_ar = 0;
        }
        row.speedup = bench_spread_of(sp, reps);
    }
    row.value = bench_spread_of(ms, reps);
    row.tok_s = 1e3 / row.value.med;
    const double mean_ctx = (d > 0 ? d : 1) + n_gen / 2.0;
    row.bound = 1e3 * (bm->w_bytes + bm->kv_per_tok * mean_ctx) / bm->bw;
    row.pct_of_bound = 100.0 * row.bound / row.value.med;
    row.fill = t->fill;
    /* levels, summed over the repetitions */
    int64_t emitted = 0;
    for (int r = 0; r < reps; r++) emitted += runs[mi][r].n;
    row.n_levels = runs[mi][0].n_levels;
    for (int l = 0; l < row.n_levels; l++) {
        int64_t passes = 0, rejected = 0, accepted = 0;
        double sec = 0;
        for (int r = 0; r < reps; r++) {
            const tf_level_info *L = &runs[mi][r].lv[l];
            passes += L->passes, rejected += L->rejected, accepted += L->accepted, sec += L->seconds;
        }
        bench_level *B = &row.lv[l];
        B->name = runs[mi][0].lv[l].name;
        B->cache = runs[mi][0].lv[l].cache;
        /* per-candidate rate: a candidate is judged only while all before it were accepted */
        B->accept = accepted + rejected > 0 ? (double)accepted / (double)(accepted + rejected) : NAN;
        B->ms_per_pass = passes > 0 ? 1e3 * sec / (double)passes : NAN;
        B->passes_per_tok = (double)passes / (double)emitted;
        if (l == 0 && passes > 0) row.tok_per_pass = (double)emitted / (double)passes;
    }
    return row;
}

static int run_decode(const cli_opts *o, const bench_model *bm, const tf_decode_mode *modes, int n_modes,
                      const bench_tokens *t, bench_report *rep) {
    if (o->n_predict == 0) return 0;
    const int reps = o->reps;
    tf_decoder_params dp = cli_decoder_params(o);
    dp.device = bm->device;
    if (o->temp > 0) /* sampled: every mode and repetition from the same seed */
        dp.sampling.seed = (uint64_t)bench_seed(o);
    else
        dp.sampling = (tf_sampler_params){.temp = 0, .top_k = 0, .top_p = 1, .min_p = 0, .seed = 1};
    int ar = -1;
    for (int i = 0; i < n_modes; i++)
        if (modes[i] == TF_MODE_AR) ar = i;
    dec_run *runs[5] = {0};
    int rc = 0;
    for (int i = 0; i < n_modes && rc == 0; i++) {
        runs[i] = calloc((size_t)reps, sizeof(dec_run));
        if (!runs[i]) rc = 1;
        for (int r = 0; r < reps && rc == 0; r++)
            if (!(runs[i][r].toks = malloc(sizeof(int32_t) * (size_t)o->n_predict))) rc = 1;
    }
    if (rc) fprintf(stderr, "triforce bench: out of memory\n");
    /* a warm-up of every mode on a short prompt: first-use costs (page faults of scratch, code) stay out */
    for (int mi = 0; mi < n_modes && rc == 0; mi++) {
        prefill_progress pp = {.line = cli_progress_make("bench: warm-up"), .reps = 1};
        dp.mode = modes[mi];
        int n_warm = o->n_predict < 8 ? o->n_predict : 8;
        rc = decode_once(bm, dp, t, t->n < 16 ? (int)t->n : 16, n_warm, &pp, NULL, &runs[mi][0]);
    }
    for (int di = 0; di < o->depths.n && rc == 0; di++) {
        const int d = o->depths.v[di], n_prompt = d > 0 ? d : 1;
        /* the depth is prefilled once, by a retrieval-mode decoder (it keeps the newest query that
         * retrieval levels start from); every mode and repetition starts from a copy of its caches */
        tf_decoder *base = NULL;
        {
            char err[1024], label[96];
            tf_decoder_params bp = dp;
            bp.mode = TF_MODE_RETRIEVAL;
            bp.n_ctx = n_prompt + o->n_predict + 64;
            snprintf(label, sizeof label, "bench: d%d", d);
            prefill_progress pp = {.line = cli_progress_make(label), .reps = 1};
            bp.progress = show_prefill;
            bp.progress_user_data = &pp;
            pp.t0 = cli_now();
            if (tf_decoder_init(&base, bm->m, NULL, &bp, err, sizeof err) != TF_OK) {
                fprintf(stderr, "triforce bench: %s\n", err);
                rc = 1;
            } else if (tf_decoder_prefill(base, t->ids, n_prompt) != TF_OK) {
                cli_progress_break();
                fprintf(stderr, "triforce bench: -d %d: %s\n", d, tf_decoder_error(base));
                rc = 1;
            }
        }
        /* modes interleaved, each repetition starting one mode further, so drift reaches every mode alike */
        for (int r = 0; r < reps && rc == 0; r++)
            for (int j = 0; j < n_modes && rc == 0; j++) {
                const int mi = (j + r) % n_modes;
                char label[96];
                snprintf(label, sizeof label, "bench: tg%d @ d%d, %s", o->n_predict, d, tf_decode_mode_name(modes[mi]));
                if (n_prompt < BENCH_PROGRESS_MIN) fprintf(stderr, "%s, repetition %d/%d\n", label, r + 1, reps);
                prefill_progress pp = {.line = cli_progress_make(label), .rep = r, .reps = reps};
                dp.mode = modes[mi];
                rc = decode_once(bm, dp, t, n_prompt, o->n_predict, &pp, base, &runs[mi][r]);
            }
        tf_decoder_free(base);
        for (int mi = 0; mi < n_modes && rc == 0; mi++) {
            bench_row row = decode_row(o, bm, modes, mi, ar, d, runs, t);
            bench_report_row(rep, &row);
        }
    }
    for (int i = 0; i < n_modes; i++) {
        for (int r = 0; runs[i] && r < reps; r++) free(runs[i][r].toks);
        free(runs[i]);
    }
    return rc;
}

/* ---- decoding over a cache of random keys and values (--fill random) ---- */

/* The greedy token: the first index of the largest logit. */
static int32_t argmax(const float *x, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* ar's decode tests with each depth filled by tf_context_fill_random instead
 * of a prefill (a token's cost does not depend on what the cache holds, and a
 * prefill of 100K tokens takes hours on a CPU): -n greedy tokens, one forward
 * pass of one row each, as ar decodes. The rows carry fill "random K/V". */
static int run_decode_random(const cli_opts *o, const bench_model *bm, const bench_tokens *t, bench_report *rep) {
    const int n_gen = o->n_predict, reps = o->reps;
    if (n_gen == 0) return 0;
    int max_depth = 16; /* the warm-up's */
    for (int i = 0; i < o->depths.n; i++) max_depth = o->depths.v[i] > max_depth ? o->depths.v[i] : max_depth;
    char err[1024];
    tf_context_params cp = context_params(o, bm->device);
    cp.n_ctx = max_depth + n_gen;
    tf_context *ctx;
    if (tf_context_init_on(&ctx, bm->m, &cp, bm->device, err, sizeof err) != TF_OK) {
        fprintf(stderr, "triforce bench: --fill random: %s\n", err);
        return 1;
    }
    double *ms = malloc(sizeof(double) * (size_t)reps);
    int rc = ms ? 0 : 1;
    if (!ms) fprintf(stderr, "triforce bench: out of memory\n");
    /* di == -1: a warm-up of 8 tokens at depth 16 (first-use costs stay out); then every depth's repetitions */
    for (int di = -1; di < o->depths.n && rc == 0; di++) {
        const int d = di < 0 ? 16 : o->depths.v[di];
        if (di >= 0) fprintf(stderr, "bench: tg%d @ d%d, ar, ctx filled with random K/V\n", n_gen, d);
        if (tf_context_fill_random(ctx, d, 1) != TF_OK) {
            fprintf(stderr, "triforce bench: -d %d: %s\n", d, tf_context_error(ctx));
            rc = 1;
            break;
        }
        for (int r = 0; r < (di < 0 ? 1 : reps) && rc == 0; r++) {
            tf_context_truncate(ctx, d);
            int32_t tok = t->ids[d < t->n ? d : t->n - 1];
            const int n = di < 0 ? (n_gen < 8 ? n_gen : 8) : n_gen;
            double t0 = cli_now();
            for (int i = 0; i < n; i++) {
                if (tf_context_eval(ctx, &tok, 1, NULL) != TF_OK) {
                    fprintf(stderr, "triforce bench: tg%d @ d%d: %s\n", n_gen, d, tf_context_error(ctx));
                    rc = 1;
                    break;
                }
                tok = argmax(tf_context_logits(ctx), bm->info.n_vocab);
            }
            if (di >= 0) ms[r] = 1e3 * (cli_now() - t0) / n;
        }
        if (rc || di < 0) continue;
        bench_row row = bench_row_make(BENCH_DECODE, "ar", d, n_gen, reps, "ms/tok");
        row.value = bench_spread_of(ms, reps);
        row.tok_s = 1e3 / row.value.med;
        row.bound = 1e3 * (bm->w_bytes + bm->kv_per_tok * ((d > 0 ? d : 1) + n_gen / 2.0)) / bm->bw;
        row.pct_of_bound = 100.0 * row.bound / row.value.med;
        row.fill = BENCH_FILL_RANDOM_KV;
        row.tok_per_pass = 1;
        row.n_levels = 1;
        row.lv[0] = (bench_level){.name = "target", .cache = "full", .accept = NAN, .ms_per_pass = row.value.med,
                                  .passes_per_tok = 1};
        bench_report_row(rep, &row);
    }
    free(ms);
    tf_context_free(ctx);
    return rc;
}

/* ---- options ---- */

/* "ar,retrieval" into modes (no repeats). The count, or -1 with a message. */
static int parse_modes(const char *s, tf_decode_mode *modes, int cap) {
    int n = 0;
    const char *p = s;
    for (;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char name[32];
        tf_decode_mode m;
        if (len == 0 || len >= sizeof name) goto bad;
        memcpy(name, p, len);
        name[len] = '\0';
        if (!tf_decode_mode_from_name(name, &m)) goto bad;
        bool seen = false;
        for (int i = 0; i < n; i++) seen = seen || modes[i] == m;
        if (!seen) {
            if (n == cap) goto bad;
            modes[n++] = m;
        }
        if (!e) return n;
        p = e + 1;
    }
bad:
    fprintf(stderr, "triforce bench: --mode '%s': expected a comma-separated list of ar, draft, retrieval, streaming, "
                    "triforce\n", s);
    return -1;
}

static bool load_progress(void *ud, uint64_t done, uint64_t total) {
    if (total < (256u << 20)) return true;
    cli_progress_show(ud, done, total, "loading: %.0f of %.0f MiB", (double)done / (1 << 20), (double)total / (1 << 20));
    return true;
}

static void list_str(const cli_ints *l, char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < l->n && used < cap; i++) used += (size_t)snprintf(buf + used, cap - used, "%s%d", i ? "," : "", l->v[i]);
}

int cmd_bench(int argc, char **argv) {
    cli_opts o;
    int r = cli_parse(&o, CMD_BENCH, "bench", k_usage, 0, argc, argv);
    if (r) return r > 0 ? 0 : 2;
    if (!o.model) {
        fprintf(stderr, "triforce bench: -m MODEL is required (see triforce bench --help)\n");
        return 2;
    }
    bench_format fmt;
    if (strcmp(o.output, "md") == 0) fmt = BENCH_MD;
    else if (strcmp(o.output, "json") == 0) fmt = BENCH_JSON;
    else if (strcmp(o.output, "csv") == 0) fmt = BENCH_CSV;
    else {
        fprintf(stderr, "triforce bench: -o '%s': expected md, json or csv\n", o.output);
        return 2;
    }
    const bool fill_random = strcmp(o.bench_fill, "random") == 0;
    if (!fill_random && strcmp(o.bench_fill, "text") != 0) {
        fprintf(stderr, "triforce bench: --fill '%s': expected text or random\n", o.bench_fill);
        return 2;
    }
    tf_device device = TF_DEVICE_CPU; /* reproducible figures unless asked */
    if (o.device && !tf_device_from_name(o.device, &device)) {
        fprintf(stderr, "triforce bench: --device '%s': expected cuda, cpu or auto\n", o.device);
        return 2;
    }
    bool temp_given = false; /* bench decodes greedily unless --temp says otherwise */
    for (int i = 0; i < argc; i++) temp_given |= !strncmp(argv[i], "--temp", 6);
    if (!temp_given) o.temp = 0;
    if (o.temp > 0 && fill_random) {
        fprintf(stderr, "triforce bench: --temp: --fill random decodes greedily (argmax over random K/V); drop one\n");
        return 2;
    }
    if (!cli_check_draft("bench", &o)) return 2;
    const bool has_draft = cli_has_draft(&o);
    tf_decode_mode modes[5];
    int n_modes = parse_modes(o.mode ? o.mode : fill_random ? "ar" : has_draft ? "ar,retrieval,triforce" : "ar,retrieval",
                              modes, 5);
    if (n_modes < 0) return 2;
    if (fill_random && (n_modes != 1 || modes[0] != TF_MODE_AR)) {
        fprintf(stderr, "triforce bench: --fill random decodes in mode ar only (--mode ar): what a speculative mode "
                        "accepts depends on a real context; use --fill text for --mode %s\n", o.mode);
        return 2;
    }
    for (int i = 0; i < n_modes; i++)
        if (!cli_mode_has_draft("bench", &o, modes[i])) return 2;
    for (int i = 0; i < n_modes; i++) {
        tf_decoder_params dp = cli_decoder_params(&o);
        dp.mode = modes[i];
        dp.device = device;
        if (!cli_check_decoder_params("bench", &dp)) return 2;
    }
    if (o.bench_prompt.n == 0) o.bench_prompt = (cli_ints){1, {512}};
    if (o.depths.n == 0) o.depths = (cli_ints){1, {0}};
    if (o.rows.n == 0) o.rows = (cli_ints){4, {1, 2, 4, 8}};
    int64_t need = 1;
    for (int i = 0; i < o.bench_prompt.n; i++) need = o.bench_prompt.v[i] > need ? o.bench_prompt.v[i] : need;
    if (!fill_random) /* with random K/V, no depth needs text */
        for (int i = 0; i < o.depths.n; i++) need = o.depths.v[i] > need ? o.depths.v[i] : need;
    for (int i = 0; i < o.rows.n; i++) need = o.rows.v[i] > need ? o.rows.v[i] : need;

    tf_model_params mp = tf_model_default_params();
    mp.log_fn = cli_log;
    mp.log_level = o.verbose ? TF_LOG_DEBUG : TF_LOG_WARN;
    cli_progress load_line = cli_progress_make(NULL);
    mp.progress = load_progress; /* pages read in now, not during the first test */
    mp.progress_user_data = &load_line;
    tf_model *model = NULL, *draft = NULL;
    bench_tokens toks = {0};
    int rc = 1;
    if (!cli_load_models(&o, "bench", &mp, &load_line, &model, &draft)) goto done;
    bench_model bm = {.m = model, .draft = draft, .device = device};
    tf_model_get_info(model, &bm.info);
    bm.kv_per_tok = (double)tf_model_kv_type_bytes_per_token(model, cli_kv_type(&o));
    bm.w_bytes = (double)bm.info.weight_bytes;
    if (!bm.info.tied_output) /* untied: the embedding table is gathered one row per token, not read */
        for (int64_t i = 0; i < tf_model_n_tensors(model); i++) {
            tf_tensor_info ti;
            tf_model_tensor(model, i, &ti);
            if (strcmp(ti.name, "token_embd.weight") == 0) bm.w_bytes -= (double)ti.bytes;
        }
    if (bench_text_tokens(model, &bm.info, o.file, need, &toks) != 0) goto done;
    const int threads = o.n_threads > 0 ? o.n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    char ps[128], ds[128], rs[128], ms[64] = "";
    list_str(&o.bench_prompt, ps, sizeof ps);
    list_str(&o.depths, ds, sizeof ds);
    list_str(&o.rows, rs, sizeof rs);
    for (int i = 0; i < n_modes; i++)
        snprintf(ms + strlen(ms), sizeof ms - strlen(ms), "%s%s", i ? "," : "", tf_decode_mode_name(modes[i]));
    fprintf(stderr,
            "triforce bench: model %s (%s, %.1fM params)%s%s, device %s, threads %d, kv %s, -p %s, -n %d, -d %s, "
            "--rows %s, --mode %s, -r %d, context %s%s",
            o.model, bm.info.name, (double)bm.info.n_params / 1e6, cli_has_draft(&o) ? ", draft " : "",
            cli_draft_name(&o), tf_device_name(device), threads, o.kv_type, ps, o.n_predict, ds,
            rs, ms, o.reps, o.file ? o.file : toks.fill, fill_random ? ", decode ctx filled with random K/V" : "");
    if (o.temp > 0)
        fprintf(stderr, ", temp %g, top-k %d, top-p %g, min-p %g, seed %lld, coupling %s", o.temp, o.top_k, o.top_p,
                o.min_p, bench_seed(&o), o.coupling);
    if (n_modes > 1 || modes[0] != TF_MODE_AR)
        fprintf(stderr, ", gamma1 %d, gamma2 %d, budget %d%s, chunk %d, rebuild-stride %d, bypass-accept %g, middle %s, "
                        "sinks %d, window %d", o.gamma1, cli_gamma2(&o), o.budget, o.budget ? "" : " (an eighth of each test's context)",
                o.chunk, o.rebuild_stride, o.bypass_accept, o.middle, o.sinks, o.window);
    fputc('\n', stderr);
    for (int i = 0; i < o.depths.n; i++)
        if (o.depths.v[i] + o.n_predict > bm.info.n_ctx_train)
            fprintf(stderr, "triforce bench: warning: depth %d + %d generated tokens is beyond the model's trained "
                            "context of %d\n", o.depths.v[i], o.n_predict, bm.info.n_ctx_train);

    /* the bounds' bandwidth: given, probed on the host, or none (a device's cannot be probed from here) */
    const bool bw_given = o.bw_gbs > 0, bw_none = !bw_given && device == TF_DEVICE_CUDA;
    double gbs = o.bw_gbs;
    if (bw_none) {
        fprintf(stderr, "bench: --device cuda without --bw-gbs: no bounds (the host probe says nothing of the device)\n");
        gbs = NAN;
    } else if (!bw_given) {
        fprintf(stderr, "bench: read bandwidth (%d MiB, %d threads)\n", o.bw_mib, threads);
        gbs = membw_read_gbs(threads, (size_t)o.bw_mib << 20, 5);
        if (!(gbs > 0)) {
            fprintf(stderr, "triforce bench: the bandwidth probe failed (cannot allocate %d MiB; lower --bw-mib)\n",
                    o.bw_mib);
            goto done;
        }
    }
    bm.bw = gbs * 1e9;
    /* the host's compute peaks, prefill's ceiling (a device's are not the host's) */
    bench_peaks pk = {NAN, NAN, NAN};
    bm.cr = (bench_compute){NAN, NAN, NAN, "not measured on a device"};
    if (device != TF_DEVICE_CUDA) {
        fprintf(stderr, "bench: compute peak (%d threads)\n", threads);
        pk.int8_gops = peak_int8_gops(threads, 200);
        pk.bf16_gflops = peak_bf16_gflops(threads, 200);
        pk.f32_gflops = peak_f32_gflops(threads, 200);
        if (pk.int8_gops < 0 || pk.bf16_gflops < 0 || pk.f32_gflops < 0)
            fprintf(stderr, "triforce bench: warning: the compute-peak probe could not start its threads\n");
        /* 0: the CPU lacks the instruction */
        if (!(pk.int8_gops > 0)) pk.int8_gops = NAN;
        if (!(pk.bf16_gflops > 0)) pk.bf16_gflops = NAN;
        if (!(pk.f32_gflops > 0)) pk.f32_gflops = NAN;
        bm.cr = bench_compute_rates(model, &bm.info, o.kv_type, o.isa, &pk);
        if (bm.cr.why_none[0] && o.rows.n > 0)
            fprintf(stderr, "bench: no compute floor for the passes: %s\n", bm.cr.why_none);
    }
    const char *slash = strrchr(o.model, '/');
    bench_header h = {.model = slash && slash[1] ? slash + 1 : o.model, .model_path = o.model,
                      .draft = cli_draft_name(&o),
                      .params_m = (double)bm.info.n_params / 1e6, .weight_mib = (double)bm.info.weight_bytes / (1 << 20),
                      .threads = threads, .kv = o.kv_type, .bw_gbs = gbs, .device = tf_device_name(device),
                      .bw_given = bw_given, .peak_int8_gops = pk.int8_gops, .peak_bf16_gflops = pk.bf16_gflops,
                      .peak_f32_gflops = pk.f32_gflops, .temp = o.temp > 0 ? o.temp : 0,
                      .seed = o.temp > 0 ? bench_seed(&o) : -1,
                      .attn = device == TF_DEVICE_CPU ? bench_attn_name(o.isa) : "",
                      .version = tf_version()};
    bench_report rep;
    bench_report_begin(&rep, stdout, fmt, &h);
    if (!bw_none) {
        bench_row bwrow = bench_row_make(BENCH_MEMBW, "", 0, o.bw_mib, bw_given ? 0 : 5, "GB/s");
        bwrow.value = (bench_spread){gbs, NAN, NAN}; /* the best of 5 passes: the ceiling itself */
        bench_report_row(&rep, &bwrow);
    }
    if (run_prefill(&o, &bm, &toks, &rep) != 0 || run_passes(&o, &bm, &toks, &rep) != 0 ||
        (fill_random ? run_decode_random(&o, &bm, &toks, &rep) : run_decode(&o, &bm, modes, n_modes, &toks, &rep)) != 0)
        goto done;
    bench_report_end(&rep);
    rc = 0;
done:
    free(toks.ids);
    tf_model_close(draft); /* a layer view goes before the model it borrows from */
    tf_model_close(model);
    return rc;
}
