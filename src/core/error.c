/* error.c — status names and the tf_err message carrier. */
#include "core/error.h"

#include <stdarg.h>
#include <string.h>

const char *tf_status_str(tf_status st) {
    switch (st) {
    case TF_OK: return "ok";
    case TF_ERR_IO: return "i/o error";
    case TF_ERR_FORMAT: return "invalid format";
    case TF_ERR_UNSUPPORTED: return "unsupported";
    case TF_ERR_INVALID_ARG: return "invalid argument";
    case TF_ERR_NOMEM: return "out of memory";
    case TF_ERR_RANGE: return "out of range";
    case TF_ERR_CANCELLED: return "cancelled";
    case TF_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

void tf_err_clear(tf_err *err) {
    if (!err) return;
    err->status = TF_OK;
    err->msg[0] = '\0';
}

tf_status tf_errf(tf_err *err, tf_status st, const char *fmt, ...) {
    if (!err) return st;
    if (err->status != TF_OK) return err->status; /* first error wins */
    err->status = st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return st;
}

tf_status tf_err_prefix(tf_err *err, const char *fmt, ...) {
    if (!err) return TF_ERR_INTERNAL;
    char pre[TF_ERR_MSG_MAX], old[TF_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    size_t np = strlen(pre);
    if (np >= sizeof err->msg) np = sizeof err->msg - 1;
    memcpy(err->msg, pre, np);
    size_t rest = sizeof err->msg - 1 - np, no = strlen(old);
    if (no > rest) no = rest;
    memcpy(err->msg + np, old, no);
    err->msg[np + no] = '\0';
    return err->status;
}
