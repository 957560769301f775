/*
 * test_hf_tokenizer.c — Hugging Face tokenizer.json loading
 * (tf_hf_tokenizer_to_gguf): the shared GGUF vocabularies written out as
 * tokenizer.json (tests/common/hf_tokjson.c) and read back must tokenize and
 * detokenize exactly like the original on the llama.cpp vectors and on
 * slices of the shared texts; then the family recognition and the errors,
 * on tiny tokenizers built inline (no ../shared needed).
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/mem.h"
#include "format/gguf.h"
#include "format/gguf_write.h"
#include "hf_tokjson.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/tokenizer.h"

/* ------------------------------------------------------------------------ */
/* helpers                                                                   */

/* A tokenizer and the GGUF (and its bytes, for an in-memory one) behind it. */
typedef struct loaded {
    tf_gguf g;
    uint8_t *buf;
    tf_tokenizer *tok;
} loaded;

static void unload(loaded *l) {
    tf_tokenizer_free(l->tok);
    tf_gguf_close(&l->g);
    free(l->buf);
    memset(l, 0, sizeof *l);
}

static void load_file(loaded *l, const char *path) {
    tf_err err = {0};
    memset(l, 0, sizeof *l);
    assert_int_equal(tf_gguf_open(&l->g, path, &err), TF_OK);
    assert_int_equal(tf_tokenizer_from_gguf(&l->tok, &l->g, &err), TF_OK);
}

/* The whole path: JSON -> writer -> GGUF bytes -> parse -> tokenizer. On
 * failure returns the status (err filled, nothing loaded, and the writer
 * checked to hold no tokenizer key). */
static tf_status convert(loaded *l, const char *json, const char *cfg, int64_t n_vocab_model, tf_err *err) {
    memset(l, 0, sizeof *l);
    tf_err_clear(err);
    tf_gguf_writer *w = tf_gguf_writer_new();
    assert_non_null(w);
    tf_status st = tf_hf_tokenizer_to_gguf_mem(w, json, strlen(json), "tokenizer.json", cfg, cfg ? strlen(cfg) : 0,
                                               "tokenizer_config.json", n_vocab_model, err);
    if (st != TF_OK) {
        assert_int_equal(err->status, st);
        assert_int_equal(tf_gguf_writer_n_kv(w), 0);
        tf_gguf_writer_free(w);
        return st;
    }
    size_t size = 0;
    assert_int_equal(tf_gguf_writer_write_mem(w, &l->buf, &size, err), TF_OK);
    tf_gguf_writer_free(w);
    assert_int_equal(tf_gguf_parse(&l->g, "hf", l->buf, size, err), TF_OK);
    st = tf_tokenizer_from_gguf(&l->tok, &l->g, err);
    if (st != TF_OK) print_error("tokenizer from converted GGUF: %s\n", err->msg);
    assert_int_equal(st, TF_OK);
    return TF_OK;
}

static void convert_ok(loaded *l, const char *json, const char *cfg) {
    tf_err err = {0};
    tf_status st = convert(l, json, cfg, 0, &err);
    if (st != TF_OK) print_error("convert: %s\n", err.msg);
    assert_int_equal(st, TF_OK);
}

static size_t tokenize_all(const tf_tokenizer *tok, const char *s, size_t n, bool add_special, bool parse_special,
                           int32_t **out) {
    tf_err err = {0};
    size_t need = 0, got = 0;
    tf_status st = tf_tokenize(tok, s, n, add_special, parse_special, NULL, 0, &need, &err);
    assert_true(st == TF_OK || st == TF_ERR_RANGE);
    *out = malloc((need ? need : 1) * sizeof **out);
    assert_non_null(*out);
    assert_int_equal(tf_tokenize(tok, s, n, add_special, parse_special, *out, need, &got, &err), TF_OK);
    assert_int_equal(got, need);
    return got;
}

static size_t detokenize_all(const tf_tokenizer *tok, const int32_t *ids, size_t n, bool render_special, char **out) {
    tf_err err = {0};
    size_t need = 0, got = 0;
    tf_status st = tf_detokenize(tok, ids, n, render_special, NULL, 0, &need, &err);
    assert_true(st == TF_OK || st == TF_ERR_RANGE);
    *out = malloc(need + 1);
    assert_non_null(*out);
    assert_int_equal(tf_detokenize(tok, ids, n, render_special, *out, need, &got, &err), TF_OK);
    (*out)[got] = '\0';
    return got;
}

/* Same ids from both tokenizers (flags: add_special, parse_special; all four
 * combinations, or none and both when !all_flags), the same text back from
 * both, and the text itself for a plain tokenization. */
static bool same_tokenization(const tf_tokenizer *a, const tf_tokenizer *b, const char *s, size_t n, bool all_flags) {
    bool ok = true;
    for (int flags = 0; flags < 4; flags += all_flags ? 1 : 3) {
        int32_t *ia, *ib;
        size_t na = tokenize_all(a, s, n, flags & 1, flags & 2, &ia), nb = tokenize_all(b, s, n, flags & 1, flags & 2, &ib);
        if (na != nb || memcmp(ia, ib, na * sizeof *ia) != 0) {
            size_t k = 0;
            while (k < na && k < nb && ia[k] == ib[k]) k++;
            print_error("flags %d: %zu vs %zu ids, first difference at %zu (%d vs %d) in '%.*s'\n", flags, na, nb, k,
                        k < na ? ia[k] : -1, k < nb ? ib[k] : -1, (int)(n < 80 ? n : 80), s);
            ok = false;
        }
        for (int rs = 0; rs < 2 && ok; rs++) {
            char *ta, *tb;
            size_t la = detokenize_all(a, ia, na, rs, &ta), lb = detokenize_all(b, ia, na, rs, &tb);
            if (la != lb || memcmp(ta, tb, la) != 0) {
                print_error("detokenize (render_special %d) differs for '%.*s'\n", rs, (int)(n < 80 ? n : 80), s);
                ok = false;
            }
            if (flags == 0 && rs == 0 && (la != n || memcmp(ta, s, n) != 0)) {
                print_error("round trip failed for '%.*s'\n", (int)(n < 80 ? n : 80), s);
                ok = false;
            }
            free(ta);
            free(tb);
        }
        free(ia);
        free(ib);
    }
    return ok;
}

static const char *const k_texts[] = {
    "text/war_and_peace.txt", "text/anna_karenina.txt",       "text/ulysses.txt",        "text/moby-dick.txt",
    "text/crime_and_punishment.txt", "text/pride_and_prejudice.txt", "text/kjv_bible_pg10.txt",
};

/* Compare orig and conv on every vector case of vocab rel (and the .out
 * ids) and on 20 KB slices of the shared texts. Returns the cases run. */
static int compare_on_data(const tf_tokenizer *orig, const tf_tokenizer *conv, const char *rel) {
    char inp_rel[256], out_rel[256];
    snprintf(inp_rel, sizeof inp_rel, "%s.inp", rel);
    snprintf(out_rel, sizeof out_rel, "%s.out", rel);
    char *inp, *outs;
    size_t inp_len, out_len;
    tf_err err = {0};
    const char *p = tu_shared_path(inp_rel);
    assert_non_null(p);
    assert_int_equal(tf_read_file(p, &inp, &inp_len, &err), TF_OK);
    p = tu_shared_path(out_rel);
    assert_non_null(p);
    assert_int_equal(tf_read_file(p, &outs, &out_len, &err), TF_OK);

    static const char sep[] = "\n__ggml_vocab_test__\n";
    int n_case = 0, n_bad = 0;
    char *text = inp, *line = outs;
    for (char *end; (end = strstr(text, sep)) != NULL; text = end + sizeof sep - 1, n_case++) {
        size_t tlen = (size_t)(end - text);
        char *eol = strchr(line, '\n');
        assert_non_null(eol);
        *eol = '\0';
        int32_t expect[1024], *ids;
        size_t n_expect = 0;
        for (char *q = line, *next;; q = next) {
            long v = strtol(q, &next, 10);
            if (next == q) break;
            assert_true(n_expect < 1024);
            expect[n_expect++] = (int32_t)v;
        }
        line = eol + 1;
        bool ok = same_tokenization(orig, conv, text, tlen, true);
        size_t n = tokenize_all(conv, text, tlen, false, false, &ids);
        if (n != n_expect || memcmp(ids, expect, n * sizeof *ids) != 0) {
            print_error("case %d: the converted tokenizer does not give the .out ids\n", n_case);
            ok = false;
        }
        free(ids);
        n_bad += !ok;
    }
    int n_slice = 0;
    for (size_t t = 0; t < sizeof k_texts / sizeof k_texts[0]; t++) {
        if (!(p = tu_shared_path(k_texts[t]))) continue;
        char *s;
        size_t len;
        assert_int_equal(tf_read_file(p, &s, &len, &err), TF_OK);
        for (int part = 0; part < 2; part++) { /* the start and the middle */
            size_t off = len / 2 * (size_t)part, n = len - off < 20000 ? len - off : 20000;
            if (!same_tokenization(orig, conv, s + off, n, false)) {
                print_error("%s at %zu differs\n", k_texts[t], off);
                n_bad++;
            }
            n_slice++;
        }
        free(s);
    }
    print_message("%s: %d vector cases, %d text slices of 20 KB, %d mismatches\n", rel, n_case, n_slice, n_bad);
    assert_int_equal(n_bad, 0);
    free(inp);
    free(outs);
    return n_case;
}

/* Generate tokenizer.json from vocab rel with opts, load it back and compare
 * with the original everywhere; also checks the metadata that must carry
 * over (size, kind, token types, specials and flags). */
static void roundtrip_vocab(const char *rel, const tu_hf_opts *opts) {
    loaded orig, conv;
    load_file(&orig, tu_shared_path(rel));
    char *json, *cfg;
    assert_true(tu_hf_tokjson_from_gguf(&orig.g, opts, &json, &cfg));
    convert_ok(&conv, json, cfg);
    const tf_tokenizer *a = orig.tok;
    tf_tokenizer *b = (tf_tokenizer *)conv.tok;
    /* A Metaspace pre-tokenizer puts the "▁" where HF tokenizers does (test_hf_vectors checks that against
     * tokenizers itself), which is not where llama.cpp puts it for the GGUF: the vocabulary, merges and flags
     * are compared here under the GGUF's rule */
    const tf_space_prefix rule = opts->spm_style == TU_HF_SPM_METASPACE       ? TF_SPACE_PREFIX_FIRST
                                 : opts->spm_style == TU_HF_SPM_METASPACE_OLD ? TF_SPACE_PREFIX_ALWAYS
                                                                              : TF_SPACE_PREFIX_FRAGMENT;
    assert_int_equal(b->space_prefix, tf_tokenizer_kind(b) == TF_TOK_SPM ? rule : TF_SPACE_PREFIX_FRAGMENT);
    b->space_prefix = a->space_prefix;
    assert_int_equal(tf_tokenizer_kind(a), tf_tokenizer_kind(b));
    assert_int_equal(tf_tokenizer_n_vocab(a), tf_tokenizer_n_vocab(b));
    assert_int_equal(tf_tokenizer_bos(a), tf_tokenizer_bos(b));
    assert_int_equal(tf_tokenizer_eos(a), tf_tokenizer_eos(b));
    assert_int_equal(tf_tokenizer_add_bos(a), tf_tokenizer_add_bos(b));
    assert_int_equal(tf_tokenizer_add_eos(a), tf_tokenizer_add_eos(b));
    assert_int_equal(a->unk, b->unk);
    assert_int_equal(a->n_merges, b->n_merges);
    assert_int_equal(a->add_space_prefix, b->add_space_prefix);
    assert_string_equal(a->pre_name, b->pre_name);
    for (int32_t i = 0; i < a->n_vocab; i++) {
        assert_string_equal(tf_token_text(a, i), tf_token_text(b, i));
        assert_int_equal(a->types[i], b->types[i]);
    }
    print_message("%s -> tokenizer.json (%zu KB) -> %s\n", rel, strlen(json) / 1024, tf_tokenizer_describe(b));
    compare_on_data(a, b, rel);
    /* runs of spaces: in Llama's vocabulary "▁▁", "▁▁▁", ... share one score, so only the rank order tells them apart */
    for (int n = 1; n <= 40; n++)
        for (int k = 0; k < 4; k++) {
            static const char *const k_around[][2] = {{"", ""}, {"x", "yo"}, {"a\n", "\tb"}, {"(", " )"}};
            char s[128];
            int len = snprintf(s, sizeof s, "%s%*s%s", k_around[k][0], n, "", k_around[k][1]);
            assert_true(same_tokenization(a, b, s, (size_t)len, false));
        }

    /* the file-path entry point gives the same keys */
    const char *jp = tu_tmp_path(".json");
    char jpath[1024], cpath[1024];
    snprintf(jpath, sizeof jpath, "%s", jp);
    snprintf(cpath, sizeof cpath, "%s", tu_tmp_path(".json"));
    FILE *f = fopen(jpath, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(json, 1, strlen(json), f), strlen(json));
    fclose(f);
    assert_non_null(f = fopen(cpath, "wb"));
    assert_int_equal(fwrite(cfg, 1, strlen(cfg), f), strlen(cfg));
    fclose(f);
    tf_gguf_writer *w = tf_gguf_writer_new();
    tf_err err = {0};
    assert_int_equal(tf_hf_tokenizer_to_gguf(w, jpath, cpath, 0, &err), TF_OK);
    uint8_t *buf;
    size_t size;
    assert_int_equal(tf_gguf_writer_write_mem(w, &buf, &size, &err), TF_OK);
    assert_int_equal(size, conv.g.size);
    assert_memory_equal(buf, conv.buf, size);
    free(buf);
    tf_gguf_writer_free(w);
    remove(jpath);
    remove(cpath);
    free(json);
    free(cfg);
    unload(&conv);
    unload(&orig);
}

/* ------------------------------------------------------------------------ */
/* the shared vocabularies                                                   */

static void test_spm_normalizer(void **state) {
    (void)state;
    TU_REQUIRE_SHARED(p, "vocab/ggml-vocab-llama-spm.gguf");
    (void)p;
    roundtrip_vocab("vocab/ggml-vocab-llama-spm.gguf", &(tu_hf_opts){.spm_style = TU_HF_SPM_NORMALIZER});
}

static void test_spm_metaspace(void **state) {
    (void)state;
    TU_REQUIRE_SHARED(p, "vocab/ggml-vocab-llama-spm.gguf");
    (void)p;
    roundtrip_vocab("vocab/ggml-vocab-llama-spm.gguf",
                    &(tu_hf_opts){.spm_style = TU_HF_SPM_METASPACE, .merge_pairs = true});
    roundtrip_vocab("vocab/ggml-vocab-llama-spm.gguf", &(tu_hf_opts){.spm_style = TU_HF_SPM_METASPACE_OLD});
}

static void test_gpt2_bytelevel(void **state) {
    (void)state;
    TU_REQUIRE_SHARED(p, "vocab/ggml-vocab-gpt-2.gguf");
    (void)p;
    roundtrip_vocab("vocab/ggml-vocab-gpt-2.gguf", &(tu_hf_opts){0});
}

static void test_gpt2_pairs_split(void **state) {
    (void)state;
    TU_REQUIRE_SHARED(p, "vocab/ggml-vocab-gpt-2.gguf");
    (void)p;
    roundtrip_vocab("vocab/ggml-vocab-gpt-2.gguf", &(tu_hf_opts){.merge_pairs = true, .split_regex = true});
}

/* ------------------------------------------------------------------------ */
/* tiny tokenizers built inline                                              */

static const char k_tiny_bpe[] =
    "{\"added_tokens\": [{\"id\": 5, \"content\": \"<|end|>\", \"special\": true}],"
    " \"normalizer\": null,"
    " \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": true},"
    " \"post_processor\": {\"type\": \"ByteLevel\"},"
    " \"decoder\": {\"type\": \"ByteLevel\"},"
    " \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, \"ignore_merges\": false,"
    "  \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2, \"\xc4\xa0\": 3, \"\xc4\xa0" "ab\": 4},"
    "  \"merges\": [\"a b\", [\"\xc4\xa0\", \"ab\"]]}}";

static const char k_tiny_spm[] =
    "{\"added_tokens\": [{\"id\": 0, \"content\": \"<unk>\", \"special\": true},"
    "                    {\"id\": 1, \"content\": \"<s>\", \"special\": true}],"
    " \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", \"prepend\": \"\xe2\x96\x81\"},"
    "   {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"\xe2\x96\x81\"}]},"
    " \"pre_tokenizer\": null,"
    " \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\"}},"
    "   {\"Sequence\": {\"id\": \"A\"}}], \"special_tokens\": {\"<s>\": {\"id\": \"<s>\", \"ids\": [1]}}},"
    " \"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": {\"String\": "
    "   \"\xe2\x96\x81\"}, \"content\": \" \"}, {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"},"
    "   {\"type\": \"Strip\", \"content\": \" \", \"start\": 1, \"stop\": 0}]},"
    " \"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"byte_fallback\": true,"
    "  \"vocab\": {\"<unk>\": 0, \"<s>\": 1, \"<0x41>\": 2, \"\xe2\x96\x81\": 3, \"a\": 4, \"b\": 5,"
    "   \"\xe2\x96\x81" "a\": 6, \"ab\": 7, \"\xe2\x96\x81" "ab\": 8},"
    "  \"merges\": [\"a b\", \"\xe2\x96\x81 a\", \"\xe2\x96\x81 ab\", \"\xe2\x96\x81" "a b\"]}}";

/* base with the member at dotted path (e.g. "model.vocab") set to the JSON
 * value (NULL: removed). Returns malloc'd text. */
static char *with(const char *base, const char *path, const char *value) {
    cJSON *root = cJSON_Parse(base), *obj = root;
    assert_non_null(root);
    char key[128];
    const char *dot;
    while ((dot = strchr(path, '.')) != NULL) {
        snprintf(key, sizeof key, "%.*s", (int)(dot - path), path);
        assert_non_null(obj = cJSON_GetObjectItemCaseSensitive(obj, key));
        path = dot + 1;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(obj, path);
    if (value) {
        cJSON *v = cJSON_Parse(value);
        assert_non_null(v);
        cJSON_AddItemToObject(obj, path, v);
    }
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

/* Convert json (+cfg), expect status st and msg in the message. */
static void expect_error(const char *json, const char *cfg, int64_t n_vocab_model, tf_status st, const char *msg) {
    loaded l;
    tf_err err = {0};
    tf_status got = convert(&l, json, cfg, n_vocab_model, &err);
    if (got != st || !strstr(err.msg, msg))
        print_error("expected status %d with '%s', got %d: %s\n", st, msg, got, err.msg);
    assert_int_equal(got, st);
    assert_non_null(strstr(err.msg, msg));
    assert_non_null(strstr(err.msg, "tokenizer")); /* the file is named */
}

static void expect_error_with(const char *base, const char *path, const char *value, tf_status st, const char *msg) {
    char *json = with(base, path, value);
    expect_error(json, NULL, 0, st, msg);
    free(json);
}

static const char *pre_of(const loaded *l) {
    static char buf[64];
    tf_gguf_str s = {0};
    tf_err err = {0};
    assert_int_equal(tf_gguf_get_str(&l->g, "tokenizer.ggml.pre", &s, NULL, &err), TF_OK);
    snprintf(buf, sizeof buf, "%.*s", (int)s.len, s.data);
    return buf;
}

static void test_tiny_families(void **state) {
    (void)state;
    loaded l;
    int32_t *ids;
    convert_ok(&l, k_tiny_bpe, NULL);
    assert_int_equal(tf_tokenizer_kind(l.tok), TF_TOK_BPE);
    assert_string_equal(pre_of(&l), "gpt-2");
    assert_int_equal(l.tok->n_merges, 2);
    assert_int_equal(l.tok->types[5], TF_TOKTYPE_CONTROL);
    assert_false(tf_tokenizer_add_bos(l.tok));
    size_t n = tokenize_all(l.tok, "ab ab", 5, false, false, &ids);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[1], 4);
    free(ids);
    unload(&l);

    /* regex recognition; ignore_merges picks the Llama 3 name */
    static const struct {
        const char *regex;
        bool ignore_merges;
        const char *pre;
    } k_rx[] = {
        {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+"
         "[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+", true, "llama-bpe"},
        {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+"
         "[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+", false, "smaug-bpe"},
        {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+"
         "[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+", false, "qwen2"},
    };
    for (size_t k = 0; k < sizeof k_rx / sizeof k_rx[0]; k++) {
        char pre[1024];
        snprintf(pre, sizeof pre, "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": "
                 "{\"Regex\": \"%s\"}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", "
                 "\"add_prefix_space\": false, \"use_regex\": false}]}", k_rx[k].regex);
        char *j1 = with(k_tiny_bpe, "pre_tokenizer", pre);
        char *j2 = with(j1, "model.ignore_merges", k_rx[k].ignore_merges ? "true" : "false");
        /* Llama 3 style: Sequence[ByteLevel, TemplateProcessing with BOS]; Qwen2: an NFC normalizer */
        char *j3 = with(j2, "post_processor", "{\"type\": \"Sequence\", \"processors\": [{\"type\": \"ByteLevel\"}, "
                        "{\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<|end|>\"}}, "
                        "{\"Sequence\": {\"id\": \"A\"}}], \"special_tokens\": {}}]}");
        char *j4 = with(j3, "normalizer", "{\"type\": \"NFC\"}");
        convert_ok(&l, j4, NULL);
        assert_string_equal(pre_of(&l), k_rx[k].pre);
        assert_int_equal(l.tok->ignore_merges, k_rx[k].ignore_merges);
        assert_true(tf_tokenizer_add_bos(l.tok));
        assert_int_equal(tf_tokenizer_bos(l.tok), 5); /* found by name: special_tokens has no ids */
        unload(&l);
        free(j1), free(j2), free(j3), free(j4);
    }

    /* SmolLM: Sequence[Digits(individual_digits), ByteLevel(use_regex)] is the set GGUF calls
     * "starcoder" (and "smollm"); the translation writes the first name */
    char *jd = with(k_tiny_bpe, "pre_tokenizer", "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": "
                    "\"Digits\", \"individual_digits\": true}, {\"type\": \"ByteLevel\", \"add_prefix_space\": "
                    "false, \"use_regex\": true}]}");
    convert_ok(&l, jd, NULL);
    assert_string_equal(pre_of(&l), "starcoder");
    unload(&l);
    free(jd);

    /* SPM: scores follow merge ranks; <0x41> is a byte token, <unk> unknown */
    convert_ok(&l, k_tiny_spm, NULL);
    assert_int_equal(tf_tokenizer_kind(l.tok), TF_TOK_SPM);
    assert_int_equal(l.tok->types[0], TF_TOKTYPE_UNKNOWN);
    assert_int_equal(l.tok->types[1], TF_TOKTYPE_CONTROL);
    assert_int_equal(l.tok->types[2], TF_TOKTYPE_BYTE);
    assert_true(l.tok->scores[7] == 0.0f && l.tok->scores[6] == -1.0f && l.tok->scores[8] == -2.0f);
    assert_true(l.tok->scores[4] == -4.0f); /* produced by no merge: below all of them */
    assert_true(tf_tokenizer_add_bos(l.tok));
    /* "ab" -> "▁ a b": rank 0 ("a b") first, then "▁ ab" */
    n = tokenize_all(l.tok, "ab", 2, true, false, &ids);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 8);
    free(ids);
    n = tokenize_all(l.tok, "A", 1, false, false, &ids); /* "▁" + byte fallback <0x41> */
    assert_int_equal(n, 2);
    assert_int_equal(ids[1], 2);
    free(ids);
    unload(&l);

    /* tokenizer_config.json decides add_bos/add_eos and the special tokens */
    const char *cfg = "{\"add_bos_token\": false, \"add_eos_token\": true, \"bos_token\": {\"content\": \"<s>\"},"
                      " \"eos_token\": \"<s>\", \"pad_token\": \"<unk>\"}";
    tf_err err = {0};
    assert_int_equal(convert(&l, k_tiny_spm, cfg, 12, &err), TF_OK);
    assert_false(tf_tokenizer_add_bos(l.tok));
    assert_true(tf_tokenizer_add_eos(l.tok));
    assert_int_equal(tf_tokenizer_eos(l.tok), 1);
    assert_int_equal(l.tok->pad, 0);
    /* padded to the model's 12 rows */
    assert_int_equal(tf_tokenizer_n_vocab(l.tok), 12);
    assert_string_equal(tf_token_text(l.tok, 9), "[PAD9]");
    assert_string_equal(tf_token_text(l.tok, 11), "[PAD11]");
    assert_int_equal(l.tok->types[11], TF_TOKTYPE_UNUSED);
    unload(&l);

    /* a pad_token the vocabulary lacks is ignored (models often add it later) */
    assert_int_equal(convert(&l, k_tiny_bpe, "{\"pad_token\": \"<pad>\", \"bos_token\": null}", 0, &err), TF_OK);
    assert_int_equal(l.tok->pad, -1);
    unload(&l);

    /* a merge listed twice keeps its last rank, as in HF */
    char *j = with(k_tiny_bpe, "model.merges", "[\"a b\", \"\xc4\xa0 ab\", \"a b\"]");
    convert_ok(&l, j, NULL);
    assert_int_equal(l.tok->n_merges, 2);
    int32_t out;
    assert_int_equal(tf_tok_merge_rank(l.tok, 0, 1, &out), 1);
    assert_int_equal(out, 2);
    unload(&l);
    free(j);
}

/* tokenizer_config.json's chat template is carried into the GGUF view
 * (tokenizer.chat_template), as a string or as the list entry named "default". */
static void test_chat_template(void **state) {
    (void)state;
    static const char *const cfgs[] = {
        "{\"chat_template\": \"{{ '<|im_start|>' }}\"}",
        "{\"chat_template\": [{\"name\": \"rag\", \"template\": \"no\"}, "
        "{\"name\": \"default\", \"template\": \"{{ '<|im_start|>' }}\"}]}",
    };
    for (int i = 0; i < 2; i++) {
        loaded l;
        convert_ok(&l, k_tiny_bpe, cfgs[i]);
        tf_gguf_str v = {0};
        bool found = false;
        tf_err err = {0};
        assert_int_equal(tf_gguf_get_str(&l.g, "tokenizer.chat_template", &v, &found, &err), TF_OK);
        assert_true(found);
        assert_int_equal(v.len, 20);
        assert_memory_equal(v.data, "{{ '<|im_start|>' }}", 20);
        unload(&l);
    }
    loaded l;
    convert_ok(&l, k_tiny_bpe, "{\"chat_template\": null}");
    assert_null(tf_gguf_find_kv(&l.g, "tokenizer.chat_template"));
    unload(&l);
}

static void test_errors(void **state) {
    (void)state;
    const tf_status F = TF_ERR_FORMAT, U = TF_ERR_UNSUPPORTED;
    const char *B = k_tiny_bpe, *S = k_tiny_spm;
    expect_error_with(B, "model.type", "\"Unigram\"", U, "model.type 'Unigram' is not supported");
    expect_error_with(B, "model.type", "\"WordPiece\"", U, "'WordPiece'");
    /* pre-tokenizer programs: Split, Digits, ByteLevel last */
    static const struct {
        const char *items, *msg;
        tf_status st;
    } k_pre[] = {
        {"{\"type\": \"Split\", \"pattern\": {\"Regex\": \"(a\"}, \"behavior\": \"Isolated\"}", "pre_tokenizer.pretokenizers[0]: "
         "pattern '(a' does not compile", F},
        {"{\"type\": \"Split\", \"pattern\": {\"Regex\": \"a*\"}, \"behavior\": \"Isolated\"}", "can match the empty string", U},
        {"{\"type\": \"Split\", \"pattern\": {\"Regex\": \"a\", \"String\": \"b\"}, \"behavior\": \"Isolated\"}",
         "pre_tokenizer.pretokenizers[0].pattern has both Regex and String (expected exactly one", F},
        {"{\"type\": \"Split\", \"pattern\": {}, \"behavior\": \"Isolated\"}", "has neither Regex nor String", F},
        {"{\"type\": \"Split\", \"pattern\": \"a\", \"behavior\": \"Isolated\"}", "pre_tokenizer.pretokenizers[0].pattern is a "
         "string (expected an object", F},
        {"{\"type\": \"Split\", \"pattern\": {\"String\": 7}, \"behavior\": \"Isolated\"}", "pretokenizers[0].String is a number "
         "(expected a string)", F},
        {"{\"type\": \"Split\", \"pattern\": {\"String\": \"\"}, \"behavior\": \"Isolated\"}", "pattern is empty", F},
        {"{\"type\": \"Split\", \"pattern\": {\"String\": \"a\"}}", "pretokenizers[0].behavior is missing (expected a string)",
         F},
        {"{\"type\": \"Split\", \"pattern\": {\"String\": \"a\"}, \"behavior\": \"Sideways\"}", "behavior 'Sideways' is not "
         "supported (expected Isolated, Removed, MergedWithPrevious, MergedWithNext or Contiguous)", U},
        {"{\"type\": \"Split\", \"pattern\": {\"String\": \"a\"}, \"behavior\": \"Removed\", \"invert\": \"no\"}",
         "pretokenizers[0].invert is a string (expected true or false)", F},
        {"{\"type\": \"Digits\", \"individual_digits\": 1}", "pretokenizers[0].individual_digits is a number (expected true "
         "or false)", F},
        {"{\"type\": \"Punctuation\"}", "pretokenizers[0].type 'Punctuation' is not supported (expected ByteLevel, Split, "
         "Digits, Metaspace or a Sequence of them)", U},
        {"{\"type\": \"Digits\"}, {\"type\": \"Digits\"}, {\"type\": \"Digits\"}, {\"type\": \"Digits\"}, {\"type\": \"Digits\"}, "
         "{\"type\": \"Digits\"}, {\"type\": \"Digits\"}, {\"type\": \"Digits\"}", "pretokenizers[8]: more than 8 "
         "pre-tokenizer steps", U},
    };
    for (size_t k = 0; k < sizeof k_pre / sizeof k_pre[0]; k++) {
        char pre[1024];
        snprintf(pre, sizeof pre, "{\"type\": \"Sequence\", \"pretokenizers\": [%s, {\"type\": \"ByteLevel\"}]}",
                 k_pre[k].items);
        expect_error_with(B, "pre_tokenizer", pre, k_pre[k].st, k_pre[k].msg);
    }
    expect_error_with(B, "pre_tokenizer", "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"ByteLevel\"}, "
                      "{\"type\": \"Digits\"}]}", U, "pre_tokenizer.pretokenizers[1] (type 'Digits') follows ByteLevel");
    expect_error_with(B, "pre_tokenizer", "{\"type\": \"ByteLevel\", \"use_regex\": false}", U,
                      "ByteLevel with use_regex false and no Split or Digits before it");
    expect_error_with(B, "pre_tokenizer", "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\"}, "
                      "{\"type\": \"Metaspace\", \"replacement\": \"\xe2\x96\x81\"}]}", U, "Split or Digits without ByteLevel");
    expect_error_with(B, "pre_tokenizer", "{\"type\": \"Sequence\", \"pretokenizers\": 3}", F,
                      "pre_tokenizer.pretokenizers is a number (expected an array)");
    char *gap = with(B, "model.vocab", "{\"a\": 0, \"b\": 1, \"ab\": 3, \"\xc4\xa0\": 4, \"\xc4\xa0" "ab\": 5}");
    expect_error_with(gap, "added_tokens", "[{\"id\": 3, \"content\": \"ab\"}]", F, "no token has id 2 (ids must run 0..5");
    free(gap);
    expect_error_with(B, "model.vocab", "{\"a\": 0, \"b\": 1, \"ab\": 1, \"\xc4\xa0\": 3, \"\xc4\xa0" "ab\": 4}", F,
                      "id 1 is given to both 'b' and 'ab'");
    expect_error_with(B, "added_tokens", "[{\"id\": 2, \"content\": \"<|end|>\", \"special\": true}]", F,
                      "contradicts model.vocab, where id 2 is 'ab'");
    expect_error_with(B, "added_tokens", "[{\"id\": 5, \"content\": \"ab\"}]", F, "'ab' has id 5 but already has id 2");
    expect_error_with(B, "model.merges", "[\"a b\", \"a x\"]", F, "model.merges[1] = 'a' + 'x': 'x' is not in model.vocab");
    expect_error_with(B, "model.merges", "[\"b a\"]", F, "'ba' is not in model.vocab");
    expect_error_with(B, "model.merges", "[\"ab\"]", F, "model.merges[0] is a string 'ab' (expected");
    expect_error_with(B, "model.merges", "[[\"a\", 7]]", F, "model.merges[0] is an array");
    expect_error_with(B, "model.merges", "{}", F, "model.merges is an object (expected an array)");
    expect_error_with(B, "model.vocab", "[\"a\", \"b\"]", F, "model.vocab is an array (expected an object");
    expect_error_with(B, "model.vocab", "{\"a\": -1}", F, "model.vocab['a'] is a number out of range");
    expect_error_with(B, "model.vocab", "{\"a\": 1e300}", F, "model.vocab['a'] is a number out of range");
    expect_error_with(B, "model.vocab", "{\"a\": 0.5}", F, "or fractional");
    expect_error_with(B, "model.vocab", "{\"a\": \"0\"}", F, "model.vocab['a'] is a string");
    expect_error_with(B, "model.vocab", "{\"a\": 0, \"b\": 2147483647}", F, "has id 2147483647, but there are only");
    expect_error_with(B, "model.vocab", "{}", F, "'<|end|>' has id 5, but there are only 1 entries");
    expect_error_with(B, "model", NULL, F, "model is missing (expected an object)");
    expect_error_with(B, "added_tokens", "[{\"id\": \"5\", \"content\": \"x\"}]", F, "added_tokens[0] is an object with "
                      "id a string");
    expect_error_with(B, "added_tokens", "[{\"id\": 5, \"content\": \"x\", \"special\": 1}]", F,
                      "added_tokens[0].special is a number (expected true or false)");
    expect_error_with(B, "added_tokens", "7", F, "added_tokens is a number (expected an array)");
    expect_error_with(B, "decoder", "{\"type\": \"Metaspace\", \"replacement\": \"\xe2\x96\x81\"}", U,
                      "decoder (type 'Metaspace') does not fit a byte-level tokenizer");
    expect_error_with(B, "decoder", NULL, U, "decoder is missing (expected ByteLevel)");
    expect_error_with(B, "pre_tokenizer", "{\"type\": \"ByteLevel\", \"add_prefix_space\": 1}", F,
                      "pre_tokenizer.add_prefix_space is a number (expected true or false)");
    expect_error_with(B, "pre_tokenizer", "{\"type\": \"Whitespace\"}", U, "pre_tokenizer.type 'Whitespace'");
    expect_error_with(B, "pre_tokenizer", NULL, U, "neither a ByteLevel nor a Metaspace");
    expect_error_with(B, "model.ignore_merges", "true", U, "ignore_merges is true with the GPT-2 regex");
    expect_error_with(B, "model.dropout", "0.1", U, "model.dropout is a number");
    expect_error_with(B, "post_processor", "{\"type\": \"RobertaProcessing\"}", U, "'RobertaProcessing'");
    expect_error_with(S, "decoder.decoders", "[{\"type\": \"ByteLevel\"}]", U,
                      "decoder.decoders[0] (type 'ByteLevel') does not fit a SentencePiece-style tokenizer");
    expect_error_with(S, "decoder.decoders", "[{\"type\": \"Replace\", \"pattern\": {\"String\": \"\xe2\x96\x81\"},"
                      " \"content\": \" \"}]", U, "decoder lacks ByteFallback");
    expect_error_with(S, "model.unk_token", "\"<oops>\"", F, "model.unk_token '<oops>' is not in model.vocab");
    expect_error_with(S, "normalizer", "{\"type\": \"Lowercase\"}", U, "normalizer.type 'Lowercase'");
    expect_error_with(S, "post_processor.single", "[]", F, "post_processor.single is an array (expected a non-empty");
    /* Metaspace that splits words, with a token spanning two: not the SPM result */
    char *j = with(S, "normalizer", NULL);
    char *j2 = with(j, "pre_tokenizer", "{\"type\": \"Metaspace\", \"replacement\": \"\xe2\x96\x81\", "
                    "\"add_prefix_space\": true}");
    char *j3 = with(j2, "model.vocab", "{\"<unk>\": 0, \"<s>\": 1, \"<0x41>\": 2, \"\xe2\x96\x81\": 3, \"a\": 4, "
                    "\"b\": 5, \"\xe2\x96\x81" "a\": 6, \"ab\": 7, \"\xe2\x96\x81" "ab\": 8, \"a\xe2\x96\x81\": 9}");
    expect_error(j3, NULL, 0, U, "token 9 'a\xe2\x96\x81' spans a word boundary");
    free(j), free(j2), free(j3);

    /* not JSON, trailing data, not an object */
    expect_error("{\"model\": ", NULL, 0, F, "not valid JSON");
    expect_error("[1, 2]", NULL, 0, F, "the JSON value is an array (expected an object)");
    char *t = malloc(strlen(B) + 3);
    sprintf(t, "%s x", B);
    expect_error(t, NULL, 0, F, "more data after the top-level value");
    sprintf(t, "%s\x01", B);
    expect_error(t, NULL, 0, F, "byte 0x01 between values");
    free(t);
    /* a key given twice: Python keeps the last value and cJSON the first, so neither is used */
    char *dup = with(B, "model.vocab", "{\"a\": 0, \"b\": 1, \"a\": 2}");
    expect_error(dup, NULL, 0, F, "key 'a' appears more than once in the object at model.vocab");
    free(dup);
    expect_error(B, "{\"bos_token\": \"<s>\", \"bos_token\": \"</s>\"}", 0, F,
                 "tokenizer_config.json: key 'bos_token' appears more than once");
    /* tokenizer_config.json errors name that file */
    expect_error(B, "{\"bos_token\": \"<nope>\"}", 0, F, "tokenizer_config.json: bos_token '<nope>' is not a token");
    expect_error(B, "{\"eos_token\": \"<nope>\", \"pad_token\": \"<pad>\"}", 0, F, "eos_token '<nope>' is not a token");
    expect_error(B, "{\"add_bos_token\": \"yes\"}", 0, F, "tokenizer_config.json: add_bos_token is a string");
    expect_error(B, "{\"eos_token\": {\"text\": 1}}", 0, F, "eos_token is an object (expected a string or an object");
    expect_error(B, "nope", 0, F, "tokenizer_config.json: not valid JSON");
    expect_error(B, "{\"chat_template\": 3}", 0, F, "tokenizer_config.json: chat_template is a number (expected a string");
    expect_error(B, "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"x\"}]}", 0, F,
                 "chat_template lists 1 named templates but none named 'default'");
    expect_error(B, "{\"chat_template\": [{\"name\": \"default\"}]}", 0, F,
                 "chat_template[0] is not an object with string name and template");
    /* vocabulary sizes: the model may have more rows (padded), not fewer */
    expect_error(B, NULL, 3, F, "the tokenizer has 6 tokens but the model only 3");
    loaded l;
    tf_err err = {0};
    assert_int_equal(convert(&l, B, NULL, 8, &err), TF_OK);
    assert_int_equal(tf_tokenizer_n_vocab(l.tok), 8);
    assert_string_equal(tf_token_text(l.tok, 7), "[PAD7]");
    assert_int_equal(l.tok->types[6], TF_TOKTYPE_UNUSED);
    unload(&l);
    /* a missing file, and a writer that already holds a tokenizer key */
    tf_gguf_writer *w = tf_gguf_writer_new();
    assert_int_equal(tf_hf_tokenizer_to_gguf(w, "/nonexistent/tokenizer.json", NULL, 0, &err), TF_ERR_IO);
    assert_non_null(strstr(err.msg, "/nonexistent/tokenizer.json"));
    tf_err_clear(&err);
    assert_int_equal(tf_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama", &err), TF_OK);
    assert_int_equal(tf_hf_tokenizer_to_gguf_mem(w, B, strlen(B), "t.json", NULL, 0, NULL, 0, &err),
                     TF_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "already has 'tokenizer.ggml.model'"));
    assert_int_equal(tf_gguf_writer_n_kv(w), 1);
    tf_gguf_writer_free(w);
}

/* Truncations and byte flips of the tiny tokenizers never crash, and every
 * failure is reported with a status and a message. */
static void test_hostile(void **state) {
    (void)state;
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed());
    const char *bases[] = {k_tiny_bpe, k_tiny_spm};
    int n_ok = 0, n_fail = 0;
    for (int b = 0; b < 2; b++) {
        size_t len = strlen(bases[b]);
        char *s = malloc(len + 1);
        for (size_t cut = 0;; cut = cut + 7 < len ? cut + 7 : len) { /* every 7th prefix, then the whole */
            char *exact = malloc(cut ? cut : 1); /* no NUL after the text: an overread shows under ASan */
            memcpy(exact, bases[b], cut);
            tf_gguf_writer *w = tf_gguf_writer_new();
            tf_err err = {0};
            tf_status st = tf_hf_tokenizer_to_gguf_mem(w, exact, cut, "t.json", NULL, 0, NULL, 0, &err);
            assert_true(st == TF_OK ? cut == len : err.msg[0] != '\0');
            assert_int_equal(st == TF_OK, cut == len);
            tf_gguf_writer_free(w);
            free(exact);
            if (cut == len) break;
        }
        for (int it = 0; it < 400; it++) {
            memcpy(s, bases[b], len + 1);
            for (int k = 0; k < 1 + it % 4; k++) {
                uint32_t r = (uint32_t)tf_rng_next(&rng);
                static const char k_pick[] = "{}[]\":,0123456789-e. atbnlx\\";
                s[r % len] = k_pick[(r >> 16) % (sizeof k_pick - 1)];
            }
            loaded l;
            tf_err err = {0};
            tf_status st = convert(&l, s, NULL, 0, &err);
            if (st == TF_OK) {
                n_ok++;
                int32_t *ids;
                tokenize_all(l.tok, "ab ba", 5, true, true, &ids);
                free(ids);
                unload(&l);
            } else {
                n_fail++;
                assert_true(err.msg[0] != '\0');
            }
        }
        free(s);
    }
    print_message("mutated tokenizers: %d loaded, %d refused\n", n_ok, n_fail);
}

/* ------------------------------------------------------------------------ */
/* against Hugging Face tokenizers                                           */

static int hex_nibble(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* tests/data/hf_tok_vectors.txt (written by tests/data/gen_hf_tok_vectors.py
 * with HF tokenizers): per configuration, a shared vocabulary with a
 * normalizer and pre-tokenizer, and texts with HF's ids. The tokenizer.json
 * is rebuilt here from the GGUF (tests/common/hf_tokjson.c, the same
 * vocabulary and merges as the script's), converted, and must give the same
 * ids with add_special false (and parse_special true: HF always splits
 * added tokens). */
static void test_hf_vectors(void **state) {
    (void)state;
    const char *path = "tests/data/hf_tok_vectors.txt";
    char *data;
    size_t len;
    tf_err err = {0};
    if (tf_read_file(path, &data, &len, &err) != TF_OK) fail_msg("%s (run the tests from the repository root)", err.msg);
    int n_config = 0, n_skipped = 0, n_total = 0, n_bad_total = 0;
    loaded orig = {0}, conv = {0};
    bool have = false;
    char name[64] = "", *norm = NULL, *text = NULL;
    size_t text_len = 0;
    int n_case = 0, n_bad = 0;
    for (char *line = data, *eol; line < data + len; line = eol + 1) {
        eol = strchr(line, '\n');
        assert_non_null(eol);
        *eol = '\0';
        if (!strncmp(line, "config ", 7) || !strcmp(line, "end")) {
            if (have) {
                print_message("hf vectors %-16s pre=%-16s %d/%d cases match\n", name, conv.tok->pre_name,
                              n_case - n_bad, n_case);
                n_total += n_case, n_bad_total += n_bad;
                unload(&conv);
                unload(&orig);
                have = false;
            }
            if (!strcmp(line, "end")) break;
            char vocab[64], rel[160];
            assert_int_equal(sscanf(line + 7, "%63s %63s", name, vocab), 2);
            snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf", vocab);
            const char *vp = tu_shared_path(rel);
            n_config++;
            if (!vp) {
                print_message("skipped: ../shared/%s not found (config %s)\n", rel, name);
                n_skipped++;
                continue;
            }
            load_file(&orig, vp);
            n_case = n_bad = 0;
        } else if (!strncmp(line, "normalizer ", 11)) {
            norm = line + 11;
        } else if (!strncmp(line, "pre_tokenizer ", 14)) {
            if (!orig.tok) continue;
            char *json, *cfg;
            assert_true(tu_hf_tokjson_from_gguf(&orig.g, &(tu_hf_opts){0}, &json, &cfg));
            char *j1 = with(json, "pre_tokenizer", line + 14), *j2 = with(j1, "normalizer", norm);
            convert_ok(&conv, j2, NULL);
            have = true;
            free(json), free(cfg), free(j1), free(j2);
        } else if (!strncmp(line, "text ", 5)) {
            size_t n = strlen(line + 5) / 2;
            free(text);
            text = malloc(n + 1);
            for (size_t i = 0; i < n; i++) {
                int hi = hex_nibble(line[5 + 2 * i]), lo = hex_nibble(line[6 + 2 * i]);
                assert_true(hi >= 0 && lo >= 0);
                text[i] = (char)(hi * 16 + lo);
            }
            text_len = n;
        } else if (!strncmp(line, "ids", 3)) {
            if (!have) continue;
            int32_t expect[4096], *ids;
            size_t n_expect = 0;
            for (char *q = line + 3, *next;; q = next) {
                long v = strtol(q, &next, 10);
                if (next == q) break;
                assert_true(n_expect < 4096);
                expect[n_expect++] = (int32_t)v;
            }
            size_t n = tokenize_all(conv.tok, text, text_len, false, true, &ids);
            if (n != n_expect || memcmp(ids, expect, n * sizeof *ids) != 0) {
                size_t k = 0;
                while (k < n && k < n_expect && ids[k] == expect[k]) k++;
                print_error("%s: '%.*s': %zu ids, HF %zu; first difference at %zu (%d vs %d)\n", name,
                            (int)(text_len < 60 ? text_len : 60), text, n, n_expect, k, k < n ? ids[k] : -1,
                            k < n_expect ? expect[k] : -1);
                n_bad++;
            }
            free(ids);
            n_case++;
        }
    }
    free(text);
    free(data);
    if (n_skipped == n_config) {
        print_message("skipped: ../shared/vocab not found\n");
        skip();
    }
    print_message("hf vectors: %d configurations (%d skipped), %d cases, %d mismatches\n", n_config, n_skipped,
                  n_total, n_bad_total);
    assert_int_equal(n_bad_total, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spm_normalizer), cmocka_unit_test(test_spm_metaspace),
        cmocka_unit_test(test_gpt2_bytelevel), cmocka_unit_test(test_gpt2_pairs_split),
        cmocka_unit_test(test_tiny_families),  cmocka_unit_test(test_errors), cmocka_unit_test(test_chat_template),
        cmocka_unit_test(test_hostile),        cmocka_unit_test(test_hf_vectors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
