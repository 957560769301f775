/*
 * gguf_write.h — GGUF v3 writer (little-endian), the counterpart of gguf.h.
 *
 * A tf_gguf_writer is a builder: the caller adds metadata (every GGUF value
 * type, arrays of numbers and strings) and tensors (name, dtype, shape, and
 * either a borrowed pointer to the bytes or a callback that produces rows on
 * demand), then writes the whole file once. Metadata values are copied into
 * the builder; tensor data is never copied: at write time the writer streams
 * it tensor by tensor, asking a fill callback for bounded chunks of rows, so
 * a multi-GB model is written with one chunk buffer of memory.
 *
 * Layout written: header (magic, version 3, tensor count, KV count), the KV
 * pairs in insertion order, the tensor infos in insertion order, padding to
 * the alignment, then every tensor's data at an aligned offset (tensors in
 * insertion order, each one padded to the alignment, the last one included).
 * The alignment is TF_GGUF_DEFAULT_ALIGNMENT unless the key
 * "general.alignment" is set (it must be a uint32 power of two <= 65536).
 *
 * Errors: TF_ERR_INVALID_ARG for a duplicate key or tensor name, an empty or
 * too long name, a bad shape or a bad value; TF_ERR_UNSUPPORTED for a dtype
 * the engine has no geometry for; TF_ERR_IO naming the path for a failed
 * write; errors from fill callbacks and TF_ERR_CANCELLED from the progress
 * callback are passed through.
 */
#ifndef TF_FORMAT_GGUF_WRITE_H
#define TF_FORMAT_GGUF_WRITE_H

#include "core/dtype.h"
#include "core/error.h"
#include "format/gguf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tf_gguf_writer tf_gguf_writer;

/* What a fill callback learns about the tensor it fills. */
typedef struct tf_gguf_tensor_desc {
    const char *name;  /* NUL-terminated, owned by the writer */
    size_t index;      /* order in which the tensor was added (0-based) */
    uint32_t n_dims;
    int64_t ne[TF_GGUF_MAX_DIMS]; /* ne[0] = row length; unused dims are 1 */
    tf_dtype type;
    uint64_t row_size; /* bytes per row of ne[0] elements */
    int64_t n_rows;    /* ne[1] * ne[2] * ne[3] */
    uint64_t nbytes;   /* row_size * n_rows */
} tf_gguf_tensor_desc;

/* Produce rows [row0, row0 + n_rows) of tensor t, encoded in t->type, into
 * dst (n_rows * t->row_size bytes, 64-byte aligned when writing to a file).
 * Rows are requested in increasing order, each exactly once, from the thread
 * that called the write function. Return TF_OK, or fill err and return its
 * status to abort the write. */
typedef tf_status (*tf_gguf_fill_fn)(void *ud, const tf_gguf_tensor_desc *t, int64_t row0, int64_t n_rows,
                                     void *dst, tf_err *err);

/* New empty builder (NULL only when out of memory). Free with tf_gguf_writer_free. */
tf_gguf_writer *tf_gguf_writer_new(void);
void tf_gguf_writer_free(tf_gguf_writer *w);

/* Largest chunk handed to one fill call when writing a file (default 32 MiB;
 * a chunk always holds at least one row). */
void tf_gguf_writer_set_chunk_bytes(tf_gguf_writer *w, size_t bytes);

/* ---- metadata. Keys are NUL-terminated, 1..TF_GGUF_KEY_MAX bytes, unique. */
tf_status tf_gguf_writer_set_u8(tf_gguf_writer *w, const char *key, uint8_t v, tf_err *err);
tf_status tf_gguf_writer_set_i8(tf_gguf_writer *w, const char *key, int8_t v, tf_err *err);
tf_status tf_gguf_writer_set_u16(tf_gguf_writer *w, const char *key, uint16_t v, tf_err *err);
tf_status tf_gguf_writer_set_i16(tf_gguf_writer *w, const char *key, int16_t v, tf_err *err);
tf_status tf_gguf_writer_set_u32(tf_gguf_writer *w, const char *key, uint32_t v, tf_err *err);
tf_status tf_gguf_writer_set_i32(tf_gguf_writer *w, const char *key, int32_t v, tf_err *err);
tf_status tf_gguf_writer_set_u64(tf_gguf_writer *w, const char *key, uint64_t v, tf_err *err);
tf_status tf_gguf_writer_set_i64(tf_gguf_writer *w, const char *key, int64_t v, tf_err *err);
tf_status tf_gguf_writer_set_f32(tf_gguf_writer *w, const char *key, float v, tf_err *err);
tf_status tf_gguf_writer_set_f64(tf_gguf_writer *w, const char *key, double v, tf_err *err);
tf_status tf_gguf_writer_set_bool(tf_gguf_writer *w, const char *key, bool v, tf_err *err);
tf_status tf_gguf_writer_set_str(tf_gguf_writer *w, const char *key, const char *v, tf_err *err);
/* A string given by pointer and length (may contain any bytes, NUL included). */
tf_status tf_gguf_writer_set_strn(tf_gguf_writer *w, const char *key, const char *v, uint64_t len,
                                  tf_err *err);

/* Array of n numbers (or bools) of GGUF type elem_type, read from `elems`
 * laid out as the matching C array: uint8_t[], int8_t[], uint16_t[], ...,
 * float[] for FLOAT32, double[] for FLOAT64, bool[] for BOOL. */
tf_status tf_gguf_writer_set_arr(tf_gguf_writer *w, const char *key, tf_gguf_type elem_type, const void *elems,
                                 uint64_t n, tf_err *err);
/* Array of n NUL-terminated strings. */
tf_status tf_gguf_writer_set_arr_str(tf_gguf_writer *w, const char *key, const char *const *strs, uint64_t n,
                                     tf_err *err);
/* Array of n strings given by pointer and length. */
tf_status tf_gguf_writer_set_arr_strn(tf_gguf_writer *w, const char *key, const tf_gguf_str *strs, uint64_t n,
                                      tf_err *err);
/* Copy one key-value pair (any type) out of a parsed file. */
tf_status tf_gguf_writer_copy_kv(tf_gguf_writer *w, const tf_gguf_kv *kv, tf_err *err);

/* Remove a key; returns false if it was not set. */
bool tf_gguf_writer_remove_kv(tf_gguf_writer *w, const char *key);
bool tf_gguf_writer_has_kv(const tf_gguf_writer *w, const char *key);
size_t tf_gguf_writer_n_kv(const tf_gguf_writer *w);

/* ---- tensors. Names are NUL-terminated, 1..TF_GGUF_NAME_MAX bytes, unique;
 * 1 <= n_dims <= 4, every ne[i] >= 1, ne[0] a multiple of the dtype's block
 * size, the byte size must not overflow. */

/* Tensor whose encoded bytes (tf_dtype_row_size(type, ne[0]) * rows) are at
 * `data`; borrowed: the bytes must stay valid until the write call returns. */
tf_status tf_gguf_writer_add_tensor(tf_gguf_writer *w, const char *name, tf_dtype type, uint32_t n_dims,
                                    const int64_t *ne, const void *data, tf_err *err);
/* Tensor whose bytes are produced by `fill(ud, ...)` at write time. */
tf_status tf_gguf_writer_add_tensor_fill(tf_gguf_writer *w, const char *name, tf_dtype type, uint32_t n_dims,
                                         const int64_t *ne, tf_gguf_fill_fn fill, void *ud, tf_err *err);
size_t tf_gguf_writer_n_tensors(const tf_gguf_writer *w);

/* Total bytes the file will have (header + padding + data). */
uint64_t tf_gguf_writer_file_size(const tf_gguf_writer *w);

/* Write the file to `path`. Bytes go to "<path>.partial", which is renamed
 * over `path` only after everything was written and closed; on any failure
 * the partial file is removed and `path` is left untouched. progress (may
 * be NULL) is called with bytes written / total bytes after every chunk; it
 * may return false to cancel (TF_ERR_CANCELLED). The builder is unchanged
 * and can be written again. */
tf_status tf_gguf_writer_write_file(tf_gguf_writer *w, const char *path, tf_progress_fn progress, void *ud,
                                    tf_err *err);
/* Write the file into a new malloc'd buffer (*out, *out_size); the caller
 * frees it with free(). On failure *out is NULL. */
tf_status tf_gguf_writer_write_mem(tf_gguf_writer *w, uint8_t **out, size_t *out_size, tf_err *err);

#endif
