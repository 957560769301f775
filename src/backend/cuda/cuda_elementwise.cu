/*
 * cuda_elementwise.cu — the per-row and elementwise ops of the forward pass:
 * embedding rows, RMSNorm, RoPE, SiLU gating, residual add, KV stores.
 * Each mirrors its CPU counterpart in src/backend/cpu/ops.c (the reference).
 */
#include "backend/cuda/cuda_common.cuh"

/* ---- embedding ---------------------------------------------------------------- */

__global__ void k_embed(float *x, const uint8_t *table, uint32_t type, int64_t dim, const int32_t *tok) {
    const int r = blockIdx.y;
    const int64_t t = tok[r];
    float *xr = x + (int64_t)r * dim;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < dim; i += (int64_t)gridDim.x * blockDim.x) {
        float v;
        if (type == TFC_F32) v = ((const float *)table)[t * dim + i];
        else if (type == TFC_F16) v = tfc_h2f(((const uint16_t *)table)[t * dim + i]);
        else if (type == TFC_BF16) v = tfc_bf2f(((const uint16_t *)table)[t * dim + i]);
        else if (type == TFC_Q8_0) {
            const uint8_t *blk = table + (t * (dim / TFC_Q8_0_BLOCK) + i / TFC_Q8_0_BLOCK) * TFC_Q8_0_BYTES;
            uint16_t d = (uint16_t)(blk[0] | (blk[1] << 8));
            v = tfc_h2f(d) * (float)(int8_t)blk[2 + i % TFC_Q8_0_BLOCK];
        } else { /* Q4_0 / Q4_1: element j < 16 the low nibble of byte j, j + 16 its high nibble */
            const int q1 = type == TFC_Q4_1;
            const int bytes = q1 ? TFC_Q4_1_BYTES : TFC_Q4_0_BYTES, j = (int)(i % 32);
            const uint8_t *blk = table + (t * (dim / 32) + i / 32) * bytes;
            const float d = tfc_h2f((uint16_t)(blk[0] | (blk[1] << 8)));
            const uint8_t qb = blk[(q1 ? 4 : 2) + (j & 15)];
            const int q = j < 16 ? qb & 0xf : qb >> 4;
            v = q1 ? d * (float)q + tfc_h2f((uint16_t)(blk[2] | (blk[3] << 8))) : d * (float)(q - 8);
        }
        xr[i] = v;
    }
}

extern "C" void tf_cuda_embed(tf_cuda *cu, float *x, const void *table, uint32_t type, int64_t dim,
                              const int32_t *tok_d, int32_t n) {
    dim3 grid(tfc_blocks(dim, 256) < 64 ? tfc_blocks(dim, 256) : 64, n);
    k_embed<<<grid, 256, 0, cu->stream>>>(x, (const uint8_t *)table, type, dim, tok_d);
}

/* ---- RMSNorm: one block per row; the sum of squares in double like the CPU
 * reference (only the order differs), in a fixed block-shaped order */

/* ADD: x += d first (each thread adds the elements it then reads, the same
 * float adds as k_add), so the fused launch gives add-then-norm's bits. */
/* A norm's block: a thread per element up to 1024, in whole warps. */
static int norm_threads(int32_t dim) { return dim >= 1024 ? 1024 : (dim + 31) / 32 * 32; }

template <bool ADD>
__global__ void k_rmsnorm(float *y, float *x, const float *d, const float *w, int32_t dim, float eps) {
    __shared__ double red[32];
    float *xr = x + (int64_t)blockIdx.x * dim;
    float *yr = y + (int64_t)blockIdx.x * dim;
    double ss = 0.0;
    if (ADD) {
        const float *dr = d + (int64_t)blockIdx.x * dim;
        for (int i = threadIdx.x; i < dim; i += blockDim.x) {
            const float v = xr[i] + dr[i];
            xr[i] = v;
            ss += (double)v * v;
        }
    } else {
        for (int i = threadIdx.x; i < dim; i += blockDim.x) ss += (double)xr[i] * xr[i];
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
    __syncthreads();
    if (threadIdx.x == 0) {
        double t = 0.0;
        for (int wi = 0; wi < (int)(blockDim.x >> 5); wi++) t += red[wi];
        red[0] = t;
    }
    __syncthreads();
    ss = red[0];
    const float scale = (float)(1.0 / sqrt(ss / (double)dim + (double)eps));
    for (int i = threadIdx.x; i < dim; i += blockDim.x) yr[i] = xr[i] * scale * w[i];
}

extern "C" void tf_cuda_rmsnorm(tf_cuda *cu, float *y, const float *x, const float *w, int32_t n, int32_t dim,
                                float eps) {
    const int threads = norm_threads(dim);
    k_rmsnorm<false><<<n, threads, 0, cu->stream>>>(y, (float *)x, NULL, w, dim, eps);
}

/* TF_CUDA_ADD_NORM=0 (read once): the two launches, for A/B runs */
extern "C" void tf_cuda_add_rmsnorm(tf_cuda *cu, float *x, const float *d, float *y, const float *w, int32_t n,
                                    int32_t dim, float eps) {
    static int fused = -1;
    if (fused < 0) fused = tfc_env_variant("TF_CUDA_ADD_NORM", "01", 1);
    if (!fused) {
        tf_cuda_add(cu, x, d, (int64_t)n * dim);
        tf_cuda_rmsnorm(cu, y, x, w, n, dim, eps);
        return;
    }
    const int threads = norm_threads(dim);
    k_rmsnorm<true><<<n, threads, 0, cu->stream>>>(y, x, d, w, dim, eps);
}

/* ---- RoPE: angles in double like tf_op_rope_table, then the f32 rotation ---- */

/* pair i is (2i, 2i+1), or (i, i + half) in the rotate-half (NeoX) layout, as tf_op_rope */
__global__ void k_rope(float *x, int64_t ld, int32_t n_head, int32_t head_dim, int32_t half, int neox,
                       const int32_t *pos, const float *freq, float mscale) {
    const int r = blockIdx.y;
    const int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; /* (head, pair) */
    if (idx >= (int64_t)n_head * half) return;
    const int h = (int)(idx / half), i = (int)(idx % half);
    const double theta = (double)pos[r] * (double)freq[i];
    const float c = (float)cos(theta) * mscale, s = (float)sin(theta) * mscale;
    float *v = x + (int64_t)r * ld + (int64_t)h * head_dim;
    const int ia = neox ? i : 2 * i, ib = neox ? i + half : 2 * i + 1;
    const float a = v[ia], b = v[ib];
    v[ia] = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s)); /* no FMA contraction, as the CPU */
    v[ib] = __fadd_rn(__fmul_rn(a, s), __fmul_rn(b, c));
}

extern "C" void tf_cuda_rope(tf_cuda *cu, float *x, int32_t n, int64_t ld, int32_t n_head, int32_t head_dim,
                             int32_t n_rot, int neox, const int32_t *pos_d, const float *freq_d, float mscale) {
    const int half = n_rot / 2;
    if (half < 1 || n < 1) return;
    dim3 grid(tfc_blocks((int64_t)n_head * half, 128), n);
    k_rope<<<grid, 128, 0, cu->stream>>>(x, ld, n_head, head_dim, half, neox, pos_d, freq_d, mscale);
}

/* ---- projection biases: y[r][i] += b[i] ------------------------------------------- */

__global__ void k_add_bias(float *y, const float *b, int64_t n, int64_t dim) {
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n * dim; k += (int64_t)gridDim.x * blockDim.x)
        y[k] += b[k % dim];
}

/* ---- SiLU gating and residual add ------------------------------------------------ */

__global__ void k_silu_mul(float *g, const float *u, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

__global__ void k_add(float *y, const float *x, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] += x[i];
}

static unsigned grid_1d(int64_t n) {
    unsigned b = tfc_blocks(n, 256);
    return b < 4096 ? (b ? b : 1) : 4096;
}

extern "C" void tf_cuda_silu_mul(tf_cuda *cu, float *g, const float *u, int64_t n) {
    k_silu_mul<<<grid_1d(n), 256, 0, cu->stream>>>(g, u, n);
}

extern "C" void tf_cuda_add(tf_cuda *cu, float *y, const float *x, int64_t n) {
    k_add<<<grid_1d(n), 256, 0, cu->stream>>>(y, x, n);
}

extern "C" void tf_cuda_add_bias(tf_cuda *cu, float *y, const float *b, int32_t n, int64_t dim) {
    if (n < 1 || dim < 1) return;
    k_add_bias<<<grid_1d((int64_t)n * dim), 256, 0, cu->stream>>>(y, b, n, dim);
}

/* ---- KV store: f32 rows -> f16 slots [slot0, slot0 + n) ------------------------- */

__global__ void k_kv_store(uint16_t *kc, uint16_t *vc, int32_t n_head_kv, int32_t head_dim, int32_t n_slots,
                           const float *k, const float *v, int64_t ld, const int32_t *slot0) {
    const int r = blockIdx.y;
    const int64_t kv_dim = (int64_t)n_head_kv * head_dim;
    const int64_t s = (int64_t)*slot0 + r;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < kv_dim; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t h = i / head_dim, d = i % head_dim;
        const int64_t o = (h * n_slots + s) * head_dim + d;
        kc[o] = tfc_f2h(k[r * ld + i]);
        vc[o] = tfc_f2h(v[r * ld + i]);
    }
}

extern "C" void tf_cuda_kv_store(tf_cuda *cu, uint16_t *k_layer, uint16_t *v_layer, int32_t n_head_kv,
                                 int32_t head_dim, int32_t n_slots, const float *k, const float *v, int64_t ld,
                                 int32_t n, const int32_t *slot0_d) {
    int64_t kv_dim = (int64_t)n_head_kv * head_dim;
    dim3 grid(tfc_blocks(kv_dim, 256), n);
    k_kv_store<<<grid, 256, 0, cu->stream>>>(k_layer, v_layer, n_head_kv, head_dim, n_slots, k, v, ld, slot0_d);
}
