/* test_gen_model.c — random-weight model generator: presets, metadata and
 * tensor layout, every weight type (with the F16 fallback), RoPE scaling
 * variants, determinism, copied vocabularies, and that generated models
 * load and give finite, non-degenerate logits through many layers. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cpu/quant.h"
#include "core/dtype.h"
#include "format/gguf.h"
#include "kv/kv.h"
#include "model/forward.h"
#include "model/gen.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

#define OK(expr)                                                                                                 \
    do {                                                                                                         \
        tf_status st_ = (expr);                                                                                  \
        if (st_ != TF_OK) fail_msg("%s failed: %s", #expr, err.msg);                                             \
    } while (0)

typedef struct log_capture {
    char text[8192];
    int n;
} log_capture;

static void capture(void *ud, tf_log_level level, const char *msg) {
    log_capture *c = ud;
    size_t len = strlen(c->text);
    snprintf(c->text + len, sizeof c->text - len, "%d:%s\n", (int)level, msg);
    c->n++;
}

static tf_gen_params small_params(void) {
    tf_gen_params p = tf_gen_params_default();
    p.n_embd = 64;
    p.n_layer = 2;
    p.n_head = 4;
    p.n_head_kv = 2;
    p.n_ff = 96;
    p.n_ctx_train = 256;
    p.n_vocab = 300;
    p.tied_output = false;
    p.n_threads = 2;
    p.wtype = TF_DTYPE_F32;
    return p;
}

static char *tmp_path(void) { return strdup(tu_tmp_path(".gguf")); }

static void test_presets(void **state) {
    (void)state;
    size_t n;
    const tf_gen_preset *ps = tf_gen_presets(&n);
    assert_int_equal(n, 7);
    const tf_gen_preset *p7 = tf_gen_preset_find("llama2-7b-128k");
    assert_non_null(p7);
    assert_int_equal(p7->n_embd, 4096);
    assert_int_equal(p7->n_layer, 32);
    assert_int_equal(p7->n_head_kv, 32);
    assert_int_equal(p7->n_ff, 11008);
    assert_int_equal(p7->n_ctx_train, 131072);
    assert_int_equal(p7->rope_scaling, TF_ROPE_SCALING_YARN);
    assert_true(p7->rope_factor == 32.0f && p7->rope_orig_ctx == 4096 && p7->rope_base == 10000.0f);
    assert_null(tf_gen_preset_find("nope"));
    tf_gen_params p = tf_gen_params_default();
    struct { const char *name; uint64_t params; } want[] = {
        {"llama2-7b-128k", 6738415616ull}, /* Llama 2 7B's published count */
        {"llama-68m", 68030208ull},
        {"tiny-24m", 23728640ull},
        {"qwen2.5-0.5b", 494032768ull}, /* Qwen2.5-0.5B's published count (biases included) */
        {"tinyllama-1.1b", 1100048384ull}, /* TinyLlama-1.1B's published count */
        /* Llama 3.2 1B's and 3.1 8B's published counts plus the head_dim / 2 = 32 and 64 RoPE
         * frequency divisors of rope_freqs.weight, which the published counts leave out */
        {"llama3.2-1b", 1235814400ull + 32},
        {"llama3.1-8b", 8030261248ull + 64},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        assert_string_equal(ps[i].name, want[i].name);
        tf_gen_params_apply_preset(&p, &ps[i]);
        assert_int_equal(tf_gen_param_count(&p), want[i].params);
    }
}

static void test_layout_and_metadata(void **state) {
    (void)state;
    tf_err err = {0};
    char *path = tmp_path();
    tf_gen_params p = small_params();
    p.name = "unit-gen";
    OK(tf_gen_model(&p, path, &err));
    tf_gguf g;
    OK(tf_gguf_open(&g, path, &err));
    tf_gguf_str s;
    OK(tf_gguf_get_str(&g, "general.architecture", &s, NULL, &err));
    assert_true(tf_gguf_str_eq(s, "llama"));
    OK(tf_gguf_get_str(&g, "general.name", &s, NULL, &err));
    assert_true(tf_gguf_str_eq(s, "unit-gen"));
    struct { const char *key; uint32_t v; } u[] = {
        {"general.file_type", 0}, {"llama.context_length", 256}, {"llama.embedding_length", 64},
        {"llama.block_count", 2}, {"llama.feed_forward_length", 96}, {"llama.attention.head_count", 4},
        {"llama.attention.head_count_kv", 2}, {"llama.rope.dimension_count", 16}, {"llama.vocab_size", 300},
        {"tokenizer.ggml.bos_token_id", 1}, {"tokenizer.ggml.eos_token_id", 2},
    };
    for (size_t i = 0; i < sizeof u / sizeof u[0]; i++) {
        uint32_t v;
        OK(tf_gguf_get_u32(&g, u[i].key, &v, NULL, &err));
        if (v != u[i].v) fail_msg("%s = %u, expected %u", u[i].key, v, u[i].v);
    }
    float f;
    OK(tf_gguf_get_f32(&g, "llama.rope.freq_base", &f, NULL, &err));
    assert_true(f == 10000.0f);
    OK(tf_gguf_get_f32(&g, "llama.attention.layer_norm_rms_epsilon", &f, NULL, &err));
    assert_true(f == 1e-5f);
    assert_null(tf_gguf_find_kv(&g, "llama.rope.scaling.type"));

    /* byte vocabulary: specials, 256 byte tokens, then distinct normal pieces */
    const tf_gguf_kv *toks, *types;
    OK(tf_gguf_get_arr(&g, "tokenizer.ggml.tokens", TF_GGUF_STRING, &toks, NULL, &err));
    OK(tf_gguf_get_arr(&g, "tokenizer.ggml.token_type", TF_GGUF_INT32, &types, NULL, &err));
    assert_int_equal(toks->arr_n, 300);
    assert_true(tf_gguf_str_eq(toks->arr_str[0], "<unk>") && tf_gguf_str_eq(toks->arr_str[1], "<s>") &&
                tf_gguf_str_eq(toks->arr_str[2], "</s>") && tf_gguf_str_eq(toks->arr_str[3], "<0x00>") &&
                tf_gguf_str_eq(toks->arr_str[3 + 0x41], "<0x41>") && tf_gguf_str_eq(toks->arr_str[258], "<0xFF>"));
    assert_int_equal(tf_gguf_arr_int(types, 0), 2);
    assert_int_equal(tf_gguf_arr_int(types, 1), 3);
    assert_int_equal(tf_gguf_arr_int(types, 100), 6);
    assert_int_equal(tf_gguf_arr_int(types, 299), 1);
    for (uint64_t i = 0; i < toks->arr_n; i++)
        for (uint64_t k = i + 1; k < toks->arr_n; k++)
            if (toks->arr_str[i].len == toks->arr_str[k].len &&
                memcmp(toks->arr_str[i].data, toks->arr_str[k].data, (size_t)toks->arr_str[i].len) == 0)
                fail_msg("tokens %llu and %llu are equal", (unsigned long long)i, (unsigned long long)k);

    /* tensors: llama names, ne[0] = row length */
    struct { const char *name; int64_t ne0, ne1; } t[] = {
        {"token_embd.weight", 64, 300}, {"output_norm.weight", 64, 1}, {"output.weight", 64, 300},
        {"blk.1.attn_norm.weight", 64, 1}, {"blk.1.attn_q.weight", 64, 64}, {"blk.1.attn_k.weight", 64, 32},
        {"blk.1.attn_v.weight", 64, 32}, {"blk.1.attn_output.weight", 64, 64}, {"blk.1.ffn_norm.weight", 64, 1},
        {"blk.1.ffn_gate.weight", 64, 96}, {"blk.1.ffn_up.weight", 64, 96}, {"blk.1.ffn_down.weight", 96, 64},
    };
    assert_int_equal(g.n_tensors, 3 + 2 * 9);
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        const tf_gguf_tensor *x = tf_gguf_find_tensor(&g, t[i].name);
        if (!x) fail_msg("missing %s", t[i].name);
        assert_int_equal(x->ne[0], t[i].ne0);
        assert_int_equal(x->ne[1], t[i].ne1);
        assert_int_equal(x->n_dims, t[i].ne1 == 1 ? 1 : 2);
        assert_int_equal(x->type, TF_DTYPE_F32);
    }
    /* value scales: matrices ~ 1/sqrt(fan_in), embeddings ~ 1, norms in [0.9, 1.1] */
    const tf_gguf_tensor *x = tf_gguf_find_tensor(&g, "blk.0.ffn_down.weight");
    const float *v = (const float *)x->data;
    double ss = 0;
    for (int64_t i = 0; i < 96 * 64; i++) ss += (double)v[i] * v[i];
    assert_true(fabs(sqrt(ss / (96 * 64)) * sqrt(96.0) - 1.0) < 0.05);
    x = tf_gguf_find_tensor(&g, "token_embd.weight");
    v = (const float *)x->data;
    ss = 0;
    for (int64_t i = 0; i < 64 * 300; i++) ss += (double)v[i] * v[i];
    assert_true(fabs(sqrt(ss / (64 * 300)) - 1.0) < 0.05);
    x = tf_gguf_find_tensor(&g, "blk.0.attn_norm.weight");
    v = (const float *)x->data;
    for (int i = 0; i < 64; i++) assert_true(v[i] >= 0.9f && v[i] <= 1.1f);
    tf_gguf_close(&g);
    unlink(path);
    free(path);
}

/* Forward `n` tokens through a generated model; check logits. */
static void check_logits(const char *path, int n) {
    tf_err err = {0};
    tf_model *m;
    OK(tf_model_load(&m, path, NULL, &err));
    tf_fwd f;
    OK(tf_fwd_init(&f, m, n, n, 64, NULL, TF_ISA_BEST, &err));
    tf_kv_cache kv;
    OK(tf_kv_init(&kv, m->hp.n_layer, m->hp.n_head_kv, m->hp.head_dim, 64, TF_DTYPE_F32, &err));
    int32_t tok[16], pos[16];
    for (int i = 0; i < n; i++) {
        tok[i] = (int32_t)((i * 37 + 5) % m->hp.n_vocab);
        pos[i] = i;
    }
    OK(tf_forward(&f, &kv, tok, pos, n, 0, NULL, 0, NULL, &err));
    int32_t nv = m->hp.n_vocab;
    int argmax_first = -1, distinct_argmax = 0;
    for (int r = 0; r < n; r++) {
        const float *l = f.logits + (size_t)r * nv;
        assert_false(tu_has_nonfinite(l, (size_t)nv));
        double mean = 0, var = 0;
        int am = 0;
        for (int i = 0; i < nv; i++) {
            mean += l[i];
            if (l[i] > l[am]) am = i;
        }
        mean /= nv;
        for (int i = 0; i < nv; i++) var += (l[i] - mean) * (l[i] - mean);
        double sd = sqrt(var / nv);
        if (sd < 0.2 || sd > 20) fail_msg("%s: row %d: logit std %g (expected O(1))", path, r, sd);
        if (r == 0) argmax_first = am;
        else distinct_argmax += am != argmax_first;
    }
    assert_true(n < 4 || distinct_argmax > 0); /* outputs depend on the input */
    tf_kv_free(&kv);
    tf_fwd_free(&f);
    tf_model_free(m);
}

static void test_every_dtype_loads(void **state) {
    (void)state;
    const tf_dtype types[] = {TF_DTYPE_F32,  TF_DTYPE_F16,  TF_DTYPE_BF16, TF_DTYPE_Q8_0, TF_DTYPE_Q4_0,
                              TF_DTYPE_Q4_1, TF_DTYPE_Q5_0, TF_DTYPE_Q5_1, TF_DTYPE_Q2_K, TF_DTYPE_Q3_K,
                              TF_DTYPE_Q4_K, TF_DTYPE_Q5_K, TF_DTYPE_Q6_K, TF_DTYPE_IQ4_NL, TF_DTYPE_IQ4_XS};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        tf_err err = {0};
        log_capture lc = {{0}, 0};
        char *path = tmp_path();
        tf_gen_params p = small_params();
        p.wtype = types[k];
        p.log = (tf_logger){.fn = capture, .user_data = &lc, .min_level = TF_LOG_DEBUG};
        OK(tf_gen_model(&p, path, &err));
        tf_gguf g;
        OK(tf_gguf_open(&g, path, &err));
        bool kq = tf_dtype_block_size(types[k]) == TF_QK_K; /* rows of small_params() are shorter */
        for (uint64_t i = 0; i < g.n_tensors; i++) {
            const tf_gguf_tensor *t = &g.tensors[i];
            uint32_t want = t->n_dims == 1 ? TF_DTYPE_F32 : kq ? TF_DTYPE_F16 : (uint32_t)types[k];
            if (t->type != want) fail_msg("%s: %s has type %s", tf_dtype_name(types[k]), t->name, tf_dtype_name(t->type));
            if (kq && t->n_dims == 2 && !strstr(lc.text, t->name))
                fail_msg("fallback of %s not logged:\n%s", t->name, lc.text);
        }
        uint32_t ft;
        OK(tf_gguf_get_u32(&g, "general.file_type", &ft, NULL, &err));
        tf_gguf_close(&g);
        assert_non_null(strstr(lc.text, "gen-model:")); /* the resolved settings */
        check_logits(path, 6);
        unlink(path);
        free(path);
    }
}

static void test_kquants_and_tied(void **state) {
    (void)state;
    const tf_dtype types[] = {TF_DTYPE_Q2_K, TF_DTYPE_Q3_K, TF_DTYPE_Q4_K, TF_DTYPE_Q5_K, TF_DTYPE_Q6_K, TF_DTYPE_IQ4_XS};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        tf_err err = {0};
        char *path = tmp_path();
        tf_gen_params p = small_params();
        p.n_embd = 256;
        p.n_ff = 512;
        p.n_head = 4;
        p.n_head_kv = 1;
        p.tied_output = true;
        p.wtype = types[k];
        OK(tf_gen_model(&p, path, &err));
        tf_gguf g;
        OK(tf_gguf_open(&g, path, &err));
        assert_null(tf_gguf_find_tensor(&g, "output.weight"));
        for (uint64_t i = 0; i < g.n_tensors; i++)
            assert_int_equal(g.tensors[i].type, g.tensors[i].n_dims == 1 ? TF_DTYPE_F32 : (uint32_t)types[k]);
        /* tied embedding std n_embd^-1/4 (dequantized) */
        const tf_gguf_tensor *e = tf_gguf_find_tensor(&g, "token_embd.weight");
        float row[256];
        double ss = 0;
        for (int r = 0; r < 300; r++) {
            tf_ref_dequantize_row(types[k], e->data + (size_t)r * tf_dtype_row_size(e->type, 256), row, 256);
            for (int i = 0; i < 256; i++) ss += (double)row[i] * row[i];
        }
        assert_true(fabs(sqrt(ss / (256 * 300)) / pow(256, -0.25) - 1.0) < 0.1);
        tf_gguf_close(&g);
        check_logits(path, 6);
        unlink(path);
        free(path);
    }
}

static void test_rope_scaling(void **state) {
    (void)state;
    tf_err err = {0};
    /* linear */
    char *path = tmp_path();
    tf_gen_params p = small_params();
    p.rope_scaling = TF_ROPE_SCALING_LINEAR;
    p.rope_factor = 4;
    OK(tf_gen_model(&p, path, &err));
    tf_gguf g;
    OK(tf_gguf_open(&g, path, &err));
    tf_gguf_str s;
    float f;
    OK(tf_gguf_get_str(&g, "llama.rope.scaling.type", &s, NULL, &err));
    assert_true(tf_gguf_str_eq(s, "linear"));
    OK(tf_gguf_get_f32(&g, "llama.rope.scaling.factor", &f, NULL, &err));
    assert_true(f == 4.0f);
    assert_null(tf_gguf_find_kv(&g, "llama.rope.scaling.original_context_length"));
    tf_gguf_close(&g);
    check_logits(path, 4);

    /* yarn, with and without the optional keys */
    for (int extra = 0; extra < 2; extra++) {
        p = small_params();
        p.rope_scaling = TF_ROPE_SCALING_YARN;
        p.rope_factor = 32;
        p.rope_orig_ctx = 64;
        if (extra) {
            p.yarn_beta_fast = 16;
            p.yarn_beta_slow = 2;
            p.yarn_attn_factor = 0.5f;
        }
        OK(tf_gen_model(&p, path, &err));
        OK(tf_gguf_open(&g, path, &err));
        OK(tf_gguf_get_str(&g, "llama.rope.scaling.type", &s, NULL, &err));
        assert_true(tf_gguf_str_eq(s, "yarn"));
        uint32_t u;
        OK(tf_gguf_get_u32(&g, "llama.rope.scaling.original_context_length", &u, NULL, &err));
        assert_int_equal(u, 64);
        bool found;
        OK(tf_gguf_get_f32(&g, "llama.rope.scaling.yarn_beta_fast", &f, &found, &err));
        assert_int_equal(found, extra);
        if (extra) {
            assert_true(f == 16.0f);
            OK(tf_gguf_get_f32(&g, "llama.rope.scaling.yarn_beta_slow", &f, NULL, &err));
            assert_true(f == 2.0f);
            OK(tf_gguf_get_f32(&g, "llama.rope.scaling.attn_factor", &f, NULL, &err));
            assert_true(f == 0.5f);
        }
        tf_gguf_close(&g);
        check_logits(path, 4);
    }

    /* llama3: rope_freqs.weight with the Llama 3.1 divisors, no scaling keys */
    p = small_params();
    p.n_embd = 256;
    p.n_head = 2; /* head_dim 128 as in Llama 3.1 8B */
    p.n_head_kv = 1;
    p.rope_base = 500000;
    p.rope_scaling = TF_ROPE_SCALING_LLAMA3;
    p.rope_factor = 8;
    p.rope_orig_ctx = 8192;
    OK(tf_gen_model(&p, path, &err));
    OK(tf_gguf_open(&g, path, &err));
    assert_null(tf_gguf_find_kv(&g, "llama.rope.scaling.type"));
    const tf_gguf_tensor *rf = tf_gguf_find_tensor(&g, "rope_freqs.weight");
    assert_non_null(rf);
    assert_int_equal(rf->type, TF_DTYPE_F32);
    assert_int_equal(rf->n_dims, 1);
    assert_int_equal(rf->ne[0], 64);
    float want[64];
    tf_rope_llama3_factors(want, 128, 500000, 8, 1, 4, 8192);
    assert_memory_equal(rf->data, want, sizeof want);
    /* Llama 3.1: high frequencies untouched, low ones divided by the factor, smooth in between */
    assert_true(want[0] == 1.0f && want[63] == 8.0f);
    for (int i = 1; i < 64; i++) assert_true(want[i] >= want[i - 1]);
    int mid = 0;
    for (int i = 0; i < 64; i++) mid += want[i] > 1.0f && want[i] < 8.0f;
    assert_true(mid > 0);
    /* spot check: wavelength 2*pi*500000^(2i/128) lies between 2048 and 8192 at i = 30 */
    double wl = 2 * M_PI * pow(500000.0, 60.0 / 128.0);
    assert_true(wl > 2048 && wl < 8192);
    double smooth = (8192 / wl - 1) / 3;
    assert_true(fabs(want[30] - 1 / ((1 - smooth) / 8 + smooth)) < 1e-5);
    tf_gguf_close(&g);
    check_logits(path, 4);
    unlink(path);
    free(path);
}

static void test_determinism(void **state) {
    (void)state;
    tf_err err = {0};
    char *a = tmp_path(), *b = tmp_path(), *c = tmp_path();
    tf_gen_params p = small_params();
    p.wtype = TF_DTYPE_Q8_0;
    p.n_threads = 1;
    OK(tf_gen_model(&p, a, &err));
    p.n_threads = 3;
    OK(tf_gen_model(&p, b, &err));
    p.n_layer = 1; /* fewer layers: the same first layer */
    OK(tf_gen_model(&p, c, &err));
    tf_gguf ga, gb, gc;
    OK(tf_gguf_open(&ga, a, &err));
    OK(tf_gguf_open(&gb, b, &err));
    OK(tf_gguf_open(&gc, c, &err));
    assert_int_equal(ga.size, gb.size);
    assert_memory_equal(ga.base, gb.base, ga.size);
    for (uint64_t i = 0; i < gc.n_tensors; i++) {
        const tf_gguf_tensor *x = &gc.tensors[i], *y = tf_gguf_find_tensor(&ga, x->name);
        assert_non_null(y);
        assert_int_equal(x->nbytes, y->nbytes);
        assert_memory_equal(x->data, y->data, (size_t)x->nbytes);
    }
    tf_gguf_close(&gc);
    p.seed = 43;
    OK(tf_gen_model(&p, c, &err));
    OK(tf_gguf_open(&gc, c, &err));
    const tf_gguf_tensor *x = tf_gguf_find_tensor(&gc, "blk.0.attn_q.weight"),
                         *y = tf_gguf_find_tensor(&ga, "blk.0.attn_q.weight");
    assert_memory_not_equal(x->data, y->data, (size_t)x->nbytes);
    /* different tensors of one model are different streams */
    assert_memory_not_equal(tf_gguf_find_tensor(&ga, "blk.0.ffn_gate.weight")->data,
                            tf_gguf_find_tensor(&ga, "blk.0.ffn_up.weight")->data, 64);
    tf_gguf_close(&ga);
    tf_gguf_close(&gb);
    tf_gguf_close(&gc);
    unlink(a);
    unlink(b);
    unlink(c);
    free(a);
    free(b);
    free(c);
}

static void test_deep_model_stays_finite(void **state) {
    (void)state;
    tf_err err = {0};
    char *path = tmp_path();
    tf_gen_params p = small_params();
    p.n_layer = 48;
    p.wtype = TF_DTYPE_Q8_0;
    OK(tf_gen_model(&p, path, &err));
    check_logits(path, 16);
    unlink(path);
    free(path);
}

static void test_vocab_from(void **state) {
    (void)state;
    TU_REQUIRE_SHARED(src, "models/stories260K/stories260K.gguf");
    char srcpath[1024];
    snprintf(srcpath, sizeof srcpath, "%s", src);
    tf_err err = {0};
    char *path = tmp_path();
    tf_gen_params p = small_params();
    p.vocab_from = srcpath;
    OK(tf_gen_model(&p, path, &err));
    tf_gguf g, s;
    OK(tf_gguf_open(&g, path, &err));
    OK(tf_gguf_open(&s, srcpath, &err));
    uint64_t n_tok_keys = 0;
    for (uint64_t i = 0; i < s.n_kv; i++) {
        const tf_gguf_kv *a = &s.kv[i];
        if (a->key.len < 10 || memcmp(a->key.data, "tokenizer.", 10) != 0) continue;
        n_tok_keys++;
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)a->key.len, a->key.data);
        const tf_gguf_kv *b = tf_gguf_find_kv(&g, key);
        if (!b) fail_msg("%s not copied", key);
        assert_int_equal(a->type, b->type);
        if (a->type == TF_GGUF_ARRAY) {
            assert_int_equal(a->arr_n, b->arr_n);
            if (a->arr_type == TF_GGUF_STRING)
                for (uint64_t k = 0; k < a->arr_n; k++) {
                    assert_int_equal(a->arr_str[k].len, b->arr_str[k].len);
                    assert_memory_equal(a->arr_str[k].data, b->arr_str[k].data, (size_t)a->arr_str[k].len);
                }
        }
    }
    assert_true(n_tok_keys >= 3);
    const tf_gguf_tensor *e = tf_gguf_find_tensor(&g, "token_embd.weight");
    assert_int_equal(e->ne[1], 512);
    tf_gguf_close(&s);
    tf_gguf_close(&g);
    check_logits(path, 6);
    unlink(path);
    free(path);
}

/* The byte vocabulary (padded to 32000 like the presets) is a working SPM
 * tokenizer: text round-trips, merges into multi-character pieces happen,
 * unknown characters fall back to byte tokens. */
static void test_byte_vocab_tokenizes(void **state) {
    (void)state;
    tf_err err = {0};
    char *path = tmp_path();
    tf_gen_params p = small_params();
    p.n_vocab = 32000;
    OK(tf_gen_model(&p, path, &err));
    tf_gguf g;
    OK(tf_gguf_open(&g, path, &err));
    tf_tokenizer *tok;
    OK(tf_tokenizer_from_gguf(&tok, &g, &err));
    assert_int_equal(tf_tokenizer_n_vocab(tok), 32000);
    assert_int_equal(tf_tokenizer_bos(tok), 1);
    assert_int_equal(tf_tokenizer_eos(tok), 2);
    const char *text = "hello world, caf\xc3\xa9 \xe2\x82\xac 42!";
    int32_t ids[128];
    size_t n;
    OK(tf_tokenize(tok, text, strlen(text), true, false, ids, 128, &n, &err));
    assert_int_equal(ids[0], 1);
    assert_true(n > 3 && n < strlen(text)); /* some pieces merged */
    char out[256];
    size_t n_out;
    OK(tf_detokenize(tok, ids + 1, n - 1, false, out, sizeof out, &n_out, &err));
    assert_int_equal(n_out, strlen(text));
    assert_memory_equal(out, text, n_out);
    tf_tokenizer_free(tok);
    tf_gguf_close(&g);
    unlink(path);
    free(path);
}

static void test_invalid_params(void **state) {
    (void)state;
    tf_err err = {0};
    tf_gen_params p;
#define BAD(stmt, substr)                                                                                        \
    p = small_params();                                                                                          \
    stmt;                                                                                                        \
    tf_err_clear(&err);                                                                                          \
    assert_int_equal(tf_gen_model(&p, "/tmp/never-written.gguf", &err), TF_ERR_INVALID_ARG);                    \
    if (!strstr(err.msg, substr)) fail_msg("'%s' lacks '%s'", err.msg, substr);
    BAD(p.n_head = 5, "n_head = 5");
    BAD(p.n_head_kv = 3, "n_head_kv = 3");
    BAD(p.n_embd = 4; p.n_head = 4, "head_dim");
    BAD(p.n_layer = 0, "n_layer = 0");
    BAD(p.n_ff = 0, "n_ff = 0");
    BAD(p.n_vocab = 100, "n_vocab = 100");
    BAD(p.rms_eps = 0, "rms_eps");
    BAD(p.rope_scaling = TF_ROPE_SCALING_YARN; p.rope_orig_ctx = 0, "rope_orig_ctx");
    BAD(p.rope_scaling = TF_ROPE_SCALING_LINEAR; p.rope_factor = 0, "rope_factor");
    BAD(p.wtype = (tf_dtype)9 /* q8_1: no weight format */, "weight type");
#undef BAD
    assert_int_not_equal(access("/tmp/never-written.gguf", F_OK), 0);
    /* unreadable vocabulary source names that file */
    p = small_params();
    p.vocab_from = "/nonexistent/vocab.gguf";
    tf_err_clear(&err);
    assert_int_equal(tf_gen_model(&p, "/tmp/never-written.gguf", &err), TF_ERR_IO);
    assert_non_null(strstr(err.msg, "/nonexistent/vocab.gguf"));
    /* unwritable output names the output */
    p = small_params();
    tf_err_clear(&err);
    assert_int_equal(tf_gen_model(&p, "/nonexistent/out.gguf", &err), TF_ERR_IO);
    assert_non_null(strstr(err.msg, "/nonexistent/out.gguf"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_presets),
        cmocka_unit_test(test_layout_and_metadata),
        cmocka_unit_test(test_every_dtype_loads),
        cmocka_unit_test(test_kquants_and_tied),
        cmocka_unit_test(test_rope_scaling),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_deep_model_stays_finite),
        cmocka_unit_test(test_vocab_from),
        cmocka_unit_test(test_byte_vocab_tokenizes),
        cmocka_unit_test(test_invalid_params),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
