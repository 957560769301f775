/*
 * cuda_attn.cu — attention over an f16 KV cache view (a prefix of slots per
 * row): split-K flash-decoding for decode / verification batches (prefill:
 * cuda_attn_prefill.cu). Mirrors tf_cpu_attn (reference:
 * tf_ref_attn): out[i][hq] = softmax(scale * q[i][hq] . K[h][s]) . V[h][s]
 * over s < kv_len[i] outside the gap [gap[0], gap[1]), h = hq / (n_head /
 * n_head_kv). The kernels count a row's visible slots in order (key j of the
 * row is slot j before the gap, j + its width after it), so a gap costs
 * nothing but the index arithmetic.
 */
#include "backend/cuda/cuda_attn.cuh"
#include "backend/cuda/cuda_mma.cuh"

#define SPLIT TF_CUDA_ATTN_SPLIT
#define DEC_THREADS 128
#define MAX_GROUP 8

static int32_t n_splits(int32_t max_kv) { return (max_kv + SPLIT - 1) / SPLIT; }

/* The partial result's index of query vector v of a block of rows from r0
 * (g query heads per KV head h: vector v is row r0 + v / g, head h g + v % g)
 * for split s. */
__device__ __forceinline__ int64_t vec_part(int r0, int v, int g, int32_t n_head, int h, int32_t n_split, int s) {
    return ((int64_t)(r0 + v / g) * n_head + h * g + v % g) * n_split + s;
}
/* A block's softmax states (max, sum of exponentials) of its vectors that
 * see keys of split s, by the first nqv threads. */
__device__ __forceinline__ void store_ml(float *ml_part, const float *mx, const float *sm, const int *nks, int nqv,
                                         int r0, int g, int32_t n_head, int h, int32_t n_split, int s) {
    const int v = threadIdx.x;
    if (v < nqv && nks[v] > 0) {
        const int64_t part = vec_part(r0, v, g, n_head, h, n_split, s);
        ml_part[2 * part] = mx[v];
        ml_part[2 * part + 1] = sm[v];
    }
}

extern "C" size_t tf_cuda_attn_scratch(int32_t n_q_max, int32_t n_head, int32_t head_dim, int32_t max_kv) {
    size_t parts = (size_t)n_q_max * n_head * n_splits(max_kv);
    return parts * ((size_t)head_dim + 2) * sizeof(float);
}

/* The softmax state of one split for one query vector, by one warp: the
 * scores s[0, nk) become exp(s - max) in place; the max and the sum of the
 * exponentials go to *m_out and *l_out (lane 0). */
__device__ __forceinline__ void split_softmax(float *s, int nk, int lane, float *m_out, float *l_out) {
    float m = -INFINITY;
    for (int j = lane; j < nk; j += 32) m = fmaxf(m, s[j]);
    m = tfc_warp_max(m);
    float l = 0.0f;
    for (int j = lane; j < nk; j += 32) {
        const float p = __expf(s[j] - m);
        s[j] = p;
        l += p;
    }
    l = tfc_warp_sum(l);
    if (lane == 0) {
        *m_out = m;
        *l_out = l;
    }
}

/* ---- decode: phase 1, one block per (KV head, split, row) -------------------------- */

__global__ void __launch_bounds__(DEC_THREADS)
k_attn_split(const float *q, int64_t ldq, const uint16_t *K, const uint16_t *V, int32_t n_slots, int32_t n_head,
             int32_t n_head_kv, int32_t hd, const int32_t *kv_len, const int32_t *gap, float scale, float *o_part,
             float *ml_part, int32_t n_split) {
    __shared__ float qs[MAX_GROUP][MAX_HD];
    __shared__ float sc[MAX_GROUP][SPLIT];
    const int h = blockIdx.x, s = blockIdx.y, i = blockIdx.z;
    const int g = n_head / n_head_kv;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarp = DEC_THREADS / 32;
    const int2 gp = gap_of(gap);
    const int32_t len = vis_len(gp, kv_len[i]);
    const int32_t k0 = s * SPLIT, k1 = min(k0 + SPLIT, len);
    if (k0 >= len) return; /* the merge reads only splits below ceil(len / SPLIT) */
    const int nk = k1 - k0;
    for (int e = threadIdx.x; e < g * hd; e += DEC_THREADS)
        qs[e / hd][e % hd] = q[(int64_t)i * ldq + (int64_t)(h * g) * hd + e];
    __syncthreads();
    /* scores: a warp per key, lanes over pairs of dimensions */
    const uint16_t *Kh = K + (int64_t)h * n_slots * hd;
    const uint16_t *Vh = V + (int64_t)h * n_slots * hd;
    for (int j = warp; j < nk; j += nwarp) {
        const __half2 *kr = (const __half2 *)(Kh + vis_slot(gp, k0 + j) * hd);
        float dot[MAX_GROUP];
#pragma unroll
        for (int gi = 0; gi < MAX_GROUP; gi++) dot[gi] = 0.0f;
        for (int d2 = lane; d2 < hd / 2; d2 += 32) {
            const float2 kf = __half22float2(kr[d2]);
#pragma unroll
            for (int gi = 0; gi < MAX_GROUP; gi++)
                if (gi < g) dot[gi] = __fmaf_rn(kf.y, qs[gi][2 * d2 + 1], __fmaf_rn(kf.x, qs[gi][2 * d2], dot[gi]));
        }
#pragma unroll
        for (int gi = 0; gi < MAX_GROUP; gi++)
            if (gi < g) {
                const float t = tfc_warp_sum(dot[gi]);
                if (lane == 0) sc[gi][j] = t * scale;
            }
    }
    __syncthreads();
    /* softmax state of this split: a warp per group head */
    __shared__ float mx[MAX_GROUP], sm[MAX_GROUP];
    for (int gi = warp; gi < g; gi += nwarp) split_softmax(sc[gi], nk, lane, &mx[gi], &sm[gi]);
    __syncthreads();
    /* weighted values: threads over dimensions, keys in order */
    for (int d = threadIdx.x; d < hd; d += DEC_THREADS) {
        float acc[MAX_GROUP];
#pragma unroll
        for (int gi = 0; gi < MAX_GROUP; gi++) acc[gi] = 0.0f;
        for (int j = 0; j < nk; j++) {
            const float vv = tfc_h2f(Vh[vis_slot(gp, k0 + j) * hd + d]);
#pragma unroll
            for (int gi = 0; gi < MAX_GROUP; gi++)
                if (gi < g) acc[gi] = __fmaf_rn(sc[gi][j], vv, acc[gi]);
        }
        for (int gi = 0; gi < g; gi++) {
            const int64_t part = ((int64_t)i * n_head + h * g + gi) * n_split + s;
            o_part[part * hd + d] = acc[gi];
        }
    }
    if (threadIdx.x < g) {
        const int64_t part = ((int64_t)i * n_head + h * g + threadIdx.x) * n_split + s;
        ml_part[2 * part] = mx[threadIdx.x];
        ml_part[2 * part + 1] = sm[threadIdx.x];
    }
}

/* ---- decode: phase 1 for every row of a pass at once (head_dim 8..256, a power of two) ----
 * One block per (KV head, split, group of rows) scores its keys for the rows'
 * query heads of the group (up to QMAX query vectors), so a pass of k rows
 * reads each key and value once, not k times. A team of T = head_dim / 8
 * lanes takes one key at a time per lane group: each lane 8 dimensions (one
 * 16-byte load), its dot products in dimension order, then the team's sum;
 * the values likewise, each team summing its keys (j = team, team + n_team,
 * ...) in order, the teams' partial sums added in team order. What a row
 * computes depends on its own query, keys and length only (batch
 * invariance). */
#define QMAX 16

/* U = min(4, T) keys per team are loaded before any arithmetic, so a thread
 * has U 16-byte loads in flight; a query's 8 values are read from shared
 * memory once for the U keys; the team's sum of each key's products is a
 * reduce-scatter (at each distance a lane keeps half of its items and sends
 * the other half, so U keys cost U - 1 + log2(T / U) shuffles, not
 * U log2(T)) whose pairs are a butterfly's, so each score has the bits of
 * `t += shfl_xor(t, o)`; shared memory is sized to the pass (QV query
 * vectors per pass over the values: 1 for a single vector, 4 or 8). (An
 * earlier version with one key in flight per team ran at 1.83 TB/s on the
 * H100 against this one's 2.87: docs/CUDA.md.) */
#define UK 4

/* The team's sums of U items (U <= T, powers of two): returns the sum of
 * item *item over the team's T lanes; lanes whose low log2(T / U) bits are
 * zero hold distinct items. Same pairs as `t += shfl_xor(t, o)` for o = T/2..1. */
template <int T, int U>
__device__ __forceinline__ float team_reduce_scatter(const float (&p)[U], int lk, int *item) {
    float v[U];
#pragma unroll
    for (int u = 0; u < U; u++) v[u] = p[u];
    int base = 0;
#pragma unroll
    for (int o = T / 2, n = U; o > 0; o >>= 1) {
        if (n > 1) {
            const bool hi = (lk & o) != 0;
#pragma unroll
            for (int u = 0; u < n / 2; u++) {
                const float send = hi ? v[u] : v[u + n / 2];
                const float keep = hi ? v[u + n / 2] : v[u];
                v[u] = keep + __shfl_xor_sync(0xffffffffu, send, o);
            }
            if (hi) base += n / 2;
            n /= 2;
        } else {
            v[0] += __shfl_xor_sync(0xffffffffu, v[0], o);
        }
    }
    *item = base;
    return v[0];
}

/* dynamic shared memory of k_attn_split_rows2: buf (the query vectors, then
 * the teams' value sums) | sc [nqv][SPLIT] */
static size_t rows2_smem(int T, int QV, int nqv, int hd) {
    const size_t nteam = DEC_THREADS / T, bufn = (size_t)nqv * hd > nteam * QV * hd ? (size_t)nqv * hd : nteam * QV * hd;
    return sizeof(float) * (bufn + (size_t)nqv * SPLIT);
}

/* HL, for the lab and A/B runs until a GPU has timed them (both give 2's
 * bits: the same operations on the same values in the same order). In the
 * values' loop the vector's key count was read from shared memory, compared
 * and branched on before its weight was loaded: two shared-memory latencies in
 * series per key and vector, at 25% occupancy (ncu on the H200, docs/CUDA.md).
 * HL = 1 (variant 7) reads each vector's count once per pass over the values;
 * HL = 2 (variant 8) also loads the vectors' weights of a key before any of
 * their products, with at most 128 registers (4 blocks a multiprocessor). */
#define ROWS2_PARAMS                                                                                               \
    const float *q, int64_t ldq, const uint16_t *K, const uint16_t *V, int32_t n_slots, int32_t n_head,            \
        int32_t n_head_kv, int32_t hd, int32_t n_q, int32_t rows_per_block, const int32_t *kv_len,                 \
        const int32_t *gap, float scale, float *o_part, float *ml_part, int32_t n_split
#define ROWS2_ARGS q, ldq, K, V, n_slots, n_head, n_head_kv, hd, n_q, rows_per_block, kv_len, gap, scale, o_part, ml_part, n_split

template <int T, int QV, int HL>
__device__ __forceinline__ void attn_rows2(ROWS2_PARAMS) {
    extern __shared__ __align__(16) float smem2[];
    __shared__ float mx[QMAX], sm[QMAX];
    __shared__ int nks[QMAX];
    constexpr int N_TEAM = DEC_THREADS / T;
    constexpr int U = T < UK ? T : UK;
    const int h = blockIdx.x, s = blockIdx.y, r0 = blockIdx.z * rows_per_block;
    const int g = n_head / n_head_kv, lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarp = DEC_THREADS / 32;
    const int nr = min(rows_per_block, n_q - r0), nqv = nr * g;
    const int nteam_buf = max(nqv * hd, N_TEAM * QV * hd);
    float *buf = smem2, *sc = smem2 + nteam_buf;
    const int2 gp = gap_of(gap);
    const int32_t k0 = s * SPLIT;
    int nk_max = 0;
    for (int i = 0; i < nr; i++) nk_max = max(nk_max, min(SPLIT, vis_len(gp, kv_len[r0 + i]) - k0));
    if (nk_max <= 0) return;
    if (threadIdx.x < nqv) nks[threadIdx.x] = max(0, min(SPLIT, vis_len(gp, kv_len[r0 + threadIdx.x / g]) - k0));
    for (int e = threadIdx.x; e < nqv * hd; e += DEC_THREADS) {
        const int v = e / hd, d = e % hd;
        buf[e] = q[(int64_t)(r0 + v / g) * ldq + (int64_t)(h * g + v % g) * hd + d];
    }
    __syncthreads();
    const int lk = threadIdx.x % T, team = threadIdx.x / T;
    const uint16_t *Kh = K + (int64_t)h * n_slots * hd, *Vh = V + (int64_t)h * n_slots * hd;
    /* scores: U keys per team per step, key jb + u * N_TEAM + team */
    for (int jb = 0; jb < nk_max; jb += N_TEAM * U) {
        uint4 raw[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int j = jb + u * N_TEAM + team;
            raw[u] = j < nk_max ? *(const uint4 *)(Kh + vis_slot(gp, k0 + j) * hd + 8 * lk) : make_uint4(0, 0, 0, 0);
        }
        float kf[U][8];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const __half2 *h2 = (const __half2 *)&raw[u];
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float2 f = __half22float2(h2[e]);
                kf[u][2 * e] = f.x, kf[u][2 * e + 1] = f.y;
            }
        }
        for (int c = 0; c < nqv; c++) {
            const float4 *qp = (const float4 *)(buf + c * hd + 8 * lk);
            const float4 a = qp[0], b = qp[1];
            float dot[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                float t = 0.0f;
                t = __fmaf_rn(kf[u][0], a.x, t); t = __fmaf_rn(kf[u][1], a.y, t);
                t = __fmaf_rn(kf[u][2], a.z, t); t = __fmaf_rn(kf[u][3], a.w, t);
                t = __fmaf_rn(kf[u][4], b.x, t); t = __fmaf_rn(kf[u][5], b.y, t);
                t = __fmaf_rn(kf[u][6], b.z, t); t = __fmaf_rn(kf[u][7], b.w, t);
                dot[u] = t;
            }
            int item;
            const float t = team_reduce_scatter<T, U>(dot, lk, &item);
            const int j = jb + item * N_TEAM + team;
            if (lk % (T / U) == 0 && j < nk_max) sc[c * SPLIT + j] = t * scale;
        }
    }
    __syncthreads();
    for (int v = warp; v < nqv; v += nwarp)
        if (nks[v] > 0) split_softmax(sc + v * SPLIT, nks[v], lane, &mx[v], &sm[v]);
    __syncthreads();
    /* weighted values: each team its keys team, team + N_TEAM, ... in order,
     * U of them loaded at a time; QV query vectors per pass */
    for (int c = 0; c < nqv; c += QV) {
        float acc[QV][8];
#pragma unroll
        for (int u = 0; u < QV; u++)
#pragma unroll
            for (int e = 0; e < 8; e++) acc[u][e] = 0.0f;
        int lim[QV]; /* HL: vector c + w's key count (0 past the block's vectors) */
        if constexpr (HL != 0) {
#pragma unroll
            for (int u = 0; u < QV; u++) lim[u] = c + u < nqv ? nks[c + u] : 0;
        }
        for (int jb = team; jb < nk_max; jb += N_TEAM * U) {
            uint4 raw[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int j = jb + u * N_TEAM;
                raw[u] = j < nk_max ? *(const uint4 *)(Vh + vis_slot(gp, k0 + j) * hd + 8 * lk)
                                    : make_uint4(0, 0, 0, 0);
            }
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int j = jb + u * N_TEAM;
                const __half2 *h2 = (const __half2 *)&raw[u];
                float vf[8];
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const float2 f = __half22float2(h2[e]);
                    vf[2 * e] = f.x, vf[2 * e + 1] = f.y;
                }
                if constexpr (HL == 0) {
#pragma unroll
                    for (int w = 0; w < QV; w++)
                        if (c + w < nqv && j < nks[c + w]) {
                            const float p = sc[(c + w) * SPLIT + j];
#pragma unroll
                            for (int e = 0; e < 8; e++) acc[w][e] = __fmaf_rn(p, vf[e], acc[w][e]);
                        }
                } else {
                    /* HL 2: every vector's weight loaded first (a row and key inside sc; used below lim only) */
                    float pw[QV];
                    if constexpr (HL == 2) {
#pragma unroll
                        for (int w = 0; w < QV; w++) pw[w] = sc[min(c + w, nqv - 1) * SPLIT + min(j, SPLIT - 1)];
                    }
#pragma unroll
                    for (int w = 0; w < QV; w++)
                        if (j < lim[w]) {
                            const float p = HL == 2 ? pw[w] : sc[(c + w) * SPLIT + j];
#pragma unroll
                            for (int e = 0; e < 8; e++) acc[w][e] = __fmaf_rn(p, vf[e], acc[w][e]);
                        }
                }
            }
        }
        __syncthreads(); /* buf held the query vectors until now */
#pragma unroll
        for (int w = 0; w < QV; w++)
#pragma unroll
            for (int e = 0; e < 8; e++) buf[(team * QV + w) * hd + 8 * lk + e] = acc[w][e];
        __syncthreads();
        for (int e = threadIdx.x; e < QV * hd; e += DEC_THREADS) {
            const int w = e / hd, d = e % hd, v = c + w;
            if (v < nqv && nks[v] > 0) {
                float o = 0.0f;
                for (int t = 0; t < N_TEAM; t++) o += buf[(t * QV + w) * hd + d];
                o_part[vec_part(r0, v, g, n_head, h, n_split, s) * hd + d] = o;
            }
        }
    }
    store_ml(ml_part, mx, sm, nks, nqv, r0, g, n_head, h, n_split, s);
}

/* HL 0 and 1 without a register limit (a launch bound's block count, even 1,
 * changes the allocation: 78 registers instead of 71 for QV = 4), HL 2 with one. */
template <int T, int QV, int HL>
__global__ void __launch_bounds__(DEC_THREADS) k_attn_split_rows2(ROWS2_PARAMS) {
    attn_rows2<T, QV, HL>(ROWS2_ARGS);
}
template <int T, int QV>
__global__ void __launch_bounds__(DEC_THREADS, 4) k_attn_split_rows2_lb(ROWS2_PARAMS) {
    attn_rows2<T, QV, 2>(ROWS2_ARGS);
}
#undef ROWS2_ARGS
#undef ROWS2_PARAMS

/* ---- decode: phase 1 on the tensor cores (head_dim 64, 128 or 256) -----------------
 * The same blocks and outputs as k_attn_split_rows2 (KV head x split x group
 * of rows, up to 16 query vectors), the two products as mma.sync m16n8k8
 * with TF32 operands and f32 accumulators: the f16 keys and values are exact
 * in TF32, the query vectors and the probabilities enter as two TF32 terms
 * each (hi = the value rounded to TF32, lo = the rest rounded to TF32; about
 * 22 bits, what an f32 fused multiply-add keeps).
 * Scores S (16 vectors x 256 keys) = Q K^T: warp w takes keys 64 w .. 64 w +
 * 63 in 8 tiles of 8 keys; the head dimension is permuted as in k_gemv_tc
 * (lane (g, q) loads dimensions d0 + 8q .. d0 + 8q + 7 of key g of a tile in
 * one 16-byte load, and instruction m takes d0 + 8q + 2m and d0 + 8q + 2m + 1).
 * The softmax of each vector's split as k_attn_split_rows2's, then the
 * probabilities past a vector's keys set to 0. Values O^T (head_dim x 16) =
 * V^T P^T: warp w takes dimensions w * hd / 4 .., in MT = hd / 64 tiles of 16;
 * lane (g, q) holds the 2 MT consecutive dimensions from w * hd / 4 + 2 MT g
 * of keys q and q + 4 of each step of 8 keys (one load each), tile t's rows g
 * and g + 8 being its dimensions 2t and 2t + 1. An output column of mma
 * depends on its own B column only and a row of S on its own A row only, so
 * a vector's result depends on its query, keys and length only (batch
 * invariance; keys past its length enter as exact zero products). */
#define TC_QV 16
#define SC_STRIDE (SPLIT + 4) /* a row stride of 4 words mod 32: conflict-free B fragments */

template <int N> struct tc_load; /* N f16 values in one load */
template <> struct tc_load<2> { typedef uint32_t type; };
template <> struct tc_load<4> { typedef uint2 type; };
template <> struct tc_load<8> { typedef uint4 type; };

/* PIPE = 1 (variant 4, the same bits as 3): the next 64 keys' values are
 * loaded while the current ones are multiplied (head sizes up to 128), the
 * first 64 before the softmax, the keys two 32-dimension steps at a time, and
 * only the probabilities a product reads are cleared. */
template <int HD, int PIPE>
__global__ void __launch_bounds__(DEC_THREADS)
k_attn_split_tc(const float *q, int64_t ldq, const uint16_t *K, const uint16_t *V, int32_t n_slots, int32_t n_head,
                int32_t n_head_kv, int32_t n_q, int32_t rows_per_block, const int32_t *kv_len, const int32_t *gap,
                float scale, float *o_part, float *ml_part, int32_t n_split) {
    static_assert(HD % 64 == 0 && HD <= 256 && SPLIT == 256 && DEC_THREADS == 128, "4 warps of 64 keys, hd / 4 dims");
    constexpr int MT = HD / 64, DW = HD / 4;
    typedef typename tc_load<2 * MT>::type vload;
    __shared__ float qs[TC_QV][HD + 1]; /* odd row stride: conflict-free A fragments */
    __shared__ float sc[TC_QV][SC_STRIDE];
    __shared__ float mx[TC_QV], sm[TC_QV];
    __shared__ int nks[TC_QV];
    const int h = blockIdx.x, s = blockIdx.y, r0 = blockIdx.z * rows_per_block;
    const int gq = n_head / n_head_kv, lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarp = DEC_THREADS / 32;
    const int g = lane >> 2, qd = lane & 3;
    const int nr = min(rows_per_block, n_q - r0), nqv = nr * gq;
    const int2 gp = gap_of(gap);
    const int32_t k0 = s * SPLIT;
    int nk_max = 0;
    for (int i = 0; i < nr; i++) nk_max = max(nk_max, min(SPLIT, vis_len(gp, kv_len[r0 + i]) - k0));
    if (nk_max <= 0) return;
    if (threadIdx.x < TC_QV)
        nks[threadIdx.x] =
            threadIdx.x < nqv ? max(0, min(SPLIT, vis_len(gp, kv_len[r0 + threadIdx.x / gq]) - k0)) : 0;
    for (int e = threadIdx.x; e < TC_QV * HD; e += DEC_THREADS) {
        const int v = e / HD, d = e % HD;
        qs[v][d] = v < nqv ? q[(int64_t)(r0 + v / gq) * ldq + (int64_t)(h * gq + v % gq) * HD + d] : 0.0f;
    }
    __syncthreads();
    const uint16_t *Kh = K + (int64_t)h * n_slots * HD, *Vh = V + (int64_t)h * n_slots * HD;
    { /* scores */
        const uint16_t *kp[8];
        bool kin[8];
#pragma unroll
        for (int nt = 0; nt < 8; nt++) {
            const int j = 64 * warp + 8 * nt + g;
            kin[nt] = j < nk_max;
            kp[nt] = Kh + vis_slot(gp, k0 + (kin[nt] ? j : 0)) * HD + 8 * qd;
        }
        float acc[8][4];
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[nt][e] = 0.0f;
        constexpr int DU = PIPE && HD <= 128 ? 2 : 1; /* 32-dimension steps loaded at once */
#pragma unroll 1
        for (int d00 = 0; d00 < HD; d00 += 32 * DU) {
            uint4 krr[DU][8];
#pragma unroll
            for (int du = 0; du < DU; du++)
#pragma unroll
                for (int nt = 0; nt < 8; nt++)
                    krr[du][nt] = kin[nt] ? *(const uint4 *)(kp[nt] + d00 + 32 * du) : make_uint4(0, 0, 0, 0);
#pragma unroll
            for (int du = 0; du < DU; du++) {
            const int d0 = d00 + 32 * du;
            const uint4 *kr = krr[du];
            uint32_t ah[4][4], al[4][4];
#pragma unroll
            for (int m = 0; m < 4; m++) {
                const int d = d0 + 8 * qd + 2 * m;
                tfc_tf32_split(qs[g][d], &ah[m][0], &al[m][0]);
                tfc_tf32_split(qs[g + 8][d], &ah[m][1], &al[m][1]);
                tfc_tf32_split(qs[g][d + 1], &ah[m][2], &al[m][2]);
                tfc_tf32_split(qs[g + 8][d + 1], &ah[m][3], &al[m][3]);
            }
#pragma unroll
            for (int nt = 0; nt < 8; nt++) {
                const uint16_t *kh = (const uint16_t *)&kr[nt];
#pragma unroll
                for (int m = 0; m < 4; m++) {
                    const uint32_t b0 = tfc_h2tf32(kh[2 * m]), b1 = tfc_h2tf32(kh[2 * m + 1]);
                    tfc_mma_tf32(acc[nt], ah[m][0], ah[m][1], ah[m][2], ah[m][3], b0, b1);
                    tfc_mma_tf32(acc[nt], al[m][0], al[m][1], al[m][2], al[m][3], b0, b1);
                }
            }
            }
        }
        /* accumulator e of tile nt: vector g + 8 (e / 2), key 64 w + 8 nt + 2 q + e % 2 */
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) sc[g + 8 * (e >> 1)][64 * warp + 8 * nt + 2 * qd + (e & 1)] = acc[nt][e] * scale;
    }
    /* values: warp w's dimensions dbase .. dbase + hd / 4 - 1, 64 keys (8 steps) per load round */
    const int dbase = warp * DW, ntq = nqv > 8 ? 2 : 1;
    auto load_v = [&](vload (&va)[8][2], int kb) {
#pragma unroll
        for (int ks = 0; ks < 8; ks++)
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                const int j = kb + 8 * ks + qd + 4 * hh;
                if (j < nk_max) va[ks][hh] = *(const vload *)(Vh + vis_slot(gp, k0 + j) * HD + dbase + 2 * MT * g);
                else memset(&va[ks][hh], 0, sizeof(vload));
            }
    };
    vload va[8][2];
    if (PIPE) load_v(va, 0); /* in flight during the softmax */
    __syncthreads();
    for (int v = warp; v < nqv; v += nwarp)
        if (nks[v] > 0) split_softmax(sc[v], nks[v], lane, &mx[v], &sm[v]);
    __syncthreads();
    if (PIPE) { /* the products read keys below kend; vectors past nqv have scores of exactly 0 (zero queries) */
        const int kend = (nk_max + 63) / 64 * 64;
        for (int e = threadIdx.x; e < nqv * SPLIT; e += DEC_THREADS) {
            const int v = e / SPLIT, j = e % SPLIT;
            if (j >= nks[v] && j < kend) sc[v][j] = 0.0f;
        }
    } else {
        for (int e = threadIdx.x; e < TC_QV * SPLIT; e += DEC_THREADS) {
            const int v = e / SPLIT, j = e % SPLIT;
            if (j >= nks[v]) sc[v][j] = 0.0f;
        }
    }
    __syncthreads();
    float oacc[MT][2][4];
#pragma unroll
    for (int t = 0; t < MT; t++)
#pragma unroll
        for (int jt = 0; jt < 2; jt++)
#pragma unroll
            for (int e = 0; e < 4; e++) oacc[t][jt][e] = 0.0f;
    constexpr bool DB = PIPE && HD <= 128; /* double-buffered values */
#pragma unroll 1
    for (int kb = 0; kb < nk_max; kb += 64) {
        vload vn[8][2];
        if (!PIPE) load_v(va, kb);
        else if (DB && kb + 64 < nk_max) load_v(vn, kb + 64);
#pragma unroll
        for (int ks = 0; ks < 8; ks++) {
            uint32_t bh[2][2], bl[2][2];
#pragma unroll
            for (int jt = 0; jt < 2; jt++)
#pragma unroll
                for (int hh = 0; hh < 2; hh++)
                    tfc_tf32_split(jt < ntq ? sc[g + 8 * jt][kb + 8 * ks + qd + 4 * hh] : 0.0f, &bh[jt][hh], &bl[jt][hh]);
            const uint16_t *e0 = (const uint16_t *)&va[ks][0], *e1 = (const uint16_t *)&va[ks][1];
#pragma unroll
            for (int t = 0; t < MT; t++) {
                const uint32_t a0 = tfc_h2tf32(e0[2 * t]), a1 = tfc_h2tf32(e0[2 * t + 1]);
                const uint32_t a2 = tfc_h2tf32(e1[2 * t]), a3 = tfc_h2tf32(e1[2 * t + 1]);
#pragma unroll
                for (int jt = 0; jt < 2; jt++)
                    if (jt < ntq) {
                        tfc_mma_tf32(oacc[t][jt], a0, a1, a2, a3, bh[jt][0], bh[jt][1]);
                        tfc_mma_tf32(oacc[t][jt], a0, a1, a2, a3, bl[jt][0], bl[jt][1]);
                    }
            }
        }
        if (PIPE && kb + 64 < nk_max) {
            if (DB) {
#pragma unroll
                for (int ks = 0; ks < 8; ks++) va[ks][0] = vn[ks][0], va[ks][1] = vn[ks][1];
            } else {
                load_v(va, kb + 64);
            }
        }
    }
    /* accumulator e of (t, jt): dimension dbase + 2 MT g + 2 t + e / 2, vector 8 jt + 2 q + e % 2 */
#pragma unroll
    for (int t = 0; t < MT; t++)
#pragma unroll
        for (int jt = 0; jt < 2; jt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int v = 8 * jt + 2 * qd + (e & 1), d = dbase + 2 * MT * g + 2 * t + (e >> 1);
                if (v < nqv && nks[v] > 0) o_part[vec_part(r0, v, gq, n_head, h, n_split, s) * HD + d] = oacc[t][jt][e];
            }
    store_ml(ml_part, mx, sm, nks, nqv, r0, gq, n_head, h, n_split, s);
}

/* ---- decode: phase 2, version 2: the splits of one (row, head) in NP runs ----------
 * The weights exp(m_s - M) computed once into shared memory; NP runs of
 * consecutive splits summed in parallel (each in split order, 4 dimensions
 * per lane, loads unrolled), the runs then added in run order. A fixed
 * order that depends on the row's own length only (batch invariance). */
#define MERGE_THREADS 128
#define MERGE_MAX_SPLITS 8192 /* 2M keys; longer rows take k_attn_merge */

__global__ void __launch_bounds__(MERGE_THREADS)
k_attn_merge2(const float *o_part, const float *ml_part, const int32_t *kv_len, const int32_t *gap, int32_t n_head,
              int32_t hd, int32_t n_split, float *out, int64_t ldo) {
    extern __shared__ float wsm[]; /* [ns] weights | [NP][hd] run sums | [NP] run L */
    __shared__ float red[32];
    const int hq = blockIdx.x, i = blockIdx.y;
    const int ns = (vis_len(gap_of(gap), kv_len[i]) + SPLIT - 1) / SPLIT;
    const int64_t base = ((int64_t)i * n_head + hq) * n_split;
    float m = -INFINITY;
    for (int s = threadIdx.x; s < ns; s += MERGE_THREADS) m = fmaxf(m, ml_part[2 * (base + s)]);
    const float M = tfc_block_max(m, red);
    for (int s = threadIdx.x; s < ns; s += MERGE_THREADS) wsm[s] = __expf(ml_part[2 * (base + s)] - M);
    __syncthreads();
    const int lanes = hd / 4 < MERGE_THREADS ? hd / 4 : MERGE_THREADS; /* lanes per run, 4 dims each */
    const int np = MERGE_THREADS / lanes, run = threadIdx.x / lanes, d4 = threadIdx.x % lanes;
    float *rs = wsm + ns, *rl = rs + np * hd;
    const int per = (ns + np - 1) / np, s0 = min(ns, run * per), s1 = min(ns, s0 + per);
    for (int dd = 4 * d4; run < np && dd < hd; dd += 4 * lanes) { /* run < np: hd / 4 need not divide 128 */
        float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        float L = 0.0f;
        int s = s0;
        for (; s + 4 <= s1; s += 4) {
            float4 o[4];
#pragma unroll
            for (int u = 0; u < 4; u++) o[u] = *(const float4 *)(o_part + (base + s + u) * hd + dd);
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const float w = wsm[s + u];
                acc.x = __fmaf_rn(o[u].x, w, acc.x), acc.y = __fmaf_rn(o[u].y, w, acc.y);
                acc.z = __fmaf_rn(o[u].z, w, acc.z), acc.w = __fmaf_rn(o[u].w, w, acc.w);
                L = __fmaf_rn(ml_part[2 * (base + s + u) + 1], w, L);
            }
        }
        for (; s < s1; s++) {
            const float4 o = *(const float4 *)(o_part + (base + s) * hd + dd);
            const float w = wsm[s];
            acc.x = __fmaf_rn(o.x, w, acc.x), acc.y = __fmaf_rn(o.y, w, acc.y);
            acc.z = __fmaf_rn(o.z, w, acc.z), acc.w = __fmaf_rn(o.w, w, acc.w);
            L = __fmaf_rn(ml_part[2 * (base + s) + 1], w, L);
        }
        *(float4 *)(rs + run * hd + dd) = acc;
        if (dd == 0) rl[run] = L;
    }
    __syncthreads();
    float L = 0.0f;
    for (int r = 0; r < np; r++) L += rl[r];
    const float inv = 1.0f / L;
    for (int d = threadIdx.x; d < hd; d += MERGE_THREADS) {
        float acc = 0.0f;
        for (int r = 0; r < np; r++) acc += rs[r * hd + d];
        out[(int64_t)i * ldo + (int64_t)hq * hd + d] = acc * inv;
    }
}

static size_t merge2_smem(int32_t ns, int hd) {
    const int lanes = hd / 4 < MERGE_THREADS ? hd / 4 : MERGE_THREADS, np = MERGE_THREADS / lanes;
    return sizeof(float) * ((size_t)ns + (size_t)np * hd + np);
}

/* ---- decode: phase 2, merge the splits of one (row, head) in split order --------- */

__global__ void k_attn_merge(const float *o_part, const float *ml_part, const int32_t *kv_len, const int32_t *gap,
                             int32_t n_head, int32_t hd, int32_t n_split, float *out, int64_t ldo) {
    const int hq = blockIdx.x, i = blockIdx.y;
    const int ns = (vis_len(gap_of(gap), kv_len[i]) + SPLIT - 1) / SPLIT;
    const int64_t base = ((int64_t)i * n_head + hq) * n_split;
    float M = -INFINITY;
    for (int s = 0; s < ns; s++) M = fmaxf(M, ml_part[2 * (base + s)]);
    float L = 0.0f;
    for (int s = 0; s < ns; s++) L += ml_part[2 * (base + s) + 1] * __expf(ml_part[2 * (base + s)] - M);
    const float inv = 1.0f / L;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float acc = 0.0f;
        for (int s = 0; s < ns; s++) acc = __fmaf_rn(o_part[(base + s) * hd + d], __expf(ml_part[2 * (base + s)] - M), acc);
        out[(int64_t)i * ldo + (int64_t)hq * hd + d] = acc * inv;
    }
}

/* The decode kernels' variant: TF_CUDA_ATTN_DECODE (read once) = 0 (a
 * block per row), 2 (the default), 3 or 4 (the tensor cores, head sizes 64 /
 * 128 / 256 on sm_80 and later, other head sizes as 2; 4 pipelines its loads
 * and gives 3's bits), 6 (2 with at most 4 vectors per pass over the values
 * everywhere: 2's bits), 7 and 8 (2 with HL 1 and 2: 2's bits, not yet run on
 * a GPU); for labs and A/B runs, all compute the same function. */
static int decode_variant(void) {
    static int v = -1;
    if (v < 0) v = tfc_env_variant("TF_CUDA_ATTN_DECODE", "0234678", 2);
    return v;
}

extern "C" void tf_cuda_attn_decode(tf_cuda *cu, const tf_cuda_attn *a) {
    tf_cuda_attn_decode_variant(cu, a, decode_variant());
}

#define ROWS2_SMEM_MAX (96 * 1024)

/* Shared-memory limits of the kernels that may pass 48 KiB, set once when the
 * device opens (never during a graph capture). */
void tfc_attn_init(void) {
#define ROWS2_ATTR1(TT, QQ, HH) \
    cudaFuncSetAttribute(k_attn_split_rows2<TT, QQ, HH>, cudaFuncAttributeMaxDynamicSharedMemorySize, ROWS2_SMEM_MAX)
#define ROWS2_ATTR(TT, QQ)                                                                                         \
    ROWS2_ATTR1(TT, QQ, 0), ROWS2_ATTR1(TT, QQ, 1),                                                                \
        cudaFuncSetAttribute(k_attn_split_rows2_lb<TT, QQ>, cudaFuncAttributeMaxDynamicSharedMemorySize, ROWS2_SMEM_MAX)
#define ROWS2_ATTR_T(TT) ROWS2_ATTR(TT, 1), ROWS2_ATTR(TT, 4), ROWS2_ATTR(TT, 8)
    ROWS2_ATTR_T(1), ROWS2_ATTR_T(2), ROWS2_ATTR_T(4), ROWS2_ATTR_T(8), ROWS2_ATTR_T(16), ROWS2_ATTR_T(32);
#undef ROWS2_ATTR_T
#undef ROWS2_ATTR
#undef ROWS2_ATTR1
    cudaFuncSetAttribute(k_attn_merge2, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         (int)merge2_smem(MERGE_MAX_SPLITS, 8));
    cudaGetLastError();
}

extern "C" void tf_cuda_attn_decode_variant(tf_cuda *cu, const tf_cuda_attn *a, int variant) {
    const int32_t ns = n_splits(a->max_kv);
    float *o_part = (float *)a->scratch;
    float *ml_part = o_part + (size_t)a->n_q * a->n_head * ns * a->head_dim;
    const int hd = a->head_dim, g = a->n_head / a->n_head_kv, rpb = QMAX / g;
    const int pow2 = hd >= 8 && hd <= MAX_HD && (hd & (hd - 1)) == 0;
    int T = hd / 8;
    dim3 grid_rows(a->n_head_kv, ns, (a->n_q + rpb - 1) / rpb);
    if ((variant == 3 || variant == 4) && (hd == 64 || hd == 128 || hd == 256) && g <= TC_QV && cu->sm >= 80) {
#define TC(HH, PP)                                                                                                 \
    k_attn_split_tc<HH, PP><<<grid_rows, DEC_THREADS, 0, cu->stream>>>(                                           \
        a->q, a->ldq, a->k, a->v, a->n_slots, a->n_head, a->n_head_kv, a->n_q, rpb, a->kv_len_d, a->gap_d,        \
        a->scale, o_part, ml_part, ns)
        if (variant == 3) {
            if (hd == 64) TC(64, 0);
            else if (hd == 128) TC(128, 0);
            else TC(256, 0);
        } else {
            if (hd == 64) TC(64, 1);
            else if (hd == 128) TC(128, 1);
            else TC(256, 1);
        }
#undef TC
    } else if (variant != 0 && pow2) {
        /* QV, the vectors per pass over the values: 8 holds 64 sums per thread (126 registers: 4 blocks a
         * multiprocessor), 4 half as many (72: 7 blocks) but reads a block's values once per 4 vectors.
         * Where the grid is many blocks deep the occupancy pays more than the second read (H200, 8 rows of
         * 32 heads: 1.07x at 32,768 keys, 1.10x at 122,880), where it is shallow or the vectors are more
         * than 8, not (0.86-0.96x; docs/CUDA.md). A vector's sums do not depend on QV: same bits.
         * Variant 6 takes 4 everywhere (the lab's and the A/B runs' comparison). */
        const int nqv = (a->n_q < rpb ? a->n_q : rpb) * g;
        const int64_t blocks = (int64_t)grid_rows.x * grid_rows.y * grid_rows.z;
        const int QV = nqv == 1 ? 1 : nqv <= 4 || variant == 6 || (nqv <= 8 && blocks >= 2048) ? 4 : 8;
        const size_t smem = rows2_smem(T, QV, nqv, hd);
#define ROWS2_K(KERNEL)                                                                                            \
    KERNEL<<<grid_rows, DEC_THREADS, smem, cu->stream>>>(a->q, a->ldq, a->k, a->v, a->n_slots, a->n_head,         \
                                                         a->n_head_kv, hd, a->n_q, rpb, a->kv_len_d, a->gap_d,     \
                                                         a->scale, o_part, ml_part, ns)
#define ROWS2(TT, QQ)                                                                                              \
    do {                                                                                                          \
        if (variant == 7) ROWS2_K((k_attn_split_rows2<TT, QQ, 1>));                                               \
        else if (variant == 8) ROWS2_K((k_attn_split_rows2_lb<TT, QQ>));                                          \
        else ROWS2_K((k_attn_split_rows2<TT, QQ, 0>));                                                            \
    } while (0)
#define ROWS2_T(TT)                                                                                                \
    do {                                                                                                          \
        if (QV == 1) ROWS2(TT, 1);                                                                                \
        else if (QV == 4) ROWS2(TT, 4);                                                                           \
        else ROWS2(TT, 8);                                                                                        \
    } while (0)
        switch (T) {
        case 1: ROWS2_T(1); break;
        case 2: ROWS2_T(2); break;
        case 4: ROWS2_T(4); break;
        case 8: ROWS2_T(8); break;
        case 16: ROWS2_T(16); break;
        default: ROWS2_T(32); break;
        }
#undef ROWS2_T
#undef ROWS2
#undef ROWS2_K
    } else { /* other head sizes (or variant 0): a block per row */
        dim3 grid1(a->n_head_kv, ns, a->n_q);
        k_attn_split<<<grid1, DEC_THREADS, 0, cu->stream>>>(a->q, a->ldq, a->k, a->v, a->n_slots, a->n_head,
                                                            a->n_head_kv, a->head_dim, a->kv_len_d, a->gap_d,
                                                            a->scale, o_part, ml_part, ns);
    }
    dim3 grid2(a->n_head, a->n_q);
    if (variant != 0 && hd % 4 == 0 && ns <= MERGE_MAX_SPLITS) {
        k_attn_merge2<<<grid2, MERGE_THREADS, merge2_smem(ns, hd), cu->stream>>>(
            o_part, ml_part, a->kv_len_d, a->gap_d, a->n_head, hd, ns, a->out, a->ldo);
        return;
    }
    int threads = a->head_dim >= 128 ? 128 : (a->head_dim + 31) / 32 * 32;
    k_attn_merge<<<grid2, threads, 0, cu->stream>>>(o_part, ml_part, a->kv_len_d, a->gap_d, a->n_head, a->head_dim,
                                                    ns, a->out, a->ldo);
}
