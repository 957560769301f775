/* api_decoder.c — the public speculative-decoding API over src/spec. */
#include "triforce.h"

#include "api/device.h"
#include "api/kv_type.h"
#include "core/threads.h"
#include "model/model.h"
#include "decode/spec.h"
#include "kv/retrieval.h"
#ifdef TF_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tf_decoder {
    tf_spec s;
    tf_pool *pool;
    tf_decoder_params params;
};

_Static_assert((int)TF_MIDDLE_ALWAYS == (int)TF_SPEC_MIDDLE_ALWAYS && (int)TF_MIDDLE_AUTO == (int)TF_SPEC_MIDDLE_AUTO &&
                   (int)TF_MIDDLE_NEVER == (int)TF_SPEC_MIDDLE_NEVER,
               "tf_middle mirrors tf_spec_middle");
_Static_assert((int)TF_COUPLING_KEYED == (int)TF_SPEC_COUPLING_KEYED &&
                   (int)TF_COUPLING_RESIDUAL == (int)TF_SPEC_COUPLING_RESIDUAL,
               "tf_coupling mirrors tf_spec_coupling");
_Static_assert((int)TF_MODE_TRIFORCE == (int)TF_SPEC_TRIFORCE && (int)TF_MODE_DRAFT == (int)TF_SPEC_DRAFT,
               "public and internal mode numbers agree");

const char *tf_decode_mode_name(tf_decode_mode mode) { return tf_spec_mode_name((tf_spec_mode)mode); }

bool tf_decode_mode_from_name(const char *name, tf_decode_mode *out) {
    tf_spec_mode m;
    if (!tf_spec_mode_from_name(name, &m)) return false;
    *out = (tf_decode_mode)m;
    return true;
}

tf_decoder_params tf_decoder_default_params(void) {
    tf_sampler_params sp = tf_sampler_default_params();
    const tf_rcache_params rp = tf_rcache_default_params(); /* the retrieval cache's own defaults */
    return (tf_decoder_params){
        .mode = TF_MODE_AR, .gamma1 = 2, .gamma2 = TF_GAMMA2_BY_TEMP, .budget = 0 /* by the context */, .chunk = rp.chunk,
        .recent = rp.recent,
        .rebuild_stride = 16, .rebuild_accept = 0.5f, .bypass_accept = 0.2f, .bypass_probe = 16, .sinks = 16, .window = 240, .n_ctx = 0, .n_batch = 0,
        .n_threads = 0, .kv_type = TF_KV_F16, .isa = 0, .sampling = sp, .device = TF_DEVICE_AUTO,
        .lookup = 0, .middle = TF_MIDDLE_AUTO, .coupling = TF_COUPLING_KEYED,
    };
}

/* The index of name in names[n], or -1. */
static int name_index(const char *const *names, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(name, names[i]) == 0) return i;
    return -1;
}

static const char *const k_middle_names[] = {"always", "auto", "never"};

const char *tf_middle_name(tf_middle m) { return (unsigned)m < 3 ? k_middle_names[m] : "unknown"; }

bool tf_middle_from_name(const char *name, tf_middle *out) {
    int i = name_index(k_middle_names, 3, name);
    if (i >= 0) *out = (tf_middle)i;
    return i >= 0;
}

static const char *const k_coupling_names[] = {"keyed", "residual"};

const char *tf_coupling_name(tf_coupling c) { return (unsigned)c < 2 ? k_coupling_names[c] : "unknown"; }

bool tf_coupling_from_name(const char *name, tf_coupling *out) {
    int i = name_index(k_coupling_names, 2, name);
    if (i >= 0) *out = (tf_coupling)i;
    return i >= 0;
}

static const char *const k_device_names[] = {"auto", "cpu", "cuda"};

const char *tf_device_name(tf_device dev) { return (unsigned)dev < 3 ? k_device_names[dev] : "unknown"; }

bool tf_device_from_name(const char *name, tf_device *out) {
    int i = name_index(k_device_names, 3, name);
    if (i >= 0) *out = (tf_device)i;
    return i >= 0;
}

int tf_cuda_devices(void) {
#ifdef TF_HAVE_CUDA
    return tf_cuda_device_count();
#else
    return 0;
#endif
}

int32_t tf_decoder_gamma2(const tf_decoder_params *p) {
    if (p->gamma2 != TF_GAMMA2_BY_TEMP) return p->gamma2;
    return p->sampling.temp > 0 ? TF_GAMMA2_SAMPLED : TF_GAMMA2_GREEDY;
}

tf_spec_cfg tf_api_spec_cfg(const tf_decoder_params *p, tf_device dev) {
    return (tf_spec_cfg){
        .mode = (tf_spec_mode)p->mode, .gamma1 = p->gamma1, .gamma2 = tf_decoder_gamma2(p), .budget = p->budget,
        .chunk = p->chunk, .recent = p->recent, .rebuild_stride = p->rebuild_stride,
        .rebuild_accept = p->rebuild_accept, .bypass_accept = p->bypass_accept, .bypass_probe = p->bypass_probe,
        .middle = (tf_spec_middle)p->middle, .coupling = (tf_spec_coupling)p->coupling,
        .sinks = p->sinks, .window = p->window, .lookup = p->lookup, .n_ctx = p->n_ctx, .n_batch = p->n_batch,
        .kv_type = tf_kv_type_dtype(p->kv_type),
        .isa = p->isa == 0 ? TF_ISA_BEST : (tf_isa)(p->isa - 1),
        .sampling = {.temp = p->sampling.temp, .top_k = p->sampling.top_k, .top_p = p->sampling.top_p,
                     .min_p = p->sampling.min_p, .seed = p->sampling.seed},
        .device = dev == TF_DEVICE_CUDA ? TF_SPEC_DEVICE_CUDA : TF_SPEC_DEVICE_CPU,
    };
}

/* The checks that need no model; n_ctx 0 (the model's trained context) and
 * n_threads 0 (all CPUs) stand for values known only later. */
static tf_status check_params(const tf_decoder_params *p, tf_err *err) {
    if (p->n_batch < 0 || p->n_batch > 65536)
        return tf_errf(err, TF_ERR_INVALID_ARG, "batch size %d: expected 0 (the device's default) or 1..65536",
                       p->n_batch);
    if (p->n_ctx != 0 && (p->n_ctx < 2 || p->n_ctx > (1 << 28)))
        return tf_errf(err, TF_ERR_INVALID_ARG, "context %d: expected 2..%d", p->n_ctx, 1 << 28);
    if (p->n_threads < 0 || p->n_threads > TF_MAX_THREADS)
        return tf_errf(err, TF_ERR_INVALID_ARG, "threads %d: expected 0 (all CPUs) or 1..%d", p->n_threads,
                       TF_MAX_THREADS);
    if (p->isa < 0 || p->isa > 4) return tf_errf(err, TF_ERR_INVALID_ARG, "isa %d: expected 0..4", p->isa);
    if (p->gamma2 < TF_GAMMA2_BY_TEMP)
        return tf_errf(err, TF_ERR_INVALID_ARG,
                       "gamma2 %d: expected %d (by the temperature), 0 (adaptive) or 1..15", p->gamma2,
                       TF_GAMMA2_BY_TEMP);
    if (!tf_kv_type_valid(p->kv_type))
        return tf_errf(err, TF_ERR_INVALID_ARG, "KV cache type %d: expected f32, f16, q8_0 or q4_0", (int)p->kv_type);
    TF_TRY(tf_api_check_device(p->device, err));
    tf_spec_cfg c = tf_api_spec_cfg(p, TF_DEVICE_CPU);
    if (c.n_ctx == 0) c.n_ctx = 2;
    if (c.n_batch == 0) c.n_batch = TF_BATCH_CPU;
    return tf_spec_check_cfg(&c, err);
}

tf_status tf_decoder_params_check(const tf_decoder_params *params, char *errbuf, size_t errbuf_size) {
    tf_err err = {0};
    tf_decoder_params p = params ? *params : tf_decoder_default_params();
    tf_status st = check_params(&p, &err);
    if (st != TF_OK && errbuf && errbuf_size) snprintf(errbuf, errbuf_size, "%s", err.msg);
    return st;
}

tf_status tf_decoder_init(tf_decoder **out, const tf_model *target, const tf_model *draft,
                          const tf_decoder_params *params, char *errbuf, size_t errbuf_size) {
    *out = NULL;
    tf_err err = {0};
    tf_decoder *d = calloc(1, sizeof *d);
    tf_status st = TF_OK;
    if (!d) st = tf_errf(&err, TF_ERR_NOMEM, "decoder: out of memory");
    tf_decoder_params p = params ? *params : tf_decoder_default_params();
    if (st == TF_OK && (target->vocab_only || (draft && draft->vocab_only)))
        st = tf_errf(&err, TF_ERR_INVALID_ARG, "a vocabulary-only model cannot decode");
    if (st == TF_OK) st = check_params(&p, &err);
    if (st == TF_OK) {
        if (p.n_ctx == 0) p.n_ctx = target->hp.n_ctx_train;
        if (p.n_threads == 0) p.n_threads = tf_cpu_count();
        st = tf_pool_create(&d->pool, p.n_threads, &err);
    }
    if (st == TF_OK) {
        const tf_device dev = tf_api_resolve_device(p.device, p.kv_type, target, draft);
        if (p.n_batch == 0) p.n_batch = dev == TF_DEVICE_CUDA ? TF_BATCH_CUDA : TF_BATCH_CPU;
        tf_spec_cfg c = tf_api_spec_cfg(&p, dev);
        st = tf_spec_init(&d->s, target, draft, &c, d->pool, &err);
    }
    if (st != TF_OK) {
        if (errbuf && errbuf_size) snprintf(errbuf, errbuf_size, "%s", err.msg);
        if (d) tf_pool_free(d->pool);
        free(d);
        return st;
    }
    d->params = p;
    *out = d;
    return TF_OK;
}

void tf_decoder_free(tf_decoder *d) {
    if (!d) return;
    tf_spec_free(&d->s);
    tf_pool_free(d->pool);
    free(d);
}

const char *tf_decoder_error(const tf_decoder *d) { return d->s.err.msg; }

const int32_t *tf_decoder_tokens(const tf_decoder *d, int32_t *n) {
    *n = (int32_t)d->s.n_seq;
    return d->s.seq;
}

tf_status tf_decoder_prefill(tf_decoder *d, const int32_t *tokens, int32_t n) {
    return tf_spec_prefill(&d->s, tokens, n, d->params.progress, d->params.progress_user_data);
}

tf_status tf_decoder_prefill_from(tf_decoder *d, const tf_decoder *src) {
    return tf_spec_prefill_from(&d->s, &src->s, d->params.progress, d->params.progress_user_data);
}

tf_status tf_decoder_prefill_reuse(tf_decoder *d, const int32_t *tokens, int32_t n, const tf_decoder *src,
                                   int32_t *n_reused) {
    return tf_spec_prefill_reuse(&d->s, tokens, n, src ? &src->s : NULL, d->params.progress,
                                 d->params.progress_user_data, n_reused);
}

tf_status tf_decoder_step(tf_decoder *d, int32_t *out, int32_t cap, int32_t *n_out) {
    return tf_spec_step(&d->s, out, cap, n_out);
}

const char *tf_decoder_device(const tf_decoder *d) {
    static _Thread_local char buf[600];
    if (d->s.be.ops && !d->s.be.ops->host_memory) {
        snprintf(buf, sizeof buf, "%s: %s", d->s.be.ops->name, d->s.be.ops->describe(&d->s.be));
        return buf;
    }
    return "cpu";
}

int tf_decoder_n_levels(const tf_decoder *d) { return d->s.n_levels; }

void tf_decoder_level(const tf_decoder *d, int level, tf_level_info *o) {
    memset(o, 0, sizeof *o);
    if (level < 0 || level >= d->s.n_levels) return;
    const spec_level *L = &d->s.lv[level];
    static const char *const caches[] = {"full", "retrieval", "streaming", "lookup"};
    o->name = level == 0 ? "target" : level == d->s.n_levels - 1 ? "draft" : "middle";
    o->cache = caches[L->kind];
    o->passes = L->st.passes;
    o->tokens = L->st.rows;
    o->verified = L->st.verified;
    o->accepted = L->st.accepted;
    o->rejected = L->st.rejected;
    o->rebuilds = L->st.rebuilds;
    o->bypassed = L->st.bypassed;
    o->seconds = L->st.seconds;
}

void tf_decoder_routes(const tf_decoder *d, int64_t *via_middle, int64_t *skipping_middle) {
    bool three = d->s.n_levels == 3;
    if (via_middle) *via_middle = three ? d->s.route_passes[TF_ROUTE_MIDDLE] : 0;
    if (skipping_middle) *skipping_middle = three ? d->s.route_passes[TF_ROUTE_SKIP] : 0;
}
