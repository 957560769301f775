/*
 * vocab.c — building a tf_tokenizer from the tokenizer.ggml.* metadata of a
 * GGUF file, and the lookups every other tokenizer file uses.
 *
 * Everything read from the file is validated: array types and lengths,
 * token types, byte-token spellings, merge syntax, special-token ids and the
 * model / pre-tokenizer names (unknown ones are refused, never guessed).
 * The tokenizer copies what it keeps, so the tf_gguf may be closed after.
 *
 * Lookup structures: one open-addressing hash from string to id over the
 * tokens (and, for BPE, strings that occur only in merges), and one from an
 * id pair to its merge rank. Both are built here and only read afterwards.
 */
#include "tokenizer/tok_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* hashing                                                                   */

static uint32_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return (uint32_t)(h ^ (h >> 32));
}

static uint32_t hash_pair(int32_t a, int32_t b) {
    uint64_t x = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return (uint32_t)x;
}

static uint32_t pow2_at_least(uint64_t n) {
    uint32_t c = 16;
    while (c < n && c < (1u << 31)) c <<= 1;
    return c;
}

int32_t tf_tok_lookup(const tf_tokenizer *tok, const char *s, size_t n) {
    uint32_t h = hash_bytes(s, n);
    for (uint32_t i = h & tok->hash_mask;; i = (i + 1) & tok->hash_mask) {
        int32_t id = tok->hash_slot[i];
        if (id < 0) return -1;
        if (tok->hash_val[i] == h && tok->str_len[id] == n && memcmp(tok->pool + tok->str_off[id], s, n) == 0)
            return id;
    }
}

int32_t tf_tok_merge_rank(const tf_tokenizer *tok, int32_t a, int32_t b, int32_t *out) {
    if (tok->n_merges == 0) return -1;
    for (uint32_t i = hash_pair(a, b) & tok->merge_mask;; i = (i + 1) & tok->merge_mask) {
        int32_t r = tok->merge_slot[i];
        if (r < 0) return -1;
        if (tok->merge_a[r] == a && tok->merge_b[r] == b) {
            *out = tok->merge_out[r];
            return r;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* building                                                                  */

typedef struct builder {
    tf_tokenizer *t;
    const tf_gguf *g;
    tf_err *err;
    size_t pool_len, pool_cap;
    int32_t str_cap;
    uint32_t hash_used;
} builder;

static tf_status nomem(builder *b, const char *what) {
    return tf_errf(b->err, TF_ERR_NOMEM, "%s: out of memory building the tokenizer (%s)", b->g->path, what);
}

/* Place id in the string hash (the slot of an equal string is taken over:
 * for duplicate tokens the last one wins, as in the reference loader). */
static void hash_place(tf_tokenizer *t, int32_t id, uint32_t h, uint32_t *used) {
    const char *s = t->pool + t->str_off[id];
    uint32_t n = t->str_len[id];
    for (uint32_t i = h & t->hash_mask;; i = (i + 1) & t->hash_mask) {
        int32_t o = t->hash_slot[i];
        if (o < 0) {
            t->hash_slot[i] = id;
            t->hash_val[i] = h;
            (*used)++;
            return;
        }
        if (t->hash_val[i] == h && t->str_len[o] == n && memcmp(t->pool + t->str_off[o], s, n) == 0) {
            t->hash_slot[i] = id;
            return;
        }
    }
}

/* (Re)size the string hash to cap slots and re-insert every string. */
static tf_status hash_resize(builder *b, uint32_t cap) {
    tf_tokenizer *t = b->t;
    int32_t *slot = malloc((size_t)cap * sizeof *slot);
    uint32_t *val = malloc((size_t)cap * sizeof *val);
    if (!slot || !val) {
        free(slot);
        free(val);
        return nomem(b, "string hash");
    }
    memset(slot, 0xff, (size_t)cap * sizeof *slot);
    free(t->hash_slot);
    free(t->hash_val);
    t->hash_slot = slot;
    t->hash_val = val;
    t->hash_mask = cap - 1;
    b->hash_used = 0;
    for (int32_t id = 0; id < t->n_str; id++)
        hash_place(t, id, hash_bytes(t->pool + t->str_off[id], t->str_len[id]), &b->hash_used);
    return TF_OK;
}

/* Append a string to the pool and the string table; *id receives its id.
 * The caller inserts it into the hash. */
static tf_status str_append(builder *b, const char *s, size_t n, int32_t *id) {
    tf_tokenizer *t = b->t;
    if (n > UINT32_MAX || b->pool_len + n + 1 > UINT32_MAX || t->n_str == INT32_MAX)
        return tf_errf(b->err, TF_ERR_RANGE, "%s: tokenizer strings exceed 4 GiB", b->g->path);
    if (b->pool_len + n + 1 > b->pool_cap) {
        size_t cap = b->pool_cap ? b->pool_cap : 4096;
        while (cap < b->pool_len + n + 1) cap *= 2;
        char *p = realloc(t->pool, cap);
        if (!p) return nomem(b, "string pool");
        t->pool = p;
        b->pool_cap = cap;
    }
    if (t->n_str == b->str_cap) {
        int32_t cap = b->str_cap ? (b->str_cap > INT32_MAX / 2 ? INT32_MAX : b->str_cap * 2) : 1024;
        uint32_t *off = realloc(t->str_off, (size_t)cap * sizeof *off);
        if (!off) return nomem(b, "string table");
        t->str_off = off;
        uint32_t *len = realloc(t->str_len, (size_t)cap * sizeof *len);
        if (!len) return nomem(b, "string table");
        t->str_len = len;
        b->str_cap = cap;
    }
    if (n) memcpy(t->pool + b->pool_len, s, n);
    t->pool[b->pool_len + n] = '\0';
    t->str_off[t->n_str] = (uint32_t)b->pool_len;
    t->str_len[t->n_str] = (uint32_t)n;
    b->pool_len += n + 1;
    *id = t->n_str++;
    return TF_OK;
}

/* Id of string s, adding it (as a merge-only string) if new. */
static tf_status str_intern(builder *b, const char *s, size_t n, int32_t *id) {
    *id = tf_tok_lookup(b->t, s, n);
    if (*id >= 0) return TF_OK;
    if ((uint64_t)(b->hash_used + 1) * 2 > (uint64_t)b->t->hash_mask + 1)
        TF_TRY(hash_resize(b, (b->t->hash_mask + 1) * 2));
    TF_TRY(str_append(b, s, n, id));
    hash_place(b->t, *id, hash_bytes(s, n), &b->hash_used);
    return TF_OK;
}

/* Print at most 60 bytes of s for an error message. */
static int clip(uint64_t n) { return n > 60 ? 60 : (int)n; }

static tf_status load_model(builder *b, tf_gguf_str *model) {
    TF_TRY(tf_gguf_get_str(b->g, "tokenizer.ggml.model", model, NULL, b->err));
    if (tf_gguf_str_eq(*model, "llama")) b->t->kind = TF_TOK_SPM;
    else if (tf_gguf_str_eq(*model, "gpt2")) b->t->kind = TF_TOK_BPE;
    else
        return tf_errf(b->err, TF_ERR_UNSUPPORTED,
                       "%s: tokenizer.ggml.model = '%.*s' is not supported (expected 'llama' for SentencePiece "
                       "BPE or 'gpt2' for byte-level BPE)",
                       b->g->path, clip(model->len), model->data);
    return TF_OK;
}

/* Tokens, scores and types: equal lengths, types 0..6, finite scores. */
static tf_status load_tokens(builder *b) {
    tf_tokenizer *t = b->t;
    const tf_gguf *g = b->g;
    const tf_gguf_kv *toks, *scores = NULL, *types = NULL;
    bool found;
    TF_TRY(tf_gguf_get_arr(g, "tokenizer.ggml.tokens", TF_GGUF_STRING, &toks, NULL, b->err));
    if (toks->arr_n == 0 || toks->arr_n > (uint64_t)INT32_MAX / 2)
        return tf_errf(b->err, TF_ERR_FORMAT, "%s: tokenizer.ggml.tokens has %llu entries (expected 1..%d)", g->path,
                       (unsigned long long)toks->arr_n, INT32_MAX / 2);
    int32_t n = (int32_t)toks->arr_n;
    TF_TRY(tf_gguf_get_arr(g, "tokenizer.ggml.scores", TF_GGUF_FLOAT32, &scores, &found, b->err));
    if (!found && t->kind == TF_TOK_SPM)
        return tf_errf(b->err, TF_ERR_FORMAT,
                       "%s: required metadata key 'tokenizer.ggml.scores' is missing (a 'llama' tokenizer merges "
                       "by score)", g->path);
    if (scores && scores->arr_n != toks->arr_n)
        return tf_errf(b->err, TF_ERR_FORMAT, "%s: tokenizer.ggml.scores has %llu entries (expected %d, one per token)",
                       g->path, (unsigned long long)scores->arr_n, n);
    TF_TRY(tf_gguf_get_arr(g, "tokenizer.ggml.token_type", TF_GGUF_INT32, &types, &found, b->err));
    if (types && types->arr_n != toks->arr_n)
        return tf_errf(b->err, TF_ERR_FORMAT,
                       "%s: tokenizer.ggml.token_type has %llu entries (expected %d, one per token)", g->path,
                       (unsigned long long)types->arr_n, n);

    t->n_vocab = n;
    t->scores = calloc((size_t)n, sizeof *t->scores);
    t->types = malloc((size_t)n);
    t->tok_byte = malloc((size_t)n * sizeof *t->tok_byte);
    if (!t->scores || !t->types || !t->tok_byte) return nomem(b, "token arrays");
    for (int32_t i = 0; i < n; i++) {
        int32_t id;
        TF_TRY(str_append(b, toks->arr_str[i].data, toks->arr_str[i].len, &id));
        if (scores) {
            double s = tf_gguf_arr_float(scores, (uint64_t)i);
            if (isnan(s))
                return tf_errf(b->err, TF_ERR_FORMAT, "%s: tokenizer.ggml.scores[%d] is NaN (expected a number)",
                               g->path, i);
            t->scores[i] = (float)s;
        }
        int64_t ty = types ? tf_gguf_arr_int(types, (uint64_t)i) : TF_TOKTYPE_NORMAL;
        if (ty < TF_TOKTYPE_UNDEFINED || ty > TF_TOKTYPE_BYTE)
            return tf_errf(b->err, TF_ERR_FORMAT,
                           "%s: tokenizer.ggml.token_type[%d] = %lld is not a token type (expected 0..6: undefined, "
                           "normal, unknown, control, user-defined, unused, byte)",
                           g->path, i, (long long)ty);
        t->types[i] = (uint8_t)ty;
    }
    TF_TRY(hash_resize(b, pow2_at_least((uint64_t)n * 2)));
    return TF_OK;
}

static int hex_val(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Byte of a "<0xXX>" spelling, or -1. */
static int parse_byte_token(const char *s, uint32_t n) {
    if (n != 6 || s[0] != '<' || s[1] != '0' || s[2] != 'x' || s[5] != '>') return -1;
    int hi = hex_val(s[3]), lo = hex_val(s[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/* Byte-type tokens must spell a byte: "<0xXX>" (or, for byte-level BPE, the
 * one mapped character). Then the byte -> token tables. */
static tf_status load_bytes(builder *b) {
    tf_tokenizer *t = b->t;
    tf_bpe_byte_map(t->byte_cp, t->cp_byte);
    for (int32_t i = 0; i < t->n_vocab; i++) {
        t->tok_byte[i] = -1;
        if (t->types[i] != TF_TOKTYPE_BYTE) continue;
        const char *s = tf_tok_str(t, i);
        uint32_t n = t->str_len[i];
        int v = parse_byte_token(s, n);
        if (v < 0 && t->kind == TF_TOK_BPE && n >= 1) {
            size_t adv;
            if (tf_utf8_next((const unsigned char *)s, n, &adv) == TF_UTF8_VALID && adv == n && n <= 2) {
                uint32_t cp = n == 1 ? (unsigned char)s[0] : (((unsigned char)s[0] & 0x1Fu) << 6) | ((unsigned char)s[1] & 0x3Fu);
                if (cp < 324) v = t->cp_byte[cp];
            }
        }
        if (v < 0)
            return tf_errf(b->err, TF_ERR_FORMAT,
                           "%s: tokenizer.ggml.tokens[%d] = '%.*s' has token_type 6 (byte) but does not spell a "
                           "byte (expected '<0xXX>')",
                           b->g->path, i, clip(n), s);
        t->tok_byte[i] = v;
    }
    for (int c = 0; c < 256; c++) {
        t->byte_tok[c] = t->byte_sym[c] = -1;
        if (t->kind == TF_TOK_SPM) {
            char name[8];
            snprintf(name, sizeof name, "<0x%02X>", c);
            int32_t id = tf_tok_find_token(t, name, 6);
            if (id < 0) {
                char one = (char)c;
                id = tf_tok_find_token(t, &one, 1);
            }
            t->byte_tok[c] = id;
        } else {
            char enc[2];
            uint16_t cp = t->byte_cp[c];
            size_t n = 1;
            if (cp < 0x80) {
                enc[0] = (char)cp;
            } else {
                enc[0] = (char)(0xC0 | (cp >> 6));
                enc[1] = (char)(0x80 | (cp & 0x3F));
                n = 2;
            }
            t->byte_sym[c] = tf_tok_lookup(t, enc, n);
            t->byte_tok[c] = tf_tok_find_token(t, enc, n);
        }
    }
    return TF_OK;
}

/* Merges "a b": split at the first space after the first byte, both parts
 * non-empty. Parts and results are interned; the first occurrence of a pair
 * keeps the lowest rank. */
static tf_status load_merges(builder *b) {
    tf_tokenizer *t = b->t;
    const tf_gguf *g = b->g;
    const tf_gguf_kv *kv;
    bool found;
    TF_TRY(tf_gguf_get_arr(g, "tokenizer.ggml.merges", TF_GGUF_STRING, &kv, &found, b->err));
    if (t->kind == TF_TOK_SPM) return TF_OK; /* merges by score; a merges array (if any) is not used */
    if (!found)
        return tf_errf(b->err, TF_ERR_FORMAT,
                       "%s: required metadata key 'tokenizer.ggml.merges' is missing (a 'gpt2' tokenizer needs its "
                       "merge list)", g->path);
    if (kv->arr_n > (uint64_t)INT32_MAX / 4)
        return tf_errf(b->err, TF_ERR_FORMAT, "%s: tokenizer.ggml.merges has %llu entries (expected at most %d)",
                       g->path, (unsigned long long)kv->arr_n, INT32_MAX / 4);
    int32_t n = (int32_t)kv->arr_n;
    t->n_merges = n;
    if (n == 0) return TF_OK;
    t->merge_a = malloc((size_t)n * sizeof *t->merge_a);
    t->merge_b = malloc((size_t)n * sizeof *t->merge_b);
    t->merge_out = malloc((size_t)n * sizeof *t->merge_out);
    uint32_t cap = pow2_at_least((uint64_t)n * 2);
    t->merge_slot = malloc((size_t)cap * sizeof *t->merge_slot);
    if (!t->merge_a || !t->merge_b || !t->merge_out || !t->merge_slot) return nomem(b, "merge table");
    memset(t->merge_slot, 0xff, (size_t)cap * sizeof *t->merge_slot);
    t->merge_mask = cap - 1;

    char *cat = NULL;
    size_t cat_cap = 0;
    tf_status st = TF_OK;
    for (int32_t i = 0; i < n && st == TF_OK; i++) {
        const char *s = kv->arr_str[i].data;
        uint64_t len = kv->arr_str[i].len;
        const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
        if (!sp || sp + 1 == s + len) {
            st = tf_errf(b->err, TF_ERR_FORMAT,
                         "%s: tokenizer.ggml.merges[%d] = '%.*s' is malformed (expected two non-empty symbols "
                         "separated by a space, 'a b')",
                         g->path, i, clip(len), s);
            break;
        }
        size_t na = (size_t)(sp - s), nb = (size_t)len - na - 1;
        if (na + nb > cat_cap) {
            size_t c = (na + nb) * 2;
            char *p = realloc(cat, c);
            if (!p) {
                st = nomem(b, "merge strings");
                break;
            }
            cat = p;
            cat_cap = c;
        }
        memcpy(cat, s, na);
        memcpy(cat + na, sp + 1, nb);
        int32_t ia, ib, io;
        if ((st = str_intern(b, s, na, &ia)) != TF_OK) break;
        if ((st = str_intern(b, sp + 1, nb, &ib)) != TF_OK) break;
        if ((st = str_intern(b, cat, na + nb, &io)) != TF_OK) break;
        t->merge_a[i] = ia;
        t->merge_b[i] = ib;
        t->merge_out[i] = io;
        for (uint32_t k = hash_pair(ia, ib) & t->merge_mask;; k = (k + 1) & t->merge_mask) {
            int32_t r = t->merge_slot[k];
            if (r < 0) {
                t->merge_slot[k] = i;
                break;
            }
            if (t->merge_a[r] == ia && t->merge_b[r] == ib) break; /* duplicate: the earlier rank stays */
        }
    }
    free(cat);
    return st;
}

/* Pre-tokenizer names (tokenizer.ggml.pre) and what they mean, as the
 * reference implementation reads them. The Llama 3 family also takes
 * whole-token pieces without merging and adds BOS by default. */
typedef struct pre_name {
    const char *name;
    tf_pre_kind kind;
    bool ignore_merges;
    bool add_bos;
} pre_name;

static const pre_name k_pre_names[] = {
    {"default", TF_PRE_GPT2, false, false},
    {"gpt-2", TF_PRE_GPT2, false, false},
    {"phi-2", TF_PRE_GPT2, false, false},
    {"jina-es", TF_PRE_GPT2, false, false},
    {"jina-de", TF_PRE_GPT2, false, false},
    {"jina-v2-es", TF_PRE_GPT2, false, false},
    {"jina-v2-de", TF_PRE_GPT2, false, false},
    {"jina-v2-code", TF_PRE_GPT2, false, false},
    {"gigachat", TF_PRE_GPT2, false, false},
    {"a.x-4.0", TF_PRE_GPT2, false, false},
    {"mellum", TF_PRE_GPT2, false, false},
    {"exaone4", TF_PRE_GPT2, false, false},
    {"mpt", TF_PRE_GPT2, false, false},
    {"olmo", TF_PRE_GPT2, false, false},
    {"jais", TF_PRE_GPT2, false, false},
    {"trillion", TF_PRE_GPT2, false, false},
    {"granite-docling", TF_PRE_GPT2, false, false},
    {"llama3", TF_PRE_LLAMA3, true, true},
    {"llama-v3", TF_PRE_LLAMA3, true, true},
    {"llama-bpe", TF_PRE_LLAMA3, true, true},
    {"falcon3", TF_PRE_LLAMA3, true, true},
    {"falcon-h1", TF_PRE_LLAMA3, true, true},
    {"pixtral", TF_PRE_LLAMA3, true, true},
    {"midm-2.0", TF_PRE_LLAMA3, true, true},
    {"lfm2", TF_PRE_LLAMA3, true, true},
    {"dbrx", TF_PRE_LLAMA3, false, false},
    {"smaug-bpe", TF_PRE_LLAMA3, false, false},
    {"qwen2", TF_PRE_QWEN2, false, false},
    {"deepseek-r1-qwen", TF_PRE_QWEN2, false, false},
    {"kormo", TF_PRE_QWEN2, false, false},
    {"megrez", TF_PRE_QWEN2, false, false},
    {"hunyuan", TF_PRE_QWEN2, false, false},
    {"stablelm2", TF_PRE_QWEN2, false, false},
    {"deepseek-llm", TF_PRE_DEEPSEEK_LLM, false, false},
    {"deepseek-coder", TF_PRE_DEEPSEEK_CODER, false, false},
    {"falcon", TF_PRE_FALCON, false, false},
    {"starcoder", TF_PRE_STARCODER, false, false},
    {"refact", TF_PRE_STARCODER, false, false},
    {"command-r", TF_PRE_STARCODER, false, false},
    {"codeshell", TF_PRE_STARCODER, false, false},
    {"exaone", TF_PRE_STARCODER, false, false},
    {"minerva-7b", TF_PRE_STARCODER, false, false},
    {"smollm", TF_PRE_STARCODER, false, false}, /* SmolLM / SmolLM2: every digit alone, then GPT-2 */
};

/* tokenizer.triforce.pre_steps (an array of step spellings, see pretok.c):
 * a pre-tokenizer program that no tokenizer.ggml.pre name stands for, as
 * the tokenizer.json translation writes it. It takes precedence over the
 * name, which is then informational. */
static tf_status load_pre_steps(builder *b, const tf_gguf_kv *kv) {
    tf_tokenizer *t = b->t;
    if (kv->arr_n == 0 || kv->arr_n > TF_PRETOK_MAX_STEPS)
        return tf_errf(b->err, TF_ERR_FORMAT, "%s: tokenizer.triforce.pre_steps has %llu entries (expected 1..%d)",
                       b->g->path, (unsigned long long)kv->arr_n, TF_PRETOK_MAX_STEPS);
    for (uint64_t i = 0; i < kv->arr_n; i++) {
        char what[1100];
        snprintf(what, sizeof what, "%s: tokenizer.triforce.pre_steps[%llu]", b->g->path, (unsigned long long)i);
        tf_status st = tf_pretok_add_step(&t->pre, kv->arr_str[i].data, kv->arr_str[i].len, what, b->err);
        if (st != TF_OK) {
            tf_pretok_free(&t->pre);
            return st;
        }
    }
    return TF_OK;
}

/* tokenizer.triforce.normalizer (written from a tokenizer.json): "NFC" or absent. */
static tf_status load_normalizer(builder *b) {
    tf_gguf_str v = {0};
    bool found;
    TF_TRY(tf_gguf_get_str(b->g, "tokenizer.triforce.normalizer", &v, &found, b->err));
    if (!found) return TF_OK;
    if (!tf_gguf_str_eq(v, "NFC"))
        return tf_errf(b->err, TF_ERR_UNSUPPORTED,
                       "%s: tokenizer.triforce.normalizer = '%.*s' is not supported (expected 'NFC' or no key)",
                       b->g->path, clip(v.len), v.data);
    b->t->nfc = true;
    return TF_OK;
}

/* tokenizer.triforce.space_prefix (written from a tokenizer.json with a
 * Metaspace pre-tokenizer): "first", "always" or absent (tf_space_prefix). */
static tf_status load_space_prefix(builder *b) {
    tf_gguf_str v = {0};
    bool found;
    TF_TRY(tf_gguf_get_str(b->g, "tokenizer.triforce.space_prefix", &v, &found, b->err));
    b->t->space_prefix = TF_SPACE_PREFIX_FRAGMENT;
    if (!found) return TF_OK;
    if (tf_gguf_str_eq(v, "first")) b->t->space_prefix = TF_SPACE_PREFIX_FIRST;
    else if (tf_gguf_str_eq(v, "always")) b->t->space_prefix = TF_SPACE_PREFIX_ALWAYS;
    else
        return tf_errf(b->err, TF_ERR_UNSUPPORTED,
                       "%s: tokenizer.triforce.space_prefix = '%.*s' is not supported (expected 'first', 'always' or "
                       "no key)", b->g->path, clip(v.len), v.data);
    return TF_OK;
}

static tf_status load_pre(builder *b, bool *default_add_bos) {
    tf_tokenizer *t = b->t;
    tf_gguf_str pre = {0};
    bool found, found_steps;
    const tf_gguf_kv *steps = NULL;
    TF_TRY(tf_gguf_get_str(b->g, "tokenizer.ggml.pre", &pre, &found, b->err));
    TF_TRY(tf_gguf_get_arr(b->g, "tokenizer.triforce.pre_steps", TF_GGUF_STRING, &steps, &found_steps, b->err));
    snprintf(t->pre_name, sizeof t->pre_name, "%.*s", found ? clip(pre.len) : 7, found ? pre.data : "default");
    *default_add_bos = t->kind == TF_TOK_SPM;
    if (t->kind == TF_TOK_SPM) return TF_OK; /* SPM does not pre-tokenize; the name is informational */
    if (found_steps) {
        TF_TRY(load_normalizer(b));
        return load_pre_steps(b, steps);
    }
    const pre_name *hit = NULL;
    for (size_t i = 0; i < sizeof k_pre_names / sizeof k_pre_names[0]; i++)
        if (!found ? i == 0 : tf_gguf_str_eq(pre, k_pre_names[i].name)) {
            hit = &k_pre_names[i];
            break;
        }
    if (!hit) {
        char list[1024];
        size_t o = 0;
        for (size_t i = 0; i < sizeof k_pre_names / sizeof k_pre_names[0] && o < sizeof list; i++)
            o += (size_t)snprintf(list + o, sizeof list - o, "%s'%s'", i ? ", " : "", k_pre_names[i].name);
        return tf_errf(b->err, TF_ERR_UNSUPPORTED,
                       "%s: tokenizer.ggml.pre = '%.*s' is not a known pre-tokenizer (expected one of %s)",
                       b->g->path, clip(pre.len), pre.data, list);
    }
    t->ignore_merges = hit->ignore_merges;
    TF_TRY(load_normalizer(b));
    *default_add_bos = hit->add_bos;
    return tf_pretok_init(&t->pre, hit->kind, b->err);
}

/* A special-token id key: absent, -1 or 0xFFFFFFFF mean none; anything else
 * must be a token id. */
static tf_status load_special_id(builder *b, const char *key, int32_t *out) {
    int64_t v = -1;
    bool found;
    *out = -1;
    TF_TRY(tf_gguf_get_i64(b->g, key, &v, &found, b->err));
    if (!found || v == -1 || v == (int64_t)UINT32_MAX) return TF_OK;
    if (v < 0 || v >= b->t->n_vocab)
        return tf_errf(b->err, TF_ERR_FORMAT,
                       "%s: metadata key '%s' = %lld is out of range (expected a token id below n_vocab = %d, or "
                       "0xFFFFFFFF for none)",
                       b->g->path, key, (long long)v, b->t->n_vocab);
    *out = (int32_t)v;
    return TF_OK;
}

static tf_status load_flag(builder *b, const char *key, bool *out) {
    bool v, found;
    TF_TRY(tf_gguf_get_bool(b->g, key, &v, &found, b->err));
    if (found) *out = v;
    return TF_OK;
}

static void add_eog(tf_tokenizer *t, int32_t id) {
    if (id < 0) return;
    for (int i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) return;
    if (t->n_eog < TF_TOK_MAX_EOG) t->eog[t->n_eog++] = id;
}

static tf_status load_specials(builder *b, bool default_add_bos) {
    tf_tokenizer *t = b->t;
    TF_TRY(load_special_id(b, "tokenizer.ggml.bos_token_id", &t->bos));
    TF_TRY(load_special_id(b, "tokenizer.ggml.eos_token_id", &t->eos));
    TF_TRY(load_special_id(b, "tokenizer.ggml.unknown_token_id", &t->unk));
    TF_TRY(load_special_id(b, "tokenizer.ggml.padding_token_id", &t->pad));
    TF_TRY(load_special_id(b, "tokenizer.ggml.seperator_token_id", &t->sep)); /* sic, as the converters spell it */
    TF_TRY(load_special_id(b, "tokenizer.ggml.eot_token_id", &t->eot));
    TF_TRY(load_special_id(b, "tokenizer.ggml.eom_token_id", &t->eom));
    if (t->unk < 0)
        for (int32_t i = 0; i < t->n_vocab; i++)
            if (t->types[i] == TF_TOKTYPE_UNKNOWN) {
                t->unk = i;
                break;
            }
    t->add_bos = default_add_bos;
    t->add_eos = false;
    t->add_space_prefix = t->kind == TF_TOK_SPM;
    TF_TRY(load_flag(b, "tokenizer.ggml.add_bos_token", &t->add_bos));
    TF_TRY(load_flag(b, "tokenizer.ggml.add_eos_token", &t->add_eos));
    if (t->kind == TF_TOK_SPM) TF_TRY(load_flag(b, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix));
    if (t->kind == TF_TOK_SPM) TF_TRY(load_space_prefix(b));

    /* End of generation: EOS, EOT, EOM, and the end-of-turn spellings chat
     * models use when the file does not name them. */
    static const char *const k_eog_text[] = {"<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
                                             "<|endoftext|>"};
    add_eog(t, t->eos);
    add_eog(t, t->eot);
    add_eog(t, t->eom);
    for (size_t k = 0; k < sizeof k_eog_text / sizeof k_eog_text[0]; k++) {
        int32_t id = tf_tok_find_token(t, k_eog_text[k], strlen(k_eog_text[k]));
        if (id >= 0 && (t->types[id] == TF_TOKTYPE_CONTROL || t->types[id] == TF_TOKTYPE_USER_DEFINED)) add_eog(t, id);
    }
    return TF_OK;
}

/* See tf_tokenizer.spm_split. */
static void check_spm_split(tf_tokenizer *t) {
    t->spm_split = t->kind == TF_TOK_SPM;
    for (int32_t i = 0; i < t->n_vocab && t->spm_split; i++) {
        const char *s = tf_tok_str(t, i);
        uint32_t n = t->str_len[i];
        for (uint32_t p = 1; p + 3 <= n; p++)
            if (memcmp(s + p, "\xe2\x96\x81", 3) == 0 && (p < 3 || memcmp(s + p - 3, "\xe2\x96\x81", 3) != 0)) {
                t->spm_split = false;
                break;
            }
    }
}

static int special_cmp(const void *pa, const void *pb) {
    const tf_special *a = pa, *b = pb;
    if (a->first != b->first) return a->first < b->first ? -1 : 1;
    if (a->len != b->len) return a->len > b->len ? -1 : 1; /* longest first */
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Control, unknown and user-defined tokens, bucketed by first byte. */
static tf_status build_special_index(builder *b) {
    tf_tokenizer *t = b->t;
    int32_t n = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        uint8_t ty = t->types[i];
        if ((ty == TF_TOKTYPE_CONTROL || ty == TF_TOKTYPE_UNKNOWN || ty == TF_TOKTYPE_USER_DEFINED) && t->str_len[i])
            n++;
    }
    t->specials = malloc((size_t)(n ? n : 1) * sizeof *t->specials);
    if (!t->specials) return nomem(b, "special tokens");
    int32_t k = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        uint8_t ty = t->types[i];
        if (!((ty == TF_TOKTYPE_CONTROL || ty == TF_TOKTYPE_UNKNOWN || ty == TF_TOKTYPE_USER_DEFINED) && t->str_len[i]))
            continue;
        t->specials[k++] = (tf_special){.id = i,
                                        .len = t->str_len[i],
                                        .first = (unsigned char)tf_tok_str(t, i)[0],
                                        .always = ty == TF_TOKTYPE_USER_DEFINED};
        if (ty == TF_TOKTYPE_USER_DEFINED) t->n_always++;
    }
    qsort(t->specials, (size_t)n, sizeof *t->specials, special_cmp);
    t->n_specials = n;
    k = 0;
    for (int c = 0; c <= 256; c++) {
        while (k < n && t->specials[k].first < c) k++;
        t->special_start[c] = (uint32_t)k;
    }
    return TF_OK;
}

static void build_describe(tf_tokenizer *t, tf_gguf_str model) {
    if (t->kind == TF_TOK_SPM)
        snprintf(t->describe, sizeof t->describe, "%.*s (SPM), %d tokens, pre=%s", clip(model.len), model.data,
                 t->n_vocab, t->pre_name);
    else
        snprintf(t->describe, sizeof t->describe, "%.*s (BPE), %d tokens, %d merges, pre=%s", clip(model.len),
                 model.data, t->n_vocab, t->n_merges, t->pre_name);
}

tf_status tf_tokenizer_from_gguf(tf_tokenizer **out, const tf_gguf *g, tf_err *err) {
    if (!out || !g) return tf_errf(err, TF_ERR_INVALID_ARG, "tf_tokenizer_from_gguf: NULL argument");
    *out = NULL;
    tf_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return tf_errf(err, TF_ERR_NOMEM, "%s: out of memory for the tokenizer", g->path);
    builder b = {.t = t, .g = g, .err = err};
    tf_gguf_str model = {0};
    bool default_add_bos = false;
    tf_status st = load_model(&b, &model);
    if (st == TF_OK) st = load_tokens(&b);
    if (st == TF_OK) st = load_merges(&b);
    if (st == TF_OK) st = load_pre(&b, &default_add_bos);
    if (st == TF_OK) st = load_bytes(&b);
    if (st == TF_OK) st = load_specials(&b, default_add_bos);
    if (st == TF_OK) st = build_special_index(&b);
    if (st != TF_OK) {
        tf_tokenizer_free(t);
        return st;
    }
    check_spm_split(t);
    build_describe(t, model);
    *out = t;
    return TF_OK;
}

void tf_tokenizer_free(tf_tokenizer *tok) {
    if (!tok) return;
    tf_pretok_free(&tok->pre);
    free(tok->pool);
    free(tok->str_off);
    free(tok->str_len);
    free(tok->scores);
    free(tok->types);
    free(tok->tok_byte);
    free(tok->hash_slot);
    free(tok->hash_val);
    free(tok->merge_a);
    free(tok->merge_b);
    free(tok->merge_out);
    free(tok->merge_slot);
    free(tok->specials);
    free(tok);
}

/* ------------------------------------------------------------------------ */
/* accessors                                                                 */

tf_tok_kind tf_tokenizer_kind(const tf_tokenizer *tok) { return tok->kind; }
int32_t tf_tokenizer_n_vocab(const tf_tokenizer *tok) { return tok->n_vocab; }
int32_t tf_tokenizer_bos(const tf_tokenizer *tok) { return tok->bos; }
int32_t tf_tokenizer_eos(const tf_tokenizer *tok) { return tok->eos; }
bool tf_tokenizer_add_bos(const tf_tokenizer *tok) { return tok->add_bos && tok->bos >= 0; }
bool tf_tokenizer_add_eos(const tf_tokenizer *tok) { return tok->add_eos && tok->eos >= 0; }
const char *tf_tokenizer_describe(const tf_tokenizer *tok) { return tok->describe; }

bool tf_tokenizer_is_eog(const tf_tokenizer *tok, int32_t id) {
    for (int i = 0; i < tok->n_eog; i++)
        if (tok->eog[i] == id) return true;
    return false;
}

const char *tf_token_text(const tf_tokenizer *tok, int32_t id) {
    if (id < 0 || id >= tok->n_vocab) return NULL;
    return tf_tok_str(tok, id);
}
