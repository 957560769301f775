/*
 * test_spec_dist.c — sampled output of the decoding hierarchy is distributed
 * exactly as the target's. For each mode (a draft level alone, a retrieval
 * level alone, the streaming hierarchy, the whole TriForce hierarchy) and two
 * sampling settings, thousands of independent generations from one prompt
 * give the joint frequency of the first two emitted tokens; a Pearson
 * chi-square test compares it with p(t1) p(t2 | t1) computed from the
 * target's own logits with the same transform. False-alarm rate 1e-6 per test
 * (exact critical values, tests/common/stats.c); fixed seeds make the suite
 * deterministic. These run the residual coupling (verify.h). Negative
 * controls: the same test on the whole hierarchy with a verifier that accepts
 * everything, and with one that draws rejections from p instead of
 * max(p - q, 0), must fail. The keyed coupling (keyed.h) has its own tests:
 * ar, the hierarchy at both settings, the bypass and the lookup draft, with
 * accept-all controls, and on SmolLM2 at T=0.6.
 *
 * The bottom level by text lookup (one-hot proposals, no draft model), under
 * spec and the whole hierarchy, from a prompt built so that the lookup
 * proposes a token the target gives a probability between 0.1 and 0.9 (so
 * verification both accepts and rejects it), with its accept-all control.
 *
 * The same on SmolLM2-135M (when `make models` has fetched it): the whole
 * hierarchy — the target over an 80-token prompt, its weights over a 32-token
 * retrieval cache, its first layer over a StreamingLLM cache — at T=1 and at
 * T=0.6 with top-p, 1200 runs each on two threads (each starts from a copy of
 * one prefilled cache, tf_spec_prefill_from), and the accept-all negative
 * control (200 runs: its first token is already off the target's support).
 *
 * Where: the CPU, or with TF_TEST_DEVICE=cuda every decoder and reference
 * context on the first CUDA device (the reference too, so that the target is
 * the one the decoders run: its KV cache is f16 there). Sampled decoding on
 * the device reads each pass's logits rows back and verifies on the host
 * (level_dists, extend), so the negative controls' broken verifiers apply
 * there as well. Without a CUDA build or device every test skips with the
 * reason, as does one whose model the device refuses (a weight type it has
 * no kernels for); any other value of TF_TEST_DEVICE fails every test.
 */
#include "testutil.h"

#include "model/gen.h"
#include "decode/lookup.h"
#include "decode/spec.h"
#include "stats.h"
#include "tokenizer/tokenizer.h"
#include "triforce.h"
#ifdef TF_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ALPHA 1e-6
#define N_RUNS 6000
#define NP 40

static tf_pool *g_pool;
static char g_target[512], g_draft[512];
static int g_lookup; /* > 0: the bottom level drafts by text lookup */

/* The device of every decoder and reference context (TF_TEST_DEVICE), and why
 * every test skips (no CUDA build or device) or fails (an unknown value)
 * instead of running: "" when it runs. */
static int g_device = TF_SPEC_DEVICE_CPU;
static char g_device_skip[TF_ERR_MSG_MAX + 64];
static char g_device_bad[TF_ERR_MSG_MAX + 64];
/* What the device said of the generated pair (setup; TF_OK on the CPU). */
static tf_status g_gen_status = TF_OK;
static char g_gen_msg[TF_ERR_MSG_MAX];

/* Read TF_TEST_DEVICE (unset or "cpu": the CPU; "cuda": the first CUDA
 * device) and say once where the tests run. */
static void device_init(void) {
    const char *v = getenv("TF_TEST_DEVICE");
    if (!v || strcmp(v, "cpu") == 0) {
        print_message("distribution tests run on the cpu\n");
        return;
    }
    if (strcmp(v, "cuda") != 0) {
        snprintf(g_device_bad, sizeof g_device_bad, "TF_TEST_DEVICE='%.160s': expected cpu or cuda (unset: cpu)", v);
        print_message("%s\n", g_device_bad);
        return;
    }
    g_device = TF_SPEC_DEVICE_CUDA;
#ifdef TF_HAVE_CUDA
    tf_cuda *cu;
    tf_err err = {0};
    tf_status st;
    if (tf_cuda_device_count() == 0) { /* opening says why: no driver, no device */
        if (tf_cuda_open(&cu, 0, &err) == TF_OK) tf_cuda_close(cu);
        snprintf(g_device_skip, sizeof g_device_skip, "TF_TEST_DEVICE=cuda: %s",
                 err.msg[0] ? err.msg : "no CUDA device");
    } else if ((st = tf_cuda_open(&cu, 0, &err)) == TF_ERR_UNSUPPORTED) /* an old driver, a device below sm_80 */
        snprintf(g_device_skip, sizeof g_device_skip, "TF_TEST_DEVICE=cuda: %s", err.msg);
    else if (st != TF_OK)
        snprintf(g_device_bad, sizeof g_device_bad, "TF_TEST_DEVICE=cuda: %s", err.msg);
    else {
        print_message("distribution tests run on cuda: %s\n", tf_cuda_describe(cu));
        tf_cuda_close(cu);
        return;
    }
#else
    snprintf(g_device_skip, sizeof g_device_skip,
             "TF_TEST_DEVICE=cuda: this build has no CUDA backend (build with make CUDA=1)");
#endif
    print_message("distribution tests do not run: %s\n", g_device_bad[0] ? g_device_bad : g_device_skip);
}

/* First thing in every test: fail on an unknown TF_TEST_DEVICE, skip with the
 * reason where the device asked for is not there. */
static void require_device(void) {
    if (g_device_bad[0]) fail_msg("%s", g_device_bad);
    if (g_device_skip[0]) {
        print_message("skipped: %s\n", g_device_skip);
        skip();
    }
}

/* First thing in every test of the generated pair: require_device, then skip
 * where the device refuses the pair, fail where it failed otherwise. */
static void require_generated(void) {
    require_device();
    if (g_gen_status == TF_ERR_UNSUPPORTED) {
        print_message("skipped: cuda refuses the generated models: %s\n", g_gen_msg);
        skip();
    }
    if (g_gen_status != TF_OK) fail_msg("the generated models on cuda: %s", g_gen_msg);
}

/* Whether the device takes target and draft (NULL: none) in the whole
 * hierarchy: TF_ERR_UNSUPPORTED with the reason in err where it refuses them
 * (a weight type the CUDA backend has no kernels for). */
static tf_status device_probe(const tf_model *t, const tf_model *d, tf_err *err) {
    tf_spec_cfg c = {.mode = TF_SPEC_TRIFORCE, .gamma1 = 2, .gamma2 = 3, .budget = 16, .chunk = 4, .recent = 4,
                     .rebuild_stride = 2, .rebuild_accept = 0.3f, .sinks = 2, .window = 8, .n_ctx = 64,
                     .n_batch = 64, .kv_type = TF_DTYPE_F32, .isa = TF_ISA_BEST,
                     .sampling = {.temp = 1.0f, .top_k = 4, .top_p = 1.0f}, .device = g_device};
    tf_spec s;
    tf_status st = tf_spec_init(&s, t, d, &c, g_pool, err); /* frees what it made when it fails */
    if (st == TF_OK) tf_spec_free(&s);
    return st;
}

static void gen_small(char *path, uint64_t seed, int n_embd) {
    snprintf(path, 512, "%s", tu_tmp_path(".gguf"));
    tf_gen_params g = tf_gen_params_default();
    g.n_embd = n_embd;
    g.n_layer = 1;
    g.n_head = 2;
    g.n_head_kv = 1;
    g.n_ff = 2 * n_embd;
    g.n_ctx_train = 256;
    g.n_vocab = 0; /* the 259-token byte vocabulary (unless copied) */
    g.wtype = TF_DTYPE_F32;
    g.seed = seed;
    g.n_threads = 1;
    tf_err err = {0};
    if (tf_gen_model(&g, path, &err) != TF_OK) {
        print_error("gen: %s\n", err.msg);
        fail();
    }
}

/* Target distribution of the first two tokens: joint[i*k + j] over the
 * candidate lists of p(t1) and of p(t2 | t1 = cand_i). */
typedef struct joint {
    int k1;
    int32_t id1[16];
    int k2[16];
    int32_t id2[16][16];
    double prob[16][16];
} joint;

static void target_joint(const tf_model *m, const tf_sampling_cfg *cfg, const int32_t *prompt, int np, joint *J) {
    tf_sampling s;
    tf_err err = {0};
    assert_int_equal(tf_sampling_init(&s, cfg, m->hp.n_vocab, &err), TF_OK);
    tf_context_params cp = tf_context_default_params();
    cp.n_ctx = np + 4;
    cp.n_threads = 1;
    cp.kv_type = TF_KV_F32;
    tf_context *ctx;
    char eb[256];
    tf_device dev = g_device == TF_SPEC_DEVICE_CUDA ? TF_DEVICE_CUDA : TF_DEVICE_CPU;
    if (tf_context_init_on(&ctx, m, &cp, dev, eb, sizeof eb) != TF_OK) fail_msg("reference context: %s", eb);
    assert_int_equal(tf_context_eval(ctx, prompt, np, NULL), TF_OK);
    tf_sampling_dist(&s, tf_context_logits(ctx));
    assert_true(s.dist.n <= 16);
    J->k1 = s.dist.n;
    double p1[16];
    for (int i = 0; i < J->k1; i++) {
        J->id1[i] = s.dist.id[i];
        p1[i] = s.dist.p[i];
    }
    for (int i = 0; i < J->k1; i++) {
        assert_int_equal(tf_context_truncate(ctx, np), TF_OK);
        assert_int_equal(tf_context_eval(ctx, &J->id1[i], 1, NULL), TF_OK);
        tf_sampling_dist(&s, tf_context_logits(ctx));
        assert_true(s.dist.n <= 16);
        J->k2[i] = s.dist.n;
        for (int j = 0; j < s.dist.n; j++) {
            J->id2[i][j] = s.dist.id[j];
            J->prob[i][j] = p1[i] * s.dist.p[j];
        }
    }
    tf_context_free(ctx);
    tf_sampling_free(&s);
}

/* The runs' middle-level policy (tf_spec_middle); -1: the target passes of
 * every run alternate between the routes, skipping the middle level first. */
static int g_middle = TF_SPEC_MIDDLE_ALWAYS;
/* The runs' coupling of the levels' draws (spec.h): the residual rule unless
 * a test of the keyed one says otherwise. */
static tf_spec_coupling g_coupling = TF_SPEC_COUPLING_RESIDUAL;

/* n_runs generations of the mode from the prompt (budget the retrieval
 * cache's); the chi-square verdict against J. base (optional): a decoder
 * that holds the prompt, copied instead of prefilling every run. */
static tu_gof run_generations(const tf_model *t, const tf_model *d, tf_spec_mode mode, const tf_sampling_cfg *cfg,
                              tf_verify_mode vmode, const joint *J, const int32_t *prompt, int np, int budget,
                              int n_runs, bool bypass, const tf_spec *base) {
    tf_err err = {0};
    tf_spec_cfg c = {.mode = mode, .gamma1 = 2, .gamma2 = 3, .budget = budget, .chunk = 4, .recent = 4,
                     .rebuild_stride = 2, .rebuild_accept = 0.3f, .sinks = 2, .window = 8, .n_ctx = np + 32,
                     .n_batch = 64, .kv_type = TF_DTYPE_F32, .isa = TF_ISA_BEST, .sampling = *cfg,
                     .bypass_accept = bypass ? 0.5f : 0.0f, .bypass_probe = 2, .lookup = g_lookup,
                     .middle = g_middle < 0 ? TF_SPEC_MIDDLE_NEVER : (tf_spec_middle)g_middle, .device = g_device,
                     .coupling = g_coupling};
    tf_spec s;
    assert_int_equal(tf_spec_init(&s, t, mode == TF_SPEC_RETRIEVAL || g_lookup ? NULL : d, &c, g_pool, &err), TF_OK);
    s.ver.mode = vmode;
    /* cells: every (i, j) of the target's support, plus one "elsewhere" cell */
    static long long obs[16 * 16 + 1];
    static double prob[16 * 16 + 1];
    memset(obs, 0, sizeof obs);
    int n_cells = 16 * 16 + 1;
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) prob[i * 16 + j] = i < J->k1 && j < J->k2[i] ? J->prob[i][j] : 0.0;
    prob[16 * 16] = 0.0;
    for (int r = 0; r < n_runs; r++) {
        tf_spec_reset(&s, 1000003ull * (uint64_t)r + 17);
        if (base) assert_int_equal(tf_spec_prefill_from(&s, base, NULL, NULL), TF_OK);
        else assert_int_equal(tf_spec_prefill(&s, prompt, np, NULL, NULL), TF_OK);
        /* bypass: start as if the draft had been rejected, so the middle level
         * alternates proposing alone and probing the draft (probe every 2) */
        if (bypass) s.lv[s.n_levels - 1].accept_ewma = 0.0f;
        int32_t out[64], n = 0, k;
        for (int pass = 0; n < 2; pass++) {
            if (g_middle < 0) s.cfg.middle = pass % 2 ? TF_SPEC_MIDDLE_ALWAYS : TF_SPEC_MIDDLE_NEVER;
            assert_int_equal(tf_spec_step(&s, out + n, 32, &k), TF_OK);
            n += k;
        }
        int cell = 16 * 16;
        for (int i = 0; i < J->k1; i++)
            if (J->id1[i] == out[0])
                for (int j = 0; j < J->k2[i]; j++)
                    if (J->id2[i][j] == out[1]) cell = i * 16 + j;
        obs[cell]++;
    }
    tf_spec_free(&s);
    return tu_chi2_gof(obs, prob, n_cells, ALPHA);
}

/* Run N_RUNS generations of the mode with the generated pair. */
static tu_gof run_mode(tf_spec_mode mode, const tf_sampling_cfg *cfg, tf_verify_mode vmode, const joint *J,
                       const int32_t *prompt, bool bypass) {
    tf_model *t, *d;
    tf_err err = {0};
    assert_int_equal(tf_model_load(&t, g_target, NULL, &err), TF_OK);
    assert_int_equal(tf_model_load(&d, g_draft, NULL, &err), TF_OK);
    tu_gof g = run_generations(t, d, mode, cfg, vmode, J, prompt, NP, 16, N_RUNS, bypass, NULL);
    tf_model_free(t);
    tf_model_free(d);
    return g;
}

/* The generated target's joint distribution of the first two tokens. */
static void load_joint(const tf_sampling_cfg *cfg, const int32_t *prompt, joint *J) {
    tf_model *t;
    tf_err err = {0};
    assert_int_equal(tf_model_load(&t, g_target, NULL, &err), TF_OK);
    target_joint(t, cfg, prompt, NP, J);
    tf_model_free(t);
}

/* Print the test's figures and assert its outcome: an exact verifier passes
 * (at least 3 degrees of freedom, nothing off the target's support), a
 * negative control fails by a wide margin. */
static void verdict(const char *what, const tu_gof *g, bool control) {
    print_message("%-40s chi2 %8.2f crit %7.2f df %3d off-support %lld%s\n", what, g->chi2, g->crit, g->df,
                  g->off_support, control ? " (negative control)" : "");
    if (control) {
        assert_true(g->off_support > 0 || g->chi2 > 3.0 * g->crit);
    } else {
        assert_true(g->df >= 3);
        assert_true(g->off_support == 0);
        assert_true(g->chi2 < g->crit);
    }
}

static void check(const char *what, tf_spec_mode mode, const tf_sampling_cfg *cfg, const int32_t *prompt) {
    joint J;
    load_joint(cfg, prompt, &J);
    tu_gof g = run_mode(mode, cfg, TF_VERIFY_EXACT, &J, prompt, strstr(what, "bypass") != NULL);
    verdict(what, &g, false);
}

static void check_broken(const char *what, tf_verify_mode vmode, const tf_sampling_cfg *cfg, const int32_t *prompt) {
    joint J;
    load_joint(cfg, prompt, &J);
    tu_gof g = run_mode(TF_SPEC_TRIFORCE, cfg, vmode, &J, prompt, false);
    verdict(what, &g, true);
}

static void make_prompt(int32_t *prompt) {
    tf_rng rng;
    tf_rng_seed(&rng, 4242);
    for (int i = 0; i < NP; i++) prompt[i] = 3 + (int32_t)(tf_rng_next(&rng) % 256);
}

static void test_distribution_t1(void **state) {
    (void)state;
    require_generated();
    int32_t prompt[NP];
    make_prompt(prompt);
    tf_sampling_cfg cfg = {.temp = 1.0f, .top_k = 4, .top_p = 1.0f, .min_p = 0.0f, .seed = 0};
    check("spec (draft level), T=1 top-k 4", TF_SPEC_DRAFT, &cfg, prompt);
    check("retrieval (middle level), T=1 top-k 4", TF_SPEC_RETRIEVAL, &cfg, prompt);
    check("streaming hierarchy, T=1 top-k 4", TF_SPEC_STREAMING, &cfg, prompt);
    check("triforce hierarchy, T=1 top-k 4", TF_SPEC_TRIFORCE, &cfg, prompt);
    check("triforce, draft bypassed, T=1 top-k 4", TF_SPEC_TRIFORCE, &cfg, prompt);
    check_broken("triforce, accept-all verifier", TF_VERIFY_BROKEN_ACCEPT_ALL, &cfg, prompt);
    check_broken("triforce, residual-from-p verifier", TF_VERIFY_BROKEN_RESIDUAL_FROM_P, &cfg, prompt);
    /* the target verifying the draft directly (route.h), and the routes alternating */
    g_middle = TF_SPEC_MIDDLE_NEVER;
    check("triforce, middle skipped, T=1 top-k 4", TF_SPEC_TRIFORCE, &cfg, prompt);
    check("streaming, middle skipped, T=1 top-k 4", TF_SPEC_STREAMING, &cfg, prompt);
    check_broken("triforce, middle skipped, accept-all", TF_VERIFY_BROKEN_ACCEPT_ALL, &cfg, prompt);
    g_middle = -1;
    check("triforce, routes alternating, T=1 top-k 4", TF_SPEC_TRIFORCE, &cfg, prompt);
    check_broken("triforce, alternating, residual-from-p", TF_VERIFY_BROKEN_RESIDUAL_FROM_P, &cfg, prompt);
    g_middle = TF_SPEC_MIDDLE_ALWAYS;
}

static void test_distribution_t06_top_p(void **state) {
    (void)state;
    require_generated();
    int32_t prompt[NP];
    make_prompt(prompt);
    tf_sampling_cfg cfg = {.temp = 0.6f, .top_k = 6, .top_p = 0.9f, .min_p = 0.0f, .seed = 0};
    check("triforce hierarchy, T=0.6 top-p 0.9", TF_SPEC_TRIFORCE, &cfg, prompt);
    check("spec (draft level), T=0.6 top-p 0.9", TF_SPEC_DRAFT, &cfg, prompt);
    check_broken("triforce, residual-from-p, T=0.6", TF_VERIFY_BROKEN_RESIDUAL_FROM_P, &cfg, prompt);
    g_middle = -1;
    check("triforce, routes alternating, T=0.6", TF_SPEC_TRIFORCE, &cfg, prompt);
    g_middle = TF_SPEC_MIDDLE_ALWAYS;
}

/* p(t1 = id) of the joint. */
static double first_prob(const joint *J, int32_t id) {
    double p = 0;
    for (int i = 0; i < J->k1; i++)
        if (J->id1[i] == id)
            for (int j = 0; j < J->k2[i]; j++) p += J->prob[i][j];
    return p;
}

/* The random prompt with its newest two tokens repeated at 9..10, followed at
 * 11 by the token whose target probability after the whole prompt is nearest
 * 0.5 (the target is asked again after each change, since the change moves
 * it); the lookup then proposes prompt[11]. */
static void make_lookup_prompt(const tf_sampling_cfg *cfg, int32_t *prompt, joint *J) {
    make_prompt(prompt);
    prompt[9] = prompt[NP - 2];
    prompt[10] = prompt[NP - 1];
    for (int iter = 0; iter < 16; iter++) {
        load_joint(cfg, prompt, J);
        double p = first_prob(J, prompt[11]);
        if (p > 0.1 && p < 0.9) {
            int64_t from;
            assert_true(tf_lookup_match(prompt, NP, 1, TF_LOOKUP_MAX_MATCH, &from) >= 2);
            assert_int_equal(from, 11);
            print_message("lookup prompt: the proposal has target probability %.3f\n", p);
            return;
        }
        int best = 0;
        for (int i = 1; i < J->k1; i++)
            if (fabs(first_prob(J, J->id1[i]) - 0.5) < fabs(first_prob(J, J->id1[best]) - 0.5)) best = i;
        prompt[11] = J->id1[best];
    }
    fail_msg("no prompt makes the lookup's proposal a token of probability 0.1..0.9");
}

static void lookup_check(const char *what, tf_spec_mode mode, const tf_sampling_cfg *cfg, tf_verify_mode vmode) {
    int32_t prompt[NP];
    joint J;
    make_lookup_prompt(cfg, prompt, &J);
    g_lookup = 1;
    tu_gof g = run_mode(mode, cfg, vmode, &J, prompt, false);
    g_lookup = 0;
    verdict(what, &g, vmode != TF_VERIFY_EXACT);
}

static void test_distribution_lookup(void **state) {
    (void)state;
    require_generated();
    tf_sampling_cfg t1 = {.temp = 1.0f, .top_k = 4, .top_p = 1.0f, .min_p = 0.0f, .seed = 0};
    tf_sampling_cfg t06 = {.temp = 0.6f, .top_k = 6, .top_p = 0.9f, .min_p = 0.0f, .seed = 0};
    lookup_check("spec, lookup draft, T=1 top-k 4", TF_SPEC_DRAFT, &t1, TF_VERIFY_EXACT);
    lookup_check("triforce, lookup draft, T=1 top-k 4", TF_SPEC_TRIFORCE, &t1, TF_VERIFY_EXACT);
    lookup_check("triforce, lookup draft, T=0.6 top-p 0.9", TF_SPEC_TRIFORCE, &t06, TF_VERIFY_EXACT);
    g_middle = -1; /* the lookup's proposal judged by the target on the first pass */
    lookup_check("triforce, lookup, routes alternating, T=1", TF_SPEC_TRIFORCE, &t1, TF_VERIFY_EXACT);
    lookup_check("triforce, lookup, alternating, accept-all", TF_SPEC_TRIFORCE, &t1, TF_VERIFY_BROKEN_ACCEPT_ALL);
    g_middle = TF_SPEC_MIDDLE_ALWAYS;
    lookup_check("spec, lookup draft, accept-all verifier", TF_SPEC_DRAFT, &t1, TF_VERIFY_BROKEN_ACCEPT_ALL);
    lookup_check("spec, lookup, residual-from-p verifier", TF_SPEC_DRAFT, &t1, TF_VERIFY_BROKEN_RESIDUAL_FROM_P);
}

/* SmolLM2: the whole hierarchy at T=1 (top-k 4) and T=0.6 (top-k 6, top-p
 * 0.9) over an 80-token prompt of a novel, and the accept-all negative control. */
#define NP_REAL 80

static void real_check(const char *what, const tf_model *t, const tf_model *d, const tf_sampling_cfg *cfg,
                       const int32_t *prompt, tf_verify_mode vmode, int n_runs) {
    joint J;
    target_joint(t, cfg, prompt, NP_REAL, &J);
    /* the prompt prefilled once (retrieval mode keeps the newest query) */
    tf_spec base;
    tf_err err = {0};
    tf_spec_cfg bc = {.mode = TF_SPEC_RETRIEVAL, .gamma1 = 2, .gamma2 = 3, .budget = 32, .chunk = 4, .recent = 4,
                      .rebuild_stride = 2, .rebuild_accept = 0.3f, .sinks = 2, .window = 8, .n_ctx = NP_REAL + 1,
                      .n_batch = 64, .kv_type = TF_DTYPE_F32, .isa = TF_ISA_BEST, .sampling = *cfg,
                      .device = g_device, .coupling = g_coupling};
    assert_int_equal(tf_spec_init(&base, t, NULL, &bc, g_pool, &err), TF_OK);
    assert_int_equal(tf_spec_prefill(&base, prompt, NP_REAL, NULL, NULL), TF_OK);
    tu_gof g = run_generations(t, d, TF_SPEC_TRIFORCE, cfg, vmode, &J, prompt, NP_REAL, 32, n_runs, false, &base);
    tf_spec_free(&base);
    verdict(what, &g, vmode != TF_VERIFY_EXACT);
}

static void test_distribution_smollm2(void **state) {
    (void)state;
    require_device();
    TU_REQUIRE_MODEL(path, TU_SMOLLM2);
    TU_REQUIRE_SHARED(text_path, "text/pride_and_prejudice.txt");
    tf_model *t, *d;
    tf_err err = {0};
    assert_int_equal(tf_model_load(&t, path, NULL, &err), TF_OK);
    assert_int_equal(tf_model_view_layers(&d, t, 1, &err), TF_OK);
    tf_status st = g_device == TF_SPEC_DEVICE_CPU ? TF_OK : device_probe(t, d, &err);
    if (st == TF_ERR_UNSUPPORTED) {
        tf_model_free(d);
        tf_model_free(t);
        print_message("skipped: cuda refuses %s: %s\n", TU_SMOLLM2, err.msg);
        skip();
    }
    if (st != TF_OK) fail_msg("%s on cuda: %s", TU_SMOLLM2, err.msg);
    FILE *f = fopen(text_path, "rb");
    assert_non_null(f);
    char text[4096];
    assert_true(fseek(f, 20000, SEEK_SET) == 0); /* past the front matter */
    size_t len = fread(text, 1, sizeof text, f);
    fclose(f);
    int32_t toks[4096];
    size_t n = 0;
    assert_int_equal(tf_tokenize(t->tok, text, len, false, false, toks, 4096, &n, &err), TF_OK);
    assert_true(n >= NP_REAL);
    tf_sampling_cfg t1 = {.temp = 1.0f, .top_k = 4, .top_p = 1.0f, .min_p = 0.0f, .seed = 0};
    tf_sampling_cfg t06 = {.temp = 0.6f, .top_k = 6, .top_p = 0.9f, .min_p = 0.0f, .seed = 0};
    tf_pool *one = g_pool; /* this model is 500 times the generated ones: both cores */
    assert_int_equal(tf_pool_create(&g_pool, 2, &err), TF_OK);
    real_check("smollm2 triforce, T=1 top-k 4", t, d, &t1, toks, TF_VERIFY_EXACT, 1200);
    real_check("smollm2 triforce, T=0.6 top-p 0.9", t, d, &t06, toks, TF_VERIFY_EXACT, 1200);
    real_check("smollm2 triforce, accept-all verifier", t, d, &t1, toks, TF_VERIFY_BROKEN_ACCEPT_ALL, 200);
    g_coupling = TF_SPEC_COUPLING_KEYED;
    real_check("smollm2 triforce, keyed, T=0.6 top-p 0.9", t, d, &t06, toks, TF_VERIFY_EXACT, 1200);
    real_check("smollm2 triforce, keyed, accept-all", t, d, &t1, toks, TF_VERIFY_BROKEN_ACCEPT_ALL, 200);
    g_coupling = TF_SPEC_COUPLING_RESIDUAL;
    tf_pool_free(g_pool);
    g_pool = one;
    tf_model_free(d);
    tf_model_free(t);
}

/* The keyed coupling (keyed.h): autoregressive sampling itself, the whole
 * hierarchy, the middle level drafting alone and the lookup draft, each
 * against the target's joint, with accept-all negative controls (the residual
 * rule's other control draws from p on a rejection, which keyed verification
 * never does). Every mode's text equals ar's for a seed (test_spec checks it
 * token for token), so equal statistics here are expected. */
static void test_distribution_keyed(void **state) {
    (void)state;
    require_generated();
    int32_t prompt[NP];
    make_prompt(prompt);
    tf_sampling_cfg t1 = {.temp = 1.0f, .top_k = 4, .top_p = 1.0f, .min_p = 0.0f, .seed = 0};
    tf_sampling_cfg t06 = {.temp = 0.6f, .top_k = 6, .top_p = 0.9f, .min_p = 0.0f, .seed = 0};
    g_coupling = TF_SPEC_COUPLING_KEYED;
    check("keyed: ar, T=1 top-k 4", TF_SPEC_AR, &t1, prompt);
    check("keyed: ar, T=0.6 top-p 0.9", TF_SPEC_AR, &t06, prompt);
    check("keyed: triforce hierarchy, T=1 top-k 4", TF_SPEC_TRIFORCE, &t1, prompt);
    check("keyed: triforce hierarchy, T=0.6 top-p 0.9", TF_SPEC_TRIFORCE, &t06, prompt);
    check("keyed: triforce, draft bypassed, T=1", TF_SPEC_TRIFORCE, &t1, prompt);
    check_broken("keyed: triforce, accept-all verifier", TF_VERIFY_BROKEN_ACCEPT_ALL, &t1, prompt);
    lookup_check("keyed: spec, lookup draft, T=1 top-k 4", TF_SPEC_DRAFT, &t1, TF_VERIFY_EXACT);
    lookup_check("keyed: spec, lookup, accept-all verifier", TF_SPEC_DRAFT, &t1, TF_VERIFY_BROKEN_ACCEPT_ALL);
    g_coupling = TF_SPEC_COUPLING_RESIDUAL;
}

static int setup(void **state) {
    (void)state;
    tf_err err = {0};
    if (tf_pool_create(&g_pool, 1, &err) != TF_OK) return -1;
    gen_small(g_target, 11, 32);
    gen_small(g_draft, 12, 16);
    if (g_device == TF_SPEC_DEVICE_CPU || g_device_bad[0] || g_device_skip[0]) return 0;
    /* the device refusing the generated pair skips the tests that decode it */
    tf_model *t, *d;
    if (tf_model_load(&t, g_target, NULL, &err) != TF_OK) return -1;
    if (tf_model_load(&d, g_draft, NULL, &err) != TF_OK) {
        tf_model_free(t);
        return -1;
    }
    g_gen_status = device_probe(t, d, &err);
    if (g_gen_status != TF_OK) snprintf(g_gen_msg, sizeof g_gen_msg, "%s", err.msg);
    tf_model_free(d);
    tf_model_free(t);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tf_pool_free(g_pool);
    unlink(g_target);
    unlink(g_draft);
    return 0;
}

int main(void) {
    device_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_distribution_t1),
        cmocka_unit_test(test_distribution_t06_top_p),
        cmocka_unit_test(test_distribution_lookup),
        cmocka_unit_test(test_distribution_keyed),
        cmocka_unit_test(test_distribution_smollm2),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
