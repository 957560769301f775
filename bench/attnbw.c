/*
 * attnbw.c — decode attention against the memory it must read: one layer's KV
 * cache (n_head_kv heads x head_dim; f16, f32, q8_0 or q4_0) filled with random values,
 * tf_cpu_attn over all L slots for n query rows, and next to it a plain
 * multi-threaded read of the same K and V bytes (the ceiling this process can
 * reach). Prints one JSON object per (L, rows): ms, GB/s and the share of the
 * read ceiling.
 *
 *   attnbw [-t THREADS] [--heads 32] [--kv-heads 32] [--head-dim 128]
 *          [--type f16|f32|q8_0|q4_0] [--slots 65536] [--rows 1,7] [--reps 7]
 *          [--kernel best|generic|avx2|avx512|avx512_bf16|amx_bf16|avx512_f32|avx512_f32_vnni|avx2_vnni|generic_f32|avx2_f32|avx2_f32_vnni[,...]]
 * Several kernels are timed in turn for each (L, rows), interleaved.
 *
 *   attnbw --prefill 2048,8192 [--heads 9 --kv-heads 3 --head-dim 64 ...]
 * instead times the causal attention of a prompt of N tokens (N query rows,
 * row i seeing slots 0..i, the path prefill takes): GFLOP/s (a multiply-add
 * counts two, QK and PV) next to the compute peaks measured in the same run
 * (bf16 vdpbf16ps, what the f16 cache multiplies with under avx512_bf16, and
 * f32 FMA, under avx512_f32; tools/triforce/peak.c), with the share of each.
 */
#include "bench_util.h"
#include "backend/cpu/attn.h"
#include "backend/cpu/quant.h"
#include "core/mem.h"
#include "core/rng.h"
#include "core/threads.h"
#include "kv/kv.h"
#include "peak.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct read_job {
    const uint8_t *a, *b;
    size_t n;
    double sink[64];
} read_job;

/* Sum 64-byte lines of both buffers; each thread takes a contiguous range. */
static void read_task(void *arg, int ith, int nth) {
    read_job *j = arg;
    long lo, hi;
    tf_split_range((long)(j->n / 64), ith, nth, &lo, &hi);
    uint64_t acc = 0;
    for (const uint8_t *base = j->a;; base = j->b) {
        for (long i = lo; i < hi; i++) {
            uint64_t w[8];
            memcpy(w, base + (size_t)i * 64, 64);
            acc += w[0] ^ w[3] ^ w[7];
        }
        if (base == j->b) break;
    }
    j->sink[ith % 64] = (double)acc;
}

/* peak.c's clock (the CLI has its own) */
double cli_now(void) { return bench_now(); }

/* The kernel names of the table, comma-separated, to f. */
static void print_kernels(FILE *f) {
    for (int j = 0; j < TF_ATTN_KERNEL_COUNT; j++) fprintf(f, "%s%s", j ? ", " : "", tf_attn_kernel_name(j));
}

int main(int argc, char **argv) {
    int threads = 2, n_head = 32, n_kv = 32, hd = 128, reps = 7;
    const char *type_s = "f16", *slots_s = "65536", *rows_s = "1,7", *kern_s = "best", *prefill_s = NULL;
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: attnbw [-t THREADS] [--heads N] [--kv-heads N] [--head-dim N] [--type f16|f32|q8_0|q4_0]\n"
                   "              [--slots N,..] [--rows N,..] [--reps N] [--kernel best|NAME[,NAME..]]\n"
                   "       attnbw --prefill N,.. [the same options]\n"
                   "Times one layer's attention over a cache of random keys and values (defaults: 2 threads,\n"
                   "32 / 32 heads of 128, f16, 65536 slots, rows 1,7, 7 repetitions, the best kernel), next to a\n"
                   "plain read of the same bytes; --prefill times the causal attention of N-token prompts against\n"
                   "the compute peaks instead; several kernels are timed in turn, interleaved. One JSON object\n"
                   "per line on stdout. Kernels: best, ");
            print_kernels(stdout);
            printf("\n");
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "attnbw: option %s needs a value\n", argv[i]);
            return 2;
        }
        if (!strcmp(argv[i], "-t")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--heads")) n_head = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--kv-heads")) n_kv = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--head-dim")) hd = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--type")) type_s = argv[i + 1];
        else if (!strcmp(argv[i], "--slots")) slots_s = argv[i + 1];
        else if (!strcmp(argv[i], "--rows")) rows_s = argv[i + 1];
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--kernel")) kern_s = argv[i + 1];
        else if (!strcmp(argv[i], "--prefill")) prefill_s = argv[i + 1];
        else {
            fprintf(stderr, "attnbw: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    int slots[16], rows[16], prefill[16];
    int n_slots = bench_parse_list(slots_s, slots, 16), n_rows = bench_parse_list(rows_s, rows, 16);
    int n_prefill = prefill_s ? bench_parse_list(prefill_s, prefill, 16) : 0;
    tf_dtype type = !strcmp(type_s, "f32")    ? TF_DTYPE_F32
                    : !strcmp(type_s, "q8_0") ? TF_DTYPE_Q8_0
                    : !strcmp(type_s, "q4_0") ? TF_DTYPE_Q4_0
                                              : TF_DTYPE_F16;
    if (threads < 1 || n_head < 1 || n_kv < 1 || n_head % n_kv || hd < 1 || hd > 256 || reps < 1 || n_slots < 1 ||
        n_rows < 1 || n_prefill < 0 || (prefill_s && n_prefill < 1) ||
        (strcmp(type_s, "f16") && strcmp(type_s, "f32") && strcmp(type_s, "q8_0") && strcmp(type_s, "q4_0"))) {
        fprintf(stderr, "attnbw: invalid arguments (see the comment at the top of bench/attnbw.c)\n");
        return 2;
    }
    /* the kernels ("best": the one tf_cpu_attn runs here) */
    int kerns[8], n_kerns = 0;
    for (const char *p = kern_s; *p && n_kerns < 8;) {
        size_t len = strcspn(p, ",");
        int k = -2;
        if (len == 4 && !strncmp(p, "best", 4)) k = (int)tf_attn_kernel_for(TF_ISA_BEST);
        for (int j = 0; j < TF_ATTN_KERNEL_COUNT && k == -2; j++)
            if (strlen(tf_attn_kernel_name(j)) == len && !strncmp(p, tf_attn_kernel_name(j), len)) k = j;
        if (k == -2 || !tf_attn_kernel_supported(k)) {
            fprintf(stderr, "attnbw: --kernel %.*s is not a kernel this CPU runs (best, ", (int)len, p);
            print_kernels(stderr);
            fprintf(stderr, ")\n");
            return 2;
        }
        kerns[n_kerns++] = k;
        p += len + (p[len] == ',');
    }
    int max_slots = 0, max_rows = 0;
    for (int i = 0; i < n_slots; i++) max_slots = slots[i] > max_slots ? slots[i] : max_slots;
    for (int i = 0; i < n_rows; i++) max_rows = rows[i] > max_rows ? rows[i] : max_rows;
    if (n_prefill > 0) { /* the prefill test alone: its query rows and slots */
        max_rows = 0;
        n_slots = 0;
        for (int i = 0; i < n_prefill; i++) max_slots = prefill[i] > max_slots ? prefill[i] : max_slots;
    } else if (max_rows > 16) {
        fprintf(stderr, "attnbw: at most 16 rows (the decode / verification path)\n");
        return 2;
    }
    for (int i = 0; i < n_slots; i++)
        if (slots[i] < max_rows) {
            fprintf(stderr, "attnbw: --slots %d is fewer than the %d rows\n", slots[i], max_rows);
            return 2;
        }

    tf_err err = {0};
    tf_pool *pool = NULL;
    tf_kv_cache kv;
    if (tf_pool_create(&pool, threads, &err) != TF_OK ||
        tf_kv_init(&kv, 1, n_kv, hd, max_slots + max_rows, type, &err) != TF_OK) {
        fprintf(stderr, "attnbw: %s\n", err.msg);
        return 1;
    }
    tf_rng rng;
    tf_rng_seed(&rng, 7);
    {
        /* random keys and values in [-1, 1), stored 256 slots at a time */
        const int64_t width = (int64_t)n_kv * hd;
        float *kb = malloc(sizeof(float) * 256 * (size_t)width), *vb = malloc(sizeof(float) * 256 * (size_t)width);
        if (!kb || !vb) {
            fprintf(stderr, "attnbw: out of memory\n");
            return 1;
        }
        for (int32_t s0 = 0; s0 < kv.n_slots; s0 += 256) {
            int32_t nr = kv.n_slots - s0 < 256 ? kv.n_slots - s0 : 256;
            for (int64_t i = 0; i < nr * width; i++) {
                kb[i] = (float)(tf_rng_uniform(&rng) * 2 - 1);
                vb[i] = (float)(tf_rng_uniform(&rng) * 2 - 1);
            }
            tf_kv_store(&kv, 0, s0, nr, kb, vb, width);
        }
        free(kb);
        free(vb);
    }
    kv.n_used = kv.n_slots;
    const int q_rows = n_prefill > 0 ? max_slots : max_rows;
    size_t qn = (size_t)q_rows * n_head * hd;
    float *q = malloc(sizeof(float) * qn), *out = malloc(sizeof(float) * qn);
    int32_t *kv_len = malloc(sizeof(int32_t) * (size_t)q_rows);
    void *scratch = malloc(tf_attn_scratch_size(threads, q_rows, n_head, hd, kv.n_slots));
    if (!q || !out || !kv_len || !scratch) {
        fprintf(stderr, "attnbw: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < qn; i++) q[i] = (float)(tf_rng_uniform(&rng) * 2 - 1);
    double *t = malloc(sizeof(double) * (size_t)reps);
    if (!t) {
        fprintf(stderr, "attnbw: out of memory\n");
        return 1;
    }
    if (n_prefill > 0) {
        const double pk_bf16 = peak_bf16_gflops(threads, 200), pk_f32 = peak_f32_gflops(threads, 200);
        for (int pi = 0; pi < n_prefill; pi++) {
            const int n = prefill[pi];
            for (int i = 0; i < n; i++) kv_len[i] = i + 1;
            tf_attn_args a = {.q = q, .ldq = (int64_t)n_head * hd, .kv = tf_kv_layer_view(&kv, 0), .n_q = n,
                              .kv_len = kv_len, .n_head = n_head, .scale = 1.0f / sqrtf((float)hd),
                              .out = out, .ldo = (int64_t)n_head * hd};
            /* QK and PV: two multiply-adds per query head, dimension and visible key */
            const double flops = 4.0 * hd * n_head * ((double)n * (n + 1) / 2);
            for (int ki = 0; ki < n_kerns; ki++) {
                for (int r = -1; r < reps; r++) { /* r = -1: warm-up */
                    double t0 = bench_now();
                    tf_cpu_attn_kernel(pool, (tf_attn_kernel)kerns[ki], &a, scratch);
                    if (r >= 0) t[r] = bench_now() - t0;
                }
                double sec = bench_median(t, reps);
                int finite = 1;
                for (size_t i = 0; i < (size_t)n * n_head * hd; i++) finite &= isfinite(out[i]);
                printf("{\"prefill\": %d, \"type\": \"%s\", \"heads\": %d, \"kv_heads\": %d, \"head_dim\": %d, "
                       "\"threads\": %d, \"kernel\": \"%s\", \"ms\": %.3f, \"gflops\": %.1f, "
                       "\"peak_bf16_gflops\": %.1f, \"peak_f32_gflops\": %.1f, \"of_bf16_peak\": %.3f, "
                       "\"of_f32_peak\": %.3f, \"finite\": %s}\n",
                       n, type_s, n_head, n_kv, hd, threads, tf_attn_kernel_name(kerns[ki]), sec * 1e3,
                       flops / sec / 1e9, pk_bf16, pk_f32, pk_bf16 > 0 ? flops / sec / 1e9 / pk_bf16 : 0.0,
                       pk_f32 > 0 ? flops / sec / 1e9 / pk_f32 : 0.0, finite ? "true" : "false");
                fflush(stdout);
            }
        }
    }

    for (int si = 0; si < n_slots; si++) {
        int L = slots[si];
        /* the ceiling: K and V of all heads over L slots, read once */
        size_t per_head = (size_t)L * kv.v_row_bytes; /* K and V each: the same bytes per slot */
        double read_gbs = 0;
        {
            /* heads are kv.head_stride apart; read each head's first L slots */
            for (int r = 0; r < reps; r++) {
                double t0 = bench_now();
                for (int h = 0; h < n_kv; h++) {
                    read_job j = {.a = tf_kv_k(&kv, 0, h), .b = tf_kv_v(&kv, 0, h), .n = per_head};
                    tf_pool_run(pool, read_task, &j);
                }
                double gbs = 2.0 * per_head * n_kv / (bench_now() - t0) / 1e9;
                t[r] = gbs;
            }
            read_gbs = bench_median(t, reps);
        }
        for (int ri = 0; ri < n_rows; ri++) {
            int n = rows[ri];
            for (int i = 0; i < n; i++) kv_len[i] = L - n + i + 1;
            tf_attn_args a = {.q = q, .ldq = (int64_t)n_head * hd, .kv = tf_kv_layer_view(&kv, 0), .n_q = n,
                              .kv_len = kv_len, .n_head = n_head, .scale = 1.0f / sqrtf((float)hd),
                              .out = out, .ldo = (int64_t)n_head * hd};
            /* the kernels in turn, rep by rep, so that drift hits them alike */
            double *tk = malloc(sizeof(double) * (size_t)reps * (size_t)n_kerns);
            if (!tk) {
                fprintf(stderr, "attnbw: out of memory\n");
                return 1;
            }
            for (int r = -1; r < reps; r++) /* r = -1: warm-up */
                for (int ki = 0; ki < n_kerns; ki++) {
                    double t0 = bench_now();
                    tf_cpu_attn_kernel(pool, (tf_attn_kernel)kerns[ki], &a, scratch);
                    if (r >= 0) tk[(size_t)ki * reps + r] = bench_now() - t0;
                }
            for (int ki = 0; ki < n_kerns; ki++) {
                tf_cpu_attn_kernel(pool, (tf_attn_kernel)kerns[ki], &a, scratch); /* its output, checked below */
                double sec = bench_median(tk + (size_t)ki * reps, reps), bytes = 2.0 * per_head * n_kv;
                int finite = 1;
                for (size_t i = 0; i < (size_t)n * n_head * hd; i++) finite &= isfinite(out[i]);
                printf("{\"slots\": %d, \"rows\": %d, \"type\": \"%s\", \"heads\": %d, \"kv_heads\": %d, "
                       "\"head_dim\": %d, \"threads\": %d, \"kernel\": \"%s\", \"ms\": %.3f, \"bytes\": %.0f, "
                       "\"gbs\": %.2f, \"read_gbs\": %.2f, \"of_read\": %.2f, \"finite\": %s}\n",
                       L, n, type_s, n_head, n_kv, hd, threads, tf_attn_kernel_name(kerns[ki]),
                       sec * 1e3, bytes, bytes / sec / 1e9, read_gbs, bytes / sec / 1e9 / read_gbs,
                       finite ? "true" : "false");
            }
            free(tk);
            fflush(stdout);
        }
    }
    free(t);
    free(kv_len);
    free(scratch);
    free(q);
    free(out);
    tf_kv_free(&kv);
    tf_pool_free(pool);
    return 0;
}
