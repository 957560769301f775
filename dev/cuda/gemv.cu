/*
 * gemv.cu — lab for the decode-path matrix products: Y = W X for 1..16
 * tokens with F16 / BF16 / Q8_0 weights.
 *
 * CPU reference in double over the dequantized weights; variant 1 is the
 * library's batch-invariant GEMV kernel (tf_cuda_gemv), variant 2 cuBLAS
 * (tf_cuda_gemm, F16/BF16: activations rounded to the weight type), variants 4
 * and 5 the library's default for F16/BF16 (rows split over the columns across
 * a block's warps, 4 or 2 rows per block, every token in one group;
 * tf_cuda_gemv_variant) and variant 3 (4 with 4 tokens' activations loaded at
 * once), which must equal each other bit for bit; variants 6
 * to 9 the tensor-core GEMV (TF32 mma, activations as two TF32 terms): 6 and 7
 * with 4 warps per block and 16 or 32 rows (which must agree bit for bit), 8
 * and 9 with 8 and 16 warps splitting the columns. All are
 * validated (output poisoned
 * with NaN first) before timing; GB/s counts the weight bytes (read once).
 */
#include "lab_common.cuh"

/* the CPU references (src/backend/cpu/quant_ref.c; quant.h itself is C11-only) */
extern "C" {
void tf_ref_quantize_row(int type, const float *x, void *y, int64_t n);
void tf_ref_dequantize_row(int type, const void *x, float *y, int64_t n);
size_t tf_dtype_row_size(uint32_t type, int64_t n);
const char *tf_dtype_name(uint32_t type);
}

struct shape { int rows, cols, n; uint32_t type; };

int main(void) {
    tf_cuda *cu = lab_open();
    const shape shapes[] = {
        {4096, 4096, 1, 1},  {11008, 4096, 1, 1}, {4096, 11008, 1, 1}, {32000, 4096, 1, 1}, {4096, 4096, 8, 1},
        {4096, 4096, 16, 1}, {4096, 4096, 1, 30}, {4096, 4096, 1, 8},  {11008, 4096, 4, 8}, {3072, 768, 1, 1},
        {4096, 4096, 2, 1},  {4096, 4096, 4, 1},  {11008, 4096, 8, 1}, {4096, 11008, 8, 1}, {1536, 576, 8, 1},
        {4100, 4096, 8, 1},  {1000, 4096, 16, 1}, {4096, 4096, 9, 1},  {11008, 4096, 16, 1}, {4096, 11008, 16, 1},
        {4096, 4096, 8, 30}, {4090, 4096, 3, 30},
    };
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const shape &s = shapes[si];
        if (lab_skip(si)) continue;
        size_t row_b = tf_dtype_row_size(s.type, s.cols);
        float *wf = lab_rand((size_t)s.rows * s.cols, -1, 1), *x = lab_rand((size_t)s.n * s.cols, -1, 1);
        uint8_t *wq = (uint8_t *)malloc(row_b * s.rows);
        float *deq = (float *)malloc(sizeof(float) * s.cols);
        double *ref = (double *)malloc(sizeof(double) * s.n * s.rows);
        for (int r = 0; r < s.rows; r++) {
            tf_ref_quantize_row((int)s.type, wf + (size_t)r * s.cols, wq + r * row_b, s.cols);
            tf_ref_dequantize_row((int)s.type, wq + r * row_b, deq, s.cols);
            for (int t = 0; t < s.n; t++) {
                double acc = 0;
                for (int c = 0; c < s.cols; c++) acc += (double)deq[c] * x[(size_t)t * s.cols + c];
                ref[(size_t)t * s.rows + r] = acc;
            }
        }
        void *dw = lab_dev(wq, row_b * s.rows), *dx = lab_dev(x, sizeof(float) * s.n * s.cols);
        float *dy = (float *)lab_dev(NULL, sizeof(float) * s.n * s.rows);
        tf_cuda_mat m = {dw, s.type, s.rows, s.cols};
        void *scr = lab_dev(NULL, tf_cuda_matmul_scratch(&m, s.n) + 16);
        float *got = (float *)malloc(sizeof(float) * s.n * s.rows);
        char name[96];
        tf_err err = {};
        float *v4_out = (float *)malloc(sizeof(float) * s.n * s.rows);
        const int vars[] = {1, 2, 4, 3, 5, 6, 7, 8, 9}; /* 3 and 5 after 4, 7 after 6: compared bit for bit */
        for (int var : vars) {
            if (var == 2 && s.type == 8) continue; /* no cuBLAS path for Q8_0 */
            if (var >= 3 && ((s.type != 1 && s.type != 30) || s.cols % 8)) continue; /* v3..v9: F16/BF16 */
            if (var >= 6 && s.cols % 32) continue;                                  /* v6..v9: n_cols % 32 == 0 */
            auto run = [&] {
                if (var == 2) tf_cuda_gemm(cu, &m, (const float *)dx, s.n, dy, s.rows, scr, &err);
                else tf_cuda_gemv_variant(cu, &m, (const float *)dx, s.n, dy, s.rows, var);
            };
            LAB_CHECK(cudaMemset(dy, 0xff, sizeof(float) * s.n * s.rows)); /* NaN: every output must be written */
            run();
            LAB_CHECK(cudaGetLastError());
            LAB_CHECK(cudaStreamSynchronize(lab_stream));
            LAB_CHECK(cudaMemcpy(got, dy, sizeof(float) * s.n * s.rows, cudaMemcpyDeviceToHost));
            snprintf(name, sizeof name, "v%d %s %s %dx%d n=%d", var,
                     var == 1   ? "gemv "
                     : var == 2 ? "cublas"
                     : var == 3 ? "split R4 X4"
                     : var == 4 ? "split R4"
                     : var == 5 ? "split R2"
                     : var == 6 ? "tc R1 K4"
                     : var == 7 ? "tc R2 K4"
                     : var == 8 ? "tc R1 K8"
                                : "tc R1 K16",
                     tf_dtype_name(s.type), s.rows, s.cols, s.n);
            lab_validate(name, got, ref, (size_t)s.n * s.rows, var != 2 ? 1e-10 : s.type == 30 ? 1e-4 : 1e-6);
            if (var == 4 || var == 6) memcpy(v4_out, got, sizeof(float) * s.n * s.rows);
            if ((var == 3 || var == 5 || var == 7) && memcmp(v4_out, got, sizeof(float) * s.n * s.rows) != 0) {
                printf("FAIL %s: not v%d's results bit for bit\n", name, var == 7 ? 6 : 4);
                exit(1);
            }
            double ms = lab_time_ms(run, 50);
            printf("%-44s %8.4f ms  %7.0f GB/s (weights)\n", name, ms, (double)row_b * s.rows / (ms * 1e-3) / 1e9);
        }
        cudaFree(dw), cudaFree(dx), cudaFree(dy), cudaFree(scr);
        free(wf), free(x), free(wq), free(deq), free(ref), free(got), free(v4_out);
    }
    tf_cuda_close(cu);
    return 0;
}
