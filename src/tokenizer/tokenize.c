/*
 * tokenize.c — tf_tokenize: the part common to both tokenizer kinds.
 *
 * The text is first split on special tokens written in it: user-defined
 * tokens always (they are "added tokens" that the model expects to see
 * whole), control and unknown tokens only when parse_special is set. At each
 * position the longest special token that starts there wins, scanning left
 * to right. The raw-text fragments between them go to the SPM or BPE
 * encoder; BOS and EOS are added around the whole when add_special is set
 * and the metadata asks for them.
 *
 * A byte-level tokenizer whose tokenizer.json normalizes to NFC
 * (tokenizer.triforce.normalizer) puts each raw fragment in NFC first.
 *
 * SPM prepends its "▁" space prefix to a fragment that starts the text or
 * follows a special token, as the reference implementation does.
 */
#include "tokenizer/tok_internal.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* Longest special token that s[0..n) starts with, or NULL. */
static const tf_special *match_special(const tf_tokenizer *tok, const char *s, size_t n, bool parse_special) {
    unsigned char c = (unsigned char)s[0];
    for (uint32_t k = tok->special_start[c]; k < tok->special_start[c + 1]; k++) {
        const tf_special *sp = &tok->specials[k];
        if (!parse_special && !sp->always) continue;
        if (sp->len <= n && memcmp(s, tf_tok_str(tok, sp->id), sp->len) == 0) return sp;
    }
    return NULL;
}

/* Whether the SPM "▁" goes before this fragment (tf_space_prefix). */
static bool space_prefix(const tf_tokenizer *tok, const char *s, size_t n, bool at_start, bool after_special) {
    if (!tok->add_space_prefix) return false;
    const bool lead_space = n > 0 && s[0] == ' ';
    switch (tok->space_prefix) {
    case TF_SPACE_PREFIX_FIRST: return at_start && !lead_space;
    case TF_SPACE_PREFIX_ALWAYS: return !lead_space;
    default: return after_special;
    }
}

static tf_status encode_raw(const tf_tokenizer *tok, const char *s, size_t n, bool at_start, bool after_special,
                            tf_tok_out *o, tf_err *err) {
    if (tok->nfc) {
        /* Unicode NFC (utf8proc). Text that is not valid UTF-8 has no normal
         * form and is encoded as it is (HF tokenizers cannot take it at all). */
        utf8proc_uint8_t *norm = NULL;
        utf8proc_ssize_t m = n ? utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &norm,
                                              UTF8PROC_STABLE | UTF8PROC_COMPOSE)
                               : -1;
        if (m >= 0) {
            tf_status st = tf_bpe_encode(tok, (const char *)norm, (size_t)m, o, err);
            free(norm);
            return st;
        }
        free(norm);
    }
    if (tok->kind == TF_TOK_SPM)
        return tf_spm_encode(tok, s, n, space_prefix(tok, s, n, at_start, after_special), o, err);
    return tf_bpe_encode(tok, s, n, o, err);
}

tf_status tf_tokenize(const tf_tokenizer *tok, const char *text, size_t len, bool add_special, bool parse_special,
                      int32_t *out, size_t cap, size_t *n_out, tf_err *err) {
    if (n_out) *n_out = 0;
    if (!tok || !n_out || (!text && len) || (!out && cap))
        return tf_errf(err, TF_ERR_INVALID_ARG,
                       "tf_tokenize: NULL argument (tok and n_out are required; text when len > 0; out when cap > 0)");
    if (len > TF_TOK_MAX_TEXT)
        return tf_errf(err, TF_ERR_RANGE, "tf_tokenize: text of %zu bytes is longer than the %zu bytes one call takes",
                       len, TF_TOK_MAX_TEXT);
    tf_tok_out o = {.ids = out, .cap = cap, .n = 0};
    if (add_special && tok->add_bos && tok->bos >= 0) tf_tok_emit(&o, tok->bos);

    bool scan = tok->n_specials > 0 && (parse_special || tok->n_always > 0);
    bool after_special = true; /* the text start counts as following a special token */
    size_t frag = 0;
    tf_status st = TF_OK;
    for (size_t pos = 0; scan && pos < len;) {
        const tf_special *sp = match_special(tok, text + pos, len - pos, parse_special);
        if (!sp) {
            pos++;
            continue;
        }
        if (pos > frag) {
            st = encode_raw(tok, text + frag, pos - frag, frag == 0, after_special, &o, err);
            if (st != TF_OK) return st;
        }
        tf_tok_emit(&o, sp->id);
        after_special = true;
        pos += sp->len;
        frag = pos;
    }
    if (len > frag) {
        st = encode_raw(tok, text + frag, len - frag, frag == 0, after_special, &o, err);
        if (st != TF_OK) return st;
    }
    if (add_special && tok->add_eos && tok->eos >= 0) tf_tok_emit(&o, tok->eos);
    *n_out = o.n;
    if (o.n > cap)
        return tf_errf(err, TF_ERR_RANGE, "tf_tokenize: %zu tokens do not fit in the output array of %zu", o.n, cap);
    return TF_OK;
}
