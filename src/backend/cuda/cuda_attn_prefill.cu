/*
 * cuda_attn_prefill.cu — attention for prefill batches (more rows than the
 * decode kernels take) over an f16 KV cache view, as tf_ref_attn: each row
 * i sees its first kv_len[i] visible slots (causal bottom-right for a
 * prompt). Not batch invariant (prefill needs no invariance). Two kernels:
 *   k_attn_prefill_tc  the tensor cores (head sizes 64 and 128, sm_80 and
 *                      later; the default where it applies): FlashAttention-2's
 *                      scheme, 128 rows x 64-key tiles; 254 TFLOP/s on the H100
 *                      (docs/CUDA.md);
 *   k_attn_prefill     CUDA cores, every head size (TF_CUDA_ATTN_PREFILL=0 for
 *                      all): 16 rows x 64 keys, 6-7 TFLOP/s.
 */
#include "backend/cuda/cuda_attn.cuh"
#include "backend/cuda/cuda_mma.cuh"

/* ---- prefill on CUDA cores: tiles of BQ rows x BK keys, online softmax --------------- */

#define BQ 16
#define BK 64
#define PRE_THREADS 128

/* dynamic shared: Qs[BQ][hd] f32 | S[BQ][BK] f32 | row m, l, corr [BQ] | Ks, Vs [BK][hd + 2] f16 */
static size_t prefill_smem(int hd) {
    return sizeof(float) * ((size_t)BQ * hd + BQ * BK + 3 * BQ + 1) + 2 * sizeof(uint16_t) * (size_t)BK * (hd + 2);
}

__global__ void __launch_bounds__(PRE_THREADS)
k_attn_prefill(const float *q, int64_t ldq, const uint16_t *K, const uint16_t *V, int32_t n_slots, int32_t n_q,
               int32_t n_head, int32_t n_head_kv, int32_t hd, const int32_t *kv_len, const int32_t *gap, float scale,
               float *out, int64_t ldo) {
    extern __shared__ float smem[];
    float *Qs = smem;
    float *S = Qs + BQ * hd;
    float *rm = S + BQ * BK, *rl = rm + BQ, *rc = rl + BQ;
    int *kmax_s = (int *)(rc + BQ);
    const int kstride = hd + 2; /* odd word stride: conflict-free column reads */
    uint16_t *Ks = (uint16_t *)(kmax_s + 1);
    uint16_t *Vs = Ks + BK * kstride;
    const int r0 = blockIdx.x * BQ, hq = blockIdx.y, h = hq / (n_head / n_head_kv);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int2 gp = gap_of(gap); /* keys counted as visible ones (vis_len / vis_slot) */
    for (int e = tid; e < BQ * hd; e += PRE_THREADS) {
        const int r = e / hd, d = e % hd;
        Qs[e] = r0 + r < n_q ? q[(int64_t)(r0 + r) * ldq + (int64_t)hq * hd + d] : 0.0f;
    }
    if (tid < BQ) {
        rm[tid] = -INFINITY;
        rl[tid] = 0.0f;
    }
    if (tid == 0) {
        int km = 0;
        for (int r = 0; r < BQ && r0 + r < n_q; r++) km = max(km, vis_len(gp, kv_len[r0 + r]));
        *kmax_s = km;
    }
    float acc[2][BQ];
#pragma unroll
    for (int u = 0; u < 2; u++)
#pragma unroll
        for (int r = 0; r < BQ; r++) acc[u][r] = 0.0f;
    __syncthreads();
    const int kmax = *kmax_s;
    const uint16_t *Kh = K + (int64_t)h * n_slots * hd, *Vh = V + (int64_t)h * n_slots * hd;
    for (int kt = 0; kt < kmax; kt += BK) {
        for (int e = tid; e < BK * hd; e += PRE_THREADS) {
            const int j = e / hd, d = e % hd;
            const bool in = kt + j < kmax;
            Ks[j * kstride + d] = in ? Kh[vis_slot(gp, kt + j) * hd + d] : (uint16_t)0;
            Vs[j * kstride + d] = in ? Vh[vis_slot(gp, kt + j) * hd + d] : (uint16_t)0;
        }
        __syncthreads();
        for (int e = tid; e < BQ * BK; e += PRE_THREADS) {
            const int r = e / BK, j = e % BK;
            const int len = r0 + r < n_q ? vis_len(gp, kv_len[r0 + r]) : 0;
            float dot = 0.0f;
            if (kt + j < len) {
                for (int d = 0; d < hd; d++) dot = __fmaf_rn(Qs[r * hd + d], tfc_h2f(Ks[j * kstride + d]), dot);
                S[e] = dot * scale;
            } else {
                S[e] = -INFINITY;
            }
        }
        __syncthreads();
        for (int r = warp; r < BQ; r += PRE_THREADS / 32) {
            float m = fmaxf(S[r * BK + lane], S[r * BK + lane + 32]);
            m = tfc_warp_max(m);
            const float m_old = rm[r], m_new = fmaxf(m_old, m);
            float p0 = 0.0f, p1 = 0.0f, corr = 1.0f;
            if (m_new != -INFINITY) {
                p0 = __expf(S[r * BK + lane] - m_new);
                p1 = __expf(S[r * BK + lane + 32] - m_new);
                corr = m_old == -INFINITY ? 0.0f : __expf(m_old - m_new);
            }
            S[r * BK + lane] = p0;
            S[r * BK + lane + 32] = p1;
            const float ps = tfc_warp_sum(p0 + p1);
            if (lane == 0) {
                rl[r] = rl[r] * corr + ps;
                rm[r] = m_new;
                rc[r] = corr;
            }
        }
        __syncthreads();
#pragma unroll
        for (int u = 0; u < 2; u++) {
            const int d = tid + u * PRE_THREADS;
            if (d < hd) {
#pragma unroll
                for (int r = 0; r < BQ; r++) acc[u][r] *= rc[r];
                for (int j = 0; j < BK; j++) {
                    const float vv = tfc_h2f(Vs[j * kstride + d]);
#pragma unroll
                    for (int r = 0; r < BQ; r++) acc[u][r] = __fmaf_rn(S[r * BK + j], vv, acc[u][r]);
                }
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int u = 0; u < 2; u++) {
        const int d = tid + u * PRE_THREADS;
        if (d < hd)
#pragma unroll
            for (int r = 0; r < BQ; r++)
                if (r0 + r < n_q) out[(int64_t)(r0 + r) * ldo + (int64_t)hq * hd + d] = acc[u][r] / rl[r];
    }
}


/* ---- prefill on the tensor cores ----------------------------------------------------
 * A block takes 128 query rows of one head (8 warps of 16 rows) and walks
 * the keys in tiles of 64, the next tile's keys and values copied to shared
 * memory (cp.async, double buffered) while the current one is used. A warp
 * keeps its rows' query vectors as f16 mma fragments (scaled by scale *
 * log2 e, so the softmax is a power of 2), computes S = Q K^T (mma m16n8k16,
 * f16 in, f32 accumulate; K fragments by ldmatrix), masks the keys past
 * each row's length, updates the rows' running max and sum (online
 * softmax), and adds P V with P rounded to f16 from the S accumulators (the
 * C fragment of S is the A fragment of P V) and V fragments by transposing
 * ldmatrix. Inputs rounded to f16 as the prefill's cuBLAS products round
 * theirs. */
#define PQ_WARPS 8
#define PBQ (16 * PQ_WARPS)
#define PBK 64

static size_t prefill_tc_smem(int hd) { return (size_t)2 * 2 * PBK * (hd + 8) * sizeof(uint16_t); }

template <int HD>
__global__ void __launch_bounds__(PQ_WARPS * 32)
k_attn_prefill_tc(const float *q, int64_t ldq, const uint16_t *K, const uint16_t *V, int32_t n_slots, int32_t n_q,
                  int32_t n_head, int32_t n_head_kv, const int32_t *kv_len, const int32_t *gap, float scale,
                  float *out, int64_t ldo) {
    constexpr int ST = HD + 8; /* row stride in halves: 16-byte rows, conflict-free ldmatrix */
    extern __shared__ __align__(16) uint16_t psm[]; /* K [2][PBK][ST] | V [2][PBK][ST] */
    uint16_t *Ks = psm, *Vs = psm + 2 * PBK * ST;
    __shared__ int kmax_s;
    const int r0 = blockIdx.x * PBQ, hq = blockIdx.y, h = hq / (n_head / n_head_kv);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, qd = lane & 3;
    const int2 gp = gap_of(gap);
    const int ra = r0 + 16 * warp + (lane >> 2), rb = ra + 8; /* the lane's rows */
    const int lena = ra < n_q ? vis_len(gp, kv_len[ra]) : 0, lenb = rb < n_q ? vis_len(gp, kv_len[rb]) : 0;
    if (tid == 0) {
        int km = 0;
        for (int r = r0; r < r0 + PBQ && r < n_q; r++) km = max(km, vis_len(gp, kv_len[r]));
        kmax_s = km;
    }
    uint32_t qf[HD / 16][4];
    {
        const float c = scale * 1.4426950408889634f;
        const float *qa = q + (int64_t)min(ra, n_q - 1) * ldq + (int64_t)hq * HD; /* rows past n_q: not stored */
        const float *qb = q + (int64_t)min(rb, n_q - 1) * ldq + (int64_t)hq * HD;
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++) {
            const int d = 16 * kk + 2 * qd;
            const float2 a0 = *(const float2 *)(qa + d), a8 = *(const float2 *)(qa + d + 8);
            const float2 b0 = *(const float2 *)(qb + d), b8 = *(const float2 *)(qb + d + 8);
            qf[kk][0] = tfc_pack_h2(a0.x * c, a0.y * c), qf[kk][1] = tfc_pack_h2(b0.x * c, b0.y * c);
            qf[kk][2] = tfc_pack_h2(a8.x * c, a8.y * c), qf[kk][3] = tfc_pack_h2(b8.x * c, b8.y * c);
        }
    }
    __syncthreads();
    const int kmax = kmax_s;
    const uint16_t *Kh = K + (int64_t)h * n_slots * HD, *Vh = V + (int64_t)h * n_slots * HD;
    auto load_tile = [&](int buf, int kt) {
        uint16_t *ks = Ks + buf * PBK * ST, *vs = Vs + buf * PBK * ST;
        for (int e = tid; e < PBK * HD / 8; e += PQ_WARPS * 32) {
            const int j = e / (HD / 8), c8 = 8 * (e % (HD / 8));
            const bool in = kt + j < kmax;
            const int64_t slot = vis_slot(gp, in ? kt + j : 0);
            tfc_cp_async16(ks + j * ST + c8, Kh + slot * HD + c8, in);
            tfc_cp_async16(vs + j * ST + c8, Vh + slot * HD + c8, in);
        }
        tfc_cp_async_commit();
    };
    float o[HD / 8][4];
#pragma unroll
    for (int nt = 0; nt < HD / 8; nt++) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
    float ma = -INFINITY, mb = -INFINITY, la = 0.0f, lb = 0.0f;
    const int mat = lane >> 3, mrow = lane & 7; /* the ldmatrix row this lane addresses */
    if (kmax > 0) load_tile(0, 0);
    int buf = 0;
    for (int kt = 0; kt < kmax; kt += PBK, buf ^= 1) {
        if (kt + PBK < kmax) {
            load_tile(buf ^ 1, kt + PBK);
            tfc_cp_async_wait<1>();
        } else {
            tfc_cp_async_wait<0>();
        }
        __syncthreads();
        const uint16_t *ks = Ks + buf * PBK * ST, *vs = Vs + buf * PBK * ST;
        float s[PBK / 8][4];
#pragma unroll
        for (int nt = 0; nt < PBK / 8; nt++) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++)
#pragma unroll
            for (int np = 0; np < PBK / 16; np++) {
                uint32_t r[4]; /* keys 16 np .. (+8 for matrices 2, 3), dimensions 16 kk .. (+8 for 1, 3) */
                tfc_ldsm_x4(r, ks + (16 * np + 8 * (mat >> 1) + mrow) * ST + 16 * kk + 8 * (mat & 1));
                tfc_mma_f16(s[2 * np], qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3], r[0], r[1]);
                tfc_mma_f16(s[2 * np + 1], qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3], r[2], r[3]);
            }
        /* accumulator e of tile nt: row a (e < 2) or b, key kt + 8 nt + 2 q + e % 2 */
        float mxa = ma, mxb = mb;
#pragma unroll
        for (int nt = 0; nt < PBK / 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int j = kt + 8 * nt + 2 * qd + (e & 1);
                if (j >= (e < 2 ? lena : lenb)) s[nt][e] = -INFINITY;
                if (e < 2) mxa = fmaxf(mxa, s[nt][e]);
                else mxb = fmaxf(mxb, s[nt][e]);
            }
        mxa = fmaxf(mxa, __shfl_xor_sync(0xffffffffu, mxa, 1));
        mxa = fmaxf(mxa, __shfl_xor_sync(0xffffffffu, mxa, 2));
        mxb = fmaxf(mxb, __shfl_xor_sync(0xffffffffu, mxb, 1));
        mxb = fmaxf(mxb, __shfl_xor_sync(0xffffffffu, mxb, 2));
        const float ca = mxa == -INFINITY ? 1.0f : tfc_ex2(ma - mxa); /* ma = -inf: 0 */
        const float cb = mxb == -INFINITY ? 1.0f : tfc_ex2(mb - mxb);
        float sa = 0.0f, sb = 0.0f;
#pragma unroll
        for (int nt = 0; nt < PBK / 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float mref = e < 2 ? mxa : mxb;
                const float p = mref == -INFINITY ? 0.0f : tfc_ex2(s[nt][e] - mref);
                s[nt][e] = p;
                if (e < 2) sa += p;
                else sb += p;
            }
        la = la * ca + sa, lb = lb * cb + sb, ma = mxa, mb = mxb;
#pragma unroll
        for (int nt = 0; nt < HD / 8; nt++) o[nt][0] *= ca, o[nt][1] *= ca, o[nt][2] *= cb, o[nt][3] *= cb;
#pragma unroll
        for (int kk = 0; kk < PBK / 16; kk++) {
            const uint32_t a0 = tfc_pack_h2(s[2 * kk][0], s[2 * kk][1]), a1 = tfc_pack_h2(s[2 * kk][2], s[2 * kk][3]);
            const uint32_t a2 = tfc_pack_h2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
            const uint32_t a3 = tfc_pack_h2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
            for (int np = 0; np < HD / 16; np++) {
                uint32_t r[4]; /* keys 16 kk .. (+8 for matrices 1, 3), dimensions 16 np .. (+8 for 2, 3) */
                tfc_ldsm_x4_t(r, vs + (16 * kk + 8 * (mat & 1) + mrow) * ST + 16 * np + 8 * (mat >> 1));
                tfc_mma_f16(o[2 * np], a0, a1, a2, a3, r[0], r[1]);
                tfc_mma_f16(o[2 * np + 1], a0, a1, a2, a3, r[2], r[3]);
            }
        }
        __syncthreads(); /* the buffer is refilled by the next iteration's copies */
    }
    la += __shfl_xor_sync(0xffffffffu, la, 1);
    la += __shfl_xor_sync(0xffffffffu, la, 2);
    lb += __shfl_xor_sync(0xffffffffu, lb, 1);
    lb += __shfl_xor_sync(0xffffffffu, lb, 2);
    const float ia = 1.0f / la, ib = 1.0f / lb;
#pragma unroll
    for (int nt = 0; nt < HD / 8; nt++) {
        const int d = 8 * nt + 2 * qd;
        if (ra < n_q) *(float2 *)(out + (int64_t)ra * ldo + (int64_t)hq * HD + d) = make_float2(o[nt][0] * ia, o[nt][1] * ia);
        if (rb < n_q) *(float2 *)(out + (int64_t)rb * ldo + (int64_t)hq * HD + d) = make_float2(o[nt][2] * ib, o[nt][3] * ib);
    }
}

/* The prefill kernel: TF_CUDA_ATTN_PREFILL (read once) = 1 (the default:
 * the tensor cores where they apply) or 0 (CUDA cores for every head size). */
static int prefill_variant(void) {
    static int v = -1;
    if (v < 0) v = tfc_env_variant("TF_CUDA_ATTN_PREFILL", "01", 1);
    return v;
}

void tfc_attn_prefill_init(void) {
    cudaFuncSetAttribute(k_attn_prefill, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)prefill_smem(MAX_HD));
    cudaFuncSetAttribute(k_attn_prefill_tc<64>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)prefill_tc_smem(64));
    cudaFuncSetAttribute(k_attn_prefill_tc<128>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         (int)prefill_tc_smem(128));
    cudaGetLastError();
}

extern "C" void tf_cuda_attn_prefill(tf_cuda *cu, const tf_cuda_attn *a) {
    tf_cuda_attn_prefill_variant(cu, a, prefill_variant());
}

extern "C" void tf_cuda_attn_prefill_variant(tf_cuda *cu, const tf_cuda_attn *a, int variant) {
    const int hd = a->head_dim;
    if (variant == 1 && (hd == 64 || hd == 128) && cu->sm >= 80) {
        dim3 grid((a->n_q + PBQ - 1) / PBQ, a->n_head);
        if (hd == 64)
            k_attn_prefill_tc<64><<<grid, PQ_WARPS * 32, prefill_tc_smem(64), cu->stream>>>(
                a->q, a->ldq, a->k, a->v, a->n_slots, a->n_q, a->n_head, a->n_head_kv, a->kv_len_d, a->gap_d,
                a->scale, a->out, a->ldo);
        else
            k_attn_prefill_tc<128><<<grid, PQ_WARPS * 32, prefill_tc_smem(128), cu->stream>>>(
                a->q, a->ldq, a->k, a->v, a->n_slots, a->n_q, a->n_head, a->n_head_kv, a->kv_len_d, a->gap_d,
                a->scale, a->out, a->ldo);
        return;
    }
    dim3 grid((a->n_q + BQ - 1) / BQ, a->n_head);
    k_attn_prefill<<<grid, PRE_THREADS, prefill_smem(hd), cu->stream>>>(a->q, a->ldq, a->k, a->v, a->n_slots, a->n_q,
                                                                        a->n_head, a->n_head_kv, hd, a->kv_len_d,
                                                                        a->gap_d, a->scale, a->out, a->ldo);
}
