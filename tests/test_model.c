/*
 * test_model.c — whole-model checks:
 *   - fast-path logits against the float64 reference forward (tests/common/
 *     ref_forward.c) on generated models of several shapes: MHA and GQA, tied
 *     and untied output, every RoPE scaling, f32 and f16 KV caches, one batch,
 *     several batches and token by token;
 *   - the same for qwen2 models (q/k/v biases, rotate-half RoPE) against the
 *     reference with Hugging Face's rotate-half RoPE and the biases, with
 *     negative controls (adjacent-pair RoPE, biases left out) that must fail;
 *   - the stories260K golden greedy continuation (../shared);
 *   - hostile model-level files: missing / mis-shaped tensors, unknown
 *     architecture, inconsistent head counts, vocabulary mismatch.
 */
#include "testutil.h"

#include "backend/cpu/backend_cpu.h"
#include "format/gguf_write.h"
#include "model/forward.h"
#include "model/gen.h"
#include "model/weights.h"
#include "gen_case.h"
#include "ref_forward.h"
#include "triforce.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Evaluate n tokens through the public API in batches of n_batch, collecting
 * every row's logits, and compare against the float64 reference. */
/* NMSE of the engine's logits lg[n][n_vocab] against the reference with opts o. */
static double nmse_vs(const tf_model *m, const float *lg, const int32_t *toks, int n, const ref_opts *o) {
    double *ref = ref_forward_opts(m, toks, n, o);
    double num = 0, den = 0;
    for (size_t i = 0; i < (size_t)n * m->hp.n_vocab; i++) {
        num += (lg[i] - ref[i]) * (lg[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    free(ref);
    return num / den;
}

static double run_nmse_opts(tf_model *m, const int32_t *toks, int n, int n_batch, tf_kv_type kv, int isa, int threads,
                            const ref_opts *o, float **lg_out) {
    tf_context_params cp = tf_context_default_params();
    cp.n_ctx = 64;
    cp.n_batch = n_batch;
    cp.n_threads = threads;
    cp.kv_type = kv;
    cp.logits_all = true;
    cp.isa = isa;
    tf_context *ctx;
    char err[512];
    assert_int_equal(tf_context_init(&ctx, m, &cp, err, sizeof err), TF_OK);
    tf_model_info info;
    tf_model_get_info(m, &info);
    float *lg = malloc(sizeof(float) * (size_t)n * info.n_vocab);
    assert_int_equal(tf_context_eval(ctx, toks, n, lg), TF_OK);
    double *ref = ref_forward_opts(m, toks, n, o);
    double num = 0, den = 0;
    for (size_t i = 0; i < (size_t)n * info.n_vocab; i++) {
        assert_true(isfinite(lg[i]));
        num += (lg[i] - ref[i]) * (lg[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    /* logits must not be degenerate (all equal) or the comparison proves little */
    double spread = 0;
    for (int v = 1; v < info.n_vocab; v++) spread += fabs(ref[v] - ref[0]);
    assert_true(spread > 1e-3 * info.n_vocab);
    free(ref);
    if (lg_out) *lg_out = lg;
    else free(lg);
    tf_context_free(ctx);
    return num / den;
}

static double run_nmse(tf_model *m, const int32_t *toks, int n, int n_batch, tf_kv_type kv, int isa, int threads) {
    ref_opts o = {0};
    return run_nmse_opts(m, toks, n, n_batch, kv, isa, threads, &o, NULL);
}

static void test_logits_vs_reference(void **state) {
    (void)state;
    static const tu_gen_case cases[] = {
        {"mha-untied", 64, 2, 4, 4, 96, TF_ROPE_SCALING_NONE, 1, 0, false, TF_DTYPE_F32},
        {"gqa-tied", 64, 2, 8, 2, 160, TF_ROPE_SCALING_NONE, 1, 0, true, TF_DTYPE_F32},
        {"gqa-linear", 128, 2, 4, 2, 128, TF_ROPE_SCALING_LINEAR, 4, 0, false, TF_DTYPE_F32},
        {"mqa-yarn", 128, 2, 4, 1, 128, TF_ROPE_SCALING_YARN, 8, 64, false, TF_DTYPE_F32},
        {"gqa-llama3", 128, 2, 2, 1, 128, TF_ROPE_SCALING_LLAMA3, 8, 64, true, TF_DTYPE_F32},
        {"hd8-f16w", 64, 3, 8, 4, 96, TF_ROPE_SCALING_NONE, 1, 0, false, TF_DTYPE_F16},
        {"q8_0", 128, 2, 4, 2, 128, TF_ROPE_SCALING_NONE, 1, 0, false, TF_DTYPE_Q8_0},
        {"q4_0", 128, 2, 4, 2, 128, TF_ROPE_SCALING_YARN, 4, 128, true, TF_DTYPE_Q4_0},
        {"q4_1", 128, 2, 4, 2, 128, TF_ROPE_SCALING_NONE, 1, 0, true, TF_DTYPE_Q4_1},
        {"q4_k", 256, 1, 4, 2, 256, TF_ROPE_SCALING_NONE, 1, 0, false, TF_DTYPE_Q4_K},
        {"q6_k", 256, 1, 4, 4, 256, TF_ROPE_SCALING_LINEAR, 2, 0, true, TF_DTYPE_Q6_K},
        {"q5_0", 128, 2, 4, 2, 128, TF_ROPE_SCALING_NONE, 1, 0, false, TF_DTYPE_Q5_0},
        {"q5_1", 128, 2, 4, 2, 128, TF_ROPE_SCALING_NONE, 1, 0, true, TF_DTYPE_Q5_1},
        {"q2_k", 256, 1, 4, 2, 256, TF_ROPE_SCALING_NONE, 1, 0, true, TF_DTYPE_Q2_K},
        {"q3_k", 256, 1, 4, 4, 256, TF_ROPE_SCALING_NONE, 1, 0, false, TF_DTYPE_Q3_K},
        {"q5_k", 256, 1, 4, 2, 256, TF_ROPE_SCALING_LINEAR, 2, 0, false, TF_DTYPE_Q5_K},
        {"iq4_nl", 128, 2, 4, 2, 128, TF_ROPE_SCALING_NONE, 1, 0, true, TF_DTYPE_IQ4_NL},
        {"iq4_xs", 256, 1, 4, 2, 256, TF_ROPE_SCALING_NONE, 1, 0, false, TF_DTYPE_IQ4_XS},
        {"bf16", 64, 2, 4, 2, 96, TF_ROPE_SCALING_NONE, 1, 0, false, TF_DTYPE_BF16},
    };
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed());
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const tu_gen_case *gc = &cases[c];
        const char *path = tu_gen(gc, tu_seed() + c);
        tf_model *m;
        char err[512];
        if (tf_model_load_file(&m, path, NULL, err, sizeof err) != TF_OK) {
            print_error("%s: %s\n", gc->label, err);
            fail();
        }
        int32_t toks[40];
        for (int i = 0; i < 40; i++) toks[i] = (int32_t)(tf_rng_next(&rng) % 300);
        /* f32 weights: only float rounding separates the paths; quantized weights
         * add activation quantization in the fast path (q8_0 activations). */
        bool fw = gc->wtype == TF_DTYPE_F32 || gc->wtype == TF_DTYPE_F16 || gc->wtype == TF_DTYPE_BF16;
        double tol32 = gc->wtype == TF_DTYPE_F32 ? 1e-9 : fw ? 1e-6 : 2e-3;
        double tol16 = fw ? 2e-5 : 3e-3;
        struct { int batch; tf_kv_type kv; int isa; int threads; double tol; } runs[] = {
            {40, TF_KV_F32, 0, 2, tol32}, {7, TF_KV_F32, 0, 1, tol32}, {1, TF_KV_F32, 0, 2, tol32},
            {40, TF_KV_F16, 0, 2, tol16}, {13, TF_KV_F32, 1, 2, tol32}, {40, TF_KV_F32, 2, 1, tol32},
        };
        for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
            double nmse = run_nmse(m, toks, 40, runs[r].batch, runs[r].kv, runs[r].isa, runs[r].threads);
            if (!(nmse <= runs[r].tol)) {
                print_error("%s: batch %d kv %d isa %d: logits NMSE %g > %g\n", gc->label, runs[r].batch,
                            runs[r].kv, runs[r].isa, nmse, runs[r].tol);
                fail();
            }
        }
        tf_model_close(m);
        unlink(path);
    }
}

/* qwen2: GQA with q/k/v biases, tied and untied, with and without YaRN,
 * against the float64 reference with rotate-half RoPE (Hugging Face's
 * definition) and the biases. Two negative controls must fail on the same
 * logits: the reference with adjacent-pair RoPE (the GGUF llama layout) and
 * the reference without the biases. */
static void test_qwen2_vs_reference(void **state) {
    (void)state;
    static const tu_gen_case cases[] = {
        {"qwen2-gqa-untied", 64, 2, 8, 2, 160, TF_ROPE_SCALING_NONE, 1, 0, false, TF_DTYPE_F32},
        {"qwen2-gqa-tied", 64, 2, 4, 2, 96, TF_ROPE_SCALING_NONE, 1, 0, true, TF_DTYPE_F32},
        {"qwen2-mqa-yarn-tied", 128, 2, 4, 1, 128, TF_ROPE_SCALING_YARN, 4, 64, true, TF_DTYPE_F32},
        {"qwen2-yarn-untied-f16", 128, 2, 8, 2, 128, TF_ROPE_SCALING_YARN, 8, 32, false, TF_DTYPE_F16},
        {"qwen2-q8_0", 128, 2, 4, 2, 128, TF_ROPE_SCALING_NONE, 1, 0, true, TF_DTYPE_Q8_0},
    };
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() + 99);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const tu_gen_case *gc = &cases[c];
        const char *path = tu_gen_arch(gc, TF_ARCH_QWEN2, tu_seed() + 50 + c);
        tf_model *m;
        char err[512];
        if (tf_model_load_file(&m, path, NULL, err, sizeof err) != TF_OK) {
            print_error("%s: %s\n", gc->label, err);
            fail();
        }
        tf_model_info info;
        tf_model_get_info(m, &info);
        assert_string_equal(info.arch, "qwen2");
        assert_true(info.rope_neox && info.qkv_bias);
        assert_int_equal(info.tied_output, gc->tied);
        int32_t toks[40];
        for (int i = 0; i < 40; i++) toks[i] = (int32_t)(tf_rng_next(&rng) % 300);
        bool fw = gc->wtype == TF_DTYPE_F32 || gc->wtype == TF_DTYPE_F16;
        double tol32 = gc->wtype == TF_DTYPE_F32 ? 1e-9 : fw ? 1e-6 : 2e-3;
        double tol16 = fw ? 2e-5 : 3e-3;
        struct { int batch; tf_kv_type kv; int isa; int threads; double tol; } runs[] = {
            {40, TF_KV_F32, 0, 2, tol32}, {7, TF_KV_F32, 0, 1, tol32}, {1, TF_KV_F32, 0, 2, tol32},
            {40, TF_KV_F16, 0, 2, tol16}, {13, TF_KV_F32, 1, 2, tol32},
        };
        const ref_opts hf = {.rotate_half = true};
        for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
            float *lg = NULL;
            double nmse = run_nmse_opts(m, toks, 40, runs[r].batch, runs[r].kv, runs[r].isa, runs[r].threads, &hf,
                                        r == 0 ? &lg : NULL);
            if (!(nmse <= runs[r].tol)) {
                print_error("%s: batch %d kv %d isa %d: logits NMSE %g > %g\n", gc->label, runs[r].batch,
                            runs[r].kv, runs[r].isa, nmse, runs[r].tol);
                fail();
            }
            if (r != 0) continue;
            /* negative controls on the same logits: each must miss by far */
            const ref_opts adjacent = {.rotate_half = false}, no_bias = {.rotate_half = true, .no_bias = true};
            double e_adj = nmse_vs(m, lg, toks, 40, &adjacent), e_nob = nmse_vs(m, lg, toks, 40, &no_bias);
            print_message("%s: NMSE %.3g; controls: adjacent-pair RoPE %.3g, no biases %.3g\n", gc->label, nmse,
                          e_adj, e_nob);
            if (!(e_adj > 1e-3 && e_nob > 1e-3)) {
                print_error("%s: a negative control passed (adjacent-pair RoPE %g, no biases %g): the comparison "
                            "cannot tell\n", gc->label, e_adj, e_nob);
                fail();
            }
            free(lg);
        }
        tf_model_close(m);
        unlink(path);
    }
}

/* Two model handles and three contexts in one process, stepped in turns, give
 * exactly the tokens each gives alone: no state is shared through globals. */
static void greedy_steps(tf_context *ctx, const tf_model *m, tf_sampler *s, int32_t *out, int n) {
    for (int i = 0; i < n; i++) {
        out[i] = tf_sampler_sample(s, tf_context_logits(ctx));
        assert_int_equal(tf_context_eval(ctx, &out[i], 1, NULL), TF_OK);
    }
    (void)m;
}

static void test_side_by_side(void **state) {
    (void)state;
    tu_gen_case c = {"side", 64, 2, 4, 2, 96, TF_ROPE_SCALING_NONE, 1, 0, false, TF_DTYPE_F32};
    char pa[512], pb[512];
    snprintf(pa, sizeof pa, "%s", tu_gen(&c, 11));
    snprintf(pb, sizeof pb, "%s", tu_gen(&c, 12));
    tf_model *ma, *mb;
    char err[512];
    assert_int_equal(tf_model_load_file(&ma, pa, NULL, err, sizeof err), TF_OK);
    assert_int_equal(tf_model_load_file(&mb, pb, NULL, err, sizeof err), TF_OK);
    const tf_model *models[3] = {ma, ma, mb};
    int32_t prompts[3][4] = {{1, 5, 9, 13}, {1, 7, 7, 2}, {1, 5, 9, 13}};
    int32_t alone[3][12], together[3][12];
    tf_sampler_params sp = tf_sampler_default_params();
    sp.temp = 0;
    tf_context_params cp = tf_context_default_params();
    cp.n_ctx = 32;
    cp.n_threads = 2;
    for (int r = 0; r < 2; r++) {
        tf_context *ctx[3];
        tf_sampler *smp[3];
        for (int i = 0; i < 3; i++) {
            assert_int_equal(tf_context_init(&ctx[i], models[i], &cp, err, sizeof err), TF_OK);
            assert_int_equal(tf_sampler_init(&smp[i], models[i], &sp, err, sizeof err), TF_OK);
            assert_int_equal(tf_context_eval(ctx[i], prompts[i], 4, NULL), TF_OK);
        }
        if (r == 0) {
            for (int i = 0; i < 3; i++) greedy_steps(ctx[i], models[i], smp[i], alone[i], 12);
        } else {
            for (int k = 0; k < 12; k++)
                for (int i = 0; i < 3; i++) greedy_steps(ctx[i], models[i], smp[i], &together[i][k], 1);
        }
        for (int i = 0; i < 3; i++) {
            tf_sampler_free(smp[i]);
            tf_context_free(ctx[i]);
        }
    }
    assert_memory_equal(alone, together, sizeof alone);
    /* different weights, same prompt: the runs must not all coincide (sanity of the check) */
    assert_true(memcmp(alone[0], alone[2], sizeof alone[0]) != 0);
    tf_model_close(ma);
    tf_model_close(mb);
    unlink(pa);
    unlink(pb);
}

typedef struct prog { int calls; uint64_t last_done, last_total; int cancel_at; } prog;

static bool on_progress(void *ud, uint64_t done, uint64_t total) {
    prog *p = ud;
    p->calls++;
    assert_true(done <= total);
    assert_true(done >= p->last_done);
    p->last_done = done;
    p->last_total = total;
    return p->cancel_at == 0 || p->calls < p->cancel_at;
}

/* Loading and prefill report progress to the end and can be cancelled; a
 * cancelled prefill keeps what it evaluated and the context stays usable. */
static void test_progress_and_cancel(void **state) {
    (void)state;
    tu_gen_case c = {"prog", 64, 2, 4, 2, 96, TF_ROPE_SCALING_NONE, 1, 0, false, TF_DTYPE_F32};
    char path[512];
    snprintf(path, sizeof path, "%s", tu_gen(&c, 21));
    tf_model_params mp = tf_model_default_params();
    prog lp = {0};
    mp.progress = on_progress;
    mp.progress_user_data = &lp;
    tf_model *m;
    char err[512];
    assert_int_equal(tf_model_load_file(&m, path, &mp, err, sizeof err), TF_OK);
    assert_true(lp.calls >= 1);
    assert_true(lp.last_done == lp.last_total && lp.last_total > 0);
    tf_model *m2 = (tf_model *)1;
    prog cancel = {.cancel_at = 1};
    mp.progress_user_data = &cancel;
    assert_int_equal(tf_model_load_file(&m2, path, &mp, err, sizeof err), TF_ERR_CANCELLED);
    assert_null(m2);
    assert_non_null(strstr(err, "cancelled"));

    prog pp = {.cancel_at = 2};
    tf_context_params cp = tf_context_default_params();
    cp.n_ctx = 64;
    cp.n_batch = 8;
    cp.progress = on_progress;
    cp.progress_user_data = &pp;
    tf_context *ctx;
    assert_int_equal(tf_context_init(&ctx, m, &cp, err, sizeof err), TF_OK);
    int32_t toks[40];
    for (int i = 0; i < 40; i++) toks[i] = (i * 7) % 300;
    assert_int_equal(tf_context_eval(ctx, toks, 40, NULL), TF_ERR_CANCELLED);
    assert_int_equal(tf_context_n_past(ctx), 16); /* two batches of 8 done */
    assert_non_null(strstr(tf_context_error(ctx), "cancelled"));
    pp.cancel_at = 0;
    pp.last_done = 0; /* progress counts per call */
    assert_int_equal(tf_context_eval(ctx, toks + 16, 24, NULL), TF_OK);
    assert_int_equal(tf_context_n_past(ctx), 40);
    /* too long for the context: nothing appended */
    assert_int_equal(tf_context_eval(ctx, toks, 25, NULL), TF_ERR_RANGE);
    assert_int_equal(tf_context_n_past(ctx), 40);
    assert_non_null(strstr(tf_context_error(ctx), "do not fit"));
    tf_context_free(ctx);
    tf_model_close(m);
    unlink(path);
}

/* tf_context_fill_random: the cache holds n positions afterwards, a pass over
 * it gives finite logits, the fill is reproducible from its seed (the same
 * logits twice), and sizes outside 0..n_ctx are refused with a message. */
static void test_fill_random(void **state) {
    (void)state;
    tu_gen_case c = {"fill", 64, 2, 4, 2, 96, TF_ROPE_SCALING_NONE, 1, 0, false, TF_DTYPE_F32};
    char path[512], err[512];
    snprintf(path, sizeof path, "%s", tu_gen(&c, 31));
    tf_model *m;
    assert_int_equal(tf_model_load_file(&m, path, NULL, err, sizeof err), TF_OK);
    tf_model_info in;
    tf_model_get_info(m, &in);
    for (int kv = 0; kv < 2; kv++) {
        tf_context_params cp = tf_context_default_params();
        cp.n_ctx = 100;
        cp.n_batch = 4;
        cp.kv_type = kv ? TF_KV_F16 : TF_KV_F32;
        tf_context *ctx;
        assert_int_equal(tf_context_init(&ctx, m, &cp, err, sizeof err), TF_OK);
        int32_t toks[4] = {5, 17, 3, 40};
        float *first = malloc(sizeof(float) * (size_t)in.n_vocab);
        for (int rep = 0; rep < 2; rep++) {
            assert_int_equal(tf_context_fill_random(ctx, 90, 7), TF_OK);
            assert_int_equal(tf_context_n_past(ctx), 90);
            assert_int_equal(tf_context_eval(ctx, toks, 4, NULL), TF_OK);
            assert_int_equal(tf_context_n_past(ctx), 94);
            const float *lg = tf_context_logits(ctx);
            for (int i = 0; i < in.n_vocab; i++) assert_true(isfinite(lg[i]));
            if (rep == 0) memcpy(first, lg, sizeof(float) * (size_t)in.n_vocab);
            else assert_memory_equal(first, lg, sizeof(float) * (size_t)in.n_vocab);
        }
        free(first);
        assert_int_equal(tf_context_fill_random(ctx, 101, 7), TF_ERR_RANGE);
        assert_non_null(strstr(tf_context_error(ctx), "do not fit"));
        assert_int_equal(tf_context_fill_random(ctx, -1, 7), TF_ERR_INVALID_ARG);
        assert_int_equal(tf_context_fill_random(ctx, 0, 7), TF_OK);
        assert_int_equal(tf_context_n_past(ctx), 0);
        tf_context_free(ctx);
    }
    tf_model_close(m);
    unlink(path);
}

/* The CPU backend's packed copies of the weights are made once per model:
 * two sets of weights and a layer view share them (the model's cache does not
 * grow), they hold other bytes than the file's rows (512 columns: a group
 * each; the AMX table's R16 groups of 16 rows likewise) and unpack to
 * them, and a tied output is the packed embedding. */
static void test_packed_weights_shared(void **state) {
    (void)state;
    tu_gen_case c = {"wpack", 512, 2, 8, 2, 512, TF_ROPE_SCALING_NONE, 1, 0, true, TF_DTYPE_Q4_1};
    char path[512], err[512];
    snprintf(path, sizeof path, "%s", tu_gen(&c, 37));
    tf_model *m;
    assert_int_equal(tf_model_load_file(&m, path, NULL, err, sizeof err), TF_OK);
    tf_err e = {0};
    tf_pool *pool;
    assert_int_equal(tf_pool_create(&pool, 2, &e), TF_OK);
    tf_backend be;
    assert_int_equal(tf_backend_cpu_init(&be, pool, TF_ISA_BEST, &e), TF_OK);
    if (!be.ops->weight_layout(&be, TF_DTYPE_Q4_1)) {
        tf_backend_free(&be);
        tf_pool_free(pool);
        tf_model_close(m);
        unlink(path);
        print_message("skipped: this CPU's kernels read Q4_1 in the file's layout (no AVX512-VNNI)\n");
        skip();
    }
    tf_bweights w1, w2, w3;
    assert_int_equal(tf_bweights_init(&w1, &be, m, &e), TF_OK);
    const int32_t n_packed = m->n_wpack;
    assert_true(n_packed >= 2 * TF_LAYER_MATS);
    assert_int_equal(tf_bweights_init(&w2, &be, m, &e), TF_OK);
    assert_int_equal(m->n_wpack, n_packed);
    const tf_bmat *q1 = &w1.layers[1].wq;
    assert_true(q1->layout != 0 && q1->data != m->layers[1].wq.data);
    assert_ptr_equal(w2.layers[1].wq.data, q1->data);
    assert_ptr_equal(w1.output.data, w1.tok_embd.data);
    size_t row = tf_dtype_row_size(TF_DTYPE_Q4_1, 512);
    uint8_t back[1024];
    assert_true(row <= sizeof back);
    assert_true(memcmp(q1->data, m->layers[1].wq.data, row) != 0);
    if (q1->layout == TF_WLAYOUT_R16) /* the AMX table's row-interleaved groups */
        tf_weight_r16_unpack_blocks(TF_DTYPE_Q4_1, q1->data, q1->n_rows, 512, 0, 0, 512 / 32, back);
    else
        tf_weight_unpack_row(TF_DTYPE_Q4_1, q1->data, back, 512);
    assert_memory_equal(back, m->layers[1].wq.data, row);
    tf_model *view;
    assert_int_equal(tf_model_view_layers(&view, m, 1, &e), TF_OK);
    assert_int_equal(tf_bweights_init(&w3, &be, view, &e), TF_OK);
    assert_ptr_equal(w3.layers[0].wq.data, w1.layers[0].wq.data);
    assert_int_equal(m->n_wpack, n_packed);
    tf_bweights_free(&w3);
    tf_model_free(view);
    tf_bweights_free(&w2);
    tf_bweights_free(&w1);
    tf_backend_free(&be);
    tf_pool_free(pool);
    tf_model_close(m);
    unlink(path);
}

/* tf_context_init_on: TF_DEVICE_CPU is tf_context_init bit for bit (and so is
 * AUTO where no GPU can be used); CUDA without a usable device, and a value
 * outside the enum, are refused with a message; with a GPU the device's
 * logits agree with the CPU's to rounding. */
static void test_context_devices(void **state) {
    (void)state;
    tu_gen_case c = {"devices", 64, 2, 4, 2, 96, TF_ROPE_SCALING_NONE, 1, 0, false, TF_DTYPE_F16};
    char path[512], err[512];
    snprintf(path, sizeof path, "%s", tu_gen(&c, 41));
    tf_model *m;
    assert_int_equal(tf_model_load_file(&m, path, NULL, err, sizeof err), TF_OK);
    tf_model_info in;
    tf_model_get_info(m, &in);
    tf_context_params cp = tf_context_default_params();
    cp.n_ctx = 32;
    cp.n_batch = 8;
    cp.logits_all = true;
    int32_t toks[12];
    for (int i = 0; i < 12; i++) toks[i] = 3 + (i * 7) % 90;
    const size_t nl = 12 * (size_t)in.n_vocab;
    float *ref = malloc(sizeof(float) * nl), *got = malloc(sizeof(float) * nl);
    tf_context *ctx;
    assert_int_equal(tf_context_init(&ctx, m, &cp, err, sizeof err), TF_OK);
    assert_int_equal(tf_context_eval(ctx, toks, 12, ref), TF_OK);
    tf_context_free(ctx);
    const tf_device devs[] = {TF_DEVICE_CPU, TF_DEVICE_AUTO, TF_DEVICE_CUDA};
    for (int d = 0; d < 3; d++) {
        bool gpu = tf_cuda_devices() > 0;
        tf_status st = tf_context_init_on(&ctx, m, &cp, devs[d], err, sizeof err);
        if (devs[d] == TF_DEVICE_CUDA && !gpu) {
            assert_int_equal(st, TF_ERR_UNSUPPORTED);
            assert_non_null(strstr(err, "CUDA"));
            continue;
        }
        assert_int_equal(st, TF_OK);
        assert_int_equal(tf_context_eval(ctx, toks, 12, got), TF_OK);
        if (devs[d] == TF_DEVICE_CPU || !gpu) {
            assert_memory_equal(got, ref, sizeof(float) * nl);
        } else {
            double num = 0, den = 0;
            for (size_t i = 0; i < nl; i++) {
                assert_true(isfinite(got[i]));
                num += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
                den += (double)ref[i] * ref[i];
            }
            if (num / den > 1e-4) {
                print_error("context on %s: NMSE %g against the CPU\n", tf_device_name(devs[d]), num / den);
                fail();
            }
        }
        tf_context_free(ctx);
    }
    assert_int_equal(tf_context_init_on(&ctx, m, &cp, (tf_device)7, err, sizeof err), TF_ERR_INVALID_ARG);
    assert_non_null(strstr(err, "device 7"));
    free(ref), free(got);
    tf_model_close(m);
    unlink(path);
}

/* Logits of n tokens evaluated in one batch equal, bit for bit, those of the
 * same tokens decoded one at a time after the same prefill: the target's
 * verification pass must reproduce autoregressive decoding exactly for greedy
 * speculative decoding to be lossless. The prompt crosses a 1024-slot split. */
static void test_batch_invariant_logits(void **state) {
    (void)state;
    static const tf_dtype types[] = {TF_DTYPE_F32,  TF_DTYPE_F16,  TF_DTYPE_Q8_0,   TF_DTYPE_Q4_0, TF_DTYPE_Q4_1,
                                     TF_DTYPE_Q4_K, TF_DTYPE_IQ4_XS, TF_DTYPE_F32, TF_DTYPE_F16,  TF_DTYPE_F16};
    /* n_embd: 256, then float rows wide enough for the products to sum them in
     * column chunks (F32 1,024 and F16 2,048 columns on AVX-512) */
    static const int embd[] = {256, 256, 256, 256, 256, 256, 256, 1024, 2048, 256};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const int wide = embd[ti] > 256;
        tu_gen_case c = {"inv", embd[ti], 2, wide ? 16 : 4, wide ? 4 : 2, 256, TF_ROPE_SCALING_NONE, 1, 0, false,
                         types[ti]};
        /* the last: a qwen2 model (biases, rotate-half RoPE) */
        tf_arch arch = ti + 1 == sizeof types / sizeof types[0] ? TF_ARCH_QWEN2 : TF_ARCH_LLAMA;
        char path[512];
        snprintf(path, sizeof path, "%s", tu_gen_arch(&c, arch, 31 + ti));
        tf_model *m;
        char err[512];
        assert_int_equal(tf_model_load_file(&m, path, NULL, err, sizeof err), TF_OK);
        enum { P = 1020, N = 9 };
        static int32_t toks[P + N];
        for (int i = 0; i < P + N; i++) toks[i] = (i * 131 + 7) % 300;
        tf_context_params cp = tf_context_default_params();
        cp.n_ctx = P + N;
        cp.n_threads = 2;
        cp.kv_type = ti % 2 ? TF_KV_F16 : TF_KV_F32;
        tf_context *one, *batch;
        assert_int_equal(tf_context_init(&one, m, &cp, err, sizeof err), TF_OK);
        cp.logits_all = true;
        cp.n_batch = 64;
        assert_int_equal(tf_context_init(&batch, m, &cp, err, sizeof err), TF_OK);
        assert_int_equal(tf_context_eval(one, toks, P, NULL), TF_OK);
        float *lb = malloc(sizeof(float) * (P + N) * 300);
        assert_int_equal(tf_context_eval(batch, toks, P, lb), TF_OK);
        assert_int_equal(tf_context_eval(batch, toks + P, N, lb), TF_OK);
        for (int i = 0; i < N; i++) {
            assert_int_equal(tf_context_eval(one, toks + P + i, 1, NULL), TF_OK);
            if (memcmp(tf_context_logits(one), lb + (size_t)i * 300, sizeof(float) * 300) != 0) {
                print_error("%s, n_embd %d: row %d of the batch differs from single-token decode\n",
                            tf_dtype_name(types[ti]), embd[ti], i);
                fail();
            }
        }
        free(lb);
        tf_context_free(one);
        tf_context_free(batch);
        tf_model_close(m);
        unlink(path);
    }
}

/* The scaling metadata written by the generator is read back as written. */
static void test_rope_metadata(void **state) {
    (void)state;
    tu_gen_case c = {"yarn", 64, 1, 4, 2, 64, TF_ROPE_SCALING_YARN, 32, 4096, false, TF_DTYPE_F32};
    const char *path = tu_gen(&c, 7);
    tf_model *m;
    char err[512];
    assert_int_equal(tf_model_load_file(&m, path, NULL, err, sizeof err), TF_OK);
    tf_model_info in;
    tf_model_get_info(m, &in);
    assert_string_equal(in.rope_scaling, "yarn");
    assert_true(in.rope_factor == 32.0f);
    assert_int_equal(in.rope_orig_ctx, 4096);
    assert_int_equal(in.n_head_kv, 2);
    tf_model_close(m);
    unlink(path);
}

/* A model extended with tf_model_extend_context computes, bit for bit, what
 * the same weights do when the file itself declares that scaling (linear and
 * yarn by 4 over the 256 trained positions), at the last of 600 positions;
 * and the extension is refused where it cannot apply. */
static void test_extend_context(void **state) {
    (void)state;
    static const tf_rope_scaling kinds[] = {TF_ROPE_SCALING_LINEAR, TF_ROPE_SCALING_YARN};
    static const char *const names[] = {"linear", "yarn"};
    enum { N = 600 };
    static int32_t toks[N];
    for (int i = 0; i < N; i++) toks[i] = (i * 37 + 11) % 300;
    for (int k = 0; k < 2; k++) {
        tu_gen_case scaled = {"scaled", 64, 2, 4, 2, 128, kinds[k], 4, 256, false, TF_DTYPE_F32};
        tu_gen_case plain = {"plain", 64, 2, 4, 2, 128, TF_ROPE_SCALING_NONE, 1, 0, false, TF_DTYPE_F32};
        char ps[512], pp[512];
        snprintf(ps, sizeof ps, "%s", tu_gen(&scaled, 77));
        snprintf(pp, sizeof pp, "%s", tu_gen(&plain, 77));
        tf_model *a, *b;
        char err[512];
        assert_int_equal(tf_model_load_file(&a, ps, NULL, err, sizeof err), TF_OK);
        assert_int_equal(tf_model_load_file(&b, pp, NULL, err, sizeof err), TF_OK);
        assert_int_equal(tf_model_extend_context(b, names[k], 4.0f, err, sizeof err), TF_OK);
        tf_model_info ib;
        tf_model_get_info(b, &ib);
        assert_string_equal(ib.rope_scaling, names[k]);
        assert_int_equal(ib.n_ctx_train, 1024);
        assert_int_equal(ib.rope_orig_ctx, 256);
        float *la = malloc(sizeof(float) * 300), *lb = malloc(sizeof(float) * 300);
        tf_context_params cp = tf_context_default_params();
        cp.n_ctx = N;
        cp.n_threads = 1;
        tf_context *ca, *cb;
        assert_int_equal(tf_context_init(&ca, a, &cp, err, sizeof err), TF_OK);
        assert_int_equal(tf_context_init(&cb, b, &cp, err, sizeof err), TF_OK);
        assert_int_equal(tf_context_eval(ca, toks, N, NULL), TF_OK);
        assert_int_equal(tf_context_eval(cb, toks, N, NULL), TF_OK);
        memcpy(la, tf_context_logits(ca), sizeof(float) * 300);
        memcpy(lb, tf_context_logits(cb), sizeof(float) * 300);
        assert_memory_equal(la, lb, sizeof(float) * 300);
        /* and the scaling matters: the unscaled model differs at that position */
        tf_model *c;
        assert_int_equal(tf_model_load_file(&c, pp, NULL, err, sizeof err), TF_OK);
        tf_context *cc;
        assert_int_equal(tf_context_init(&cc, c, &cp, err, sizeof err), TF_OK);
        assert_int_equal(tf_context_eval(cc, toks, N, NULL), TF_OK);
        assert_true(memcmp(la, tf_context_logits(cc), sizeof(float) * 300) != 0);
        tf_context_free(cc);
        /* refused: a second extension, a factor of 1 or past 64, another kind, a layer view */
        assert_int_equal(tf_model_extend_context(b, names[k], 2.0f, err, sizeof err), TF_ERR_INVALID_ARG);
        assert_non_null(strstr(err, "already scales RoPE"));
        assert_int_equal(tf_model_extend_context(c, "linear", 1.0f, err, sizeof err), TF_ERR_INVALID_ARG);
        assert_non_null(strstr(err, "more than 1"));
        assert_int_equal(tf_model_extend_context(c, "yarn", 65.0f, err, sizeof err), TF_ERR_INVALID_ARG);
        assert_int_equal(tf_model_extend_context(c, "ntk", 2.0f, err, sizeof err), TF_ERR_INVALID_ARG);
        assert_non_null(strstr(err, "expected linear or yarn"));
        tf_model *v;
        assert_int_equal(tf_model_layer_view(&v, c, 1, err, sizeof err), TF_OK);
        assert_int_equal(tf_model_extend_context(v, "yarn", 2.0f, err, sizeof err), TF_ERR_INVALID_ARG);
        assert_non_null(strstr(err, "layer view"));
        tf_model_close(v);
        free(la);
        free(lb);
        tf_context_free(ca);
        tf_context_free(cb);
        tf_model_close(a);
        tf_model_close(b);
        tf_model_close(c);
        unlink(ps);
        unlink(pp);
    }
}

static void test_stories260k_greedy(void **state) {
    (void)state;
    TU_REQUIRE_SHARED(path, "models/stories260K/stories260K.gguf");
    static const char *expected =
        "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she "
        "saw a big, red ball. She wanted to play with it, but it was too high.";
    for (int kvt = 0; kvt < 2; kvt++) {
        tf_model *m;
        char err[512];
        assert_int_equal(tf_model_load_file(&m, path, NULL, err, sizeof err), TF_OK);
        tf_context_params cp = tf_context_default_params();
        cp.n_ctx = 256;
        cp.n_threads = 2;
        cp.kv_type = kvt ? TF_KV_F32 : TF_KV_F16;
        tf_context *ctx;
        assert_int_equal(tf_context_init(&ctx, m, &cp, err, sizeof err), TF_OK);
        const char *prompt = "Once upon a time";
        int32_t toks[256];
        size_t n;
        assert_int_equal(tf_model_tokenize(m, prompt, strlen(prompt), true, false, toks, 256, &n), TF_OK);
        assert_int_equal(toks[0], tf_model_bos(m));
        assert_int_equal(tf_context_eval(ctx, toks, (int32_t)n, NULL), TF_OK);
        char text[2048];
        size_t len = strlen(prompt);
        memcpy(text, prompt, len);
        tf_sampler_params sp = tf_sampler_default_params();
        sp.temp = 0;
        tf_sampler *s;
        assert_int_equal(tf_sampler_init(&s, m, &sp, err, sizeof err), TF_OK);
        while (len < strlen(expected)) {
            int32_t t = tf_sampler_sample(s, tf_context_logits(ctx));
            int32_t np = tf_model_token_to_piece(m, t, false, text + len, (int32_t)(sizeof text - len - 1));
            assert_true(np >= 0);
            len += (size_t)np;
            assert_int_equal(tf_context_eval(ctx, &t, 1, NULL), TF_OK);
        }
        text[len] = '\0';
        assert_true(strncmp(text, expected, strlen(expected)) == 0);
        tf_sampler_free(s);
        tf_context_free(ctx);
        tf_model_close(m);
    }
}

/* ---- hostile model-level files: rewrite a valid generated model with one defect ---- */

typedef struct defect {
    const char *label;
    const char *drop_key;     /* metadata key removed */
    const char *set_key;      /* uint32 metadata key overridden */
    uint32_t set_val;
    const char *arch;         /* general.architecture override */
    const char *drop_tensor;  /* tensor removed */
    const char *reshape_tensor; /* tensor given a transposed shape */
    const char *add_tensor;   /* a copy of output_norm.weight added under this name */
    tf_status want;
    const char *want_msg;     /* substring of the error */
} defect;

static void rewrite(const char *src, const char *dst, const defect *d) {
    tf_gguf g;
    tf_err err = {0};
    assert_int_equal(tf_gguf_open(&g, src, &err), TF_OK);
    tf_gguf_writer *w = tf_gguf_writer_new();
    for (uint64_t i = 0; i < g.n_kv; i++) {
        const tf_gguf_kv *kv = &g.kv[i];
        if (d->drop_key && tf_gguf_str_eq(kv->key, d->drop_key)) continue;
        if (d->set_key && tf_gguf_str_eq(kv->key, d->set_key)) continue;
        if (d->arch && tf_gguf_str_eq(kv->key, "general.architecture")) continue;
        assert_int_equal(tf_gguf_writer_copy_kv(w, kv, &err), TF_OK);
    }
    if (d->set_key) assert_int_equal(tf_gguf_writer_set_u32(w, d->set_key, d->set_val, &err), TF_OK);
    if (d->arch) assert_int_equal(tf_gguf_writer_set_str(w, "general.architecture", d->arch, &err), TF_OK);
    for (uint64_t i = 0; i < g.n_tensors; i++) {
        const tf_gguf_tensor *t = &g.tensors[i];
        if (d->drop_tensor && strcmp(t->name, d->drop_tensor) == 0) continue;
        int64_t ne[4];
        memcpy(ne, t->ne, sizeof ne);
        if (d->reshape_tensor && strcmp(t->name, d->reshape_tensor) == 0) {
            int64_t x = ne[0];
            ne[0] = ne[1];
            ne[1] = x;
        }
        assert_int_equal(tf_gguf_writer_add_tensor(w, t->name, (tf_dtype)t->type, t->n_dims, ne, t->data, &err),
                         TF_OK);
        if (d->add_tensor && strcmp(t->name, "output_norm.weight") == 0)
            assert_int_equal(
                tf_gguf_writer_add_tensor(w, d->add_tensor, (tf_dtype)t->type, t->n_dims, ne, t->data, &err), TF_OK);
    }
    assert_int_equal(tf_gguf_writer_write_file(w, dst, NULL, NULL, &err), TF_OK);
    tf_gguf_writer_free(w);
    tf_gguf_close(&g);
}

static void check_defects(const char *src, const defect *defects, size_t n);

static void test_hostile_models(void **state) {
    (void)state;
    tu_gen_case c = {"base", 64, 2, 4, 2, 96, TF_ROPE_SCALING_NONE, 1, 0, false, TF_DTYPE_F32};
    char src[512];
    snprintf(src, sizeof src, "%s", tu_gen(&c, 3));
    static const defect defects[] = {
        {"unknown arch", .arch = "gpt-neox", .want = TF_ERR_UNSUPPORTED, .want_msg = "gpt-neox"},
        {"supported list", .arch = "qwen3", .want = TF_ERR_UNSUPPORTED, .want_msg = "supported: llama, qwen2"},
        {"qwen2 keys missing", .arch = "qwen2", .want = TF_ERR_FORMAT, .want_msg = "qwen2.embedding_length"},
        {"no arch", .drop_key = "general.architecture", .want = TF_ERR_FORMAT, .want_msg = "general.architecture"},
        {"no width", .drop_key = "llama.embedding_length", .want = TF_ERR_FORMAT, .want_msg = "embedding_length"},
        {"heads not divisible", .set_key = "llama.attention.head_count_kv", .set_val = 3, .want = TF_ERR_FORMAT,
         .want_msg = "head_count"},
        {"zero layers", .set_key = "llama.block_count", .set_val = 0, .want = TF_ERR_FORMAT,
         .want_msg = "block_count"},
        {"huge layers", .set_key = "llama.block_count", .set_val = 4000000000u, .want = TF_ERR_FORMAT,
         .want_msg = "block_count"},
        {"more layers than tensors", .set_key = "llama.block_count", .set_val = 3, .want = TF_ERR_FORMAT,
         .want_msg = "blk.2."},
        {"fewer layers than tensors", .set_key = "llama.block_count", .set_val = 1, .want = TF_ERR_FORMAT,
         .want_msg = "belongs to layer 1 but llama.block_count = 1"},
        {"unknown tensor", .add_tensor = "blk.0.attn_sinks.weight", .want = TF_ERR_FORMAT,
         .want_msg = "tensor 'blk.0.attn_sinks.weight' is not part of a llama model"},
        {"missing tensor", .drop_tensor = "blk.1.ffn_down.weight", .want = TF_ERR_FORMAT,
         .want_msg = "blk.1.ffn_down.weight"},
        {"missing embedding", .drop_tensor = "token_embd.weight", .want = TF_ERR_FORMAT,
         .want_msg = "token_embd.weight"},
        {"mis-shaped", .reshape_tensor = "blk.0.attn_k.weight", .want = TF_ERR_FORMAT,
         .want_msg = "blk.0.attn_k.weight"},
        {"vocab size mismatch", .set_key = "llama.vocab_size", .set_val = 301, .want = TF_ERR_FORMAT,
         .want_msg = "vocab_size"},
        {"bos out of range", .set_key = "tokenizer.ggml.bos_token_id", .set_val = 300, .want = TF_ERR_FORMAT,
         .want_msg = "bos_token_id"},
    };
    check_defects(src, defects, sizeof defects / sizeof defects[0]);
    unlink(src);
    /* qwen2: its biases are required and shape-checked */
    snprintf(src, sizeof src, "%s", tu_gen_arch(&c, TF_ARCH_QWEN2, 4));
    static const defect qwen2_defects[] = {
        {"missing bias", .drop_tensor = "blk.1.attn_k.bias", .want = TF_ERR_FORMAT,
         .want_msg = "tensor 'blk.1.attn_k.bias' is missing (required by the qwen2 architecture)"},
        {"mis-shaped bias", .reshape_tensor = "blk.0.attn_q.bias", .want = TF_ERR_FORMAT,
         .want_msg = "blk.0.attn_q.bias"},
        {"llama keys missing", .arch = "llama", .want = TF_ERR_FORMAT, .want_msg = "llama.embedding_length"},
    };
    check_defects(src, qwen2_defects, sizeof qwen2_defects / sizeof qwen2_defects[0]);
    unlink(src);
}

static void check_defects(const char *src, const defect *defects, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const char *dst = tu_tmp_path(".gguf");
        rewrite(src, dst, &defects[i]);
        tf_model *m = NULL;
        char err[1024] = "";
        tf_status st = tf_model_load_file(&m, dst, NULL, err, sizeof err);
        if (st != defects[i].want || !strstr(err, defects[i].want_msg) || !strstr(err, dst)) {
            print_error("%s: status %d (want %d), message: %s\n", defects[i].label, st, defects[i].want, err);
            fail();
        }
        assert_null(m);
        unlink(dst);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stories260k_greedy),
        cmocka_unit_test(test_extend_context),
        cmocka_unit_test(test_rope_metadata),
        cmocka_unit_test(test_logits_vs_reference),
        cmocka_unit_test(test_qwen2_vs_reference),
        cmocka_unit_test(test_hostile_models),
        cmocka_unit_test(test_side_by_side),
        cmocka_unit_test(test_progress_and_cancel),
        cmocka_unit_test(test_fill_random),
        cmocka_unit_test(test_packed_weights_shared),
        cmocka_unit_test(test_context_devices),
        cmocka_unit_test(test_batch_invariant_logits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
