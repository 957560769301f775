/*
 * fuzz_hf_config.c — libFuzzer harness for the Hugging Face translations:
 * config.json -> model hyper-parameters (src/model/hf_config.c, then
 * hf_load.c and the model loader) and tokenizer.json -> tokenizer
 * (src/tokenizer/hf_tokenizer.c, then the tokenizer builder).
 *
 * The first input byte (the mode) chooses what the rest is; the rest is cut
 * at its first NUL byte into a main file and an optional second file:
 *   mode bit 0 clear: config.json [NUL generation_config.json], written into a
 *     per-process directory under $TMPDIR (or /tmp) and read with
 *     tf_hf_config_load. An accepted config must translate to GGUF keys
 *     (tf_hf_config_to_gguf) that parse back; when its model is tiny (at most
 *     8 layers and FUZZ_MODEL_MAX elements in all) a model.safetensors of
 *     that shape is written beside it (dtype from torch_dtype; with mode bit 1
 *     also a fixed small tokenizer.json) and the directory must load with
 *     tf_model_load, giving the config's hyper-parameters.
 *   mode bit 0 set: tokenizer.json [NUL tokenizer_config.json], translated in
 *     memory (tf_hf_tokenizer_to_gguf_mem) with n_vocab_model = 4 * (mode >> 1)
 *     (0: the tokenizer's own size). On failure nothing may be left in the
 *     writer; on success the keys must parse back and build a tokenizer
 *     (tf_tokenizer_from_gguf) of the right size, which then tokenizes and
 *     detokenizes a few fixed texts (ids in range, streaming output valid
 *     UTF-8).
 * Failures must name the file. A broken promise is __builtin_trap(). With
 * TF_FUZZ_VERBOSE set it prints why each input was refused or what it loaded.
 *
 * Build and run: `make fuzz FUZZ_TARGETS=hf_config` (see the Makefile). With
 * -DTF_FUZZ_WRITE_SEEDS this file is a seed writer: `seeds_hf_config DIR`
 * writes configs in the forms published checkpoints use (Llama 2 / 3, YaRN,
 * Mistral, Qwen2, TinyLlama-sized) and SentencePiece-style and byte-level
 * tokenizer.json files, each with its mode byte.
 */
#include "core/log.h"
#include "format/gguf.h"
#include "format/gguf_write.h"
#include "model/hf.h"
#include "model/model.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/tokenizer.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FUZZ_MODEL_MAX ((int64_t)1 << 16) /* elements of the largest checkpoint written per input */

/* A byte-level tokenizer.json (6 tokens) put beside configs in mode 2. */
static const char k_tiny_bpe[] =
    "{\"added_tokens\": [{\"id\": 5, \"content\": \"<|end|>\", \"special\": true}],"
    " \"normalizer\": null,"
    " \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": true},"
    " \"post_processor\": {\"type\": \"ByteLevel\"},"
    " \"decoder\": {\"type\": \"ByteLevel\"},"
    " \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null,"
    "  \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2, \"\xc4\xa0\": 3, \"\xc4\xa0" "ab\": 4},"
    "  \"merges\": [\"a b\", [\"\xc4\xa0\", \"ab\"]]}}";

static int write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(p, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

#ifndef TF_FUZZ_WRITE_SEEDS

static volatile unsigned g_sink;
static char g_dir[256];
static bool g_verbose; /* TF_FUZZ_VERBOSE set: say why each input is refused (for checking seeds) */

static const char *const k_files[] = {"config.json", "generation_config.json", "tokenizer.json",
                                      "model.safetensors"};

static void path_of(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/%s", g_dir, name); }

static void put_file(const char *name, const void *p, size_t n) {
    char path[512];
    path_of(path, sizeof path, name);
    if (write_file(path, p, n) != 0) {
        fprintf(stderr, "fuzz_hf_config: cannot write %s\n", path);
        abort();
    }
}

static void drop_file(const char *name) {
    char path[512];
    path_of(path, sizeof path, name);
    unlink(path);
}

static void remove_dir(void) {
    for (size_t i = 0; i < sizeof k_files / sizeof k_files[0]; i++) drop_file(k_files[i]);
    rmdir(g_dir);
}

/* Log lines are read (so a bad format argument shows) and dropped. */
static void log_sink(void *ud, tf_log_level level, const char *msg) {
    (void)ud, (void)level;
    g_sink += (unsigned)strlen(msg);
}
static const tf_logger g_log = {.fn = log_sink, .min_level = TF_LOG_DEBUG};

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/tf_fuzz_hf_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("fuzz_hf_config: mkdtemp");
        exit(1);
    }
    atexit(remove_dir);
    g_verbose = getenv("TF_FUZZ_VERBOSE") != NULL;
    return 0;
}

/* ---- config.json ---- */

/* A growing text buffer (aborts when out of memory: not the code under test). */
typedef struct text {
    char *s;
    size_t n, cap;
} text;

static void addf(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void addf(text *t, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(t->s ? t->s + t->n : NULL, t->s ? t->cap - t->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) abort();
        if (t->s && t->n + (size_t)k < t->cap) {
            t->n += (size_t)k;
            return;
        }
        t->cap = (t->cap + (size_t)k + 1) * 2;
        if (!(t->s = realloc(t->s, t->cap))) abort();
    }
}

/* One tensor of the checkpoint being written: its header entry, data appended later. */
static void add_tensor(text *h, int64_t *offset, const char *dtype, size_t esz, const char *name, int64_t rows,
                       int64_t cols) {
    int64_t n = (rows ? rows : 1) * cols;
    if (rows) addf(h, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld,%lld],", h->n > 1 ? "," : "", name, dtype,
                   (long long)rows, (long long)cols);
    else addf(h, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld],", h->n > 1 ? "," : "", name, dtype, (long long)cols);
    addf(h, "\"data_offsets\":[%lld,%lld]}", (long long)*offset, (long long)(*offset + n * (int64_t)esz));
    *offset += n * (int64_t)esz;
}

/* Write model.safetensors with every tensor c asks for (shapes as hf_load.c
 * expects them); false when the model is larger than FUZZ_MODEL_MAX. */
static bool write_checkpoint(const tf_hf_config *c) {
    int64_t hd = c->head_dim ? c->head_dim : c->n_embd / c->n_head;
    int64_t q = c->n_head * hd, kv = c->n_head_kv * hd;
    bool qwen2 = c->gguf_arch == TF_ARCH_QWEN2, head = !(c->tied_given && c->tied);
    int64_t per_layer = 2 * c->n_embd + q * c->n_embd * 2 + kv * c->n_embd * 2 + 3 * c->n_ff * c->n_embd +
                        (qwen2 ? q + 2 * kv : 0);
    int64_t total = c->n_vocab * c->n_embd * (head ? 2 : 1) + c->n_embd + c->n_layer * per_layer;
    if (c->n_layer > 8 || total > FUZZ_MODEL_MAX) return false;
    const char *dtype = strcmp(c->torch_dtype, "bfloat16") == 0 ? "BF16"
                        : strcmp(c->torch_dtype, "float16") == 0 ? "F16" : "F32";
    size_t esz = dtype[0] == 'F' && dtype[1] == '3' ? 4 : 2;
    text h = {0};
    int64_t off = 0;
    addf(&h, "{");
    add_tensor(&h, &off, dtype, esz, "model.embed_tokens.weight", c->n_vocab, c->n_embd);
    if (head) add_tensor(&h, &off, dtype, esz, "lm_head.weight", c->n_vocab, c->n_embd);
    add_tensor(&h, &off, dtype, esz, "model.norm.weight", 0, c->n_embd);
    static const struct { const char *name; int rows, cols; bool qwen2; } k_layer[] = {
        /* 1: n_embd, 2: q, 3: kv, 4: n_ff; rows 0: a vector */
        {"input_layernorm.weight", 0, 1, false},   {"self_attn.q_proj.weight", 2, 1, false},
        {"self_attn.k_proj.weight", 3, 1, false},  {"self_attn.v_proj.weight", 3, 1, false},
        {"self_attn.o_proj.weight", 1, 2, false},  {"post_attention_layernorm.weight", 0, 1, false},
        {"mlp.gate_proj.weight", 4, 1, false},     {"mlp.up_proj.weight", 4, 1, false},
        {"mlp.down_proj.weight", 1, 4, false},     {"self_attn.q_proj.bias", 0, 2, true},
        {"self_attn.k_proj.bias", 0, 3, true},     {"self_attn.v_proj.bias", 0, 3, true},
    };
    const int64_t dims[] = {0, c->n_embd, q, kv, c->n_ff};
    for (int64_t il = 0; il < c->n_layer; il++)
        for (size_t k = 0; k < sizeof k_layer / sizeof k_layer[0]; k++) {
            if (k_layer[k].qwen2 && !qwen2) continue;
            char name[96];
            snprintf(name, sizeof name, "model.layers.%lld.%s", (long long)il, k_layer[k].name);
            add_tensor(&h, &off, dtype, esz, name, dims[k_layer[k].rows], dims[k_layer[k].cols]);
        }
    addf(&h, "}");
    while (h.n % 8) addf(&h, " ");
    size_t size = 8 + h.n + (size_t)off;
    uint8_t *b = malloc(size);
    if (!b) abort();
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)h.n >> (8 * i));
    memcpy(b + 8, h.s, h.n);
    for (size_t i = 8 + h.n; i < size; i++) b[i] = (uint8_t)(i * 41 % 61); /* small finite values */
    put_file("model.safetensors", b, size);
    free(b);
    free(h.s);
    return true;
}

static void fuzz_config(const uint8_t *cfg, size_t cfg_len, const uint8_t *gen, size_t gen_len, bool have_gen,
                        bool with_tokenizer) {
    put_file("config.json", cfg, cfg_len);
    if (have_gen) put_file("generation_config.json", gen, gen_len);
    else drop_file("generation_config.json");
    drop_file("model.safetensors");
    if (with_tokenizer) put_file("tokenizer.json", k_tiny_bpe, sizeof k_tiny_bpe - 1);
    else drop_file("tokenizer.json");

    tf_hf_config c;
    tf_err err = {0};
    tf_status st = tf_hf_config_load(&c, g_dir, &g_log, &err);
    if (st != TF_OK) {
        if (g_verbose) fprintf(stderr, "fuzz_hf_config: config refused: %s\n", err.msg);
        if (err.status != st || !strstr(err.msg, "config.json")) __builtin_trap();
        return;
    }
    /* what the validation promises */
    int64_t hd = c.head_dim ? c.head_dim : c.n_embd / c.n_head;
    if (c.n_vocab < 1 || c.n_embd < 1 || c.n_ff < 1 || c.n_layer < 1 || c.n_head < 1 || c.n_head_kv < 1)
        __builtin_trap();
    if (c.n_head % c.n_head_kv != 0 || hd < 2 || hd % 2 != 0) __builtin_trap();
    if (c.bos < -1 || c.eos < -1) __builtin_trap();

    tf_gguf_writer *w = tf_gguf_writer_new();
    uint8_t *buf = NULL;
    size_t size = 0;
    if (!w) abort();
    if (tf_hf_config_to_gguf(&c, "fuzz", w, &err) != TF_OK) __builtin_trap();
    if (tf_gguf_writer_write_mem(w, &buf, &size, &err) != TF_OK) __builtin_trap();
    tf_gguf_writer_free(w);
    tf_gguf g;
    if (tf_gguf_parse(&g, "fuzz", buf, size, &err) != TF_OK) __builtin_trap();
    tf_gguf_close(&g);
    free(buf);

    if (!write_checkpoint(&c)) {
        if (g_verbose) fprintf(stderr, "fuzz_hf_config: config accepted, model too large to write\n");
        return;
    }
    tf_model *m = NULL;
    st = tf_model_load(&m, g_dir, &g_log, &err);
    if (st != TF_OK) {
        if (g_verbose) fprintf(stderr, "fuzz_hf_config: accepted config does not load: %s\n", err.msg);
        if (err.status != st) __builtin_trap();
        return;
    }
    const tf_hparams *hp = &m->hp;
    if (hp->n_vocab != c.n_vocab || hp->n_embd != c.n_embd || hp->n_layer != c.n_layer || hp->n_ff != c.n_ff ||
        hp->n_head != c.n_head || hp->n_head_kv != c.n_head_kv || hp->head_dim != hd ||
        hp->n_ctx_train != c.n_ctx_train || hp->arch != c.gguf_arch)
        __builtin_trap();
    if (m->tok && tf_tokenizer_n_vocab(m->tok) != c.n_vocab) __builtin_trap();
    for (int32_t i = 0; i < hp->n_rot / 2; i++) g_sink += (unsigned)(m->rope_freq[i] > 0);
    if (g_verbose) fprintf(stderr, "fuzz_hf_config: config accepted, model loaded%s\n", m->tok ? " with tokenizer" : "");
    tf_model_free(m);
}

/* ---- tokenizer.json ---- */

static bool valid_utf8(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        size_t adv;
        if (tf_utf8_next((const unsigned char *)s + i, n - i, &adv) != TF_UTF8_VALID) return false;
        i += adv;
    }
    return true;
}

/* Tokenize s every way, check the ids, detokenize them back (bytes and streaming). */
static void exercise_text(const tf_tokenizer *tok, const char *s, size_t n) {
    int32_t n_vocab = tf_tokenizer_n_vocab(tok);
    for (int flags = 0; flags < 4; flags++) {
        tf_err err = {0};
        size_t need = 0, got = 0;
        tf_status st = tf_tokenize(tok, s, n, flags & 1, flags & 2, NULL, 0, &need, &err);
        if (st != TF_OK && st != TF_ERR_RANGE) __builtin_trap();
        int32_t *ids = malloc((need ? need : 1) * sizeof *ids);
        if (!ids) abort();
        if (tf_tokenize(tok, s, n, flags & 1, flags & 2, ids, need, &got, &err) != TF_OK || got != need)
            __builtin_trap();
        for (size_t i = 0; i < got; i++)
            if (ids[i] < 0 || ids[i] >= n_vocab) __builtin_trap();
        for (int rs = 0; rs < 2; rs++) {
            size_t blen = 0;
            st = tf_detokenize(tok, ids, got, rs, NULL, 0, &blen, &err);
            if (st != TF_OK && st != TF_ERR_RANGE) __builtin_trap();
            char *back = malloc(blen + 1);
            size_t blen2 = 0;
            if (!back) abort();
            if (tf_detokenize(tok, ids, got, rs, back, blen, &blen2, &err) != TF_OK || blen2 != blen)
                __builtin_trap();
            free(back);
        }
        tf_detok d;
        tf_detok_init(&d, tok);
        for (size_t i = 0; i < got; i++) {
            char out[64];
            int32_t k = tf_detok_push(&d, ids[i], out, (int32_t)sizeof out);
            if (k < 0 || k > (int32_t)sizeof out || !valid_utf8(out, (size_t)k)) __builtin_trap();
        }
        char out[16];
        int32_t k = tf_detok_flush(&d, out, (int32_t)sizeof out);
        if (k < 0 || !valid_utf8(out, (size_t)k)) __builtin_trap();
        free(ids);
    }
}

static void fuzz_tokenizer(const uint8_t *json, size_t json_len, const uint8_t *cfg, size_t cfg_len, bool have_cfg,
                           int64_t n_vocab_model) {
    tf_gguf_writer *w = tf_gguf_writer_new();
    if (!w) abort();
    tf_err err = {0};
    tf_status st = tf_hf_tokenizer_to_gguf_mem(w, (const char *)json, json_len, "tokenizer.json",
                                               have_cfg ? (const char *)cfg : NULL, cfg_len, "tokenizer_config.json",
                                               n_vocab_model, &err);
    if (st != TF_OK) {
        if (g_verbose) fprintf(stderr, "fuzz_hf_config: tokenizer refused: %s\n", err.msg);
        if (err.status != st || !strstr(err.msg, "tokenizer") || tf_gguf_writer_n_kv(w) != 0) __builtin_trap();
        tf_gguf_writer_free(w);
        return;
    }
    uint8_t *buf = NULL;
    size_t size = 0;
    if (tf_gguf_writer_write_mem(w, &buf, &size, &err) != TF_OK) __builtin_trap();
    tf_gguf_writer_free(w);
    tf_gguf g;
    if (tf_gguf_parse(&g, "fuzz", buf, size, &err) != TF_OK) __builtin_trap();
    tf_tokenizer *tok = NULL;
    st = tf_tokenizer_from_gguf(&tok, &g, &err);
    if (st != TF_OK) {
        fprintf(stderr, "fuzz_hf_config: an accepted tokenizer.json does not build: %s\n", err.msg);
        __builtin_trap();
    }
    int32_t n_vocab = tf_tokenizer_n_vocab(tok);
    if (g_verbose) fprintf(stderr, "fuzz_hf_config: tokenizer accepted: %s\n", tf_tokenizer_describe(tok));
    if (n_vocab_model > 0 && n_vocab != n_vocab_model) __builtin_trap();
    for (int32_t id = 0; id < n_vocab; id++) {
        char piece[8];
        int32_t k = tf_token_to_piece(tok, id, id & 1, piece, (int32_t)sizeof piece);
        const char *t = tf_token_text(tok, id);
        if (k < 0 || !t) __builtin_trap();
        g_sink += (unsigned)strlen(t);
    }
    static const char *const k_texts[] = {
        "Hello world, it's 2024! ab ab  ab\n\n\tab",
        "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\xa6\x99 \xe2\x96\x81x",
        "\xff\xfe bad \xc3 utf-8 \xed\xa0\x80",
        "<s></s><unk><|end|><|endoftext|><pad>a<|end|>b",
        "   leading and trailing   ",
    };
    for (size_t i = 0; i < sizeof k_texts / sizeof k_texts[0]; i++) exercise_text(tok, k_texts[i], strlen(k_texts[i]));
    exercise_text(tok, "", 0);
    exercise_text(tok, (const char *)json, json_len < 96 ? json_len : 96);
    tf_tokenizer_free(tok);
    tf_gguf_close(&g);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    uint8_t mode = data[0];
    const uint8_t *a = data + 1, *nul = memchr(a, 0, size - 1);
    size_t a_len = nul ? (size_t)(nul - a) : size - 1;
    const uint8_t *b = nul ? nul + 1 : NULL;
    size_t b_len = nul ? size - 1 - a_len - 1 : 0;
    if (mode & 1) fuzz_tokenizer(a, a_len, b, b_len, nul != NULL, (mode >> 1) ? 4 * (int64_t)(mode >> 1) : -1);
    else fuzz_config(a, a_len, b, b_len, nul != NULL, mode & 2);
    return 0;
}

#else

/* Write mode byte + a [+ NUL + b] as DIR/name. */
static int seed(const char *dir, const char *name, uint8_t mode, const char *a, const char *b) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t na = strlen(a), nb = b ? strlen(b) : 0;
    char *buf = malloc(na + nb + 2);
    if (!buf) return 1;
    buf[0] = (char)mode;
    memcpy(buf + 1, a, na);
    if (b) {
        buf[1 + na] = '\0';
        memcpy(buf + 2 + na, b, nb);
    }
    int rc = write_file(path, buf, 1 + na + (b ? 1 + nb : 0));
    free(buf);
    if (rc) fprintf(stderr, "cannot write %s\n", path);
    return rc ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    int rc = 0;
    /* configs: tiny ones (loaded as checkpoints) in every published form, and a real-sized one */
    rc |= seed(dir, "cfg_llama_tiny", 0,
               "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"bos_token_id\": 1,"
               " \"eos_token_id\": 2, \"hidden_act\": \"silu\", \"hidden_size\": 8, \"intermediate_size\": 12,"
               " \"max_position_embeddings\": 64, \"num_attention_heads\": 2, \"num_hidden_layers\": 2,"
               " \"num_key_value_heads\": 1, \"rms_norm_eps\": 1e-05, \"rope_scaling\": null,"
               " \"rope_theta\": 10000.0, \"tie_word_embeddings\": false, \"torch_dtype\": \"float32\","
               " \"vocab_size\": 16}",
               NULL);
    rc |= seed(dir, "cfg_llama_tok", 2,
               "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 8, \"intermediate_size\": 8,"
               " \"num_attention_heads\": 2, \"num_hidden_layers\": 1, \"vocab_size\": 6, \"bos_token_id\": 5,"
               " \"eos_token_id\": [5, 4], \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\"}",
               "{\"bos_token_id\": 1, \"eos_token_id\": [2, 3], \"do_sample\": true}");
    rc |= seed(dir, "cfg_llama3_rope", 0,
               "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 16, \"intermediate_size\": 16,"
               " \"num_attention_heads\": 2, \"num_key_value_heads\": 2, \"num_hidden_layers\": 1, \"vocab_size\": 8,"
               " \"max_position_embeddings\": 131072, \"rope_theta\": 500000.0, \"torch_dtype\": \"bfloat16\","
               " \"rope_scaling\": {\"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0,"
               " \"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"}}",
               NULL);
    rc |= seed(dir, "cfg_yarn", 0,
               "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 8, \"intermediate_size\": 4,"
               " \"num_attention_heads\": 1, \"num_hidden_layers\": 1, \"vocab_size\": 4, \"head_dim\": 4,"
               " \"max_position_embeddings\": 131072, \"torch_dtype\": \"float16\","
               " \"rope_scaling\": {\"factor\": 32.0, \"original_max_position_embeddings\": 4096, \"type\": \"yarn\","
               " \"beta_fast\": 32, \"beta_slow\": 1, \"attention_factor\": 1.2, \"finetuned\": true}}",
               NULL);
    rc |= seed(dir, "cfg_linear_dynamic", 0,
               "{\"architectures\": [\"MistralForCausalLM\"], \"hidden_size\": 8, \"intermediate_size\": 4,"
               " \"num_attention_heads\": 2, \"num_hidden_layers\": 1, \"vocab_size\": 4,"
               " \"sliding_window\": 16, \"max_position_embeddings\": 32,"
               " \"rope_scaling\": {\"type\": \"dynamic\", \"factor\": 2.0}}",
               NULL);
    rc |= seed(dir, "cfg_linear", 0,
               "{\"model_type\": \"llama\", \"hidden_size\": 4, \"intermediate_size\": 4,"
               " \"num_attention_heads\": 1, \"num_hidden_layers\": 1, \"vocab_size\": 4,"
               " \"rope_scaling\": {\"type\": \"linear\", \"factor\": 4}}",
               NULL);
    rc |= seed(dir, "cfg_qwen2", 2,
               "{\"architectures\": [\"Qwen2ForCausalLM\"], \"model_type\": \"qwen2\", \"attention_dropout\": 0.0,"
               " \"bos_token_id\": 0, \"eos_token_id\": 5, \"hidden_act\": \"silu\", \"hidden_size\": 8,"
               " \"intermediate_size\": 16, \"max_position_embeddings\": 32768, \"max_window_layers\": 2,"
               " \"num_attention_heads\": 4, \"num_hidden_layers\": 2, \"num_key_value_heads\": 2,"
               " \"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0, \"sliding_window\": 32768,"
               " \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\", \"use_cache\": true,"
               " \"use_sliding_window\": false, \"vocab_size\": 8}",
               NULL);
    rc |= seed(dir, "cfg_llama2_7b", 0,
               "{\"architectures\": [\"LlamaForCausalLM\"], \"bos_token_id\": 1, \"eos_token_id\": 2,"
               " \"hidden_act\": \"silu\", \"hidden_size\": 4096, \"initializer_range\": 0.02,"
               " \"intermediate_size\": 11008, \"max_position_embeddings\": 4096, \"model_type\": \"llama\","
               " \"num_attention_heads\": 32, \"num_hidden_layers\": 32, \"num_key_value_heads\": 32,"
               " \"pretraining_tp\": 1, \"rms_norm_eps\": 1e-05, \"rope_scaling\": null, \"rope_theta\": 10000.0,"
               " \"tie_word_embeddings\": false, \"torch_dtype\": \"float16\", \"transformers_version\": \"4.31.0\","
               " \"use_cache\": true, \"vocab_size\": 32000}",
               NULL);
    /* tokenizers: byte-level (GPT-2 style and a Split sequence), SentencePiece-style (normalizer and Metaspace) */
    rc |= seed(dir, "tok_bpe", 1, k_tiny_bpe, NULL);
    rc |= seed(dir, "tok_bpe_cfg", 1 | (4 << 1), k_tiny_bpe,
               "{\"add_bos_token\": false, \"add_eos_token\": true, \"bos_token\": {\"content\": \"<|end|>\"},"
               " \"eos_token\": \"<|end|>\", \"pad_token\": null, \"chat_template\": \"{{ messages }}\"}");
    rc |= seed(dir, "tok_bpe_split", 1,
               "{\"added_tokens\": [{\"id\": 6, \"content\": \"<|end|>\", \"special\": true},"
               " {\"id\": 7, \"content\": \"<tool>\", \"special\": false}],"
               " \"normalizer\": {\"type\": \"NFC\"},"
               " \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": ["
               "  {\"type\": \"Digits\", \"individual_digits\": true},"
               "  {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(?i:'s|'t|'re)| ?\\\\p{L}+| ?[^\\\\s\\\\p{L}]+|\\\\s+\"},"
               "   \"behavior\": \"Isolated\", \"invert\": false},"
               "  {\"type\": \"Split\", \"pattern\": {\"String\": \"x\"}, \"behavior\": \"Removed\", \"invert\": false},"
               "  {\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"trim_offsets\": true, \"use_regex\": false}]},"
               " \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<|end|>\","
               "  \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], \"pair\": [],"
               "  \"special_tokens\": {\"<|end|>\": {\"id\": \"<|end|>\", \"ids\": [6], \"tokens\": [\"<|end|>\"]}}},"
               " \"decoder\": {\"type\": \"ByteLevel\"},"
               " \"model\": {\"type\": \"BPE\", \"ignore_merges\": false, \"fuse_unk\": false, \"byte_fallback\": false,"
               "  \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2, \"\xc4\xa0\": 3, \"\xc4\xa0" "ab\": 4, \"1\": 5},"
               "  \"merges\": [[\"a\", \"b\"], [\"\xc4\xa0\", \"ab\"]]}}",
               NULL);
    rc |= seed(dir, "tok_spm", 1,
               "{\"added_tokens\": [{\"id\": 0, \"content\": \"<unk>\", \"special\": true},"
               " {\"id\": 1, \"content\": \"<s>\", \"special\": true}, {\"id\": 2, \"content\": \"</s>\", \"special\": true}],"
               " \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", \"prepend\": \"\xe2\x96\x81\"},"
               "  {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"\xe2\x96\x81\"}]},"
               " \"pre_tokenizer\": null,"
               " \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\"}},"
               "  {\"Sequence\": {\"id\": \"A\"}}], \"special_tokens\": {\"<s>\": {\"id\": \"<s>\", \"ids\": [1]}}},"
               " \"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": {\"String\":"
               "  \"\xe2\x96\x81\"}, \"content\": \" \"}, {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"},"
               "  {\"type\": \"Strip\", \"content\": \" \", \"start\": 1, \"stop\": 0}]},"
               " \"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"byte_fallback\": true,"
               "  \"vocab\": {\"<unk>\": 0, \"<s>\": 1, \"</s>\": 2, \"<0x41>\": 3, \"<0xC3>\": 4, \"\xe2\x96\x81\": 5,"
               "   \"a\": 6, \"b\": 7, \"\xe2\x96\x81" "a\": 8, \"ab\": 9, \"\xe2\x96\x81" "ab\": 10},"
               "  \"merges\": [\"a b\", \"\xe2\x96\x81 a\", \"\xe2\x96\x81 ab\", \"\xe2\x96\x81" "a b\"]}}",
               "{\"add_bos_token\": true, \"add_eos_token\": false, \"bos_token\": \"<s>\","
               " \"eos_token\": {\"content\": \"</s>\", \"lstrip\": false}, \"unk_token\": \"<unk>\"}");
    rc |= seed(dir, "tok_spm_metaspace", 1 | (8 << 1),
               "{\"added_tokens\": [{\"id\": 0, \"content\": \"<unk>\", \"special\": true}],"
               " \"normalizer\": null,"
               " \"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"\xe2\x96\x81\","
               "  \"prepend_scheme\": \"first\", \"split\": false},"
               " \"post_processor\": null,"
               " \"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": {\"String\":"
               "  \"\xe2\x96\x81\"}, \"content\": \" \"}, {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"}]},"
               " \"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"byte_fallback\": true,"
               "  \"vocab\": {\"<unk>\": 0, \"<0x20>\": 1, \"\xe2\x96\x81\": 2, \"x\": 3, \"\xe2\x96\x81x\": 4},"
               "  \"merges\": [\"\xe2\x96\x81 x\"]}}",
               NULL);
    return rc;
}

#endif
