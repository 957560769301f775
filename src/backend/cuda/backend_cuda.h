/*
 * backend_cuda.h — the CUDA backend behind the backend table
 * (backend/backend.h): one device, one stream, buffers in device memory,
 * per-pass CUDA graphs for up to TF_CUDA_GEMV_MAX_ROWS rows. Weights of
 * types f32, f16, bf16, q8_0, q4_0 and q4_1; KV caches in f16; q/k/v biases
 * and rotate-half RoPE (qwen2). What it lacks, supports() says, and the
 * model check refuses such models by name.
 *
 * Defined only with `make CUDA=1` (TF_HAVE_CUDA); the ops table is plain C
 * over the kernels of cuda_backend.h.
 */
#ifndef TF_BACKEND_CUDA_BACKEND_CUDA_H
#define TF_BACKEND_CUDA_BACKEND_CUDA_H

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"

/* Open device `device` as a backend (fails as tf_cuda_open). */
tf_status tf_backend_cuda_open(tf_backend *be, int device, tf_err *err);
/* A backend over an open device that the caller keeps (tests). */
tf_status tf_backend_cuda_wrap(tf_backend *be, tf_cuda *cu, tf_err *err);
/* The device of a CUDA backend. */
tf_cuda *tf_backend_cuda_device(const tf_backend *be);
/* The table, for a probe {ops, NULL} that asks supports() before opening. */
const tf_backend_ops *tf_backend_cuda_ops(void);

#endif
