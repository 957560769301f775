/*
 * spec.h — decoding policies: autoregressive, draft-model speculation,
 * retrieval self-speculation, streaming self-speculation and TriForce, all as
 * one hierarchy of levels over the shared forward pass.
 *
 * A level is (weights, KV view, the sampling transform). Level 0 is always the
 * target over its full cache C_p; it alone decides what is emitted. Below it:
 *   spec       [C_p] <- draft model over a StreamingLLM cache C_q
 *   retrieval  [C_p] <- target weights over the retrieval cache C_r
 *   streaming  [C_p] <- target weights over a StreamingLLM cache <- draft over C_q
 *   triforce   [C_p] <- target weights over C_r <- draft over C_q
 *   ar         [C_p]
 * With cfg.lookup > 0 and no draft model, the bottom level of spec,
 * streaming and triforce drafts by looking the text up in itself (lookup.h)
 * instead of running a model: its proposals are one-hot distributions. ar and
 * retrieval, which have no draft level, ignore it (as they ignore a draft).
 * The bottom level samples candidates autoregressively; every other level
 * verifies the candidates of the level below exactly, so each level's output
 * is distributed exactly as its own model, and the target's output exactly as
 * the target. Two couplings of the levels' draws (cfg.coupling): keyed
 * (keyed.h: every level draws position pos with the noise of (seed, pos); a
 * candidate is accepted iff it is the level's own draw, which is otherwise
 * the replacement; every mode's text equals ar's for the seed) and residual
 * (verify.h: accept with min(1, p/q), else draw from normalize(max(p - q, 0))
 * and stop; one random stream). Bonus token when all are accepted. Level 0
 * verifies gamma2 candidates per pass; a middle level gamma1.
 */
#ifndef TF_DECODE_SPEC_H
#define TF_DECODE_SPEC_H

#include "core/error.h"
#include "core/threads.h"
#include "kv/kv.h"
#include "kv/retrieval.h"
#include "decode/gamma.h"
#include "decode/route.h"
#include "kv/streaming.h"
#include "model/forward.h"
#include "sampling/keyed.h"
#include "sampling/sampling.h"
#include "sampling/verify.h"

typedef enum tf_spec_mode {
    TF_SPEC_AR = 0,
    TF_SPEC_DRAFT = 1,     /* "draft" ("spec" is accepted too) */
    TF_SPEC_RETRIEVAL = 2,
    TF_SPEC_STREAMING = 3,
    TF_SPEC_TRIFORCE = 4,
} tf_spec_mode;

/* Three-level modes: the target verifies the middle level's candidates on
 * every pass (ALWAYS, 0), chooses per pass between the middle level and the
 * bottom level by measured tokens per second (AUTO, route.h), or verifies the
 * bottom level's candidates directly (NEVER: the middle level only idles). */
typedef enum tf_spec_middle {
    TF_SPEC_MIDDLE_ALWAYS = 0,
    TF_SPEC_MIDDLE_AUTO = 1,
    TF_SPEC_MIDDLE_NEVER = 2,
} tf_spec_middle;

/* How the levels' sampled draws are coupled (the header comment). */
typedef enum tf_spec_coupling {
    TF_SPEC_COUPLING_KEYED = 0,
    TF_SPEC_COUPLING_RESIDUAL = 1,
} tf_spec_coupling;

typedef struct tf_spec_cfg {
    tf_spec_mode mode;
    int32_t gamma1, gamma2;   /* candidates per middle pass / per target pass (0: chosen while decoding, gamma.h) */
    int32_t budget, chunk, recent; /* C_r (budget 0: tf_spec_auto_budget) */
    int32_t rebuild_stride;   /* rebuild C_r every R target passes */
    float rebuild_accept;     /* ... and when the middle level's rolling acceptance falls below this */
    float bypass_accept;      /* a middle level drafts alone while its draft's acceptance is below this (0: never) */
    int32_t bypass_probe;     /* ... retrying the draft every this many tokens */
    int32_t sinks, window;    /* C_q */
    int32_t lookup;           /* > 0: the bottom level drafts by text lookup, matching >= this many tokens */
    tf_spec_middle middle;    /* three-level modes: where the target's candidates come from (route.h) */
    tf_spec_coupling coupling; /* sampled: keyed (keyed.h) or residual (verify.h) verification */
    int32_t n_ctx, n_batch;
    int32_t n_logits;         /* most logits rows of one target pass (0: what decoding needs; tf_spec_eval) */
    tf_dtype kv_type;
    tf_isa isa;
    tf_sampling_cfg sampling;
    int device;               /* TF_SPEC_DEVICE_CPU (0) or TF_SPEC_DEVICE_CUDA (1, needs a CUDA build) */
} tf_spec_cfg;

#define TF_SPEC_DEVICE_CPU 0
#define TF_SPEC_DEVICE_CUDA 1

typedef enum level_kind { LEVEL_FULL, LEVEL_RETRIEVAL, LEVEL_STREAMING, LEVEL_LOOKUP } level_kind;

typedef struct tf_level_stats {
    int64_t passes;    /* forward passes (a lookup level: lookups that proposed) */
    int64_t rows;      /* tokens through the forward (a lookup level: tokens proposed) */
    int64_t verified;  /* candidates this level judged */
    int64_t accepted;  /* of which accepted */
    int64_t rejected;  /* verifications that ended in a rejection (the rest accepted every candidate) */
    int64_t rebuilds;  /* retrieval cache rebuilds */
    int64_t bypassed;  /* tokens proposed without the level below (see bypass_accept) */
    double seconds;    /* time in this level's forward passes and cache work while decoding (prefill excluded) */
} tf_level_stats;

typedef struct spec_level {
    level_kind kind;
    const tf_model *m;   /* NULL for LEVEL_LOOKUP, which has no forward and no cache */
    tf_fwd fwd;
    tf_kv_cache view;    /* RETRIEVAL: gathered slots [0, r_sel) then this round's tokens */
    tf_scache sc;        /* STREAMING */
    float *cap_k, *cap_v; /* STREAMING: the forward's out.k / out.v, unrotated keys and values (backend buffers) */
    int64_t n_cached;    /* tokens of the working sequence this level's cache holds */
    int64_t r_base;      /* RETRIEVAL: sequence tokens the gathered part stands for */
    int32_t r_sel;
    int32_t gamma;       /* candidates asked of the level below per verification */
    tf_dist *dist;       /* ring of per-position distributions */
    int32_t n_dist;
    int32_t *pos;        /* [n_batch] positions scratch */
    int64_t last_feed;   /* n_cached before the latest pass */
    float accept_ewma;   /* rolling acceptance of this level's candidates (by the level above) */
    int32_t bypass_run;  /* tokens proposed alone since the draft below was last tried */
    tf_level_stats st;
} spec_level;

#define TF_SPEC_MAX_LEVELS 3

/* gamma2 0: the controller of gamma.h chooses 1..TF_SPEC_GAMMA2_AUTO_MAX per pass. */
#define TF_SPEC_GAMMA2_AUTO_MAX 8
/* The retrieval budget when none is given: an eighth of the context, rounded
 * down to whole chunks, within TF_SPEC_AUTO_BUDGET_MIN..MAX tokens (measured
 * on SmolLM2 at 8K: 1024 accepts 96-97% at T = 0.6 where 512 gives 88%
 * and 2048 costs more per draft; the cap is the TriForce paper's budget at
 * 120K). */
#define TF_SPEC_AUTO_BUDGET_MIN 256
#define TF_SPEC_AUTO_BUDGET_MAX 4096
static inline int32_t tf_spec_auto_budget(int32_t n_ctx, int32_t chunk) {
    int32_t b = n_ctx / 8;
    b = b < TF_SPEC_AUTO_BUDGET_MIN ? TF_SPEC_AUTO_BUDGET_MIN : b > TF_SPEC_AUTO_BUDGET_MAX ? TF_SPEC_AUTO_BUDGET_MAX : b;
    return chunk > 0 && b >= chunk ? b / chunk * chunk : b;
}

static inline int32_t tf_spec_gamma2_max(const tf_spec_cfg *c) {
    return c->gamma2 > 0 ? c->gamma2 : TF_SPEC_GAMMA2_AUTO_MAX;
}

typedef struct tf_spec {
    tf_spec_cfg cfg;
    const tf_model *target, *draft;
    tf_pool *pool;            /* not owned */
    tf_backend be;            /* where every level computes: the CPU (pool, isa) or a CUDA device */
    tf_bweights wt, wd;       /* the target's and (when it is another model) the draft's weights on be */
    int n_levels;
    spec_level lv[TF_SPEC_MAX_LEVELS];
    tf_kv_cache kv_p;         /* C_p, on be */
    tf_rcache rc;             /* chunk sums over C_p (when a retrieval level exists) */
    bool has_rc;
    int32_t *seq;             /* working sequence [n_ctx] */
    int64_t n_seq, n_emitted;
    /* positions the prompt's prefill cached (n_prompt - 1), in batches of the
     * target level's n_batch from position 0: the only positions whose keys
     * and values another prefill of the same prefix reproduces bitwise (a
     * batch of up to 16 rows takes the decode kernels, a larger one the
     * prefill kernels, and they round differently) */
    int64_t n_prefilled;
    int32_t dmax;             /* distribution ring size */
    tf_sampling samp;         /* the transform, shared by all levels */
    tf_verifier ver;
    tf_rng rng;               /* the residual coupling's random stream */
    float *q_cap;             /* [n_layer][rows][q_dim] target queries of the last pass (a buffer on be) */
    int32_t q_cap_rows;
    float *q_last;            /* [n_layer][q_dim] query of the newest token in C_p (a buffer on be) */
    int32_t *tok_h;           /* device: [rows] greedy tokens of a pass, read back */
    float *logits_h;          /* device, sampled without top-k: [rows][n_vocab] logits of a pass, read back */
    int32_t *topk_h;          /* sampled with top-k: [rows] rows' candidates of a pass (tf_fwd_topk's layout) */
    int32_t passes_since_rebuild;
    tf_gamma_ctl gctl[2];     /* gamma2 0: the running choice, one per route (their drafts differ) */
    int route;                /* the current target pass's route: TF_ROUTE_MIDDLE or TF_ROUTE_SKIP */
    tf_route_ctl rctl[TF_ROUTE_N_CTX]; /* middle AUTO: the running choice, per situation (route.h) */
    int64_t route_passes[2];  /* target passes per route while decoding */
    tf_err err;
} tf_spec;

/* The checks of cfg that need no model (ranges, and gamma1 + gamma2 rows
 * within what verification keeps bitwise identical); tf_spec_init runs them
 * and then the checks against the models. */
tf_status tf_spec_check_cfg(const tf_spec_cfg *cfg, tf_err *err);
/* The target level alone, as a plain sequence (tf_context: perplexity,
 * prefill timing) — the path every decoder's target passes take. Feed n <=
 * the batch tokens after the cached ones; the logits of rows
 * [logits_from, n) are in s->lv[0].fwd.logits (backend memory). */
tf_status tf_spec_eval(tf_spec *s, const int32_t *tokens, int32_t n, int32_t logits_from);
/* Keep the first n cached tokens (n <= cached). */
void tf_spec_eval_truncate(tf_spec *s, int32_t n);
/* Cache n positions of random keys and values instead of evaluating tokens
 * (tf_kv_fill_random): a pass after it costs what it would after n tokens. */
tf_status tf_spec_eval_fill_random(tf_spec *s, int32_t n, uint64_t seed);

tf_status tf_spec_init(tf_spec *s, const tf_model *target, const tf_model *draft, const tf_spec_cfg *cfg,
                       tf_pool *pool, tf_err *err);
void tf_spec_free(tf_spec *s);

/* Prefill the prompt (n >= 1 tokens) into every level; progress may cancel. */
tf_status tf_spec_prefill(tf_spec *s, const int32_t *tokens, int32_t n, tf_progress_fn progress, void *ud);

/* Prefill with the prompt src holds (src prefilled, CPU, the same target model
 * and KV type): the target's cache is copied rather than recomputed, the
 * levels below are set up as tf_spec_prefill does. A retrieval level needs
 * src's newest query: src in retrieval or triforce mode. src is unchanged. */
/* Prefill with tokens[0..n), copying from src (NULL: none) the cached
 * positions of the longest prefix the prompt shares with src's prefilled
 * prompt, rounded down to a whole number of prefill batches, so that the rest
 * is computed in the very batches a fresh prefill uses. The state is bitwise
 * that of tf_spec_prefill (positions src computed while decoding are not
 * reused: they were computed in other batches). src may be in any mode and is not
 * changed; a source on another device, target or KV type reuses nothing.
 * *n_reused (may be NULL) gets the positions copied. */
tf_status tf_spec_prefill_reuse(tf_spec *s, const int32_t *tokens, int32_t n, const tf_spec *src,
                                tf_progress_fn progress, void *ud, int32_t *n_reused);
tf_status tf_spec_prefill_from(tf_spec *s, const tf_spec *src, tf_progress_fn progress, void *ud);

/* One step: emits >= 1 tokens (at most cap >= 1) into out, *n_out their
 * count. A pass that emits more than cap keeps the rest for the next calls,
 * which hand them out before decoding again. TF_ERR_INVALID_ARG for cap < 1
 * or a NULL out / n_out; TF_ERR_RANGE when the context is full and nothing is
 * left to hand out. */
tf_status tf_spec_step(tf_spec *s, int32_t *out, int32_t cap, int32_t *n_out);

/* The situation of the next target pass for the route controller (route.h):
 * TF_ROUTE_CTX_NONE when a text lookup at the bottom of three levels has no
 * match to propose for the sequence as it stands, else TF_ROUTE_CTX_DRAFT. */
int tf_spec_route_ctx(const tf_spec *s);

/* Forget the sequence (every cache emptied, nothing copied or freed) and
 * reseed; statistics restart. The next call must be tf_spec_prefill. */
void tf_spec_reset(tf_spec *s, uint64_t seed);

const char *tf_spec_mode_name(tf_spec_mode mode);
bool tf_spec_mode_from_name(const char *name, tf_spec_mode *out);

#endif
