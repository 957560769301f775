/*
 * cuda_sampling.cu — logits to tokens on the device: argmax (greedy), the
 * top-k candidates that sampling needs (the decoder's path when top-k is on),
 * softmax with temperature, inverse-CDF draws with caller-supplied uniforms,
 * and the exact speculative verification of one drafted token against dense
 * target / draft distributions. One block per row; reductions in a fixed
 * order, so results are deterministic.
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

__global__ void __launch_bounds__(SAMP_THREADS) k_softmax(float *p, const float *logits, int32_t V, float inv_temp) {
    __shared__ float red[32];
    const float *x = logits + (int64_t)blockIdx.x * V;
    float *y = p + (int64_t)blockIdx.x * V;
    /* x * inv_temp rounded before the subtraction (no FMA contraction): with
     * the exact product, a huge logit minus its own rounded maximum is far
     * from 0 and its exp overflows */
    float m = -INFINITY;
    for (int32_t i = threadIdx.x; i < V; i += SAMP_THREADS) m = fmaxf(m, __fmul_rn(x[i], inv_temp));
    m = tfc_block_max(m, red);
    float s = 0.0f;
    for (int32_t i = threadIdx.x; i < V; i += SAMP_THREADS) {
        const float e = expf(__fmul_rn(x[i], inv_temp) - m);
        y[i] = e;
        s += e;
    }
    s = tfc_block_sum(s, red);
    const float inv = 1.0f / s;
    for (int32_t i = threadIdx.x; i < V; i += SAMP_THREADS) y[i] *= inv;
}

extern "C" void tf_cuda_softmax(tf_cuda *cu, float *p, const float *logits, int32_t n_rows, int32_t n_vocab,
                                float temp) {
    if (n_rows < 1) return;
    k_softmax<<<n_rows, SAMP_THREADS, 0, cu->stream>>>(p, logits, n_vocab, 1.0f / temp);
}

/* Inverse CDF over w(i) >= 0 for i < V in id order at u * total: each thread
 * sums a contiguous segment, thread 0 scans the segment sums, the owning
 * thread scans its segment. Returns the token to every thread. If rounding
 * leaves the target beyond the last mass, the last id with mass wins. */
template <typename W>
__device__ int32_t block_inverse_cdf(W w, int32_t V, float u, float *seg, int32_t *res) {
    const int tid = threadIdx.x;
    const int32_t per = (V + SAMP_THREADS - 1) / SAMP_THREADS;
    const int32_t a = min(V, tid * per), b = min(V, a + per);
    float s = 0.0f;
    for (int32_t i = a; i < b; i++) s += w(i);
    seg[tid] = s;
    __syncthreads();
    if (tid == 0) {
        float total = 0.0f;
        for (int t = 0; t < SAMP_THREADS; t++) total += seg[t];
        const float target = u * total;
        float cum = 0.0f;
        int t = 0, last = -1;
        for (; t < SAMP_THREADS; t++) {
            if (seg[t] > 0.0f) last = t;
            if (cum + seg[t] > target && seg[t] > 0.0f) break;
            cum += seg[t];
        }
        if (t == SAMP_THREADS) t = last < 0 ? 0 : last;
        res[0] = t;
        seg[SAMP_THREADS] = target - cum; /* remaining mass inside segment t */
    }
    __syncthreads();
    if (tid == res[0]) {
        float rem = seg[SAMP_THREADS], cum = 0.0f;
        int32_t pick = -1, last = a;
        for (int32_t i = a; i < b; i++) {
            const float wi = w(i);
            if (wi > 0.0f) last = i;
            cum += wi;
            if (cum > rem && wi > 0.0f) {
                pick = i;
                break;
            }
        }
        res[1] = pick < 0 ? last : pick;
    }
    __syncthreads();
    return res[1];
}

struct dense_w {
    const float *p;
    __device__ float operator()(int32_t i) const { return p[i]; }
};

struct residual_w {
    const float *p, *q;
    __device__ float operator()(int32_t i) const { return fmaxf(p[i] - q[i], 0.0f); }
};

__global__ void __launch_bounds__(SAMP_THREADS)
k_sample(int32_t *out, const float *p, const float *u, int32_t V) {
    __shared__ float seg[SAMP_THREADS + 1];
    __shared__ int32_t res[2];
    dense_w w = {p + (int64_t)blockIdx.x * V};
    const int32_t tok = block_inverse_cdf(w, V, u[blockIdx.x], seg, res);
    if (threadIdx.x == 0) out[blockIdx.x] = tok;
}

extern "C" void tf_cuda_sample(tf_cuda *cu, int32_t *out_d, const float *p, const float *u_d, int32_t n_rows,
                               int32_t n_vocab) {
    if (n_rows < 1) return;
    k_sample<<<n_rows, SAMP_THREADS, 0, cu->stream>>>(out_d, p, u_d, n_vocab);
}

__global__ void __launch_bounds__(SAMP_THREADS)
k_verify(int32_t *out, const float *p, const float *q, int32_t x, const float *u, int32_t V) {
    __shared__ float seg[SAMP_THREADS + 1];
    __shared__ int32_t res[2];
    __shared__ float red[32];
    const float px = x >= 0 && x < V ? p[x] : 0.0f, qx = x >= 0 && x < V ? q[x] : 0.0f;
    /* accept with probability min(1, p/q): u < p/q, written without the division */
    const bool accept = qx > 0.0f && u[0] * qx < px;
    if (accept) {
        if (threadIdx.x == 0) {
            out[0] = x;
            out[1] = 1;
        }
        return;
    }
    float s = 0.0f;
    for (int32_t i = threadIdx.x; i < V; i += SAMP_THREADS) s += fmaxf(p[i] - q[i], 0.0f);
    s = tfc_block_sum(s, red);
    int32_t tok;
    if (s > 0.0f) {
        residual_w w = {p, q};
        tok = block_inverse_cdf(w, V, u[1], seg, res);
    } else { /* p == q up to rounding: the residual's limit is p */
        dense_w w = {p};
        tok = block_inverse_cdf(w, V, u[1], seg, res);
    }
    if (threadIdx.x == 0) {
        out[0] = tok;
        out[1] = 0;
    }
}

extern "C" void tf_cuda_verify(tf_cuda *cu, int32_t *out_d, const float *p, const float *q, int32_t x,
                               const float *u_d, int32_t n_vocab) {
    k_verify<<<1, SAMP_THREADS, 0, cu->stream>>>(out_d, p, q, x, u_d, n_vocab);
}
