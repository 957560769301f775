/*
 * chat.c — one user turn formatted with the model's chat template.
 *
 * A GGUF carries its chat template as Jinja source (tokenizer.chat_template).
 * This engine does not interpret Jinja; it recognises the template families
 * that models publish by the markers their templates emit, and writes the
 * same text the template renders for [system?, user] + the opened assistant
 * turn (add_generation_prompt). A chatml template that inserts a default
 * system message when the conversation has none (a quoted literal
 * '<|im_start|>system\n...<|im_end|>\n' in the template) gets that message
 * when the caller gives none. Anything else is refused by name, so a prompt
 * is never formatted with a guessed template.
 */
#include "triforce.h"

#include "model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { CHAT_CHATML, CHAT_LLAMA3, CHAT_LLAMA2, CHAT_MISTRAL, CHAT_ZEPHYR } chat_family;

static const char *const k_family_names = "chatml (<|im_start|>), llama3 (<|start_header_id|>), "
                                          "llama2 ([INST] with <<SYS>>), mistral ([INST]), zephyr (<|user|>)";

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t len) {
    if (b->oom) return;
    if (b->n + len + 1 > b->cap) {
        size_t cap = (b->n + len + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = 0;
}

static void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

/* s without leading and trailing whitespace (Jinja's trim / Python's strip). */
static void sb_put_stripped(sbuf *b, const char *s, size_t len) {
    while (len && strchr(" \t\n\r\v\f", s[0])) s++, len--;
    while (len && strchr(" \t\n\r\v\f", s[len - 1])) len--;
    sb_put(b, s, len);
}

static bool has(const char *t, size_t n, const char *needle) { return memmem(t, n, needle, strlen(needle)) != NULL; }

/* The default system message of a chatml template: the text between
 * '<|im_start|>system\n and <|im_end|>\n' inside one quoted literal, with the
 * literal's escapes (\n, \', \\) resolved. Empty when there is none. */
static void chatml_default_system(const char *t, size_t n, sbuf *out) {
    static const char open[] = "'<|im_start|>system\\n";
    const char *s = memmem(t, n, open, sizeof open - 1);
    if (!s) return;
    const char *p = s + sizeof open - 1, *end = t + n;
    sbuf tmp = {0};
    for (; p < end && *p != '\''; p++) {
        if (*p == '\\' && p + 1 < end) {
            p++;
            char c = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p;
            sb_put(&tmp, &c, 1);
        } else {
            sb_put(&tmp, p, 1);
        }
    }
    static const char close[] = "<|im_end|>\n";
    if (p < end && tmp.p && tmp.n >= sizeof close - 1 && memcmp(tmp.p + tmp.n - (sizeof close - 1), close, sizeof close - 1) == 0)
        sb_put(out, tmp.p, tmp.n - (sizeof close - 1));
    free(tmp.p);
}

tf_status tf_model_chat_prompt(const tf_model *m, const char *system, const char *user, char **out, char *errbuf,
                               size_t errbuf_size) {
    *out = NULL;
    if (!user) {
        if (errbuf && errbuf_size) snprintf(errbuf, errbuf_size, "chat prompt: the user message is NULL");
        return TF_ERR_INVALID_ARG;
    }
    tf_gguf_str tmpl = {0};
    bool found = false;
    tf_err err = {0};
    if (tf_gguf_get_str(&m->gguf, "tokenizer.chat_template", &tmpl, &found, &err) != TF_OK || !found) {
        if (errbuf && errbuf_size)
            snprintf(errbuf, errbuf_size, "%s: %s; give the formatted prompt with -p instead of --chat",
                     m->path[0] ? m->path : "model",
                     found ? err.msg : "no chat template (tokenizer.chat_template is absent)");
        return TF_ERR_UNSUPPORTED;
    }
    const char *t = tmpl.data;
    size_t tn = (size_t)tmpl.len;
    chat_family fam;
    if (has(t, tn, "<|im_start|>")) fam = CHAT_CHATML;
    else if (has(t, tn, "<|start_header_id|>")) fam = CHAT_LLAMA3;
    else if (has(t, tn, "[INST]") && has(t, tn, "<<SYS>>")) fam = CHAT_LLAMA2;
    else if (has(t, tn, "[INST]")) fam = CHAT_MISTRAL;
    else if (has(t, tn, "<|user|>")) fam = CHAT_ZEPHYR;
    else {
        if (errbuf && errbuf_size)
            snprintf(errbuf, errbuf_size,
                     "%s: the chat template (tokenizer.chat_template, %zu bytes) is not of a known family; "
                     "known: %s; give the formatted prompt with -p instead of --chat",
                     m->path[0] ? m->path : "model", tn, k_family_names);
        return TF_ERR_UNSUPPORTED;
    }
    sbuf b = {0}, def = {0};
    if (fam == CHAT_MISTRAL && system) {
        if (errbuf && errbuf_size)
            snprintf(errbuf, errbuf_size, "chat prompt: the model's template (mistral family) has no system role");
        return TF_ERR_UNSUPPORTED;
    }
    switch (fam) {
    case CHAT_CHATML:
        if (!system) {
            chatml_default_system(t, tn, &def);
            if (def.n) system = def.p;
        }
        if (system) sb_puts(&b, "<|im_start|>system\n"), sb_puts(&b, system), sb_puts(&b, "<|im_end|>\n");
        sb_puts(&b, "<|im_start|>user\n"), sb_puts(&b, user), sb_puts(&b, "<|im_end|>\n<|im_start|>assistant\n");
        break;
    case CHAT_LLAMA3: /* the template trims every message */
        if (system) {
            sb_puts(&b, "<|start_header_id|>system<|end_header_id|>\n\n");
            sb_put_stripped(&b, system, strlen(system));
            sb_puts(&b, "<|eot_id|>");
        }
        sb_puts(&b, "<|start_header_id|>user<|end_header_id|>\n\n");
        sb_put_stripped(&b, user, strlen(user));
        sb_puts(&b, "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    case CHAT_LLAMA2: { /* the template strips the system block + user message as one string */
        sbuf c = {0};
        if (system) sb_puts(&c, "<<SYS>>\n"), sb_puts(&c, system), sb_puts(&c, "\n<</SYS>>\n\n");
        sb_puts(&c, user);
        sb_puts(&b, "[INST] ");
        if (c.p) sb_put_stripped(&b, c.p, c.n);
        b.oom |= c.oom;
        free(c.p);
        sb_puts(&b, " [/INST]");
        break;
    }
    case CHAT_MISTRAL:
        sb_puts(&b, "[INST] "), sb_puts(&b, user), sb_puts(&b, " [/INST]");
        break;
    case CHAT_ZEPHYR:
        if (system) sb_puts(&b, "<|system|>\n"), sb_puts(&b, system), sb_puts(&b, "</s>\n");
        sb_puts(&b, "<|user|>\n"), sb_puts(&b, user), sb_puts(&b, "</s>\n<|assistant|>\n");
        break;
    }
    free(def.p);
    if (b.oom || !b.p) {
        free(b.p);
        if (errbuf && errbuf_size) snprintf(errbuf, errbuf_size, "chat prompt: out of memory");
        return TF_ERR_NOMEM;
    }
    *out = b.p;
    return TF_OK;
}
