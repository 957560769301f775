/*
 * quant.h — weight formats on the CPU: quantize / dequantize rows, dot
 * products per weight type, and the threaded matrix products built on them.
 *
 * Every weight type W has an activation format act(W) that its dot product
 * consumes: F32 for F32/F16/BF16 weights, Q8_0 blocks for Q8_0/Q4_0/Q5_0
 * weights and for IQ4_NL/IQ4_XS (whose sub-blocks of 32 carry their own
 * scales), Q8_1 blocks (Q8_0 plus the sum of the quants) for Q4_1/Q5_1
 * weights, Q8_K blocks for the K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K).
 * Activations are converted once per matrix product (tf_act_quantize), never
 * weights per token.
 *
 * Each function exists as a scalar reference (tf_ref_*) and as the fastest
 * variant the CPU supports, chosen at run time (tf_cpu_kernels_get). Tests
 * compare every variant against the reference.
 */
#ifndef TF_BACKEND_CPU_QUANT_H
#define TF_BACKEND_CPU_QUANT_H

#include "core/dtype.h"
#include "core/threads.h"

#include <stddef.h>
#include <stdint.h>

/* Activation block for Q4_1 dot products: Q8_0's scale and quants plus the
 * sum of the 32 quants, which the weight's offset m multiplies
 * (sum_j (d q_j + m) a_j = d sum_j q_j a_j + m sum_j a_j). Only ever built in
 * memory; unlike ggml's Q8_1 (which keeps d * sum as f16) the sum is the exact
 * integer, |sum| <= 32 * 127. */
typedef struct {
    uint16_t d;          /* f16 scale, amax / 127 */
    int16_t sum;         /* sum of qs */
    int8_t qs[TF_QK8_0]; /* quants */
} tf_block_q8_1;         /* 36 bytes */

/* ggml's id for Q8_1, used here for the activation format above (like Q8_K,
 * absent from dtype.h's table; use tf_act_row_size). */
#define TF_DTYPE_Q8_1 ((tf_dtype)9)

/* Activation block for K-quant dot products (256 values, llama.cpp-compatible). */
typedef struct {
    float d;                   /* scale */
    int8_t qs[TF_QK_K];        /* quants */
    int16_t bsums[TF_QK_K / 16]; /* sums of groups of 16 quants */
} tf_block_q8_k;

/* ggml's id for Q8_K: an activation-only format, absent from dtype.h's table
 * (tf_dtype_row_size knows nothing of it; use tf_act_row_size). */
#define TF_DTYPE_Q8_K ((tf_dtype)15)

/* The activation formats by the names the registry's act column uses. */
#define TF_ACT_f32 TF_DTYPE_F32
#define TF_ACT_q8_0 TF_DTYPE_Q8_0
#define TF_ACT_q8_1 TF_DTYPE_Q8_1
#define TF_ACT_q8_k TF_DTYPE_Q8_K

/* Activation type consumed by the dot product of weight type `type` (its
 * registry row's act). */
tf_dtype tf_act_type(tf_dtype type);
/* Bytes needed to hold n activations converted for weight type `type`
 * (n a multiple of the type's block size). */
size_t tf_act_row_size(tf_dtype type, int64_t n);
/* Bytes of n activations in the activation format `act` itself (F32, Q8_0,
 * Q8_1 or Q8_K; tf_act_row_size is this of tf_act_type(type)). */
size_t tf_act_format_row_size(tf_dtype act, int64_t n);

/* Packed activations ("act_pack") for the row-block integer kernels of Q8_0,
 * Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS and K-quant weights (a sub-block of
 * 32 of IQ4_XS, Q4_K or Q5_K, and two sub-blocks of 16 of Q6_K, Q3_K or Q2_K,
 * count as a block): one token's quantized row
 * (the same quants and f16 scales as its blocks of tf_act_pack_type: Q8_0, or
 * Q8_1 for the formats with an offset, Q4_1, Q5_1, Q4_K, Q5_K) rearranged so that a
 * 64-byte vector holds 4 consecutive quants of each of 16 blocks, and the
 * per-block terms a kernel needs are already float / int32 vectors. Layout of
 * a row of nb = n / 32 blocks (G = nb / 16 full groups, then the tail of
 * nb % 16 blocks in pairs):
 *   group g (640 bytes): q[v][64] for v = 0..7, with bytes 4 L .. 4 L + 3 of
 *       q[v] = quants 4 v .. 4 v + 3 of block 16 g + tf_pack_lane_block(L);
 *       ad[16] f32: the blocks' d in the same lanes; ex[16]: the blocks'
 *       offset term (see below);
 *   tail pair p (192 bytes): q[64] = the quants of blocks 16 G + 2 p and
 *       16 G + 2 p + 1 (zeros if absent) in order; ad[16]: lane l holds the d
 *       of the block of quants 4 l .. 4 l + 3; ex[16] likewise per lane.
 * ex is the part of the dot product that depends only on the activations'
 * sum s over the lane's block (group) or the lane's 4 quants (tail): int32
 * -128 s (Q8_0, IQ4_NL, IQ4_XS: the weights enter the u8 x s8 product as
 * w + 128, for IQ4 w the table value), -8 s (Q4_0), -16 s (Q5_0); f32 d s (Q4_1, Q5_1, Q4_K,
 * Q5_K: the weight's offset m multiplies it; exact, 11 x 12 significant bits);
 * for Q6_K, Q3_K and Q2_K the sums of the two halves (quants 0..15 and 16..31 of the block,
 * in a tail lane its 4 quants and 0) as int16, the first in the low 16 bits:
 * the lane's value is sc0 (s0 - o e0) + sc1 (s1 - o e1), exact in int32,
 * with s0, s1 the integer dot products of the halves (the weights' quants as
 * stored, u8), o their offset (Q6_K 32, Q3_K 4, Q2_K 0), sc0, sc1 their signed
 * scales (Q3_K: the 6-bit scale less 32; a tail lane: its half's scale and
 * 0), times d of the super-block; Q2_K adds mn0 e0 + mn1 e1 (its 4-bit
 * mins, exact in int32) times -dmin, a second FMA.
 * For Q4_K and Q5_K the lane's weight scale is the sub-block's d sc and its
 * offset -dmin m (both exact in f32), so their arithmetic is Q4_1's and
 * Q5_1's. Their activations here are Q8_1 blocks of 32, not the Q8_K blocks
 * of 256 their other kernels read (finer steps; a different rounding); so are Q6_K's, Q3_K's and Q2_K's (Q8_0 blocks
 * of 32). Only the matrix product uses this
 * format; tests reach it through tf_ref_act_pack. */
#define TF_PACK_GROUP_BLOCKS 16
#define TF_PACK_GROUP_BYTES 640
#define TF_PACK_PAIR_BYTES 192
/* Block (0..15) of a group held by int32 lane L of a packed vector: lanes
 * 4 c + k hold block 4 k + c (the order a 4 x 4 dword transpose of four
 * 4-block weight vectors produces). */
static inline int tf_pack_lane_block(int lane) { return 4 * (lane % 4) + lane / 4; }
/* The activation blocks a packed row is made of: TF_DTYPE_Q8_1 for weight
 * types with an offset (Q4_1, Q5_1, Q4_K, Q5_K), else TF_DTYPE_Q8_0. */
tf_dtype tf_act_pack_type(tf_dtype wtype);
/* Bytes of one packed row of n activations for weight type `type` (0 for
 * types without a packed format). */
size_t tf_act_packed_row_size(tf_dtype type, int64_t n);
/* Bytes of scratch per token that tf_cpu_matmul needs for a row of n
 * activations of weight type `type`, whichever activation format it uses. */
size_t tf_act_scratch_row_size(tf_dtype type, int64_t n);

/* Packed weight rows ("weight_pack"): the matrix products of the packed path
 * (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS and the K-quants) spend a good part of every
 * (row, call) rearranging a weight row's group of 16 blocks into lanes, the
 * same work for every call. A host backend may instead hold the row
 * rearranged once, at load: each full group of 16 blocks (two super-blocks
 * for IQ4_XS and the K-quants) is replaced in place by a record of the same size, and the
 * tail blocks stay as in the file (the row's size does not change):
 *   Q8_0:  q[v][64] for v = 0..7, bytes 4 L .. 4 L + 3 = quants 4 v .. 4 v + 3
 *          of block tf_pack_lane_block(L), each + 128 (u8), then d[16] (f16,
 *          lane L: that block's);
 *   Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL: y[j][64] for j = 0..3, bytes 4 L .. 4 L + 3
 *          = bytes 4 j .. 4 j + 3 of the qs of block tf_pack_lane_block(L)
 *          (low nibbles: quants 4 j .., high: quants 16 + 4 j ..), then d[16]
 *          (f16), then m[16] (f16; Q4_1, Q5_1), then qh[16] (u32; Q5_0, Q5_1),
 *          each in lane order;
 *   IQ4_XS: y[j] as above over the 16 sub-blocks (lane L: sub-block
 *          tf_pack_lane_block(L) of the pair), then the first 8 bytes (d,
 *          scales_h, scales_l) of each of the two super-blocks;
 *   Q4_K:  y[j] as above over the 16 sub-blocks, where a sub-block's qs are
 *          its 32 quants written as Q4_0's (byte i: quant i low, quant 16 + i
 *          high; the file packs two sub-blocks per byte instead); then the
 *          6-bit scales sc and mins m of the 16 sub-blocks as 32 fields v
 *          (v[L]: lane L's sc, v[16 + L]: its m) in 24 bytes, bytes 3 k ..
 *          3 k + 2 holding v[4 k .. 4 k + 3] from the high bits down (byte 3 k
 *          = v[4 k] << 2 | v[4 k + 1] >> 4, and so on); then d, dmin, d, dmin
 *          (f16) of the two super-blocks. Not a permutation of the file's bytes, but as
 *          exactly invertible (the file's 12 bytes of scales hold those 192
 *          bits and no others);
 *   Q5_K:  as Q4_K, with qh[16] (u32, lane order, bit k: bit 4 of the
 *          sub-block's quant k) between the quants and the scale fields;
 *   Q6_K:  y[j] as Q4_K's over the 16 blocks of 32 (the low 4 bits of each
 *          6-bit quant), then H[2][64]: byte 4 L + i of H[p] holds the high
 *          2 bits of quants 16 p + 4 m + i of lane L at bits 2 m (m = 0..3);
 *          then the int8 scales of the two sub-blocks of 16 of each lane
 *          (bytes 2 L, 2 L + 1), then d of the two super-blocks (f16); every
 *          bit of the file's 420 bytes is used once;
 *   Q3_K:  L[2][64]: byte 4 L + i of L[p] holds the low 2 bits of quants
 *          16 p + 4 m + i of lane L at bits 2 m (m = 0..3), then H[64]: byte
 *          4 L + i holds their third bits, quant 4 m + i at bit m (m = 0..7);
 *          then the two 6-bit scales of lane L's sub-blocks of 16: their low
 *          4 bits as the low and high nibble of byte L (16 bytes), their high
 *          2 bits as bits 0-1 and 2-3 of nibble L of the next 8 bytes; then d
 *          of the two super-blocks (f16); every bit of the file's 220 bytes is
 *          used once;
 *   Q2_K:  the quants as Q3_K's low 2 bits (L[2][64]), then the file's scale
 *          bytes (4-bit scale low, 4-bit min high) of lane L's two sub-blocks
 *          of 16 at bytes 2 L, 2 L + 1, then d, dmin of the two super-blocks
 *          (f16): a permutation of the file's 168 bytes' bits.
 * A kernel reading this layout gives bitwise the results of the same kernel
 * on the file's rows (the same integers and scales reach the same float
 * steps). tf_weight_pack_row / tf_weight_unpack_row are exact inverses;
 * tf_weight_packs says which types have the layout. */
int tf_weight_packs(tf_dtype type);
void tf_weight_pack_row(tf_dtype type, const void *row, void *packed, int64_t n);
void tf_weight_unpack_row(tf_dtype type, const void *packed, void *row, int64_t n);
/* n_rows rows of n columns (row stride tf_dtype_row_size(type, n)). */
void tf_weight_pack_rows(tf_dtype type, const void *rows, void *packed, int64_t n_rows, int64_t n);

/* Row-interleaved weight groups ("R16", the AMX table's layout for Q8_0,
 * Q4_0, Q4_1 and IQ4_NL): the rows of a matrix in groups of 16 (the last group holds the
 * remaining n_rows % 16 rows, if any), each group in the bytes its rows take
 * in the file; within a group of nr rows, block b (of n / 32) is a record of
 * nr blocks' bytes:
 *   Q8_0: q[v][nr][4] for v = 0..7: quants 4 v .. 4 v + 3 of the group's row
 *         r's block b, each + 128 (u8); then d[nr] (f16);
 *   Q4_0, Q4_1, IQ4_NL: y[v][nr][4] for v = 0..3: qs bytes 4 v .. 4 v + 3 of
 *         row r's block (low nibbles: quants 4 v .., high: quants 16 + 4 v ..);
 *         then d[nr], then (Q4_1) m[nr] (f16).
 * For nr = 16 the 512 quant bytes of Q8_0 (the nibbles of the others spread
 * to bytes, low nibbles then high; IQ4_NL's as table value + 128) are the B operand of one int8 tile product
 * (8 rows of 64 bytes: a column per weight row), which gives every (token,
 * row) block sum of up to 16 tokens at once, and each 64 bytes one vector
 * for vpdpbusd. tf_weight_r16_pack writes groups [g0, g1) of n_rows rows of
 * n columns from the file's rows to dst (both laid out from the matrix's
 * first byte); tf_weight_r16_unpack_blocks writes row r's blocks [b0, b1)
 * back as the file holds them. tf_weight_r16_type: one of those four. */
int tf_weight_r16_type(tf_dtype type);
void tf_weight_r16_pack(tf_dtype type, const void *rows, void *dst, int64_t n_rows, int64_t n, int64_t g0,
                        int64_t g1);
void tf_weight_r16_unpack_blocks(tf_dtype type, const void *w, int64_t n_rows, int64_t n, int64_t r, int64_t b0,
                                 int64_t b1, void *blocks);
/* R16 activations, one row of n per token: the activation blocks of the
 * type (Q8_0; Q8_1 for Q4_1) as the quantizer writes them (a token's block is
 * 32 contiguous quants, as the tile unit reads them), then from byte
 * tf_act_r16_side_offset per block its d as f32 (ad[nb]) and ex[nb]: int32
 * -128 (Q8_0, IQ4_NL) or -8 (Q4_0) x the sum of its quants, which removes
 * the u8 weights' offset from a block sum, or f32 d x that sum (Q4_1: what
 * the weight's offset m multiplies).
 * tf_act_r16_side fills them from the blocks. */
size_t tf_act_r16_row_size(tf_dtype type, int64_t n);
size_t tf_act_r16_side_offset(tf_dtype type, int64_t n);
void tf_act_r16_side(tf_dtype type, void *row, int64_t n);
void tf_ref_act_r16(tf_dtype type, const float *x, void *row, int64_t n); /* f32 -> R16 activations */
/* The arithmetic of the products over R16 weights: a weight row (the file's
 * blocks) . activation blocks as acc = fma(isum_b, d_w d_a, acc) over the
 * blocks in order from +0 (isum_b the exact block sum), for Q4_1 each
 * followed by acc = fma(m_w, d_a sum_a, acc). Every r16_rows output is
 * bitwise this, for any number of tokens. */
float tf_ref_r16_dot(tf_dtype type, int64_t n, const void *w, const void *act);
/* Rows [r0, r1) of an R16 matrix w of n_rows rows (r0 a multiple of 16; r1 a
 * multiple of 16 or n_rows) against nt tokens of R16 activations (as bytes
 * apart): out[t * ldo + r - r0], each bitwise tf_ref_r16_dot of the file's
 * row and the token's blocks. */
typedef void (*tf_r16_rows_fn)(int64_t n, const void *w, int64_t n_rows, int64_t r0, int64_t r1, const void *act,
                               size_t as, int nt, float *out, int64_t ldo);

/* Scalar references. n must be a multiple of the type's block size. */
void tf_ref_quantize_row(tf_dtype type, const float *x, void *y, int64_t n);   /* f32 -> type */
void tf_ref_dequantize_row(tf_dtype type, const void *x, float *y, int64_t n); /* type -> f32 */
void tf_ref_act_quantize(tf_dtype wtype, const float *x, void *y, int64_t n);  /* f32 -> act(wtype) */
float tf_ref_vec_dot(tf_dtype wtype, int64_t n, const void *w, const void *act); /* w row . act */
/* Packed activations (act_pack) from the Q8_0 / Q8_1 blocks `blocks` of n
 * activations of weight type wtype (shared by every table's act_pack). */
void tf_act_pack_blocks(tf_dtype wtype, const void *blocks, void *packed, int64_t n);
void tf_ref_act_pack(tf_dtype wtype, const float *x, void *packed, int64_t n); /* f32 -> packed */
/* w row . packed activations, in exactly the arithmetic of the packed tile
 * kernels (bitwise equal results): per group, exact int32 block dot products,
 * then per lane acc = fma(isum, d_w d_a, acc) and (Q4_1, Q5_1)
 * acc = fma(m_w, ex, acc); per tail pair the same per lane; finally the sum
 * of the 16 lanes in the order of _mm512_reduce_add_ps. */
float tf_ref_packed_dot(tf_dtype wtype, int64_t n, const void *w, const void *packed);

/* Dispatch table of the fast variants. */
typedef void (*tf_act_quantize_fn)(const float *x, void *y, int64_t n);
typedef void (*tf_dequant_fn)(const void *x, float *y, int64_t n);

/* Largest tile of one vec_dot_tile call, in weight rows and in tokens; each
 * table gives the tile shape that suits each type (tile_rows, tile_toks). */
#define TF_TILE_ROWS_MAX 8
#define TF_TILE_TOKS_MAX 4
/* Largest tile of one packed_tile / wpacked_tile call in weight rows: prefill
 * hands them TF_PACK_ROWS_MAX rows at a time, so that each chunk of a token
 * tile's activations, loaded into L1 once, serves 16 rows instead of
 * tile_rows (decode and verification keep tile_rows). */
#define TF_PACK_ROWS_MAX 16

/* A tile of dot products: out[t * ldo + r] = w_r . act_t for r < nr,
 * t < nt (1 <= nr <= tile_rows[type], 1 <= nt <= tile_toks[type] of the
 * table), where w_r starts w_stride * r bytes after w and act_t act_stride * t
 * bytes after act; n elements each. Each weight row is loaded once per call
 * and reused across the nt tokens. */
typedef void (*tf_vec_dot_tile_fn)(int64_t n, const void *w, size_t w_stride, int nr, const void *act,
                                   size_t act_stride, int nt, float *out, int64_t ldo);

typedef struct tf_cpu_kernels {
    const char *isa; /* "scalar", "avx2", "avx512", "avx512_vnni", "amx" */
    tf_act_quantize_fn act_quantize[TF_DTYPE_COUNT]; /* indexed by weight type */
    tf_dequant_fn dequantize[TF_DTYPE_COUNT];       /* indexed by weight type */
    tf_vec_dot_tile_fn vec_dot_tile[TF_DTYPE_COUNT]; /* indexed by weight type */
    uint8_t tile_rows[TF_DTYPE_COUNT]; /* rows per vec_dot_tile call, <= TF_TILE_ROWS_MAX */
    uint8_t tile_toks[TF_DTYPE_COUNT]; /* tokens per vec_dot_tile call, <= TF_TILE_TOKS_MAX */
    /* Optional (NULL where absent): the packed path, used by tf_cpu_matmul
     * instead of act_quantize / vec_dot_tile when present. act_pack converts
     * a whole row (f32 -> packed); packed_tile has the tile contract over
     * packed activations with up to TF_PACK_ROWS_MAX rows and
     * TF_PACK_TOKS_MAX tokens, each output bitwise equal to tf_ref_packed_dot. */
    tf_act_quantize_fn act_pack[TF_DTYPE_COUNT];
    tf_vec_dot_tile_fn packed_tile[TF_DTYPE_COUNT];
    /* Optional, with packed_tile: the same tile over weight rows in the
     * packed weight layout (tf_weight_pack_row), bitwise packed_tile's
     * results on the file's rows, taking up to TF_WPACK_TOKS_MAX tokens. */
    tf_vec_dot_tile_fn wpacked_tile[TF_DTYPE_COUNT];
    /* Optional: products over R16 weights (the AMX table's Q8_0, Q4_0,
     * Q4_1, IQ4_NL), with r16_act converting a whole row to R16
     * activations. */
    tf_act_quantize_fn r16_act[TF_DTYPE_COUNT];
    tf_r16_rows_fn r16_rows[TF_DTYPE_COUNT];
} tf_cpu_kernels;

/* Most tokens of one packed_tile call. */
#define TF_PACK_TOKS_MAX 16
/* Most tokens of one wpacked_tile call: prefill hands the packed weight
 * layout's tiles this many, so that what a tile makes from its rows once
 * (the K-quants' and IQ4_XS's scales, the vectors of Q5_K, Q6_K, Q3_K and
 * Q2_K: pk_expand in quant_packed_avx512.c) serves three times the tokens
 * (docs/BENCHMARKS.md, session 57). Verification passes (at most
 * TF_PACK_TOKS_MAX rows) are unaffected. */
#define TF_WPACK_TOKS_MAX 48

/* TF_ISA_AMX: AVX-512 plus the AMX tile unit with its BF16 products (Sapphire
 * Rapids and later, with the OS's permission for the tile state): attention runs
 * its dot products on the tiles (attn.h); the matrix products are AVX-512's,
 * except Q8_0 over R16 weights, which use the tiles' int8 products where the
 * CPU has AMX-INT8 and VNNI (the "amx" table). */
typedef enum tf_isa { TF_ISA_SCALAR = 0, TF_ISA_AVX2 = 1, TF_ISA_AVX512 = 2, TF_ISA_AMX = 3, TF_ISA_BEST = 99 } tf_isa;

/* Kernels for the given ISA, capped to what this CPU supports (TF_ISA_BEST:
 * the best available). TF_ISA_AVX512 gives the AVX512-VNNI variant of the
 * integer kernels where the CPU has VNNI; TF_ISA_AMX the amx table where the
 * CPU has AMX-INT8, else the same as TF_ISA_AVX512. Static
 * tables; never NULL. */
const tf_cpu_kernels *tf_cpu_kernels_get(tf_isa isa);
/* Best ISA the running CPU supports (TF_ISA_AMX only once the OS has granted
 * the tile state, which the first call requests). */
tf_isa tf_cpu_best_isa(void);
/* Every kernel table this CPU can run, slowest first (scalar, avx2, avx512
 * without VNNI, avx512 with VNNI, amx: for tests and benchmarks). Writes up to
 * max pointers to out; returns how many tables exist. */
int tf_cpu_kernels_all(const tf_cpu_kernels **out, int max);

/* Y[t][r] = sum_c W[r][c] * X[t][c] for t < n_tok, r < n_rows.
 *   W: n_rows rows of n_cols elements of `wtype` (row stride tf_dtype_row_size)
 *   X: n_tok x n_cols f32 (row stride n_cols)
 *   Y: n_tok x n_rows f32 (row stride ldy >= n_rows)
 *   act_buf: scratch of n_tok * tf_act_scratch_row_size(wtype, n_cols) bytes
 *   w_layout: TF_WLAYOUT_FILE, TF_WLAYOUT_PACKED (tf_weight_pack_row; only
 *             where k->wpacked_tile[wtype] exists) or TF_WLAYOUT_R16
 *             (tf_weight_r16_pack; only where k->r16_rows[wtype] exists)
 * Runs on `pool` (may be NULL), splitting rows across threads and tiling
 * tokens so each weight row is read once per tile. */
enum { TF_WLAYOUT_FILE = 0, TF_WLAYOUT_PACKED = 1, TF_WLAYOUT_R16 = 2 };
void tf_cpu_matmul(tf_pool *pool, const tf_cpu_kernels *k, tf_dtype wtype, const void *W, int w_layout,
                   int64_t n_rows, int64_t n_cols, const float *X, int64_t n_tok, float *Y, int64_t ldy,
                   void *act_buf);
/* Several products of the same activations X (a layer's query, key and value
 * projections; its gate and up projections) in one call: X is converted once
 * and the row groups of all n_w <= TF_MATMUL_N_MAX matrices are split across
 * the threads together (one wait for the pool instead of n_w). The matrices
 * share wtype, w_layout and n_cols; Y[i] (row stride ldy[i]) gets the same
 * bits as tf_cpu_matmul of W[i] alone. */
#define TF_MATMUL_N_MAX 4
void tf_cpu_matmul_n(tf_pool *pool, const tf_cpu_kernels *k, tf_dtype wtype, int w_layout, int n_w,
                     const void *const *W, const int64_t *n_rows, int64_t n_cols, const float *X, int64_t n_tok,
                     float *const *Y, const int64_t *ldy, void *act_buf);

#endif
