/*
 * cuda_retrieval.cu — the caches' data movement on the device: chunk key
 * sums, chunk scoring and top-k selection, the gather into C_r and slot
 * copies (the StreamingLLM cache needs no kernel of its own: kv/streaming.c).
 *
 * Exactness against src/kv/retrieval.c: a chunk's sum is accumulated in f32
 * in slot order from its first slot (the CPU's sums are the same additions,
 * so the bits agree); a score is the CPU's rc_dot — eight lanes of separate
 * multiplies and adds combined in the same tree — over the same group query,
 * so given the same sums and queries the selection is identical, including
 * ties (lower chunk index first, through the same 64-bit ranking keys).
 */
#include "backend/cuda/cuda_common.cuh"

/* ---- chunk sums --------------------------------------------------------------- */

__global__ void k_chunk_sums(float *sum, const uint16_t *K, int32_t n_slots, int32_t hd, int32_t c,
                             int32_t n_chunk_cap, int32_t j0, int32_t s1) {
    const int pr = blockIdx.x;
    const int32_t j = j0 + blockIdx.y;
    const int32_t a = j * c, b = min(a + c, s1);
    const uint16_t *Kp = K + (int64_t)pr * n_slots * hd;
    float *out = sum + ((int64_t)pr * n_chunk_cap + j) * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float acc = 0.0f;
        for (int32_t s = a; s < b; s++) acc = __fadd_rn(acc, tfc_h2f(Kp[(int64_t)s * hd + d]));
        out[d] = acc;
    }
}

extern "C" void tf_cuda_chunk_sums(tf_cuda *cu, float *sum, const uint16_t *k, int32_t n_pairs, int32_t n_slots,
                                   int32_t head_dim, int32_t chunk, int32_t n_chunk_cap, int32_t s0, int32_t s1) {
    if (s1 <= s0) return;
    const int32_t j0 = s0 / chunk, j1 = (s1 - 1) / chunk;
    dim3 grid(n_pairs, j1 - j0 + 1);
    const int threads = head_dim >= 128 ? 128 : (head_dim + 31) / 32 * 32;
    k_chunk_sums<<<grid, threads, 0, cu->stream>>>(sum, k, n_slots, head_dim, chunk, n_chunk_cap, j0, s1);
}

/* ---- scoring and selection ------------------------------------------------------- */

/* As rc_make_key: the score's bits in an unsigned order, then ~chunk (ties rank the lower chunk first). */
__device__ __forceinline__ uint64_t rank_key(float s, int32_t j) {
    if (isnan(s)) s = -INFINITY;
    if (s == 0.0f) s = 0.0f;
    uint32_t u = __float_as_uint(s);
    u ^= (uint32_t)(-(int32_t)(u >> 31)) | 0x80000000u;
    return ((uint64_t)u << 32) | (uint32_t)~(uint32_t)j;
}

/* rc_dot: 8 lanes, separate multiply and add (no contraction), the same tree. */
__device__ float rc_dot_exact(const float *a, const float *b, int n) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int d = 0;
    for (; d + 8 <= n; d += 8)
#pragma unroll
        for (int l = 0; l < 8; l++) acc[l] = __fadd_rn(acc[l], __fmul_rn(a[d + l], b[d + l]));
    float tail = 0.0f;
    for (; d < n; d++) tail = __fadd_rn(tail, __fmul_rn(a[d], b[d]));
    float x = __fadd_rn(__fadd_rn(acc[0], acc[4]), __fadd_rn(acc[1], acc[5]));
    float y = __fadd_rn(__fadd_rn(acc[2], acc[6]), __fadd_rn(acc[3], acc[7]));
    return __fadd_rn(__fadd_rn(x, y), tail);
}

#define SEL_THREADS 1024

/* One block per (layer, KV head) pair: score the middle chunks [1, j1), find
 * the k-th largest key by an 8-pass radix select (keys are distinct), then
 * write the selection in ascending chunk order. */
__global__ void __launch_bounds__(SEL_THREADS)
k_chunk_select(int32_t *sel, uint64_t *keys, const float *sum, const float *q, int32_t n_head, int32_t n_head_kv,
               int32_t hd, int32_t n_chunk_cap, int32_t n_full, int32_t part, int32_t r_chunks, int32_t k,
               int32_t max_sel) {
    __shared__ float qg[256];
    __shared__ uint32_t hist[256];
    __shared__ uint64_t s_prefix, s_mask;
    __shared__ int32_t s_kk, wcount[32], running;
    const int pr = blockIdx.x, il = pr / n_head_kv, h = pr % n_head_kv, g = n_head / n_head_kv;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int32_t j0 = 1, j1 = n_full - r_chunks, m = j1 - j0;
    const float *qh = q + (int64_t)il * n_head * hd + (int64_t)h * g * hd;
    for (int d = tid; d < hd; d += SEL_THREADS) {
        float v = qh[d];
        for (int i = 1; i < g; i++) v = __fadd_rn(v, qh[(int64_t)i * hd + d]);
        qg[d] = v;
    }
    __syncthreads();
    uint64_t *kp = keys + (int64_t)pr * n_chunk_cap;
    const float *sp = sum + (int64_t)pr * n_chunk_cap * hd;
    for (int32_t t = tid; t < m; t += SEL_THREADS) kp[t] = rank_key(rc_dot_exact(qg, sp + (int64_t)(j0 + t) * hd, hd), j0 + t);
    if (tid == 0) {
        s_prefix = 0;
        s_mask = 0;
        s_kk = k;
    }
    __syncthreads();
    for (int shift = 56; shift >= 0; shift -= 8) {
        for (int b = tid; b < 256; b += SEL_THREADS) hist[b] = 0;
        __syncthreads();
        const uint64_t prefix = s_prefix, mask = s_mask;
        for (int32_t t = tid; t < m; t += SEL_THREADS) {
            const uint64_t key = kp[t];
            if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255], 1u);
        }
        __syncthreads();
        if (tid == 0) {
            int32_t cum = 0, kk = s_kk;
            int b = 255;
            for (; b > 0; b--) {
                if (cum + (int32_t)hist[b] >= kk) break;
                cum += (int32_t)hist[b];
            }
            s_kk = kk - cum;
            s_prefix = prefix | ((uint64_t)b << shift);
            s_mask = mask | ((uint64_t)255 << shift);
        }
        __syncthreads();
    }
    const uint64_t T = s_prefix; /* the k-th largest key */
    int32_t *out = sel + (int64_t)pr * max_sel;
    if (tid == 0) {
        out[0] = 0;
        running = 1;
    }
    __syncthreads();
    for (int32_t base = 0; base < m; base += SEL_THREADS) {
        const int32_t t = base + tid;
        const bool f = k > 0 && t < m && kp[t] >= T;
        const unsigned ballot = __ballot_sync(0xffffffffu, f);
        const int pre = __popc(ballot & ((1u << lane) - 1u));
        if (lane == 0) wcount[warp] = __popc(ballot);
        __syncthreads();
        if (tid == 0) {
            int32_t run = running;
            for (int w = 0; w < SEL_THREADS / 32; w++) {
                const int32_t c = wcount[w];
                wcount[w] = run;
                run += c;
            }
            running = run;
        }
        __syncthreads();
        if (f) out[wcount[warp] + pre] = j0 + t;
        __syncthreads();
    }
    if (tid == 0) {
        int32_t ns = running;
        for (int32_t j = j1; j < n_full; j++) out[ns++] = j;
        if (part) out[ns++] = n_full;
    }
}

__global__ void k_select_all(int32_t *sel, int32_t max_sel, int32_t nch) {
    int32_t *out = sel + (int64_t)blockIdx.x * max_sel;
    for (int32_t j = threadIdx.x; j < nch; j += blockDim.x) out[j] = j;
}

extern "C" size_t tf_cuda_select_scratch(int32_t n_pairs, int32_t n_chunk_cap) {
    return (size_t)n_pairs * (size_t)n_chunk_cap * sizeof(uint64_t);
}

extern "C" void tf_cuda_chunk_select(tf_cuda *cu, int32_t *sel_d, void *scratch, const float *sum, const float *q_d,
                                     int32_t n_layer, int32_t n_head, int32_t n_head_kv, int32_t head_dim,
                                     int32_t n_chunk_cap, int32_t chunk, int32_t n_tok, int32_t budget,
                                     int32_t r_chunks, int32_t max_sel, int32_t *n_sel_chunks, int32_t *n_sel) {
    /* the plan of rc_make_plan */
    const int32_t n_full = n_tok / chunk, part = n_tok % chunk, n_pairs = n_layer * n_head_kv;
    if (n_tok <= budget) {
        const int32_t nch = n_full + (part > 0);
        k_select_all<<<n_pairs, 256, 0, cu->stream>>>(sel_d, max_sel, nch);
        *n_sel_chunks = nch;
        *n_sel = n_tok;
        return;
    }
    const int32_t m = n_full - r_chunks - 1;
    int32_t k = (budget - chunk - r_chunks * chunk - part) / chunk;
    if (k > m) k = m;
    k_chunk_select<<<n_pairs, SEL_THREADS, 0, cu->stream>>>(sel_d, (uint64_t *)scratch, sum, q_d, n_head, n_head_kv,
                                                            head_dim, n_chunk_cap, n_full, part, r_chunks, k, max_sel);
    *n_sel_chunks = 1 + k + r_chunks + (part > 0);
    *n_sel = (1 + k + r_chunks) * chunk + part;
}

/* ---- gather and slot copies -------------------------------------------------------- */

/* Block (pair, t): selected chunk t of the pair goes to view slots [t*c, ...):
 * every selected chunk before the last is complete (the partial chunk is the
 * highest index), so offsets are t * c. */
__global__ void k_gather(uint16_t *vk, uint16_t *vv, int32_t n_view, const uint16_t *fk, const uint16_t *fv,
                         int32_t n_full_slots, int32_t hd, const int32_t *sel, int32_t max_sel, int32_t c,
                         int32_t n_tok) {
    const int pr = blockIdx.x, t = blockIdx.y;
    const int32_t j = sel[(int64_t)pr * max_sel + t];
    const int32_t s0 = j * c, len = min(c, n_tok - s0);
    const int64_t src = ((int64_t)pr * n_full_slots + s0) * hd, dst = ((int64_t)pr * n_view + (int64_t)t * c) * hd;
    for (int e = threadIdx.x; e < len * hd; e += blockDim.x) {
        vk[dst + e] = fk[src + e];
        vv[dst + e] = fv[src + e];
    }
}

extern "C" void tf_cuda_gather(tf_cuda *cu, uint16_t *view_k, uint16_t *view_v, int32_t n_view_slots,
                               const uint16_t *full_k, const uint16_t *full_v, int32_t n_full_slots, int32_t n_pairs,
                               int32_t head_dim, const int32_t *sel_d, int32_t max_sel, int32_t n_sel_chunks,
                               int32_t chunk, int32_t n_tok) {
    if (n_sel_chunks < 1) return;
    dim3 grid(n_pairs, n_sel_chunks);
    k_gather<<<grid, 256, 0, cu->stream>>>(view_k, view_v, n_view_slots, full_k, full_v, n_full_slots, head_dim,
                                           sel_d, max_sel, chunk, n_tok);
}
