/*
 * hf_export.c — GGUF model -> Hugging Face directory (see hf_export.h).
 */
#include "hf_export.h"

#include "st_write.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct tensor_out {
    char name[96];
    const char *dtype;
    int n_dims;
    int64_t shape[2];
    void *data; /* owned */
    size_t nbytes;
} tensor_out;

static const char *st_dtype(uint32_t t) {
    switch (t) {
    case TF_DTYPE_F32: return "F32";
    case TF_DTYPE_F16: return "F16";
    case TF_DTYPE_BF16: return "BF16";
    default: return NULL;
    }
}

/* Copy a weight; q/k projections get Hugging Face's rotate-half row order:
 * within each head, HF row j < d/2 is GGUF row 2j and HF row d/2 + j is GGUF
 * row 2j + 1. */
static int put(tensor_out *o, const char *name, const tf_tensor *t, int rope_heads, int head_dim) {
    snprintf(o->name, sizeof o->name, "%s", name);
    o->dtype = st_dtype(t->type);
    if (!o->dtype) {
        fprintf(stderr, "hf_export: tensor %s has a type safetensors cannot hold\n", name);
        return -1;
    }
    bool vec = t->ne[1] == 1 && (strstr(name, "norm") != NULL || strstr(name, ".bias") != NULL);
    o->n_dims = vec ? 1 : 2;
    o->shape[0] = vec ? t->ne[0] : t->ne[1];
    o->shape[1] = t->ne[0];
    size_t row = (size_t)tf_dtype_row_size(t->type, t->ne[0]);
    o->nbytes = row * (size_t)t->ne[1];
    o->data = malloc(o->nbytes ? o->nbytes : 1);
    if (!o->data) return -1;
    if (!rope_heads) {
        memcpy(o->data, t->data, o->nbytes);
        return 0;
    }
    const uint8_t *src = t->data;
    uint8_t *dst = o->data;
    int half = head_dim / 2;
    for (int h = 0; h < rope_heads; h++)
        for (int j = 0; j < half; j++) {
            memcpy(dst + (size_t)(h * head_dim + j) * row, src + (size_t)(h * head_dim + 2 * j) * row, row);
            memcpy(dst + (size_t)(h * head_dim + half + j) * row, src + (size_t)(h * head_dim + 2 * j + 1) * row, row);
        }
    return 0;
}

static int write_config(const tf_model *m, const char *dir, const hf_export_opts *o) {
    const tf_hparams *hp = &m->hp;
    cJSON *c = cJSON_CreateObject();
    bool qwen2 = hp->arch == TF_ARCH_QWEN2;
    cJSON *arch = cJSON_AddArrayToObject(c, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString(qwen2 ? "Qwen2ForCausalLM" : "LlamaForCausalLM"));
    cJSON_AddStringToObject(c, "model_type", qwen2 ? "qwen2" : "llama");
    if (qwen2) { /* as Qwen2.5 publishes them: a window that is not used */
        cJSON_AddBoolToObject(c, "use_sliding_window", false);
        cJSON_AddNumberToObject(c, "sliding_window", hp->n_ctx_train > 8 ? hp->n_ctx_train / 2 : 4);
        cJSON_AddNumberToObject(c, "max_window_layers", hp->n_layer);
    }
    cJSON_AddNumberToObject(c, "vocab_size", hp->n_vocab);
    cJSON_AddNumberToObject(c, "hidden_size", hp->n_embd);
    cJSON_AddNumberToObject(c, "intermediate_size", hp->n_ff);
    cJSON_AddNumberToObject(c, "num_hidden_layers", hp->n_layer);
    cJSON_AddNumberToObject(c, "num_attention_heads", hp->n_head);
    cJSON_AddNumberToObject(c, "num_key_value_heads", hp->n_head_kv);
    if (hp->head_dim * hp->n_head != hp->n_embd) cJSON_AddNumberToObject(c, "head_dim", hp->head_dim);
    cJSON_AddNumberToObject(c, "max_position_embeddings", hp->n_ctx_train);
    cJSON_AddNumberToObject(c, "rms_norm_eps", hp->rms_eps);
    cJSON_AddNumberToObject(c, "rope_theta", hp->rope_base);
    cJSON_AddStringToObject(c, "torch_dtype", m->tok_embd.type == TF_DTYPE_F32 ? "float32"
                                              : m->tok_embd.type == TF_DTYPE_F16 ? "float16" : "bfloat16");
    if (hp->tied_output && o->tie_flag) cJSON_AddBoolToObject(c, "tie_word_embeddings", true);
    if (!hp->tied_output) cJSON_AddBoolToObject(c, "tie_word_embeddings", false);
    if (qwen2 && hp->rope_scaling == TF_ROPE_SCALING_YARN && hp->yarn_beta_fast == 32.0f &&
        hp->yarn_beta_slow == 1.0f && hp->yarn_attn_factor == 1.0f) {
        /* Qwen's published form: type, factor and the original context only */
        cJSON *rs = cJSON_AddObjectToObject(c, "rope_scaling");
        cJSON_AddStringToObject(rs, "type", "yarn");
        cJSON_AddNumberToObject(rs, "factor", hp->rope_factor);
        cJSON_AddNumberToObject(rs, "original_max_position_embeddings", hp->rope_orig_ctx);
    } else if (hp->rope_scaling == TF_ROPE_SCALING_LINEAR || hp->rope_scaling == TF_ROPE_SCALING_YARN) {
        cJSON *rs = cJSON_AddObjectToObject(c, "rope_scaling");
        cJSON_AddStringToObject(rs, "type", hp->rope_scaling == TF_ROPE_SCALING_YARN ? "yarn" : "linear");
        cJSON_AddNumberToObject(rs, "factor", hp->rope_factor);
        if (hp->rope_scaling == TF_ROPE_SCALING_YARN) {
            cJSON_AddNumberToObject(rs, "original_max_position_embeddings", hp->rope_orig_ctx);
            cJSON_AddNumberToObject(rs, "beta_fast", hp->yarn_beta_fast);
            cJSON_AddNumberToObject(rs, "beta_slow", hp->yarn_beta_slow);
            double ms = hp->rope_factor > 1 ? 1.0 + 0.1 * log(hp->rope_factor) : 1.0;
            if (hp->yarn_attn_factor != 1.0f) cJSON_AddNumberToObject(rs, "attention_factor", hp->yarn_attn_factor * ms);
        }
    } else if (o->llama3) {
        cJSON *rs = cJSON_AddObjectToObject(c, "rope_scaling");
        cJSON_AddStringToObject(rs, "rope_type", "llama3");
        cJSON_AddNumberToObject(rs, "factor", o->llama3_factor);
        cJSON_AddNumberToObject(rs, "low_freq_factor", o->llama3_low);
        cJSON_AddNumberToObject(rs, "high_freq_factor", o->llama3_high);
        cJSON_AddNumberToObject(rs, "original_max_position_embeddings", o->llama3_orig_ctx);
    } else {
        cJSON_AddNullToObject(c, "rope_scaling");
    }
    char *text = cJSON_Print(c);
    cJSON_Delete(c);
    if (!text) return -1;
    size_t n = strlen(text);
    if (o->extra_config) { /* splice raw members before the closing brace */
        char *t2 = malloc(n + strlen(o->extra_config) + 8);
        size_t close = n;
        while (close > 0 && text[close - 1] != '}') close--;
        snprintf(t2, n + strlen(o->extra_config) + 8, "%.*s,%s}", (int)(close - 1), text, o->extra_config);
        free(text);
        text = t2;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/config.json", dir);
    int r = st_write_bytes(path, text, (size_t)-1);
    free(text);
    return r;
}

int hf_export(const tf_model *m, const char *dir, const hf_export_opts *o) {
    const tf_hparams *hp = &m->hp;
    mkdir(dir, 0755);
    size_t n_max = (size_t)hp->n_layer * 12 + 4, n = 0;
    /* llama: GGUF keeps q/k rows in adjacent-pair order, HF in rotate-half
     * order; qwen2: both keep rotate-half order */
    bool perm = hp->arch != TF_ARCH_QWEN2;
    tensor_out *t = calloc(n_max, sizeof *t);
    int rc = 0;
    if (hp->tied_output)
        rc |= put(&t[n++], o->tied_as_head ? "lm_head.weight" : "model.embed_tokens.weight", &m->tok_embd, 0, 0);
    else {
        rc |= put(&t[n++], "model.embed_tokens.weight", &m->tok_embd, 0, 0);
        rc |= put(&t[n++], "lm_head.weight", &m->output, 0, 0);
    }
    rc |= put(&t[n++], "model.norm.weight", &m->output_norm, 0, 0);
    for (int il = 0; il < hp->n_layer && rc == 0; il++) {
        const tf_layer_weights *L = &m->layers[il];
        char nm[96];
#define PUT(suffix, field, heads)                                          \
    snprintf(nm, sizeof nm, "model.layers.%d.%s", il, suffix);             \
    rc |= put(&t[n++], nm, &L->field, heads, hp->head_dim)
        PUT("input_layernorm.weight", attn_norm, 0);
        PUT("self_attn.q_proj.weight", wq, perm ? hp->n_head : 0);
        PUT("self_attn.k_proj.weight", wk, perm ? hp->n_head_kv : 0);
        PUT("self_attn.v_proj.weight", wv, 0);
        PUT("self_attn.o_proj.weight", wo, 0);
        PUT("post_attention_layernorm.weight", ffn_norm, 0);
        PUT("mlp.gate_proj.weight", w_gate, 0);
        PUT("mlp.up_proj.weight", w_up, 0);
        PUT("mlp.down_proj.weight", w_down, 0);
        if (L->bq.data) {
            PUT("self_attn.q_proj.bias", bq, 0);
            PUT("self_attn.k_proj.bias", bk, 0);
            PUT("self_attn.v_proj.bias", bv, 0);
        }
#undef PUT
    }
    int shards = o->n_shards > 1 ? o->n_shards : 1;
    cJSON *idx = cJSON_CreateObject(), *wm = NULL;
    if (shards > 1) {
        cJSON *meta = cJSON_AddObjectToObject(idx, "metadata");
        cJSON_AddNumberToObject(meta, "total_size", 0);
        wm = cJSON_AddObjectToObject(idx, "weight_map");
    }
    for (int s = 0; s < shards && rc == 0; s++) {
        st_entry *e = calloc(n, sizeof *e);
        size_t ne = 0;
        char file[64], path[1024];
        if (shards > 1) snprintf(file, sizeof file, "model-%05d-of-%05d.safetensors", s + 1, shards);
        else snprintf(file, sizeof file, "model.safetensors");
        for (size_t i = 0; i < n; i++) {
            if ((int)(i % (size_t)shards) != s) continue;
            e[ne++] = (st_entry){.name = t[i].name, .dtype = t[i].dtype, .n_dims = t[i].n_dims,
                                 .shape = t[i].shape, .data = t[i].data, .nbytes = t[i].nbytes};
            if (wm) cJSON_AddStringToObject(wm, t[i].name, file);
        }
        snprintf(path, sizeof path, "%s/%s", dir, file);
        const char *meta[] = {"format", "pt", NULL};
        rc |= st_write(path, e, ne, meta);
        free(e);
    }
    if (shards > 1 && rc == 0) {
        char *text = cJSON_Print(idx), path[1024];
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
        rc |= st_write_bytes(path, text, (size_t)-1);
        free(text);
    }
    cJSON_Delete(idx);
    if (rc == 0) rc |= write_config(m, dir, o);
    if (rc == 0 && o->tokenizer_json) {
        char path[1024];
        snprintf(path, sizeof path, "%s/tokenizer.json", dir);
        rc |= st_write_bytes(path, o->tokenizer_json, (size_t)-1);
    }
    for (size_t i = 0; i < n; i++) free(t[i].data);
    free(t);
    if (rc) fprintf(stderr, "hf_export: writing %s failed\n", dir);
    return rc ? -1 : 0;
}
