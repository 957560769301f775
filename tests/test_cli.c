/*
 * test_cli.c — the `triforce` command line end to end: bad input gives a
 * clear message and a non-zero exit; info / tokenize / quantize / gen-model /
 * generate work; --version prints the library's version; perplexity equals an
 * independent float64 computation of the same convention (windows of CTX, BOS
 * first, second half scored).
 */
#include "testutil.h"

#include "backend/cpu/attn.h"

#include "hf_export.h"
#include "hf_tokjson.h"
#include "model/model.h"
#include "ref_forward.h"
#include "triforce.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_out[1 << 16];

/* Run `triforce ARGS` (stdout + stderr captured into g_out); returns the exit status. */
static int tf_run(const char *args) {
    const char *b = getenv("BUILD");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s/triforce %s 2>&1", b ? b : "build", args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(g_out, 1, sizeof g_out - 1, p);
    g_out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

#define EXPECT(args, code, substr)                                                        \
    do {                                                                                  \
        int rc_ = tf_run(args);                                                           \
        if (rc_ != (code) || !strstr(g_out, substr)) {                                    \
            print_error("triforce %s: exit %d (want %d), output:\n%s\n(wanted '%s')\n", args, rc_, code, \
                        g_out, substr);                                                   \
            fail();                                                                       \
        }                                                                                 \
    } while (0)

static void test_bad_input(void **state) {
    (void)state;
    EXPECT("", 2, "usage");
    EXPECT("frobnicate", 2, "unknown command 'frobnicate'");
    EXPECT("generate -p hi", 2, "-m MODEL is required");
    EXPECT("generate -m x.gguf -p hi --bogus", 2, "unknown option '--bogus'");
    EXPECT("generate -m x.gguf -p hi -n -5", 2, "-n-predict '-5'");
    EXPECT("generate -m x.gguf -p hi -t 0", 2, "--threads '0'");
    EXPECT("generate -m x.gguf -p hi --temp nan", 2, "--temp 'nan'");
    EXPECT("generate -m x.gguf -p hi --top-p 2", 2, "--top-p '2'");
    EXPECT("generate -m x.gguf -p hi -c 12abc", 2, "--ctx-size '12abc'");
    EXPECT("generate -m x.gguf -p hi --kv-type q4", 2, "--kv-type 'q4'");
    EXPECT("generate -m x.gguf -p hi --middle sometimes", 2, "--middle 'sometimes': expected always, auto or never");
    EXPECT("generate -m x.gguf -p hi --coupling max", 2, "--coupling 'max': expected keyed or residual");
    EXPECT("generate -m x.gguf -p hi -f y.txt", 2, "exactly one of -p TEXT or -f FILE");
    EXPECT("generate -m /nonexistent/m.gguf -p hi", 1, "/nonexistent/m.gguf: cannot open");
    EXPECT("generate -m x.gguf -p", 2, "needs a value");
    EXPECT("quantize a.gguf b.gguf q9_9", 2, "type 'q9_9'");
    EXPECT("info", 2, "give one model file");
    EXPECT("generate --help", 0, "--top-k");
    EXPECT("gen-model --help", 0, "llama2-7b-128k");
    EXPECT("generate -m x.gguf -p hi --mode triforce", 2, "needs a draft: -md DRAFT.gguf, --draft-layers K or --draft-lookup N");
    EXPECT("generate -m x.gguf -p hi --mode fast", 2, "--mode 'fast'");
    EXPECT("generate -m x.gguf -p hi --gamma2 16", 2, "--gamma2 '16'");
    EXPECT("eval", 2, "expected a task, accept or passkey");
    EXPECT("eval accept", 2, "-m MODEL is required");
    EXPECT("eval accept -m x.gguf --budgets 8x", 2, "--budgets '8x'");
    EXPECT("eval accept -m x.gguf --contexts 1000,10", 2, "--contexts '1000,10'");
    EXPECT("eval accept -m x.gguf --caches fast", 2, "--caches 'fast'");
    EXPECT("eval passkey -m x.gguf --depths 0.5,2", 2, "--depths '0.5,2'");
    EXPECT("eval accept -m x.gguf -o xml", 2, "-o 'xml'");
    EXPECT("eval accept -m x.gguf --device gpu", 2, "--device 'gpu': expected cuda, cpu or auto");
    EXPECT("generate -m x.gguf -md y.gguf --draft-layers 2 -p hi", 2, "one of -md DRAFT, --draft-layers K and --draft-lookup N");
    EXPECT("serve -m x.gguf --draft-layers 2 --draft-lookup 2", 2, "not several");
    EXPECT("bench -m x.gguf -md y.gguf --draft-lookup 1", 2, "not several");
    EXPECT("generate -m x.gguf -p hi --draft-lookup 17", 2, "--draft-lookup '17'");
    EXPECT("generate -m x.gguf -p hi --draft-lookup 0", 2, "--draft-lookup '0'");
    EXPECT("generate -m x.gguf -p hi --rope-scaling yarn", 2, "--rope-scaling KIND and --rope-factor F together");
    EXPECT("bench -m x.gguf --rope-scaling ntk --rope-factor 2", 2, "--rope-scaling 'ntk': expected linear or yarn");
    EXPECT("eval accept -m x.gguf --rope-scaling yarn --rope-factor 1", 2, "--rope-factor 1: expected more than 1");
    EXPECT("convert", 2, "usage: triforce convert");
}

/* The version: the header's macros agree, tf_version() is TF_VERSION_STRING,
 * `triforce --version` prints it (then the CPU kernels: attention on the AMX
 * tiles where this CPU has them, never with TF_NO_AMX=1) and `--help` names
 * the flag. */
static void test_version(void **state) {
    (void)state;
    char v[64], line[96];
    snprintf(v, sizeof v, "%d.%d.%d", TF_VERSION_MAJOR, TF_VERSION_MINOR, TF_VERSION_PATCH);
    assert_string_equal(v, TF_VERSION_STRING);
    assert_string_equal(tf_version(), TF_VERSION_STRING);
    snprintf(line, sizeof line, "triforce %s\ncpu: matrix kernels ", TF_VERSION_STRING);
    assert_int_equal(tf_run("--version"), 0);
    assert_memory_equal(g_out, line, strlen(line));
    const int amx = tf_attn_kernel_supported(TF_ATTN_AMX);
    assert_true((strstr(g_out, ", attention amx_bf16\n") != NULL) == amx);
    print_message("this CPU: %s", g_out + strlen(line) - strlen("cpu: matrix kernels "));
    assert_int_equal(setenv("TF_NO_AMX", "1", 1), 0);
    assert_int_equal(tf_run("--version"), 0);
    assert_int_equal(unsetenv("TF_NO_AMX"), 0);
    assert_non_null(strstr(g_out, ", attention "));
    assert_null(strstr(g_out, "amx"));
    EXPECT("--help", 0, "triforce --version");
}

/* The line of `--help` output that documents flag (its first word after the
 * short name), copied to line; fails if there is none. */
static void help_line(const char *flag, char *line, size_t cap) {
    char key[64];
    snprintf(key, sizeof key, " %s ", flag);
    const char *at = strstr(g_out, key);
    if (!at) fail_msg("--help has no line for %s", flag);
    const char *b = at, *e = strchr(at, '\n');
    while (b > g_out && b[-1] != '\n') b--;
    size_t n = e ? (size_t)(e - b) : strlen(b);
    if (n >= cap) n = cap - 1;
    memcpy(line, b, n);
    line[n] = '\0';
}

/* The defaults `generate --help` states are the library's own
 * (tf_decoder_default_params), which the CLI starts from. */
static void test_help_states_defaults(void **state) {
    (void)state;
    const tf_decoder_params d = tf_decoder_default_params();
    assert_int_equal(tf_run("generate --help"), 0);
    struct { const char *flag; char want[64]; } rows[20];
    int n = 0;
#define ROW(fl, ...) (rows[n].flag = fl, snprintf(rows[n].want, sizeof rows[n].want, __VA_ARGS__), n++)
    ROW("--gamma1", "(default %d)", d.gamma1);
    assert_int_equal(d.gamma2, TF_GAMMA2_BY_TEMP); /* stated as the two values it stands for */
    ROW("--gamma2", "(default: %d greedy, %d sampled)", TF_GAMMA2_GREEDY, TF_GAMMA2_SAMPLED);
    ROW("--budget", "(default %d)", d.budget);
    ROW("--chunk", "(default %d)", d.chunk);
    ROW("--rebuild-stride", "(default %d)", d.rebuild_stride);
    ROW("--bypass-accept", "(default %g)", (double)d.bypass_accept);
    ROW("--sinks", "(default %d)", d.sinks);
    ROW("--window", "(default %d)", d.window);
    ROW("--batch-size", "(default %d)", d.n_batch);
    ROW("--temp", "(default %g;", (double)d.sampling.temp);
    ROW("--top-k", "(default %d)", d.sampling.top_k);
    ROW("--top-p", "(default %g)", (double)d.sampling.top_p);
    ROW("--min-p", "(default %g)", (double)d.sampling.min_p);
    ROW("--kv-type", "%s (default)", tf_kv_type_name(d.kv_type));
    ROW("--middle", "(%s, default)", tf_middle_name(d.middle));
    ROW("--coupling", "%s (default:", tf_coupling_name(d.coupling));
#undef ROW
    char line[512];
    for (int i = 0; i < n; i++) {
        help_line(rows[i].flag, line, sizeof line);
        if (!strstr(line, rows[i].want)) fail_msg("%s: help says '%s', the library's default is '%s'", rows[i].flag, line, rows[i].want);
    }
}

/* gamma2's default follows the temperature (since 2.6.0): -1 in the
 * parameters, accepted by the check, resolved by tf_decoder_gamma2 (6 greedy,
 * 4 sampled; a value given stays as given), and what the CLI reports using. */
static void test_gamma2_default(void **state) {
    (void)state;
    tf_decoder_params p = tf_decoder_default_params();
    assert_int_equal(p.gamma2, -1);
    assert_int_equal(TF_GAMMA2_BY_TEMP, -1);
    char err[256] = "";
    assert_int_equal(tf_decoder_params_check(&p, err, sizeof err), TF_OK);
    p.sampling.temp = 0;
    assert_int_equal(tf_decoder_gamma2(&p), 6);
    p.sampling.temp = 0.6f;
    assert_int_equal(tf_decoder_gamma2(&p), 4);
    p.gamma2 = 5;
    assert_int_equal(tf_decoder_gamma2(&p), 5);
    p.gamma2 = 0;
    assert_int_equal(tf_decoder_gamma2(&p), 0);
    p.gamma2 = -2;
    assert_int_equal(tf_decoder_params_check(&p, err, sizeof err), TF_ERR_INVALID_ARG);
    assert_non_null(strstr(err, "gamma2 -2: expected -1 (by the temperature), 0 (adaptive) or 1..15"));
    TU_REQUIRE_SHARED(path_s, "models/stories260K/stories260K.gguf");
    char args[1024];
    snprintf(args, sizeof args, "generate -m %s -p \"Once upon a time\" --temp 0 -n 8 --mode draft --draft-lookup 2",
             path_s);
    EXPECT(args, 0, ", gamma2 6,");
    snprintf(args, sizeof args,
             "generate -m %s -p \"Once upon a time\" --temp 0.6 -s 3 -n 8 --mode draft --draft-lookup 2", path_s);
    EXPECT(args, 0, ", gamma2 4,");
    snprintf(args, sizeof args,
             "generate -m %s -p \"Once upon a time\" --temp 0.6 -s 3 -n 8 --mode draft --draft-lookup 2 --gamma2 7",
             path_s);
    EXPECT(args, 0, ", gamma2 7,");
}

/* The prefill batch's default is the device's (since 2.4.0): 0 in the
 * parameters, accepted by the check, and -b 0 on the command line; out of
 * range values are refused by name. */
static void test_batch_default(void **state) {
    (void)state;
    tf_decoder_params p = tf_decoder_default_params();
    assert_int_equal(p.n_batch, 0);
    char err[256] = "";
    assert_int_equal(tf_decoder_params_check(&p, err, sizeof err), TF_OK);
    p.n_batch = -1;
    assert_int_equal(tf_decoder_params_check(&p, err, sizeof err), TF_ERR_INVALID_ARG);
    assert_non_null(strstr(err, "batch size -1: expected 0 (the device's default) or 1..65536"));
    p.n_batch = 65537;
    assert_int_equal(tf_decoder_params_check(&p, err, sizeof err), TF_ERR_INVALID_ARG);
    p.n_batch = TF_BATCH_CPU;
    assert_int_equal(tf_decoder_params_check(&p, err, sizeof err), TF_OK);
    assert_int_equal(TF_BATCH_CPU, 256);
    assert_int_equal(TF_BATCH_CUDA, 2048);
    TU_REQUIRE_SHARED(path_s, "models/stories260K/stories260K.gguf");
    char args[1024];
    snprintf(args, sizeof args, "generate -m %s -p \"Once upon a time\" --temp 0 -n 8 -b 0", path_s);
    EXPECT(args, 0, "Once upon a time");
    snprintf(args, sizeof args, "generate -m %s -p \"Once upon a time\" --temp 0 -n 8 -b -3", path_s);
    EXPECT(args, 2, "--batch-size '-3': expected an integer in [0, 65536]");
}

/* --isa: 0..4 (4: AVX-512 with the AMX tiles, capped to what the CPU has); others refused. */
static void test_isa_range(void **state) {
    (void)state;
    tf_decoder_params p = tf_decoder_default_params();
    char err[256] = "";
    p.isa = 4;
    assert_int_equal(tf_decoder_params_check(&p, err, sizeof err), TF_OK);
    p.isa = 5;
    assert_int_equal(tf_decoder_params_check(&p, err, sizeof err), TF_ERR_INVALID_ARG);
    assert_non_null(strstr(err, "isa 5: expected 0..4"));
    TU_REQUIRE_SHARED(path_s, "models/stories260K/stories260K.gguf");
    char args[1024];
    snprintf(args, sizeof args, "generate -m %s -p \"Once upon a time\" --temp 0 -n 8 --isa 4", path_s);
    EXPECT(args, 0, "Once upon a time");
    snprintf(args, sizeof args, "generate -m %s -p \"Once upon a time\" --temp 0 -n 8 --isa 5", path_s);
    EXPECT(args, 2, "--isa '5': expected an integer in [0, 4]");
}

static void test_with_stories(void **state) {
    (void)state;
    TU_REQUIRE_SHARED(path_s, "models/stories260K/stories260K.gguf");
    char model[512], args[4096];
    snprintf(model, sizeof model, "%s", path_s);
    TU_REQUIRE_SHARED(path_t, "text/moby-dick.txt");
    char text[512];
    snprintf(text, sizeof text, "%s", path_t);
    snprintf(args, sizeof args, "info %s", model);
    EXPECT(args, 0, "n_head_kv:       4 (grouped-query attention)");
    assert_non_null(strstr(g_out, "KV bytes/token:  640 (f16), 1280 (f32)"));
    snprintf(args, sizeof args, "tokenize -m %s -p \"Once upon a time\" --ids", model);
    EXPECT(args, 0, "1, 403, 407, 261, 378");
    snprintf(args, sizeof args, "generate -m %s -f %s -c 100 -n 4", model, text);
    EXPECT(args, 1, "longer than the context of 100");
    snprintf(args, sizeof args, "generate -m %s -p \"Once upon a time\" --temp 0 -n 30", model);
    EXPECT(args, 0, "there was a little girl named Lily");
    assert_non_null(strstr(g_out, "prefill: 5 tokens in"));
    assert_non_null(strstr(g_out, "| decode: 30 tokens in"));
    /* quantize, then run the quantized model */
    char q8[512];
    snprintf(q8, sizeof q8, "%s", tu_tmp_path(".gguf"));
    snprintf(args, sizeof args, "quantize %s %s q8_0", model, q8);
    EXPECT(args, 0, "wrote");
    assert_null(strchr(g_out, '\r')); /* stderr is a pipe: progress in whole lines */
    assert_non_null(strstr(g_out, "\nquantize: 100%\n"));
    snprintf(args, sizeof args, "info %s", q8);
    EXPECT(args, 0, "q8_0");
    snprintf(args, sizeof args, "generate -m %s -p \"Once upon a time\" --temp 0 -n 8", q8);
    EXPECT(args, 0, "Once upon a time");
    /* triforce with the Q8_0 draft: identical greedy output, statistics as JSON */
    char js[512];
    snprintf(js, sizeof js, "%s", tu_tmp_path(".json"));
    /* a prompt of about 1300 tokens: the first 2200 bytes of the text */
    char slice[512];
    snprintf(slice, sizeof slice, "%s", tu_tmp_path(".txt"));
    {
        FILE *in = fopen(text, "rb"), *outf = fopen(slice, "wb");
        char b[2200];
        size_t got = fread(b, 1, sizeof b, in);
        fwrite(b, 1, got, outf);
        fclose(in);
        fclose(outf);
    }
    snprintf(args, sizeof args,
             "generate -m %s -md %s -f %s -n 48 --temp 0 --budget 256 --window 64 --compare --stats-json %s", model,
             q8, slice, js);
    EXPECT(args, 0, "outputs identical");
    assert_non_null(strstr(g_out, "middle (retrieval cache)"));
    FILE *jf = fopen(js, "r");
    assert_non_null(jf);
    char jbuf[4096];
    size_t jn = fread(jbuf, 1, sizeof jbuf - 1, jf);
    jbuf[jn] = '\0';
    fclose(jf);
    assert_non_null(strstr(jbuf, "\"mode\": \"triforce\""));
    assert_non_null(strstr(jbuf, "\"identical\": true"));
    /* sampled: under the keyed coupling (the default) the text is ar's, and a
     * difference would fail the run; under the residual one it is not compared */
    snprintf(args, sizeof args, "generate -m %s -md %s -f %s -n 32 --temp 0.9 --top-k 0 -s 4 --budget 256 --window 64 "
             "--gamma2 0 --compare", model, q8, slice);
    EXPECT(args, 0, "outputs identical\n");
    snprintf(args, sizeof args, "generate -m %s -md %s -f %s -n 32 --temp 0.9 -s 4 --budget 256 --window 64 "
             "--coupling residual --compare", model, q8, slice);
    EXPECT(args, 0, "(sampled, residual coupling");
    /* the draft mode answers to its former name, spec, and reports its new one */
    snprintf(args, sizeof args, "generate -m %s -md %s -f %s -n 16 --temp 0 --mode spec --compare", model, q8, slice);
    EXPECT(args, 0, "compare: ar ");
    assert_non_null(strstr(g_out, " ms/tok, draft "));
    assert_non_null(strstr(g_out, "outputs identical"));
    /* eval accept from one prefill: a csv row per configuration, acceptance in [0, 1] */
    snprintf(args, sizeof args, "eval accept -m %s -f %s --contexts 300 --budgets 64 --chunks 4,8 -n 16 -o csv", model,
             slice);
    EXPECT(args, 0, "context,cache,budget,chunk,acceptance,");
    {
        int rows = 0;
        for (char *line = strstr(g_out, "\n300,"); line; line = strstr(line + 1, "\n300,")) {
            int ctx, budget, chunk, commas = 0;
            char cache[16];
            double acc;
            assert_int_equal(sscanf(line + 1, "%d,%15[a-z],%d,%d,%lf", &ctx, cache, &budget, &chunk, &acc), 5);
            assert_true(acc >= 0 && acc <= 1 && budget == 64);
            for (char *c = line + 1; *c && *c != '\n'; c++) commas += *c == ',';
            assert_int_equal(commas, 10);
            rows++;
        }
        assert_int_equal(rows, 3); /* retrieval with chunks 4 and 8, streaming */
    }
    snprintf(args, sizeof args, "eval passkey -m %s --contexts 500 --depths 0.5 -o json", model);
    EXPECT(args, 0, "\"eval\": \"passkey\", ");
    assert_non_null(strstr(g_out, "\"context\": 500, \"depth\": 0.50, "));
    assert_non_null(strstr(g_out, "eval passkey: "));
    snprintf(args, sizeof args, "eval passkey -m %s --contexts 64", model);
    EXPECT(args, 1, "the instruction, the key and the question alone take");
    unlink(js);
    unlink(slice);
    /* a draft with another vocabulary is refused */
    TU_REQUIRE_SHARED(vp, "vocab/ggml-vocab-llama-spm.gguf");
    char other[512];
    snprintf(other, sizeof other, "%s", tu_tmp_path(".gguf"));
    snprintf(args, sizeof args, "gen-model %s --n-embd 32 --n-layer 1 --n-head 2 --n-ff 64 --vocab-from %s", other, vp);
    EXPECT(args, 0, "wrote");
    snprintf(args, sizeof args, "generate -m %s -md %s -p hello -n 4", model, other);
    EXPECT(args, 1, "vocabularies must be the same");
    /* quantized KV needs head_dim a multiple of 32 (stories260K: 8) */
    snprintf(args, sizeof args, "generate -m %s -p hello -n 4 --kv-type q4_0", model);
    EXPECT(args, 1, "KV cache type q4_0 needs head_dim a multiple of 32");
    assert_non_null(strstr(g_out, "head_dim is 8"));
    unlink(other);
    unlink(q8);
}

/* perplexity == exp(mean NLL) of the float64 reference over the same windows */
/* A Hugging Face directory works wherever a GGUF does, and converts to one. */
static void test_hf_dir(void **state) {
    (void)state;
    TU_REQUIRE_SHARED(path_s, "models/stories260K/stories260K.gguf");
    char model[512], dir[512], out[512], args[4096];
    snprintf(model, sizeof model, "%s", path_s);
    snprintf(dir, sizeof dir, "%s", tu_tmp_path("_hf"));
    snprintf(out, sizeof out, "%s", tu_tmp_path(".gguf"));
    tf_model *m = NULL;
    char err[512];
    assert_int_equal(tf_model_load_file(&m, model, NULL, err, sizeof err), TF_OK);
    char *tj = NULL, *tc = NULL;
    tu_hf_opts to = {0};
    assert_true(tu_hf_tokjson_from_gguf(&m->gguf, &to, &tj, &tc));
    hf_export_opts ex = {.tokenizer_json = tj};
    assert_int_equal(hf_export(m, dir, &ex), 0);
    tf_model_close(m);
    free(tj);
    free(tc);
    snprintf(args, sizeof args, "info %s", dir);
    EXPECT(args, 0, "n_head_kv:       4 (grouped-query attention)");
    snprintf(args, sizeof args, "tokenize -m %s -p \"Once upon a time\" --ids", dir);
    EXPECT(args, 0, "1, 403, 407, 261, 378");
    snprintf(args, sizeof args, "generate -m %s -p \"Once upon a time\" --temp 0 -n 30", dir);
    EXPECT(args, 0, "there was a little girl named Lily");
    snprintf(args, sizeof args, "generate -m %s --draft-layers 2 -p \"Once upon a time\" --temp 0 -n 30 --compare", dir);
    EXPECT(args, 0, "outputs identical");
    snprintf(args, sizeof args, "generate -m %s --draft-layers 5 -p hi -n 4", dir);
    EXPECT(args, 1, "needs 1..4");
    snprintf(args, sizeof args, "convert %s %s q8_0", dir, out);
    EXPECT(args, 0, "wrote");
    snprintf(args, sizeof args, "info %s", out);
    EXPECT(args, 0, "q8_0");
    snprintf(args, sizeof args, "convert %s %s", dir, out);
    EXPECT(args, 0, "as f32");
    snprintf(args, sizeof args, "generate -m %s -p \"Once upon a time\" --temp 0 -n 30", out);
    EXPECT(args, 0, "there was a little girl named Lily");
    snprintf(args, sizeof args, "convert %s %s q9", dir, out);
    EXPECT(args, 2, "type 'q9'");
    snprintf(args, sizeof args, "convert %s %s", model, out);
    EXPECT(args, 2, "is not a directory");
    snprintf(args, sizeof args, "rm -rf '%s'", dir);
    assert_int_equal(system(args), 0);
    unlink(out);
}

static void test_perplexity_matches_reference(void **state) {
    (void)state;
    TU_REQUIRE_SHARED(path_s, "models/stories260K/stories260K.gguf");
    char model[512];
    snprintf(model, sizeof model, "%s", path_s);
    TU_REQUIRE_SHARED(path_t, "text/pride_and_prejudice.txt");
    /* a 1500-byte slice as the text */
    FILE *f = fopen(path_t, "rb");
    char buf[1600];
    size_t n = fread(buf, 1, 1500, f);
    fclose(f);
    const char *tmp = tu_tmp_path(".txt");
    char txt[512];
    snprintf(txt, sizeof txt, "%s", tmp);
    f = fopen(txt, "wb");
    fwrite(buf, 1, n, f);
    fclose(f);
    const int ctx = 64;
    char args[2048];
    snprintf(args, sizeof args, "perplexity -m %s -f %s -c %d --kv-type f32", model, txt, ctx);
    EXPECT(args, 0, "PPL = ");
    double got = atof(strstr(g_out, "PPL = ") + 6);
    /* independent computation */
    tf_model *m;
    char err[512];
    assert_int_equal(tf_model_load_file(&m, model, NULL, err, sizeof err), TF_OK);
    int32_t toks[2048];
    size_t nt;
    assert_int_equal(tf_model_tokenize(m, buf, n, true, false, toks, 2048, &nt), TF_OK);
    double nll = 0;
    long cnt = 0;
    for (size_t c = 0; c < nt / ctx; c++) {
        int32_t w[64];
        memcpy(w, toks + c * ctx, sizeof w);
        w[0] = tf_model_bos(m);
        double *lg = ref_forward(m, w, ctx);
        for (int j = ctx / 2; j < ctx - 1; j++) {
            const double *l = lg + (size_t)j * m->hp.n_vocab;
            double mx = -INFINITY, s = 0;
            for (int v = 0; v < m->hp.n_vocab; v++) mx = fmax(mx, l[v]);
            for (int v = 0; v < m->hp.n_vocab; v++) s += exp(l[v] - mx);
            nll -= l[toks[c * ctx + j + 1]] - mx - log(s);
            cnt++;
        }
        free(lg);
    }
    double want = exp(nll / cnt);
    if (fabs(got - want) > 1e-3 * want) {
        print_error("perplexity %.4f, reference %.4f\n", got, want);
        fail();
    }
    /* the last line has exactly 4 decimals */
    const char *last = strstr(g_out, "PPL = ");
    const char *dot = strchr(last, '.');
    assert_non_null(dot);
    assert_true(dot[5] == '\n' || dot[5] == '\0');
    /* --device: cpu is the default (the same figure); an unknown name is a usage
     * error; cuda without a GPU is refused by name */
    char line[64];
    snprintf(line, sizeof line, "PPL = %.4f", got);
    snprintf(args, sizeof args, "perplexity -m %s -f %s -c %d --kv-type f32 --device cpu", model, txt, ctx);
    EXPECT(args, 0, line);
    snprintf(args, sizeof args, "perplexity -m %s -f %s -c %d --device gpu", model, txt, ctx);
    EXPECT(args, 2, "--device 'gpu': expected cuda, cpu or auto");
    if (tf_cuda_devices() == 0) {
        snprintf(args, sizeof args, "perplexity -m %s -f %s -c %d --device cuda", model, txt, ctx);
        EXPECT(args, 1, "CUDA");
    }
    tf_model_close(m);
    unlink(txt);
}

static void test_gen_model_cli(void **state) {
    (void)state;
    char out[512], args[2048];
    snprintf(out, sizeof out, "%s", tu_tmp_path(".gguf"));
    snprintf(args, sizeof args, "gen-model %s --n-embd 64 --n-layer 2 --n-head 4 --n-head-kv 2 --n-ff 128 "
             "--n-vocab 300 --rope-scaling yarn --rope-factor 8 --rope-orig-ctx 512 --type q8_0", out);
    EXPECT(args, 0, "wrote");
    snprintf(args, sizeof args, "info %s", out);
    EXPECT(args, 0, "scaling yarn, factor 8, original context 512");
    assert_non_null(strstr(g_out, "n_head_kv:       2"));
    snprintf(args, sizeof args, "gen-model %s --preset nope", out);
    EXPECT(args, 2, "unknown preset 'nope'");
    /* the default weight type is the one --help names; progress into a pipe is whole lines */
    EXPECT("gen-model --help", 0, "(default f16)");
    snprintf(args, sizeof args, "gen-model %s --n-embd 64 --n-layer 1 --n-head 4 --n-ff 128 --n-vocab 300", out);
    EXPECT(args, 0, "gen-model: 100%\n");
    assert_null(strchr(g_out, '\r'));
    snprintf(args, sizeof args, "info %s", out);
    EXPECT(args, 0, "blk.0.attn_q.weight              f16");
    /* qwen2: generated, described, and decoded by TriForce with its first
     * layer as the draft exactly as autoregressively */
    snprintf(args, sizeof args, "gen-model %s --arch qwen2 --n-embd 64 --n-layer 2 --n-head 4 --n-head-kv 2 "
             "--n-ff 128 --n-vocab 300 --rope-scaling yarn --rope-factor 4 --rope-orig-ctx 256", out);
    EXPECT(args, 0, "wrote");
    snprintf(args, sizeof args, "info %s", out);
    EXPECT(args, 0, "architecture:    qwen2");
    assert_non_null(strstr(g_out, "pairs (i, i + n_rot/2)"));
    assert_non_null(strstr(g_out, "blk.1.attn_v.bias"));
    snprintf(args, sizeof args, "generate -m %s -p \"a b c d e f g\" --temp 0 -n 40 --mode triforce --draft-layers 1 "
             "--budget 64 --window 16 --compare", out);
    EXPECT(args, 0, "outputs identical");
    /* every route of the three-level hierarchy: identical output, and the
     * statistics count the target passes that skipped the middle level */
    static const char *const middles[] = {"never", "always", "auto"};
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args, "generate -m %s -p \"a b c d e f g\" --temp 0 -n 40 --mode triforce --draft-layers 1 "
                 "--budget 64 --window 16 --middle %s --compare", out, middles[i]);
        EXPECT(args, 0, "outputs identical");
        const char *line = strstr(g_out, "target passes: ");
        assert_non_null(line);
        long via = -1, skip = -1;
        assert_int_equal(sscanf(line, "target passes: %ld with the middle level's candidates, %ld", &via, &skip), 2);
        assert_true(i == 0 ? via == 0 && skip > 0 : i == 1 ? via > 0 && skip == 0 : via > 0 && skip > 0);
    }
    /* quantized KV caches: sizes in info, every level lossless over them */
    snprintf(args, sizeof args, "gen-model %s --n-embd 128 --n-layer 2 --n-head 4 --n-head-kv 2 --n-ff 256 "
             "--n-vocab 300", out);
    EXPECT(args, 0, "wrote");
    snprintf(args, sizeof args, "info %s", out);
    /* 2 layers x 2 KV heads x (K + V) x 34 bytes (a q8_0 block of 32) or 18 (q4_0) */
    EXPECT(args, 0, "KV bytes/token:  512 (f16), 1024 (f32), 272 (q8_0), 144 (q4_0)");
    static const char *const qtypes[] = {"q8_0", "q4_0"};
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "generate -m %s -p \"a b c d e f g h i j\" --temp 0 -n 40 --draft-layers 1 "
                 "--budget 32 --chunk 4 --window 16 --sinks 4 --kv-type %s --compare", out, qtypes[i]);
        EXPECT(args, 0, "outputs identical");
        char want[32];
        snprintf(want, sizeof want, "kv %s", qtypes[i]);
        assert_non_null(strstr(g_out, want));
    }
    snprintf(args, sizeof args, "gen-model %s --arch gpt2", out);
    EXPECT(args, 2, "expected llama, qwen2");
    unlink(out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_help_states_defaults),
        cmocka_unit_test(test_batch_default),
        cmocka_unit_test(test_gamma2_default),
        cmocka_unit_test(test_isa_range),
        cmocka_unit_test(test_with_stories),
        cmocka_unit_test(test_hf_dir),
        cmocka_unit_test(test_perplexity_matches_reference),
        cmocka_unit_test(test_gen_model_cli),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
