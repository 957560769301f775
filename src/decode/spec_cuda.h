/*
 * spec_cuda.h — what the decoding levels do differently on a CUDA device
 * (private to spec.c). Everything else — the forward passes, the caches'
 * storage and bookkeeping, the query captures, the distributions — is the
 * same code on both devices, over the backend table (backend/backend.h).
 *
 * Left here: the retrieval level's chunk key sums, selection and gather
 * (kept on the device, next to C_p), and the streaming level's ring of
 * unrotated keys with the rotated view built from it in the pass's prologue
 * (captured into the level's CUDA graph).
 *
 * In a build without CUDA these functions exist and refuse
 * (TF_ERR_UNSUPPORTED); spec.c calls them only when s->dev is set.
 */
#ifndef TF_DECODE_SPEC_CUDA_H
#define TF_DECODE_SPEC_CUDA_H

#include "decode/spec.h"

/* The device state: the chunk sums and selection when a retrieval level exists. */
tf_status tf_spec_dev_init(tf_spec *s, bool has_rc, tf_err *err);
void tf_spec_dev_free(tf_spec *s);
void tf_spec_dev_reset(tf_spec *s);

/* A streaming level: its view (L->sc.view, on the device) and ring, and
 * L->sc's bookkeeping; *n_extra: ints of prologue input for the forward. */
tf_status tf_spec_dev_stream_init(tf_spec *s, spec_level *L, int32_t n_batch, int32_t rows, int32_t *n_extra,
                                  tf_err *err);
/* After the level's forward is reserved: its prologue builds the view. */
void tf_spec_dev_stream_bind(tf_spec *s, spec_level *L);
/* The streaming level's pass: view, forward, ring append. */
tf_status tf_spec_dev_stream_forward(tf_spec *s, spec_level *L, const int32_t *toks, int32_t n, int32_t logits_from);

/* Recompute the chunk sums of C_p after it holds slots [0, s1), from slot s0
 * (an append: the first new slot; a rollback: s1 - 1). */
void tf_spec_dev_sums(tf_spec *s, int32_t s0, int32_t s1);
/* Select and gather C_r into L->view from the newest target query; sets s->rc.n_sel. */
tf_status tf_spec_dev_rebuild(tf_spec *s, spec_level *L);

#endif
