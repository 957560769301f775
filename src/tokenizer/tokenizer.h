/*
 * tokenizer.h — tokenizers built from GGUF metadata (tokenizer.ggml.*):
 *   "llama": SentencePiece-style BPE (score-ordered merges, byte fallback
 *            <0xXX>, leading-space "▁" prefix);
 *   "gpt2":  byte-level BPE (ranked merges, GPT-2 byte<->unicode map) with a
 *            pre-tokenizer regex chosen by tokenizer.ggml.pre (PCRE2, Unicode).
 * Control/user-defined special tokens are matched in the text when
 * parse_special is set. A tf_tokenizer is immutable after creation and may be
 * shared across threads.
 */
#ifndef TF_TOKENIZER_H
#define TF_TOKENIZER_H

#include "core/error.h"
#include "format/gguf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tf_tokenizer tf_tokenizer;

typedef enum tf_tok_kind { TF_TOK_SPM = 1, TF_TOK_BPE = 2 } tf_tok_kind;

/* Build from the tokenizer.ggml.* keys of g (copies what it needs; g may be
 * closed afterwards). Errors name the key and what was expected. */
tf_status tf_tokenizer_from_gguf(tf_tokenizer **out, const tf_gguf *g, tf_err *err);
void tf_tokenizer_free(tf_tokenizer *tok);

tf_tok_kind tf_tokenizer_kind(const tf_tokenizer *tok);
int32_t tf_tokenizer_n_vocab(const tf_tokenizer *tok);
int32_t tf_tokenizer_bos(const tf_tokenizer *tok);  /* -1 if none */
int32_t tf_tokenizer_eos(const tf_tokenizer *tok);  /* -1 if none */
bool tf_tokenizer_add_bos(const tf_tokenizer *tok); /* metadata flag (default: true for SPM, false for BPE) */
bool tf_tokenizer_add_eos(const tf_tokenizer *tok);
/* True for end-of-generation tokens (EOS, EOT). */
bool tf_tokenizer_is_eog(const tf_tokenizer *tok, int32_t id);
/* Short description, e.g. "llama (SPM), 32000 tokens, pre=default". */
const char *tf_tokenizer_describe(const tf_tokenizer *tok);

/* Tokenize len bytes of text (need not be NUL-terminated). add_special adds
 * BOS/EOS as the metadata flags say; parse_special recognises control tokens
 * written in the text. Writes at most cap ids to out; *n_out receives the
 * full count (if > cap, the call returns TF_ERR_RANGE and out holds the first
 * cap ids, so callers can size and retry). Invalid UTF-8 never crashes. */
tf_status tf_tokenize(const tf_tokenizer *tok, const char *text, size_t len, bool add_special, bool parse_special,
                      int32_t *out, size_t cap, size_t *n_out, tf_err *err);

/* The bytes a token stands for when detokenized (SPM "▁" -> ' ', <0xXX> ->
 * the byte, byte-level BPE symbols -> bytes; control tokens -> "" unless
 * render_special). Returns the number of bytes written (at most cap) or the
 * number needed if larger than cap; -1 if id is out of range. */
int32_t tf_token_to_piece(const tf_tokenizer *tok, int32_t id, bool render_special, char *buf, int32_t cap);

/* Raw vocabulary string of a token (as stored in the file, NUL-terminated),
 * for display; NULL if id is out of range. */
const char *tf_token_text(const tf_tokenizer *tok, int32_t id);

/* Detokenize a whole sequence: the concatenation of the pieces (as
 * tf_token_to_piece gives them), with SPM's space prefix undone like the
 * streaming detokenizer does, and no UTF-8 repair, so
 * detokenize(tokenize(x)) == x for text without special-token spellings
 * (see docs/TOKENIZER.md for the exceptions). Writes at most cap bytes (not
 * NUL-terminated); *n_out receives the full length (if > cap: TF_ERR_RANGE,
 * out holds the first cap bytes). An id out of range is TF_ERR_INVALID_ARG. */
tf_status tf_detokenize(const tf_tokenizer *tok, const int32_t *ids, size_t n_ids, bool render_special, char *out,
                        size_t cap, size_t *n_out, tf_err *err);

/* Streaming detokenizer: feed token ids, get back text that is always valid
 * UTF-8; bytes of an incomplete sequence are held until the next token
 * completes them (or flushed as U+FFFD at the end). SPM's leading space after
 * BOS is stripped like the reference implementations do. */
typedef struct tf_detok {
    const tf_tokenizer *tok;
    unsigned char pending[8];
    int n_pending;
    bool at_start;
} tf_detok;

void tf_detok_init(tf_detok *d, const tf_tokenizer *tok);
/* Append the text for token id to out (capacity cap); returns bytes written
 * (<= cap). Control tokens add nothing. cap >= 64 is enough for one token of
 * typical vocabularies plus held bytes (pieces run to 128 bytes in GPT-2's,
 * and invalid bytes expand to 3-byte U+FFFD): what does not fit is dropped
 * at a character boundary, so the output stays valid UTF-8. */
int32_t tf_detok_push(tf_detok *d, int32_t id, char *out, int32_t cap);
/* Flush held bytes at the end of generation (invalid ones as U+FFFD). */
int32_t tf_detok_flush(tf_detok *d, char *out, int32_t cap);

#endif
