/*
 * weights.h — a model's weights as one backend holds them.
 *
 * On a host-memory backend (the CPU) the matrices are the model's own mapped
 * tensors, except those whose type the backend reads faster in a layout of
 * its own (ops->weight_layout: the CPU's packed rows), which are rearranged
 * once per model and layout and kept with the model (tf_model.wpack), shared
 * by every tf_bweights made from it; elsewhere (CUDA) every tensor the
 * forward pass reads is uploaded once into one buffer, shared by every
 * decoding level that uses the model.
 *
 * tf_bweights_check names the first tensor or op of the model the backend
 * cannot run, before anything is reserved: the choice of a device and the
 * refusal message come from the backend's supports() table.
 */
#ifndef TF_MODEL_WEIGHTS_H
#define TF_MODEL_WEIGHTS_H

#include "backend/backend.h"
#include "model/model.h"

/* The matrices of one layer in a fixed order: every walk over a layer's
 * weights uses this list. */
#define TF_LAYER_MATS 7
void tf_layer_mats(const tf_layer_weights *L, const tf_tensor *out[TF_LAYER_MATS]);

typedef struct tf_blayer {
    tf_bmat wq, wk, wv, wo, w_gate, w_up, w_down;
    const float *bq, *bk, *bv;         /* [q_dim], [kv_dim], [kv_dim]; NULL without q/k/v biases */
    const float *attn_norm, *ffn_norm; /* [n_embd] */
} tf_blayer;

typedef struct tf_bweights {
    tf_backend *be;      /* not owned */
    const tf_model *m;   /* not owned */
    void *block;         /* the uploads (NULL on a host-memory backend) */
    size_t bytes;        /* of block */
    tf_bmat tok_embd, output;
    const float *output_norm; /* [n_embd] */
    const float *rope_freq;   /* [n_rot/2] */
    tf_blayer *layers;        /* [n_layer], a host array */
} tf_bweights;

/* TF_OK if be runs every op of m's forward pass with m's weight types;
 * else TF_ERR_UNSUPPORTED naming the tensor or op (with a hint). */
tf_status tf_bweights_check(const tf_backend *be, const tf_model *m, tf_err *err);

/* Check, then bind (host memory) or upload (elsewhere) m's weights. */
tf_status tf_bweights_init(tf_bweights *w, tf_backend *be, const tf_model *m, tf_err *err);
void tf_bweights_free(tf_bweights *w);

#endif
