/* r16_bench.c — times one Q8_0 or Q4_1 matrix product over the packed weight
 * rows (the VNNI table) and over R16 groups (the AMX table), 1 thread, the
 * matrix re-read each call. Build (after make):
 *   cc -O2 -Iinclude -Isrc dev/r16_bench.c build/libtriforce.a -lcjson -lpcre2-8 -lutf8proc -lm -lpthread -o build/r16_bench
 * Run: [TYPE=q4_1] build/r16_bench [rows cols]... (default SmolLM2's and TinyLlama's shapes) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/quant.h"

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
    long shapes[16][2] = {{1536, 576}, {576, 1536}, {49152, 576}, {5632, 2048}, {2048, 5632}, {2048, 2048}, {256, 2048}};
    int n_shapes = 7;
    if (argc > 2) {
        n_shapes = 0;
        for (int i = 1; i + 1 < argc && n_shapes < 16; i += 2, n_shapes++) {
            shapes[n_shapes][0] = atol(argv[i]);
            shapes[n_shapes][1] = atol(argv[i + 1]);
        }
    }
    tf_dtype ty = TF_DTYPE_Q8_0;
    if (getenv("TYPE") && !tf_dtype_from_name(getenv("TYPE"), &ty)) return 2;
    const tf_cpu_kernels *vnni = tf_cpu_kernels_get(TF_ISA_AVX512), *amx = tf_cpu_kernels_get(TF_ISA_AMX);
    if (!amx->r16_rows[ty]) {
        fprintf(stderr, "no AMX table on this CPU\n");
        return 1;
    }
    static const int toks[] = {1, 2, 4, 8, 16};
    printf("%s\n", tf_dtype_name(ty));
    printf("%-12s %5s %12s %12s %7s\n", "shape", "tok", "packed us", "r16 us", "ratio");
    for (int s = 0; s < n_shapes; s++) {
        const long rows = shapes[s][0], cols = shapes[s][1];
        const size_t ws = tf_dtype_row_size(ty, cols);
        float *x = malloc(sizeof(float) * cols * 16), *y = malloc(sizeof(float) * rows * 16);
        char *w = malloc(ws * rows), *wp = malloc(ws * rows), *wr = malloc(ws * rows);
        char *act = malloc(tf_act_scratch_row_size(ty, cols) * 16);
        float *row = malloc(sizeof(float) * cols);
        srand(1);
        for (long r = 0; r < rows; r++) {
            for (long c = 0; c < cols; c++) row[c] = (float)rand() / RAND_MAX - 0.5f;
            tf_ref_quantize_row(ty, row, w + r * ws, cols);
        }
        for (long i = 0; i < cols * 16; i++) x[i] = (float)rand() / RAND_MAX - 0.5f;
        tf_weight_pack_rows(ty, w, wp, rows, cols);
        tf_weight_r16_pack(ty, w, wr, rows, cols, 0, (rows + 15) / 16);
        for (size_t ti = 0; ti < sizeof toks / sizeof toks[0]; ti++) {
            const int nt = toks[ti];
            double best[2] = {1e30, 1e30};
            for (int rep = 0; rep < 7; rep++)
                for (int v = 0; v < 2; v++) {
                    const double t0 = now_us();
                    for (int k = 0; k < 10; k++)
                        if (v == 0) tf_cpu_matmul(NULL, vnni, ty, wp, TF_WLAYOUT_PACKED, rows, cols, x, nt, y, rows, act);
                        else tf_cpu_matmul(NULL, amx, ty, wr, TF_WLAYOUT_R16, rows, cols, x, nt, y, rows, act);
                    const double us = (now_us() - t0) / 10;
                    if (us < best[v]) best[v] = us;
                }
            printf("%5ldx%-6ld %5d %12.1f %12.1f %7.2f\n", rows, cols, nt, best[0], best[1], best[0] / best[1]);
        }
        free(x), free(y), free(w), free(wp), free(wr), free(act), free(row);
    }
    return 0;
}
