/*
 * test_spec.c — every decoding mode is lossless under greedy decoding: its
 * output equals the autoregressive greedy output token for token, across
 * gamma1 / gamma2, budgets below / equal to / beyond the generated length,
 * chunk sizes, short and long prompts, MHA and GQA targets, and drafts that
 * always agree (the target itself), never agree (an unrelated random model
 * with the same vocabulary) and the real pair (stories260K F32 and its Q8_0);
 * a qwen2 target (biases, rotate-half RoPE also in the streaming cache) with
 * its first layer as the draft; SmolLM2-135M with its first 6 layers (when
 * fetched); decoders prefilled from another decoder's caches; the gamma2
 * controller against simulated passes; and a step's cap, which holds tokens
 * back rather than changing the sequence. The bottom level by text lookup
 * (no draft model) in every mode that has a bottom level, and its matching
 * against a brute-force reference. Quantized KV caches (q8_0, q4_0) in
 * every level, on a generated model and on SmolLM2, and their refusal where
 * head_dim is not a multiple of 32. Sampled decoding under the keyed
 * coupling: every mode's text equals ar's sampled text for the seed, with a
 * broken verifier's as the negative control.
 */
#include "testutil.h"

#include "model/gen.h"
#include "model/quantize.h"
#include "kv/streaming.h"
#include "model/forward.h"
#include "decode/lookup.h"
#include "decode/spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct run_cfg {
    tf_spec_mode mode;
    int g1, g2, budget, chunk, stride, sinks, window;
} run_cfg;

/* bypass_accept of the runs (the draft is probed every 3 tokens); 0: never */
static float g_bypass;

/* > 0: the runs draft by text lookup with this minimum match (no draft model) */
static int g_lookup;

static tf_pool *g_pool;

/* The KV cache type of the runs (every level's caches) */
static tf_dtype g_kv_type = TF_DTYPE_F32;

/* The runs' middle-level policy (tf_spec_middle); -1: the target passes
 * alternate between the routes, skipping the middle level twice, then taking
 * it once (so it comes back lagging and is rebuilt or caught up); -n for n >=
 * 2: n skips, then the middle level. */
static int g_middle = TF_SPEC_MIDDLE_ALWAYS;
/* Target passes by route of the latest run (three-level modes) */
static int64_t g_route_passes[2];

/* The runs' sampling: greedy unless a sampled test sets it (then under the
 * keyed coupling every mode's text must still equal ar's), and their
 * verifier (a broken one only for negative controls). */
static tf_sampling_cfg g_sampling = {.temp = 0.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 1};
static tf_verify_mode g_vmode = TF_VERIFY_EXACT;

/* Runs take their prompt from a separately prefilled decoder
 * (tf_spec_prefill_from) instead of prefilling it themselves. */
static bool g_prefill_from;

/* Prefill s with the prompt: directly, or by copying a fresh retrieval-mode
 * decoder's caches (which must give the same output). */
static void prefill(tf_spec *s, const tf_model *t, const tf_spec_cfg *c, const int32_t *prompt, int np) {
    if (!g_prefill_from) {
        if (tf_spec_prefill(s, prompt, np, NULL, NULL) != TF_OK) {
            print_error("prefill: %s\n", s->err.msg);
            fail();
        }
        return;
    }
    tf_spec src;
    tf_err err = {0};
    tf_spec_cfg sc = *c;
    sc.mode = TF_SPEC_RETRIEVAL;
    sc.n_ctx = np + 1;
    if (tf_spec_init(&src, t, NULL, &sc, g_pool, &err) != TF_OK || tf_spec_prefill(&src, prompt, np, NULL, NULL) != TF_OK) {
        print_error("source prefill: %s %s\n", err.msg, src.err.msg);
        fail();
    }
    if (tf_spec_prefill_from(s, &src, NULL, NULL) != TF_OK) {
        print_error("prefill from: %s\n", s->err.msg);
        fail();
    }
    tf_spec_free(&src);
}

/* n byte-vocabulary tokens from the test seed. */
static void random_prompt(int32_t *prompt, int n) {
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed());
    for (int i = 0; i < n; i++) prompt[i] = 3 + (int32_t)(tf_rng_next(&rng) % 256);
}

/* Generate n tokens after the prompt (greedy, or as g_sampling says); returns the tokens in out. */
static void run(const tf_model *t, const tf_model *d, const run_cfg *rc, const int32_t *prompt, int np, int n,
                int32_t *out, tf_level_stats *st_out) {
    tf_spec_cfg c = {
        .mode = rc->mode, .gamma1 = rc->g1, .gamma2 = rc->g2, .budget = rc->budget, .chunk = rc->chunk,
        .recent = rc->chunk, .rebuild_stride = rc->stride, .rebuild_accept = 0.3f, .bypass_accept = g_bypass,
        .bypass_probe = 3, .sinks = rc->sinks, .lookup = g_lookup,
        .middle = g_middle < 0 ? TF_SPEC_MIDDLE_NEVER : (tf_spec_middle)g_middle, .window = rc->window, .n_ctx = np + n + 32, .n_batch = 64, .kv_type = g_kv_type, .isa = TF_ISA_BEST,
        .sampling = g_sampling, .coupling = TF_SPEC_COUPLING_KEYED,
    };
    tf_spec s;
    tf_err err = {0};
    if (g_lookup) d = NULL;
    if (tf_spec_init(&s, t, d, &c, g_pool, &err) != TF_OK) {
        print_error("init (%s): %s\n", tf_spec_mode_name(rc->mode), err.msg);
        fail();
    }
    s.ver.mode = g_vmode;
    prefill(&s, t, &c, prompt, np);
    int got = 0;
    for (int pass = 0; got < n; pass++) {
        int32_t buf[64];
        int32_t k;
        if (g_middle < 0) { /* -1: skip, skip, middle; -n (n >= 2): n skips, then the middle */
            const int skips = g_middle == -1 ? 2 : -g_middle;
            s.cfg.middle = pass % (skips + 1) == skips ? TF_SPEC_MIDDLE_ALWAYS : TF_SPEC_MIDDLE_NEVER;
        }
        if (tf_spec_step(&s, buf, 64, &k) != TF_OK) {
            print_error("step (%s): %s\n", tf_spec_mode_name(rc->mode), s.err.msg);
            fail();
        }
        assert_true(k >= 1);
        for (int i = 0; i < k && got < n; i++) out[got++] = buf[i];
    }
    if (st_out)
        for (int i = 0; i < s.n_levels; i++) st_out[i] = s.lv[i].st;
    g_route_passes[0] = s.route_passes[0];
    g_route_passes[1] = s.route_passes[1];
    tf_spec_free(&s);
}

static void expect_same(const tf_model *t, const tf_model *d, const run_cfg *rc, const int32_t *prompt, int np,
                        int n, const int32_t *ref, const char *label) {
    int32_t out[512];
    run(t, d, rc, prompt, np, n, out, NULL);
    for (int i = 0; i < n; i++)
        if (out[i] != ref[i]) {
            print_error("%s: mode %s g1 %d g2 %d budget %d chunk %d (T %g, seed %llu): token %d is %d, "
                        "autoregressive gives %d\n", label, tf_spec_mode_name(rc->mode), rc->g1, rc->g2, rc->budget,
                        rc->chunk, (double)g_sampling.temp, (unsigned long long)g_sampling.seed, i, out[i], ref[i]);
            fail();
        }
}

/* Every mode and a sweep of settings against the autoregressive reference. */
static void sweep(const tf_model *t, const tf_model *d, const int32_t *prompt, int np, int n, const char *label) {
    int32_t ref[512];
    run_cfg ar = {TF_SPEC_AR, 1, 1, 64, 8, 4, 4, 32};
    run(t, NULL, &ar, prompt, np, n, ref, NULL);
    static const run_cfg cfgs[] = {
        {TF_SPEC_DRAFT, 1, 1, 64, 8, 4, 4, 32},       {TF_SPEC_DRAFT, 1, 4, 64, 8, 4, 4, 32},
        {TF_SPEC_DRAFT, 1, 8, 64, 8, 4, 0, 16},       {TF_SPEC_RETRIEVAL, 1, 3, 48, 8, 4, 4, 32},
        {TF_SPEC_RETRIEVAL, 1, 6, 40, 1, 2, 4, 32},   {TF_SPEC_RETRIEVAL, 1, 5, 512, 16, 8, 4, 32},
        {TF_SPEC_STREAMING, 2, 4, 64, 8, 4, 4, 32},   {TF_SPEC_STREAMING, 1, 8, 64, 8, 4, 16, 64},
        {TF_SPEC_TRIFORCE, 1, 1, 48, 8, 4, 4, 32},    {TF_SPEC_TRIFORCE, 2, 6, 48, 8, 4, 4, 32},
        {TF_SPEC_TRIFORCE, 4, 8, 64, 1, 3, 4, 32},    {TF_SPEC_TRIFORCE, 3, 5, 512, 16, 100, 4, 32},
        {TF_SPEC_TRIFORCE, 8, 7, 80, 8, 1, 2, 8},     {TF_SPEC_TRIFORCE, 2, 3, 48, 16, 5, 16, 240},
        {TF_SPEC_RETRIEVAL, 1, 0, 48, 8, 4, 4, 32},   {TF_SPEC_TRIFORCE, 2, 0, 64, 8, 4, 4, 32},
    };
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) expect_same(t, d, &cfgs[i], prompt, np, n, ref, label);
    /* the middle level bypassing a rarely accepted draft (and catching it up in batches) */
    static const run_cfg bypassed[] = {{TF_SPEC_TRIFORCE, 2, 6, 48, 8, 4, 4, 32}, {TF_SPEC_STREAMING, 3, 8, 64, 8, 4, 2, 8}};
    static const float bypass_accept[] = {0.6f, 0.9f};
    for (size_t i = 0; i < sizeof bypassed / sizeof bypassed[0]; i++) {
        g_bypass = bypass_accept[i];
        expect_same(t, d, &bypassed[i], prompt, np, n, ref, label);
    }
    g_bypass = 0.0f;
    /* the target verifying the draft directly (route.h): always, alternating
     * with the middle level (which comes back lagging), and chosen by the
     * measured rates; each route is taken where it must be */
    static const run_cfg routed[] = {{TF_SPEC_TRIFORCE, 2, 6, 48, 8, 4, 4, 32}, {TF_SPEC_TRIFORCE, 3, 4, 64, 1, 100, 4, 32},
                                     {TF_SPEC_STREAMING, 2, 5, 64, 8, 4, 4, 16}};
    static const int middles[] = {TF_SPEC_MIDDLE_NEVER, -1, TF_SPEC_MIDDLE_AUTO};
    for (size_t i = 0; i < sizeof routed / sizeof routed[0]; i++)
        for (size_t j = 0; j < sizeof middles / sizeof middles[0]; j++) {
            g_middle = middles[j];
            expect_same(t, d, &routed[i], prompt, np, n, ref, label);
            if (g_route_passes[TF_ROUTE_SKIP] == 0 || (g_middle == TF_SPEC_MIDDLE_NEVER) != (g_route_passes[TF_ROUTE_MIDDLE] == 0)) {
                print_error("%s: middle policy %d: %lld passes through the middle level, %lld skipping it\n", label,
                            g_middle, (long long)g_route_passes[0], (long long)g_route_passes[1]);
                fail();
            }
        }
    g_middle = TF_SPEC_MIDDLE_ALWAYS;
}

static const char *gen_model_arch(tf_arch arch, int n_embd, int n_head, int n_head_kv, const char *vocab,
                                  uint64_t seed) {
    static char path[2][512];
    static int which;
    char *p = path[which++ & 1];
    snprintf(p, 512, "%s", tu_tmp_path(".gguf"));
    tf_gen_params g = tf_gen_params_default();
    g.arch = arch;
    g.n_embd = n_embd;
    g.n_layer = 2;
    g.n_head = n_head;
    g.n_head_kv = n_head_kv;
    g.n_ff = 2 * n_embd;
    g.n_ctx_train = 2048;
    g.n_vocab = 0; /* the 259-token byte vocabulary (unless copied) */
    g.wtype = TF_DTYPE_F32;
    g.vocab_from = vocab;
    g.seed = seed;
    g.n_threads = 1;
    tf_err err = {0};
    if (tf_gen_model(&g, p, &err) != TF_OK) {
        print_error("gen: %s\n", err.msg);
        fail();
    }
    return p;
}

static const char *gen_model(int n_embd, int n_head, int n_head_kv, const char *vocab, uint64_t seed) {
    return gen_model_arch(TF_ARCH_LLAMA, n_embd, n_head, n_head_kv, vocab, seed);
}

static tf_model *load(const char *path) {
    tf_model *m;
    tf_err err = {0};
    if (tf_model_load(&m, path, NULL, &err) != TF_OK) {
        print_error("load: %s\n", err.msg);
        fail();
    }
    return m;
}

static int prompt_from_text(const tf_model *m, const char *rel, int want, int32_t *out) {
    const char *path = tu_shared_path(rel);
    FILE *f = fopen(path, "rb");
    static char buf[200000];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    size_t nt;
    static int32_t toks[200000];
    tf_tokenize(m->tok, buf, n, true, false, toks, 200000, &nt, NULL);
    if ((int)nt < want) want = (int)nt;
    memcpy(out, toks, sizeof(int32_t) * (size_t)want);
    return want;
}

/* SmolLM2-135M (when `make models` has fetched it), its first 6 layers as the
 * draft: every mode and setting of the sweep (budgets below the generated
 * length with rebuilds every 1..8 passes, chunks 1..16, gamma2 0..8, the
 * bypass) equals autoregressive greedy decoding, also over q8_0 and q4_0 KV. */
static void test_greedy_equality_smollm2(void **state) {
    (void)state;
    TU_REQUIRE_MODEL(path, TU_SMOLLM2);
    TU_REQUIRE_SHARED(tp, "text/pride_and_prejudice.txt");
    (void)tp;
    tf_model *t = load(path), *d;
    tf_err err = {0};
    assert_int_equal(tf_model_view_layers(&d, t, 6, &err), TF_OK);
    static int32_t prompt[2048];
    int np = prompt_from_text(t, "text/pride_and_prejudice.txt", 300, prompt);
    sweep(t, d, prompt, np, 60, "smollm2, 300-token prompt, first 6 layers as draft");
    g_lookup = 2;
    sweep(t, NULL, prompt, np, 60, "smollm2, 300-token prompt, lookup draft");
    g_lookup = 0;
    /* q8_0 and q4_0 caches in every level, over the first 150 tokens of the prompt */
    g_kv_type = TF_DTYPE_Q8_0;
    const int nq = np < 150 ? np : 150;
    sweep(t, d, prompt, nq, 30, "smollm2, q8_0 KV, 150-token prompt");
    g_kv_type = TF_DTYPE_Q4_0;
    sweep(t, d, prompt, nq, 30, "smollm2, q4_0 KV, 150-token prompt");
    g_kv_type = TF_DTYPE_F32;
    tf_model_free(d);
    tf_model_free(t);
}

/* stories260K (its path into target_path) and its Q8_0 quantization, written
 * to a temporary q8 (the caller unlinks it), loaded; skips the test when
 * ../shared lacks the model or the novel its prompts come from. */
static void load_stories_pair(char *target_path, size_t target_size, char *q8, size_t q8_size, tf_model **t,
                              tf_model **dq) {
    TU_REQUIRE_SHARED(sp, "models/stories260K/stories260K.gguf");
    snprintf(target_path, target_size, "%s", sp); /* before the next lookup reuses tu_shared_path's buffer */
    TU_REQUIRE_SHARED(tp, "text/moby-dick.txt");
    (void)tp;
    snprintf(q8, q8_size, "%s", tu_tmp_path(".gguf"));
    tf_err err = {0};
    assert_int_equal(tf_quantize_file(target_path, q8, TF_DTYPE_Q8_0, NULL, NULL, NULL, &err), TF_OK);
    *t = load(target_path);
    *dq = load(q8);
}

/* The real pair: stories260K F32 target, its Q8_0 quantization as draft; also
 * the target itself as a draft (always agrees) and a random model (never). */
static void test_greedy_equality_stories(void **state) {
    (void)state;
    char target_path[512], q8[512];
    tf_model *t, *dq;
    load_stories_pair(target_path, sizeof target_path, q8, sizeof q8, &t, &dq);
    const char *rnd = gen_model(64, 4, 4, target_path, 99);
    tf_model *dr = load(rnd);
    static int32_t prompt[2048];
    int np = prompt_from_text(t, "text/moby-dick.txt", 600, prompt);
    sweep(t, dq, prompt, np, 120, "stories/q8 draft, 600-token prompt");
    /* the drafts really are used: the Q8_0 draft and the retrieval level are
     * accepted most of the time, the unrelated random model almost never */
    int32_t out[200];
    tf_level_stats st[3];
    run_cfg tri = {TF_SPEC_TRIFORCE, 2, 6, 256, 8, 8, 16, 240};
    run(t, dq, &tri, prompt, np, 120, out, st);
    print_message("triforce, q8 draft: target accepts %lld/%lld, middle accepts %lld/%lld\n",
                  (long long)st[0].accepted, (long long)st[0].verified, (long long)st[1].accepted,
                  (long long)st[1].verified);
    assert_true(st[0].verified > 0 && st[0].accepted * 2 > st[0].verified);
    assert_true(st[1].verified > 0 && st[1].accepted * 2 > st[1].verified);
    run(t, dr, &tri, prompt, np, 60, out, st);
    print_message("triforce, random draft: middle accepts %lld/%lld\n", (long long)st[1].accepted,
                  (long long)st[1].verified);
    assert_true(st[1].accepted * 4 < st[1].verified);
    assert_int_equal(st[1].bypassed, 0); /* bypass off */
    /* with bypass on, the middle level soon proposes alone, and still probes the draft */
    g_bypass = 0.3f;
    run(t, dr, &tri, prompt, np, 60, out, st);
    print_message("triforce, random draft, bypass: middle proposed %lld alone, verified %lld of the draft's\n",
                  (long long)st[1].bypassed, (long long)st[1].verified);
    assert_true(st[1].bypassed > 20 && st[1].verified > 0);
    run(t, dq, &tri, prompt, np, 60, out, st); /* a good draft is not bypassed */
    assert_true(st[1].bypassed * 4 < st[1].verified);
    g_bypass = 0.0f;
    sweep(t, t, prompt, 40, 100, "stories/self draft, short prompt");
    sweep(t, dr, prompt, np, 80, "stories/random draft");
    /* the target's first layers as the draft (--draft-layers) */
    tf_model *dl = NULL;
    tf_err err = {0};
    assert_int_equal(tf_model_view_layers(&dl, t, 2, &err), TF_OK);
    assert_int_equal(dl->hp.n_layer, 2);
    sweep(t, dl, prompt, np, 80, "stories/first-2-layers draft");
    tf_model_free(dl);
    /* the bottom level by text lookup, with the shortest and a longer match; its
     * proposals are judged, and (this small model repeats itself) accepted */
    g_lookup = 1;
    sweep(t, NULL, prompt, np, 120, "stories/lookup draft, match >= 1");
    run_cfg spec_lookup = {TF_SPEC_DRAFT, 1, 6, 64, 8, 4, 4, 32};
    run(t, NULL, &spec_lookup, prompt, np, 120, out, st);
    print_message("spec, lookup draft: %lld proposals of %lld tokens, target accepts %lld/%lld\n",
                  (long long)st[1].passes, (long long)st[1].rows, (long long)st[0].accepted,
                  (long long)st[0].verified);
    assert_true(st[1].passes > 0 && st[1].rows == st[0].verified && st[0].accepted > 0);
    g_lookup = 3;
    sweep(t, NULL, prompt, np, 120, "stories/lookup draft, match >= 3");
    g_lookup = 0;
    assert_int_equal(tf_model_view_layers(&dl, t, 5, &err), TF_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "1..4"));
    tf_model_free(t);
    tf_model_free(dq);
    tf_model_free(dr);
    unlink(q8);
    unlink(rnd);
}

/* Generated MHA and GQA targets with byte vocabularies; random drafts. */
static void test_greedy_equality_generated(void **state) {
    (void)state;
    const char *pt = gen_model(64, 4, 4, NULL, 5);
    char tpath[512];
    snprintf(tpath, sizeof tpath, "%s", pt);
    const char *pd = gen_model(32, 2, 1, NULL, 6);
    tf_model *t = load(tpath), *d = load(pd);
    int32_t prompt[900];
    random_prompt(prompt, 900);
    sweep(t, d, prompt, 900, 60, "mha target, long prompt");
    tf_model_free(t);
    tf_model_free(d);
    unlink(tpath);
    const char *pg = gen_model(64, 8, 2, NULL, 7);
    snprintf(tpath, sizeof tpath, "%s", pg);
    t = load(tpath);
    d = load(pd);
    sweep(t, d, prompt, 30, 60, "gqa target, short prompt");
    sweep(t, t, prompt, 300, 60, "gqa target, self draft");
    g_lookup = 1;
    sweep(t, NULL, prompt, 300, 60, "gqa target, lookup draft");
    g_lookup = 0;
    tf_model_free(t);
    tf_model_free(d);
    unlink(tpath);
    unlink(pd);
}

/* Sampled decoding under the keyed coupling (keyed.h): every mode, setting,
 * route and draft emits exactly ar's sampled text for the seed, at T = 1 over
 * the whole vocabulary and at lower temperatures with top-k / top-p / min-p,
 * on generated MHA and GQA targets, stories260K with its Q8_0 draft and a
 * text-lookup draft, and SmolLM2 (when fetched). Negative control: the
 * accept-all verifier's text is not ar's. */
static void sampled_sweeps(const tf_model *t, const tf_model *d, const int32_t *prompt, int np, int n,
                           const char *label, int n_settings) {
    static const tf_sampling_cfg settings[] = {
        {.temp = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 11},
        {.temp = 0.6f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f, .seed = 12},
        {.temp = 0.8f, .top_k = 0, .top_p = 0.9f, .min_p = 0.0f, .seed = 13},
    };
    /* the second setting (the CLI's defaults at T = 0.6) first */
    for (int j = 0; j < n_settings && j < (int)(sizeof settings / sizeof settings[0]); j++) {
        g_sampling = settings[j == 0 ? 1 : j == 1 ? 0 : j];
        char what[200];
        snprintf(what, sizeof what, "%s, sampled T %g top-k %d top-p %g min-p %g", label, (double)g_sampling.temp,
                 g_sampling.top_k, (double)g_sampling.top_p, (double)g_sampling.min_p);
        sweep(t, d, prompt, np, n, what);
    }
    g_sampling = (tf_sampling_cfg){.temp = 0.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 1};
}

/* The accept-all verifier's sampled text differs from ar's (the draft's
 * tokens go through unjudged). */
static void expect_broken_differs(const tf_model *t, const tf_model *d, const int32_t *prompt, int np, int n) {
    int32_t ref[512], out[512];
    g_sampling = (tf_sampling_cfg){.temp = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 21};
    run_cfg ar = {TF_SPEC_AR, 1, 1, 64, 8, 4, 4, 32}, tri = {TF_SPEC_TRIFORCE, 2, 6, 48, 8, 4, 4, 32};
    run(t, NULL, &ar, prompt, np, n, ref, NULL);
    g_vmode = TF_VERIFY_BROKEN_ACCEPT_ALL;
    run(t, d, &tri, prompt, np, n, out, NULL);
    g_vmode = TF_VERIFY_EXACT;
    int differ = 0;
    for (int i = 0; i < n; i++) differ += out[i] != ref[i];
    print_message("accept-all verifier: %d of %d tokens differ from ar's (negative control)\n", differ, n);
    assert_true(differ > 0);
    g_sampling = (tf_sampling_cfg){.temp = 0.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 1};
}

static void test_sampled_equality_keyed(void **state) {
    (void)state;
    const char *pt = gen_model(64, 4, 4, NULL, 5);
    char tpath[512];
    snprintf(tpath, sizeof tpath, "%s", pt);
    const char *pg = gen_model(64, 8, 2, NULL, 7);
    char gpath[512];
    snprintf(gpath, sizeof gpath, "%s", pg);
    const char *pd = gen_model(32, 2, 1, NULL, 6);
    tf_model *t = load(tpath), *g = load(gpath), *d = load(pd);
    int32_t prompt[900];
    random_prompt(prompt, 900);
    sampled_sweeps(t, d, prompt, 500, 40, "mha target, random draft", 3);
    sampled_sweeps(g, g, prompt, 200, 40, "gqa target, self draft", 3);
    g_lookup = 1;
    sampled_sweeps(g, NULL, prompt, 200, 40, "gqa target, lookup draft", 3);
    g_lookup = 0;
    expect_broken_differs(g, d, prompt, 200, 40);
    tf_model_free(t);
    tf_model_free(g);
    tf_model_free(d);
    unlink(tpath);
    unlink(gpath);
    unlink(pd);
}

static void test_sampled_equality_keyed_real(void **state) {
    (void)state;
    char target_path[512], q8[512];
    tf_model *t, *dq;
    load_stories_pair(target_path, sizeof target_path, q8, sizeof q8, &t, &dq);
    static int32_t prompt[2048];
    int np = prompt_from_text(t, "text/moby-dick.txt", 400, prompt);
    sampled_sweeps(t, dq, prompt, np, 80, "stories/q8 draft", 3);
    g_lookup = 2;
    sampled_sweeps(t, NULL, prompt, np, 80, "stories/lookup draft", 3);
    g_lookup = 0;
    tf_model_free(t);
    tf_model_free(dq);
    unlink(q8);
}

static void test_sampled_equality_keyed_smollm2(void **state) {
    (void)state;
    TU_REQUIRE_MODEL(mp, TU_SMOLLM2);
    TU_REQUIRE_SHARED(tp, "text/pride_and_prejudice.txt");
    (void)tp;
    tf_err err = {0};
    static int32_t prompt[2048];
    tf_model *m = load(mp), *md;
    assert_int_equal(tf_model_view_layers(&md, m, 6, &err), TF_OK);
    int np = prompt_from_text(m, "text/pride_and_prejudice.txt", 200, prompt);
    sampled_sweeps(m, md, prompt, np, 30, "smollm2, first 6 layers as draft", 1);
    tf_model_free(md);
    tf_model_free(m);
}

/* q8_0 / q4_0 KV caches in every level (full, retrieval gather, streaming
 * view): each mode equals autoregressive greedy decoding over the same cache
 * type, prefilled directly and from another decoder; a model whose head_dim
 * is not a multiple of 32 (stories260K: 8) is refused by name. */
static void test_greedy_equality_quantized_kv(void **state) {
    (void)state;
    const char *pg = gen_model(128, 4, 2, NULL, 21); /* head_dim 32, GQA 2 */
    char tpath[512];
    snprintf(tpath, sizeof tpath, "%s", pg);
    const char *pd = gen_model(64, 2, 1, NULL, 22); /* head_dim 32 */
    tf_model *t = load(tpath), *d = load(pd);
    int32_t prompt[500];
    random_prompt(prompt, 500);
    static const tf_dtype types[] = {TF_DTYPE_Q8_0, TF_DTYPE_Q4_0};
    for (int i = 0; i < 2; i++) {
        g_kv_type = types[i];
        sweep(t, d, prompt, 500, 50, tf_dtype_name(types[i]));
        g_prefill_from = true;
        sweep(t, d, prompt, 300, 30, tf_dtype_name(types[i]));
        g_prefill_from = false;
        g_lookup = 1;
        sweep(t, NULL, prompt, 300, 40, tf_dtype_name(types[i]));
        g_lookup = 0;
    }
    g_kv_type = TF_DTYPE_F32;
    /* head_dim 8 */
    const char *ps = gen_model(32, 4, 2, NULL, 23);
    tf_model *small = load(ps);
    tf_spec_cfg c = {.mode = TF_SPEC_AR, .gamma1 = 1, .gamma2 = 4, .budget = 64, .chunk = 8, .recent = 8,
                     .rebuild_stride = 4, .sinks = 4, .window = 32, .n_ctx = 200, .n_batch = 64,
                     .kv_type = TF_DTYPE_Q8_0, .isa = TF_ISA_BEST, .sampling = {.temp = 0.0f, .top_p = 1.0f}};
    tf_spec s;
    tf_err err = {0};
    assert_int_equal(tf_spec_init(&s, small, NULL, &c, g_pool, &err), TF_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "q8_0"));
    assert_non_null(strstr(err.msg, "head_dim is 8"));
    /* a head_dim-32 target with a head_dim-8 draft: the draft is refused */
    c.mode = TF_SPEC_TRIFORCE;
    c.kv_type = TF_DTYPE_Q4_0;
    tf_err_clear(&err);
    assert_int_equal(tf_spec_init(&s, t, small, &c, g_pool, &err), TF_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "head_dim is 8"));
    tf_model_free(small);
    tf_model_free(t);
    tf_model_free(d);
    unlink(ps);
    unlink(tpath);
    unlink(pd);
}

/* The longest match (newest among equals) by brute force: every j, every length. */
static int32_t lookup_ref(const int32_t *seq, int64_t n, int32_t min_len, int32_t max_len, int64_t *from) {
    int32_t best = 0;
    int64_t best_j = -1;
    for (int64_t j = 0; j + 1 < n; j++) {
        int32_t len = 0;
        for (int32_t l = 1; l <= max_len && j - l + 1 >= 0; l++) {
            bool eq = true;
            for (int32_t i = 0; i < l; i++) eq = eq && seq[j - i] == seq[n - 1 - i];
            if (eq) len = l;
        }
        if (len > 0 && len >= best) best = len, best_j = j; /* >=: the newest of equally long */
    }
    *from = best >= min_len ? best_j + 1 : 0;
    return best >= min_len ? best : 0;
}

/* tf_lookup_match on hand-checked cases and against the brute-force reference
 * on random sequences over small alphabets (many matches, of every length). */
static void test_lookup_match(void **state) {
    (void)state;
    int64_t from = -1;
    /* a b c a b -> "a b" at 0..1: propose from 2 (c) */
    const int32_t s1[] = {1, 2, 3, 1, 2};
    assert_int_equal(tf_lookup_match(s1, 5, 1, 16, &from), 2);
    assert_int_equal(from, 2);
    assert_int_equal(tf_lookup_match(s1, 5, 3, 16, &from), 0); /* shorter than asked */
    assert_int_equal(from, 0);
    /* the longer match wins over a newer shorter one: x a b | y b | a b */
    const int32_t s2[] = {9, 1, 2, 7, 8, 2, 1, 2};
    assert_int_equal(tf_lookup_match(s2, 8, 1, 16, &from), 2);
    assert_int_equal(from, 3);
    /* equally long: the newest; a period-2 run copies into what it proposes */
    const int32_t s3[] = {5, 6, 5, 6, 5, 6};
    assert_int_equal(tf_lookup_match(s3, 6, 1, 2, &from), 2);
    assert_int_equal(from, 4);
    assert_int_equal(tf_lookup_match(s3, 6, 1, 16, &from), 4);
    assert_int_equal(from, 4);
    /* no earlier occurrence of the newest token; too short; bad bounds */
    const int32_t s4[] = {1, 2, 3, 4};
    assert_int_equal(tf_lookup_match(s4, 4, 1, 16, &from), 0);
    assert_int_equal(tf_lookup_match(s4, 1, 1, 16, &from), 0);
    assert_int_equal(tf_lookup_match(s1, 5, 0, 16, &from), 0);
    assert_int_equal(tf_lookup_match(s1, 5, 3, 2, &from), 0);
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed());
    static int32_t seq[400];
    for (int trial = 0; trial < 3000; trial++) {
        int alphabet = 2 + trial % 5, n = 1 + (int)(tf_rng_next(&rng) % 300);
        int32_t min_len = 1 + trial % 4, max_len = min_len + (int32_t)(tf_rng_next(&rng) % 16);
        for (int i = 0; i < n; i++) seq[i] = (int32_t)(tf_rng_next(&rng) % (uint64_t)alphabet);
        int64_t f1, f2;
        int32_t l1 = tf_lookup_match(seq, n, min_len, max_len, &f1), l2 = lookup_ref(seq, n, min_len, max_len, &f2);
        if (l1 != l2 || f1 != f2) {
            print_error("trial %d (n %d, alphabet %d, min %d, max %d): match %d from %lld, reference %d from %lld\n",
                        trial, n, alphabet, min_len, max_len, l1, (long long)f1, l2, (long long)f2);
            fail();
        }
    }
}

/* Lookup drafting's settings: refused out of range, with a draft model, and
 * not needed by modes that have no bottom level. */
static void test_lookup_cfg(void **state) {
    (void)state;
    const char *pt = gen_model(32, 2, 1, NULL, 21);
    char tpath[512];
    snprintf(tpath, sizeof tpath, "%s", pt);
    tf_model *t = load(tpath);
    tf_spec_cfg c = {.mode = TF_SPEC_TRIFORCE, .gamma1 = 2, .gamma2 = 4, .budget = 64, .chunk = 8, .recent = 8,
                     .rebuild_stride = 4, .sinks = 4, .window = 32, .n_ctx = 128, .n_batch = 64,
                     .kv_type = TF_DTYPE_F32, .isa = TF_ISA_BEST, .sampling = {.temp = 0, .top_p = 1}, .lookup = 17};
    tf_spec s;
    tf_err err = {0};
    assert_int_equal(tf_spec_init(&s, t, NULL, &c, g_pool, &err), TF_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "lookup 17"));
    c.lookup = 2;
    err = (tf_err){0}; /* an error keeps its first message */
    assert_int_equal(tf_spec_init(&s, t, t, &c, g_pool, &err), TF_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "both"));
    assert_int_equal(tf_spec_init(&s, t, NULL, &c, g_pool, &err), TF_OK);
    assert_int_equal(s.n_levels, 3);
    assert_int_equal(s.lv[2].kind, LEVEL_LOOKUP);
    tf_spec_free(&s);
    c.lookup = 0;
    err = (tf_err){0};
    assert_int_equal(tf_spec_init(&s, t, NULL, &c, g_pool, &err), TF_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "lookup drafting"));
    c.mode = TF_SPEC_RETRIEVAL; /* no bottom level: lookup is not used */
    c.lookup = 2;
    assert_int_equal(tf_spec_init(&s, t, NULL, &c, g_pool, &err), TF_OK);
    assert_int_equal(s.n_levels, 2);
    assert_int_equal(s.lv[1].kind, LEVEL_RETRIEVAL);
    tf_spec_free(&s);
    tf_model_free(t);
    unlink(tpath);
}

/* Sinks and a window far past the context cost no more than the context:
 * the streaming cache is sized by n_ctx, and the output is still the
 * autoregressive one. */
static void test_window_past_context(void **state) {
    (void)state;
    const char *pt = gen_model(64, 8, 2, NULL, 11);
    char tpath[512];
    snprintf(tpath, sizeof tpath, "%s", pt);
    tf_model *t = load(tpath);
    int32_t prompt[40], ref[24], out[24];
    random_prompt(prompt, 40);
    run_cfg ar = {TF_SPEC_AR, 1, 1, 64, 8, 4, 4, 32};
    run(t, NULL, &ar, prompt, 40, 24, ref, NULL);
    const run_cfg huge[] = {{TF_SPEC_STREAMING, 2, 4, 64, 8, 4, 1 << 20, 1 << 24},
                            {TF_SPEC_TRIFORCE, 2, 4, 1 << 20, 8, 4, 4, 1 << 24}};
    for (int i = 0; i < 2; i++) {
        tf_spec_cfg c = {
            .mode = huge[i].mode, .gamma1 = 2, .gamma2 = 4, .budget = huge[i].budget, .chunk = 8, .recent = 8,
            .rebuild_stride = 4, .rebuild_accept = 0.3f, .bypass_probe = 3, .sinks = huge[i].sinks,
            .window = huge[i].window, .n_ctx = 40 + 24 + 32, .n_batch = 64, .kv_type = TF_DTYPE_F32,
            .isa = TF_ISA_BEST, .sampling = {.temp = 0.0f, .top_p = 1.0f, .seed = 1},
        };
        tf_spec sp;
        tf_err err = {0};
        assert_int_equal(tf_spec_init(&sp, t, t, &c, g_pool, &err), TF_OK);
        const tf_scache *sc = &sp.lv[sp.n_levels - 1].sc;
        if (sc->view.n_slots > 4 * c.n_ctx)
            fail_msg("%s: the streaming view has %d slots for a context of %d", tf_spec_mode_name(c.mode),
                     sc->view.n_slots, c.n_ctx);
        tf_spec_free(&sp);
        run(t, t, &huge[i], prompt, 40, 24, out, NULL);
        assert_memory_equal(out, ref, sizeof ref);
    }
    tf_model_free(t);
    unlink(tpath);
}

/* Budget 0 is an eighth of the context in whole chunks within 256..4096
 * (values computed by hand), the retrieval cache is made with it, and the
 * decoder it makes is greedy-equal to ar; a negative budget is refused. */
static void test_auto_budget(void **state) {
    (void)state;
    assert_int_equal(tf_spec_auto_budget(8256, 8), 1032);
    assert_int_equal(tf_spec_auto_budget(8000, 12), 996); /* 1000 in chunks of 12 */
    assert_int_equal(tf_spec_auto_budget(100, 8), 256);
    assert_int_equal(tf_spec_auto_budget(131072, 8), 4096);
    assert_int_equal(tf_spec_auto_budget(20000, 16), 2496);
    const char *pt = gen_model(64, 8, 2, NULL, 13);
    char tpath[512];
    snprintf(tpath, sizeof tpath, "%s", pt);
    tf_model *t = load(tpath);
    tf_spec_cfg c = {
        .mode = TF_SPEC_RETRIEVAL, .gamma1 = 2, .gamma2 = 4, .budget = 0, .chunk = 8, .recent = 8,
        .rebuild_stride = 4, .rebuild_accept = 0.3f, .bypass_probe = 3, .sinks = 4, .window = 32,
        .n_ctx = 2100, .n_batch = 64, .kv_type = TF_DTYPE_F32, .isa = TF_ISA_BEST,
        .sampling = {.temp = 0.0f, .top_p = 1.0f, .seed = 1},
    };
    tf_spec s;
    tf_err err = {0};
    assert_int_equal(tf_spec_init(&s, t, NULL, &c, g_pool, &err), TF_OK);
    assert_int_equal(s.cfg.budget, 256);
    assert_int_equal(s.rc.p.budget, 256);
    tf_spec_free(&s);
    c.budget = -1;
    assert_int_equal(tf_spec_init(&s, t, NULL, &c, g_pool, &err), TF_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "budget -1"));
    /* greedy: the auto-budget decoder equals ar over a prompt past the budget */
    int32_t prompt[300], ref[24], out[24];
    random_prompt(prompt, 300);
    run_cfg ar = {TF_SPEC_AR, 1, 1, 64, 8, 4, 4, 32};
    run(t, NULL, &ar, prompt, 300, 24, ref, NULL);
    run_cfg rt = {TF_SPEC_RETRIEVAL, 2, 4, 0, 8, 4, 4, 32};
    run(t, NULL, &rt, prompt, 300, 24, out, NULL);
    assert_memory_equal(out, ref, sizeof ref);
    tf_model_free(t);
    unlink(tpath);
}

/* The gamma2 controller against simulated passes: a target pass over r rows
 * costs a + b r, a draft token d, every candidate is accepted with probability
 * alpha. After a few hundred passes the controller must pick the k that a
 * brute-force search of expected tokens per second picks (or one within 2% of
 * its rate), for cheap and for expensive verification. */
static void test_gamma_controller(void **state) {
    (void)state;
    static const struct { double a, b, d, alpha; } cases[] = {
        {10e-3, 0.5e-3, 3e-3, 0.9}, /* verification nearly free: long drafts */
        {10e-3, 10e-3, 3e-3, 0.9},  /* each row costs a pass: short drafts */
        {10e-3, 2e-3, 4e-3, 0.6},   /* poor acceptance */
        {12e-3, 1e-3, 1e-3, 0.97},  /* cheap drafts, high acceptance */
    };
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed());
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        double a = cases[ci].a, b = cases[ci].b, d = cases[ci].d, al = cases[ci].alpha;
        int best_k = 1;
        double best = 0, rate[TF_SPEC_GAMMA2_AUTO_MAX + 1];
        for (int k = 1; k <= TF_SPEC_GAMMA2_AUTO_MAX; k++) {
            double tokens = 0, p = 1;
            for (int j = 0; j <= k; j++) tokens += p, p *= al;
            rate[k] = tokens / (k * d + a + b * (k + 1));
            if (rate[k] > best) best = rate[k], best_k = k;
        }
        tf_gamma_ctl c;
        tf_gamma_init(&c, TF_SPEC_GAMMA2_AUTO_MAX);
        int picks[TF_SPEC_GAMMA2_AUTO_MAX + 1] = {0};
        for (int pass = 0; pass < 600; pass++) {
            int k = tf_gamma_next(&c);
            assert_true(k >= 1 && k <= TF_SPEC_GAMMA2_AUTO_MAX);
            int acc = 0;
            while (acc < k && (double)(tf_rng_next(&rng) % 1000000) / 1e6 < al) acc++;
            double noise = 1 + 0.05 * ((double)(tf_rng_next(&rng) % 1000) / 1000 - 0.5);
            tf_gamma_observe(&c, k, k * d * noise, k + 1, (a + b * (k + 1)) * noise, acc);
            if (pass >= 300) picks[k]++;
        }
        int mode_k = 1;
        for (int k = 1; k <= TF_SPEC_GAMMA2_AUTO_MAX; k++)
            if (picks[k] > picks[mode_k]) mode_k = k;
        if (rate[mode_k] < 0.98 * best) {
            print_error("case %zu: the controller mostly chose k = %d (rate %.1f/s); the best is k = %d (%.1f/s)\n",
                        ci, mode_k, rate[mode_k], best_k, best);
            fail();
        }
    }
}

/* The route controller against simulated generations of 600 target passes
 * (tokens per pass uniform in 1 .. 2 mean - 1, times with 10% noise): its
 * tokens per second, warm-up and exploration included, average at least 94%
 * of the better route's over 100 generations, whichever route that is, and
 * it keeps exploring the other; where the rates cross part way, it follows. */
static void test_route_controller(void **state) {
    (void)state;
    /* seconds per target pass and mean tokens per pass of each route */
    static const struct { double t_mid; int tok_mid; double t_skip; int tok_skip; } cases[] = {
        {0.075, 6, 0.030, 4}, /* lookup on repetitive text: skipping pays */
        {0.068, 6, 0.045, 1}, /* a poorly accepted draft: the middle level pays */
        {0.050, 3, 0.046, 3}, /* close: skipping by 9% */
        {0.060, 6, 0.030, 2}, /* close the other way: the middle level by 50% */
    };
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed());
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        int better = cases[ci].tok_skip / cases[ci].t_skip > cases[ci].tok_mid / cases[ci].t_mid ? TF_ROUTE_SKIP
                                                                                                : TF_ROUTE_MIDDLE;
        double best = better == TF_ROUTE_SKIP ? cases[ci].tok_skip / cases[ci].t_skip
                                              : cases[ci].tok_mid / cases[ci].t_mid;
        double sum_ratio = 0;
        int64_t other = 0;
        for (int gen = 0; gen < 100; gen++) {
            tf_route_ctl c;
            tf_route_init(&c);
            double tokens = 0, seconds = 0;
            for (int pass = 0; pass < 600; pass++) {
                int r = tf_route_next(&c);
                assert_true(r == TF_ROUTE_MIDDLE || r == TF_ROUTE_SKIP);
                int mean_tok = r == TF_ROUTE_MIDDLE ? cases[ci].tok_mid : cases[ci].tok_skip;
                double t = r == TF_ROUTE_MIDDLE ? cases[ci].t_mid : cases[ci].t_skip;
                int tok = 1 + (int)(tf_rng_next(&rng) % (uint64_t)(2 * mean_tok - 1));
                double noise = 1 + 0.1 * ((double)(tf_rng_next(&rng) % 1000) / 1000 - 0.5);
                tf_route_observe(&c, r, tok, t * noise);
                tokens += mean_tok, seconds += t;
                if (pass >= 300 && r != better) other++;
            }
            sum_ratio += tokens / seconds / best;
        }
        print_message("route case %zu: %.3f of the better route's tokens/s; the other taken %lld times in the second "
                      "halves\n", ci, sum_ratio / 100, (long long)other);
        assert_true(sum_ratio / 100 >= 0.94);
        assert_true(other > 0);
    }
    /* the rates cross: skipping pays for 200 passes, then the middle level */
    tf_route_ctl c;
    tf_route_init(&c);
    int64_t late[2] = {0, 0};
    for (int pass = 0; pass < 400; pass++) {
        int r = tf_route_next(&c);
        double rate = r == TF_ROUTE_SKIP ? (pass < 200 ? 150 : 50) : 100; /* tokens per second */
        tf_route_observe(&c, r, 4, 4 / rate);
        if (pass >= 300) late[r]++;
    }
    assert_true(late[TF_ROUTE_MIDDLE] >= 90);
    assert_true(tf_route_rate(&c, TF_ROUTE_MIDDLE) > 99 && tf_route_rate(&c, TF_ROUTE_MIDDLE) < 101);
}

/* With the middle level skipped on every pass, a three-level decoder is the
 * two-level spec decoder: the same draft proposes, the target verifies, the
 * random stream is consumed alike, so sampled output is the same token for
 * token for the same seed (the chi-square tests of test_spec_dist check the
 * distribution of every route). */
/* A middle level that comes back after 4..16 skipped passes (a streaming
 * level catches up in batches, a retrieval level is rebuilt): output equal to
 * ar's. The draft is the target itself over a small streaming cache, so
 * passes confirm up to gamma2 + 1 = 7 tokens and the lag crosses the
 * streaming level's batch of 64 at many offsets, among them a lag that the
 * gamma1 = 8 candidates to judge take past the batch while the tokens before
 * them do not (the case the catch-up once missed: "66 tokens exceed its batch
 * of 64"). */
static void test_long_skip(void **state) {
    (void)state;
    const char *pg = gen_model(64, 8, 2, NULL, 23);
    tf_model *t = load(pg);
    static int32_t prompt[200], ref[300], out[300];
    random_prompt(prompt, 200);
    run_cfg ar = {TF_SPEC_AR, 1, 1, 64, 8, 4, 4, 32};
    run(t, NULL, &ar, prompt, 200, 300, ref, NULL);
    static const run_cfg cfgs[] = {{TF_SPEC_STREAMING, 8, 6, 64, 8, 4, 4, 16}, {TF_SPEC_TRIFORCE, 8, 6, 48, 8, 4, 4, 32}};
    for (int skips = 4; skips <= 16; skips++)
        for (size_t c = 0; c < 2; c++) {
            g_middle = -skips;
            run(t, t, &cfgs[c], prompt, 200, 300, out, NULL);
            for (int i = 0; i < 300; i++)
                if (out[i] != ref[i]) {
                    print_error("%s, %d skipped passes at a time: token %d is %d, ar gives %d\n",
                                tf_spec_mode_name(cfgs[c].mode), skips, i, out[i], ref[i]);
                    fail();
                }
            assert_true(g_route_passes[TF_ROUTE_MIDDLE] >= 1 && g_route_passes[TF_ROUTE_SKIP] >= skips);
        }
    g_middle = TF_SPEC_MIDDLE_ALWAYS;
    tf_model_free(t);
    unlink(pg);
}

/* The route controller's situation (route.h): with a text lookup under
 * three levels, whether the sequence's newest tokens occurred before (a
 * proposal to judge) or not; a model draft always proposes. */
static void test_route_ctx(void **state) {
    (void)state;
    const char *pt = gen_model(64, 8, 2, NULL, 24);
    char tpath[512];
    snprintf(tpath, sizeof tpath, "%s", pt);
    const char *pd = gen_model(32, 2, 1, NULL, 25);
    tf_model *t = load(tpath), *d = load(pd);
    int32_t fresh[100], repeat[104];
    for (int i = 0; i < 100; i++) fresh[i] = repeat[i] = 10 + i; /* no token twice */
    for (int i = 0; i < 4; i++) repeat[100 + i] = 50 + i;       /* ends as positions 40..43 did */
    const struct { int lookup; bool model; const int32_t *p; int n; int want; } cases[] = {
        {4, false, fresh, 100, TF_ROUTE_CTX_NONE},    {4, false, repeat, 104, TF_ROUTE_CTX_DRAFT},
        {5, false, repeat, 104, TF_ROUTE_CTX_NONE},   /* a match of 4 is below the minimum of 5 */
        {0, true, fresh, 100, TF_ROUTE_CTX_DRAFT},    {0, true, repeat, 104, TF_ROUTE_CTX_DRAFT},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        tf_spec_cfg c = {
            .mode = TF_SPEC_TRIFORCE, .gamma1 = 2, .gamma2 = 5, .budget = 64, .chunk = 8, .recent = 8,
            .rebuild_stride = 4, .rebuild_accept = 0.3f, .sinks = 4, .window = 32, .n_ctx = 300, .n_batch = 64,
            .kv_type = TF_DTYPE_F32, .isa = TF_ISA_BEST, .middle = TF_SPEC_MIDDLE_AUTO, .lookup = cases[ci].lookup,
            .sampling = {.temp = 0.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 1},
        };
        tf_spec s;
        tf_err err = {0};
        assert_int_equal(tf_spec_init(&s, t, cases[ci].model ? d : NULL, &c, g_pool, &err), TF_OK);
        assert_int_equal(tf_spec_prefill(&s, cases[ci].p, cases[ci].n, NULL, NULL), TF_OK);
        if (tf_spec_route_ctx(&s) != cases[ci].want) {
            print_error("case %zu (lookup %d, %s draft, %d-token prompt): situation %d, expected %d\n", ci,
                        cases[ci].lookup, cases[ci].model ? "model" : "no", cases[ci].n, tf_spec_route_ctx(&s),
                        cases[ci].want);
            fail();
        }
        tf_spec_free(&s);
    }
    tf_model_free(t);
    tf_model_free(d);
    unlink(tpath);
    unlink(pd);
}

static void test_skip_route_is_spec(void **state) {
    (void)state;
    const char *pt = gen_model(64, 8, 2, NULL, 21);
    char tpath[512];
    snprintf(tpath, sizeof tpath, "%s", pt);
    const char *pd = gen_model(32, 2, 1, NULL, 22);
    tf_model *t = load(tpath), *d = load(pd);
    int32_t prompt[200];
    random_prompt(prompt, 200);
    static const tf_spec_mode modes[] = {TF_SPEC_DRAFT, TF_SPEC_TRIFORCE, TF_SPEC_STREAMING};
    int32_t out[3][80];
    for (int m = 0; m < 3; m++) {
        tf_spec_cfg c = {
            .mode = modes[m], .gamma1 = 2, .gamma2 = 5, .budget = 64, .chunk = 8, .recent = 8, .rebuild_stride = 4,
            .rebuild_accept = 0.3f, .sinks = 4, .window = 32, .n_ctx = 300, .n_batch = 64, .kv_type = TF_DTYPE_F32,
            .isa = TF_ISA_BEST, .middle = TF_SPEC_MIDDLE_NEVER,
            .sampling = {.temp = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 77},
        };
        tf_spec s;
        tf_err err = {0};
        assert_int_equal(tf_spec_init(&s, t, d, &c, g_pool, &err), TF_OK);
        assert_int_equal(tf_spec_prefill(&s, prompt, 200, NULL, NULL), TF_OK);
        int got = 0;
        while (got < 80) {
            int32_t buf[64], k;
            assert_int_equal(tf_spec_step(&s, buf, 64, &k), TF_OK);
            for (int i = 0; i < k && got < 80; i++) out[m][got++] = buf[i];
        }
        if (m > 0) assert_true(s.route_passes[TF_ROUTE_SKIP] > 0 && s.route_passes[TF_ROUTE_MIDDLE] == 0);
        tf_spec_free(&s);
    }
    for (int m = 1; m < 3; m++)
        for (int i = 0; i < 80; i++)
            if (out[m][i] != out[0][i]) {
                print_error("%s with the middle level skipped: token %d is %d, spec gives %d\n",
                            tf_spec_mode_name(modes[m]), i, out[m][i], out[0][i]);
                fail();
            }
    tf_model_free(t);
    tf_model_free(d);
    unlink(tpath);
    unlink(pd);
}

/* A decoder prefilled from another decoder's caches decodes exactly as one
 * that prefilled the prompt itself, in every mode; a retrieval level refuses a
 * source that kept no query (ar mode), naming what it needs. */
static void test_prefill_from(void **state) {
    (void)state;
    const char *pg = gen_model(64, 8, 2, NULL, 11);
    char tpath[512];
    snprintf(tpath, sizeof tpath, "%s", pg);
    const char *pd = gen_model(32, 2, 1, NULL, 12);
    tf_model *t = load(tpath), *d = load(pd);
    int32_t prompt[400];
    random_prompt(prompt, 400);
    g_prefill_from = true;
    sweep(t, d, prompt, 400, 40, "prefilled from another decoder");
    g_prefill_from = false;
    tf_spec_cfg c = {
        .mode = TF_SPEC_AR, .gamma1 = 1, .gamma2 = 4, .budget = 64, .chunk = 8, .recent = 8, .rebuild_stride = 4,
        .rebuild_accept = 0.3f, .sinks = 4, .window = 32, .n_ctx = 200, .n_batch = 64, .kv_type = TF_DTYPE_F32,
        .isa = TF_ISA_BEST, .sampling = {.temp = 0.0f, .top_k = 0, .top_p = 1.0f, .seed = 1},
    };
    tf_spec src, dst;
    tf_err err = {0};
    assert_int_equal(tf_spec_init(&src, t, NULL, &c, g_pool, &err), TF_OK);
    assert_int_equal(tf_spec_prefill(&src, prompt, 100, NULL, NULL), TF_OK);
    c.mode = TF_SPEC_RETRIEVAL;
    assert_int_equal(tf_spec_init(&dst, t, NULL, &c, g_pool, &err), TF_OK);
    assert_int_equal(tf_spec_prefill_from(&dst, &src, NULL, NULL), TF_ERR_INVALID_ARG);
    assert_non_null(strstr(dst.err.msg, "newest query"));
    tf_spec_free(&dst);
    c.n_ctx = 90; /* too small for the source's 100 tokens */
    c.mode = TF_SPEC_AR;
    assert_int_equal(tf_spec_init(&dst, t, NULL, &c, g_pool, &err), TF_OK);
    assert_int_equal(tf_spec_prefill_from(&dst, &src, NULL, NULL), TF_ERR_RANGE);
    tf_spec_free(&dst);
    tf_spec_free(&src);
    tf_model_free(t);
    tf_model_free(d);
    unlink(tpath);
    unlink(pd);
}

/* The target caches of two decoders agree bitwise on positions [0, n). */
static void expect_same_kv(const tf_kv_cache *a, const tf_kv_cache *b, int32_t n, const char *label) {
    for (int il = 0; il < a->n_layer; il++)
        for (int h = 0; h < a->n_head_kv; h++) {
            size_t off = (size_t)il * a->layer_stride + (size_t)h * a->head_stride;
            /* whole K blocks and V rows, in bytes of any cache type */
            size_t kb = (size_t)(n / TF_KV_BLK) * a->k_blk_bytes, vb = (size_t)n * a->v_row_bytes;
            if (memcmp(a->k + off, b->k + off, kb) != 0 || memcmp(a->v + off, b->v + off, vb) != 0)
                fail_msg("%s: layer %d head %d: the caches differ within the first %d positions", label, il, h, n);
        }
}

/* Prefill q reusing a's cache, and prefill it fresh: the reused positions are
 * want, the target caches agree bitwise, and 48 decoded tokens are the same. */
static void check_reuse(const tf_model *t, const tf_model *dm, const tf_spec_cfg *c, const tf_spec *a,
                        const int32_t *q, int32_t nq, int32_t want, const char *label) {
    tf_spec b, r;
    tf_err err = {0};
    int32_t reused = -1, rb[64], rc[64];
    assert_int_equal(tf_spec_init(&b, t, dm, c, g_pool, &err), TF_OK);
    assert_int_equal(tf_spec_prefill_reuse(&b, q, nq, a, NULL, NULL, &reused), TF_OK);
    if (reused != want) fail_msg("%s: reused %d positions, expected %d", label, reused, want);
    assert_int_equal(tf_spec_init(&r, t, dm, c, g_pool, &err), TF_OK);
    assert_int_equal(tf_spec_prefill(&r, q, nq, NULL, NULL), TF_OK);
    expect_same_kv(&b.kv_p, &r.kv_p, nq - 1, label);
    int nb = 0, nr = 0;
    while (nb < 48) {
        int32_t k;
        assert_int_equal(tf_spec_step(&b, rb + nb, 16, &k), TF_OK);
        nb += k;
    }
    while (nr < 48) {
        int32_t k;
        assert_int_equal(tf_spec_step(&r, rc + nr, 16, &k), TF_OK);
        nr += k;
    }
    for (int i = 0; i < 48; i++)
        if (rb[i] != rc[i]) fail_msg("%s: token %d is %d after reuse, %d after a prefill", label, i, rb[i], rc[i]);
    tf_spec_free(&b);
    tf_spec_free(&r);
}

/* Prefill with reuse: a decoder that copies the prefix a finished decoder
 * prefilled decodes exactly as one that prefilled the whole prompt itself,
 * sampled (same seed) and greedy, in every mode, and its target cache is
 * bitwise the same. Only whole prefill batches of the source's prompt are
 * reused: the rest is computed in the batches a fresh prefill uses (a batch
 * of up to 16 rows takes other kernels than a larger one, so a follow-up of a
 * few tokens computed alone would differ in the last bits). */
static void test_prefill_reuse(void **state) {
    (void)state;
    const char *pg = gen_model(128, 4, 2, NULL, 21); /* head_dim 32: the bf16 attention kernels */
    char tpath[512];
    snprintf(tpath, sizeof tpath, "%s", pg);
    const char *pd = gen_model(32, 2, 1, NULL, 22);
    tf_model *t = load(tpath), *d = load(pd);
    int32_t prompt[800], follow[300], ra[64];
    random_prompt(prompt, 800);
    for (int i = 0; i < 300; i++) follow[i] = 3 + (prompt[(i * 7) % 800] + 11) % 256;
    const tf_spec_mode modes[] = {TF_SPEC_AR, TF_SPEC_RETRIEVAL, TF_SPEC_DRAFT, TF_SPEC_TRIFORCE};
    for (size_t mi = 0; mi < sizeof modes / sizeof modes[0]; mi++)
        for (int sampled = 0; sampled < 2; sampled++) {
            tf_spec_cfg c = {
                .mode = modes[mi], .gamma1 = 2, .gamma2 = 4, .budget = 64, .chunk = 8, .recent = 8,
                .rebuild_stride = 4, .rebuild_accept = 0.3f, .bypass_probe = 3, .sinks = 4, .window = 32,
                .n_ctx = 1024, .n_batch = 256, .kv_type = TF_DTYPE_F16, .isa = TF_ISA_BEST,
                .sampling = {.temp = sampled ? 0.9f : 0.0f, .top_k = 0, .top_p = 1.0f, .seed = 77},
            };
            const tf_model *dm = modes[mi] == TF_SPEC_DRAFT || modes[mi] == TF_SPEC_TRIFORCE ? d : NULL;
            const char *mn = tf_spec_mode_name(c.mode), *sn = sampled ? "sampled" : "greedy";
            char label[128];
            tf_spec a;
            tf_err err = {0};
            /* a: the first request, 700 prompt tokens (699 prefilled: two batches of 256 and one of 187) */
            assert_int_equal(tf_spec_init(&a, t, dm, &c, g_pool, &err), TF_OK);
            assert_int_equal(tf_spec_prefill(&a, prompt, 700, NULL, NULL), TF_OK);
            int got = 0;
            while (got < 40) {
                int32_t k;
                assert_int_equal(tf_spec_step(&a, ra + got, 64 - got > 32 ? 32 : 64 - got, &k), TF_OK);
                got += k;
            }
            int32_t q[900];
            /* everything a holds, then a follow-up question: the prompt's two whole batches */
            int32_t nq = (int32_t)a.n_seq;
            memcpy(q, a.seq, sizeof(int32_t) * (size_t)nq);
            memcpy(q + nq, follow, sizeof(int32_t) * 60);
            snprintf(label, sizeof label, "%s, %s, answer + 60", mn, sn);
            check_reuse(t, dm, &c, &a, q, nq + 60, 512, label);
            /* the prompt and 3 more tokens; and the same prompt again */
            memcpy(q, prompt, sizeof(int32_t) * 700);
            memcpy(q + 700, follow, sizeof(int32_t) * 3);
            snprintf(label, sizeof label, "%s, %s, prompt + 3", mn, sn);
            check_reuse(t, dm, &c, &a, q, 703, 512, label);
            snprintf(label, sizeof label, "%s, %s, same prompt", mn, sn);
            check_reuse(t, dm, &c, &a, q, 700, 512, label);
            /* a prompt that leaves a's at position 300: one whole batch */
            memcpy(q + 300, follow, sizeof(int32_t) * 50);
            if (q[300] == a.seq[300]) q[300] = 3 + (q[300] + 1) % 256;
            snprintf(label, sizeof label, "%s, %s, diverging", mn, sn);
            check_reuse(t, dm, &c, &a, q, 350, 256, label);
            tf_spec_free(&a);
        }
    tf_model_free(t);
    tf_model_free(d);
    unlink(tpath);
    unlink(pd);
}

/* The same on SmolLM2 (when fetched) at 1,865 tokens, where a few rows computed
 * alone round differently from the prefill's batch (head_dim 64, bf16
 * attention over key ranges split across threads): the case that showed it. */
static void test_prefill_reuse_smollm2(void **state) {
    (void)state;
    TU_REQUIRE_MODEL(path, TU_SMOLLM2);
    TU_REQUIRE_SHARED(tp, "text/moby-dick.txt");
    (void)tp;
    tf_model *t = load(path);
    static int32_t prompt[2048], q[2048];
    int np = prompt_from_text(t, "text/moby-dick.txt", 1865, prompt);
    assert_int_equal(np, 1865);
    tf_spec_cfg c = {
        .mode = TF_SPEC_AR, .gamma1 = 2, .gamma2 = 4, .budget = 256, .chunk = 8, .recent = 16, .rebuild_stride = 16,
        .rebuild_accept = 0.3f, .bypass_probe = 3, .sinks = 4, .window = 32, .n_ctx = 2048, .n_batch = 256,
        .kv_type = TF_DTYPE_F16, .isa = TF_ISA_BEST, .sampling = {.temp = 0.0f, .top_p = 1.0f, .seed = 1},
    };
    tf_spec a;
    tf_err err = {0};
    assert_int_equal(tf_spec_init(&a, t, NULL, &c, g_pool, &err), TF_OK);
    assert_int_equal(tf_spec_prefill(&a, prompt, np, NULL, NULL), TF_OK);
    memcpy(q, prompt, sizeof(int32_t) * (size_t)np);
    for (int i = np - 3; i < np; i++) q[i] = prompt[i - 500]; /* the last 3 tokens replaced */
    check_reuse(t, NULL, &c, &a, q, np, 1792, "smollm2, last 3 tokens replaced");
    tf_spec_free(&a);
    tf_model_free(t);
}

/* Step with cap until the context is full; returns the number of tokens
 * emitted into out. Each call emits 1..min(cap, 16) tokens; a call that finds
 * tokens held back from the last pass hands them out without a pass. Bad
 * arguments are refused first, changing nothing. */
static int step_until_full(tf_spec *s, int32_t cap, int32_t *out) {
    int32_t buf[64], k = 5;
    int64_t n_seq = s->n_seq;
    assert_int_equal(tf_spec_step(s, buf, 0, &k), TF_ERR_INVALID_ARG);
    assert_int_equal(k, 0);
    assert_int_equal(tf_spec_step(s, buf, -3, &k), TF_ERR_INVALID_ARG);
    assert_int_equal(tf_spec_step(s, NULL, 4, &k), TF_ERR_INVALID_ARG);
    assert_int_equal(tf_spec_step(s, buf, 4, NULL), TF_ERR_INVALID_ARG);
    assert_int_equal(s->n_seq, n_seq);
    int got = 0;
    for (;;) {
        bool held = s->n_emitted < s->n_seq;
        int64_t passes = s->lv[0].st.passes;
        for (int i = 0; i < 64; i++) buf[i] = -7;
        tf_status st = tf_spec_step(s, buf, cap, &k);
        if (st == TF_ERR_RANGE) {
            assert_false(held);
            assert_int_equal(k, 0);
            return got;
        }
        assert_int_equal(st, TF_OK);
        assert_true(k >= 1 && k <= cap && k <= 16);
        for (int i = k; i < 64; i++) assert_int_equal(buf[i], -7);
        if (held) assert_int_equal(s->lv[0].st.passes, passes);
        else assert_int_equal(s->lv[0].st.passes, passes + 1);
        memcpy(out + got, buf, sizeof(int32_t) * (size_t)k);
        got += k;
    }
}

/* tf_spec_step's cap (tf_decoder_step's): a pass that emits more tokens than
 * cap keeps the rest for the next calls, so with sampling (the same seed) the
 * sequence is the same for every cap, to the last position of the context. A
 * self-drafting TriForce decoder accepts every candidate: passes emit up to
 * 1 + gamma2 + gamma1 tokens. */
static void test_step_cap(void **state) {
    (void)state;
    const char *pt = gen_model(64, 4, 2, NULL, 21);
    char tpath[512];
    snprintf(tpath, sizeof tpath, "%s", pt);
    tf_model *t = load(tpath);
    int32_t prompt[40];
    random_prompt(prompt, 40);
    enum { N_CTX = 160 };
    tf_spec_cfg c = {
        .mode = TF_SPEC_TRIFORCE, .gamma1 = 4, .gamma2 = 8, .budget = 48, .chunk = 8, .recent = 8,
        .rebuild_stride = 4, .rebuild_accept = 0.3f, .sinks = 4, .window = 32, .n_ctx = N_CTX, .n_batch = 64,
        .kv_type = TF_DTYPE_F32, .isa = TF_ISA_BEST,
        .sampling = {.temp = 0.8f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 5},
    };
    static const int32_t caps[] = {64, 1, 2, 5, 16};
    int32_t ref[N_CTX], out[N_CTX];
    int n_ref = 0;
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        tf_spec s;
        tf_err err = {0};
        assert_int_equal(tf_spec_init(&s, t, t, &c, g_pool, &err), TF_OK);
        assert_int_equal(tf_spec_prefill(&s, prompt, 40, NULL, NULL), TF_OK);
        int n = step_until_full(&s, caps[i], i ? out : ref);
        assert_int_equal(n, N_CTX - 40); /* every position of the context */
        if (i == 0) {
            n_ref = n;
            assert_true(s.lv[0].st.passes < n / 4); /* most passes emitted several tokens */
        } else {
            assert_int_equal(n, n_ref);
            assert_memory_equal(out, ref, sizeof(int32_t) * (size_t)n);
        }
        tf_spec_free(&s);
    }
    tf_model_free(t);
    unlink(tpath);
}

/* While the streaming cache's sinks + window hold the whole sequence, a
 * forward pass over its view must give the full cache's logits (with qwen2's
 * rotate-half pairs too); test_streaming checks what it shows once tokens
 * slide out. Greedy agreement alone would not show it: small random models
 * soon repeat one token. */
static void streaming_equals_full(const tf_model *m) {
    const tf_hparams *hp = &m->hp;
    enum { N = 48 };
    tf_err err = {0};
    tf_fwd ff, fs;
    tf_kv_cache kv;
    tf_scache sc;
    assert_int_equal(tf_kv_init(&kv, hp->n_layer, hp->n_head_kv, hp->head_dim, N, TF_DTYPE_F32, &err), TF_OK);
    assert_int_equal(tf_scache_init(&sc, hp->n_layer, hp->n_head_kv, hp->head_dim, hp->n_rot, hp->rope_neox,
                                    m->rope_freq, m->rope_mscale, 4, N, 8, 1, N, TF_DTYPE_F32, &err),
                     TF_OK);
    assert_int_equal(tf_fwd_init(&ff, m, 1, 1, N, g_pool, TF_ISA_BEST, &err), TF_OK);
    assert_int_equal(tf_fwd_init(&fs, m, 1, 1, sc.view.n_slots, g_pool, TF_ISA_BEST, &err), TF_OK);
    size_t kvd = (size_t)hp->n_head_kv * hp->head_dim;
    const tf_fwd_out kvout = {.k = malloc(sizeof(float) * hp->n_layer * kvd),
                              .v = malloc(sizeof(float) * hp->n_layer * kvd)};
    double num = 0, den = 0;
    for (int32_t t = 0; t < N; t++) {
        int32_t tok = 3 + (t * 37 + 11) % 256, pos0;
        assert_int_equal(tf_forward(&ff, &kv, &tok, &t, 1, t, NULL, 0, NULL, &err), TF_OK);
        int32_t slot0;
        assert_int_equal(tf_scache_view(&sc, 1, &slot0, &pos0, &err), TF_OK);
        assert_int_equal(pos0, t);
        assert_int_equal(slot0, t); /* nothing slid out: no gap */
        assert_int_equal(tf_forward(&fs, &sc.view, &tok, &pos0, 1, slot0, NULL, 0, &kvout, &err), TF_OK);
        assert_int_equal(tf_scache_append(&sc, kvout.k, kvout.v, 1, 1, &err), TF_OK);
        for (int32_t v = 0; v < hp->n_vocab; v++) {
            double a = ff.logits[v], b = fs.logits[v];
            num += (a - b) * (a - b);
            den += a * a;
        }
    }
    print_message("%s architecture: streaming view vs full cache, logits NMSE %g\n", tf_arch_name(hp->arch),
                  num / den);
    assert_true(num / den < 1e-12);
    free(kvout.k);
    free(kvout.v);
    tf_fwd_free(&ff);
    tf_fwd_free(&fs);
    tf_scache_free(&sc);
    tf_kv_free(&kv);
}

/* qwen2: every mode with the target's first layer as the draft (the
 * --draft-layers 1 self-speculation), long and short prompts. */
static void test_greedy_equality_qwen2(void **state) {
    (void)state;
    char tpath[512];
    snprintf(tpath, sizeof tpath, "%s", gen_model_arch(TF_ARCH_QWEN2, 64, 8, 2, NULL, 9));
    tf_model *t = load(tpath), *d = NULL;
    assert_true(t->hp.arch == TF_ARCH_QWEN2 && t->hp.rope_neox);
    tf_err err = {0};
    assert_int_equal(tf_model_view_layers(&d, t, 1, &err), TF_OK);
    int32_t prompt[600];
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() + 1);
    for (int i = 0; i < 600; i++) prompt[i] = 3 + (int32_t)(tf_rng_next(&rng) % 256);
    sweep(t, d, prompt, 600, 60, "qwen2 target, first-layer draft, long prompt");
    sweep(t, d, prompt, 20, 60, "qwen2 target, first-layer draft, short prompt");
    streaming_equals_full(t);
    tf_model_free(d);
    tf_model_free(t);
    unlink(tpath);
}

static int setup(void **state) {
    (void)state;
    tf_err err = {0};
    return tf_pool_create(&g_pool, 2, &err) == TF_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    tf_pool_free(g_pool);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_equality_generated),
        cmocka_unit_test(test_prefill_from),
        cmocka_unit_test(test_prefill_reuse),
        cmocka_unit_test(test_prefill_reuse_smollm2),
        cmocka_unit_test(test_window_past_context),
        cmocka_unit_test(test_auto_budget),
        cmocka_unit_test(test_lookup_match),
        cmocka_unit_test(test_lookup_cfg),
        cmocka_unit_test(test_step_cap),
        cmocka_unit_test(test_gamma_controller),
        cmocka_unit_test(test_route_controller),
        cmocka_unit_test(test_route_ctx),
        cmocka_unit_test(test_skip_route_is_spec),
        cmocka_unit_test(test_long_skip),
        cmocka_unit_test(test_greedy_equality_qwen2),
        cmocka_unit_test(test_greedy_equality_stories),
        cmocka_unit_test(test_greedy_equality_smollm2),
        cmocka_unit_test(test_greedy_equality_quantized_kv),
        cmocka_unit_test(test_sampled_equality_keyed),
        cmocka_unit_test(test_sampled_equality_keyed_real),
        cmocka_unit_test(test_sampled_equality_keyed_smollm2),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
