/* cli.c — option table, parser and helpers shared by the subcommands. */
#include "cli.h"

#include "core/dtype_list.h"
#include "core/mem.h"
#include "core/outpath.h"
#include "core/threads.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef enum { OPT_STR, OPT_INT, OPT_I64, OPT_FLOAT, OPT_FLAG, OPT_INTS } opt_kind;

typedef struct opt_def {
    const char *shrt;    /* "-m" or NULL */
    const char *lng;     /* "--model" */
    opt_kind kind;
    size_t off;          /* offset in cli_opts */
    const char *metavar;
    const char *help;
    unsigned cmds;       /* subcommands that accept it (a flag may have one entry per meaning) */
    double lo, hi;       /* numeric range */
} opt_def;

#define O(f) offsetof(cli_opts, f)
#define ALL_RUN (CMD_GENERATE | CMD_PERPLEXITY | CMD_SERVE)
#define SPEC_RUN (CMD_GENERATE | CMD_BENCH | CMD_SERVE)

static const opt_def k_opts[] = {
    {"-m", "--model", OPT_STR, O(model), "PATH", "model: a GGUF file or a Hugging Face directory", ALL_RUN | CMD_TOKENIZE | CMD_BENCH | CMD_EVAL, 0, 0},
    {"-p", "--prompt", OPT_STR, O(prompt), "TEXT", "prompt text", CMD_GENERATE | CMD_TOKENIZE, 0, 0},
    {"-f", "--file", OPT_STR, O(file), "FILE", "read the prompt (or the text to score) from FILE; - reads standard input",
     CMD_GENERATE | CMD_TOKENIZE | CMD_PERPLEXITY | CMD_EVAL, 0, 0},
    {"-n", "--n-predict", OPT_INT, O(n_predict), "N", "tokens to generate (default 128; serve: when a request gives no max_tokens)", CMD_GENERATE | CMD_EVAL | CMD_SERVE, 0, 1e8},
    {"-c", "--ctx-size", OPT_INT, O(n_ctx), "N",
     "context size in tokens (generate default: prompt + n; perplexity default 512; serve: the trained context)", ALL_RUN, 1, 1 << 28},
    {"-t", "--threads", OPT_INT, O(n_threads), "N", "threads (default: all CPUs)", ALL_RUN | CMD_GEN_MODEL | CMD_CONVERT | CMD_BENCH | CMD_EVAL, 1, 1024},
    {"-b", "--batch-size", OPT_INT, O(n_batch), "N", "tokens per prefill batch; 0: 256 on the CPU, 2048 on a GPU (default 0)", ALL_RUN | CMD_BENCH | CMD_EVAL, 0, 65536},
    {"-s", "--seed", OPT_I64, O(seed), "N", "RNG seed (default: from the clock; printed; bench 1)", CMD_GENERATE | CMD_EVAL | CMD_BENCH, -1,
     9.2e18},
    {NULL, "--temp", OPT_FLOAT, O(temp), "T", "temperature, 0 = greedy (default 0.8; eval and bench 0)", CMD_GENERATE | CMD_EVAL | CMD_SERVE | CMD_BENCH, 0, 1e4},
    {NULL, "--top-k", OPT_INT, O(top_k), "K", "keep the K most likely tokens, 0 = off (default 40)",
     CMD_GENERATE | CMD_EVAL | CMD_SERVE | CMD_BENCH, 0, 1e9},
    {NULL, "--top-p", OPT_FLOAT, O(top_p), "P", "nucleus sampling mass, 1 = off (default 0.95)",
     CMD_GENERATE | CMD_EVAL | CMD_SERVE | CMD_BENCH, 1e-6, 1},
    {NULL, "--min-p", OPT_FLOAT, O(min_p), "P", "drop tokens below P x the top probability, 0 = off (default 0.05)",
     CMD_GENERATE | CMD_EVAL | CMD_SERVE | CMD_BENCH, 0, 1},
    {NULL, "--kv-type", OPT_STR, O(kv_type), "TYPE", "KV cache element type: f16 (default), f32, q8_0 or q4_0 (8 / 4 bits with a scale per 32 values; CPU, head_dim a multiple of 32)", ALL_RUN | CMD_BENCH | CMD_EVAL, 0, 0},
    {NULL, "--device", OPT_STR, O(device), "DEV",
     "cuda | cpu | auto (generate default auto: cuda when built with CUDA, a GPU is present and the weights are "
     "f32/f16/bf16/q8_0/q4_0/q4_1; perplexity, bench and eval default cpu)",
     CMD_GENERATE | CMD_PERPLEXITY | CMD_BENCH | CMD_EVAL, 0, 0},
    {NULL, "--chat", OPT_FLAG, O(chat), NULL,
     "treat the prompt as one user message in the model's chat template (chatml, llama3, llama2, mistral, zephyr, "
     "deepseek, deepseek-coder, deepseek3)",
     CMD_GENERATE, 0, 0},
    {NULL, "--chat-template", OPT_STR, O(chat_template), "NAME",
     "format chats as this family (chatml, llama3, llama2, mistral, zephyr, deepseek, deepseek-coder, deepseek3) "
     "instead of the model's template",
     CMD_GENERATE | CMD_SERVE, 0, 0},
    {NULL, "--system", OPT_STR, O(system), "TEXT",
     "with --chat: the system message (default: the template's own default, if any)", CMD_GENERATE, 0, 0},
    {NULL, "--ignore-eos", OPT_FLAG, O(ignore_eos), NULL, "keep generating after end-of-sequence tokens",
     CMD_GENERATE, 0, 0},
    {NULL, "--ids", OPT_FLAG, O(ids), NULL, "print token ids on one line (default: id and piece per line)",
     CMD_TOKENIZE, 0, 0},
    {NULL, "--no-bos", OPT_FLAG, O(no_bos), NULL, "do not add the BOS token", CMD_TOKENIZE | CMD_GENERATE, 0, 0},
    {"-md", "--model-draft", OPT_STR, O(draft), "PATH", "draft model, GGUF or HF directory (same vocabulary as -m); makes triforce the default mode",
     SPEC_RUN, 0, 0},
    {NULL, "--mode", OPT_STR, O(mode), "MODE",
     "ar | draft | retrieval | streaming | triforce (default: triforce with -md, else ar; spec = draft)", CMD_GENERATE | CMD_EVAL | CMD_SERVE, 0, 0},
    {NULL, "--gamma1", OPT_INT, O(gamma1), "N", "draft tokens per middle-level pass (default 2)", SPEC_RUN, 1, 16},
    {NULL, "--gamma2", OPT_INT, O(gamma2), "N", "candidate tokens per target pass, 0 = adapt to the measured costs and acceptance (default: 6 greedy, 4 sampled)", SPEC_RUN | CMD_EVAL, 0, 15},
    {NULL, "--budget", OPT_INT, O(budget), "N", "retrieval cache tokens; 0: an eighth of the context, in whole chunks, within 256..4096 (default 0)", SPEC_RUN | CMD_EVAL, 0, 1 << 28},
    {NULL, "--chunk", OPT_INT, O(chunk), "N", "retrieval chunk size (default 8)", SPEC_RUN | CMD_EVAL, 1, 64},
    {NULL, "--rebuild-stride", OPT_INT, O(rebuild_stride), "N", "rebuild the retrieval cache every N target passes (default 16)",
     SPEC_RUN, 1, 1 << 30},
    {NULL, "--bypass-accept", OPT_FLOAT, O(bypass_accept), "A",
     "the middle level drafts alone while the draft's rolling acceptance is below A, 0 = never (default 0.2)",
     SPEC_RUN, 0, 1},
    {NULL, "--middle", OPT_STR, O(middle), "WHEN",
     "triforce and streaming: the target verifies the middle level's candidates (always), the draft's directly "
     "(never), or per pass whichever route has given more tokens per second so far (auto, default)",
     SPEC_RUN, 0, 0},
    {NULL, "--coupling", OPT_STR, O(coupling), "RULE",
     "sampled: keyed (default: the token at each position drawn with noise of the seed, the position and the token, "
     "so every mode gives ar's text for a seed) or residual (accept with min(1, p/q), else draw from max(p - q, 0))",
     SPEC_RUN, 0, 0},
    {NULL, "--draft-layers", OPT_INT, O(draft_layers), "K",
     "no -md: draft with the target's first K layers (self-speculation); makes triforce the default mode",
     SPEC_RUN, 1, 1024},
    {NULL, "--draft-lookup", OPT_INT, O(draft_lookup), "N",
     "no -md: draft without a model, by finding the newest N or more tokens earlier in the prompt or output and "
     "proposing what followed them; makes triforce the default mode",
     SPEC_RUN, 1, 16},
    {NULL, "--rope-scaling", OPT_STR, O(rope_scaling), "KIND",
     "extend the model's context by RoPE scaling, linear or yarn, by --rope-factor (its trained context becomes the "
     "original one)", ALL_RUN | CMD_BENCH | CMD_EVAL, 0, 0},
    {NULL, "--rope-factor", OPT_FLOAT, O(rope_factor), "F", "with --rope-scaling: the context extension factor, more "
     "than 1 and at most 64", ALL_RUN | CMD_BENCH | CMD_EVAL, 1e-3, 64},
    {NULL, "--sinks", OPT_INT, O(sinks), "N", "StreamingLLM attention sinks (default 16)", SPEC_RUN, 0, 1 << 20},
    {NULL, "--window", OPT_INT, O(window), "N", "StreamingLLM window (default 240)", SPEC_RUN, 1, 1 << 24},
    {NULL, "--stats-json", OPT_STR, O(stats_json), "FILE", "write timings and per-level statistics as JSON",
     CMD_GENERATE, 0, 0},
    {NULL, "--compare", OPT_FLAG, O(compare), NULL,
     "also run ar on the same input; print the speedup and whether the outputs are identical", CMD_GENERATE, 0, 0},
    {NULL, "--isa", OPT_INT, O(isa), "N", "kernel ISA for testing: 0 best, 1 scalar, 2 avx2, 3 avx512, 4 avx512 + AMX tiles", ALL_RUN | CMD_BENCH | CMD_EVAL, 0,
     4},
    {"-v", "--verbose", OPT_FLAG, O(verbose), NULL, "more log output", ALL_RUN | CMD_BENCH | CMD_EVAL | CMD_INFO | CMD_QUANTIZE | CMD_CONVERT, 0, 0},
    /* bench (flags that mean something else there than in generate have their own entries) */
    {"-p", "--n-prompt", OPT_INTS, O(bench_prompt), "N,..", "prefill tests: prompt sizes in tokens, 0 = none (default 512)",
     CMD_BENCH, 0, 1 << 28},
    {"-n", "--n-gen", OPT_INT, O(n_predict), "N", "decode tests: tokens generated at each depth, 0 = none (default 128)",
     CMD_BENCH, 0, 1 << 24},
    {"-d", "--n-depth", OPT_INTS, O(depths), "N,..",
     "context depths: tokens in the cache before decoding / before a pass (default 0)", CMD_BENCH, 0, 1 << 28},
    {NULL, "--rows", OPT_INTS, O(rows), "K,..",
     "pass tests: k new rows attending to the whole cache at each depth, 0 = none (default 1,2,4,8)", CMD_BENCH, 0, 256},
    {"-f", "--file", OPT_STR, O(file), "FILE",
     "context text: its first tokens fill each prompt and depth (default: a generated filler text); - reads standard input", CMD_BENCH, 0, 0},
    {NULL, "--mode", OPT_STR, O(mode), "M,..",
     "decoding modes: ar, draft, retrieval, streaming, triforce (default ar,retrieval; ar,retrieval,triforce with -md "
     "or --draft-layers)", CMD_BENCH, 0, 0},
    {"-r", "--repetitions", OPT_INT, O(reps), "N", "repetitions of every test, modes interleaved (default 3)", CMD_BENCH,
     1, 1000},
    {"-o", "--output", OPT_STR, O(output), "FMT", "md (default), json (one object per line) or csv", CMD_BENCH | CMD_EVAL, 0, 0},
    {NULL, "--bw-mib", OPT_INT, O(bw_mib), "N",
     "buffer of the read-bandwidth probe in MiB (default 1024; several times the last-level cache)", CMD_BENCH, 1,
     1 << 20},
    {NULL, "--bw-gbs", OPT_FLOAT, O(bw_gbs), "G",
     "bandwidth of the bounds in GB/s, given instead of probed (the probe reads host memory: with --device cuda, "
     "give the device's, measured in the same run; without it a cuda run has no bounds)", CMD_BENCH, 1, 1e6},
    {NULL, "--fill", OPT_STR, O(bench_fill), "KIND",
     "decode tests: the cache up to each depth holds a prefill of the text (text, default) or random keys and values "
     "(random: no prefill, so deep contexts are quick; --mode ar only)", CMD_BENCH, 0, 0},
    /* eval */
    {NULL, "--contexts", OPT_INTS, O(eval_contexts), "L,..", "context lengths in tokens (default 2048,4096,8000)",
     CMD_EVAL, 64, 1 << 24},
    {NULL, "--budgets", OPT_INTS, O(eval_budgets), "B,..", "accept: middle-level cache budgets (default 256,512,1024,2048)",
     CMD_EVAL, 16, 1 << 24},
    {NULL, "--chunks", OPT_INTS, O(eval_chunks), "C,..", "accept: retrieval chunk sizes (default 8)", CMD_EVAL, 1, 64},
    {NULL, "--caches", OPT_STR, O(eval_caches), "K,K", "accept: retrieval and/or streaming (default both)",
     CMD_EVAL, 0, 0},
    {NULL, "--depths", OPT_STR, O(eval_depths), "D,..", "passkey: depths of the key, 0..1 (default 0,0.25,0.5,0.75,1)",
     CMD_EVAL, 0, 0},
    /* serve */
    {NULL, "--host", OPT_STR, O(host), "ADDR", "IPv4 address to listen on (default 127.0.0.1: this machine only)",
     CMD_SERVE, 0, 0},
    {NULL, "--port", OPT_INT, O(port), "N", "TCP port (default 8080; 0: any free port, printed)", CMD_SERVE, 0, 65535},
    {NULL, "--parallel", OPT_INT, O(parallel), "N", "slots: requests decoded at once, each keeping its cache (default 2)",
     CMD_SERVE, 1, 64},
    {NULL, "--queue", OPT_INT, O(queue), "N", "requests that may wait for a slot; more get 503 (default 16)", CMD_SERVE,
     0, 4096},
    {NULL, "--api-key", OPT_STR, O(api_key), "KEY", "require the header Authorization: Bearer KEY (all but /health)",
     CMD_SERVE, 0, 0},
    {NULL, "--timeout", OPT_INT, O(timeout), "S", "close a connection idle for S seconds (default 600)", CMD_SERVE, 1,
     86400},
    /* gen-model */
    {NULL, "--preset", OPT_STR, O(preset), "NAME", "shape preset (see below)", CMD_GEN_MODEL, 0, 0},
    {NULL, "--arch", OPT_STR, O(arch), "NAME",
     "architecture: llama (default) or qwen2 (q/k/v biases, rotate-half RoPE)", CMD_GEN_MODEL, 0, 0},
    {NULL, "--vocab-from", OPT_STR, O(vocab_from), "FILE", "copy the tokenizer from this GGUF", CMD_GEN_MODEL, 0, 0},
    {NULL, "--type", OPT_STR, O(wtype), "TYPE",
     "weight type (default f16):" TF_DTYPE_NAMES,
     CMD_GEN_MODEL, 0, 0},
    {NULL, "--n-embd", OPT_INT, O(n_embd), "N", "model width", CMD_GEN_MODEL, 1, 65536},
    {NULL, "--n-layer", OPT_INT, O(n_layer), "N", "layers", CMD_GEN_MODEL, 1, 1024},
    {NULL, "--n-head", OPT_INT, O(n_head), "N", "attention heads", CMD_GEN_MODEL, 1, 1024},
    {NULL, "--n-head-kv", OPT_INT, O(n_head_kv), "N", "key/value heads (GQA)", CMD_GEN_MODEL, 1, 1024},
    {NULL, "--n-ff", OPT_INT, O(n_ff), "N", "feed-forward width", CMD_GEN_MODEL, 1, 1 << 20},
    {NULL, "--n-vocab", OPT_INT, O(n_vocab), "N", "vocabulary size (byte vocabulary padded to N)", CMD_GEN_MODEL, 1,
     1 << 24},
    {NULL, "--ctx-train", OPT_INT, O(ctx_train), "N", "trained context length", CMD_GEN_MODEL, 1, 1 << 30},
    {NULL, "--rope-scaling", OPT_STR, O(rope_scaling), "KIND", "none, linear, yarn or llama3", CMD_GEN_MODEL, 0, 0},
    {NULL, "--rope-factor", OPT_FLOAT, O(rope_factor), "F", "RoPE scaling factor", CMD_GEN_MODEL, 1e-3, 1e6},
    {NULL, "--rope-orig-ctx", OPT_INT, O(orig_ctx), "N", "original context for yarn / llama3", CMD_GEN_MODEL, 1,
     1 << 30},
    {NULL, "--rope-base", OPT_FLOAT, O(rope_base), "F", "RoPE frequency base", CMD_GEN_MODEL, 1, 1e12},
    {NULL, "--tied", OPT_FLAG, O(tied), NULL, "tie the output matrix to the embedding", CMD_GEN_MODEL, 0, 0},
    {NULL, "--gen-seed", OPT_I64, O(gen_seed), "N", "weights seed (default 1)", CMD_GEN_MODEL, 0, 9.2e18},
};

void cli_print_help(unsigned cmd, const char *cmd_name, const char *usage) {
    printf("usage: triforce %s %s\n\noptions:\n", cmd_name, usage);
    for (size_t i = 0; i < sizeof k_opts / sizeof k_opts[0]; i++) {
        const opt_def *d = &k_opts[i];
        if (!(d->cmds & cmd)) continue;
        char left[64];
        snprintf(left, sizeof left, "%s%s%s %s", d->shrt ? d->shrt : "", d->shrt ? ", " : "    ", d->lng,
                 d->metavar ? d->metavar : "");
        printf("  %-28s %s\n", left, d->help);
    }
    printf("  %-28s %s\n", "-h, --help", "show this help");
}

static int set_value(cli_opts *o, const opt_def *d, const char *name, const char *val) {
    char *end;
    void *field = (char *)o + d->off;
    errno = 0;
    switch (d->kind) {
    case OPT_STR: *(const char **)field = val; return 0;
    case OPT_FLAG: *(bool *)field = true; return 0;
    case OPT_INT: case OPT_I64: {
        long long v = strtoll(val, &end, 10);
        if (errno || end == val || *end || v < d->lo || (double)v > d->hi) {
            fprintf(stderr, "triforce: %s '%s': expected an integer in [%.0f, %.0f]\n", name, val, d->lo, d->hi);
            return -1;
        }
        if (d->kind == OPT_INT) *(int *)field = (int)v;
        else *(int64_t *)field = v;
        return 0;
    }
    case OPT_INTS: {
        cli_ints *l = field;
        const char *q = val;
        l->n = 0;
        for (;;) {
            long long v = strtoll(q, &end, 10);
            if (errno || end == q || v < d->lo || (double)v > d->hi || l->n == CLI_INTS_MAX ||
                (*end != ',' && *end != '\0')) {
                fprintf(stderr, "triforce: %s '%s': expected a comma-separated list of up to %d integers in [%.0f, %.0f]\n",
                        name, val, CLI_INTS_MAX, d->lo, d->hi);
                return -1;
            }
            l->v[l->n++] = (int)v;
            if (*end == '\0') return 0;
            q = end + 1;
        }
    }
    case OPT_FLOAT: {
        double v = strtod(val, &end);
        if (errno || end == val || *end || !isfinite(v) || v < d->lo || v > d->hi) {
            fprintf(stderr, "triforce: %s '%s': expected a number in [%g, %g]\n", name, val, d->lo, d->hi);
            return -1;
        }
        *(float *)field = (float)v;
        return 0;
    }
    }
    return -1;
}

int cli_parse(cli_opts *o, unsigned cmd, const char *cmd_name, const char *usage, int max_pos, int argc,
              char **argv) {
    memset(o, 0, sizeof *o);
    /* the decoding and sampling defaults are the library's (one place; the
     * help texts state them, and test_cli checks that they agree) */
    const tf_decoder_params dd = tf_decoder_default_params();
    o->n_predict = 128;
    o->n_batch = dd.n_batch;
    o->seed = -1;
    o->temp = dd.sampling.temp;
    o->top_k = dd.sampling.top_k;
    o->top_p = dd.sampling.top_p;
    o->min_p = dd.sampling.min_p;
    o->kv_type = tf_kv_type_name(dd.kv_type);
    o->middle = tf_middle_name(dd.middle);
    o->coupling = tf_coupling_name(dd.coupling);
    o->gen_seed = 1;
    o->gamma1 = dd.gamma1;
    o->gamma2 = dd.gamma2;
    o->budget = dd.budget;
    o->chunk = dd.chunk;
    o->rebuild_stride = dd.rebuild_stride;
    o->bypass_accept = dd.bypass_accept;
    o->sinks = dd.sinks;
    o->window = dd.window;
    o->reps = 3;
    o->output = "md";
    o->bw_mib = 1024;
    o->bench_fill = "text";
    o->host = "127.0.0.1";
    o->port = 8080;
    o->parallel = 2;
    o->queue = 16;
    o->timeout = 600;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            cli_print_help(cmd, cmd_name, usage);
            return 1;
        }
        if (a[0] == '-' && a[1] != '\0') {
            const char *eq = strchr(a, '=');
            size_t nlen = eq && a[1] == '-' ? (size_t)(eq - a) : strlen(a);
            const opt_def *d = NULL;
            for (size_t k = 0; k < sizeof k_opts / sizeof k_opts[0] && !d; k++) {
                const opt_def *c = &k_opts[k];
                if (((c->shrt && strlen(c->shrt) == nlen && strncmp(a, c->shrt, nlen) == 0) ||
                     (strlen(c->lng) == nlen && strncmp(a, c->lng, nlen) == 0)) &&
                    (c->cmds & cmd))
                    d = c;
            }
            if (!d) {
                fprintf(stderr, "triforce %s: unknown option '%.*s' (see triforce %s --help)\n", cmd_name, (int)nlen,
                        a, cmd_name);
                return -1;
            }
            const char *val = NULL;
            if (d->kind != OPT_FLAG) {
                if (eq && a[1] == '-') val = eq + 1;
                else if (i + 1 < argc) val = argv[++i];
                else {
                    fprintf(stderr, "triforce %s: option %s needs a value (%s)\n", cmd_name, d->lng, d->metavar);
                    return -1;
                }
            }
            if (set_value(o, d, d->lng, val) != 0) return -1;
            continue;
        }
        if (o->n_pos >= max_pos) {
            fprintf(stderr, "triforce %s: unexpected argument '%s' (see triforce %s --help)\n", cmd_name, a,
                    cmd_name);
            return -1;
        }
        o->pos[o->n_pos++] = a;
    }
    /* More threads than CPUs only adds waiting at every barrier (-t 1024 on
     * two cores took 17 s for eight tokens): use the CPUs there are. */
    const int cpus = tf_cpu_count();
    if (o->n_threads > cpus) {
        fprintf(stderr, "triforce %s: warning: -t %d is more than the %d CPUs here; using %d\n", cmd_name,
                o->n_threads, cpus, cpus);
        o->n_threads = cpus;
    }
    if (cmd != CMD_GEN_MODEL && (o->rope_scaling || o->rope_factor != 0)) { /* gen-model writes them instead */
        if (!o->rope_scaling || o->rope_factor == 0) {
            fprintf(stderr, "triforce %s: give --rope-scaling KIND and --rope-factor F together\n", cmd_name);
            return -1;
        }
        if (strcmp(o->rope_scaling, "linear") != 0 && strcmp(o->rope_scaling, "yarn") != 0) {
            fprintf(stderr, "triforce %s: --rope-scaling '%s': expected linear or yarn\n", cmd_name, o->rope_scaling);
            return -1;
        }
        if (!(o->rope_factor > 1.0f)) {
            fprintf(stderr, "triforce %s: --rope-factor %g: expected more than 1 (and at most 64)\n", cmd_name,
                    (double)o->rope_factor);
            return -1;
        }
    }
    if (o->chat_template) {
        static const char *const fams[] = {"chatml",   "llama3",         "llama2",   "mistral",
                                           "zephyr",   "deepseek",       "deepseek-coder", "deepseek3"};
        bool known = false;
        for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++) known |= strcmp(o->chat_template, fams[i]) == 0;
        if (!known) {
            fprintf(stderr,
                    "triforce %s: --chat-template '%s': expected chatml, llama3, llama2, mistral, zephyr, deepseek, "
                    "deepseek-coder or deepseek3\n",
                    cmd_name, o->chat_template);
            return -1;
        }
    }
    tf_kv_type kt;
    if (!tf_kv_type_parse(o->kv_type, &kt)) {
        fprintf(stderr, "triforce %s: --kv-type '%s': expected f16, f32, q8_0 or q4_0\n", cmd_name, o->kv_type);
        return -1;
    }
    tf_middle mid;
    if (!tf_middle_from_name(o->middle, &mid)) {
        fprintf(stderr, "triforce %s: --middle '%s': expected always, auto or never\n", cmd_name, o->middle);
        return -1;
    }
    tf_coupling cpl;
    if (!tf_coupling_from_name(o->coupling, &cpl)) {
        fprintf(stderr, "triforce %s: --coupling '%s': expected keyed or residual\n", cmd_name, o->coupling);
        return -1;
    }
    return 0;
}

int32_t *cli_tokenize(const tf_model *m, const char *text, size_t len, bool add_special, bool parse_special, size_t *n) {
    size_t cap = len + 16;
    *n = 0;
    for (int pass = 0; pass < 2; pass++) {
        int32_t *ids = malloc(sizeof(int32_t) * cap);
        if (!ids) return NULL;
        tf_status st = tf_model_tokenize(m, text, len, add_special, parse_special, ids, cap, n);
        if (st == TF_OK) return ids;
        free(ids);
        if (st != TF_ERR_RANGE || *n <= cap) break;
        cap = *n;
    }
    *n = 0;
    return NULL;
}

char *cli_read_text(const char *path, size_t *len) {
    char *buf;
    tf_err err = {0};
    tf_status st = strcmp(path, "-") == 0 ? tf_read_stream(stdin, "standard input", &buf, len, &err)
                                          : tf_read_file(path, &buf, len, &err);
    if (st != TF_OK) {
        fprintf(stderr, "triforce: %s\n", err.msg);
        return NULL;
    }
    return buf;
}

char *cli_prompt_text(const cli_opts *o, size_t *len) {
    if ((o->prompt != NULL) == (o->file != NULL)) {
        fprintf(stderr, "triforce: give the prompt with exactly one of -p TEXT or -f FILE\n");
        return NULL;
    }
    if (o->prompt) {
        *len = strlen(o->prompt);
        return strdup(o->prompt);
    }
    return cli_read_text(o->file, len);
}

void cli_log(void *ud, tf_log_level level, const char *msg) {
    static const char *const names[] = {"debug", "info", "warning", "error"};
    (void)ud;
    cli_progress_break();
    fprintf(stderr, "triforce: %s: %s\n", names[level], msg);
}

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Whether a progress line on the terminal has no newline yet. This is the state of the
 * process's stderr, which is process-wide itself; only the tool's main thread prints. */
static bool g_progress_line_open;

void cli_progress_break(void) {
    if (!g_progress_line_open) return;
    fputc('\n', stderr);
    g_progress_line_open = false;
}

cli_progress cli_progress_make(const char *label) {
    return (cli_progress){.label = label, .tty = isatty(STDERR_FILENO) == 1, .tenth = 0, .t_last = cli_now()};
}

void cli_progress_show(cli_progress *p, uint64_t done, uint64_t total, const char *fmt, ...) {
    const bool end = done >= total;
    if (!p->tty) {
        const int tenth = total ? (int)(10.0 * (double)done / (double)total) : 10;
        const double now = cli_now();
        if (!(tenth > p->tenth || (!end && now - p->t_last >= CLI_PROGRESS_SECONDS))) return;
        p->tenth = tenth > p->tenth ? tenth : p->tenth;
        p->t_last = now;
    }
    va_list ap;
    va_start(ap, fmt);
    if (p->tty) fputc('\r', stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (!p->tty || end) {
        fputc('\n', stderr);
        g_progress_line_open = false;
    } else {
        g_progress_line_open = true;
    }
}

static volatile sig_atomic_t g_interrupted;

static void on_interrupt(int sig) {
    (void)sig;
    g_interrupted = 1;
}

void cli_catch_interrupts(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

bool cli_interrupted(void) { return g_interrupted != 0; }

bool cli_progress_percent(void *ud, uint64_t done, uint64_t total) {
    cli_progress *p = ud;
    cli_progress_show(p, done, total, "%s: %3.0f%%", p->label, total ? 100.0 * (double)done / (double)total : 100.0);
    return !g_interrupted;
}

bool cli_check_output(const char *cmd, const char *out, const char *in) {
    tf_err err = {0};
    if (tf_out_path_check(out, in, &err) == TF_OK) return true;
    fprintf(stderr, "triforce %s: %s\n", cmd, err.msg);
    return false;
}

bool cli_load_models(const cli_opts *o, const char *cmd, const tf_model_params *mp, cli_progress *line,
                     tf_model **model, tf_model **draft) {
    char err[1024];
    *model = *draft = NULL;
    if (tf_model_load_file(model, o->model, mp, err, sizeof err) != TF_OK) {
        cli_progress_break();
        fprintf(stderr, "triforce: %s\n", err);
        return false;
    }
    *line = cli_progress_make(NULL);
    if (!cli_extend_context(cmd, o, *model)) return false;
    if (o->draft && tf_model_load_file(draft, o->draft, mp, err, sizeof err) != TF_OK) {
        cli_progress_break();
        fprintf(stderr, "triforce: %s\n", err);
        return false;
    }
    if (o->draft_layers && tf_model_layer_view(draft, *model, o->draft_layers, err, sizeof err) != TF_OK) {
        fprintf(stderr, "triforce %s: --draft-layers: %s\n", cmd, err);
        return false;
    }
    return true;
}

bool cli_extend_context(const char *cmd, const cli_opts *o, tf_model *model) {
    if (!o->rope_scaling) return true; /* cli_parse checked the pair */
    char err[512];
    if (tf_model_extend_context(model, o->rope_scaling, o->rope_factor, err, sizeof err) == TF_OK) return true;
    fprintf(stderr, "triforce %s: --rope-scaling %s --rope-factor %g: %s\n", cmd, o->rope_scaling,
            (double)o->rope_factor, err);
    return false;
}

bool cli_check_decoder_params(const char *cmd, const tf_decoder_params *dp) {
    char err[512];
    if (tf_decoder_params_check(dp, err, sizeof err) == TF_OK) return true;
    fprintf(stderr, "triforce %s: %s\n", cmd, err);
    return false;
}

tf_kv_type cli_kv_type(const cli_opts *o) {
    tf_kv_type t = TF_KV_F16;
    tf_kv_type_parse(o->kv_type, &t);
    return t;
}

int32_t cli_batch(const cli_opts *o, tf_device dev) {
    return o->n_batch > 0 ? o->n_batch : dev == TF_DEVICE_CUDA ? TF_BATCH_CUDA : TF_BATCH_CPU;
}

bool cli_has_draft(const cli_opts *o) { return o->draft || o->draft_layers || o->draft_lookup; }

const char *cli_draft_name(const cli_opts *o) {
    return o->draft ? o->draft : o->draft_layers ? "(the target's first layers)" : o->draft_lookup ? "(text lookup)" : "";
}

bool cli_check_draft(const char *cmd, const cli_opts *o) {
    if ((o->draft != NULL) + (o->draft_layers != 0) + (o->draft_lookup != 0) <= 1) return true;
    fprintf(stderr, "triforce %s: give one of -md DRAFT, --draft-layers K and --draft-lookup N, not several\n", cmd);
    return false;
}

bool cli_mode_has_draft(const char *cmd, const cli_opts *o, tf_decode_mode mode) {
    if (!(mode == TF_MODE_DRAFT || mode == TF_MODE_STREAMING || mode == TF_MODE_TRIFORCE) || cli_has_draft(o))
        return true;
    fprintf(stderr, "triforce %s: --mode %s needs a draft: -md DRAFT.gguf, --draft-layers K or --draft-lookup N\n", cmd,
            tf_decode_mode_name(mode));
    return false;
}

bool cli_decode_mode(const char *cmd, const cli_opts *o, tf_decode_mode *mode) {
    if (!cli_check_draft(cmd, o)) return false;
    *mode = cli_has_draft(o) ? TF_MODE_TRIFORCE : TF_MODE_AR;
    if (o->mode && !tf_decode_mode_from_name(o->mode, mode)) {
        fprintf(stderr, "triforce %s: --mode '%s': expected ar, draft, retrieval, streaming or triforce\n", cmd, o->mode);
        return false;
    }
    return cli_mode_has_draft(cmd, o, *mode);
}

bool cli_text_is_ars(const cli_opts *o) { return o->temp <= 0 || strcmp(o->coupling, "keyed") == 0; }

int cli_gamma2(const cli_opts *o) {
    tf_decoder_params dp = tf_decoder_default_params();
    dp.gamma2 = o->gamma2;
    dp.sampling.temp = o->temp;
    return tf_decoder_gamma2(&dp);
}

tf_decoder_params cli_decoder_params(const cli_opts *o) {
    tf_decoder_params dp = tf_decoder_default_params();
    dp.lookup = o->draft_lookup;
    dp.gamma1 = o->gamma1;
    dp.gamma2 = o->gamma2;
    dp.budget = o->budget;
    dp.chunk = o->chunk;
    dp.recent = 2 * o->chunk > 16 ? 2 * o->chunk : 16;
    dp.rebuild_stride = o->rebuild_stride;
    dp.bypass_accept = o->bypass_accept;
    tf_middle_from_name(o->middle, &dp.middle); /* checked with the other options */
    tf_coupling_from_name(o->coupling, &dp.coupling);
    dp.sinks = o->sinks;
    dp.window = o->window;
    dp.n_threads = o->n_threads;
    dp.n_batch = o->n_batch;
    dp.kv_type = cli_kv_type(o);
    dp.isa = o->isa;
    dp.sampling = (tf_sampler_params){.temp = o->temp, .top_k = o->top_k, .top_p = o->top_p, .min_p = o->min_p,
                                      .seed = 1};
    return dp;
}
