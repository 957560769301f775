/*
 * ref_forward.h — a plain float64 llama forward pass for tests, written
 * independently of the engine: weights are dequantized with the scalar
 * reference, RoPE frequencies are derived here from the hyper-parameters
 * (none / linear / YaRN / llama3 factors), attention is the textbook softmax.
 */
#ifndef TF_REF_FORWARD_H
#define TF_REF_FORWARD_H

#include "model/model.h"

/* Logits [n][n_vocab] (double) for tokens[0..n) at positions 0..n-1. Caller frees. */
double *ref_forward(const tf_model *m, const int32_t *tokens, int n);

#endif
