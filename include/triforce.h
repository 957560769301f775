/*
 * triforce.h — public C API of libtriforce.
 *
 * Opaque handles (tf_model, tf_context, tf_sampler), parameter structs with
 * *_default_params() constructors, init/free pairs, and status codes. Every
 * fallible call returns a tf_status; the human-readable message of the last
 * failure is available from the handle involved (or from a caller-provided
 * buffer where no handle exists yet). The library never exits, never writes
 * to stdout and never reads the environment.
 */
#ifndef TRIFORCE_H
#define TRIFORCE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes. Anything user input can cause maps to one of these. */
typedef enum tf_status {
    TF_OK = 0,
    TF_ERR_IO = 1,          /* file cannot be opened/read/mapped */
    TF_ERR_FORMAT = 2,      /* malformed or corrupt file content */
    TF_ERR_UNSUPPORTED = 3, /* well-formed but not supported (type, architecture) */
    TF_ERR_INVALID_ARG = 4, /* bad parameter value from the caller */
    TF_ERR_NOMEM = 5,       /* allocation failed */
    TF_ERR_RANGE = 6,       /* size/position beyond a limit (e.g. context full) */
    TF_ERR_CANCELLED = 7,   /* a progress callback asked to stop */
    TF_ERR_INTERNAL = 8,    /* broken invariant; a bug */
} tf_status;

/* Short name of a status ("ok", "io error", ...). Never NULL. */
const char *tf_status_str(tf_status st);

/* Log levels and sink. The sink receives one complete line (no trailing \n). */
typedef enum tf_log_level {
    TF_LOG_DEBUG = 0,
    TF_LOG_INFO = 1,
    TF_LOG_WARN = 2,
    TF_LOG_ERROR = 3,
} tf_log_level;

typedef void (*tf_log_fn)(void *user_data, tf_log_level level, const char *msg);

/* Progress callback: done/total units of work; return false to cancel
 * (the operation then fails with TF_ERR_CANCELLED and leaves state valid). */
typedef bool (*tf_progress_fn)(void *user_data, uint64_t done, uint64_t total);

#ifdef __cplusplus
}
#endif
#endif /* TRIFORCE_H */
