/* detokenizer.c — the public streaming detokenizer (triforce.h) over the
 * tokenizer's own (tokenizer/tokenizer.h): each push runs on a copy of the
 * state into a buffer of the vocabulary's worst case, so a push that does not
 * fit the caller's buffer consumes nothing. */
#include "triforce.h"

#include "core/mem.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

#include <stdlib.h>
#include <string.h>

struct tf_detokenizer {
    tf_detok st;
    int32_t n_vocab;
    size_t max_bytes; /* the most one push writes */
    char *tmp;        /* [max_bytes] */
};

tf_status tf_detokenizer_init(tf_detokenizer **out, const tf_model *model, bool continuation) {
    if (!out) return TF_ERR_INVALID_ARG;
    *out = NULL;
    if (!model) return TF_ERR_INVALID_ARG;
    if (!model->tok) return TF_ERR_UNSUPPORTED;
    tf_detokenizer *d = calloc(1, sizeof *d);
    if (!d) return TF_ERR_NOMEM;
    d->n_vocab = tf_tokenizer_n_vocab(model->tok);
    /* held bytes (at most 3 of a character) and the longest piece, each byte
     * at worst a 3-byte U+FFFD */
    size_t longest = 0;
    for (int32_t t = 0; t < d->n_vocab; t++) {
        int32_t n = tf_token_to_piece(model->tok, t, false, NULL, 0);
        if (n > 0 && (size_t)n > longest) longest = (size_t)n;
    }
    d->max_bytes = 3 * (longest + 4);
    d->tmp = malloc(d->max_bytes);
    if (!d->tmp) {
        free(d);
        return TF_ERR_NOMEM;
    }
    tf_detok_init(&d->st, model->tok);
    d->st.at_start = !continuation;
    *out = d;
    return TF_OK;
}

static tf_status deliver(tf_detokenizer *d, const tf_detok *next, int32_t n, char *buf, size_t cap, size_t *n_out) {
    *n_out = (size_t)n;
    if ((size_t)n > cap) return TF_ERR_RANGE; /* nothing consumed */
    if (n > 0) memcpy(buf, d->tmp, (size_t)n);
    d->st = *next;
    return TF_OK;
}

tf_status tf_detokenizer_push(tf_detokenizer *d, int32_t token, char *buf, size_t cap, size_t *n_out) {
    if (n_out) *n_out = 0;
    if (!d || !n_out || (!buf && cap) || token < 0 || token >= d->n_vocab) return TF_ERR_INVALID_ARG;
    tf_detok next = d->st;
    int32_t n = tf_detok_push(&next, token, d->tmp, (int32_t)d->max_bytes);
    return deliver(d, &next, n, buf, cap, n_out);
}

tf_status tf_detokenizer_flush(tf_detokenizer *d, char *buf, size_t cap, size_t *n_out) {
    if (n_out) *n_out = 0;
    if (!d || !n_out || (!buf && cap)) return TF_ERR_INVALID_ARG;
    tf_detok next = d->st;
    int32_t n = tf_detok_flush(&next, d->tmp, (int32_t)d->max_bytes);
    next.at_start = false;
    return deliver(d, &next, n, buf, cap, n_out);
}

size_t tf_detokenizer_max_bytes(const tf_detokenizer *d) { return d ? d->max_bytes : 0; }

void tf_detokenizer_free(tf_detokenizer *d) {
    if (!d) return;
    free(d->tmp);
    free(d);
}
