/*
 * model.h — a loaded Llama-family model: hyper-parameters, RoPE tables and
 * weight tensors bound by name from a memory-mapped GGUF file.
 *
 * A tf_model is read-only after loading and may be shared by any number of
 * contexts (the target and its retrieval view, server requests, ...).
 */
#ifndef TF_MODEL_MODEL_H
#define TF_MODEL_MODEL_H

#include "core/dtype.h"
#include "core/error.h"
#include "core/log.h"
#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

#include <stdbool.h>
#include <stdint.h>

typedef enum tf_rope_scaling {
    TF_ROPE_SCALING_NONE = 0,
    TF_ROPE_SCALING_LINEAR = 1,
    TF_ROPE_SCALING_YARN = 2,
    TF_ROPE_SCALING_LLAMA3 = 3, /* per-dimension factors from the rope_freqs tensor */
} tf_rope_scaling;

/* Supported architectures (GGUF general.architecture). Both are the llama
 * graph; qwen2 adds biases to the query, key and value projections and
 * rotates RoPE pairs (i, i + n_rot/2) instead of (2i, 2i+1). */
typedef enum tf_arch {
    TF_ARCH_LLAMA = 0, /* "llama": Llama 1/2/3, Mistral, TinyLlama, ... */
    TF_ARCH_QWEN2 = 1, /* "qwen2": Qwen2, Qwen2.5 */
    TF_ARCH_COUNT
} tf_arch;

/* The GGUF name of an architecture ("llama", "qwen2"), or NULL. */
const char *tf_arch_name(tf_arch arch);

/* Writers of an architecture's metadata key "<arch>.<suffix>" (gen-model and
 * the Hugging Face assembly write the same keys). */
struct tf_gguf_writer;
tf_status tf_arch_set_u32(struct tf_gguf_writer *w, tf_arch arch, const char *suffix, uint32_t v, tf_err *err);
tf_status tf_arch_set_f32(struct tf_gguf_writer *w, tf_arch arch, const char *suffix, float v, tf_err *err);
tf_status tf_arch_set_str(struct tf_gguf_writer *w, tf_arch arch, const char *suffix, const char *v, tf_err *err);
/* The architecture of a GGUF name; false if it is not supported. */
bool tf_arch_from_name(const char *name, size_t len, tf_arch *out);
/* "llama, qwen2": for error messages. */
const char *tf_arch_list(void);

typedef struct tf_hparams {
    tf_arch arch;
    bool rope_neox;      /* RoPE rotates pairs (i, i + n_rot/2) (qwen2), else (2i, 2i+1) */
    bool qkv_bias;       /* the q/k/v projections have biases (qwen2) */
    int32_t n_vocab;
    int32_t n_embd;      /* model width */
    int32_t n_layer;
    int32_t n_head;      /* query heads */
    int32_t n_head_kv;   /* key/value heads (GQA when < n_head) */
    int32_t head_dim;    /* n_embd / n_head unless given by key_length */
    int32_t n_ff;        /* feed-forward width */
    int32_t n_rot;       /* rotated dimensions per head (<= head_dim, even) */
    int32_t n_ctx_train; /* trained context length */
    float rms_eps;
    float rope_base;
    tf_rope_scaling rope_scaling;
    float rope_factor;       /* linear / yarn: context extension factor */
    int32_t rope_orig_ctx;   /* yarn: original context length */
    float yarn_beta_fast;    /* default 32 */
    float yarn_beta_slow;    /* default 1 */
    float yarn_attn_factor;  /* default 1 (multiplies the 0.1 ln(s) + 1 mscale) */
    bool tied_output;        /* output matrix = token embedding */
} tf_hparams;

/* One weight matrix or vector: mapped data, dtype, ne[0] = row length. */
typedef struct tf_tensor {
    const void *data;
    uint32_t type; /* tf_dtype */
    int64_t ne[2]; /* ne[0] contiguous (columns), ne[1] rows */
    const char *name;
} tf_tensor;

typedef struct tf_layer_weights {
    tf_tensor attn_norm; /* [n_embd] f32 */
    tf_tensor wq;        /* rows n_head*head_dim, cols n_embd */
    tf_tensor wk;        /* rows n_head_kv*head_dim, cols n_embd */
    tf_tensor wv;        /* rows n_head_kv*head_dim, cols n_embd */
    tf_tensor bq;        /* [n_head*head_dim] f32 (qkv_bias; else data NULL) */
    tf_tensor bk;        /* [n_head_kv*head_dim] f32 (qkv_bias; else data NULL) */
    tf_tensor bv;        /* [n_head_kv*head_dim] f32 (qkv_bias; else data NULL) */
    tf_tensor wo;        /* rows n_embd, cols n_head*head_dim */
    tf_tensor ffn_norm;  /* [n_embd] f32 */
    tf_tensor w_gate;    /* rows n_ff, cols n_embd */
    tf_tensor w_up;      /* rows n_ff, cols n_embd */
    tf_tensor w_down;    /* rows n_embd, cols n_ff */
} tf_layer_weights;

typedef struct tf_model {
    char path[512];
    char name[128];
    tf_gguf gguf;          /* owns the mapping */
    tf_hparams hp;
    tf_tensor tok_embd;    /* rows n_vocab, cols n_embd */
    tf_tensor output_norm; /* [n_embd] f32 */
    tf_tensor output;      /* rows n_vocab, cols n_embd (== tok_embd when tied) */
    tf_layer_weights *layers; /* [n_layer] */
    /* RoPE: theta(pos, i) = pos * rope_freq[i] for pair i < n_rot/2; cos/sin
     * are multiplied by rope_mscale (YaRN attention scaling, else 1). */
    float *rope_freq;      /* [n_rot/2] */
    float rope_mscale;
    tf_tokenizer *tok;     /* NULL for models without tokenizer metadata */
    uint64_t n_params;
    uint64_t weight_bytes;
    bool vocab_only;       /* only tok is valid */
    const struct tf_model *view_of; /* a layer view: everything above is borrowed from it */
    /* Copies of matrices rearranged for a host backend's own layout
     * (model/weights.c), made once per tensor and layout and shared by every
     * decoder, context and layer view of the model; freed with it. A cache
     * behind a lock in weights.c (the only reader and writer); a view's
     * entries live in the model it views. */
    struct tf_wpack_entry *wpack;
    int32_t n_wpack, cap_wpack;
} tf_model;

/* One packed copy: tensor data src in backend layout `layout` at dst (tf_alloc). */
typedef struct tf_wpack_entry {
    const void *src;
    uint32_t layout;
    void *dst;
} tf_wpack_entry;

/* Load a GGUF model file (or a Hugging Face directory, see hf.h). Every
 * metadata value and tensor is validated against the file's architecture
 * (llama or qwen2; others are TF_ERR_UNSUPPORTED, naming the supported ones); failures name the file, key or tensor and
 * what was expected. *out is NULL on failure. */
tf_status tf_model_load(tf_model **out, const char *path, const tf_logger *log, tf_err *err);
/* Read every weight page of a loaded model into memory, reporting bytes done /
 * total to progress (which may cancel: TF_ERR_CANCELLED). */
tf_status tf_model_prefault(const tf_model *m, tf_progress_fn progress, void *ud, tf_err *err);

/* Load only the tokenizer of a GGUF file (vocab-only files, `tokenize`). */
tf_status tf_model_load_vocab(tf_model **out, const char *path, tf_err *err);
void tf_model_free(tf_model *m);

/* The first n_layer layers of src as a model of their own (see
 * tf_model_layer_view in triforce.h); shares all of src's memory. */
tf_status tf_model_view_layers(tf_model **out, const tf_model *src, int32_t n_layer, tf_err *err);
/* Extend a loaded model's context by RoPE scaling (linear or yarn) by factor
 * (1 < factor <= 64): the original context is the trained one, which becomes
 * factor times as long. Only for a model whose RoPE is not scaled yet, before
 * any context, decoder or layer view is made from it. */
tf_status tf_model_extend_rope(tf_model *m, tf_rope_scaling kind, float factor, tf_err *err);

/* Fill rope_freq / rope_mscale from hp (and optional llama3 factors[n_rot/2]).
 * Exposed for tests. */
void tf_rope_init(const tf_hparams *hp, const float *freq_factors, float *rope_freq, float *mscale);
/* Llama 3.1 RoPE frequency divisors ("rope_freqs", the factors of
 * tf_rope_init) of a checkpoint's rope_scaling: out[i] for i < head_dim/2 is 1
 * for wavelengths under orig_ctx / high_freq_factor, factor above
 * orig_ctx / low_freq_factor, and a smooth blend between. */
void tf_rope_llama3_factors(float *out, int32_t head_dim, float rope_base, float factor, float low_freq_factor,
                            float high_freq_factor, int32_t orig_ctx);

/* KV bytes per token for a given cache element size (2 for f16, 4 for f32). */
uint64_t tf_hparams_kv_bytes_per_token(const tf_hparams *hp, int elem_size);

#endif
