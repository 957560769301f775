/*
 * pretok.c — pre-tokenizer regexes for byte-level BPE, compiled with PCRE2
 * (UTF + UCP, so \p{L}, \p{N} and \s follow Unicode properties).
 *
 * The regex is compiled (and JIT-compiled where PCRE2 supports it) once per
 * tokenizer; tf_pretok_split allocates its own match data, so one compiled
 * pattern serves any number of threads. Invalid UTF-8 is tolerated
 * (PCRE2_MATCH_INVALID_UTF): ill-formed bytes never match, and the split
 * hands them on as pieces of their own, so byte-level BPE keeps every byte.
 *
 * A kind may have two stages: the first regex's matches become pieces of
 * their own and the second regex splits each stretch between them on its own
 * (SmolLM: every digit isolated, then GPT-2's regex on the rest, as its
 * tokenizer.json's Sequence[Digits(individual_digits), ByteLevel] and
 * llama.cpp's "smollm" pre-tokenizer both do).
 */
#include "tokenizer/tok_internal.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#define GPT2_REGEX "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

/* The patterns as published with the tokenizers. Llama 3's case-insensitive
 * contractions (?i:'s|...) are spelled out with [sS] classes: under UCP,
 * caseless matching would also accept e.g. U+017F (long s) for 's'. */
static const char *const k_regex[] = {
    [TF_PRE_NONE] = NULL,
    [TF_PRE_GPT2] = GPT2_REGEX,
    [TF_PRE_LLAMA3] = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
                      "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
                      "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    [TF_PRE_QWEN2] = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
                     "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
                     "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    [TF_PRE_SMOLLM] = GPT2_REGEX,
};
_Static_assert(sizeof k_regex / sizeof k_regex[0] == TF_PRE_SMOLLM + 1, "one regex per tf_pre_kind");

/* First stages: matches isolated before the regex above runs between them. */
static const char *const k_isolate[] = {
    [TF_PRE_SMOLLM] = "\\p{N}",
};
_Static_assert(sizeof k_isolate / sizeof k_isolate[0] == TF_PRE_SMOLLM + 1, "first stages per tf_pre_kind");

const char *tf_pretok_regex(tf_pre_kind kind) {
    return (unsigned)kind <= TF_PRE_SMOLLM ? k_regex[kind] : NULL;
}

const char *tf_pretok_isolate_regex(tf_pre_kind kind) {
    return (unsigned)kind <= TF_PRE_SMOLLM ? k_isolate[kind] : NULL;
}

/* Compile rx into *code (and JIT-compile it where PCRE2 can: an
 * optimisation only, the interpreter runs otherwise). */
static tf_status compile(const char *rx, void **code, bool *jit, tf_err *err) {
    int ec = 0;
    PCRE2_SIZE eo = 0;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)rx, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &ec, &eo, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return tf_errf(err, TF_ERR_INTERNAL, "pre-tokenizer regex did not compile (PCRE2, offset %zu): %s",
                       (size_t)eo, (const char *)msg);
    }
    *jit = pcre2_jit_compile(re, PCRE2_JIT_COMPLETE) == 0;
    *code = re;
    return TF_OK;
}

tf_status tf_pretok_init(tf_pretok *p, tf_pre_kind kind, tf_err *err) {
    p->kind = kind;
    p->code = p->isolate = NULL;
    p->jit = p->isolate_jit = false;
    const char *rx = tf_pretok_regex(kind), *first = tf_pretok_isolate_regex(kind);
    if (!rx) return TF_OK;
    TF_TRY(compile(rx, &p->code, &p->jit, err));
    if (!first) return TF_OK;
    tf_status st = compile(first, &p->isolate, &p->isolate_jit, err);
    if (st != TF_OK) tf_pretok_free(p);
    return st;
}

void tf_pretok_free(tf_pretok *p) {
    if (p->code) pcre2_code_free((pcre2_code *)p->code);
    if (p->isolate) pcre2_code_free((pcre2_code *)p->isolate);
    p->code = p->isolate = NULL;
}

/* The second stage of a two-stage split: the regex and its match data. */
typedef struct gap_split {
    const tf_pretok *p;
    pcre2_match_data *md; /* for p->code */
} gap_split;

static tf_status walk(const pcre2_code *re, bool jit, pcre2_match_data *md, const char *text, size_t len,
                      const gap_split *gaps_to, tf_piece_fn fn, void *user, tf_err *err);

static tf_status split_gap(const gap_split *g, const char *text, size_t len, tf_piece_fn fn, void *user,
                           tf_err *err) {
    if (len == 0) return TF_OK;
    return walk(g->p->code, g->p->jit, g->md, text, len, NULL, fn, user, err);
}

/* Walk the matches of re from left to right over text[0, len); text between
 * matches (ill-formed UTF-8 only, since the patterns' last alternatives cover
 * every character) becomes a piece too, unless gaps_to is given: then each
 * gap is handed to split_gap (the second stage) instead, and each match is a
 * piece. A JIT failure (e.g. its stack limit on a huge whitespace run) is
 * retried with the interpreter before giving up. md fits re. */
static tf_status walk(const pcre2_code *re, bool jit, pcre2_match_data *md, const char *text, size_t len,
                      const gap_split *gaps_to, tf_piece_fn fn, void *user, tf_err *err) {
    tf_status st = TF_OK;
    uint32_t opts = 0;
    size_t pos = 0;
    while (pos < len && st == TF_OK) {
        int rc = pcre2_match(re, (PCRE2_SPTR)text, len, pos, opts, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) {
            st = gaps_to ? split_gap(gaps_to, text + pos, len - pos, fn, user, err) : fn(user, text + pos, len - pos, err);
            break;
        }
        if (rc < 0) {
            if (jit && !(opts & PCRE2_NO_JIT)) {
                opts |= PCRE2_NO_JIT;
                continue;
            }
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            st = tf_errf(err, TF_ERR_INTERNAL, "pre-tokenizer: PCRE2 match failed at byte %zu of %zu: %s", pos, len,
                         (const char *)msg);
            break;
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t s = ov[0], e = ov[1];
        if (s < pos || e < s || e > len) { /* cannot happen; never loop on it */
            st = tf_errf(err, TF_ERR_INTERNAL, "pre-tokenizer: PCRE2 returned match [%zu, %zu) from %zu", s, e, pos);
            break;
        }
        if (s > pos)
            st = gaps_to ? split_gap(gaps_to, text + pos, s - pos, fn, user, err) : fn(user, text + pos, s - pos, err);
        if (st != TF_OK) break;
        if (e == s) e = s + tf_utf8_char_len(text + s, len - s); /* empty match: none of our patterns has one */
        st = fn(user, text + s, e - s, err);
        pos = e;
    }
    return st;
}

tf_status tf_pretok_split(const tf_pretok *p, const char *text, size_t len, tf_piece_fn fn, void *user, tf_err *err) {
    if (len == 0) return TF_OK;
    if (!p->code) return fn(user, text, len, err);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(p->code, NULL);
    pcre2_match_data *md1 = p->isolate ? pcre2_match_data_create_from_pattern(p->isolate, NULL) : NULL;
    tf_status st;
    if (!md || (p->isolate && !md1)) {
        st = tf_errf(err, TF_ERR_NOMEM, "pre-tokenizer: out of memory for PCRE2 match data");
    } else if (p->isolate) {
        gap_split g = {p, md};
        st = walk(p->isolate, p->isolate_jit, md1, text, len, &g, fn, user, err);
    } else {
        st = walk(p->code, p->jit, md, text, len, NULL, fn, user, err);
    }
    pcre2_match_data_free(md);
    pcre2_match_data_free(md1);
    return st;
}
