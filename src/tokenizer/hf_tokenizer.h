/*
 * hf_tokenizer.h — Hugging Face tokenizer.json (+ tokenizer_config.json) to
 * the tokenizer.ggml.* GGUF metadata keys that tf_tokenizer_from_gguf reads.
 *
 * The translation writes keys into a tf_gguf_writer; the caller serialises
 * and parses it (tf_gguf_writer_write_mem -> tf_gguf_parse) and builds the
 * tokenizer from that, so the tokenizer code is the same for both sources.
 *
 * Two families of model.type "BPE" are supported (see docs/TOKENIZER.md):
 *   - SentencePiece-style (Llama 2, Mistral, TinyLlama): spaces escaped to
 *     "▁" by a Prepend/Replace normalizer or a Metaspace pre-tokenizer,
 *     <0xXX> byte fallback. Written as model "llama" with scores derived
 *     from the merge ranks (score = -rank of the best merge producing the
 *     token), which makes the score-ordered SPM merger merge in rank order.
 *   - Byte-level (GPT-2, Llama 3, Qwen2, SmolLM2, DeepSeek): a ByteLevel
 *     pre-tokenizer (with or without add_prefix_space and use_regex), last
 *     in a Sequence after any Split (Regex or String pattern, every
 *     behaviour, inverted or not) and Digits items. Written as model "gpt2"
 *     with the merges; tokenizer.ggml.pre names the pre-tokenizer when it
 *     equals a built-in set, else the steps are written to
 *     tokenizer.triforce.pre_steps (pre = "triforce-steps").
 * Anything else is refused with TF_ERR_UNSUPPORTED (never guessed); every
 * error names the file, the JSON path and what was expected.
 */
#ifndef TF_TOKENIZER_HF_TOKENIZER_H
#define TF_TOKENIZER_HF_TOKENIZER_H

#include "core/error.h"
#include "format/gguf_write.h"

#include <stddef.h>
#include <stdint.h>

/* Read tokenizer_json_path (and tokenizer_config_path, which may be NULL)
 * and add to w: tokenizer.ggml.model, .pre, .tokens, .token_type, .scores
 * (SPM) or .merges (byte-level), .add_space_prefix (SPM), and where known
 * .bos/.eos/.unknown/.padding_token_id and .add_bos_token/.add_eos_token,
 * and tokenizer.triforce.pre_steps for a pre-tokenizer no name stands for.
 *
 * n_vocab_model: the model's embedding rows. Larger than the tokenizer:
 * ids beyond it become "[PAD<id>]" tokens of type unused; smaller: error
 * naming both sizes; <= 0: the tokenizer's own size.
 *
 * tokenizer_config.json, when given, decides add_bos_token/add_eos_token
 * and the bos/eos/pad tokens (strings or {"content": ...} objects, looked up
 * in the vocabulary); otherwise they come from the post_processor template.
 *
 * On failure nothing is left in w (keys added so far are removed), err names
 * the file, the key and what was expected: TF_ERR_IO (cannot read),
 * TF_ERR_FORMAT (malformed: not JSON, wrong types, id gaps or duplicates,
 * merges naming unknown tokens, vocabulary larger than the model),
 * TF_ERR_UNSUPPORTED (another model type, normalizer, pre-tokenizer, regex
 * or decoder), TF_ERR_INVALID_ARG (a key already in w), TF_ERR_NOMEM. */
tf_status tf_hf_tokenizer_to_gguf(tf_gguf_writer *w, const char *tokenizer_json_path,
                                  const char *tokenizer_config_path, int64_t n_vocab_model, tf_err *err);

/* The same from JSON text in memory (need not be NUL-terminated).
 * json_name / config_name are used in messages; config may be NULL. */
tf_status tf_hf_tokenizer_to_gguf_mem(tf_gguf_writer *w, const char *json, size_t json_len, const char *json_name,
                                      const char *config, size_t config_len, const char *config_name,
                                      int64_t n_vocab_model, tf_err *err);

#endif
