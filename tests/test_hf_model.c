/* test_hf_model.c — Hugging Face checkpoint directories: the same weights as
 * a GGUF and as an HF directory (single file, shards, tied under either name,
 * F32/F16/BF16, every RoPE scaling; llama and qwen2) give the same logits;
 * `convert` writes a GGUF (llama or qwen2) that loads with identical logits;
 * every malformed checkpoint is refused with a message naming the file and
 * the key or tensor. */
#include "testutil.h"

#include "format/safetensors.h"
#include "gen_case.h"
#include "hf_export.h"
#include "hf_tokjson.h"
#include "model/gen.h"
#include "model/hf.h"
#include "model/model.h"
#include "model/quantize.h"
#include "core/mem.h"
#include "tokenizer/tokenizer.h"
#include "ref_forward.h"
#include "st_write.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N_TOK 24

typedef struct hcase {
    tu_gen_case g;
    hf_export_opts ex;
} hcase;

static tf_model *load(const char *path) {
    tf_model *m = NULL;
    char err[1024];
    if (tf_model_load_file(&m, path, NULL, err, sizeof err) != TF_OK) {
        print_error("loading %s: %s\n", path, err);
        fail();
    }
    return m;
}

/* Logits of every row of toks (malloc'd [N_TOK][n_vocab]). */
static float *logits(tf_model *m, const int32_t *toks) {
    tf_context_params cp = tf_context_default_params();
    cp.n_ctx = 64;
    cp.n_batch = N_TOK;
    cp.n_threads = 2;
    cp.kv_type = TF_KV_F32;
    cp.logits_all = true;
    tf_context *ctx;
    char err[512];
    assert_int_equal(tf_context_init(&ctx, m, &cp, err, sizeof err), TF_OK);
    float *lg = malloc(sizeof(float) * N_TOK * (size_t)m->hp.n_vocab);
    assert_int_equal(tf_context_eval(ctx, toks, N_TOK, lg), TF_OK);
    tf_context_free(ctx);
    return lg;
}

static void rm_rf(const char *dir) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) print_message("could not remove %s\n", dir);
}

/* The Hugging Face weights as they are stored (rotate-half q/k rows), run
 * through the float64 reference with rotate-half RoPE: an independent check
 * that the loader's row permutation matches Hugging Face's RoPE. */
static double rotate_half_nmse(const tf_model *m_hf, const char *dir, const int32_t *toks, const float *lg) {
    tf_st_set st;
    tf_err err = {0};
    assert_int_equal(tf_st_set_open(&st, dir, &err), TF_OK);
    tf_model raw = *m_hf;
    raw.layers = malloc(sizeof *raw.layers * (size_t)m_hf->hp.n_layer);
    memcpy(raw.layers, m_hf->layers, sizeof *raw.layers * (size_t)m_hf->hp.n_layer);
    for (int il = 0; il < m_hf->hp.n_layer; il++) {
        char nm[96];
        snprintf(nm, sizeof nm, "model.layers.%d.self_attn.q_proj.weight", il);
        const tf_st_tensor *q = tf_st_set_find(&st, nm, NULL);
        snprintf(nm, sizeof nm, "model.layers.%d.self_attn.k_proj.weight", il);
        const tf_st_tensor *k = tf_st_set_find(&st, nm, NULL);
        assert_non_null(q);
        assert_non_null(k);
        raw.layers[il].wq.data = q->data;
        raw.layers[il].wk.data = k->data;
    }
    double *ref = ref_forward_ex(&raw, toks, N_TOK, true);
    double num = 0, den = 0;
    for (size_t i = 0; i < (size_t)N_TOK * m_hf->hp.n_vocab; i++) {
        num += (lg[i] - ref[i]) * (lg[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    free(ref);
    free(raw.layers);
    tf_st_set_close(&st);
    return num / den;
}

static void test_logits_equal_gguf(void **state) {
    (void)state;
    static const hcase cases[] = {
        {{"mha-f32", 64, 2, 4, 4, 96, TF_ROPE_SCALING_NONE, 1, 0, false, TF_DTYPE_F32}, {0}},
        {{"gqa-f16-sharded", 64, 3, 8, 2, 160, TF_ROPE_SCALING_NONE, 1, 0, false, TF_DTYPE_F16}, {.n_shards = 3}},
        {{"bf16-linear", 128, 2, 4, 2, 128, TF_ROPE_SCALING_LINEAR, 4, 0, false, TF_DTYPE_BF16}, {0}},
        {{"yarn-tied-embed", 128, 2, 4, 1, 128, TF_ROPE_SCALING_YARN, 8, 64, true, TF_DTYPE_F32}, {.tie_flag = true}},
        {{"tied-as-head", 64, 2, 4, 2, 96, TF_ROPE_SCALING_NONE, 1, 0, true, TF_DTYPE_F16},
         {.tied_as_head = true, .n_shards = 2}},
        {{"llama3-gqa", 128, 2, 2, 1, 128, TF_ROPE_SCALING_LLAMA3, 8, 64, false, TF_DTYPE_F32},
         {.llama3 = true, .llama3_factor = 8, .llama3_low = 1, .llama3_high = 4, .llama3_orig_ctx = 64}},
    };
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed());
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const hcase *hc = &cases[c];
        const char *gpath = tu_gen(&hc->g, tu_seed() + 17 * c);
        char gguf[512], dir[512];
        snprintf(gguf, sizeof gguf, "%s", gpath);
        snprintf(dir, sizeof dir, "%s", tu_tmp_path("_hf"));
        tf_model *mg = load(gguf);
        assert_int_equal(hf_export(mg, dir, &hc->ex), 0);
        tf_model *mh = load(dir);
        assert_int_equal(mh->hp.n_layer, mg->hp.n_layer);
        assert_int_equal(mh->hp.n_head_kv, mg->hp.n_head_kv);
        assert_int_equal(mh->hp.rope_scaling, mg->hp.rope_scaling);
        assert_int_equal(mh->hp.tied_output, mg->hp.tied_output);
        assert_int_equal(mh->tok_embd.type, hc->g.wtype);
        int32_t toks[N_TOK];
        for (int i = 0; i < N_TOK; i++) toks[i] = (int32_t)(tf_rng_next(&rng) % 300);
        float *lg = logits(mg, toks), *lh = logits(mh, toks);
        /* same weights in the same layout once loaded: bitwise equal */
        if (memcmp(lg, lh, sizeof(float) * N_TOK * (size_t)mg->hp.n_vocab) != 0) {
            print_error("%s: logits of the HF directory differ from the GGUF's\n", hc->g.label);
            fail();
        }
        for (size_t i = 0; i < (size_t)N_TOK * mg->hp.n_vocab; i++) assert_true(isfinite(lh[i]));
        double nmse = rotate_half_nmse(mh, dir, toks, lh);
        double tol = hc->g.wtype == TF_DTYPE_F32 ? 1e-9 : 1e-6;
        if (!(nmse <= tol)) {
            print_error("%s: HF weights with rotate-half RoPE: NMSE %g > %g\n", hc->g.label, nmse, tol);
            fail();
        }
        /* convert: HF directory -> GGUF in the stored type, logits again identical */
        char out[512];
        snprintf(out, sizeof out, "%s", tu_tmp_path(".gguf"));
        tf_err err = {0};
        assert_int_equal(tf_quantize_gguf(&mh->gguf, out, (tf_dtype)mh->tok_embd.type, 1, NULL, NULL, NULL, &err),
                         TF_OK);
        tf_model *mc = load(out);
        float *lc = logits(mc, toks);
        if (memcmp(lg, lc, sizeof(float) * N_TOK * (size_t)mg->hp.n_vocab) != 0) {
            print_error("%s: logits of the converted GGUF differ\n", hc->g.label);
            fail();
        }
        free(lg);
        free(lh);
        free(lc);
        tf_model_close(mc);
        tf_model_close(mh);
        tf_model_close(mg);
        unlink(out);
        unlink(gguf);
        rm_rf(dir);
    }
}

/* Qwen2ForCausalLM directories (q/k/v biases, stored rotate-half rows, Qwen's
 * YaRN form, use_sliding_window false): logits equal the qwen2 GGUF's bit for
 * bit, match the float64 reference with rotate-half RoPE and the biases, and
 * `convert` writes a qwen2 GGUF (qwen2.* keys, f32 biases) with the same
 * logits. */
static void test_qwen2_dir(void **state) {
    (void)state;
    static const hcase cases[] = {
        {{"qwen2-gqa-f32", 64, 2, 8, 2, 160, TF_ROPE_SCALING_NONE, 1, 0, false, TF_DTYPE_F32}, {0}},
        {{"qwen2-yarn-tied-f16", 128, 2, 4, 2, 128, TF_ROPE_SCALING_YARN, 4, 64, true, TF_DTYPE_F16},
         {.tie_flag = true}},
        {{"qwen2-bf16-sharded-tied-head", 64, 2, 4, 1, 96, TF_ROPE_SCALING_NONE, 1, 0, true, TF_DTYPE_BF16},
         {.n_shards = 3, .tied_as_head = true}},
    };
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() + 3);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const hcase *hc = &cases[c];
        char gguf[512], dir[512], out[512];
        snprintf(gguf, sizeof gguf, "%s", tu_gen_arch(&hc->g, TF_ARCH_QWEN2, tu_seed() + 31 * c));
        snprintf(dir, sizeof dir, "%s", tu_tmp_path("_qwen2"));
        snprintf(out, sizeof out, "%s", tu_tmp_path(".gguf"));
        tf_model *mg = load(gguf);
        assert_int_equal(hf_export(mg, dir, &hc->ex), 0);
        tf_model *mh = load(dir);
        assert_int_equal(mh->hp.arch, TF_ARCH_QWEN2);
        assert_true(mh->hp.rope_neox && mh->hp.qkv_bias);
        assert_int_equal(mh->hp.rope_scaling, mg->hp.rope_scaling);
        assert_true(mh->hp.rope_factor == mg->hp.rope_factor);
        assert_int_equal(mh->hp.rope_orig_ctx, mg->hp.rope_orig_ctx);
        assert_int_equal(mh->hp.tied_output, hc->g.tied);
        assert_int_equal(mh->layers[1].bk.type, TF_DTYPE_F32);
        int32_t toks[N_TOK];
        for (int i = 0; i < N_TOK; i++) toks[i] = (int32_t)(tf_rng_next(&rng) % 300);
        size_t nl = sizeof(float) * N_TOK * (size_t)mg->hp.n_vocab;
        float *lg = logits(mg, toks), *lh = logits(mh, toks);
        if (memcmp(lg, lh, nl) != 0) {
            print_error("%s: logits of the HF directory differ from the GGUF's\n", hc->g.label);
            fail();
        }
        ref_opts ro = {.rotate_half = true};
        double *ref = ref_forward_opts(mh, toks, N_TOK, &ro);
        double num = 0, den = 0;
        for (size_t i = 0; i < (size_t)N_TOK * mh->hp.n_vocab; i++) {
            num += (lh[i] - ref[i]) * (lh[i] - ref[i]);
            den += ref[i] * ref[i];
        }
        free(ref);
        double tol = hc->g.wtype == TF_DTYPE_F32 ? 1e-9 : 1e-6;
        if (!(num / den <= tol)) {
            print_error("%s: against the rotate-half reference with biases: NMSE %g > %g\n", hc->g.label, num / den,
                        tol);
            fail();
        }
        tf_err err = {0};
        assert_int_equal(tf_quantize_gguf(&mh->gguf, out, (tf_dtype)mh->tok_embd.type, 1, NULL, NULL, NULL, &err),
                         TF_OK);
        tf_model *mc = load(out);
        tf_gguf_str a;
        assert_int_equal(tf_gguf_get_str(&mc->gguf, "general.architecture", &a, NULL, &err), TF_OK);
        assert_true(tf_gguf_str_eq(a, "qwen2"));
        assert_non_null(tf_gguf_find_kv(&mc->gguf, "qwen2.context_length"));
        assert_null(tf_gguf_find_kv(&mc->gguf, "llama.context_length"));
        const tf_gguf_tensor *bt = tf_gguf_find_tensor(&mc->gguf, "blk.0.attn_v.bias");
        assert_non_null(bt);
        assert_int_equal(bt->type, TF_DTYPE_F32);
        float *lc = logits(mc, toks);
        if (memcmp(lg, lc, nl) != 0) {
            print_error("%s: logits of the converted GGUF differ\n", hc->g.label);
            fail();
        }
        free(lg);
        free(lh);
        free(lc);
        tf_model_close(mc);
        tf_model_close(mh);
        tf_model_close(mg);
        unlink(out);
        unlink(gguf);
        rm_rf(dir);
    }
}

/* Yarn-Llama-2-7b-128k's configuration (the paper's target) loads as YaRN
 * factor 32 over 4096, with the same RoPE tables as the generator's preset. */
static void test_yarn_llama2_config(void **state) {
    (void)state;
    char dir[512];
    snprintf(dir, sizeof dir, "%s", tu_tmp_path("_cfg"));
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    assert_int_equal(system(cmd), 0);
    const char *cfg =
        "{\"architectures\": [\"LlamaForCausalLM\"], \"bos_token_id\": 1, \"eos_token_id\": 2,\n"
        " \"hidden_act\": \"silu\", \"hidden_size\": 4096, \"initializer_range\": 0.02,\n"
        " \"intermediate_size\": 11008, \"max_position_embeddings\": 131072, \"model_type\": \"llama\",\n"
        " \"num_attention_heads\": 32, \"num_hidden_layers\": 32, \"num_key_value_heads\": 32,\n"
        " \"pretraining_tp\": 1, \"rms_norm_eps\": 1e-05,\n"
        " \"rope_scaling\": {\"factor\": 32.0, \"original_max_position_embeddings\": 4096, \"type\": \"yarn\",\n"
        "                  \"finetuned\": true},\n"
        " \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\", \"use_cache\": true, \"vocab_size\": 32000}\n";
    char path[700];
    snprintf(path, sizeof path, "%s/config.json", dir);
    assert_int_equal(st_write_bytes(path, cfg, (size_t)-1), 0);
    tf_hf_config c;
    tf_err err = {0};
    assert_int_equal(tf_hf_config_load(&c, dir, NULL, &err), TF_OK);
    assert_int_equal(c.rope_scaling, TF_ROPE_SCALING_YARN);
    assert_true(c.rope_factor == 32.0);
    assert_int_equal(c.rope_orig_ctx, 4096);
    assert_int_equal(c.n_ctx_train, 131072);
    assert_true(c.yarn_beta_fast == 32.0 && c.yarn_beta_slow == 1.0 && c.yarn_attn_factor == 1.0);
    assert_int_equal(c.bos, 1);
    assert_int_equal(c.eos, 2);
    /* the same hyper-parameters as gen-model's llama2-7b-128k preset give the same tables */
    const tf_gen_preset *pr = tf_gen_preset_find("llama2-7b-128k");
    assert_non_null(pr);
    tf_gen_params gp = tf_gen_params_default();
    tf_gen_params_apply_preset(&gp, pr);
    assert_int_equal(gp.n_embd, c.n_embd);
    assert_int_equal(gp.n_layer, c.n_layer);
    assert_int_equal(gp.n_ff, c.n_ff);
    assert_int_equal(gp.rope_scaling, c.rope_scaling);
    assert_true(gp.rope_factor == (float)c.rope_factor);
    assert_int_equal(gp.rope_orig_ctx, c.rope_orig_ctx);
    /* bfloat16 weights would be kept as BF16; a dynamic scaling variant loads statically */
    snprintf(cmd, sizeof cmd, "sed -i 's/\"type\": \"yarn\"/\"type\": \"dynamic\"/' '%s'", path);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(tf_hf_config_load(&c, dir, NULL, &err), TF_OK);
    assert_true(c.rope_dynamic);
    assert_true(fabs(c.rope_theta - 10000.0 * pow(32.0, 128.0 / 126.0)) < 1e-3 * c.rope_theta);
    rm_rf(dir);
}

/* 'dynamic' RoPE scaling is applied as base * factor^(d / (d - 2)): a head
 * dimension of 2 (which divided by zero, found by dev/fuzz_hf_config.c) and a
 * base past what rope_theta may be are refused, naming config.json. */
static void test_dynamic_rope_limits(void **state) {
    (void)state;
    char dir[512], path[700], cmd[1200];
    snprintf(dir, sizeof dir, "%s", tu_tmp_path("_dyn"));
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    assert_int_equal(system(cmd), 0);
    snprintf(path, sizeof path, "%s/config.json", dir);
    static const struct { int hidden, heads; double factor; tf_status st; const char *msg; } cases[] = {
        {4, 2, 2.0, TF_ERR_UNSUPPORTED, "head dimension 2"},      /* d = 2 */
        {8, 2, 1e6, TF_ERR_UNSUPPORTED, "above the largest"},     /* 1e4 * 1e6^2 */
        {8, 2, 2.0, TF_OK, NULL},                                 /* 1e4 * 2^2 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cfg[512];
        snprintf(cfg, sizeof cfg,
                 "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": %d, \"intermediate_size\": 4,"
                 " \"num_attention_heads\": %d, \"num_hidden_layers\": 1, \"vocab_size\": 32,"
                 " \"rope_scaling\": {\"type\": \"dynamic\", \"factor\": %g}}",
                 cases[i].hidden, cases[i].heads, cases[i].factor);
        assert_int_equal(st_write_bytes(path, cfg, (size_t)-1), 0);
        tf_hf_config c;
        tf_err err = {0};
        tf_status st = tf_hf_config_load(&c, dir, NULL, &err);
        if (st != cases[i].st) print_error("case %zu: %s\n", i, err.msg);
        assert_int_equal(st, cases[i].st);
        if (cases[i].msg) {
            assert_non_null(strstr(err.msg, "config.json"));
            assert_non_null(strstr(err.msg, cases[i].msg));
        } else {
            assert_true(isfinite(c.rope_theta) && fabs(c.rope_theta - 4e4) < 1e-6);
        }
    }
    rm_rf(dir);
}

/* Greedy continuation of ids[0..n) by n_gen tokens (argmax, lowest id on ties). */
static void greedy(tf_model *m, int32_t *ids, int n, int n_gen) {
    tf_context_params cp = tf_context_default_params();
    cp.n_ctx = 512;
    cp.n_threads = 2;
    tf_context *ctx;
    char err[512];
    assert_int_equal(tf_context_init(&ctx, m, &cp, err, sizeof err), TF_OK);
    assert_int_equal(tf_context_eval(ctx, ids, n, NULL), TF_OK);
    for (int g = 0; g < n_gen; g++) {
        const float *lg = tf_context_logits(ctx);
        int best = 0;
        for (int v = 1; v < m->hp.n_vocab; v++)
            if (lg[v] > lg[best]) best = v;
        ids[n + g] = best;
        assert_int_equal(tf_context_eval(ctx, &ids[n + g], 1, NULL), TF_OK);
    }
    tf_context_free(ctx);
}

/* stories260K as an HF directory with a tokenizer.json derived from its
 * vocabulary: same tokens for a novel's text, same greedy continuation. */
static void test_stories260k_dir(void **state) {
    (void)state;
    TU_REQUIRE_SHARED(mpath, "models/stories260K/stories260K.gguf");
    char gguf[512];
    snprintf(gguf, sizeof gguf, "%s", mpath);
    TU_REQUIRE_SHARED(tpath, "text/pride_and_prejudice.txt");
    char *text = NULL;
    size_t len = 0;
    tf_err err = {0};
    assert_int_equal(tf_read_file(tpath, &text, &len, &err), TF_OK);
    if (len > 20000) len = 20000;
    tf_model *mg = load(gguf);
    char *tj = NULL, *tc = NULL;
    tu_hf_opts to = {0};
    assert_true(tu_hf_tokjson_from_gguf(&mg->gguf, &to, &tj, &tc));
    char dir[512];
    snprintf(dir, sizeof dir, "%s", tu_tmp_path("_stories"));
    hf_export_opts ex = {.tokenizer_json = tj, .n_shards = 2};
    assert_int_equal(hf_export(mg, dir, &ex), 0);
    tf_model *mh = load(dir);
    assert_non_null(mh->tok);
    size_t cap = len + 16, n1 = 0, n2 = 0;
    int32_t *a = malloc(sizeof(int32_t) * cap), *b = malloc(sizeof(int32_t) * cap);
    assert_int_equal(tf_tokenize(mg->tok, text, len, true, false, a, cap, &n1, &err), TF_OK);
    assert_int_equal(tf_tokenize(mh->tok, text, len, true, false, b, cap, &n2, &err), TF_OK);
    assert_int_equal(n1, n2);
    assert_memory_equal(a, b, sizeof(int32_t) * n1);
    int32_t g1[64], g2[64];
    size_t np = 0;
    assert_int_equal(tf_tokenize(mh->tok, "Once upon a time", 16, true, false, g1, 64, &np, &err), TF_OK);
    memcpy(g2, g1, sizeof(int32_t) * np);
    greedy(mg, g1, (int)np, 40);
    greedy(mh, g2, (int)np, 40);
    assert_memory_equal(g1, g2, sizeof(int32_t) * (np + 40));
    char piece[512] = "";
    size_t plen = 0;
    assert_int_equal(tf_detokenize(mh->tok, g2 + np, 40, false, piece, sizeof piece - 1, &plen, &err), TF_OK);
    piece[plen] = '\0';
    assert_non_null(strstr(piece, "there was a little girl named Lily"));
    /* the converted GGUF carries the tokenizer too */
    char out[512];
    snprintf(out, sizeof out, "%s", tu_tmp_path(".gguf"));
    assert_int_equal(tf_quantize_gguf(&mh->gguf, out, TF_DTYPE_F32, 1, NULL, NULL, NULL, &err), TF_OK);
    tf_model *mc = load(out);
    assert_non_null(mc->tok);
    assert_int_equal(tf_tokenize(mc->tok, text, len, true, false, b, cap, &n2, &err), TF_OK);
    assert_int_equal(n1, n2);
    assert_memory_equal(a, b, sizeof(int32_t) * n1);
    free(a);
    free(b);
    free(tj);
    free(tc);
    free(text);
    tf_model_close(mc);
    tf_model_close(mh);
    tf_model_close(mg);
    unlink(out);
    rm_rf(dir);
}

/* ---- malformed checkpoints ---- */

typedef struct bad_case {
    const char *label;
    const char *sed;        /* applied to config.json (NULL: none) */
    const char *shell;      /* run in the directory (NULL: none) */
    tf_status status;
    const char *needle1, *needle2;
} bad_case;

static void run_bad_cases(const hcase *hc, const bad_case *cases, size_t n_cases);

static void test_malformed(void **state) {
    (void)state;
    static const bad_case cases[] = {
        {"bad-json", "s/\"hidden_size\"/hidden_size/", NULL, TF_ERR_FORMAT, "config.json", "not valid JSON"},
        {"arch", "s/LlamaForCausalLM/GPTNeoXForCausalLM/", NULL, TF_ERR_UNSUPPORTED, "GPTNeoXForCausalLM",
         "LlamaForCausalLM"},
        {"no-hidden", "s/\"hidden_size\"/\"hidden_sighs\"/", NULL, TF_ERR_FORMAT, "hidden_size", "missing"},
        {"heads", "s/\"num_key_value_heads\":[[:space:]]*2/\"num_key_value_heads\": 3/", NULL, TF_ERR_FORMAT,
         "num_key_value_heads", "multiple"},
        {"layers", "s/\"num_hidden_layers\":[[:space:]]*2/\"num_hidden_layers\": 3/", NULL, TF_ERR_FORMAT,
         "model.layers.2.input_layernorm.weight", "missing"},
        {"fewer-layers", "s/\"num_hidden_layers\":[[:space:]]*2/\"num_hidden_layers\": 1/", NULL, TF_ERR_FORMAT,
         "model.layers.1.", "belongs to layer 1 but config.json says num_hidden_layers = 1"},
        {"shape", "s/\"intermediate_size\":[[:space:]]*96/\"intermediate_size\": 64/", NULL, TF_ERR_FORMAT,
         "mlp.gate_proj.weight", "expected [64, 64]"},
        {"yarn-attn", "s/\"rope_scaling\":[[:space:]]*null/\"rope_scaling\": {\"type\": \"yarn\", \"factor\": 1e6, "
         "\"original_max_position_embeddings\": 64, \"attention_factor\": 0.001}/", NULL, TF_ERR_FORMAT,
         "config.json: rope_scaling.attention_factor 0.001", "expected 1e-3..1e3"},
        {"rope", "s/\"rope_scaling\":[[:space:]]*null/\"rope_scaling\": {\"type\": \"longrope\", \"factor\": 2}/", NULL,
         TF_ERR_UNSUPPORTED, "longrope", "rope_scaling"},
        {"string-int", "s/\"num_hidden_layers\":[[:space:]]*2/\"num_hidden_layers\": \"2\"/", NULL, TF_ERR_FORMAT,
         "num_hidden_layers", "not a number"},
        {"fraction", "s/\"num_hidden_layers\":[[:space:]]*2/\"num_hidden_layers\": 2.5/", NULL, TF_ERR_FORMAT,
         "num_hidden_layers", "not an integer"},
        {"no-weights", NULL, "rm model.safetensors", TF_ERR_IO, "model.safetensors", "model.safetensors.index.json"},
        {"truncated", NULL, "truncate -s 1000 model.safetensors", TF_ERR_FORMAT, "model.safetensors", NULL},
        {"no-config", NULL, "rm config.json", TF_ERR_IO, "config.json", NULL},
        /* there but not a file: named for what it is, not reported missing (nor opened: a FIFO would block) */
        {"fifo-tokenizer", NULL, "rm -f tokenizer.json && mkfifo tokenizer.json", TF_ERR_IO,
         "tokenizer.json: is a FIFO (expected a regular file)", NULL},
        {"dir-config", NULL, "rm config.json && mkdir config.json", TF_ERR_IO,
         "config.json: is a directory (expected a regular file)", NULL},
        /* a Qwen2 config over llama weights: the biases it needs are missing */
        {"qwen2-no-bias", "s/LlamaForCausalLM/Qwen2ForCausalLM/", NULL, TF_ERR_FORMAT,
         "model.layers.0.self_attn.q_proj.bias", "missing"},
        {"sliding-window", "s/\"rope_scaling\":[[:space:]]*null/\"rope_scaling\": null, \"use_sliding_window\": true/",
         NULL, TF_ERR_UNSUPPORTED, "use_sliding_window = true", "config.json"},
    };
    hcase base = {{"base", 64, 2, 4, 2, 96, TF_ROPE_SCALING_NONE, 1, 0, false, TF_DTYPE_F32}, {0}};
    run_bad_cases(&base, cases, sizeof cases / sizeof cases[0]);
}

/* config.json is read as strictly as the Hugging Face library reads it
 * (Python's json): what cJSON alone would accept and mean differently is
 * refused. */
static void test_config_strictness(void **state) {
    (void)state;
    static const bad_case cases[] = {
        {"trailing", NULL, "printf '}' >> config.json", TF_ERR_FORMAT, "config.json",
         "more data after the top-level value"},
        {"nul", NULL, "printf '\\000' >> config.json", TF_ERR_FORMAT, "config.json", "byte 0x00 between values"},
        {"control", "s/^{/{\x01/", NULL, TF_ERR_FORMAT, "byte 0x01 between values", "line 1, column 2"},
        {"duplicate", "s/\"hidden_size\":/\"hidden_size\": 8, \"hidden_size\":/", NULL, TF_ERR_FORMAT,
         "key 'hidden_size' appears more than once in the top-level object", NULL},
        {"plus-number", "s/\"num_hidden_layers\":[[:space:]]*2/\"num_hidden_layers\": +2/", NULL, TF_ERR_FORMAT,
         "a malformed number", NULL},
        {"arch-string", "s/\"architectures\":[[:space:]]*\\[\\([^]]*\\)\\]/\"architectures\": \\1/", NULL,
         TF_ERR_FORMAT, "key 'architectures' is a string, not a list", NULL},
        {"arch-number", "s/\"architectures\":[[:space:]]*\\[\\([^]]*\\)\\]/\"architectures\": [7]/", NULL,
         TF_ERR_FORMAT, "architectures[0] is not a string", NULL},
    };
    hcase base = {{"base", 64, 2, 4, 2, 96, TF_ROPE_SCALING_NONE, 1, 0, false, TF_DTYPE_F32}, {0}};
    run_bad_cases(&base, cases, sizeof cases / sizeof cases[0]);
    /* a tied checkpoint (no lm_head.weight) whose config says it is not tied */
    static const bad_case untied[] = {
        {"untied-no-head", "s/^{/{\"tie_word_embeddings\": false,/", NULL, TF_ERR_FORMAT,
         "tie_word_embeddings = false but tensor 'lm_head.weight' is not in the checkpoint", NULL},
    };
    hcase tied = {{"tied", 64, 2, 4, 2, 96, TF_ROPE_SCALING_NONE, 1, 0, true, TF_DTYPE_F32}, {0}};
    run_bad_cases(&tied, untied, 1);
}

/* Export `base` as a directory once per case, damage it as the case says,
 * and expect loading to fail with the case's status and message. */
static void run_bad_cases(const hcase *hc, const bad_case *cases, size_t n_cases) {
    hcase base = *hc;
    const char *gpath = tu_gen(&base.g, tu_seed());
    char gguf[512];
    snprintf(gguf, sizeof gguf, "%s", gpath);
    tf_model *mg = load(gguf);
    for (size_t c = 0; c < n_cases; c++) {
        const bad_case *bc = &cases[c];
        char dir[512], cmd[1400];
        snprintf(dir, sizeof dir, "%s", tu_tmp_path("_bad"));
        assert_int_equal(hf_export(mg, dir, &base.ex), 0);
        if (bc->sed) {
            snprintf(cmd, sizeof cmd, "sed -i '%s' '%s/config.json'", bc->sed, dir);
            assert_int_equal(system(cmd), 0);
        }
        if (bc->shell) {
            snprintf(cmd, sizeof cmd, "cd '%s' && %s", dir, bc->shell);
            assert_int_equal(system(cmd), 0);
        }
        tf_model *m = NULL;
        char err[1024] = "";
        tf_status st = tf_model_load_file(&m, dir, NULL, err, sizeof err);
        bool ok = st == bc->status && strstr(err, bc->needle1) && (!bc->needle2 || strstr(err, bc->needle2));
        if (!ok) {
            print_error("%s: status %d (expected %d), message: %s\n", bc->label, st, bc->status, err);
            fail();
        }
        assert_null(m);
        rm_rf(dir);
    }
    tf_model_close(mg);
    unlink(gguf);
}

/* A weight stored in a dtype the engine cannot run is named with its dtype. */
static void test_unsupported_dtype(void **state) {
    (void)state;
    hcase base = {{"base", 64, 1, 4, 4, 96, TF_ROPE_SCALING_NONE, 1, 0, false, TF_DTYPE_F32}, {0}};
    const char *gpath = tu_gen(&base.g, tu_seed() + 5);
    char gguf[512], dir[512];
    snprintf(gguf, sizeof gguf, "%s", gpath);
    snprintf(dir, sizeof dir, "%s", tu_tmp_path("_i64"));
    tf_model *mg = load(gguf);
    assert_int_equal(hf_export(mg, dir, &base.ex), 0);
    /* rewrite the file with model.norm.weight as I64 */
    char path[700];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    tf_st_file f;
    tf_err err = {0};
    assert_int_equal(tf_st_open(&f, path, &err), TF_OK);
    st_entry *e = calloc(f.n_tensors, sizeof *e);
    void **copies = calloc(f.n_tensors, sizeof *copies);
    for (uint64_t i = 0; i < f.n_tensors; i++) {
        const tf_st_tensor *t = &f.tensors[i];
        copies[i] = malloc(t->nbytes + 8);
        memcpy(copies[i], t->data, t->nbytes);
        e[i] = (st_entry){.name = t->name, .dtype = t->dtype_name, .n_dims = (int)t->n_dims, .shape = t->shape,
                          .data = copies[i], .nbytes = t->nbytes};
        if (strcmp(t->name, "model.norm.weight") == 0) {
            e[i].dtype = "I64";
            e[i].nbytes = t->nbytes * 2;
            memset(copies[i], 0, t->nbytes);
            copies[i] = realloc(copies[i], e[i].nbytes);
            memset(copies[i], 0, e[i].nbytes);
            e[i].data = copies[i];
        }
    }
    char tmp[720];
    snprintf(tmp, sizeof tmp, "%s.new", path);
    assert_int_equal(st_write(tmp, e, f.n_tensors, NULL), 0);
    for (uint64_t i = 0; i < f.n_tensors; i++) free(copies[i]);
    free(copies);
    free(e);
    tf_st_close(&f);
    assert_int_equal(rename(tmp, path), 0);
    tf_model *m = NULL;
    char msg[1024] = "";
    assert_int_equal(tf_model_load_file(&m, dir, NULL, msg, sizeof msg), TF_ERR_UNSUPPORTED);
    assert_non_null(strstr(msg, "model.norm.weight"));
    assert_non_null(strstr(msg, "I64"));
    tf_model_close(mg);
    unlink(gguf);
    rm_rf(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_logits_equal_gguf),
        cmocka_unit_test(test_qwen2_dir),
        cmocka_unit_test(test_yarn_llama2_config),
        cmocka_unit_test(test_dynamic_rope_limits),
        cmocka_unit_test(test_stories260k_dir),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_config_strictness),
        cmocka_unit_test(test_unsupported_dtype),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
