/*
 * quant_r16_amx_avx512.c — the AMX table's Q8_0 matrix products over R16
 * weights (quant.h "Row-interleaved weight groups") and its R16 activations.
 *
 * The packed path (quant_packed_avx512.c) holds 16 blocks of one weight row
 * in a vector's lanes, so each token costs 8 vpdpbusd per 16 blocks of every
 * row. In R16 a block of 16 rows is one B operand of the tile unit's int8
 * product: TDPBSUD multiplies up to 16 tokens' quants of that block (the A
 * tile: each token's 32 quants as they lie in its Q8_0 block) by the 16 rows'
 * quants (+ 128) and leaves every (token, row) block sum in the C tile, for
 * up to 16 tokens at the cost of one instruction; consecutive blocks use
 * alternate tiles, so one block's product runs while the vector unit does
 * the float steps of the block before. Up to 4 tokens go through vpdpbusd
 * instead (8 per block of 16 rows and token, the token's 4 quants
 * broadcast; below 5 tokens the tile unit's fixed cost per block is more).
 *
 * Both give the same exact block sums (the +128 removed by the activation's
 * ex term) and then the same float steps, acc = fma(isum, d_w d_a, acc)
 * block after block, 16 rows per vector: a row's result is bitwise
 * tf_ref_r16_dot whichever path ran it and however many tokens came with it
 * (the batch invariance greedy equality rests on). Compiled without FMA
 * contraction (Makefile).
 */
#pragma GCC target("avx512vnni,amx-tile,amx-int8")
#include "backend/cpu/quant_impl.h"

#include <immintrin.h>
#include <string.h>

#define TF_AI static inline __attribute__((always_inline))
#define R16 16
#define BLOCK_BYTES ((int)sizeof(tf_block_q8_0))

TF_AI int32_t quad(const int8_t *q) {
    int32_t v;
    memcpy(&v, q, 4);
    return v;
}

/* The nr rows' block scales of a record as f32. */
TF_AI __m512 rec_scales(const uint8_t *rec, int nr, int full) {
    const __m256i h = full ? _mm256_loadu_si256((const __m256i *)(rec + 32 * R16))
                           : _mm256_maskz_loadu_epi16((__mmask16)((1u << nr) - 1), rec + 32 * nr);
    return _mm512_cvtph_ps(h);
}

TF_AI __m512i rec_quads(const uint8_t *rec, int nr, int full, int v) {
    return full ? _mm512_loadu_si512(rec + 4 * R16 * v)
                : _mm512_maskz_loadu_epi32((__mmask16)((1u << nr) - 1), rec + 4 * nr * v);
}

/* Records this far ahead are requested into L1 as each is read (the rows
 * stream from memory; the hardware prefetchers alone fall behind). */
#define PREFETCH_RECORDS 4

TF_AI void prefetch_record(const uint8_t *p, size_t rb) {
    for (size_t o = 0; o < rb; o += 64) _mm_prefetch((const char *)p + o, _MM_HINT_T0);
}

/* T tokens (their R16 activation rows as bytes apart from a) against a
 * group of nr rows, with vpdpbusd: each weight vector loaded once for the T
 * tokens. */
TF_AI void vnni_group(int T, int full, int64_t nb, const uint8_t *grp, int nr, const char *a, size_t as, size_t side,
                      float *out, int64_t ldo) {
    const size_t rb = (size_t)nr * BLOCK_BYTES;
    const tf_block_q8_0 *x[4];
    const float *ad[4];
    const int32_t *ex[4];
    __m512 acc[4];
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
        x[t] = (const tf_block_q8_0 *)(a + (size_t)t * as);
        ad[t] = (const float *)(a + (size_t)t * as + side);
        ex[t] = (const int32_t *)(ad[t] + nb);
        acc[t] = _mm512_setzero_ps();
    }
    const uint8_t *rec = grp;
    for (int64_t b = 0; b < nb; b++, rec += rb) {
        prefetch_record(rec + PREFETCH_RECORDS * rb, rb);
        __m512i s0[4], s1[4];
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) s0[t] = _mm512_set1_epi32(ex[t][b]), s1[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int v = 0; v < 8; v += 2) {
            const __m512i w0 = rec_quads(rec, nr, full, v), w1 = rec_quads(rec, nr, full, v + 1);
#pragma GCC unroll 4
            for (int t = 0; t < T; t++) {
                const int8_t *q = x[t][b].qs;
                s0[t] = _mm512_dpbusd_epi32(s0[t], w0, _mm512_set1_epi32(quad(q + 4 * v)));
                s1[t] = _mm512_dpbusd_epi32(s1[t], w1, _mm512_set1_epi32(quad(q + 4 * v + 4)));
            }
        }
        const __m512 dw = rec_scales(rec, nr, full);
#pragma GCC unroll 4
        for (int t = 0; t < T; t++)
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0[t], s1[t])),
                                     _mm512_mul_ps(dw, _mm512_set1_ps(ad[t][b])), acc[t]);
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; t++)
        _mm512_mask_storeu_ps(out + t * ldo, (__mmask16)(full ? 0xFFFF : (1u << nr) - 1), acc[t]);
}

/* Tokens [0, nt) against a group through vnni_group, up to VNNI_TOKS at a time. */
#define VNNI_TOKS 4
static void vnni_tokens(int64_t nb, const uint8_t *grp, int nr, const char *a, size_t as, size_t side, int nt,
                        float *out, int64_t ldo) {
    for (int t = 0; t < nt; t += VNNI_TOKS) {
        const int T = nt - t < VNNI_TOKS ? nt - t : VNNI_TOKS;
        const char *at = a + (size_t)t * as;
        float *o = out + t * ldo;
        switch (T + 4 * (nr == R16)) {
        case 1: vnni_group(1, 0, nb, grp, nr, at, as, side, o, ldo); break;
        case 2: vnni_group(2, 0, nb, grp, nr, at, as, side, o, ldo); break;
        case 3: vnni_group(3, 0, nb, grp, nr, at, as, side, o, ldo); break;
        case 4: vnni_group(4, 0, nb, grp, nr, at, as, side, o, ldo); break;
        case 5: vnni_group(1, 1, nb, grp, R16, at, as, side, o, ldo); break;
        case 6: vnni_group(2, 1, nb, grp, R16, at, as, side, o, ldo); break;
        case 7: vnni_group(3, 1, nb, grp, R16, at, as, side, o, ldo); break;
        default: vnni_group(4, 1, nb, grp, R16, at, as, side, o, ldo); break;
        }
    }
}

/* ---- the tile unit --------------------------------------------------------------- */

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_cfg;
_Static_assert(sizeof(amx_cfg) == 64, "LDTILECFG reads 64 bytes");

/* Tiles 0 / 1: C (m tokens x 16 rows, int32), 2 / 3: A (m tokens x a block's
 * 32 quants), 4 / 5: B (a block of 16 rows); consecutive blocks alternate. */
static void amx_begin(int m) {
    _Alignas(64) amx_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 2; i++) {
        cfg.rows[i] = (uint8_t)m, cfg.colsb[i] = 64;
        cfg.rows[2 + i] = (uint8_t)m, cfg.colsb[2 + i] = 32;
        cfg.rows[4 + i] = 8, cfg.colsb[4 + i] = 64;
    }
    /* the stores above must reach memory before LDTILECFG reads it */
    __asm__ __volatile__("" : : "r"(&cfg) : "memory");
    _tile_loadconfig(&cfg);
}

/* C (tile 0 or 1 by p) = A . B for one block of 16 rows (A, B: tiles 2 + p,
 * 4 + p), stored to cb. */
TF_AI void tile_block(int p, const uint8_t *rec, const char *a, size_t as, int32_t (*cb)[16]) {
    if (p) {
        _tile_zero(1);
        _tile_loadd(3, a, as);
        _tile_loadd(5, rec, 64);
        _tile_dpbsud(1, 3, 5);
        _tile_stored(1, cb, 64);
    } else {
        _tile_zero(0);
        _tile_loadd(2, a, as);
        _tile_loadd(4, rec, 64);
        _tile_dpbsud(0, 2, 4);
        _tile_stored(0, cb, 64);
    }
}

/* M tokens (the tiles configured for M rows) against a whole group of 16
 * rows: per block the tiles' sums, then every token's float step, its
 * accumulator in a register. */
TF_AI void tile_group(int M, int64_t nb, const uint8_t *grp, const char *act, size_t as, size_t side, float *out,
                      int64_t ldo) {
    const size_t rb = (size_t)R16 * BLOCK_BYTES;
    _Alignas(64) int32_t cbuf[2][R16][16]; /* [p][token][row] */
    const float *ad[R16];
    const int32_t *ex[R16];
#pragma GCC unroll 16
    for (int t = 0; t < M; t++) {
        ad[t] = (const float *)(act + (size_t)t * as + side);
        ex[t] = (const int32_t *)(ad[t] + nb);
    }
    __m512 acc[R16];
#pragma GCC unroll 16
    for (int t = 0; t < M; t++) acc[t] = _mm512_setzero_ps();
    const uint8_t *rec = grp;
    for (int64_t b = 0; b < nb; b++, rec += rb) {
        const int p = (int)(b & 1);
        prefetch_record(rec + PREFETCH_RECORDS * rb, rb);
        tile_block(p, rec, act + (size_t)b * BLOCK_BYTES + 2, as, cbuf[p]);
        const __m512 dw = rec_scales(rec, R16, 1);
#pragma GCC unroll 16
        for (int t = 0; t < M; t++) {
            const __m512i s = _mm512_add_epi32(_mm512_load_si512(cbuf[p][t]), _mm512_set1_epi32(ex[t][b]));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, _mm512_set1_ps(ad[t][b])), acc[t]);
        }
    }
#pragma GCC unroll 16
    for (int t = 0; t < M; t++) _mm512_storeu_ps(out + t * ldo, acc[t]);
}

static void tile_group_m(int m, int64_t nb, const uint8_t *grp, const char *act, size_t as, size_t side, float *out,
                         int64_t ldo) {
    switch (m) {
#define TG_CASE(M) \
    case M: tile_group(M, nb, grp, act, as, side, out, ldo); break;
        TG_CASE(5) TG_CASE(6) TG_CASE(7) TG_CASE(8) TG_CASE(9)
        TG_CASE(10) TG_CASE(11) TG_CASE(12) TG_CASE(13) TG_CASE(14) TG_CASE(15)
        default: tile_group(16, nb, grp, act, as, side, out, ldo); break;
#undef TG_CASE
    }
}

void tf_amx_r16_rows_q8_0(int64_t n, const void *w, int64_t n_rows, int64_t r0, int64_t r1, const void *vact,
                          size_t as, int nt, float *out, int64_t ldo) {
    const int64_t nb = n / 32;
    const size_t row = (size_t)nb * BLOCK_BYTES, side = tf_act_r16_side_offset(n);
    const char *act = vact;
    /* more than VNNI_TOKS tokens: in tiles of m = min(nt, 16) (the tiles are
     * configured for m rows); fewer, the rest of a count past 16 that is not
     * a multiple of it, and the rows of a partial group: through VNNI */
    const int tiles = nt > VNNI_TOKS, m = nt < R16 ? nt : R16, n_tiled = nt < R16 ? nt : nt / R16 * R16;
    if (tiles) amx_begin(m);
    for (int64_t r = r0; r < r1; r += R16) {
        const int nr = n_rows - r < R16 ? (int)(n_rows - r) : R16;
        const uint8_t *grp = (const uint8_t *)w + (size_t)r * row;
        float *o = out + (r - r0);
        int t = 0;
        if (tiles && nr == R16)
            for (; t < n_tiled; t += m) tile_group_m(m, nb, grp, act + (size_t)t * as, as, side, o + t * ldo, ldo);
        vnni_tokens(nb, grp, nr, act + (size_t)t * as, as, side, nt - t, o + t * ldo, ldo);
    }
    if (tiles) _tile_release();
}

/* f32 -> R16 activations: the table's Q8_0 quantizer (bitwise the
 * reference's blocks), then the side values. */
void tf_amx_act_r16_q8_0(const float *x, void *y, int64_t n) {
    tf_avx512_quantize_q8_0(x, y, n);
    tf_act_r16_side(y, n);
}
