/*
 * hf_tokjson.c — GGUF vocabulary -> tokenizer.json text (see hf_tokjson.h).
 * Test code: failures print to stderr and return false.
 */
#include "hf_tokjson.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPACE "\xe2\x96\x81" /* U+2581 */

enum { T_NORMAL = 1, T_UNKNOWN = 2, T_CONTROL = 3, T_USER = 4, T_UNUSED = 5, T_BYTE = 6 };

typedef struct vocab {
    int32_t n;
    char **text;   /* (n) NUL-terminated copies */
    size_t *len;   /* (n) */
    float *score;  /* (n) 0 where the file has none */
    int32_t *type; /* (n) */
    int32_t *slot; /* string hash over model.vocab tokens, -1 empty */
    uint32_t mask;
} vocab;

static uint32_t hash(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

/* Control and user-defined tokens live in added_tokens only. */
static bool in_model(const vocab *v, int32_t id) { return v->type[id] != T_CONTROL && v->type[id] != T_USER; }

static int32_t find(const vocab *v, const char *s, size_t n) {
    for (uint32_t i = hash(s, n) & v->mask;; i = (i + 1) & v->mask) {
        int32_t id = v->slot[i];
        if (id < 0) return -1;
        if (v->len[id] == n && memcmp(v->text[id], s, n) == 0) return id;
    }
}

static void vocab_free(vocab *v) {
    for (int32_t i = 0; i < v->n && v->text; i++) free(v->text[i]);
    free(v->text);
    free(v->len);
    free(v->score);
    free(v->type);
    free(v->slot);
}

static bool vocab_load(vocab *v, const tf_gguf *g) {
    const tf_gguf_kv *toks = tf_gguf_find_kv(g, "tokenizer.ggml.tokens");
    const tf_gguf_kv *scores = tf_gguf_find_kv(g, "tokenizer.ggml.scores");
    const tf_gguf_kv *types = tf_gguf_find_kv(g, "tokenizer.ggml.token_type");
    if (!toks || !toks->arr_str || !types) {
        fprintf(stderr, "hf_tokjson: %s has no tokenizer.ggml.tokens/token_type\n", g->path);
        return false;
    }
    v->n = (int32_t)toks->arr_n;
    v->text = calloc((size_t)v->n, sizeof *v->text);
    v->len = calloc((size_t)v->n, sizeof *v->len);
    v->score = calloc((size_t)v->n, sizeof *v->score);
    v->type = calloc((size_t)v->n, sizeof *v->type);
    v->mask = 15;
    while (v->mask + 1 < 2u * (uint32_t)v->n) v->mask = v->mask * 2 + 1;
    v->slot = malloc(((size_t)v->mask + 1) * sizeof *v->slot);
    if (!v->text || !v->len || !v->score || !v->type || !v->slot) return false;
    memset(v->slot, 0xff, ((size_t)v->mask + 1) * sizeof *v->slot);
    for (int32_t i = 0; i < v->n; i++) {
        v->len[i] = (size_t)toks->arr_str[i].len;
        v->text[i] = malloc(v->len[i] + 1);
        if (!v->text[i]) return false;
        memcpy(v->text[i], toks->arr_str[i].data, v->len[i]);
        v->text[i][v->len[i]] = '\0';
        v->score[i] = scores ? (float)tf_gguf_arr_float(scores, (uint64_t)i) : 0.0f;
        v->type[i] = (int32_t)tf_gguf_arr_int(types, (uint64_t)i);
        if (!in_model(v, i) || find(v, v->text[i], v->len[i]) >= 0) continue;
        uint32_t k = hash(v->text[i], v->len[i]) & v->mask;
        while (v->slot[k] >= 0) k = (k + 1) & v->mask;
        v->slot[k] = i;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* SPM merges                                                                */

typedef struct merge {
    int32_t a, b, out;
} merge;

static const vocab *g_sort_vocab; /* qsort has no user pointer */

/* HF's SentencePiece converter order: score of the result (highest first),
 * then the result's id, then the parts' ids. */
static int merge_cmp(const void *pa, const void *pb) {
    const merge *x = pa, *y = pb;
    const vocab *v = g_sort_vocab;
    if (v->score[x->out] != v->score[y->out]) return v->score[x->out] > v->score[y->out] ? -1 : 1;
    if (x->out != y->out) return x->out < y->out ? -1 : 1;
    if (x->a != y->a) return x->a < y->a ? -1 : 1;
    return (x->b > y->b) - (x->b < y->b);
}

/* Every split of every model.vocab piece at a character boundary into two
 * model.vocab pieces, sorted into rank order. */
static merge *spm_merges(const vocab *v, size_t *n_out) {
    size_t n = 0, cap = 1024;
    merge *m = malloc(cap * sizeof *m);
    for (int32_t t = 0; m && t < v->n; t++) {
        if (!in_model(v, t)) continue;
        const char *s = v->text[t];
        for (size_t k = 1; k < v->len[t]; k++) {
            if (((unsigned char)s[k] & 0xC0) == 0x80) continue; /* inside a character */
            int32_t a = find(v, s, k), b = find(v, s + k, v->len[t] - k);
            if (a < 0 || b < 0) continue;
            if (n == cap) {
                merge *p = realloc(m, (cap *= 2) * sizeof *m);
                if (!p) {
                    free(m);
                    return NULL;
                }
                m = p;
            }
            m[n++] = (merge){a, b, t};
        }
    }
    if (!m) return NULL;
    g_sort_vocab = v;
    qsort(m, n, sizeof *m, merge_cmp);
    *n_out = n;
    return m;
}

/* ------------------------------------------------------------------------ */
/* JSON                                                                      */

static cJSON *obj_type(const char *type) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", type);
    return o;
}

static cJSON *replace(const char *from, const char *to) {
    cJSON *o = obj_type("Replace"), *p = cJSON_AddObjectToObject(o, "pattern");
    cJSON_AddStringToObject(p, "String", from);
    cJSON_AddStringToObject(o, "content", to);
    return o;
}

static cJSON *byte_level(bool use_regex) {
    cJSON *o = obj_type("ByteLevel");
    cJSON_AddBoolToObject(o, "add_prefix_space", false);
    cJSON_AddBoolToObject(o, "trim_offsets", true);
    cJSON_AddBoolToObject(o, "use_regex", use_regex);
    return o;
}

static void add_merge(cJSON *arr, const char *a, size_t na, const char *b, size_t nb, bool pairs) {
    char *s = malloc(na + nb + 2);
    memcpy(s, a, na);
    s[na] = ' ';
    memcpy(s + na + 1, b, nb);
    s[na + 1 + nb] = '\0';
    if (!pairs) {
        cJSON_AddItemToArray(arr, cJSON_CreateString(s));
    } else {
        s[na] = '\0';
        cJSON *p = cJSON_CreateArray();
        cJSON_AddItemToArray(p, cJSON_CreateString(s));
        cJSON_AddItemToArray(p, cJSON_CreateString(s + na + 1));
        cJSON_AddItemToArray(arr, p);
    }
    free(s);
}

/* TemplateProcessing: "single" = [BOS] A [EOS] as the flags say. */
static cJSON *template(const vocab *v, int64_t bos, int64_t eos, bool add_bos, bool add_eos) {
    cJSON *o = obj_type("TemplateProcessing"), *single = cJSON_AddArrayToObject(o, "single");
    cJSON *sp = cJSON_AddObjectToObject(o, "special_tokens");
    for (int k = 0; k < 3; k++) {
        int64_t id = k == 0 ? bos : eos;
        if ((k == 0 && !add_bos) || (k == 2 && !add_eos)) continue;
        cJSON *item = cJSON_CreateObject(), *inner = cJSON_AddObjectToObject(item, k == 1 ? "Sequence" : "SpecialToken");
        cJSON_AddStringToObject(inner, "id", k == 1 ? "A" : v->text[id]);
        cJSON_AddNumberToObject(inner, "type_id", 0);
        cJSON_AddItemToArray(single, item);
        if (k == 1) continue;
        cJSON *st = cJSON_AddObjectToObject(sp, v->text[id]), *ids = cJSON_AddArrayToObject(st, "ids");
        cJSON_AddStringToObject(st, "id", v->text[id]);
        cJSON_AddItemToArray(ids, cJSON_CreateNumber((double)id));
    }
    return o;
}

static int64_t key_int(const tf_gguf *g, const char *key) {
    int64_t v = -1;
    bool found;
    tf_err err = {0};
    if (tf_gguf_get_i64(g, key, &v, &found, &err) != TF_OK || !found) return -1;
    return v == 0xFFFFFFFF ? -1 : v;
}

static bool key_bool(const tf_gguf *g, const char *key, bool dflt) {
    bool v = dflt, found;
    tf_err err = {0};
    if (tf_gguf_get_bool(g, key, &v, &found, &err) != TF_OK || !found) return dflt;
    return v;
}

bool tu_hf_tokjson_from_gguf(const tf_gguf *g, const tu_hf_opts *opts, char **tokenizer_json, char **config_json) {
    static const tu_hf_opts k_default;
    if (!opts) opts = &k_default;
    *tokenizer_json = *config_json = NULL;
    tf_gguf_str model_name = {0};
    tf_err err = {0};
    if (tf_gguf_get_str(g, "tokenizer.ggml.model", &model_name, NULL, &err) != TF_OK) {
        fprintf(stderr, "hf_tokjson: %s\n", err.msg);
        return false;
    }
    bool spm = tf_gguf_str_eq(model_name, "llama");
    if (!spm && !tf_gguf_str_eq(model_name, "gpt2")) {
        fprintf(stderr, "hf_tokjson: %s: tokenizer.ggml.model is neither llama nor gpt2\n", g->path);
        return false;
    }
    vocab v = {0};
    if (!vocab_load(&v, g)) {
        vocab_free(&v);
        return false;
    }
    int64_t bos = key_int(g, "tokenizer.ggml.bos_token_id"), eos = key_int(g, "tokenizer.ggml.eos_token_id");
    int64_t unk = key_int(g, "tokenizer.ggml.unknown_token_id");
    bool add_bos = key_bool(g, "tokenizer.ggml.add_bos_token", spm), add_eos = key_bool(g, "tokenizer.ggml.add_eos_token", false);

    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "version", "1.0");
    cJSON_AddNullToObject(root, "truncation");
    cJSON_AddNullToObject(root, "padding");
    cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
    for (int32_t i = 0; i < v.n; i++) {
        if (in_model(&v, i) && i != unk) continue;
        cJSON *a = cJSON_CreateObject();
        cJSON_AddNumberToObject(a, "id", i);
        cJSON_AddStringToObject(a, "content", v.text[i]);
        cJSON_AddBoolToObject(a, "single_word", false);
        cJSON_AddBoolToObject(a, "lstrip", false);
        cJSON_AddBoolToObject(a, "rstrip", false);
        cJSON_AddBoolToObject(a, "normalized", v.type[i] == T_USER);
        cJSON_AddBoolToObject(a, "special", v.type[i] != T_USER);
        cJSON_AddItemToArray(added, a);
    }
    cJSON *model = cJSON_CreateObject();
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddNullToObject(model, "dropout");
    if (spm && unk >= 0) cJSON_AddStringToObject(model, "unk_token", v.text[unk]);
    else cJSON_AddNullToObject(model, "unk_token");
    cJSON_AddStringToObject(model, "continuing_subword_prefix", "");
    cJSON_AddNullToObject(model, "end_of_word_suffix");
    cJSON_AddBoolToObject(model, "fuse_unk", spm);
    cJSON_AddBoolToObject(model, "byte_fallback", spm);
    cJSON_AddBoolToObject(model, "ignore_merges", false);
    cJSON *jv = cJSON_AddObjectToObject(model, "vocab");
    /* SentencePiece files (Llama 2's) list their control tokens in model.vocab too, at their ids (without
     * that, tokenizers gives added tokens that are missing from the model new ids after the vocabulary) */
    for (int32_t i = 0; i < v.n; i++)
        if (in_model(&v, i) || (spm && v.type[i] == T_CONTROL)) cJSON_AddNumberToObject(jv, v.text[i], i);
    cJSON *jm = cJSON_AddArrayToObject(model, "merges");
    bool ok = true;
    if (spm) {
        size_t n_m = 0;
        merge *m = spm_merges(&v, &n_m);
        ok = m != NULL;
        for (size_t i = 0; i < n_m; i++)
            add_merge(jm, v.text[m[i].a], v.len[m[i].a], v.text[m[i].b], v.len[m[i].b], opts->merge_pairs);
        free(m);
    } else {
        const tf_gguf_kv *mk = tf_gguf_find_kv(g, "tokenizer.ggml.merges");
        for (uint64_t i = 0; mk && mk->arr_str && i < mk->arr_n; i++) {
            const char *s = mk->arr_str[i].data, *sp = memchr(s + 1, ' ', mk->arr_str[i].len - 1);
            add_merge(jm, s, (size_t)(sp - s), sp + 1, mk->arr_str[i].len - (size_t)(sp - s) - 1, opts->merge_pairs);
        }
    }

    if (spm) {
        cJSON *dec = obj_type("Sequence"), *ds = cJSON_AddArrayToObject(dec, "decoders");
        if (opts->spm_style == TU_HF_SPM_NORMALIZER) {
            cJSON *norm = obj_type("Sequence"), *ns = cJSON_AddArrayToObject(norm, "normalizers");
            cJSON *pre = obj_type("Prepend");
            cJSON_AddStringToObject(pre, "prepend", SPACE);
            cJSON_AddItemToArray(ns, pre);
            cJSON_AddItemToArray(ns, replace(" ", SPACE));
            cJSON_AddItemToObject(root, "normalizer", norm);
            cJSON_AddNullToObject(root, "pre_tokenizer");
            cJSON_AddItemToArray(ds, replace(SPACE, " "));
        } else {
            cJSON *ms = obj_type("Metaspace");
            cJSON_AddStringToObject(ms, "replacement", SPACE);
            if (opts->spm_style == TU_HF_SPM_METASPACE) cJSON_AddStringToObject(ms, "prepend_scheme", "first");
            else cJSON_AddBoolToObject(ms, "add_prefix_space", true);
            cJSON_AddBoolToObject(ms, "split", false);
            cJSON_AddNullToObject(root, "normalizer");
            cJSON_AddItemToObject(root, "pre_tokenizer", ms);
            cJSON_AddItemToArray(ds, cJSON_Duplicate(ms, true));
        }
        cJSON_AddItemToArray(ds, obj_type("ByteFallback"));
        cJSON_AddItemToArray(ds, obj_type("Fuse"));
        if (opts->spm_style == TU_HF_SPM_NORMALIZER) {
            cJSON *strip = obj_type("Strip");
            cJSON_AddStringToObject(strip, "content", " ");
            cJSON_AddNumberToObject(strip, "start", 1);
            cJSON_AddNumberToObject(strip, "stop", 0);
            cJSON_AddItemToArray(ds, strip);
        }
        cJSON_AddItemToObject(root, "post_processor", template(&v, bos, eos, add_bos && bos >= 0, add_eos && eos >= 0));
        cJSON_AddItemToObject(root, "decoder", dec);
    } else {
        cJSON_AddNullToObject(root, "normalizer");
        if (opts->split_regex) {
            cJSON *seq = obj_type("Sequence"), *items = cJSON_AddArrayToObject(seq, "pretokenizers");
            cJSON *split = obj_type("Split"), *pat = cJSON_AddObjectToObject(split, "pattern");
            cJSON_AddStringToObject(pat, "Regex",
                                    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+");
            cJSON_AddStringToObject(split, "behavior", "Isolated");
            cJSON_AddBoolToObject(split, "invert", false);
            cJSON_AddItemToArray(items, split);
            cJSON_AddItemToArray(items, byte_level(false));
            cJSON_AddItemToObject(root, "pre_tokenizer", seq);
        } else {
            cJSON_AddItemToObject(root, "pre_tokenizer", byte_level(true));
        }
        cJSON_AddItemToObject(root, "post_processor", byte_level(true));
        cJSON_AddItemToObject(root, "decoder", byte_level(true));
    }
    cJSON_AddItemToObject(root, "model", model);

    cJSON *cfg = cJSON_CreateObject();
    cJSON_AddBoolToObject(cfg, "add_bos_token", add_bos);
    cJSON_AddBoolToObject(cfg, "add_eos_token", add_eos);
    if (bos >= 0) cJSON_AddStringToObject(cfg, "bos_token", v.text[bos]); /* the plain spelling */
    if (eos >= 0) {                                                       /* the object spelling */
        cJSON *e = cJSON_AddObjectToObject(cfg, "eos_token");
        cJSON_AddStringToObject(e, "__type", "AddedToken");
        cJSON_AddStringToObject(e, "content", v.text[eos]);
    }
    cJSON_AddNullToObject(cfg, "pad_token");
    *tokenizer_json = ok ? cJSON_PrintUnformatted(root) : NULL;
    *config_json = ok ? cJSON_Print(cfg) : NULL;
    cJSON_Delete(root);
    cJSON_Delete(cfg);
    vocab_free(&v);
    if (!*tokenizer_json || !*config_json) {
        free(*tokenizer_json);
        free(*config_json);
        *tokenizer_json = *config_json = NULL;
        fprintf(stderr, "hf_tokjson: out of memory\n");
        return false;
    }
    return true;
}
