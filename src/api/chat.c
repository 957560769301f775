/*
 * chat.c — a conversation formatted with the model's chat template.
 *
 * A GGUF carries its chat template as Jinja source (tokenizer.chat_template).
 * This engine does not interpret Jinja; it recognises the template families
 * that models publish by the markers their templates emit, and writes the
 * same text the template renders for [system?, user, assistant, ..., user] +
 * the opened assistant turn (add_generation_prompt). The BOS a template
 * writes first is left out: the tokenizer adds it (add_special). BOS and EOS
 * markers inside the text (llama2's later turns, the end of an assistant
 * turn) are written as the family's token texts ("<s>", "</s>",
 * "<｜end▁of▁sentence｜>"), to be tokenized with parse_special. A chatml
 * template that inserts a default system message when the conversation has
 * none (a quoted literal '<|im_start|>system\n...<|im_end|>\n' in the
 * template), and the deepseek-coder template's default system prompt, are
 * written when the caller gives no system message. Anything else is refused
 * by name, so a prompt is never formatted with a guessed template.
 */
#include "triforce.h"

#include "model/model.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum {
    CHAT_CHATML,
    CHAT_LLAMA3,
    CHAT_LLAMA2,
    CHAT_MISTRAL,
    CHAT_ZEPHYR,
    CHAT_DEEPSEEK,
    CHAT_DEEPSEEK_CODER,
    CHAT_DEEPSEEK3,
    CHAT_N_FAMILIES
} chat_family;

/* Each family: its name (--chat-template NAME) and the marker by which its
 * template is recognised, as the error lists them. */
static const struct {
    const char *id, *marker;
} k_families[] = {
    [CHAT_CHATML] = {"chatml", "<|im_start|>"},
    [CHAT_LLAMA3] = {"llama3", "<|start_header_id|>"},
    [CHAT_LLAMA2] = {"llama2", "[INST] with <<SYS>>"},
    [CHAT_MISTRAL] = {"mistral", "[INST]"},
    [CHAT_ZEPHYR] = {"zephyr", "<|user|>"},
    [CHAT_DEEPSEEK] = {"deepseek", "'User: ' and 'Assistant:'"},
    [CHAT_DEEPSEEK_CODER] = {"deepseek-coder", "### Instruction: and ### Response:"},
    [CHAT_DEEPSEEK3] = {"deepseek3", "<｜User｜>"},
};
_Static_assert(sizeof k_families / sizeof k_families[0] == CHAT_N_FAMILIES, "one row per chat family");

/* The token texts the families write between turns. */
#define LLAMA_BOS "<s>"
#define LLAMA_EOS "</s>"
#define DEEPSEEK_EOS "<｜end▁of▁sentence｜>"

/* The system prompt of the published deepseek-coder instruct template (its
 * quoted literal, line break included), for the family named without a
 * template; a template of the family gives its own. */
static const char k_deepseek_coder_system[] =
    "You are an AI programming assistant, utilizing the Deepseek Coder model, developed by Deepseek Company, and you "
    "only answer questions related to computer science. For politically sensitive questions, security and privacy "
    "issues, and other non-computer science questions, you will refuse to answer\n";

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

/* A quoted Jinja string literal that starts at p (its opening quote, ' or "),
 * with the escapes \n, \t and \<char> resolved, appended to out. Returns the
 * position after the closing quote, or NULL when the literal does not close
 * before end (out is then as it was). */
static const char *jinja_literal(const char *p, const char *end, sbuf *out) {
    const char q = *p++;
    const size_t n0 = out->n;
    for (; p < end && *p != q; p++) {
        char c = *p;
        if (c == '\\' && p + 1 < end) {
            c = *++p;
            c = c == 'n' ? '\n' : c == 't' ? '\t' : c;
        }
        sb_put(out, &c, 1);
    }
    if (p < end) return p + 1;
    out->n = n0;
    if (out->p) out->p[n0] = 0;
    return NULL;
}

/* The default system message of a chatml template: the text between
 * '<|im_start|>system\n and <|im_end|>\n' inside one quoted literal, with the
 * literal's escapes resolved. Empty when there is none. */
static void chatml_default_system(const char *t, size_t n, sbuf *out) {
    /* the line break after "system" is written as the escape \n or as a raw
     * line break inside the literal; both render the same */
    static const char open_esc[] = "'<|im_start|>system\\n", open_raw[] = "'<|im_start|>system\n";
    static const char head[] = "<|im_start|>system\n", close[] = "<|im_end|>\n";
    const char *s = memmem(t, n, open_esc, sizeof open_esc - 1);
    if (!s) s = memmem(t, n, open_raw, sizeof open_raw - 1);
    if (!s) return;
    sbuf lit = {0};
    if (jinja_literal(s, t + n, &lit) && lit.n >= sizeof head - 1 + sizeof close - 1 &&
        memcmp(lit.p + lit.n - (sizeof close - 1), close, sizeof close - 1) == 0)
        sb_put(out, lit.p + sizeof head - 1, lit.n - (sizeof head - 1) - (sizeof close - 1));
    free(lit.p);
}

/* The default system prompt of a deepseek-coder template: the one quoted
 * literal that {% if not ns.found %} writes ({{'...'}}, for a conversation
 * without a system message), escapes resolved. Empty when there is none. */
static void deepseek_coder_default_system(const char *t, size_t n, sbuf *out) {
    static const char cond[] = "not ns.found";
    const char *end = t + n, *s = memmem(t, n, cond, sizeof cond - 1);
    if (!s) return;
    const char *e = memmem(s, (size_t)(end - s), "{{", 2), *endif = memmem(s, (size_t)(end - s), "endif", 5);
    if (!e || (endif && endif < e)) return;
    for (e += 2; e < end && (*e == '-' || *e == ' '); e++) {}
    if (e == end || (*e != '\'' && *e != '"')) return;
    sbuf lit = {0};
    const char *after = jinja_literal(e, end, &lit);
    while (after && after < end && (*after == ' ' || *after == '-')) after++;
    if (after && end - after >= 2 && memcmp(after, "}}", 2) == 0 && lit.p) sb_put(out, lit.p, lit.n);
    free(lit.p);
}

static tf_status chat_fail(char *errbuf, size_t errbuf_size, tf_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static tf_status chat_fail(char *errbuf, size_t errbuf_size, tf_status st, const char *fmt, ...) {
    if (errbuf && errbuf_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(errbuf, errbuf_size, fmt, ap);
        va_end(ap);
    }
    return st;
}

/* The families' names, with their markers when `markers`, for messages. */
static const char *family_list(char *buf, size_t size, bool markers) {
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < CHAT_N_FAMILIES && at < size; i++) {
        int k = markers ? snprintf(buf + at, size - at, "%s%s (%s)", i ? ", " : "", k_families[i].id,
                                   k_families[i].marker)
                        : snprintf(buf + at, size - at, "%s%s", i ? ", " : "", k_families[i].id);
        if (k < 0) break;
        at += (size_t)k;
    }
    return buf;
}

/* The template's family, or an error naming the known ones. A marker that
 * several families' templates contain is tested after the more specific
 * ones: mistral's [INST] after llama2's [INST] with <<SYS>>, deepseek's
 * plain 'User: ' last. DeepSeek-R1's templates (deepseek3's turns, with
 * <think>) are refused by name. */
static tf_status chat_family_of(const tf_model *m, chat_family *fam, const char **t, size_t *tn, char *errbuf,
                                size_t errbuf_size) {
    tf_gguf_str tmpl = {0};
    bool found = false;
    tf_err err = {0};
    if (tf_gguf_get_str(&m->gguf, "tokenizer.chat_template", &tmpl, &found, &err) != TF_OK || !found)
        return chat_fail(errbuf, errbuf_size, TF_ERR_UNSUPPORTED, "%s: %s; give the formatted prompt instead",
                         m->path[0] ? m->path : "model",
                         found ? err.msg : "no chat template (tokenizer.chat_template is absent)");
    *t = tmpl.data;
    *tn = (size_t)tmpl.len;
    if (has(*t, *tn, "<|im_start|>")) *fam = CHAT_CHATML;
    else if (has(*t, *tn, "<|start_header_id|>")) *fam = CHAT_LLAMA3;
    else if (has(*t, *tn, "<｜User｜>") && has(*t, *tn, "think>"))
        return chat_fail(errbuf, errbuf_size, TF_ERR_UNSUPPORTED,
                         "%s: the chat template (<｜User｜> with <think>) is DeepSeek-R1's, whose reasoning "
                         "(<think> opened, earlier turns' reasoning cut) is not written here; give the formatted "
                         "prompt instead, or name the family deepseek3 for its turns without the reasoning",
                         m->path[0] ? m->path : "model");
    else if (has(*t, *tn, "<｜User｜>")) *fam = CHAT_DEEPSEEK3;
    else if (has(*t, *tn, "### Instruction:") && has(*t, *tn, "### Response:")) *fam = CHAT_DEEPSEEK_CODER;
    else if (has(*t, *tn, "[INST]") && has(*t, *tn, "<<SYS>>")) *fam = CHAT_LLAMA2;
    else if (has(*t, *tn, "[INST]")) *fam = CHAT_MISTRAL;
    else if (has(*t, *tn, "<|user|>")) *fam = CHAT_ZEPHYR;
    else if (has(*t, *tn, "'User: '") && has(*t, *tn, "'Assistant:'")) *fam = CHAT_DEEPSEEK;
    else {
        char known[512];
        return chat_fail(errbuf, errbuf_size, TF_ERR_UNSUPPORTED,
                         "%s: the chat template (tokenizer.chat_template, %zu bytes) is not of a known family; "
                         "known: %s; give the formatted prompt instead",
                         m->path[0] ? m->path : "model", *tn, family_list(known, sizeof known, true));
    }
    return TF_OK;
}

tf_status tf_model_chat_format(const tf_model *m, const tf_chat_message *msgs, size_t n, char **out, char *errbuf,
                               size_t errbuf_size) {
    return tf_model_chat_format_as(m, NULL, msgs, n, out, errbuf, errbuf_size);
}

tf_status tf_model_chat_format_as(const tf_model *m, const char *family, const tf_chat_message *msgs, size_t n,
                                  char **out, char *errbuf, size_t errbuf_size) {
    *out = NULL;
    int forced = -1;
    if (family) {
        for (int i = 0; i < CHAT_N_FAMILIES; i++)
            if (strcmp(family, k_families[i].id) == 0) forced = i;
        if (forced < 0) {
            char known[256];
            return chat_fail(errbuf, errbuf_size, TF_ERR_INVALID_ARG, "chat template '%.40s' is not one of %s",
                             family, family_list(known, sizeof known, false));
        }
    }
    if (!msgs || n == 0) return chat_fail(errbuf, errbuf_size, TF_ERR_INVALID_ARG, "chat: no messages");
    for (size_t i = 0; i < n; i++) {
        const char *r = msgs[i].role;
        if (!r || !msgs[i].content)
            return chat_fail(errbuf, errbuf_size, TF_ERR_INVALID_ARG, "chat: message %zu has no role or content", i);
        bool sys = strcmp(r, "system") == 0, user = strcmp(r, "user") == 0, asst = strcmp(r, "assistant") == 0;
        if (!sys && !user && !asst)
            return chat_fail(errbuf, errbuf_size, TF_ERR_INVALID_ARG,
                             "chat: message %zu has role '%.40s' (expected system, user or assistant)", i, r);
        if (sys && i != 0)
            return chat_fail(errbuf, errbuf_size, TF_ERR_INVALID_ARG,
                             "chat: message %zu is a system message; only the first message may be one", i);
        size_t first = strcmp(msgs[0].role, "system") == 0;
        if (i >= first && (user != (((i - first) % 2) == 0)))
            return chat_fail(errbuf, errbuf_size, TF_ERR_INVALID_ARG,
                             "chat: message %zu has role %s; after the optional system message the roles alternate "
                             "user, assistant, user, ... and end with user",
                             i, r);
    }
    if (strcmp(msgs[n - 1].role, "user") != 0)
        return chat_fail(errbuf, errbuf_size, TF_ERR_INVALID_ARG,
                         "chat: the last message has role %s (expected user: the reply is the assistant's turn)",
                         msgs[n - 1].role);
    chat_family fam = CHAT_CHATML;
    const char *t = NULL;
    size_t tn = 0;
    if (forced >= 0) fam = (chat_family)forced; /* no template text: no chatml default system message */
    else TF_TRY(chat_family_of(m, &fam, &t, &tn, errbuf, errbuf_size));
    const char *system = strcmp(msgs[0].role, "system") == 0 ? msgs[0].content : NULL;
    /* turns[i] is a user message for even i, an assistant message for odd i (checked above) */
    const tf_chat_message *turns = msgs + (system != NULL);
    size_t n_turns = n - (system != NULL);
    if (fam == CHAT_MISTRAL && system)
        return chat_fail(errbuf, errbuf_size, TF_ERR_UNSUPPORTED,
                         "chat: the model's template (mistral family) has no system role");
    sbuf b = {0}, def = {0};
    switch (fam) {
    case CHAT_CHATML:
        if (!system) {
            if (t) chatml_default_system(t, tn, &def);
            if (def.n) system = def.p;
        }
        if (system) sb_puts(&b, "<|im_start|>system\n"), sb_puts(&b, system), sb_puts(&b, "<|im_end|>\n");
        for (size_t i = 0; i < n_turns; i++)
            sb_puts(&b, "<|im_start|>"), sb_puts(&b, turns[i].role), sb_puts(&b, "\n"),
                sb_puts(&b, turns[i].content), sb_puts(&b, "<|im_end|>\n");
        sb_puts(&b, "<|im_start|>assistant\n");
        break;
    case CHAT_LLAMA3: /* the template trims every message */
        if (system) {
            sb_puts(&b, "<|start_header_id|>system<|end_header_id|>\n\n");
            sb_put_stripped(&b, system, strlen(system));
            sb_puts(&b, "<|eot_id|>");
        }
        for (size_t i = 0; i < n_turns; i++) {
            sb_puts(&b, "<|start_header_id|>"), sb_puts(&b, turns[i].role), sb_puts(&b, "<|end_header_id|>\n\n");
            sb_put_stripped(&b, turns[i].content, strlen(turns[i].content));
            sb_puts(&b, "<|eot_id|>");
        }
        sb_puts(&b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    case CHAT_LLAMA2:
        /* a user turn: BOS (but the first, which the tokenizer adds), then the
         * message stripped inside [INST] ... [/INST], the first one with the
         * system block before it, stripped as one string; an assistant turn:
         * the message stripped between spaces, then EOS */
        for (size_t i = 0; i < n_turns; i++) {
            if (i % 2) {
                sb_puts(&b, " ");
                sb_put_stripped(&b, turns[i].content, strlen(turns[i].content));
                sb_puts(&b, " " LLAMA_EOS);
                continue;
            }
            sbuf c = {0};
            if (i == 0 && system) sb_puts(&c, "<<SYS>>\n"), sb_puts(&c, system), sb_puts(&c, "\n<</SYS>>\n\n");
            sb_puts(&c, turns[i].content);
            sb_puts(&b, i ? LLAMA_BOS "[INST] " : "[INST] ");
            if (c.p) sb_put_stripped(&b, c.p, c.n);
            b.oom |= c.oom;
            free(c.p);
            sb_puts(&b, " [/INST]");
        }
        break;
    case CHAT_MISTRAL: /* Mistral-7B-Instruct-v0.1: assistant turns unpadded, each ended by EOS */
        for (size_t i = 0; i < n_turns; i++)
            if (i % 2) sb_puts(&b, turns[i].content), sb_puts(&b, LLAMA_EOS);
            else sb_puts(&b, "[INST] "), sb_puts(&b, turns[i].content), sb_puts(&b, " [/INST]");
        break;
    case CHAT_ZEPHYR:
        if (system) sb_puts(&b, "<|system|>\n"), sb_puts(&b, system), sb_puts(&b, LLAMA_EOS "\n");
        for (size_t i = 0; i < n_turns; i++)
            sb_puts(&b, "<|"), sb_puts(&b, turns[i].role), sb_puts(&b, "|>\n"), sb_puts(&b, turns[i].content),
                sb_puts(&b, LLAMA_EOS "\n");
        sb_puts(&b, "<|assistant|>\n");
        break;
    case CHAT_DEEPSEEK: /* deepseek-llm chat, DeepSeek-V2 chat */
        if (system) sb_puts(&b, system), sb_puts(&b, "\n\n");
        for (size_t i = 0; i < n_turns; i++)
            if (i % 2) sb_puts(&b, "Assistant: "), sb_puts(&b, turns[i].content), sb_puts(&b, DEEPSEEK_EOS);
            else sb_puts(&b, "User: "), sb_puts(&b, turns[i].content), sb_puts(&b, "\n\n");
        sb_puts(&b, "Assistant:");
        break;
    case CHAT_DEEPSEEK_CODER: /* the system message is written as it is, with no line break after it */
        if (!system) {
            if (t) deepseek_coder_default_system(t, tn, &def);
            else sb_puts(&def, k_deepseek_coder_system);
            if (def.n) system = def.p;
        }
        if (system) sb_puts(&b, system);
        for (size_t i = 0; i < n_turns; i++)
            if (i % 2) sb_puts(&b, "### Response:\n"), sb_puts(&b, turns[i].content), sb_puts(&b, "\n<|EOT|>\n");
            else sb_puts(&b, "### Instruction:\n"), sb_puts(&b, turns[i].content), sb_puts(&b, "\n");
        sb_puts(&b, "### Response:\n");
        break;
    case CHAT_DEEPSEEK3: /* DeepSeek-V3, V2.5, Coder-V2 */
        if (system) sb_puts(&b, system);
        for (size_t i = 0; i < n_turns; i++)
            if (i % 2) sb_puts(&b, "<｜Assistant｜>"), sb_puts(&b, turns[i].content), sb_puts(&b, DEEPSEEK_EOS);
            else sb_puts(&b, "<｜User｜>"), sb_puts(&b, turns[i].content);
        sb_puts(&b, "<｜Assistant｜>");
        break;
    case CHAT_N_FAMILIES: break;
    }
    b.oom |= def.oom;
    free(def.p);
    if (b.oom || !b.p) {
        free(b.p);
        return chat_fail(errbuf, errbuf_size, TF_ERR_NOMEM, "chat prompt: out of memory");
    }
    *out = b.p;
    return TF_OK;
}

tf_status tf_model_chat_prompt(const tf_model *m, const char *system, const char *user, char **out, char *errbuf,
                               size_t errbuf_size) {
    *out = NULL;
    if (!user) return chat_fail(errbuf, errbuf_size, TF_ERR_INVALID_ARG, "chat prompt: the user message is NULL");
    tf_chat_message msgs[2] = {{"system", system}, {"user", user}};
    return system ? tf_model_chat_format(m, msgs, 2, out, errbuf, errbuf_size)
                  : tf_model_chat_format(m, msgs + 1, 1, out, errbuf, errbuf_size);
}
