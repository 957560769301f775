/*
 * gemv.cu — lab for the decode-path matrix products: Y = W X for 1..16
 * tokens with F16 / BF16 / Q8_0 weights.
 *
 * CPU reference in double over the dequantized weights; variant 1 is the
 * library's batch-invariant GEMV kernel (tf_cuda_gemv), variant 2 cuBLAS
 * (tf_cuda_gemm, F16/BF16: activations rounded to the weight type), variant 3
 * a GEMV with 2, 4 or 8 rows per warp (F16, 2..16 tokens; not yet run on a
 * GPU) that must equal v1 bit for bit. All are validated (output poisoned
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

/* Variant 3 (F16, a candidate for verification batches of 2..16 tokens): a
 * warp takes R rows, so each activation load serves R rows (v1 loads every
 * activation once per row: for 8 tokens, 16 bytes of x per 2 bytes of
 * weight). Per row and token the FMAs run in v1's order (lane l: columns
 * 8l + 256k, 8 at a time, then the same butterfly), so its results must be
 * v1's bit for bit, which the lab checks before timing it. */
__device__ __forceinline__ float v3_warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
template <int NT, int R>
__global__ void __launch_bounds__(128) v3_gemv_f16(const uint16_t *W, int64_t n_rows, int64_t n_cols, const float *x,
                                                   int n, float *y) {
    const int lane = threadIdx.x & 31;
    const int64_t r0 = ((int64_t)blockIdx.x * 4 + (threadIdx.x >> 5)) * R;
    if (r0 >= n_rows) return;
    float acc[R][NT];
#pragma unroll
    for (int i = 0; i < R; i++)
#pragma unroll
        for (int t = 0; t < NT; t++) acc[i][t] = 0.0f;
    for (int64_t c = (int64_t)lane * 8; c < n_cols; c += 256) {
        float wf[R][8];
#pragma unroll
        for (int i = 0; i < R; i++) {
            const int64_t r = r0 + i < n_rows ? r0 + i : n_rows - 1; /* a last partial group reads a valid row */
            const uint4 raw = *(const uint4 *)(W + r * n_cols + c);
            const __half *h = (const __half *)&raw;
#pragma unroll
            for (int j = 0; j < 8; j++) wf[i][j] = __half2float(h[j]);
        }
#pragma unroll
        for (int t = 0; t < NT; t++) {
            if (t >= n) break;
            const float4 *xp = (const float4 *)(x + (int64_t)t * n_cols + c);
            const float4 a = __ldg(xp), b = __ldg(xp + 1);
#pragma unroll
            for (int i = 0; i < R; i++) {
                float s = acc[i][t];
                s = __fmaf_rn(wf[i][0], a.x, s); s = __fmaf_rn(wf[i][1], a.y, s);
                s = __fmaf_rn(wf[i][2], a.z, s); s = __fmaf_rn(wf[i][3], a.w, s);
                s = __fmaf_rn(wf[i][4], b.x, s); s = __fmaf_rn(wf[i][5], b.y, s);
                s = __fmaf_rn(wf[i][6], b.z, s); s = __fmaf_rn(wf[i][7], b.w, s);
                acc[i][t] = s;
            }
        }
    }
#pragma unroll
    for (int i = 0; i < R; i++)
#pragma unroll
        for (int t = 0; t < NT; t++) {
            const float s = v3_warp_sum(acc[i][t]);
            if (lane == 0 && t < n && r0 + i < n_rows) y[(int64_t)t * n_rows + r0 + i] = s;
        }
}
template <int R>
static void v3_run(const tf_cuda_mat &m, const float *x, int n, float *y) {
    const unsigned blocks = (unsigned)((m.n_rows + 4 * R - 1) / (4 * R));
    const uint16_t *W = (const uint16_t *)m.data;
    if (n <= 2) v3_gemv_f16<2, R><<<blocks, 128, 0, lab_stream>>>(W, m.n_rows, m.n_cols, x, n, y);
    else if (n <= 4) v3_gemv_f16<4, R><<<blocks, 128, 0, lab_stream>>>(W, m.n_rows, m.n_cols, x, n, y);
    else if (n <= 8) v3_gemv_f16<8, R><<<blocks, 128, 0, lab_stream>>>(W, m.n_rows, m.n_cols, x, n, y);
    else v3_gemv_f16<16, R><<<blocks, 128, 0, lab_stream>>>(W, m.n_rows, m.n_cols, x, n, y);
}

int main(void) {
    tf_cuda *cu = lab_open();
    const shape shapes[] = {
        {4096, 4096, 1, 1},  {11008, 4096, 1, 1}, {4096, 11008, 1, 1}, {32000, 4096, 1, 1}, {4096, 4096, 8, 1},
        {4096, 4096, 16, 1}, {4096, 4096, 1, 30}, {4096, 4096, 1, 8},  {11008, 4096, 4, 8}, {3072, 768, 1, 1},
        {4096, 4096, 2, 1},  {4096, 4096, 4, 1},  {11008, 4096, 8, 1}, {4096, 11008, 8, 1}, {1536, 576, 8, 1},
    };
    for (const shape &s : shapes) {
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
        float *v1_out = (float *)malloc(sizeof(float) * s.n * s.rows);
        for (int var = 1; var <= 5; var++) {
            if (var == 2 && s.type == 8) continue; /* no cuBLAS path for Q8_0 */
            if (var >= 3 && (s.type != 1 || s.n < 2 || s.cols % 8)) continue; /* v3: F16, 2..16 tokens */
            const int R = var == 3 ? 2 : var == 4 ? 4 : 8; /* rows per warp */
            auto run = [&] {
                if (var == 1) tf_cuda_gemv(cu, &m, (const float *)dx, s.n, dy, s.rows);
                else if (var == 2) tf_cuda_gemm(cu, &m, (const float *)dx, s.n, dy, s.rows, scr, &err);
                else if (R == 2) v3_run<2>(m, (const float *)dx, s.n, dy);
                else if (R == 4) v3_run<4>(m, (const float *)dx, s.n, dy);
                else v3_run<8>(m, (const float *)dx, s.n, dy);
            };
            LAB_CHECK(cudaMemset(dy, 0xff, sizeof(float) * s.n * s.rows)); /* NaN: every output must be written */
            run();
            LAB_CHECK(cudaGetLastError());
            LAB_CHECK(cudaStreamSynchronize(lab_stream));
            LAB_CHECK(cudaMemcpy(got, dy, sizeof(float) * s.n * s.rows, cudaMemcpyDeviceToHost));
            if (var >= 3)
                snprintf(name, sizeof name, "v3 gemv %d rows/warp %s %dx%d n=%d", R, tf_dtype_name(s.type), s.rows,
                         s.cols, s.n);
            else
                snprintf(name, sizeof name, "v%d %s %s %dx%d n=%d", var, var == 1 ? "gemv " : "cublas",
                         tf_dtype_name(s.type), s.rows, s.cols, s.n);
            lab_validate(name, got, ref, (size_t)s.n * s.rows, var != 2 ? 1e-10 : s.type == 30 ? 1e-4 : 1e-6);
            if (var == 1) memcpy(v1_out, got, sizeof(float) * s.n * s.rows);
            if (var >= 3 && memcmp(v1_out, got, sizeof(float) * s.n * s.rows) != 0) {
                printf("FAIL %s: not v1's results bit for bit\n", name);
                exit(1);
            }
            double ms = lab_time_ms(run, 50);
            printf("%-44s %8.4f ms  %7.0f GB/s (weights)\n", name, ms, (double)row_b * s.rows / (ms * 1e-3) / 1e9);
        }
        cudaFree(dw), cudaFree(dx), cudaFree(dy), cudaFree(scr);
        free(wf), free(x), free(wq), free(deq), free(ref), free(got), free(v1_out);
    }
    tf_cuda_close(cu);
    return 0;
}
