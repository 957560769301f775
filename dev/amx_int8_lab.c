/*
 * amx_int8_lab.c — lab for a matrix product of Q8_0 weights by several token
 * rows on the AMX tile unit's int8 products (TDPBSUD), against the VNNI
 * kernel of the same arithmetic and the engine's current matmul.
 *
 * Why: a verification pass multiplies every weight matrix by 2..16 token
 * rows. The engine's packed VNNI tiles (quant_packed_avx512.c) hold 16 blocks
 * of one weight row in the lanes of a vector, so each token row costs 8
 * vpdpbusd per 16 blocks per weight row: at 8 rows a pass costs 3-4 one-row
 * passes. The tile unit multiplies a 16 x 64-byte int8 tile by another in one
 * instruction, but it sums along K inside a tile, so it can only serve a
 * layout whose lanes are weight ROWS: per block b of a group of 16 rows,
 *     B tile (8 x 64 bytes): byte 4 j + t of row k4 = quant 4 k4 + t of row j,
 * stored u8 (+128), with the 16 rows' scales d[16] before it (R16 layout:
 * 16 x 34 bytes per block and group, as in the file). For tokens i and rows
 * j the block's exact int32 sums come out as a 16-row by 16-lane C tile, and
 * then per token
 *     acc[i][j] = fma((float)(isum - 128 sum_a), d_w[j] * d_a[i], acc[i][j])
 * block after block (sum_a: the token block's quant sum). A VNNI kernel over
 * the same layout computes the same integers (8 vpdpbusd per block, 16 rows
 * per vector) and the same float steps, so one token row through VNNI and
 * eight through the tiles are bitwise equal — the batch invariance greedy
 * decoding rests on.
 *
 * The lab checks both kernels bitwise against a scalar reference of that
 * order (random weights and activations), then times, single-threaded, rows
 * 1..16 for the engine's matmul (file layout and its packed layout; its time
 * includes quantizing the activations), the R16 VNNI kernel and the R16 tile
 * kernel (these two on quantized activations).
 *
 * Build (after `make lib`, from the repository root):
 *   cc -O2 -std=c11 -D_GNU_SOURCE -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mamx-tile -mamx-int8 \
 *      -Iinclude -Isrc dev/amx_int8_lab.c build/libtriforce.a -lcjson -lpcre2-8 -lutf8proc -lm -lpthread \
 *      -o build/amx_int8_lab
 * Run: build/amx_int8_lab [rows=1536] [cols=576]
 */
#include "backend/cpu/quant.h"
#include "core/fp16.h"
#include "core/rng.h"

#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define QK 32
#define MAXT 16

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double gauss(tf_rng *r) {
    double u1 = tf_rng_uniform(r), u2 = tf_rng_uniform(r);
    return sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2);
}

/* R16 record of block b of a group: d[16] (f16), then q[8][16][4] (u8 = quant + 128). */
#define R16_REC (16 * (int)sizeof(tf_block_q8_0))

static void r16_pack(const tf_block_q8_0 *w, int64_t n_rows, int64_t nb, uint8_t *out) {
    for (int64_t g = 0; g < n_rows / 16; g++)
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *rec = out + (size_t)(g * nb + b) * R16_REC;
            uint16_t *d = (uint16_t *)rec;
            uint8_t *q = rec + 32;
            for (int j = 0; j < 16; j++) {
                const tf_block_q8_0 *blk = &w[(g * 16 + j) * nb + b];
                d[j] = blk->d;
                for (int k = 0; k < QK; k++) q[(k / 4) * 64 + j * 4 + k % 4] = (uint8_t)(blk->qs[k] + 128);
            }
        }
}

/* The reference of the R16 order: y[i][r] for token blocks a[i][nb]. */
static void ref_dot(const tf_block_q8_0 *w, int64_t n_rows, int64_t nb, const tf_block_q8_0 *a, int nt, float *y) {
    for (int i = 0; i < nt; i++)
        for (int64_t r = 0; r < n_rows; r++) {
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                const tf_block_q8_0 *wb = &w[r * nb + b], *ab = &a[i * nb + b];
                int32_t s = 0;
                for (int k = 0; k < QK; k++) s += (int32_t)wb->qs[k] * ab->qs[k];
                const float sc = tf_f16_to_f32(wb->d) * tf_f16_to_f32(ab->d);
                acc = fmaf((float)s, sc, acc);
            }
            y[(size_t)i * n_rows + r] = acc;
        }
}

/* Per token block: its quant sum times 128 and its scale. */
static void act_meta(const tf_block_q8_0 *a, int nt, int64_t nb, int32_t *s128, float *da) {
    for (int i = 0; i < nt; i++)
        for (int64_t b = 0; b < nb; b++) {
            int32_t s = 0;
            for (int k = 0; k < QK; k++) s += a[i * nb + b].qs[k];
            s128[i * nb + b] = 128 * s;
            da[i * nb + b] = tf_f16_to_f32(a[i * nb + b].d);
        }
}

/* VNNI over R16: one group of 16 rows at a time, all tokens. */
static void vnni_r16(const uint8_t *w, int64_t n_rows, int64_t nb, const tf_block_q8_0 *a, const int32_t *s128,
                     const float *da, int nt, float *y) {
    for (int64_t g = 0; g < n_rows / 16; g++) {
        __m512 acc[MAXT];
        for (int i = 0; i < nt; i++) acc[i] = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *rec = w + (size_t)(g * nb + b) * R16_REC;
            const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)rec));
            __m512i q[8];
            for (int v = 0; v < 8; v++) q[v] = _mm512_loadu_si512(rec + 32 + 64 * v);
            for (int i = 0; i < nt; i++) {
                const int8_t *aq = a[i * nb + b].qs;
                __m512i s = _mm512_setzero_si512();
                for (int v = 0; v < 8; v++) {
                    int32_t a4;
                    memcpy(&a4, aq + 4 * v, 4);
                    s = _mm512_dpbusd_epi32(s, q[v], _mm512_set1_epi32(a4));
                }
                s = _mm512_sub_epi32(s, _mm512_set1_epi32(s128[i * nb + b]));
                const __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(da[i * nb + b]));
                acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), sc, acc[i]);
            }
        }
        for (int i = 0; i < nt; i++) _mm512_storeu_ps(y + (size_t)i * n_rows + g * 16, acc[i]);
    }
}

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tilecfg;

static void tiles_for(int nt) {
    tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    c.colsb[0] = 64, c.rows[0] = (uint8_t)nt; /* C: tokens x 16 int32 */
    c.colsb[1] = 32, c.rows[1] = (uint8_t)nt; /* A: tokens x the block's 32 quants */
    c.colsb[2] = 64, c.rows[2] = 8;           /* B: 8 x (16 rows x 4 quants) */
    c.colsb[3] = 64, c.rows[3] = (uint8_t)nt; /* C of the next block */
    c.colsb[4] = 64, c.rows[4] = 8;           /* B of the next block */
    c.colsb[5] = 32, c.rows[5] = (uint8_t)nt; /* A of the next block */
    __asm__ volatile("" : : "r"(&c) : "memory"); /* the stores above must happen: LDTILECFG reads them */
    _tile_loadconfig(&c);
}

/* One block's products: C (tile 0 or 3 by par) = A (tokens' quants: tile 1 or
 * 5) . B (the record's quants: tile 2 or 4), stored to cb. */
static inline void tile_block(int par, const uint8_t *rec, const char *ab, size_t a_row, int32_t (*cb)[16]) {
    if (par) {
        _tile_zero(3);
        _tile_loadd(5, ab, a_row);
        _tile_loadd(4, rec + 32, 64);
        _tile_dpbsud(3, 5, 4);
        _tile_stored(3, cb, 64);
    } else {
        _tile_zero(0);
        _tile_loadd(1, ab, a_row);
        _tile_loadd(2, rec + 32, 64);
        _tile_dpbsud(0, 1, 2);
        _tile_stored(0, cb, 64);
    }
}

/* Tiles over R16: per group and block, C = A (tokens' quants, straight from
 * the activation blocks: 34-byte stride inside a token, a_row across tokens)
 * . B; the tiles of consecutive blocks alternate (C 0 / 3, A 1 / 5, B 2 / 4)
 * so that one block's products overlap the previous block's float steps. */
static void amx_r16(const uint8_t *w, int64_t n_rows, int64_t nb, const tf_block_q8_0 *a, const int32_t *s128,
                    const float *da, int nt, float *y) {
    const size_t a_row = (size_t)nb * sizeof(tf_block_q8_0);
    _Alignas(64) int32_t cbuf[2][MAXT][16];
    for (int64_t g = 0; g < n_rows / 16; g++) {
        __m512 acc[MAXT];
        for (int i = 0; i < nt; i++) acc[i] = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *rec = w + (size_t)(g * nb + b) * R16_REC;
            const char *ab = (const char *)a + (size_t)b * sizeof(tf_block_q8_0) + 2;
            int32_t(*cb)[16] = cbuf[b & 1];
            tile_block((int)(b & 1), rec, ab, a_row, cb);
            const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)rec));
            for (int i = 0; i < nt; i++) {
                __m512i s = _mm512_sub_epi32(_mm512_load_si512(cb[i]), _mm512_set1_epi32(s128[i * nb + b]));
                const __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(da[i * nb + b]));
                acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), sc, acc[i]);
            }
        }
        for (int i = 0; i < nt; i++) _mm512_storeu_ps(y + (size_t)i * n_rows + g * 16, acc[i]);
    }
}

/* amx_r16 with the float steps of block b run after the tile products of
 * blocks b + 1 and b + 2 are issued (LAG): a C tile's store has then left
 * the core before the vector loads read it back. */
#define LAG 2
static void amx_r16_lag(const uint8_t *w, int64_t n_rows, int64_t nb, const tf_block_q8_0 *a, const int32_t *s128,
                        const float *da, int nt, float *y) {
    const size_t a_row = (size_t)nb * sizeof(tf_block_q8_0);
    _Alignas(64) int32_t cbuf[LAG + 1][MAXT][16];
    for (int64_t g = 0; g < n_rows / 16; g++) {
        __m512 acc[MAXT];
        for (int i = 0; i < nt; i++) acc[i] = _mm512_setzero_ps();
        const uint8_t *wg = w + (size_t)(g * nb) * R16_REC;
        for (int64_t b = 0; b < nb + LAG; b++) {
            if (b < nb)
                tile_block((int)(b & 1), wg + (size_t)b * R16_REC,
                           (const char *)a + (size_t)b * sizeof(tf_block_q8_0) + 2, a_row, cbuf[b % (LAG + 1)]);
            const int64_t e = b - LAG;
            if (e < 0) continue;
            int32_t(*cb)[16] = cbuf[e % (LAG + 1)];
            const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(wg + (size_t)e * R16_REC)));
            for (int i = 0; i < nt; i++) {
                __m512i s = _mm512_sub_epi32(_mm512_load_si512(cb[i]), _mm512_set1_epi32(s128[i * nb + e]));
                const __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(da[i * nb + e]));
                acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), sc, acc[i]);
            }
        }
        for (int i = 0; i < nt; i++) _mm512_storeu_ps(y + (size_t)i * n_rows + g * 16, acc[i]);
    }
}

/* ---- Q4_1: x = d q + m, q in 0..15 ---------------------------------------------- */

/* R16 record of a Q4_1 block: d[16], m[16] (f16), then y[4][16][4]: byte t of
 * (v, j) = quant 4 v + t of row j in its low nibble, quant 16 + 4 v + t in its
 * high nibble (v < 4). 16 x 20 bytes, as in the file. */
#define R16_REC41 (16 * (int)sizeof(tf_block_q4_1))

static int q41_quant(const tf_block_q4_1 *b, int k) { return k < 16 ? b->qs[k] & 15 : b->qs[k - 16] >> 4; }

static void r16_pack41(const tf_block_q4_1 *w, int64_t n_rows, int64_t nb, uint8_t *out) {
    for (int64_t g = 0; g < n_rows / 16; g++)
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *rec = out + (size_t)(g * nb + b) * R16_REC41;
            uint16_t *d = (uint16_t *)rec, *m = d + 16;
            uint8_t *y = rec + 64;
            for (int j = 0; j < 16; j++) {
                const tf_block_q4_1 *blk = &w[(g * 16 + j) * nb + b];
                d[j] = blk->d;
                m[j] = blk->m;
                for (int v = 0; v < 4; v++)
                    for (int t = 0; t < 4; t++)
                        y[v * 64 + j * 4 + t] = (uint8_t)(q41_quant(blk, 4 * v + t) | q41_quant(blk, 16 + 4 * v + t) << 4);
            }
        }
}

/* sa[i][b] = d_a * (float)(quant sum), the offset's factor */
static void act_meta41(const tf_block_q8_0 *a, int nt, int64_t nb, float *da, float *sa) {
    for (int i = 0; i < nt; i++)
        for (int64_t b = 0; b < nb; b++) {
            int32_t s = 0;
            for (int k = 0; k < QK; k++) s += a[i * nb + b].qs[k];
            da[i * nb + b] = tf_f16_to_f32(a[i * nb + b].d);
            sa[i * nb + b] = da[i * nb + b] * (float)s;
        }
}

static void ref_dot41(const tf_block_q4_1 *w, int64_t n_rows, int64_t nb, const tf_block_q8_0 *a, const float *da,
                      const float *sa, int nt, float *y) {
    for (int i = 0; i < nt; i++)
        for (int64_t r = 0; r < n_rows; r++) {
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                const tf_block_q4_1 *wb = &w[r * nb + b];
                int32_t s = 0;
                for (int k = 0; k < QK; k++) s += q41_quant(wb, k) * a[i * nb + b].qs[k];
                acc = fmaf((float)s, tf_f16_to_f32(wb->d) * da[i * nb + b], acc);
                acc = fmaf(tf_f16_to_f32(wb->m), sa[i * nb + b], acc);
            }
            y[(size_t)i * n_rows + r] = acc;
        }
}

/* The 8 u8 operands of a Q4_1 record (v < 4: low nibbles, v >= 4: high). */
static inline void q41_expand(const uint8_t *rec, __m512i q[8]) {
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    for (int v = 0; v < 4; v++) {
        const __m512i y = _mm512_loadu_si512(rec + 64 + 64 * v);
        q[v] = _mm512_and_si512(y, low4);
        q[v + 4] = _mm512_and_si512(_mm512_srli_epi16(y, 4), low4);
    }
}

static void vnni_r16_41(const uint8_t *w, int64_t n_rows, int64_t nb, const tf_block_q8_0 *a, const float *da,
                        const float *sa, int nt, float *y) {
    for (int64_t g = 0; g < n_rows / 16; g++) {
        __m512 acc[MAXT];
        for (int i = 0; i < nt; i++) acc[i] = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *rec = w + (size_t)(g * nb + b) * R16_REC41;
            const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)rec));
            const __m512 mw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rec + 32)));
            __m512i q[8];
            q41_expand(rec, q);
            for (int i = 0; i < nt; i++) {
                const int8_t *aq = a[i * nb + b].qs;
                __m512i s = _mm512_setzero_si512();
                for (int v = 0; v < 8; v++) {
                    int32_t a4;
                    memcpy(&a4, aq + 4 * v, 4);
                    s = _mm512_dpbusd_epi32(s, q[v], _mm512_set1_epi32(a4));
                }
                const __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(da[i * nb + b]));
                acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), sc, acc[i]);
                acc[i] = _mm512_fmadd_ps(mw, _mm512_set1_ps(sa[i * nb + b]), acc[i]);
            }
        }
        for (int i = 0; i < nt; i++) _mm512_storeu_ps(y + (size_t)i * n_rows + g * 16, acc[i]);
    }
}

/* Tiles for Q4_1: a group's nibbles are first expanded into u8 B operands
 * for all its blocks (bq: nb x 512 bytes), so no tile load reads a store
 * just made; then per block C = A . B by TDPBSUD (tokens s8, nibbles u8). */
static void amx_r16_41(const uint8_t *w, int64_t n_rows, int64_t nb, const tf_block_q8_0 *a, const float *da,
                       const float *sa, int nt, float *y, uint8_t *bq) {
    const size_t a_row = (size_t)nb * sizeof(tf_block_q8_0);
    _Alignas(64) int32_t cbuf[2][MAXT][16];
    for (int64_t g = 0; g < n_rows / 16; g++) {
        const uint8_t *wg = w + (size_t)(g * nb) * R16_REC41;
        for (int64_t b = 0; b < nb; b++) {
            __m512i q[8];
            q41_expand(wg + (size_t)b * R16_REC41, q);
            for (int v = 0; v < 8; v++) _mm512_store_si512(bq + (size_t)b * 512 + 64 * v, q[v]);
        }
        __m512 acc[MAXT];
        for (int i = 0; i < nt; i++) acc[i] = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *rec = wg + (size_t)b * R16_REC41;
            const char *ab = (const char *)a + (size_t)b * sizeof(tf_block_q8_0) + 2;
            int32_t(*cb)[16] = cbuf[b & 1];
            if (b & 1) {
                _tile_zero(3);
                _tile_loadd(5, ab, a_row);
                _tile_loadd(4, bq + (size_t)b * 512, 64);
                _tile_dpbsud(3, 5, 4);
                _tile_stored(3, cb, 64);
            } else {
                _tile_zero(0);
                _tile_loadd(1, ab, a_row);
                _tile_loadd(2, bq + (size_t)b * 512, 64);
                _tile_dpbsud(0, 1, 2);
                _tile_stored(0, cb, 64);
            }
            const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)rec));
            const __m512 mw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rec + 32)));
            for (int i = 0; i < nt; i++) {
                const __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(da[i * nb + b]));
                acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(cb[i])), sc, acc[i]);
                acc[i] = _mm512_fmadd_ps(mw, _mm512_set1_ps(sa[i * nb + b]), acc[i]);
            }
        }
        for (int i = 0; i < nt; i++) _mm512_storeu_ps(y + (size_t)i * n_rows + g * 16, acc[i]);
    }
}

static int bitwise_equal(const float *x, const float *y, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(&x[i], &y[i], 4) != 0 || isnan(x[i])) {
            printf("MISMATCH %s at %zu: %.9g vs %.9g\n", what, i, x[i], y[i]);
            return 0;
        }
    return 1;
}

int main(int argc, char **argv) {
    const int64_t n_rows = argc > 1 ? atoll(argv[1]) : 1536, n_cols = argc > 2 ? atoll(argv[2]) : 576;
    if (n_rows % 16 || n_cols % QK || n_rows <= 0 || n_cols <= 0) {
        fprintf(stderr, "rows must be a multiple of 16 and cols of 32\n");
        return 2;
    }
    if (tf_cpu_best_isa() != TF_ISA_AMX) {
        printf("skipped: this CPU (or the OS) gives no AMX tile state\n");
        return 0;
    }
    const int64_t nb = n_cols / QK;
    tf_rng rng;
    tf_rng_seed(&rng, 20261127);
    float *wf = malloc(sizeof(float) * (size_t)(n_rows * n_cols)), *xf = malloc(sizeof(float) * MAXT * n_cols);
    tf_block_q8_0 *w = malloc(sizeof(tf_block_q8_0) * (size_t)(n_rows * nb)),
                  *a = malloc(sizeof(tf_block_q8_0) * (size_t)(MAXT * nb));
    uint8_t *wr = aligned_alloc(64, (size_t)(n_rows / 16 * nb) * R16_REC);
    void *wp = malloc(sizeof(tf_block_q8_0) * (size_t)(n_rows * nb));
    for (int64_t i = 0; i < n_rows * n_cols; i++) wf[i] = (float)(0.05 * gauss(&rng));
    for (int64_t i = 0; i < MAXT * n_cols; i++) xf[i] = (float)gauss(&rng);
    tf_ref_quantize_row(TF_DTYPE_Q8_0, wf, w, n_rows * n_cols);
    for (int i = 0; i < MAXT; i++) tf_ref_quantize_row(TF_DTYPE_Q8_0, xf + i * n_cols, a + i * nb, n_cols);
    r16_pack(w, n_rows, nb, wr);
    tf_weight_pack_rows(TF_DTYPE_Q8_0, w, wp, n_rows, n_cols);
    int32_t *s128 = malloc(sizeof(int32_t) * MAXT * nb);
    float *da = malloc(sizeof(float) * MAXT * nb);
    act_meta(a, MAXT, nb, s128, da);
    float *yr = malloc(sizeof(float) * MAXT * n_rows), *yv = malloc(sizeof(float) * MAXT * n_rows),
          *ya = malloc(sizeof(float) * MAXT * n_rows), *ye = malloc(sizeof(float) * MAXT * n_rows);
    const tf_cpu_kernels *k = tf_cpu_kernels_get(TF_ISA_AMX);
    void *act_buf = malloc(MAXT * (tf_act_scratch_row_size(TF_DTYPE_Q8_0, n_cols) + tf_act_scratch_row_size(TF_DTYPE_Q4_1, n_cols)) + 4096);

    /* 1. bitwise: both kernels against the reference, every token count */
    ref_dot(w, n_rows, nb, a, MAXT, yr);
    int ok = 1;
    for (int nt = 1; nt <= MAXT && ok; nt++) {
        memset(yv, 0xff, sizeof(float) * MAXT * n_rows); /* NaN: a value never written shows */
        memset(ya, 0xff, sizeof(float) * MAXT * n_rows);
        vnni_r16(wr, n_rows, nb, a, s128, da, nt, yv);
        tiles_for(nt);
        amx_r16(wr, n_rows, nb, a, s128, da, nt, ya);
        _tile_release();
        char what[64];
        snprintf(what, sizeof what, "vnni, %d tokens", nt);
        ok &= bitwise_equal(yr, yv, (size_t)nt * n_rows, what);
        snprintf(what, sizeof what, "tiles, %d tokens", nt);
        ok &= bitwise_equal(yr, ya, (size_t)nt * n_rows, what);
        memset(ya, 0xff, sizeof(float) * MAXT * n_rows);
        tiles_for(nt);
        amx_r16_lag(wr, n_rows, nb, a, s128, da, nt, ya);
        _tile_release();
        snprintf(what, sizeof what, "tiles lag %d, %d tokens", LAG, nt);
        ok &= bitwise_equal(yr, ya, (size_t)nt * n_rows, what);
    }
    printf("%s: R16 VNNI and R16 tiles bitwise equal to the reference for 1..%d tokens (%lld x %lld Q8_0)\n",
           ok ? "ok" : "FAILED", MAXT, (long long)n_rows, (long long)n_cols);
    if (!ok) return 1;

    /* 2. timing, one thread; the matrix stays in cache (it is re-read), as in a small model's decode */
    printf("\n%-6s %12s %12s %12s %12s %12s   (us per call, min of 7 x 50 calls; %s)\n", "tokens", "engine file",
           "engine pack", "R16 vnni", "R16 tiles", "tiles lag", k->isa);
    const int toks[] = {1, 2, 4, 8, 12, 16};
    for (size_t ti = 0; ti < sizeof toks / sizeof toks[0]; ti++) {
        const int nt = toks[ti];
        double best[5] = {1e9, 1e9, 1e9, 1e9, 1e9};
        for (int rep = 0; rep < 7; rep++)
            for (int v = 0; v < 5; v++) {
                double t0 = now_s();
                for (int it = 0; it < 50; it++) {
                    if (v == 0) tf_cpu_matmul(NULL, k, TF_DTYPE_Q8_0, w, 0, n_rows, n_cols, xf, nt, ye, n_rows, act_buf);
                    else if (v == 1)
                        tf_cpu_matmul(NULL, k, TF_DTYPE_Q8_0, wp, 1, n_rows, n_cols, xf, nt, ye, n_rows, act_buf);
                    else if (v == 2) vnni_r16(wr, n_rows, nb, a, s128, da, nt, yv);
                    else {
                        tiles_for(nt);
                        if (v == 3) amx_r16(wr, n_rows, nb, a, s128, da, nt, ya);
                        else amx_r16_lag(wr, n_rows, nb, a, s128, da, nt, ya);
                        _tile_release();
                    }
                }
                double t = (now_s() - t0) / 50 * 1e6;
                if (t < best[v]) best[v] = t;
            }
        printf("%-6d %12.1f %12.1f %12.1f %12.1f %12.1f\n", nt, best[0], best[1], best[2], best[3], best[4]);
    }

    /* 3. Q4_1 (SmolLM2-135M's type): the same, with its offsets m */
    tf_block_q4_1 *w41 = malloc(sizeof(tf_block_q4_1) * (size_t)(n_rows * nb));
    uint8_t *wr41 = aligned_alloc(64, (size_t)(n_rows / 16 * nb) * R16_REC41);
    void *wp41 = malloc(sizeof(tf_block_q4_1) * (size_t)(n_rows * nb));
    uint8_t *bq = aligned_alloc(64, (size_t)nb * 512);
    float *sa = malloc(sizeof(float) * MAXT * nb);
    tf_ref_quantize_row(TF_DTYPE_Q4_1, wf, w41, n_rows * n_cols);
    r16_pack41(w41, n_rows, nb, wr41);
    tf_weight_pack_rows(TF_DTYPE_Q4_1, w41, wp41, n_rows, n_cols);
    act_meta41(a, MAXT, nb, da, sa);
    ref_dot41(w41, n_rows, nb, a, da, sa, MAXT, yr);
    for (int nt = 1; nt <= MAXT && ok; nt++) {
        memset(yv, 0xff, sizeof(float) * MAXT * n_rows);
        memset(ya, 0xff, sizeof(float) * MAXT * n_rows);
        vnni_r16_41(wr41, n_rows, nb, a, da, sa, nt, yv);
        tiles_for(nt);
        amx_r16_41(wr41, n_rows, nb, a, da, sa, nt, ya, bq);
        _tile_release();
        char what[64];
        snprintf(what, sizeof what, "q4_1 vnni, %d tokens", nt);
        ok &= bitwise_equal(yr, yv, (size_t)nt * n_rows, what);
        snprintf(what, sizeof what, "q4_1 tiles, %d tokens", nt);
        ok &= bitwise_equal(yr, ya, (size_t)nt * n_rows, what);
    }
    printf("\n%s: Q4_1 R16 VNNI and R16 tiles bitwise equal to the reference for 1..%d tokens\n", ok ? "ok" : "FAILED",
           MAXT);
    if (!ok) return 1;
    printf("%-6s %12s %12s %12s %12s   (Q4_1, us per call)\n", "tokens", "engine file", "engine pack", "R16 vnni",
           "R16 tiles");
    for (size_t ti = 0; ti < sizeof toks / sizeof toks[0]; ti++) {
        const int nt = toks[ti];
        double best[4] = {1e9, 1e9, 1e9, 1e9};
        for (int rep = 0; rep < 7; rep++)
            for (int v = 0; v < 4; v++) {
                double t0 = now_s();
                for (int it = 0; it < 50; it++) {
                    if (v == 0) tf_cpu_matmul(NULL, k, TF_DTYPE_Q4_1, w41, 0, n_rows, n_cols, xf, nt, ye, n_rows, act_buf);
                    else if (v == 1)
                        tf_cpu_matmul(NULL, k, TF_DTYPE_Q4_1, wp41, 1, n_rows, n_cols, xf, nt, ye, n_rows, act_buf);
                    else if (v == 2) vnni_r16_41(wr41, n_rows, nb, a, da, sa, nt, yv);
                    else {
                        tiles_for(nt);
                        amx_r16_41(wr41, n_rows, nb, a, da, sa, nt, ya, bq);
                        _tile_release();
                    }
                }
                double t = (now_s() - t0) / 50 * 1e6;
                if (t < best[v]) best[v] = t;
            }
        printf("%-6d %12.1f %12.1f %12.1f %12.1f\n", nt, best[0], best[1], best[2], best[3]);
    }
    return 0;
}
