/*
 * tfbench.c — one benchmark measurement through the public API.
 *
 *   tfbench membw [-t T]               read bandwidth (GB/s), 1 and T threads, over 1 GiB
 *                                      (DRAM) and 16 MiB (cache-resident on this machine class)
 *   tfbench run -m MODEL [-f TEXT] -p N -n N [-t T] [--kv f16|f32] [--bw GB/s] [--label L]
 *
 * `run` prefills the first N prompt tokens of TEXT (random token ids if no
 * TEXT), then decodes greedily, and prints one line of JSON with tok/s and the
 * floors: decode bytes per token (every weight once + the KV cache read at the
 * mean decode context) over the bandwidth, prefill FLOPs (matrix products +
 * causal attention) per second achieved.
 */
#include "bench_util.h"
#include "membw.h"
#include "triforce.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(void) {
    fprintf(stderr, "usage: tfbench membw [-t T] | tfbench run -m MODEL [-f TEXT] -p N -n N [-t T] [--kv f16|f32] "
                    "[--bw GBs] [--label L]\n");
    return 2;
}

int main(int argc, char **argv) {
    if (argc < 2) return usage();
    const char *model = NULL, *text = NULL, *label = "", *kv = "f16";
    int n_prompt = 512, n_gen = 128, threads = 2;
    double bw = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return usage();
        if (!strcmp(a, "-m")) model = v;
        else if (!strcmp(a, "-f")) text = v;
        else if (!strcmp(a, "-p")) n_prompt = atoi(v);
        else if (!strcmp(a, "-n")) n_gen = atoi(v);
        else if (!strcmp(a, "-t")) threads = atoi(v);
        else if (!strcmp(a, "--kv")) kv = v;
        else if (!strcmp(a, "--bw")) bw = atof(v);
        else if (!strcmp(a, "--label")) label = v;
        else return usage();
        i++;
    }
    if (!strcmp(argv[1], "membw")) {
        size_t big = (size_t)1 << 30, small = (size_t)16 << 20;
        /* best of 5 passes over 1 GiB, of 200 over 16 MiB */
        printf("{\"dram_1t_gbs\": %.2f, \"dram_%dt_gbs\": %.2f, \"cache16m_1t_gbs\": %.2f, \"cache16m_%dt_gbs\": %.2f}\n",
               membw_read_gbs(1, big, 5), threads, membw_read_gbs(threads, big, 5), membw_read_gbs(1, small, 200),
               threads, membw_read_gbs(threads, small, 200));
        return 0;
    }
    if (strcmp(argv[1], "run") || !model || n_prompt < 1 || n_gen < 1) return usage();
    char err[1024];
    tf_model *m;
    if (tf_model_load_file(&m, model, NULL, err, sizeof err) != TF_OK) {
        fprintf(stderr, "tfbench: %s\n", err);
        return 1;
    }
    tf_model_info in;
    tf_model_get_info(m, &in);
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)(n_prompt + n_gen + 16));
    size_t have = 0;
    if (text) {
        FILE *f = fopen(text, "rb");
        if (!f) { fprintf(stderr, "tfbench: cannot open %s\n", text); return 1; }
        /* about 1 token per 1.5 bytes: read enough text, then cut to n_prompt tokens */
        size_t want = (size_t)n_prompt * 6 + 4096;
        char *buf = malloc(want + 1);
        size_t got = fread(buf, 1, want, f);
        fclose(f);
        size_t cap = got + 16;
        int32_t *all = malloc(sizeof(int32_t) * cap);
        if (tf_model_tokenize(m, buf, got, true, false, all, cap, &have) != TF_OK) {
            fprintf(stderr, "tfbench: cannot tokenize %s\n", text);
            return 1;
        }
        if (have < (size_t)n_prompt) {
            fprintf(stderr, "tfbench: %s gives only %zu tokens\n", text, have);
            return 1;
        }
        memcpy(toks, all, sizeof(int32_t) * (size_t)n_prompt);
        free(all);
        free(buf);
    } else {
        uint64_t x = 88172645463325252ull;
        for (int i = 0; i < n_prompt; i++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            toks[i] = (int32_t)(x % (uint64_t)in.n_vocab);
        }
    }
    tf_context_params cp = tf_context_default_params();
    cp.n_ctx = n_prompt + n_gen + 1;
    cp.n_threads = threads;
    cp.n_batch = 256;
    if (!tf_kv_type_parse(kv, &cp.kv_type)) {
        fprintf(stderr, "tfbench: --kv '%s': expected f16, f32, q8_0 or q4_0\n", kv);
        return 1;
    }
    tf_context *ctx;
    if (tf_context_init(&ctx, m, &cp, err, sizeof err) != TF_OK) {
        fprintf(stderr, "tfbench: %s\n", err);
        return 1;
    }
    double t0 = bench_now();
    if (tf_context_eval(ctx, toks, n_prompt, NULL) != TF_OK) {
        fprintf(stderr, "tfbench: %s\n", tf_context_error(ctx));
        return 1;
    }
    double t_prefill = bench_now() - t0;
    tf_sampler_params sp = tf_sampler_default_params();
    sp.temp = 0;
    tf_sampler *s;
    tf_sampler_init(&s, m, &sp, err, sizeof err);
    double t1 = bench_now();
    for (int i = 0; i < n_gen; i++) {
        int32_t t = tf_sampler_sample(s, tf_context_logits(ctx));
        if (tf_context_eval(ctx, &t, 1, NULL) != TF_OK) {
            fprintf(stderr, "tfbench: %s\n", tf_context_error(ctx));
            return 1;
        }
    }
    double t_decode = bench_now() - t1;
    /* floors */
    double kv_tok = (double)tf_model_kv_type_bytes_per_token(m, cp.kv_type);
    double mean_ctx = n_prompt + n_gen / 2.0;
    double w_bytes = (double)in.weight_bytes;
    if (!in.tied_output) /* untied: embedding rows are gathered, not streamed */
        for (int64_t i = 0; i < tf_model_n_tensors(m); i++) {
            tf_tensor_info ti;
            tf_model_tensor(m, i, &ti);
            if (!strcmp(ti.name, "token_embd.weight")) w_bytes -= (double)ti.bytes;
        }
    double dec_bytes = w_bytes + kv_tok * mean_ctx;
    double mat_params = (double)in.n_layer *
                            ((double)in.n_embd * in.head_dim * (in.n_head * 2 + in.n_head_kv * 2) +
                             3.0 * in.n_embd * in.n_ff) +
                        (double)in.n_embd * in.n_vocab / n_prompt; /* logits for the last token only */
    double attn_flops = 4.0 * in.n_layer * in.n_head * in.head_dim * ((double)n_prompt * n_prompt / 2.0);
    double pf_flops = 2.0 * mat_params * n_prompt + attn_flops;
    double dec_tps = n_gen / t_decode;
    printf("{\"label\": \"%s\", \"model\": \"%s\", \"params\": %llu, \"weight_bytes\": %llu, \"kv\": \"%s\", "
           "\"threads\": %d, \"prompt\": %d, \"gen\": %d, \"prefill_s\": %.4f, \"prefill_tps\": %.1f, "
           "\"prefill_gflops\": %.2f, \"decode_s\": %.4f, \"decode_tps\": %.1f, \"decode_ms\": %.3f, "
           "\"decode_bytes_per_tok\": %.0f, \"bw_gbs\": %.2f, \"decode_floor_ms\": %.3f, \"decode_pct_of_floor\": %.1f}\n",
           label, model, (unsigned long long)in.n_params, (unsigned long long)in.weight_bytes, kv, threads, n_prompt,
           n_gen, t_prefill, n_prompt / t_prefill, pf_flops / t_prefill / 1e9, t_decode, dec_tps,
           1e3 * t_decode / n_gen, dec_bytes, bw, bw > 0 ? 1e3 * dec_bytes / (bw * 1e9) : 0.0,
           bw > 0 ? 100.0 * (dec_bytes / (bw * 1e9)) / (t_decode / n_gen) : 0.0);
    tf_sampler_free(s);
    tf_context_free(ctx);
    tf_model_close(m);
    free(toks);
    return 0;
}
