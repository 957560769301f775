/*
 * cmd_perplexity.c — `triforce perplexity`, following llama.cpp's perplexity
 * tool so figures are comparable: the text is tokenized once with BOS, cut
 * into non-overlapping windows of CTX tokens, each window's first token is
 * replaced by BOS, the cache is cleared per window, and only the second half
 * of each window is scored (token j+1 predicted from the logits at j, for
 * j in [CTX/2, CTX-1)).
 */
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const char *k_usage = "-m MODEL -f FILE [-c CTX] [options]";

int cmd_perplexity(int argc, char **argv) {
    cli_opts o;
    int r = cli_parse(&o, CMD_PERPLEXITY, "perplexity", k_usage, 0, argc, argv);
    if (r) return r > 0 ? 0 : 2;
    if (!o.model || !o.file) {
        fprintf(stderr, "triforce perplexity: -m MODEL and -f FILE are required (see --help)\n");
        return 2;
    }
    tf_device device = TF_DEVICE_CPU; /* reproducible figures unless asked */
    if (o.device && !tf_device_from_name(o.device, &device)) {
        fprintf(stderr, "triforce perplexity: --device '%s': expected cuda, cpu or auto\n", o.device);
        return 2;
    }
    int n_ctx = o.n_ctx > 0 ? o.n_ctx : 512;
    if (n_ctx < 4) {
        fprintf(stderr, "triforce perplexity: -c %d: expected at least 4\n", n_ctx);
        return 2;
    }
    size_t len;
    char *text = cli_read_text(o.file, &len);
    if (!text) return 2;
    tf_model_params mp = tf_model_default_params();
    mp.log_fn = cli_log;
    mp.log_level = TF_LOG_WARN;
    char err[1024];
    tf_model *m;
    if (tf_model_load_file(&m, o.model, &mp, err, sizeof err) != TF_OK) {
        fprintf(stderr, "triforce: %s\n", err);
        free(text);
        return 1;
    }
    if (!cli_extend_context("perplexity", &o, m)) {
        tf_model_close(m);
        free(text);
        return 1;
    }
    int rc = 1;
    tf_context *ctx = NULL;
    float *logits = NULL;
    size_t n = 0;
    int32_t *toks = cli_tokenize(m, text, len, true, false, &n);
    tf_model_info info;
    tf_model_get_info(m, &info);
    if (!toks) {
        fprintf(stderr, "triforce: cannot tokenize %s\n", o.file);
        goto done;
    }
    size_t n_chunk = n / (size_t)n_ctx;
    if (n_chunk == 0) {
        fprintf(stderr, "triforce: %s has %zu tokens; need at least %d (one window of -c)\n", o.file, n, n_ctx);
        goto done;
    }
    tf_context_params cp = tf_context_default_params();
    cp.n_ctx = n_ctx;
    const int32_t nb = cli_batch(&o, device);
    cp.n_batch = nb < n_ctx ? nb : n_ctx;
    cp.n_threads = o.n_threads;
    cp.kv_type = cli_kv_type(&o);
    cp.logits_all = true;
    cp.isa = o.isa;
    if (tf_context_init_on(&ctx, m, &cp, device, err, sizeof err) != TF_OK) {
        fprintf(stderr, "triforce: %s\n", err);
        goto done;
    }
    logits = malloc(sizeof(float) * (size_t)n_ctx * info.n_vocab);
    if (!logits) {
        fprintf(stderr, "triforce: out of memory for %d x %d logits\n", n_ctx, info.n_vocab);
        goto done;
    }
    fprintf(stderr, "perplexity: %zu tokens, %zu windows of %d, scoring the second half of each\n", n, n_chunk,
            n_ctx);
    double nll = 0, nll2 = 0;
    long count = 0;
    int first = n_ctx / 2;
    double t0 = cli_now();
    int32_t bos = tf_model_bos(m);
    for (size_t c = 0; c < n_chunk; c++) {
        int32_t *w = toks + c * (size_t)n_ctx;
        int32_t saved = w[0];
        if (bos >= 0) w[0] = bos;
        tf_context_truncate(ctx, 0);
        tf_status st = tf_context_eval(ctx, w, n_ctx, logits);
        w[0] = saved;
        if (st != TF_OK) {
            fprintf(stderr, "triforce: %s\n", tf_context_error(ctx));
            goto done;
        }
        for (int j = first; j < n_ctx - 1; j++) {
            const float *lg = logits + (size_t)j * info.n_vocab;
            double mx = -INFINITY, sum = 0;
            for (int v = 0; v < info.n_vocab; v++) mx = lg[v] > mx ? lg[v] : mx;
            for (int v = 0; v < info.n_vocab; v++) sum += exp(lg[v] - mx);
            double lp = lg[w[j + 1]] - mx - log(sum);
            nll -= lp;
            nll2 += lp * lp;
            count++;
        }
        printf("[%zu]%.4f,", c + 1, exp(nll / count));
        fflush(stdout);
    }
    double mean = nll / count, var = nll2 / count - mean * mean;
    double ppl = exp(mean), se = var > 0 ? ppl * sqrt(var / (count - 1 > 0 ? count - 1 : 1)) : 0;
    printf("\n");
    fprintf(stderr, "scored %ld tokens in %.2f s (%.1f tok/s evaluated)\n", count, cli_now() - t0,
            (double)n_chunk * n_ctx / (cli_now() - t0));
    printf("estimate: +/- %.5f\n", se);
    printf("PPL = %.4f\n", ppl);
    rc = 0;
done:
    free(logits);
    free(toks);
    free(text);
    tf_context_free(ctx);
    tf_model_close(m);
    return rc;
}
