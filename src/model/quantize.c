/*
 * quantize.c — GGUF model type conversion (see quantize.h).
 *
 * The input is mapped with the defensive reader; every tensor becomes a fill
 * callback of the GGUF writer. A fill call receives a chunk of rows and
 * splits it across the thread pool: each thread copies its source rows to
 * an aligned buffer, widens them to f32 and runs the reference quantizer of
 * the output type straight into the writer's chunk buffer.
 */
#include "model/quantize.h"

#include "backend/cpu/quant.h"
#include "core/mem.h"
#include "core/outpath.h"
#include "core/threads.h"
#include "format/gguf.h"
#include "format/gguf_write.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int32_t tf_gguf_file_type(tf_dtype type) {
    switch (type) {
#define TF_FTYPE_(ID, nm, id, bs, bytes, act, fam, ftype) case TF_DTYPE_##ID: return ftype;
        TF_DTYPE_LIST(TF_FTYPE_)
#undef TF_FTYPE_
    default: return -1;
    }
}

static bool is_float_type(uint32_t t) { return t == TF_DTYPE_F32 || t == TF_DTYPE_F16 || t == TF_DTYPE_BF16; }

typedef struct qjob {
    const tf_gguf_tensor *src;
    tf_dtype out_type;
    int64_t row0, n_rows;
    uint8_t *dst;
    uint64_t dst_row_size, src_row_size;
} qjob;

typedef struct qctx {
    tf_pool *pool;
    int n_threads;
    float **f32_row;   /* [n_threads] rows of max_ne0 floats */
    uint8_t **src_row; /* [n_threads] aligned copies of one source row */
    qjob job;
    bool release_from_map; /* the source is one private file mapping (not an assembled view) */
} qctx;

/* Pool task: rows [row0 + lo, row0 + hi) of the current job. */
static void convert_rows(void *arg, int ith, int nth) {
    qctx *c = arg;
    const qjob *j = &c->job;
    long lo, hi;
    tf_split_range((long)j->n_rows, ith, nth, &lo, &hi);
    int64_t ne0 = j->src->ne[0];
    for (long r = lo; r < hi; r++) {
        const uint8_t *s = j->src->data + (uint64_t)(j->row0 + r) * j->src_row_size;
        memcpy(c->src_row[ith], s, (size_t)j->src_row_size);
        tf_ref_dequantize_row((tf_dtype)j->src->type, c->src_row[ith], c->f32_row[ith], ne0);
        tf_ref_quantize_row(j->out_type, c->f32_row[ith], j->dst + (uint64_t)r * j->dst_row_size, ne0);
    }
}

typedef struct qtensor {
    qctx *ctx;
    const tf_gguf_tensor *src;
} qtensor;

/* The input is a read-only private file mapping: dropping the pages of rows
 * already converted keeps the resident set at a few chunks even for inputs
 * of many GB (a page touched again is simply re-read from the file). */
static void release_source(const uint8_t *p, uint64_t n) {
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)p & ~(pg - 1), b = ((uintptr_t)p + n + pg - 1) & ~(pg - 1);
    (void)madvise((void *)a, b - a, MADV_DONTNEED);
}

static tf_status fill_tensor(void *ud, const tf_gguf_tensor_desc *t, int64_t row0, int64_t n_rows, void *dst,
                             tf_err *err) {
    qtensor *q = ud;
    qctx *c = q->ctx;
    c->job = (qjob){.src = q->src, .out_type = t->type, .row0 = row0, .n_rows = n_rows, .dst = dst,
                    .dst_row_size = t->row_size,
                    .src_row_size = tf_dtype_row_size(q->src->type, q->src->ne[0])};
    if (n_rows == 1 || !c->pool) convert_rows(c, 0, 1);
    else tf_pool_run(c->pool, convert_rows, c);
    if (c->release_from_map)
        release_source(q->src->data + (uint64_t)row0 * c->job.src_row_size, (uint64_t)n_rows * c->job.src_row_size);
    return TF_OK;
}

/* Output type of one tensor (see quantize.h for the policy). */
static tf_dtype choose_type(const tf_gguf_tensor *t, tf_dtype type, const tf_logger *log, const char *in,
                            int *n_fallback) {
    if (t->n_dims == 1 || strncmp(t->name, "rope_freqs", 10) == 0) return TF_DTYPE_F32;
    if (t->n_dims > 2) return (tf_dtype)t->type;
    uint32_t block = tf_dtype_block_size(type);
    if (t->ne[0] % block != 0) {
        tf_logf(log, TF_LOG_WARN, "%s: tensor '%s': row length %lld is not a multiple of the %s block size %u; "
                "writing it as f16", in, t->name, (long long)t->ne[0], tf_dtype_name(type), block);
        (*n_fallback)++;
        return TF_DTYPE_F16;
    }
    return type;
}

static void free_ctx(qctx *c) {
    if (c->f32_row)
        for (int i = 0; i < c->n_threads; i++) tf_free(c->f32_row[i]);
    if (c->src_row)
        for (int i = 0; i < c->n_threads; i++) tf_free(c->src_row[i]);
    free(c->f32_row);
    free(c->src_row);
    if (c->pool) tf_pool_free(c->pool);
}

static tf_status init_ctx(qctx *c, const tf_gguf *g, int n_threads, tf_err *err) {
    memset(c, 0, sizeof *c);
    c->n_threads = n_threads > 0 ? n_threads : tf_cpu_count();
    int64_t max_ne0 = 1;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].ne[0] > max_ne0) max_ne0 = g->tensors[i].ne[0];
    c->f32_row = calloc((size_t)c->n_threads, sizeof *c->f32_row);
    c->src_row = calloc((size_t)c->n_threads, sizeof *c->src_row);
    if (!c->f32_row || !c->src_row) return tf_errf(err, TF_ERR_NOMEM, "%s: out of memory", g->path);
    for (int i = 0; i < c->n_threads; i++) {
        c->f32_row[i] = tf_alloc((size_t)max_ne0 * sizeof(float));
        c->src_row[i] = tf_alloc((size_t)max_ne0 * sizeof(float));
        if (!c->f32_row[i] || !c->src_row[i])
            return tf_errf(err, TF_ERR_NOMEM, "%s: out of memory for rows of %lld values", g->path,
                           (long long)max_ne0);
    }
    if (c->n_threads > 1) TF_TRY(tf_pool_create(&c->pool, c->n_threads, err));
    return TF_OK;
}

static tf_status add_metadata(tf_gguf_writer *w, const tf_gguf *g, tf_dtype type, tf_err *err) {
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const tf_gguf_kv *kv = &g->kv[i];
        if (tf_gguf_str_eq(kv->key, "general.file_type") || tf_gguf_str_eq(kv->key, "general.quantization_version"))
            continue;
        TF_TRY(tf_gguf_writer_copy_kv(w, kv, err));
    }
    TF_TRY(tf_gguf_writer_set_u32(w, "general.file_type", (uint32_t)tf_gguf_file_type(type), err));
    if (tf_dtype_block_size(type) > 1) TF_TRY(tf_gguf_writer_set_u32(w, "general.quantization_version", 2, err));
    return TF_OK;
}

tf_status tf_quantize_gguf(const tf_gguf *gp, const char *out, tf_dtype type, int n_threads, const tf_logger *log,
                           tf_progress_fn progress, void *ud, tf_err *err) {
    if (tf_gguf_file_type(type) < 0)
        return tf_errf(err, TF_ERR_INVALID_ARG,
                       "quantize: output type %s is not supported (expected one of:" TF_DTYPE_NAMES ")",
                       tf_dtype_name(type));
    const tf_gguf g = *gp;
    const char *in = g.path;
    tf_status st = tf_out_path_check(out, in, err);
    if (st == TF_OK && g.n_tensors == 0)
        st = tf_errf(err, TF_ERR_INVALID_ARG,
                     "%s: has no tensors (a vocabulary-only file?); there is nothing to quantize", in);
    for (uint64_t i = 0; i < g.n_tensors && st == TF_OK; i++)
        if (!is_float_type(g.tensors[i].type))
            st = tf_errf(err, TF_ERR_UNSUPPORTED,
                         "%s: tensor '%s' has type %s; quantize needs an f32, f16 or bf16 model (requantizing an "
                         "already quantized file would compound the error: convert from the original weights)",
                         in, g.tensors[i].name, tf_dtype_name(g.tensors[i].type));
    tf_gguf_writer *w = NULL;
    qtensor *qt = NULL;
    qctx ctx;
    memset(&ctx, 0, sizeof ctx);
    if (st == TF_OK) st = init_ctx(&ctx, &g, n_threads, err);
    ctx.release_from_map = g.map.data != NULL && g.release == NULL;
    if (st == TF_OK) {
        w = tf_gguf_writer_new();
        qt = calloc((size_t)(g.n_tensors ? g.n_tensors : 1), sizeof *qt);
        if (!w || !qt) st = tf_errf(err, TF_ERR_NOMEM, "%s: out of memory", out);
        /* output chunks of 8 MiB: the matching input rows are up to 7x larger (f32 -> q4_k) */
        else tf_gguf_writer_set_chunk_bytes(w, (size_t)8 << 20);
    }
    if (st == TF_OK) st = add_metadata(w, &g, type, err);
    int n_fallback = 0, n_converted = 0;
    for (uint64_t i = 0; i < g.n_tensors && st == TF_OK; i++) {
        const tf_gguf_tensor *t = &g.tensors[i];
        tf_dtype ot = choose_type(t, type, log, in, &n_fallback);
        if (t->n_dims > 2) {
            st = tf_gguf_writer_add_tensor(w, t->name, ot, t->n_dims, t->ne, t->data, err);
        } else {
            qt[i] = (qtensor){.ctx = &ctx, .src = t};
            st = tf_gguf_writer_add_tensor_fill(w, t->name, ot, t->n_dims, t->ne, fill_tensor, &qt[i], err);
            n_converted += ot == type;
        }
    }
    if (st == TF_OK) {
        tf_logf(log, TF_LOG_INFO, "quantize: %s -> %s: %llu tensors, %d as %s, %d fell back to f16, %llu bytes", in,
                out, (unsigned long long)g.n_tensors, n_converted, tf_dtype_name(type), n_fallback,
                (unsigned long long)tf_gguf_writer_file_size(w));
        st = tf_gguf_writer_write_file(w, out, progress, ud, err);
    }
    tf_gguf_writer_free(w);
    free(qt);
    free_ctx(&ctx);
    return st;
}

tf_status tf_quantize_file_threads(const char *in, const char *out, tf_dtype type, int n_threads,
                                   const tf_logger *log, tf_progress_fn progress, void *ud, tf_err *err) {
    tf_gguf g;
    TF_TRY(tf_gguf_open(&g, in, err));
    tf_status st = tf_quantize_gguf(&g, out, type, n_threads, log, progress, ud, err);
    tf_gguf_close(&g);
    return st;
}

tf_status tf_quantize_file(const char *in, const char *out, tf_dtype type, const tf_logger *log,
                           tf_progress_fn progress, void *ud, tf_err *err) {
    return tf_quantize_file_threads(in, out, type, 0, log, progress, ud, err);
}
