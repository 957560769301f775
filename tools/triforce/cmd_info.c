/* cmd_info.c — `triforce info MODEL`: what the file holds and what it costs to run. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

int cmd_info(int argc, char **argv) {
    cli_opts o;
    int r = cli_parse(&o, CMD_INFO, "info", "MODEL", 1, argc, argv);
    if (r) return r > 0 ? 0 : 2;
    if (o.n_pos != 1) {
        fprintf(stderr, "triforce info: give one model file (see --help)\n");
        return 2;
    }
    const char *path = o.pos[0];
    tf_model_params mp = tf_model_default_params();
    mp.log_fn = cli_log;
    mp.log_level = TF_LOG_WARN;
    char err[1024];
    tf_model *m;
    tf_status st = tf_model_load_file(&m, path, &mp, err, sizeof err);
    bool vocab_only = false;
    if (st != TF_OK) {
        /* a vocab-only file is still worth describing */
        char err2[1024];
        mp.vocab_only = true;
        if (tf_model_load_file(&m, path, &mp, err2, sizeof err2) != TF_OK) {
            fprintf(stderr, "triforce: %s\n", err);
            return 1;
        }
        vocab_only = true;
        printf("note: %s cannot run (%s); showing its vocabulary only\n", path, err);
    }
    tf_model_info in;
    tf_model_get_info(m, &in);
    printf("file:            %s\n", path);
    if (!vocab_only) {
        printf("name:            %s\n", in.name[0] ? in.name : "(none)");
        printf("architecture:    %s\n", in.arch);
        printf("parameters:      %llu (%.2f M)\n", (unsigned long long)in.n_params, (double)in.n_params / 1e6);
        printf("weight bytes:    %llu (%.2f MiB)\n", (unsigned long long)in.weight_bytes,
               (double)in.weight_bytes / (1 << 20));
        printf("n_vocab:         %d\n", in.n_vocab);
        printf("n_embd:          %d\n", in.n_embd);
        printf("n_layer:         %d\n", in.n_layer);
        printf("n_head:          %d\n", in.n_head);
        printf("n_head_kv:       %d%s\n", in.n_head_kv, in.n_head_kv < in.n_head ? " (grouped-query attention)" : "");
        printf("head_dim:        %d\n", in.head_dim);
        printf("n_ff:            %d\n", in.n_ff);
        printf("n_rot:           %d\n", in.n_rot);
        printf("n_ctx_train:     %d\n", in.n_ctx_train);
        printf("rms_eps:         %g\n", in.rms_eps);
        printf("rope:            base %g, scaling %s", in.rope_base, in.rope_scaling);
        if (strcmp(in.rope_scaling, "linear") == 0 || strcmp(in.rope_scaling, "yarn") == 0)
            printf(", factor %g, original context %d", in.rope_factor, in.rope_orig_ctx);
        printf(", pairs %s\n", in.rope_neox ? "(i, i + n_rot/2) (rotate-half)" : "(2i, 2i+1)");
        if (in.qkv_bias) printf("attention bias:  q, k and v projections\n");
        printf("output:          %s\n", in.tied_output ? "tied to token_embd" : "separate matrix");
        uint64_t kv16 = tf_model_kv_bytes_per_token(m, 2), kv32 = tf_model_kv_bytes_per_token(m, 4);
        printf("KV bytes/token:  %llu (f16), %llu (f32)", (unsigned long long)kv16, (unsigned long long)kv32);
        if (in.head_dim % 32 == 0)
            printf(", %llu (q8_0), %llu (q4_0)", (unsigned long long)tf_model_kv_type_bytes_per_token(m, TF_KV_Q8_0),
                   (unsigned long long)tf_model_kv_type_bytes_per_token(m, TF_KV_Q4_0));
        printf("; %.2f GiB (f16) at the trained context\n", (double)kv16 * in.n_ctx_train / (1024.0 * 1024 * 1024));
    }
    printf("tokenizer:       %s\n", in.has_tokenizer ? in.tokenizer : "(none)");
    if (in.has_tokenizer) printf("bos / eos:       %d / %d\n", tf_model_bos(m), tf_model_eos(m));
    int64_t nt = tf_model_n_tensors(m);
    if (nt > 0) {
        /* bytes per type, then every tensor */
        typedef struct { const char *type; uint64_t bytes; int64_t n; } type_total;
        type_total agg[16];
        int na = 0;
        for (int64_t i = 0; i < nt; i++) {
            tf_tensor_info ti;
            tf_model_tensor(m, i, &ti);
            int k = 0;
            while (k < na && strcmp(agg[k].type, ti.type) != 0) k++;
            if (k == na && na < 16) agg[na++] = (type_total){ti.type, 0, 0};
            if (k < na) { agg[k].bytes += ti.bytes; agg[k].n++; }
        }
        printf("tensor types:   ");
        for (int k = 0; k < na; k++)
            printf(" %s: %lld tensors, %.2f MiB;", agg[k].type, (long long)agg[k].n, (double)agg[k].bytes / (1 << 20));
        printf("\ntensors (%lld):\n", (long long)nt);
        for (int64_t i = 0; i < nt; i++) {
            tf_tensor_info ti;
            tf_model_tensor(m, i, &ti);
            char shape[96] = "";
            for (int d = 0; d < ti.n_dims; d++)
                snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", d ? " x " : "",
                         (long long)ti.ne[d]);
            printf("  %-32s %-6s %-22s %12llu bytes\n", ti.name, ti.type, shape, (unsigned long long)ti.bytes);
        }
    }
    tf_model_close(m);
    return 0;
}
