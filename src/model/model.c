/*
 * model.c — load a llama- or qwen2-architecture GGUF: validate
 * hyper-parameters, bind and shape-check every weight tensor, build RoPE
 * tables and the tokenizer.
 *
 * The two architectures share the graph and the metadata keys (under their
 * own prefix, "llama." or "qwen2."). qwen2 adds f32 biases to the q, k and v
 * projections (blk.N.attn_{q,k,v}.bias, required) and keeps its q/k rows in
 * the rotate-half order of the Hugging Face checkpoint, so RoPE rotates pairs
 * (i, i + n_rot/2) there (hp.rope_neox), as GGUF readers do for qwen2 files.
 */
#include "model/model.h"

#include "format/gguf_write.h"

#include "core/mem.h"
#include "model/hf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static const char *const k_arch_names[TF_ARCH_COUNT] = {
    [TF_ARCH_LLAMA] = "llama",
    [TF_ARCH_QWEN2] = "qwen2",
};
_Static_assert(sizeof k_arch_names / sizeof k_arch_names[0] == TF_ARCH_COUNT, "one name per architecture");

const char *tf_arch_name(tf_arch arch) { return (unsigned)arch < TF_ARCH_COUNT ? k_arch_names[arch] : NULL; }

static void arch_key(char *key, size_t size, tf_arch arch, const char *suffix) {
    snprintf(key, size, "%s.%s", tf_arch_name(arch), suffix);
}

tf_status tf_arch_set_u32(tf_gguf_writer *w, tf_arch arch, const char *suffix, uint32_t v, tf_err *err) {
    char key[96];
    arch_key(key, sizeof key, arch, suffix);
    return tf_gguf_writer_set_u32(w, key, v, err);
}

tf_status tf_arch_set_f32(tf_gguf_writer *w, tf_arch arch, const char *suffix, float v, tf_err *err) {
    char key[96];
    arch_key(key, sizeof key, arch, suffix);
    return tf_gguf_writer_set_f32(w, key, v, err);
}

tf_status tf_arch_set_str(tf_gguf_writer *w, tf_arch arch, const char *suffix, const char *v, tf_err *err) {
    char key[96];
    arch_key(key, sizeof key, arch, suffix);
    return tf_gguf_writer_set_str(w, key, v, err);
}

bool tf_arch_from_name(const char *name, size_t len, tf_arch *out) {
    for (int i = 0; i < TF_ARCH_COUNT; i++)
        if (strlen(k_arch_names[i]) == len && memcmp(k_arch_names[i], name, len) == 0) {
            *out = (tf_arch)i;
            return true;
        }
    return false;
}

const char *tf_arch_list(void) { return "llama, qwen2"; }

typedef struct loader {
    tf_model *m;
    const char *path;
    const char *arch; /* metadata prefix, e.g. "llama" */
    tf_err *err;
    uint8_t *used; /* per GGUF tensor: bound to a weight (set by bind) */
} loader;

static tf_status get_u32(loader *ld, const char *suffix, int32_t *out, bool required, int32_t lo, int32_t hi) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", ld->arch, suffix);
    uint32_t v = 0;
    bool found = false;
    TF_TRY(tf_gguf_get_u32(&ld->m->gguf, key, &v, required ? NULL : &found, ld->err));
    if (!required && !found) return TF_OK;
    if ((int64_t)v < lo || (int64_t)v > hi)
        return tf_errf(ld->err, TF_ERR_FORMAT, "%s: metadata key '%s' = %u is out of range (expected %d..%d)",
                       ld->path, key, v, lo, hi);
    *out = (int32_t)v;
    return TF_OK;
}

static tf_status get_f32(loader *ld, const char *suffix, float *out, float lo, float hi) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", ld->arch, suffix);
    float v = 0;
    bool found = false;
    TF_TRY(tf_gguf_get_f32(&ld->m->gguf, key, &v, &found, ld->err));
    if (!found) return TF_OK;
    if (!isfinite(v) || v < lo || v > hi)
        return tf_errf(ld->err, TF_ERR_FORMAT, "%s: metadata key '%s' = %g is out of range (expected %g..%g)",
                       ld->path, key, v, lo, hi);
    *out = v;
    return TF_OK;
}

static tf_status load_rope_scaling(loader *ld, tf_hparams *hp) {
    char key[128];
    tf_gguf_str s;
    bool found = false;
    snprintf(key, sizeof key, "%s.rope.scaling.type", ld->arch);
    TF_TRY(tf_gguf_get_str(&ld->m->gguf, key, &s, &found, ld->err));
    hp->rope_scaling = TF_ROPE_SCALING_NONE;
    hp->rope_factor = 1.0f;
    hp->rope_orig_ctx = hp->n_ctx_train;
    hp->yarn_beta_fast = 32.0f;
    hp->yarn_beta_slow = 1.0f;
    hp->yarn_attn_factor = 1.0f;
    if (found) {
        if (tf_gguf_str_eq(s, "none")) hp->rope_scaling = TF_ROPE_SCALING_NONE;
        else if (tf_gguf_str_eq(s, "linear")) hp->rope_scaling = TF_ROPE_SCALING_LINEAR;
        else if (tf_gguf_str_eq(s, "yarn")) hp->rope_scaling = TF_ROPE_SCALING_YARN;
        else
            return tf_errf(ld->err, TF_ERR_UNSUPPORTED,
                           "%s: metadata key '%s' = '%.*s' is not supported (expected none, linear or yarn)",
                           ld->path, key, (int)(s.len > 40 ? 40 : s.len), s.data);
    }
    TF_TRY(get_f32(ld, "rope.scale_linear", &hp->rope_factor, 1e-3f, 1e6f));
    if (hp->rope_factor != 1.0f && !found) hp->rope_scaling = TF_ROPE_SCALING_LINEAR;
    TF_TRY(get_f32(ld, "rope.scaling.factor", &hp->rope_factor, 1e-3f, 1e6f));
    TF_TRY(get_u32(ld, "rope.scaling.original_context_length", &hp->rope_orig_ctx, false, 1, 1 << 30));
    TF_TRY(get_f32(ld, "rope.scaling.yarn_beta_fast", &hp->yarn_beta_fast, 1e-3f, 1e6f));
    TF_TRY(get_f32(ld, "rope.scaling.yarn_beta_slow", &hp->yarn_beta_slow, 1e-3f, 1e6f));
    TF_TRY(get_f32(ld, "rope.scaling.attn_factor", &hp->yarn_attn_factor, 1e-3f, 1e3f));
    if (hp->rope_scaling == TF_ROPE_SCALING_NONE) hp->rope_factor = 1.0f;
    return TF_OK;
}

static tf_status load_hparams(loader *ld) {
    tf_model *m = ld->m;
    tf_hparams *hp = &m->hp;
    tf_arch arch = hp->arch;
    memset(hp, 0, sizeof *hp);
    hp->arch = arch;
    hp->rope_neox = arch == TF_ARCH_QWEN2;
    hp->qkv_bias = arch == TF_ARCH_QWEN2;
    TF_TRY(get_u32(ld, "embedding_length", &hp->n_embd, true, 1, 1 << 16));
    TF_TRY(get_u32(ld, "block_count", &hp->n_layer, true, 1, 1024));
    TF_TRY(get_u32(ld, "feed_forward_length", &hp->n_ff, true, 1, 1 << 20));
    TF_TRY(get_u32(ld, "attention.head_count", &hp->n_head, true, 1, 1024));
    hp->n_head_kv = hp->n_head;
    TF_TRY(get_u32(ld, "attention.head_count_kv", &hp->n_head_kv, false, 1, 1024));
    hp->n_ctx_train = 2048;
    TF_TRY(get_u32(ld, "context_length", &hp->n_ctx_train, false, 1, 1 << 30));
    if (hp->n_head % hp->n_head_kv != 0)
        return tf_errf(ld->err, TF_ERR_FORMAT,
                       "%s: %s.attention.head_count = %d is not a multiple of head_count_kv = %d", ld->path,
                       ld->arch, hp->n_head, hp->n_head_kv);
    bool has_klen = false;
    {
        char key[128];
        snprintf(key, sizeof key, "%s.attention.key_length", ld->arch);
        has_klen = tf_gguf_find_kv(&m->gguf, key) != NULL;
    }
    if (!has_klen && hp->n_embd % hp->n_head != 0)
        return tf_errf(ld->err, TF_ERR_FORMAT,
                       "%s: embedding_length %d is not a multiple of head_count %d (and no key_length is given)",
                       ld->path, hp->n_embd, hp->n_head);
    hp->head_dim = hp->n_embd / hp->n_head;
    TF_TRY(get_u32(ld, "attention.key_length", &hp->head_dim, false, 2, 1024));
    int32_t vlen = hp->head_dim;
    TF_TRY(get_u32(ld, "attention.value_length", &vlen, false, 2, 1024));
    if (vlen != hp->head_dim)
        return tf_errf(ld->err, TF_ERR_UNSUPPORTED, "%s: %s.attention.value_length = %d differs from key_length = %d",
                       ld->path, ld->arch, vlen, hp->head_dim);
    if (hp->head_dim % 2 != 0)
        return tf_errf(ld->err, TF_ERR_FORMAT, "%s: head dimension %d is odd (expected an even number)", ld->path,
                       hp->head_dim);
    hp->n_rot = hp->head_dim;
    TF_TRY(get_u32(ld, "rope.dimension_count", &hp->n_rot, false, 2, hp->head_dim));
    if (hp->n_rot % 2 != 0)
        return tf_errf(ld->err, TF_ERR_FORMAT, "%s: %s.rope.dimension_count = %d (expected an even number)",
                       ld->path, ld->arch, hp->n_rot);
    hp->rms_eps = 1e-5f;
    TF_TRY(get_f32(ld, "attention.layer_norm_rms_epsilon", &hp->rms_eps, 1e-12f, 0.1f));
    hp->rope_base = 10000.0f;
    TF_TRY(get_f32(ld, "rope.freq_base", &hp->rope_base, 1.0f, 1e12f));
    return load_rope_scaling(ld, hp);
}

/* Bind tensor `name`, requiring its shape [cols, rows] (rows == 0: 1-D). */
static tf_status bind(loader *ld, tf_tensor *t, const char *name, int64_t cols, int64_t rows, bool optional) {
    const tf_gguf_tensor *gt = tf_gguf_find_tensor(&ld->m->gguf, name);
    memset(t, 0, sizeof *t);
    if (!gt) {
        if (optional) return TF_OK;
        return tf_errf(ld->err, TF_ERR_FORMAT, "%s: tensor '%s' is missing (required by the %s architecture)",
                       ld->path, name, ld->arch);
    }
    ld->used[gt - ld->m->gguf.tensors] = 1;
    bool shape_ok = gt->ne[0] == cols && (rows ? gt->ne[1] == rows : gt->ne[1] == 1) && gt->ne[2] == 1 &&
                    gt->ne[3] == 1;
    if (!shape_ok) {
        if (rows)
            return tf_errf(ld->err, TF_ERR_FORMAT,
                           "%s: tensor '%s' has shape [%lld, %lld, %lld, %lld] (expected [%lld, %lld])", ld->path,
                           name, (long long)gt->ne[0], (long long)gt->ne[1], (long long)gt->ne[2],
                           (long long)gt->ne[3], (long long)cols, (long long)rows);
        return tf_errf(ld->err, TF_ERR_FORMAT, "%s: tensor '%s' has shape [%lld, %lld, %lld, %lld] (expected [%lld])",
                       ld->path, name, (long long)gt->ne[0], (long long)gt->ne[1], (long long)gt->ne[2],
                       (long long)gt->ne[3], (long long)cols);
    }
    if (!tf_dtype_supported(gt->type))
        return tf_errf(ld->err, TF_ERR_UNSUPPORTED,
                       "%s: tensor '%s' has type %s (supported:" TF_DTYPE_NAMES ")", ld->path, name,
                       tf_dtype_name(gt->type));
    if (!rows && gt->type != TF_DTYPE_F32)
        return tf_errf(ld->err, TF_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s (expected f32 for a vector)",
                       ld->path, name, tf_dtype_name(gt->type));
    t->data = gt->data;
    t->type = gt->type;
    t->ne[0] = gt->ne[0];
    t->ne[1] = rows ? gt->ne[1] : 1;
    t->name = gt->name;
    return TF_OK;
}

/* Every tensor of the file must have been bound: a tensor for a layer past
 * block_count means the metadata and the weights disagree (the model would
 * silently run fewer layers), and an unknown name means a model this loader
 * does not understand. */
static tf_status check_all_used(loader *ld) {
    const tf_model *m = ld->m;
    for (uint64_t i = 0; i < m->gguf.n_tensors; i++) {
        if (ld->used[i]) continue;
        const char *name = m->gguf.tensors[i].name;
        int layer = -1, at = 0;
        if (sscanf(name, "blk.%d.%n", &layer, &at) == 1 && at > 0 && layer >= m->hp.n_layer)
            return tf_errf(ld->err, TF_ERR_FORMAT,
                           "%s: tensor '%s' belongs to layer %d but %s.block_count = %d (expected tensors for layers "
                           "0..%d only; block_count and the weights disagree)",
                           ld->path, name, layer, ld->arch, m->hp.n_layer, m->hp.n_layer - 1);
        return tf_errf(ld->err, TF_ERR_FORMAT,
                       "%s: tensor '%s' is not part of a %s model (expected token_embd, output_norm, output, "
                       "rope_freqs and the blk.N.* weights of the architecture)",
                       ld->path, name, ld->arch);
    }
    return TF_OK;
}

static tf_status bind_weights(loader *ld) {
    tf_model *m = ld->m;
    tf_hparams *hp = &m->hp;
    const tf_gguf_tensor *emb = tf_gguf_find_tensor(&m->gguf, "token_embd.weight");
    if (!emb)
        return tf_errf(ld->err, TF_ERR_FORMAT, "%s: tensor 'token_embd.weight' is missing", ld->path);
    hp->n_vocab = (int32_t)(emb->ne[1] > INT32_MAX ? -1 : emb->ne[1]);
    int32_t vocab_key = -1;
    TF_TRY(get_u32(ld, "vocab_size", &vocab_key, false, 1, 1 << 24));
    if (vocab_key >= 0 && vocab_key != hp->n_vocab)
        return tf_errf(ld->err, TF_ERR_FORMAT, "%s: %s.vocab_size = %d but token_embd.weight has %lld rows",
                       ld->path, ld->arch, vocab_key, (long long)emb->ne[1]);
    if (hp->n_vocab < 1 || hp->n_vocab > (1 << 24))
        return tf_errf(ld->err, TF_ERR_FORMAT, "%s: token_embd.weight has %lld rows (expected 1..%d)", ld->path,
                       (long long)emb->ne[1], 1 << 24);
    int64_t q_dim = (int64_t)hp->n_head * hp->head_dim, kv_dim = (int64_t)hp->n_head_kv * hp->head_dim;
    TF_TRY(bind(ld, &m->tok_embd, "token_embd.weight", hp->n_embd, hp->n_vocab, false));
    TF_TRY(bind(ld, &m->output_norm, "output_norm.weight", hp->n_embd, 0, false));
    TF_TRY(bind(ld, &m->output, "output.weight", hp->n_embd, hp->n_vocab, true));
    hp->tied_output = m->output.data == NULL;
    if (hp->tied_output) m->output = m->tok_embd;
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return tf_errf(ld->err, TF_ERR_NOMEM, "%s: out of memory", ld->path);
    for (int il = 0; il < hp->n_layer; il++) {
        tf_layer_weights *L = &m->layers[il];
        char nm[96];
#define BIND(field, suffix, cols, rows)                                      \
    snprintf(nm, sizeof nm, "blk.%d.%s.weight", il, suffix);                 \
    TF_TRY(bind(ld, &L->field, nm, cols, rows, false))
        BIND(attn_norm, "attn_norm", hp->n_embd, 0);
        BIND(wq, "attn_q", hp->n_embd, q_dim);
        BIND(wk, "attn_k", hp->n_embd, kv_dim);
        BIND(wv, "attn_v", hp->n_embd, kv_dim);
        if (hp->qkv_bias) { /* f32 vectors, one value per output row */
            struct { tf_tensor *t; const char *suffix; int64_t n; } bs[] = {
                {&L->bq, "attn_q", q_dim}, {&L->bk, "attn_k", kv_dim}, {&L->bv, "attn_v", kv_dim}};
            for (int b = 0; b < 3; b++) {
                snprintf(nm, sizeof nm, "blk.%d.%s.bias", il, bs[b].suffix);
                TF_TRY(bind(ld, bs[b].t, nm, bs[b].n, 0, false));
            }
        }
        BIND(wo, "attn_output", q_dim, hp->n_embd);
        BIND(ffn_norm, "ffn_norm", hp->n_embd, 0);
        BIND(w_gate, "ffn_gate", hp->n_embd, hp->n_ff);
        BIND(w_up, "ffn_up", hp->n_embd, hp->n_ff);
        BIND(w_down, "ffn_down", hp->n_ff, hp->n_embd);
#undef BIND
    }
    /* Llama-3 style frequency factors */
    tf_tensor freqs;
    TF_TRY(bind(ld, &freqs, "rope_freqs.weight", hp->n_rot / 2, 0, true));
    const float *factors = NULL;
    if (freqs.data) {
        factors = freqs.data;
        for (int i = 0; i < hp->n_rot / 2; i++)
            if (!isfinite(factors[i]) || factors[i] <= 0)
                return tf_errf(ld->err, TF_ERR_FORMAT, "%s: rope_freqs.weight[%d] = %g (expected a positive factor)",
                               ld->path, i, factors[i]);
        if (hp->rope_scaling != TF_ROPE_SCALING_NONE)
            return tf_errf(ld->err, TF_ERR_UNSUPPORTED,
                           "%s: both rope_freqs.weight and %s.rope.scaling.type are set (expected one)", ld->path,
                           ld->arch);
        hp->rope_scaling = TF_ROPE_SCALING_LLAMA3;
    }
    m->rope_freq = tf_alloc(sizeof(float) * (size_t)(hp->n_rot / 2));
    if (!m->rope_freq) return tf_errf(ld->err, TF_ERR_NOMEM, "%s: out of memory", ld->path);
    tf_rope_init(hp, factors, m->rope_freq, &m->rope_mscale);
    TF_TRY(check_all_used(ld));
    for (uint64_t i = 0; i < m->gguf.n_tensors; i++) {
        const tf_gguf_tensor *t = &m->gguf.tensors[i];
        m->n_params += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
        m->weight_bytes += t->nbytes;
    }
    return TF_OK;
}

tf_status tf_model_load(tf_model **out, const char *path, const tf_logger *log, tf_err *err) {
    *out = NULL;
    tf_model *m = calloc(1, sizeof *m);
    if (!m) return tf_errf(err, TF_ERR_NOMEM, "%s: out of memory", path);
    snprintf(m->path, sizeof m->path, "%s", path);
    loader ld = {.m = m, .path = path, .err = err};
    tf_status st = tf_hf_is_dir(path) ? tf_hf_open(&m->gguf, path, false, log, err) : tf_gguf_open(&m->gguf, path, err);
    if (st != TF_OK) goto fail;
    tf_gguf_str arch;
    st = tf_gguf_get_str(&m->gguf, "general.architecture", &arch, NULL, err);
    if (st != TF_OK) goto fail;
    if (!tf_arch_from_name(arch.data, arch.len, &m->hp.arch)) {
        st = tf_errf(err, TF_ERR_UNSUPPORTED,
                     "%s: general.architecture = '%.*s' is not supported (supported: %s; Llama 2/3, Mistral and "
                     "TinyLlama use llama, Qwen2 and Qwen2.5 use qwen2)",
                     path, (int)(arch.len > 40 ? 40 : arch.len), arch.data, tf_arch_list());
        goto fail;
    }
    ld.arch = tf_arch_name(m->hp.arch);
    tf_gguf_str name;
    bool has_name = false;
    if (tf_gguf_get_str(&m->gguf, "general.name", &name, &has_name, NULL) == TF_OK && has_name)
        snprintf(m->name, sizeof m->name, "%.*s", (int)(name.len > 100 ? 100 : name.len), name.data);
    if ((st = load_hparams(&ld)) != TF_OK) goto fail;
    ld.used = calloc((size_t)m->gguf.n_tensors + 1, 1);
    if (!ld.used) {
        st = tf_errf(err, TF_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    st = bind_weights(&ld);
    free(ld.used);
    if (st != TF_OK) goto fail;
    if (tf_gguf_find_kv(&m->gguf, "tokenizer.ggml.model")) {
        if ((st = tf_tokenizer_from_gguf(&m->tok, &m->gguf, err)) != TF_OK) goto fail;
        if (tf_tokenizer_n_vocab(m->tok) != m->hp.n_vocab) {
            st = tf_errf(err, TF_ERR_FORMAT,
                         "%s: the tokenizer has %d tokens but token_embd.weight has %d rows (expected equal)", path,
                         tf_tokenizer_n_vocab(m->tok), m->hp.n_vocab);
            goto fail;
        }
    } else {
        tf_logf(log, TF_LOG_WARN, "%s: no tokenizer metadata; only token ids can be used", path);
    }
    *out = m;
    return TF_OK;
fail:
    tf_model_free(m);
    return st;
}

tf_status tf_model_prefault(const tf_model *m, tf_progress_fn progress, void *ud, tf_err *err) {
    /* Tensor by tensor: a Hugging Face view spans several mappings and copies. */
    const uint64_t step = 64u << 20, page = 4096;
    uint64_t total = 0, done = 0, since = 0;
    for (uint64_t i = 0; i < m->gguf.n_tensors; i++) total += m->gguf.tensors[i].nbytes;
    volatile uint8_t sink = 0;
    for (uint64_t i = 0; i < m->gguf.n_tensors; i++) {
        const tf_gguf_tensor *t = &m->gguf.tensors[i];
        if (t->nbytes && t->data)
            madvise((void *)((uintptr_t)t->data & ~(uintptr_t)(page - 1)), (size_t)t->nbytes, MADV_WILLNEED);
        for (uint64_t off = 0; off < t->nbytes; off += page) {
            sink ^= t->data[off];
            uint64_t n = t->nbytes - off < page ? t->nbytes - off : page;
            done += n;
            since += n;
            if (since >= step || done == total) {
                since = 0;
                if (progress && !progress(ud, done, total))
                    return tf_errf(err, TF_ERR_CANCELLED, "%s: loading cancelled after %llu of %llu bytes", m->path,
                                   (unsigned long long)done, (unsigned long long)total);
            }
        }
    }
    (void)sink;
    return TF_OK;
}

tf_status tf_model_load_vocab(tf_model **out, const char *path, tf_err *err) {
    *out = NULL;
    tf_model *m = calloc(1, sizeof *m);
    if (!m) return tf_errf(err, TF_ERR_NOMEM, "%s: out of memory", path);
    snprintf(m->path, sizeof m->path, "%s", path);
    m->vocab_only = true;
    tf_status st = tf_hf_is_dir(path) ? tf_hf_open(&m->gguf, path, true, NULL, err) : tf_gguf_open(&m->gguf, path, err);
    if (st == TF_OK && !tf_gguf_find_kv(&m->gguf, "tokenizer.ggml.model"))
        st = tf_errf(err, TF_ERR_FORMAT, "%s: no tokenizer metadata (tokenizer.ggml.model is missing)", path);
    if (st == TF_OK) st = tf_tokenizer_from_gguf(&m->tok, &m->gguf, err);
    if (st != TF_OK) {
        tf_model_free(m);
        return st;
    }
    m->hp.n_vocab = tf_tokenizer_n_vocab(m->tok);
    *out = m;
    return TF_OK;
}

tf_status tf_model_extend_rope(tf_model *m, tf_rope_scaling kind, float factor, tf_err *err) {
    tf_hparams *hp = &m->hp;
    if (m->vocab_only || m->view_of)
        return tf_errf(err, TF_ERR_INVALID_ARG, "%s: RoPE scaling applies to a loaded model with weights, not a %s",
                       m->path, m->vocab_only ? "vocabulary" : "layer view");
    if (kind != TF_ROPE_SCALING_LINEAR && kind != TF_ROPE_SCALING_YARN)
        return tf_errf(err, TF_ERR_INVALID_ARG, "RoPE scaling %d: expected linear or yarn", (int)kind);
    if (!(factor > 1.0f && factor <= 64.0f))
        return tf_errf(err, TF_ERR_INVALID_ARG, "RoPE scaling factor %g: expected more than 1 and at most 64",
                       (double)factor);
    if (hp->rope_scaling != TF_ROPE_SCALING_NONE)
        return tf_errf(err, TF_ERR_INVALID_ARG, "%s already scales RoPE (%s, factor %g): expected a model without",
                       m->path, hp->rope_scaling == TF_ROPE_SCALING_LINEAR ? "linear"
                                : hp->rope_scaling == TF_ROPE_SCALING_YARN ? "yarn" : "per-dimension factors",
                       (double)hp->rope_factor);
    double ctx = (double)hp->n_ctx_train * factor;
    if (ctx > (double)(1 << 28))
        return tf_errf(err, TF_ERR_INVALID_ARG, "%s: %d positions x %g is past the %d this engine takes", m->path,
                       hp->n_ctx_train, (double)factor, 1 << 28);
    hp->rope_scaling = kind;
    hp->rope_factor = factor;
    hp->rope_orig_ctx = hp->n_ctx_train;
    hp->n_ctx_train = (int32_t)ctx;
    tf_rope_init(hp, NULL, m->rope_freq, &m->rope_mscale);
    return TF_OK;
}

tf_status tf_model_view_layers(tf_model **out, const tf_model *src, int32_t n_layer, tf_err *err) {
    *out = NULL;
    if (src->vocab_only || n_layer < 1 || n_layer >= src->hp.n_layer)
        return tf_errf(err, TF_ERR_INVALID_ARG, "%s: a draft of its first %d layers needs 1..%d (the model has %d)",
                       src->path, n_layer, src->hp.n_layer - 1, src->hp.n_layer);
    tf_model *m = malloc(sizeof *m);
    if (!m) return tf_errf(err, TF_ERR_NOMEM, "%s: out of memory", src->path);
    *m = *src;
    m->view_of = src;
    m->wpack = NULL; /* the packed copies live in the model viewed */
    m->n_wpack = m->cap_wpack = 0;
    m->hp.n_layer = n_layer;
    snprintf(m->name, sizeof m->name, "%.80s (first %d of %d layers)", src->name[0] ? src->name : "model", n_layer,
             src->hp.n_layer);
    /* count what the view runs: the embedding, head and norms stay */
    uint64_t per_layer_params = 0, per_layer_bytes = 0;
    for (int il = n_layer; il < src->hp.n_layer; il++) {
        const tf_tensor *ts[] = {&src->layers[il].attn_norm, &src->layers[il].wq, &src->layers[il].wk,
                                 &src->layers[il].wv, &src->layers[il].wo, &src->layers[il].ffn_norm,
                                 &src->layers[il].w_gate, &src->layers[il].w_up, &src->layers[il].w_down,
                                 &src->layers[il].bq, &src->layers[il].bk, &src->layers[il].bv};
        for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
            if (!ts[i]->data) continue; /* no biases */
            per_layer_params += (uint64_t)(ts[i]->ne[0] * ts[i]->ne[1]);
            per_layer_bytes += tf_dtype_row_size(ts[i]->type, ts[i]->ne[0]) * (uint64_t)ts[i]->ne[1];
        }
    }
    m->n_params -= per_layer_params;
    m->weight_bytes -= per_layer_bytes;
    *out = m;
    return TF_OK;
}

void tf_model_free(tf_model *m) {
    if (!m) return;
    if (m->view_of) {
        free(m);
        return;
    }
    for (int32_t i = 0; i < m->n_wpack; i++) tf_free(m->wpack[i].dst);
    free(m->wpack);
    tf_tokenizer_free(m->tok);
    free(m->layers);
    tf_free(m->rope_freq);
    tf_gguf_close(&m->gguf);
    free(m);
}
