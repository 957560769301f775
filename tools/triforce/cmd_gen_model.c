/* cmd_gen_model.c — `triforce gen-model OUT.gguf`: random-weight llama or qwen2 models of any shape. */
#include "cli.h"

#include "core/dtype.h"
#include "model/gen.h"

#include <stdio.h>
#include <string.h>

static const char *k_usage = "OUT.gguf [--preset NAME] [shape options]";

int cmd_gen_model(int argc, char **argv) {
    cli_opts o;
    int r = cli_parse(&o, CMD_GEN_MODEL, "gen-model", k_usage, 1, argc, argv);
    size_t n_presets;
    const tf_gen_preset *presets = tf_gen_presets(&n_presets);
    if (r > 0) {
        printf("\npresets:\n");
        for (size_t i = 0; i < n_presets; i++) printf("  %-16s %s\n", presets[i].name, presets[i].desc);
        return 0;
    }
    if (r < 0) return 2;
    if (o.n_pos != 1) {
        fprintf(stderr, "usage: triforce gen-model %s\n", k_usage);
        return 2;
    }
    tf_gen_params p = tf_gen_params_default();
    if (o.preset) {
        const tf_gen_preset *ps = tf_gen_preset_find(o.preset);
        if (!ps) {
            fprintf(stderr, "triforce gen-model: unknown preset '%s'; known:", o.preset);
            for (size_t i = 0; i < n_presets; i++) fprintf(stderr, " %s", presets[i].name);
            fprintf(stderr, "\n");
            return 2;
        }
        tf_gen_params_apply_preset(&p, ps);
    }
    if (o.arch && !tf_arch_from_name(o.arch, strlen(o.arch), &p.arch)) {
        fprintf(stderr, "triforce gen-model: --arch '%s': expected %s\n", o.arch, tf_arch_list());
        return 2;
    }
    if (o.n_embd) p.n_embd = o.n_embd;
    if (o.n_layer) p.n_layer = o.n_layer;
    if (o.n_head) p.n_head = o.n_head;
    if (o.n_head_kv) p.n_head_kv = o.n_head_kv;
    else if (o.n_head && !o.preset) p.n_head_kv = o.n_head;
    if (o.n_ff) p.n_ff = o.n_ff;
    if (o.n_vocab) p.n_vocab = o.n_vocab;
    if (o.ctx_train) p.n_ctx_train = o.ctx_train;
    if (o.rope_base > 0) p.rope_base = o.rope_base;
    if (o.rope_factor > 0) p.rope_factor = o.rope_factor;
    if (o.orig_ctx) p.rope_orig_ctx = o.orig_ctx;
    if (o.tied) p.tied_output = true;
    if (o.rope_scaling) {
        static const char *const names[] = {"none", "linear", "yarn", "llama3"};
        int k = 0;
        while (k < 4 && strcmp(o.rope_scaling, names[k]) != 0) k++;
        if (k == 4) {
            fprintf(stderr, "triforce gen-model: --rope-scaling '%s': expected none, linear, yarn or llama3\n",
                    o.rope_scaling);
            return 2;
        }
        p.rope_scaling = (tf_rope_scaling)k;
    }
    if (o.wtype && !tf_dtype_from_name(o.wtype, &p.wtype)) {
        fprintf(stderr, "triforce gen-model: --type '%s': expected one of:" TF_DTYPE_NAMES "\n", o.wtype);
        return 2;
    }
    p.vocab_from = o.vocab_from;
    p.seed = (uint64_t)o.gen_seed;
    p.n_threads = o.n_threads;
    p.log = (tf_logger){.fn = cli_log, .min_level = TF_LOG_INFO};
    if (!cli_check_output("gen-model", o.pos[0], NULL)) return 2;
    cli_progress progress = cli_progress_make("gen-model");
    cli_catch_interrupts();
    p.progress = cli_progress_percent;
    p.progress_ud = &progress;
    tf_err err = {0};
    double t0 = cli_now();
    if (tf_gen_model(&p, o.pos[0], &err) != TF_OK) {
        cli_progress_break();
        fprintf(stderr, "triforce: %s\n", err.msg);
        return cli_interrupted() ? 130 : 1;
    }
    fprintf(stderr, "wrote %s: %.2fM parameters in %.1f s\n", o.pos[0], (double)tf_gen_param_count(&p) / 1e6,
            cli_now() - t0);
    return 0;
}
