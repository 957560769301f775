/* serve_slots.c — slots, the queue, the workers that run jobs, prompt-cache
 * reuse, stop strings and the metrics (see serve.h). */
#include "serve.h"

#include "model/model.h"
#include "tokenizer/tokenizer.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- jobs ---- */

serve_job *serve_job_new(void) {
    serve_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cond, NULL);
    j->refs = 1;
    return j;
}

void serve_job_release(serve_job *j) {
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    bool last = --j->refs == 0;
    pthread_mutex_unlock(&j->mu);
    if (!last) return;
    free(j->prompt);
    for (int i = 0; i < j->n_stop; i++) free(j->stop[i]);
    free(j->text);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cond);
    free(j);
}

/* Release text to the reader (under the job's lock). */
static void job_emit(serve_job *j, const char *s, size_t n) {
    if (!n) return;
    pthread_mutex_lock(&j->mu);
    if (j->n_text + n + 1 > j->cap_text) {
        size_t nc = 2 * (j->n_text + n + 1);
        char *p = realloc(j->text, nc);
        if (!p) {
            pthread_mutex_unlock(&j->mu);
            return;
        }
        j->text = p, j->cap_text = nc;
    }
    memcpy(j->text + j->n_text, s, n);
    j->n_text += n;
    j->text[j->n_text] = '\0';
    pthread_cond_broadcast(&j->cond);
    pthread_mutex_unlock(&j->mu);
}

static bool job_cancelled(serve_job *j) {
    pthread_mutex_lock(&j->mu);
    bool c = j->cancelled;
    pthread_mutex_unlock(&j->mu);
    return c;
}

/* ---- running a job ---- */

static void job_fail(serve_job *j, int status, const char *msg) {
    pthread_mutex_lock(&j->mu);
    j->http_error = status;
    snprintf(j->error, sizeof j->error, "%s", msg);
    pthread_mutex_unlock(&j->mu);
}

/* Generated text not yet released: valid UTF-8 from the library's streaming
 * detokenizer (tf_detokenizer), held back while it could be the start of a
 * stop string. */
typedef struct text_out {
    tf_detokenizer *d;
    char *piece; /* [tf_detokenizer_max_bytes]: every push fits whole */
    char *acc;
    size_t n_acc, cap;
    size_t max_stop;
} text_out;

enum { TEXT_MORE, TEXT_STOP, TEXT_FAILED };

/* Add the text of token id (id < 0: the end, flushing held bytes): TEXT_STOP
 * when a stop string ended the text, TEXT_FAILED (the job failed, with its
 * reason) when the text could not be kept. */
static int text_add(serve_job *j, text_out *t, int32_t id, bool final) {
    size_t np = 0, cap = tf_detokenizer_max_bytes(t->d);
    tf_status st = id >= 0 ? tf_detokenizer_push(t->d, id, t->piece, cap, &np)
                           : tf_detokenizer_flush(t->d, t->piece, cap, &np);
    if (st != TF_OK) {
        char msg[96];
        snprintf(msg, sizeof msg, "detokenizing token %d: %s", id, tf_status_str(st));
        job_fail(j, 500, msg);
        return TEXT_FAILED;
    }
    if (t->n_acc + np + 1 > t->cap) {
        size_t nc = 2 * (t->n_acc + np + 1);
        char *p = realloc(t->acc, nc);
        if (!p) {
            job_fail(j, 500, "out of memory for the generated text");
            return TEXT_FAILED;
        }
        t->acc = p, t->cap = nc;
    }
    memcpy(t->acc + t->n_acc, t->piece, np);
    t->n_acc += np;
    /* the earliest stop string in the unreleased text */
    size_t at = SIZE_MAX;
    for (int k = 0; k < j->n_stop; k++) {
        const char *f = memmem(t->acc, t->n_acc, j->stop[k], strlen(j->stop[k]));
        if (f && (size_t)(f - t->acc) < at) at = (size_t)(f - t->acc);
    }
    if (at != SIZE_MAX) {
        job_emit(j, t->acc, at);
        t->n_acc = 0;
        return TEXT_STOP;
    }
    size_t keep = final ? 0 : (t->max_stop ? t->max_stop - 1 : 0);
    if (t->n_acc > keep) {
        size_t out = t->n_acc - keep;
        while (out > 0 && out < t->n_acc && ((unsigned char)t->acc[out] & 0xC0) == 0x80) out--; /* whole characters */
        job_emit(j, t->acc, out);
        memmove(t->acc, t->acc + out, t->n_acc - out);
        t->n_acc -= out;
    }
    return TEXT_MORE;
}

/* Run j on slot s. True when it completed: a finish reason reached without
 * an error (the client may have left at the end); false when it failed
 * (j->http_error) or was cancelled. */
static bool run_job(serve_slot *s, serve_job *j) {
    serve_ctx *c = s->ctx;
    char err[512];
    tf_decoder *dec = NULL;
    const tf_model *draft = c->draft;
    bool needs_draft = j->dp.mode == TF_MODE_DRAFT || j->dp.mode == TF_MODE_STREAMING || j->dp.mode == TF_MODE_TRIFORCE;
    text_out t = {0};
    bool completed = false;
    for (int k = 0; k < j->n_stop; k++)
        if (strlen(j->stop[k]) > t.max_stop) t.max_stop = strlen(j->stop[k]);
    /* the text continues the prompt: no leading space is stripped */
    tf_status dst = tf_detokenizer_init(&t.d, c->model, true);
    if (dst == TF_OK && !(t.piece = malloc(tf_detokenizer_max_bytes(t.d)))) dst = TF_ERR_NOMEM;
    if (dst != TF_OK) {
        job_fail(j, 500, dst == TF_ERR_NOMEM ? "out of memory for the detokenizer" : "the model has no tokenizer");
        goto done;
    }
    if (tf_decoder_init(&dec, c->model, needs_draft ? draft : NULL, &j->dp, err, sizeof err) != TF_OK) {
        job_fail(j, 400, err);
        goto done;
    }
    int32_t reused = 0;
    if (tf_decoder_prefill_reuse(dec, j->prompt, j->n_prompt, s->dec, &reused) != TF_OK) {
        job_fail(j, 500, tf_decoder_error(dec));
        tf_decoder_free(dec);
        dec = NULL;
        goto done;
    }
    tf_decoder_free(s->dec); /* its cache has served: dec now holds the prefix */
    s->dec = NULL;
    j->n_reused = reused;
    const char *finish = NULL;
    bool stop_string = false; /* the text ended at a stop string: what follows it is dropped */
    double t0 = cli_now();
    bool failed = false; /* the text could not be kept (text_add failed the job) */
    while (!finish && !failed) {
        if (job_cancelled(j)) break;
        int32_t toks[32], k = 0;
        tf_status st = tf_decoder_step(dec, toks, 32, &k);
        if (st == TF_ERR_RANGE) {
            finish = "length";
            break;
        }
        if (st != TF_OK) {
            job_fail(j, 500, tf_decoder_error(dec));
            break;
        }
        if (j->n_gen == 0) j->t_first = cli_now();
        for (int32_t i = 0; i < k && !finish && !failed; i++) {
            j->n_gen++;
            if (tf_model_is_eog(c->model, toks[i])) {
                finish = "stop";
                break;
            }
            int r = text_add(j, &t, toks[i], false);
            if (r == TEXT_FAILED) failed = true;
            if (r == TEXT_STOP) finish = "stop", stop_string = true;
            else if (j->n_gen >= j->max_tokens) finish = "length";
        }
    }
    if (!stop_string && !j->http_error) text_add(j, &t, -1, true); /* release what was held back */
    double dt = cli_now() - t0;
    pthread_mutex_lock(&j->mu);
    j->finish = finish ? finish : "stop";
    completed = finish && !j->http_error;
    j->decode_s = dt;
    pthread_mutex_unlock(&j->mu);
    pthread_mutex_lock(&c->mu);
    c->m.prompt_tokens += (uint64_t)j->n_prompt;
    c->m.reused_tokens += (uint64_t)reused;
    c->m.gen_tokens += (uint64_t)j->n_gen;
    c->m.decode_seconds += dt;
    for (int l = 0; l < tf_decoder_n_levels(dec) && l < 3; l++) {
        tf_level_info li;
        tf_decoder_level(dec, l, &li);
        c->m.level_verified[l] += li.verified;
        c->m.level_accepted[l] += li.accepted;
    }
    pthread_mutex_unlock(&c->mu);
    s->dec = dec; /* kept: the next request on the same document starts from it */
done:
    free(t.acc);
    free(t.piece);
    tf_detokenizer_free(t.d);
    pthread_mutex_lock(&j->mu);
    j->state = JOB_DONE;
    j->t_done = cli_now();
    pthread_cond_broadcast(&j->cond);
    pthread_mutex_unlock(&j->mu);
    return completed;
}

/* ---- metrics ---- */

static void hist_observe(serve_hist *h, double v) {
    int b = 0;
    while (b < h->n_le && v > h->le[b]) b++;
    h->n[b]++;
    h->sum += v;
    h->count++;
}

/* The end of a request, under c->mu: counted as exactly one outcome, a
 * completed one observed by the histograms. */
static void metrics_request_done(serve_metrics *m, const serve_job *j, bool completed, bool cancelled) {
    if (!completed) {
        if (cancelled) m->cancelled++;
        else m->requests_failed++;
        return;
    }
    m->completed++;
    if (j->t_first > 0) hist_observe(&m->ttft, j->t_first - j->t_queued);
    hist_observe(&m->duration, j->t_done - j->t_queued);
    hist_observe(&m->decode_rate, j->decode_s > 0 ? j->n_gen / j->decode_s : 0);
}

static void *worker(void *arg) {
    serve_slot *s = arg;
    serve_ctx *c = s->ctx;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!s->job && !c->stopping) pthread_cond_wait(&c->cond, &c->mu);
        if (!s->job) break;
        serve_job *j = s->job;
        pthread_mutex_unlock(&c->mu);
        pthread_mutex_lock(&j->mu);
        bool skip = j->cancelled, completed = false;
        if (!skip) j->state = JOB_RUNNING;
        pthread_mutex_unlock(&j->mu);
        if (!skip) completed = run_job(s, j);
        pthread_mutex_lock(&j->mu);
        if (skip) j->state = JOB_DONE, pthread_cond_broadcast(&j->cond);
        bool cancelled = j->cancelled; /* a client gone, or the server stopping */
        pthread_mutex_unlock(&j->mu);
        pthread_mutex_lock(&c->mu);
        metrics_request_done(&c->m, j, completed, cancelled);
        s->last_used = cli_now();
        serve_job_release(j);
        s->job = NULL;
        if (c->n_queue > 0 && !c->stopping) { /* the oldest waiting request */
            s->job = c->queue[0];
            memmove(c->queue, c->queue + 1, sizeof *c->queue * (size_t)--c->n_queue);
        }
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* Bucket bounds: seconds (time to first token, request duration) and
 * tokens/s (decoding rate). */
static const double k_le_seconds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
static const double k_le_rate[] = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000};
_Static_assert(sizeof k_le_seconds / sizeof k_le_seconds[0] <= SERVE_HIST_BOUNDS, "bounds fit serve_hist");
_Static_assert(sizeof k_le_rate / sizeof k_le_rate[0] <= SERVE_HIST_BOUNDS, "bounds fit serve_hist");

int serve_slots_start(serve_ctx *c) {
    c->m.ttft = (serve_hist){.le = k_le_seconds, .n_le = (int)(sizeof k_le_seconds / sizeof k_le_seconds[0])};
    c->m.duration = c->m.ttft;
    c->m.decode_rate = (serve_hist){.le = k_le_rate, .n_le = (int)(sizeof k_le_rate / sizeof k_le_rate[0])};
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cond, NULL);
    c->slots = calloc((size_t)c->n_slots, sizeof *c->slots);
    c->queue = calloc((size_t)c->queue_max + 1, sizeof *c->queue);
    if (!c->slots || !c->queue) return -1;
    for (int i = 0; i < c->n_slots; i++) {
        c->slots[i] = (serve_slot){.ctx = c, .index = i};
        if (pthread_create(&c->slots[i].thread, NULL, worker, &c->slots[i]) != 0) return -1;
    }
    return 0;
}

/* Tokens a request shares with what slot s holds. */
static int32_t shared_prefix(const serve_slot *s, const serve_job *j) {
    if (!s->dec) return 0;
    int32_t n, k = 0;
    const int32_t *seq = tf_decoder_tokens(s->dec, &n);
    while (k < n && k < j->n_prompt && seq[k] == j->prompt[k]) k++;
    return k;
}

int serve_submit(serve_ctx *c, serve_job *j) {
    pthread_mutex_lock(&c->mu);
    if (c->stopping) {
        pthread_mutex_unlock(&c->mu);
        return 503;
    }
    snprintf(j->id, sizeof j->id, "%s-%lld", j->kind == JOB_CHAT ? "chatcmpl" : "cmpl", (long long)++c->next_id);
    j->t_queued = cli_now();
    /* an idle slot: the one whose cache shares the longest prefix, else the least recently used */
    serve_slot *best = NULL;
    int32_t best_k = -1;
    for (int i = 0; i < c->n_slots; i++) {
        serve_slot *s = &c->slots[i];
        if (s->job) continue;
        int32_t k = shared_prefix(s, j);
        if (k > best_k || (k == best_k && s->last_used < best->last_used)) best = s, best_k = k;
    }
    int st = 0;
    if (best || c->n_queue < c->queue_max) c->m.requests++;
    if (best) {
        j->refs++;
        best->job = j;
        pthread_cond_broadcast(&c->cond);
    } else if (c->n_queue < c->queue_max) {
        j->refs++;
        c->queue[c->n_queue++] = j;
    } else {
        c->m.rejected_busy++;
        st = 503;
    }
    pthread_mutex_unlock(&c->mu);
    return st;
}

void serve_slots_stop(serve_ctx *c) {
    pthread_mutex_lock(&c->mu);
    c->stopping = true;
    for (int i = 0; i < c->n_queue; i++) { /* waiting requests end with an error: cancelled */
        serve_job *j = c->queue[i];
        c->m.cancelled++;
        pthread_mutex_lock(&j->mu);
        j->cancelled = true;
        j->http_error = 503;
        snprintf(j->error, sizeof j->error, "the server is shutting down");
        j->state = JOB_DONE;
        pthread_cond_broadcast(&j->cond);
        pthread_mutex_unlock(&j->mu);
        serve_job_release(j);
    }
    c->n_queue = 0;
    for (int i = 0; i < c->n_slots; i++)
        if (c->slots[i].job) {
            serve_job *j = c->slots[i].job;
            pthread_mutex_lock(&j->mu);
            j->cancelled = true;
            if (!j->http_error) {
                j->http_error = 503;
                snprintf(j->error, sizeof j->error, "the server is shutting down");
            }
            pthread_mutex_unlock(&j->mu);
        }
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->mu);
    for (int i = 0; i < c->n_slots; i++) {
        pthread_join(c->slots[i].thread, NULL);
        tf_decoder_free(c->slots[i].dec);
    }
    free(c->slots);
    free(c->queue);
    c->slots = NULL;
    c->queue = NULL;
}

/* Text that grows as it is written; oom once an allocation failed. */
typedef struct text_buf {
    char *p;
    size_t n, cap;
    bool oom;
} text_buf;

static void tb_printf(text_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tb_printf(text_buf *b, const char *fmt, ...) {
    for (int pass = 0; pass < 2 && !b->oom; pass++) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = true;
        } else if (b->p && (size_t)k < b->cap - b->n) {
            b->n += (size_t)k;
            return;
        } else {
            size_t cap = 2 * (b->n + (size_t)k + 1) + 4096;
            char *q = realloc(b->p, cap);
            if (!q) b->oom = true;
            else b->p = q, b->cap = cap;
        }
    }
}

static void tb_hist(text_buf *b, const char *name, const char *help, const serve_hist *h) {
    tb_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (int i = 0; i < h->n_le; i++) {
        cum += h->n[i];
        tb_printf(b, "%s_bucket{le=\"%g\"} %llu\n", name, h->le[i], (unsigned long long)cum);
    }
    tb_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name, (unsigned long long)h->count,
              name, h->sum, name, (unsigned long long)h->count);
}

char *serve_metrics_text(serve_ctx *c) {
    static const char *const level[3] = {"target", "middle", "draft"};
    text_buf b = {0};
    pthread_mutex_lock(&c->mu);
    int busy = 0;
    for (int i = 0; i < c->n_slots; i++) busy += c->slots[i].job != NULL;
    const serve_metrics *m = &c->m;
    tb_printf(&b,
              "# HELP triforce_requests_total Completion requests accepted (queued or run); each ends completed, "
              "failed or cancelled.\n"
              "# TYPE triforce_requests_total counter\ntriforce_requests_total %llu\n"
              "# HELP triforce_requests_completed_total Requests that reached a finish reason.\n"
              "# TYPE triforce_requests_completed_total counter\ntriforce_requests_completed_total %llu\n"
              "# HELP triforce_requests_failed_total Requests that ended with an error.\n"
              "# TYPE triforce_requests_failed_total counter\ntriforce_requests_failed_total %llu\n"
              "# HELP triforce_requests_cancelled_total Requests whose client went away, or that the server's "
              "stop ended.\n"
              "# TYPE triforce_requests_cancelled_total counter\ntriforce_requests_cancelled_total %llu\n"
              "# HELP triforce_requests_rejected_total Requests refused with 503 (queue full).\n"
              "# TYPE triforce_requests_rejected_total counter\ntriforce_requests_rejected_total %llu\n"
              "# TYPE triforce_prompt_tokens_total counter\ntriforce_prompt_tokens_total %llu\n"
              "# HELP triforce_prompt_tokens_reused_total Prompt positions copied from a slot's cache.\n"
              "# TYPE triforce_prompt_tokens_reused_total counter\ntriforce_prompt_tokens_reused_total %llu\n"
              "# TYPE triforce_generated_tokens_total counter\ntriforce_generated_tokens_total %llu\n"
              "# TYPE triforce_decode_seconds_total counter\ntriforce_decode_seconds_total %.6f\n"
              "# HELP triforce_tokens_per_second Generated tokens per decoding second, over all requests.\n"
              "# TYPE triforce_tokens_per_second gauge\ntriforce_tokens_per_second %.3f\n"
              "# TYPE triforce_queue_length gauge\ntriforce_queue_length %d\n"
              "# TYPE triforce_slots_busy gauge\ntriforce_slots_busy %d\n"
              "# TYPE triforce_slots gauge\ntriforce_slots %d\n",
              (unsigned long long)m->requests, (unsigned long long)m->completed,
              (unsigned long long)m->requests_failed, (unsigned long long)m->cancelled,
              (unsigned long long)m->rejected_busy, (unsigned long long)m->prompt_tokens,
              (unsigned long long)m->reused_tokens, (unsigned long long)m->gen_tokens, m->decode_seconds,
              m->decode_seconds > 0 ? (double)m->gen_tokens / m->decode_seconds : 0.0, c->n_queue, busy, c->n_slots);
    tb_hist(&b, "triforce_time_to_first_token_seconds",
            "From queueing to the first generated token, of each completed request that generated one.", &m->ttft);
    tb_hist(&b, "triforce_request_duration_seconds", "From queueing to the last token, of each completed request.",
            &m->duration);
    tb_hist(&b, "triforce_request_decode_tokens_per_second",
            "Generated tokens per second from the end of the prefill to the last token, of each completed request.",
            &m->decode_rate);
    tb_printf(&b, "# HELP triforce_level_verified_total Candidates of the level below judged by this level.\n"
                  "# TYPE triforce_level_verified_total counter\n");
    for (int l = 0; l < 3; l++)
        tb_printf(&b, "triforce_level_verified_total{level=\"%s\"} %lld\n", level[l], (long long)m->level_verified[l]);
    tb_printf(&b, "# HELP triforce_level_accepted_total Of the candidates judged, those accepted.\n"
                  "# TYPE triforce_level_accepted_total counter\n");
    for (int l = 0; l < 3; l++)
        tb_printf(&b, "triforce_level_accepted_total{level=\"%s\"} %lld\n", level[l], (long long)m->level_accepted[l]);
    tb_printf(&b, "# HELP triforce_level_acceptance_ratio Accepted over judged candidates (NaN: none judged yet).\n"
                  "# TYPE triforce_level_acceptance_ratio gauge\n");
    for (int l = 0; l < 3; l++)
        if (m->level_verified[l] > 0)
            tb_printf(&b, "triforce_level_acceptance_ratio{level=\"%s\"} %.6f\n", level[l],
                      (double)m->level_accepted[l] / (double)m->level_verified[l]);
        else
            tb_printf(&b, "triforce_level_acceptance_ratio{level=\"%s\"} NaN\n", level[l]);
    pthread_mutex_unlock(&c->mu);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

char *serve_health_json(serve_ctx *c) {
    char *buf = malloc(256);
    if (!buf) return NULL;
    pthread_mutex_lock(&c->mu);
    int busy = 0;
    for (int i = 0; i < c->n_slots; i++) busy += c->slots[i].job != NULL;
    snprintf(buf, 256, "{\"status\":\"%s\",\"slots_idle\":%d,\"slots_busy\":%d,\"queue\":%d}",
             c->stopping ? "stopping" : "ok", c->n_slots - busy, busy, c->n_queue);
    pthread_mutex_unlock(&c->mu);
    return buf;
}
