/*
 * hf_tokenizer.c — Hugging Face tokenizer.json -> tokenizer.ggml.* keys.
 *
 * Steps, each validating what it reads (cJSON does the parsing):
 *   1. tokens: model.vocab and added_tokens into one id-indexed table (ids
 *      0..n-1, no gaps, no duplicate ids, added tokens agreeing with vocab);
 *   2. family: normalizer + pre_tokenizer + decoder must spell exactly one of
 *      the two supported families (SentencePiece-style or byte-level); a
 *      byte-level pre-tokenizer becomes a program of steps (pretok.c),
 *      named by tokenizer.ggml.pre when it equals a built-in set;
 *   3. merges: both spellings ("a b" and ["a", "b"]), every part and result a
 *      model.vocab token; a pair listed twice keeps its last rank, as HF does;
 *   4. specials: post_processor template, then tokenizer_config.json;
 *   5. the keys are written; on any failure none of them stay in the writer.
 *
 * SPM scores: HF merges the pair with the lowest merge rank; the "llama"
 * tokenizer merges the pair whose result has the highest score. A token
 * produced by merges of ranks r1 < r2 < ... gets score -r1, every other
 * token a score below all merges, so both orders agree (see
 * docs/TOKENIZER.md for the remaining corner cases).
 */
#include "tokenizer/hf_tokenizer.h"

#include "core/mem.h"
#include "format/json.h"
#include "tokenizer/tok_internal.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPM_SPACE "\xe2\x96\x81" /* U+2581 "▁" */
#define MAX_MERGES (1 << 24)     /* ranks stay exact as float scores */

typedef struct hf_ctx {
    const char *name; /* tokenizer.json, for messages */
    tf_err *err;
    /* tokens by id: text points into the cJSON tree (NUL-terminated) */
    int32_t n, cap;
    const char **text; /* (cap) NULL = no token with this id (yet) */
    uint32_t *len;     /* (cap) */
    uint8_t *type;     /* (cap) TF_TOKTYPE_* */
    uint8_t *in_model; /* (cap) 1 if listed in model.vocab */
    int32_t *hslot;    /* string -> id, open addressing; -1 = empty */
    uint32_t hmask;
    /* merges: parts and result; drop = a later entry repeats the pair */
    int32_t n_merges;
    int32_t *ma, *mb, *mo;
    uint8_t *drop;
    /* what the file says */
    bool spm, byte_fallback, add_space_prefix, ignore_merges, nfc;
    const char *space_prefix; /* Metaspace's prepend scheme: "first", "always"; NULL: llama.cpp's rule */
    const char *pre;
    char *steps[TF_PRETOK_MAX_STEPS]; /* byte-level pre-tokenizer program (malloc'd spellings, see pretok.c) */
    int n_steps;
    bool write_steps;                 /* no tokenizer.ggml.pre name stands for the program */
    int add_bos, add_eos;           /* -1 = not known */
    const char *chat_template;      /* tokenizer_config.json's, into the parsed JSON; NULL: none */
    int32_t bos, eos, unk, pad;     /* -1 = none */
} hf_ctx;

/* ------------------------------------------------------------------------ */
/* messages and JSON access                                                  */

/* Record an error "<file>: <message>" (file NULL: the tokenizer.json). */
__attribute__((format(printf, 4, 5))) static tf_status fail(hf_ctx *c, const char *file, tf_status st,
                                                            const char *fmt, ...) {
    char msg[TF_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tf_errf(c->err, st, "%s: %s", file ? file : c->name, msg);
}

static const char *jtype(const cJSON *v) {
    return !v ? "missing" : cJSON_IsNull(v) ? "null" : cJSON_IsBool(v) ? "a boolean" : cJSON_IsNumber(v) ? "a number"
           : cJSON_IsString(v) ? "a string" : cJSON_IsArray(v) ? "an array" : "an object";
}

/* Member key of obj (NULL if absent or obj is not an object). */
static const cJSON *member(const cJSON *obj, const char *key) {
    return cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
}

static bool absent(const cJSON *v) { return !v || cJSON_IsNull(v); }

/* String member (NULL when absent or null); another type is an error. */
static tf_status get_str(hf_ctx *c, const cJSON *obj, const char *key, const char *path, const char **out) {
    const cJSON *v = member(obj, key);
    *out = NULL;
    if (absent(v)) return TF_OK;
    if (!cJSON_IsString(v))
        return fail(c, NULL, TF_ERR_FORMAT, "%s.%s is %s (expected a string)", path, key, jtype(v));
    *out = v->valuestring;
    return TF_OK;
}

/* Boolean member, *out unchanged when absent or null. */
static tf_status get_bool(hf_ctx *c, const char *file, const cJSON *obj, const char *key, const char *path, int *out) {
    const cJSON *v = member(obj, key);
    if (absent(v)) return TF_OK;
    if (!cJSON_IsBool(v))
        return fail(c, file, TF_ERR_FORMAT, "%s%s%s is %s (expected true or false)", path, *path ? "." : "", key,
                    jtype(v));
    *out = cJSON_IsTrue(v);
    return TF_OK;
}

/* "type" of a component at path; NULL component -> "" (none). */
static tf_status get_type(hf_ctx *c, const cJSON *v, const char *path, const char **out) {
    *out = "";
    if (absent(v)) return TF_OK;
    if (!cJSON_IsObject(v)) return fail(c, NULL, TF_ERR_FORMAT, "%s is %s (expected an object)", path, jtype(v));
    TF_TRY(get_str(c, v, "type", path, out));
    if (!*out) return fail(c, NULL, TF_ERR_FORMAT, "%s.type is missing (expected a string)", path);
    return TF_OK;
}

/* An integral JSON number in 0..INT32_MAX. */
static bool json_id(const cJSON *v, int64_t *out) {
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0 || v->valuedouble > INT32_MAX ||
        v->valuedouble != floor(v->valuedouble))
        return false;
    *out = (int64_t)v->valuedouble;
    return true;
}

/* ------------------------------------------------------------------------ */
/* the token table                                                           */

static uint32_t hash_str(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return (uint32_t)(h ^ (h >> 32));
}

/* Id of the token s[0..n), or -1. */
static int32_t lookup(const hf_ctx *c, const char *s, size_t n) {
    for (uint32_t i = hash_str(s, n) & c->hmask;; i = (i + 1) & c->hmask) {
        int32_t id = c->hslot[i];
        if (id < 0) return -1;
        if (c->len[id] == n && memcmp(c->text[id], s, n) == 0) return id;
    }
}

/* Put token id (text already set) into the hash; the caller checked that
 * its text is not there yet. The table has twice as many slots as ids. */
static void hash_insert(hf_ctx *c, int32_t id) {
    uint32_t i = hash_str(c->text[id], c->len[id]) & c->hmask;
    while (c->hslot[i] >= 0) i = (i + 1) & c->hmask;
    c->hslot[i] = id;
}

/* Claim slot id for text s (from `where`, an element of model.vocab or
 * added_tokens) unless the id or the text is taken. */
static tf_status place(hf_ctx *c, int64_t id, const char *s, const char *where, bool model) {
    if (id >= c->cap)
        return fail(c, NULL, TF_ERR_FORMAT,
                    "%s: token '%.60s' has id %lld, but there are only %d entries, so ids must run 0..%d without "
                    "gaps", where, s, (long long)id, c->cap, c->cap - 1);
    size_t n = strlen(s);
    int32_t other = lookup(c, s, n);
    if (c->text[id]) {
        if (model || !c->in_model[id])
            return fail(c, NULL, TF_ERR_FORMAT, "%s: id %lld is given to both '%.60s' and '%.60s' (expected unique ids)",
                        where, (long long)id, c->text[id], s);
        if (strcmp(c->text[id], s) != 0)
            return fail(c, NULL, TF_ERR_FORMAT,
                        "%s: added token '%.60s' with id %lld contradicts model.vocab, where id %lld is '%.60s'",
                        where, s, (long long)id, (long long)id, c->text[id]);
        return TF_OK;
    }
    if (other >= 0)
        return fail(c, NULL, TF_ERR_FORMAT, "%s: token '%.60s' has id %lld but already has id %d (expected one id per "
                    "token)", where, s, (long long)id, other);
    c->text[id] = s;
    c->len[id] = (uint32_t)n;
    c->type[id] = TF_TOKTYPE_NORMAL;
    c->in_model[id] = model;
    hash_insert(c, (int32_t)id);
    if (id >= c->n) c->n = (int32_t)id + 1;
    return TF_OK;
}

/* model.vocab (object text -> id) and added_tokens (array of {id, content,
 * special}) into the table; then every id below the largest must be used. */
static tf_status load_tokens(hf_ctx *c, const cJSON *model, const cJSON *added) {
    const cJSON *vocab = member(model, "vocab");
    if (!cJSON_IsObject(vocab))
        return fail(c, NULL, TF_ERR_FORMAT, "model.vocab is %s (expected an object mapping token text to id)",
                    jtype(vocab));
    if (!absent(added) && !cJSON_IsArray(added))
        return fail(c, NULL, TF_ERR_FORMAT, "added_tokens is %s (expected an array)", jtype(added));
    int64_t nv = cJSON_GetArraySize(vocab), na = absent(added) ? 0 : cJSON_GetArraySize(added);
    if (nv + na == 0) return fail(c, NULL, TF_ERR_FORMAT, "model.vocab and added_tokens are empty (expected tokens)");
    if (nv + na > INT32_MAX / 4)
        return fail(c, NULL, TF_ERR_FORMAT, "%lld tokens (expected at most %d)", (long long)(nv + na), INT32_MAX / 4);
    c->cap = (int32_t)(nv + na);
    uint32_t slots = 16;
    while (slots < 2u * (uint32_t)c->cap) slots <<= 1;
    c->text = calloc((size_t)c->cap, sizeof *c->text);
    c->len = calloc((size_t)c->cap, sizeof *c->len);
    c->type = calloc((size_t)c->cap, 1);
    c->in_model = calloc((size_t)c->cap, 1);
    c->hslot = malloc(slots * sizeof *c->hslot);
    if (!c->text || !c->len || !c->type || !c->in_model || !c->hslot)
        return fail(c, NULL, TF_ERR_NOMEM, "out of memory for %d tokens", c->cap);
    memset(c->hslot, 0xff, slots * sizeof *c->hslot);
    c->hmask = slots - 1;

    char where[128];
    for (const cJSON *e = vocab->child; e; e = e->next) {
        int64_t id;
        snprintf(where, sizeof where, "model.vocab['%.60s']", e->string);
        if (!json_id(e, &id))
            return fail(c, NULL, TF_ERR_FORMAT, "%s is %s%s (expected an integer id 0..%d)", where, jtype(e),
                        cJSON_IsNumber(e) ? " out of range or fractional" : "", c->cap - 1);
        TF_TRY(place(c, id, e->string, where, true));
    }
    int k = 0;
    for (const cJSON *e = absent(added) ? NULL : added->child; e; e = e->next, k++) {
        snprintf(where, sizeof where, "added_tokens[%d]", k);
        const cJSON *vid = member(e, "id"), *vc = member(e, "content");
        int special = 0;
        int64_t id;
        if (!cJSON_IsObject(e) || !json_id(vid, &id) || !cJSON_IsString(vc))
            return fail(c, NULL, TF_ERR_FORMAT, "%s is %s with id %s and content %s (expected an object with an "
                        "integer id 0..%d and a string content)", where, jtype(e), jtype(vid), jtype(vc), c->cap - 1);
        TF_TRY(get_bool(c, NULL, e, "special", where, &special));
        TF_TRY(place(c, id, vc->valuestring, where, false));
        c->type[id] = special ? TF_TOKTYPE_CONTROL : TF_TOKTYPE_USER_DEFINED;
    }
    for (int32_t i = 0; i < c->n; i++)
        if (!c->text[i])
            return fail(c, NULL, TF_ERR_FORMAT,
                        "no token has id %d (ids must run 0..%d without gaps; model.vocab has %lld entries, "
                        "added_tokens %lld)", i, c->n - 1, (long long)nv, (long long)na);
    return TF_OK;
}

/* ------------------------------------------------------------------------ */
/* the family: model options, normalizer, pre-tokenizer, decoder             */

/* Llama 3's and Qwen2's regexes as tokenizer.json spells them (with
 * (?i:...), where the built-in sets spell the classes out), and the
 * tokenizer.ggml.pre names with and without model.ignore_merges. */
static const struct {
    const char *regex, *pre, *pre_ignore_merges;
} k_regex[] = {
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
     "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", "smaug-bpe", "llama-bpe"},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
     "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", "qwen2", NULL},
};

/* The tokenizer.ggml.pre name written for a program equal to a built-in
 * set (tf_pre_kind). */
static const char *const k_set_name[TF_PRE_COUNT] = {
    [TF_PRE_GPT2] = "gpt-2",           [TF_PRE_LLAMA3] = "smaug-bpe", [TF_PRE_QWEN2] = "qwen2",
    [TF_PRE_DEEPSEEK_LLM] = "deepseek-llm", [TF_PRE_DEEPSEEK_CODER] = "deepseek-coder",
    [TF_PRE_FALCON] = "falcon",        [TF_PRE_STARCODER] = "starcoder",
};

/* GPT-2's regex, which ByteLevel with use_regex applies. */
#define GPT2_REGEX "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

/* tokenizer.ggml.pre for a program written for tf_tokenizer_from_gguf only. */
#define PROGRAM_PRE_NAME "triforce-steps"

/* What the components say, gathered item by item. */
typedef struct family {
    bool nfc, prepend, replace;                /* normalizer */
    bool byte_level, metaspace;                /* pre-tokenizer */
    bool ms_prepend, ms_split, ms_first;
    bool dec_space, dec_bytes, dec_level;      /* decoder: "▁" -> " ", ByteFallback, ByteLevel */
    bool flags_given;                          /* tokenizer_config.json has both add_*_token */
} family;

/* model.type must be BPE; options that change results must be off. */
static tf_status check_model(hf_ctx *c, const cJSON *model) {
    if (!cJSON_IsObject(model)) return fail(c, NULL, TF_ERR_FORMAT, "model is %s (expected an object)", jtype(model));
    const char *type, *s;
    TF_TRY(get_str(c, model, "type", "model", &type));
    if (type && strcmp(type, "BPE") != 0)
        return fail(c, NULL, TF_ERR_UNSUPPORTED, "model.type '%.60s' is not supported (expected 'BPE')", type);
    if (!type && !cJSON_IsArray(member(model, "merges")))
        return fail(c, NULL, TF_ERR_FORMAT, "model.type is missing (expected 'BPE')");
    const cJSON *dropout = member(model, "dropout");
    if (!absent(dropout) && !(cJSON_IsNumber(dropout) && dropout->valuedouble == 0))
        return fail(c, NULL, TF_ERR_UNSUPPORTED, "model.dropout is %s (expected null: dropout is random)",
                    jtype(dropout));
    static const char *const k_affix[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        TF_TRY(get_str(c, model, k_affix[i], "model", &s));
        if (s && *s)
            return fail(c, NULL, TF_ERR_UNSUPPORTED, "model.%s = '%.60s' is not supported (expected null or '')",
                        k_affix[i], s);
    }
    int bf = 0, im = 0;
    TF_TRY(get_bool(c, NULL, model, "byte_fallback", "model", &bf));
    TF_TRY(get_bool(c, NULL, model, "ignore_merges", "model", &im));
    c->byte_fallback = bf, c->ignore_merges = im;
    TF_TRY(get_str(c, model, "unk_token", "model", &s));
    if (s && ((c->unk = lookup(c, s, strlen(s))) < 0 || !c->in_model[c->unk]))
        return fail(c, NULL, TF_ERR_FORMAT, "model.unk_token '%.60s' is not in model.vocab", s);
    return TF_OK;
}

/* Checks one component (never a Sequence) at path; index: its place in a
 * Sequence (0 when alone); an absent component has type "". */
typedef tf_status (*item_fn)(hf_ctx *c, const cJSON *v, const char *type, const char *path, int index, family *f);

/* fn on component v, or on each item of its `list` when it is a Sequence
 * (nested Sequences are refused). */
static tf_status walk(hf_ctx *c, const cJSON *v, const char *path, const char *list, item_fn fn, family *f) {
    const char *type;
    TF_TRY(get_type(c, v, path, &type));
    if (strcmp(type, "Sequence")) return fn(c, v, type, path, 0, f);
    const cJSON *items = member(v, list);
    if (!cJSON_IsArray(items))
        return fail(c, NULL, TF_ERR_FORMAT, "%s.%s is %s (expected an array)", path, list, jtype(items));
    int i = 0;
    for (const cJSON *e = items->child; e; e = e->next, i++) {
        char p[96];
        snprintf(p, sizeof p, "%s.%s[%d]", path, list, i);
        TF_TRY(get_type(c, e, p, &type));
        if (!strcmp(type, "Sequence"))
            return fail(c, NULL, TF_ERR_UNSUPPORTED, "%s: nested Sequence (expected a flat list)", p);
        TF_TRY(fn(c, e, type, p, i, f));
    }
    return TF_OK;
}

/* Normalizers: NFC (byte-level), Prepend("▁") and Replace(" " -> "▁") (SPM). */
static tf_status normalizer_item(hf_ctx *c, const cJSON *v, const char *type, const char *path, int index,
                                 family *f) {
    const char *s = NULL, *pat = NULL;
    if (!strcmp(type, "NFC")) {
        f->nfc = true;
    } else if (!strcmp(type, "Prepend")) {
        TF_TRY(get_str(c, v, "prepend", path, &s));
        if (!s || strcmp(s, SPM_SPACE))
            return fail(c, NULL, TF_ERR_UNSUPPORTED, "%s.prepend is '%.60s' (expected '" SPM_SPACE "')", path,
                        s ? s : "");
        f->prepend = true;
    } else if (!strcmp(type, "Replace")) {
        TF_TRY(get_str(c, member(v, "pattern"), "String", path, &pat));
        TF_TRY(get_str(c, v, "content", path, &s));
        if (!pat || strcmp(pat, " ") || !s || strcmp(s, SPM_SPACE))
            return fail(c, NULL, TF_ERR_UNSUPPORTED, "%s replaces '%.60s' by '%.60s' (expected {\"String\": \" \"} by "
                        "'" SPM_SPACE "')", path, pat ? pat : "?", s ? s : "?");
        f->replace = true;
    } else if (*type) {
        return fail(c, NULL, TF_ERR_UNSUPPORTED,
                    "%s.type '%.60s' is not supported (expected Prepend/Replace for SentencePiece-style tokenizers, NFC "
                    "or none for byte-level ones)", path, type);
    }
    return TF_OK;
}

/* Append the step spelled prefix + pattern to the program, checking it
 * (it must compile) under the JSON path that gave it. */
static tf_status add_step(hf_ctx *c, const char *path, const char *prefix, const char *pattern) {
    if (c->n_steps == TF_PRETOK_MAX_STEPS)
        return fail(c, NULL, TF_ERR_UNSUPPORTED, "%s: more than %d pre-tokenizer steps", path, TF_PRETOK_MAX_STEPS);
    size_t np = strlen(prefix), nr = strlen(pattern);
    char *spec = malloc(np + nr + 1);
    if (!spec) return fail(c, NULL, TF_ERR_NOMEM, "out of memory for the pre-tokenizer");
    memcpy(spec, prefix, np);
    memcpy(spec + np, pattern, nr + 1);
    c->steps[c->n_steps++] = spec;
    tf_pretok check = {0};
    char what[160];
    snprintf(what, sizeof what, "%s: %s", c->name, path);
    tf_status st = tf_pretok_add_step(&check, spec, np + nr, what, c->err);
    tf_pretok_free(&check);
    return st;
}

static const char *const k_behaviors[][2] = { /* tokenizer.json spelling, step spelling */
    {"Isolated", "isolated"}, {"Removed", "removed"}, {"MergedWithPrevious", "merged_with_previous"},
    {"MergedWithNext", "merged_with_next"}, {"Contiguous", "contiguous"},
};

/* Split: {"pattern": {"Regex": r} or {"String": s}, "behavior": b, "invert": i}. */
static tf_status split_item(hf_ctx *c, const cJSON *v, const char *path) {
    const cJSON *pat = member(v, "pattern");
    const char *rx = NULL, *lit = NULL, *beh = NULL;
    int invert = 0;
    if (!cJSON_IsObject(pat))
        return fail(c, NULL, TF_ERR_FORMAT, "%s.pattern is %s (expected an object {\"Regex\": ...} or {\"String\": "
                    "...})", path, jtype(pat));
    TF_TRY(get_str(c, pat, "Regex", path, &rx));
    TF_TRY(get_str(c, pat, "String", path, &lit));
    if (!rx == !lit)
        return fail(c, NULL, TF_ERR_FORMAT, "%s.pattern has %s (expected exactly one of Regex and String)", path,
                    rx ? "both Regex and String" : "neither Regex nor String");
    if ((rx && !*rx) || (lit && !*lit))
        return fail(c, NULL, TF_ERR_FORMAT, "%s.pattern is empty (expected a non-empty pattern)", path);
    TF_TRY(get_str(c, v, "behavior", path, &beh));
    TF_TRY(get_bool(c, NULL, v, "invert", path, &invert));
    if (!beh) return fail(c, NULL, TF_ERR_FORMAT, "%s.behavior is missing (expected a string)", path);
    size_t b = 0;
    while (b < sizeof k_behaviors / sizeof k_behaviors[0] && strcmp(beh, k_behaviors[b][0])) b++;
    if (b == sizeof k_behaviors / sizeof k_behaviors[0])
        return fail(c, NULL, TF_ERR_UNSUPPORTED, "%s.behavior '%.60s' is not supported (expected Isolated, Removed, "
                    "MergedWithPrevious, MergedWithNext or Contiguous)", path, beh);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s%s:%s:", k_behaviors[b][1], invert ? "!" : "", rx ? "regex" : "literal");
    return add_step(c, path, prefix, rx ? rx : lit);
}

/* Pre-tokenizers: byte-level programs of Split and Digits items ending in
 * ByteLevel (which maps bytes to characters, so nothing may follow it);
 * Metaspace for the SentencePiece style. */
static tf_status pretok_item(hf_ctx *c, const cJSON *v, const char *type, const char *path, int index, family *f) {
    const char *s = NULL;
    int aps = 0, rx = 1, split = 1, each = 0;
    if (*type && f->byte_level)
        return fail(c, NULL, TF_ERR_UNSUPPORTED, "%s (type '%.60s') follows ByteLevel (expected ByteLevel last: "
                    "steps after it would see the byte-mapped text)", path, type);
    if (!strcmp(type, "ByteLevel")) {
        TF_TRY(get_bool(c, NULL, v, "add_prefix_space", path, &aps));
        TF_TRY(get_bool(c, NULL, v, "use_regex", path, &rx));
        f->byte_level = true;
        if (aps) TF_TRY(add_step(c, path, "prefix_space", ""));
        if (rx) TF_TRY(add_step(c, path, "isolated:regex:", GPT2_REGEX));
    } else if (!strcmp(type, "Split")) {
        TF_TRY(split_item(c, v, path));
    } else if (!strcmp(type, "Digits")) {
        TF_TRY(get_bool(c, NULL, v, "individual_digits", path, &each));
        TF_TRY(add_step(c, path, "isolated:regex:", each ? "\\p{N}" : "\\p{N}+"));
    } else if (!strcmp(type, "Metaspace")) {
        const char *scheme;
        aps = 1;
        TF_TRY(get_str(c, v, "replacement", path, &s));
        TF_TRY(get_str(c, v, "prepend_scheme", path, &scheme));
        TF_TRY(get_bool(c, NULL, v, "add_prefix_space", path, &aps)); /* before prepend_scheme existed */
        TF_TRY(get_bool(c, NULL, v, "split", path, &split));
        if (!s || strcmp(s, SPM_SPACE))
            return fail(c, NULL, TF_ERR_UNSUPPORTED, "%s.replacement is '%.60s' (expected '" SPM_SPACE "')", path,
                        s ? s : "");
        if (scheme && strcmp(scheme, "first") && strcmp(scheme, "always") && strcmp(scheme, "never"))
            return fail(c, NULL, TF_ERR_UNSUPPORTED, "%s.prepend_scheme '%.60s' (expected first, always or never)",
                        path, scheme);
        f->metaspace = true;
        f->ms_prepend = scheme ? strcmp(scheme, "never") != 0 : aps;
        f->ms_first = scheme && !strcmp(scheme, "first"); /* add_prefix_space alone (older files): always */
        f->ms_split = split;
    } else if (*type) {
        return fail(c, NULL, TF_ERR_UNSUPPORTED, "%s.type '%.60s' is not supported (expected ByteLevel, Split, Digits, "
                    "Metaspace or a Sequence of them)", path, type);
    }
    return TF_OK;
}

/* Byte-level: name the program. A program equal to a built-in set gets
 * its tokenizer.ggml.pre name (a lone Split with Llama 3's or Qwen2's
 * regex as tokenizer.json spells it, too); any other is written out as
 * tokenizer.triforce.pre_steps. */
static tf_status name_program(hf_ctx *c) {
    if (c->n_steps == 0)
        return fail(c, NULL, TF_ERR_UNSUPPORTED, "pre_tokenizer: ByteLevel with use_regex false and no Split or "
                    "Digits before it (expected a pre-tokenizer that splits the text)");
    const char *which = "pre-tokenizer program";
    static const char k_iso[] = "isolated:regex:";
    if (c->n_steps == 1 && !strncmp(c->steps[0], k_iso, sizeof k_iso - 1)) {
        for (size_t i = 0; i < sizeof k_regex / sizeof k_regex[0]; i++)
            if (!strcmp(c->steps[0] + sizeof k_iso - 1, k_regex[i].regex)) {
                if (!(c->pre = c->ignore_merges ? k_regex[i].pre_ignore_merges : k_regex[i].pre)) which = "Qwen2 regex";
                break;
            }
    }
    for (int k = TF_PRE_GPT2; !c->pre && k < TF_PRE_COUNT; k++) {
        int i = 0;
        for (const char *rx; i < c->n_steps && (rx = tf_pretok_regex((tf_pre_kind)k, i)) != NULL; i++)
            if (strncmp(c->steps[i], k_iso, sizeof k_iso - 1) || strcmp(c->steps[i] + sizeof k_iso - 1, rx)) break;
        if (i == c->n_steps && !tf_pretok_regex((tf_pre_kind)k, i)) {
            c->pre = k_set_name[k];
            if (k == TF_PRE_GPT2) which = "GPT-2 regex";
        }
    }
    if (!c->pre) {
        c->pre = PROGRAM_PRE_NAME;
        c->write_steps = true;
    }
    if (c->ignore_merges && strcmp(c->pre, "llama-bpe"))
        return fail(c, NULL, TF_ERR_UNSUPPORTED, "model.ignore_merges is true with the %s (expected false: only "
                    "Llama 3's regex is known to take whole-word tokens)", which);
    return TF_OK;
}

/* Decoders must undo what the family did: ByteLevel for byte-level;
 * Replace("▁" -> " ") or Metaspace, ByteFallback, Fuse, Strip(" ", 1, 0)
 * for SentencePiece-style (c->spm is known by now). */
static tf_status decoder_item(hf_ctx *c, const cJSON *v, const char *type, const char *path, int index, family *f) {
    const char *s = NULL, *pat = NULL;
    bool ok = false;
    if (!strcmp(type, "ByteLevel")) {
        ok = f->dec_level = !c->spm;
    } else if (!strcmp(type, "Replace")) {
        TF_TRY(get_str(c, member(v, "pattern"), "String", path, &pat));
        TF_TRY(get_str(c, v, "content", path, &s));
        ok = f->dec_space = c->spm && pat && s && !strcmp(pat, SPM_SPACE) && !strcmp(s, " ");
    } else if (!strcmp(type, "Metaspace")) {
        TF_TRY(get_str(c, v, "replacement", path, &s));
        ok = f->dec_space = c->spm && s && !strcmp(s, SPM_SPACE);
    } else if (!strcmp(type, "ByteFallback") || !strcmp(type, "Fuse")) {
        ok = c->spm;
        f->dec_bytes |= ok && type[0] == 'B';
    } else if (!strcmp(type, "Strip")) {
        const cJSON *start = member(v, "start"), *stop = member(v, "stop");
        TF_TRY(get_str(c, v, "content", path, &s));
        ok = c->spm && s && !strcmp(s, " ") && cJSON_IsNumber(start) && cJSON_IsNumber(stop) &&
             start->valuedouble <= 1 && stop->valuedouble == 0;
    }
    if (!ok)
        return fail(c, NULL, TF_ERR_UNSUPPORTED, "%s (type '%.60s') does not fit a %s tokenizer (expected %s)", path,
                    *type ? type : "none", c->spm ? "SentencePiece-style" : "byte-level",
                    c->spm ? "Replace('" SPM_SPACE "' -> ' ') or Metaspace, ByteFallback, Fuse, Strip(' ', 1, 0)"
                           : "ByteLevel");
    return TF_OK;
}

/* Decide the family from normalizer + pre_tokenizer, then check the decoder. */
static tf_status check_family(hf_ctx *c, const cJSON *root) {
    family f = {0};
    TF_TRY(walk(c, member(root, "normalizer"), "normalizer", "normalizers", normalizer_item, &f));
    TF_TRY(walk(c, member(root, "pre_tokenizer"), "pre_tokenizer", "pretokenizers", pretok_item, &f));
    if (f.byte_level) {
        if (f.prepend || f.replace || f.metaspace)
            return fail(c, NULL, TF_ERR_UNSUPPORTED, "ByteLevel pre-tokenizer mixed with SentencePiece-style "
                        "Prepend/Replace/Metaspace (expected one family)");
        TF_TRY(name_program(c));
        c->nfc = f.nfc;
    } else {
        if (c->n_steps)
            return fail(c, NULL, TF_ERR_UNSUPPORTED, "pre_tokenizer Split or Digits without ByteLevel (expected "
                        "byte-level BPE)");
        if (f.metaspace == f.replace)
            return fail(c, NULL, TF_ERR_UNSUPPORTED, "%s (expected a ByteLevel pre-tokenizer, or spaces escaped to '"
                        SPM_SPACE "' by a Replace normalizer or a Metaspace pre-tokenizer)",
                        f.replace ? "both a Replace normalizer and a Metaspace pre-tokenizer"
                                  : "neither a ByteLevel nor a Metaspace pre-tokenizer nor a Replace normalizer");
        if (f.nfc || (f.metaspace && f.prepend) || c->ignore_merges)
            return fail(c, NULL, TF_ERR_UNSUPPORTED, "%s with a SentencePiece-style tokenizer", f.nfc
                        ? "normalizer NFC (expected Prepend and Replace only)" : f.prepend
                        ? "normalizer Prepend together with Metaspace (expected one of them)"
                        : "model.ignore_merges true (expected false)");
        /* Metaspace split = merges never cross a "▁": same result only if no
         * token has a "▁" after its first character. */
        for (int32_t i = 0; f.metaspace && f.ms_split && i < c->n; i++)
            if (c->in_model[i] && c->len[i] > 1 && memmem(c->text[i] + 1, c->len[i] - 1, SPM_SPACE, 3))
                return fail(c, NULL, TF_ERR_UNSUPPORTED, "pre_tokenizer Metaspace splits words, but token %d "
                            "'%.60s' spans a word boundary (expected \"split\": false)", i, c->text[i]);
        c->spm = true;
        c->add_space_prefix = f.metaspace ? f.ms_prepend : f.prepend;
        if (f.metaspace && f.ms_prepend) c->space_prefix = f.ms_first ? "first" : "always";
        c->pre = "default";
    }
    const cJSON *dec = member(root, "decoder");
    if (absent(dec))
        return fail(c, NULL, TF_ERR_UNSUPPORTED, "decoder is %s (expected %s)", jtype(dec),
                    c->spm ? "a Sequence with Replace('" SPM_SPACE "' -> ' ') and ByteFallback" : "ByteLevel");
    TF_TRY(walk(c, dec, "decoder", "decoders", decoder_item, &f));
    if (c->spm ? !f.dec_space || (c->byte_fallback && !f.dec_bytes) : !f.dec_level)
        return fail(c, NULL, TF_ERR_UNSUPPORTED, "decoder lacks %s", !c->spm ? "ByteLevel"
                    : !f.dec_space ? "Replace('" SPM_SPACE "' -> ' ') or Metaspace"
                    : "ByteFallback (model.byte_fallback is true)");
    return TF_OK;
}

/* ------------------------------------------------------------------------ */
/* merges                                                                    */

/* Token ids of merge i ("a b", split at the first space after the first
 * byte, or ["a", "b"]): a, b and a+b, each a model.vocab token. */
static tf_status merge_ids(hf_ctx *c, const cJSON *e, int i, char **cat, size_t *cat_cap, int32_t id[3]) {
    const char *a = NULL, *b = NULL, *s = cJSON_IsString(e) ? e->valuestring : NULL, *sp;
    if (s && s[0] && (sp = strchr(s + 1, ' ')) != NULL)
        a = s, b = sp + 1;
    else if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 && cJSON_IsString(e->child) &&
             cJSON_IsString(e->child->next))
        a = e->child->valuestring, b = e->child->next->valuestring;
    if (!a || !*a || !*b)
        return fail(c, NULL, TF_ERR_FORMAT, "model.merges[%d] is %s%s%.60s%s (expected \"a b\" or [\"a\", \"b\"])", i,
                    jtype(e), s ? " '" : "", s ? s : "", s ? "'" : "");
    size_t na = s ? (size_t)(b - 1 - a) : strlen(a), nb = strlen(b);
    if (!c->spm && memchr(a + 1, ' ', na - 1))
        return fail(c, NULL, TF_ERR_UNSUPPORTED, "model.merges[%d]: '%.60s' has a space after its first byte (GGUF "
                    "merges cannot spell it)", i, a);
    if (na + nb > *cat_cap) {
        char *p = realloc(*cat, 2 * (na + nb));
        if (!p) return fail(c, NULL, TF_ERR_NOMEM, "out of memory for merges");
        *cat = p, *cat_cap = 2 * (na + nb);
    }
    memcpy(*cat, a, na);
    memcpy(*cat + na, b, nb);
    const char *part[3] = {a, b, *cat};
    size_t plen[3] = {na, nb, na + nb};
    for (int k = 0; k < 3; k++)
        if ((id[k] = lookup(c, part[k], plen[k])) < 0 || !c->in_model[id[k]])
            return fail(c, NULL, TF_ERR_FORMAT, "model.merges[%d] = '%.*s' + '%.*s': '%.*s' is not in model.vocab", i,
                        (int)(na < 60 ? na : 60), a, (int)(nb < 60 ? nb : 60), b, (int)(plen[k] < 60 ? plen[k] : 60),
                        part[k]);
    return TF_OK;
}

/* Read model.merges into ma/mb/mo; an earlier entry of a pair listed again
 * is marked dropped (HF keeps the last rank of a repeated pair). */
static tf_status load_merges(hf_ctx *c, const cJSON *model) {
    const cJSON *m = member(model, "merges");
    if (absent(m)) return TF_OK;
    if (!cJSON_IsArray(m)) return fail(c, NULL, TF_ERR_FORMAT, "model.merges is %s (expected an array)", jtype(m));
    int n = cJSON_GetArraySize(m);
    if (n > MAX_MERGES)
        return fail(c, NULL, TF_ERR_UNSUPPORTED, "model.merges has %d entries (expected at most %d)", n, MAX_MERGES);
    uint32_t slots = 16;
    while (slots < 2u * (uint32_t)n) slots <<= 1;
    c->ma = malloc((size_t)n * sizeof *c->ma + 1);
    c->mb = malloc((size_t)n * sizeof *c->mb + 1);
    c->mo = malloc((size_t)n * sizeof *c->mo + 1);
    c->drop = calloc((size_t)n + 1, 1);
    int32_t *pair = malloc(slots * sizeof *pair); /* (a, b) -> its latest entry */
    char *cat = NULL;
    size_t cat_cap = 0;
    tf_status st = TF_OK;
    if (!c->ma || !c->mb || !c->mo || !c->drop || !pair) st = fail(c, NULL, TF_ERR_NOMEM, "out of memory for merges");
    else memset(pair, 0xff, slots * sizeof *pair);
    int i = 0;
    for (const cJSON *e = m->child; e && st == TF_OK; e = e->next, i++) {
        int32_t id[3];
        if ((st = merge_ids(c, e, i, &cat, &cat_cap, id)) != TF_OK) break;
        c->ma[i] = id[0], c->mb[i] = id[1], c->mo[i] = id[2];
        uint64_t key = ((uint64_t)(uint32_t)id[0] << 32 | (uint32_t)id[1]) * 0x9e3779b97f4a7c15ull;
        uint32_t k = (uint32_t)(key >> 32) & (slots - 1);
        while (pair[k] >= 0 && (c->ma[pair[k]] != id[0] || c->mb[pair[k]] != id[1])) k = (k + 1) & (slots - 1);
        if (pair[k] >= 0) c->drop[pair[k]] = 1;
        pair[k] = i;
    }
    c->n_merges = st == TF_OK ? n : 0;
    free(pair);
    free(cat);
    return st;
}

/* ------------------------------------------------------------------------ */
/* special tokens: post_processor and tokenizer_config.json                  */

/* Id of the token a TemplateProcessing item {"SpecialToken": {"id": name}}
 * names: special_tokens[name].ids[0], else the token spelled name. */
static tf_status template_token(hf_ctx *c, const cJSON *tp, const cJSON *item, const char *path, int32_t *out) {
    const char *name;
    TF_TRY(get_str(c, member(item, "SpecialToken"), "id", path, &name));
    if (!name) return fail(c, NULL, TF_ERR_FORMAT, "%s.SpecialToken.id is missing (expected a string)", path);
    const cJSON *ids = member(member(member(tp, "special_tokens"), name), "ids");
    int64_t id;
    if (cJSON_IsArray(ids) && json_id(ids->child, &id) && id < c->n) {
        *out = (int32_t)id;
        return TF_OK;
    }
    if ((*out = lookup(c, name, strlen(name))) < 0)
        return fail(c, NULL, TF_ERR_FORMAT, "%s: special token '%.60s' is not in the vocabulary", path, name);
    return TF_OK;
}

/* post_processor items: TemplateProcessing (BOS/EOS from its "single"
 * template), ByteLevel (adds nothing); another type is refused unless
 * tokenizer_config.json gives both add_*_token flags. */
static tf_status post_item(hf_ctx *c, const cJSON *v, const char *type, const char *path, int index, family *f) {
    if (!strcmp(type, "ByteLevel")) {
        if (c->add_bos < 0) c->add_bos = 0;
        if (c->add_eos < 0) c->add_eos = 0;
    } else if (!strcmp(type, "TemplateProcessing")) {
        const cJSON *single = member(v, "single");
        if (!cJSON_IsArray(single) || !single->child)
            return fail(c, NULL, TF_ERR_FORMAT, "%s.single is %s (expected a non-empty array)", path, jtype(single));
        char p[128];
        const cJSON *first = single->child, *last = first;
        while (last->next) last = last->next;
        c->add_bos = member(first, "SpecialToken") != NULL;
        c->add_eos = last != first && member(last, "SpecialToken") != NULL;
        snprintf(p, sizeof p, "%s.single[0]", path);
        if (c->add_bos) TF_TRY(template_token(c, v, first, p, &c->bos));
        snprintf(p, sizeof p, "%s.single[%d]", path, cJSON_GetArraySize(single) - 1);
        if (c->add_eos) TF_TRY(template_token(c, v, last, p, &c->eos));
    } else if (*type && !f->flags_given) {
        return fail(c, NULL, TF_ERR_UNSUPPORTED, "%s.type '%.60s' is not supported (expected TemplateProcessing, "
                    "ByteLevel or a Sequence of them, or add_bos_token and add_eos_token in tokenizer_config.json)",
                    path, type);
    }
    return TF_OK;
}

/* A tokenizer_config.json special token: "text", {"content": "text"} or null.
 * One that is not in the vocabulary is an error when strict, else ignored. */
static tf_status config_token(hf_ctx *c, const char *file, const cJSON *cfg, const char *key, bool strict,
                              int32_t *out) {
    const cJSON *v = member(cfg, key);
    if (absent(v)) return TF_OK;
    const cJSON *s = cJSON_IsObject(v) ? member(v, "content") : v;
    if (!cJSON_IsString(s))
        return fail(c, file, TF_ERR_FORMAT, "%s is %s (expected a string or an object with a string 'content')", key,
                    jtype(v));
    int32_t id = lookup(c, s->valuestring, strlen(s->valuestring));
    if (id < 0 && strict)
        return fail(c, file, TF_ERR_FORMAT, "%s '%.60s' is not a token of %s", key, s->valuestring, c->name);
    if (id >= 0) *out = id;
    return TF_OK;
}

/* ------------------------------------------------------------------------ */
/* writing                                                                   */

static const char *const k_keys[] = {
    "tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
    "tokenizer.ggml.scores", "tokenizer.ggml.merges", "tokenizer.ggml.add_space_prefix",
    "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token", "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id",
    "tokenizer.triforce.pre_steps", "tokenizer.chat_template", "tokenizer.triforce.normalizer",
    "tokenizer.triforce.space_prefix",
};
#define N_KEYS (sizeof k_keys / sizeof k_keys[0])

/* Write every key: tokens padded to n_total with "[PAD<id>]" (unused);
 * SPM scores from the merge ranks; byte-level merges as "a b" strings
 * (pairs listed again later are left out: their last rank counts). */
static tf_status write_keys(hf_ctx *c, tf_gguf_writer *w, int32_t n_total) {
    size_t n_pad = (size_t)(n_total - c->n), n_kept = 0, mlen = 0;
    for (int32_t r = 0; r < c->n_merges; r++)
        if (!c->drop[r]) n_kept++, mlen += c->len[c->ma[r]] + 1 + c->len[c->mb[r]];
    tf_gguf_str *strs = malloc((size_t)n_total * sizeof *strs), *merges = malloc((n_kept + 1) * sizeof *merges);
    int32_t *types = malloc((size_t)n_total * sizeof *types);
    float *scores = malloc((size_t)n_total * sizeof *scores);
    char *pads = malloc(n_pad * 16 + 1), *mtext = malloc(mlen + 1), *p = mtext;
    tf_status st = TF_OK;
    if (!strs || !merges || !types || !scores || !pads || !mtext)
        st = fail(c, NULL, TF_ERR_NOMEM, "out of memory writing %d tokens", n_total);
    for (int32_t i = 0; st == TF_OK && i < n_total; i++) {
        if (i < c->n) {
            strs[i] = (tf_gguf_str){c->text[i], c->len[i]};
            types[i] = c->type[i];
        } else {
            char *pad = pads + (size_t)(i - c->n) * 16;
            strs[i] = (tf_gguf_str){pad, (uint64_t)snprintf(pad, 16, "[PAD%d]", i)};
            types[i] = TF_TOKTYPE_UNUSED;
        }
        scores[i] = -(float)c->n_merges; /* below every merge */
    }
    for (int32_t r = 0, k = 0; st == TF_OK && r < c->n_merges; r++) {
        if (c->drop[r]) continue;
        if (scores[c->mo[r]] < -(float)r) scores[c->mo[r]] = -(float)r; /* the best rank producing it */
        size_t na = c->len[c->ma[r]], nb = c->len[c->mb[r]];
        memcpy(p, c->text[c->ma[r]], na);
        p[na] = ' ';
        memcpy(p + na + 1, c->text[c->mb[r]], nb);
        merges[k++] = (tf_gguf_str){p, na + 1 + nb};
        p += na + 1 + nb;
    }
    tf_err *err = c->err;
    if (st == TF_OK) st = tf_gguf_writer_set_str(w, k_keys[0], c->spm ? "llama" : "gpt2", err);
    if (st == TF_OK) st = tf_gguf_writer_set_str(w, k_keys[1], c->pre, err);
    if (st == TF_OK) st = tf_gguf_writer_set_arr_strn(w, k_keys[2], strs, (uint64_t)n_total, err);
    if (st == TF_OK) st = tf_gguf_writer_set_arr(w, k_keys[3], TF_GGUF_INT32, types, (uint64_t)n_total, err);
    if (st == TF_OK && c->spm) st = tf_gguf_writer_set_arr(w, k_keys[4], TF_GGUF_FLOAT32, scores, (uint64_t)n_total, err);
    if (st == TF_OK && !c->spm) st = tf_gguf_writer_set_arr_strn(w, k_keys[5], merges, n_kept, err);
    if (st == TF_OK && c->spm) st = tf_gguf_writer_set_bool(w, k_keys[6], c->add_space_prefix, err);
    if (st == TF_OK && c->add_bos >= 0) st = tf_gguf_writer_set_bool(w, k_keys[7], c->add_bos, err);
    if (st == TF_OK && c->add_eos >= 0) st = tf_gguf_writer_set_bool(w, k_keys[8], c->add_eos, err);
    const int32_t ids[4] = {c->bos, c->eos, c->unk, c->pad};
    for (int k = 0; k < 4 && st == TF_OK; k++)
        if (ids[k] >= 0) st = tf_gguf_writer_set_u32(w, k_keys[9 + k], (uint32_t)ids[k], err);
    if (st == TF_OK && c->write_steps) {
        tf_gguf_str steps[TF_PRETOK_MAX_STEPS];
        for (int k = 0; k < c->n_steps; k++) steps[k] = (tf_gguf_str){c->steps[k], strlen(c->steps[k])};
        st = tf_gguf_writer_set_arr_strn(w, k_keys[13], steps, (uint64_t)c->n_steps, err);
    }
    if (st == TF_OK && c->chat_template) st = tf_gguf_writer_set_str(w, k_keys[14], c->chat_template, err);
    if (st == TF_OK && c->nfc) st = tf_gguf_writer_set_str(w, k_keys[15], "NFC", err);
    if (st == TF_OK && c->space_prefix) st = tf_gguf_writer_set_str(w, k_keys[16], c->space_prefix, err);
    void *owned[] = {strs, merges, types, scores, pads, mtext};
    for (size_t k = 0; k < sizeof owned / sizeof owned[0]; k++) free(owned[k]);
    return st;
}

/* ------------------------------------------------------------------------ */
/* entry points                                                              */

/* Parse text (need not be NUL-terminated) into an object; NULL on error.
 * tf_json_parse reads as strictly as the Hugging Face library (nothing after
 * the value, no stray control bytes, unique keys). */
static cJSON *parse_json(hf_ctx *c, const char *text, size_t len, const char *file, tf_status *st) {
    cJSON *root = NULL;
    *st = tf_json_parse(file ? file : c->name, text, len, &root, c->err);
    if (*st == TF_OK && !cJSON_IsObject(root)) {
        *st = fail(c, file, TF_ERR_FORMAT, "the JSON value is %s (expected an object)", jtype(root));
        cJSON_Delete(root);
        root = NULL;
    }
    return root;
}

/* tokenizer_config.json's chat_template: a string, or a list of {"name",
 * "template"} of which the one named "default" is the model's (as the
 * Hugging Face library chooses); absent or null: none. */
static tf_status config_chat_template(hf_ctx *c, const char *file, const cJSON *v) {
    if (!v || cJSON_IsNull(v)) return TF_OK;
    if (cJSON_IsString(v)) {
        c->chat_template = v->valuestring;
        return TF_OK;
    }
    if (!cJSON_IsArray(v))
        return fail(c, file, TF_ERR_FORMAT, "chat_template is %s (expected a string or a list of {name, template})",
                    jtype(v));
    int i = 0;
    for (const cJSON *e = v->child; e; e = e->next, i++) {
        const cJSON *name = member(e, "name"), *t = member(e, "template");
        if (!cJSON_IsObject(e) || !cJSON_IsString(name) || !cJSON_IsString(t))
            return fail(c, file, TF_ERR_FORMAT, "chat_template[%d] is not an object with string name and template", i);
        if (strcmp(name->valuestring, "default") == 0) c->chat_template = t->valuestring;
    }
    if (!c->chat_template)
        return fail(c, file, TF_ERR_FORMAT, "chat_template lists %d named templates but none named 'default'", i);
    return TF_OK;
}

/* Steps 1-5 of the file comment on parsed JSON (cfg may be NULL). */
static tf_status convert(hf_ctx *c, tf_gguf_writer *w, const cJSON *root, const cJSON *cfg, const char *cfg_name,
                         int64_t n_vocab_model) {
    const cJSON *model = member(root, "model");
    if (!cJSON_IsObject(model)) return fail(c, NULL, TF_ERR_FORMAT, "model is %s (expected an object)", jtype(model));
    TF_TRY(load_tokens(c, model, member(root, "added_tokens")));
    TF_TRY(check_model(c, model));
    TF_TRY(check_family(c, root));
    TF_TRY(load_merges(c, model));
    for (int32_t i = 0; i < c->n && c->spm && c->byte_fallback; i++) { /* <0xXX> pieces are byte tokens */
        unsigned hex;
        char end;
        if (c->in_model[i] && c->type[i] == TF_TOKTYPE_NORMAL && c->len[i] == 6 && isxdigit((unsigned char)c->text[i][3]) &&
            isxdigit((unsigned char)c->text[i][4]) && sscanf(c->text[i], "<0x%2x%c", &hex, &end) == 2 && end == '>')
            c->type[i] = TF_TOKTYPE_BYTE;
    }
    if (c->unk >= 0) c->type[c->unk] = TF_TOKTYPE_UNKNOWN;

    int given_bos = -1, given_eos = -1;
    if (cfg) {
        TF_TRY(get_bool(c, cfg_name, cfg, "add_bos_token", "", &given_bos));
        TF_TRY(get_bool(c, cfg_name, cfg, "add_eos_token", "", &given_eos));
    }
    family f = {.flags_given = given_bos >= 0 && given_eos >= 0};
    TF_TRY(walk(c, member(root, "post_processor"), "post_processor", "processors", post_item, &f));
    if (given_bos >= 0) c->add_bos = given_bos;
    if (given_eos >= 0) c->add_eos = given_eos;
    if (cfg) {
        TF_TRY(config_token(c, cfg_name, cfg, "bos_token", true, &c->bos));
        TF_TRY(config_token(c, cfg_name, cfg, "eos_token", true, &c->eos));
        TF_TRY(config_token(c, cfg_name, cfg, "pad_token", false, &c->pad)); /* often one the model adds later */
        TF_TRY(config_chat_template(c, cfg_name, member(cfg, "chat_template")));
    }

    int64_t n_total = n_vocab_model > 0 ? n_vocab_model : c->n;
    if (n_total < c->n)
        return fail(c, NULL, TF_ERR_FORMAT, "the tokenizer has %d tokens but the model only %lld (expected at most "
                    "the model's vocabulary size)", c->n, (long long)n_total);
    if (n_total > INT32_MAX / 4)
        return fail(c, NULL, TF_ERR_INVALID_ARG, "model vocabulary size %lld is too large (expected at most %d)",
                    (long long)n_total, INT32_MAX / 4);
    return write_keys(c, w, (int32_t)n_total);
}

tf_status tf_hf_tokenizer_to_gguf_mem(tf_gguf_writer *w, const char *json, size_t json_len, const char *json_name,
                                      const char *config, size_t config_len, const char *config_name,
                                      int64_t n_vocab_model, tf_err *err) {
    hf_ctx c = {.name = json_name ? json_name : "tokenizer.json", .err = err, .add_bos = -1, .add_eos = -1,
                .bos = -1, .eos = -1, .unk = -1, .pad = -1};
    if (!w || !json) return tf_errf(err, TF_ERR_INVALID_ARG, "tf_hf_tokenizer_to_gguf: NULL writer or JSON text");
    const char *cfg_name = config_name ? config_name : "tokenizer_config.json";
    for (size_t k = 0; k < N_KEYS; k++)
        if (tf_gguf_writer_has_kv(w, k_keys[k]))
            return fail(&c, NULL, TF_ERR_INVALID_ARG, "the GGUF writer already has '%s' (expected no tokenizer keys)",
                        k_keys[k]);
    tf_status st = TF_OK;
    cJSON *root = parse_json(&c, json, json_len, NULL, &st);
    cJSON *cfg = root && config ? parse_json(&c, config, config_len, cfg_name, &st) : NULL;
    if (st == TF_OK) st = convert(&c, w, root, cfg, cfg_name, n_vocab_model);
    if (st != TF_OK)
        for (size_t k = 0; k < N_KEYS; k++) tf_gguf_writer_remove_kv(w, k_keys[k]);
    cJSON_Delete(root);
    cJSON_Delete(cfg);
    void *owned[] = {c.text, c.len, c.type, c.in_model, c.hslot, c.ma, c.mb, c.mo, c.drop};
    for (size_t k = 0; k < sizeof owned / sizeof owned[0]; k++) free(owned[k]);
    for (int k = 0; k < c.n_steps; k++) free(c.steps[k]);
    return st;
}

tf_status tf_hf_tokenizer_to_gguf(tf_gguf_writer *w, const char *tokenizer_json_path,
                                  const char *tokenizer_config_path, int64_t n_vocab_model, tf_err *err) {
    if (!w || !tokenizer_json_path)
        return tf_errf(err, TF_ERR_INVALID_ARG, "tf_hf_tokenizer_to_gguf: NULL writer or tokenizer.json path");
    char *json = NULL, *cfg = NULL;
    size_t json_len = 0, cfg_len = 0;
    tf_status st = tf_read_file(tokenizer_json_path, &json, &json_len, err);
    if (st == TF_OK && tokenizer_config_path) st = tf_read_file(tokenizer_config_path, &cfg, &cfg_len, err);
    if (st == TF_OK)
        st = tf_hf_tokenizer_to_gguf_mem(w, json, json_len, tokenizer_json_path, cfg, cfg_len, tokenizer_config_path,
                                         n_vocab_model, err);
    free(json);
    free(cfg);
    return st;
}
