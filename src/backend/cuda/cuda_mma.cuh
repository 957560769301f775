/*
 * cuda_mma.cuh — warp-level tensor-core products (mma.sync, sm_80 and later)
 * shared by the GEMV and the attention kernels, and the conversions into
 * their operand types. Private to src/backend/cuda/.
 *
 * Fragments of m16n8k8 (TF32) and m16n8k16 (F16), lane = 4 g + q: A row g
 * (registers 0, 2 / pairs 0, 2) and g + 8 (1, 3); A column q and q + 4
 * (TF32), pairs 2q, 2q + 1 and 2q + 8, 2q + 9 (F16); B column g, rows as A's
 * columns; C rows g (c0, c1) and g + 8 (c2, c3), columns 2q and 2q + 1.
 * The tensor cores add products to the accumulator truncating, not
 * rounding: long chains lose bits (the kernels keep them short).
 */
#ifndef TF_BACKEND_CUDA_MMA_CUH
#define TF_BACKEND_CUDA_MMA_CUH

#include "backend/cuda/cuda_common.cuh"

/* x rounded to TF32 (nearest, ties away), as the 32-bit operand */
__device__ __forceinline__ uint32_t tfc_tf32(float f) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(f));
    return r;
}

/* x as two TF32 terms hi + lo (about 22 bits of x); an infinite hi carries
 * the value alone */
__device__ __forceinline__ void tfc_tf32_split(float x, uint32_t *hi, uint32_t *lo) {
    *hi = tfc_tf32(x);
    const float h = __uint_as_float(*hi);
    *lo = tfc_tf32(isfinite(h) ? x - h : 0.0f);
}

/* The TF32 operand of an f16 value (exact) */
__device__ __forceinline__ uint32_t tfc_h2tf32(uint16_t h) { return __float_as_uint(tfc_h2f(h)); }

/* d += A (16 x 8) B (8 x 8), TF32 in, f32 accumulate */
__device__ __forceinline__ void tfc_mma_tf32(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                             uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
    __trap();
#endif
}

/* d += A (16 x 16) B (16 x 8), f16 pairs in, f32 accumulate */
__device__ __forceinline__ void tfc_mma_f16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                            uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
    __trap();
#endif
}

/* two floats as an f16 pair (lo in the low half) */
__device__ __forceinline__ uint32_t tfc_pack_h2(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *(const uint32_t *)&h;
}

/* ldmatrix: four 8 x 8 matrices of 16-bit values from shared memory (lanes
 * 8i .. 8i + 7 give the row addresses of matrix i, 16-byte aligned); lane
 * 4g + q gets row g, columns 2q, 2q + 1 of each (trans: column g, rows 2q,
 * 2q + 1) */
__device__ __forceinline__ void tfc_ldsm_x4(uint32_t (&r)[4], const void *p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#else
    __trap();
#endif
}
__device__ __forceinline__ void tfc_ldsm_x4_t(uint32_t (&r)[4], const void *p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#else
    __trap();
#endif
}

/* 16 bytes global -> shared without registers (zeros when !in); a group is
 * committed, then waited for with at most N groups still in flight */
__device__ __forceinline__ void tfc_cp_async16(void *smem, const void *gmem, bool in) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(gmem), "r"(in ? 16 : 0));
#else
    __trap();
#endif
}
__device__ __forceinline__ void tfc_cp_async_commit(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;");
#endif
}
template <int N> __device__ __forceinline__ void tfc_cp_async_wait(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;" ::"n"(N));
#endif
}

/* 2^x (the special function unit's approximation, as __expf uses) */
__device__ __forceinline__ float tfc_ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

#endif
