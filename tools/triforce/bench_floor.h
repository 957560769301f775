/*
 * bench_floor.h — the compute floor of a k-row target pass for `triforce bench`:
 * the time its multiply-adds take at the compute peaks measured in the same run
 * (peak.h), next to the bytes floor (the weights and the KV cache once at the
 * measured bandwidth). A pass of one row is bound by the bytes; a pass of many
 * rows over a deep cache by attention's arithmetic, which grows with the rows
 * while the bytes do not. The floor counts each kernel at the peak of the
 * instruction it multiplies with, so it is a lower bound; where that
 * instruction's rate was not probed (AMX tiles, emulated bf16) there is none.
 */
#ifndef TF_BENCH_FLOOR_H
#define TF_BENCH_FLOOR_H

#include "triforce.h"

/* The host's compute peaks, 1e9 operations a second (a multiply-add counts
 * two); NAN: not measured or not available. */
typedef struct bench_peaks {
    double int8_gops;   /* vpdpbusd */
    double bf16_gflops; /* vdpbf16ps */
    double f32_gflops;  /* FMA */
} bench_peaks;

/* Multiply-adds a second of each part of a pass (NAN: no probed rate). */
typedef struct bench_compute {
    double w_rate;  /* the weights' matrix products */
    double qk_rate; /* attention's scores */
    double pv_rate; /* attention's weighted sum of the values */
    const char *why_none; /* why there is no floor ("" when there is one) */
} bench_compute;

/* The rates for `model` with a KV cache of kv_type ("f16", "f32", "q8_0",
 * "q4_0") on the kernels `isa` (tf_context_params.isa: 0 best .. 4) picks. */
/* The name of the CPU attention kernel a run with --isa value isa (0: the CPU's best) uses. */
const char *bench_attn_name(int isa);

bench_compute bench_compute_rates(const tf_model *model, const tf_model_info *in, const char *kv_type, int isa,
                                  const bench_peaks *pk);

/* The compute floor in ms at the rates c of a pass of `rows` new rows after
 * `depth` cached tokens: every row through the weights and the logits, and
 * attention's scores and sums, row i over depth + i keys; NAN when there is none. */
double bench_pass_compute_ms(const bench_compute *c, const tf_model_info *in, int depth, int rows);

#endif
