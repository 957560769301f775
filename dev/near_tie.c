/*
 * near_tie.c — where two engines' greedy texts part, was the reference's
 * choice a near-tie? Greedy decoding on the CPU (tf_context, the engine's
 * forward pass) for N tokens after a prompt, then the float64 reference
 * forward (tests/common/ref_forward.c: dequantized weights, textbook
 * attention, written apart from the engine) over the prompt and those
 * tokens; for each generated position: the engine's token, the reference's
 * two best tokens, their gap, and how far the engine's token and the one
 * named by --other (the token another engine chose) fall below the
 * reference's best, relative to the row's largest |logit| (the measure
 * test_cuda's near-tie rule uses, 1e-3).
 *
 * Build (after `make lib`, from the repository root):
 *   cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -Itests/common dev/near_tie.c \
 *      tests/common/ref_forward.c build/libtriforce.a -lcjson -lpcre2-8 -lutf8proc -lm -lpthread \
 *      -o build/near_tie
 * Run:
 *   build/near_tie MODEL TEXT_FILE BYTES N [OTHER_TEXT]
 * BYTES: the prompt is the file's first BYTES bytes (as `head -c BYTES`); N:
 * tokens to generate; OTHER_TEXT: a word or piece the other engine produced
 * where the texts part (e.g. " ladies"), looked up by its first token. The
 * reference is single-threaded and float64: minutes for a few thousand tokens
 * of a 135M model (about 20 for SmolLM2 at 7.6K tokens on this 2-core VM).
 */
#include "ref_forward.h"
#include "triforce.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void piece(const tf_model *m, int32_t t, char *buf, size_t cap) {
    int32_t n = tf_model_token_to_piece(m, t, true, buf, (int32_t)cap - 1);
    buf[n > 0 && n < (int32_t)cap ? n : 0] = 0;
    for (char *p = buf; *p; p++)
        if (*p == '\n') *p = '|';
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s MODEL TEXT_FILE BYTES N [OTHER_TEXT]\n", argv[0]);
        return 2;
    }
    const long bytes = atol(argv[3]);
    const int n_gen = atoi(argv[4]);
    char err[512];
    tf_model *m;
    tf_model_params mp = tf_model_default_params();
    if (tf_model_load_file(&m, argv[1], &mp, err, sizeof err) != TF_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    FILE *f = fopen(argv[2], "rb");
    if (!f) {
        perror(argv[2]);
        return 1;
    }
    char *text = malloc((size_t)bytes + 1);
    size_t len = fread(text, 1, (size_t)bytes, f);
    fclose(f);
    size_t cap = len + 16, n_prompt = 0;
    int32_t *toks = malloc(sizeof(int32_t) * (cap + (size_t)n_gen));
    if (tf_model_tokenize(m, text, len, true, false, toks, cap, &n_prompt) != TF_OK) {
        fprintf(stderr, "tokenize failed\n");
        return 1;
    }
    int32_t other = -1;
    if (argc > 5) {
        int32_t ot[64];
        size_t no = 0;
        if (tf_model_tokenize(m, argv[5], strlen(argv[5]), false, false, ot, 64, &no) == TF_OK && no > 0) other = ot[0];
    }
    tf_model_info info;
    tf_model_get_info(m, &info);
    const int32_t V = info.n_vocab;
    tf_context_params cp = tf_context_default_params();
    cp.n_ctx = (int32_t)(n_prompt + (size_t)n_gen + 8);
    tf_context *ctx;
    if (tf_context_init(&ctx, m, &cp, err, sizeof err) != TF_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    printf("prompt: %zu tokens; engine greedy on the CPU for %d tokens\n", n_prompt, n_gen);
    if (tf_context_eval(ctx, toks, (int32_t)n_prompt, NULL) != TF_OK) {
        fprintf(stderr, "eval: %s\n", tf_context_error(ctx));
        return 1;
    }
    for (int i = 0; i < n_gen; i++) {
        const float *lg = tf_context_logits(ctx);
        int32_t best = 0;
        for (int32_t v = 1; v < V; v++)
            if (lg[v] > lg[best]) best = v;
        toks[n_prompt + i] = best;
        if (i + 1 < n_gen && tf_context_eval(ctx, &best, 1, NULL) != TF_OK) {
            fprintf(stderr, "eval: %s\n", tf_context_error(ctx));
            return 1;
        }
    }
    const int n_all = (int)n_prompt + n_gen;
    printf("float64 reference over %d tokens...\n", n_all - 1);
    fflush(stdout);
    double *ref = ref_forward((const struct tf_model *)m, toks, n_all - 1);
    printf("%4s  %-14s %-14s %-14s %10s %10s %10s\n", "pos", "engine", "ref best", "ref 2nd", "gap 1-2", "engine", "other");
    for (int i = 0; i < n_gen; i++) {
        const double *row = ref + (size_t)(n_prompt - 1 + (size_t)i) * (size_t)V;
        int32_t b1 = 0, b2 = -1;
        double amax = 0;
        for (int32_t v = 0; v < V; v++) {
            if (fabs(row[v]) > amax) amax = fabs(row[v]);
            if (v == 0) continue;
            if (row[v] > row[b1]) b2 = b1, b1 = v;
            else if (b2 < 0 || row[v] > row[b2]) b2 = v;
        }
        char pe[32], p1[32], p2[32];
        const int32_t e = toks[n_prompt + i];
        piece(m, e, pe, sizeof pe), piece(m, b1, p1, sizeof p1), piece(m, b2, p2, sizeof p2);
        printf("%4d  %-14s %-14s %-14s %10.2e %10.2e", i, pe, p1, p2, (row[b1] - row[b2]) / amax,
               (row[b1] - row[e]) / amax);
        if (other >= 0) printf(" %10.2e", (row[b1] - row[other]) / amax);
        printf("%s\n", e == b1 ? "" : "   <- engine differs from the reference");
    }
    free(ref);
    tf_context_free(ctx);
    tf_model_close(m);
    free(toks), free(text);
    return 0;
}
