/*
 * streaming.h — the StreamingLLM cache C_q of the draft level: S attention-sink
 * tokens plus a ring of recent tokens, updated in place.
 *
 * Token t of the sequence (0-based) lives in sink slot t when t < S, else in
 * ring slot (t - S) mod R, where R = W + slack: the ring keeps `slack` tokens
 * beyond the window W so that rolling back up to `slack` tokens loses nothing
 * and copies nothing (the head just moves back).
 *
 * Keys are stored before RoPE. A query at sequence index P sees the sinks
 * t < min(S, P) and the window t in [max(S, P - W), P), at *logical*
 * positions: sinks 0..S'-1, the window S'..S'+n_w-1, the query S'+n_w — so the
 * draft never sees a position beyond S + W however long the sequence gets.
 * tf_scache_view() writes the visible tokens, rotated at their logical
 * positions, into a contiguous tf_kv_cache in logical order; the shared
 * forward pass then runs on it like on any other cache, and the new tokens'
 * unrotated keys come back through the forward's capture buffers
 * (tf_scache_append). A batch of n tokens sees the window as of the batch's
 * first token plus the batch's own earlier tokens (drafting feeds one token
 * per call, which is exactly StreamingLLM).
 *
 * This module keeps the bookkeeping (which token is in which ring slot, what
 * a query sees); the ring, the view and their copies and rotation live on a
 * backend (tf_ring_call in backend/backend.h), so the same code serves the
 * CPU and a device.
 */
#ifndef TF_KV_STREAMING_H
#define TF_KV_STREAMING_H

#include "kv/kv.h"

#include <stdbool.h>

typedef struct tf_scache {
    int32_t n_layer, n_head_kv, head_dim, kv_dim;
    int32_t sinks;   /* S */
    int32_t window;  /* W */
    int32_t ring;    /* R = W + slack */
    int32_t n_batch; /* most tokens per call */
    float *k, *v;    /* [n_layer][S + R][kv_dim], keys unrotated (backend memory) */
    int64_t n_seen;  /* tokens appended (sequence length) */
    int64_t n_high;  /* highest n_seen ever reached: bounds the lossless rollback depth */
    int64_t floor;   /* tokens below this (and >= S) were skipped, never stored */
    tf_kv_cache view;/* attention view: S + W + n_batch slots */
    tf_backend *be;  /* where the ring and the view live */
    tf_backend own_be; /* tf_scache_init's: a CPU backend */
    tf_ring_call call; /* the ring's buffers, RoPE and scratch, for the ops */
    int32_t *stage_h, *stage_d; /* [1 + S + W] nv and the view's map; then [n_batch] slots of an append */
    int32_t *pos_d;  /* positions 0 .. S + W + n_batch - 1 of the RoPE table */
    void *table, *scratch;
} tf_scache;

/* A streaming cache on backend be (freq: the draft's RoPE frequencies
 * [n_rot/2] in be's memory; rope_neox and mscale as tf_hparams rope_neox and
 * tf_model rope_mscale). The view has view_type, as be stores it. */
tf_status tf_scache_init_on(tf_scache *c, tf_backend *be, int32_t n_layer, int32_t n_head_kv, int32_t head_dim,
                            int32_t n_rot, bool rope_neox, const float *freq, float mscale, int32_t sinks,
                            int32_t window, int32_t slack, int32_t n_batch, tf_dtype view_type, tf_err *err);
/* The same in host memory (a CPU backend of one thread). */
tf_status tf_scache_init(tf_scache *c, int32_t n_layer, int32_t n_head_kv, int32_t head_dim, int32_t n_rot,
                         bool rope_neox, const float *freq, float mscale, int32_t sinks, int32_t window, int32_t slack,
                         int32_t n_batch, tf_dtype view_type, tf_err *err);
void tf_scache_free(tf_scache *c);

/* Build the attention view for a call whose first token has sequence index
 * c->n_seen. Returns the number of visible slots (the slot where the call's
 * tokens go) and writes the logical position of the call's first token to
 * *pos0 (the call's tokens take pos0, pos0 + 1, ...). Fails only when a
 * device cannot take the staged map. */
tf_status tf_scache_view(tf_scache *c, int32_t *slot0, int32_t *pos0, tf_err *err);

/* Append n <= n_batch tokens' unrotated keys and values, [n_layer][ld_rows]
 * [kv_dim] in the backend's memory (the forward's cap_k / cap_v with ld_rows
 * = its n_batch). */
tf_status tf_scache_append(tf_scache *c, const float *k, const float *v, int32_t n, int32_t ld_rows, tf_err *err);

/* Skip to sequence length n >= n_seen without storing the tokens between
 * (prefill of a long prompt stores the sinks and only the last W tokens). */
void tf_scache_skip(tf_scache *c, int64_t n);

/* Roll back to n tokens (n <= n_seen). Returns TF_ERR_RANGE if the ring no
 * longer holds the window this needs (deeper than the slack). */
tf_status tf_scache_truncate(tf_scache *c, int64_t n, tf_err *err);

/* The ring slot (sinks first) that holds sequence index t. */
size_t tf_scache_slot(const tf_scache *c, int64_t t);
/* The ring slots of the view a call at c->n_seen sees, in view order, into
 * map (room for S + W); returns their count (the view is built from them). */
int32_t tf_scache_view_map(const tf_scache *c, int32_t *map);
/* Sequence index held by sink / window slot i of the current view (tests). */
int64_t tf_scache_view_token(const tf_scache *c, int32_t i);

#endif
