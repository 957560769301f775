/*
 * backend_cpu.h — the CPU backend (backend/backend.h): the kernels of this
 * folder behind the backend table, on a thread pool with an instruction-set
 * cap (TF_ISA_BEST: the best this CPU has). Buffers are host memory.
 */
#ifndef TF_BACKEND_CPU_BACKEND_CPU_H
#define TF_BACKEND_CPU_BACKEND_CPU_H

#include "backend/backend.h"
#include "backend/cpu/quant.h"
#include "core/threads.h"

/* pool may be NULL (one thread); it is not owned. */
tf_status tf_backend_cpu_init(tf_backend *be, tf_pool *pool, tf_isa isa, tf_err *err);

#endif
