/*
 * bpe.c — byte-level BPE (the "gpt2" GGUF vocabularies: GPT-2, Llama 3, ...).
 *
 * The text is cut into pieces by the pre-tokenizer regex; each piece is
 * merged on its own. Every byte of a piece starts as one symbol: the
 * character GPT-2's byte-to-unicode table maps it to (printable Latin-1
 * bytes map to themselves, the other 68 to U+0100..U+0143 in byte order).
 * Adjacent symbols are then merged lowest merge rank first (leftmost among
 * equals) with a priority queue over a linked symbol list; merges work on
 * interned ids, so no strings are built while merging. A finished symbol
 * that is not a token falls back to one token per byte.
 */
#include "tokenizer/tok_internal.h"

#include <stdlib.h>
#include <string.h>

void tf_bpe_byte_map(uint16_t byte_cp[256], int16_t cp_byte[324]) {
    for (int i = 0; i < 324; i++) cp_byte[i] = -1;
    int shifted = 0;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        byte_cp[b] = (uint16_t)(printable ? b : 256 + shifted++);
        cp_byte[byte_cp[b]] = (int16_t)b;
    }
}

typedef struct bpe_work {
    const tf_tokenizer *tok;
    tf_tok_out *out;
    tf_symbol *sym; /* reused across pieces */
    size_t sym_cap;
    char *enc; /* byte-mapped piece (ignore_merges lookups) */
    size_t enc_cap;
    tf_bigram_heap heap;
} bpe_work;

/* Queue the merge of symbols left and right if the merge table has it. */
static bool bpe_try_pair(bpe_work *w, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return true;
    const tf_symbol *l = &w->sym[left], *r = &w->sym[right];
    if (l->id < 0 || r->id < 0) return true;
    int32_t merged;
    int32_t rank = tf_tok_merge_rank(w->tok, l->id, r->id, &merged);
    if (rank < 0) return true;
    tf_bigram b = {.key = (uint32_t)rank, .left = left, .right = right, .size = l->n + r->n};
    return tf_bigram_push(&w->heap, b);
}

/* Emit the token for bytes s[0..n) whose symbol has interned id sym_id. */
static void bpe_emit_symbol(const tf_tokenizer *tok, int32_t sym_id, const char *s, uint32_t n, tf_tok_out *out) {
    if (sym_id >= 0 && sym_id < tok->n_vocab) {
        tf_tok_emit(out, sym_id);
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        int32_t b = tok->byte_tok[(unsigned char)s[i]];
        if (b >= 0) tf_tok_emit(out, b);
        else if (tok->unk >= 0) tf_tok_emit(out, tok->unk);
    }
}

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

/* Encode one pre-tokenizer piece (tf_piece_fn). */
static tf_status bpe_piece(void *user, const char *s, size_t n, tf_err *err) {
    bpe_work *w = user;
    const tf_tokenizer *tok = w->tok;
    if (n == 0) return TF_OK;
    if (tok->ignore_merges) { /* a piece that is a whole token is taken as is */
        if (!grow((void **)&w->enc, &w->enc_cap, 2 * n, 1))
            return tf_errf(err, TF_ERR_NOMEM, "tokenize: out of memory for a piece of %zu bytes", n);
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            uint16_t cp = tok->byte_cp[(unsigned char)s[i]];
            if (cp < 0x80) {
                w->enc[m++] = (char)cp;
            } else {
                w->enc[m++] = (char)(0xC0 | (cp >> 6));
                w->enc[m++] = (char)(0x80 | (cp & 0x3F));
            }
        }
        int32_t id = tf_tok_find_token(tok, w->enc, m);
        if (id >= 0) {
            tf_tok_emit(w->out, id);
            return TF_OK;
        }
    }
    if (!grow((void **)&w->sym, &w->sym_cap, n, sizeof *w->sym))
        return tf_errf(err, TF_ERR_NOMEM, "tokenize: out of memory for a piece of %zu bytes", n);
    tf_symbol *sym = w->sym;
    for (size_t i = 0; i < n; i++)
        sym[i] = (tf_symbol){.prev = (int32_t)i - 1,
                             .next = i + 1 < n ? (int32_t)i + 1 : -1,
                             .start = (uint32_t)i,
                             .n = 1,
                             .id = tok->byte_sym[(unsigned char)s[i]]};
    w->heap.n = 0;
    for (size_t i = 1; i < n; i++)
        if (!bpe_try_pair(w, (int32_t)i - 1, (int32_t)i)) goto nomem;

    tf_bigram b;
    while (tf_bigram_pop(&w->heap, &b)) {
        tf_symbol *l = &sym[b.left], *r = &sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue; /* stale */
        int32_t merged = -1;
        tf_tok_merge_rank(tok, l->id, r->id, &merged);
        l->id = merged;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = b.left;
        if (!bpe_try_pair(w, l->prev, b.left) || !bpe_try_pair(w, b.left, l->next)) goto nomem;
    }
    for (int32_t i = 0; i >= 0; i = sym[i].next) bpe_emit_symbol(tok, sym[i].id, s + sym[i].start, sym[i].n, w->out);
    return TF_OK;
nomem:
    return tf_errf(err, TF_ERR_NOMEM, "tokenize: out of memory in the merge queue (piece of %zu bytes)", n);
}

tf_status tf_bpe_encode(const tf_tokenizer *tok, const char *text, size_t len, tf_tok_out *out, tf_err *err) {
    bpe_work w = {.tok = tok, .out = out};
    tf_status st = tf_pretok_split(&tok->pre, text, len, bpe_piece, &w, err);
    tf_bigram_heap_free(&w.heap);
    free(w.sym);
    free(w.enc);
    return st;
}
