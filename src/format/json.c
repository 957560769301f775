/*
 * json.c — cJSON file loading and typed member getters (see json.h).
 */
#include "format/json.h"

#include "core/mem.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

tf_status tf_json_parse(const char *name, const char *text, size_t len, cJSON **out, tf_err *err) {
    *out = NULL;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (!root) {
        /* cJSON reports where it stopped; turn that into line:column. */
        size_t off = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
        int line = 1, col = 1;
        for (size_t i = 0; i < off; i++) {
            if (text[i] == '\n') {
                line++;
                col = 1;
            } else {
                col++;
            }
        }
        return tf_errf(err, TF_ERR_FORMAT, "%s: not valid JSON (error near line %d, column %d)", name, line, col);
    }
    *out = root;
    return TF_OK;
}

tf_status tf_json_load(const char *path, size_t max_bytes, cJSON **out, tf_err *err) {
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return tf_errf(err, TF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode)) return tf_errf(err, TF_ERR_IO, "%s: not a regular file", path);
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
