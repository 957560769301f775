/*
 * hf_export.h — write a loaded GGUF model out as a Hugging Face checkpoint
 * directory (config.json, safetensors, optional tokenizer.json), for tests of
 * the Hugging Face loader.
 *
 * Written from Hugging Face's conventions, not from the loader's code: tensor
 * names of LlamaForCausalLM / Qwen2ForCausalLM, shapes [rows, cols], and the
 * query/key rows of each head in rotate-half order (the first half of a
 * head's rows hold the first element of every RoPE pair, the second half the
 * second): permuted from a llama GGUF, copied from a qwen2 GGUF (which keeps
 * that order). qwen2 models also get their q/k/v biases and a config with
 * use_sliding_window false.
 */
#ifndef TF_TEST_HF_EXPORT_H
#define TF_TEST_HF_EXPORT_H

#include "model/model.h"

#include <stdbool.h>

typedef struct hf_export_opts {
    int n_shards;              /* <= 1: one model.safetensors; else shards + index */
    bool tied_as_head;         /* tied models: store lm_head.weight instead of embed_tokens */
    bool tie_flag;             /* write "tie_word_embeddings": true for tied models */
    const char *tokenizer_json; /* text of tokenizer.json, or NULL for none */
    /* llama3 scaling cannot be read back from rope_freqs; give it here */
    bool llama3;
    double llama3_factor, llama3_low, llama3_high;
    int llama3_orig_ctx;
    const char *extra_config;  /* raw JSON members appended to config.json ("\"x\": 1"), or NULL */
} hf_export_opts;

/* Export m to dir (created if needed). Returns 0, or -1 with a message printed. */
int hf_export(const tf_model *m, const char *dir, const hf_export_opts *o);

#endif
