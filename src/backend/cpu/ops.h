/*
 * ops.h — small per-token ops of the llama forward pass on the CPU. These are
 * O(n_embd) per token, far below the matrix products, so they are plain C
 * that the compiler vectorizes; each is its own reference.
 */
#ifndef TF_BACKEND_CPU_OPS_H
#define TF_BACKEND_CPU_OPS_H

#include <stdbool.h>
#include <stdint.h>

/* y = x / sqrt(mean(x^2) + eps) * w, for n rows of dim elements (strides ld). */
void tf_op_rmsnorm(float *y, const float *x, const float *w, int64_t n, int64_t dim, int64_t ld, float eps);

/* Rotate pair i < n_rot/2 of every head of n rows by angle theta with
 * cos/sin tables [n][n_rot/2]. The pair is (2i, 2i+1) of the head (adjacent
 * pairs: GGUF llama files), or (i, i + n_rot/2) when neox (rotate-half, as
 * Hugging Face defines RoPE and GGUF qwen2 files keep it). */
void tf_op_rope(float *x, int64_t n, int64_t ld, int n_head, int head_dim, int n_rot, bool neox, const float *cos_t,
                const float *sin_t);

/* y[r][i] += b[i] for n rows of dim elements (row stride ld): projection biases. */
void tf_op_add_bias(float *y, const float *b, int64_t n, int64_t dim, int64_t ld);

/* Fill cos/sin tables [n][n_rot/2] for positions pos[n]: theta = pos*freq[i],
 * both scaled by mscale. Angles are formed in double precision. */
void tf_op_rope_table(float *cos_t, float *sin_t, const int32_t *pos, int64_t n, int n_rot, const float *freq,
                      float mscale);

/* g[i] = silu(g[i]) * u[i] for n elements. */
void tf_op_silu_mul(float *g, const float *u, int64_t n);

/* y[i] += x[i] */
void tf_op_add(float *y, const float *x, int64_t n);

#endif
