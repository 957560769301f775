/*
 * hf.h — Hugging Face checkpoint directories as models.
 *
 * A directory holding config.json, model.safetensors (or shards listed in
 * model.safetensors.index.json) and tokenizer.json is assembled into an
 * in-memory GGUF view (a tf_gguf), so the GGUF model loader, the tokenizer
 * builder, `info` and the GGUF writer all work on it unchanged:
 *   - config.json (+ generation_config.json) become general.* and llama.*
 *     (LlamaForCausalLM, MistralForCausalLM) or qwen2.* (Qwen2ForCausalLM)
 *     metadata keys, as the GGUF converters name them;
 *   - tokenizer.json becomes tokenizer.ggml.* keys (tokenizer/hf_tokenizer.h);
 *   - tensors keep their stored type (F32, F16, BF16) and point into the
 *     mapped safetensors files, renamed to GGUF names. Two kinds are copied:
 *     1-D norm weights (widened to F32, as the loader expects) and the query
 *     and key projections of llama checkpoints, whose rows are permuted from
 *     Hugging Face's rotate-half RoPE layout to the adjacent-pair layout of
 *     GGUF llama files (rows of a head [x0..x(d/2-1), y0..y(d/2-1)] become
 *     [x0 y0 x1 y1 ...]), in their stored type. qwen2 checkpoints keep the
 *     rotate-half layout, as GGUF qwen2 files do (the model rotates pairs
 *     (i, i + d/2) for them); their q/k/v biases become f32
 *     blk.N.attn_{q,k,v}.bias. Llama 3 frequency factors become a
 *     rope_freqs.weight tensor.
 * The view owns its mappings and copies (tf_gguf_close releases them).
 */
#ifndef TF_MODEL_HF_H
#define TF_MODEL_HF_H

#include "core/error.h"
#include "core/log.h"
#include "format/gguf.h"
#include "format/gguf_write.h"
#include "model/model.h"

#include <stdbool.h>
#include <stdint.h>

/* What config.json (and generation_config.json) say, validated. */
typedef struct tf_hf_config {
    char arch[64];              /* architectures[0], e.g. "LlamaForCausalLM" */
    tf_arch gguf_arch;          /* what it becomes: llama or qwen2 */
    char torch_dtype[16];       /* informational ("" when absent) */
    int64_t n_vocab, n_embd, n_ff, n_layer, n_head, n_head_kv;
    int64_t head_dim;           /* 0 when not given: n_embd / n_head */
    int64_t n_ctx_train;        /* max_position_embeddings */
    double rms_eps, rope_theta;
    bool tied, tied_given;      /* tie_word_embeddings */
    tf_rope_scaling rope_scaling;
    double rope_factor;         /* linear, yarn, llama3 */
    int64_t rope_orig_ctx;      /* yarn, llama3: original_max_position_embeddings */
    double yarn_beta_fast, yarn_beta_slow;
    double yarn_attn_factor;    /* multiplier of 1 + 0.1 ln(factor) (HF's attention_factor / that) */
    double llama3_low_freq_factor, llama3_high_freq_factor;
    bool rope_dynamic;          /* "dynamic" scaling, applied statically (see hf_config.c) */
    int64_t bos, eos;           /* -1 when not given */
} tf_hf_config;

/* True if `path` names a directory. */
bool tf_hf_is_dir(const char *path);

/* Read and validate DIR/config.json and the optional DIR/generation_config.json.
 * Errors name the file, the key and what was expected; an architecture other
 * than LlamaForCausalLM / MistralForCausalLM / Qwen2ForCausalLM is
 * TF_ERR_UNSUPPORTED, and so is a Qwen2 config with use_sliding_window true. */
tf_status tf_hf_config_load(tf_hf_config *c, const char *dir, const tf_logger *log, tf_err *err);

/* Write the general.* and llama.* / qwen2.* metadata keys of c into w (name: general.name). */
tf_status tf_hf_config_to_gguf(const tf_hf_config *c, const char *name, tf_gguf_writer *w, tf_err *err);

/* Assemble the directory into *g (see the banner). vocab_only: config.json
 * may be absent and no weights are read (tokenizer.json is then required).
 * On failure *g is closed. */
tf_status tf_hf_open(tf_gguf *g, const char *dir, bool vocab_only, const tf_logger *log, tf_err *err);

/* Row permutation between the two RoPE layouts for a [n_head * head_dim]
 * rows projection: GGUF row (h, 2i + t) holds HF row (h, t * head_dim/2 + i).
 * Returns the HF row for a GGUF row (exposed for tests and exporters). */
static inline int64_t tf_hf_qk_row(int64_t gguf_row, int64_t head_dim) {
    int64_t h = gguf_row / head_dim, r = gguf_row % head_dim;
    return h * head_dim + (r % 2) * (head_dim / 2) + r / 2;
}

#endif
