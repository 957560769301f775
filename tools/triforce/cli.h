/*
 * cli.h — the `triforce` command line: one declarative option table shared by
 * every subcommand, parsed into one struct. Flag names follow llama.cpp where
 * one exists (-m, -p, -f, -n, -c, -t, -b, -s, --temp, --top-k, --top-p, --min-p).
 */
#ifndef TF_CLI_H
#define TF_CLI_H

#include "triforce.h"

#include <stdbool.h>
#include <stdint.h>

enum {
    CMD_GENERATE = 1 << 0,
    CMD_INFO = 1 << 1,
    CMD_TOKENIZE = 1 << 2,
    CMD_PERPLEXITY = 1 << 3,
    CMD_QUANTIZE = 1 << 4,
    CMD_GEN_MODEL = 1 << 5,
    CMD_CONVERT = 1 << 6,
    CMD_BENCH = 1 << 7,
    CMD_EVAL = 1 << 8,
    CMD_SERVE = 1 << 9,
};

/* A comma-separated list of integers ("512,4096"); n == 0: not given. */
#define CLI_INTS_MAX 16
typedef struct cli_ints {
    int n;
    int v[CLI_INTS_MAX];
} cli_ints;

typedef struct cli_opts {
    const char *model;
    const char *prompt;
    const char *file;
    int n_predict;
    int n_ctx;
    int n_threads;
    int n_batch;
    int64_t seed; /* -1: from the clock */
    float temp, top_p, min_p;
    int top_k;
    const char *kv_type;
    const char *device; /* --device auto|cpu|cuda (NULL: auto) */
    bool ids, no_bos, ignore_eos, verbose, no_warmup;
    int isa;
    /* speculative decoding */
    const char *draft, *mode, *stats_json;
    int gamma1, gamma2, budget, chunk, rebuild_stride, sinks, window;
    int draft_layers; /* 0: none */
    int draft_lookup; /* --draft-lookup N: the bottom level drafts by text lookup; 0: none */
    float bypass_accept;
    const char *middle;  /* --middle always|auto|never */
    const char *coupling; /* --coupling keyed|residual */
    bool compare;
    bool chat;           /* --chat: format -p/-f as one user turn with the model's chat template */
    const char *system;  /* --system TEXT (with --chat) */
    const char *chat_template; /* --chat-template NAME: a family instead of the model's template */
    /* bench */
    cli_ints bench_prompt; /* -p: prefill sizes */
    cli_ints depths;       /* -d: context depths */
    cli_ints rows;         /* --rows: rows of a target pass */
    int reps;              /* -r */
    const char *output;    /* -o md|json|csv */
    int bw_mib;            /* --bw-mib: bandwidth probe buffer */
    float bw_gbs;          /* --bw-gbs: the bounds' bandwidth, given instead of probed (0: probe) */
    const char *bench_fill; /* --fill text|random: what the cache holds before each decode test */
    /* eval */
    cli_ints eval_contexts, eval_budgets, eval_chunks;
    const char *eval_caches, *eval_depths; /* comma-separated names / fractions */
    /* gen-model */
    const char *preset, *vocab_from, *wtype, *rope_scaling, *arch;
    int n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, ctx_train, orig_ctx;
    float rope_base, rope_factor;
    bool tied;
    int64_t gen_seed;
    /* serve */
    const char *host, *api_key;
    int port, parallel, queue, timeout;
    /* positional arguments */
    const char *pos[4];
    int n_pos;
} cli_opts;

/* Parse argv[first..argc) for subcommand `cmd`. Returns 0 on success, 1 if
 * help was printed (exit 0), -1 on a usage error (message printed). */
int cli_parse(cli_opts *o, unsigned cmd, const char *cmd_name, const char *usage, int max_pos, int argc,
              char **argv);
void cli_print_help(unsigned cmd, const char *cmd_name, const char *usage);

/* Read a whole text file or die with a message (tools only). Returns NULL on failure (message printed). */
char *cli_read_text(const char *path, size_t *len);
/* All the token ids of a text (malloc'd, *n of them; NULL when it cannot be
 * tokenized or memory runs out). Sizes the buffer from the text, and again
 * from the count the tokenizer reports when the text needs more ids than
 * bytes (byte fallback can give several ids per byte). */
int32_t *cli_tokenize(const tf_model *m, const char *text, size_t len, bool add_special, bool parse_special, size_t *n);
/* Prompt text from -p or -f; NULL with a message if neither/both. */
char *cli_prompt_text(const cli_opts *o, size_t *len);

/* Log sink for the library: prints "triforce: <level>: msg" to stderr. */
void cli_log(void *ud, tf_log_level level, const char *msg);

double cli_now(void);



/* Progress on stderr. On a terminal one line is redrawn in place ("\r") and ended with a
 * newline when the work is done; anywhere else (a file, a pipe, a CI log) every report is
 * a full line, printed when another tenth of the work is done, when CLI_PROGRESS_SECONDS
 * have passed since the last one, and at the end. Either way an error or log message
 * never continues a progress line: cli_log and cli_progress_break end it first. */
#define CLI_PROGRESS_SECONDS 5.0

typedef struct cli_progress {
    const char *label; /* "<label>: NN%" of cli_progress_percent */
    bool tty;          /* stderr is a terminal */
    int tenth;         /* not a terminal: the last tenth of the work reported (0..10) */
    double t_last;     /* not a terminal: cli_now() of the last report */
} cli_progress;

cli_progress cli_progress_make(const char *label);
/* Report `done` of `total` (same unit); the text is printf(fmt, ...), without "\r" or "\n". */
void cli_progress_show(cli_progress *p, uint64_t done, uint64_t total, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* End a progress line left open on the terminal; call before printing an error after a
 * call that reports progress. Does nothing when none is open. */
void cli_progress_break(void);
/* A tf_progress_fn printing "<label>: NN%"; ud is a cli_progress *. Never cancels. */
bool cli_progress_percent(void *ud, uint64_t done, uint64_t total);

/* Commands that write files: SIGINT, SIGTERM and SIGHUP set a flag instead
 * of killing the process; cli_progress_percent then returns false, so the
 * writer stops and removes its OUT.partial. cli_interrupted() says whether a
 * signal came (the command then exits 130). */
void cli_catch_interrupts(void);
bool cli_interrupted(void);

/* The output path check of core/outpath.h before any work: prints
 * "triforce CMD: <reason>" and returns false when out must not be written. */
bool cli_check_output(const char *cmd, const char *out, const char *in);

/* Decoder parameters from the options: speculation settings, threads, batch,
 * KV type, ISA and the sampling transform (seed 1; callers set mode, seed,
 * context and device). */
tf_decoder_params cli_decoder_params(const cli_opts *o);
/* The gamma2 the options give (--gamma2, or by --temp when not given). */
/* Whether every decoding mode's text must equal ar's: greedy, or sampled with
 * the keyed coupling (tf_coupling). */
bool cli_text_is_ars(const cli_opts *o);
int cli_gamma2(const cli_opts *o);
/* tf_decoder_params_check before any model is loaded: false (the reason
 * printed) when the options cannot work whatever the models are. */
bool cli_check_decoder_params(const char *cmd, const tf_decoder_params *dp);
/* --rope-scaling KIND --rope-factor F (cli_parse checked them): extend the
 * model's context; true when not asked, false with a message when the model
 * refuses. */
bool cli_extend_context(const char *cmd, const cli_opts *o, tf_model *model);
/* -md, --draft-layers and --draft-lookup each give the bottom level of the
 * hierarchy: true when at most one is given (else a message, false). */
bool cli_check_draft(const char *cmd, const cli_opts *o);
bool cli_has_draft(const cli_opts *o);
/* What drafts, for a run's header line: the -md path, "(the target's first layers)", "(text lookup)" or "". */
const char *cli_draft_name(const cli_opts *o);
/* The --kv-type value (checked by cli_parse). */
tf_kv_type cli_kv_type(const cli_opts *o);
/* The -b value for a context on dev: 0 (the default) gives the device's
 * batch, as decoders take it (TF_BATCH_CPU / TF_BATCH_CUDA). */
int32_t cli_batch(const cli_opts *o, tf_device dev);
/* Whether mode needs a bottom level; when it does and none was given, prints
 * what to add and returns false. */
bool cli_mode_has_draft(const char *cmd, const cli_opts *o, tf_decode_mode mode);
/* --mode, else triforce with a draft and ar without; false (message printed)
 * for an unknown name or a mode without the draft it needs. */
bool cli_decode_mode(const char *cmd, const cli_opts *o, tf_decode_mode *mode);

/* Load -m MODEL, and the draft: -md DRAFT, or the first --draft-layers K
 * layers of the model (a view sharing its weights); *draft stays NULL with
 * neither. line is the loading progress (reset between the two files).
 * Returns false with a message naming cmd on failure (free what was set). */
bool cli_load_models(const cli_opts *o, const char *cmd, const tf_model_params *mp, cli_progress *line,
                     tf_model **model, tf_model **draft);

int cmd_generate(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_gen_model(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_serve(int argc, char **argv);

#endif
