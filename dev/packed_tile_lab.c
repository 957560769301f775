/*
 * packed_tile_lab.c — the packed path's tile kernel alone, on one thread: a
 * matrix of random weight rows in the packed weight layout against tokens
 * of packed activations, in tiles of `nr` rows by `nt` tokens as
 * tf_cpu_matmul hands them out, reporting int8 multiply-adds a second
 * (the core's vpdpbusd peak is 64 of them per instruction). It shows where
 * a tile's activations leave L1 (one-row kernel) and what the register tiles
 * gain there (quant_packed_avx512.c).
 *
 * Build (after `make lib`, from the repository root):
 *   cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc dev/packed_tile_lab.c build/libtriforce.a \
 *      -lcjson -lpcre2-8 -lutf8proc -lm -lpthread -o build/packed_tile_lab
 * Run:
 *   build/packed_tile_lab [columns=4096] [nr=4] [nt=16] [rows=64] [type=q8_0] [reps=200]
 */
#include "backend/cpu/quant.h"
#include "core/rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    const int64_t n = argc > 1 ? atoll(argv[1]) : 4096;
    const int nr = argc > 2 ? atoi(argv[2]) : 4, nt = argc > 3 ? atoi(argv[3]) : 16;
    const int rows = argc > 4 ? atoi(argv[4]) : 64, reps = argc > 6 ? atoi(argv[6]) : 200;
    tf_dtype t = TF_DTYPE_Q8_0;
    if (argc > 5 && !tf_dtype_from_name(argv[5], &t)) {
        fprintf(stderr, "packed_tile_lab: unknown type '%s'\n", argv[5]);
        return 1;
    }
    const tf_cpu_kernels *k = tf_cpu_kernels_get(TF_ISA_BEST);
    if (!k->wpacked_tile[t] || !k->act_pack[t] || nr < 1 || nr > TF_PACK_ROWS_MAX || nt < 1 ||
        nt > TF_WPACK_TOKS_MAX || rows % nr || n % 256) {
        fprintf(stderr, "packed_tile_lab: no packed path for %s in table %s, or a bad shape (nr <= %d, nt <= %d, "
                        "rows a multiple of nr, columns of 256)\n", tf_dtype_name(t), k->isa, TF_PACK_ROWS_MAX,
                TF_WPACK_TOKS_MAX);
        return 1;
    }
    const size_t ws = tf_dtype_row_size(t, n), as = tf_act_packed_row_size(t, n);
    float *x = malloc(sizeof(float) * (size_t)n * (size_t)(rows > nt ? rows : nt));
    /* 64-byte aligned, as the engine's buffers are (tf_alloc): malloc's 16-byte
     * alignment makes every vector load straddle two cache lines and the tiles
     * a third slower */
    const size_t wbytes = (ws * (size_t)rows + 63) / 64 * 64, abytes = (as * (size_t)nt + 63) / 64 * 64;
    char *w = aligned_alloc(64, wbytes), *wp = aligned_alloc(64, wbytes), *a = aligned_alloc(64, abytes);
    float *out = malloc(sizeof(float) * (size_t)rows * (size_t)nt);
    if (!x || !w || !wp || !a || !out) return 1;
    tf_rng rng;
    tf_rng_seed(&rng, 1);
    for (int64_t i = 0; i < n * rows; i++) x[i] = (float)(tf_rng_uniform(&rng) - 0.5);
    for (int r = 0; r < rows; r++) tf_ref_quantize_row(t, x + (int64_t)r * n, w + (size_t)r * ws, n);
    tf_weight_pack_rows(t, w, wp, rows, n);
    for (int j = 0; j < nt; j++) k->act_pack[t](x + (int64_t)j * n, a + (size_t)j * as, n);
    double t0 = now_s();
    for (int i = 0; i < reps; i++)
        for (int r = 0; r < rows; r += nr) k->wpacked_tile[t](n, wp + (size_t)r * ws, ws, nr, a, as, nt, out + r, rows);
    const double dt = now_s() - t0, macs = (double)reps * rows * nt * (double)n;
    printf("%s %s: %lld columns, tiles of %d rows x %d tokens, %d rows (%.0f KiB of weights, %.0f KiB of "
           "activations): %.1f G multiply-adds/s (checksum %g)\n",
           k->isa, tf_dtype_name(t), (long long)n, nr, nt, rows, ws * rows / 1024.0, as * nt / 1024.0,
           macs / dt / 1e9, (double)out[0]);
    free(x), free(w), free(wp), free(a), free(out);
    return 0;
}
