/*
 * spec_cuda.c — the device side of the decoding levels (see spec_cuda.h).
 */
#include "decode/spec_cuda.h"

#ifdef TF_HAVE_CUDA

#include "core/mem.h"
#include "backend/cuda/backend_cuda.h"
#include "model/forward.h"

#include <string.h>

typedef struct tf_spec_dev tf_spec_dev;

typedef struct dev_level {
    tf_fwd fwd;
    tf_kv_cache view;       /* RETRIEVAL: gathered C_r + this round's tokens; STREAMING: rotated view */
    float *ring_k, *ring_v; /* STREAMING: [n_layer][S + R][kv_dim] unrotated */
    int32_t ring_slots;
    float *cap_k, *cap_v;   /* STREAMING: [n_layer][n_batch][kv_dim] */
    const tf_bweights *w;
    tf_spec *s;            /* back pointer for the prologue */
} dev_level;

struct tf_spec_dev {
    tf_backend be;
    tf_cuda *cu;            /* be's device */
    tf_bweights wt, wd;     /* target, draft (wd unused when the draft is the target) */
    tf_kv_cache kv_p;       /* C_p (f16, on the device) */
    /* C_r's chunk sums and selection */
    float *sums;
    int32_t *sel_d;
    void *sel_scratch;
    int32_t n_chunk_cap, max_sel, r_chunks, rc_n_tok;
    float *q_cap_d, *q_last_d; /* [n_layer][q_cap_rows][q_dim], [n_layer][q_dim] */
    dev_level lv[TF_SPEC_MAX_LEVELS];
    int32_t *tok_h;         /* [rows] argmax results */
    float *logits_h;        /* sampled mode: [rows][n_vocab] */
    int32_t rows_max;
};

static int level_index(const tf_spec *s, const spec_level *L) { return (int)(L - s->lv); }

tf_status tf_spec_dev_init(tf_spec *s, tf_err *err) {
    tf_spec_dev *d = tf_calloc(sizeof *d);
    if (!d) return tf_errf(err, TF_ERR_NOMEM, "device decoder: out of memory");
    s->dev = d;
    TF_TRY(tf_backend_cuda_open(&d->be, 0, err));
    d->cu = tf_backend_cuda_device(&d->be);
    TF_TRY(tf_bweights_init(&d->wt, &d->be, s->target, err));
    if (s->draft && s->draft != s->target) TF_TRY(tf_bweights_init(&d->wd, &d->be, s->draft, err));
    const tf_hparams *hp = &s->target->hp;
    int32_t n_slots = (s->cfg.n_ctx + 15) / 16 * 16;
    TF_TRY(tf_kv_init_on(&d->kv_p, &d->be, hp->n_layer, hp->n_head_kv, hp->head_dim, n_slots, TF_DTYPE_F16,
                         "the full cache C_p", err));
    s->kv_p.n_slots = n_slots; /* host mirror of the capacity spec.c checks */
    bool has_rc = s->cfg.mode == TF_SPEC_RETRIEVAL || s->cfg.mode == TF_SPEC_TRIFORCE;
    int32_t rows = 1 + tf_spec_gamma2_max(&s->cfg) + (s->cfg.mode >= TF_SPEC_STREAMING ? s->cfg.gamma1 : 0);
    d->rows_max = rows + 2;
    d->tok_h = tf_alloc(sizeof(int32_t) * (size_t)d->rows_max);
    if (!d->tok_h) return tf_errf(err, TF_ERR_NOMEM, "device decoder: out of memory");
    if (s->cfg.sampling.temp > 0.0f) {
        d->logits_h = tf_alloc(sizeof(float) * (size_t)d->rows_max * hp->n_vocab);
        if (!d->logits_h) return tf_errf(err, TF_ERR_NOMEM, "device decoder: out of memory");
    }
    size_t q_dim = (size_t)hp->n_head * hp->head_dim;
    if (has_rc) {
        tf_rcache_params rp = {.chunk = s->cfg.chunk, .budget = s->cfg.budget, .recent = s->cfg.recent};
        TF_TRY(tf_rcache_check_params(&rp, err));
        s->rc.p = rp;
        int32_t c = rp.chunk, pairs = hp->n_layer * hp->n_head_kv;
        d->n_chunk_cap = (n_slots + c - 1) / c;
        d->r_chunks = (rp.recent + c - 1) / c;
        int32_t sel_chunks = (rp.budget + c - 1) / c;
        d->max_sel = sel_chunks < d->n_chunk_cap ? sel_chunks : d->n_chunk_cap;
        TF_TRY(tf_cuda_malloc(d->cu, (void **)&d->sums,
                              sizeof(float) * (size_t)pairs * d->n_chunk_cap * hp->head_dim, "chunk key sums", err));
        TF_TRY(tf_cuda_malloc(d->cu, (void **)&d->sel_d, sizeof(int32_t) * (size_t)pairs * d->max_sel,
                              "the chunk selection", err));
        TF_TRY(tf_cuda_malloc(d->cu, &d->sel_scratch, tf_cuda_select_scratch(pairs, d->n_chunk_cap),
                              "chunk scores", err));
        TF_TRY(tf_cuda_malloc(d->cu, (void **)&d->q_cap_d, sizeof(float) * hp->n_layer * (size_t)(rows + 2) * q_dim,
                              "captured queries", err));
        TF_TRY(tf_cuda_malloc(d->cu, (void **)&d->q_last_d, sizeof(float) * hp->n_layer * q_dim, "the last query",
                              err));
        TF_TRY(tf_cuda_memset0(d->cu, d->q_last_d, sizeof(float) * hp->n_layer * q_dim, err));
    }
    return TF_OK;
}

/* The streaming level's prologue: the rotated view from the ring (map and
 * count in the forward's extra ints: [nv][map S+W][ring slots of the new rows]). */
static void scache_prologue(void *ud, const int32_t *extra_d) {
    dev_level *D = ud;
    spec_level *L = NULL;
    for (int i = 0; i < TF_SPEC_MAX_LEVELS; i++)
        if (&D->s->dev->lv[i] == D) L = &D->s->lv[i];
    const tf_hparams *hp = &L->m->hp;
    tf_cuda_scache_view(D->s->dev->cu, (uint16_t *)D->view.k, (uint16_t *)D->view.v, D->view.n_slots, D->ring_k, D->ring_v, D->ring_slots,
                        extra_d + 1, extra_d, L->sc.sinks + L->sc.window, hp->n_layer, hp->n_head_kv, hp->head_dim,
                        hp->n_rot, D->w->rope_freq, L->m->rope_mscale);
}

tf_status tf_spec_dev_level_init(tf_spec *s, spec_level *L, int32_t n_batch, int32_t n_logits, int32_t rows,
                                 tf_err *err) {
    tf_spec_dev *d = s->dev;
    int i = level_index(s, L);
    dev_level *D = &d->lv[i];
    D->s = s;
    D->w = L->m == s->target || !d->wd.m ? &d->wt : &d->wd;
    const tf_hparams *hp = &L->m->hp;
    int32_t n_kv = d->kv_p.n_slots, n_extra = 0;
    if (L->kind == LEVEL_RETRIEVAL) {
        int32_t cap = s->cfg.budget < d->kv_p.n_slots ? s->cfg.budget : d->kv_p.n_slots;
        cap = (cap + 256 + 4 * rows + 15) / 16 * 16; /* as tf_rcache_view_init */
        TF_TRY(tf_kv_init_on(&D->view, &d->be, hp->n_layer, hp->n_head_kv, hp->head_dim, cap, TF_DTYPE_F16,
                             "the retrieval cache C_r", err));
        L->view.n_slots = cap;
        n_kv = cap;
    } else if (L->kind == LEVEL_STREAMING) {
        tf_scache *sc = &L->sc; /* host bookkeeping only: no host storage in device mode */
        sc->n_layer = hp->n_layer;
        sc->n_head_kv = hp->n_head_kv;
        sc->head_dim = hp->head_dim;
        sc->kv_dim = hp->n_head_kv * hp->head_dim;
        sc->sinks = s->cfg.sinks;
        sc->window = s->cfg.window;
        sc->ring = s->cfg.window + 2 * rows + 8; /* slack as level_init */
        sc->n_batch = n_batch;
        sc->n_rot = hp->n_rot;
        D->ring_slots = sc->sinks + sc->ring;
        int32_t cap = sc->sinks + sc->window + n_batch;
        TF_TRY(tf_kv_init_on(&D->view, &d->be, hp->n_layer, hp->n_head_kv, hp->head_dim, cap, TF_DTYPE_F16,
                             "the streaming cache C_q", err));
        n_kv = cap;
        size_t ring = sizeof(float) * hp->n_layer * (size_t)D->ring_slots * sc->kv_dim;
        size_t capb = sizeof(float) * hp->n_layer * (size_t)n_batch * sc->kv_dim;
        TF_TRY(tf_cuda_malloc(d->cu, (void **)&D->ring_k, ring, "the streaming ring", err));
        TF_TRY(tf_cuda_malloc(d->cu, (void **)&D->ring_v, ring, "the streaming ring", err));
        TF_TRY(tf_cuda_memset0(d->cu, D->ring_k, ring, err));
        TF_TRY(tf_cuda_memset0(d->cu, D->ring_v, ring, err));
        TF_TRY(tf_cuda_malloc(d->cu, (void **)&D->cap_k, capb, "captured keys", err));
        TF_TRY(tf_cuda_malloc(d->cu, (void **)&D->cap_v, capb, "captured values", err));
        n_extra = 1 + sc->sinks + sc->window + n_batch;
    }
    TF_TRY(tf_fwd_init_on(&D->fwd, D->w, n_batch, n_logits, n_kv, n_extra, err));
    D->fwd.use_graphs = L->kind != LEVEL_FULL;
    if (L->kind == LEVEL_STREAMING) {
        D->fwd.cap_k = D->cap_k;
        D->fwd.cap_v = D->cap_v;
        D->fwd.prologue = scache_prologue;
        D->fwd.prologue_ud = D;
    }
    L->fwd.m = L->m; /* the host forward is not reserved; spec.c reads its sizes */
    L->fwd.n_batch = n_batch;
    L->fwd.n_logits = n_logits;
    return TF_OK;
}

void tf_spec_dev_free(tf_spec *s) {
    tf_spec_dev *d = s->dev;
    if (!d) return;
    if (d->be.ops) {
        for (int i = 0; i < TF_SPEC_MAX_LEVELS; i++) {
            dev_level *D = &d->lv[i];
            tf_fwd_free(&D->fwd);
            tf_kv_free(&D->view);
            void *ps[] = {D->ring_k, D->ring_v, D->cap_k, D->cap_v};
            for (int j = 0; j < 4; j++) tf_cuda_mfree(d->cu, ps[j]);
        }
        tf_kv_free(&d->kv_p);
        void *ps[] = {d->sums, d->sel_d, d->sel_scratch, d->q_cap_d, d->q_last_d};
        for (int j = 0; j < 5; j++) tf_cuda_mfree(d->cu, ps[j]);
        tf_bweights_free(&d->wt);
        tf_bweights_free(&d->wd);
        tf_backend_free(&d->be);
    }
    tf_free(d->tok_h);
    tf_free(d->logits_h);
    tf_free(d);
    s->dev = NULL;
    /* the host mirrors set at init own nothing */
    memset(&s->kv_p, 0, sizeof s->kv_p);
    for (int i = 0; i < TF_SPEC_MAX_LEVELS; i++) {
        memset(&s->lv[i].view, 0, sizeof s->lv[i].view);
        memset(&s->lv[i].sc, 0, sizeof s->lv[i].sc);
    }
}

void tf_spec_dev_reset(tf_spec *s) {
    tf_spec_dev *d = s->dev;
    d->kv_p.n_used = 0;
    d->rc_n_tok = 0;
    for (int i = 0; i < TF_SPEC_MAX_LEVELS; i++) d->lv[i].view.n_used = 0;
}

/* ---- per-level work ---------------------------------------------------------------- */

static size_t ring_slot(const tf_scache *c, int64_t t) {
    return t < c->sinks ? (size_t)t : (size_t)c->sinks + (size_t)((t - c->sinks) % c->ring);
}

tf_status tf_spec_dev_forward(tf_spec *s, int i, const int32_t *toks, int32_t n, int32_t logits_from) {
    tf_spec_dev *d = s->dev;
    spec_level *L = &s->lv[i];
    dev_level *D = &d->lv[i];
    int64_t c = L->n_cached;
    /* the host capture request (spec.c sets it on the target's tf_fwd) maps to the device buffer */
    D->fwd.cap_q = L->fwd.cap_q ? d->q_cap_d : NULL;
    D->fwd.cap_q_row = L->fwd.cap_q_row;
    D->fwd.cap_q_max = L->fwd.cap_q_max;
    tf_status st = TF_OK;
    switch (L->kind) {
    case LEVEL_FULL: {
        for (int32_t j = 0; j < n; j++) L->pos[j] = (int32_t)(c + j);
        st = tf_forward(&D->fwd, &d->kv_p, toks, L->pos, n, (int32_t)c, NULL, logits_from, &s->err);
        if (st == TF_OK && d->sums) {
            const tf_hparams *hp = &s->target->hp;
            tf_cuda_chunk_sums(d->cu, d->sums, (const uint16_t *)d->kv_p.k, hp->n_layer * hp->n_head_kv,
                               d->kv_p.n_slots, hp->head_dim, s->rc.p.chunk, d->n_chunk_cap, (int32_t)c, (int32_t)c + n);
            d->rc_n_tok = (int32_t)c + n;
        }
        break;
    }
    case LEVEL_RETRIEVAL: {
        int32_t slot0 = L->r_sel + (int32_t)(c - L->r_base);
        if (slot0 + n > D->view.n_slots)
            return tf_errf(&s->err, TF_ERR_INTERNAL, "retrieval view full (%d + %d > %d slots)", slot0, n,
                           D->view.n_slots);
        for (int32_t j = 0; j < n; j++) L->pos[j] = (int32_t)(c + j);
        st = tf_forward(&D->fwd, &D->view, toks, L->pos, n, slot0, NULL, logits_from, &s->err);
        break;
    }
    case LEVEL_STREAMING: {
        tf_scache *sc = &L->sc;
        if (sc->n_seen != c) return tf_errf(&s->err, TF_ERR_INTERNAL, "streaming cache out of step");
        /* visible tokens for a query at P (as streaming.c): sinks [0, s_end), window [w_lo, P) */
        int64_t P = sc->n_seen, s_end = P < sc->sinks ? P : sc->sinks, w_lo = P - sc->window;
        if (w_lo < sc->sinks) w_lo = sc->sinks;
        if (w_lo < sc->floor) w_lo = sc->floor;
        if (w_lo > P) w_lo = P;
        int32_t nv = (int32_t)(s_end + (P - w_lo));
        int32_t *ex = D->fwd.extra_h, vis = sc->sinks + sc->window;
        ex[0] = nv;
        for (int32_t v = 0; v < nv; v++) ex[1 + v] = (int32_t)ring_slot(sc, v < s_end ? v : w_lo + (v - s_end));
        for (int32_t j = 0; j < n; j++) ex[1 + vis + j] = (int32_t)ring_slot(sc, P + j);
        for (int32_t j = 0; j < n; j++) L->pos[j] = nv + j;
        D->view.n_used = nv;
        st = tf_forward(&D->fwd, &D->view, toks, L->pos, n, nv, NULL, logits_from, &s->err);
        if (st == TF_OK) {
            const tf_hparams *hp = &L->m->hp;
            tf_cuda_scache_append(d->cu, D->ring_k, D->ring_v, D->ring_slots, D->cap_k, D->cap_v, D->fwd.n_batch,
                                  D->fwd.extra_d + 1 + vis, n, hp->n_layer, sc->kv_dim);
            st = tf_cuda_check(d->cu, "the streaming cache append", &s->err);
            sc->n_seen += n;
            if (sc->n_seen > sc->n_high) sc->n_high = sc->n_seen;
        }
        break;
    }
    case LEVEL_LOOKUP: return tf_errf(&s->err, TF_ERR_INTERNAL, "a lookup level has no forward pass");
    }
    if (st == TF_OK) L->n_cached = c + n;
    return st;
}

tf_status tf_spec_dev_truncate(tf_spec *s, int i, int64_t n) {
    tf_spec_dev *d = s->dev;
    spec_level *L = &s->lv[i];
    if (n >= L->n_cached) return TF_OK;
    switch (L->kind) {
    case LEVEL_FULL:
        if (n < d->kv_p.n_used) d->kv_p.n_used = (int32_t)n;
        if (d->sums && n < d->rc_n_tok) {
            const tf_hparams *hp = &s->target->hp;
            if (n % s->rc.p.chunk) /* the partial chunk, from its first slot */
                tf_cuda_chunk_sums(d->cu, d->sums, (const uint16_t *)d->kv_p.k, hp->n_layer * hp->n_head_kv,
                                   d->kv_p.n_slots, hp->head_dim, s->rc.p.chunk, d->n_chunk_cap, (int32_t)n - 1,
                                   (int32_t)n);
            d->rc_n_tok = (int32_t)n;
        }
        break;
    case LEVEL_RETRIEVAL:
        if (n < L->r_base) return tf_errf(&s->err, TF_ERR_INTERNAL, "retrieval rollback below its base");
        d->lv[i].view.n_used = L->r_sel + (int32_t)(n - L->r_base);
        L->view.n_used = d->lv[i].view.n_used;
        break;
    case LEVEL_STREAMING:
        TF_TRY(tf_scache_truncate(&L->sc, n, &s->err));
        break;
    case LEVEL_LOOKUP: break; /* nothing cached (spec.c returns before calling) */
    }
    L->n_cached = n;
    return TF_OK;
}

tf_status tf_spec_dev_dists(tf_spec *s, int i, int64_t c, int32_t from, int32_t n) {
    tf_spec_dev *d = s->dev;
    spec_level *L = &s->lv[i];
    dev_level *D = &d->lv[i];
    int32_t rows = n - from;
    if (rows < 1) return TF_OK;
    const int32_t V = L->m->hp.n_vocab;
    if (!d->logits_h) { /* greedy: argmax on the device */
        TF_TRY(tf_fwd_argmax(&D->fwd, rows, d->tok_h, &s->err));
        for (int32_t r = 0; r < rows; r++) {
            tf_dist *dist = &L->dist[(c + from + r + 1) % s->dmax];
            dist->n = 1;
            dist->id[0] = d->tok_h[r];
            dist->p[0] = 1.0f;
        }
        return TF_OK;
    }
    TF_TRY(tf_fwd_logits(&D->fwd, rows, d->logits_h, &s->err));
    for (int32_t r = 0; r < rows; r++) {
        tf_sampling_dist(&s->samp, d->logits_h + (size_t)r * V);
        tf_dist *dist = &L->dist[(c + from + r + 1) % s->dmax];
        dist->n = s->samp.dist.n;
        memcpy(dist->id, s->samp.dist.id, sizeof(int32_t) * (size_t)dist->n);
        memcpy(dist->p, s->samp.dist.p, sizeof(float) * (size_t)dist->n);
    }
    return TF_OK;
}

tf_status tf_spec_dev_rebuild(tf_spec *s, spec_level *L) {
    tf_spec_dev *d = s->dev;
    dev_level *D = &d->lv[level_index(s, L)];
    const tf_hparams *hp = &s->target->hp;
    if (d->rc_n_tok != d->kv_p.n_used)
        return tf_errf(&s->err, TF_ERR_INTERNAL, "device chunk sums cover %d slots, C_p holds %d", d->rc_n_tok,
                       d->kv_p.n_used);
    int32_t n_sel_chunks = 0, n_sel = 0;
    tf_cuda_chunk_select(d->cu, d->sel_d, d->sel_scratch, d->sums, d->q_last_d, hp->n_layer, hp->n_head,
                         hp->n_head_kv, hp->head_dim, d->n_chunk_cap, s->rc.p.chunk, d->rc_n_tok, s->rc.p.budget,
                         d->r_chunks, d->max_sel, &n_sel_chunks, &n_sel);
    tf_cuda_gather(d->cu, (uint16_t *)D->view.k, (uint16_t *)D->view.v, D->view.n_slots, (const uint16_t *)d->kv_p.k,
                   (const uint16_t *)d->kv_p.v, d->kv_p.n_slots,
                   hp->n_layer * hp->n_head_kv, hp->head_dim, d->sel_d, d->max_sel, n_sel_chunks, s->rc.p.chunk,
                   d->rc_n_tok);
    TF_TRY(tf_cuda_check(d->cu, "the retrieval cache rebuild", &s->err));
    s->rc.n_sel = n_sel;
    s->rc.n_sel_chunks = n_sel_chunks;
    D->view.n_used = n_sel;
    return TF_OK;
}

tf_status tf_spec_dev_save_query(tf_spec *s, int32_t row) {
    tf_spec_dev *d = s->dev;
    const tf_hparams *hp = &s->target->hp;
    size_t q_dim = (size_t)hp->n_head * hp->head_dim;
    if (!d->q_cap_d || row < 0 || row >= s->q_cap_rows) return TF_OK;
    for (int il = 0; il < hp->n_layer; il++)
        TF_TRY(tf_cuda_d2d(d->cu, d->q_last_d + (size_t)il * q_dim,
                           d->q_cap_d + ((size_t)il * s->q_cap_rows + (size_t)row) * q_dim, sizeof(float) * q_dim,
                           &s->err));
    return TF_OK;
}

const char *tf_spec_dev_describe(const tf_spec *s) { return tf_cuda_describe(s->dev->cu); }

#endif /* TF_HAVE_CUDA */
