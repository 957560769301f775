/* gen_case.c — see gen_case.h. */
#include "gen_case.h"

#include "model/gen.h"
#include "testutil.h"

#include <stdio.h>

const char *tu_gen(const tu_gen_case *c, uint64_t seed) { return tu_gen_arch(c, TF_ARCH_LLAMA, seed); }

const char *tu_gen_arch(const tu_gen_case *c, tf_arch arch, uint64_t seed) {
    static char path[512];
    snprintf(path, sizeof path, "%s", tu_tmp_path(".gguf"));
    tf_gen_params p = tf_gen_params_default();
    p.arch = arch;
    p.n_embd = c->n_embd;
    p.n_layer = c->n_layer;
    p.n_head = c->n_head;
    p.n_head_kv = c->n_head_kv;
    p.n_ff = c->n_ff;
    p.n_ctx_train = 256;
    p.n_vocab = 300;
    p.rope_scaling = c->scaling;
    p.rope_factor = c->factor;
    p.rope_orig_ctx = c->orig_ctx;
    p.tied_output = c->tied;
    p.wtype = c->wtype;
    p.seed = seed;
    p.n_threads = 1;
    tf_err err = {0};
    if (tf_gen_model(&p, path, &err) != TF_OK) {
        print_error("gen-model (%s) failed: %s\n", c->label, err.msg);
        fail();
    }
    return path;
}
