/*
 * hf_tokjson.h — test-side generator: the tokenizer.ggml.* vocabulary of a
 * GGUF file written out as a Hugging Face tokenizer.json (+
 * tokenizer_config.json), so that loading it back through
 * tf_hf_tokenizer_to_gguf can be compared with the original tokenizer.
 *
 *   "llama" (SPM): normal, byte and unknown tokens in model.vocab; control
 *     and user-defined tokens (and the unknown one) in added_tokens; merges
 *     = every pair (a, b) of model.vocab pieces whose concatenation is one,
 *     ordered as HF's SentencePiece converter orders them: by the GGUF score
 *     of the concatenation, highest first, then by its id, then by the ids
 *     of a and b. Prepend + Replace normalizer or a Metaspace pre-tokenizer;
 *     the SentencePiece decoder; TemplateProcessing with BOS when the GGUF
 *     adds it.
 *   "gpt2" (byte-level): merges from tokenizer.ggml.merges; ByteLevel
 *     pre-tokenizer (or Split with GPT-2's regex, then ByteLevel) and decoder.
 */
#ifndef TF_TESTS_HF_TOKJSON_H
#define TF_TESTS_HF_TOKJSON_H

#include "format/gguf.h"

#include <stdbool.h>

typedef enum tu_hf_spm_style {
    TU_HF_SPM_NORMALIZER = 0, /* Sequence[Prepend("▁"), Replace(" " -> "▁")], no pre-tokenizer */
    TU_HF_SPM_METASPACE,      /* Metaspace pre-tokenizer, prepend_scheme "first", split false */
    TU_HF_SPM_METASPACE_OLD,  /* Metaspace with the older add_prefix_space: true (and split false) */
} tu_hf_spm_style;

typedef struct tu_hf_opts {
    tu_hf_spm_style spm_style;
    bool merge_pairs; /* merges as ["a", "b"] arrays instead of "a b" strings */
    bool split_regex; /* byte-level: Split(GPT-2 regex) + ByteLevel(use_regex false) */
} tu_hf_opts;

/* Build tokenizer.json and tokenizer_config.json text (malloc'd,
 * NUL-terminated; free with free()) from the tokenizer.ggml.* keys of g.
 * Returns false with a message on stderr when g lacks what it needs. */
bool tu_hf_tokjson_from_gguf(const tf_gguf *g, const tu_hf_opts *opts, char **tokenizer_json, char **config_json);

#endif
