/*
 * ref_forward.h — a plain float64 llama forward pass for tests, written
 * independently of the engine: weights are dequantized with the scalar
 * reference, RoPE frequencies are derived here from the hyper-parameters
 * (none / linear / YaRN / llama3 factors), attention is the textbook softmax.
 * Projection biases (qwen2) are read by their GGUF names
 * (blk.N.attn_{q,k,v}.bias) from the model's file and added after the
 * products, before RoPE, as Hugging Face's Qwen2 attention does.
 */
#ifndef TF_REF_FORWARD_H
#define TF_REF_FORWARD_H

#include "model/model.h"

#include <stdbool.h>

/* Logits [n][n_vocab] (double) for tokens[0..n) at positions 0..n-1. Caller frees. */
double *ref_forward(const tf_model *m, const int32_t *tokens, int n);
/* rotate_half: RoPE rotates pairs (i, i + n_rot/2) of each head, as Hugging
 * Face's Llama does with its own weight layout; false: adjacent pairs
 * (2i, 2i+1), as GGUF. */
double *ref_forward_ex(const tf_model *m, const int32_t *tokens, int n, bool rotate_half);

typedef struct ref_opts {
    bool rotate_half; /* as above */
    bool no_bias;     /* ignore the bias tensors (negative controls) */
} ref_opts;
double *ref_forward_opts(const tf_model *m, const int32_t *tokens, int n, const ref_opts *o);

#endif
