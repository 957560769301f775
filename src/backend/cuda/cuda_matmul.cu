/*
 * cuda_matmul.cu — Y[t][r] = W[r] . X[t]: a GEMV kernel for decode and
 * verification batches (f32 activations against F32 / F16 / BF16 / Q8_0 /
 * Q4_0 / Q4_1 weights, batch-invariant) and cuBLAS GEMMs for prefill.
 *
 * GEMV: a block of 4 warps computes 4 weight rows for a group of NT tokens;
 * each warp owns one row, its lanes stride over the row (8 elements per load
 * where rows allow 16-byte loads), every token keeps its own accumulator
 * (fused multiply-adds in a fixed order) and a butterfly shuffle sums the
 * lanes. A token's result is therefore the same operations in the same order
 * whatever the batch size and group, which greedy speculative decoding needs.
 */
#include "backend/cuda/cuda_mma.cuh"

#define GEMV_WARPS 4

/* The matrices of one GEMV launch: up to GEMV_MATS of one type and width that
 * read the same activations (a layer's q/k/v or gate/up projections), each
 * a run of the grid's blocks from b0[i]. A block computes rows of one matrix
 * only, with the code and order a launch of that matrix alone gives them, so
 * one launch for several matrices changes no bit. */
#define GEMV_MATS 4
struct gemv_mats {
    const void *W[GEMV_MATS];
    float *y[GEMV_MATS];
    int64_t n_rows[GEMV_MATS], ldy[GEMV_MATS];
    unsigned b0[GEMV_MATS];
    int n_w;
};

/* This block's matrix, and the block's index among that matrix's blocks. */
struct gemv_part {
    const void *W;
    float *y;
    int64_t n_rows, ldy;
    unsigned bx;
};
__device__ __forceinline__ gemv_part gemv_of(const gemv_mats &M) {
    int i = 0;
    while (i + 1 < M.n_w && blockIdx.x >= M.b0[i + 1]) i++;
    return {M.W[i], M.y[i], M.n_rows[i], M.ldy[i], blockIdx.x - M.b0[i]};
}
/* the kernels' names for their matrix's fields */
#define GEMV_PART(WT)                                                                                             \
    const gemv_part P_ = gemv_of(M);                                                                              \
    const WT *W = (const WT *)P_.W;                                                                               \
    const int64_t n_rows = P_.n_rows, ldy = P_.ldy;                                                               \
    float *y = P_.y

/* The lanes' sums of each token's dot product (the same butterfly for every
 * kernel), written by lane 0 for the tokens of the batch. */
template <int NT>
__device__ __forceinline__ void gemv_store(const float *acc, int lane, int t0, int32_t n, float *y, int64_t ldy,
                                           int64_t r) {
#pragma unroll
    for (int t = 0; t < NT; t++) {
        const float s = tfc_warp_sum(acc[t]);
        if (lane == 0 && t0 + t < n) y[(int64_t)(t0 + t) * ldy + r] = s;
    }
}

template <int T> __device__ __forceinline__ float wconv(uint16_t h);
template <> __device__ __forceinline__ float wconv<TFC_F16>(uint16_t h) { return tfc_h2f(h); }
template <> __device__ __forceinline__ float wconv<TFC_BF16>(uint16_t h) { return tfc_bf2f(h); }

/* F16 / BF16 weights. vec: n_cols % 8 == 0 and rows 16-byte aligned. */
template <int NT, int TYPE>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
k_gemv_half(const gemv_mats M, int64_t n_cols, const float *x, int32_t n, int vec) {
    GEMV_PART(uint16_t);
    const int lane = threadIdx.x & 31;
    const int64_t r = (int64_t)P_.bx * GEMV_WARPS + (threadIdx.x >> 5);
    const int t0 = blockIdx.y * NT;
    if (r >= n_rows) return;
    const uint16_t *w = W + r * n_cols;
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.0f;
    if (vec) {
        for (int64_t c = (int64_t)lane * 8; c < n_cols; c += 256) {
            const uint4 raw = *(const uint4 *)(w + c);
            const uint16_t *h = (const uint16_t *)&raw;
            float wf[8];
#pragma unroll
            for (int j = 0; j < 8; j++) wf[j] = wconv<TYPE>(h[j]);
#pragma unroll
            for (int t = 0; t < NT; t++) {
                if (t0 + t >= n) break;
                const float4 *xp = (const float4 *)(x + (int64_t)(t0 + t) * n_cols + c);
                const float4 a = __ldg(xp), b = __ldg(xp + 1);
                float s = acc[t];
                s = __fmaf_rn(wf[0], a.x, s); s = __fmaf_rn(wf[1], a.y, s);
                s = __fmaf_rn(wf[2], a.z, s); s = __fmaf_rn(wf[3], a.w, s);
                s = __fmaf_rn(wf[4], b.x, s); s = __fmaf_rn(wf[5], b.y, s);
                s = __fmaf_rn(wf[6], b.z, s); s = __fmaf_rn(wf[7], b.w, s);
                acc[t] = s;
            }
        }
    } else {
        for (int64_t c = lane; c < n_cols; c += 32) {
            const float wf = wconv<TYPE>(w[c]);
#pragma unroll
            for (int t = 0; t < NT; t++) {
                if (t0 + t >= n) break;
                acc[t] = __fmaf_rn(wf, __ldg(x + (int64_t)(t0 + t) * n_cols + c), acc[t]);
            }
        }
    }
    gemv_store<NT>(acc, lane, t0, n, y, ldy, r);
}

/* F16 / BF16 weights, split over the columns (decode and verification,
 * 1..16 tokens): a block of KS warps takes R weight rows; warp w takes the
 * 256-column chunks k with k % KS == w (lane l: columns 256 k + 8 l, 8 at a
 * time), so a lane has R 16-byte weight loads in flight and each activation
 * load serves R rows; each warp's sums go through the butterfly, then the KS
 * warps' sums are added in warp order. Per row and token the operations and
 * their order depend on n_cols only (not on n, R or the other rows): batch
 * invariant for every R. Rows 16-byte aligned, n_cols % 8 == 0. */
#define KS GEMV_WARPS
/* s + w[0] a.x + w[1] a.y + ... + w[7] b.w: eight fused multiply-adds in that order */
__device__ __forceinline__ float fma8(float s, const float (&w)[8], float4 a, float4 b) {
    s = __fmaf_rn(w[0], a.x, s); s = __fmaf_rn(w[1], a.y, s);
    s = __fmaf_rn(w[2], a.z, s); s = __fmaf_rn(w[3], a.w, s);
    s = __fmaf_rn(w[4], b.x, s); s = __fmaf_rn(w[5], b.y, s);
    s = __fmaf_rn(w[6], b.z, s); s = __fmaf_rn(w[7], b.w, s);
    return s;
}
/* XG > 0 (variant 3, for the lab and A/B runs until a GPU has timed it): the
 * activations of XG tokens are loaded before any of their products. With
 * XG = 0 each token's two loads follow the branch on its index (t < n), so
 * the loads of the tokens wait on each other's latency in turn (1.0-1.5 TB/s
 * of weights at 8 tokens against 2.8-3.2 at one, H200 lab). A group's tokens
 * past n compute on token n - 1's activations into sums never stored (with a
 * branch, the compiler sank the loads below it again). A token's products are
 * the same in the same order: variant 4's bits. */
template <int NT, int R, int TYPE, int XG>
__global__ void __launch_bounds__(KS * 32)
k_gemv_split(const gemv_mats M, int64_t n_cols, const float *x, int32_t n) {
    __shared__ float part[KS][R][NT];
    GEMV_PART(uint16_t);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t r0 = (int64_t)P_.bx * R;
    float acc[R][NT];
#pragma unroll
    for (int i = 0; i < R; i++)
#pragma unroll
        for (int t = 0; t < NT; t++) acc[i][t] = 0.0f;
    for (int64_t c = (int64_t)warp * 256 + lane * 8; c < n_cols; c += 256 * KS) {
        float wf[R][8];
#pragma unroll
        for (int i = 0; i < R; i++) {
            const int64_t r = r0 + i < n_rows ? r0 + i : n_rows - 1; /* a last partial group reads a valid row */
            const uint4 raw = *(const uint4 *)(W + r * n_cols + c);
            const uint16_t *h = (const uint16_t *)&raw;
#pragma unroll
            for (int j = 0; j < 8; j++) wf[i][j] = wconv<TYPE>(h[j]);
        }
        if constexpr (XG == 0) {
#pragma unroll
            for (int t = 0; t < NT; t++) {
                if (t >= n) break;
                const float4 *xp = (const float4 *)(x + (int64_t)t * n_cols + c);
                const float4 a = __ldg(xp), b = __ldg(xp + 1);
#pragma unroll
                for (int i = 0; i < R; i++) acc[i][t] = fma8(acc[i][t], wf[i], a, b);
            }
        } else {
            constexpr int G = XG < NT ? XG : NT;
#pragma unroll
            for (int t0 = 0; t0 < NT; t0 += G) {
                if (t0 >= n) break;
                float4 xa[G], xb[G];
#pragma unroll
                for (int g = 0; g < G; g++) { /* a token past n loads token n - 1's (never used) */
                    const float4 *xp = (const float4 *)(x + (int64_t)min(t0 + g, n - 1) * n_cols + c);
                    xa[g] = __ldg(xp), xb[g] = __ldg(xp + 1);
                }
#pragma unroll
                for (int g = 0; g < G; g++) { /* every token of the group: no branch for the loads to sink below */
                    const int t = t0 + g;
                    const float4 a = xa[g], b = xb[g];
#pragma unroll
                    for (int i = 0; i < R; i++) acc[i][t] = fma8(acc[i][t], wf[i], a, b);
                }
            }
        }
    }
#pragma unroll
    for (int i = 0; i < R; i++)
#pragma unroll
        for (int t = 0; t < NT; t++) {
            if (t >= n) break;
            const float s = tfc_warp_sum(acc[i][t]);
            if (lane == 0) part[warp][i][t] = s;
        }
    __syncthreads();
    for (int e = threadIdx.x; e < R * NT; e += KS * 32) {
        const int i = e / NT, t = e % NT;
        if (t < n && r0 + i < n_rows) {
            float s = part[0][i][t];
#pragma unroll
            for (int w = 1; w < KS; w++) s += part[w][i][t];
            y[(int64_t)t * ldy + r0 + i] = s;
        }
    }
}

/* ---- F16 / BF16 weights on the tensor cores (decode and verification) ----
 * mma.sync m16n8k8 with TF32 operands and f32 accumulators: the weights
 * (F16 and BF16 are exact in TF32) are the 16 x 8 A tile, up to 8 tokens the
 * 8 x 8 B tile (n <= 8: one tile, 9..16: two), and each activation enters as
 * two TF32 terms, x = hi + lo (hi = x rounded to TF32, lo = the rest rounded
 * to TF32), so the products keep about 22 bits of x. The reduction dimension
 * is permuted so that a lane's 16-byte load of 8 consecutive weights serves
 * 4 instructions: lane (g, q) (g = lane / 4, q = lane % 4) loads columns
 * c + 8q .. c + 8q + 7 of rows g and g + 8 and gives the instruction m (0..3)
 * columns c + 8q + 2m (as k = q) and c + 8q + 2m + 1 (as k = q + 4), and takes
 * the same columns of token g's activations for B; a warp's step covers 32
 * columns of 16 rows. The tensor cores add each instruction's products to the
 * accumulator truncating, not rounding (a chain over 4,096 columns measured
 * an NMSE of 2e-11 on the H100, against 2e-14 for f32 fused multiply-adds),
 * so each step of 32 columns (8 instructions) starts from zero and is then
 * added to the f32 sum with a rounded add. A block of KW warps takes R tiles
 * of 16 rows; warp w the 128-column chunks k with k % KW == w, the KW warps'
 * sums then added in warp order. A token's result is a function of its own
 * activations, the row, n_cols and KW (an output column of mma depends on its
 * B column only): batch invariant, whatever R. n_cols % 32 == 0, rows
 * 16-byte aligned; mma needs sm_80 or later. */
#define TC_CHUNK 128

/* The TF32 bits of an F16 / BF16 weight (exact). */
template <int TYPE> __device__ __forceinline__ uint32_t wtf32(uint16_t h);
template <> __device__ __forceinline__ uint32_t wtf32<TFC_F16>(uint16_t h) { return __float_as_uint(tfc_h2f(h)); }
template <> __device__ __forceinline__ uint32_t wtf32<TFC_BF16>(uint16_t h) { return (uint32_t)h << 16; }

template <int NTT, int R, int KW, int TYPE>
__global__ void __launch_bounds__(KW * 32)
k_gemv_tc(const gemv_mats M, int64_t n_cols, const float *x, int32_t n) {
    __shared__ float part[KW][R * 16][NTT * 8];
    GEMV_PART(uint16_t);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
    const int64_t r0 = (int64_t)P_.bx * (R * 16);
    const uint16_t *wr[R][2];
#pragma unroll
    for (int i = 0; i < R; i++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int64_t r = r0 + 16 * i + g + 8 * h;
            if (r >= n_rows) r = n_rows - 1; /* a last partial tile reads a valid row; its sums are not stored */
            wr[i][h] = W + r * n_cols + 8 * q;
        }
    const float *xr[NTT];
    bool xv[NTT];
#pragma unroll
    for (int j = 0; j < NTT; j++) {
        xv[j] = g + 8 * j < n;
        xr[j] = x + (int64_t)(xv[j] ? g + 8 * j : 0) * n_cols + 8 * q;
    }
    float acc[R][NTT][4];
#pragma unroll
    for (int i = 0; i < R; i++)
#pragma unroll
        for (int j = 0; j < NTT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;
    for (int64_t c = (int64_t)warp * TC_CHUNK; c < n_cols; c += TC_CHUNK * KW) {
        /* every load of the chunk first: 4 steps x R tiles x 2 rows of 16 bytes */
        uint4 wv[4][R][2];
        float4 xa[4][NTT][2];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const int64_t cc = c + 32 * u;
            const bool in = cc < n_cols;
#pragma unroll
            for (int i = 0; i < R; i++)
#pragma unroll
                for (int h = 0; h < 2; h++) wv[u][i][h] = in ? *(const uint4 *)(wr[i][h] + cc) : make_uint4(0, 0, 0, 0);
#pragma unroll
            for (int j = 0; j < NTT; j++) {
                const float4 z = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                xa[u][j][0] = in && xv[j] ? __ldg((const float4 *)(xr[j] + cc)) : z;
                xa[u][j][1] = in && xv[j] ? __ldg((const float4 *)(xr[j] + cc) + 1) : z;
            }
        }
#pragma unroll
        for (int u = 0; u < 4; u++) {
            if (c + 32 * u >= n_cols) break; /* depends on n_cols only */
            uint32_t bh[NTT][8], bl[NTT][8];
#pragma unroll
            for (int j = 0; j < NTT; j++) {
                const float xs[8] = {xa[u][j][0].x, xa[u][j][0].y, xa[u][j][0].z, xa[u][j][0].w,
                                     xa[u][j][1].x, xa[u][j][1].y, xa[u][j][1].z, xa[u][j][1].w};
#pragma unroll
                for (int e = 0; e < 8; e++) {
                    bh[j][e] = tfc_tf32(xs[e]);
                    const float hv = __uint_as_float(bh[j][e]); /* an infinite hi carries the value alone */
                    bl[j][e] = tfc_tf32(isfinite(hv) ? xs[e] - hv : 0.0f);
                }
            }
#pragma unroll
            for (int i = 0; i < R; i++) {
                const uint16_t *lo = (const uint16_t *)&wv[u][i][0], *hi8 = (const uint16_t *)&wv[u][i][1];
                float d[NTT][4];
#pragma unroll
                for (int j = 0; j < NTT; j++)
#pragma unroll
                    for (int e = 0; e < 4; e++) d[j][e] = 0.0f;
#pragma unroll
                for (int m = 0; m < 4; m++) {
                    const uint32_t a0 = wtf32<TYPE>(lo[2 * m]), a1 = wtf32<TYPE>(hi8[2 * m]);
                    const uint32_t a2 = wtf32<TYPE>(lo[2 * m + 1]), a3 = wtf32<TYPE>(hi8[2 * m + 1]);
#pragma unroll
                    for (int j = 0; j < NTT; j++) {
                        tfc_mma_tf32(d[j], a0, a1, a2, a3, bh[j][2 * m], bh[j][2 * m + 1]);
                        tfc_mma_tf32(d[j], a0, a1, a2, a3, bl[j][2 * m], bl[j][2 * m + 1]);
                    }
                }
#pragma unroll
                for (int j = 0; j < NTT; j++)
#pragma unroll
                    for (int e = 0; e < 4; e++) acc[i][j][e] += d[j][e];
            }
        }
    }
    /* accumulator e of tile (i, j): row 16 i + g + 8 (e / 2), token 8 j + 2 q + e % 2 */
#pragma unroll
    for (int i = 0; i < R; i++)
#pragma unroll
        for (int j = 0; j < NTT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) part[warp][16 * i + g + 8 * (e >> 1)][8 * j + 2 * q + (e & 1)] = acc[i][j][e];
    __syncthreads();
    for (int e = threadIdx.x; e < R * 16 * NTT * 8; e += KW * 32) {
        const int rr = e / (NTT * 8), t = e % (NTT * 8);
        if (t < n && r0 + rr < n_rows) {
            float s = part[0][rr][t];
#pragma unroll
            for (int w = 1; w < KW; w++) s += part[w][rr][t];
            y[(int64_t)t * ldy + r0 + rr] = s;
        }
    }
}

/* F32 weights. vec: n_cols % 4 == 0. */
template <int NT>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
k_gemv_f32(const gemv_mats M, int64_t n_cols, const float *x, int32_t n, int vec) {
    GEMV_PART(float);
    const int lane = threadIdx.x & 31;
    const int64_t r = (int64_t)P_.bx * GEMV_WARPS + (threadIdx.x >> 5);
    const int t0 = blockIdx.y * NT;
    if (r >= n_rows) return;
    const float *w = W + r * n_cols;
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.0f;
    if (vec) {
        for (int64_t c = (int64_t)lane * 4; c < n_cols; c += 128) {
            const float4 wv = *(const float4 *)(w + c);
#pragma unroll
            for (int t = 0; t < NT; t++) {
                if (t0 + t >= n) break;
                const float4 a = __ldg((const float4 *)(x + (int64_t)(t0 + t) * n_cols + c));
                float s = acc[t];
                s = __fmaf_rn(wv.x, a.x, s); s = __fmaf_rn(wv.y, a.y, s);
                s = __fmaf_rn(wv.z, a.z, s); s = __fmaf_rn(wv.w, a.w, s);
                acc[t] = s;
            }
        }
    } else {
        for (int64_t c = lane; c < n_cols; c += 32) {
            const float wf = w[c];
#pragma unroll
            for (int t = 0; t < NT; t++) {
                if (t0 + t >= n) break;
                acc[t] = __fmaf_rn(wf, __ldg(x + (int64_t)(t0 + t) * n_cols + c), acc[t]);
            }
        }
    }
    gemv_store<NT>(acc, lane, t0, n, y, ldy, r);
}

/* Q8_0 weights (34-byte blocks: f16 scale, 32 int8): a lane takes whole
 * blocks; the block's dot product is summed, then scaled (as the CPU's
 * dequantize-then-dot up to rounding). */
template <int NT>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
k_gemv_q8_0(const gemv_mats M, int64_t n_cols, const float *x, int32_t n) {
    GEMV_PART(uint8_t);
    const int lane = threadIdx.x & 31;
    const int64_t r = (int64_t)P_.bx * GEMV_WARPS + (threadIdx.x >> 5);
    const int t0 = blockIdx.y * NT;
    if (r >= n_rows) return;
    const int64_t nb = n_cols / TFC_Q8_0_BLOCK;
    const uint8_t *w = W + r * nb * TFC_Q8_0_BYTES;
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.0f;
    for (int64_t b = lane; b < nb; b += 32) {
        const uint16_t *blk = (const uint16_t *)(w + b * TFC_Q8_0_BYTES); /* 2-byte aligned */
        const float d = tfc_h2f(blk[0]);
        float q[32];
#pragma unroll
        for (int j = 0; j < 16; j++) {
            const uint16_t two = blk[1 + j];
            q[2 * j] = (float)(int8_t)(two & 0xff);
            q[2 * j + 1] = (float)(int8_t)(two >> 8);
        }
#pragma unroll
        for (int t = 0; t < NT; t++) {
            if (t0 + t >= n) break;
            const float4 *xp = (const float4 *)(x + (int64_t)(t0 + t) * n_cols + b * TFC_Q8_0_BLOCK);
            float s = 0.0f;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const float4 a = __ldg(xp + j);
                s = __fmaf_rn(q[4 * j], a.x, s); s = __fmaf_rn(q[4 * j + 1], a.y, s);
                s = __fmaf_rn(q[4 * j + 2], a.z, s); s = __fmaf_rn(q[4 * j + 3], a.w, s);
            }
            acc[t] = __fmaf_rn(d, s, acc[t]);
        }
    }
    gemv_store<NT>(acc, lane, t0, n, y, ldy, r);
}

/* Q4_0 (18-byte blocks: f16 d, 16 bytes of nibbles, value d * (q - 8)) and
 * Q4_1 (20-byte blocks: f16 d, f16 m, nibbles, value d * q + m); element j < 16
 * of a block is the low nibble of byte j, element j + 16 its high nibble. A
 * lane takes whole blocks: the block's sum of q * x (and of x for Q4_1) in a
 * fixed order, then scaled, as the Q8_0 kernel does. */
template <int NT, int TYPE>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
k_gemv_q4(const gemv_mats M, int64_t n_cols, const float *x, int32_t n) {
    constexpr int BYTES = TYPE == TFC_Q4_1 ? TFC_Q4_1_BYTES : TFC_Q4_0_BYTES;
    constexpr int QOFF = TYPE == TFC_Q4_1 ? 2 : 1; /* first uint16 of the nibbles */
    GEMV_PART(uint8_t);
    const int lane = threadIdx.x & 31;
    const int64_t r = (int64_t)P_.bx * GEMV_WARPS + (threadIdx.x >> 5);
    const int t0 = blockIdx.y * NT;
    if (r >= n_rows) return;
    const int64_t nb = n_cols / 32;
    const uint8_t *w = W + r * nb * BYTES;
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.0f;
    for (int64_t b = lane; b < nb; b += 32) {
        const uint16_t *blk = (const uint16_t *)(w + b * BYTES); /* 2-byte aligned */
        const float d = tfc_h2f(blk[0]);
        const float m = TYPE == TFC_Q4_1 ? tfc_h2f(blk[1]) : 0.0f;
        float q[32];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const uint16_t two = blk[QOFF + j];
            const int lo0 = two & 0xf, hi0 = (two >> 4) & 0xf, lo1 = (two >> 8) & 0xf, hi1 = two >> 12;
            q[2 * j] = (float)(TYPE == TFC_Q4_1 ? lo0 : lo0 - 8);
            q[2 * j + 1] = (float)(TYPE == TFC_Q4_1 ? lo1 : lo1 - 8);
            q[2 * j + 16] = (float)(TYPE == TFC_Q4_1 ? hi0 : hi0 - 8);
            q[2 * j + 17] = (float)(TYPE == TFC_Q4_1 ? hi1 : hi1 - 8);
        }
#pragma unroll
        for (int t = 0; t < NT; t++) {
            if (t0 + t >= n) break;
            const float4 *xp = (const float4 *)(x + (int64_t)(t0 + t) * n_cols + b * 32);
            float s = 0.0f, sx = 0.0f;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const float4 a = __ldg(xp + j);
                s = __fmaf_rn(q[4 * j], a.x, s); s = __fmaf_rn(q[4 * j + 1], a.y, s);
                s = __fmaf_rn(q[4 * j + 2], a.z, s); s = __fmaf_rn(q[4 * j + 3], a.w, s);
                if (TYPE == TFC_Q4_1) sx += (a.x + a.y) + (a.z + a.w);
            }
            float v = __fmaf_rn(d, s, acc[t]);
            if (TYPE == TFC_Q4_1) v = __fmaf_rn(m, sx, v);
            acc[t] = v;
        }
    }
    gemv_store<NT>(acc, lane, t0, n, y, ldy, r);
}

/* The launch's matrices (w[0..n_w), one type and width), the blocks of
 * rows_per_block rows each takes; *blocks: the grid's blocks in all. */
static gemv_mats mats_of(int n_w, const tf_cuda_mat *w, float *const *y, const int64_t *ldy, int rows_per_block,
                         unsigned *blocks) {
    gemv_mats M = {};
    unsigned b = 0;
    for (int i = 0; i < n_w; i++) {
        M.W[i] = w[i].data;
        M.y[i] = y[i];
        M.n_rows[i] = w[i].n_rows;
        M.ldy[i] = ldy[i];
        M.b0[i] = b;
        b += tfc_blocks(w[i].n_rows, rows_per_block);
    }
    M.n_w = n_w;
    *blocks = b;
    return M;
}

template <int NT>
static void gemv_nt(tf_cuda *cu, int n_w, const tf_cuda_mat *w, const float *x, int32_t n, float *const *y,
                    const int64_t *ldy) {
    unsigned blocks;
    const gemv_mats M = mats_of(n_w, w, y, ldy, GEMV_WARPS, &blocks);
    dim3 grid(blocks, (n + NT - 1) / NT);
    dim3 block(GEMV_WARPS * 32);
    const int64_t nc = w[0].n_cols;
    const int vec8 = nc % 8 == 0 && ((uintptr_t)w[0].data % 16) == 0;
    switch (w[0].type) {
    case TFC_F16: k_gemv_half<NT, TFC_F16><<<grid, block, 0, cu->stream>>>(M, nc, x, n, vec8); break;
    case TFC_BF16: k_gemv_half<NT, TFC_BF16><<<grid, block, 0, cu->stream>>>(M, nc, x, n, vec8); break;
    case TFC_F32:
        k_gemv_f32<NT><<<grid, block, 0, cu->stream>>>(M, nc, x, n,
                                                       nc % 4 == 0 && ((uintptr_t)w[0].data % 16) == 0);
        break;
    case TFC_Q8_0: k_gemv_q8_0<NT><<<grid, block, 0, cu->stream>>>(M, nc, x, n); break;
    case TFC_Q4_0: k_gemv_q4<NT, TFC_Q4_0><<<grid, block, 0, cu->stream>>>(M, nc, x, n); break;
    case TFC_Q4_1: k_gemv_q4<NT, TFC_Q4_1><<<grid, block, 0, cu->stream>>>(M, nc, x, n); break;
    }
}

extern "C" int tf_cuda_mat_type_ok(uint32_t type) {
    return type == TFC_F32 || type == TFC_F16 || type == TFC_BF16 || type == TFC_Q8_0 || type == TFC_Q4_0 ||
           type == TFC_Q4_1;
}

/* k_gemv_split for NT tokens, R rows per block, XG tokens' activations loaded at once (0: one by one) */
template <int NT, int R, int XG>
static void gemv_split(tf_cuda *cu, int n_w, const tf_cuda_mat *w, const float *x, int32_t n, float *const *y,
                       const int64_t *ldy) {
    unsigned blocks;
    const gemv_mats M = mats_of(n_w, w, y, ldy, R, &blocks);
    if (w[0].type == TFC_F16)
        k_gemv_split<NT, R, TFC_F16, XG><<<blocks, KS * 32, 0, cu->stream>>>(M, w[0].n_cols, x, n);
    else k_gemv_split<NT, R, TFC_BF16, XG><<<blocks, KS * 32, 0, cu->stream>>>(M, w[0].n_cols, x, n);
}
template <int R, int XG = 0>
static void gemv_split_r(tf_cuda *cu, int n_w, const tf_cuda_mat *w, const float *x, int32_t n, float *const *y,
                         const int64_t *ldy) {
    if (n == 1) gemv_split<1, R, 0>(cu, n_w, w, x, n, y, ldy); /* one token: nothing to group */
    else if (n == 2) gemv_split<2, R, XG>(cu, n_w, w, x, n, y, ldy);
    else if (n <= 4) gemv_split<4, R, XG>(cu, n_w, w, x, n, y, ldy);
    else if (n <= 8) gemv_split<8, R, XG>(cu, n_w, w, x, n, y, ldy);
    else gemv_split<16, R, XG>(cu, n_w, w, x, n, y, ldy);
}

/* k_gemv_tc for NTT tiles of 8 tokens, R tiles of 16 rows and KW warps per block */
template <int NTT, int R, int KW>
static void gemv_tc(tf_cuda *cu, int n_w, const tf_cuda_mat *w, const float *x, int32_t n, float *const *y,
                    const int64_t *ldy) {
    unsigned blocks;
    const gemv_mats M = mats_of(n_w, w, y, ldy, R * 16, &blocks);
    if (w[0].type == TFC_F16)
        k_gemv_tc<NTT, R, KW, TFC_F16><<<blocks, KW * 32, 0, cu->stream>>>(M, w[0].n_cols, x, n);
    else
        k_gemv_tc<NTT, R, KW, TFC_BF16><<<blocks, KW * 32, 0, cu->stream>>>(M, w[0].n_cols, x, n);
}
template <int R, int KW>
static void gemv_tc_r(tf_cuda *cu, int n_w, const tf_cuda_mat *w, const float *x, int32_t n, float *const *y,
                      const int64_t *ldy) {
    if (n <= 8) gemv_tc<1, R, KW>(cu, n_w, w, x, n, y, ldy);
    else gemv_tc<2, R, KW>(cu, n_w, w, x, n, y, ldy);
}

/* The GEMV's variant: TF_CUDA_GEMV (read once) = 1 (k_gemv_half, a warp per
 * row, for every weight type), 4 (F16/BF16 rows split over the columns,
 * k_gemv_split), 3 (4 with the activations of 4 tokens loaded at once: 4's
 * bits, not yet run on a GPU) or 6..9 (F16/BF16 on the tensor cores,
 * k_gemv_tc); default 4.
 * For labs and A/B runs. */
static int gemv_variant(void) {
    static int v = -1;
    if (v < 0) v = tfc_env_variant("TF_CUDA_GEMV", "1346789", 4);
    return v;
}

extern "C" void tf_cuda_gemv(tf_cuda *cu, const tf_cuda_mat *w, const float *x, int32_t n, float *y, int64_t ldy) {
    tf_cuda_gemv_n_variant(cu, 1, w, x, n, &y, &ldy, gemv_variant());
}

extern "C" void tf_cuda_gemv_variant(tf_cuda *cu, const tf_cuda_mat *w, const float *x, int32_t n, float *y,
                                     int64_t ldy, int variant) {
    tf_cuda_gemv_n_variant(cu, 1, w, x, n, &y, &ldy, variant);
}

/* Which kernel and which loads a matrix gets: a launch of several matrices
 * needs the same for each (else each is launched alone). */
static int gemv_shape_key(const tf_cuda_mat *w) {
    const bool a16 = (uintptr_t)w->data % 16 == 0;
    return (w->n_cols % 8 == 0 && a16) | (w->n_cols % 4 == 0 && a16) << 1 | (w->n_cols % 32 == 0) << 2;
}

extern "C" void tf_cuda_gemv_n_variant(tf_cuda *cu, int n_w, const tf_cuda_mat *w, const float *x, int32_t n,
                                       float *const *y, const int64_t *ldy, int variant) {
    if (n <= 0 || n_w <= 0) return;
    bool one = n_w <= GEMV_MATS;
    for (int i = 1; i < n_w && one; i++)
        one = w[i].type == w[0].type && w[i].n_cols == w[0].n_cols && gemv_shape_key(&w[i]) == gemv_shape_key(&w[0]);
    if (!one) {
        for (int i = 0; i < n_w; i++) tf_cuda_gemv_n_variant(cu, 1, &w[i], x, n, &y[i], &ldy[i], variant);
        return;
    }
    /* x rows must be 16-byte aligned for the vector loads: n_cols % 4 == 0
     * holds for every llama shape whose Q8_0 / vector paths are used */
    const bool split_ok = (w[0].type == TFC_F16 || w[0].type == TFC_BF16) && w[0].n_cols % 8 == 0 &&
                          (uintptr_t)w[0].data % 16 == 0 && n <= 16;
    if (variant >= 6 && variant <= 9 && split_ok && w[0].n_cols % 32 == 0 && cu->sm >= 80) {
        /* 6: 4 warps, 1 tile of 16 rows per block; 7: 4 warps, 2 tiles (the same bits as 6);
         * 8: 8 warps, 1 tile; 9: 16 warps, 1 tile (labs and A/B runs) */
        if (variant == 6) gemv_tc_r<1, 4>(cu, n_w, w, x, n, y, ldy);
        else if (variant == 7) gemv_tc_r<2, 4>(cu, n_w, w, x, n, y, ldy);
        else if (variant == 8) gemv_tc_r<1, 8>(cu, n_w, w, x, n, y, ldy);
        else gemv_tc_r<1, 16>(cu, n_w, w, x, n, y, ldy);
        return;
    }
    if (((variant >= 3 && variant <= 5) || variant >= 6) && split_ok) {
        /* 4: R = 4; 5: R = 2; 3: R = 4, 4 tokens' activations loaded at once (labs, A/B; the same bits) */
        if (variant == 5) gemv_split_r<2>(cu, n_w, w, x, n, y, ldy);
        else if (variant == 3) gemv_split_r<4, 4>(cu, n_w, w, x, n, y, ldy);
        else gemv_split_r<4>(cu, n_w, w, x, n, y, ldy);
        return;
    }
    if (n == 1) gemv_nt<1>(cu, n_w, w, x, n, y, ldy);
    else if (n == 2) gemv_nt<2>(cu, n_w, w, x, n, y, ldy);
    else if (n <= 4) gemv_nt<4>(cu, n_w, w, x, n, y, ldy);
    else gemv_nt<8>(cu, n_w, w, x, n, y, ldy);
}

/* ---- cuBLAS ------------------------------------------------------------------ */

__global__ void k_to_half(uint16_t *dst, const float *src, int64_t n, int bf16) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = bf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(src[i])) : tfc_f2h(src[i]);
}

extern "C" size_t tf_cuda_matmul_scratch(const tf_cuda_mat *w, int32_t n_max) {
    if (w->type == TFC_F16 || w->type == TFC_BF16) return (size_t)n_max * (size_t)w->n_cols * 2;
    return 0;
}

extern "C" tf_status tf_cuda_gemm(tf_cuda *cu, const tf_cuda_mat *w, const float *x, int32_t n, float *y,
                                  int64_t ldy, void *scratch, tf_err *err) {
    /* Row-major W [rows][cols] is column-major [cols][rows]: Y^T = op(W)^T X^T,
     * i.e. C (rows x n, ld ldy) = A^T (A: cols x rows, ld cols) * B (cols x n, ld cols). */
    const float alpha = 1.0f, beta = 0.0f;
    cublasStatus_t s;
    if (w->type == TFC_F32) {
        s = cublasSgemm(cu->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)w->n_rows, n, (int)w->n_cols, &alpha,
                        (const float *)w->data, (int)w->n_cols, x, (int)w->n_cols, &beta, y, (int)ldy);
    } else if (w->type == TFC_F16 || w->type == TFC_BF16) {
        const int bf = w->type == TFC_BF16;
        const int64_t cnt = (int64_t)n * w->n_cols;
        unsigned blocks = tfc_blocks(cnt, 256);
        k_to_half<<<blocks < 8192 ? blocks : 8192, 256, 0, cu->stream>>>((uint16_t *)scratch, x, cnt, bf);
        cudaDataType t = bf ? CUDA_R_16BF : CUDA_R_16F;
        s = cublasGemmEx(cu->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)w->n_rows, n, (int)w->n_cols, &alpha, w->data, t,
                         (int)w->n_cols, scratch, t, (int)w->n_cols, &beta, y, CUDA_R_32F, (int)ldy,
                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    } else {
        return tf_errf(err, TF_ERR_UNSUPPORTED, "cuBLAS path: weight type %u has no GEMM here (use the GEMV path)",
                       w->type);
    }
    return s == CUBLAS_STATUS_SUCCESS ? TF_OK : tfc_blas_err(err, s, "matrix product");
}

extern "C" tf_status tf_cuda_matmul(tf_cuda *cu, const tf_cuda_mat *w, const float *x, int32_t n, float *y,
                                    int64_t ldy, void *scratch, tf_err *err) {
    if (!tf_cuda_mat_type_ok(w->type))
        return tf_errf(err, TF_ERR_UNSUPPORTED, "the CUDA backend has no kernel for weight type %u", w->type);
    if (n <= TF_CUDA_GEMV_MAX_ROWS || w->type == TFC_Q8_0 || w->type == TFC_Q4_0 || w->type == TFC_Q4_1) {
        tf_cuda_gemv(cu, w, x, n, y, ldy);
        return TF_OK;
    }
    return tf_cuda_gemm(cu, w, x, n, y, ldy, scratch, err);
}

/* Several matrices of one input (a layer's q/k/v, gate/up): one GEMV launch
 * where the GEMV runs (TF_CUDA_GEMV_MULTI=0: a launch each, for A/B runs),
 * else a GEMM each. Every y[i] has the bits tf_cuda_matmul gives it. */
extern "C" tf_status tf_cuda_matmul_n(tf_cuda *cu, int n_w, const tf_cuda_mat *w, const float *x, int32_t n,
                                      float *const *y, const int64_t *ldy, void *scratch, tf_err *err) {
    static int multi = -1;
    if (multi < 0) multi = tfc_env_variant("TF_CUDA_GEMV_MULTI", "01", 1);
    bool gemv = true;
    for (int i = 0; i < n_w; i++) {
        if (!tf_cuda_mat_type_ok(w[i].type))
            return tf_errf(err, TF_ERR_UNSUPPORTED, "the CUDA backend has no kernel for weight type %u", w[i].type);
        gemv &= n <= TF_CUDA_GEMV_MAX_ROWS || w[i].type == TFC_Q8_0 || w[i].type == TFC_Q4_0 || w[i].type == TFC_Q4_1;
    }
    if (gemv && multi) {
        tf_cuda_gemv_n_variant(cu, n_w, w, x, n, y, ldy, gemv_variant());
        return TF_OK;
    }
    for (int i = 0; i < n_w; i++) {
        const tf_status st = tf_cuda_matmul(cu, &w[i], x, n, y[i], ldy[i], scratch, err);
        if (st != TF_OK) return st;
    }
    return TF_OK;
}
