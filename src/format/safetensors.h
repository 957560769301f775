/*
 * safetensors.h — defensive reader for Hugging Face safetensors files and
 * sharded checkpoint directories.
 *
 * File layout: an 8-byte little-endian u64 N, then N bytes of UTF-8 JSON (an
 * object), then the data section. The JSON maps each tensor name to
 *   {"dtype": "BF16", "shape": [rows, cols], "data_offsets": [begin, end]}
 * with offsets relative to the data section (file offset 8 + N); the optional
 * key "__metadata__" maps to an object of string -> string.
 *
 * Trust model: every byte is hostile. The header length is bounded
 * (TF_ST_HEADER_MAX) and checked against the file size; the header must be
 * UTF-8 without control characters or escaped NULs, parse as one JSON object
 * (cJSON) followed only by whitespace; every number must be an integer in
 * [0, 2^53]; element counts and byte sizes are overflow-checked; each
 * tensor's byte range must match dtype size x element count and lie inside
 * the data section; the non-empty ranges must tile the data section exactly,
 * as the reference implementation demands: no overlap, no gap, the first at
 * 0 and the last ending at the file's end (a header length off by a few
 * bytes would otherwise shift every weight and still parse). Empty tensors
 * may sit at any offset inside the data section. Names, metadata keys and
 * JSON keys inside an entry must be unique (cJSON keeps both entries of a
 * duplicated key, so duplicates are looked for explicitly).
 *
 * Alignment: the format does not align the data section (8 + N is a multiple
 * of 8 only by writer convention), so tensor data pointers are recorded as
 * they are and may be unaligned for their element type: read them with memcpy
 * or convert them.
 *
 * Shapes are row-major, outermost dimension first (PyTorch order): shape[n_dims-1]
 * is the contiguous dimension. This is the reverse of GGUF's ne[].
 *
 * Ownership: a tf_st_file owns its mapping (when opened from a file), its
 * tensor array (NUL-terminated name copies) and its metadata copies; all are
 * released by tf_st_close. A tf_st_set owns its files.
 */
#ifndef TF_FORMAT_SAFETENSORS_H
#define TF_FORMAT_SAFETENSORS_H

#include "core/error.h"
#include "core/mem.h"
#include <stdbool.h>
#include <stdint.h>

#define TF_ST_HEADER_MAX (100u << 20)      /* largest accepted header (and index file), bytes */
#define TF_ST_NAME_MAX 255                 /* longest tensor name, bytes */
#define TF_ST_MAX_DIMS 8
#define TF_ST_INT_MAX (1ull << 53)         /* largest integer a JSON number may hold exactly */
#define TF_ST_MAX_SHARDS 4096              /* most distinct shard files in an index */
#define TF_ST_SHARD_NAME_MAX 255           /* longest shard file name, bytes */
#define TF_ST_ENGINE_NONE (-1)             /* tf_st_tensor.engine_type: no engine dtype */
#define TF_ST_INDEX_NAME "model.safetensors.index.json"
#define TF_ST_SINGLE_NAME "model.safetensors"

/* The dtypes of the safetensors format. */
typedef enum tf_st_dtype {
    TF_ST_F64, TF_ST_F32, TF_ST_F16, TF_ST_BF16, TF_ST_I64, TF_ST_I32, TF_ST_I16, TF_ST_I8,
    TF_ST_U8, TF_ST_BOOL, TF_ST_U16, TF_ST_U32, TF_ST_U64, TF_ST_F8_E4M3, TF_ST_F8_E5M2,
    TF_ST_DTYPE_COUNT,
} tf_st_dtype;

typedef struct tf_st_tensor {
    char name[TF_ST_NAME_MAX + 1];  /* NUL-terminated copy, 1..255 bytes */
    tf_st_dtype dtype;
    const char *dtype_name;         /* "BF16", ... (static) */
    uint32_t elem_size;             /* bytes per element */
    int32_t engine_type;            /* tf_dtype (F32, F16, BF16) or TF_ST_ENGINE_NONE */
    uint32_t n_dims;                /* 0 (scalar) .. TF_ST_MAX_DIMS */
    int64_t shape[TF_ST_MAX_DIMS];  /* outermost first; entries past n_dims are 0 */
    uint64_t n_elements;            /* product of the shape (1 for a scalar) */
    uint64_t offset;                /* begin, relative to the data section */
    uint64_t nbytes;                /* end - begin == n_elements * elem_size */
    const uint8_t *data;            /* into the mapping; NOT aligned in general */
} tf_st_tensor;

typedef struct tf_st_meta {
    char *key;   /* owned, NUL-terminated */
    char *value; /* owned, NUL-terminated */
} tf_st_meta;

typedef struct tf_st_file {
    char path[512];          /* for messages */
    tf_mmap map;             /* owned when opened from a file */
    const uint8_t *base;     /* file bytes */
    size_t size;
    uint64_t header_len;     /* N */
    const uint8_t *data;     /* data section, base + 8 + N (unaligned in general) */
    uint64_t data_size;      /* size - 8 - N */
    uint64_t n_tensors;
    tf_st_tensor *tensors;   /* sorted by name */
    uint64_t total_bytes;    /* sum of nbytes */
    uint64_t n_meta;
    tf_st_meta *meta;        /* "__metadata__", sorted by key */
} tf_st_file;

/* Map and parse a file. On failure *f is left closed (safe to tf_st_close)
 * and err names the path, the tensor or key, the bad value and what was
 * expected: TF_ERR_IO (cannot open/map), TF_ERR_FORMAT (malformed),
 * TF_ERR_UNSUPPORTED (a dtype this reader does not know), TF_ERR_NOMEM. */
tf_status tf_st_open(tf_st_file *f, const char *path, tf_err *err);
/* Parse bytes already in memory (not copied; must outlive f). `name` is used
 * in messages. data may be NULL when size is 0. */
tf_status tf_st_parse(tf_st_file *f, const char *name, const uint8_t *data, size_t size, tf_err *err);
/* Release everything; safe on a zeroed, failed or already closed struct. */
void tf_st_close(tf_st_file *f);

/* The tensor with that name, or NULL (binary search). */
const tf_st_tensor *tf_st_find(const tf_st_file *f, const char *name);
/* The "__metadata__" value for key, or NULL. */
const char *tf_st_meta_get(const tf_st_file *f, const char *key);

const char *tf_st_dtype_name(tf_st_dtype dtype);
/* Bytes per element; 0 for an invalid value. */
uint32_t tf_st_dtype_size(tf_st_dtype dtype);
/* Parse a dtype name ("F16"; case-sensitive, as in the format). */
bool tf_st_dtype_from_name(const char *name, tf_st_dtype *out);

/* A checkpoint directory: sharded (index + shard files) or one file. */
typedef struct tf_st_set_entry {
    const tf_st_tensor *tensor;
    uint32_t file;           /* index into tf_st_set.files */
} tf_st_set_entry;

typedef struct tf_st_set {
    char dir[512];           /* for messages */
    bool sharded;            /* loaded through TF_ST_INDEX_NAME */
    uint32_t n_files;
    tf_st_file *files;       /* sharded: one per distinct shard, sorted by file name */
    uint64_t n_tensors;      /* over all files */
    uint64_t total_bytes;    /* sum of the tensors' nbytes */
    tf_st_set_entry *index;  /* n_tensors entries sorted by tensor name */
    uint64_t n_meta;
    tf_st_meta *meta;        /* the index's "metadata": strings, and numbers and
                                booleans as text; other values are skipped */
} tf_st_set;

/* Load DIR/model.safetensors.index.json and its shards, or else
 * DIR/model.safetensors. The index is untrusted: shard names must be plain
 * file names (no '/', '\\' or "..", 1..255 bytes), each distinct shard is
 * opened once, every weight_map entry must exist in the shard it names, and
 * no tensor may appear in two shards. Tensors a shard holds beyond the
 * weight_map are included. Neither file present: TF_ERR_IO naming the
 * directory and both file names. On failure *s is left closed. */
tf_status tf_st_set_open(tf_st_set *s, const char *dir, tf_err *err);
void tf_st_set_close(tf_st_set *s);
/* The tensor with that name, or NULL; *file (if not NULL) receives its file. */
const tf_st_tensor *tf_st_set_find(const tf_st_set *s, const char *name, const tf_st_file **file);
/* The index's "metadata" value for key (as text), or NULL. */
const char *tf_st_set_meta_get(const tf_st_set *s, const char *key);

#endif
