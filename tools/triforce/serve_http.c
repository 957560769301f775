/* serve_http.c — the HTTP side of `triforce serve` on libmicrohttpd (see serve.h). */
#include "serve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define KEEPALIVE_SECONDS 15 /* an SSE comment while a stream waits (a long prefill) */

typedef struct request {
    char *body;
    size_t n, cap;
    bool too_large;
    serve_job *job; /* a non-streamed completion this connection waits for */
} request;

static enum MHD_Result respond(struct MHD_Connection *conn, unsigned status, const char *type, char *body,
                               const char *hdr, const char *val) {
    if (!body) {
        body = serve_error_json(500, "out of memory");
        status = 500;
        type = "application/json";
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (hdr) MHD_add_response_header(r, hdr, val);
    enum MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result respond_error(struct MHD_Connection *conn, unsigned status, const char *msg, const char *hdr,
                                     const char *val) {
    return respond(conn, status, "application/json", serve_error_json((int)status, msg), hdr, val);
}

/* Constant-time comparison of the bearer token with the key. */
static bool key_ok(const serve_ctx *c, struct MHD_Connection *conn) {
    if (!c->api_key) return true;
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncmp(h, "Bearer ", 7) != 0) return false;
    const char *k = h + 7;
    size_t lk = strlen(k), lw = strlen(c->api_key);
    unsigned char diff = (unsigned char)(lk != lw);
    for (size_t i = 0; i < lw; i++) diff |= (unsigned char)(c->api_key[i] ^ (i < lk ? k[i] : 0));
    return diff == 0;
}

/* ---- streams ---- */

typedef struct stream {
    serve_ctx *c;
    serve_job *j;
    struct MHD_Connection *conn; /* to notice a client that has closed its end */
    size_t sent_text;
    bool sent_first, done;
    char *pend;
    size_t n_pend, off;
} stream;

static void stream_put(stream *s, const char *data) {
    size_t n = strlen(data);
    char *p = realloc(s->pend, s->n_pend + n + 1);
    if (!p) return;
    memcpy(p + s->n_pend, data, n);
    s->pend = p;
    s->n_pend += n;
}

static void stream_event(stream *s, char *json) {
    if (!json) return;
    stream_put(s, "data: ");
    stream_put(s, json);
    stream_put(s, "\n\n");
    free(json);
}

/* Whether the client closed its end (a peek that reads end-of-file). */
static bool client_gone(struct MHD_Connection *conn) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    char b;
    ssize_t r = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream *s = cls;
    if (s->off == s->n_pend) {
        free(s->pend);
        s->pend = NULL;
        s->n_pend = s->off = 0;
        if (s->done) return MHD_CONTENT_READER_END_OF_STREAM;
        serve_job *j = s->j;
        pthread_mutex_lock(&j->mu);
        if (j->state != JOB_DONE && client_gone(s->conn)) { /* the request is cancelled (stream_free) */
            pthread_mutex_unlock(&j->mu);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        while (!s->n_pend && !s->done) {
            bool timed_out = false;
            while (s->sent_first && j->n_text == s->sent_text && j->state != JOB_DONE) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_sec += KEEPALIVE_SECONDS;
                if (pthread_cond_timedwait(&j->cond, &j->mu, &ts) == ETIMEDOUT) {
                    timed_out = true;
                    break;
                }
            }
            if (!s->sent_first && j->kind == JOB_CHAT) stream_event(s, serve_chunk_json(s->c, j, "", 0, NULL, true));
            s->sent_first = true;
            if (j->n_text > s->sent_text) {
                stream_event(s, serve_chunk_json(s->c, j, j->text + s->sent_text, j->n_text - s->sent_text, NULL,
                                                 false));
                s->sent_text = j->n_text;
            }
            if (j->state == JOB_DONE) {
                if (j->http_error) {
                    stream_event(s, serve_error_json(j->http_error, j->error));
                } else {
                    stream_event(s, serve_chunk_json(s->c, j, "", 0, j->finish ? j->finish : "stop", false));
                    if (j->include_usage) stream_event(s, serve_usage_chunk_json(s->c, j));
                }
                stream_put(s, "data: [DONE]\n\n");
                s->done = true;
            } else if (!s->n_pend && timed_out) {
                stream_put(s, ": keep-alive\n\n");
            }
        }
        pthread_mutex_unlock(&j->mu);
        if (!s->n_pend) return MHD_CONTENT_READER_END_WITH_ERROR; /* out of memory */
    }
    size_t n = s->n_pend - s->off < max ? s->n_pend - s->off : max;
    memcpy(buf, s->pend + s->off, n);
    s->off += n;
    return (ssize_t)n;
}

/* The response is gone: finished, or the client left (the job is then cancelled). */
static void stream_free(void *cls) {
    stream *s = cls;
    pthread_mutex_lock(&s->j->mu);
    if (s->j->state != JOB_DONE) s->j->cancelled = true;
    pthread_mutex_unlock(&s->j->mu);
    serve_job_release(s->j);
    free(s->pend);
    free(s);
}

/* ---- completions ---- */

static enum MHD_Result completion(serve_ctx *c, struct MHD_Connection *conn, request *rq, job_kind kind) {
    serve_job *j = serve_job_new();
    if (!j) return respond_error(conn, 500, "out of memory", NULL, NULL);
    char err[1024];
    j->created = (int64_t)time(NULL);
    int st = serve_parse_request(c, kind, rq->body ? rq->body : "", rq->n, j, err, sizeof err);
    if (st) {
        serve_job_release(j);
        return respond_error(conn, (unsigned)st, st == 500 ? "out of memory" : err, NULL, NULL);
    }
    if (serve_submit(c, j) != 0) {
        serve_job_release(j);
        return respond_error(conn, 503, "all slots are busy and the queue is full; retry later", "Retry-After", "1");
    }
    if (j->stream) {
        stream *s = calloc(1, sizeof *s);
        if (!s) {
            pthread_mutex_lock(&j->mu);
            j->cancelled = true;
            pthread_mutex_unlock(&j->mu);
            serve_job_release(j);
            return respond_error(conn, 500, "out of memory", NULL, NULL);
        }
        s->c = c, s->j = j, s->conn = conn;
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, s, stream_free);
        if (!r) {
            stream_free(s);
            return MHD_NO;
        }
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        return ret;
    }
    rq->job = j; /* released when the request ends (cancelled if the client left first) */
    pthread_mutex_lock(&j->mu);
    while (j->state != JOB_DONE) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&j->cond, &j->mu, &ts);
        if (j->state != JOB_DONE && client_gone(conn)) {
            j->cancelled = true;
            pthread_mutex_unlock(&j->mu);
            return MHD_NO; /* nobody to answer */
        }
    }
    pthread_mutex_unlock(&j->mu);
    if (j->http_error) return respond_error(conn, (unsigned)j->http_error, j->error, NULL, NULL);
    return respond(conn, MHD_HTTP_OK, "application/json", serve_response_json(c, j), NULL, NULL);
}

/* ---- routing ---- */

typedef enum { R_HEALTH, R_MODELS, R_METRICS, R_COMPLETIONS, R_CHAT, R_TOKENIZE, R_DETOKENIZE, R_NONE } route;

static route find_route(const char *url, const char **method) {
    static const struct { const char *path, *method; route r; } k[] = {
        {"/health", "GET", R_HEALTH},           {"/v1/health", "GET", R_HEALTH},
        {"/v1/models", "GET", R_MODELS},        {"/models", "GET", R_MODELS},
        {"/metrics", "GET", R_METRICS},         {"/v1/completions", "POST", R_COMPLETIONS},
        {"/completions", "POST", R_COMPLETIONS}, {"/v1/chat/completions", "POST", R_CHAT},
        {"/chat/completions", "POST", R_CHAT},  {"/tokenize", "POST", R_TOKENIZE},
        {"/detokenize", "POST", R_DETOKENIZE},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (strcmp(url, k[i].path) == 0) {
            *method = k[i].method;
            return k[i].r;
        }
    return R_NONE;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    serve_ctx *c = cls;
    request *rq = *con_cls;
    if (!rq) {
        rq = calloc(1, sizeof *rq);
        if (!rq) return MHD_NO;
        *con_cls = rq;
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > SERVE_BODY_MAX) {
            char msg[128];
            snprintf(msg, sizeof msg, "the request body is %s bytes; at most %u are accepted", cl, SERVE_BODY_MAX);
            return respond_error(conn, 413, msg, NULL, NULL);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (rq->n + *upload_size > SERVE_BODY_MAX) {
            rq->too_large = true;
        } else if (!rq->too_large) {
            if (rq->n + *upload_size + 1 > rq->cap) {
                size_t nc = 2 * (rq->n + *upload_size + 1);
                char *p = realloc(rq->body, nc);
                if (!p) return MHD_NO;
                rq->body = p, rq->cap = nc;
            }
            memcpy(rq->body + rq->n, upload, *upload_size);
            rq->n += *upload_size;
            rq->body[rq->n] = '\0';
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (rq->too_large) {
        char msg[128];
        snprintf(msg, sizeof msg, "the request body is over %u bytes", SERVE_BODY_MAX);
        return respond_error(conn, 413, msg, NULL, NULL);
    }
    const char *want = NULL;
    route r = find_route(url, &want);
    if (r == R_NONE) {
        char msg[256];
        snprintf(msg, sizeof msg, "no such path: %.200s", url);
        return respond_error(conn, 404, msg, NULL, NULL);
    }
    if (strcmp(method, want) != 0) {
        char msg[128];
        snprintf(msg, sizeof msg, "method %.20s is not allowed here (expected %s)", method, want);
        return respond_error(conn, 405, msg, MHD_HTTP_HEADER_ALLOW, want);
    }
    if (r != R_HEALTH && !key_ok(c, conn))
        return respond_error(conn, 401, "missing or wrong API key (expected the header Authorization: Bearer KEY)",
                             MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    switch (r) {
    case R_HEALTH: return respond(conn, 200, "application/json", serve_health_json(c), NULL, NULL);
    case R_MODELS: return respond(conn, 200, "application/json", serve_models_json(c), NULL, NULL);
    case R_METRICS: return respond(conn, 200, "text/plain; version=0.0.4", serve_metrics_text(c), NULL, NULL);
    case R_COMPLETIONS: return completion(c, conn, rq, JOB_COMPLETION);
    case R_CHAT: return completion(c, conn, rq, JOB_CHAT);
    case R_TOKENIZE:
    case R_DETOKENIZE: {
        int st = 0;
        char err[1024];
        char *out = serve_tokenize(c, rq->body ? rq->body : "", rq->n, r == R_DETOKENIZE, &st, err, sizeof err);
        if (!out) return respond_error(conn, st ? (unsigned)st : 500, st == 500 || !st ? "out of memory" : err, NULL, NULL);
        return respond(conn, 200, "application/json", out, NULL, NULL);
    }
    case R_NONE: break;
    }
    return MHD_NO;
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls, (void)conn;
    request *rq = *con_cls;
    if (!rq) return;
    if (rq->job) {
        if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) {
            pthread_mutex_lock(&rq->job->mu);
            if (rq->job->state != JOB_DONE) rq->job->cancelled = true;
            pthread_mutex_unlock(&rq->job->mu);
        }
        serve_job_release(rq->job);
    }
    free(rq->body);
    free(rq);
    *con_cls = NULL;
}

int serve_run(serve_ctx *c, const char *host, int port, int timeout_s) {
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
        fprintf(stderr, "triforce serve: --host '%s': expected an IPv4 address such as 127.0.0.1\n", host);
        return 2;
    }
    /* SIGINT / SIGTERM are taken by sigwait below, in this thread only */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (serve_slots_start(c) != 0) {
        fprintf(stderr, "triforce serve: cannot start the slot threads\n");
        return 1;
    }
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, (uint16_t)port, NULL,
        NULL, handle, c, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)timeout_s, MHD_OPTION_CONNECTION_LIMIT, (unsigned)256, MHD_OPTION_NOTIFY_COMPLETED, completed, c,
        MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "triforce serve: cannot listen on %s:%d (%s)\n", host, port,
                errno ? strerror(errno) : "address in use?");
        serve_slots_stop(c);
        return 1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    fprintf(stderr, "triforce serve: listening on http://%s:%u (%d slots, queue %d%s)\n", host,
            di ? (unsigned)di->port : (unsigned)port, c->n_slots, c->queue_max, c->api_key ? ", API key required" : "");
    fflush(stderr);
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "triforce serve: %s: stopping (requests in flight end with an error event)\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM");
    MHD_quiesce_daemon(d); /* no new connections */
    serve_slots_stop(c);   /* running jobs end; their streams finish */
    MHD_stop_daemon(d);
    return 0;
}
