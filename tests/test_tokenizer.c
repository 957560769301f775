/*
 * test_tokenizer.c — SPM and byte-level BPE tokenizers on the shared vocab
 * files and their reference vectors, round trips, the streaming
 * detokenizer, invalid input, and loader errors; the public API's token
 * functions when the output does not fit (on a generated model).
 *
 * Test-vector convention: the .out lines are what llama.cpp's
 * test-tokenizer-0 produces, i.e. tokenize(text, add_special = false,
 * parse_special = false): no BOS/EOS, and (for SPM) the "▁" space prefix
 * added at the start of the text. No vector contains a special-token
 * spelling, so parse_special = true must give the same ids; both are checked.
 */
#include "testutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/mem.h"
#include "format/gguf.h"
#include "gen_case.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/tokenizer.h"
#include "triforce.h"

/* ------------------------------------------------------------------------ */
/* helpers                                                                   */

typedef struct loaded {
    tf_gguf g;
    tf_tokenizer *tok;
} loaded;

/* Open a shared GGUF and build its tokenizer (asserting success). */
static void load_tok(loaded *l, const char *path) {
    tf_err err = {0};
    assert_int_equal(tf_gguf_open(&l->g, path, &err), TF_OK);
    tf_status st = tf_tokenizer_from_gguf(&l->tok, &l->g, &err);
    if (st != TF_OK) print_error("tokenizer: %s\n", err.msg);
    assert_int_equal(st, TF_OK);
}

static void unload_tok(loaded *l) {
    tf_tokenizer_free(l->tok);
    tf_gguf_close(&l->g);
}

/* Tokenize into a malloc'd array (asserting success); returns the count. */
static size_t tokenize_all(const tf_tokenizer *tok, const char *s, size_t n, bool add_special, bool parse_special,
                           int32_t **out) {
    tf_err err = {0};
    size_t need = 0;
    tf_status st = tf_tokenize(tok, s, n, add_special, parse_special, NULL, 0, &need, &err);
    assert_true(st == TF_OK || st == TF_ERR_RANGE);
    *out = malloc((need ? need : 1) * sizeof **out);
    assert_non_null(*out);
    size_t got = 0;
    tf_err_clear(&err);
    st = tf_tokenize(tok, s, n, add_special, parse_special, *out, need, &got, &err);
    if (st != TF_OK) print_error("tokenize: %s\n", err.msg);
    assert_int_equal(st, TF_OK);
    assert_int_equal(got, need);
    return got;
}

/* Detokenize into a malloc'd buffer (NUL-terminated); returns the length. */
static size_t detokenize_all(const tf_tokenizer *tok, const int32_t *ids, size_t n, bool render_special, char **out) {
    tf_err err = {0};
    size_t need = 0;
    tf_status st = tf_detokenize(tok, ids, n, render_special, NULL, 0, &need, &err);
    assert_true(st == TF_OK || st == TF_ERR_RANGE);
    *out = malloc(need + 1);
    assert_non_null(*out);
    size_t got = 0;
    tf_err_clear(&err);
    assert_int_equal(tf_detokenize(tok, ids, n, render_special, *out, need, &got, &err), TF_OK);
    assert_int_equal(got, need);
    (*out)[got] = '\0';
    return got;
}

static bool valid_utf8(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        size_t adv;
        if (tf_utf8_next((const unsigned char *)s + i, n - i, &adv) != TF_UTF8_VALID) return false;
        i += adv;
    }
    return true;
}

/* Stream ids through tf_detok: every chunk must be valid UTF-8; returns the
 * concatenation (malloc'd) and, in *held_steps, how many pushes returned
 * nothing while bytes were held. */
static size_t stream_all(const tf_tokenizer *tok, const int32_t *ids, size_t n, char **out, int *held_steps) {
    size_t cap = n * 80 + 16, len = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    tf_detok d;
    tf_detok_init(&d, tok);
    *held_steps = 0;
    for (size_t i = 0; i < n; i++) {
        char chunk[256];
        int32_t w = tf_detok_push(&d, ids[i], chunk, (int32_t)sizeof chunk);
        assert_true(w >= 0 && w <= (int32_t)sizeof chunk);
        assert_true(valid_utf8(chunk, (size_t)w));
        if (w == 0 && d.n_pending > 0) (*held_steps)++;
        memcpy(buf + len, chunk, (size_t)w);
        len += (size_t)w;
    }
    char chunk[16];
    int32_t w = tf_detok_flush(&d, chunk, (int32_t)sizeof chunk);
    assert_true(valid_utf8(chunk, (size_t)w));
    memcpy(buf + len, chunk, (size_t)w);
    len += (size_t)w;
    buf[len] = '\0';
    *out = buf;
    return len;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ------------------------------------------------------------------------ */
/* reference vectors                                                         */

/* Run every case of <vocab>.inp/.out; returns the number of cases. */
static int run_vectors(const char *rel) {
    char inp_rel[256], out_rel[256], gguf_path[1024];
    snprintf(inp_rel, sizeof inp_rel, "%s.inp", rel);
    snprintf(out_rel, sizeof out_rel, "%s.out", rel);
    const char *p = tu_shared_path(rel);
    if (!p) return -1;
    snprintf(gguf_path, sizeof gguf_path, "%s", p);
    char inp_path[1024], out_path[1024];
    p = tu_shared_path(inp_rel);
    assert_non_null(p);
    snprintf(inp_path, sizeof inp_path, "%s", p);
    p = tu_shared_path(out_rel);
    assert_non_null(p);
    snprintf(out_path, sizeof out_path, "%s", p);

    loaded l;
    load_tok(&l, gguf_path);
    char *inp, *outs;
    size_t inp_len, out_len;
    tf_err err = {0};
    assert_int_equal(tf_read_file(inp_path, &inp, &inp_len, &err), TF_OK);
    assert_int_equal(tf_read_file(out_path, &outs, &out_len, &err), TF_OK);

    static const char sep[] = "\n__ggml_vocab_test__\n";
    const size_t sep_len = sizeof sep - 1;
    char *text = inp, *line = outs;
    int n_case = 0, n_pass = 0;
    for (;;) {
        char *end = strstr(text, sep);
        if (!end) break; /* the file ends with a separator */
        size_t tlen = (size_t)(end - text);
        char *eol = strchr(line, '\n');
        assert_non_null(eol);
        *eol = '\0';

        int32_t expect[1024];
        size_t n_expect = 0;
        for (char *q = line; *q;) {
            char *next;
            long v = strtol(q, &next, 10);
            if (next == q) break;
            assert_true(n_expect < 1024);
            expect[n_expect++] = (int32_t)v;
            q = next;
        }
        bool ok = true;
        for (int ps = 0; ps < 2; ps++) {
            int32_t *ids;
            size_t n = tokenize_all(l.tok, text, tlen, false, ps == 1, &ids);
            bool same = n == n_expect && (n == 0 || memcmp(ids, expect, n * sizeof *ids) == 0);
            if (!same) {
                ok = false;
                print_error("case %d (parse_special=%d) '%.*s': expected %zu ids, got %zu:", n_case, ps, (int)tlen,
                            text, n_expect, n);
                for (size_t i = 0; i < n; i++) print_error(" %d", ids[i]);
                print_error("\n");
            }
            if (ps == 0) { /* and back */
                char *back;
                size_t blen = detokenize_all(l.tok, ids, n, false, &back);
                if (blen != tlen || memcmp(back, text, tlen) != 0) {
                    ok = false;
                    print_error("case %d: round trip gave '%s'\n", n_case, back);
                }
                free(back);
            }
            free(ids);
        }
        n_pass += ok;
        n_case++;
        text = end + sep_len;
        line = eol + 1;
    }
    print_message("%s: %d/%d vector cases match\n", rel, n_pass, n_case);
    assert_int_equal(n_pass, n_case);
    free(inp);
    free(outs);
    unload_tok(&l);
    return n_case;
}

/* Every vocabulary with llama.cpp vectors in ../shared/vocab; each runs as
 * its own test so that a failure names it. */
static void vectors_of(const char *rel) {
    TU_REQUIRE_SHARED(path, rel);
    (void)path;
    assert_int_equal(run_vectors(rel), 46);
}

static void test_vectors_llama_spm(void **state) { (void)state; vectors_of("vocab/ggml-vocab-llama-spm.gguf"); }
static void test_vectors_phi3(void **state) { (void)state; vectors_of("vocab/ggml-vocab-phi-3.gguf"); }
static void test_vectors_gpt2(void **state) { (void)state; vectors_of("vocab/ggml-vocab-gpt-2.gguf"); }
static void test_vectors_mpt(void **state) { (void)state; vectors_of("vocab/ggml-vocab-mpt.gguf"); }
static void test_vectors_falcon(void **state) { (void)state; vectors_of("vocab/ggml-vocab-falcon.gguf"); }
static void test_vectors_starcoder(void **state) { (void)state; vectors_of("vocab/ggml-vocab-starcoder.gguf"); }
static void test_vectors_refact(void **state) { (void)state; vectors_of("vocab/ggml-vocab-refact.gguf"); }
static void test_vectors_deepseek_llm(void **state) { (void)state; vectors_of("vocab/ggml-vocab-deepseek-llm.gguf"); }
static void test_vectors_deepseek_coder(void **state) {
    (void)state;
    vectors_of("vocab/ggml-vocab-deepseek-coder.gguf");
}

/* ------------------------------------------------------------------------ */
/* metadata, special tokens                                                  */

static void test_metadata(void **state) {
    (void)state;
    TU_REQUIRE_SHARED(p1, "vocab/ggml-vocab-llama-spm.gguf");
    loaded l;
    load_tok(&l, p1);
    assert_int_equal(tf_tokenizer_kind(l.tok), TF_TOK_SPM);
    assert_int_equal(tf_tokenizer_n_vocab(l.tok), 32000);
    assert_int_equal(tf_tokenizer_bos(l.tok), 1);
    assert_int_equal(tf_tokenizer_eos(l.tok), 2);
    assert_true(tf_tokenizer_add_bos(l.tok));
    assert_false(tf_tokenizer_add_eos(l.tok));
    assert_true(tf_tokenizer_is_eog(l.tok, 2));
    assert_false(tf_tokenizer_is_eog(l.tok, 1));
    assert_string_equal(tf_tokenizer_describe(l.tok), "llama (SPM), 32000 tokens, pre=default");
    assert_string_equal(tf_token_text(l.tok, 15043), "\xe2\x96\x81Hello");
    assert_null(tf_token_text(l.tok, 32000));
    assert_null(tf_token_text(l.tok, -1));

    char buf[16];
    assert_int_equal(tf_token_to_piece(l.tok, 15043, false, buf, sizeof buf), 6);
    assert_memory_equal(buf, " Hello", 6);
    assert_int_equal(tf_token_to_piece(l.tok, 13, false, buf, sizeof buf), 1); /* <0x0A> */
    assert_int_equal(buf[0], '\n');
    assert_int_equal(tf_token_to_piece(l.tok, 1, false, buf, sizeof buf), 0); /* <s>: control */
    assert_int_equal(tf_token_to_piece(l.tok, 1, true, buf, sizeof buf), 3);
    assert_memory_equal(buf, "<s>", 3);
    assert_int_equal(tf_token_to_piece(l.tok, 15043, false, buf, 3), 6); /* too small: size needed */
    assert_int_equal(tf_token_to_piece(l.tok, 32000, false, buf, sizeof buf), -1);

    /* special tokens in text: recognised only with parse_special */
    const char *s = "<s>Hello</s>";
    int32_t *ids;
    size_t n = tokenize_all(l.tok, s, strlen(s), false, true, &ids);
    assert_int_equal(n, 3);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 15043); /* "▁Hello": the prefix follows a special token */
    assert_int_equal(ids[2], 2);
    char *back;
    detokenize_all(l.tok, ids, n, true, &back);
    assert_string_equal(back, "<s> Hello</s>");
    free(back);
    detokenize_all(l.tok, ids, n, false, &back);
    assert_string_equal(back, "Hello");
    free(back);
    free(ids);
    n = tokenize_all(l.tok, s, strlen(s), true, false, &ids);
    assert_true(n > 4);
    assert_int_equal(ids[0], 1); /* add_special: BOS */
    for (size_t i = 1; i < n; i++) assert_true(ids[i] != 1 && ids[i] != 2);
    free(ids);

    /* output array too small: TF_ERR_RANGE, full count, the first cap ids */
    int32_t small[2];
    size_t need = 0;
    tf_err err = {0};
    const char *hw = "Hello world, again";
    assert_int_equal(tf_tokenize(l.tok, hw, strlen(hw), true, false, small, 2, &need, &err), TF_ERR_RANGE);
    assert_true(need > 2);
    assert_int_equal(small[0], 1);
    assert_int_equal(small[1], 15043);
    unload_tok(&l);

    TU_REQUIRE_SHARED(p2, "vocab/ggml-vocab-gpt-2.gguf");
    load_tok(&l, p2);
    assert_int_equal(tf_tokenizer_kind(l.tok), TF_TOK_BPE);
    assert_string_equal(tf_tokenizer_describe(l.tok), "gpt2 (BPE), 50257 tokens, 50000 merges, pre=gpt-2");
    assert_false(tf_tokenizer_add_bos(l.tok));
    assert_true(tf_tokenizer_is_eog(l.tok, 50256));
    s = "a<|endoftext|>b";
    n = tokenize_all(l.tok, s, strlen(s), false, true, &ids);
    assert_int_equal(n, 3);
    assert_int_equal(ids[1], 50256);
    free(ids);
    n = tokenize_all(l.tok, s, strlen(s), false, false, &ids);
    assert_true(n > 3);
    for (size_t i = 0; i < n; i++) assert_true(ids[i] != 50256);
    detokenize_all(l.tok, ids, n, false, &back);
    assert_string_equal(back, s);
    free(back);
    free(ids);
    assert_int_equal(tf_token_to_piece(l.tok, 18435, false, buf, sizeof buf), 6); /* "ĠHello" */
    assert_memory_equal(buf, " Hello", 6);
    unload_tok(&l);
}

/* stories260K: a real 512-token SPM vocabulary. */
static void test_stories260k(void **state) {
    (void)state;
    TU_REQUIRE_SHARED(path, "models/stories260K/stories260K.gguf");
    loaded l;
    load_tok(&l, path);
    assert_int_equal(tf_tokenizer_n_vocab(l.tok), 512);
    const char *s = "Once upon a time";
    int32_t *ids;
    size_t n = tokenize_all(l.tok, s, strlen(s), true, false, &ids);
    assert_true(n >= 2);
    assert_int_equal(ids[0], 1);
    /* the pieces spell the escaped text, with no byte fallback */
    char joined[256] = "";
    print_message("stories260K \"%s\" ->", s);
    for (size_t i = 0; i < n; i++) {
        print_message(" %d", ids[i]);
        if (i == 0) continue;
        assert_true(ids[i] >= 3 + 256); /* neither special nor <0xXX> */
        strcat(joined, tf_token_text(l.tok, ids[i]));
    }
    print_message("\n");
    assert_string_equal(joined, "\xe2\x96\x81Once\xe2\x96\x81upon\xe2\x96\x81" "a\xe2\x96\x81time");
    static const int32_t expect[] = {1, 403, 407, 261, 378};
    assert_int_equal(n, sizeof expect / sizeof expect[0]);
    assert_memory_equal(ids, expect, sizeof expect);

    char *back;
    detokenize_all(l.tok, ids, n, false, &back);
    assert_string_equal(back, s);
    free(back);
    int held;
    stream_all(l.tok, ids, n, &back, &held);
    assert_string_equal(back, s);
    free(back);
    free(ids);
    unload_tok(&l);
}

/* SmolLM2-135M-Instruct (tokenizer.ggml.model gpt2, pre "smollm": every digit
 * on its own, GPT-2's regex between them). The file is not in ../shared; it
 * is looked for at $TF_SMOLLM2_GGUF, then under models/ in the repository
 * (git-ignored), and the test is skipped without it.
 *
 * Expected ids: Hugging Face `tokenizers` (PyPI, 0.23.3) with a BPE model built
 * from this GGUF's own tokenizer.ggml.tokens and .merges, and SmolLM2's
 * tokenizer.json pre-tokenizer, Sequence[Digits(individual_digits = true),
 * ByteLevel(add_prefix_space = false, use_regex = true)]; encode(text,
 * add_special_tokens = false). llama.cpp (llama-cpp-python 0.3.36, the same
 * GGUF with vocab_only, tokenize(add_bos = false, special = false)) gives the
 * same ids for every case. */
static const char *smollm2_path(void) {
    const char *env = getenv("TF_SMOLLM2_GGUF");
    if (env && access(env, R_OK) == 0) return env;
    static const char *const rel[] = {"models/SmolLM2-135M-Instruct.Q4_1.gguf",
                                      "models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++)
        if (access(rel[i], R_OK) == 0) return rel[i];
    return NULL;
}

static void test_smollm2(void **state) {
    (void)state;
    const char *path = smollm2_path();
    if (!path) {
        print_message("skipped: SmolLM2-135M-Instruct.Q4_1.gguf not found ($TF_SMOLLM2_GGUF, models/)\n");
        skip();
    }
    static const struct {
        const char *text;
        int32_t ids[40];
    } cases[] = {
    {"The capital of France is",
     {504, 3575, 282, 4649, 314}},
    {"Hello world! 123",
     {19556, 905, 17, 216, 33, 34, 35}},
    {"In 2024, 3.14159 and 1,000,000 people paid $42.50.",
     {788, 216, 34, 32, 34, 36, 28, 216, 35, 30, 33, 36, 33, 37, 41, 284, 216, 33, 28, 32, 32, 32, 28, 32, 32, 32, 701, 5940, 1885, 36, 34, 30, 37, 32, 30}},
    {"  multiple   spaces  ",
     {216, 2701, 256, 5600, 256}},
    {"tabs\tand\nnewlines\n\n end",
     {100, 7366, 197, 397, 198, 2241, 5110, 1116, 1112}},
    {"don't you'll we've I'M",
     {12420, 982, 346, 3060, 392, 3543, 339, 23, 61}},
    {"Caf\xc3\xa9 d\xc3\xa9j\xc3\xa0 vu, na\xc3\xafve fa\xc3\xa7" "ade \xe2\x80\x94 \xe2\x80\x9cquotes\xe2\x80\x9d \xe2\x80\xa6",
     {51, 1939, 2756, 32564, 90, 16739, 386, 101, 28, 15486, 46494, 40852, 1841, 619, 385, 2346, 573, 5548}},
    {"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88 \xe6\x9d\xb1\xe4\xba\xac" "2020",
     {23274, 115, 40993, 179, 120, 248, 26453, 11100, 224, 10391, 251, 10391, 134, 11100, 226, 17097, 247, 126, 16736, 122, 34, 32, 34, 32}},
    {"emoji \xf0\x9f\x99\x82\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd mix",
     {391, 33777, 47526, 10813, 235, 231, 10813, 233, 138, 3412}},
    {"x2y3z 10km/h 7\xc2\xb0" "C",
     {104, 34, 105, 35, 106, 216, 33, 32, 14251, 31, 88, 216, 39, 4742, 51}},
    {"\xd9\xa3\xd9\xa4\xd9\xa5 Arabic-Indic digits \xc2\xbd \xc2\xb2",
     {164, 113, 164, 114, 164, 115, 12428, 29, 5080, 286, 18638, 216, 16738, 216, 19133}},
    {"a\xc2\xa0nbsp and\xe2\x80\x83" "em space",
     {81, 15442, 94, 32093, 284, 321, 221, 391, 1898}},
    {"#include <stdio.h>\nint main(void) { return 0; }",
     {19, 21745, 2067, 10491, 1119, 30, 88, 46, 198, 591, 1085, 24, 32439, 25, 1662, 1003, 216, 32, 43, 4029}},
    };
    loaded l;
    load_tok(&l, path);
    assert_int_equal(tf_tokenizer_n_vocab(l.tok), 49152);
    assert_non_null(strstr(tf_tokenizer_describe(l.tok), "pre=smollm"));
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t want = 0;
        while (want < 40 && cases[c].ids[want] != 0) want++; /* the list ends at its first 0 (no case has id 0) */
        for (int ps = 0; ps < 2; ps++) {
            int32_t *ids;
            size_t n = tokenize_all(l.tok, cases[c].text, strlen(cases[c].text), false, ps, &ids);
            if (n != want || memcmp(ids, cases[c].ids, want * sizeof *ids) != 0) {
                print_error("smollm \"%s\" (parse_special %d): got", cases[c].text, ps);
                for (size_t i = 0; i < n; i++) print_error(" %d", ids[i]);
                print_error("\n");
                fail();
            }
            char *back;
            detokenize_all(l.tok, ids, n, false, &back);
            assert_string_equal(back, cases[c].text);
            free(back);
            free(ids);
        }
    }
    unload_tok(&l);
}

/* ------------------------------------------------------------------------ */
/* round trips, streaming, invalid input                                     */

static const char *const k_vocabs[] = {
    "vocab/ggml-vocab-llama-spm.gguf",
    "vocab/ggml-vocab-gpt-2.gguf",
    "models/stories260K/stories260K.gguf",
};
static const char *const k_texts[] = {
    "text/war_and_peace.txt", "text/anna_karenina.txt",  "text/ulysses.txt",      "text/moby-dick.txt",
    "text/crime_and_punishment.txt", "text/pride_and_prejudice.txt", "text/kjv_bible_pg10.txt",
};

static void test_roundtrip_texts(void **state) {
    (void)state;
    int checked = 0;
    for (size_t v = 0; v < sizeof k_vocabs / sizeof k_vocabs[0]; v++) {
        const char *vp = tu_shared_path(k_vocabs[v]);
        if (!vp) continue;
        loaded l;
        load_tok(&l, vp);
        for (size_t t = 0; t < sizeof k_texts / sizeof k_texts[0]; t++) {
            const char *tp = tu_shared_path(k_texts[t]);
            if (!tp) continue;
            char *text;
            size_t len;
            tf_err err = {0};
            assert_int_equal(tf_read_file(tp, &text, &len, &err), TF_OK);
            /* a few KB from the start and from the middle */
            for (int part = 0; part < 2; part++) {
                size_t off = part == 0 ? 0 : len / 2, n = len - off < 6000 ? len - off : 6000;
                int32_t *ids;
                size_t n_ids = tokenize_all(l.tok, text + off, n, false, false, &ids);
                char *back;
                size_t blen = detokenize_all(l.tok, ids, n_ids, false, &back);
                if (blen != n || memcmp(back, text + off, n) != 0)
                    print_error("round trip failed: %s on %s at %zu\n", k_vocabs[v], k_texts[t], off);
                assert_int_equal(blen, n);
                assert_memory_equal(back, text + off, n);
                free(back);
                /* streaming gives the same text when the slice is valid UTF-8 */
                if (valid_utf8(text + off, n)) {
                    int held;
                    size_t slen = stream_all(l.tok, ids, n_ids, &back, &held);
                    assert_int_equal(slen, n);
                    assert_memory_equal(back, text + off, n);
                    free(back);
                }
                free(ids);
                checked++;
            }
            free(text);
        }
        unload_tok(&l);
    }
    if (!checked) {
        print_message("skipped: ../shared/vocab and ../shared/text not found\n");
        skip();
    }
    print_message("round trips: %d text samples\n", checked);
}

/* Multi-byte characters split over byte-fallback tokens: every push yields
 * valid UTF-8, bytes are held until their character completes. */
static void test_streaming_utf8(void **state) {
    (void)state;
    TU_REQUIRE_SHARED(path, "models/stories260K/stories260K.gguf");
    loaded l;
    load_tok(&l, path);
    const char *s = "caf\xc3\xa9 \xf0\x9f\xa6\x99 \xd0\xbc\xd0\xb8\xd1\x80 \xe2\x82\xac!";
    int32_t *ids;
    size_t n = tokenize_all(l.tok, s, strlen(s), true, false, &ids);
    char *back;
    int held;
    stream_all(l.tok, ids, n, &back, &held);
    assert_string_equal(back, s);
    assert_true(held >= 3); /* the emoji alone is 4 byte tokens */
    free(back);
    free(ids);

    /* a character cut short: held, then U+FFFD at flush */
    tf_detok d;
    tf_detok_init(&d, l.tok);
    char out[64];
    int32_t id_e2 = 3 + 0xE2, id_82 = 3 + 0x82, id_a = -1;
    assert_string_equal(tf_token_text(l.tok, id_e2), "<0xE2>");
    assert_int_equal(tf_detok_push(&d, id_e2, out, sizeof out), 0);
    assert_int_equal(tf_detok_push(&d, id_82, out, sizeof out), 0);
    assert_int_equal(tf_detok_flush(&d, out, sizeof out), 3);
    assert_memory_equal(out, "\xef\xbf\xbd", 3);
    /* an incomplete character followed by ASCII: U+FFFD, then the ASCII */
    tf_detok_init(&d, l.tok);
    int32_t *ids2;
    size_t n2 = tokenize_all(l.tok, "a", 1, false, false, &ids2);
    assert_int_equal(n2, 1);
    id_a = ids2[0];
    free(ids2);
    assert_int_equal(tf_detok_push(&d, id_e2, out, sizeof out), 0);
    int32_t w = tf_detok_push(&d, id_a, out, sizeof out);
    assert_int_equal(w, 5); /* not at the start any more: "▁a" keeps its space */
    assert_memory_equal(out, "\xef\xbf\xbd a", 5);
    assert_int_equal(tf_detok_flush(&d, out, sizeof out), 0);
    /* a tiny output buffer truncates at a character boundary */
    tf_detok_init(&d, l.tok);
    tf_detok_push(&d, 1, out, sizeof out);
    n = tokenize_all(l.tok, "\xe2\x82\xac\xe2\x82\xac", 6, false, false, &ids);
    int32_t total = 0;
    for (size_t i = 0; i < n; i++) {
        w = tf_detok_push(&d, ids[i], out, 4);
        assert_true(w == 0 || w == 3);
        assert_true(valid_utf8(out, (size_t)w));
        total += w;
    }
    assert_int_equal(total, 6);
    free(ids);
    unload_tok(&l);
}

static void test_invalid_utf8(void **state) {
    (void)state;
    static const char *const cases[] = {
        "\xff", "\x80", "abc\xc3", "\xc3(", "\xe2\x28\xa1", "\xf0\x9f\x98", "\xed\xa0\x80 surrogate",
        "\xc0\xaf overlong", "\xf4\x90\x80\x80 beyond", "ok \xfe\xfe ok", "\xe2\x96\x81\xe2\x96",
    };
    int n_vocab_checked = 0;
    for (size_t v = 0; v < sizeof k_vocabs / sizeof k_vocabs[0]; v++) {
        const char *vp = tu_shared_path(k_vocabs[v]);
        if (!vp) continue;
        loaded l;
        load_tok(&l, vp);
        tf_rng rng;
        tf_rng_seed(&rng, tu_seed() + v);
        for (size_t c = 0; c < sizeof cases / sizeof cases[0] + 50; c++) {
            char rnd[200];
            const char *s;
            size_t len;
            if (c < sizeof cases / sizeof cases[0]) {
                s = cases[c];
                len = strlen(s);
            } else { /* random bytes, biased to UTF-8 lead/continuation bytes */
                len = 1 + (uint32_t)tf_rng_next(&rng) % sizeof rnd;
                for (size_t i = 0; i < len; i++) {
                    uint32_t r = (uint32_t)tf_rng_next(&rng);
                    rnd[i] = (char)(r % 3 == 0 ? 0x80 + (r >> 8) % 0x80 : r % 3 == 1 ? 0x20 + (r >> 8) % 0x60 : r >> 8);
                }
                s = rnd;
            }
            for (int ps = 0; ps < 2; ps++) {
                int32_t *ids;
                size_t n = tokenize_all(l.tok, s, len, ps == 1, ps == 1, &ids);
                for (size_t i = 0; i < n; i++) assert_true(ids[i] >= 0 && ids[i] < tf_tokenizer_n_vocab(l.tok));
                if (ps == 0) { /* bytes survive: byte fallback (SPM) or byte-level BPE */
                    char *back;
                    size_t blen = detokenize_all(l.tok, ids, n, false, &back);
                    bool has_escape = memmem(s, len, "\xe2\x96\x81", 3) != NULL; /* "▁" reads back as ' ' */
                    if (!has_escape || tf_tokenizer_kind(l.tok) == TF_TOK_BPE) {
                        assert_int_equal(blen, len);
                        assert_memory_equal(back, s, len);
                    }
                    free(back);
                }
                char *st;
                int held;
                size_t slen = stream_all(l.tok, ids, n, &st, &held);
                assert_true(valid_utf8(st, slen));
                free(st);
                free(ids);
            }
        }
        n_vocab_checked++;
        unload_tok(&l);
    }
    if (!n_vocab_checked) {
        print_message("skipped: ../shared/vocab and ../shared/models not found\n");
        skip();
    }
}

/* ------------------------------------------------------------------------ */
/* pre-tokenizer regexes                                                     */

typedef struct pieces {
    char buf[512];
    size_t n;
} pieces;

static tf_status collect(void *user, const char *s, size_t n, tf_err *err) {
    (void)err;
    pieces *p = user;
    p->n += (size_t)snprintf(p->buf + p->n, sizeof p->buf - p->n, "[%.*s]", (int)n, s);
    return TF_OK;
}

static void check_pieces(const tf_pretok *pt, const char *text, const char *expect) {
    tf_err err = {0};
    pieces p = {.n = 0};
    p.buf[0] = '\0';
    assert_int_equal(tf_pretok_split(pt, text, strlen(text), collect, &p, &err), TF_OK);
    if (strcmp(p.buf, expect) != 0) print_error("split '%s': got %s, expected %s\n", text, p.buf, expect);
    assert_string_equal(p.buf, expect);
}

static void check_split(tf_pre_kind kind, const char *text, const char *expect) {
    tf_pretok pt;
    tf_err err = {0};
    assert_int_equal(tf_pretok_init(&pt, kind, &err), TF_OK);
    check_pieces(&pt, text, expect);
    tf_pretok_free(&pt);
}

/* A program of the given step spellings (NULL-terminated list). */
static void check_program(const char *const *steps, const char *text, const char *expect) {
    tf_pretok pt;
    tf_err err = {0};
    memset(&pt, 0, sizeof pt);
    for (int i = 0; steps[i]; i++) {
        tf_status st = tf_pretok_add_step(&pt, steps[i], strlen(steps[i]), "step", &err);
        if (st != TF_OK) print_error("%s\n", err.msg);
        assert_int_equal(st, TF_OK);
    }
    check_pieces(&pt, text, expect);
    tf_pretok_free(&pt);
}

static void expect_step_error(const char *spec, tf_status st, const char *needle) {
    tf_pretok pt;
    tf_err err = {0};
    memset(&pt, 0, sizeof pt);
    tf_status got = tf_pretok_add_step(&pt, spec, strlen(spec), "pre_steps[0]", &err);
    if (got != st || !strstr(err.msg, needle)) print_error("step '%s': status %d, %s\n", spec, got, err.msg);
    assert_int_equal(got, st);
    assert_non_null(strstr(err.msg, needle));
    assert_non_null(strstr(err.msg, "pre_steps[0]"));
    assert_int_equal(pt.n_steps, 0);
    tf_pretok_free(&pt);
}

static void test_pretokenizers(void **state) {
    (void)state;
    check_split(TF_PRE_GPT2, "Hello world's 12345  x\n\n", "[Hello][ world]['s][ 12345][ ][ x][\n\n]");
    check_split(TF_PRE_LLAMA3, "Hello world'S 12345  x\n\n", "[Hello][ world]['S][ ][123][45][ ][ x][\n\n]");
    check_split(TF_PRE_LLAMA3, "a...\n\nb", "[a][...\n\n][b]");
    check_split(TF_PRE_QWEN2, "x 123", "[x][ ][1][2][3]");
    /* the multi-regex sets: each regex cuts the pieces of the one before */
    check_split(TF_PRE_STARCODER, "ab12 c3", "[ab][1][2][ c][3]");
    check_split(TF_PRE_FALCON, "x=1234567, y", "[x][=][123][456][7][,][ y]");
    check_split(TF_PRE_DEEPSEEK_CODER, "if x1:\n  \xe4\xbd\xa0\xe5\xa5\xbd",
                "[if][ x][1][:][\n][ ][ ][\xe4\xbd\xa0\xe5\xa5\xbd]");
    /* its punctuation class [!-/:-~] also holds the ASCII letters, so it cuts a letter piece again */
    check_split(TF_PRE_DEEPSEEK_LLM, "Hi, 42 caf\xc3\xa9  ", "[Hi][,][ ][42][ caf][\xc3\xa9][  ]");
    /* smollm (the starcoder set): digits alone (\p{N}: also superscripts, fractions, other scripts'
     * digits), GPT-2's regex on each stretch between them, whose end a
     * lookahead sees as the end of the text */
    check_split(TF_PRE_STARCODER, "Hello world's 12345  x\n\n", "[Hello][ world]['s][ ][1][2][3][4][5][ ][ x][\n\n]");
    check_split(TF_PRE_STARCODER, "a  1b2 c", "[a][  ][1][b][2][ c]");
    check_split(TF_PRE_STARCODER, "x\xc2\xb2\xc2\xbd y", "[x][\xc2\xb2][\xc2\xbd][ y]"); /* x, superscript 2, 1/2 */
    check_split(TF_PRE_STARCODER, "ab\xff" "1cd", "[ab][\xff][1][cd]");
    check_split(TF_PRE_STARCODER, "42", "[4][2]");
    /* ill-formed bytes become pieces of their own */
    check_split(TF_PRE_GPT2, "ab\xff" "cd", "[ab][\xff][cd]");
    check_split(TF_PRE_STARCODER, "a\xff" "1", "[a][\xff][1]");

    /* split behaviours (expected pieces from Hugging Face's Split on the same input) */
    static const struct {
        const char *step, *expect;
    } k_beh[] = {
        {"isolated:regex:\\p{N}| ", "[ab][1][2][c][ ][3][ ][4][d]"},
        {"removed:regex:\\p{N}| ", "[ab][c][d]"},
        {"removed!:regex:\\p{N}| ", "[1][2][ ][3][ ][4]"},
        {"merged_with_previous:regex:\\p{N}| ", "[ab1][2][c ][3][ ][4][d]"},
        {"merged_with_previous!:regex:\\p{N}| ", "[ab][1][2c][ ][3][ ][4d]"},
        {"merged_with_next:regex:\\p{N}| ", "[ab][1][2c][ ][3][ ][4d]"},
        {"merged_with_next!:regex:\\p{N}| ", "[ab1][2][c ][3][ ][4][d]"},
        {"contiguous:regex:\\p{N}| ", "[ab][12][c][ 3 4][d]"},
        {"contiguous!:regex:\\p{N}| ", "[ab][12][c][ 3 4][d]"},
    };
    for (size_t i = 0; i < sizeof k_beh / sizeof k_beh[0]; i++)
        check_program((const char *const[]){k_beh[i].step, NULL}, "ab12c 3 4d", k_beh[i].expect);
    /* a literal pattern (regex syntax is not special), then a prefix space per piece */
    check_program((const char *const[]){"isolated:literal:.*", "prefix_space", NULL}, "a.*b .*", "[ a][ .*][ b ][ .*]");
    check_program((const char *const[]){"removed:literal: ", NULL}, "a  b", "[a][b]");

    /* spellings that are refused */
    expect_step_error("isolated:regex:", TF_ERR_FORMAT, "is not a pre-tokenizer step");
    expect_step_error("sideways:regex:x", TF_ERR_FORMAT, "'sideways:regex:x' is not a pre-tokenizer step");
    expect_step_error("isolated:glob:x", TF_ERR_FORMAT, "is not a pre-tokenizer step");
    expect_step_error("isolated", TF_ERR_FORMAT, "expected 'prefix_space' or");
    expect_step_error("isolated:regex:(ab", TF_ERR_FORMAT, "does not compile");
    expect_step_error("isolated:regex:a*", TF_ERR_UNSUPPORTED, "can match the empty string");
    tf_pretok pt;
    tf_err err = {0};
    memset(&pt, 0, sizeof pt);
    for (int i = 0; i < TF_PRETOK_MAX_STEPS; i++) assert_int_equal(tf_pretok_add_step(&pt, "prefix_space", 12, "s", &err), TF_OK);
    assert_int_equal(tf_pretok_add_step(&pt, "prefix_space", 12, "s", &err), TF_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "more than 8 pre-tokenizer steps"));
    tf_pretok_free(&pt);

    /* a long whitespace run followed by a word */
    char big[20001];
    memset(big, ' ', 19999);
    big[19999] = 'x';
    big[20000] = '\0';
    assert_int_equal(tf_pretok_init(&pt, TF_PRE_LLAMA3, &err), TF_OK);
    pieces p = {.n = 0};
    assert_int_equal(tf_pretok_split(&pt, big, 20000, collect, &p, &err), TF_OK);
    tf_pretok_free(&pt);
}

/* ------------------------------------------------------------------------ */
/* loader errors (in-memory variants of a real file's metadata)              */

typedef struct variant {
    tf_gguf g;      /* shallow copy of the real file with its own kv array */
    tf_gguf_kv *kv; /* the copy */
} variant;

static void variant_make(variant *v, const tf_gguf *src) {
    v->g = *src;
    v->kv = malloc(src->n_kv * sizeof *v->kv);
    assert_non_null(v->kv);
    memcpy(v->kv, src->kv, src->n_kv * sizeof *v->kv);
    v->g.kv = v->kv;
    memset(&v->g.map, 0, sizeof v->g.map);
}

static tf_gguf_kv *variant_kv(variant *v, const char *key) {
    for (uint64_t i = 0; i < v->g.n_kv; i++)
        if (tf_gguf_str_eq(v->kv[i].key, key)) return &v->kv[i];
    fail_msg("key %s not in the file", key);
    return NULL;
}

static void variant_drop(variant *v, const char *key) {
    tf_gguf_kv *kv = variant_kv(v, key);
    kv->key.data = "x.removed";
    kv->key.len = 9;
}

/* Build, expect failure with st and a message containing each needle. */
static void expect_error(variant *v, tf_status st, const char *needle1, const char *needle2) {
    tf_tokenizer *tok = (tf_tokenizer *)0x1;
    tf_err err = {0};
    tf_status got = tf_tokenizer_from_gguf(&tok, &v->g, &err);
    if (got != st || !strstr(err.msg, needle1) || (needle2 && !strstr(err.msg, needle2)))
        print_error("got status %d, message: %s\n", got, err.msg);
    assert_int_equal(got, st);
    assert_null(tok);
    assert_non_null(strstr(err.msg, needle1));
    if (needle2) assert_non_null(strstr(err.msg, needle2));
    free(v->kv);
}

static void test_loader_errors(void **state) {
    (void)state;
    TU_REQUIRE_SHARED(path, "models/stories260K/stories260K.gguf");
    tf_gguf g;
    tf_err err = {0};
    assert_int_equal(tf_gguf_open(&g, path, &err), TF_OK);
    variant v;

    variant_make(&v, &g); /* unknown model */
    variant_kv(&v, "tokenizer.ggml.model")->val.s = (tf_gguf_str){"bert", 4};
    expect_error(&v, TF_ERR_UNSUPPORTED, "tokenizer.ggml.model", "'bert'");

    variant_make(&v, &g); /* missing model */
    variant_drop(&v, "tokenizer.ggml.model");
    expect_error(&v, TF_ERR_FORMAT, "tokenizer.ggml.model", NULL);

    variant_make(&v, &g); /* out-of-range BOS */
    variant_kv(&v, "tokenizer.ggml.bos_token_id")->val.u = 512;
    expect_error(&v, TF_ERR_FORMAT, "tokenizer.ggml.bos_token_id", "512");

    variant_make(&v, &g); /* out-of-range unknown id */
    variant_kv(&v, "tokenizer.ggml.unknown_token_id")->val.u = 100000;
    expect_error(&v, TF_ERR_FORMAT, "tokenizer.ggml.unknown_token_id", "100000");

    variant_make(&v, &g); /* scores shorter than tokens */
    variant_kv(&v, "tokenizer.ggml.scores")->arr_n = 511;
    expect_error(&v, TF_ERR_FORMAT, "tokenizer.ggml.scores", "511");

    variant_make(&v, &g); /* types shorter than tokens */
    variant_kv(&v, "tokenizer.ggml.token_type")->arr_n = 100;
    expect_error(&v, TF_ERR_FORMAT, "tokenizer.ggml.token_type", "100");

    variant_make(&v, &g); /* a Metaspace scheme that is not one */
    {
        tf_gguf_kv *kv = variant_kv(&v, "general.name");
        kv->key = (tf_gguf_str){"tokenizer.triforce.space_prefix", 31};
        kv->val.s = (tf_gguf_str){"sometimes", 9};
    }
    expect_error(&v, TF_ERR_UNSUPPORTED, "tokenizer.triforce.space_prefix", "'sometimes'");

    variant_make(&v, &g); /* SPM without scores */
    variant_drop(&v, "tokenizer.ggml.scores");
    expect_error(&v, TF_ERR_FORMAT, "tokenizer.ggml.scores", NULL);

    variant_make(&v, &g); /* a token type out of 0..6 */
    {
        tf_gguf_kv *kv = variant_kv(&v, "tokenizer.ggml.token_type");
        uint8_t *types = malloc(kv->arr_n * 4);
        memcpy(types, kv->arr_data, kv->arr_n * 4);
        types[4 * 7] = 9;
        kv->arr_data = types;
        expect_error(&v, TF_ERR_FORMAT, "tokenizer.ggml.token_type[7]", "9");
        free(types);
    }

    variant_make(&v, &g); /* a byte token that does not spell a byte */
    {
        tf_gguf_kv *kv = variant_kv(&v, "tokenizer.ggml.tokens");
        tf_gguf_str *strs = malloc(kv->arr_n * sizeof *strs);
        memcpy(strs, kv->arr_str, kv->arr_n * sizeof *strs);
        strs[10] = (tf_gguf_str){"<0xZZ>", 6};
        kv->arr_str = strs;
        expect_error(&v, TF_ERR_FORMAT, "tokenizer.ggml.tokens[10]", "<0xZZ>");
        free(strs);
    }

    variant_make(&v, &g); /* wrong type for add_bos_token */
    variant_kv(&v, "tokenizer.ggml.bos_token_id")->key = (tf_gguf_str){"tokenizer.ggml.add_bos_token", 28};
    expect_error(&v, TF_ERR_FORMAT, "tokenizer.ggml.add_bos_token", NULL);

    /* 0xFFFFFFFF means none */
    variant_make(&v, &g);
    variant_kv(&v, "tokenizer.ggml.bos_token_id")->val.u = 0xFFFFFFFFu;
    tf_tokenizer *tok = NULL;
    assert_int_equal(tf_tokenizer_from_gguf(&tok, &v.g, &err), TF_OK);
    assert_int_equal(tf_tokenizer_bos(tok), -1);
    assert_false(tf_tokenizer_add_bos(tok));
    tf_tokenizer_free(tok);
    free(v.kv);
    tf_gguf_close(&g);

    const char *p2 = tu_shared_path("vocab/ggml-vocab-gpt-2.gguf");
    if (!p2) return;
    assert_int_equal(tf_gguf_open(&g, p2, &err), TF_OK);

    variant_make(&v, &g); /* unknown pre-tokenizer */
    variant_kv(&v, "tokenizer.ggml.pre")->val.s = (tf_gguf_str){"mystery-pre", 11};
    expect_error(&v, TF_ERR_UNSUPPORTED, "tokenizer.ggml.pre", "'mystery-pre'");

    /* tokenizer.triforce.pre_steps: a program instead of a name */
    variant_make(&v, &g); /* wrong type */
    variant_kv(&v, "tokenizer.ggml.pre")->key = (tf_gguf_str){"tokenizer.triforce.pre_steps", 28};
    expect_error(&v, TF_ERR_FORMAT, "tokenizer.triforce.pre_steps", NULL);
    {
        static tf_gguf_str k_steps[] = {{"isolated:regex:\\p{N}", 20}, {"isolated:regex:'s|'t|'re|'ve|'m|'ll|'d| "
                                        "?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+", 0}};
        k_steps[1].len = strlen(k_steps[1].data);
        static const struct {
            uint64_t n;
            const char *bad, *needle;
            tf_status st;
        } k_cases[] = {
            {2, NULL, NULL, TF_OK},
            {0, NULL, "has 0 entries (expected 1..8)", TF_ERR_FORMAT},
            {9, NULL, "has 9 entries (expected 1..8)", TF_ERR_FORMAT},
            {2, "isolated:regex:[a-", "tokenizer.triforce.pre_steps[1]: pattern '[a-' does not compile", TF_ERR_FORMAT},
            {2, "nosuch:regex:a", "tokenizer.triforce.pre_steps[1] = 'nosuch:regex:a' is not a pre-tokenizer step",
             TF_ERR_FORMAT},
            {2, "removed:regex:x?", "can match the empty string", TF_ERR_UNSUPPORTED},
        };
        for (size_t k = 0; k < sizeof k_cases / sizeof k_cases[0]; k++) {
            tf_gguf_str steps[9];
            for (int i = 0; i < 9; i++) steps[i] = k_steps[i == 1 ? 1 : 0];
            if (k_cases[k].bad) steps[1] = (tf_gguf_str){k_cases[k].bad, strlen(k_cases[k].bad)};
            variant_make(&v, &g);
            tf_gguf_kv *kv = variant_kv(&v, "tokenizer.ggml.pre");
            *kv = (tf_gguf_kv){.key = {"tokenizer.triforce.pre_steps", 28}, .type = TF_GGUF_ARRAY,
                               .arr_type = TF_GGUF_STRING, .arr_n = k_cases[k].n, .arr_str = steps};
            if (k_cases[k].needle) {
                expect_error(&v, k_cases[k].st, k_cases[k].needle, NULL);
                continue;
            }
            /* the program replaces the name: digits one by one, then GPT-2's regex (the StarCoder set) */
            assert_int_equal(tf_tokenizer_from_gguf(&tok, &v.g, &err), TF_OK);
            int32_t *ids;
            size_t n = tokenize_all(tok, "x 2024", 6, false, false, &ids);
            assert_int_equal(n, 6); /* "x", " ", "2", "0", "2", "4" */
            free(ids);
            tf_tokenizer_free(tok);
            free(v.kv);
        }
    }

    variant_make(&v, &g); /* malformed merge */
    {
        tf_gguf_kv *kv = variant_kv(&v, "tokenizer.ggml.merges");
        tf_gguf_str *strs = malloc(kv->arr_n * sizeof *strs);
        memcpy(strs, kv->arr_str, kv->arr_n * sizeof *strs);
        strs[3] = (tf_gguf_str){"nospace", 7};
        kv->arr_str = strs;
        expect_error(&v, TF_ERR_FORMAT, "tokenizer.ggml.merges[3]", "'nospace'");
        strs[3] = (tf_gguf_str){"trailing ", 9};
        v.kv = malloc(g.n_kv * sizeof *v.kv); /* expect_error freed the copy */
        memcpy(v.kv, g.kv, g.n_kv * sizeof *v.kv);
        v.g.kv = v.kv;
        variant_kv(&v, "tokenizer.ggml.merges")->arr_str = strs;
        expect_error(&v, TF_ERR_FORMAT, "tokenizer.ggml.merges[3]", NULL);
        free(strs);
    }

    variant_make(&v, &g); /* BPE without merges */
    variant_drop(&v, "tokenizer.ggml.merges");
    expect_error(&v, TF_ERR_FORMAT, "tokenizer.ggml.merges", NULL);

    variant_make(&v, &g); /* absent pre = GPT-2's regex; llama3 names accepted */
    variant_drop(&v, "tokenizer.ggml.pre");
    assert_int_equal(tf_tokenizer_from_gguf(&tok, &v.g, &err), TF_OK);
    assert_string_equal(tf_tokenizer_describe(tok), "gpt2 (BPE), 50257 tokens, 50000 merges, pre=default");
    tf_tokenizer_free(tok);
    free(v.kv);
    variant_make(&v, &g);
    variant_kv(&v, "tokenizer.ggml.pre")->val.s = (tf_gguf_str){"llama-bpe", 9};
    assert_int_equal(tf_tokenizer_from_gguf(&tok, &v.g, &err), TF_OK);
    assert_true(tf_tokenizer_add_bos(tok)); /* the Llama 3 family adds BOS by default */
    const char *s = "Hello world 12345\n\n it's";
    int32_t *ids;
    size_t n = tokenize_all(tok, s, strlen(s), false, false, &ids);
    char *back;
    detokenize_all(tok, ids, n, false, &back);
    assert_string_equal(back, s);
    free(back);
    free(ids);
    tf_tokenizer_free(tok);
    free(v.kv);
    tf_gguf_close(&g);
}

/* ------------------------------------------------------------------------ */
/* threads, speed                                                            */

typedef struct thread_job {
    const tf_tokenizer *tok;
    const char *text;
    size_t len;
    int32_t *ids;
    size_t n;
} thread_job;

static void *thread_run(void *arg) {
    thread_job *j = arg;
    tf_err err = {0};
    size_t need = 0;
    tf_tokenize(j->tok, j->text, j->len, true, true, NULL, 0, &need, &err);
    j->ids = malloc((need ? need : 1) * sizeof *j->ids);
    tf_err_clear(&err);
    if (tf_tokenize(j->tok, j->text, j->len, true, true, j->ids, need, &j->n, &err) != TF_OK) j->n = (size_t)-1;
    return NULL;
}

/* One tokenizer shared by concurrent callers gives the same ids as alone. */
static void test_threads(void **state) {
    (void)state;
    TU_REQUIRE_SHARED(vp, "vocab/ggml-vocab-gpt-2.gguf");
    loaded l;
    load_tok(&l, vp);
    const char *tp = tu_shared_path("text/moby-dick.txt");
    if (!tp) {
        unload_tok(&l);
        skip();
    }
    char *text;
    size_t len;
    tf_err err = {0};
    assert_int_equal(tf_read_file(tp, &text, &len, &err), TF_OK);
    if (len > 200000) len = 200000;
    int32_t *ref;
    size_t n_ref = tokenize_all(l.tok, text, len, true, true, &ref);
    thread_job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (thread_job){.tok = l.tok, .text = text, .len = len};
        assert_int_equal(pthread_create(&th[i], NULL, thread_run, &jobs[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(jobs[i].n, n_ref);
        assert_memory_equal(jobs[i].ids, ref, n_ref * sizeof *ref);
        free(jobs[i].ids);
    }
    free(ref);
    free(text);
    unload_tok(&l);
}

/* SPM merging per segment (tf_tokenizer.spm_split) gives exactly the ids of
 * merging the whole text at once. */
static void test_spm_segments(void **state) {
    (void)state;
    TU_REQUIRE_SHARED(vp, "vocab/ggml-vocab-llama-spm.gguf");
    loaded l;
    load_tok(&l, vp);
    assert_true(l.tok->spm_split); /* Llama 2's vocabulary allows it */
    int checked = 0;
    for (size_t t = 0; t < sizeof k_texts / sizeof k_texts[0]; t++) {
        const char *tp = tu_shared_path(k_texts[t]);
        if (!tp) continue;
        char *text;
        size_t len;
        tf_err err = {0};
        assert_int_equal(tf_read_file(tp, &text, &len, &err), TF_OK);
        size_t off = len / 3, n = len - off < 100000 ? len - off : 100000;
        int32_t *a, *b;
        l.tok->spm_split = true;
        size_t na = tokenize_all(l.tok, text + off, n, true, false, &a);
        l.tok->spm_split = false;
        size_t nb = tokenize_all(l.tok, text + off, n, true, false, &b);
        assert_int_equal(na, nb);
        assert_memory_equal(a, b, na * sizeof *a);
        free(a);
        free(b);
        free(text);
        checked++;
    }
    unload_tok(&l);
    if (!checked) {
        print_message("skipped: ../shared/text not found\n");
        skip();
    }
}

/* Tokenization speed on 1 MB of text: printed, never asserted. */
static void test_speed(void **state) {
    (void)state;
    TU_REQUIRE_SHARED(tp, "text/war_and_peace.txt");
    char *text;
    size_t len;
    tf_err err = {0};
    assert_int_equal(tf_read_file(tp, &text, &len, &err), TF_OK);
    if (len > (1u << 20)) len = 1u << 20;
    for (size_t v = 0; v < sizeof k_vocabs / sizeof k_vocabs[0]; v++) {
        const char *vp = tu_shared_path(k_vocabs[v]);
        if (!vp) continue;
        loaded l;
        load_tok(&l, vp);
        /* one pass into an array sized from the text (tokens rarely outnumber bytes) */
        size_t cap = len + 16, n = 0;
        int32_t *ids = malloc(cap * sizeof *ids);
        assert_non_null(ids);
        double t0 = now_s();
        tf_status st = tf_tokenize(l.tok, text, len, false, false, ids, cap, &n, &err);
        double t1 = now_s();
        assert_int_equal(st, TF_OK);
        char *back;
        detokenize_all(l.tok, ids, n, false, &back);
        double t2 = now_s();
        print_message("speed: %-36s %.2f MB -> %zu tokens: tokenize %.3f s (%.1f MB/s), detokenize %.3f s\n",
                      k_vocabs[v], len / 1048576.0, n, t1 - t0, len / 1048576.0 / (t1 - t0), t2 - t1);
        free(back);
        free(ids);
        unload_tok(&l);
    }
    free(text);
}

/* ------------------------------------------------------------------------ */
/* the public API's bounded writers (include/triforce.h)                     */

/* tf_model_token_to_piece and tf_model_tokenize on a generated model (no
 * ../shared needed): when the result does not fit, the full size is reported,
 * exactly the first cap bytes / ids are written, and guard bytes past cap keep
 * their value. */
static void test_public_bounded_writes(void **state) {
    (void)state;
    tu_gen_case c = {"vocab", 32, 1, 2, 2, 64, TF_ROPE_SCALING_NONE, 1, 0, true, TF_DTYPE_F32};
    const char *path = tu_gen(&c, 3);
    tf_model *m;
    char eb[512];
    if (tf_model_load_file(&m, path, NULL, eb, sizeof eb) != TF_OK) fail_msg("%s", eb);
    unlink(path);
    tf_model_info info;
    tf_model_get_info(m, &info);

    /* <unk> (id 0) reads as U+2585, 3 bytes; <s> (id 1) as "" or, rendered, "<s>" */
    enum { GUARD = 0x5a };
    char buf[8];
    assert_int_equal(tf_model_token_to_piece(m, 0, false, NULL, 0), 3);
    memset(buf, GUARD, sizeof buf);
    assert_int_equal(tf_model_token_to_piece(m, 0, false, buf, -5), 3);
    assert_int_equal((unsigned char)buf[0], GUARD);
    for (int32_t cap = 0; cap <= 4; cap++) {
        memset(buf, GUARD, sizeof buf);
        assert_int_equal(tf_model_token_to_piece(m, 0, false, buf, cap), 3);
        int32_t k = cap < 3 ? cap : 3;
        assert_memory_equal(buf, "\xe2\x96\x85", (size_t)k);
        for (int32_t i = k; i < (int32_t)sizeof buf; i++) assert_int_equal((unsigned char)buf[i], GUARD);
    }
    memset(buf, GUARD, sizeof buf);
    assert_int_equal(tf_model_token_to_piece(m, 1, true, buf, 2), 3);
    assert_memory_equal(buf, "<s", 2);
    assert_int_equal((unsigned char)buf[2], GUARD);
    assert_int_equal(tf_model_token_to_piece(m, 1, false, buf, sizeof buf), 0);
    assert_int_equal(tf_model_token_to_piece(m, -1, false, buf, sizeof buf), -1);
    assert_int_equal(tf_model_token_to_piece(m, info.n_vocab, false, buf, sizeof buf), -1);

    /* tokenize: the full count with TF_ERR_RANGE, the first cap ids, nothing past them */
    const char *text = "Hello, world";
    size_t n = 99;
    assert_int_equal(tf_model_tokenize(m, text, strlen(text), true, false, NULL, 0, &n), TF_ERR_RANGE);
    assert_true(n >= 4);
    int32_t full[64], part[64];
    size_t n_full;
    assert_int_equal(tf_model_tokenize(m, text, strlen(text), true, false, full, 64, &n_full), TF_OK);
    assert_int_equal(n_full, n);
    for (size_t cap = 1; cap < n; cap++) {
        for (size_t i = 0; i < 64; i++) part[i] = -7;
        size_t got = 0;
        assert_int_equal(tf_model_tokenize(m, text, strlen(text), true, false, part, cap, &got), TF_ERR_RANGE);
        assert_int_equal(got, n);
        assert_memory_equal(part, full, cap * sizeof(int32_t));
        for (size_t i = cap; i < 64; i++) assert_int_equal(part[i], -7);
    }
    /* other failures leave *n_out 0 */
    n = 99;
    assert_int_equal(tf_model_tokenize(m, NULL, 3, true, false, part, 64, &n), TF_ERR_INVALID_ARG);
    assert_int_equal(n, 0);
    n = 99;
    assert_int_equal(tf_model_tokenize(m, text, strlen(text), true, false, NULL, 4, &n), TF_ERR_INVALID_ARG);
    assert_int_equal(n, 0);

    /* errbuf: cut to errbuf_size - 1 bytes, NUL-terminated, nothing written past it */
    tf_model *none;
    char small[9];
    memset(small, GUARD, sizeof small);
    assert_int_not_equal(tf_model_load_file(&none, "/nonexistent/model.gguf", NULL, small, 8), TF_OK);
    assert_null(none);
    assert_int_equal(strlen(small), 7);
    assert_int_equal((unsigned char)small[8], GUARD);
    tf_model_close(m);
}

/* The public streaming detokenizer over one vocabulary: a text with 2-, 3- and
 * 4-byte characters tokenized and streamed back token by token gives the text
 * exactly (continuation false: SentencePiece's leading space dropped; true:
 * the same with it kept); each push is first asked with no buffer, which
 * must report the size and consume nothing; an id out of range is refused
 * and consumes nothing; a character left incomplete flushes as U+FFFD. */
static void detokenizer_case(const char *path, bool spm) {
    tf_model_params mp = tf_model_default_params();
    mp.vocab_only = true;
    tf_model *m;
    char eb[512];
    if (tf_model_load_file(&m, path, &mp, eb, sizeof eb) != TF_OK) fail_msg("%s", eb);
    const char *s = "caf\xc3\xa9 \xf0\x9f\xa6\x99 \xd0\xbc\xd0\xb8\xd1\x80 \xe2\x82\xac! Hello, world.";
    int32_t ids[256];
    size_t n = 0;
    for (int cont = 0; cont < 2; cont++) {
        /* the start of a text with its BOS (if the vocabulary adds one); a continuation without */
        assert_int_equal(tf_model_tokenize(m, s, strlen(s), cont == 0, false, ids, 256, &n), TF_OK);
        tf_detokenizer *d;
        assert_int_equal(tf_detokenizer_init(&d, m, cont == 1), TF_OK);
        size_t max = tf_detokenizer_max_bytes(d), len = 0, got;
        assert_true(max >= 12);
        char *text = calloc(1, 4096), *buf = malloc(max);
        for (size_t i = 0; i < n; i++) {
            size_t need = 99;
            tf_status st = tf_detokenizer_push(d, ids[i], NULL, 0, &need);
            assert_true(st == TF_OK || st == TF_ERR_RANGE);
            assert_true(st == TF_OK ? need == 0 : need > 0 && need <= max);
            assert_int_equal(tf_detokenizer_push(d, -1, buf, max, &got), TF_ERR_INVALID_ARG);
            assert_int_equal(got, 0);
            if (st == TF_OK) continue; /* nothing to write: the token was consumed */
            if (need > 1) /* one byte short: still nothing consumed */
                assert_int_equal(tf_detokenizer_push(d, ids[i], buf, need - 1, &got), TF_ERR_RANGE);
            assert_int_equal(tf_detokenizer_push(d, ids[i], buf, need, &got), TF_OK);
            assert_int_equal(got, need);
            memcpy(text + len, buf, got);
            len += got;
        }
        assert_int_equal(tf_detokenizer_flush(d, buf, max, &got), TF_OK);
        assert_int_equal(got, 0);
        const char *want = s;
        char with_space[256];
        if (cont && spm) {
            snprintf(with_space, sizeof with_space, " %s", s);
            want = with_space;
        }
        assert_int_equal(len, strlen(want));
        assert_memory_equal(text, want, len);
        free(text);
        free(buf);
        tf_detokenizer_free(d);
    }
    /* a character cut short: the emoji without its last token */
    int32_t e2 = -1;
    size_t ne = 0;
    assert_int_equal(tf_model_tokenize(m, "\xf0\x9f\xa6\x99", 4, false, false, ids, 256, &ne), TF_OK);
    tf_detokenizer *d;
    assert_int_equal(tf_detokenizer_init(&d, m, true), TF_OK);
    char out[64];
    size_t got = 0;
    bool emitted_part = false; /* a byte of the emoji came out */
    for (size_t i = 0; i + 1 < ne; i++) { /* all but the last token */
        assert_int_equal(tf_detokenizer_push(d, ids[i], out, sizeof out, &got), TF_OK);
        for (size_t j = 0; j < got; j++) emitted_part |= (unsigned char)out[j] >= 0x80;
    }
    e2 = ne > 1 ? ids[0] : -1;
    if (ne > 1) { /* split over tokens (byte tokens): held, then U+FFFD at the end */
        assert_false(emitted_part);
        assert_int_equal(tf_detokenizer_flush(d, out, 2, &got), TF_ERR_RANGE);
        assert_int_equal(got, 3);
        assert_int_equal(tf_detokenizer_flush(d, out, sizeof out, &got), TF_OK);
        assert_int_equal(got, 3);
        assert_memory_equal(out, "\xef\xbf\xbd", 3);
        assert_int_equal(tf_detokenizer_flush(d, out, sizeof out, &got), TF_OK);
        assert_int_equal(got, 0);
    }
    print_message("%s: %zu ids for the emoji%s, max %zu bytes a push\n", path, ne,
                  e2 >= 0 ? " (held, then U+FFFD)" : "", tf_detokenizer_max_bytes(d));
    tf_detokenizer_free(d);
    assert_int_equal(tf_detokenizer_init(&d, NULL, false), TF_ERR_INVALID_ARG);
    assert_null(d);
    tf_model_close(m);
}

static void test_public_detokenizer(void **state) {
    (void)state;
    TU_REQUIRE_SHARED(spm, "vocab/ggml-vocab-llama-spm.gguf");
    char spm_path[1024];
    snprintf(spm_path, sizeof spm_path, "%s", spm);
    TU_REQUIRE_SHARED(bpe, "vocab/ggml-vocab-gpt-2.gguf");
    char bpe_path[1024];
    snprintf(bpe_path, sizeof bpe_path, "%s", bpe);
    detokenizer_case(spm_path, true);
    detokenizer_case(bpe_path, false);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors_llama_spm), cmocka_unit_test(test_vectors_phi3),
        cmocka_unit_test(test_vectors_gpt2),      cmocka_unit_test(test_vectors_mpt),
        cmocka_unit_test(test_vectors_falcon),    cmocka_unit_test(test_vectors_starcoder),
        cmocka_unit_test(test_vectors_refact),    cmocka_unit_test(test_vectors_deepseek_llm),
        cmocka_unit_test(test_vectors_deepseek_coder),
        cmocka_unit_test(test_metadata),          cmocka_unit_test(test_stories260k),
        cmocka_unit_test(test_smollm2),
        cmocka_unit_test(test_roundtrip_texts),   cmocka_unit_test(test_streaming_utf8),
        cmocka_unit_test(test_invalid_utf8),      cmocka_unit_test(test_pretokenizers),
        cmocka_unit_test(test_loader_errors),     cmocka_unit_test(test_threads),
        cmocka_unit_test(test_spm_segments),
        cmocka_unit_test(test_public_bounded_writes),
        cmocka_unit_test(test_public_detokenizer),
        cmocka_unit_test(test_speed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
