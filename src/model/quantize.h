/*
 * quantize.h — convert an F32/F16/BF16 GGUF model to another weight type.
 *
 * Every 2-D tensor (token_embd and output included) is converted row by row
 * through f32 with the reference quantizers; a matrix whose row length is not
 * a multiple of the target's block size is written as F16 instead, with a log
 * line naming it. 1-D tensors (norms) and rope_freqs.* become F32; tensors of
 * three or more dimensions are copied unchanged. All metadata is copied,
 * general.file_type is set for the new type and general.quantization_version
 * (2) is set when the output is block-quantized. Work is streamed tensor by
 * tensor from the mapped input, so memory stays at a few chunks of rows.
 */
#ifndef TF_MODEL_QUANTIZE_H
#define TF_MODEL_QUANTIZE_H

#include "core/dtype.h"
#include "core/error.h"
#include "core/log.h"
#include "format/gguf.h"

#include <stdint.h>

/* llama.cpp's general.file_type value for a model whose weights are mostly
 * `type` (F32 0, F16 1, Q4_0 2, Q4_1 3, Q8_0 7, Q5_0 8, Q5_1 9, Q2_K 10, Q3_K 11
 * "Q3_K_S", Q4_K 14 "Q4_K_S", Q5_K 16 "Q5_K_S", Q6_K 18, IQ4_NL 25, IQ4_XS 30, BF16 32);
 * -1 for other types. */
int32_t tf_gguf_file_type(tf_dtype type);

/* Convert `in` to `out` with 2-D weights of `type` (F32, F16, BF16, Q8_0,
 * Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL or IQ4_XS). log may be NULL; progress (may be NULL) receives
 * bytes written / total and may cancel. n_threads 0 = every CPU.
 * Errors: TF_ERR_INVALID_ARG for a bad type; TF_ERR_UNSUPPORTED when a
 * tensor of `in` is already quantized (naming it and its type); errors of
 * the reader (naming `in`) and of the writer (naming `out`); `out` is only
 * replaced when everything succeeded. `in` and `out` may be the same path. */
tf_status tf_quantize_file(const char *in, const char *out, tf_dtype type, const tf_logger *log,
                           tf_progress_fn progress, void *ud, tf_err *err);
/* The same from a parsed or assembled GGUF view (a Hugging Face directory:
 * `triforce convert`); g is only read. */
tf_status tf_quantize_gguf(const tf_gguf *g, const char *out, tf_dtype type, int n_threads, const tf_logger *log,
                           tf_progress_fn progress, void *ud, tf_err *err);
tf_status tf_quantize_file_threads(const char *in, const char *out, tf_dtype type, int n_threads,
                                   const tf_logger *log, tf_progress_fn progress, void *ud, tf_err *err);

#endif
