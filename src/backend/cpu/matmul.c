/*
 * matmul.c — the threaded matrix product Y = X W^T of quant.h on top of the
 * per-ISA tile kernels (tf_cpu_kernels.vec_dot_tile).
 *
 * One pool job per call (tf_cpu_matmul_n: one for up to TF_MATMUL_N_MAX
 * matrices of the same X, their row groups split across the threads as one
 * sequence), in two phases separated by a spin barrier:
 *   1. the activations X are converted to act(wtype) into act_buf, the
 *      blocks of all tokens split evenly across the threads (F32 activations
 *      are used in place: no copy, no barrier). Small activations (decode)
 *      are instead converted by every thread into its own stack buffer, so
 *      decode never waits at a barrier;
 *   2. the output rows are split across the threads in groups of tile_rows
 *      (the kernel table's tile shape for the type), each thread walking its
 *      rows a group at a time and, for each group, every token tile_toks at
 *      a time, so a group of weight rows is read from memory once and reused
 *      from cache by all tokens; many tokens are taken in blocks that fit
 *      L2 (MM_L2_ACT_BYTES), the rows walked once per block, and on the
 *      packed path TF_PACK_ROWS_MAX rows per tile call instead of tile_rows
 *      (each chunk of a token tile's activations, loaded into L1 once, then
 *      serves 16 rows instead of 4: prefill of 512 tokens 5-15% faster on
 *      the TinyLlama shapes, 0-7% on the 8B cut, docs/BENCHMARKS.md). Wide
 *      float rows are also split along the columns (partial sums added into Y) so that
 *      the rows in use stay in L1 while the tokens stream past them.
 * Decode (n_tok == 1) reads every weight byte exactly once: on the packed
 * path as prefill does, each thread one stream through its rows, its tile
 * kernel requesting the next tile's rows as it reads a tile; otherwise in
 * up to MM_GEMV_STREAMS sequential streams per thread far apart (mm_gemv_spread). Nothing
 * is allocated.
 *
 * Where the table has a packed path for the type (act_pack / packed_tile,
 * see quant.h) the activations are packed instead, a whole token row at a
 * time, and tiles take up to TF_PACK_TOKS_MAX tokens: a weight row is
 * unpacked once for all the tokens of a verification pass. Weights the
 * backend holds in the packed weight layout go to wpacked_tile, which skips
 * the per-call rearrangement of each row; prefill hands it TF_WPACK_TOKS_MAX
 * tokens a call (what a tile makes from its rows once serves them all: the
 * 8B cut's prefill 1.19x in Q4_K and 1.20x in Q8_0, docs/BENCHMARKS.md). Weights in the R16 layout (the
 * AMX table's Q8_0, Q4_0, Q4_1, IQ4_NL) go to r16_rows in one call per
 * thread, over its groups of 16 rows and all the tokens, with activations
 * in the R16 format.
 */
#include "backend/cpu/quant.h"

#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "core/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MM_PAUSE() _mm_pause()
#else
#define MM_PAUSE() ((void)0)
#endif

/* Bytes of a group of weight rows that one column chunk may span (prefill only). */
#define MM_L1_WEIGHT_BYTES (16 * 1024)
/* Activation bytes of the tokens that pass a thread's rows together (prefill):
 * a block stays in L2 (1-2 MiB per core on current x86) while every row of
 * the thread's range takes it, and the rows are read once per block (at 512
 * tokens of 4,096 Q8_0 columns, 3 blocks instead of one pass of all tokens
 * per row from L3: prefill of 512 tokens on the Llama-3.1-8B cut in Q8_0
 * 373 -> 427 tok/s, docs/BENCHMARKS.md). */
#define MM_L2_ACT_BYTES (512 * 1024)
/* Pauses (about 40 ns each) a thread spins at the barrier before yielding. */
#define MM_SPIN_BEFORE_YIELD 256
/* Activations up to this size (decode: one token of up to ~15k columns) are
 * converted by every thread into its own stack buffer: cheaper than making
 * the threads wait for each other at a barrier. */
#define MM_LOCAL_ACT_BYTES (16 * 1024)
/* Column chunks are multiples of this many elements (every block size divides it). */
#define MM_COL_QUANTUM TF_QK_K

/* One matrix of a call (several: tf_cpu_matmul_n, all of the same input). */
typedef struct {
    const char *W;
    int64_t n_rows;
    float *Y;
    int64_t ldy;
    int64_t g0; /* its first row group (of tile_rows) in the call's sequence */
} mm_mat;

typedef struct {
    const tf_cpu_kernels *k;
    tf_vec_dot_tile_fn tile;
    tf_act_quantize_fn quantize; /* NULL: activations are X itself */
    tf_dtype wtype;
    mm_mat mat[TF_MATMUL_N_MAX];
    int n_mat;
    int64_t n_groups; /* row groups of all the matrices */
    size_t w_row;     /* bytes per weight row */
    int64_t n_cols, n_tok;
    const float *X;
    char *act;
    size_t a_row;        /* bytes per activation row */
    int64_t act_block;   /* elements per activation block */
    int64_t col_chunk;   /* columns per chunk (n_cols when unsplit) */
    int tile_rows, tile_toks; /* tile shape of the kernel table for wtype */
    int block_rows, block_toks; /* the tile shape where a block has more than tile_toks tokens (prefill) */
    int packed;               /* activations in the packed or R16 format (whole rows) */
    tf_r16_rows_fn r16;       /* R16 weights: the rows' products (tile and tile_rows unused) */
    atomic_int arrived;  /* threads past phase 1 */
} mm_job;

/* Phase 1: convert this thread's share of the activation blocks into act. */
static void mm_convert(const mm_job *j, char *act, int ith, int nth) {
    int64_t per_tok = j->n_cols / j->act_block;
    long lo, hi;
    tf_split_range((long)(per_tok * j->n_tok), ith, nth, &lo, &hi);
    size_t blk_bytes = j->a_row / (size_t)per_tok;
    while (lo < hi) {
        int64_t t = lo / per_tok, b0 = lo % per_tok;
        int64_t b1 = hi - t * per_tok < per_tok ? hi - t * per_tok : per_tok;
        j->quantize(j->X + t * j->n_cols + b0 * j->act_block, act + t * j->a_row + (size_t)b0 * blk_bytes,
                    (b1 - b0) * j->act_block);
        lo += b1 - b0;
    }
}

/* Wait until all nth threads have finished phase 1. */
static void mm_barrier(mm_job *j, int nth) {
    atomic_fetch_add_explicit(&j->arrived, 1, memory_order_acq_rel);
    int spins = 0;
    while (atomic_load_explicit(&j->arrived, memory_order_acquire) < nth) {
        /* the other threads are microseconds away unless the machine is
         * oversubscribed: then give the core to them */
        if (++spins < MM_SPIN_BEFORE_YIELD) MM_PAUSE();
        else sched_yield();
    }
}

/* Rows [r0, r1) x tokens [t0, t1), columns [c0, c0 + nc), activations in
 * act; accumulate adds the result to Y instead of storing it. */
static void mm_block(const mm_job *j, const mm_mat *m, const char *act, int64_t r0, int64_t r1, int64_t t0,
                     int64_t t1, int64_t c0, int64_t nc, int accumulate) {
    size_t w_off = tf_dtype_row_size(j->wtype, c0);
    TF_ASSERT(!j->packed || c0 == 0);
    size_t a_off = j->quantize ? tf_act_row_size(j->wtype, c0) : (size_t)c0 * sizeof(float);
    /* prefill: the packed tiles take more rows per call (TF_PACK_ROWS_MAX),
     * over the packed weight layout also more tokens (TF_WPACK_TOKS_MAX) */
    const int prefill = t1 - t0 > j->tile_toks;
    const int rows = prefill ? j->block_rows : j->tile_rows, toks = prefill ? j->block_toks : j->tile_toks;
    for (int64_t r = r0; r < r1; r += rows) {
        int nr = r1 - r < rows ? (int)(r1 - r) : rows;
        const char *w = m->W + (size_t)r * j->w_row + w_off;
        for (int64_t t = t0; t < t1; t += toks) {
            int nt = t1 - t < toks ? (int)(t1 - t) : toks;
            const char *a = act + (size_t)t * j->a_row + a_off;
            float *y = m->Y + t * m->ldy + r;
            if (!accumulate) {
                j->tile(nc, w, j->w_row, nr, a, j->a_row, nt, y, m->ldy);
                continue;
            }
            float part[TF_TILE_TOKS_MAX * TF_TILE_ROWS_MAX];
            j->tile(nc, w, j->w_row, nr, a, j->a_row, nt, part, TF_TILE_ROWS_MAX);
            for (int tt = 0; tt < nt; tt++)
                for (int rr = 0; rr < nr; rr++) y[tt * m->ldy + rr] += part[tt * TF_TILE_ROWS_MAX + rr];
        }
    }
}

/* Sequential streams per thread in a one-token product (mm_gemv_spread):
 * float rows on AVX-512 have tiles of 8 rows, and 8 streams per core read
 * slower than 4 on the 2-core Zen 5 VM (one token through TinyLlama's 22
 * layers, dev/decode_mm_lab.c, 4 rounds: F32 89.5 -> 79.1 ms, F16 46.6 ->
 * 38.3 ms; SmolLM2's shapes 10.3 -> 9.4 and 5.2 -> 4.5 ms). */
#define MM_GEMV_STREAMS 4

/* One token against rows [r0, r1): each tile takes one row from each of
 * g = min(tile_rows, MM_GEMV_STREAMS) equal slices of the range, so a
 * thread reads g sequential streams far apart (adjacent short rows would
 * share pages and defeat the hardware prefetcher; a row's bits do not
 * depend on how many rows its tile holds, and its column chunks are those
 * of tile_rows). Rows past the last full slice run as ordinary tiles. A
 * column-chunked matrix gets its rows' chunks one after the other, their
 * partial sums added in chunk order as mm_block adds them for several
 * tokens (the same bits), each stream still read in order. */
static void mm_gemv_spread(const mm_job *j, const mm_mat *m, const char *act, float *y, int64_t r0, int64_t r1) {
    const int g = j->tile_rows < MM_GEMV_STREAMS ? j->tile_rows : MM_GEMV_STREAMS;
    const int64_t per = (r1 - r0) / g;
    for (int spread = g > 1 && per > 0; r0 < r1; spread = 0) {
        /* spread: rows r0 + i + k per (k < g) for i < per; else tiles of g adjacent rows */
        const int64_t n_it = spread ? per : (r1 - r0 + g - 1) / g;
        const size_t stride = spread ? (size_t)per * j->w_row : j->w_row;
        for (int64_t i = 0; i < n_it; i++) {
            const int64_t r = spread ? r0 + i : r0 + i * g;
            const int nr = spread ? g : (r1 - r < g ? (int)(r1 - r) : g);
            float sum[TF_TILE_ROWS_MAX], part[TF_TILE_ROWS_MAX];
            for (int64_t c = 0; c < j->n_cols; c += j->col_chunk) {
                const int64_t nc = j->n_cols - c < j->col_chunk ? j->n_cols - c : j->col_chunk;
                const size_t a_off = j->quantize ? tf_act_row_size(j->wtype, c) : (size_t)c * sizeof(float);
                j->tile(nc, m->W + (size_t)r * j->w_row + tf_dtype_row_size(j->wtype, c), stride, nr, act + a_off,
                        j->a_row, 1, part, 1);
                for (int k = 0; k < nr; k++) sum[k] = c ? sum[k] + part[k] : part[k];
            }
            for (int k = 0; k < nr; k++) y[spread ? r + k * per : r + k] = sum[k];
        }
        r0 += spread ? per * g : r1 - r0;
    }
}

/* Rows [r0, r1) of matrix m x tokens [t0, t1), in the walk of the call's kind. */
static void mm_rows(const mm_job *j, const mm_mat *m, const char *act, int64_t r0, int64_t r1, int64_t t0,
                    int64_t t1) {
    if (r0 >= r1 || t0 >= t1) return;
    if (j->r16) { /* one call: it walks its groups of 16 rows and every token in tiles of 16 */
        j->r16(j->n_cols, m->W, m->n_rows, r0, r1, act + (size_t)t0 * j->a_row, j->a_row, (int)(t1 - t0),
               m->Y + t0 * m->ldy + r0, m->ldy);
        return;
    }
    if (t1 - t0 == 1 && !j->packed) {
        mm_gemv_spread(j, m, act + (size_t)t0 * j->a_row, m->Y + t0 * m->ldy, r0, r1);
        return;
    }
    /* The tokens in blocks whose activations (of one column chunk) stay in
     * L2 (MM_L2_ACT_BYTES) while the thread's rows pass. Column-chunked
     * products (wide float rows, for any number of tokens, one included: a
     * (row, token)'s result is the sum of its chunks' partial sums added in
     * chunk order, so the same bits in a batch as alone) take, per block and
     * chunk, every group of rows, so the rows' chunk stays in L1 while the
     * block's tokens pass (a chunk of all 512 tokens of a prefill batch, 2
     * MiB at 1,024 f32 columns, would be read from L3 by every group of
     * rows). */
    const int chunked = j->col_chunk < j->n_cols;
    /* per token: a row of activations, or a chunk of f32 ones (chunked rows are float) */
    const int64_t tok_bytes = chunked ? (int64_t)sizeof(float) * j->col_chunk : (int64_t)j->a_row;
    int64_t tb = MM_L2_ACT_BYTES / tok_bytes;
    tb = tb < j->block_toks ? j->block_toks : tb / j->block_toks * j->block_toks;
    const int64_t g = j->tile_rows;
    for (int64_t t = t0; t < t1; t += tb) {
        const int64_t te = t + tb < t1 ? t + tb : t1;
        if (!chunked) {
            mm_block(j, m, act, r0, r1, t, te, 0, j->n_cols, 0);
            continue;
        }
        for (int64_t c = 0; c < j->n_cols; c += j->col_chunk) {
            int64_t nc = j->n_cols - c < j->col_chunk ? j->n_cols - c : j->col_chunk;
            for (int64_t r = r0; r < r1; r += g)
                mm_block(j, m, act, r, r + g < r1 ? r + g : r1, t, te, c, nc, c > 0);
        }
    }
}

static void mm_task(void *arg, int ith, int nth) {
    mm_job *j = arg;
    _Alignas(64) char local_act[MM_LOCAL_ACT_BYTES];
    const char *act = j->act;
    if (j->quantize && nth > 1 && (size_t)j->n_tok * j->a_row <= sizeof local_act) {
        /* small activations: every thread converts all of them privately, no barrier */
        mm_convert(j, local_act, 0, 1);
        act = local_act;
    } else if (j->quantize) {
        mm_convert(j, j->act, ith, nth);
        if (nth > 1) mm_barrier(j, nth);
    }
    /* Split the row groups (tile_rows rows) of all the matrices, in order,
     * across threads; with fewer groups than threads split the tokens
     * instead. */
    const int64_t g = j->tile_rows;
    long lo, hi;
    if (j->n_groups >= nth || j->n_tok < nth) {
        tf_split_range((long)j->n_groups, ith, nth, &lo, &hi);
        for (int i = 0; i < j->n_mat; i++) {
            const mm_mat *m = &j->mat[i];
            const int64_t m_groups = (m->n_rows + g - 1) / g;
            int64_t a = lo > m->g0 ? lo - m->g0 : 0, b = hi - m->g0 < m_groups ? hi - m->g0 : m_groups;
            if (a < b) mm_rows(j, m, act, a * g, b * g < m->n_rows ? b * g : m->n_rows, 0, j->n_tok);
        }
    } else {
        tf_split_range((long)j->n_tok, ith, nth, &lo, &hi);
        for (int i = 0; i < j->n_mat; i++) mm_rows(j, &j->mat[i], act, 0, j->mat[i].n_rows, lo, hi);
    }
}

/* Columns per chunk: all of them unless a group of `rows` weight rows
 * exceeds MM_L1_WEIGHT_BYTES and the rows are float (quantized rows are
 * small and their tiles pay per call for the block scales). It depends on
 * the matrix and the table only, never on the number of tokens: the chunks
 * decide how a dot product is summed, and a token must get the same bits
 * alone (decode) as in a batch (verification). */
static int64_t mm_col_chunk(tf_dtype wtype, int64_t n_cols, size_t w_row, int rows) {
    int is_float = wtype == TF_DTYPE_F32 || wtype == TF_DTYPE_F16 || wtype == TF_DTYPE_BF16;
    size_t group = (size_t)rows * w_row;
    if (!is_float || group <= MM_L1_WEIGHT_BYTES) return n_cols;
    int64_t n_chunks = (int64_t)((group + MM_L1_WEIGHT_BYTES - 1) / MM_L1_WEIGHT_BYTES);
    int64_t chunk = (n_cols + n_chunks - 1) / n_chunks;
    chunk = (chunk + MM_COL_QUANTUM - 1) / MM_COL_QUANTUM * MM_COL_QUANTUM;
    return chunk < n_cols ? chunk : n_cols;
}

void tf_cpu_matmul_n(tf_pool *pool, const tf_cpu_kernels *k, tf_dtype wtype, int w_layout, int n_w,
                     const void *const *W, const int64_t *n_rows, int64_t n_cols, const float *X, int64_t n_tok,
                     float *const *Y, const int64_t *ldy, void *act_buf) {
    TF_ASSERT(n_w >= 1 && n_w <= TF_MATMUL_N_MAX);
    if (n_tok <= 0) return;
    TF_ASSERT(k->vec_dot_tile[wtype] && k->act_quantize[wtype]);
    TF_ASSERT(k->tile_rows[wtype] >= 1 && k->tile_rows[wtype] <= TF_TILE_ROWS_MAX && k->tile_toks[wtype] >= 1 &&
              k->tile_toks[wtype] <= TF_TILE_TOKS_MAX);
    mm_job j = {
        .k = k,
        .tile = k->vec_dot_tile[wtype],
        .wtype = wtype,
        .w_row = tf_dtype_row_size(wtype, n_cols),
        .n_cols = n_cols,
        .n_tok = n_tok,
        .X = X,
        .tile_rows = k->tile_rows[wtype],
        .tile_toks = k->tile_toks[wtype],
    };
    TF_ASSERT(w_layout != TF_WLAYOUT_PACKED || (k->wpacked_tile[wtype] && k->act_pack[wtype]));
    TF_ASSERT(w_layout != TF_WLAYOUT_R16 || (k->r16_rows[wtype] && k->r16_act[wtype]));
    if (w_layout == TF_WLAYOUT_R16) {
        j.r16 = k->r16_rows[wtype];
        j.tile_rows = 16;
        j.packed = 1;
    } else if (k->packed_tile[wtype] && k->act_pack[wtype]) {
        j.tile = w_layout == TF_WLAYOUT_PACKED ? k->wpacked_tile[wtype] : k->packed_tile[wtype];
        j.tile_toks = TF_PACK_TOKS_MAX;
        j.block_rows = TF_PACK_ROWS_MAX;
        j.block_toks = w_layout == TF_WLAYOUT_PACKED ? TF_WPACK_TOKS_MAX : TF_PACK_TOKS_MAX;
        j.packed = 1;
    }
    if (!j.block_rows) j.block_rows = j.tile_rows;
    if (!j.block_toks) j.block_toks = j.tile_toks;
    for (int i = 0; i < n_w; i++) {
        if (n_rows[i] <= 0) continue;
        TF_ASSERT(ldy[i] >= n_rows[i]);
        mm_mat *m = &j.mat[j.n_mat++];
        *m = (mm_mat){.W = W[i], .n_rows = n_rows[i], .Y = Y[i], .ldy = ldy[i], .g0 = j.n_groups};
        j.n_groups += (n_rows[i] + j.tile_rows - 1) / j.tile_rows;
    }
    if (j.n_mat == 0) return;
    TF_ASSERT(j.w_row > 0 || n_cols == 0);
    atomic_init(&j.arrived, 0);
    if (tf_act_type(wtype) == TF_DTYPE_F32) {
        j.act = (char *)(uintptr_t)X; /* read only */
        j.a_row = (size_t)n_cols * sizeof(float);
    } else {
        j.quantize = k->act_quantize[wtype];
        j.act = act_buf;
        j.a_row = tf_act_row_size(wtype, n_cols);
        j.act_block = tf_act_type(wtype) == TF_DTYPE_Q8_K ? TF_QK_K : TF_QK8_0; /* Q8_0 / Q8_1: 32 */
        if (j.r16) { /* converted a whole row at a time */
            j.quantize = k->r16_act[wtype];
            j.a_row = tf_act_r16_row_size(wtype, n_cols);
            j.act_block = n_cols;
        } else if (j.packed) {
            j.quantize = k->act_pack[wtype];
            j.a_row = tf_act_packed_row_size(wtype, n_cols);
            j.act_block = n_cols;
        }
    }
    if (n_cols == 0) {
        for (int i = 0; i < j.n_mat; i++)
            for (int64_t t = 0; t < n_tok; t++)
                memset(j.mat[i].Y + t * j.mat[i].ldy, 0, (size_t)j.mat[i].n_rows * sizeof(float));
        return;
    }
    j.col_chunk = mm_col_chunk(wtype, n_cols, j.w_row, j.tile_rows);
    tf_pool_run(pool, mm_task, &j);
}

void tf_cpu_matmul(tf_pool *pool, const tf_cpu_kernels *k, tf_dtype wtype, const void *W, int w_layout,
                   int64_t n_rows, int64_t n_cols, const float *X, int64_t n_tok, float *Y, int64_t ldy,
                   void *act_buf) {
    tf_cpu_matmul_n(pool, k, wtype, w_layout, 1, &W, &n_rows, n_cols, X, n_tok, &Y, &ldy, act_buf);
}
