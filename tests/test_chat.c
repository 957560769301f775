/*
 * test_chat.c — tf_model_chat_prompt against published chat templates
 * rendered by Jinja2 (tests/data/chat_cases.inc, made by
 * tests/data/gen_chat_cases.py): each template is written into a vocab-only
 * GGUF as tokenizer.chat_template and the engine's text must equal the
 * rendering byte for byte, for one turn and for conversations of several
 * turns (chat_multi_cases.inc), recognised from the template and formatted by
 * the family's name. Also: refusals (no template, unknown family, a system
 * message for a template without one) and the real SmolLM2 file.
 */
#include "testutil.h"

#include "format/gguf.h"
#include "format/gguf_write.h"
#include "triforce.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct chat_case {
    const char *name, *tmpl, *system, *user, *expected;
} chat_case;

static const chat_case k_cases[] = {
#include "../tests/data/chat_cases.inc"
};

/* A vocab-only GGUF: the shared GPT-2 vocabulary with `tmpl` as its chat
 * template (NULL: none). Returns the loaded model. */
static tf_model *vocab_with_template(const char *vocab, const char *tmpl) {
    tf_err err = {0};
    tf_gguf g;
    assert_int_equal(tf_gguf_open(&g, vocab, &err), TF_OK);
    tf_gguf_writer *w = tf_gguf_writer_new();
    assert_non_null(w);
    for (uint64_t i = 0; i < g.n_kv; i++) {
        const tf_gguf_str *k = &g.kv[i].key;
        if (k->len == 23 && memcmp(k->data, "tokenizer.chat_template", 23) == 0) continue;
        assert_int_equal(tf_gguf_writer_copy_kv(w, &g.kv[i], &err), TF_OK);
    }
    if (tmpl) assert_int_equal(tf_gguf_writer_set_str(w, "tokenizer.chat_template", tmpl, &err), TF_OK);
    const char *path = tu_tmp_path(".gguf");
    assert_int_equal(tf_gguf_writer_write_file(w, path, NULL, NULL, &err), TF_OK);
    tf_gguf_writer_free(w);
    tf_gguf_close(&g);
    tf_model_params mp = tf_model_default_params();
    mp.vocab_only = true;
    tf_model *m;
    char eb[512];
    if (tf_model_load_file(&m, path, &mp, eb, sizeof eb) != TF_OK) fail_msg("%s", eb);
    remove(path);
    return m;
}

static void test_families_match_jinja(void **state) {
    (void)state;
    TU_REQUIRE_SHARED(vocab, "vocab/ggml-vocab-gpt-2.gguf");
    char vpath[1024];
    snprintf(vpath, sizeof vpath, "%s", vocab);
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        const chat_case *c = &k_cases[i];
        tf_model *m = vocab_with_template(vpath, c->tmpl);
        char *out = NULL, eb[512];
        if (tf_model_chat_prompt(m, c->system, c->user, &out, eb, sizeof eb) != TF_OK)
            fail_msg("%s: %s", c->name, eb);
        if (strcmp(out, c->expected) != 0) fail_msg("%s: got\n[%s]\nexpected\n[%s]", c->name, out, c->expected);
        free(out);
        tf_model_close(m);
    }
}

typedef struct chat_multi_case {
    const char *name, *tmpl;
    size_t n;
    tf_chat_message msgs[8];
    const char *expected;
} chat_multi_case;

static const chat_multi_case k_multi[] = {
#include "../tests/data/chat_multi_cases.inc"
};

/* The family a case's name stands for: the name itself, or NULL for the
 * chatml variants with a default system message, which their template
 * text carries and the bare family name does not. */
static const char *case_family(const char *name) {
    return strncmp(name, "chatml-", 7) == 0 ? NULL : name;
}

/* Conversations of several turns, as Jinja renders the same templates. */
static void test_multi_turn_match_jinja(void **state) {
    (void)state;
    TU_REQUIRE_SHARED(vocab, "vocab/ggml-vocab-gpt-2.gguf");
    char vpath[1024];
    snprintf(vpath, sizeof vpath, "%s", vocab);
    size_t n_multi = sizeof k_multi / sizeof k_multi[0];
    assert_true(n_multi >= 30);
    /* every family has cases of three user turns, llama2's with a system message too */
    static const char *const families[] = {"chatml", "llama3",   "llama2",         "mistral",
                                           "zephyr", "deepseek", "deepseek-coder", "deepseek3"};
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
        bool three_turns = false;
        for (size_t i = 0; i < n_multi; i++)
            three_turns |= strcmp(k_multi[i].name, families[f]) == 0 && k_multi[i].n >= 5;
        if (!three_turns) fail_msg("no case of three user turns for %s", families[f]);
    }
    for (size_t i = 0; i < n_multi; i++) {
        const chat_multi_case *c = &k_multi[i];
        tf_model *m = vocab_with_template(vpath, c->tmpl);
        char *out = NULL, eb[512];
        if (tf_model_chat_format(m, c->msgs, c->n, &out, eb, sizeof eb) != TF_OK) fail_msg("%s: %s", c->name, eb);
        if (strcmp(out, c->expected) != 0) fail_msg("%s: got\n[%s]\nexpected\n[%s]", c->name, out, c->expected);
        free(out);
        tf_model_close(m);
    }
    /* a family named by the caller formats a model that has no template at all */
    tf_model *bare = vocab_with_template(vpath, NULL);
    size_t n_by_name = 0;
    for (size_t i = 0; i < n_multi; i++) {
        const chat_multi_case *c = &k_multi[i];
        const char *fam = case_family(c->name);
        if (!fam) continue;
        char *out = NULL, eb[512];
        if (tf_model_chat_format_as(bare, fam, c->msgs, c->n, &out, eb, sizeof eb) != TF_OK)
            fail_msg("%s by name: %s", c->name, eb);
        if (strcmp(out, c->expected) != 0) fail_msg("%s by name: got\n[%s]\nexpected\n[%s]", c->name, out, c->expected);
        free(out);
        n_by_name++;
    }
    assert_true(n_by_name >= 28);
    {
        char *out = NULL, eb[512];
        assert_int_equal(tf_model_chat_format_as(bare, "vicuna", k_multi[0].msgs, k_multi[0].n, &out, eb, sizeof eb),
                         TF_ERR_INVALID_ARG);
        assert_non_null(strstr(eb, "'vicuna' is not one of"));
        assert_non_null(strstr(eb, "deepseek-coder"));
    }
    tf_model_close(bare);
    /* roles out of order */
    tf_model *m = vocab_with_template(vpath, k_multi[0].tmpl);
    char *out = NULL, eb[512];
    const tf_chat_message two_users[] = {{"user", "a"}, {"user", "b"}};
    assert_int_equal(tf_model_chat_format(m, two_users, 2, &out, eb, sizeof eb), TF_ERR_INVALID_ARG);
    assert_non_null(strstr(eb, "message 1 has role user"));
    const tf_chat_message ends_assistant[] = {{"user", "a"}, {"assistant", "b"}};
    assert_int_equal(tf_model_chat_format(m, ends_assistant, 2, &out, eb, sizeof eb), TF_ERR_INVALID_ARG);
    assert_non_null(strstr(eb, "the last message has role assistant"));
    const tf_chat_message late_system[] = {{"user", "a"}, {"system", "b"}, {"user", "c"}};
    assert_int_equal(tf_model_chat_format(m, late_system, 3, &out, eb, sizeof eb), TF_ERR_INVALID_ARG);
    assert_non_null(strstr(eb, "only the first message may be one"));
    const tf_chat_message tool[] = {{"tool", "a"}};
    assert_int_equal(tf_model_chat_format(m, tool, 1, &out, eb, sizeof eb), TF_ERR_INVALID_ARG);
    assert_non_null(strstr(eb, "role 'tool'"));
    assert_null(out);
    tf_model_close(m);
}

/* The families recognised from templates other than those rendered above:
 * a deepseek-coder template whose default system prompt differs (it is
 * taken from the template), one without a default, the markers of deepseek
 * and deepseek3 alone, and DeepSeek-R1's template refused. */
static void test_recognition(void **state) {
    (void)state;
    TU_REQUIRE_SHARED(vocab, "vocab/ggml-vocab-gpt-2.gguf");
    char vpath[1024];
    snprintf(vpath, sizeof vpath, "%s", vocab);
    const tf_chat_message hi[] = {{"user", "hi"}};
    static const struct {
        const char *tmpl, *expected;
    } cases[] = {
        {"{{bos_token}}{%- if not ns.found -%}\n{{- \"Be \\\"brief\\\".\\n\" -}}\n{%- endif %}"
         "{{'### Instruction:\\n' + m + '\\n'}}{{'### Response:'}}",
         "Be \"brief\".\n### Instruction:\nhi\n### Response:\n"},
        {"{% for m in messages %}{{'### Instruction:\\n' + m['content'] + '\\n'}}{% endfor %}{{'### Response:'}}",
         "### Instruction:\nhi\n### Response:\n"},
        /* an expression, not one literal: no default is guessed */
        {"{%- if not ns.found -%}{{'A' + x}}{%- endif %}### Instruction:### Response:",
         "### Instruction:\nhi\n### Response:\n"},
        {"{{ bos_token }}{% for m in messages %}{{ 'User: ' + m['content'] + '\\n\\n' }}{% endfor %}{{ 'Assistant:' }}",
         "User: hi\n\nAssistant:"},
        {"{{'<｜User｜>' + m['content']}}{{'<｜Assistant｜>'}}", "<｜User｜>hi<｜Assistant｜>"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tf_model *m = vocab_with_template(vpath, cases[i].tmpl);
        char *out = NULL, eb[512];
        if (tf_model_chat_format(m, hi, 1, &out, eb, sizeof eb) != TF_OK) fail_msg("case %zu: %s", i, eb);
        if (strcmp(out, cases[i].expected) != 0) fail_msg("case %zu: got\n[%s]\nexpected\n[%s]", i, out, cases[i].expected);
        free(out);
        tf_model_close(m);
    }
    /* DeepSeek-R1's template opens <think> and cuts earlier reasoning: refused by name, not guessed */
    tf_model *m = vocab_with_template(vpath, "{{'<｜User｜>' + content}}{% if '</think>' in content %}{% endif %}"
                                             "{{'<｜Assistant｜><think>\\n'}}");
    char *out = NULL, eb[512];
    assert_int_equal(tf_model_chat_format(m, hi, 1, &out, eb, sizeof eb), TF_ERR_UNSUPPORTED);
    assert_null(out);
    assert_non_null(strstr(eb, "DeepSeek-R1"));
    assert_int_equal(tf_model_chat_format_as(m, "deepseek3", hi, 1, &out, eb, sizeof eb), TF_OK);
    assert_string_equal(out, "<｜User｜>hi<｜Assistant｜>");
    free(out);
    tf_model_close(m);
}

/* The markers between turns are the vocabulary's control tokens: each
 * conversation of a family, tokenized as the server does (add_special,
 * parse_special) with a vocabulary of that family, starts with the one BOS
 * the tokenizer adds, has one end-of-turn token per assistant turn, and
 * (llama2) a BOS before each later user turn. */
static void test_turn_markers_tokenize(void **state) {
    (void)state;
    static const struct {
        const char *vocab, *family, *end_of_turn;
        bool bos_per_turn;
    } rows[] = {
        {"vocab/ggml-vocab-llama-spm.gguf", "llama2", "</s>", true},
        {"vocab/ggml-vocab-llama-spm.gguf", "mistral", "</s>", false},
        {"vocab/ggml-vocab-deepseek-llm.gguf", "deepseek", "<｜end▁of▁sentence｜>", false},
        {"vocab/ggml-vocab-deepseek-coder.gguf", "deepseek-coder", "<|EOT|>", false},
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        TU_REQUIRE_SHARED(vocab, rows[r].vocab);
        char vpath[1024];
        snprintf(vpath, sizeof vpath, "%s", vocab);
        size_t n_checked = 0;
        for (size_t i = 0; i < sizeof k_multi / sizeof k_multi[0]; i++) {
            const chat_multi_case *c = &k_multi[i];
            if (strcmp(c->name, rows[r].family) != 0) continue;
            tf_model *m = vocab_with_template(vpath, c->tmpl);
            int32_t eot[4], toks[1024];
            size_t n_eot = 0, nt = 0;
            assert_int_equal(tf_model_tokenize(m, rows[r].end_of_turn, strlen(rows[r].end_of_turn), false, true, eot,
                                               4, &n_eot),
                             TF_OK);
            assert_int_equal(n_eot, 1);
            char *out = NULL, eb[512];
            if (tf_model_chat_format(m, c->msgs, c->n, &out, eb, sizeof eb) != TF_OK) fail_msg("%s: %s", c->name, eb);
            assert_int_equal(tf_model_tokenize(m, out, strlen(out), true, true, toks, 1024, &nt), TF_OK);
            const int32_t bos = tf_model_bos(m);
            size_t n_asst = 0, n_bos = 0, n_end = 0;
            for (size_t k = 0; k < c->n; k++) n_asst += strcmp(c->msgs[k].role, "assistant") == 0;
            for (size_t k = 0; k < nt; k++) n_bos += toks[k] == bos, n_end += toks[k] == eot[0];
            assert_true(bos >= 0 && nt > 0 && toks[0] == bos);
            if (n_end != n_asst || n_bos != 1 + (rows[r].bos_per_turn ? n_asst : 0))
                fail_msg("%s in %s: %zu BOS and %zu %s for %zu assistant turns", c->name, rows[r].vocab, n_bos, n_end,
                         rows[r].end_of_turn, n_asst);
            free(out);
            tf_model_close(m);
            n_checked++;
        }
        assert_true(n_checked >= 2);
    }
}

static void test_refusals(void **state) {
    (void)state;
    TU_REQUIRE_SHARED(vocab, "vocab/ggml-vocab-gpt-2.gguf");
    char vpath[1024];
    snprintf(vpath, sizeof vpath, "%s", vocab);
    char *out = (char *)1, eb[512];
    /* no template */
    tf_model *m = vocab_with_template(vpath, NULL);
    assert_int_equal(tf_model_chat_prompt(m, NULL, "hi", &out, eb, sizeof eb), TF_ERR_UNSUPPORTED);
    assert_null(out);
    assert_non_null(strstr(eb, "tokenizer.chat_template is absent"));
    tf_model_close(m);
    /* a template of no known family is refused with the list of families */
    m = vocab_with_template(vpath, "{% for m in messages %}### {{ m['role'] }}: {{ m['content'] }}\n{% endfor %}");
    assert_int_equal(tf_model_chat_prompt(m, NULL, "hi", &out, eb, sizeof eb), TF_ERR_UNSUPPORTED);
    assert_non_null(strstr(eb, "not of a known family"));
    assert_non_null(strstr(eb, "chatml"));
    tf_model_close(m);
    /* mistral's template has no system role */
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        if (strcmp(k_cases[i].name, "mistral") != 0) continue;
        m = vocab_with_template(vpath, k_cases[i].tmpl);
        assert_int_equal(tf_model_chat_prompt(m, "be brief", "hi", &out, eb, sizeof eb), TF_ERR_UNSUPPORTED);
        assert_non_null(strstr(eb, "no system role"));
        tf_model_close(m);
        break;
    }
    /* NULL user message */
    m = vocab_with_template(vpath, k_cases[0].tmpl);
    assert_int_equal(tf_model_chat_prompt(m, NULL, NULL, &out, eb, sizeof eb), TF_ERR_INVALID_ARG);
    tf_model_close(m);
}

/* The registry-fetched SmolLM2 file: its own template gives the chatml text
 * with the model's default system message, which tokenizes with the
 * <|im_start|> / <|im_end|> special tokens. */
static void test_smollm2_file(void **state) {
    (void)state;
    TU_REQUIRE_MODEL(path, TU_SMOLLM2);
    tf_model_params mp = tf_model_default_params();
    mp.vocab_only = true;
    tf_model *m;
    char eb[512];
    if (tf_model_load_file(&m, path, &mp, eb, sizeof eb) != TF_OK) fail_msg("%s", eb);
    char *out;
    assert_int_equal(tf_model_chat_prompt(m, NULL, "What is the capital of France?", &out, eb, sizeof eb), TF_OK);
    const chat_case *c = &k_cases[0];
    assert_string_equal(c->name, "chatml-smollm2");
    assert_null(c->system);
    assert_string_equal(out, c->expected);
    int32_t toks[256];
    size_t n = 0;
    assert_int_equal(tf_model_tokenize(m, out, strlen(out), false, true, toks, 256, &n), TF_OK);
    char piece[64];
    int32_t np = tf_model_token_to_piece(m, toks[0], true, piece, sizeof piece);
    assert_true(np == 12 && memcmp(piece, "<|im_start|>", 12) == 0);
    free(out);
    tf_model_close(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_families_match_jinja),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_multi_turn_match_jinja),
        cmocka_unit_test(test_turn_markers_tokenize),
        cmocka_unit_test(test_recognition),
        cmocka_unit_test(test_smollm2_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
