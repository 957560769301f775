/*
 * heap.c — binary min-heap of candidate merges (tf_bigram), shared by the
 * SPM and BPE merge loops. Order: lower key first, then lower left index,
 * which makes equal-priority merges happen leftmost first.
 */
#include "tokenizer/tok_internal.h"

#include <stdlib.h>

static bool bigram_before(const tf_bigram *a, const tf_bigram *b) {
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

bool tf_bigram_push(tf_bigram_heap *h, tf_bigram b) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        tf_bigram *v = realloc(h->v, cap * sizeof *v);
        if (!v) return false;
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!bigram_before(&b, &h->v[parent])) break;
        h->v[i] = h->v[parent];
        i = parent;
    }
    h->v[i] = b;
    return true;
}

bool tf_bigram_pop(tf_bigram_heap *h, tf_bigram *out) {
    if (h->n == 0) return false;
    *out = h->v[0];
    tf_bigram last = h->v[--h->n];
    size_t i = 0, n = h->n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bigram_before(&h->v[c + 1], &h->v[c])) c++;
        if (!bigram_before(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (n > 0) h->v[i] = last;
    return true;
}

void tf_bigram_heap_free(tf_bigram_heap *h) {
    free(h->v);
    h->v = NULL;
    h->n = h->cap = 0;
}
