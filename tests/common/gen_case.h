/*
 * gen_case.h — small generated llama models for tests: a shape, a RoPE
 * scaling and a weight type, written to a temporary GGUF by gen-model's
 * generator (n_ctx_train 256, 300-token byte vocabulary, default llama3
 * frequency factors 1 / 4).
 */
#ifndef TF_TEST_GEN_CASE_H
#define TF_TEST_GEN_CASE_H

#include "core/dtype.h"
#include "model/model.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct tu_gen_case {
    const char *label;
    int n_embd, n_layer, n_head, n_head_kv, n_ff;
    tf_rope_scaling scaling;
    float factor;
    int orig_ctx;
    bool tied;
    tf_dtype wtype;
} tu_gen_case;

/* Write the model to a fresh temporary path (a static buffer, valid until
 * the next call); fails the current test if generation fails. */
const char *tu_gen(const tu_gen_case *c, uint64_t seed);
/* The same as a model of architecture arch (qwen2: q/k/v biases). */
const char *tu_gen_arch(const tu_gen_case *c, tf_arch arch, uint64_t seed);

#endif
