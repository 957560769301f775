/*
 * cuda_attn.cuh — what the attention kernels (cuda_attn.cu: decode,
 * cuda_attn_prefill.cu: prefill) share: a row's visible keys around the
 * cache's gap. Private to src/backend/cuda/.
 */
#ifndef TF_BACKEND_CUDA_ATTN_CUH
#define TF_BACKEND_CUDA_ATTN_CUH

#include "backend/cuda/cuda_common.cuh"

#define MAX_HD 256

/* The gap's start and width (0, 0: none), from the staged pair. */
__device__ __forceinline__ int2 gap_of(const int32_t *gap) {
    if (!gap || gap[0] >= gap[1]) return make_int2(0, 0);
    return make_int2(gap[0], gap[1] - gap[0]);
}
/* Visible keys of a row that sees slots below len, and the slot of its key j. */
__device__ __forceinline__ int32_t vis_len(int2 g, int32_t len) {
    return len <= g.x ? len : len - min(g.y, len - g.x);
}
__device__ __forceinline__ int64_t vis_slot(int2 g, int32_t j) { return j < g.x ? j : (int64_t)j + g.y; }

#endif
