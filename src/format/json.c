/*
 * json.c — cJSON file loading and typed member getters (see json.h).
 */
#include "format/json.h"

#include "core/mem.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Line and column (1-based) of byte `off` of text. */
static void line_col(const char *text, size_t off, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off; i++) {
        if (text[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

__attribute__((format(printf, 5, 6))) static tf_status bad_at(const char *name, const char *text, size_t off,
                                                              tf_err *err, const char *fmt, ...) {
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    int line, col;
    line_col(text, off, &line, &col);
    return tf_errf(err, TF_ERR_FORMAT, "%s: not valid JSON: %s at line %d, column %d (byte %zu)", name, what, line, col,
                   off);
}

/* Length of the UTF-8 sequence at p[0..n), 0 if it is not valid UTF-8
 * (overlong forms, surrogates and code points past U+10FFFF included). */
static size_t utf8_seq(const uint8_t *p, size_t n) {
    uint8_t c = p[0];
    size_t len = 0;
    uint32_t cp = 0;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07;
    if (!len || len > n) return 0;
    for (size_t k = 1; k < len; k++) {
        if ((p[k] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (p[k] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* Length of the JSON number at t[0..n) (RFC 8259: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?)
 * followed by a character that cannot continue a number; 0 if there is none. */
static size_t number_len(const char *t, size_t n) {
    size_t i = 0;
    if (i < n && t[i] == '-') i++;
    if (i < n && t[i] == '0') i++;
    else if (i < n && is_digit(t[i]))
        while (i < n && is_digit(t[i])) i++;
    else return 0;
    if (i < n && t[i] == '.') {
        if (++i >= n || !is_digit(t[i])) return 0;
        while (i < n && is_digit(t[i])) i++;
    }
    if (i < n && (t[i] == 'e' || t[i] == 'E')) {
        i++;
        if (i < n && (t[i] == '+' || t[i] == '-')) i++;
        if (i >= n || !is_digit(t[i])) return 0;
        while (i < n && is_digit(t[i])) i++;
    }
    if (i < n && (is_digit(t[i]) || strchr("+-.eExX", t[i]))) return 0;
    return i;
}

/* The lexical rules cJSON is lenient about, checked as Python's json and
 * serde_json check them: the text is UTF-8; between values only space, tab,
 * CR and LF (cJSON skips any byte <= 0x20, NUL included); inside strings no
 * control character and only the escapes \" \\ \/ \b \f \n \r \t \uXXXX;
 * numbers in the strict grammar (no "+1", "01", "1." or ".5"). */
static tf_status check_lexical(const char *name, const char *text, size_t len, tf_err *err) {
    const uint8_t *u = (const uint8_t *)text;
    bool in_str = false;
    for (size_t i = 0; i < len;) {
        uint8_t c = u[i];
        if (c >= 0x80) {
            size_t k = utf8_seq(u + i, len - i);
            if (!k) return bad_at(name, text, i, err, "byte 0x%02x is not UTF-8", c);
            if (!in_str) return bad_at(name, text, i, err, "a non-ASCII character outside a string");
            i += k;
            continue;
        }
        if (in_str) {
            if (c < 0x20)
                return bad_at(name, text, i, err, "control character 0x%02x inside a string (expected it escaped)", c);
            if (c == '"') in_str = false;
            if (c == '\\') {
                char e = i + 1 < len ? text[i + 1] : '\0';
                if (!e || !strchr("\"\\/bfnrtu", e))
                    return bad_at(name, text, i, err, "an invalid escape in a string");
                if (e == 'u')
                    for (size_t k = 2; k < 6; k++)
                        if (i + k >= len || !strchr("0123456789abcdefABCDEF", text[i + k]))
                            return bad_at(name, text, i, err, "an invalid \\u escape in a string");
                i += e == 'u' ? 6 : 2;
                continue;
            }
            i++;
            continue;
        }
        if (c == '"') {
            in_str = true;
        } else if (c == '-' || is_digit((char)c)) {
            size_t k = number_len(text + i, len - i);
            if (!k) return bad_at(name, text, i, err, "a malformed number");
            i += k;
            continue;
        } else if (c == '+' || c == '.') {
            return bad_at(name, text, i, err, "a malformed number");
        } else if (c < 0x20 && c != ' ' && c != '\t' && c != '\n' && c != '\r') {
            return bad_at(name, text, i, err, "byte 0x%02x between values (expected only space, tab, CR or LF%s)",
                          c, c == 0 ? "; a NUL byte suggests a damaged file" : "");
        }
        i++;
    }
    return TF_OK;
}

static int cmp_key(const void *a, const void *b) {
    return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

/* Every object's keys are unique. Python keeps the last of a repeated key
 * and cJSON the first, so a file with one means different things to
 * different readers: it is refused. Sorting makes large objects (a 150K
 * token vocabulary) cheap. */
static tf_status check_unique_keys(const char *name, const cJSON *v, const char *path, tf_err *err) {
    size_t n = 0;
    for (const cJSON *c = v->child; c; c = c->next) n++;
    if (cJSON_IsObject(v) && n > 1) {
        const cJSON **keys = malloc(n * sizeof *keys);
        if (!keys) return tf_errf(err, TF_ERR_NOMEM, "%s: out of memory checking %zu keys", name, n);
        size_t k = 0;
        for (const cJSON *c = v->child; c; c = c->next) keys[k++] = c;
        qsort(keys, n, sizeof *keys, cmp_key);
        const char *dup = NULL;
        for (k = 1; k < n && !dup; k++)
            if (strcmp(keys[k - 1]->string, keys[k]->string) == 0) dup = keys[k]->string;
        free(keys);
        if (dup)
            return tf_errf(err, TF_ERR_FORMAT,
                           "%s: key '%.80s' appears more than once in %s%s (readers disagree on which value "
                           "counts; expected each key once)",
                           name, dup, path[0] ? "the object at " : "the top-level object", path);
    }
    for (const cJSON *c = v->child; c; c = c->next)
        if (c->child) {
            char sub[200];
            if (cJSON_IsObject(v)) snprintf(sub, sizeof sub, "%.120s%s%.60s", path, path[0] ? "." : "", c->string);
            else snprintf(sub, sizeof sub, "%.180s[]", path);
            TF_TRY(check_unique_keys(name, c, sub, err));
        }
    return TF_OK;
}

tf_status tf_json_parse(const char *name, const char *text, size_t len, cJSON **out, tf_err *err) {
    *out = NULL;
    TF_TRY(check_lexical(name, text, len, err));
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
    size_t off = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
    if (!root) return bad_at(name, text, off, err, "a syntax error");
    while (off < len && strchr(" \t\r\n", text[off])) off++;
    if (off < len) {
        cJSON_Delete(root);
        return bad_at(name, text, off, err, "more data after the top-level value (expected the end of the file)");
    }
    tf_status st = check_unique_keys(name, root, "", err);
    if (st != TF_OK) {
        cJSON_Delete(root);
        return st;
    }
    *out = root;
    return TF_OK;
}

tf_status tf_json_load(const char *path, size_t max_bytes, cJSON **out, tf_err *err) {
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return tf_errf(err, TF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return tf_errf(err, TF_ERR_IO, "%s: is %s (expected a regular file)", path, tf_file_kind(sb.st_mode));
    if ((uint64_t)sb.st_size > max_bytes)
        return tf_errf(err, TF_ERR_FORMAT, "%s: %lld bytes is too large for this JSON file (expected at most %zu)",
                       path, (long long)sb.st_size, max_bytes);
    char *buf = NULL;
    size_t len = 0;
    TF_TRY(tf_read_file(path, &buf, &len, err));
    tf_status st = tf_json_parse(path, buf, len, out, err);
    free(buf);
    return st;
}

/* Member lookup shared by the getters: NULL (not found) for missing or null. */
static const cJSON *member(const cJSON *obj, const char *key) {
    if (!cJSON_IsObject(obj)) return NULL;
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    return it && !cJSON_IsNull(it) ? it : NULL;
}

static tf_status missing(const char *file, const char *key, bool *found, tf_err *err) {
    if (found) {
        *found = false;
        return TF_OK;
    }
    return tf_errf(err, TF_ERR_FORMAT, "%s: key '%s' is missing (required)", file, key);
}

tf_status tf_json_get_num(const char *file, const cJSON *obj, const char *key, double lo, double hi, double *out,
                          bool *found, tf_err *err) {
    const cJSON *it = member(obj, key);
    if (!it) return missing(file, key, found, err);
    if (!cJSON_IsNumber(it)) return tf_errf(err, TF_ERR_FORMAT, "%s: key '%s' is not a number", file, key);
    double v = it->valuedouble;
    if (!isfinite(v) || v < lo || v > hi)
        return tf_errf(err, TF_ERR_FORMAT, "%s: key '%s' = %g is out of range (expected %g..%g)", file, key, v, lo,
                       hi);
    *out = v;
    if (found) *found = true;
    return TF_OK;
}

tf_status tf_json_get_int(const char *file, const cJSON *obj, const char *key, int64_t lo, int64_t hi, int64_t *out,
                          bool *found, tf_err *err) {
    const cJSON *it = member(obj, key);
    if (!it) return missing(file, key, found, err);
    if (!cJSON_IsNumber(it)) return tf_errf(err, TF_ERR_FORMAT, "%s: key '%s' is not a number", file, key);
    double v = it->valuedouble;
    if (!isfinite(v) || v != floor(v) || fabs(v) > 9007199254740992.0)
        return tf_errf(err, TF_ERR_FORMAT, "%s: key '%s' = %g is not an integer", file, key, v);
    if (v < (double)lo || v > (double)hi)
        return tf_errf(err, TF_ERR_FORMAT, "%s: key '%s' = %.0f is out of range (expected %lld..%lld)", file, key, v,
                       (long long)lo, (long long)hi);
    *out = (int64_t)v;
    if (found) *found = true;
    return TF_OK;
}

tf_status tf_json_get_bool(const char *file, const cJSON *obj, const char *key, bool *out, bool *found, tf_err *err) {
    const cJSON *it = member(obj, key);
    if (!it) return missing(file, key, found, err);
    if (!cJSON_IsBool(it)) return tf_errf(err, TF_ERR_FORMAT, "%s: key '%s' is not true or false", file, key);
    *out = cJSON_IsTrue(it);
    if (found) *found = true;
    return TF_OK;
}

tf_status tf_json_get_str(const char *file, const cJSON *obj, const char *key, const char **out, bool *found,
                          tf_err *err) {
    const cJSON *it = member(obj, key);
    if (!it) return missing(file, key, found, err);
    if (!cJSON_IsString(it) || !it->valuestring)
        return tf_errf(err, TF_ERR_FORMAT, "%s: key '%s' is not a string", file, key);
    *out = it->valuestring;
    if (found) *found = true;
    return TF_OK;
}

tf_status tf_json_get_obj(const char *file, const cJSON *obj, const char *key, const cJSON **out, bool *found,
                          tf_err *err) {
    const cJSON *it = member(obj, key);
    *out = NULL;
    if (!it) return missing(file, key, found, err);
    if (!cJSON_IsObject(it)) return tf_errf(err, TF_ERR_FORMAT, "%s: key '%s' is not an object", file, key);
    *out = it;
    if (found) *found = true;
    return TF_OK;
}
