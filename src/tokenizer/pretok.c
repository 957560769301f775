/*
 * pretok.c — pre-tokenizers for byte-level BPE: a short program of steps,
 * each applied to every piece the steps before it produced.
 *
 *   split      a PCRE2 regex (UTF + UCP, so \p{L}, \p{N} and \s follow
 *              Unicode properties) or a literal string cuts each piece into
 *              matches and the stretches between them; a behaviour (below)
 *              decides which of those become pieces;
 *   prefix     a piece that does not start with ' ' gets one put in front
 *              (Hugging Face's ByteLevel add_prefix_space).
 *
 * The pre-tokenizers that tokenizer.ggml.pre names are programs of isolated
 * splits (tf_pre_kind, k_sets below): each regex of a set cuts the pieces of
 * the one before it, as the reference implementation applies its regex
 * lists. Programs read from tokenizer.triforce.pre_steps (written by the
 * tokenizer.json translation) may use every behaviour; their regexes run
 * in multiline mode ("^"/"$" at line breaks), as tokenizer.json's do.
 *
 * Behaviours, over the sequence of matches (M) and stretches between them
 * (G), in order (invert swaps the two roles first):
 *   isolated             every M and every G is a piece;
 *   removed              every G is a piece, the Ms are dropped;
 *   merged_with_previous an M right after a G is glued to the end of that G;
 *   merged_with_next     an M right before a G is glued to the start of it;
 *   contiguous           adjacent Ms form one piece.
 * Empty pieces are dropped.
 *
 * Compiled once per tokenizer (JIT where PCRE2 supports it); a split keeps
 * its match data and buffers per call, so one program serves any number of
 * threads. Invalid UTF-8 is tolerated (PCRE2_MATCH_INVALID_UTF): ill-formed
 * bytes never match, so they fall into the stretches between matches and
 * byte-level BPE keeps every byte.
 */
#include "tokenizer/tok_internal.h"

#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/* GPT-2's regex, the last step of several sets. */
#define RX_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

/* Llama 3's case-insensitive contractions (?i:'s|...) are spelled out with
 * [sS] classes, as the reference implementation does: under UCP, caseless
 * matching would also accept e.g. U+017F (long s) for 's'. */
#define RX_LLAMA3_HEAD "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
#define RX_LLAMA3_TAIL "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* CJK ideographs, the block below them and Hangul, as DeepSeek's
 * tokenizers isolate them. */
#define RX_CJK "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"

/* The regex sets, by tokenizer.ggml.pre family (see vocab.c for names).
 * Each is the list published with the tokenizer, applied in order.
 * "\z" stands where the published pattern has "$" (end of the piece; PCRE2's
 * "$" would also match before a final newline). */
static const char *const k_sets[][TF_PRETOK_MAX_STEPS] = {
    [TF_PRE_NONE] = {NULL},
    [TF_PRE_GPT2] = {RX_GPT2},
    [TF_PRE_LLAMA3] = {RX_LLAMA3_HEAD "\\p{N}{1,3}" RX_LLAMA3_TAIL},
    [TF_PRE_QWEN2] = {RX_LLAMA3_HEAD "\\p{N}" RX_LLAMA3_TAIL},
    [TF_PRE_DEEPSEEK_LLM] =
        {
            "[\\r\\n]",
            /* letters of cased scripts (Latin, Greek, Cyrillic, Armenian, Georgian, Cherokee, ...) */
            "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}"
            "\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}"
            "\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}"
            "\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}"
            "\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}"
            "\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}"
            "\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}"
            "\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}"
            "\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}"
            "\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}"
            "\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}"
            "\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}"
            "\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}"
            "\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}"
            "\\x{1E900}-\\x{1E943}]+",
            /* ASCII and full-width punctuation, quotes, CJK punctuation */
            "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
            "\\s+\\z",
            RX_CJK,
            "\\p{N}+",
        },
    [TF_PRE_DEEPSEEK_CODER] = {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RX_CJK, "\\p{N}"},
    [TF_PRE_FALCON] = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RX_GPT2, "[0-9][0-9][0-9]"},
    [TF_PRE_STARCODER] = {"\\p{N}", RX_GPT2},
};
_Static_assert(sizeof k_sets / sizeof k_sets[0] == TF_PRE_COUNT, "one regex set per tf_pre_kind");

const char *tf_pretok_regex(tf_pre_kind kind, int i) {
    if ((unsigned)kind >= TF_PRE_COUNT || i < 0 || i >= TF_PRETOK_MAX_STEPS) return NULL;
    return k_sets[kind][i];
}

static const char *const k_behavior_names[] = {
    [TF_SPLIT_ISOLATED] = "isolated",
    [TF_SPLIT_REMOVED] = "removed",
    [TF_SPLIT_MERGED_PREV] = "merged_with_previous",
    [TF_SPLIT_MERGED_NEXT] = "merged_with_next",
    [TF_SPLIT_CONTIGUOUS] = "contiguous",
};
_Static_assert(sizeof k_behavior_names / sizeof k_behavior_names[0] == TF_SPLIT_COUNT, "one name per behaviour");

const char *tf_split_behavior_name(tf_split_behavior b) {
    return (unsigned)b < TF_SPLIT_COUNT ? k_behavior_names[b] : NULL;
}

/* ------------------------------------------------------------------------ */
/* building                                                                  */

void tf_pretok_free(tf_pretok *p) {
    for (int i = 0; i < p->n_steps; i++)
        if (p->step[i].code) pcre2_code_free((pcre2_code *)p->step[i].code);
    memset(p, 0, sizeof *p);
}

/* Compile pattern (len bytes; literal: PCRE2_LITERAL; multiline: "^" and
 * "$" match at line breaks too, as in tokenizer.json's regex dialect) into
 * step s. what names the step in messages. */
static tf_status compile_step(tf_pretok_step *s, const char *pattern, size_t len, bool literal, bool multiline,
                              const char *what, tf_err *err) {
    int ec = 0;
    PCRE2_SIZE eo = 0;
    uint32_t opts = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
    if (multiline && !literal) opts |= PCRE2_MULTILINE;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, len, opts, &ec, &eo, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return tf_errf(err, TF_ERR_FORMAT, "%s: pattern '%.*s' does not compile (PCRE2, at byte %zu): %s", what,
                       (int)(len < 60 ? len : 60), pattern, (size_t)eo, (const char *)msg);
    }
    uint32_t min_len = 0;
    if (pcre2_pattern_info(re, PCRE2_INFO_MINLENGTH, &min_len) != 0 || min_len == 0) {
        pcre2_code_free(re);
        return tf_errf(err, TF_ERR_UNSUPPORTED,
                       "%s: pattern '%.*s' can match the empty string (expected a pattern that matches at least one "
                       "character)", what, (int)(len < 60 ? len : 60), pattern);
    }
    /* JIT is an optimisation only: where it is unavailable the interpreter runs. */
    s->jit = pcre2_jit_compile(re, PCRE2_JIT_COMPLETE) == 0;
    s->code = re;
    return TF_OK;
}

tf_status tf_pretok_init(tf_pretok *p, tf_pre_kind kind, tf_err *err) {
    memset(p, 0, sizeof *p);
    if ((unsigned)kind >= TF_PRE_COUNT)
        return tf_errf(err, TF_ERR_INVALID_ARG, "tf_pretok_init: pre-tokenizer kind %d is out of range", (int)kind);
    p->kind = kind;
    for (int i = 0; i < TF_PRETOK_MAX_STEPS && k_sets[kind][i]; i++) {
        tf_pretok_step *s = &p->step[p->n_steps++];
        s->op = TF_STEP_SPLIT;
        s->behavior = TF_SPLIT_ISOLATED;
        tf_status st = compile_step(s, k_sets[kind][i], strlen(k_sets[kind][i]), false, false, "pre-tokenizer regex",
                                    err);
        if (st != TF_OK) { /* a built-in pattern: cannot happen */
            tf_pretok_free(p);
            return st;
        }
    }
    return TF_OK;
}

/* One step spelled "prefix_space", or "<behavior>[!]:<regex|literal>:<pattern>"
 * (the pattern is the rest, colons included; "!" inverts). */
tf_status tf_pretok_add_step(tf_pretok *p, const char *spec, size_t len, const char *what, tf_err *err) {
    if (p->n_steps == TF_PRETOK_MAX_STEPS)
        return tf_errf(err, TF_ERR_UNSUPPORTED, "%s: more than %d pre-tokenizer steps", what, TF_PRETOK_MAX_STEPS);
    tf_pretok_step *s = &p->step[p->n_steps];
    memset(s, 0, sizeof *s);
    if (len == 12 && memcmp(spec, "prefix_space", 12) == 0) {
        s->op = TF_STEP_PREFIX_SPACE;
        p->n_steps++;
        return TF_OK;
    }
    const char *c1 = memchr(spec, ':', len);
    const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - spec)) : NULL;
    size_t nb = c1 ? (size_t)(c1 - spec) : 0;
    bool invert = nb > 0 && spec[nb - 1] == '!';
    if (invert) nb--;
    int b = -1;
    for (int i = 0; c1 && i < TF_SPLIT_COUNT; i++)
        if (strlen(k_behavior_names[i]) == nb && memcmp(spec, k_behavior_names[i], nb) == 0) b = i;
    size_t nk = c2 ? (size_t)(c2 - c1 - 1) : 0;
    bool literal = nk == 7 && memcmp(c1 + 1, "literal", 7) == 0;
    if (b < 0 || !c2 || !(literal || (nk == 5 && memcmp(c1 + 1, "regex", 5) == 0)) || c2 + 1 == spec + len)
        return tf_errf(err, TF_ERR_FORMAT,
                       "%s = '%.*s' is not a pre-tokenizer step (expected 'prefix_space' or "
                       "'<behavior>[!]:<regex|literal>:<pattern>' with behavior isolated, removed, "
                       "merged_with_previous, merged_with_next or contiguous)",
                       what, (int)(len < 60 ? len : 60), spec);
    s->op = TF_STEP_SPLIT;
    s->behavior = (uint8_t)b;
    s->invert = invert;
    TF_TRY(compile_step(s, c2 + 1, len - (size_t)(c2 + 1 - spec), literal, true, what, err));
    p->n_steps++;
    return TF_OK;
}

/* ------------------------------------------------------------------------ */
/* splitting                                                                 */

typedef struct split_run {
    const tf_pretok *p;
    tf_piece_fn fn;
    void *user;
    tf_err *err;
    pcre2_match_data *md[TF_PRETOK_MAX_STEPS];
    char *buf[TF_PRETOK_MAX_STEPS]; /* prefix_space: the piece with its space */
    size_t buf_cap[TF_PRETOK_MAX_STEPS];
} split_run;

static tf_status run_step(split_run *r, int k, const char *s, size_t n);

/* A piece leaving step k: on to step k + 1, or out. Empty pieces vanish. */
static tf_status emit(split_run *r, int k, const char *s, size_t n) {
    if (n == 0) return TF_OK;
    if (k + 1 == r->p->n_steps) return r->fn(r->user, s, n, r->err);
    return run_step(r, k + 1, s, n);
}

/* The behaviour's state machine over the segments of one piece: pending is
 * a piece not yet emitted because a later segment may still join it. */
typedef struct seg_state {
    const char *pend; /* NULL: nothing pending */
    size_t pend_n;
    bool pend_match; /* merged_with_next: the pending piece is a lone match */
    bool prev_match; /* the previous segment was a match */
} seg_state;

static tf_status segment(split_run *r, int k, seg_state *st, const char *s, size_t n, bool match) {
    const tf_pretok_step *step = &r->p->step[k];
    if (step->invert) match = !match;
    tf_status rc = TF_OK;
    switch ((tf_split_behavior)step->behavior) {
    case TF_SPLIT_ISOLATED:
        return emit(r, k, s, n);
    case TF_SPLIT_REMOVED:
        return match ? TF_OK : emit(r, k, s, n);
    case TF_SPLIT_CONTIGUOUS:
    case TF_SPLIT_MERGED_PREV:
        /* contiguous: a segment of the same kind as the one before joins it;
         * merged_with_previous: a match after a stretch joins it */
        if (st->pend && (step->behavior == TF_SPLIT_CONTIGUOUS ? match == st->prev_match : match && !st->prev_match)) {
            st->pend_n += n;
        } else {
            if (st->pend) rc = emit(r, k, st->pend, st->pend_n);
            st->pend = s, st->pend_n = n;
        }
        st->prev_match = match;
        return rc;
    case TF_SPLIT_MERGED_NEXT:
        if (st->pend && st->pend_match && !match) { /* the pending match starts this stretch */
            rc = emit(r, k, st->pend, st->pend_n + n);
            st->pend = NULL;
            return rc;
        }
        if (st->pend) rc = emit(r, k, st->pend, st->pend_n);
        st->pend = NULL;
        if (rc != TF_OK) return rc;
        if (!match) return emit(r, k, s, n);
        st->pend = s, st->pend_n = n, st->pend_match = true;
        return TF_OK;
    default:
        return tf_errf(r->err, TF_ERR_INTERNAL, "pre-tokenizer: step %d has behaviour %d", k, step->behavior);
    }
}

/* Step k on the piece s[0..n). A JIT failure (e.g. its stack limit on a
 * huge whitespace run) is retried with the interpreter before giving up. */
static tf_status run_step(split_run *r, int k, const char *s, size_t n) {
    const tf_pretok_step *step = &r->p->step[k];
    if (step->op == TF_STEP_PREFIX_SPACE) {
        if (s[0] == ' ') return emit(r, k, s, n);
        if (n + 1 > r->buf_cap[k]) {
            size_t cap = r->buf_cap[k] ? r->buf_cap[k] : 64;
            while (cap < n + 1) cap *= 2;
            char *q = realloc(r->buf[k], cap);
            if (!q) return tf_errf(r->err, TF_ERR_NOMEM, "pre-tokenizer: out of memory for a piece of %zu bytes", n);
            r->buf[k] = q, r->buf_cap[k] = cap;
        }
        r->buf[k][0] = ' ';
        memcpy(r->buf[k] + 1, s, n);
        return emit(r, k, r->buf[k], n + 1);
    }
    const pcre2_code *re = step->code;
    if (!r->md[k] && !(r->md[k] = pcre2_match_data_create_from_pattern(re, NULL)))
        return tf_errf(r->err, TF_ERR_NOMEM, "pre-tokenizer: out of memory for PCRE2 match data");
    pcre2_match_data *md = r->md[k];
    seg_state st = {0};
    tf_status rc = TF_OK;
    uint32_t opts = 0;
    size_t pos = 0;
    while (pos < n && rc == TF_OK) {
        int m = pcre2_match(re, (PCRE2_SPTR)s, n, pos, opts, md, NULL);
        if (m == PCRE2_ERROR_NOMATCH) break;
        if (m < 0) {
            if (step->jit && !(opts & PCRE2_NO_JIT)) {
                opts |= PCRE2_NO_JIT;
                continue;
            }
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(m, msg, sizeof msg);
            return tf_errf(r->err, TF_ERR_INTERNAL, "pre-tokenizer: PCRE2 match failed at byte %zu of %zu: %s", pos,
                           n, (const char *)msg);
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t a = ov[0], e = ov[1];
        if (a < pos || e <= a || e > n) /* cannot happen (no pattern matches empty); never loop on it */
            return tf_errf(r->err, TF_ERR_INTERNAL, "pre-tokenizer: PCRE2 returned match [%zu, %zu) from %zu", a, e,
                           pos);
        if (a > pos) rc = segment(r, k, &st, s + pos, a - pos, false);
        if (rc == TF_OK) rc = segment(r, k, &st, s + a, e - a, true);
        pos = e;
    }
    if (rc == TF_OK && pos < n) rc = segment(r, k, &st, s + pos, n - pos, false);
    if (rc == TF_OK && st.pend) rc = emit(r, k, st.pend, st.pend_n);
    return rc;
}

tf_status tf_pretok_split(const tf_pretok *p, const char *text, size_t len, tf_piece_fn fn, void *user, tf_err *err) {
    if (len == 0) return TF_OK;
    if (p->n_steps == 0) return fn(user, text, len, err);
    split_run r = {.p = p, .fn = fn, .user = user, .err = err};
    tf_status st = run_step(&r, 0, text, len);
    for (int i = 0; i < p->n_steps; i++) {
        if (r.md[i]) pcre2_match_data_free(r.md[i]);
        free(r.buf[i]);
    }
    return st;
}
