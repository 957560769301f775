/*
 * cuda_sampling.cu — logits to tokens on the device: argmax (greedy) and
 * the top-k candidates that sampling needs (the decoder's path when top-k is
 * on; the distribution and verification are built from them on the host).
 * One block per row; reductions in a fixed order, so results are
 * deterministic.
 */
#include "backend/cuda/cuda_common.cuh"
#include "core/topk.h"

#define SAMP_THREADS 1024

/* (value, id) better: larger value, then lower id; NaN never wins. */
__device__ __forceinline__ bool better(float va, int32_t ia, float vb, int32_t ib) {
    if (ia < 0) return false;
    if (ib < 0) return true;
    return va > vb || (va == vb && ia < ib);
}

__global__ void __launch_bounds__(SAMP_THREADS) k_argmax(int32_t *out, const float *logits, int32_t V) {
    __shared__ float sv[32];
    __shared__ int32_t si[32];
    const float *x = logits + (int64_t)blockIdx.x * V;
    float bv = 0.0f;
    int32_t bi = -1;
    for (int32_t i = threadIdx.x; i < V; i += SAMP_THREADS) {
        const float v = x[i];
        if (!isnan(v) && better(v, i, bv, bi)) {
            bv = v;
            bi = i;
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        const int32_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (better(ov, oi, bv, bi)) {
            bv = ov;
            bi = oi;
        }
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        sv[warp] = bv;
        si[warp] = bi;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < SAMP_THREADS / 32; w++)
            if (better(sv[w], si[w], bv, bi)) {
                bv = sv[w];
                bi = si[w];
            }
        out[blockIdx.x] = bi < 0 ? 0 : bi;
    }
}

extern "C" void tf_cuda_argmax(tf_cuda *cu, int32_t *out_d, const float *logits, int32_t n_rows, int32_t n_vocab) {
    if (n_rows < 1) return;
    k_argmax<<<n_rows, SAMP_THREADS, 0, cu->stream>>>(out_d, logits, n_vocab);
}

/* ---- sampling's candidates: the k best z = logit / temp of each row (core/topk.c) ---- */

#define TOPK_THREADS 128

/* Larger z, then lower id (ids are distinct: a strict order). */
__device__ __forceinline__ bool z_before(float za, int32_t ia, float zb, int32_t ib) {
    return za > zb || (za == zb && ia < ib);
}

/* One block per row. Each thread keeps the k best of its strided share in a
 * sorted list; then k rounds take the best head of the lists (a block
 * reduction), so the output is the row's k best in order. */
__global__ void __launch_bounds__(TOPK_THREADS)
k_topk(int32_t *out, const float *logits, int32_t n_rows, int32_t V, int32_t k, float temp) {
    __shared__ float sz[TOPK_THREADS / 32];
    __shared__ int32_t si[TOPK_THREADS / 32], st[TOPK_THREADS / 32];
    __shared__ float win_z;
    __shared__ int32_t win_i, win_t;
    const int32_t r = blockIdx.x;
    const float *x = logits + (int64_t)r * V;
    float zl[TF_TOPK_MAX];
    int32_t il[TF_TOPK_MAX];
    int cnt = 0;
    for (int32_t i = threadIdx.x; i < V; i += TOPK_THREADS) {
        const float l = x[i];
        const float z = isnan(l) ? -INFINITY : __fdiv_rn(l, temp); /* as the host's l / temp */
        if (z == -INFINITY) continue;
        if (cnt == k && !z_before(z, i, zl[k - 1], il[k - 1])) continue;
        int p = cnt < k ? cnt++ : k - 1; /* the new entry goes in at p, then moves up */
        while (p > 0 && z_before(z, i, zl[p - 1], il[p - 1])) {
            zl[p] = zl[p - 1];
            il[p] = il[p - 1];
            p--;
        }
        zl[p] = z;
        il[p] = i;
    }
    int32_t *ids_out = out + (int64_t)r * k;
    float *z_out = (float *)(out + (int64_t)n_rows * k) + (int64_t)r * k;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int head = 0, kept = 0;
    for (int j = 0; j < k; j++) {
        float bz = head < cnt ? zl[head] : -INFINITY;
        int32_t bi = head < cnt ? il[head] : -1, bt = threadIdx.x;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float oz = __shfl_xor_sync(0xffffffffu, bz, o);
            const int32_t oi = __shfl_xor_sync(0xffffffffu, bi, o), ot = __shfl_xor_sync(0xffffffffu, bt, o);
            if (oi >= 0 && (bi < 0 || z_before(oz, oi, bz, bi))) bz = oz, bi = oi, bt = ot;
        }
        if (lane == 0) sz[warp] = bz, si[warp] = bi, st[warp] = bt;
        __syncthreads();
        if (threadIdx.x == 0) {
            for (int w = 1; w < TOPK_THREADS / 32; w++)
                if (si[w] >= 0 && (bi < 0 || z_before(sz[w], si[w], bz, bi))) bz = sz[w], bi = si[w], bt = st[w];
            win_z = bz, win_i = bi, win_t = bt;
        }
        __syncthreads();
        if (win_i < 0) break; /* every list is empty (the same for the whole block) */
        if ((int32_t)threadIdx.x == win_t) head++;
        if (threadIdx.x == 0) ids_out[j] = win_i, z_out[j] = win_z;
        kept++;
        __syncthreads(); /* the shared slots are written again next round */
    }
    if (threadIdx.x == 0) out[(int64_t)2 * n_rows * k + r] = kept;
}

extern "C" void tf_cuda_topk(tf_cuda *cu, int32_t *out_d, const float *logits, int32_t n_rows, int32_t n_vocab,
                             int32_t k, float temp) {
    if (n_rows < 1 || k < 1 || k > TF_TOPK_MAX) return; /* callers check k (tf_fwd_topk) */
    k_topk<<<n_rows, TOPK_THREADS, 0, cu->stream>>>(out_d, logits, n_rows, n_vocab, k, temp);
}
