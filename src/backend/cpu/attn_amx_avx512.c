/* attn_amx_avx512.c — attention work item with the AMX tile unit (TF_ATTN_AMX:
 * Sapphire Rapids and later, chosen at TF_ISA_AMX). attn_kernel.inc with the
 * AVX-512 BF16 instructions, whose bf16 tile path (head_dim a multiple of 32)
 * is replaced by amx_tile below (f16 caches); other head sizes, f32 caches and
 * the integer path of q8_0 and q4_0 caches run that
 * file's code unchanged.
 *
 * A 64-key tile, for the item's rows in chunks of up to 16:
 *   1. K and V of the tile rounded to bf16 pairs in scratch (load_tile_bf16;
 *      its layouts are the tile unit's B operands: a K block is [hd/2 pairs]
 *      x [16 keys], V is [key pairs] x [hd]);
 *   2. scores S = Q K^T: tiles 0-3 (one per block of 16 keys) accumulate
 *      TDPBF16PS over the head dimension in segments of 32 (tiles 4 / 7: the
 *      queries' bf16 pairs, tiles 5 / 6: the K block), stored to [16][64] f32;
 *   3. the online softmax of each row (softmax_tile_bf16, the other variants'
 *      code): new max, weights rounded to bf16 into [16][64];
 *   4. O = P V per 16 dimensions (tiles 0-3; tiles 4 / 7: the weights of 32
 *      keys, tiles 5 / 6: V), from zero, stored to [16][hd];
 *   5. acc = acc * corr + O, in f32 vectors.
 * Rows of a tile product are independent: a row's bits do not depend on the
 * other rows of its chunk, nor on how many there are (the unused rows of a
 * tile hold stale scratch and are never read back). Key pairs past the tile's
 * end are zero in V and their weights are zero, so they add exact zeros to an
 * accumulator that starts at +0 (which such terms cannot turn into -0). */
#pragma GCC target("avx512bf16,avx512vnni,amx-tile,amx-bf16")
#include "backend/cpu/attn_bf16_isa.h"
#define ATTN_AMX 1
#define ATTN_ISA(name) ATTN_CAT_(name, _amx_avx512)
#include "backend/cpu/attn_kernel.inc"

/* The tile configuration (palette 1): tiles 0-7 all 16 rows of 64 bytes. */
typedef struct amx_cfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_cfg;
_Static_assert(sizeof(amx_cfg) == 64, "LDTILECFG reads 64 bytes");

static void amx_begin(void) {
    static const amx_cfg cfg = {
        .palette = 1,
        .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
        .rows = {16, 16, 16, 16, 16, 16, 16, 16},
    };
    _tile_loadconfig(&cfg);
}

static void amx_end(void) { _tile_release(); }

/* Tile numbers are immediates: run OP(i) for a run-time i in 0..3. */
#define ON_TILE(i, OP)                                                                                                 \
    do {                                                                                                               \
        switch (i) {                                                                                                   \
        case 0: OP(0); break;                                                                                          \
        case 1: OP(1); break;                                                                                          \
        case 2: OP(2); break;                                                                                          \
        default: OP(3); break;                                                                                         \
        }                                                                                                              \
    } while (0)

#define ROWS 16 /* rows per tile product */

/* e^x for the softmax weights as vexp_p computes it (x <= 0, lanes below
 * P_LOG_MIN discarded by the caller), with the instructions this variant
 * has: the polynomial in fused steps, the rounding and the scaling by 2^n
 * one instruction each. Its own bits (as the tile products are). */
static inline __m512 exp_amx(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(P_LOG_MIN - 1.0f));
    const __m512 t = _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f));
    const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 f = _mm512_sub_ps(t, n); /* exact, in [-1/2, 1/2] */
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(1.3333558146428443e-3f), f, _mm512_set1_ps(9.6181291076284772e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5504108664821580e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022650695910071e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314718055994531e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

/* softmax_tile_bf16 for one row of the score tile (srow: its 64 scores), in
 * mask registers and with VCVTNEPS2BF16 for the rounding (the weights are 0
 * or in [e^-40, 1]: no NaN, no subnormal): the same steps, fewer
 * instructions. */
static inline float softmax_amx(const attn_item *it, int r, const float *srow, int nbr, int nlo, int nvalid,
                                uint16_t *pb) {
    __m512 s[TILE / 16];
    __mmask16 valid[TILE / 16];
    __m512 mx = _mm512_set1_ps(-INFINITY);
    for (int b = 0; b < nbr; b++) {
        const int lo = nlo - 16 * b, hi = nvalid - 16 * b; /* the visible lanes: [lo, hi) */
        const uint32_t below_hi = hi >= 16 ? 0xFFFFu : (1u << hi) - 1u;
        const uint32_t below_lo = lo <= 0 ? 0u : lo >= 16 ? 0xFFFFu : (1u << lo) - 1u;
        valid[b] = (__mmask16)(below_hi & ~below_lo);
        s[b] = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), valid[b], srow + 16 * b);
        mx = _mm512_max_ps(s[b], mx); /* as vmax: a NaN score leaves mx */
    }
    float m_old = it->m[r], m_new = m_old, corr = 1.0f;
    if (_mm512_cmp_ps_mask(mx, _mm512_set1_ps(m_old), _CMP_GT_OQ)) {
        m_new = _mm512_reduce_max_ps(mx);
        corr = m_old == -INFINITY ? 0.0f : expf(m_old - m_new);
    }
    if (nbr < TILE / 16) memset(pb + nbr * 16, 0, sizeof(uint16_t) * (TILE - nbr * 16));
    __m512 psum = _mm512_setzero_ps();
    const __m512 mv = _mm512_set1_ps(m_new);
    for (int b = 0; b < nbr; b++) {
        const __m512 x = _mm512_sub_ps(s[b], mv);
        const __mmask16 keep = valid[b] & _mm512_cmp_ps_mask(x, _mm512_set1_ps(P_LOG_MIN), _CMP_GE_OQ);
        const __m256i h = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_mov_ps(keep, exp_amx(x)));
        _mm256_storeu_si256((__m256i *)(pb + 16 * b), h);
        psum = _mm512_add_ps(psum, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
    }
    it->m[r] = m_new;
    __m512 lv = _mm512_loadu_ps(it->lvec + (size_t)r * 16);
    if (corr != 1.0f) lv = _mm512_mul_ps(lv, _mm512_set1_ps(corr));
    _mm512_storeu_ps(it->lvec + (size_t)r * 16, _mm512_add_ps(lv, psum));
    return corr;
}

static void amx_tile(const attn_item *it, const tile_src *t, int nb, int n_rows, int32_t s0) {
    const int hd = it->hd, hp = hd / 2, nk = t->nk;
    const int nlo = it->klo > s0 ? it->klo - s0 : 0; /* masked slots at the front of the item's first tile */
    float *sbuf = it->amx;                               /* [16][64] scores */
    uint16_t *pbuf = (uint16_t *)(it->amx + 16 * 64);    /* [16][64] bf16 weights */
    float *obuf = it->amx + 16 * 64 + 16 * 32;           /* [16][hd] P V */
    /* 1. the tile's pairs; V pairs past the tile's end zero up to the 16-pair operand */
    load_tile_bf16(t, nb);
    const int nkp = (nk + 1) / 2, nkk = (nkp + 15) / 16;
    memset(t->vb + (size_t)nkp * hd, 0, sizeof(uint32_t) * (size_t)(nkk * 16 - nkp) * hd);
    for (int r0 = 0; r0 < n_rows; r0 += ROWS) {
        const int mr = n_rows - r0 < ROWS ? n_rows - r0 : ROWS;
        int nvalid[ROWS], any = 0;
        for (int m = 0; m < mr; m++) {
            nvalid[m] = tile_nvalid(it, r0 + m, s0, nlo, nk);
            any |= nvalid[m] > 0;
        }
        if (!any) continue;
        /* 2. scores */
        const uint32_t *q = (const uint32_t *)it->qbuf + (size_t)r0 * hp;
#define ZERO(i) _tile_zero(i)
#define STORE_S(i) _tile_stored(i, sbuf + (i) * 16, 64 * sizeof(float))
/* block b's K pairs of segment ks into tile B, then C_b += A . B */
#define QK_B(b, A, B)                                                                                                  \
    do {                                                                                                               \
        _tile_loadd(B, t->kb + ((size_t)(b) * hp + (size_t)ks * 16) * 16, 64);                                         \
        _tile_dpbf16ps(b, A, B);                                                                                       \
    } while (0)
#define QK_SEG(A)                                                                                                      \
    do {                                                                                                               \
        _tile_loadd(A, q + ks * 16, hp * sizeof(uint32_t));                                                            \
        QK_B(0, A, 5);                                                                                                 \
        if (nb > 1) QK_B(1, A, 6);                                                                                     \
        if (nb > 2) QK_B(2, A, 5);                                                                                     \
        if (nb > 3) QK_B(3, A, 6);                                                                                     \
    } while (0)
        for (int b = 0; b < nb; b++) ON_TILE(b, ZERO);
        /* operands alternate between two tiles each (A: 4 and 7, B: 5 and 6):
         * a load into a tile waits for the product still reading it */
        for (int ks = 0; ks < hp / 16; ks++) {
            if (ks & 1) QK_SEG(7);
            else QK_SEG(4);
        }
        for (int b = 0; b < nb; b++) ON_TILE(b, STORE_S);
        /* 3. softmax per row */
        float corr[ROWS];
        for (int m = 0; m < mr; m++) {
            if (nvalid[m] == 0) continue;
            const int nbr = (nvalid[m] + TF_KV_BLK - 1) / TF_KV_BLK;
            corr[m] = softmax_amx(it, r0 + m, sbuf + m * 64, nbr, nlo, nvalid[m], pbuf + m * 64);
        }
        /* 4.-5. P V, four 16-dimension slices at a time, into acc */
#define STORE_O(i) _tile_stored(i, obuf + (c0 + (i)) * 16, hd * sizeof(float))
/* V pairs of key segment kk, dimensions of slice c0 + c, into tile B, then C_c += A . B */
#define PV_C(c, A, B)                                                                                                  \
    do {                                                                                                               \
        _tile_loadd(B, t->vb + (size_t)kk * 16 * hd + (size_t)(c0 + (c)) * 16, hd * sizeof(uint32_t));                \
        _tile_dpbf16ps(c, A, B);                                                                                       \
    } while (0)
#define PV_SEG(A)                                                                                                      \
    do {                                                                                                               \
        _tile_loadd(A, pbuf + kk * 32, 64 * sizeof(uint16_t));                                                         \
        PV_C(0, A, 5);                                                                                                 \
        if (nc > 1) PV_C(1, A, 6);                                                                                     \
        if (nc > 2) PV_C(2, A, 5);                                                                                     \
        if (nc > 3) PV_C(3, A, 6);                                                                                     \
    } while (0)
        for (int c0 = 0; c0 < hd / 16; c0 += 4) {
            const int nc = hd / 16 - c0 < 4 ? hd / 16 - c0 : 4;
            for (int c = 0; c < nc; c++) ON_TILE(c, ZERO);
            for (int kk = 0; kk < nkk; kk++) {
                if (kk & 1) PV_SEG(7);
                else PV_SEG(4);
            }
            for (int c = 0; c < nc; c++) ON_TILE(c, STORE_O);
        }
        for (int m = 0; m < mr; m++) {
            if (nvalid[m] == 0) continue;
            float *acc = it->acc + (size_t)(r0 + m) * hd;
            const float *o = obuf + (size_t)m * hd;
            for (int d = 0; d < hd; d += 16) {
                v16f A = vload(acc + d);
                if (corr[m] != 1.0f) A *= vsplat(corr[m]); /* x * 1 is x */
                vstore(acc + d, A + vload(o + d));
            }
        }
#undef ZERO
#undef STORE_S
#undef QK_B
#undef QK_SEG
#undef STORE_O
#undef PV_C
#undef PV_SEG
    }
}
