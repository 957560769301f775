/*
 * cuda_common.cuh — what every .cu file of the CUDA backend shares: the
 * tf_cuda handle, error helpers, element conversions and warp reductions.
 * Private to src/backend/cuda/ (C++/CUDA; never included from C).
 */
#ifndef TF_BACKEND_CUDA_COMMON_CUH
#define TF_BACKEND_CUDA_COMMON_CUH

#include "backend/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

/* Weight type ids and block geometry from the registry (core/dtype_list.h,
 * plain preprocessor text; dtype.h itself is C11): TFC_<ID> (the GGUF id),
 * TFC_<ID>_BLOCK (values per block) and TFC_<ID>_BYTES (bytes per block). */
#include "core/dtype_list.h"
enum {
#define TFC_DTYPE_(ID, nm, id, bs, bytes, ...) TFC_##ID = id, TFC_##ID##_BLOCK = bs, TFC_##ID##_BYTES = bytes,
    TF_DTYPE_LIST(TFC_DTYPE_)
#undef TFC_DTYPE_
};

struct tf_cuda {
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;
    void *blas_ws;       /* cuBLAS workspace (fixed, so graph capture never allocates) */
    size_t blas_ws_bytes;
    int sm;              /* 80, 90, ... */
    double peak_gbps;
    char desc[512];
};

struct tf_cuda_graph {
    cudaGraphExec_t exec;
};

/* Record a CUDA runtime failure: "what: cudaErrorMemoryAllocation (out of memory)". */
tf_status tfc_cuda_err(tf_err *err, cudaError_t e, const char *what);
/* Record a cuBLAS failure with the status name. */
tf_status tfc_blas_err(tf_err *err, cublasStatus_t s, const char *what);

/* Kernel attributes of the attention kernels (cuda_attn.cu, cuda_attn_prefill.cu),
 * set by tf_cuda_open (never during a graph capture). */
void tfc_attn_init(void);
void tfc_attn_prefill_init(void);

static inline unsigned tfc_blocks(int64_t n, int threads) { return (unsigned)((n + threads - 1) / threads); }

/* A kernel variant chosen by the environment (labs and A/B runs): the value
 * of `name` when it is one of the single digits in `allowed`, else dflt.
 * Callers read it once. */
int tfc_env_variant(const char *name, const char *allowed, int dflt);

__device__ __forceinline__ float tfc_warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float tfc_warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Sum over a block of blockDim.x threads (a multiple of 32, <= 1024); every
 * thread gets the result. The order is fixed by the block shape, so the
 * result is deterministic. `red` is shared scratch of 32 floats. */
__device__ __forceinline__ float tfc_block_sum(float v, float *red) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = tfc_warp_sum(v);
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = lane < nw ? red[lane] : 0.0f;
    return tfc_warp_sum(v);
}

__device__ __forceinline__ float tfc_block_max(float v, float *red) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = tfc_warp_max(v);
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = lane < nw ? red[lane] : -INFINITY;
    return tfc_warp_max(v);
}

__device__ __forceinline__ float tfc_h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ uint16_t tfc_f2h(float f) { return __half_as_ushort(__float2half_rn(f)); }
__device__ __forceinline__ float tfc_bf2f(uint16_t b) { return __uint_as_float((uint32_t)b << 16); }

#endif
