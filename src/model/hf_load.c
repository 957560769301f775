/*
 * hf_load.c — assemble a Hugging Face checkpoint directory into an in-memory
 * GGUF view (see hf.h): metadata through the GGUF writer and reader, tensors
 * pointing into the mapped safetensors files.
 */
#include "backend/cpu/quant.h"
#include "core/mem.h"
#include "format/safetensors.h"
#include "model/hf.h"
#include "tokenizer/hf_tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Everything the view owns beyond the GGUF index. */
typedef struct hf_owned {
    tf_st_set st;
    uint8_t *meta;       /* the metadata-only GGUF bytes the view's KV pairs point into */
    void **bufs;         /* converted tensors (tf_alloc) */
    size_t n_bufs, cap_bufs;
} hf_owned;

static void hf_release(void *ud) {
    hf_owned *o = ud;
    if (!o) return;
    tf_st_set_close(&o->st);
    free(o->meta);
    for (size_t i = 0; i < o->n_bufs; i++) tf_free(o->bufs[i]);
    free(o->bufs);
    free(o);
}

/* An owned, 64-byte aligned buffer released with the view. */
static void *own(hf_owned *o, size_t bytes) {
    if (o->n_bufs == o->cap_bufs) {
        size_t cap = o->cap_bufs ? 2 * o->cap_bufs : 64;
        void **nb = realloc(o->bufs, cap * sizeof *nb);
        if (!nb) return NULL;
        o->bufs = nb;
        o->cap_bufs = cap;
    }
    void *p = tf_alloc(bytes ? bytes : 1);
    if (p) o->bufs[o->n_bufs++] = p;
    return p;
}


/* ---- tensors ---- */

/* NORM: a vector widened to F32 (norm weights, biases); PERM_Q / PERM_K: the
 * llama row permutation (hf.h), not applied to qwen2. */
typedef enum conv_kind { CONV_NONE, CONV_NORM, CONV_PERM_Q, CONV_PERM_K } conv_kind;

/* Dimensions a shape is made of. */
typedef enum dim { D_NONE, D_EMBD, D_Q, D_KV, D_FF } dim;

typedef struct layer_map {
    const char *hf;   /* suffix after "model.layers.N." */
    const char *gguf; /* suffix after "blk.N." */
    conv_kind conv;
    dim rows, cols;   /* expected shape [rows, cols] (rows D_NONE: a vector of cols) */
    bool qwen2_only;  /* the q/k/v biases */
} layer_map;

static const layer_map k_layer_map[] = {
    {"input_layernorm.weight", "attn_norm.weight", CONV_NORM, D_NONE, D_EMBD, false},
    {"self_attn.q_proj.weight", "attn_q.weight", CONV_PERM_Q, D_Q, D_EMBD, false},
    {"self_attn.k_proj.weight", "attn_k.weight", CONV_PERM_K, D_KV, D_EMBD, false},
    {"self_attn.v_proj.weight", "attn_v.weight", CONV_NONE, D_KV, D_EMBD, false},
    {"self_attn.o_proj.weight", "attn_output.weight", CONV_NONE, D_EMBD, D_Q, false},
    {"post_attention_layernorm.weight", "ffn_norm.weight", CONV_NORM, D_NONE, D_EMBD, false},
    {"mlp.gate_proj.weight", "ffn_gate.weight", CONV_NONE, D_FF, D_EMBD, false},
    {"mlp.up_proj.weight", "ffn_up.weight", CONV_NONE, D_FF, D_EMBD, false},
    {"mlp.down_proj.weight", "ffn_down.weight", CONV_NONE, D_EMBD, D_FF, false},
    {"self_attn.q_proj.bias", "attn_q.bias", CONV_NORM, D_NONE, D_Q, true},
    {"self_attn.k_proj.bias", "attn_k.bias", CONV_NORM, D_NONE, D_KV, true},
    {"self_attn.v_proj.bias", "attn_v.bias", CONV_NORM, D_NONE, D_KV, true},
};

/* Whether entry lm belongs to c's architecture, and how it is converted. */
static bool layer_map_used(const tf_hf_config *c, const layer_map *lm) {
    return !lm->qwen2_only || c->gguf_arch == TF_ARCH_QWEN2;
}

static conv_kind layer_map_conv(const tf_hf_config *c, const layer_map *lm) {
    bool perm = lm->conv == CONV_PERM_Q || lm->conv == CONV_PERM_K;
    return perm && c->gguf_arch == TF_ARCH_QWEN2 ? CONV_NONE : lm->conv;
}

static int64_t dim_size(const tf_hf_config *c, dim d) {
    int64_t hd = c->head_dim ? c->head_dim : c->n_embd / c->n_head;
    switch (d) {
    case D_EMBD: return c->n_embd;
    case D_Q: return c->n_head * hd;
    case D_KV: return c->n_head_kv * hd;
    case D_FF: return c->n_ff;
    default: return 0;
    }
}

typedef struct builder {
    const char *dir;
    const tf_hf_config *cfg;
    hf_owned *o;
    tf_gguf_tensor *out;
    uint64_t n_out;
    tf_err *err;
} builder;

static tf_status nomem(builder *b, const char *what) {
    return tf_errf(b->err, TF_ERR_NOMEM, "%s: out of memory for %s", b->dir, what);
}

/* Append tensor `gname` to the view from safetensors tensor t, converting as
 * `conv` says. */
static tf_status add_tensor(builder *b, const char *gname, const tf_st_tensor *t, const tf_st_file *file,
                            conv_kind conv, int64_t want_rows, int64_t want_cols) {
    const tf_hf_config *c = b->cfg;
    if (t->engine_type == TF_ST_ENGINE_NONE)
        return tf_errf(b->err, TF_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s (expected F32, F16 or BF16)",
                       file->path, t->name, t->dtype_name);
    bool ok = want_rows ? t->n_dims == 2 && t->shape[0] == want_rows && t->shape[1] == want_cols
                        : t->n_dims == 1 && t->shape[0] == want_cols;
    if (!ok) {
        char got[96] = "[", want[64];
        for (uint32_t i = 0; i < t->n_dims && i < 4; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? ", " : "", (long long)t->shape[i]);
        snprintf(got + strlen(got), sizeof got - strlen(got), "]");
        if (want_rows) snprintf(want, sizeof want, "[%lld, %lld]", (long long)want_rows, (long long)want_cols);
        else snprintf(want, sizeof want, "[%lld]", (long long)want_cols);
        return tf_errf(b->err, TF_ERR_FORMAT, "%s: tensor '%s' has shape %s (expected %s from config.json)",
                       file->path, t->name, got, want);
    }
    tf_gguf_tensor *g = &b->out[b->n_out];
    memset(g, 0, sizeof *g);
    snprintf(g->name, sizeof g->name, "%s", gname);
    g->n_dims = t->n_dims;
    g->ne[0] = t->shape[t->n_dims - 1];
    g->ne[1] = t->n_dims == 2 ? t->shape[0] : 1;
    g->ne[2] = g->ne[3] = 1;
    g->type = (uint32_t)t->engine_type;
    g->nbytes = t->nbytes;
    g->data = t->data;
    size_t esz = t->elem_size;
    int64_t cols = g->ne[0], rows = g->ne[1];
    size_t row_bytes = (size_t)cols * esz;
    if (conv == CONV_NORM) {
        void *src = own(b->o, t->nbytes);
        float *dst = own(b->o, (size_t)cols * sizeof(float));
        if (!src || !dst) return nomem(b, t->name);
        memcpy(src, t->data, t->nbytes);
        tf_ref_dequantize_row((tf_dtype)t->engine_type, src, dst, cols);
        g->type = TF_DTYPE_F32;
        g->nbytes = (uint64_t)cols * sizeof(float);
        g->data = (const uint8_t *)dst;
    } else if (conv == CONV_PERM_Q || conv == CONV_PERM_K) {
        int64_t hd = c->head_dim ? c->head_dim : c->n_embd / c->n_head;
        uint8_t *dst = own(b->o, t->nbytes);
        if (!dst) return nomem(b, t->name);
        for (int64_t r = 0; r < rows; r++)
            memcpy(dst + (size_t)r * row_bytes, t->data + (size_t)tf_hf_qk_row(r, hd) * row_bytes, row_bytes);
        g->data = dst;
    } else if ((uintptr_t)t->data % (esz < 4 ? esz : 4) != 0) {
        /* the format does not align data; kernels read elements in place */
        uint8_t *dst = own(b->o, t->nbytes);
        if (!dst) return nomem(b, t->name);
        memcpy(dst, t->data, t->nbytes);
        g->data = dst;
    }
    b->n_out++;
    return TF_OK;
}

static const tf_st_tensor *need(builder *b, const char *name, const tf_st_file **file) {
    return tf_st_set_find(&b->o->st, name, file);
}

/* Collect the llama / qwen2 tensors in GGUF order; check nothing required is missing
 * and warn about what is not used. */
static tf_status build_tensors(builder *b, const tf_logger *lg) {
    const tf_hf_config *c = b->cfg;
    const tf_st_set *st = &b->o->st;
    size_t n_max = (size_t)c->n_layer * (sizeof k_layer_map / sizeof k_layer_map[0]) + 8;
    b->out = calloc(n_max, sizeof *b->out);
    if (!b->out) return nomem(b, "the tensor index");
    const tf_st_file *fe = NULL, *fh = NULL, *fn = NULL;
    const tf_st_tensor *emb = need(b, "model.embed_tokens.weight", &fe);
    const tf_st_tensor *head = need(b, "lm_head.weight", &fh);
    const tf_st_tensor *norm = need(b, "model.norm.weight", &fn);
    if (!emb && !head)
        return tf_errf(b->err, TF_ERR_FORMAT,
                       "%s: neither 'model.embed_tokens.weight' nor 'lm_head.weight' is in the checkpoint", b->dir);
    if (!norm) return tf_errf(b->err, TF_ERR_FORMAT, "%s: tensor 'model.norm.weight' is missing", b->dir);
    /* Untied by the config: both matrices must be there (tying them anyway
     * would run a different model than the checkpoint describes). */
    if (c->tied_given && !c->tied && (!emb || !head))
        return tf_errf(b->err, TF_ERR_FORMAT,
                       "%s: config.json says tie_word_embeddings = false but tensor '%s' is not in the checkpoint "
                       "(expected both model.embed_tokens.weight and lm_head.weight, or tie_word_embeddings = true)",
                       b->dir, emb ? "lm_head.weight" : "model.embed_tokens.weight");
    /* A tied embedding may be stored under either name. */
    TF_TRY(add_tensor(b, "token_embd.weight", emb ? emb : head, emb ? fe : fh, CONV_NONE, c->n_vocab, c->n_embd));
    TF_TRY(add_tensor(b, "output_norm.weight", norm, fn, CONV_NORM, 0, c->n_embd));
    if (emb && head && !(c->tied_given && c->tied))
        TF_TRY(add_tensor(b, "output.weight", head, fh, CONV_NONE, c->n_vocab, c->n_embd));
    uint64_t used = (emb != NULL) + (head != NULL) + 1;
    for (int64_t il = 0; il < c->n_layer; il++) {
        for (size_t k = 0; k < sizeof k_layer_map / sizeof k_layer_map[0]; k++) {
            if (!layer_map_used(c, &k_layer_map[k])) continue;
            char hn[128], gn[64];
            snprintf(hn, sizeof hn, "model.layers.%lld.%s", (long long)il, k_layer_map[k].hf);
            snprintf(gn, sizeof gn, "blk.%lld.%s", (long long)il, k_layer_map[k].gguf);
            const tf_st_file *f = NULL;
            const tf_st_tensor *t = need(b, hn, &f);
            if (!t)
                return tf_errf(b->err, TF_ERR_FORMAT, "%s: tensor '%s' is missing (num_hidden_layers = %lld)", b->dir,
                               hn, (long long)c->n_layer);
            const layer_map *lm = &k_layer_map[k];
            TF_TRY(add_tensor(b, gn, t, f, layer_map_conv(c, lm), dim_size(c, lm->rows), dim_size(c, lm->cols)));
            used++;
        }
    }
    if (c->rope_scaling == TF_ROPE_SCALING_LLAMA3) {
        int64_t hd = c->head_dim ? c->head_dim : c->n_embd / c->n_head;
        float *fr = own(b->o, (size_t)(hd / 2) * sizeof(float));
        if (!fr) return nomem(b, "rope_freqs");
        tf_rope_llama3_factors(fr, (int32_t)hd, (float)c->rope_theta, (float)c->rope_factor,
                                   (float)c->llama3_low_freq_factor, (float)c->llama3_high_freq_factor,
                                   (int32_t)c->rope_orig_ctx);
        tf_gguf_tensor *g = &b->out[b->n_out++];
        memset(g, 0, sizeof *g);
        snprintf(g->name, sizeof g->name, "rope_freqs.weight");
        g->n_dims = 1;
        g->ne[0] = hd / 2;
        g->ne[1] = g->ne[2] = g->ne[3] = 1;
        g->type = TF_DTYPE_F32;
        g->nbytes = (uint64_t)(hd / 2) * sizeof(float);
        g->data = (const uint8_t *)fr;
    }
    /* Report what the llama graph does not use (rotary caches of old
     * checkpoints are expected and skipped quietly). */
    uint64_t unused = 0;
    const char *first = NULL;
    for (uint64_t i = 0; i < st->n_tensors; i++) {
        const char *nm = st->index[i].tensor->name;
        if (strstr(nm, "rotary_emb.inv_freq")) {
            used++;
            continue;
        }
        bool known = strcmp(nm, "model.embed_tokens.weight") == 0 || strcmp(nm, "lm_head.weight") == 0 ||
                     strcmp(nm, "model.norm.weight") == 0;
        long long il = -1;
        int off = 0;
        if (!known && sscanf(nm, "model.layers.%lld.%n", &il, &off) == 1 && off > 0 && il >= c->n_layer)
            return tf_errf(b->err, TF_ERR_FORMAT,
                           "%s: tensor '%s' belongs to layer %lld but config.json says num_hidden_layers = %lld "
                           "(expected layers 0..%lld only; the config and the weights disagree)",
                           b->dir, nm, il, (long long)c->n_layer, (long long)c->n_layer - 1);
        if (!known && sscanf(nm, "model.layers.%lld.%n", &il, &off) == 1 && off > 0 && il >= 0 && il < c->n_layer)
            for (size_t k = 0; k < sizeof k_layer_map / sizeof k_layer_map[0] && !known; k++)
                known = layer_map_used(c, &k_layer_map[k]) && strcmp(nm + off, k_layer_map[k].hf) == 0;
        if (!known) {
            unused++;
            if (!first) first = nm;
        }
    }
    if (unused)
        tf_logf(lg, TF_LOG_WARN, "%s: %llu tensor(s) not used by the %s architecture are ignored (first: '%s')",
                b->dir, (unsigned long long)unused, tf_arch_name(c->gguf_arch), first);
    return TF_OK;
}

/* ---- assembly ---- */

/* The directory's last path component (trailing slashes ignored), into buf. */
static const char *base_name(const char *dir, char *buf, size_t cap) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    size_t s = n;
    while (s > 0 && dir[s - 1] != '/') s--;
    snprintf(buf, cap, "%.*s", (int)(n - s > 120 ? 120 : n - s), dir + s);
    return buf;
}

/* Metadata: config keys, tokenizer keys, BOS/EOS from the config files. */
static tf_status build_metadata(tf_gguf_writer *w, const char *dir, const tf_hf_config *c, bool have_cfg,
                                bool vocab_only, const tf_logger *lg, tf_err *err) {
    char name[128];
    if (have_cfg) TF_TRY(tf_hf_config_to_gguf(c, base_name(dir, name, sizeof name), w, err));
    char tj[1100], tc[1100];
    snprintf(tj, sizeof tj, "%s/tokenizer.json", dir);
    snprintf(tc, sizeof tc, "%s/tokenizer_config.json", dir);
    bool has_tj, has_tc;
    TF_TRY(tf_probe_regular_file(tj, &has_tj, err));
    TF_TRY(tf_probe_regular_file(tc, &has_tc, err));
    if (!has_tj) {
        if (vocab_only)
            return tf_errf(err, TF_ERR_IO, "%s: no tokenizer.json (a Hugging Face directory needs it for tokenizing)",
                           dir);
        tf_logf(lg, TF_LOG_WARN, "%s: no tokenizer.json; only token ids can be used", dir);
        return TF_OK;
    }
    TF_TRY(tf_hf_tokenizer_to_gguf(w, tj, has_tc ? tc : NULL, have_cfg ? c->n_vocab : -1, err));
    if (have_cfg && c->bos >= 0) {
        tf_gguf_writer_remove_kv(w, "tokenizer.ggml.bos_token_id");
        TF_TRY(tf_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)c->bos, err));
    }
    if (have_cfg && c->eos >= 0) {
        tf_gguf_writer_remove_kv(w, "tokenizer.ggml.eos_token_id");
        TF_TRY(tf_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)c->eos, err));
    }
    return TF_OK;
}

tf_status tf_hf_open(tf_gguf *g, const char *dir, bool vocab_only, const tf_logger *lg, tf_err *err) {
    memset(g, 0, sizeof *g);
    tf_hf_config cfg;
    char cp[1100];
    snprintf(cp, sizeof cp, "%s/config.json", dir);
    bool have_cfg = !vocab_only;
    if (vocab_only) TF_TRY(tf_probe_regular_file(cp, &have_cfg, err));
    if (have_cfg) TF_TRY(tf_hf_config_load(&cfg, dir, lg, err));
    hf_owned *o = calloc(1, sizeof *o);
    tf_gguf_writer *w = tf_gguf_writer_new();
    if (!o || !w) {
        free(o);
        tf_gguf_writer_free(w);
        return tf_errf(err, TF_ERR_NOMEM, "%s: out of memory", dir);
    }
    tf_status st = build_metadata(w, dir, &cfg, have_cfg, vocab_only, lg, err);
    size_t meta_size = 0;
    if (st == TF_OK) st = tf_gguf_writer_write_mem(w, &o->meta, &meta_size, err);
    tf_gguf_writer_free(w);
    if (st == TF_OK) st = tf_gguf_parse(g, dir, o->meta, meta_size, err);
    if (st != TF_OK) {
        hf_release(o);
        memset(g, 0, sizeof *g);
        return st;
    }
    g->release = hf_release;
    g->release_ud = o;
    g->base = NULL; /* tensors live in other mappings */
    g->size = 0;
    g->data_offset = 0;
    if (vocab_only) return TF_OK;
    builder b = {.dir = dir, .cfg = &cfg, .o = o, .err = err};
    st = tf_st_set_open(&o->st, dir, err);
    if (st == TF_OK) st = build_tensors(&b, lg);
    if (st != TF_OK) {
        free(b.out);
        tf_gguf_close(g);
        return st;
    }
    free(g->tensors);
    g->tensors = b.out;
    g->n_tensors = b.n_out;
    return TF_OK;
}
