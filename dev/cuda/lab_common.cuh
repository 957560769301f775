/* lab_common.cuh — shared helpers of the dev/cuda labs (not library code). */
#pragma once
#include "backend/cuda/cuda_backend.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LAB_CHECK(x)                                                                                                 \
    do {                                                                                                             \
        cudaError_t e_ = (x);                                                                                        \
        if (e_ != cudaSuccess) {                                                                                     \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));                      \
            exit(1);                                                                                                 \
        }                                                                                                            \
    } while (0)

static uint64_t lab_state = 0x9e3779b97f4a7c15ull;
static float lab_uniform(float lo, float hi) { /* xorshift64*: fresh data per run unless seeded */
    lab_state ^= lab_state >> 12, lab_state ^= lab_state << 25, lab_state ^= lab_state >> 27;
    return lo + (hi - lo) * (float)((lab_state * 0x2545f4914f6cdd1dull) >> 40) / (float)(1 << 24);
}
static void lab_seed(void) {
    const char *s = getenv("LAB_SEED");
    lab_state ^= s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL);
    printf("seed %llu (LAB_SEED to repeat)\n", (unsigned long long)lab_state);
}

static float *lab_rand(size_t n, float lo, float hi) {
    float *x = (float *)malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) x[i] = lab_uniform(lo, hi);
    return x;
}

static void *lab_dev(const void *h, size_t bytes) {
    void *d;
    LAB_CHECK(cudaMalloc(&d, bytes));
    if (h) LAB_CHECK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    else LAB_CHECK(cudaMemset(d, 0, bytes));
    return d;
}

/* Fresh random f16 values in [lo, hi) written on the device (a hash of the
 * index and the seed): the large timing-only shapes, whose host generation
 * would take longer than the timing itself. */
__global__ void lab_k_fill_half(uint16_t *x, size_t n, unsigned long long seed, float lo, float hi) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned long long z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        const float u = (float)(z >> 40) * (1.0f / 16777216.0f);
        x[i] = __half_as_ushort(__float2half_rn(lo + (hi - lo) * u));
    }
}
static void *lab_dev_rand_half(size_t n, float lo, float hi) {
    void *d;
    LAB_CHECK(cudaMalloc(&d, n * 2));
    lab_k_fill_half<<<1024, 256>>>((uint16_t *)d, n, lab_state += 0x1234567ull, lo, hi);
    LAB_CHECK(cudaGetLastError());
    LAB_CHECK(cudaDeviceSynchronize());
    return d;
}

/* The attention reference in double: n_q query rows of n_head heads over
 * n_kv keys of n_head_kv heads ([head][key][hd], already rounded as the
 * kernel reads them), row i seeing the first n_kv - n_q + 1 + i keys
 * (causal, bottom-right), scale 1/sqrt(hd); out [n_q][n_head][hd]. */
static void lab_attn_ref(const float *q, const float *k, const float *v, int n_head, int n_head_kv, int hd, int n_kv,
                         int n_q, double *out) {
    int g = n_head / n_head_kv;
    double *sc = (double *)malloc(sizeof(double) * n_kv);
    for (int i = 0; i < n_q; i++) {
        int len = n_kv - n_q + 1 + i;
        for (int hq = 0; hq < n_head; hq++) {
            int h = hq / g;
            const float *qi = q + ((size_t)i * n_head + hq) * hd;
            double m = -INFINITY, l = 0;
            for (int j = 0; j < len; j++) {
                double d = 0;
                for (int e = 0; e < hd; e++) d += (double)qi[e] * k[((size_t)h * n_kv + j) * hd + e];
                sc[j] = d / sqrt((double)hd);
                m = fmax(m, sc[j]);
            }
            for (int j = 0; j < len; j++) l += sc[j] = exp(sc[j] - m);
            for (int e = 0; e < hd; e++) {
                double acc = 0;
                for (int j = 0; j < len; j++) acc += sc[j] * v[((size_t)h * n_kv + j) * hd + e];
                out[((size_t)i * n_head + hq) * hd + e] = acc / l;
            }
        }
    }
    free(sc);
}

/* n keys and n values in f16 on the device, uniform in [-2, 2) and [-1, 1):
 * with host copies rounded to f16 (what the kernels read) when the shape is
 * validated (*k, *v; free them), drawn on the device otherwise (NULL). */
static void lab_kv(size_t n, bool validate, float **k, float **v, void **dk, void **dv) {
    if (!validate) {
        *k = *v = NULL;
        *dk = lab_dev_rand_half(n, -2, 2), *dv = lab_dev_rand_half(n, -1, 1);
        return;
    }
    *k = lab_rand(n, -2, 2), *v = lab_rand(n, -1, 1);
    uint16_t *kh = (uint16_t *)malloc(2 * n), *vh = (uint16_t *)malloc(2 * n);
    for (size_t i = 0; i < n; i++) {
        __half a = __float2half((*k)[i]), b = __float2half((*v)[i]);
        (*k)[i] = __half2float(a), (*v)[i] = __half2float(b);
        memcpy(kh + i, &a, 2), memcpy(vh + i, &b, 2);
    }
    *dk = lab_dev(kh, 2 * n), *dv = lab_dev(vh, 2 * n);
    free(kh), free(vh);
}

/* LAB_ONLY=i runs the lab's shape i alone (0-based; for profilers such as
 * ncu, which then see only that shape's launches). */
static bool lab_skip(size_t i) {
    const char *e = getenv("LAB_ONLY");
    return e && *e && strtoul(e, NULL, 10) != i;
}

/* NMSE of got against ref, failing (exit 1) above tol or on NaN/Inf. */
static void lab_validate(const char *what, const float *got, const double *ref, size_t n, double tol) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) {
            printf("FAIL %s: element %zu is %g\n", what, i, got[i]);
            exit(1);
        }
        num += (got[i] - ref[i]) * (got[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    double e = num / (den > 0 ? den : 1);
    printf("%-44s nmse %.3g %s\n", what, e, e <= tol ? "ok" : "FAIL");
    if (!(e <= tol)) exit(1);
}

/* Median time in ms of `reps` runs of fn (after 3 warm-ups). */
static cudaStream_t lab_stream = 0; /* set to the library's stream by the lab */
template <typename F> static double lab_time_ms(F fn, int reps) {
    cudaEvent_t a, b;
    cudaEventCreate(&a), cudaEventCreate(&b);
    for (int i = 0; i < 3; i++) fn();
    double t[64];
    if (reps > 64) reps = 64;
    for (int r = 0; r < reps; r++) {
        cudaEventRecord(a, lab_stream);
        fn();
        cudaEventRecord(b, lab_stream);
        cudaEventSynchronize(b);
        float ms;
        cudaEventElapsedTime(&ms, a, b);
        t[r] = ms;
    }
    for (int i = 1; i < reps; i++)
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double x = t[j];
            t[j] = t[j - 1], t[j - 1] = x;
        }
    return t[reps / 2];
}

/* Achievable copy bandwidth (GB/s): a device-to-device copy of 1 GiB, read + write. */
static double lab_measured_peak(void) {
    size_t n = (size_t)1 << 30;
    void *a = lab_dev(NULL, n), *b = lab_dev(NULL, n);
    double ms = lab_time_ms([&] { cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, lab_stream); }, 10);
    cudaFree(a), cudaFree(b);
    return 2.0 * n / (ms * 1e-3) / 1e9;
}

/* Open device 0 through the library (its stream is the timing stream). */
static tf_cuda *lab_open(void) {
    tf_cuda *cu;
    tf_err err = {};
    if (tf_cuda_open(&cu, 0, &err) != TF_OK) {
        fprintf(stderr, "%s\n", err.msg);
        exit(2);
    }
    setvbuf(stdout, NULL, _IOLBF, 0); /* every line out at once, also when a time limit stops the lab */
    lab_stream = (cudaStream_t)tf_cuda_stream(cu);
    lab_seed();
    double peak = lab_measured_peak();
    printf("device: %s\npeak: %.0f GB/s theoretical, %.0f GB/s measured (1 GiB device copy)\n", tf_cuda_describe(cu),
           tf_cuda_peak_gbps(cu), peak);
    return cu;
}
static double lab_peak_measured;
