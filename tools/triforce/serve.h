/*
 * serve.h — `triforce serve`: an OpenAI-compatible HTTP server.
 *
 * Three parts share these types:
 *   serve_http.c   libmicrohttpd: routing, API key, body limits, responses,
 *                  server-sent events, client disconnects;
 *   serve_api.c    the OpenAI request schemas parsed (and refused) into a
 *                  job, and the response objects built from one;
 *   serve_slots.c  slots (one sequence each, sharing the loaded models), the
 *                  bounded queue, the worker threads that run jobs, prompt
 *                  cache reuse, stop strings and the metrics.
 *
 * A job is created by the connection thread, queued, run by a slot's worker
 * and read by the connection thread (streamed or whole). Its text buffer and
 * state are guarded by the job's mutex; the worker signals `cond` whenever it
 * appends text or finishes. The connection drops its reference when the
 * response is done or the client is gone (then `cancelled` is set, and the
 * worker stops within one decoding step); the last reference frees it.
 */
#ifndef TF_SERVE_H
#define TF_SERVE_H

#include "cli.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SERVE_MAX_STOP 4           /* OpenAI allows up to 4 stop sequences */
#define SERVE_BODY_MAX (8u << 20)  /* request bodies beyond this get 413 */

typedef enum { JOB_COMPLETION, JOB_CHAT } job_kind;
typedef enum { JOB_QUEUED, JOB_RUNNING, JOB_DONE } job_state;

typedef struct serve_job {
    /* the request, fixed once queued */
    job_kind kind;
    bool stream, include_usage;
    int32_t *prompt; /* tokens */
    int32_t n_prompt;
    int32_t max_tokens;
    tf_decoder_params dp; /* mode, gammas, sampling (seed included) */
    char *stop[SERVE_MAX_STOP];
    int n_stop;
    char id[48];
    int64_t created;
    /* shared with the worker, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cond;
    job_state state;
    bool cancelled;      /* the client is gone or the server stops */
    char *text;          /* generated text released so far (valid UTF-8) */
    size_t n_text, cap_text;
    int32_t n_gen;       /* tokens generated */
    int32_t n_reused;    /* prompt positions reused from a slot's cache */
    const char *finish;  /* "stop", "length" or NULL */
    int http_error;      /* set when the job failed: status and message */
    char error[512];
    double t_queued, t_first, t_done; /* cli_now() seconds; t_first 0: no token generated */
    double decode_s;     /* seconds from the end of the prefill to the last token */
    int refs;            /* the connection and the queue/worker */
} serve_job;

#define SERVE_HIST_BOUNDS 16 /* at most, besides +Inf */

/* A Prometheus histogram: counts per bucket (not cumulative; the last one
 * is above every bound), their sum and count. */
typedef struct serve_hist {
    const double *le; /* upper bounds, ascending (n_le of them) */
    int n_le;
    uint64_t n[SERVE_HIST_BOUNDS + 1];
    double sum;
    uint64_t count;
} serve_hist;

/* Every accepted request (requests) ends as exactly one of completed,
 * requests_failed and cancelled; until then it is queued or in a busy slot.
 * The histograms observe each completed request (ttft: those that generated
 * a token). All under serve_ctx.mu. */
typedef struct serve_metrics {
    uint64_t requests, completed, requests_failed, rejected_busy, cancelled;
    uint64_t prompt_tokens, reused_tokens, gen_tokens;
    double decode_seconds;
    serve_hist ttft, duration, decode_rate; /* seconds, seconds, tokens/s */
    int64_t level_verified[3], level_accepted[3];
} serve_metrics;

typedef struct serve_slot {
    struct serve_ctx *ctx;
    int index;
    pthread_t thread;
    tf_decoder *dec; /* the last finished request's decoder: its cache is reused */
    serve_job *job;  /* running, or NULL */
    double last_used;
} serve_slot;

typedef struct serve_ctx {
    const cli_opts *o;
    tf_model *model, *draft;
    tf_model_info info;
    char model_id[128];
    const char *api_key; /* NULL: none required */
    int n_slots, queue_max;
    serve_slot *slots;
    /* queue and slots, under mu; workers wait on cond */
    pthread_mutex_t mu;
    pthread_cond_t cond;
    serve_job **queue;
    int n_queue;
    bool stopping;
    serve_metrics m;
    int64_t next_id;
    double t_start;
} serve_ctx;

/* serve_slots.c */
int serve_slots_start(serve_ctx *c);
/* Queue a job (takes a reference). 0, or 503 when the queue is full / stopping. */
int serve_submit(serve_ctx *c, serve_job *j);
/* Cancel everything and join the workers. */
void serve_slots_stop(serve_ctx *c);
serve_job *serve_job_new(void);
void serve_job_release(serve_job *j);
/* Prometheus text of the metrics (malloc'ed). */
char *serve_metrics_text(serve_ctx *c);
/* {"status": ..., slots and queue} (malloc'ed). */
char *serve_health_json(serve_ctx *c);

/* serve_api.c: parse a request body into j (status 0) or return the HTTP
 * status with a message in err (400 naming the field). */
int serve_parse_request(serve_ctx *c, job_kind kind, const char *body, size_t len, serve_job *j, char *err,
                        size_t errsz);
/* The whole response object of a finished job (malloc'ed JSON). */
char *serve_response_json(const serve_ctx *c, const serve_job *j);
/* One server-sent event chunk for `text` (finish NULL while streaming). */
char *serve_chunk_json(const serve_ctx *c, const serve_job *j, const char *text, size_t n, const char *finish,
                       bool first);
char *serve_usage_chunk_json(const serve_ctx *c, const serve_job *j);
/* {"error": {"message": ..., "type": ..., "code": status}} (malloc'ed). */
char *serve_error_json(int status, const char *msg);
/* POST /tokenize and /detokenize: the response body, or NULL with status and err. */
char *serve_tokenize(serve_ctx *c, const char *body, size_t len, bool detok, int *status, char *err, size_t errsz);
char *serve_models_json(const serve_ctx *c);

/* serve_http.c: run until SIGINT/SIGTERM; returns the exit status. */
int serve_run(serve_ctx *c, const char *host, int port, int timeout_s);

#endif
