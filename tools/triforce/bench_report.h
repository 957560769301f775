/*
 * bench_report.h — the rows `triforce bench` measures and their three output
 * formats: a Markdown table per kind of test (md), one JSON object per line
 * (json), or CSV with one header line (csv). Every row carries the model, the
 * thread count, the mode, the depth, the value over the repetitions (median,
 * min, max) and its bound at the read bandwidth measured in the same run.
 * Rows are printed as they are finished, so a long run shows its results early.
 */
#ifndef TF_BENCH_REPORT_H
#define TF_BENCH_REPORT_H

#include <stdbool.h>
#include <stdio.h>

typedef enum bench_kind {
    BENCH_MEMBW,   /* the read-bandwidth probe: GB/s */
    BENCH_PREFILL, /* a prompt of n tokens into an empty cache: tok/s */
    BENCH_PASS,    /* one forward pass of n rows over a cache of `depth` tokens: ms */
    BENCH_DECODE,  /* n generated tokens after `depth` prefilled ones: ms/tok */
} bench_kind;

typedef enum bench_format { BENCH_MD, BENCH_JSON, BENCH_CSV } bench_format;

/* A value over the repetitions. */
typedef struct bench_spread {
    double med, lo, hi;
} bench_spread;

/* One speculation level of a decode row, summed over the repetitions. */
typedef struct bench_level {
    const char *name, *cache; /* "target"/"middle"/"draft", "full"/"retrieval"/"streaming" */
    double accept;            /* accepted / judged candidates of the level below; NaN at the bottom */
    double ms_per_pass;       /* time in this level per forward pass */
    double passes_per_tok;    /* forward passes per emitted token */
} bench_level;

#define BENCH_MAX_LEVELS 3

typedef struct bench_row {
    bench_kind kind;
    const char *mode;      /* decode: "ar", "retrieval", ...; other kinds: "" */
    int depth;             /* decode, pass: tokens in the cache first; else 0 */
    int n;                 /* prefill: prompt tokens; decode: generated tokens; pass: rows; membw: MiB */
    int reps;
    const char *unit;      /* "GB/s", "tok/s", "ms", "ms/tok" */
    bench_spread value;
    double bound;          /* the same unit at the measured bandwidth: a tok/s ceiling or a ms floor; NaN: none */
    double compute_bound;  /* pass: ms of its multiply-adds at the measured compute peaks (bench_floor.h); else NaN */
    double pct_of_bound;   /* 100 = at the bound (pass: the larger of bound and compute_bound) */
    double gflops;         /* prefill: FLOP/s achieved / 1e9; else NaN */
    double tok_s;          /* decode: 1000 / median ms/tok; else NaN */
    bench_spread speedup;  /* decode: ar's ms/tok over this mode's, per repetition; NaN without ar */
    double tok_per_pass;   /* decode: emitted tokens per target pass */
    int n_levels;
    bench_level lv[BENCH_MAX_LEVELS];
    int same_as_ar;        /* decode: 1 the greedy output equals ar's, 0 it differs, -1 not compared */
    const char *fill;      /* what the cache / prompt holds: "text", "filler", "random" (pass tests),
                              BENCH_FILL_RANDOM_KV (decode tests of --fill random) */
} bench_row;

/* The fill of decode rows over a cache of random keys and values; md names it in the test column. */
#define BENCH_FILL_RANDOM_KV "random K/V"

/* What every row shares. */
typedef struct bench_header {
    const char *model;      /* file name, without its folder */
    const char *model_path;
    const char *draft;      /* "" without one */
    double params_m;        /* parameters, millions */
    double weight_mib;
    int threads;
    const char *kv;         /* "f16" or "f32" */
    double bw_gbs;          /* the measured read bandwidth (NAN: none, no bounds) */
    const char *device;     /* "cpu" or "cuda" */
    bool bw_given;          /* bw_gbs came from --bw-gbs, not the host probe */
    double peak_int8_gops;  /* the host's compute peaks (peak.h); NAN: not measured or not available */
    double peak_bf16_gflops;
    double peak_f32_gflops;
    double temp;            /* decode tests: 0 greedy, else sampled at this temperature ... */
    long long seed;         /* ... from this seed (-1 when greedy) */
    const char *attn;       /* the CPU attention kernel (tf_attn_kernel_name), "" on a device */
    const char *version;    /* the library's (tf_version): kernels' last bits may differ between versions */
} bench_header;

typedef struct bench_report {
    FILE *out;
    bench_format fmt;
    bench_header h;
    int last_kind;          /* md: the kind whose table is open (-1: none) */
    int random_kv;          /* md: a decode row over random K/V was printed (the notes explain it) */
} bench_report;

/* Starts a report on `out` (csv: its header line; md: a description of the run). */
void bench_report_begin(bench_report *r, FILE *out, bench_format fmt, const bench_header *h);
/* One row (md: opens a new table when the kind changes). Flushes `out`. */
void bench_report_row(bench_report *r, const bench_row *row);
/* md: the notes that say what the bounds and fills mean. */
void bench_report_end(bench_report *r);

/* A row with every optional number NaN, same_as_ar -1 and the given identity. */
bench_row bench_row_make(bench_kind kind, const char *mode, int depth, int n, int reps, const char *unit);
/* Median, min and max of t[0..n) (sorts t). */
bench_spread bench_spread_of(double *t, int n);

#endif
