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
 * `type` (the registry's ftype column, core/dtype_list.h); -1 for types that
 * are not in the registry. */
int32_t tf_gguf_file_type(tf_dtype type);

/* Convert `in` to `out` with 2-D weights of `type` (any type of the
 * registry, core/dtype_list.h). log may be NULL; progress (may be NULL) receives
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
