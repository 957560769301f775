/* main.c — the `triforce` command: dispatches to subcommands. */
#include "cli.h"

#include "backend/cpu/attn.h"
#include "backend/cpu/quant.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command k_commands[] = {
    {"generate", cmd_generate, "generate a continuation of a prompt, streamed to stdout"},
    {"info", cmd_info, "describe a model: architecture, shapes, tensor types, tokenizer, KV bytes"},
    {"tokenize", cmd_tokenize, "print the tokens of a text"},
    {"bench", cmd_bench, "benchmark prefill, k-row passes and every decoding mode against the measured memory bandwidth"},
    {"perplexity", cmd_perplexity, "perplexity of a text (llama.cpp's convention)"},
    {"quantize", cmd_quantize, "convert an F32/F16/BF16 GGUF to another weight type (triforce quantize --help lists them)"},
    {"convert", cmd_convert, "convert a Hugging Face checkpoint directory to GGUF (F32/F16/BF16 or quantized)"},
    {"eval", cmd_eval, "measure a model for TriForce: middle-level acceptance (accept), passkey retrieval (passkey)"},
    {"serve", cmd_serve, "an OpenAI-compatible HTTP server: completions, chat, streaming, prompt-cache reuse"},
    {"gen-model", cmd_gen_model, "write a random-weight llama or qwen2 GGUF of any shape (for tests and timing)"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: triforce <command> [options]   (triforce <command> --help for its options)\n"
               "       triforce --version               (the library's version and the CPU kernels it runs)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
        fprintf(f, "  %-12s %s\n", k_commands[i].name, k_commands[i].summary);
}

/* Whatever a command printed must have arrived: a failed write to standard
 * output (a full disk, a closed pipe) is reported and fails the run; one to
 * standard error cannot be reported, but still fails it. */
static int finish(const char *what, int rc) {
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "triforce %s: cannot write the output to standard output: %s\n", what,
                errno ? strerror(errno) : "write error");
        return rc ? rc : 1;
    }
    if (fflush(stderr) != 0 || ferror(stderr)) return rc ? rc : 1;
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return finish("--help", 0);
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("triforce %s\n", tf_version());
        /* what this CPU runs (TF_NO_AMX=1 keeps AMX off: docs/LIBRARY.md) */
        printf("cpu: matrix kernels %s, attention %s\n", tf_cpu_kernels_get(TF_ISA_BEST)->isa,
               tf_attn_kernel_name(tf_attn_kernel_for(TF_ISA_BEST)));
        return finish("--version", 0);
    }
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
        if (strcmp(argv[1], k_commands[i].name) == 0) {
            return finish(argv[1], k_commands[i].run(argc - 2, argv + 2));
        }
    fprintf(stderr, "triforce: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
