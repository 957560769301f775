/*
 * peak.h — compute-peak probes: how many arithmetic operations a second the
 * cores can retire in the instructions the matrix products use, the ceiling
 * prefill is measured against (as membw.h gives decode's). Used by
 * `triforce bench`.
 */
#ifndef TF_PEAK_H
#define TF_PEAK_H

/* int8 dot products: 1e9 operations (a multiply-add counts two) a second of
 * 512-bit vpdpbusd on n_threads threads (1..64), each running 16 independent
 * chains for about `ms` milliseconds. 0 when the CPU lacks AVX512-VNNI; -1
 * when a thread cannot be started. */
double peak_int8_gops(int n_threads, int ms);

/* bf16 dot products with f32 accumulation (what attention multiplies with on
 * such CPUs): 1e9 operations a second of 512-bit vdpbf16ps, as above; 0 when
 * the CPU lacks AVX512-BF16. */
double peak_bf16_gflops(int n_threads, int ms);

/* f32 fused multiply-adds: 1e9 operations a second, on 512-bit vectors where
 * the CPU has AVX-512, else 256-bit with FMA; 0 without either; -1 when a
 * thread cannot be started. */
double peak_f32_gflops(int n_threads, int ms);

#endif
