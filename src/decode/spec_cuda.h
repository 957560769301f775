/*
 * spec_cuda.h — what the decoding levels do differently on a CUDA device
 * (private to spec.c). Everything else — the forward passes, the caches'
 * storage and bookkeeping, the query captures, the distributions — is the
 * same code on both devices, over the backend table (backend/backend.h).
 *
 * Left here: the streaming level's ring of unrotated keys with the rotated
 * view built from it in the pass's prologue (captured into the level's CUDA
 * graph). The retrieval level's sums, selection and gather are backend ops
 * (kv/retrieval.h), the same code on both devices.
 *
 * In a build without CUDA these functions exist and refuse
 * (TF_ERR_UNSUPPORTED); spec.c calls them only when s->dev is set.
 */
#ifndef TF_DECODE_SPEC_CUDA_H
#define TF_DECODE_SPEC_CUDA_H

#include "decode/spec.h"

/* The device state (its streaming levels' rings). */
tf_status tf_spec_dev_init(tf_spec *s, tf_err *err);
void tf_spec_dev_free(tf_spec *s);

/* A streaming level: its view (L->sc.view, on the device) and ring, and
 * L->sc's bookkeeping; *n_extra: ints of prologue input for the forward. */
tf_status tf_spec_dev_stream_init(tf_spec *s, spec_level *L, int32_t n_batch, int32_t rows, int32_t *n_extra,
                                  tf_err *err);
/* After the level's forward is reserved: its prologue builds the view. */
void tf_spec_dev_stream_bind(tf_spec *s, spec_level *L);
/* The streaming level's pass: view, forward, ring append. */
tf_status tf_spec_dev_stream_forward(tf_spec *s, spec_level *L, const int32_t *toks, int32_t n, int32_t logits_from);

#endif
