/*
 * retrieval_lab.c — lab for the retrieval cache C_r: on a random full cache of
 * the given shape, validate the fast selection and gather against the
 * brute-force reference for a few (layer, head) pairs, then time
 *   sums    tf_rcache_note_append of the whole cache (chunk sums from scratch)
 *   append  tf_rcache_note_append of one token (per decoded token)
 *   select  scoring every chunk and choosing the top ones
 *   gather  copying the selected K/V into the view
 * with the bytes each reads and GB/s. Times are the minimum over repetitions
 * (the best estimate on a shared machine).
 *
 * Build (after `make lib`, from the repository root):
 *   cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc dev/retrieval_lab.c build/libtriforce.a \
 *      -lpcre2-8 -lm -lpthread -o build/retrieval_lab
 * Run:
 *   build/retrieval_lab n_layer n_head_kv head_dim n_tok [type=f16|f32] [threads=1]
 *                       [chunk=8] [budget=4096] [gqa=4]
 *   e.g. stories260K: build/retrieval_lab 5 4 8 65536 f32
 *        Llama2-7B:   build/retrieval_lab 32 32 128 16384 f16 1 8 4096 1
 *
 * The keys are multiples of 1/16, so every f32 sum is exact and the selection
 * must equal the reference's exactly. One layer's random K/V is stored in
 * every layer (queries differ per layer), which keeps filling a 7B-shaped
 * cache quick.
 */
#include "core/mem.h"
#include "core/rng.h"
#include "kv/retrieval.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(const char *what, const tf_err *err) {
    fprintf(stderr, "retrieval_lab: %s: %s\n", what, err->msg);
    exit(1);
}

/* Uniform multiple of 1/16 in [-lim, lim). */
static float lattice(tf_rng *r, int lim) {
    return (float)((int)(tf_rng_next(r) % (uint64_t)(32 * lim)) - 16 * lim) / 16.0f;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s n_layer n_head_kv head_dim n_tok [f16|f32] [threads] [chunk] [budget] [gqa]\n",
                argv[0]);
        return 2;
    }
    int n_layer = atoi(argv[1]), n_head_kv = atoi(argv[2]), hd = atoi(argv[3]);
    int32_t n_tok = atoi(argv[4]);
    tf_dtype type = argc > 5 && strcmp(argv[5], "f32") == 0 ? TF_DTYPE_F32 : TF_DTYPE_F16;
    int threads = argc > 6 ? atoi(argv[6]) : 1;
    tf_rcache_params p = tf_rcache_default_params();
    if (argc > 7) p.chunk = atoi(argv[7]);
    if (argc > 8) p.budget = atoi(argv[8]);
    int gqa = argc > 9 ? atoi(argv[9]) : 4;
    int n_head = n_head_kv * gqa;
    tf_err err = {0};
    tf_pool *pool = NULL;
    if (tf_pool_create(&pool, threads, &err) != TF_OK) die("pool", &err);

    tf_kv_cache full, view;
    tf_rcache rc;
    if (tf_kv_init(&full, n_layer, n_head_kv, hd, n_tok + 1, type, &err) != TF_OK) die("full cache", &err);
    if (tf_rcache_init(&rc, &full, &p, pool, &err) != TF_OK) die("retrieval cache", &err);
    if (tf_rcache_view_init(&view, &rc, &full, 64, &err) != TF_OK) die("view", &err);
    printf("shape: %d layers x %d KV heads x %d, %d tokens, %s, chunk %d, budget %d, recent %d, GQA %d, %d threads\n",
           n_layer, n_head_kv, hd, n_tok, tf_dtype_name(type), p.chunk, p.budget, p.recent, gqa, threads);
    printf("memory: full cache %.1f MiB, chunk sums %.1f MiB, view %.1f MiB\n", 2.0 * (double)full.bytes / (1 << 20),
           (double)rc.bytes / (1 << 20), 2.0 * (double)view.bytes / (1 << 20));

    tf_rng rng;
    tf_rng_seed(&rng, 42);
    size_t kvd = (size_t)n_head_kv * hd;
    float *k = malloc(sizeof(float) * (size_t)n_tok * kvd), *v = malloc(sizeof(float) * (size_t)n_tok * kvd);
    float *q = malloc(sizeof(float) * (size_t)n_layer * n_head * hd);
    for (size_t i = 0; i < (size_t)n_tok * kvd; i++) k[i] = lattice(&rng, 2), v[i] = lattice(&rng, 2);
    for (size_t i = 0; i < (size_t)n_layer * n_head * hd; i++) q[i] = lattice(&rng, 1);
    for (int il = 0; il < n_layer; il++) tf_kv_store(&full, il, 0, n_tok, k, v, (int64_t)kvd);
    for (int32_t s = 0; s < n_tok; s++) full.pos[s] = s;
    full.n_used = n_tok;

    /* sums from scratch (the first touch of the sum pages is timed too; run twice) */
    double t_sums = 1e30;
    for (int rep = 0; rep < 4; rep++) {
        tf_rcache_truncate(&rc, &full, 0);
        double t0 = now_s();
        tf_rcache_note_append(&rc, &full, 0, n_tok);
        double t = now_s() - t0;
        if (rep && t < t_sums) t_sums = t;
    }
    /* one-token appends over the last 64 slots */
    int n_app = n_tok < 64 ? n_tok : 64;
    tf_rcache_truncate(&rc, &full, n_tok - n_app);
    double t_app = 1e30;
    for (int i = 0; i < n_app; i++) {
        double t0 = now_s();
        tf_rcache_note_append(&rc, &full, n_tok - n_app + i, 1);
        double t = now_s() - t0;
        if (t < t_app) t_app = t;
    }

    /* validate */
    if (tf_rcache_build(&rc, &full, q, n_head, &view, &err) != TF_OK) die("build", &err);
    int32_t *ref = malloc(sizeof(int32_t) * (size_t)(n_tok / p.chunk + 2));
    float *ka = malloc(sizeof(float) * hd * 4), *va = ka + hd, *kb = ka + 2 * hd, *vb = ka + 3 * hd;
    int pairs[3][2] = {{0, 0}, {n_layer / 2, n_head_kv - 1}, {n_layer - 1, n_head_kv / 2}};
    for (int pi = 0; pi < 3; pi++) {
        int il = pairs[pi][0], h = pairs[pi][1];
        int32_t n_ref;
        if (tf_rcache_select_ref(&full, n_tok, &p, q, n_head, il, h, ref, &n_ref, NULL, &err) != TF_OK)
            die("reference", &err);
        const int32_t *sel = tf_rcache_selection(&rc, il, h);
        if (n_ref != rc.n_sel_chunks || memcmp(ref, sel, sizeof(int32_t) * (size_t)n_ref) != 0) {
            fprintf(stderr, "retrieval_lab: selection of layer %d head %d differs from the reference\n", il, h);
            return 1;
        }
        int32_t o = 0;
        for (int32_t t = 0; t < n_ref; t++)
            for (int32_t s = sel[t] * p.chunk; s < (sel[t] + 1) * p.chunk && s < n_tok; s++, o++) {
                tf_kv_read(&full, il, h, s, ka, va);
                tf_kv_read(&view, il, h, o, kb, vb);
                if (memcmp(ka, kb, sizeof(float) * hd) || memcmp(va, vb, sizeof(float) * hd)) {
                    fprintf(stderr, "retrieval_lab: view slot %d of layer %d head %d differs\n", o, il, h);
                    return 1;
                }
            }
    }
    printf("validated: 3 (layer, head) selections equal the reference, view K/V equal the selected slots\n");

    /* time select and gather */
    int reps = 0;
    double t_sel = 1e30, t_gat = 1e30;
    double t_end = now_s() + 2.0;
    while (reps < 3 || (now_s() < t_end && reps < 200)) {
        double a = now_s();
        if (tf_rcache_select(&rc, &full, q, n_head, &err) != TF_OK) die("select", &err);
        double b = now_s();
        if (tf_rcache_gather(&rc, &full, &view, &err) != TF_OK) die("gather", &err);
        double c = now_s();
        t_sel = b - a < t_sel ? b - a : t_sel;
        t_gat = c - b < t_gat ? c - b : t_gat;
        reps++;
    }
    double pairs_n = (double)n_layer * n_head_kv, elem = type == TF_DTYPE_F32 ? 4 : 2;
    double b_sums = pairs_n * n_tok * hd * elem, b_sel = pairs_n * (n_tok / p.chunk) * hd * 4.0;
    double b_gat = 2.0 * 2.0 * pairs_n * rc.n_sel * hd * elem; /* read + write, K and V */
    printf("sums from scratch: %9.3f ms  (%.2f GB/s of keys read)\n", 1e3 * t_sums, b_sums / t_sums / 1e9);
    printf("append one token:  %9.4f ms\n", 1e3 * t_app);
    printf("select:            %9.3f ms  (%.2f GB/s of chunk sums read)\n", 1e3 * t_sel, b_sel / t_sel / 1e9);
    printf("gather:            %9.3f ms  (%.2f GB/s read + written; %d slots per head)\n", 1e3 * t_gat,
           b_gat / t_gat / 1e9, rc.n_sel);
    printf("rebuild (select + gather): %.3f ms; with sums from scratch: %.3f ms\n", 1e3 * (t_sel + t_gat),
           1e3 * (t_sel + t_gat + t_sums));
    free(ref);
    free(ka);
    free(k);
    free(v);
    free(q);
    tf_kv_free(&view);
    tf_rcache_free(&rc);
    tf_kv_free(&full);
    tf_pool_free(pool);
    return 0;
}
