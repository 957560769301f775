/*
 * log.h — a logging sink passed by value to whoever logs (no globals).
 * A tf_logger with fn == NULL drops everything.
 */
#ifndef TF_CORE_LOG_H
#define TF_CORE_LOG_H

#include "triforce.h"

typedef struct tf_logger {
    tf_log_fn fn;
    void *user_data;
    tf_log_level min_level;
} tf_logger;

void tf_logf(const tf_logger *lg, tf_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
