/*
 * quant_r16_amx_avx512.c — the AMX table's Q8_0, Q4_0, Q4_1 and IQ4_NL
 * matrix products over R16 weights (quant.h "Row-interleaved weight
 * groups") and its R16 activations.
 *
 * The packed path (quant_packed_avx512.c) holds 16 blocks of one weight row
 * in a vector's lanes, so each token costs 8 vpdpbusd per 16 blocks of every
 * row. In R16 a block of 16 rows is one B operand of the tile unit's int8
 * product: TDPBSUD multiplies up to 16 tokens' quants of that block (the A
 * tile: each token's 32 quants as they lie in its activation block) by the
 * 16 rows' quants and leaves every (token, row) block sum in the C tile at
 * the cost of one instruction. The B operand is the record itself for Q8_0
 * (quants + 128); the 4-bit types' nibbles (IQ4_NL's looked up in its value
 * table, + 128) are spread to bytes in a small ring two blocks ahead, since
 * a tile cannot load nibbles and a tile load right after the stores that
 * wrote its bytes waits for them. Consecutive blocks use alternate tiles, so
 * one block's product runs while the vector unit does the float steps of
 * the block before. Up to 4 tokens go through vpdpbusd instead (8 per block
 * of 16 rows and token, the token's 4 quants broadcast; below 5 tokens the
 * tile unit's fixed cost per block is more).
 *
 * Both give the same exact block sums (the u8 weights' offset removed by the
 * activation's ex term) and then the same float steps, acc = fma(isum,
 * d_w d_a, acc) (Q4_1: then acc = fma(m_w, d_a sum_a, acc)) block after
 * block, 16 rows per vector: a row's result is bitwise tf_ref_r16_dot
 * whichever path ran it and however many tokens came with it (the batch
 * invariance greedy equality rests on). Compiled without FMA contraction
 * (Makefile).
 */
#pragma GCC target("avx512vnni,amx-tile,amx-int8")
#include "backend/cpu/quant_impl.h"

#include <immintrin.h>
#include <string.h>

#define TF_AI static inline __attribute__((always_inline))
#define R16 16
enum { K8, K40, K41, KNL }; /* Q8_0, Q4_0, Q4_1, IQ4_NL */

TF_AI int wbytes(int kind) { return kind == K8 ? 34 : kind == K41 ? 20 : 18; } /* bytes of a weight block */
TF_AI int abytes(int kind) { return kind == K41 ? 36 : 34; } /* bytes of an activation block (Q8_1, Q8_0) */
TF_AI int aqoff(int kind) { return kind == K41 ? 4 : 2; }    /* its quants' offset */
TF_AI int doff(int kind, int nr) { return (kind == K8 ? 32 : 16) * nr; } /* d[] in a record */
TF_AI int int_ex(int kind) { return kind != K41; } /* the ex term is an int32 start of the block sum */

TF_AI int32_t quad(const char *q) {
    int32_t v;
    memcpy(&v, q, 4);
    return v;
}

TF_AI __mmask16 row_mask(int nr) { return (__mmask16)(nr >= R16 ? 0xFFFF : (1u << nr) - 1); }

/* 16 (or nr) f16 values of a record as f32. */
TF_AI __m512 rec_f16(const uint8_t *p, int nr, int full) {
    const __m256i h = full ? _mm256_loadu_si256((const __m256i *)p) : _mm256_maskz_loadu_epi16(row_mask(nr), p);
    return _mm512_cvtph_ps(h);
}

TF_AI __m512i rec_vec(const uint8_t *p, int nr, int full) {
    return full ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi32(row_mask(nr), p);
}

/* A record's quants as the 8 u8 vectors of the B operand: w[v] holds quants
 * 4 v .. 4 v + 3 of each row (4-bit types: low nibbles of y[v], then high;
 * IQ4_NL: looked up in the value table + 128). */
TF_AI __m512i nl_table(int kind) { /* IQ4_NL's values + 128 in every 128-bit lane */
    if (kind != KNL) return _mm512_setzero_si512();
    int8_t t[16];
    for (int i = 0; i < 16; i++) t[i] = (int8_t)(tf_iq4_values[i] + 128);
    return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)t));
}

TF_AI void rec_quants(int kind, const uint8_t *rec, int nr, int full, __m512i tbl, __m512i w[8]) {
    if (kind == K8) {
#pragma GCC unroll 8
        for (int v = 0; v < 8; v++) w[v] = rec_vec(rec + 4 * nr * v, nr, full);
    } else {
        const __m512i lo4 = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) {
            const __m512i y = rec_vec(rec + 4 * nr * v, nr, full);
            w[v] = _mm512_and_si512(y, lo4);
            w[v + 4] = _mm512_and_si512(_mm512_srli_epi16(y, 4), lo4);
            if (kind == KNL) {
                w[v] = _mm512_shuffle_epi8(tbl, w[v]);
                w[v + 4] = _mm512_shuffle_epi8(tbl, w[v + 4]);
            }
        }
    }
}

/* Records this far ahead are requested into L1 as each is read (the rows
 * stream from memory; the hardware prefetchers alone fall behind). */
#define PREFETCH_RECORDS 16

TF_AI void prefetch_record(const uint8_t *p, size_t rb) {
    for (size_t o = 0; o < rb; o += 64) _mm_prefetch((const char *)p + o, _MM_HINT_T0);
}

/* T tokens (their R16 activation rows as bytes apart from a) against a
 * group of nr rows, with vpdpbusd: each weight vector loaded once for the T
 * tokens. */
TF_AI void vnni_group(int kind, int T, int full, int64_t nb, const uint8_t *grp, int nr, const char *a, size_t as,
                      size_t side, float *out, int64_t ldo) {
    const size_t rb = (size_t)nr * wbytes(kind);
    const __m512i tbl = nl_table(kind);
    const float *ad[4];
    const char *ex[4];
    __m512 acc[4];
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
        ad[t] = (const float *)(a + (size_t)t * as + side);
        ex[t] = (const char *)(ad[t] + nb);
        acc[t] = _mm512_setzero_ps();
    }
    const uint8_t *rec = grp;
    for (int64_t b = 0; b < nb; b++, rec += rb) {
        prefetch_record(rec + PREFETCH_RECORDS * rb, rb);
        __m512i w[8], s0[4], s1[4];
        rec_quants(kind, rec, nr, full, tbl, w);
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            s0[t] = int_ex(kind) ? _mm512_set1_epi32(quad(ex[t] + 4 * b)) : _mm512_setzero_si512();
            s1[t] = _mm512_setzero_si512();
        }
#pragma GCC unroll 4
        for (int v = 0; v < 8; v += 2)
#pragma GCC unroll 4
            for (int t = 0; t < T; t++) {
                const char *q = a + (size_t)t * as + (size_t)b * abytes(kind) + aqoff(kind);
                s0[t] = _mm512_dpbusd_epi32(s0[t], w[v], _mm512_set1_epi32(quad(q + 4 * v)));
                s1[t] = _mm512_dpbusd_epi32(s1[t], w[v + 1], _mm512_set1_epi32(quad(q + 4 * v + 4)));
            }
        const __m512 dw = rec_f16(rec + doff(kind, nr), nr, full);
        const __m512 mw = kind == K41 ? rec_f16(rec + 18 * nr, nr, full) : dw;
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0[t], s1[t])),
                                     _mm512_mul_ps(dw, _mm512_set1_ps(ad[t][b])), acc[t]);
            if (kind == K41) {
                float e;
                memcpy(&e, ex[t] + 4 * b, 4);
                acc[t] = _mm512_fmadd_ps(mw, _mm512_set1_ps(e), acc[t]);
            }
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) _mm512_mask_storeu_ps(out + t * ldo, row_mask(nr), acc[t]);
}

/* Tokens [0, nt) against a group through vnni_group, up to VNNI_TOKS at a time. */
#define VNNI_TOKS 4
TF_AI void vnni_tokens(int kind, int64_t nb, const uint8_t *grp, int nr, const char *a, size_t as, size_t side,
                       int nt, float *out, int64_t ldo) {
    for (int t = 0; t < nt; t += VNNI_TOKS) {
        const int T = nt - t < VNNI_TOKS ? nt - t : VNNI_TOKS;
        const char *at = a + (size_t)t * as;
        float *o = out + t * ldo;
        switch (T + 4 * (nr == R16)) {
        case 1: vnni_group(kind, 1, 0, nb, grp, nr, at, as, side, o, ldo); break;
        case 2: vnni_group(kind, 2, 0, nb, grp, nr, at, as, side, o, ldo); break;
        case 3: vnni_group(kind, 3, 0, nb, grp, nr, at, as, side, o, ldo); break;
        case 4: vnni_group(kind, 4, 0, nb, grp, nr, at, as, side, o, ldo); break;
        case 5: vnni_group(kind, 1, 1, nb, grp, R16, at, as, side, o, ldo); break;
        case 6: vnni_group(kind, 2, 1, nb, grp, R16, at, as, side, o, ldo); break;
        case 7: vnni_group(kind, 3, 1, nb, grp, R16, at, as, side, o, ldo); break;
        default: vnni_group(kind, 4, 1, nb, grp, R16, at, as, side, o, ldo); break;
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
TF_AI void tile_block(int p, const void *bq, const char *a, size_t as, int32_t (*cb)[16]) {
    if (p) {
        _tile_zero(1);
        _tile_loadd(3, a, as);
        _tile_loadd(5, bq, 64);
        _tile_dpbsud(1, 3, 5);
        _tile_stored(1, cb, 64);
    } else {
        _tile_zero(0);
        _tile_loadd(2, a, as);
        _tile_loadd(4, bq, 64);
        _tile_dpbsud(0, 2, 4);
        _tile_stored(0, cb, 64);
    }
}

/* 4-bit types: block b's nibbles spread to the B operand's bytes in ring
 * slot b % 4 (written two blocks before its tile load reads it). */
#define RING 4
#define RING_AHEAD 2
TF_AI void spread_block(int kind, const uint8_t *rec, __m512i tbl, uint8_t (*ring)[512], int64_t b) {
    __m512i w[8];
    rec_quants(kind, rec, R16, 1, tbl, w);
#pragma GCC unroll 8
    for (int v = 0; v < 8; v++) _mm512_store_si512(ring[b % RING] + 64 * v, w[v]);
}

/* M tokens (the tiles configured for M rows) against a whole group of 16
 * rows: per block the tiles' sums, then every token's float step, its
 * accumulator in a register. */
TF_AI void tile_group(int kind, int M, int64_t nb, const uint8_t *grp, const char *act, size_t as, size_t side,
                      float *out, int64_t ldo) {
    const size_t rb = (size_t)R16 * wbytes(kind);
    const __m512i tbl = nl_table(kind);
    _Alignas(64) int32_t cbuf[2][R16][16]; /* [p][token][row] */
    _Alignas(64) uint8_t ring[RING][512];  /* the 4-bit types' spread quants */
    const float *ad[R16];
    const char *ex[R16];
#pragma GCC unroll 16
    for (int t = 0; t < M; t++) {
        ad[t] = (const float *)(act + (size_t)t * as + side);
        ex[t] = (const char *)(ad[t] + nb);
    }
    __m512 acc[R16];
#pragma GCC unroll 16
    for (int t = 0; t < M; t++) acc[t] = _mm512_setzero_ps();
    if (kind != K8)
        for (int64_t b = 0; b < RING_AHEAD && b < nb; b++) spread_block(kind, grp + (size_t)b * rb, tbl, ring, b);
    const uint8_t *rec = grp;
    for (int64_t b = 0; b < nb; b++, rec += rb) {
        const int p = (int)(b & 1);
        prefetch_record(rec + PREFETCH_RECORDS * rb, rb);
        if (kind != K8 && b + RING_AHEAD < nb) spread_block(kind, rec + RING_AHEAD * rb, tbl, ring, b + RING_AHEAD);
        tile_block(p, kind == K8 ? (const void *)rec : (const void *)ring[b % RING],
                   act + (size_t)b * abytes(kind) + aqoff(kind), as, cbuf[p]);
        const __m512 dw = rec_f16(rec + doff(kind, R16), R16, 1);
        const __m512 mw = kind == K41 ? rec_f16(rec + 18 * R16, R16, 1) : dw;
#pragma GCC unroll 16
        for (int t = 0; t < M; t++) {
            __m512i s = _mm512_load_si512(cbuf[p][t]);
            if (int_ex(kind)) s = _mm512_add_epi32(s, _mm512_set1_epi32(quad(ex[t] + 4 * b)));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, _mm512_set1_ps(ad[t][b])), acc[t]);
            if (kind == K41) {
                float e;
                memcpy(&e, ex[t] + 4 * b, 4);
                acc[t] = _mm512_fmadd_ps(mw, _mm512_set1_ps(e), acc[t]);
            }
        }
    }
#pragma GCC unroll 16
    for (int t = 0; t < M; t++) _mm512_storeu_ps(out + t * ldo, acc[t]);
}

TF_AI void tile_group_m(int kind, int m, int64_t nb, const uint8_t *grp, const char *act, size_t as, size_t side,
                        float *out, int64_t ldo) {
    switch (m) {
#define TG_CASE(M) \
    case M: tile_group(kind, M, nb, grp, act, as, side, out, ldo); break;
        TG_CASE(5) TG_CASE(6) TG_CASE(7) TG_CASE(8) TG_CASE(9)
        TG_CASE(10) TG_CASE(11) TG_CASE(12) TG_CASE(13) TG_CASE(14) TG_CASE(15)
        default: tile_group(kind, 16, nb, grp, act, as, side, out, ldo); break;
#undef TG_CASE
    }
}

TF_AI void r16_rows(int kind, int64_t n, const void *w, int64_t n_rows, int64_t r0, int64_t r1, const void *vact,
                    size_t as, int nt, float *out, int64_t ldo) {
    const int64_t nb = n / 32;
    const size_t row = (size_t)nb * wbytes(kind);
    const size_t side = tf_act_r16_side_offset(kind == K41 ? TF_DTYPE_Q4_1 : TF_DTYPE_Q8_0, n);
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
            for (; t < n_tiled; t += m)
                tile_group_m(kind, m, nb, grp, act + (size_t)t * as, as, side, o + t * ldo, ldo);
        vnni_tokens(kind, nb, grp, nr, act + (size_t)t * as, as, side, nt - t, o + t * ldo, ldo);
    }
    if (tiles) _tile_release();
}

/* The table's entries per type: the products, and f32 -> R16 activations
 * (the table's quantizer, bitwise the reference's blocks, then the side
 * values). */
#define R16_ENTRIES(nm, KIND, TYPE, quantize)                                                                 \
    void tf_amx_r16_rows_##nm(int64_t n, const void *w, int64_t n_rows, int64_t r0, int64_t r1, const void *act, \
                              size_t as, int nt, float *out, int64_t ldo) {                                      \
        r16_rows(KIND, n, w, n_rows, r0, r1, act, as, nt, out, ldo);                                            \
    }                                                                                                            \
    void tf_amx_act_r16_##nm(const float *x, void *y, int64_t n) {                                              \
        quantize(x, y, n);                                                                                       \
        tf_act_r16_side(TYPE, y, n);                                                                             \
    }
R16_ENTRIES(q8_0, K8, TF_DTYPE_Q8_0, tf_avx512_quantize_q8_0)
R16_ENTRIES(q4_0, K40, TF_DTYPE_Q4_0, tf_avx512_quantize_q8_0)
R16_ENTRIES(q4_1, K41, TF_DTYPE_Q4_1, tf_avx512_quantize_q8_1)
R16_ENTRIES(iq4_nl, KNL, TF_DTYPE_IQ4_NL, tf_avx512_quantize_q8_0)
#undef R16_ENTRIES
