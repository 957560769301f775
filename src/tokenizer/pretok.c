/*
 * pretok.c — pre-tokenizer regexes for byte-level BPE, compiled with PCRE2
 * (UTF + UCP, so \p{L}, \p{N} and \s follow Unicode properties).
 *
 * The regex is compiled (and JIT-compiled where PCRE2 supports it) once per
 * tokenizer; tf_pretok_split allocates its own match data, so one compiled
 * pattern serves any number of threads. Invalid UTF-8 is tolerated
 * (PCRE2_MATCH_INVALID_UTF): ill-formed bytes never match, and the split
 * hands them on as pieces of their own, so byte-level BPE keeps every byte.
 */
#include "tokenizer/tok_internal.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/* The patterns as published with the tokenizers. Llama 3's case-insensitive
 * contractions (?i:'s|...) are spelled out with [sS] classes: under UCP,
 * caseless matching would also accept e.g. U+017F (long s) for 's'. */
static const char *const k_regex[] = {
    [TF_PRE_NONE] = NULL,
    [TF_PRE_GPT2] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
    [TF_PRE_LLAMA3] = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
                      "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
                      "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    [TF_PRE_QWEN2] = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
                     "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
                     "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};
_Static_assert(sizeof k_regex / sizeof k_regex[0] == TF_PRE_QWEN2 + 1, "one regex per tf_pre_kind");

const char *tf_pretok_regex(tf_pre_kind kind) {
    return (unsigned)kind <= TF_PRE_QWEN2 ? k_regex[kind] : NULL;
}

tf_status tf_pretok_init(tf_pretok *p, tf_pre_kind kind, tf_err *err) {
    p->kind = kind;
    p->code = NULL;
    p->jit = false;
    const char *rx = tf_pretok_regex(kind);
    if (!rx) return TF_OK;
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
    /* JIT is an optimisation only: where it is unavailable the interpreter runs. */
    p->jit = pcre2_jit_compile(re, PCRE2_JIT_COMPLETE) == 0;
    p->code = re;
    return TF_OK;
}

void tf_pretok_free(tf_pretok *p) {
    if (p->code) pcre2_code_free((pcre2_code *)p->code);
    p->code = NULL;
}

/* Walk the matches from left to right; text between matches (ill-formed
 * UTF-8 only, since the patterns' last alternatives cover every character)
 * becomes a piece too. A JIT failure (e.g. its stack limit on a huge
 * whitespace run) is retried with the interpreter before giving up. */
tf_status tf_pretok_split(const tf_pretok *p, const char *text, size_t len, tf_piece_fn fn, void *user, tf_err *err) {
    if (len == 0) return TF_OK;
    if (!p->code) return fn(user, text, len, err);
    const pcre2_code *re = p->code;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    if (!md) return tf_errf(err, TF_ERR_NOMEM, "pre-tokenizer: out of memory for PCRE2 match data");
    tf_status st = TF_OK;
    uint32_t opts = 0;
    size_t pos = 0;
    while (pos < len && st == TF_OK) {
        int rc = pcre2_match(re, (PCRE2_SPTR)text, len, pos, opts, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) {
            st = fn(user, text + pos, len - pos, err);
            break;
        }
        if (rc < 0) {
            if (p->jit && !(opts & PCRE2_NO_JIT)) {
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
        if (s > pos) st = fn(user, text + pos, s - pos, err);
        if (st != TF_OK) break;
        if (e == s) e = s + tf_utf8_char_len(text + s, len - s); /* empty match: none of our patterns has one */
        st = fn(user, text + s, e - s, err);
        pos = e;
    }
    pcre2_match_data_free(md);
    return st;
}
