/* bench_report.c — output of `triforce bench` as Markdown, JSON lines or CSV (see bench_report.h). */
#include "bench_report.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const char *const k_kind_names[] = {
    [BENCH_MEMBW] = "membw", [BENCH_PREFILL] = "prefill", [BENCH_PASS] = "pass", [BENCH_DECODE] = "decode"};
_Static_assert(sizeof k_kind_names / sizeof k_kind_names[0] == BENCH_DECODE + 1, "a name per kind");

bench_row bench_row_make(bench_kind kind, const char *mode, int depth, int n, int reps, const char *unit) {
    return (bench_row){.kind = kind, .mode = mode, .depth = depth, .n = n, .reps = reps, .unit = unit,
                       .value = {NAN, NAN, NAN}, .bound = NAN, .compute_bound = NAN, .pct_of_bound = NAN, .gflops = NAN, .tok_s = NAN,
                       .speedup = {NAN, NAN, NAN}, .tok_per_pass = NAN, .same_as_ar = -1, .fill = ""};
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

bench_spread bench_spread_of(double *t, int n) {
    if (n < 1) return (bench_spread){NAN, NAN, NAN};
    qsort(t, (size_t)n, sizeof(double), cmp_double);
    double med = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    return (bench_spread){med, t[0], t[n - 1]};
}

/* The short test name of llama-bench's kind: pp512, tg64 @ d2048, pass4 @ d2048. */
static void test_name(const bench_row *row, char *buf, size_t cap) {
    switch (row->kind) {
    case BENCH_MEMBW: snprintf(buf, cap, "membw %d MiB", row->n); break;
    case BENCH_PREFILL: snprintf(buf, cap, "pp%d", row->n); break;
    case BENCH_PASS: snprintf(buf, cap, "pass%d @ d%d", row->n, row->depth); break;
    case BENCH_DECODE:
        snprintf(buf, cap, "tg%d @ d%d%s", row->n, row->depth,
                 strcmp(row->fill, BENCH_FILL_RANDOM_KV) == 0 ? ", ctx filled with random K/V" : "");
        break;
    }
}

/* A number with about three significant digits after the point where small. */
static const char *num(double x, char *buf, size_t cap) {
    if (!isfinite(x)) snprintf(buf, cap, "-");
    else if (fabs(x) >= 100) snprintf(buf, cap, "%.1f", x);
    else if (fabs(x) >= 1) snprintf(buf, cap, "%.2f", x);
    else snprintf(buf, cap, "%.3f", x);
    return buf;
}

/* "median [min, max]", or the median alone for one repetition. */
static const char *spread(bench_spread s, int reps, char *buf, size_t cap) {
    char a[32], b[32], c[32];
    if (reps > 1 && isfinite(s.lo))
        snprintf(buf, cap, "%s [%s, %s]", num(s.med, a, sizeof a), num(s.lo, b, sizeof b), num(s.hi, c, sizeof c));
    else
        snprintf(buf, cap, "%s", num(s.med, a, sizeof a));
    return buf;
}

/* Per-level fields as "name=value;..." (acceptance: the levels that judge a level below). */
static void level_list(const bench_row *row, bool accept, const char *sep, char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < row->n_levels && used < cap; i++) {
        const bench_level *L = &row->lv[i];
        double v = accept ? L->accept : L->ms_per_pass;
        if (accept && !isfinite(v)) continue;
        int w = snprintf(buf + used, cap - used, "%s%s=%.*f", used ? sep : "", L->name, 3, v);
        if (w < 0) break;
        used += (size_t)w;
    }
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static void json_num(FILE *f, const char *key, double v) {
    fprintf(f, ", \"%s\": ", key);
    if (isfinite(v)) fprintf(f, "%.6g", v);
    else fputs("null", f);
}

static void csv_num(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, ",%.6g", v);
    else fputs(",", f);
}

/* A CSV field: quoted when it holds a comma, a quote or a line break. */
static void csv_str(FILE *f, const char *s, bool first) {
    if (!first) fputc(',', f);
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static const char *k_csv_header =
    "model,threads,kv,test,mode,depth,n,reps,unit,median,min,max,bound,compute_bound,pct_of_bound,bw_gbs,"
    "peak_int8_gops,peak_bf16_gflops,peak_f32_gflops,gflops,tok_s,speedup,"
    "speedup_min,speedup_max,tok_per_target_pass,acceptance,level_ms_per_pass,same_as_ar,temp,seed,attn,version,fill";

void bench_report_begin(bench_report *r, FILE *out, bench_format fmt, const bench_header *h) {
    r->out = out;
    r->fmt = fmt;
    r->h = *h;
    r->last_kind = -1;
    r->random_kv = 0;
    if (fmt == BENCH_CSV) fprintf(out, "%s\n", k_csv_header);
    if (fmt == BENCH_MD) {
        fprintf(out, "model: %s (%.1fM parameters, %.1f MiB of weights)%s%s; device %s; %d threads; KV cache %s",
                h->model_path, h->params_m, h->weight_mib, h->draft[0] ? "; draft " : "", h->draft,
                h->device ? h->device : "cpu", h->threads, h->kv);
        if (h->attn && h->attn[0]) fprintf(out, "; attention %s", h->attn);
        if (h->temp > 0) fprintf(out, "; decode sampled at T %g, seed %lld", h->temp, h->seed);
        fprintf(out, "; triforce %s\n\n", h->version ? h->version : "?");
    }
    fflush(out);
}

static void md_table_header(bench_report *r, bench_kind kind) {
    FILE *f = r->out;
    if (r->last_kind >= 0 && r->last_kind != BENCH_MEMBW) fputc('\n', f);
    switch (kind) {
    case BENCH_MEMBW: break;
    case BENCH_PREFILL:
        fprintf(f, "| model | threads | test | tok/s | GFLOP/s | bw ceiling tok/s | %% of ceiling |\n"
                   "| --- | ---: | --- | ---: | ---: | ---: | ---: |\n");
        break;
    case BENCH_PASS:
        fprintf(f, "| model | threads | test | ms/pass | floor ms | compute floor ms | %% of floor | cache |\n"
                   "| --- | ---: | --- | ---: | ---: | ---: | ---: | --- |\n");
        break;
    case BENCH_DECODE:
        fprintf(f, "| model | threads | mode | test | ms/tok | tok/s | floor ms | %% of floor | speedup vs ar | "
                   "tok/target pass | acceptance | ms/pass by level | = ar |\n"
                   "| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |\n");
        break;
    }
    r->last_kind = (int)kind;
}

static void md_row(bench_report *r, const bench_row *row) {
    FILE *f = r->out;
    char test[64], v[96], a[32], b[32], c[32], d[32], sp[96], acc[160], lms[160];
    if ((int)row->kind != r->last_kind) md_table_header(r, row->kind);
    test_name(row, test, sizeof test);
    spread(row->value, row->reps, v, sizeof v);
    switch (row->kind) {
    case BENCH_MEMBW:
        if (r->h.bw_given)
            fprintf(f, "bandwidth of the bounds: %s GB/s (given by --bw-gbs)\n\n", v);
        else
            fprintf(f, "read bandwidth: %s GB/s (best of %d passes over %d MiB, %d threads)\n\n", v, row->reps,
                    row->n, r->h.threads);
        if (isfinite(r->h.peak_int8_gops) || isfinite(r->h.peak_bf16_gflops) || isfinite(r->h.peak_f32_gflops))
            fprintf(f, "compute peak: int8 %s GOP/s (vpdpbusd), bf16 %s GFLOP/s (vdpbf16ps), f32 %s GFLOP/s (FMA), %d threads\n\n",
                    num(r->h.peak_int8_gops, a, sizeof a), num(r->h.peak_bf16_gflops, c, sizeof c),
                    num(r->h.peak_f32_gflops, b, sizeof b), r->h.threads);
        break;
    case BENCH_PREFILL:
        fprintf(f, "| %s | %d | %s | %s | %s | %s | %s |\n", r->h.model, r->h.threads, test, v,
                num(row->gflops, a, sizeof a), num(row->bound, b, sizeof b), num(row->pct_of_bound, c, sizeof c));
        break;
    case BENCH_PASS:
        fprintf(f, "| %s | %d | %s | %s | %s | %s | %s | %s |\n", r->h.model, r->h.threads, test, v,
                num(row->bound, a, sizeof a), num(row->compute_bound, c, sizeof c), num(row->pct_of_bound, b, sizeof b),
                row->fill);
        break;
    case BENCH_DECODE:
        if (strcmp(row->fill, BENCH_FILL_RANDOM_KV) == 0) r->random_kv = 1;
        level_list(row, true, ", ", acc, sizeof acc);
        level_list(row, false, ", ", lms, sizeof lms);
        fprintf(f, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r->h.model, r->h.threads,
                row->mode, test, v, num(row->tok_s, a, sizeof a), num(row->bound, b, sizeof b),
                num(row->pct_of_bound, c, sizeof c), isfinite(row->speedup.med) ? spread(row->speedup, row->reps, sp, sizeof sp) : "-",
                num(row->tok_per_pass, d, sizeof d), acc[0] ? acc : "-", lms,
                row->same_as_ar < 0 ? "-" : row->same_as_ar ? "yes" : "**NO**");
        break;
    }
}

static void json_row(bench_report *r, const bench_row *row) {
    FILE *f = r->out;
    fputs("{\"model\": ", f);
    json_str(f, r->h.model);
    fputs(", \"device\": ", f);
    json_str(f, r->h.device ? r->h.device : "cpu");
    fprintf(f, ", \"threads\": %d, \"kv\": ", r->h.threads);
    json_str(f, r->h.kv);
    fprintf(f, ", \"test\": \"%s\", \"mode\": ", k_kind_names[row->kind]);
    json_str(f, row->mode);
    fprintf(f, ", \"depth\": %d, \"n\": %d, \"reps\": %d, \"unit\": ", row->depth, row->n, row->reps);
    json_str(f, row->unit);
    json_num(f, "median", row->value.med);
    json_num(f, "min", row->value.lo);
    json_num(f, "max", row->value.hi);
    json_num(f, "bound", row->bound);
    json_num(f, "compute_bound", row->compute_bound);
    json_num(f, "pct_of_bound", row->pct_of_bound);
    json_num(f, "bw_gbs", r->h.bw_gbs);
    json_num(f, "peak_int8_gops", r->h.peak_int8_gops);
    json_num(f, "peak_bf16_gflops", r->h.peak_bf16_gflops);
    json_num(f, "peak_f32_gflops", r->h.peak_f32_gflops);
    json_num(f, "gflops", row->gflops);
    json_num(f, "tok_s", row->tok_s);
    json_num(f, "speedup", row->speedup.med);
    json_num(f, "speedup_min", row->speedup.lo);
    json_num(f, "speedup_max", row->speedup.hi);
    json_num(f, "tok_per_target_pass", row->tok_per_pass);
    fputs(", \"levels\": [", f);
    for (int i = 0; i < row->n_levels; i++) {
        const bench_level *L = &row->lv[i];
        fprintf(f, "%s{\"name\": \"%s\", \"cache\": \"%s\"", i ? ", " : "", L->name, L->cache);
        json_num(f, "acceptance", L->accept);
        json_num(f, "ms_per_pass", L->ms_per_pass);
        json_num(f, "passes_per_tok", L->passes_per_tok);
        fputc('}', f);
    }
    fprintf(f, "], \"same_as_ar\": %s", row->same_as_ar < 0 ? "null" : row->same_as_ar ? "true" : "false");
    json_num(f, "temp", r->h.temp);
    if (r->h.temp > 0) fprintf(f, ", \"seed\": %lld", r->h.seed);
    else fputs(", \"seed\": null", f);
    fputs(", \"attn\": ", f);
    json_str(f, r->h.attn ? r->h.attn : "");
    fputs(", \"version\": ", f);
    json_str(f, r->h.version ? r->h.version : "");
    fputs(", \"fill\": ", f);
    json_str(f, row->fill);
    fputs("}\n", f);
}

static void csv_row(bench_report *r, const bench_row *row) {
    FILE *f = r->out;
    char acc[160], lms[160];
    csv_str(f, r->h.model, true);
    fprintf(f, ",%d", r->h.threads);
    csv_str(f, r->h.kv, false);
    csv_str(f, k_kind_names[row->kind], false);
    csv_str(f, row->mode, false);
    fprintf(f, ",%d,%d,%d", row->depth, row->n, row->reps);
    csv_str(f, row->unit, false);
    const double nums[] = {row->value.med, row->value.lo, row->value.hi, row->bound, row->compute_bound,
                           row->pct_of_bound, r->h.bw_gbs, r->h.peak_int8_gops, r->h.peak_bf16_gflops,
                           r->h.peak_f32_gflops, row->gflops, row->tok_s, row->speedup.med,
                           row->speedup.lo, row->speedup.hi, row->tok_per_pass};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) csv_num(f, nums[i]);
    level_list(row, true, ";", acc, sizeof acc);
    level_list(row, false, ";", lms, sizeof lms);
    csv_str(f, acc, false);
    csv_str(f, lms, false);
    csv_str(f, row->same_as_ar < 0 ? "" : row->same_as_ar ? "yes" : "no", false);
    csv_num(f, r->h.temp);
    if (r->h.temp > 0) fprintf(f, ",%lld", r->h.seed);
    else fputc(',', f);
    csv_str(f, r->h.attn ? r->h.attn : "", false);
    csv_str(f, r->h.version ? r->h.version : "", false);
    csv_str(f, row->fill, false);
    fputc('\n', f);
}

void bench_report_row(bench_report *r, const bench_row *row) {
    switch (r->fmt) {
    case BENCH_MD: md_row(r, row); break;
    case BENCH_JSON: json_row(r, row); break;
    case BENCH_CSV: csv_row(r, row); break;
    }
    fflush(r->out);
}

void bench_report_end(bench_report *r) {
    if (r->fmt != BENCH_MD) return;
    fprintf(r->out,
            "\nBounds are at the read bandwidth measured above. Prefill ceiling: every weight read once per batch "
            "and the KV cache read by each batch (prefill is compute-bound, so far below it); GFLOP/s counts the "
            "matrix products and causal attention, next to the compute peak measured above (int8 vpdpbusd for the "
            "packed weight types on a VNNI CPU, f32 FMA for float weights; two operations per multiply-add). Pass "
            "floor: every weight once plus the KV cache of depth + rows; compute floor: the pass's multiply-adds "
            "(every row through the weights and the logits, and attention's scores and sums over depth + i keys "
            "for row i) at the peaks measured above, each at the rate of the instruction its kernel multiplies "
            "with (weights: int8 vpdpbusd, or f32 FMA for float weights; attention over an f16 cache: bf16 "
            "vdpbf16ps, or f32 FMA under the f32 kernels (avx512_f32, avx2_f32 and their _vnni builds), over q8_0 / q4_0: vpdpbusd for the scores and vpdpwssd, half its products, for the sums; "
            "f32 arithmetic: a multiply and an add apiece), none where that rate was not probed (AMX tiles, "
            "emulated bf16); %% of floor is against the larger of the two, one row being bound by the bytes and "
            "many rows over a deep cache by attention's arithmetic; "
            "the cache is filled with random keys and values (a pass costs the same whatever they hold). Decode "
            "floor: ar's bytes per token, every weight once plus the KV cache at the mean context of the generation "
            "(the embedding table of an untied model is gathered, not read); a speculative mode can beat it "
            "(%% over 100). A model and cache small enough for the CPU's caches can beat these DRAM bounds too. Speedup: ar's ms/tok over the mode's, repetition by repetition. Acceptance: per judged "
            "candidate of the level below, accepted / (accepted + rejections) (a candidate is judged only while all "
            "before it were accepted). = ar: the output equals ar's (greedy, or sampled under the keyed coupling; - when sampled under --coupling residual, whose texts differ by design). "
            "Decoding at depth 0 prefills one token. Spread: median [min, max] over the repetitions.\n");
    if (r->random_kv)
        fprintf(r->out, "\nctx filled with random K/V (--fill random): the decode tests so marked ran after the "
                        "cache was filled with random keys and values up to the depth instead of a prefill of the "
                        "text; a token costs the same whatever the cache holds, but its output means nothing.\n");
    fflush(r->out);
}
