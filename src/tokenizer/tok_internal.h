/*
 * tok_internal.h — the tokenizer's private layout, shared by the files of
 * src/tokenizer/ and by tests/test_tokenizer.c. Nothing outside those
 * includes it.
 *
 *   vocab.c     loading from GGUF, string -> id hash, BPE merge table, accessors
 *   pretok.c    pre-tokenizer programs of PCRE2 splits (byte-level BPE only)
 *   spm.c       SentencePiece-style score-ordered merging with byte fallback
 *   bpe.c       byte-level BPE: GPT-2 byte map, rank-ordered merging
 *   heap.c      the bigram priority queue both merge loops use
 *   tokenize.c  tf_tokenize: special-token partition, BOS/EOS, dispatch
 *   detok.c     token -> bytes, whole-sequence and streaming detokenizers
 *
 * A tf_tokenizer is immutable once tf_tokenizer_from_gguf returns: every
 * function here reads it only and keeps per-call state on the stack or in
 * per-call allocations, so one tokenizer may serve many threads.
 */
#ifndef TF_TOKENIZER_TOK_INTERNAL_H
#define TF_TOKENIZER_TOK_INTERNAL_H

#include "tokenizer/tokenizer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* tokenizer.ggml.token_type values (as written by the GGUF converters). */
enum {
    TF_TOKTYPE_UNDEFINED = 0,
    TF_TOKTYPE_NORMAL = 1,
    TF_TOKTYPE_UNKNOWN = 2,
    TF_TOKTYPE_CONTROL = 3,
    TF_TOKTYPE_USER_DEFINED = 4,
    TF_TOKTYPE_UNUSED = 5,
    TF_TOKTYPE_BYTE = 6,
};

/* Pre-tokenizer regex sets (byte-level BPE), one per family of
 * tokenizer.ggml.pre names (vocab.c maps the names). */
typedef enum tf_pre_kind {
    TF_PRE_NONE = 0,       /* SPM: no pre-tokenization */
    TF_PRE_GPT2,           /* GPT-2's regex */
    TF_PRE_LLAMA3,         /* Llama 3's regex (digits in runs of 1..3) */
    TF_PRE_QWEN2,          /* Llama 3's regex with single digits */
    TF_PRE_DEEPSEEK_LLM,   /* newlines, cased letters, punctuation, trailing space, CJK, digit runs */
    TF_PRE_DEEPSEEK_CODER, /* newlines, letters, punctuation, CJK, single digits */
    TF_PRE_FALCON,         /* punctuation runs, GPT-2's regex, digit triples */
    TF_PRE_STARCODER,      /* single digits, then GPT-2's regex */
    TF_PRE_COUNT
} tf_pre_kind;

#define TF_PRETOK_MAX_STEPS 8

typedef enum tf_pretok_op { TF_STEP_SPLIT = 0, TF_STEP_PREFIX_SPACE } tf_pretok_op;

/* What a split keeps of the matches (M) and the stretches between them
 * (G); see pretok.c. */
typedef enum tf_split_behavior {
    TF_SPLIT_ISOLATED = 0, /* M and G each a piece */
    TF_SPLIT_REMOVED,      /* G only */
    TF_SPLIT_MERGED_PREV,  /* M glued to the G before it */
    TF_SPLIT_MERGED_NEXT,  /* M glued to the G after it */
    TF_SPLIT_CONTIGUOUS,   /* adjacent Ms as one piece */
    TF_SPLIT_COUNT
} tf_split_behavior;

/* One step of a pre-tokenizer program. */
typedef struct tf_pretok_step {
    uint8_t op;       /* tf_pretok_op */
    uint8_t behavior; /* tf_split_behavior (split) */
    bool invert;      /* split: matches and stretches swap roles */
    bool jit;         /* JIT compilation succeeded */
    void *code;       /* split: pcre2_code_8 * (opaque so that only pretok.c includes pcre2.h) */
} tf_pretok_step;

/* A compiled pre-tokenizer: its steps run in order, each on every piece
 * the steps before it produced. No steps: the text is one piece. Read-only
 * after it is built. */
typedef struct tf_pretok {
    tf_pre_kind kind; /* the built-in set it came from; TF_PRE_NONE for a program read from the file */
    int n_steps;
    tf_pretok_step step[TF_PRETOK_MAX_STEPS];
} tf_pretok;

/* Special-token matcher entry (control, user-defined, unknown tokens). */
typedef struct tf_special {
    int32_t id;
    uint32_t len;        /* bytes of its text (> 0) */
    unsigned char first; /* first byte of its text (the bucket) */
    bool always;         /* user-defined: matched even without parse_special */
} tf_special;

#define TF_TOK_MAX_EOG 8
#define TF_TOK_MAX_TEXT ((size_t)1 << 30) /* longest text one tf_tokenize call accepts (bytes) */

/* SPM: where the "▁" of add_space_prefix goes. FRAGMENT (llama.cpp, GGUF
 * files): before the text and after every special token. The Metaspace
 * pre-tokenizer of a tokenizer.json (Hugging Face tokenizers): FIRST, before
 * the fragment at the start of the text only; ALWAYS, before every
 * fragment; either only where the fragment does not already start with a
 * space. */
typedef enum { TF_SPACE_PREFIX_FRAGMENT, TF_SPACE_PREFIX_FIRST, TF_SPACE_PREFIX_ALWAYS } tf_space_prefix;

struct tf_tokenizer {
    tf_tok_kind kind;
    int32_t n_vocab;
    bool nfc; /* text fragments are put in Unicode NFC before encoding (tokenizer.triforce.normalizer) */

    /* Interned strings: ids [0, n_vocab) are the tokens; BPE may append
     * strings that occur only in merges (ids >= n_vocab, never emitted). */
    int32_t n_str;
    char *pool;        /* NUL-separated texts */
    uint32_t *str_off; /* (n_str) offset into pool */
    uint32_t *str_len; /* (n_str) bytes, without the NUL */

    float *scores;  /* (n_vocab) SPM merge priority; 0 where absent */
    uint8_t *types; /* (n_vocab) TF_TOKTYPE_* */

    /* string -> id: open addressing, linear probing; slot = id or -1. */
    int32_t *hash_slot; /* (hash_mask + 1) */
    uint32_t *hash_val; /* (hash_mask + 1) hash of the slot's string */
    uint32_t hash_mask;

    /* BPE merges: rank i joins (merge_a[i], merge_b[i]) into merge_out[i]. */
    int32_t n_merges;
    int32_t *merge_a, *merge_b, *merge_out; /* (n_merges) interned ids */
    int32_t *merge_slot;                    /* (merge_mask + 1) merge rank or -1 */
    uint32_t merge_mask;

    /* Byte handling. */
    int32_t byte_tok[256];     /* token for a lone byte: SPM <0xXX> (or the 1-byte token), BPE the mapped char; -1 none */
    int32_t byte_sym[256];     /* BPE: interned id of the mapped char (the initial symbols), -1 none */
    uint16_t byte_cp[256];     /* GPT-2 byte -> code point */
    int16_t cp_byte[324];      /* GPT-2 code point (< 324) -> byte, -1 if none */
    int32_t *tok_byte;         /* (n_vocab) byte a BYTE-type token stands for, -1 otherwise */

    /* Special tokens, bucketed by first byte, longest first in each bucket. */
    tf_special *specials;        /* (n_specials) */
    int32_t n_specials, n_always; /* n_always: how many are user-defined */
    uint32_t special_start[257]; /* bucket b is specials[special_start[b] .. special_start[b+1]) */

    /* Special ids (-1 = none) and flags. */
    int32_t bos, eos, unk, pad, eot, eom, sep;
    int32_t eog[TF_TOK_MAX_EOG];
    int n_eog;
    bool add_bos, add_eos, add_space_prefix, ignore_merges;
    /* SPM: which fragments add_space_prefix applies to (tokenizer.triforce.space_prefix) */
    tf_space_prefix space_prefix;
    /* SPM: no token has a "▁" right after a character other than "▁", so no
     * merge can span such a point and the text may be merged in segments
     * cut before each of them (same result, cache-sized merge queues). */
    bool spm_split;

    tf_pretok pre;
    char pre_name[48];
    char describe[160];
};

/* ---- vocab.c ---- */

/* Id of the interned string s[0..n) (token or merge-only string), or -1. */
int32_t tf_tok_lookup(const tf_tokenizer *tok, const char *s, size_t n);
/* Id of the token whose text is s[0..n), or -1 (merge-only strings excluded). */
static inline int32_t tf_tok_find_token(const tf_tokenizer *tok, const char *s, size_t n) {
    int32_t id = tf_tok_lookup(tok, s, n);
    return id < tok->n_vocab ? id : -1;
}
/* Merge rank of the pair (a, b) of interned ids, or -1; *out gets the merged id. */
int32_t tf_tok_merge_rank(const tf_tokenizer *tok, int32_t a, int32_t b, int32_t *out);
static inline const char *tf_tok_str(const tf_tokenizer *tok, int32_t id) { return tok->pool + tok->str_off[id]; }

/* ---- output sink shared by the encoders ---- */

/* Collects ids up to cap and counts all of them. */
typedef struct tf_tok_out {
    int32_t *ids;
    size_t cap;
    size_t n;
} tf_tok_out;

static inline void tf_tok_emit(tf_tok_out *o, int32_t id) {
    if (o->n < o->cap) o->ids[o->n] = id;
    o->n++;
}

/* ---- heap.c: min-heap of candidate merges ---- */

/* A candidate merge of adjacent symbols left/right. key orders the heap
 * (lower first; SPM uses its score mapped to an inverted order-preserving
 * integer, BPE the merge rank), ties go to the lower left index, i.e. the
 * leftmost pair. size is the byte length of the merged symbol when the
 * candidate was made, so a stale entry (one of the symbols merged elsewhere
 * since) is recognised when popped. */
typedef struct tf_bigram {
    uint32_t key;
    int32_t left, right;
    uint32_t size;
} tf_bigram;

typedef struct tf_bigram_heap {
    tf_bigram *v;
    size_t n, cap;
} tf_bigram_heap;

/* Push (grows the array; false on allocation failure). */
bool tf_bigram_push(tf_bigram_heap *h, tf_bigram b);
/* Pop the best entry into *out; false when empty. */
bool tf_bigram_pop(tf_bigram_heap *h, tf_bigram *out);
void tf_bigram_heap_free(tf_bigram_heap *h);

/* A symbol of the doubly linked list the merge loops work on: bytes
 * [start, start + n) of the working text; n == 0 once merged away. */
typedef struct tf_symbol {
    int32_t prev, next;
    uint32_t start, n;
    int32_t id; /* BPE: interned id of the symbol (-1 if none); SPM: unused */
} tf_symbol;

/* ---- spm.c / bpe.c: encode one raw-text fragment ---- */

/* SPM: escape spaces to U+2581 (after prepending one when add_prefix),
 * merge, emit with byte fallback. TF_ERR_NOMEM on allocation failure. */
tf_status tf_spm_encode(const tf_tokenizer *tok, const char *text, size_t len, bool add_prefix, tf_tok_out *out,
                        tf_err *err);
/* BPE: pre-tokenize, byte-map, merge by rank, emit. */
tf_status tf_bpe_encode(const tf_tokenizer *tok, const char *text, size_t len, tf_tok_out *out, tf_err *err);
/* The GPT-2 byte <-> code point tables. */
void tf_bpe_byte_map(uint16_t byte_cp[256], int16_t cp_byte[324]);

/* ---- pretok.c ---- */

/* Build the built-in set of kind (PCRE2, UTF + UCP, invalid UTF-8
 * tolerated). */
tf_status tf_pretok_init(tf_pretok *p, tf_pre_kind kind, tf_err *err);
/* Append one step spelled "prefix_space" or
 * "<behavior>[!]:<regex|literal>:<pattern>" (spec need not be
 * NUL-terminated; what names it in messages). TF_ERR_FORMAT for a bad
 * spelling or a pattern that does not compile, TF_ERR_UNSUPPORTED for too
 * many steps or a pattern that can match the empty string. */
tf_status tf_pretok_add_step(tf_pretok *p, const char *spec, size_t len, const char *what, tf_err *err);
void tf_pretok_free(tf_pretok *p);
/* Regex i of the built-in set of kind, NULL past its end. */
const char *tf_pretok_regex(tf_pre_kind kind, int i);
const char *tf_split_behavior_name(tf_split_behavior b);

/* Called once per piece, in order; return non-OK to stop the split. */
typedef tf_status (*tf_piece_fn)(void *user, const char *s, size_t n, tf_err *err);

/* Split text into pieces by running the program. Without prefix_space
 * steps or removed stretches the pieces cover text exactly, in order. */
tf_status tf_pretok_split(const tf_pretok *p, const char *text, size_t len, tf_piece_fn fn, void *user, tf_err *err);

/* ---- UTF-8 ---- */

typedef enum tf_utf8_kind { TF_UTF8_VALID, TF_UTF8_INVALID, TF_UTF8_INCOMPLETE } tf_utf8_kind;

/* Classify the bytes at s[0..n) (n >= 1). VALID: *adv = sequence length.
 * INVALID: *adv = length of the maximal ill-formed subpart (>= 1), which one
 * U+FFFD replaces. INCOMPLETE: s[0..n) is a proper prefix of a well-formed
 * sequence that the end of the buffer cut; *adv = n. */
static inline tf_utf8_kind tf_utf8_next(const unsigned char *s, size_t n, size_t *adv) {
    unsigned char c = s[0];
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c < 0x80) { *adv = 1; return TF_UTF8_VALID; }
    if (c >= 0xC2 && c <= 0xDF) need = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else { *adv = 1; return TF_UTF8_INVALID; }
    for (size_t i = 1; i < need; i++) {
        if (i >= n) { *adv = n; return TF_UTF8_INCOMPLETE; }
        unsigned char lo_i = i == 1 ? lo : 0x80, hi_i = i == 1 ? hi : 0xBF;
        if (s[i] < lo_i || s[i] > hi_i) { *adv = i; return TF_UTF8_INVALID; }
    }
    *adv = need;
    return TF_UTF8_VALID;
}

/* Length of the character at s (n >= 1 bytes): a well-formed sequence, or 1
 * for each byte that is not part of one. */
static inline size_t tf_utf8_char_len(const char *s, size_t n) {
    size_t adv;
    return tf_utf8_next((const unsigned char *)s, n, &adv) == TF_UTF8_VALID ? adv : 1;
}

#endif
