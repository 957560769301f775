/* serve_api.c — OpenAI request schemas into jobs, and responses out of them. */
#include "serve.h"

#include "format/json.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

__attribute__((format(printf, 3, 4))) static int bad(char *err, size_t errsz, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errsz, fmt, ap);
    va_end(ap);
    return 400;
}

static const char *jtype(const cJSON *v) {
    return cJSON_IsNull(v) ? "null" : cJSON_IsBool(v) ? "a boolean" : cJSON_IsNumber(v) ? "a number"
           : cJSON_IsString(v) ? "a string" : cJSON_IsArray(v) ? "an array" : "an object";
}

/* A number member in [lo, hi] (integral if `integer`); absent or null keeps *out. */
static int get_num(const cJSON *o, const char *key, double lo, double hi, bool integer, double *out, char *err,
                   size_t errsz) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsNumber(v)) return bad(err, errsz, "'%s' is %s (expected a number)", key, jtype(v));
    double x = v->valuedouble;
    if (!isfinite(x) || x < lo || x > hi || (integer && x != floor(x)))
        return bad(err, errsz, "'%s' is %g (expected %s from %g to %g)", key, x, integer ? "an integer" : "a number",
                   lo, hi);
    *out = x;
    return 0;
}

static int get_bool(const cJSON *o, const char *key, bool *out, char *err, size_t errsz) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsBool(v)) return bad(err, errsz, "'%s' is %s (expected true or false)", key, jtype(v));
    *out = cJSON_IsTrue(v);
    return 0;
}

/* Fields that would change the result in ways this server does not do:
 * refused by name unless they hold their neutral value. */
static int refuse_unsupported(const cJSON *o, char *err, size_t errsz) {
    static const char *const must_be_null_or_false[] = {"logprobs", "top_logprobs", "suffix", "tools",
                                                        "functions", "tool_choice", "function_call", "echo"};
    for (size_t i = 0; i < sizeof must_be_null_or_false / sizeof must_be_null_or_false[0]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, must_be_null_or_false[i]);
        if (v && !cJSON_IsNull(v) && !cJSON_IsFalse(v) && !(cJSON_IsArray(v) && cJSON_GetArraySize(v) == 0))
            return bad(err, errsz, "'%s' is not supported by this server (expected it absent, null or false)",
                       must_be_null_or_false[i]);
    }
    static const char *const must_be_one[] = {"n", "best_of"};
    for (size_t i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, must_be_one[i]);
        if (v && !cJSON_IsNull(v) && !(cJSON_IsNumber(v) && v->valuedouble == 1))
            return bad(err, errsz, "'%s' must be 1 (one completion per request)", must_be_one[i]);
    }
    static const char *const must_be_zero[] = {"presence_penalty", "frequency_penalty"};
    for (size_t i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, must_be_zero[i]);
        if (v && !cJSON_IsNull(v) && !(cJSON_IsNumber(v) && v->valuedouble == 0))
            return bad(err, errsz, "'%s' is not supported (expected 0 or absent)", must_be_zero[i]);
    }
    const cJSON *lb = cJSON_GetObjectItemCaseSensitive(o, "logit_bias");
    if (lb && !cJSON_IsNull(lb) && !(cJSON_IsObject(lb) && !lb->child))
        return bad(err, errsz, "'logit_bias' is not supported (expected an empty object or absent)");
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(o, "response_format");
    if (rf && !cJSON_IsNull(rf)) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(rf, "type");
        if (!cJSON_IsString(t) || strcmp(t->valuestring, "text") != 0)
            return bad(err, errsz, "'response_format' other than {\"type\": \"text\"} is not supported");
    }
    return 0;
}

static int parse_stop(const cJSON *o, serve_job *j, char *err, size_t errsz) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "stop");
    if (!v || cJSON_IsNull(v)) return 0;
    if (cJSON_IsString(v)) {
        if (!v->valuestring[0]) return bad(err, errsz, "'stop' is an empty string");
        j->stop[j->n_stop++] = strdup(v->valuestring);
        return 0;
    }
    if (!cJSON_IsArray(v)) return bad(err, errsz, "'stop' is %s (expected a string or an array of strings)", jtype(v));
    int n = cJSON_GetArraySize(v);
    if (n > SERVE_MAX_STOP) return bad(err, errsz, "'stop' has %d sequences (at most %d)", n, SERVE_MAX_STOP);
    for (const cJSON *s = v->child; s; s = s->next) {
        if (!cJSON_IsString(s) || !s->valuestring[0])
            return bad(err, errsz, "'stop' holds %s (expected non-empty strings)", jtype(s));
        j->stop[j->n_stop++] = strdup(s->valuestring);
    }
    return 0;
}

/* The "triforce" extension object: decoding mode and its settings. */
static int parse_triforce(const serve_ctx *c, const cJSON *o, tf_decoder_params *dp, char *err, size_t errsz) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "triforce");
    if (!t || cJSON_IsNull(t)) return 0;
    if (!cJSON_IsObject(t)) return bad(err, errsz, "'triforce' is %s (expected an object)", jtype(t));
    const cJSON *mode = cJSON_GetObjectItemCaseSensitive(t, "mode");
    if (mode && !cJSON_IsNull(mode)) {
        tf_decode_mode m;
        if (!cJSON_IsString(mode) || !tf_decode_mode_from_name(mode->valuestring, &m))
            return bad(err, errsz, "'triforce.mode' is not one of ar, draft, retrieval, streaming, triforce");
        if ((m == TF_MODE_DRAFT || m == TF_MODE_STREAMING || m == TF_MODE_TRIFORCE) && !cli_has_draft(c->o))
            return bad(err, errsz, "'triforce.mode' %s needs a draft (start the server with -md, --draft-layers "
                                   "or --draft-lookup)", mode->valuestring);
        dp->mode = m;
    }
    const cJSON *mid = cJSON_GetObjectItemCaseSensitive(t, "middle");
    if (mid && !cJSON_IsNull(mid)) {
        if (!cJSON_IsString(mid) || !tf_middle_from_name(mid->valuestring, &dp->middle))
            return bad(err, errsz, "'triforce.middle' is not one of always, auto, never");
    }
    const cJSON *cpl = cJSON_GetObjectItemCaseSensitive(t, "coupling");
    if (cpl && !cJSON_IsNull(cpl)) {
        if (!cJSON_IsString(cpl) || !tf_coupling_from_name(cpl->valuestring, &dp->coupling))
            return bad(err, errsz, "'triforce.coupling' is not one of keyed, residual");
    }
    struct { const char *key; int32_t *field; double lo, hi; } ints[] = {
        {"gamma1", &dp->gamma1, 1, 16}, {"gamma2", &dp->gamma2, 0, 15}, {"budget", &dp->budget, 16, 1 << 28},
        {"chunk", &dp->chunk, 1, 64}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        double x = *ints[i].field;
        char sub[400];
        if (get_num(t, ints[i].key, ints[i].lo, ints[i].hi, true, &x, sub, sizeof sub))
            return bad(err, errsz, "in 'triforce': %s", sub);
        *ints[i].field = (int32_t)x;
    }
    return 0;
}

/* Completions: a string, [string], [token ids] or [[token ids]]. */
static int completion_prompt(serve_ctx *c, const cJSON *o, serve_job *j, char *err, size_t errsz) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "prompt");
    if (!p || cJSON_IsNull(p)) return bad(err, errsz, "'prompt' is missing");
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && (cJSON_IsString(p->child) || cJSON_IsArray(p->child)))
        p = p->child;
    if (cJSON_IsArray(p)) {
        int n = cJSON_GetArraySize(p);
        if (n < 1) return bad(err, errsz, "'prompt' is an empty array");
        j->prompt = malloc(sizeof(int32_t) * (size_t)n);
        if (!j->prompt) return 500;
        for (const cJSON *t = p->child; t; t = t->next) {
            if (!cJSON_IsNumber(t) || t->valuedouble != floor(t->valuedouble) || t->valuedouble < 0 ||
                t->valuedouble >= c->info.n_vocab)
                return bad(err, errsz, "'prompt' holds %s (expected one string, or token ids 0..%d)", jtype(t),
                           c->info.n_vocab - 1);
            j->prompt[j->n_prompt++] = (int32_t)t->valuedouble;
        }
        return 0;
    }
    if (!cJSON_IsString(p)) return bad(err, errsz, "'prompt' is %s (expected a string or token ids)", jtype(p));
    size_t n = 0;
    if (!(j->prompt = cli_tokenize(c->model, p->valuestring, strlen(p->valuestring), true, true, &n)))
        return bad(err, errsz, "'prompt' cannot be tokenized");
    j->n_prompt = (int32_t)n;
    return 0;
}

/* Chat: messages of {role, content: string | [{type: text, text}]} in the model's template. */
static int chat_prompt(serve_ctx *c, const cJSON *o, serve_job *j, char *err, size_t errsz) {
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(o, "messages");
    if (!cJSON_IsArray(ms) || cJSON_GetArraySize(ms) < 1)
        return bad(err, errsz, "'messages' is %s (expected a non-empty array)", ms ? jtype(ms) : "missing");
    int n = cJSON_GetArraySize(ms), i = 0;
    tf_chat_message *msgs = calloc((size_t)n, sizeof *msgs);
    char **owned = calloc((size_t)n, sizeof *owned);
    int st = 0;
    if (!msgs || !owned) st = 500;
    for (const cJSON *m = ms->child; m && !st; m = m->next, i++) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (!cJSON_IsObject(m) || !cJSON_IsString(role)) {
            st = bad(err, errsz, "'messages[%d]' has no string 'role'", i);
            break;
        }
        msgs[i].role = role->valuestring;
        if (cJSON_IsString(content)) {
            msgs[i].content = content->valuestring;
        } else if (cJSON_IsArray(content)) { /* text parts, concatenated */
            size_t len = 0;
            for (const cJSON *part = content->child; part && !st; part = part->next) {
                const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
                const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
                if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") || !cJSON_IsString(text))
                    st = bad(err, errsz, "'messages[%d].content' holds a part that is not {\"type\": \"text\", "
                                         "\"text\": ...} (only text is supported)", i);
                else len += strlen(text->valuestring);
            }
            if (st) break;
            owned[i] = malloc(len + 1);
            if (!owned[i]) {
                st = 500;
                break;
            }
            owned[i][0] = '\0';
            for (const cJSON *part = content->child; part; part = part->next)
                strcat(owned[i], cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring);
            msgs[i].content = owned[i];
        } else {
            st = bad(err, errsz, "'messages[%d].content' is %s (expected a string or text parts)", i,
                     content ? jtype(content) : "missing");
        }
    }
    char *text = NULL, eb[512];
    if (!st && tf_model_chat_format_as(c->model, c->o->chat_template, msgs, (size_t)n, &text, eb, sizeof eb) != TF_OK)
        st = bad(err, errsz, "'messages': %s", eb);
    for (int k = 0; k < n && owned; k++) free(owned[k]);
    free(owned);
    free(msgs);
    if (st) return st;
    size_t nt = 0;
    if (!(j->prompt = cli_tokenize(c->model, text, strlen(text), true, true, &nt))) {
        free(text);
        return bad(err, errsz, "'messages' cannot be tokenized");
    }
    free(text);
    j->n_prompt = (int32_t)nt;
    return 0;
}

int serve_parse_request(serve_ctx *c, job_kind kind, const char *body, size_t len, serve_job *j, char *err,
                        size_t errsz) {
    cJSON *o = NULL;
    tf_err jerr = {0};
    if (tf_json_parse("request body", body, len, &o, &jerr) != TF_OK) return bad(err, errsz, "%s", jerr.msg);
    int st = 0;
    if (!cJSON_IsObject(o)) st = bad(err, errsz, "the request body is %s (expected a JSON object)", jtype(o));
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(o, "model");
    if (!st && model && !cJSON_IsNull(model) && !cJSON_IsString(model))
        st = bad(err, errsz, "'model' is %s (expected a string)", jtype(model));
    if (!st) st = refuse_unsupported(o, err, errsz);
    const cli_opts *op = c->o;
    j->kind = kind;
    j->dp = cli_decoder_params(op);
    j->dp.mode = cli_has_draft(op) ? TF_MODE_TRIFORCE : TF_MODE_AR;
    if (op->mode) tf_decode_mode_from_name(op->mode, &j->dp.mode);
    j->dp.n_ctx = op->n_ctx > 0 ? op->n_ctx : c->info.n_ctx_train;
    j->dp.device = TF_DEVICE_CPU;
    double max_tokens = op->n_predict, temp = op->temp, top_p = op->top_p, top_k = op->top_k, min_p = op->min_p;
    double seed = -1;
    if (!st) st = get_num(o, "max_tokens", 1, 1 << 28, true, &max_tokens, err, errsz);
    if (!st && kind == JOB_CHAT) st = get_num(o, "max_completion_tokens", 1, 1 << 28, true, &max_tokens, err, errsz);
    if (!st) st = get_num(o, "temperature", 0, 2, false, &temp, err, errsz);
    if (!st) st = get_num(o, "top_p", 1e-6, 1, false, &top_p, err, errsz);
    if (!st) st = get_num(o, "top_k", 0, 1e9, true, &top_k, err, errsz);
    if (!st) st = get_num(o, "min_p", 0, 1, false, &min_p, err, errsz);
    if (!st) st = get_num(o, "seed", 0, 9007199254740991.0, true, &seed, err, errsz);
    if (!st) st = get_bool(o, "stream", &j->stream, err, errsz);
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(o, "stream_options");
    if (!st && so && !cJSON_IsNull(so)) {
        if (!cJSON_IsObject(so)) st = bad(err, errsz, "'stream_options' is %s (expected an object)", jtype(so));
        else if (!j->stream) st = bad(err, errsz, "'stream_options' is given but 'stream' is not true");
        else st = get_bool(so, "include_usage", &j->include_usage, err, errsz);
    }
    if (!st) st = parse_stop(o, j, err, errsz);
    if (!st) st = parse_triforce(c, o, &j->dp, err, errsz);
    if (!st) st = kind == JOB_CHAT ? chat_prompt(c, o, j, err, errsz) : completion_prompt(c, o, j, err, errsz);
    cJSON_Delete(o);
    if (st) return st;
    if (j->n_prompt < 1) return bad(err, errsz, "the prompt has no tokens");
    if (j->n_prompt >= j->dp.n_ctx)
        return bad(err, errsz, "the prompt is %d tokens; the server's context is %d (-c): at most %d", j->n_prompt,
                   j->dp.n_ctx, j->dp.n_ctx - 1);
    j->max_tokens = (int32_t)max_tokens;
    j->dp.sampling = (tf_sampler_params){.temp = (float)temp, .top_k = (int32_t)top_k, .top_p = (float)top_p,
                                         .min_p = (float)min_p,
                                         .seed = seed >= 0 ? (uint64_t)seed : (uint64_t)time(NULL) ^ (uint64_t)j};
    char eb[512];
    if (tf_decoder_params_check(&j->dp, eb, sizeof eb) != TF_OK) return bad(err, errsz, "%s", eb);
    return 0;
}

/* ---- responses ---- */

static cJSON *base_object(const serve_ctx *c, const serve_job *j, const char *object) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "id", j->id);
    cJSON_AddStringToObject(r, "object", object);
    cJSON_AddNumberToObject(r, "created", (double)j->created);
    cJSON_AddStringToObject(r, "model", c->model_id);
    return r;
}

static void add_usage(cJSON *r, const serve_job *j) {
    cJSON *u = cJSON_AddObjectToObject(r, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", j->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", j->n_gen);
    cJSON_AddNumberToObject(u, "total_tokens", j->n_prompt + j->n_gen);
    cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(d, "cached_tokens", j->n_reused);
}

static char *print_free(cJSON *r) {
    char *s = cJSON_PrintUnformatted(r);
    cJSON_Delete(r);
    return s;
}

static cJSON *string_n(const char *s, size_t n) {
    char *t = malloc(n + 1);
    if (!t) return cJSON_CreateNull();
    memcpy(t, s, n);
    t[n] = '\0';
    cJSON *v = cJSON_CreateString(t);
    free(t);
    return v;
}

/* r's "choices": one choice, index 0, returned for its fields. */
static cJSON *add_choice(cJSON *r) {
    cJSON *c0 = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(r, "choices"), c0);
    cJSON_AddNumberToObject(c0, "index", 0);
    return c0;
}

char *serve_response_json(const serve_ctx *c, const serve_job *j) {
    bool chat = j->kind == JOB_CHAT;
    cJSON *r = base_object(c, j, chat ? "chat.completion" : "text_completion");
    cJSON *c0 = add_choice(r);
    if (chat) {
        cJSON *msg = cJSON_AddObjectToObject(c0, "message");
        cJSON_AddStringToObject(msg, "role", "assistant");
        cJSON_AddItemToObject(msg, "content", string_n(j->text ? j->text : "", j->n_text));
    } else {
        cJSON_AddItemToObject(c0, "text", string_n(j->text ? j->text : "", j->n_text));
        cJSON_AddNullToObject(c0, "logprobs");
    }
    cJSON_AddStringToObject(c0, "finish_reason", j->finish ? j->finish : "stop");
    add_usage(r, j);
    return print_free(r);
}

char *serve_chunk_json(const serve_ctx *c, const serve_job *j, const char *text, size_t n, const char *finish,
                       bool first) {
    bool chat = j->kind == JOB_CHAT;
    cJSON *r = base_object(c, j, chat ? "chat.completion.chunk" : "text_completion");
    cJSON *c0 = add_choice(r);
    if (chat) {
        cJSON *d = cJSON_AddObjectToObject(c0, "delta");
        if (first) cJSON_AddStringToObject(d, "role", "assistant");
        if (n || (!finish && !first)) cJSON_AddItemToObject(d, "content", string_n(text, n));
        else if (first) cJSON_AddStringToObject(d, "content", "");
    } else {
        cJSON_AddItemToObject(c0, "text", string_n(text, n));
        cJSON_AddNullToObject(c0, "logprobs");
    }
    if (finish) cJSON_AddStringToObject(c0, "finish_reason", finish);
    else cJSON_AddNullToObject(c0, "finish_reason");
    return print_free(r);
}

char *serve_usage_chunk_json(const serve_ctx *c, const serve_job *j) {
    cJSON *r = base_object(c, j, j->kind == JOB_CHAT ? "chat.completion.chunk" : "text_completion");
    cJSON_AddArrayToObject(r, "choices");
    add_usage(r, j);
    return print_free(r);
}

char *serve_error_json(int status, const char *msg) {
    cJSON *r = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(r, "error");
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", status == 401   ? "authentication_error"
                                       : status == 404 ? "not_found_error"
                                       : status == 503 ? "server_busy"
                                       : status >= 500 ? "server_error"
                                                       : "invalid_request_error");
    cJSON_AddNumberToObject(e, "code", status);
    return print_free(r);
}

char *serve_models_json(const serve_ctx *c) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "object", "list");
    cJSON *d = cJSON_AddArrayToObject(r, "data"), *m = cJSON_CreateObject();
    cJSON_AddItemToArray(d, m);
    cJSON_AddStringToObject(m, "id", c->model_id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)(int64_t)c->t_start);
    cJSON_AddStringToObject(m, "owned_by", "triforce");
    cJSON_AddNumberToObject(m, "context_length", c->o->n_ctx > 0 ? c->o->n_ctx : c->info.n_ctx_train);
    return print_free(r);
}

char *serve_tokenize(serve_ctx *c, const char *body, size_t len, bool detok, int *status, char *err, size_t errsz) {
    cJSON *o = NULL;
    tf_err jerr = {0};
    *status = 0;
    if (tf_json_parse("request body", body, len, &o, &jerr) != TF_OK) {
        *status = bad(err, errsz, "%s", jerr.msg);
        return NULL;
    }
    cJSON *r = NULL;
    if (!detok) {
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(o, "content");
        bool add_special = false;
        if (!cJSON_IsString(content)) *status = bad(err, errsz, "'content' is missing or not a string");
        else *status = get_bool(o, "add_special", &add_special, err, errsz);
        size_t n = 0, tl = content && cJSON_IsString(content) ? strlen(content->valuestring) : 0;
        int32_t *toks = *status ? NULL : cli_tokenize(c->model, content->valuestring, tl, add_special, true, &n);
        if (!*status && !toks)
            *status = bad(err, errsz, "'content' cannot be tokenized");
        if (!*status) {
            r = cJSON_CreateObject();
            cJSON *a = cJSON_AddArrayToObject(r, "tokens");
            for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(toks[i]));
        }
        free(toks);
    } else {
        const cJSON *toks = cJSON_GetObjectItemCaseSensitive(o, "tokens");
        if (!cJSON_IsArray(toks)) *status = bad(err, errsz, "'tokens' is missing or not an array");
        size_t cap = 1024, n = 0;
        char *text = *status ? NULL : malloc(cap);
        if (!*status && !text) *status = 500;
        tf_detokenizer *d = NULL; /* valid UTF-8 out, SPM's leading space after the start stripped */
        if (!*status && tf_detokenizer_init(&d, c->model, false) != TF_OK) *status = 500;
        const size_t most = d ? tf_detokenizer_max_bytes(d) : 0; /* the most one push writes */
        for (const cJSON *t = toks && !*status ? toks->child : NULL; !*status; t = t ? t->next : NULL) {
            if (t && (!cJSON_IsNumber(t) || t->valuedouble != floor(t->valuedouble) || t->valuedouble < 0 ||
                      t->valuedouble >= c->info.n_vocab)) {
                *status = bad(err, errsz, "'tokens' holds %s (expected token ids 0..%d)", jtype(t),
                              c->info.n_vocab - 1);
                break;
            }
            if (n + most + 1 > cap) {
                char *nt = realloc(text, (cap = 2 * (n + most + 1)));
                if (!nt) {
                    *status = 500;
                    break;
                }
                text = nt;
            }
            size_t np = 0;
            tf_status st = t ? tf_detokenizer_push(d, (int32_t)t->valuedouble, text + n, cap - n, &np)
                             : tf_detokenizer_flush(d, text + n, cap - n, &np);
            if (st != TF_OK) {
                *status = 500;
                break;
            }
            n += np;
            if (!t) break; /* flushed */
        }
        tf_detokenizer_free(d);
        if (!*status) {
            r = cJSON_CreateObject();
            cJSON_AddItemToObject(r, "content", string_n(text, n));
        }
        free(text);
    }
    cJSON_Delete(o);
    return r ? print_free(r) : NULL;
}
