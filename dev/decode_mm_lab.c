/*
 * decode_mm_lab.c — the matrix products of one decoded token, cold: every
 * weight matrix of a model's layers (q, k, v, o, gate, up, down) and its
 * output head, each in its own memory and in the packed weight layout, run
 * in order as a forward pass runs them, after a 128 MiB read has evicted
 * them from the caches (HOT=1 skips that read). Prints the best of 15 passes
 * as ms and GB/s of weights read, for the layers and the head apart
 * (REPS=N: N passes instead, for a profiler; ISA=avx2: the AVX2 kernels over the
 * file's layout, the path of CPUs without AVX512-VNNI; TYPE=q4_k: the layers'
 * weights in that type instead).
 *
 * Build (after `make`, from the repository root):
 *   cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc dev/decode_mm_lab.c build/libtriforce.a \
 *      -lpcre2-8 -lm -lpthread -o build/decode_mm_lab
 * Run:
 *   build/decode_mm_lab [threads=2] [tokens=1] [shape=smollm2|tinyllama]
 * smollm2: SmolLM2-135M's 30 layers in Q4_1 and its 49,152 x 576 head in
 * Q8_0 (as in the registry's GGUF); tinyllama: TinyLlama-1.1B's 22 layers
 * and its 32,000 x 2048 head, all Q8_0. Random weights: the time of a
 * product does not depend on them.
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

typedef struct {
    int64_t rows, cols;
    tf_dtype type;
    char *w; /* packed weight layout */
} mat;

int main(int argc, char **argv) {
    const int n_threads = argc > 1 && atoi(argv[1]) > 0 ? atoi(argv[1]) : 2;
    const int n_tok = argc > 2 && atoi(argv[2]) > 0 && atoi(argv[2]) <= 16 ? atoi(argv[2]) : 1;
    const int tiny = argc > 3 && strcmp(argv[3], "tinyllama") == 0;
    tf_err err = {0};
    tf_pool *pool = NULL;
    if (tf_pool_create(&pool, n_threads, &err) != TF_OK) {
        fprintf(stderr, "decode_mm_lab: %s\n", err.msg);
        return 1;
    }
    /* ISA=avx2: that table's kernels over the file's layout (the path of CPUs without VNNI) */
    const int avx2 = getenv("ISA") && strcmp(getenv("ISA"), "avx2") == 0;
    const tf_cpu_kernels *k = tf_cpu_kernels_get(avx2 ? TF_ISA_AVX2 : TF_ISA_BEST);
    const int layout = avx2 ? TF_WLAYOUT_FILE : TF_WLAYOUT_PACKED;
    static const int64_t smol[7][2] = {{576, 576}, {192, 576}, {192, 576}, {576, 576}, {1536, 576}, {1536, 576}, {576, 1536}};
    static const int64_t tl[7][2] = {{2048, 2048}, {256, 2048}, {256, 2048}, {2048, 2048}, {5632, 2048}, {5632, 2048}, {2048, 5632}};
    const int64_t(*shp)[2] = tiny ? tl : smol;
    const int n_layer = tiny ? 22 : 30, nm = n_layer * 7 + 1;
    const int64_t head_rows = tiny ? 32000 : 49152, head_cols = tiny ? 2048 : 576, max_cols = tiny ? 5632 : 1536;
    tf_dtype layer_type = tiny ? TF_DTYPE_Q8_0 : TF_DTYPE_Q4_1;
    if (getenv("TYPE") && !tf_dtype_from_name(getenv("TYPE"), &layer_type)) {
        fprintf(stderr, "decode_mm_lab: unknown type '%s'\n", getenv("TYPE"));
        return 1;
    }
    /* float types (f32, f16, bf16) have no packed layout: the file's */
    const int layer_file = avx2 || !k->wpacked_tile[layer_type];
    if (!avx2 && !k->wpacked_tile[TF_DTYPE_Q8_0]) {
        fprintf(stderr, "decode_mm_lab: this CPU's kernels (%s) have no packed weight layout\n", k->isa);
        return 1;
    }
    mat *m = calloc((size_t)nm, sizeof *m);
    float *row = malloc(sizeof(float) * (size_t)max_cols);
    tf_rng rng;
    tf_rng_seed(&rng, 1);
    double layer_bytes = 0, head_bytes = 0;
    for (int i = 0; i < nm; i++) {
        const int head = i == nm - 1;
        m[i].type = head ? TF_DTYPE_Q8_0 : layer_type;
        m[i].rows = head ? head_rows : shp[i % 7][0];
        m[i].cols = head ? head_cols : shp[i % 7][1];
        const size_t ws = tf_dtype_row_size(m[i].type, m[i].cols), bytes = ws * (size_t)m[i].rows;
        char *file = malloc(bytes);
        m[i].w = malloc(bytes);
        if (!file || !m[i].w) {
            fprintf(stderr, "decode_mm_lab: out of memory\n");
            return 1;
        }
        for (int64_t r = 0; r < m[i].rows; r++) {
            for (int64_t c = 0; c < m[i].cols; c++) row[c] = (float)(tf_rng_uniform(&rng) - 0.5);
            tf_ref_quantize_row(m[i].type, row, file + (size_t)r * ws, m[i].cols);
        }
        if (avx2 || (!head && layer_file)) memcpy(m[i].w, file, bytes);
        else tf_weight_pack_rows(m[i].type, file, m[i].w, m[i].rows, m[i].cols);
        free(file);
        *(head ? &head_bytes : &layer_bytes) += (double)bytes;
    }
    const size_t flush_n = (size_t)128 << 20;
    char *flush = malloc(flush_n);
    float *x = malloc(sizeof(float) * (size_t)max_cols * 16), *y = malloc(sizeof(float) * (size_t)head_rows * 16);
    char *act = malloc(16 * tf_act_scratch_row_size(TF_DTYPE_Q8_0, max_cols) + 16 * tf_act_scratch_row_size(layer_type, max_cols));
    if (!flush || !x || !y || !act) {
        fprintf(stderr, "decode_mm_lab: out of memory\n");
        return 1;
    }
    memset(flush, 1, flush_n);
    for (int64_t i = 0; i < max_cols * 16; i++) x[i] = (float)(tf_rng_uniform(&rng) - 0.5);
    const int hot = getenv("HOT") != NULL;
    double best_layers = 1e30, best_head = 1e30;
    long sink = 0;
    const int reps = getenv("REPS") && atoi(getenv("REPS")) > 0 ? atoi(getenv("REPS")) : 15;
    for (int rep = 0; rep < reps; rep++) {
        if (!hot)
            for (size_t i = 0; i < flush_n; i += 64) sink += flush[i];
        double t0 = now_s();
        for (int i = 0; i < nm - 1; i++)
            tf_cpu_matmul(pool, k, m[i].type, m[i].w, layer_file ? TF_WLAYOUT_FILE : layout, m[i].rows, m[i].cols, x, n_tok, y,
                          m[i].rows, act);
        double t1 = now_s();
        tf_cpu_matmul(pool, k, m[nm - 1].type, m[nm - 1].w, layout, m[nm - 1].rows, m[nm - 1].cols, x,
                      n_tok, y, m[nm - 1].rows, act);
        double t2 = now_s();
        if (t1 - t0 < best_layers) best_layers = t1 - t0;
        if (t2 - t1 < best_head) best_head = t2 - t1;
    }
    printf("%s (layers %s), %s kernels, %d thread(s), %d token(s)%s: layers %.3f ms (%.1f GB/s of weights), head %.3f ms "
           "(%.1f GB/s)%s\n",
           tiny ? "tinyllama" : "smollm2", tf_dtype_name(layer_type), k->isa, n_threads, n_tok, hot ? ", HOT" : "", best_layers * 1e3,
           layer_bytes / best_layers / 1e9, best_head * 1e3, head_bytes / best_head / 1e9, sink == 42 ? " " : "");
    return 0;
}
