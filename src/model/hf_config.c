/*
 * hf_config.c — config.json / generation_config.json of a Hugging Face Llama,
 * Mistral or Qwen2 checkpoint -> validated tf_hf_config -> GGUF llama.* or
 * qwen2.* keys.
 *
 * Qwen2 configs carry sliding_window / max_window_layers; they are only
 * meaningful with use_sliding_window true (every published Qwen2 / Qwen2.5
 * checkpoint has false), which is refused: full attention would be another
 * model beyond the window.
 *
 * RoPE scaling ("rope_scaling": {"type" or "rope_type": ...}):
 *   linear  — factor;
 *   yarn    — factor, original_max_position_embeddings, beta_fast (32),
 *             beta_slow (1), attention_factor (default 0.1 ln(factor) + 1);
 *   llama3  — factor, low_freq_factor, high_freq_factor,
 *             original_max_position_embeddings (frequency factors become a
 *             rope_freqs.weight tensor, as in GGUF);
 *   dynamic — NTK-aware scaling whose base grows with the running sequence
 *             length. Cached keys would have to be re-rotated as it grows,
 *             which no KV cache does; it is applied in its static form, the
 *             base the running form reaches at factor x the trained context
 *             (base * factor^(d / (d - 2))), and a warning says so; head
 *             dimension 2 and a base past ROPE_THETA_MAX are refused;
 *   default / none / null — no scaling.
 */
#include "format/json.h"
#include "model/hf.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define CONFIG_MAX_BYTES ((size_t)16 << 20)
#define ROPE_THETA_MAX 1e12 /* largest rope_theta (and GGUF rope.freq_base) accepted */

bool tf_hf_is_dir(const char *path) {
    struct stat sb;
    return path && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static tf_status load_rope_scaling(tf_hf_config *c, const char *file, const cJSON *root, const tf_logger *lg,
                                   tf_err *err) {
    const cJSON *rs;
    bool found;
    TF_TRY(tf_json_get_obj(file, root, "rope_scaling", &rs, &found, err));
    c->rope_scaling = TF_ROPE_SCALING_NONE;
    c->rope_factor = 1.0;
    c->rope_orig_ctx = c->n_ctx_train;
    c->yarn_beta_fast = 32.0;
    c->yarn_beta_slow = 1.0;
    c->yarn_attn_factor = 1.0;
    if (!found) return TF_OK;
    const char *type = NULL;
    bool has_type;
    TF_TRY(tf_json_get_str(file, rs, "rope_type", &type, &has_type, err));
    if (!has_type) TF_TRY(tf_json_get_str(file, rs, "type", &type, &has_type, err));
    if (!has_type)
        return tf_errf(err, TF_ERR_FORMAT, "%s: key 'rope_scaling' has neither 'rope_type' nor 'type'", file);
    if (strcmp(type, "default") == 0 || strcmp(type, "none") == 0) return TF_OK;
    bool f_found;
    TF_TRY(tf_json_get_num(file, rs, "factor", 1e-3, 1e6, &c->rope_factor, &f_found, err));
    if (!f_found)
        return tf_errf(err, TF_ERR_FORMAT, "%s: key 'rope_scaling.factor' is missing (required by '%s' scaling)",
                       file, type);
    bool opt; /* optional keys keep their defaults when absent */
    int64_t orig = c->n_ctx_train;
    TF_TRY(tf_json_get_int(file, rs, "original_max_position_embeddings", 1, (int64_t)1 << 30, &orig, &opt, err));
    c->rope_orig_ctx = orig;
    if (strcmp(type, "linear") == 0) {
        c->rope_scaling = TF_ROPE_SCALING_LINEAR;
    } else if (strcmp(type, "yarn") == 0) {
        c->rope_scaling = TF_ROPE_SCALING_YARN;
        TF_TRY(tf_json_get_num(file, rs, "beta_fast", 1e-3, 1e6, &c->yarn_beta_fast, &opt, err));
        TF_TRY(tf_json_get_num(file, rs, "beta_slow", 1e-3, 1e6, &c->yarn_beta_slow, &opt, err));
        double attn = 0;
        bool has_attn;
        TF_TRY(tf_json_get_num(file, rs, "attention_factor", 1e-3, 1e3, &attn, &has_attn, err));
        double mscale = c->rope_factor > 1 ? 1.0 + 0.1 * log(c->rope_factor) : 1.0;
        if (has_attn) c->yarn_attn_factor = attn / mscale;
        if (has_attn && !(c->yarn_attn_factor >= 1e-3 && c->yarn_attn_factor <= 1e3))
            return tf_errf(err, TF_ERR_FORMAT,
                           "%s: rope_scaling.attention_factor %g over YaRN's own scale %g (factor %g) is %g (expected "
                           "1e-3..1e3)",
                           file, attn, mscale, c->rope_factor, c->yarn_attn_factor);
    } else if (strcmp(type, "llama3") == 0) {
        c->rope_scaling = TF_ROPE_SCALING_LLAMA3;
        bool has;
        TF_TRY(tf_json_get_num(file, rs, "low_freq_factor", 1e-6, 1e6, &c->llama3_low_freq_factor, &has, err));
        if (!has) return tf_errf(err, TF_ERR_FORMAT, "%s: key 'rope_scaling.low_freq_factor' is missing (llama3)", file);
        TF_TRY(tf_json_get_num(file, rs, "high_freq_factor", 1e-6, 1e6, &c->llama3_high_freq_factor, &has, err));
        if (!has) return tf_errf(err, TF_ERR_FORMAT, "%s: key 'rope_scaling.high_freq_factor' is missing (llama3)", file);
        if (c->llama3_high_freq_factor <= c->llama3_low_freq_factor)
            return tf_errf(err, TF_ERR_FORMAT,
                           "%s: rope_scaling.high_freq_factor = %g is not above low_freq_factor = %g (llama3)", file,
                           c->llama3_high_freq_factor, c->llama3_low_freq_factor);
    } else if (strcmp(type, "dynamic") == 0) {
        int64_t hd = c->head_dim ? c->head_dim : c->n_embd / c->n_head;
        if (hd <= 2) /* the exponent d / (d - 2) has no value */
            return tf_errf(err, TF_ERR_UNSUPPORTED,
                           "%s: 'dynamic' RoPE scaling needs a head dimension above 2 (the base grows as "
                           "factor^(d / (d - 2))); this config has head dimension %lld",
                           file, (long long)hd);
        double scale = c->rope_factor > 1 ? pow(c->rope_factor, (double)hd / (double)(hd - 2)) : 1.0;
        if (!(c->rope_theta * scale <= ROPE_THETA_MAX))
            return tf_errf(err, TF_ERR_UNSUPPORTED,
                           "%s: 'dynamic' RoPE scaling with factor %g makes rope_theta %g -> %g, above the largest "
                           "base %g (expected a smaller rope_scaling.factor)",
                           file, c->rope_factor, c->rope_theta, c->rope_theta * scale, ROPE_THETA_MAX);
        tf_logf(lg, TF_LOG_WARN,
                "%s: 'dynamic' RoPE scaling (factor %g) is applied statically: rope_theta %g -> %g, the base it "
                "reaches at %g x the trained context; shorter sequences see slightly different rotations than "
                "with the running form",
                file, c->rope_factor, c->rope_theta, c->rope_theta * scale, c->rope_factor);
        c->rope_theta *= scale;
        c->rope_dynamic = true;
        c->rope_factor = 1.0;
    } else {
        return tf_errf(err, TF_ERR_UNSUPPORTED,
                       "%s: rope_scaling type '%.40s' is not supported (expected linear, dynamic, yarn or llama3)",
                       file, type);
    }
    return TF_OK;
}

/* bos_token_id / eos_token_id: an integer, or a list (the first is EOS). */
static tf_status get_token_id(const char *file, const cJSON *root, const char *key, int64_t *out, tf_err *err) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!it || cJSON_IsNull(it)) return TF_OK;
    if (cJSON_IsArray(it)) {
        it = cJSON_GetArrayItem(it, 0);
        if (!it) return TF_OK;
    }
    double v = cJSON_IsNumber(it) ? it->valuedouble : -2;
    if (v < 0 || v > (double)(1 << 24) || v != floor(v))
        return tf_errf(err, TF_ERR_FORMAT, "%s: key '%s' is not a token id (expected an integer 0..%d or a list)",
                       file, key, 1 << 24);
    *out = (int64_t)v;
    return TF_OK;
}

static tf_status parse_config(tf_hf_config *c, const char *file, const cJSON *root, const tf_logger *log,
                              tf_err *err) {
    if (!cJSON_IsObject(root)) return tf_errf(err, TF_ERR_FORMAT, "%s: expected a JSON object", file);
    const cJSON *archs = cJSON_GetObjectItemCaseSensitive(root, "architectures");
    if (archs && !cJSON_IsNull(archs) && !cJSON_IsArray(archs))
        return tf_errf(err, TF_ERR_FORMAT, "%s: key 'architectures' is %s (expected a list of class names such as "
                       "[\"LlamaForCausalLM\"])", file, cJSON_IsString(archs) ? "a string, not a list" : "not a list");
    const cJSON *a0 = cJSON_IsArray(archs) ? cJSON_GetArrayItem(archs, 0) : NULL;
    if (a0 && !cJSON_IsString(a0))
        return tf_errf(err, TF_ERR_FORMAT, "%s: architectures[0] is not a string (expected a class name such as "
                       "\"LlamaForCausalLM\")", file);
    const char *mt = NULL;
    bool has_mt;
    TF_TRY(tf_json_get_str(file, root, "model_type", &mt, &has_mt, err));
    if (cJSON_IsString(a0)) snprintf(c->arch, sizeof c->arch, "%s", a0->valuestring);
    else if (has_mt) snprintf(c->arch, sizeof c->arch, "%s", mt);
    else return tf_errf(err, TF_ERR_FORMAT, "%s: neither 'architectures' nor 'model_type' is given", file);
    static const struct { const char *name; tf_arch arch; } k_archs[] = {
        {"LlamaForCausalLM", TF_ARCH_LLAMA}, {"MistralForCausalLM", TF_ARCH_LLAMA}, {"Qwen2ForCausalLM", TF_ARCH_QWEN2},
        {"llama", TF_ARCH_LLAMA},            {"mistral", TF_ARCH_LLAMA},            {"qwen2", TF_ARCH_QWEN2},
    };
    size_t ia = 0, n_archs = sizeof k_archs / sizeof k_archs[0];
    while (ia < n_archs && strcmp(c->arch, k_archs[ia].name) != 0) ia++;
    if (ia == n_archs)
        return tf_errf(err, TF_ERR_UNSUPPORTED,
                       "%s: architecture '%s' is not supported (supported: LlamaForCausalLM, MistralForCausalLM, "
                       "Qwen2ForCausalLM)",
                       file, c->arch);
    c->gguf_arch = k_archs[ia].arch;
    const char *dt = NULL;
    bool has_dt;
    TF_TRY(tf_json_get_str(file, root, "torch_dtype", &dt, &has_dt, err));
    if (!has_dt) TF_TRY(tf_json_get_str(file, root, "dtype", &dt, &has_dt, err));
    if (has_dt) snprintf(c->torch_dtype, sizeof c->torch_dtype, "%s", dt);
    TF_TRY(tf_json_get_int(file, root, "vocab_size", 1, 1 << 24, &c->n_vocab, NULL, err));
    TF_TRY(tf_json_get_int(file, root, "hidden_size", 1, 1 << 16, &c->n_embd, NULL, err));
    TF_TRY(tf_json_get_int(file, root, "intermediate_size", 1, 1 << 20, &c->n_ff, NULL, err));
    TF_TRY(tf_json_get_int(file, root, "num_hidden_layers", 1, 1024, &c->n_layer, NULL, err));
    TF_TRY(tf_json_get_int(file, root, "num_attention_heads", 1, 1024, &c->n_head, NULL, err));
    bool found;
    c->n_head_kv = c->n_head;
    TF_TRY(tf_json_get_int(file, root, "num_key_value_heads", 1, 1024, &c->n_head_kv, &found, err));
    if (c->n_head % c->n_head_kv != 0)
        return tf_errf(err, TF_ERR_FORMAT,
                       "%s: num_attention_heads = %lld is not a multiple of num_key_value_heads = %lld", file,
                       (long long)c->n_head, (long long)c->n_head_kv);
    c->head_dim = 0;
    TF_TRY(tf_json_get_int(file, root, "head_dim", 2, 1024, &c->head_dim, &found, err));
    if (!found && c->n_embd % c->n_head != 0)
        return tf_errf(err, TF_ERR_FORMAT, "%s: hidden_size = %lld is not a multiple of num_attention_heads = %lld "
                       "(and no head_dim is given)", file, (long long)c->n_embd, (long long)c->n_head);
    int64_t hd = c->head_dim ? c->head_dim : c->n_embd / c->n_head;
    if (hd % 2 != 0 || hd < 2)
        return tf_errf(err, TF_ERR_FORMAT, "%s: head dimension %lld is odd (expected an even number)", file,
                       (long long)hd);
    c->n_ctx_train = 2048;
    TF_TRY(tf_json_get_int(file, root, "max_position_embeddings", 1, (int64_t)1 << 30, &c->n_ctx_train, &found, err));
    c->rms_eps = 1e-6;
    TF_TRY(tf_json_get_num(file, root, "rms_norm_eps", 1e-12, 0.1, &c->rms_eps, &found, err));
    c->rope_theta = 10000.0;
    TF_TRY(tf_json_get_num(file, root, "rope_theta", 1.0, ROPE_THETA_MAX, &c->rope_theta, &found, err));
    TF_TRY(tf_json_get_bool(file, root, "tie_word_embeddings", &c->tied, &c->tied_given, err));
    bool use_sw = false, has_use_sw = false;
    TF_TRY(tf_json_get_bool(file, root, "use_sliding_window", &use_sw, &has_use_sw, err));
    if (use_sw)
        return tf_errf(err, TF_ERR_UNSUPPORTED,
                       "%s: use_sliding_window = true is not supported (every layer attends to the whole context "
                       "here; expected false, as the published Qwen2 / Qwen2.5 checkpoints have)",
                       file);
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(root, "sliding_window");
    if (!has_use_sw && cJSON_IsNumber(sw) && sw->valuedouble > 0 && sw->valuedouble < (double)c->n_ctx_train)
        tf_logf(log, TF_LOG_WARN,
                "%s: sliding_window = %.0f is ignored: every token attends to the whole context (exact up to "
                "the window, a different model beyond it)", file, sw->valuedouble);
    c->bos = c->eos = -1;
    TF_TRY(get_token_id(file, root, "bos_token_id", &c->bos, err));
    TF_TRY(get_token_id(file, root, "eos_token_id", &c->eos, err));
    return load_rope_scaling(c, file, root, log, err);
}

tf_status tf_hf_config_load(tf_hf_config *c, const char *dir, const tf_logger *log, tf_err *err) {
    memset(c, 0, sizeof *c);
    char path[1100];
    snprintf(path, sizeof path, "%s/config.json", dir);
    cJSON *root = NULL;
    TF_TRY(tf_json_load(path, CONFIG_MAX_BYTES, &root, err));
    tf_status st = parse_config(c, path, root, log, err);
    cJSON_Delete(root);
    if (st != TF_OK) return st;
    /* generation_config.json, where present, has the ids generation uses */
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    struct stat sb;
    if (stat(path, &sb) != 0) return TF_OK;
    TF_TRY(tf_json_load(path, CONFIG_MAX_BYTES, &root, err));
    if (!cJSON_IsObject(root)) st = tf_errf(err, TF_ERR_FORMAT, "%s: expected a JSON object", path);
    if (st == TF_OK) st = get_token_id(path, root, "bos_token_id", &c->bos, err);
    if (st == TF_OK) st = get_token_id(path, root, "eos_token_id", &c->eos, err);
    cJSON_Delete(root);
    return st;
}


tf_status tf_hf_config_to_gguf(const tf_hf_config *c, const char *name, tf_gguf_writer *w, tf_err *err) {
    TF_TRY(tf_gguf_writer_set_str(w, "general.architecture", tf_arch_name(c->gguf_arch), err));
    TF_TRY(tf_gguf_writer_set_str(w, "general.name", name, err));
    TF_TRY(tf_arch_set_u32(w, c->gguf_arch, "vocab_size", (uint32_t)c->n_vocab, err));
    TF_TRY(tf_arch_set_u32(w, c->gguf_arch, "context_length", (uint32_t)c->n_ctx_train, err));
    TF_TRY(tf_arch_set_u32(w, c->gguf_arch, "embedding_length", (uint32_t)c->n_embd, err));
    TF_TRY(tf_arch_set_u32(w, c->gguf_arch, "block_count", (uint32_t)c->n_layer, err));
    TF_TRY(tf_arch_set_u32(w, c->gguf_arch, "feed_forward_length", (uint32_t)c->n_ff, err));
    TF_TRY(tf_arch_set_u32(w, c->gguf_arch, "attention.head_count", (uint32_t)c->n_head, err));
    TF_TRY(tf_arch_set_u32(w, c->gguf_arch, "attention.head_count_kv", (uint32_t)c->n_head_kv, err));
    int64_t hd = c->head_dim ? c->head_dim : c->n_embd / c->n_head;
    if (c->head_dim) {
        TF_TRY(tf_arch_set_u32(w, c->gguf_arch, "attention.key_length", (uint32_t)hd, err));
        TF_TRY(tf_arch_set_u32(w, c->gguf_arch, "attention.value_length", (uint32_t)hd, err));
    }
    TF_TRY(tf_arch_set_u32(w, c->gguf_arch, "rope.dimension_count", (uint32_t)hd, err));
    TF_TRY(tf_arch_set_f32(w, c->gguf_arch, "attention.layer_norm_rms_epsilon", (float)c->rms_eps, err));
    TF_TRY(tf_arch_set_f32(w, c->gguf_arch, "rope.freq_base", (float)c->rope_theta, err));
    switch (c->rope_scaling) {
    case TF_ROPE_SCALING_NONE:
    case TF_ROPE_SCALING_LLAMA3: break; /* llama3: the rope_freqs.weight tensor */
    case TF_ROPE_SCALING_LINEAR:
        TF_TRY(tf_arch_set_str(w, c->gguf_arch, "rope.scaling.type", "linear", err));
        TF_TRY(tf_arch_set_f32(w, c->gguf_arch, "rope.scaling.factor", (float)c->rope_factor, err));
        break;
    case TF_ROPE_SCALING_YARN:
        TF_TRY(tf_arch_set_str(w, c->gguf_arch, "rope.scaling.type", "yarn", err));
        TF_TRY(tf_arch_set_f32(w, c->gguf_arch, "rope.scaling.factor", (float)c->rope_factor, err));
        TF_TRY(tf_arch_set_u32(w, c->gguf_arch, "rope.scaling.original_context_length", (uint32_t)c->rope_orig_ctx,
                                      err));
        TF_TRY(tf_arch_set_f32(w, c->gguf_arch, "rope.scaling.yarn_beta_fast", (float)c->yarn_beta_fast, err));
        TF_TRY(tf_arch_set_f32(w, c->gguf_arch, "rope.scaling.yarn_beta_slow", (float)c->yarn_beta_slow, err));
        if (c->yarn_attn_factor != 1.0)
            TF_TRY(tf_arch_set_f32(w, c->gguf_arch, "rope.scaling.attn_factor", (float)c->yarn_attn_factor, err));
        break;
    }
    return TF_OK;
}
