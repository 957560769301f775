/*
 * retrieval_cpu.h — the retrieval cache's ops on the CPU (tf_rc_call in
 * backend/backend.h), host memory, on pool (may be NULL: one thread).
 */
#ifndef TF_BACKEND_CPU_RETRIEVAL_CPU_H
#define TF_BACKEND_CPU_RETRIEVAL_CPU_H

#include "backend/backend.h"
#include "core/threads.h"

size_t tf_cpu_rc_scratch(const tf_rc_call *c, int n_thread);
void tf_cpu_rc_sums(const tf_rc_call *c, tf_pool *pool);
void tf_cpu_rc_select(const tf_rc_call *c, tf_pool *pool);
void tf_cpu_rc_gather(const tf_rc_call *c, tf_pool *pool);

#endif
