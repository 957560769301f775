/*
 * fuzz_tokenizer.c — libFuzzer harness for the tokenizers (src/tokenizer/):
 * tokenize arbitrary bytes with a fixed vocabulary, detokenize the ids, and
 * check what tokenizer.h and docs/TOKENIZER.md promise.
 *
 * Vocabularies: the GGUF files named in $TF_FUZZ_VOCABS (separated by ':' or
 * white space; default: stories260K and the GPT-2 vocabulary from ../shared),
 * loaded once. The first input byte picks one (byte % count), the rest is the
 * text. Checks, each a __builtin_trap() when broken:
 *   - plain tokenization (no BOS/EOS, no special-token parsing): ids in range,
 *     the same ids when the output array is too small (TF_ERR_RANGE with the
 *     full count, then the first cap ids), and the round trip
 *     tf_detokenize(tf_tokenize(x)) == x byte for byte, invalid UTF-8
 *     included. The documented exceptions are skipped: SPM text holding "▁"
 *     (it reads back as a space), SPM output holding a user-defined token
 *     (matched even without parse_special; the text after it gets the space
 *     prefix, which is not undone), and text holding a byte the vocabulary
 *     cannot spell (see find_lossy_bytes).
 *   - the streaming detokenizer gives valid UTF-8 after every token, and the
 *     same bytes as tf_detokenize whenever those are valid UTF-8;
 *   - with add_special and parse_special: ids in range, BOS first where the
 *     vocabulary adds it, and detokenizing with render_special succeeds.
 *
 * Build and run: `make fuzz FUZZ_TARGETS=tokenizer` (see the Makefile; it
 * passes FUZZ_VOCABS). With -DTF_FUZZ_WRITE_SEEDS this file is a seed writer:
 * `seeds_tokenizer DIR` writes short texts (English, several scripts,
 * emoji, invalid UTF-8, special-token spellings, "▁", whitespace runs,
 * digits), each once per vocabulary index 0..7 (MAX_VOCABS).
 */
#include "format/gguf.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef TF_FUZZ_WRITE_SEEDS

#define MAX_VOCABS 8

typedef struct vocab {
    char path[512];
    tf_gguf g;
    tf_tokenizer *tok;
    int32_t max_piece; /* longest piece of any token (bytes) */
    bool lossy[256];   /* this byte alone does not come back (the vocabulary cannot spell it) */
} vocab;

static vocab g_vocabs[MAX_VOCABS];
static int g_n_vocabs;

/* Bytes that do not survive a round trip even alone: a byte-level vocabulary
 * without a normal token for them (DeepSeek's lack the 13 bytes that never
 * occur in UTF-8 and spell their byte-level characters only as user-defined
 * tokens, which read back as those characters' UTF-8). Texts holding them
 * are exempt from the round-trip check; they are listed at start. */
static void find_lossy_bytes(vocab *v) {
    int n_lossy = 0;
    for (int c = 0; c < 256; c++) {
        char in = (char)c, out[64];
        int32_t ids[8];
        size_t n_ids = 0, n_out = 0;
        tf_err err = {0};
        v->lossy[c] = tf_tokenize(v->tok, &in, 1, false, false, ids, 8, &n_ids, &err) != TF_OK ||
                      tf_detokenize(v->tok, ids, n_ids, false, out, sizeof out, &n_out, &err) != TF_OK ||
                      n_out != 1 || out[0] != in;
        if (v->lossy[c]) fprintf(stderr, "%s%02X", n_lossy++ ? " " : "fuzz_tokenizer:   bytes that do not round-trip: ", c);
    }
    if (n_lossy) fprintf(stderr, " (texts holding them are not round-trip checked)\n");
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *env = getenv("TF_FUZZ_VOCABS");
    char *list = strdup(env && *env ? env
                                    : "../shared/models/stories260K/stories260K.gguf:"
                                      "../shared/vocab/ggml-vocab-gpt-2.gguf");
    if (!list) abort();
    for (char *save = NULL, *p = strtok_r(list, ": \t\n", &save); p; p = strtok_r(NULL, ": \t\n", &save)) {
        if (g_n_vocabs == MAX_VOCABS) {
            fprintf(stderr, "fuzz_tokenizer: more than %d vocabularies; using the first %d\n", MAX_VOCABS, MAX_VOCABS);
            break;
        }
        vocab *v = &g_vocabs[g_n_vocabs];
        tf_err err = {0};
        snprintf(v->path, sizeof v->path, "%s", p);
        if (tf_gguf_open(&v->g, p, &err) != TF_OK || tf_tokenizer_from_gguf(&v->tok, &v->g, &err) != TF_OK) {
            fprintf(stderr, "fuzz_tokenizer: %s\n", err.msg);
            exit(1);
        }
        for (int32_t id = 0; id < tf_tokenizer_n_vocab(v->tok); id++) {
            int32_t n = tf_token_to_piece(v->tok, id, true, NULL, 0);
            if (n > v->max_piece) v->max_piece = n;
        }
        fprintf(stderr, "fuzz_tokenizer: vocabulary %d: %s: %s\n", g_n_vocabs, p, tf_tokenizer_describe(v->tok));
        find_lossy_bytes(v);
        g_n_vocabs++;
    }
    free(list);
    if (!g_n_vocabs) {
        fprintf(stderr, "fuzz_tokenizer: no vocabulary (set TF_FUZZ_VOCABS to GGUF files with tokenizer metadata)\n");
        exit(1);
    }
    return 0;
}

static bool valid_utf8(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        size_t adv;
        if (tf_utf8_next((const unsigned char *)s + i, n - i, &adv) != TF_UTF8_VALID) return false;
        i += adv;
    }
    return true;
}

/* All ids of text (malloc'd), checked against a second call with a short array. */
static int32_t *tokenize(const tf_tokenizer *tok, const char *text, size_t len, bool add_special, bool parse_special,
                         size_t *n) {
    tf_err err = {0};
    size_t need = 0, got = 0;
    tf_status st = tf_tokenize(tok, text, len, add_special, parse_special, NULL, 0, &need, &err);
    if (st != (need ? TF_ERR_RANGE : TF_OK)) __builtin_trap();
    int32_t *ids = malloc((need ? need : 1) * sizeof *ids);
    if (!ids) abort();
    if (tf_tokenize(tok, text, len, add_special, parse_special, ids, need, &got, &err) != TF_OK || got != need)
        __builtin_trap();
    for (size_t i = 0; i < got; i++)
        if (ids[i] < 0 || ids[i] >= tf_tokenizer_n_vocab(tok)) __builtin_trap();
    if (got >= 2) { /* a short array: the first cap ids, the full count, TF_ERR_RANGE */
        size_t cap = got / 2, got2 = 0;
        int32_t *part = malloc(cap * sizeof *part);
        if (!part) abort();
        if (tf_tokenize(tok, text, len, add_special, parse_special, part, cap, &got2, &err) != TF_ERR_RANGE ||
            got2 != got || memcmp(part, ids, cap * sizeof *part) != 0)
            __builtin_trap();
        free(part);
    }
    *n = got;
    return ids;
}

/* tf_detokenize into a malloc'd buffer; *n gets the length. */
static char *detokenize(const tf_tokenizer *tok, const int32_t *ids, size_t n_ids, bool render_special, size_t *n) {
    tf_err err = {0};
    size_t need = 0, got = 0;
    tf_status st = tf_detokenize(tok, ids, n_ids, render_special, NULL, 0, &need, &err);
    if (st != (need ? TF_ERR_RANGE : TF_OK)) __builtin_trap();
    char *out = malloc(need + 1);
    if (!out) abort();
    if (tf_detokenize(tok, ids, n_ids, render_special, out, need, &got, &err) != TF_OK || got != need)
        __builtin_trap();
    *n = got;
    return out;
}

/* Stream ids through tf_detok with room for any piece: every chunk valid
 * UTF-8. Returns the concatenation (malloc'd), length in *n. */
static char *stream(const vocab *v, const int32_t *ids, size_t n_ids, size_t *n) {
    int32_t cap = 3 * (v->max_piece + 8); /* every byte may become a 3-byte U+FFFD */
    char *chunk = malloc((size_t)cap), *all = malloc((size_t)cap * (n_ids + 1));
    if (!chunk || !all) abort();
    size_t len = 0;
    tf_detok d;
    tf_detok_init(&d, v->tok);
    for (size_t i = 0; i < n_ids; i++) {
        int32_t k = tf_detok_push(&d, ids[i], chunk, cap);
        if (k < 0 || k > cap || !valid_utf8(chunk, (size_t)k)) __builtin_trap();
        memcpy(all + len, chunk, (size_t)k);
        len += (size_t)k;
    }
    int32_t k = tf_detok_flush(&d, chunk, cap);
    if (k < 0 || !valid_utf8(chunk, (size_t)k)) __builtin_trap();
    memcpy(all + len, chunk, (size_t)k);
    len += (size_t)k;
    free(chunk);
    *n = len;
    return all;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const vocab *v = &g_vocabs[data[0] % g_n_vocabs];
    const tf_tokenizer *tok = v->tok;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    bool spm = tf_tokenizer_kind(tok) == TF_TOK_SPM;

    /* plain: the round trip */
    size_t n_ids, blen, slen;
    int32_t *ids = tokenize(tok, text, len, false, false, &n_ids);
    char *back = detokenize(tok, ids, n_ids, false, &blen);
    bool exempt = spm && memmem(text, len, "\xe2\x96\x81", 3) != NULL;
    for (size_t i = 0; i < len && !exempt; i++) exempt = v->lossy[(unsigned char)text[i]];
    for (size_t i = 0; i < n_ids && spm && !exempt; i++) exempt = tok->types[ids[i]] == TF_TOKTYPE_USER_DEFINED;
    if (!exempt && (blen != len || memcmp(back, text, len) != 0)) {
        fprintf(stderr, "fuzz_tokenizer: round trip through %s gave %zu bytes for %zu\n", v->path, blen, len);
        __builtin_trap();
    }
    char *streamed = stream(v, ids, n_ids, &slen);
    if (valid_utf8(back, blen) && (slen != blen || memcmp(streamed, back, blen) != 0)) {
        fprintf(stderr, "fuzz_tokenizer: streaming through %s gave other bytes than tf_detokenize\n", v->path);
        __builtin_trap();
    }
    free(streamed);
    free(back);
    free(ids);

    /* with BOS/EOS and special tokens */
    ids = tokenize(tok, text, len, true, true, &n_ids);
    if (tf_tokenizer_add_bos(tok) && tf_tokenizer_bos(tok) >= 0 && (n_ids == 0 || ids[0] != tf_tokenizer_bos(tok)))
        __builtin_trap();
    free(detokenize(tok, ids, n_ids, true, &blen));
    free(stream(v, ids, n_ids, &slen));
    free(ids);
    return 0;
}

#else

static int seed(const char *dir, int k, uint8_t vocab, const char *s, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/text%02d_v%u", dir, k, vocab);
    FILE *f = fopen(path, "wb");
    if (!f || fputc(vocab, f) == EOF || fwrite(s, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    static const char *const texts[] = {
        "Once upon a time, there was a little girl named Lily. She loved to play outside.",
        "  leading spaces,\ttabs\t\tand\n\nnewlines \r\n trailing   ",
        "I'm sure you've heard: they'll say it's 3.14159 or 1,000,000 (approx.) -- 42nd!",
        "caf\xc3\xa9 na\xc3\xafve \xd0\xbc\xd0\xb8\xd1\x80 \xce\xb1\xce\xb2\xce\xb3 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e "
        "\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 \xd8\xa7\xd9\x84\xd8\xb9\xd8\xb1\xd8\xa8\xd9\x8a\xd8\xa9",
        "emoji \xf0\x9f\xa6\x99\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd \xe2\x9c\x94\xef\xb8\x8f zwj "
        "\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x92\xbb",
        "invalid \xff\xfe \xc3( \xe2\x28\xa1 \xf0\x9f\x98 \xed\xa0\x80 \xc0\xaf \xf4\x90\x80\x80 \x80",
        "<s>special</s> <unk> <|endoftext|> <|im_start|>user\nhi<|im_end|> <0x41>",
        "\xe2\x96\x81" "already\xe2\x96\x81" "escaped \xe2\x96\x81 \xc4\xa0gpt2",
        "def f(x):\n    return [i**2 for i in range(x) if i % 3 == 0]  # comment\n",
        "0123456789 12345678901234567890 \xd9\xa3\xd9\xa4 \xef\xbc\x91\xef\xbc\x92",
        "a",
        " ",
        "\n",
        "",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    };
    int rc = 0;
    for (int k = 0; k < (int)(sizeof texts / sizeof texts[0]); k++)
        for (uint8_t v = 0; v < 8; v++) rc |= seed(argv[1], k, v, texts[k], strlen(texts[k]));
    /* bytes that strings cannot hold: NULs, every byte value */
    static const char nul[] = "a\0b\0\0c";
    for (uint8_t v = 0; v < 8; v++) rc |= seed(argv[1], 90, v, nul, sizeof nul - 1);
    char all[256];
    for (int i = 0; i < 256; i++) all[i] = (char)i;
    for (uint8_t v = 0; v < 8; v++) rc |= seed(argv[1], 91, v, all, sizeof all);
    return rc;
}

#endif
