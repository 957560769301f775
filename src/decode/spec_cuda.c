/*
 * spec_cuda.c — the device side of the decoding levels: the streaming ring
 * (see spec_cuda.h).
 */
#include "decode/spec_cuda.h"

#ifdef TF_HAVE_CUDA

#include "backend/cuda/backend_cuda.h"
#include "core/mem.h"

#include <string.h>

typedef struct tf_spec_dev tf_spec_dev;

typedef struct dev_level {
    float *ring_k, *ring_v; /* STREAMING: [n_layer][S + R][kv_dim] unrotated */
    int32_t ring_slots;
    tf_spec *s;             /* for the prologue */
    spec_level *L;
} dev_level;

struct tf_spec_dev {
    tf_cuda *cu; /* s->be's device */
    dev_level lv[TF_SPEC_MAX_LEVELS];
};

tf_status tf_spec_dev_init(tf_spec *s, tf_err *err) {
    tf_spec_dev *d = tf_calloc(sizeof *d);
    if (!d) return tf_errf(err, TF_ERR_NOMEM, "device decoder: out of memory");
    s->dev = d;
    d->cu = tf_backend_cuda_device(&s->be);
    return TF_OK;
}

/* The streaming level's prologue: the rotated view from the ring (map and
 * count in the forward's extra ints: [nv][map S+W][ring slots of the new rows]). */
static void scache_prologue(void *ud, const int32_t *extra_d) {
    dev_level *D = ud;
    spec_level *L = D->L;
    const tf_hparams *hp = &L->m->hp;
    tf_scache *sc = &L->sc;
    tf_cuda_scache_view(D->s->dev->cu, (uint16_t *)sc->view.k, (uint16_t *)sc->view.v, sc->view.n_slots, D->ring_k,
                        D->ring_v, D->ring_slots, extra_d + 1, extra_d, sc->sinks + sc->window, hp->n_layer,
                        hp->n_head_kv, hp->head_dim, hp->n_rot, L->fwd.w->rope_freq, L->m->rope_mscale);
}

tf_status tf_spec_dev_stream_init(tf_spec *s, spec_level *L, int32_t n_batch, int32_t rows, int32_t *n_extra,
                                  tf_err *err) {
    tf_spec_dev *d = s->dev;
    dev_level *D = &d->lv[L - s->lv];
    D->s = s;
    D->L = L;
    const tf_hparams *hp = &L->m->hp;
    tf_scache *sc = &L->sc; /* bookkeeping and the view; the ring is here */
    sc->n_layer = hp->n_layer;
    sc->n_head_kv = hp->n_head_kv;
    sc->head_dim = hp->head_dim;
    sc->kv_dim = hp->n_head_kv * hp->head_dim;
    sc->sinks = s->cfg.sinks;
    sc->window = s->cfg.window;
    sc->ring = s->cfg.window + 2 * rows + 8; /* slack as on the host */
    sc->n_batch = n_batch;
    sc->n_rot = hp->n_rot;
    D->ring_slots = sc->sinks + sc->ring;
    TF_TRY(tf_kv_init_on(&sc->view, &s->be, hp->n_layer, hp->n_head_kv, hp->head_dim,
                         sc->sinks + sc->window + n_batch, TF_DTYPE_F16, "the streaming cache C_q", err));
    size_t ring = sizeof(float) * hp->n_layer * (size_t)D->ring_slots * sc->kv_dim;
    TF_TRY(s->be.ops->alloc(&s->be, (void **)&D->ring_k, ring, "the streaming ring", err));
    TF_TRY(s->be.ops->alloc(&s->be, (void **)&D->ring_v, ring, "the streaming ring", err));
    *n_extra = 1 + sc->sinks + sc->window + n_batch;
    return TF_OK;
}

void tf_spec_dev_stream_bind(tf_spec *s, spec_level *L) {
    dev_level *D = &s->dev->lv[L - s->lv];
    L->fwd.prologue = scache_prologue;
    L->fwd.prologue_ud = D;
}

void tf_spec_dev_free(tf_spec *s) {
    tf_spec_dev *d = s->dev;
    if (!d) return;
    for (int i = 0; i < TF_SPEC_MAX_LEVELS; i++) {
        if (d->lv[i].ring_k) s->be.ops->free(&s->be, d->lv[i].ring_k);
        if (d->lv[i].ring_v) s->be.ops->free(&s->be, d->lv[i].ring_v);
    }
    tf_free(d);
    s->dev = NULL;
}

tf_status tf_spec_dev_stream_forward(tf_spec *s, spec_level *L, const int32_t *toks, int32_t n, int32_t logits_from) {
    dev_level *D = &s->dev->lv[L - s->lv];
    tf_scache *sc = &L->sc;
    int32_t *ex = L->fwd.extra_h, vis = sc->sinks + sc->window;
    int32_t nv = tf_scache_view_map(sc, ex + 1); /* the view's ring slots, as the CPU's view takes them */
    ex[0] = nv;
    for (int32_t j = 0; j < n; j++) ex[1 + vis + j] = (int32_t)tf_scache_slot(sc, sc->n_seen + j);
    for (int32_t j = 0; j < n; j++) L->pos[j] = nv + j;
    sc->view.n_used = nv;
    TF_TRY(tf_forward(&L->fwd, &sc->view, toks, L->pos, n, nv, NULL, logits_from, &s->err));
    const tf_hparams *hp = &L->m->hp;
    tf_cuda_scache_append(s->dev->cu, D->ring_k, D->ring_v, D->ring_slots, L->fwd.cap_k, L->fwd.cap_v,
                          L->fwd.n_batch, L->fwd.extra_d + 1 + vis, n, hp->n_layer, sc->kv_dim);
    TF_TRY(tf_cuda_check(s->dev->cu, "the streaming cache append", &s->err));
    sc->n_seen += n;
    if (sc->n_seen > sc->n_high) sc->n_high = sc->n_seen;
    return TF_OK;
}

#else /* no CUDA: never called (s->dev stays NULL), defined so spec.c needs no #ifdef */

static tf_status no_cuda(tf_err *err) {
    return tf_errf(err, TF_ERR_UNSUPPORTED, "this build has no CUDA backend (rebuild with `make CUDA=1`)");
}
tf_status tf_spec_dev_init(tf_spec *s, tf_err *err) {
    (void)s;
    return no_cuda(err);
}
void tf_spec_dev_free(tf_spec *s) { (void)s; }
tf_status tf_spec_dev_stream_init(tf_spec *s, spec_level *L, int32_t n_batch, int32_t rows, int32_t *n_extra,
                                  tf_err *err) {
    (void)s, (void)L, (void)n_batch, (void)rows, (void)n_extra;
    return no_cuda(err);
}
void tf_spec_dev_stream_bind(tf_spec *s, spec_level *L) { (void)s, (void)L; }
tf_status tf_spec_dev_stream_forward(tf_spec *s, spec_level *L, const int32_t *toks, int32_t n, int32_t logits_from) {
    (void)L, (void)toks, (void)n, (void)logits_from;
    return no_cuda(&s->err);
}

#endif /* TF_HAVE_CUDA */
