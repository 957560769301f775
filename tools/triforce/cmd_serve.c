/* cmd_serve.c — `triforce serve`: the OpenAI-compatible server (serve.h). */
#include "serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *k_usage =
    "-m MODEL [-md DRAFT | --draft-layers K | --draft-lookup N] [--host ADDR] [--port N] [--parallel N] [--api-key KEY] [options]\n\n"
    "endpoints: POST /v1/completions, POST /v1/chat/completions (OpenAI schemas; stream: true sends\n"
    "server-sent events), GET /v1/models, GET /health, GET /metrics (Prometheus), POST /tokenize,\n"
    "POST /detokenize. The flags below set the defaults of fields a request leaves out. See docs/SERVER.md";

int cmd_serve(int argc, char **argv) {
    cli_opts o;
    int r = cli_parse(&o, CMD_SERVE, "serve", k_usage, 0, argc, argv);
    if (r) return r > 0 ? 0 : 2;
    if (!o.model) {
        fprintf(stderr, "triforce serve: -m MODEL is required (see --help)\n");
        return 2;
    }
    if (o.n_predict < 1) {
        fprintf(stderr, "triforce serve: -n %d: the default max_tokens must be at least 1\n", o.n_predict);
        return 2;
    }
    tf_decoder_params dp = cli_decoder_params(&o);
    if (!cli_decode_mode("serve", &o, &dp.mode)) return 2;
    dp.n_ctx = o.n_ctx;
    dp.device = TF_DEVICE_CPU;
    if (!cli_check_decoder_params("serve", &dp)) return 2;
    if (o.api_key && !o.api_key[0]) {
        fprintf(stderr, "triforce serve: --api-key is empty\n");
        return 2;
    }
    tf_model_params mp = tf_model_default_params();
    mp.log_fn = cli_log;
    mp.log_level = o.verbose ? TF_LOG_DEBUG : TF_LOG_WARN;
    cli_progress line = cli_progress_make(NULL);
    serve_ctx c = {.o = &o, .api_key = o.api_key, .n_slots = o.parallel, .queue_max = o.queue, .t_start = 0};
    if (!cli_load_models(&o, "serve", &mp, &line, &c.model, &c.draft)) {
        tf_model_close(c.draft);
        tf_model_close(c.model);
        return 1;
    }
    tf_model_get_info(c.model, &c.info);
    int rc = 1;
    if (!c.info.has_tokenizer) {
        fprintf(stderr, "triforce serve: %s has no tokenizer; the server needs one\n", o.model);
        goto done;
    }
    if (o.n_ctx > c.info.n_ctx_train)
        fprintf(stderr, "triforce serve: warning: context %d is longer than the model's trained context of %d\n",
                o.n_ctx, c.info.n_ctx_train);
    const char *base = strrchr(o.model, '/');
    base = base && base[1] ? base + 1 : o.model;
    snprintf(c.model_id, sizeof c.model_id, "%s", base);
    size_t n = strlen(c.model_id);
    if (n > 1 && c.model_id[n - 1] == '/') c.model_id[n - 1] = '\0';
    c.t_start = (double)time(NULL);
    fprintf(stderr, "triforce serve: model %s, mode %s, context %d, %d threads per slot\n", c.model_id,
            tf_decode_mode_name(dp.mode), o.n_ctx > 0 ? o.n_ctx : c.info.n_ctx_train,
            o.n_threads > 0 ? o.n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN));
    rc = serve_run(&c, o.host, o.port, o.timeout);
done:
    tf_model_close(c.draft);
    tf_model_close(c.model);
    return rc;
}
