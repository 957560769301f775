/*
 * gen.c — random-weight llama / qwen2 GGUF generator (see gen.h).
 *
 * The model is described as a list of tensor specs (name, shape, type, how
 * to draw values); each spec becomes a fill callback of the GGUF writer, so
 * nothing larger than one chunk of rows ever exists in memory. A chunk is
 * split across the thread pool; each row is drawn from its own RNG stream
 * (seed, tensor name, row index) and quantized with the reference kernels.
 */
#include "model/gen.h"

#include "backend/cpu/quant.h"
#include "core/mem.h"
#include "core/rng.h"
#include "core/threads.h"
#include "format/gguf.h"
#include "format/gguf_write.h"
#include "model/quantize.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- presets ---- */

static const tf_gen_preset k_presets[] = {
    {.name = "llama2-7b-128k",
     .desc = "Llama 2 7B extended to 128K with YaRN (NousResearch Yarn-Llama-2-7b-128k shape): 6.7B params",
     .n_embd = 4096, .n_layer = 32, .n_head = 32, .n_head_kv = 32, .n_ff = 11008, .n_ctx_train = 131072,
     .n_vocab = 32000, .rms_eps = 1e-5f, .rope_base = 10000.0f, .rope_scaling = TF_ROPE_SCALING_YARN,
     .rope_factor = 32.0f, .rope_orig_ctx = 4096, .tied_output = false},
    {.name = "llama-68m",
     .desc = "Llama-68M draft model shape (JackFram/llama-68m): 68M params",
     .n_embd = 768, .n_layer = 2, .n_head = 12, .n_head_kv = 12, .n_ff = 3072, .n_ctx_train = 2048,
     .n_vocab = 32000, .rms_eps = 1e-6f, .rope_base = 10000.0f, .rope_scaling = TF_ROPE_SCALING_NONE,
     .rope_factor = 1.0f, .rope_orig_ctx = 0, .tied_output = false},
    {.name = "tiny-24m",
     .desc = "small test model: n_embd 512, 4 layers, 8 heads / 2 KV heads (GQA), n_ff 768, tied output, "
             "32000 vocab: 23.7M params",
     .n_embd = 512, .n_layer = 4, .n_head = 8, .n_head_kv = 2, .n_ff = 768, .n_ctx_train = 2048,
     .n_vocab = 32000, .rms_eps = 1e-5f, .rope_base = 10000.0f, .rope_scaling = TF_ROPE_SCALING_NONE,
     .rope_factor = 1.0f, .rope_orig_ctx = 0, .tied_output = true},
    {.name = "qwen2.5-0.5b",
     .desc = "Qwen2.5-0.5B shape (qwen2: q/k/v biases, rotate-half RoPE): n_embd 896, 24 layers, 14 heads / 2 KV "
             "heads, n_ff 4864, tied output, 151936 vocab: 494M params",
     .arch = TF_ARCH_QWEN2, .n_embd = 896, .n_layer = 24, .n_head = 14, .n_head_kv = 2, .n_ff = 4864,
     .n_ctx_train = 32768, .n_vocab = 151936, .rms_eps = 1e-6f, .rope_base = 1000000.0f,
     .rope_scaling = TF_ROPE_SCALING_NONE, .rope_factor = 1.0f, .rope_orig_ctx = 0, .tied_output = true},
    {.name = "tinyllama-1.1b",
     .desc = "TinyLlama-1.1B shape: n_embd 2048, 22 layers, 32 heads / 4 KV heads, n_ff 5632, 32000 vocab: 1.1B params",
     .n_embd = 2048, .n_layer = 22, .n_head = 32, .n_head_kv = 4, .n_ff = 5632, .n_ctx_train = 2048,
     .n_vocab = 32000, .rms_eps = 1e-5f, .rope_base = 10000.0f, .rope_scaling = TF_ROPE_SCALING_NONE,
     .rope_factor = 1.0f, .rope_orig_ctx = 0, .tied_output = false},
    {.name = "llama3.2-1b",
     .desc = "Llama-3.2-1B shape: n_embd 2048, 16 layers, 32 heads / 8 KV heads, n_ff 8192, tied output, 128256 "
             "vocab (a padded byte vocabulary without --vocab-from), llama3 RoPE scaling x32: 1.24B params",
     .n_embd = 2048, .n_layer = 16, .n_head = 32, .n_head_kv = 8, .n_ff = 8192, .n_ctx_train = 131072,
     .n_vocab = 128256, .rms_eps = 1e-5f, .rope_base = 500000.0f, .rope_scaling = TF_ROPE_SCALING_LLAMA3,
     .rope_factor = 32.0f, .rope_orig_ctx = 8192, .tied_output = true},
    {.name = "llama3.1-8b",
     .desc = "Llama-3.1-8B shape: n_embd 4096, 32 layers, 32 heads / 8 KV heads, n_ff 14336, 128256 vocab (a padded "
             "byte vocabulary without --vocab-from), llama3 RoPE scaling x8: 8.03B params (--n-layer K for fewer)",
     .n_embd = 4096, .n_layer = 32, .n_head = 32, .n_head_kv = 8, .n_ff = 14336, .n_ctx_train = 131072,
     .n_vocab = 128256, .rms_eps = 1e-5f, .rope_base = 500000.0f, .rope_scaling = TF_ROPE_SCALING_LLAMA3,
     .rope_factor = 8.0f, .rope_orig_ctx = 8192, .tied_output = false},
};

const tf_gen_preset *tf_gen_presets(size_t *n) {
    *n = sizeof k_presets / sizeof k_presets[0];
    return k_presets;
}

const tf_gen_preset *tf_gen_preset_find(const char *name) {
    for (size_t i = 0; i < sizeof k_presets / sizeof k_presets[0]; i++)
        if (strcmp(k_presets[i].name, name) == 0) return &k_presets[i];
    return NULL;
}

void tf_gen_params_apply_preset(tf_gen_params *p, const tf_gen_preset *s) {
    p->arch = s->arch;
    p->n_embd = s->n_embd;
    p->n_layer = s->n_layer;
    p->n_head = s->n_head;
    p->n_head_kv = s->n_head_kv;
    p->n_ff = s->n_ff;
    p->n_ctx_train = s->n_ctx_train;
    p->n_vocab = s->n_vocab;
    p->rms_eps = s->rms_eps;
    p->rope_base = s->rope_base;
    p->rope_scaling = s->rope_scaling;
    p->rope_factor = s->rope_factor;
    p->rope_orig_ctx = s->rope_orig_ctx;
    p->tied_output = s->tied_output;
}

tf_gen_params tf_gen_params_default(void) {
    tf_gen_params p = {
        .rope_scaling = TF_ROPE_SCALING_NONE,
        .rope_factor = 1.0f,
        .rope_orig_ctx = 8192,
        .llama3_low_freq_factor = 1.0f,
        .llama3_high_freq_factor = 4.0f,
        .wtype = TF_DTYPE_F16,
        .seed = 42,
    };
    tf_gen_params_apply_preset(&p, tf_gen_preset_find("tiny-24m"));
    if (p.rope_orig_ctx == 0) p.rope_orig_ctx = 8192;
    return p;
}

#define BYTE_VOCAB 259 /* <unk> <s> </s> + 256 byte tokens */

static int64_t resolved_vocab(const tf_gen_params *p) { return p->n_vocab > 0 ? p->n_vocab : BYTE_VOCAB; }

uint64_t tf_gen_param_count(const tf_gen_params *p) {
    uint64_t e = (uint64_t)p->n_embd, hd = p->n_head > 0 ? e / (uint64_t)p->n_head : 0;
    uint64_t q = (uint64_t)p->n_head * hd, kv = (uint64_t)p->n_head_kv * hd, ff = (uint64_t)p->n_ff;
    uint64_t v = (uint64_t)resolved_vocab(p);
    uint64_t layer = 2 * e + e * q + 2 * e * kv + q * e + 3 * e * ff;
    if (p->arch == TF_ARCH_QWEN2) layer += q + 2 * kv; /* q/k/v biases */
    uint64_t n = v * e * (p->tied_output ? 1 : 2) + e + (uint64_t)p->n_layer * layer;
    if (p->rope_scaling == TF_ROPE_SCALING_LLAMA3) n += hd / 2;
    return n;
}

/* ---- validation ---- */

static tf_status check_params(const tf_gen_params *p, tf_err *err) {
#define REQ(cond, ...)                                                                                           \
    do {                                                                                                         \
        if (!(cond)) return tf_errf(err, TF_ERR_INVALID_ARG, "gen-model: " __VA_ARGS__);                         \
    } while (0)
    REQ(tf_arch_name(p->arch) != NULL, "arch = %d (expected %s)", (int)p->arch, tf_arch_list());
    REQ(p->n_embd >= 2, "n_embd = %d (expected >= 2)", p->n_embd);
    REQ(p->n_layer >= 1, "n_layer = %d (expected >= 1)", p->n_layer);
    REQ(p->n_head >= 1 && p->n_embd % p->n_head == 0, "n_head = %d must divide n_embd = %d", p->n_head, p->n_embd);
    REQ((p->n_embd / p->n_head) % 2 == 0, "head_dim = n_embd / n_head = %d (expected even)", p->n_embd / p->n_head);
    REQ(p->n_head_kv >= 1 && p->n_head % p->n_head_kv == 0, "n_head_kv = %d must divide n_head = %d", p->n_head_kv,
        p->n_head);
    REQ(p->n_ff >= 1, "n_ff = %d (expected >= 1)", p->n_ff);
    REQ(p->n_ctx_train >= 1, "n_ctx_train = %d (expected >= 1)", p->n_ctx_train);
    REQ(p->vocab_from || p->n_vocab == 0 || p->n_vocab >= BYTE_VOCAB,
        "n_vocab = %d (a byte vocabulary needs at least %d tokens; 0 = exactly %d)", p->n_vocab, BYTE_VOCAB,
        BYTE_VOCAB);
    REQ(p->rms_eps > 0 && p->rms_eps < 1, "rms_eps = %g (expected in (0, 1))", (double)p->rms_eps);
    REQ(p->rope_base > 1, "rope_base = %g (expected > 1)", (double)p->rope_base);
    REQ(p->rope_scaling >= TF_ROPE_SCALING_NONE && p->rope_scaling <= TF_ROPE_SCALING_LLAMA3,
        "rope_scaling = %d (expected none, linear, yarn or llama3)", (int)p->rope_scaling);
    if (p->rope_scaling != TF_ROPE_SCALING_NONE)
        REQ(p->rope_factor > 0 && isfinite(p->rope_factor), "rope_factor = %g (expected > 0)",
            (double)p->rope_factor);
    if (p->rope_scaling == TF_ROPE_SCALING_YARN || p->rope_scaling == TF_ROPE_SCALING_LLAMA3)
        REQ(p->rope_orig_ctx >= 1, "rope_orig_ctx = %d (expected >= 1 for yarn / llama3 scaling)",
            p->rope_orig_ctx);
    if (p->rope_scaling == TF_ROPE_SCALING_LLAMA3)
        REQ(p->llama3_low_freq_factor > 0 && p->llama3_high_freq_factor > p->llama3_low_freq_factor,
            "llama3 low/high frequency factors = %g / %g (expected 0 < low < high)",
            (double)p->llama3_low_freq_factor, (double)p->llama3_high_freq_factor);
    REQ(p->yarn_beta_fast >= 0 && p->yarn_beta_slow >= 0 && p->yarn_attn_factor >= 0,
        "yarn beta_fast / beta_slow / attn_factor must be >= 0 (0 = not written)");
    REQ(tf_gguf_file_type(p->wtype) >= 0, "weight type %s is not supported (expected one of:" TF_DTYPE_NAMES ")",
        tf_dtype_name(p->wtype));
    REQ(p->n_threads >= 0, "n_threads = %d (expected >= 0)", p->n_threads);
#undef REQ
    return TF_OK;
}

/* ---- tensor specs and row generation ---- */

/* UNIFORM: 2-D weights of the chosen type; BIAS: f32 vectors drawn like UNIFORM. */
typedef enum { DRAW_UNIFORM, DRAW_NORM, DRAW_ROPE_FREQS, DRAW_BIAS } draw_kind;

typedef struct gen_ctx gen_ctx;

typedef struct tspec {
    char name[TF_GGUF_NAME_MAX + 1];
    draw_kind kind;
    tf_dtype type;
    int64_t ne[2];
    float amp;      /* DRAW_UNIFORM, DRAW_BIAS: values in [-amp, amp) */
    uint64_t seed;  /* stream of this tensor */
    gen_ctx *ctx;
} tspec;

struct gen_ctx {
    const tf_gen_params *p;
    int32_t head_dim;
    tf_pool *pool;
    int n_threads;
    float **row;   /* [n_threads] f32 rows of max_ne0 */
    float *rope_freqs; /* [head_dim / 2] */
    /* current job */
    const tspec *job_t;
    const tf_gguf_tensor_desc *job_d;
    int64_t job_row0, job_n;
    uint8_t *job_dst;
};

static uint64_t name_hash(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

static void draw_row(const gen_ctx *c, const tspec *t, int64_t r, float *x) {
    int64_t n = t->ne[0];
    if (t->kind == DRAW_ROPE_FREQS) {
        memcpy(x, c->rope_freqs, (size_t)n * sizeof *x);
        return;
    }
    tf_rng rng;
    tf_rng_seed(&rng, t->seed ^ ((uint64_t)r * 0xd1b54a32d192ed03ull));
    if (t->kind == DRAW_NORM)
        for (int64_t i = 0; i < n; i++) x[i] = 0.9f + 0.2f * (float)tf_rng_uniform(&rng);
    else
        for (int64_t i = 0; i < n; i++) x[i] = t->amp * (float)(2.0 * tf_rng_uniform(&rng) - 1.0);
}

static void gen_rows(void *arg, int ith, int nth) {
    gen_ctx *c = arg;
    long lo, hi;
    tf_split_range((long)c->job_n, ith, nth, &lo, &hi);
    for (long r = lo; r < hi; r++) {
        draw_row(c, c->job_t, c->job_row0 + r, c->row[ith]);
        tf_ref_quantize_row(c->job_t->type, c->row[ith], c->job_dst + (uint64_t)r * c->job_d->row_size,
                            c->job_t->ne[0]);
    }
}

static tf_status fill_tensor(void *ud, const tf_gguf_tensor_desc *d, int64_t row0, int64_t n_rows, void *dst,
                             tf_err *err) {
    const tspec *t = ud;
    gen_ctx *c = t->ctx;
    c->job_t = t;
    c->job_d = d;
    c->job_row0 = row0;
    c->job_n = n_rows;
    c->job_dst = dst;
    if (n_rows == 1 || !c->pool) gen_rows(c, 0, 1);
    else tf_pool_run(c->pool, gen_rows, c);
    return TF_OK;
}

/* Append one spec; 2-D weights whose rows do not fit the block size fall back to F16. */
static void add_spec(tspec *specs, size_t *n, gen_ctx *c, const char *name, draw_kind kind, int64_t ne0, int64_t ne1,
                     float std) {
    tspec *t = &specs[(*n)++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->kind = kind;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->amp = std * sqrtf(3.0f);
    t->seed = name_hash(name) ^ tf_splitmix64(&(uint64_t){c->p->seed});
    t->ctx = c;
    t->type = TF_DTYPE_F32;
    if (kind == DRAW_UNIFORM) {
        t->type = c->p->wtype;
        if (ne0 % tf_dtype_block_size(c->p->wtype) != 0) {
            tf_logf(&c->p->log, TF_LOG_WARN,
                    "gen-model: %s: row length %lld is not a multiple of the %s block size %u; writing it as f16",
                    name, (long long)ne0, tf_dtype_name(c->p->wtype), tf_dtype_block_size(c->p->wtype));
            t->type = TF_DTYPE_F16;
        }
    }
}

static tspec *build_specs(gen_ctx *c, int64_t n_vocab, size_t *n_out) {
    const tf_gen_params *p = c->p;
    size_t cap = 4 + 12 * (size_t)p->n_layer;
    tspec *s = calloc(cap, sizeof *s);
    if (!s) return NULL;
    size_t n = 0;
    const int64_t e = p->n_embd, q = (int64_t)p->n_head * c->head_dim, kv = (int64_t)p->n_head_kv * c->head_dim;
    const int64_t ff = p->n_ff;
    if (p->rope_scaling == TF_ROPE_SCALING_LLAMA3)
        add_spec(s, &n, c, "rope_freqs.weight", DRAW_ROPE_FREQS, c->head_dim / 2, 1, 0);
    float emb_std = p->tied_output ? powf((float)e, -0.25f) : 1.0f;
    add_spec(s, &n, c, "token_embd.weight", DRAW_UNIFORM, e, n_vocab, emb_std);
    add_spec(s, &n, c, "output_norm.weight", DRAW_NORM, e, 1, 0);
    if (!p->tied_output) add_spec(s, &n, c, "output.weight", DRAW_UNIFORM, e, n_vocab, 1.0f / sqrtf((float)e));
    for (int32_t il = 0; il < p->n_layer; il++) {
        char nm[TF_GGUF_NAME_MAX + 1];
#define LAYER(suffix, kind, ne0, ne1)                                                                            \
    snprintf(nm, sizeof nm, "blk.%d.%s.weight", il, suffix);                                                     \
    add_spec(s, &n, c, nm, kind, ne0, ne1, 1.0f / sqrtf((float)(ne0)))
        LAYER("attn_norm", DRAW_NORM, e, 1);
        LAYER("attn_q", DRAW_UNIFORM, e, q);
        LAYER("attn_k", DRAW_UNIFORM, e, kv);
        LAYER("attn_v", DRAW_UNIFORM, e, kv);
        if (p->arch == TF_ARCH_QWEN2) {
            /* biases of std 0.5 against projections of std ~1: large enough
             * that a forward pass without them is clearly different */
            static const char *const bn[3] = {"attn_q", "attn_k", "attn_v"};
            for (int b = 0; b < 3; b++) {
                snprintf(nm, sizeof nm, "blk.%d.%s.bias", il, bn[b]);
                add_spec(s, &n, c, nm, DRAW_BIAS, b == 0 ? q : kv, 1, 0.5f);
            }
        }
        LAYER("attn_output", DRAW_UNIFORM, q, e);
        LAYER("ffn_norm", DRAW_NORM, e, 1);
        LAYER("ffn_gate", DRAW_UNIFORM, e, ff);
        LAYER("ffn_up", DRAW_UNIFORM, e, ff);
        LAYER("ffn_down", DRAW_UNIFORM, ff, e);
#undef LAYER
    }
    *n_out = n;
    return s;
}

/* ---- vocabulary ---- */

/* The i-th padding piece of the byte vocabulary: single printable ASCII
 * characters, "▁", "▁" + letter, letter pairs, "▁" + pair, triples,
 * "▁" + triple, then "<pad_N>". All distinct, none equal to a special or
 * byte token. */
static void pad_piece(int64_t i, char *buf, size_t cap) {
    static const char sp[] = "\xe2\x96\x81"; /* U+2581, SentencePiece's space */
    if (i < 94) { snprintf(buf, cap, "%c", (char)(0x21 + i)); return; }
    i -= 94;
    if (i < 1) { snprintf(buf, cap, "%s", sp); return; }
    i -= 1;
    if (i < 26) { snprintf(buf, cap, "%s%c", sp, (char)('a' + i)); return; }
    i -= 26;
    static const struct { int len, with_sp; int64_t count; } groups[] = {
        {2, 0, 26 * 26}, {2, 1, 26 * 26}, {3, 0, 26 * 26 * 26}, {3, 1, 26 * 26 * 26}};
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
        if (i < groups[g].count) {
            char w[4] = {0};
            int64_t k = i;
            for (int j = groups[g].len - 1; j >= 0; j--, k /= 26) w[j] = (char)('a' + k % 26);
            snprintf(buf, cap, "%s%s", groups[g].with_sp ? sp : "", w);
            return;
        }
        i -= groups[g].count;
    }
    snprintf(buf, cap, "<pad_%lld>", (long long)i);
}

static tf_status add_byte_vocab(tf_gguf_writer *w, int64_t n_vocab, tf_err *err) {
    char **toks = calloc((size_t)n_vocab, sizeof *toks);
    float *scores = calloc((size_t)n_vocab, sizeof *scores);
    int32_t *types = calloc((size_t)n_vocab, sizeof *types);
    tf_status st = TF_OK;
    if (!toks || !scores || !types) st = tf_errf(err, TF_ERR_NOMEM, "gen-model: out of memory for the vocabulary");
    for (int64_t i = 0; i < n_vocab && st == TF_OK; i++) {
        char piece[32];
        if (i == 0) snprintf(piece, sizeof piece, "<unk>");
        else if (i == 1) snprintf(piece, sizeof piece, "<s>");
        else if (i == 2) snprintf(piece, sizeof piece, "</s>");
        else if (i < BYTE_VOCAB) snprintf(piece, sizeof piece, "<0x%02X>", (unsigned)(i - 3));
        else pad_piece(i - BYTE_VOCAB, piece, sizeof piece);
        types[i] = i == 0 ? 2 : i < 3 ? 3 : i < BYTE_VOCAB ? 6 : 1;
        scores[i] = i < BYTE_VOCAB ? 0.0f : -(float)(i - BYTE_VOCAB + 1);
        toks[i] = strdup(piece);
        if (!toks[i]) st = tf_errf(err, TF_ERR_NOMEM, "gen-model: out of memory for the vocabulary");
    }
    if (st == TF_OK) st = tf_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama", err);
    if (st == TF_OK)
        st = tf_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)toks, (uint64_t)n_vocab, err);
    if (st == TF_OK)
        st = tf_gguf_writer_set_arr(w, "tokenizer.ggml.scores", TF_GGUF_FLOAT32, scores, (uint64_t)n_vocab, err);
    if (st == TF_OK)
        st = tf_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", TF_GGUF_INT32, types, (uint64_t)n_vocab, err);
    if (st == TF_OK) st = tf_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0, err);
    if (st == TF_OK) st = tf_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1, err);
    if (st == TF_OK) st = tf_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2, err);
    if (st == TF_OK) st = tf_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true, err);
    if (st == TF_OK) st = tf_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", false, err);
    if (toks)
        for (int64_t i = 0; i < n_vocab; i++) free(toks[i]);
    free(toks);
    free(scores);
    free(types);
    return st;
}

/* Copy every tokenizer.* key of `path`; *n_vocab = its token count. */
static tf_status copy_vocab(tf_gguf_writer *w, const char *path, int64_t *n_vocab, tf_err *err) {
    tf_gguf g;
    TF_TRY(tf_gguf_open(&g, path, err));
    const tf_gguf_kv *toks;
    tf_status st = tf_gguf_get_arr(&g, "tokenizer.ggml.tokens", TF_GGUF_STRING, &toks, NULL, err);
    if (st == TF_OK && (toks->arr_n == 0 || toks->arr_n > INT32_MAX))
        st = tf_errf(err, TF_ERR_FORMAT, "%s: tokenizer.ggml.tokens has %llu entries (expected 1..%d)", path,
                     (unsigned long long)toks->arr_n, INT32_MAX);
    if (st == TF_OK) *n_vocab = (int64_t)toks->arr_n;
    for (uint64_t i = 0; i < g.n_kv && st == TF_OK; i++)
        if (g.kv[i].key.len >= 10 && memcmp(g.kv[i].key.data, "tokenizer.", 10) == 0)
            st = tf_gguf_writer_copy_kv(w, &g.kv[i], err);
    tf_gguf_close(&g);
    return st;
}

/* ---- metadata ---- */


static tf_status add_hparams(tf_gguf_writer *w, const tf_gen_params *p, int32_t head_dim, int64_t n_vocab,
                             tf_err *err) {
    TF_TRY(tf_gguf_writer_set_str(w, "general.architecture", tf_arch_name(p->arch), err));
    TF_TRY(tf_gguf_writer_set_str(w, "general.name", p->name ? p->name : "triforce-gen", err));
    TF_TRY(tf_gguf_writer_set_u32(w, "general.file_type", (uint32_t)tf_gguf_file_type(p->wtype), err));
    if (tf_dtype_block_size(p->wtype) > 1) TF_TRY(tf_gguf_writer_set_u32(w, "general.quantization_version", 2, err));
    TF_TRY(tf_arch_set_u32(w, p->arch, "vocab_size", (uint32_t)n_vocab, err));
    TF_TRY(tf_arch_set_u32(w, p->arch, "context_length", (uint32_t)p->n_ctx_train, err));
    TF_TRY(tf_arch_set_u32(w, p->arch, "embedding_length", (uint32_t)p->n_embd, err));
    TF_TRY(tf_arch_set_u32(w, p->arch, "block_count", (uint32_t)p->n_layer, err));
    TF_TRY(tf_arch_set_u32(w, p->arch, "feed_forward_length", (uint32_t)p->n_ff, err));
    TF_TRY(tf_arch_set_u32(w, p->arch, "attention.head_count", (uint32_t)p->n_head, err));
    TF_TRY(tf_arch_set_u32(w, p->arch, "attention.head_count_kv", (uint32_t)p->n_head_kv, err));
    TF_TRY(tf_arch_set_f32(w, p->arch, "attention.layer_norm_rms_epsilon", p->rms_eps, err));
    TF_TRY(tf_arch_set_u32(w, p->arch, "rope.dimension_count", (uint32_t)head_dim, err));
    TF_TRY(tf_arch_set_f32(w, p->arch, "rope.freq_base", p->rope_base, err));
    if (p->rope_scaling == TF_ROPE_SCALING_LINEAR || p->rope_scaling == TF_ROPE_SCALING_YARN) {
        bool yarn = p->rope_scaling == TF_ROPE_SCALING_YARN;
        TF_TRY(tf_arch_set_str(w, p->arch, "rope.scaling.type", yarn ? "yarn" : "linear", err));
        TF_TRY(tf_arch_set_f32(w, p->arch, "rope.scaling.factor", p->rope_factor, err));
        if (yarn) {
            TF_TRY(tf_arch_set_u32(w, p->arch, "rope.scaling.original_context_length",
                                          (uint32_t)p->rope_orig_ctx, err));
            if (p->yarn_beta_fast > 0)
                TF_TRY(tf_arch_set_f32(w, p->arch, "rope.scaling.yarn_beta_fast", p->yarn_beta_fast, err));
            if (p->yarn_beta_slow > 0)
                TF_TRY(tf_arch_set_f32(w, p->arch, "rope.scaling.yarn_beta_slow", p->yarn_beta_slow, err));
            if (p->yarn_attn_factor > 0)
                TF_TRY(tf_arch_set_f32(w, p->arch, "rope.scaling.attn_factor", p->yarn_attn_factor, err));
        }
    }
    return TF_OK;
}

static const char *scaling_name(tf_rope_scaling s) {
    switch (s) {
    case TF_ROPE_SCALING_LINEAR: return "linear";
    case TF_ROPE_SCALING_YARN: return "yarn";
    case TF_ROPE_SCALING_LLAMA3: return "llama3";
    default: return "none";
    }
}

/* ---- driver ---- */

static void free_ctx(gen_ctx *c) {
    if (c->row)
        for (int i = 0; i < c->n_threads; i++) tf_free(c->row[i]);
    free(c->row);
    free(c->rope_freqs);
    if (c->pool) tf_pool_free(c->pool);
}

static tf_status init_ctx(gen_ctx *c, const tf_gen_params *p, tf_err *err) {
    memset(c, 0, sizeof *c);
    c->p = p;
    c->head_dim = p->n_embd / p->n_head;
    c->n_threads = p->n_threads > 0 ? p->n_threads : tf_cpu_count();
    int64_t max_ne0 = p->n_embd;
    if (p->n_ff > max_ne0) max_ne0 = p->n_ff;
    if ((int64_t)p->n_head * c->head_dim > max_ne0) max_ne0 = (int64_t)p->n_head * c->head_dim;
    c->row = calloc((size_t)c->n_threads, sizeof *c->row);
    c->rope_freqs = malloc((size_t)(c->head_dim / 2) * sizeof *c->rope_freqs);
    if (!c->row || !c->rope_freqs) return tf_errf(err, TF_ERR_NOMEM, "gen-model: out of memory");
    for (int i = 0; i < c->n_threads; i++)
        if (!(c->row[i] = tf_alloc((size_t)max_ne0 * sizeof(float))))
            return tf_errf(err, TF_ERR_NOMEM, "gen-model: out of memory");
    if (p->rope_scaling == TF_ROPE_SCALING_LLAMA3)
        tf_rope_llama3_factors(c->rope_freqs, c->head_dim, p->rope_base, p->rope_factor,
                                   p->llama3_low_freq_factor, p->llama3_high_freq_factor, p->rope_orig_ctx);
    if (c->n_threads > 1) TF_TRY(tf_pool_create(&c->pool, c->n_threads, err));
    return TF_OK;
}

tf_status tf_gen_model(const tf_gen_params *p, const char *out_path, tf_err *err) {
    TF_TRY(check_params(p, err));
    gen_ctx ctx;
    tf_gguf_writer *w = tf_gguf_writer_new();
    tspec *specs = NULL;
    tf_status st = w ? init_ctx(&ctx, p, err) : tf_errf(err, TF_ERR_NOMEM, "gen-model: out of memory");
    int64_t n_vocab = resolved_vocab(p);
    if (st == TF_OK && p->vocab_from) {
        st = copy_vocab(w, p->vocab_from, &n_vocab, err);
        if (st == TF_OK && p->n_vocab > 0 && p->n_vocab != n_vocab)
            tf_logf(&p->log, TF_LOG_INFO, "gen-model: n_vocab %d replaced by the %lld tokens of %s", p->n_vocab,
                    (long long)n_vocab, p->vocab_from);
    } else if (st == TF_OK) {
        st = add_byte_vocab(w, n_vocab, err);
    }
    if (st == TF_OK) st = add_hparams(w, p, ctx.head_dim, n_vocab, err);
    size_t n_specs = 0;
    if (st == TF_OK) {
        specs = build_specs(&ctx, n_vocab, &n_specs);
        if (!specs) st = tf_errf(err, TF_ERR_NOMEM, "gen-model: out of memory");
    }
    for (size_t i = 0; i < n_specs && st == TF_OK; i++) {
        const tspec *t = &specs[i];
        uint32_t nd = t->ne[1] > 1 || t->kind == DRAW_UNIFORM ? 2 : 1;
        st = tf_gguf_writer_add_tensor_fill(w, t->name, t->type, nd, t->ne, fill_tensor, &specs[i], err);
    }
    if (st == TF_OK) {
        tf_gen_params q = *p;
        q.n_vocab = (int32_t)n_vocab;
        tf_logf(&p->log, TF_LOG_INFO,
                "gen-model: %s: %s, n_embd %d, n_layer %d, n_head %d, n_head_kv %d, head_dim %d, n_ff %d, n_vocab %lld "
                "(%s), n_ctx_train %d, rope base %g scaling %s (factor %g, orig ctx %d), rms_eps %g, %s output, "
                "%s weights, seed %llu: %.1fM params, %.1f MB",
                out_path, tf_arch_name(p->arch), p->n_embd, p->n_layer, p->n_head, p->n_head_kv, ctx.head_dim,
                p->n_ff, (long long)n_vocab,
                p->vocab_from ? p->vocab_from : "byte vocabulary", p->n_ctx_train, (double)p->rope_base,
                scaling_name(p->rope_scaling), (double)p->rope_factor, p->rope_orig_ctx, (double)p->rms_eps,
                p->tied_output ? "tied" : "untied", tf_dtype_name(p->wtype), (unsigned long long)p->seed,
                (double)tf_gen_param_count(&q) / 1e6, (double)tf_gguf_writer_file_size(w) / 1e6);
        st = tf_gguf_writer_write_file(w, out_path, p->progress, p->progress_ud, err);
    }
    free(specs);
    if (w) free_ctx(&ctx);
    tf_gguf_writer_free(w);
    return st;
}
