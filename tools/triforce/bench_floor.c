/* bench_floor.c — the compute floor of a k-row pass (bench_floor.h). */
#include "bench_floor.h"

#include "backend/cpu/attn.h"
#include "backend/cpu/quant.h"

#include <math.h>
#include <string.h>

/* whether the layers' matrices are float (f32, f16, bf16: f32 FMA products) or
 * a quantized type (int8 dot products), judged by the first layer's FFN */
static int float_weights(const tf_model *model) {
    for (int64_t i = 0; i < tf_model_n_tensors(model); i++) {
        tf_tensor_info ti;
        if (!tf_model_tensor(model, i, &ti) || strcmp(ti.name, "blk.0.ffn_up.weight") != 0) continue;
        return strcmp(ti.type, "f32") == 0 || strcmp(ti.type, "f16") == 0 || strcmp(ti.type, "bf16") == 0;
    }
    return -1;
}

/* The attention kernel of a run with --isa value isa (0: the CPU's best). */
static tf_attn_kernel attn_kernel(int isa) { return tf_attn_kernel_for(isa == 0 ? TF_ISA_BEST : (tf_isa)(isa - 1)); }

const char *bench_attn_name(int isa) { return tf_attn_kernel_name(attn_kernel(isa)); }

bench_compute bench_compute_rates(const tf_model *model, const tf_model_info *in, const char *kv_type, int isa,
                                  const bench_peaks *pk) {
    bench_compute c = {NAN, NAN, NAN, ""};
    const tf_attn_kernel k = attn_kernel(isa);
    if (k == TF_ATTN_AMX) {
        c.why_none = "AMX tiles (their rate is not probed)";
        return c;
    }
    const int fw = float_weights(model);
    if (fw < 0) {
        c.why_none = "no blk.0.ffn_up.weight";
        return c;
    }
    /* a multiply-add is two of the probes' operations; the float products
     * fuse them (FMA), so the f32 peak counts its products too */
    c.w_rate = (fw ? pk->f32_gflops : pk->int8_gops) * 1e9 / 2;
    if (strcmp(kv_type, "q8_0") == 0 || strcmp(kv_type, "q4_0") == 0) {
        /* scores: vpdpbusd (64 products an instruction); sums: vpdpwssd over
         * int16 pairs, 32 an instruction at the same rate */
        c.qk_rate = pk->int8_gops * 1e9 / 2;
        c.pv_rate = pk->int8_gops * 1e9 / 4;
    } else if (strcmp(kv_type, "f16") == 0 && in->head_dim % 16 == 0) {
        if (k == TF_ATTN_AVX512_BF16) c.qk_rate = c.pv_rate = pk->bf16_gflops * 1e9 / 2;
        else if (tf_attn_kernel_bits(k, TF_DTYPE_F16, in->head_dim) == TF_ATTN_AVX512_F32) /* the f32 variants: FMAs */
            c.qk_rate = c.pv_rate = pk->f32_gflops * 1e9 / 2;
        else c.why_none = "bf16 products emulated (their rate is not probed)";
    } else {
        /* f32 arithmetic, a multiply and an add apiece (compiled without
         * contraction, attn_kernel.inc): half the FMA rate */
        c.qk_rate = c.pv_rate = pk->f32_gflops * 1e9 / 4;
    }
    if (!(c.w_rate > 0) || !(c.qk_rate > 0) || !(c.pv_rate > 0)) {
        if (!c.why_none[0]) c.why_none = "a compute peak the kernels need was not measured";
        c.w_rate = c.qk_rate = c.pv_rate = NAN;
    }
    return c;
}

/* multiply-adds of the pass: the weights' (*w), attention's scores and sums (*qk, *pv) */
static void pass_macs(const tf_model_info *in, int depth, int rows, double *w, double *qk, double *pv) {
    const double layer = (double)in->n_embd * in->head_dim * (2.0 * in->n_head + 2.0 * in->n_head_kv) +
                         3.0 * in->n_embd * in->n_ff;
    *w = (double)rows * (in->n_layer * layer + (double)in->n_embd * in->n_vocab);
    /* keys seen by the rows together: depth + 1 + ... + depth + rows */
    const double keys = (double)rows * depth + (double)rows * (rows + 1) / 2;
    *qk = *pv = (double)in->n_layer * in->n_head * in->head_dim * keys;
}

double bench_pass_compute_ms(const bench_compute *c, const tf_model_info *in, int depth, int rows) {
    if (c->why_none[0]) return NAN;
    double w, qk, pv;
    pass_macs(in, depth, rows, &w, &qk, &pv);
    return 1e3 * (w / c->w_rate + qk / c->qk_rate + pv / c->pv_rate);
}
