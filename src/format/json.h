/*
 * json.h — reading small JSON files (Hugging Face config.json and friends)
 * through cJSON, with errors that name the file, the key and what was
 * expected.
 *
 * The typed getters look up one member of an object. A missing member gives
 * TF_OK with *found = false, or TF_ERR_FORMAT when found is NULL (required).
 * A member of the wrong type, a non-integral or out-of-range integer, or a
 * non-finite number is TF_ERR_FORMAT naming "<file>: key '<key>'". A JSON
 * null counts as missing (configs write "rope_scaling": null).
 */
#ifndef TF_FORMAT_JSON_H
#define TF_FORMAT_JSON_H

#include "core/error.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Parse the file at `path` (at most max_bytes long) into *out (free with
 * cJSON_Delete). A missing file is TF_ERR_IO; malformed JSON is
 * TF_ERR_FORMAT with the line and column of the error. */
tf_status tf_json_load(const char *path, size_t max_bytes, cJSON **out, tf_err *err);
/* Same for bytes in memory; `name` is used in messages. */
tf_status tf_json_parse(const char *name, const char *text, size_t len, cJSON **out, tf_err *err);

tf_status tf_json_get_int(const char *file, const cJSON *obj, const char *key, int64_t lo, int64_t hi, int64_t *out,
                          bool *found, tf_err *err);
tf_status tf_json_get_num(const char *file, const cJSON *obj, const char *key, double lo, double hi, double *out,
                          bool *found, tf_err *err);
tf_status tf_json_get_bool(const char *file, const cJSON *obj, const char *key, bool *out, bool *found, tf_err *err);
/* *out points into the cJSON tree. */
tf_status tf_json_get_str(const char *file, const cJSON *obj, const char *key, const char **out, bool *found,
                          tf_err *err);
/* An object member (NULL and not found when missing or null). */
tf_status tf_json_get_obj(const char *file, const cJSON *obj, const char *key, const cJSON **out, bool *found,
                          tf_err *err);

#endif
