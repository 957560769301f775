/*
 * streaming.h — the StreamingLLM cache C_q of the draft level: S attention-sink
 * tokens plus a window of the W most recent tokens, read by attention in
 * place.
 *
 * A query at sequence index P sees the sinks t < min(S, P) and the window
 * t in [max(S, P - W), P), at *logical* positions: sinks 0..S'-1, the window
 * S'..S'+n_w-1, the query S'+n_w — so the draft never sees a distance beyond
 * S + W however long the sequence gets. A batch of n tokens sees the window as
 * of the batch's first token plus the batch's own earlier tokens (drafting
 * feeds one token per call, which is exactly StreamingLLM).
 *
 * RoPE scores depend only on the distance between the query's and the key's
 * positions, and the window is contiguous, so the window's keys are stored
 * once, rotated at their sequence positions, and queries are rotated at
 * theirs: the distances within the window and to the query are the logical
 * ones. Only the sinks' distances change as the window slides: their keys are
 * kept unrotated too and rewritten into the view rotated at index + shift,
 * shift = (first window token) - S', whenever the shift changes (S slots, not
 * S + W).
 *
 * The view is one KV cache: the sinks in slots [0, S), then the window's
 * tokens in consecutive slots; the slots between (the tokens that slid out)
 * are the cache's gap (tf_kv_cache.gap_lo/gap_hi), which attention skips.
 * When the slots run out the recent tokens are copied back to the front,
 * whole K blocks at a time (about W + slack slots every ~W + n_batch tokens).
 * Rolling back to any length whose window is still stored loses nothing and
 * copies nothing; right after such a copy that is the last `slack` tokens,
 * before it more.
 *
 * This module keeps the bookkeeping; the storage, copies and rotation go
 * through the backend's table (upload, copy, rope, kv_store), so the same code
 * serves the CPU and a device.
 */
#ifndef TF_KV_STREAMING_H
#define TF_KV_STREAMING_H

#include "kv/kv.h"

#include <stdbool.h>

typedef struct tf_scache {
    int32_t n_layer, n_head_kv, head_dim, kv_dim;
    int32_t sinks;     /* S */
    int32_t window;    /* W */
    int32_t slack;     /* rollback depth kept when the window is copied back */
    int32_t n_batch;   /* most tokens per call */
    int64_t n_seen;    /* tokens stored or skipped (sequence length) */
    int64_t floor;     /* tokens below this (and >= S) were skipped, never stored */
    int64_t base_tok;  /* window tokens t >= base_tok live in slot base_slot + (t - base_tok) */
    int32_t base_slot;
    int64_t shift;     /* the view's sink keys are rotated at their index + shift */
    int32_t n_sink_keys; /* sinks whose unrotated keys are kept */
    tf_kv_cache view;  /* what attention reads (on be) */
    tf_backend *be;    /* where the view and the sinks' keys live */
    tf_backend own_be; /* tf_scache_init's: a CPU backend */
    float *sink_k, *sink_v; /* [n_layer][S][kv_dim] unrotated (backend memory) */
    float *rot;        /* [S][kv_dim] a layer's sink keys being rotated (backend memory) */
    int32_t *pos_h, *stage_d; /* [S] rotation positions (host); on be: [1] slot 0, then [S] positions */
    void *table;       /* the sinks' RoPE table (backend memory; NULL where it needs none) */
    const float *freq;
    float mscale;
    int32_t n_rot;
    bool neox;
} tf_scache;

/* A streaming cache on backend be (freq: the draft's RoPE frequencies
 * [n_rot/2] in be's memory; rope_neox and mscale as tf_hparams rope_neox and
 * tf_model rope_mscale) for sequences of up to max_seq tokens (0: any
 * length; a bound below what the window needs also bounds the slots). The
 * view has view_type, as be stores it. */
tf_status tf_scache_init_on(tf_scache *c, tf_backend *be, int32_t n_layer, int32_t n_head_kv, int32_t head_dim,
                            int32_t n_rot, bool rope_neox, const float *freq, float mscale, int32_t sinks,
                            int32_t window, int32_t slack, int32_t n_batch, int32_t max_seq, tf_dtype view_type,
                            tf_err *err);
/* The same in host memory (a CPU backend of one thread). */
tf_status tf_scache_init(tf_scache *c, int32_t n_layer, int32_t n_head_kv, int32_t head_dim, int32_t n_rot,
                         bool rope_neox, const float *freq, float mscale, int32_t sinks, int32_t window, int32_t slack,
                         int32_t n_batch, int32_t max_seq, tf_dtype view_type, tf_err *err);
void tf_scache_free(tf_scache *c);

/* Empty the cache (a new sequence). */
void tf_scache_reset(tf_scache *c);

/* Prepare the view for a call of n <= n_batch tokens whose first has
 * sequence index c->n_seen: room for them (copying the window back when the
 * slots run out), the sinks rotated for the current shift and the view's gap.
 * The call's tokens go to slots *slot0, *slot0 + 1, ... at positions *pos0,
 * *pos0 + 1, ... (their sequence indices); each row sees the slots before its
 * own outside the gap (tf_forward's default). */
tf_status tf_scache_view(tf_scache *c, int32_t n, int32_t *slot0, int32_t *pos0, tf_err *err);

/* Whether the next call's keys must be passed to tf_scache_append (they
 * include sinks, whose unrotated keys are kept). */
static inline bool tf_scache_wants_keys(const tf_scache *c) { return c->n_seen < c->sinks; }

/* Record the n tokens the forward pass stored into the view. k, v: their
 * unrotated keys and values, [n_layer][ld_rows][kv_dim] in the backend's
 * memory (the forward's out.k / out.v with ld_rows = its n_batch), read only
 * when tf_scache_wants_keys() said so before the call (else may be NULL). */
tf_status tf_scache_append(tf_scache *c, const float *k, const float *v, int32_t n, int32_t ld_rows, tf_err *err);

/* Skip to sequence length n >= n_seen without storing the tokens between
 * (prefill of a long prompt stores the sinks and only the last W tokens). */
void tf_scache_skip(tf_scache *c, int64_t n);

/* Roll back to n tokens (n <= n_seen). Returns TF_ERR_RANGE, changing
 * nothing, if the window this needs is no longer stored. */
tf_status tf_scache_truncate(tf_scache *c, int64_t n, tf_err *err);

/* The view slot that holds sequence index t (-1: not stored), and the first
 * window token a query at c->n_seen sees (tests). */
int32_t tf_scache_slot(const tf_scache *c, int64_t t);
int64_t tf_scache_window_lo(const tf_scache *c);

#endif
