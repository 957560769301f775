/*
 * kvscale.c — where the KV cache dominates: the latency of one forward pass of
 * a model as a function of how many KV slots its attention reads, with the
 * prefill replaced by random keys and values (the cost of a pass does not
 * depend on what the cache holds, and a CPU cannot prefill 64K tokens of a
 * 7B-shaped model in a benchmark's time).
 *
 *   kvscale -m MODEL -t THREADS --slots 1024,4096,16384 --rows 1,7 [--reps N] [--label L]
 *
 * For every slot count L and row count n it times tf_forward of n new tokens
 * at slots [L, L + n) attending to all L + i + 1 slots (the target verifying
 * n - 1 candidates plus the bonus when n > 1), keeps the median of --reps
 * runs, and prints one JSON object per (L, n): ms per pass, bytes the pass
 * must read (weights + KV) and the bandwidth that implies.
 */
#include "bench_util.h"
#include "core/fp16.h"
#include "core/rng.h"
#include "core/threads.h"
#include "kv/kv.h"
#include "model/forward.h"
#include "model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    const char *model = NULL, *label = "", *slots_s = "1024,4096,16384", *rows_s = "1";
    int threads = 2, reps = 7;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-m")) model = argv[i + 1];
        else if (!strcmp(argv[i], "-t")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--slots")) slots_s = argv[i + 1];
        else if (!strcmp(argv[i], "--rows")) rows_s = argv[i + 1];
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--label")) label = argv[i + 1];
        else {
            fprintf(stderr, "kvscale: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    int slots[32], rows[16];
    int n_slots = bench_parse_list(slots_s, slots, 32), n_rows = bench_parse_list(rows_s, rows, 16);
    if (!model || n_slots < 1 || n_rows < 1 || threads < 1 || reps < 1) {
        fprintf(stderr, "usage: kvscale -m MODEL [-t N] [--slots L1,L2,..] [--rows n1,n2,..] [--reps N] [--label S]\n");
        return 2;
    }
    tf_err err = {0};
    tf_model *m;
    if (tf_model_load(&m, model, NULL, &err) != TF_OK || tf_model_prefault(m, NULL, NULL, &err) != TF_OK) {
        fprintf(stderr, "kvscale: %s\n", err.msg);
        return 1;
    }
    int max_slots = 0, max_rows = 0;
    for (int i = 0; i < n_slots; i++) max_slots = slots[i] > max_slots ? slots[i] : max_slots;
    for (int i = 0; i < n_rows; i++) max_rows = rows[i] > max_rows ? rows[i] : max_rows;
    const tf_hparams *hp = &m->hp;
    tf_pool *pool;
    tf_kv_cache kv;
    tf_fwd f;
    if (tf_pool_create(&pool, threads, &err) != TF_OK ||
        tf_kv_init(&kv, hp->n_layer, hp->n_head_kv, hp->head_dim, max_slots + max_rows, TF_DTYPE_F16, &err) != TF_OK ||
        tf_fwd_init(&f, m, max_rows, max_rows, kv.n_slots, pool, TF_ISA_BEST, &err) != TF_OK) {
        fprintf(stderr, "kvscale: %s\n", err.msg);
        return 1;
    }
    /* random keys and values of a realistic scale */
    tf_rng rng;
    tf_rng_seed(&rng, 7);
    tf_f16 *k16 = (tf_f16 *)kv.k, *v16 = (tf_f16 *)kv.v;
    for (size_t i = 0; i < kv.bytes / 2; i++) {
        k16[i] = tf_f32_to_f16((float)(tf_rng_next(&rng) % 2001) / 1000.0f - 1.0f);
        v16[i] = tf_f32_to_f16((float)(tf_rng_next(&rng) % 2001) / 1000.0f - 1.0f);
    }
    for (int32_t s = 0; s < kv.n_slots; s++) kv.pos[s] = s;
    int32_t tok[64], pos[64];
    double *t = malloc(sizeof(double) * (size_t)reps);
    for (int si = 0; si < n_slots; si++)
        for (int ri = 0; ri < n_rows; ri++) {
            int L = slots[si], n = rows[ri];
            for (int i = 0; i < n; i++) {
                tok[i] = (int32_t)(tf_rng_next(&rng) % (uint64_t)hp->n_vocab);
                pos[i] = L + i;
            }
            for (int r = -1; r < reps; r++) { /* one warm-up */
                kv.n_used = L;
                double t0 = bench_now();
                if (tf_forward(&f, &kv, tok, pos, n, L, NULL, 0, NULL, &err) != TF_OK) {
                    fprintf(stderr, "kvscale: %s\n", err.msg);
                    return 1;
                }
                if (r >= 0) t[r] = bench_now() - t0;
            }
            double ms = 1e3 * bench_median(t, reps);
            double kv_bytes = (double)tf_hparams_kv_bytes_per_token(hp, 2) * (L + n);
            /* the embedding table is read one row per token, not whole */
            double w_read = (double)m->weight_bytes;
            if (!hp->tied_output)
                w_read -= (double)tf_dtype_row_size(m->tok_embd.type, m->tok_embd.ne[0]) * (double)(m->tok_embd.ne[1] - n);
            double bytes = w_read + kv_bytes;
            printf("{\"label\": \"%s\", \"model\": \"%s\", \"layers\": %d, \"threads\": %d, \"slots\": %d, "
                   "\"rows\": %d, \"ms\": %.3f, \"weight_bytes\": %.0f, \"kv_bytes\": %.0f, \"gbs\": %.2f}\n",
                   label, model, hp->n_layer, threads, L, n, ms, w_read, kv_bytes,
                   bytes / (ms * 1e-3) / 1e9);
            fflush(stdout);
        }
    free(t);
    tf_fwd_free(&f);
    tf_kv_free(&kv);
    tf_pool_free(pool);
    tf_model_free(m);
    return 0;
}
