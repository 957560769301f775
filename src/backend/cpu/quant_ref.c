/*
 * quant_ref.c — scalar reference kernels for every weight format.
 *
 * These are the definitions the fast variants (quant_avx2.c, quant_avx512.c)
 * are tested against: simple loops, one block at a time, no cleverness. The
 * block layouts are those of GGUF files written by llama.cpp:
 *
 *   Q8_0  d(f16) qs[32]          x[i] = d * qs[i]
 *   Q4_0  d(f16) qs[16]          x[j] = d * ((qs[j] & 15) - 8), x[j+16] = d * ((qs[j] >> 4) - 8)
 *   Q4_1  d(f16) m(f16) qs[16]   x[j] = d * (qs[j] & 15) + m,   x[j+16] = d * (qs[j] >> 4) + m
 *   Q5_0  d(f16) qh[4] qs[16]    as Q4_0 with bit 4 of element j at bit j of qh (little
 *                                endian); x = d * (q - 16), q in 0..31
 *   Q5_1  d(f16) m(f16) qh[4] qs[16]  quants as Q5_0; x = d * q + m
 *   Q2_K  16 groups of 16; 4-bit scale sc and min m per group (one byte);
 *         x = d*sc*q - dmin*m, q in 0..3. Element 128 h + 32 k + l is bits
 *         2k..2k+1 of qs[32 h + l] (q2bits_get).
 *   Q3_K  16 groups of 16; 6-bit scales sc packed in 12 bytes (tf_q3k_scale);
 *         x = d * (sc - 32) * (q - 4), q in 0..7: 2 low bits placed as Q2_K's,
 *         bit 2 of element 128 h + 32 k + l at bit 4h + k of hmask[l].
 *   Q4_K  8 sub-blocks of 32; 6-bit scale sc and min m per sub-block, packed
 *         in 12 bytes;  x = d*sc*q - dmin*m, q in 0..15. Elements come in
 *         groups of 64: qs[32 g + l] holds element 64 g + l in its low nibble
 *         and element 64 g + 32 + l in its high nibble.
 *   Q5_K  Q4_K plus a fifth bit: element 64 g + l (l < 32) has bit 4 at bit
 *         2g of qh[l], element 64 g + 32 + l at bit 2g + 1; q in 0..31.
 *   Q6_K  16 groups of 16 with int8 scales; x = d * scale * (q - 32), q in 0..63
 *         split into 4 low bits (ql) and 2 high bits (qh), see q6k_get/put.
 *   IQ4_NL d(f16) qs[16]         x[j] = d * V[qs[j] & 15], x[j+16] = d * V[qs[j] >> 4] with
 *                                the non-linear table V = tf_iq4_values (-127 .. 113)
 *   IQ4_XS 8 sub-blocks of 32, each IQ4_NL with scale d * (ls - 32), ls a 6-bit
 *         scale (tf_iq4_xs_scale); x = d * (ls - 32) * V[q]. Every IQ4 product
 *         is exact in f32 (11 + 6 + 7 significant bits).
 *
 * Activation formats: Q8_0 blocks (symmetric, d = amax / 127; also for
 * IQ4_NL and IQ4_XS, whose sub-blocks of 32 have a scale each), Q8_1 blocks
 * (Q8_0 plus the sum of the 32 quants, for Q4_1's offsets) and Q8_K blocks
 * (f32 d, d = amax / 127, plus sums of each 16 quants for the K-quant mins).
 * Rounding is round-to-nearest-even (nearbyintf) on x * (1/d), exactly what
 * the SIMD variants compute, so fast and reference activations are bitwise
 * equal.
 */
#include "backend/cpu/quant_impl.h"

#include <math.h>
#include <string.h>

#include "core/error.h"
#include "core/fp16.h"

tf_dtype tf_act_type(tf_dtype type) {
    switch (type) {
#define TF_ACT_TYPE_(ID, nm, id, bs, bytes, act, ...) case TF_DTYPE_##ID: return TF_ACT_##act;
        TF_DTYPE_LIST(TF_ACT_TYPE_)
#undef TF_ACT_TYPE_
    default: TF_ASSERT(!"tf_act_type: unsupported weight type"); return TF_DTYPE_F32;
    }
}

size_t tf_act_row_size(tf_dtype type, int64_t n) { return tf_act_format_row_size(tf_act_type(type), n); }

size_t tf_act_format_row_size(tf_dtype act, int64_t n) {
    switch ((int)act) {
    case TF_DTYPE_F32: return (size_t)n * sizeof(float);
    case TF_DTYPE_Q8_0: return (size_t)(n / TF_QK8_0) * sizeof(tf_block_q8_0);
    case TF_DTYPE_Q8_1: return (size_t)(n / TF_QK8_0) * sizeof(tf_block_q8_1);
    default: return (size_t)(n / TF_QK_K) * sizeof(tf_block_q8_k);
    }
}

/* ---- helpers --------------------------------------------------------------- */

static float absmax(const float *x, int n) {
    float m = 0.0f;
    for (int i = 0; i < n; i++) m = fmaxf(m, fabsf(x[i]));
    return m;
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Q4_K: 6-bit scale and min of sub-block j (0..7) from the packed 12 bytes. */
void tf_q4k_scale_min(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* Inverse of tf_q4k_scale_min for all 8 sub-blocks (sc, m in 0..63). */
void tf_q4k_pack_scales(uint8_t *s, const int *sc, const int *m) {
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        s[j + 4] = (uint8_t)((m[j] & 63) | ((m[j + 4] >> 4) << 6));
        s[j + 8] = (uint8_t)((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
    }
}

/* Q4_K: quant (0..15) of element e (0..255). */
static int q4k_get(const tf_block_q4_k *b, int e) {
    uint8_t v = b->qs[(e / 64) * 32 + e % 32];
    return (e % 64) < 32 ? (v & 0xF) : (v >> 4);
}

/* Q6_K: quant (0..63) of element e (0..255). Within each half of 128
 * elements, element 32 k + l (k 0..3, l 0..31) keeps its low 4 bits in
 * ql[l + 32 (k & 1)] (low nibble for k < 2, high for k >= 2) and its high 2
 * bits at bit 2k of qh[l]. The scale of element e is scales[e / 16]. */
int tf_q6k_get(const tf_block_q6_k *b, int e) {
    int h = e / 128, k = (e % 128) / 32, l = e % 32;
    uint8_t lo = b->ql[64 * h + l + 32 * (k & 1)];
    int low = k < 2 ? (lo & 0xF) : (lo >> 4);
    int high = (b->qh[32 * h + l] >> (2 * k)) & 3;
    return low | (high << 4);
}

void tf_q6k_put(tf_block_q6_k *b, int e, int q) {
    int h = e / 128, k = (e % 128) / 32, l = e % 32;
    uint8_t *lo = &b->ql[64 * h + l + 32 * (k & 1)];
    if (k < 2) *lo = (uint8_t)((*lo & 0xF0) | (q & 0xF));
    else *lo = (uint8_t)((*lo & 0x0F) | ((q & 0xF) << 4));
    uint8_t *hi = &b->qh[32 * h + l];
    *hi = (uint8_t)((*hi & ~(3 << (2 * k))) | (((q >> 4) & 3) << (2 * k)));
}

/* Q5_K: quant (0..31) of element e (0..255). */
static int q5k_get(const tf_block_q5_k *b, int e) {
    uint8_t v = b->qs[(e / 64) * 32 + e % 32];
    int low = (e % 64) < 32 ? (v & 0xF) : (v >> 4);
    return low | (((b->qh[e % 32] >> (e / 32)) & 1) << 4);
}

/* Q4_K and Q5_K share everything but how a quant is stored: a super-block's
 * quants q[256] (0..15 / 0..31), 8 packed 6-bit scale/min pairs and two f16
 * scales. The reference dequantization and dot product of both go through
 * these, each on the quants its getter unpacked. */
static void kmin_dequant(const int *q, const uint8_t *scales, uint16_t d16, uint16_t dmin16, float *y) {
    float d = tf_f16_to_f32(d16), dmin = tf_f16_to_f32(dmin16);
    for (int e = 0; e < TF_QK_K; e++) {
        int sc, m;
        tf_q4k_scale_min(scales, e / 32, &sc, &m);
        y[e] = d * (float)sc * (float)q[e] - dmin * (float)m;
    }
}

static double kmin_dot(const int *q, const uint8_t *scales, uint16_t d16, uint16_t dmin16, const tf_block_q8_k *a) {
    int64_t s_scaled = 0, s_min = 0;
    for (int j = 0; j < 8; j++) {
        int sc, m, s = 0;
        tf_q4k_scale_min(scales, j, &sc, &m);
        for (int l = 0; l < 32; l++) s += q[32 * j + l] * a->qs[32 * j + l];
        s_scaled += (int64_t)sc * s;
        s_min += (int64_t)m * (a->bsums[2 * j] + a->bsums[2 * j + 1]);
    }
    double da = a->d;
    return (double)tf_f16_to_f32(d16) * da * (double)s_scaled - (double)tf_f16_to_f32(dmin16) * da * (double)s_min;
}

/* Q5_0 / Q5_1: quant (0..31) of element j (0..31) from the block's qh and qs. */
static int q5_get(const uint8_t *qh4, const uint8_t *qs, int j) {
    uint32_t qh = (uint32_t)qh4[0] | (uint32_t)qh4[1] << 8 | (uint32_t)qh4[2] << 16 | (uint32_t)qh4[3] << 24;
    int low = j < 16 ? (qs[j] & 0xF) : (qs[j - 16] >> 4);
    return low | (int)((qh >> j) & 1) << 4;
}

/* Q5_0 / Q5_1: stores quants q[32] (0..31) into qh and qs. */
static void q5_put(uint8_t *qh4, uint8_t *qs, const int *q) {
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
        qh |= (uint32_t)(q[j] >> 4) << j | (uint32_t)(q[j + 16] >> 4) << (j + 16);
    }
    for (int k = 0; k < 4; k++) qh4[k] = (uint8_t)(qh >> (8 * k));
}

/* Q2_K / Q3_K: the 2 low bits of element e (0..255). */
int tf_q2bits_get(const uint8_t *qs, int e) {
    int h = e / 128, k = (e % 128) / 32, l = e % 32;
    return (qs[32 * h + l] >> (2 * k)) & 3;
}

void tf_q2bits_put(uint8_t *qs, int e, int q) {
    int h = e / 128, k = (e % 128) / 32, l = e % 32;
    uint8_t *p = &qs[32 * h + l];
    *p = (uint8_t)((*p & ~(3 << (2 * k))) | ((q & 3) << (2 * k)));
}

/* Q3_K: quant (0..7) of element e; the value is q - 4. */
int tf_q3k_get(const tf_block_q3_k *b, int e) {
    int h = e / 128, k = (e % 128) / 32, l = e % 32;
    return tf_q2bits_get(b->qs, e) | (((b->hmask[l] >> (4 * h + k)) & 1) << 2);
}

void tf_q3k_put(tf_block_q3_k *b, int e, int q) {
    int h = e / 128, k = (e % 128) / 32, l = e % 32;
    tf_q2bits_put(b->qs, e, q);
    b->hmask[l] = (uint8_t)((b->hmask[l] & ~(1 << (4 * h + k))) | ((q >> 2) & 1) << (4 * h + k));
}

/* Q3_K: the 16 6-bit scales (0..63, value sc - 32) from the packed 12
 * bytes: group g keeps its low 4 bits in byte g % 8 (low nibble for g < 8,
 * high nibble for g >= 8) and its high 2 bits at bits 2 (g / 4) of byte
 * 8 + g % 4. */
int tf_q3k_scale(const uint8_t *s, int g) {
    int low = g < 8 ? (s[g] & 0xF) : (s[g - 8] >> 4);
    int high = (s[8 + g % 4] >> (2 * (g / 4))) & 3;
    return low | (high << 4);
}

void tf_q3k_pack_scales(uint8_t *s, const int *sc) {
    memset(s, 0, 12);
    for (int g = 0; g < 16; g++) {
        s[g % 8] |= (uint8_t)((sc[g] & 0xF) << (g < 8 ? 0 : 4));
        s[8 + g % 4] |= (uint8_t)(((sc[g] >> 4) & 3) << (2 * (g / 4)));
    }
}

/* ---- quantize ---------------------------------------------------------------- */

static void quantize_q8_0(const float *x, tf_block_q8_0 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += TF_QK8_0) {
        float d = absmax(x, TF_QK8_0) / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = tf_f32_to_f16(d);
        for (int j = 0; j < TF_QK8_0; j++) y[i].qs[j] = (int8_t)nearbyintf(x[j] * id);
    }
}

/* Q4_0: d = (signed value of largest magnitude) / -8, so that value maps to
 * q = 0 exactly and the rest land in 0..15 after clamping. */
static void quantize_q4_0(const float *x, tf_block_q4_0 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += TF_QK4_0) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < TF_QK4_0; j++)
            if (fabsf(x[j]) > amax) { amax = fabsf(x[j]); max = x[j]; }
        float d = max / -8.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = tf_f32_to_f16(d);
        for (int j = 0; j < TF_QK4_0 / 2; j++) {
            int q0 = clampi((int)nearbyintf(x[j] * id) + 8, 0, 15);
            int q1 = clampi((int)nearbyintf(x[j + 16] * id) + 8, 0, 15);
            y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

/* Q4_1: the block's range [min, max] mapped onto 0..15: d = (max - min) / 15,
 * m = min; quants are rounded against the f16 values actually stored. */
static void quantize_q4_1(const float *x, tf_block_q4_1 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += TF_QK4_1) {
        float lo = x[0], hi = x[0];
        for (int j = 1; j < TF_QK4_1; j++) { lo = fminf(lo, x[j]); hi = fmaxf(hi, x[j]); }
        y[i].d = tf_f32_to_f16((hi - lo) / 15.0f);
        y[i].m = tf_f32_to_f16(lo);
        float d = tf_f16_to_f32(y[i].d), m = tf_f16_to_f32(y[i].m);
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int j = 0; j < TF_QK4_1 / 2; j++) {
            int q0 = clampi((int)nearbyintf((x[j] - m) * id), 0, 15);
            int q1 = clampi((int)nearbyintf((x[j + 16] - m) * id), 0, 15);
            y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

/* Q8_1 activations: Q8_0 plus the sum of the quants. */
static void quantize_q8_1(const float *x, tf_block_q8_1 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += TF_QK8_0) {
        float d = absmax(x, TF_QK8_0) / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        int sum = 0;
        y[i].d = tf_f32_to_f16(d);
        for (int j = 0; j < TF_QK8_0; j++) {
            y[i].qs[j] = (int8_t)nearbyintf(x[j] * id);
            sum += y[i].qs[j];
        }
        y[i].sum = (int16_t)sum;
    }
}

/* Q5_0: as Q4_0 with 32 levels: d = (signed value of largest magnitude) / -16. */
static void quantize_q5_0(const float *x, tf_block_q5_0 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += TF_QK5_0) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < TF_QK5_0; j++)
            if (fabsf(x[j]) > amax) { amax = fabsf(x[j]); max = x[j]; }
        float d = max / -16.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = tf_f32_to_f16(d);
        int q[TF_QK5_0];
        for (int j = 0; j < TF_QK5_0; j++) q[j] = clampi((int)nearbyintf(x[j] * id) + 16, 0, 31);
        q5_put(y[i].qh, y[i].qs, q);
    }
}

/* Q5_1: as Q4_1 with 32 levels: d = (max - min) / 31, m = min, quants
 * rounded against the f16 values actually stored. */
static void quantize_q5_1(const float *x, tf_block_q5_1 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += TF_QK5_1) {
        float lo = x[0], hi = x[0];
        for (int j = 1; j < TF_QK5_1; j++) { lo = fminf(lo, x[j]); hi = fmaxf(hi, x[j]); }
        y[i].d = tf_f32_to_f16((hi - lo) / 31.0f);
        y[i].m = tf_f32_to_f16(lo);
        float d = tf_f16_to_f32(y[i].d), m = tf_f16_to_f32(y[i].m);
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        int q[TF_QK5_1];
        for (int j = 0; j < TF_QK5_1; j++) q[j] = clampi((int)nearbyintf((x[j] - m) * id), 0, 31);
        q5_put(y[i].qh, y[i].qs, q);
    }
}

/* Squared error of x ~ s * q - m over one sub-block of n elements, q the
 * nearest level in 0..nmax. */
static double kmin_err(const float *x, int n, int nmax, float s, float m) {
    double e = 0.0;
    for (int l = 0; l < n; l++) {
        int q = s > 0.0f ? clampi((int)nearbyintf((x[l] + m) / s), 0, nmax) : 0;
        double r = (double)s * q - m - x[l];
        e += r * r;
    }
    return e;
}

/* Refines one sub-block's (scale, min) from the range fit by alternating
 * least squares: assign quants, refit x ~ s q - m (m >= 0), keep the fit
 * while the error drops. */
static void kmin_fit(const float *x, int n, int nmax, float *scale, float *min) {
    float s = *scale, m = *min;
    double err = kmin_err(x, n, nmax, s, m);
    for (int it = 0; it < 6 && s > 0.0f; it++) {
        double sq = 0, sqq = 0, sx = 0, sqx = 0;
        for (int l = 0; l < n; l++) {
            int q = clampi((int)nearbyintf((x[l] + m) / s), 0, nmax);
            sq += q;
            sqq += (double)q * q;
            sx += x[l];
            sqx += (double)q * x[l];
        }
        double det = n * sqq - sq * sq;
        if (det <= 0.0) break;
        double ns = (n * sqx - sq * sx) / det, nm = (ns * sq - sx) / n;
        if (nm < 0.0) { nm = 0.0; ns = sqq > 0.0 ? sqx / sqq : 0.0; }
        if (!(ns > 0.0)) break;
        double e = kmin_err(x, n, nmax, (float)ns, (float)nm);
        if (e >= err) break;
        err = e;
        s = (float)ns;
        m = (float)nm;
    }
    *scale = s;
    *min = m;
}

/* The K-quants with a scale and a min per sub-block (Q2_K, Q4_K, Q5_K): a
 * super-block of 256 as n_sub sub-blocks, quants in 0..nmax, integer scales
 * and mins in 0..smax. Each sub-block's range [min(x, 0), max(x)] is mapped
 * onto 0..nmax and refined by least squares (kmin_fit, from the full range
 * and from ranges clipped by 10 and 20 %); the scales and mins are then
 * quantized against the super-block scales d and dmin (f16 bits written to
 * *d16, *dmin16), and the quants q[256] recomputed with the scales actually
 * stored. */
static void kmin_quantize(const float *x, int n_sub, int nmax, int smax, uint16_t *d16, uint16_t *dmin16, int *sc,
                          int *m, uint8_t *q) {
    int n = TF_QK_K / n_sub;
    float scale[16], min[16], max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < n_sub; j++) {
        const float *xs = x + n * j;
        float lo = 0.0f, hi = xs[0];
        for (int l = 0; l < n; l++) { lo = fminf(lo, xs[l]); hi = fmaxf(hi, xs[l]); }
        float s0 = (hi - lo) / (float)nmax, m0 = -lo;
        float best_s = s0, best_m = m0;
        double best_e = INFINITY;
        for (int c = 0; c < 3; c++) {
            float cs = s0 * (1.0f - 0.1f * (float)c), cm = m0 * (1.0f - 0.1f * (float)c);
            kmin_fit(xs, n, nmax, &cs, &cm);
            double e = kmin_err(xs, n, nmax, cs, cm);
            if (e < best_e) { best_e = e; best_s = cs; best_m = cm; }
        }
        scale[j] = best_s;
        min[j] = best_m;
        max_scale = fmaxf(max_scale, scale[j]);
        max_min = fmaxf(max_min, min[j]);
    }
    *d16 = tf_f32_to_f16(max_scale / (float)smax);
    *dmin16 = tf_f32_to_f16(max_min / (float)smax);
    float d = tf_f16_to_f32(*d16), dmin = tf_f16_to_f32(*dmin16);
    for (int j = 0; j < n_sub; j++) {
        sc[j] = d > 0.0f ? clampi((int)nearbyintf(scale[j] / d), 0, smax) : 0;
        m[j] = dmin > 0.0f ? clampi((int)nearbyintf(min[j] / dmin), 0, smax) : 0;
    }
    for (int e = 0; e < TF_QK_K; e++) {
        int j = e / n;
        float ds = d * (float)sc[j], dm = dmin * (float)m[j];
        q[e] = (uint8_t)(ds > 0.0f ? clampi((int)nearbyintf((x[e] + dm) / ds), 0, nmax) : 0);
    }
}

/* Q4_K: kmin_quantize with 8 sub-blocks of 32, 16 levels, 6-bit scales. */
static void quantize_q4_k(const float *x, tf_block_q4_k *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += TF_QK_K) {
        tf_block_q4_k *b = &y[i];
        int sc[8], m[8];
        uint8_t q[TF_QK_K];
        memset(b, 0, sizeof *b);
        kmin_quantize(x, 8, 15, 63, &b->d, &b->dmin, sc, m, q);
        tf_q4k_pack_scales(b->scales, sc, m);
        for (int e = 0; e < TF_QK_K; e++) {
            uint8_t *p = &b->qs[(e / 64) * 32 + e % 32];
            *p = (e % 64) < 32 ? (uint8_t)((*p & 0xF0) | q[e]) : (uint8_t)((*p & 0x0F) | (q[e] << 4));
        }
    }
}

/* Q5_K: as Q4_K with 32 levels; bit 4 of each quant goes to qh. */
static void quantize_q5_k(const float *x, tf_block_q5_k *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += TF_QK_K) {
        tf_block_q5_k *b = &y[i];
        int sc[8], m[8];
        uint8_t q[TF_QK_K];
        memset(b, 0, sizeof *b);
        kmin_quantize(x, 8, 31, 63, &b->d, &b->dmin, sc, m, q);
        tf_q4k_pack_scales(b->scales, sc, m);
        for (int e = 0; e < TF_QK_K; e++) {
            uint8_t *p = &b->qs[(e / 64) * 32 + e % 32];
            int lo = q[e] & 0xF;
            *p = (e % 64) < 32 ? (uint8_t)((*p & 0xF0) | lo) : (uint8_t)((*p & 0x0F) | (lo << 4));
            b->qh[e % 32] |= (uint8_t)((q[e] >> 4) << (e / 32));
        }
    }
}

/* Q2_K: kmin_quantize with 16 groups of 16, 4 levels, 4-bit scales and mins. */
static void quantize_q2_k(const float *x, tf_block_q2_k *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += TF_QK_K) {
        tf_block_q2_k *b = &y[i];
        int sc[16], m[16];
        uint8_t q[TF_QK_K];
        memset(b, 0, sizeof *b);
        kmin_quantize(x, 16, 3, 15, &b->d, &b->dmin, sc, m, q);
        for (int g = 0; g < 16; g++) b->scales[g] = (uint8_t)(sc[g] | (m[g] << 4));
        for (int e = 0; e < TF_QK_K; e++) tf_q2bits_put(b->qs, e, q[e]);
    }
}

/* Q3_K without a scale search, like Q6_K: each group of 16 gets scale
 * (signed value of largest magnitude) / -4; the 16 group scales are
 * quantized to -32..31 against d = (largest |scale|) / 31, and the quants
 * recomputed with the stored scales. */
static void quantize_q3_k(const float *x, tf_block_q3_k *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += TF_QK_K) {
        float gs[16], max_abs = 0.0f;
        for (int g = 0; g < 16; g++) {
            float amax = 0.0f, max = 0.0f;
            for (int l = 0; l < 16; l++)
                if (fabsf(x[16 * g + l]) > amax) { amax = fabsf(x[16 * g + l]); max = x[16 * g + l]; }
            gs[g] = max / -4.0f;
            max_abs = fmaxf(max_abs, fabsf(gs[g]));
        }
        tf_block_q3_k *b = &y[i];
        memset(b, 0, sizeof *b);
        b->d = tf_f32_to_f16(max_abs / 31.0f);
        float d = tf_f16_to_f32(b->d);
        int sc[16];
        for (int g = 0; g < 16; g++) {
            int s = d > 0.0f ? clampi((int)nearbyintf(gs[g] / d), -32, 31) : 0;
            sc[g] = s + 32;
            float ds = d * (float)s;
            for (int l = 0; l < 16; l++) {
                int e = 16 * g + l;
                int q = ds != 0.0f ? clampi((int)nearbyintf(x[e] / ds) + 4, 0, 7) : 4;
                tf_q2bits_put(b->qs, e, q);
                b->hmask[e % 32] |= (uint8_t)((q >> 2) << (4 * (e / 128) + (e % 128) / 32));
            }
        }
        tf_q3k_pack_scales(b->scales, sc);
    }
}

/* Q6_K without a scale search: each group of 16 gets scale (signed value of
 * largest magnitude) / -32, like Q4_0; the 16 group scales are quantized to
 * int8 against d, and the quants recomputed with the stored scales. */
static void quantize_q6_k(const float *x, tf_block_q6_k *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += TF_QK_K) {
        float gs[16], max_abs = 0.0f;
        for (int g = 0; g < 16; g++) {
            float amax = 0.0f, max = 0.0f;
            for (int l = 0; l < 16; l++)
                if (fabsf(x[16 * g + l]) > amax) { amax = fabsf(x[16 * g + l]); max = x[16 * g + l]; }
            gs[g] = max / -32.0f;
            max_abs = fmaxf(max_abs, fabsf(gs[g]));
        }
        tf_block_q6_k *b = &y[i];
        memset(b, 0, sizeof *b);
        b->d = tf_f32_to_f16(max_abs / 127.0f);
        float d = tf_f16_to_f32(b->d);
        for (int g = 0; g < 16; g++) {
            int s = d > 0.0f ? clampi((int)nearbyintf(gs[g] / d), -128, 127) : 0;
            b->scales[g] = (int8_t)s;
            float ds = d * (float)s;
            for (int l = 0; l < 16; l++) {
                int e = 16 * g + l;
                int q = ds != 0.0f ? clampi((int)nearbyintf(x[e] / ds) + 32, 0, 63) : 32;
                tf_q6k_put(b, e, q);
            }
        }
    }
}

/* IQ4: index of the table value nearest v (the lower one on a tie). */
static int iq4_nearest(float v) {
    int lo = 0, hi = 15; /* first value >= v, or 15 */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if ((float)tf_iq4_values[mid] < v) lo = mid + 1;
        else hi = mid;
    }
    if (lo > 0 && v - (float)tf_iq4_values[lo - 1] <= (float)tf_iq4_values[lo] - v) return lo - 1;
    return lo;
}

/* IQ4: the scale of one block of 32 values. Candidates map the block's
 * signed extreme onto table values at either end (-127 - 6 .. -127 + 6 and
 * 113 - 6 .. 113 + 6, in steps of 2); each is refitted by least squares to
 * the indices it gives (d = sum x V / sum V^2, which leaves the squared
 * error sum x^2 - (sum x V)^2 / sum V^2), and the refit with the smallest
 * error wins. 0 for an all-zero block. */
static float iq4_best_scale(const float *x) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax) { amax = fabsf(x[j]); max = x[j]; }
    if (amax == 0.0f) return 0.0f;
    static const int ends[2] = {-127, 113};
    double best_gain = -1.0;
    float best = max / (float)ends[0];
    for (int e = 0; e < 2; e++)
        for (int k = -3; k <= 3; k++) {
            float id = (float)(ends[e] + 2 * k) / max;
            double sxv = 0.0, svv = 0.0;
            for (int j = 0; j < 32; j++) {
                double v = tf_iq4_values[iq4_nearest(x[j] * id)];
                sxv += v * x[j];
                svv += v * v;
            }
            double gain = sxv * sxv / svv; /* svv >= 32: no table value is 0 */
            if (sxv != 0.0 && gain > best_gain) {
                best_gain = gain;
                best = (float)(sxv / svv);
            }
        }
    return best;
}

/* IQ4: the indices of 32 values for the stored scale d, packed as Q4_0's. */
static void iq4_pack(const float *x, float d, uint8_t *qs) {
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 16; j++)
        qs[j] = (uint8_t)(iq4_nearest(x[j] * id) | iq4_nearest(x[j + 16] * id) << 4);
}

static void quantize_iq4_nl(const float *x, tf_block_iq4_nl *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += TF_QK4_NL) {
        y[i].d = tf_f32_to_f16(iq4_best_scale(x));
        iq4_pack(x, tf_f16_to_f32(y[i].d), y[i].qs);
    }
}

/* IQ4_XS: each sub-block's scale as IQ4_NL's; the super-block scale d is the
 * largest of them in magnitude over -32 (so that one is stored exactly, as
 * ls - 32 = -32), the others rounded to multiples of d; the indices are then
 * chosen for the scales actually stored. */
static void quantize_iq4_xs(const float *x, tf_block_iq4_xs *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += TF_QK_K) {
        float s[8], smax = 0.0f;
        for (int ib = 0; ib < 8; ib++) {
            s[ib] = iq4_best_scale(x + 32 * ib);
            if (fabsf(s[ib]) > fabsf(smax)) smax = s[ib];
        }
        tf_block_iq4_xs *b = &y[i];
        memset(b, 0, sizeof *b);
        b->d = tf_f32_to_f16(smax / -32.0f);
        float d = tf_f16_to_f32(b->d);
        for (int ib = 0; ib < 8; ib++) {
            int l = d != 0.0f ? clampi((int)nearbyintf(s[ib] / d), -32, 31) : 0;
            b->scales_l[ib / 2] |= (uint8_t)(((l + 32) & 0xF) << (4 * (ib % 2)));
            b->scales_h |= (uint16_t)(((l + 32) >> 4) << (2 * ib));
            iq4_pack(x + 32 * ib, d * (float)l, b->qs + 16 * ib);
        }
    }
}

static void quantize_q8_k(const float *x, tf_block_q8_k *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += TF_QK_K) {
        float d = absmax(x, TF_QK_K) / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = d;
        for (int j = 0; j < TF_QK_K; j++) y[i].qs[j] = (int8_t)nearbyintf(x[j] * id);
        for (int g = 0; g < TF_QK_K / 16; g++) {
            int s = 0;
            for (int l = 0; l < 16; l++) s += y[i].qs[16 * g + l];
            y[i].bsums[g] = (int16_t)s;
        }
    }
}

/* Converts n floats to `type` (n a multiple of the block size). */
void tf_ref_quantize_row(tf_dtype type, const float *x, void *y, int64_t n) {
    switch ((int)type) {
    case TF_DTYPE_F32: memcpy(y, x, (size_t)n * sizeof(float)); break;
    case TF_DTYPE_F16:
        for (int64_t i = 0; i < n; i++) ((tf_f16 *)y)[i] = tf_f32_to_f16(x[i]);
        break;
    case TF_DTYPE_BF16:
        for (int64_t i = 0; i < n; i++) ((tf_bf16 *)y)[i] = tf_f32_to_bf16(x[i]);
        break;
    case TF_DTYPE_Q8_0: quantize_q8_0(x, y, n / TF_QK8_0); break;
    case TF_DTYPE_Q4_0: quantize_q4_0(x, y, n / TF_QK4_0); break;
    case TF_DTYPE_Q4_1: quantize_q4_1(x, y, n / TF_QK4_1); break;
    case TF_DTYPE_Q8_1: quantize_q8_1(x, y, n / TF_QK8_0); break;
    case TF_DTYPE_Q5_0: quantize_q5_0(x, y, n / TF_QK5_0); break;
    case TF_DTYPE_Q5_1: quantize_q5_1(x, y, n / TF_QK5_1); break;
    case TF_DTYPE_Q2_K: quantize_q2_k(x, y, n / TF_QK_K); break;
    case TF_DTYPE_Q3_K: quantize_q3_k(x, y, n / TF_QK_K); break;
    case TF_DTYPE_Q4_K: quantize_q4_k(x, y, n / TF_QK_K); break;
    case TF_DTYPE_Q5_K: quantize_q5_k(x, y, n / TF_QK_K); break;
    case TF_DTYPE_Q6_K: quantize_q6_k(x, y, n / TF_QK_K); break;
    case TF_DTYPE_Q8_K: quantize_q8_k(x, y, n / TF_QK_K); break;
    case TF_DTYPE_IQ4_NL: quantize_iq4_nl(x, y, n / TF_QK4_NL); break;
    case TF_DTYPE_IQ4_XS: quantize_iq4_xs(x, y, n / TF_QK_K); break;
    default: TF_ASSERT(!"tf_ref_quantize_row: unsupported type");
    }
}

/* ---- dequantize -------------------------------------------------------------- */

/* Converts n elements of `type` to floats (also accepts the activation
 * formats TF_DTYPE_Q8_1 and TF_DTYPE_Q8_K). */
void tf_ref_dequantize_row(tf_dtype type, const void *vx, float *y, int64_t n) {
    switch ((int)type) {
    case TF_DTYPE_F32: memcpy(y, vx, (size_t)n * sizeof(float)); break;
    case TF_DTYPE_F16:
        for (int64_t i = 0; i < n; i++) y[i] = tf_f16_to_f32(((const tf_f16 *)vx)[i]);
        break;
    case TF_DTYPE_BF16:
        for (int64_t i = 0; i < n; i++) y[i] = tf_bf16_to_f32(((const tf_bf16 *)vx)[i]);
        break;
    case TF_DTYPE_Q8_0: {
        const tf_block_q8_0 *x = vx;
        for (int64_t i = 0; i < n / TF_QK8_0; i++) {
            float d = tf_f16_to_f32(x[i].d);
            for (int j = 0; j < TF_QK8_0; j++) y[i * TF_QK8_0 + j] = d * (float)x[i].qs[j];
        }
        break;
    }
    case TF_DTYPE_Q4_0: {
        const tf_block_q4_0 *x = vx;
        for (int64_t i = 0; i < n / TF_QK4_0; i++) {
            float d = tf_f16_to_f32(x[i].d);
            float *o = y + i * TF_QK4_0;
            for (int j = 0; j < TF_QK4_0 / 2; j++) {
                o[j] = d * (float)((x[i].qs[j] & 0xF) - 8);
                o[j + 16] = d * (float)((x[i].qs[j] >> 4) - 8);
            }
        }
        break;
    }
    case TF_DTYPE_Q4_1: {
        const tf_block_q4_1 *x = vx;
        for (int64_t i = 0; i < n / TF_QK4_1; i++) {
            float d = tf_f16_to_f32(x[i].d), m = tf_f16_to_f32(x[i].m);
            float *o = y + i * TF_QK4_1;
            for (int j = 0; j < TF_QK4_1 / 2; j++) {
                o[j] = d * (float)(x[i].qs[j] & 0xF) + m;
                o[j + 16] = d * (float)(x[i].qs[j] >> 4) + m;
            }
        }
        break;
    }
    case TF_DTYPE_Q5_0: {
        const tf_block_q5_0 *x = vx;
        for (int64_t i = 0; i < n / TF_QK5_0; i++) {
            float d = tf_f16_to_f32(x[i].d);
            for (int j = 0; j < TF_QK5_0; j++) y[i * TF_QK5_0 + j] = d * (float)(q5_get(x[i].qh, x[i].qs, j) - 16);
        }
        break;
    }
    case TF_DTYPE_Q5_1: {
        const tf_block_q5_1 *x = vx;
        for (int64_t i = 0; i < n / TF_QK5_1; i++) {
            float d = tf_f16_to_f32(x[i].d), m = tf_f16_to_f32(x[i].m);
            for (int j = 0; j < TF_QK5_1; j++) y[i * TF_QK5_1 + j] = d * (float)q5_get(x[i].qh, x[i].qs, j) + m;
        }
        break;
    }
    case TF_DTYPE_Q2_K: {
        const tf_block_q2_k *x = vx;
        for (int64_t i = 0; i < n / TF_QK_K; i++) {
            float d = tf_f16_to_f32(x[i].d), dmin = tf_f16_to_f32(x[i].dmin);
            for (int e = 0; e < TF_QK_K; e++) {
                int s = x[i].scales[e / 16];
                y[i * TF_QK_K + e] = d * (float)(s & 0xF) * (float)tf_q2bits_get(x[i].qs, e) - dmin * (float)(s >> 4);
            }
        }
        break;
    }
    case TF_DTYPE_Q8_1: {
        const tf_block_q8_1 *x = vx;
        for (int64_t i = 0; i < n / TF_QK8_0; i++) {
            float d = tf_f16_to_f32(x[i].d);
            for (int j = 0; j < TF_QK8_0; j++) y[i * TF_QK8_0 + j] = d * (float)x[i].qs[j];
        }
        break;
    }
    case TF_DTYPE_Q3_K: {
        const tf_block_q3_k *x = vx;
        for (int64_t i = 0; i < n / TF_QK_K; i++) {
            float d = tf_f16_to_f32(x[i].d);
            for (int e = 0; e < TF_QK_K; e++)
                y[i * TF_QK_K + e] =
                    d * (float)(tf_q3k_scale(x[i].scales, e / 16) - 32) * (float)(tf_q3k_get(&x[i], e) - 4);
        }
        break;
    }
    case TF_DTYPE_Q5_K: {
        const tf_block_q5_k *x = vx;
        int q[TF_QK_K];
        for (int64_t i = 0; i < n / TF_QK_K; i++) {
            for (int e = 0; e < TF_QK_K; e++) q[e] = q5k_get(&x[i], e);
            kmin_dequant(q, x[i].scales, x[i].d, x[i].dmin, y + i * TF_QK_K);
        }
        break;
    }
    case TF_DTYPE_Q4_K: {
        const tf_block_q4_k *x = vx;
        int q[TF_QK_K];
        for (int64_t i = 0; i < n / TF_QK_K; i++) {
            for (int e = 0; e < TF_QK_K; e++) q[e] = q4k_get(&x[i], e);
            kmin_dequant(q, x[i].scales, x[i].d, x[i].dmin, y + i * TF_QK_K);
        }
        break;
    }
    case TF_DTYPE_Q6_K: {
        const tf_block_q6_k *x = vx;
        for (int64_t i = 0; i < n / TF_QK_K; i++) {
            float d = tf_f16_to_f32(x[i].d);
            for (int e = 0; e < TF_QK_K; e++)
                y[i * TF_QK_K + e] = d * (float)x[i].scales[e / 16] * (float)(tf_q6k_get(&x[i], e) - 32);
        }
        break;
    }
    case TF_DTYPE_Q8_K: {
        const tf_block_q8_k *x = vx;
        for (int64_t i = 0; i < n / TF_QK_K; i++)
            for (int j = 0; j < TF_QK_K; j++) y[i * TF_QK_K + j] = x[i].d * (float)x[i].qs[j];
        break;
    }
    case TF_DTYPE_IQ4_NL: {
        const tf_block_iq4_nl *x = vx;
        for (int64_t i = 0; i < n / TF_QK4_NL; i++) {
            float d = tf_f16_to_f32(x[i].d);
            float *o = y + i * TF_QK4_NL;
            for (int j = 0; j < 16; j++) {
                o[j] = d * (float)tf_iq4_values[x[i].qs[j] & 0xF];
                o[j + 16] = d * (float)tf_iq4_values[x[i].qs[j] >> 4];
            }
        }
        break;
    }
    case TF_DTYPE_IQ4_XS: {
        const tf_block_iq4_xs *x = vx;
        for (int64_t i = 0; i < n / TF_QK_K; i++)
            for (int ib = 0; ib < 8; ib++) {
                float dl = tf_f16_to_f32(x[i].d) * (float)(tf_iq4_xs_scale(&x[i], ib) - 32);
                const uint8_t *qs = x[i].qs + 16 * ib;
                float *o = y + i * TF_QK_K + 32 * ib;
                for (int j = 0; j < 16; j++) {
                    o[j] = dl * (float)tf_iq4_values[qs[j] & 0xF];
                    o[j + 16] = dl * (float)tf_iq4_values[qs[j] >> 4];
                }
            }
        break;
    }
    default: TF_ASSERT(!"tf_ref_dequantize_row: unsupported type");
    }
}

/* f32 -> the activation format of weight type wtype. */
void tf_ref_act_quantize(tf_dtype wtype, const float *x, void *y, int64_t n) {
    tf_ref_quantize_row(tf_act_type(wtype), x, y, n);
}

/* ---- dot products ------------------------------------------------------------ */

/* Dot product of one weight row with one activation row (in act(wtype)).
 * Integer sums per block, accumulated across blocks in double. */
float tf_ref_vec_dot(tf_dtype wtype, int64_t n, const void *vw, const void *vact) {
    double sum = 0.0;
    switch (wtype) {
    case TF_DTYPE_F32: {
        const float *w = vw, *a = vact;
        for (int64_t i = 0; i < n; i++) sum += (double)w[i] * (double)a[i];
        break;
    }
    case TF_DTYPE_F16: {
        const tf_f16 *w = vw;
        const float *a = vact;
        for (int64_t i = 0; i < n; i++) sum += (double)tf_f16_to_f32(w[i]) * (double)a[i];
        break;
    }
    case TF_DTYPE_BF16: {
        const tf_bf16 *w = vw;
        const float *a = vact;
        for (int64_t i = 0; i < n; i++) sum += (double)tf_bf16_to_f32(w[i]) * (double)a[i];
        break;
    }
    case TF_DTYPE_Q8_0: {
        const tf_block_q8_0 *w = vw, *a = vact;
        for (int64_t i = 0; i < n / TF_QK8_0; i++) {
            int s = 0;
            for (int j = 0; j < TF_QK8_0; j++) s += w[i].qs[j] * a[i].qs[j];
            sum += (double)tf_f16_to_f32(w[i].d) * (double)tf_f16_to_f32(a[i].d) * s;
        }
        break;
    }
    case TF_DTYPE_Q4_0: {
        const tf_block_q4_0 *w = vw;
        const tf_block_q8_0 *a = vact;
        for (int64_t i = 0; i < n / TF_QK4_0; i++) {
            int s = 0;
            for (int j = 0; j < TF_QK4_0 / 2; j++) {
                s += ((w[i].qs[j] & 0xF) - 8) * a[i].qs[j];
                s += ((w[i].qs[j] >> 4) - 8) * a[i].qs[j + 16];
            }
            sum += (double)tf_f16_to_f32(w[i].d) * (double)tf_f16_to_f32(a[i].d) * s;
        }
        break;
    }
    case TF_DTYPE_Q4_1: {
        const tf_block_q4_1 *w = vw;
        const tf_block_q8_1 *a = vact;
        for (int64_t i = 0; i < n / TF_QK4_1; i++) {
            int s = 0;
            for (int j = 0; j < TF_QK4_1 / 2; j++) {
                s += (w[i].qs[j] & 0xF) * a[i].qs[j];
                s += (w[i].qs[j] >> 4) * a[i].qs[j + 16];
            }
            double da = tf_f16_to_f32(a[i].d);
            sum += (double)tf_f16_to_f32(w[i].d) * da * s + (double)tf_f16_to_f32(w[i].m) * da * a[i].sum;
        }
        break;
    }
    case TF_DTYPE_Q5_0: {
        const tf_block_q5_0 *w = vw;
        const tf_block_q8_0 *a = vact;
        for (int64_t i = 0; i < n / TF_QK5_0; i++) {
            int s = 0;
            for (int j = 0; j < TF_QK5_0; j++) s += (q5_get(w[i].qh, w[i].qs, j) - 16) * a[i].qs[j];
            sum += (double)tf_f16_to_f32(w[i].d) * (double)tf_f16_to_f32(a[i].d) * s;
        }
        break;
    }
    case TF_DTYPE_Q5_1: {
        const tf_block_q5_1 *w = vw;
        const tf_block_q8_1 *a = vact;
        for (int64_t i = 0; i < n / TF_QK5_1; i++) {
            int s = 0;
            for (int j = 0; j < TF_QK5_1; j++) s += q5_get(w[i].qh, w[i].qs, j) * a[i].qs[j];
            double da = tf_f16_to_f32(a[i].d);
            sum += (double)tf_f16_to_f32(w[i].d) * da * s + (double)tf_f16_to_f32(w[i].m) * da * a[i].sum;
        }
        break;
    }
    case TF_DTYPE_Q2_K: {
        const tf_block_q2_k *w = vw;
        const tf_block_q8_k *a = vact;
        for (int64_t i = 0; i < n / TF_QK_K; i++) {
            int64_t s_scaled = 0, s_min = 0;
            for (int g = 0; g < 16; g++) {
                int s = 0;
                for (int l = 0; l < 16; l++) s += tf_q2bits_get(w[i].qs, 16 * g + l) * a[i].qs[16 * g + l];
                s_scaled += (int64_t)(w[i].scales[g] & 0xF) * s;
                s_min += (int64_t)(w[i].scales[g] >> 4) * a[i].bsums[g];
            }
            double da = a[i].d;
            sum += (double)tf_f16_to_f32(w[i].d) * da * (double)s_scaled -
                   (double)tf_f16_to_f32(w[i].dmin) * da * (double)s_min;
        }
        break;
    }
    case TF_DTYPE_Q3_K: {
        const tf_block_q3_k *w = vw;
        const tf_block_q8_k *a = vact;
        for (int64_t i = 0; i < n / TF_QK_K; i++) {
            int64_t s_scaled = 0;
            for (int g = 0; g < 16; g++) {
                int s = 0;
                for (int l = 0; l < 16; l++) s += (tf_q3k_get(&w[i], 16 * g + l) - 4) * a[i].qs[16 * g + l];
                s_scaled += (int64_t)(tf_q3k_scale(w[i].scales, g) - 32) * s;
            }
            sum += (double)tf_f16_to_f32(w[i].d) * (double)a[i].d * (double)s_scaled;
        }
        break;
    }
    case TF_DTYPE_Q5_K: {
        const tf_block_q5_k *w = vw;
        const tf_block_q8_k *a = vact;
        int q[TF_QK_K];
        for (int64_t i = 0; i < n / TF_QK_K; i++) {
            for (int e = 0; e < TF_QK_K; e++) q[e] = q5k_get(&w[i], e);
            sum += kmin_dot(q, w[i].scales, w[i].d, w[i].dmin, &a[i]);
        }
        break;
    }
    case TF_DTYPE_Q4_K: {
        const tf_block_q4_k *w = vw;
        const tf_block_q8_k *a = vact;
        int q[TF_QK_K];
        for (int64_t i = 0; i < n / TF_QK_K; i++) {
            for (int e = 0; e < TF_QK_K; e++) q[e] = q4k_get(&w[i], e);
            sum += kmin_dot(q, w[i].scales, w[i].d, w[i].dmin, &a[i]);
        }
        break;
    }
    case TF_DTYPE_Q6_K: {
        const tf_block_q6_k *w = vw;
        const tf_block_q8_k *a = vact;
        for (int64_t i = 0; i < n / TF_QK_K; i++) {
            int64_t s_scaled = 0;
            for (int g = 0; g < 16; g++) {
                int s = 0;
                for (int l = 0; l < 16; l++) s += (tf_q6k_get(&w[i], 16 * g + l) - 32) * a[i].qs[16 * g + l];
                s_scaled += (int64_t)w[i].scales[g] * s;
            }
            sum += (double)tf_f16_to_f32(w[i].d) * (double)a[i].d * (double)s_scaled;
        }
        break;
    }
    case TF_DTYPE_IQ4_NL: case TF_DTYPE_IQ4_XS: {
        /* a sub-block of 32 against one Q8_0 block at a time */
        const tf_block_q8_0 *a = vact;
        for (int64_t i = 0; i < n / 32; i++) {
            float dw;
            const uint8_t *qs;
            if (wtype == TF_DTYPE_IQ4_NL) {
                const tf_block_iq4_nl *w = (const tf_block_iq4_nl *)vw + i;
                dw = tf_f16_to_f32(w->d);
                qs = w->qs;
            } else {
                const tf_block_iq4_xs *w = (const tf_block_iq4_xs *)vw + i / 8;
                dw = tf_f16_to_f32(w->d) * (float)(tf_iq4_xs_scale(w, (int)(i % 8)) - 32);
                qs = w->qs + 16 * (i % 8);
            }
            int s = 0;
            for (int j = 0; j < 16; j++) {
                s += tf_iq4_values[qs[j] & 0xF] * a[i].qs[j];
                s += tf_iq4_values[qs[j] >> 4] * a[i].qs[j + 16];
            }
            sum += (double)dw * (double)tf_f16_to_f32(a[i].d) * s;
        }
        break;
    }
    default: TF_ASSERT(!"tf_ref_vec_dot: unsupported weight type");
    }
    return (float)sum;
}
