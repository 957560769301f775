/*
 * elementwise.cu — lab for RMSNorm, RoPE (YaRN-style frequencies, large
 * positions) and SiLU gating at decode and prefill row counts. CPU
 * references are the library's own (src/backend/cpu/ops.c); validated,
 * then timed with GB/s of the bytes each op must move.
 */
#include "lab_common.cuh"

extern "C" {
#include "backend/cpu/ops.h"
}

int main(void) {
    tf_cuda *cu = lab_open();
    const int dims[][2] = {{1, 4096}, {16, 4096}, {4096, 4096}};
    for (auto &d : dims) {
        int n = d[0], dim = d[1];
        size_t cnt = (size_t)n * dim;
        float *x = lab_rand(cnt, -2, 2), *w = lab_rand(dim, 0.9f, 1.1f), *y = (float *)malloc(sizeof(float) * cnt);
        double *ref = (double *)malloc(sizeof(double) * cnt);
        float *dx = (float *)lab_dev(x, sizeof(float) * cnt), *dw = (float *)lab_dev(w, sizeof(float) * dim);
        float *dy = (float *)lab_dev(NULL, sizeof(float) * cnt);
        char name[96];
        /* rmsnorm */
        tf_op_rmsnorm(y, x, w, n, dim, dim, 1e-5f);
        for (size_t i = 0; i < cnt; i++) ref[i] = y[i];
        tf_cuda_rmsnorm(cu, dy, dx, dw, n, dim, 1e-5f);
        LAB_CHECK(cudaMemcpy(y, dy, sizeof(float) * cnt, cudaMemcpyDeviceToHost));
        snprintf(name, sizeof name, "rmsnorm %dx%d", n, dim);
        lab_validate(name, y, ref, cnt, 1e-12);
        double ms = lab_time_ms([&] { tf_cuda_rmsnorm(cu, dy, dx, dw, n, dim, 1e-5f); }, 50);
        printf("%-44s %8.4f ms  %7.0f GB/s\n", name, ms, 8.0 * cnt / (ms * 1e-3) / 1e9);
        /* rope: 32 heads of 128, YaRN-like frequencies, positions up to 128K */
        int32_t *pos = (int32_t *)malloc(sizeof(int32_t) * n);
        for (int i = 0; i < n; i++) pos[i] = 131071 - i * 7;
        float freq[64], ct[64 * 4096 / 64], st[64 * 4096 / 64];
        (void)ct, (void)st;
        for (int i = 0; i < 64; i++) freq[i] = (float)pow(10000.0, -i / 64.0) / (i > 20 ? 32.0f : 1.0f);
        float *cs = (float *)malloc(sizeof(float) * n * 64), *sn = (float *)malloc(sizeof(float) * n * 64);
        memcpy(y, x, sizeof(float) * cnt);
        tf_op_rope_table(cs, sn, pos, n, 128, freq, 1.1386f);
        tf_op_rope(y, n, dim, dim / 128, 128, 128, false, cs, sn);
        for (size_t i = 0; i < cnt; i++) ref[i] = y[i];
        int32_t *dpos = (int32_t *)lab_dev(pos, sizeof(int32_t) * n);
        float *dfreq = (float *)lab_dev(freq, sizeof freq);
        LAB_CHECK(cudaMemcpy(dy, x, sizeof(float) * cnt, cudaMemcpyHostToDevice));
        tf_cuda_rope(cu, dy, n, dim, dim / 128, 128, 128, 0, dpos, dfreq, 1.1386f);
        LAB_CHECK(cudaStreamSynchronize(lab_stream));
        LAB_CHECK(cudaMemcpy(y, dy, sizeof(float) * cnt, cudaMemcpyDeviceToHost));
        snprintf(name, sizeof name, "rope %dx%d", n, dim);
        lab_validate(name, y, ref, cnt, 1e-12);
        ms = lab_time_ms([&] { tf_cuda_rope(cu, dy, n, dim, dim / 128, 128, 128, 0, dpos, dfreq, 1.1386f); }, 50);
        printf("%-44s %8.4f ms  %7.0f GB/s\n", name, ms, 8.0 * cnt / (ms * 1e-3) / 1e9);
        /* silu * mul */
        float *u = lab_rand(cnt, -2, 2), *du = (float *)lab_dev(u, sizeof(float) * cnt);
        memcpy(y, x, sizeof(float) * cnt);
        tf_op_silu_mul(y, u, (int64_t)cnt);
        for (size_t i = 0; i < cnt; i++) ref[i] = y[i];
        LAB_CHECK(cudaMemcpy(dy, x, sizeof(float) * cnt, cudaMemcpyHostToDevice));
        tf_cuda_silu_mul(cu, dy, du, (int64_t)cnt);
        LAB_CHECK(cudaStreamSynchronize(lab_stream));
        LAB_CHECK(cudaMemcpy(y, dy, sizeof(float) * cnt, cudaMemcpyDeviceToHost));
        snprintf(name, sizeof name, "silu_mul %dx%d", n, dim);
        lab_validate(name, y, ref, cnt, 1e-12);
        ms = lab_time_ms([&] { tf_cuda_silu_mul(cu, dy, du, (int64_t)cnt); }, 50);
        printf("%-44s %8.4f ms  %7.0f GB/s\n", name, ms, 12.0 * cnt / (ms * 1e-3) / 1e9);
        cudaFree(dx), cudaFree(dw), cudaFree(dy), cudaFree(dpos), cudaFree(dfreq), cudaFree(du);
        free(x), free(w), free(y), free(ref), free(pos), free(cs), free(sn), free(u);
    }
    tf_cuda_close(cu);
    return 0;
}
