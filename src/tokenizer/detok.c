/*
 * detok.c — from token ids back to text.
 *
 *   tf_token_to_piece  the bytes one token stands for
 *   tf_detokenize      a whole sequence, bytes exactly as the pieces give them
 *   tf_detok_*         streaming: text that is valid UTF-8 after every token
 *
 * Pieces: SPM normal tokens turn "▁" into ' '; byte tokens <0xXX> give their
 * byte; byte-level BPE tokens map each character back through GPT-2's table;
 * user-defined tokens give their text; control and unused tokens give
 * nothing unless render_special (then their text); the unknown token gives
 * U+2585 "▅" (its text with render_special).
 *
 * SPM's space prefix is undone: the first piece that produces output, at the
 * start or after BOS, loses one leading space if it is a normal token.
 */
#include "tokenizer/tok_internal.h"

#include <stdlib.h>
#include <string.h>

/* Bounded writer: drops the first `skip` bytes put, copies what fits of the
 * rest, counts everything it did not drop. */
typedef struct wbuf {
    char *buf;
    size_t cap, n, skip;
} wbuf;

static void put(wbuf *w, const char *s, size_t n) {
    if (w->skip) {
        size_t k = w->skip < n ? w->skip : n;
        w->skip -= k;
        s += k;
        n -= k;
    }
    if (w->n < w->cap) {
        size_t k = w->cap - w->n < n ? w->cap - w->n : n;
        memcpy(w->buf + w->n, s, k);
    }
    w->n += n;
}

static void put_byte(wbuf *w, unsigned char c) {
    char ch = (char)c;
    put(w, &ch, 1);
}

/* Piece of a (valid) id into w. */
static void piece(const tf_tokenizer *tok, int32_t id, bool render_special, wbuf *w) {
    const char *s = tf_tok_str(tok, id);
    size_t n = tok->str_len[id];
    switch (tok->types[id]) {
    case TF_TOKTYPE_CONTROL:
    case TF_TOKTYPE_UNUSED:
        if (render_special) put(w, s, n);
        return;
    case TF_TOKTYPE_UNKNOWN:
        if (render_special) put(w, s, n);
        else put(w, "\xe2\x96\x85", 3);
        return;
    case TF_TOKTYPE_USER_DEFINED:
        put(w, s, n);
        return;
    case TF_TOKTYPE_BYTE:
        put_byte(w, (unsigned char)tok->tok_byte[id]);
        return;
    default:
        break;
    }
    if (tok->kind == TF_TOK_SPM) {
        size_t i = 0, run = 0;
        while (i < n) {
            if (i + 3 <= n && memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
                put(w, s + run, i - run);
                put(w, " ", 1);
                i += 3;
                run = i;
            } else {
                i++;
            }
        }
        put(w, s + run, n - run);
        return;
    }
    for (size_t i = 0; i < n;) { /* byte-level BPE: characters back to bytes */
        const unsigned char *u = (const unsigned char *)s + i;
        size_t adv;
        if (tf_utf8_next(u, n - i, &adv) == TF_UTF8_VALID && adv <= 2) {
            uint32_t cp = adv == 1 ? u[0] : ((u[0] & 0x1Fu) << 6) | (u[1] & 0x3Fu);
            if (cp < 324 && tok->cp_byte[cp] >= 0) {
                put_byte(w, (unsigned char)tok->cp_byte[cp]);
                i += adv;
                continue;
            }
        } else if (adv == 0) {
            adv = 1;
        }
        put(w, s + i, adv); /* not a mapped character: keep its bytes */
        i += adv;
    }
}

int32_t tf_token_to_piece(const tf_tokenizer *tok, int32_t id, bool render_special, char *buf, int32_t cap) {
    if (!tok || id < 0 || id >= tok->n_vocab) return -1;
    wbuf w = {.buf = buf, .cap = buf && cap > 0 ? (size_t)cap : 0};
    piece(tok, id, render_special, &w);
    return w.n > INT32_MAX ? INT32_MAX : (int32_t)w.n;
}

/* Whether a piece of id at the start of the text loses one leading space. */
static bool strips_space(const tf_tokenizer *tok, int32_t id) {
    uint8_t ty = tok->types[id];
    return tok->kind == TF_TOK_SPM && tok->add_space_prefix && (ty == TF_TOKTYPE_NORMAL || ty == TF_TOKTYPE_UNDEFINED);
}

tf_status tf_detokenize(const tf_tokenizer *tok, const int32_t *ids, size_t n_ids, bool render_special, char *out,
                        size_t cap, size_t *n_out, tf_err *err) {
    if (n_out) *n_out = 0;
    if (!tok || !n_out || (!ids && n_ids) || (!out && cap))
        return tf_errf(err, TF_ERR_INVALID_ARG,
                       "tf_detokenize: NULL argument (tok and n_out are required; ids when n_ids > 0; out when cap > 0)");
    wbuf w = {.buf = out, .cap = cap};
    bool at_start = true;
    for (size_t i = 0; i < n_ids; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= tok->n_vocab)
            return tf_errf(err, TF_ERR_INVALID_ARG, "tf_detokenize: ids[%zu] = %d is not a token id (expected 0..%d)",
                           i, id, tok->n_vocab - 1);
        size_t skip = 0;
        if (at_start && strips_space(tok, id)) {
            char first = 0;
            wbuf probe = {.buf = &first, .cap = 1};
            piece(tok, id, render_special, &probe);
            skip = probe.n > 0 && first == ' ';
        }
        size_t before = w.n;
        w.skip = skip;
        piece(tok, id, render_special, &w);
        if (w.n > before || skip) at_start = false;
        else if (id == tok->bos) at_start = true;
    }
    *n_out = w.n;
    if (w.n > cap)
        return tf_errf(err, TF_ERR_RANGE, "tf_detokenize: %zu bytes do not fit in the output buffer of %zu", w.n, cap);
    return TF_OK;
}

/* ------------------------------------------------------------------------ */
/* streaming                                                                 */

#define DETOK_FRONT 8     /* room before the piece for held bytes */
#define DETOK_LOCAL 512   /* pieces up to this size need no allocation */

void tf_detok_init(tf_detok *d, const tf_tokenizer *tok) {
    memset(d, 0, sizeof *d);
    d->tok = tok;
    d->at_start = true;
}

/* Append bytes s[0..n) as valid UTF-8: well-formed characters are copied,
 * ill-formed subparts become U+FFFD, an incomplete character at the end is
 * held in d->pending. Stops (dropping the rest) where out is full. */
static int32_t emit_utf8(tf_detok *d, const unsigned char *s, size_t n, char *out, int32_t cap) {
    int32_t w = 0;
    d->n_pending = 0;
    for (size_t i = 0; i < n;) {
        size_t adv;
        tf_utf8_kind k = tf_utf8_next(s + i, n - i, &adv);
        if (k == TF_UTF8_INCOMPLETE) {
            memcpy(d->pending, s + i, adv);
            d->n_pending = (int)adv;
            break;
        }
        const char *src = k == TF_UTF8_VALID ? (const char *)s + i : "\xef\xbf\xbd";
        size_t len = k == TF_UTF8_VALID ? adv : 3;
        if ((size_t)(cap - w) < len) break; /* full: truncate at a character boundary */
        memcpy(out + w, src, len);
        w += (int32_t)len;
        i += adv;
    }
    return w;
}

int32_t tf_detok_push(tf_detok *d, int32_t id, char *out, int32_t cap) {
    if (!d || !d->tok || !out || cap <= 0) return 0;
    const tf_tokenizer *tok = d->tok;
    if (id < 0 || id >= tok->n_vocab) return 0;

    char local[DETOK_FRONT + DETOK_LOCAL];
    char *buf = local, *heap = NULL;
    wbuf w = {.buf = local + DETOK_FRONT, .cap = DETOK_LOCAL};
    piece(tok, id, false, &w);
    if (w.n > DETOK_LOCAL) { /* a very long piece: one allocation, or truncation if that fails */
        heap = malloc(DETOK_FRONT + w.n);
        if (heap) {
            buf = heap;
            w = (wbuf){.buf = heap + DETOK_FRONT, .cap = w.n};
            piece(tok, id, false, &w);
        } else {
            w.n = DETOK_LOCAL;
        }
    }
    char *p = buf + DETOK_FRONT;
    size_t n = w.n;
    if (n == 0) {
        if (id == tok->bos) d->at_start = true;
    } else {
        if (d->at_start && strips_space(tok, id) && p[0] == ' ') {
            p++;
            n--;
        }
        d->at_start = false;
    }
    /* held bytes go right before the piece */
    size_t held = d->n_pending > 0 && d->n_pending <= DETOK_FRONT ? (size_t)d->n_pending : 0;
    p -= held;
    memcpy(p, d->pending, held);
    int32_t written = emit_utf8(d, (const unsigned char *)p, n + held, out, cap);
    free(heap);
    return written;
}

int32_t tf_detok_flush(tf_detok *d, char *out, int32_t cap) {
    if (!d || d->n_pending == 0) return 0;
    d->n_pending = 0;
    if (!out || cap < 3) return 0;
    memcpy(out, "\xef\xbf\xbd", 3);
    return 3;
}
