/* log.c — formats one line and hands it to the logger's sink. */
#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>

void tf_logf(const tf_logger *lg, tf_log_level level, const char *fmt, ...) {
    if (!lg || !lg->fn || level < lg->min_level) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    lg->fn(lg->user_data, level, line);
}
