/*
 * triforce.h — public C API of libtriforce.
 *
 * Opaque handles (tf_model, tf_context, tf_sampler), parameter structs with
 * *_default_params() constructors, init/free pairs, and status codes. Every
 * fallible call returns a tf_status; the human-readable message of the last
 * failure is available from the handle involved (or from a caller-provided
 * buffer where no handle exists yet). The library never exits, never writes
 * to stdout and never reads the environment.
 *
 * Caller-provided buffers with a capacity are never written past it:
 *   - errbuf/errbuf_size: the message, cut to errbuf_size - 1 bytes and always
 *     NUL-terminated (nothing is written when errbuf is NULL or the size 0);
 *   - tf_model_tokenize, tf_model_token_to_piece and tf_decoder_step say
 *     below what they return when the result does not fit.
 *
 * Every function declared here, and nothing else, is exported from
 * libtriforce.so (docs/LIBRARY.md: installing, linking, the ABI promise).
 */
#ifndef TRIFORCE_H
#define TRIFORCE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

/* The version of this header. MAJOR changes with every incompatible change
 * of the ABI (and is the number in the shared library's SONAME,
 * libtriforce.so.MAJOR), MINOR when functions are added, PATCH for fixes.
 * TF_VERSION_STRING is "MAJOR.MINOR.PATCH". */
#define TF_VERSION_MAJOR 3
#define TF_VERSION_MINOR 0
#define TF_VERSION_PATCH 4
#define TF_VERSION_STRING "3.0.4"

/* Marks the functions of the public API: the library is compiled with
 * -fvisibility=hidden, so these are the only symbols libtriforce.so exports. */
#if defined(__GNUC__) || defined(__clang__)
#define TF_API __attribute__((visibility("default")))
#else
#define TF_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the library that is running, TF_VERSION_STRING as it was
 * when the library was built (compare it with TF_VERSION_STRING to detect a
 * program running against a library other than the one it was compiled
 * with). Never NULL; a static string. */
TF_API const char *tf_version(void);

/* Status codes. Anything user input can cause maps to one of these. */
typedef enum tf_status {
    TF_OK = 0,
    TF_ERR_IO = 1,          /* file cannot be opened/read/mapped */
    TF_ERR_FORMAT = 2,      /* malformed or corrupt file content */
    TF_ERR_UNSUPPORTED = 3, /* well-formed but not supported (type, architecture) */
    TF_ERR_INVALID_ARG = 4, /* bad parameter value from the caller */
    TF_ERR_NOMEM = 5,       /* allocation failed */
    TF_ERR_RANGE = 6,       /* size/position beyond a limit (e.g. context full) */
    TF_ERR_CANCELLED = 7,   /* a progress callback asked to stop */
    TF_ERR_INTERNAL = 8,    /* broken invariant; a bug */
} tf_status;

/* Short name of a status ("ok", "io error", ...). Never NULL. */
TF_API const char *tf_status_str(tf_status st);

/* Log levels and sink. The sink receives one complete line (no trailing \n). */
typedef enum tf_log_level {
    TF_LOG_DEBUG = 0,
    TF_LOG_INFO = 1,
    TF_LOG_WARN = 2,
    TF_LOG_ERROR = 3,
} tf_log_level;

typedef void (*tf_log_fn)(void *user_data, tf_log_level level, const char *msg);

/* Progress callback: done/total units of work; return false to cancel
 * (the operation then fails with TF_ERR_CANCELLED and leaves state valid). */
typedef bool (*tf_progress_fn)(void *user_data, uint64_t done, uint64_t total);


/* ------------------------------------------------------------------------ */
/* Models                                                                   */

typedef struct tf_model tf_model;     /* read-only once loaded; share freely */
typedef struct tf_context tf_context; /* one sequence: KV cache + scratch */
typedef struct tf_sampler tf_sampler; /* distribution transform + RNG */

typedef struct tf_model_params {
    tf_log_fn log_fn;      /* NULL: silent */
    void *log_user_data;
    tf_log_level log_level;
    bool vocab_only;       /* load only the tokenizer (vocab-only GGUF files) */
    /* Loading progress in bytes of weights read into memory (the file is
     * mapped; pages are read ahead so the first tokens do not stall on page
     * faults). Return false to cancel: the load fails with TF_ERR_CANCELLED.
     * NULL: pages are left to be faulted in on first use. */
    tf_progress_fn progress;
    void *progress_user_data;
} tf_model_params;

TF_API tf_model_params tf_model_default_params(void);

/* Load a model: a GGUF file (memory-mapped) or a Hugging Face checkpoint
 * directory (config.json, model.safetensors or its sharded index,
 * tokenizer.json). On failure *out is NULL and, if errbuf is given, it
 * receives a message naming the file, field and expectation. */
TF_API tf_status tf_model_load_file(tf_model **out, const char *path, const tf_model_params *params, char *errbuf,
                                    size_t errbuf_size);
TF_API void tf_model_close(tf_model *model);

/* Extend a loaded model's context with RoPE scaling: kind "linear" or "yarn"
 * (YaRN with its usual defaults: beta 32 / 1, attention factor 0.1 ln(factor)
 * + 1), factor in (1, 64]. The trained context becomes the original one, and
 * the model's context (tf_model_info.n_ctx_train) factor times it. For a model
 * whose RoPE is not scaled yet, before any context, decoder or layer view is
 * made from it; TF_ERR_INVALID_ARG otherwise, with the reason in errbuf. */
TF_API tf_status tf_model_extend_context(tf_model *model, const char *kind, float factor, char *errbuf,
                                         size_t errbuf_size);

/* A model that runs only the first n_layer layers of `model`, then its output
 * norm and head: a draft that needs no second model (Draft & Verify style
 * self-speculation). It shares every weight and the tokenizer of `model`,
 * which must outlive it; close it with tf_model_close. n_layer must be in
 * 1..layers of model - 1 (TF_ERR_INVALID_ARG otherwise). */
TF_API tf_status tf_model_layer_view(tf_model **out, const tf_model *model, int32_t n_layer, char *errbuf,
                                     size_t errbuf_size);

typedef struct tf_model_info {
    const char *name;       /* general.name or "" */
    const char *arch;       /* "llama" or "qwen2" */
    int32_t n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_rot, n_ctx_train;
    float rms_eps, rope_base;
    const char *rope_scaling; /* "none", "linear", "yarn", "llama3" */
    float rope_factor;
    int32_t rope_orig_ctx;
    bool rope_neox;         /* RoPE rotates pairs (i, i + n_rot/2) of a head (qwen2), else (2i, 2i+1) */
    bool qkv_bias;          /* the query/key/value projections have biases (qwen2) */
    bool tied_output;
    uint64_t n_params;
    uint64_t weight_bytes;
    bool has_tokenizer;
    const char *tokenizer;  /* description, or "" */
} tf_model_info;

TF_API void tf_model_get_info(const tf_model *model, tf_model_info *info);
typedef struct tf_tensor_info {
    const char *name;
    const char *type; /* "f32", "q4_k", ... */
    int n_dims;
    int64_t ne[4];    /* ne[0] is the row length */
    uint64_t bytes;
} tf_tensor_info;

TF_API int64_t tf_model_n_tensors(const tf_model *model);
/* Describe tensor i (0 <= i < n_tensors); false if out of range. */
TF_API bool tf_model_tensor(const tf_model *model, int64_t i, tf_tensor_info *info);

/* KV-cache bytes per token for an f32 (elem 4) or f16 (elem 2) cache. */
TF_API uint64_t tf_model_kv_bytes_per_token(const tf_model *model, int elem_size);

/* ------------------------------------------------------------------------ */
/* Tokens                                                                   */

TF_API int32_t tf_model_bos(const tf_model *model); /* -1 if none */
TF_API int32_t tf_model_eos(const tf_model *model); /* -1 if none */
TF_API bool tf_model_is_eog(const tf_model *model, int32_t token);

/* Tokenize len bytes of text (need not be NUL-terminated). add_special adds
 * BOS/EOS as the model's metadata says; parse_special recognises control
 * tokens written in the text. Writes at most cap ids to out and sets *n_out
 * to the full count. When that exceeds cap the call returns TF_ERR_RANGE, out
 * holds the first cap ids and nothing beyond them is written, so a caller can
 * allocate *n_out ids and call again. On any other failure *n_out is 0:
 * TF_ERR_RANGE also for a text over 1 GiB (2^30 bytes), TF_ERR_INVALID_ARG
 * for a NULL text with len > 0 or a NULL out with cap > 0,
 * TF_ERR_UNSUPPORTED without a tokenizer. */
TF_API tf_status tf_model_tokenize(const tf_model *model, const char *text, size_t len, bool add_special,
                                   bool parse_special, int32_t *out, size_t cap, size_t *n_out);
/* The bytes one token stands for when detokenized (SPM's "\xe2\x96\x81" as a
 * space, byte tokens as their byte, byte-level BPE symbols as bytes; control
 * tokens give nothing unless render_special, then their text). Not
 * NUL-terminated, and a piece may be part of a UTF-8 sequence.
 * Returns the piece's full length in bytes and writes min(length, cap) of
 * them into buf: when the return value exceeds cap, buf holds the first cap
 * bytes, nothing beyond them is written, and a buffer of the returned size
 * gets the whole piece. cap <= 0 (buf may then be NULL) writes nothing and
 * returns the length. -1 if token is not in 0..n_vocab-1 or the model has no
 * tokenizer. */
TF_API int32_t tf_model_token_to_piece(const tf_model *model, int32_t token, bool render_special, char *buf,
                                       int32_t cap);

/* A streaming detokenizer (since 2.3.0): token ids in, text out that is
 * always whole UTF-8 characters. The bytes of a character that a token leaves
 * incomplete are held until a later token completes it; ill-formed bytes
 * become U+FFFD; control tokens add nothing. continuation false: the ids start
 * a text, so the space SentencePiece vocabularies put before its first word
 * (and again after a BOS) is dropped, as reference implementations do; true:
 * they continue one (a generation after its prompt), so nothing is dropped.
 * TF_ERR_UNSUPPORTED for a model without a tokenizer, TF_ERR_NOMEM, and
 * TF_ERR_INVALID_ARG for NULL arguments; *out is NULL on failure. */
typedef struct tf_detokenizer tf_detokenizer;
TF_API tf_status tf_detokenizer_init(tf_detokenizer **out, const tf_model *model, bool continuation);
/* The text token completes, into buf: TF_OK with *n_out bytes written (0 when
 * the token only starts a character, or is a control token). TF_ERR_RANGE
 * when they do not fit in cap: *n_out is the size needed, nothing is written
 * and nothing consumed, so the same call with a buffer that large succeeds
 * (tf_detokenizer_max_bytes is always enough). TF_ERR_INVALID_ARG for an id
 * outside 0..n_vocab-1 or NULL arguments (nothing consumed, *n_out 0). */
TF_API tf_status tf_detokenizer_push(tf_detokenizer *d, int32_t token, char *buf, size_t cap, size_t *n_out);
/* The end of the stream: a character still incomplete, as U+FFFD (3 bytes);
 * the same contract as push. The detokenizer then starts afresh as a
 * continuation. */
TF_API tf_status tf_detokenizer_flush(tf_detokenizer *d, char *buf, size_t cap, size_t *n_out);
/* The most bytes one push or flush can write for this vocabulary. */
TF_API size_t tf_detokenizer_max_bytes(const tf_detokenizer *d);
TF_API void tf_detokenizer_free(tf_detokenizer *d);

/* One user turn in the model's chat format (GGUF tokenizer.chat_template),
 * ending with the assistant's turn opened, as the template renders
 * [system?, user] with add_generation_prompt. The template's family is
 * recognised by its markers: chatml, llama3, llama2, mistral, zephyr,
 * deepseek (DeepSeek LLM and V2 chat), deepseek-coder, deepseek3 (DeepSeek
 * V3, V2.5, Coder-V2; the template itself is not interpreted). system NULL:
 * the template's default system message if it has one (chatml,
 * deepseek-coder), else none. Tokenize the result with
 * parse_special. *out is malloc'ed (caller frees). TF_ERR_UNSUPPORTED with a
 * message naming the known families when the model has no template or one
 * of another family. */
TF_API tf_status tf_model_chat_prompt(const tf_model *model, const char *system, const char *user, char **out,
                                      char *errbuf, size_t errbuf_size);

/* A conversation: an optional first "system" message, then "user" and
 * "assistant" messages alternating, ending with "user". */
typedef struct tf_chat_message {
    const char *role;    /* "system", "user" or "assistant" */
    const char *content;
} tf_chat_message;

/* The conversation in the model's chat format with the assistant's turn
 * opened, as tf_model_chat_prompt does for one turn (which it calls). BOS
 * and EOS markers between turns (llama2's "</s><s>") are written as text,
 * for tokenizing with parse_special; the first BOS is the tokenizer's
 * (add_special). TF_ERR_INVALID_ARG naming the message for roles out of
 * order; TF_ERR_UNSUPPORTED for a system message in the mistral family,
 * whose template has no system role. *out is malloc'ed (caller frees). */
TF_API tf_status tf_model_chat_format(const tf_model *model, const tf_chat_message *msgs, size_t n, char **out,
                               char *errbuf, size_t errbuf_size);
/* The same in a named family ("chatml", "llama3", "llama2", "mistral",
 * "zephyr", "deepseek", "deepseek-coder", "deepseek3") whatever template the
 * model carries (none needed): for models whose template is not recognised.
 * A named chatml family has no default system message; deepseek-coder has
 * its published template's. family NULL: the model's own. */
TF_API tf_status tf_model_chat_format_as(const tf_model *model, const char *family, const tf_chat_message *msgs,
                                         size_t n, char **out, char *errbuf, size_t errbuf_size);

/* ------------------------------------------------------------------------ */
/* Contexts                                                                 */

/* KV cache element types. q8_0 and q4_0 store a scale per 32 values of a key
 * or value (ggml's Q8_0 / Q4_0 rules): 1.06 and 0.56 bytes per value against
 * f16's 2, read by attention directly; they need head_dim a multiple of 32 and
 * the CPU. Every decoding mode stays exact against ar with the same KV type. */
typedef enum tf_kv_type { TF_KV_F32 = 0, TF_KV_F16 = 1, TF_KV_Q8_0 = 2, TF_KV_Q4_0 = 3 } tf_kv_type;

/* "f32", "f16", "q8_0", "q4_0"; "?" for other values. */
TF_API const char *tf_kv_type_name(tf_kv_type type);
/* The type named name (as tf_kv_type_name writes it); false if none. */
TF_API bool tf_kv_type_parse(const char *name, tf_kv_type *out);
/* KV-cache bytes per token for a cache of this type (0 for an unknown type;
 * q8_0 / q4_0 are meaningful only where head_dim is a multiple of 32). */
TF_API uint64_t tf_model_kv_type_bytes_per_token(const tf_model *model, tf_kv_type type);

/* Where a decoder or a context computes. AUTO: CUDA when this library was built with it
 * (`make CUDA=1`), a device is present and every weight type is one the
 * CUDA backend computes with (f32, f16, bf16, q8_0); otherwise the CPU. */
typedef enum tf_device {
    TF_DEVICE_AUTO = 0,
    TF_DEVICE_CPU = 1,
    TF_DEVICE_CUDA = 2, /* fails with TF_ERR_UNSUPPORTED and a reason when unavailable */
} tf_device;

TF_API const char *tf_device_name(tf_device dev); /* "auto", "cpu", "cuda" */
TF_API bool tf_device_from_name(const char *name, tf_device *out);
/* Number of usable CUDA devices (0 without CUDA support, a driver or a device). */
TF_API int tf_cuda_devices(void);

typedef struct tf_context_params {
    int32_t n_ctx;      /* tokens of KV cache to reserve (0: the trained context) */
    int32_t n_batch;    /* tokens per forward pass during prefill */
    int32_t n_threads;  /* 0: all online CPUs */
    tf_kv_type kv_type; /* default f16 */
    bool logits_all;    /* keep logits of every evaluated token (perplexity) */
    int isa;            /* 0: best available; 1 scalar, 2 avx2, 3 avx512, 4 avx512 + AMX (testing; 4 since 2.5.0) */
    tf_progress_fn progress; /* prefill progress (tokens done / total); may cancel */
    void *progress_user_data;
} tf_context_params;

TF_API tf_context_params tf_context_default_params(void);

TF_API tf_status tf_context_init(tf_context **out, const tf_model *model, const tf_context_params *params, char *errbuf,
                                 size_t errbuf_size);
/* The same on a device (since 2.2.0; tf_context_init is TF_DEVICE_CPU): the
 * weights, the KV cache and the forward pass on a CUDA GPU, logits copied
 * back to the host after each eval. AUTO chooses as for decoders. On CUDA
 * the KV cache is f16 (an f32 request is stored in f16; q8_0 and q4_0 are
 * refused). The results agree with the CPU's to rounding, not bit for bit. */
TF_API tf_status tf_context_init_on(tf_context **out, const tf_model *model, const tf_context_params *params,
                                    tf_device device, char *errbuf, size_t errbuf_size);
TF_API void tf_context_free(tf_context *ctx);

/* Message of the context's last failure ("" if none). */
TF_API const char *tf_context_error(const tf_context *ctx);

/* Append tokens to the sequence (prefill in batches of n_batch). Afterwards
 * tf_context_logits() holds the last token's logits; with logits_all, `out`
 * (if not NULL) receives n x n_vocab logits. TF_ERR_RANGE if the context
 * would overflow (nothing is appended then). TF_ERR_CANCELLED if the
 * progress callback stopped it (the tokens evaluated so far stay). */
TF_API tf_status tf_context_eval(tf_context *ctx, const int32_t *tokens, int32_t n, float *out);

/* Logits [n_vocab] of the last evaluated token. */
TF_API const float *tf_context_logits(const tf_context *ctx);
TF_API int32_t tf_context_n_past(const tf_context *ctx);
TF_API int32_t tf_context_n_ctx(const tf_context *ctx);
/* Forget tokens beyond n (rollback; copies nothing). */
TF_API tf_status tf_context_truncate(tf_context *ctx, int32_t n);
/* For benchmarks: make the cache hold n positions (0..n-1) of random keys and
 * values (uniform in [-1, 1], from `seed`), as if n tokens had been evaluated,
 * without running the model. The cost of a later tf_context_eval does not
 * depend on what the cache holds, so this times a pass at a depth that a
 * prefill would take minutes to reach. The logits are undefined until the next
 * tf_context_eval. TF_ERR_RANGE if n exceeds n_ctx, TF_ERR_INVALID_ARG if n < 0. */
TF_API tf_status tf_context_fill_random(tf_context *ctx, int32_t n, uint64_t seed);

/* ------------------------------------------------------------------------ */
/* Sampling                                                                 */

typedef struct tf_sampler_params {
    float temp;    /* 0: greedy (argmax, ties to the lowest id) */
    int32_t top_k; /* 0: off */
    float top_p;   /* 1: off */
    float min_p;   /* 0: off */
    uint64_t seed;
} tf_sampler_params;

TF_API tf_sampler_params tf_sampler_default_params(void);
TF_API tf_status tf_sampler_init(tf_sampler **out, const tf_model *model, const tf_sampler_params *params, char *errbuf,
                                 size_t errbuf_size);
TF_API void tf_sampler_free(tf_sampler *s);
TF_API int32_t tf_sampler_sample(tf_sampler *s, const float *logits);


/* ------------------------------------------------------------------------ */
/* Speculative decoding (TriForce and its ablations)                        */

typedef enum tf_decode_mode {
    TF_MODE_AR = 0,        /* autoregressive baseline */
    TF_MODE_DRAFT = 1,     /* "draft": a draft model over a StreamingLLM cache (or text
                            * lookup) drafts for the target; "spec" is accepted as its
                            * former name */
    TF_MODE_RETRIEVAL = 2, /* target weights over the retrieval cache draft for the target */
    TF_MODE_STREAMING = 3, /* draft -> target over a StreamingLLM cache -> target */
    TF_MODE_TRIFORCE = 4,  /* draft -> target over the retrieval cache -> target */
} tf_decode_mode;
/* The former name of TF_MODE_DRAFT (before 2.1.0). */
#define TF_MODE_SPEC TF_MODE_DRAFT

/* "ar", "draft", "retrieval", "streaming", "triforce"; "unknown" for other values. */
TF_API const char *tf_decode_mode_name(tf_decode_mode mode);
/* Parses the names above, and "spec" as TF_MODE_DRAFT; false for any other. */
TF_API bool tf_decode_mode_from_name(const char *name, tf_decode_mode *out);

typedef struct tf_decoder tf_decoder;

/* Three-level modes (streaming, triforce): where a target pass's candidates
 * come from. Through the middle level (target <- middle <- draft), or straight
 * from the bottom level (target <- draft), which pays where the middle
 * level's smaller cache saves little over a target step (short contexts) or
 * the bottom level alone is accepted well (text lookup on repetitive text).
 * The output is the same either way (sampled with TF_COUPLING_RESIDUAL: its
 * distribution, and the same seed reproduces a text only with a fixed route). */
typedef enum tf_middle {
    TF_MIDDLE_ALWAYS = 0, /* through the middle level on every target pass */
    TF_MIDDLE_AUTO = 1,   /* per pass, the route with more tokens per second measured so far (default) */
    TF_MIDDLE_NEVER = 2,  /* straight from the bottom level; the middle level idles */
} tf_middle;

TF_API const char *tf_middle_name(tf_middle m); /* "always", "auto", "never" */
TF_API bool tf_middle_from_name(const char *name, tf_middle *out);

/* Sampled decoding (since 3.0.0): how the levels' random draws are coupled.
 * Both are exact: the output is distributed as the target's.
 * KEYED (the default): the token at sequence position i is drawn from a
 * level's distribution p as the argmin over tokens t of E(seed, i, t) / p(t),
 * with exponential noise E that depends on the seed, the position and the
 * token alone; a level accepts a candidate exactly when it is its own draw.
 * Every mode then emits the very text TF_MODE_AR emits for the same seed and
 * sampling settings, token for token, whatever gamma1, gamma2, the route or
 * the timing (so gamma2 0 and TF_MIDDLE_AUTO reproduce too).
 * RESIDUAL: accept a candidate with probability min(1, p/q), else draw the
 * replacement from max(p - q, 0) (Leviathan et al. 2023), from one random
 * stream; accepts about 1% more candidates at T = 0.6 (docs/SPECULATIVE.md),
 * but the text depends on the mode and on how much was drafted. Greedy
 * decoding is the same under both. */
typedef enum tf_coupling {
    TF_COUPLING_KEYED = 0,
    TF_COUPLING_RESIDUAL = 1,
} tf_coupling;

TF_API const char *tf_coupling_name(tf_coupling c); /* "keyed", "residual" */
TF_API bool tf_coupling_from_name(const char *name, tf_coupling *out);

/* Prefill batch a decoder uses when its n_batch is 0 (since 2.4.0): a
 * GPU's kernels need many rows per pass to fill the device. */
#define TF_BATCH_CPU 256
#define TF_BATCH_CUDA 2048

/* tf_decoder_params.gamma2's default (since 2.6.0): the candidates per target
 * pass follow the temperature, TF_GAMMA2_GREEDY at 0 and TF_GAMMA2_SAMPLED
 * above (measured on SmolLM2-135M at 8K: docs/BENCHMARKS.md, "Sampling at
 * T = 0.6"). */
#define TF_GAMMA2_BY_TEMP (-1)
#define TF_GAMMA2_GREEDY 6
#define TF_GAMMA2_SAMPLED 4

typedef struct tf_decoder_params {
    tf_decode_mode mode;
    int32_t gamma1;         /* draft tokens per middle-level pass (three-level modes) */
    /* candidate tokens per target pass, 1..15; 0: chosen per pass (1..8) from
     * the running acceptance and the measured cost of a draft token and of a
     * target pass by its row count — the output is the same (sampled with
     * TF_COUPLING_RESIDUAL: its distribution, and the same seed reproduces a
     * text only with a fixed gamma2);
     * TF_GAMMA2_BY_TEMP (the default since 2.6.0): TF_GAMMA2_GREEDY when
     * sampling.temp is 0, TF_GAMMA2_SAMPLED when sampling (a sampled
     * candidate is accepted less often, so fewer pay), see tf_decoder_gamma2 */
    int32_t gamma2;
    /* retrieval cache tokens (B); 0 (the default): an eighth of
     * n_ctx rounded down to whole chunks, within 256..4096 (measured best at
     * 8K on SmolLM2; 4096 is the TriForce paper's budget at 120K) */
    int32_t budget;
    int32_t chunk;          /* retrieval chunk size (c) */
    int32_t recent;         /* retrieval: most recent tokens always kept */
    int32_t rebuild_stride; /* rebuild the retrieval cache every R target passes */
    float rebuild_accept;   /* ... and when the middle level's rolling acceptance drops below this */
    /* A middle level drafts alone (sampling its own tokens, as in retrieval
     * mode) while the rolling acceptance of the draft below it is under
     * bypass_accept, retrying the draft every bypass_probe tokens; 0: never.
     * Output is unchanged either way (the target verifies what the middle
     * proposes); only the time differs. */
    float bypass_accept;
    int32_t bypass_probe;
    int32_t sinks, window;  /* StreamingLLM cache: attention sinks + recent window */
    int32_t n_ctx;          /* context (prompt + generation) */
    int32_t n_batch;        /* prefill batch; 0 (the default): the device's,
                             * TF_BATCH_CPU on the CPU, TF_BATCH_CUDA on a GPU */
    int32_t n_threads;      /* 0: all CPUs */
    tf_kv_type kv_type;
    int isa;                /* as in tf_context_params */
    tf_sampler_params sampling;
    tf_progress_fn progress; /* prefill progress; may cancel */
    void *progress_user_data;
    tf_device device;        /* default TF_DEVICE_AUTO */
    /* > 0: the bottom level of spec, streaming and triforce drafts without a
     * model, by finding the newest text (at least this many tokens, the
     * longest match up to 16) earlier in the prompt or the output and
     * proposing what followed it; pass draft = NULL. 0 (default): a draft model. */
    int32_t lookup;
    tf_middle middle;        /* three-level modes; default TF_MIDDLE_AUTO */
    tf_coupling coupling;    /* sampled decoding (since 3.0.0); default TF_COUPLING_KEYED */
} tf_decoder_params;

TF_API tf_decoder_params tf_decoder_default_params(void);
/* The gamma2 a decoder made from params uses: params->gamma2, or with
 * TF_GAMMA2_BY_TEMP the value for params->sampling.temp (0: adaptive). */
TF_API int32_t tf_decoder_gamma2(const tf_decoder_params *params);
/* Check params without loading a model: ranges, gamma1 + gamma2 within the
 * 15 candidates a target pass verifies exactly, the device (cuda needs a CUDA
 * build). n_ctx 0 and n_threads 0 mean "decided by tf_decoder_init". What
 * needs the models (a draft for the mode, equal vocabularies, a GPU present)
 * is checked by tf_decoder_init. TF_OK, or TF_ERR_INVALID_ARG /
 * TF_ERR_UNSUPPORTED with the reason in errbuf. */
TF_API tf_status tf_decoder_params_check(const tf_decoder_params *params, char *errbuf, size_t errbuf_size);

/* draft may be NULL for ar and retrieval, and with params->lookup > 0; the
 * other modes need one whose vocabulary equals the target's. */
TF_API tf_status tf_decoder_init(tf_decoder **out, const tf_model *target, const tf_model *draft,
                                 const tf_decoder_params *params, char *errbuf, size_t errbuf_size);
TF_API void tf_decoder_free(tf_decoder *dec);
TF_API const char *tf_decoder_error(const tf_decoder *dec);

/* Prefill the prompt (1 <= n < n_ctx). */
TF_API tf_status tf_decoder_prefill(tf_decoder *dec, const int32_t *tokens, int32_t n);
/* Prefill with the prompt that src holds, copying its target cache instead of
 * recomputing it (for measuring several configurations on one long prompt).
 * Both decoders on the same device (the CPU, or since 2.3.0 one CUDA device)
 * with the same target model and KV type; src
 * prefilled (it may have decoded since: the whole sequence it holds is the
 * prompt), in retrieval or triforce mode when dec has a retrieval level (the
 * cache is built from src's newest query). src is not changed. */
TF_API tf_status tf_decoder_prefill_from(tf_decoder *dec, const tf_decoder *src);
/* Prefill with the prompt tokens[0..n), reusing src's work: the cached
 * positions of the longest prefix the prompt shares with the sequence src
 * holds (its prompt and the tokens it decoded) are copied, the rest is
 * computed. The result is bitwise that of tf_decoder_prefill (same output,
 * same sampling), only sooner: a server keeps a finished request's decoder
 * and prefills the next request on the same document from it. src may be
 * NULL or in any mode; one on another device, with another target model or
 * KV type reuses nothing; it is not changed. *n_reused (may be NULL) gets the
 * positions copied. */
TF_API tf_status tf_decoder_prefill_reuse(tf_decoder *dec, const int32_t *tokens, int32_t n, const tf_decoder *src,
                                          int32_t *n_reused);
/* The tokens the decoder holds (prompt and emitted) and how many; for
 * choosing the decoder whose sequence shares the longest prefix with a new
 * prompt. The pointer is valid until the next call on dec. */
TF_API const int32_t *tf_decoder_tokens(const tf_decoder *dec, int32_t *n);
/* Decode: writes the next tokens of the sequence into out, at most cap of
 * them, and their count into *n_out (>= 1 on TF_OK). One step emits at most
 * 16 tokens (a target pass verifies at most 15 candidates). When they exceed
 * cap, the first cap are written and the rest are held back: the next calls
 * hand them out, in order, before decoding again, so the sequence does not
 * depend on cap, and a cap of 16 or more never holds tokens back.
 * TF_ERR_INVALID_ARG if cap < 1 or out is NULL (nothing decoded);
 * TF_ERR_RANGE once the context is full and every token has been handed out.
 * *n_out is 0 on any error. */
TF_API tf_status tf_decoder_step(tf_decoder *dec, int32_t *out, int32_t cap, int32_t *n_out);

typedef struct tf_level_info {
    const char *name;  /* "target", "middle", "draft" */
    const char *cache; /* "full", "retrieval", "streaming", "lookup" */
    int64_t passes;    /* forward passes */
    int64_t tokens;    /* tokens through the forward */
    int64_t verified;  /* candidates of the level below judged by this level */
    int64_t accepted;  /* of which accepted */
    /* verifications that ended in a rejection; accepted / (accepted + rejected)
     * estimates the per-candidate acceptance rate (each candidate is judged
     * only while all before it were accepted) */
    int64_t rejected;
    int64_t rebuilds;  /* retrieval cache rebuilds */
    int64_t bypassed;  /* tokens this level proposed alone, bypassing the draft below */
    double seconds;    /* time in this level while decoding (the prefill is not counted) */
} tf_level_info;

/* The device the decoder runs on: "cpu" or "cuda: <device description>". */
TF_API const char *tf_decoder_device(const tf_decoder *dec);
TF_API int tf_decoder_n_levels(const tf_decoder *dec);
TF_API void tf_decoder_level(const tf_decoder *dec, int level, tf_level_info *out);
/* Target passes while decoding whose candidates came through the middle level
 * and those that skipped it (tf_middle); both 0 for modes of fewer than three
 * levels. Either pointer may be NULL. */
TF_API void tf_decoder_routes(const tf_decoder *dec, int64_t *via_middle, int64_t *skipping_middle);

#ifdef __cplusplus
}
#endif
#endif /* TRIFORCE_H */
