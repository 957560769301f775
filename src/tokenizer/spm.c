/*
 * spm.c — SentencePiece-style BPE as the "llama" GGUF vocabularies use it.
 *
 * The fragment is escaped (' ' -> U+2581 "▁", one "▁" prepended when asked),
 * split into UTF-8 characters (each ill-formed byte is a character of its
 * own), and then adjacent symbols are merged greedily: always the pair whose
 * concatenation is a vocabulary token with the highest score, the leftmost
 * one among equal scores. A priority queue of candidate pairs over a linked
 * list of symbols makes this O(n log n) in the fragment length; where the
 * vocabulary allows it (tf_tokenizer.spm_split) the queue is run per
 * word-sized segment, which gives the same result faster. Symbols that
 * end up outside the vocabulary (single characters only) fall back to byte
 * tokens <0xXX>, then to the unknown token.
 */
#include "tokenizer/tok_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct spm_work {
    const tf_tokenizer *tok;
    const char *text; /* the segment being merged */
    tf_symbol *sym;   /* reused across segments */
    size_t sym_cap;
    tf_bigram_heap heap;
} spm_work;

/* Order-preserving map of a float to uint32, inverted so that higher scores
 * sort first in the min-heap. -0.0 is folded into +0.0 (they tie). */
static uint32_t score_key(float score) {
    float f = score + 0.0f;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ~u;
}

/* Queue the merge of symbols left and right if their concatenation is a
 * token. False only on allocation failure. */
static bool spm_try_pair(spm_work *w, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return true;
    const tf_symbol *l = &w->sym[left], *r = &w->sym[right];
    uint32_t size = l->n + r->n;
    int32_t id = tf_tok_find_token(w->tok, w->text + l->start, size);
    if (id < 0) return true;
    tf_bigram b = {.key = score_key(w->tok->scores[id]), .left = left, .right = right, .size = size};
    return tf_bigram_push(&w->heap, b);
}

/* Emit one final symbol: its token, or its bytes one token each. */
static void spm_emit_symbol(const tf_tokenizer *tok, const char *s, uint32_t n, tf_tok_out *out) {
    int32_t id = tf_tok_find_token(tok, s, n);
    if (id >= 0) {
        tf_tok_emit(out, id);
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        int32_t b = tok->byte_tok[(unsigned char)s[i]];
        if (b >= 0) tf_tok_emit(out, b);
        else if (tok->unk >= 0) tf_tok_emit(out, tok->unk);
    }
}

/* Merge the characters of s[0..n) (n > 0) and emit the resulting tokens. */
static tf_status spm_segment(spm_work *w, const char *s, size_t n, tf_tok_out *out, tf_err *err) {
    if (n > w->sym_cap) { /* at most one symbol per byte */
        size_t cap = w->sym_cap ? w->sym_cap : 64;
        while (cap < n) cap *= 2;
        tf_symbol *sym = realloc(w->sym, cap * sizeof *sym);
        if (!sym) return tf_errf(err, TF_ERR_NOMEM, "tokenize: out of memory for %zu symbols", n);
        w->sym = sym;
        w->sym_cap = cap;
    }
    tf_symbol *sym = w->sym;
    w->text = s;
    int32_t n_sym = 0;
    for (size_t i = 0; i < n;) {
        size_t k = tf_utf8_char_len(s + i, n - i);
        sym[n_sym] = (tf_symbol){.prev = n_sym - 1, .next = n_sym + 1, .start = (uint32_t)i, .n = (uint32_t)k, .id = -1};
        n_sym++;
        i += k;
    }
    sym[n_sym - 1].next = -1;

    w->heap.n = 0;
    for (int32_t i = 1; i < n_sym; i++)
        if (!spm_try_pair(w, i - 1, i)) goto nomem;
    tf_bigram b;
    while (tf_bigram_pop(&w->heap, &b)) {
        tf_symbol *l = &sym[b.left], *r = &sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue; /* stale: one side merged since */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = b.left;
        if (!spm_try_pair(w, l->prev, b.left) || !spm_try_pair(w, b.left, l->next)) goto nomem;
    }
    for (int32_t i = 0; i >= 0; i = sym[i].next) spm_emit_symbol(w->tok, s + sym[i].start, sym[i].n, out);
    return TF_OK;
nomem:
    return tf_errf(err, TF_ERR_NOMEM, "tokenize: out of memory in the merge queue (%zu bytes)", n);
}

tf_status tf_spm_encode(const tf_tokenizer *tok, const char *text, size_t len, bool add_prefix, tf_tok_out *out,
                        tf_err *err) {
    static const char k_space[3] = {'\xe2', '\x96', '\x81'}; /* U+2581 */
    size_t spaces = 0;
    for (size_t i = 0; i < len; i++) spaces += text[i] == ' ';
    size_t esc_len = (add_prefix ? 3 : 0) + len + 2 * spaces;
    if (esc_len == 0) return TF_OK;
    if (esc_len > UINT32_MAX - 1) return tf_errf(err, TF_ERR_RANGE, "tokenize: fragment of %zu bytes is too long", len);

    char *esc = malloc(esc_len);
    if (!esc) return tf_errf(err, TF_ERR_NOMEM, "tokenize: out of memory for a fragment of %zu bytes", len);
    size_t p = 0;
    if (add_prefix) {
        memcpy(esc, k_space, 3);
        p = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(esc + p, k_space, 3);
            p += 3;
        } else {
            esc[p++] = text[i];
        }
    }

    /* Cut before each "▁" that follows another character where the
     * vocabulary allows it (tok->spm_split); else one segment. */
    spm_work w = {.tok = tok};
    tf_status st = TF_OK;
    size_t seg = 0;
    bool prev_space = false;
    for (size_t i = 0; i < esc_len && st == TF_OK;) {
        size_t n = tf_utf8_char_len(esc + i, esc_len - i);
        bool space = n == 3 && memcmp(esc + i, k_space, 3) == 0;
        if (tok->spm_split && space && !prev_space && i > seg) {
            st = spm_segment(&w, esc + seg, i - seg, out, err);
            seg = i;
        }
        prev_space = space;
        i += n;
    }
    if (st == TF_OK) st = spm_segment(&w, esc + seg, esc_len - seg, out, err);
    tf_bigram_heap_free(&w.heap);
    free(w.sym);
    free(esc);
    return st;
}
