/*
 * error.h — status + message carrier used by every internal layer.
 *
 * A tf_err is owned by the caller (usually embedded in a handle). Fallible
 * internal functions take a `tf_err *err` and, on failure, fill it with a
 * status and a message that names the file/field/value and what was expected,
 * then return that status. The first error wins: later tf_errf calls on an
 * already-failed tf_err keep the original message unless it was cleared.
 */
#ifndef TF_CORE_ERROR_H
#define TF_CORE_ERROR_H

#include "triforce.h"
#include <stdio.h>
#include <stdlib.h>

#define TF_ERR_MSG_MAX 1024

typedef struct tf_err {
    tf_status status;
    char msg[TF_ERR_MSG_MAX];
} tf_err;

/* Reset to TF_OK with an empty message. */
void tf_err_clear(tf_err *err);

/* Record a failure (printf-style message); returns st. err may be NULL. */
tf_status tf_errf(tf_err *err, tf_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefix the existing message with context ("loading X: ..."); returns err->status. */
tf_status tf_err_prefix(tf_err *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Always-on assertion for broken invariants (bugs, never input). Aborts with
 * the location: library code must not use it for anything input can cause. */
#define TF_ASSERT(cond)                                                        \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__,         \
                    __LINE__, #cond);                                          \
            abort();                                                           \
        }                                                                      \
    } while (0)

/* Propagate a non-OK status. */
#define TF_TRY(expr)                                                           \
    do {                                                                       \
        tf_status tf_try_st_ = (expr);                                         \
        if (tf_try_st_ != TF_OK) return tf_try_st_;                            \
    } while (0)

#endif
