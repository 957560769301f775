/*
 * api.c — the public API (include/triforce.h) over the internal layers.
 * A context is a decoder's target level alone (decode/spec.h tf_spec_eval):
 * the same backend, weights, cache and forward pass every decoder uses.
 */
#include "triforce.h"

#include "api/device.h"
#include "api/kv_type.h"
#include "core/mem.h"
#include "core/rng.h"
#include "core/threads.h"
#include "decode/spec.h"
#include "model/model.h"
#include "sampling/sampling.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tf_context {
    const tf_model *m;
    tf_context_params params;
    tf_pool *pool;
    tf_spec s;        /* ar: the target over its full cache, on the CPU (pool) or a device */
    bool has_s;
    float *logits_h;  /* on a device: the last eval's logits rows, read back */
    int32_t n_past;
    const float *last_logits;
    tf_err err;
};

struct tf_sampler {
    tf_sampling s;
};

static void copy_err(const tf_err *err, char *buf, size_t size) {
    if (buf && size) snprintf(buf, size, "%s", err->msg);
}

const char *tf_version(void) { return TF_VERSION_STRING; }

/* ---- models ---- */

tf_model_params tf_model_default_params(void) {
    return (tf_model_params){.log_fn = NULL, .log_user_data = NULL, .log_level = TF_LOG_INFO};
}

tf_status tf_model_load_file(tf_model **out, const char *path, const tf_model_params *params, char *errbuf,
                             size_t errbuf_size) {
    tf_model_params p = params ? *params : tf_model_default_params();
    tf_logger lg = {.fn = p.log_fn, .user_data = p.log_user_data, .min_level = p.log_level};
    tf_err err = {0};
    *out = NULL;
    if (!path) {
        tf_errf(&err, TF_ERR_INVALID_ARG, "model path is NULL");
        copy_err(&err, errbuf, errbuf_size);
        return err.status;
    }
    tf_status st = p.vocab_only ? tf_model_load_vocab(out, path, &err) : tf_model_load(out, path, &lg, &err);
    if (st == TF_OK && !p.vocab_only && p.progress) {
        st = tf_model_prefault(*out, p.progress, p.progress_user_data, &err);
        if (st != TF_OK) {
            tf_model_free(*out);
            *out = NULL;
        }
    }
    if (st != TF_OK) copy_err(&err, errbuf, errbuf_size);
    return st;
}

void tf_model_close(tf_model *model) { tf_model_free(model); }

tf_status tf_model_layer_view(tf_model **out, const tf_model *model, int32_t n_layer, char *errbuf,
                              size_t errbuf_size) {
    tf_err err = {0};
    *out = NULL;
    tf_status st = model ? tf_model_view_layers(out, model, n_layer, &err)
                         : tf_errf(&err, TF_ERR_INVALID_ARG, "model is NULL");
    if (st != TF_OK) copy_err(&err, errbuf, errbuf_size);
    return st;
}

tf_status tf_model_extend_context(tf_model *model, const char *kind, float factor, char *errbuf,
                                  size_t errbuf_size) {
    tf_err err = {0};
    tf_status st;
    if (!model || !kind)
        st = tf_errf(&err, TF_ERR_INVALID_ARG, "model or kind is NULL");
    else if (strcmp(kind, "linear") != 0 && strcmp(kind, "yarn") != 0)
        st = tf_errf(&err, TF_ERR_INVALID_ARG, "RoPE scaling '%.40s': expected linear or yarn", kind);
    else
        st = tf_model_extend_rope(model, kind[0] == 'l' ? TF_ROPE_SCALING_LINEAR : TF_ROPE_SCALING_YARN, factor, &err);
    if (st != TF_OK) copy_err(&err, errbuf, errbuf_size);
    return st;
}

void tf_model_get_info(const tf_model *m, tf_model_info *info) {
    static const char *const scaling[] = {"none", "linear", "yarn", "llama3"};
    const tf_hparams *hp = &m->hp;
    *info = (tf_model_info){
        .name = m->name, .arch = tf_arch_name(hp->arch), .n_vocab = hp->n_vocab, .n_embd = hp->n_embd,
        .n_layer = hp->n_layer, .rope_neox = hp->rope_neox, .qkv_bias = hp->qkv_bias,
        .n_head = hp->n_head, .n_head_kv = hp->n_head_kv, .head_dim = hp->head_dim, .n_ff = hp->n_ff,
        .n_rot = hp->n_rot, .n_ctx_train = hp->n_ctx_train, .rms_eps = hp->rms_eps, .rope_base = hp->rope_base,
        .rope_scaling = scaling[hp->rope_scaling], .rope_factor = hp->rope_factor,
        .rope_orig_ctx = hp->rope_orig_ctx, .tied_output = hp->tied_output, .n_params = m->n_params,
        .weight_bytes = m->weight_bytes, .has_tokenizer = m->tok != NULL,
        .tokenizer = m->tok ? tf_tokenizer_describe(m->tok) : "",
    };
}

const char *tf_kv_type_name(tf_kv_type type) {
    return tf_kv_type_valid(type) ? tf_dtype_name(tf_kv_type_dtype(type)) : "?";
}

bool tf_kv_type_parse(const char *name, tf_kv_type *out) {
    static const tf_kv_type all[] = {TF_KV_F32, TF_KV_F16, TF_KV_Q8_0, TF_KV_Q4_0};
    for (size_t i = 0; name && i < sizeof all / sizeof all[0]; i++)
        if (strcmp(name, tf_kv_type_name(all[i])) == 0) {
            *out = all[i];
            return true;
        }
    return false;
}

uint64_t tf_model_kv_type_bytes_per_token(const tf_model *m, tf_kv_type type) {
    if (!tf_kv_type_valid(type)) return 0;
    return (uint64_t)m->hp.n_layer * 2u * (uint64_t)m->hp.n_head_kv *
           (uint64_t)tf_kv_head_bytes(tf_kv_type_dtype(type), m->hp.head_dim);
}

uint64_t tf_model_kv_bytes_per_token(const tf_model *m, int elem_size) {
    return tf_hparams_kv_bytes_per_token(&m->hp, elem_size);
}

int64_t tf_model_n_tensors(const tf_model *m) { return (int64_t)m->gguf.n_tensors; }

bool tf_model_tensor(const tf_model *m, int64_t i, tf_tensor_info *info) {
    if (i < 0 || (uint64_t)i >= m->gguf.n_tensors) return false;
    const tf_gguf_tensor *t = &m->gguf.tensors[i];
    *info = (tf_tensor_info){.name = t->name, .type = tf_dtype_name(t->type), .n_dims = (int)t->n_dims,
                             .bytes = t->nbytes};
    memcpy(info->ne, t->ne, sizeof info->ne);
    return true;
}

int32_t tf_model_bos(const tf_model *m) { return m->tok ? tf_tokenizer_bos(m->tok) : -1; }
int32_t tf_model_eos(const tf_model *m) { return m->tok ? tf_tokenizer_eos(m->tok) : -1; }
bool tf_model_is_eog(const tf_model *m, int32_t t) { return m->tok && tf_tokenizer_is_eog(m->tok, t); }

tf_status tf_model_tokenize(const tf_model *m, const char *text, size_t len, bool add_special, bool parse_special,
                            int32_t *out, size_t cap, size_t *n_out) {
    if (!m->tok) {
        if (n_out) *n_out = 0;
        return TF_ERR_UNSUPPORTED;
    }
    return tf_tokenize(m->tok, text, len, add_special, parse_special, out, cap, n_out, NULL);
}

int32_t tf_model_token_to_piece(const tf_model *m, int32_t token, bool render_special, char *buf, int32_t cap) {
    if (!m->tok) return -1;
    return tf_token_to_piece(m->tok, token, render_special, buf, cap);
}

/* ---- contexts ---- */

tf_context_params tf_context_default_params(void) {
    return (tf_context_params){.n_ctx = 0, .n_batch = 256, .n_threads = 0, .kv_type = TF_KV_F16,
                               .logits_all = false, .isa = 0};
}

tf_status tf_context_init(tf_context **out, const tf_model *m, const tf_context_params *params, char *errbuf,
                          size_t errbuf_size) {
    return tf_context_init_on(out, m, params, TF_DEVICE_CPU, errbuf, errbuf_size);
}

tf_status tf_context_init_on(tf_context **out, const tf_model *m, const tf_context_params *params, tf_device device,
                             char *errbuf, size_t errbuf_size) {
    *out = NULL;
    tf_context *c = calloc(1, sizeof *c);
    tf_err err = {0};
    if (!c) {
        tf_errf(&err, TF_ERR_NOMEM, "context: out of memory");
        copy_err(&err, errbuf, errbuf_size);
        return err.status;
    }
    c->m = m;
    c->params = params ? *params : tf_context_default_params();
    if (m->vocab_only) {
        tf_errf(&err, TF_ERR_INVALID_ARG, "%s: loaded as vocabulary only; it has no weights to run", m->path);
        copy_err(&err, errbuf, errbuf_size);
        free(c);
        return err.status;
    }
    tf_context_params *p = &c->params;
    tf_status st = TF_OK;
    if (p->n_ctx == 0) p->n_ctx = m->hp.n_ctx_train;
    if (p->n_threads == 0) p->n_threads = tf_cpu_count();
    if (p->n_ctx < 1 || p->n_ctx > (1 << 28))
        st = tf_errf(&err, TF_ERR_INVALID_ARG, "context size %d: expected 1..%d", p->n_ctx, 1 << 28);
    else if (p->n_batch < 1 || p->n_batch > 65536)
        st = tf_errf(&err, TF_ERR_INVALID_ARG, "batch size %d: expected 1..65536", p->n_batch);
    else if (p->n_threads < 1 || p->n_threads > 1024)
        st = tf_errf(&err, TF_ERR_INVALID_ARG, "thread count %d: expected 1..1024", p->n_threads);
    else if (!tf_kv_type_valid(p->kv_type))
        st = tf_errf(&err, TF_ERR_INVALID_ARG, "KV cache type %d: expected f32, f16, q8_0 or q4_0", (int)p->kv_type);
    else if (p->isa < 0 || p->isa > 4)
        st = tf_errf(&err, TF_ERR_INVALID_ARG, "isa %d: expected 0..4", p->isa);
    else
        st = tf_api_check_device(device, &err);
    if (st == TF_OK && p->n_batch > p->n_ctx) p->n_batch = p->n_ctx;
    tf_device dev = tf_api_resolve_device(device, p->kv_type, m, NULL);
    const int32_t n_logits = p->logits_all ? p->n_batch : 1;
    if (st == TF_OK) st = tf_pool_create(&c->pool, p->n_threads, &err);
    if (st == TF_OK) {
        tf_decoder_params dp = tf_decoder_default_params(); /* mode ar */
        dp.n_ctx = p->n_ctx < 2 ? 2 : p->n_ctx;
        dp.n_batch = p->n_batch;
        dp.kv_type = p->kv_type;
        dp.isa = p->isa;
        dp.sampling.temp = 0.0f;
        tf_spec_cfg cfg = tf_api_spec_cfg(&dp, dev);
        cfg.n_logits = n_logits;
        st = tf_spec_init(&c->s, m, NULL, &cfg, c->pool, &err);
        c->has_s = st == TF_OK;
    }
    if (st == TF_OK && !c->s.be.ops->host_memory &&
        !(c->logits_h = malloc(sizeof(float) * (size_t)n_logits * m->hp.n_vocab)))
        st = tf_errf(&err, TF_ERR_NOMEM, "context: out of memory for %d logits rows", n_logits);
    if (st != TF_OK) {
        copy_err(&err, errbuf, errbuf_size);
        tf_context_free(c);
        return st;
    }
    *out = c;
    return TF_OK;
}

void tf_context_free(tf_context *c) {
    if (!c) return;
    if (c->has_s) tf_spec_free(&c->s);
    tf_pool_free(c->pool);
    free(c->logits_h);
    free(c);
}

const char *tf_context_error(const tf_context *c) { return c->err.msg; }

tf_status tf_context_eval(tf_context *c, const int32_t *tokens, int32_t n, float *out) {
    tf_err_clear(&c->err);
    const int32_t V = c->m->hp.n_vocab;
    if (n < 1 || !tokens) return tf_errf(&c->err, TF_ERR_INVALID_ARG, "eval: %d tokens (expected >= 1)", n);
    if (n > c->params.n_ctx - c->n_past)
        return tf_errf(&c->err, TF_ERR_RANGE,
                       "%d tokens do not fit in the context: %d of %d positions are used (raise -c / n_ctx)", n,
                       c->n_past, c->params.n_ctx);
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= V)
            return tf_errf(&c->err, TF_ERR_INVALID_ARG, "eval: token %d at index %d is out of range (0..%d)",
                           tokens[i], i, V - 1);
    tf_fwd *f = &c->s.lv[0].fwd;
    for (int32_t done = 0; done < n;) {
        int32_t nb = n - done < c->params.n_batch ? n - done : c->params.n_batch;
        int32_t from = c->params.logits_all ? 0 : nb - 1;
        tf_status st = tf_spec_eval(&c->s, tokens + done, nb, from);
        if (st != TF_OK) tf_errf(&c->err, st, "%s", c->s.err.msg);
        const float *lg = f->logits;
        if (st == TF_OK && !c->s.be.ops->host_memory) { /* read the rows back */
            st = tf_fwd_logits(f, nb - from, c->logits_h, &c->err);
            lg = c->logits_h;
        }
        if (st != TF_OK) return st;
        c->n_past += nb;
        c->last_logits = lg + (size_t)(nb - 1 - from) * V;
        if (out && c->params.logits_all) memcpy(out + (size_t)done * V, lg, sizeof(float) * nb * V);
        done += nb;
        if (c->params.progress && !c->params.progress(c->params.progress_user_data, (uint64_t)done, (uint64_t)n))
            return tf_errf(&c->err, TF_ERR_CANCELLED, "eval cancelled after %d of %d tokens", done, n);
    }
    return TF_OK;
}

const float *tf_context_logits(const tf_context *c) { return c->last_logits; }
int32_t tf_context_n_past(const tf_context *c) { return c->n_past; }
int32_t tf_context_n_ctx(const tf_context *c) { return c->params.n_ctx; }

tf_status tf_context_truncate(tf_context *c, int32_t n) {
    tf_err_clear(&c->err);
    if (n < 0 || n > c->n_past)
        return tf_errf(&c->err, TF_ERR_INVALID_ARG, "truncate to %d: expected 0..%d", n, c->n_past);
    c->n_past = n;
    tf_spec_eval_truncate(&c->s, n);
    c->last_logits = NULL;
    return TF_OK;
}

tf_status tf_context_fill_random(tf_context *c, int32_t n, uint64_t seed) {
    tf_err_clear(&c->err);
    if (n < 0) return tf_errf(&c->err, TF_ERR_INVALID_ARG, "fill: %d positions (expected >= 0)", n);
    if (n > c->params.n_ctx)
        return tf_errf(&c->err, TF_ERR_RANGE, "fill: %d positions do not fit in the context of %d", n,
                       c->params.n_ctx);
    tf_status st = tf_spec_eval_fill_random(&c->s, n, seed);
    if (st != TF_OK) return tf_errf(&c->err, st, "%s", c->s.err.msg);
    c->n_past = n;
    c->last_logits = NULL;
    return TF_OK;
}

/* ---- sampling ---- */

tf_sampler_params tf_sampler_default_params(void) {
    return (tf_sampler_params){.temp = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f, .seed = 0};
}

tf_status tf_sampler_init(tf_sampler **out, const tf_model *m, const tf_sampler_params *params, char *errbuf,
                          size_t errbuf_size) {
    *out = NULL;
    tf_sampler_params p = params ? *params : tf_sampler_default_params();
    tf_err err = {0};
    tf_sampler *s = calloc(1, sizeof *s);
    if (!s) {
        tf_errf(&err, TF_ERR_NOMEM, "sampler: out of memory");
        copy_err(&err, errbuf, errbuf_size);
        return err.status;
    }
    tf_sampling_cfg cfg = {.temp = p.temp, .top_k = p.top_k, .top_p = p.top_p, .min_p = p.min_p, .seed = p.seed};
    tf_status st = tf_sampling_init(&s->s, &cfg, m->hp.n_vocab, &err);
    if (st != TF_OK) {
        copy_err(&err, errbuf, errbuf_size);
        free(s);
        return st;
    }
    *out = s;
    return TF_OK;
}

void tf_sampler_free(tf_sampler *s) {
    if (!s) return;
    tf_sampling_free(&s->s);
    free(s);
}

int32_t tf_sampler_sample(tf_sampler *s, const float *logits) { return tf_sampling_sample(&s->s, logits); }
