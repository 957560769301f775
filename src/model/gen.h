/*
 * gen.h — random-weight Llama (or Qwen2) models of any shape, written as GGUF.
 *
 * tf_gen_model writes a file that loads like a converted llama.cpp model
 * (general.architecture = "llama", llama.* hyper-parameters, llama tensor
 * names and shapes) with deterministic pseudo-random weights, for testing
 * whole-model code paths and for benchmarking shapes we cannot download.
 * With arch = TF_ARCH_QWEN2 the file is a qwen2 model instead: qwen2.* keys
 * and f32 biases blk.N.attn_{q,k,v}.bias (uniform, std 0.5); its q/k rows
 * are read in the rotate-half RoPE layout (random weights have no layout).
 *
 * Weights: every tensor has its own stream derived from (seed, tensor name)
 * and every row its own sub-stream, so the values do not depend on the
 * thread count and a model with fewer layers has the same first layers.
 * Matrices are uniform with standard deviation 1/sqrt(row length) so each
 * projection keeps activations O(1); untied token embeddings have std 1 and
 * a tied embedding has std n_embd^-1/4 (logits then have std ~1 either way);
 * norm weights are uniform in [0.9, 1.1]. Norms and rope_freqs are F32.
 *
 * Memory: tensors are generated and written one chunk of rows at a time
 * (about 32 MiB plus one f32 row per thread), so a 13 GB model needs well
 * under 100 MB of RAM.
 */
#ifndef TF_MODEL_GEN_H
#define TF_MODEL_GEN_H

#include "core/dtype.h"
#include "core/error.h"
#include "core/log.h"
#include "model/model.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tf_gen_params {
    tf_arch arch;        /* TF_ARCH_LLAMA (default) or TF_ARCH_QWEN2 */
    /* shape (head_dim = n_embd / n_head, which must be even) */
    int32_t n_embd;
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv;   /* divides n_head */
    int32_t n_ff;
    int32_t n_ctx_train; /* llama.context_length */
    /* Byte vocabulary only (ignored with vocab_from): 0 = the 259 tokens
     * <unk>, <s>, </s>, <0x00>..<0xFF>; larger values append normal tokens
     * (single characters, "▁x", letter pairs and triples, ...) up to n_vocab. */
    int32_t n_vocab;
    float rms_eps;
    float rope_base;     /* llama.rope.freq_base */
    /* RoPE scaling:
     *   NONE   — no scaling keys
     *   LINEAR — rope.scaling.type "linear", rope.scaling.factor
     *   YARN   — type "yarn", factor, original_context_length, and the
     *            beta_fast / beta_slow / attn_factor keys when > 0
     *   LLAMA3 — no scaling keys; a rope_freqs.weight tensor of head_dim/2
     *            F32 divisors computed as Llama 3.1 does from factor,
     *            low/high frequency factors and the original context */
    tf_rope_scaling rope_scaling;
    float rope_factor;
    int32_t rope_orig_ctx;
    float yarn_beta_fast, yarn_beta_slow, yarn_attn_factor;
    float llama3_low_freq_factor, llama3_high_freq_factor;
    bool tied_output;    /* no output.weight; the embedding is reused */
    /* Type of every 2-D weight (token_embd and output included):
     * any registry type (core/dtype_list.h). A matrix
     * whose row length is not a multiple of the type's block size is written as F16 (logged). */
    tf_dtype wtype;
    uint64_t seed;
    const char *name;       /* general.name; NULL = "triforce-gen" */
    const char *vocab_from; /* GGUF whose tokenizer.* keys are copied (n_vocab from
                               its token list), or NULL for the byte vocabulary */
    int n_threads;          /* 0 = every CPU */
    tf_logger log;          /* resolved settings, fallbacks (fn NULL = silent) */
    tf_progress_fn progress; /* bytes written / total; may cancel */
    void *progress_ud;
} tf_gen_params;

/* Defaults: the "tiny-24m" preset's shape; no RoPE scaling (rope_factor 1,
 * rope_orig_ctx 8192, Llama 3 low/high frequency factors 1 and 4, YaRN
 * extras 0 = not written); byte vocabulary; F16 weights; seed 42; every CPU;
 * no logger, no progress. */
tf_gen_params tf_gen_params_default(void);

/* Named shapes. Applying a preset sets the architecture, shape, vocabulary
 * size, norm epsilon, RoPE settings and tying; type, seed, name and
 * vocab_from stay. */
typedef struct tf_gen_preset {
    const char *name;
    const char *desc;
    tf_arch arch;
    int32_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx_train, n_vocab;
    float rms_eps, rope_base;
    tf_rope_scaling rope_scaling;
    float rope_factor;
    int32_t rope_orig_ctx;
    bool tied_output;
} tf_gen_preset;

/* The preset table: "llama2-7b-128k", "llama-68m", "tiny-24m", "qwen2.5-0.5b", "tinyllama-1.1b",
 * "llama3.2-1b", "llama3.1-8b". */
const tf_gen_preset *tf_gen_presets(size_t *n);
/* Preset by name (case-sensitive), or NULL. */
const tf_gen_preset *tf_gen_preset_find(const char *name);
void tf_gen_params_apply_preset(tf_gen_params *p, const tf_gen_preset *preset);

/* Number of weights the model will have (n_vocab as resolved for the byte
 * vocabulary; with vocab_from, pass the vocabulary size in p->n_vocab). */
uint64_t tf_gen_param_count(const tf_gen_params *p);

/* Check p and write the model to out_path (atomically: see
 * tf_gguf_writer_write_file). Errors: TF_ERR_INVALID_ARG naming the bad
 * field; I/O and format errors of vocab_from naming that file; I/O errors
 * of the output naming out_path; TF_ERR_CANCELLED from progress. */
tf_status tf_gen_model(const tf_gen_params *p, const char *out_path, tf_err *err);

#endif
