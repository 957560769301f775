/*
 * cuda_backend.h — the CUDA backend's C interface (the .cu files implement it
 * with a C ABI; nothing of CUDA or C++ appears here).
 *
 * Built only with `make CUDA=1` (which defines TF_HAVE_CUDA); without it the
 * declarations below exist but nothing defines them, so callers guard their
 * use with #ifdef TF_HAVE_CUDA.
 *
 * Model. A tf_cuda is one device, one stream and one cuBLAS handle. Device
 * buffers are plain pointers from tf_cuda_malloc. Every op enqueues work on
 * the stream and returns at once; launch errors are collected by
 * tf_cuda_check, execution errors by the next synchronizing call
 * (tf_cuda_sync, tf_cuda_d2h). Errors become tf_status with a message that
 * names what failed and the CUDA / cuBLAS error name.
 *
 * Dynamic inputs: ops that a CUDA graph replays (the draft and middle
 * levels) read their per-call values — token ids, positions, visible lengths
 * kv_len, the first slot slot0 — from device memory (arguments ending in _d),
 * never from kernel parameters, so one captured graph serves every step.
 * Shape arguments (rows n, capacities) are kernel parameters: a graph is
 * captured per shape.
 *
 * Device layouts:
 *   KV cache (f16):  k, v: [n_layer][n_head_kv][n_slots][head_dim]; the
 *                    ops take one layer's base (k + il * n_head_kv * n_slots * head_dim).
 *   activations:     f32 row-major [n][ld].
 *   weights:         as in the GGUF file (row-major [n_rows][n_cols] of
 *                    their dtype, Q8_0 in 34-byte blocks).
 *   chunk sums:      f32 [n_layer * n_head_kv][n_chunk_cap][head_dim].
 */
#ifndef TF_BACKEND_CUDA_BACKEND_H
#define TF_BACKEND_CUDA_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "core/error.h" /* C declarations: inside the extern "C" block for the .cu files */

typedef struct tf_cuda tf_cuda;             /* device + stream + cuBLAS handle */
typedef struct tf_cuda_graph tf_cuda_graph; /* an instantiated CUDA graph */

/* ---- device and memory ------------------------------------------------- */

/* Number of usable CUDA devices; 0 when there is none or no driver. */
int tf_cuda_device_count(void);

/* Open device `device` (0-based). Fails with TF_ERR_UNSUPPORTED and a
 * message for: no CUDA device ("no CUDA device"), a driver older than the
 * runtime this was built with (both versions named), a device below sm_80.
 * *out is NULL on failure. */
tf_status tf_cuda_open(tf_cuda **out, int device, tf_err *err);
void tf_cuda_close(tf_cuda *cu);

/* "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)" */
const char *tf_cuda_describe(const tf_cuda *cu);
/* Theoretical DRAM bandwidth from the device attributes, GB/s (0 if unknown). */
double tf_cuda_peak_gbps(const tf_cuda *cu);
/* The cudaStream_t the ops run on, as void * (labs record timing events on it). */
void *tf_cuda_stream(tf_cuda *cu);
/* Free / total device memory in bytes. */
void tf_cuda_mem_info(const tf_cuda *cu, size_t *free_b, size_t *total_b);

/* Device memory. Out of memory is TF_ERR_NOMEM naming `what`, the bytes asked
 * and the bytes free. *p is NULL on failure. Free with tf_cuda_mfree (NULL ok). */
tf_status tf_cuda_malloc(tf_cuda *cu, void **p, size_t bytes, const char *what, tf_err *err);
void tf_cuda_mfree(tf_cuda *cu, void *p);
/* Page-locked host memory (staging of per-call inputs). */
tf_status tf_cuda_host_malloc(tf_cuda *cu, void **p, size_t bytes, const char *what, tf_err *err);
void tf_cuda_host_free(tf_cuda *cu, void *p);

/* Copies on the stream. h2d from pageable memory returns once the source
 * may be reused; d2h waits for the stream (it is a synchronization point and
 * reports earlier execution errors). */
tf_status tf_cuda_h2d(tf_cuda *cu, void *dst, const void *src, size_t bytes, tf_err *err);
tf_status tf_cuda_d2h(tf_cuda *cu, void *dst, const void *src, size_t bytes, tf_err *err);
tf_status tf_cuda_d2d(tf_cuda *cu, void *dst, const void *src, size_t bytes, tf_err *err);
tf_status tf_cuda_memset0(tf_cuda *cu, void *dst, size_t bytes, tf_err *err);

/* Launch errors of the ops enqueued so far (cudaGetLastError), as a status
 * naming `what`. Does not wait. */
tf_status tf_cuda_check(tf_cuda *cu, const char *what, tf_err *err);
/* Wait for the stream; reports execution errors naming `what`. */
tf_status tf_cuda_sync(tf_cuda *cu, const char *what, tf_err *err);

/* ---- CUDA graphs --------------------------------------------------------- */

/* Capture the ops enqueued between begin and end into an instantiated graph.
 * Nothing runs during capture. */
tf_status tf_cuda_graph_begin(tf_cuda *cu, tf_err *err);
tf_status tf_cuda_graph_end(tf_cuda *cu, tf_cuda_graph **out, tf_err *err);
tf_status tf_cuda_graph_launch(tf_cuda *cu, tf_cuda_graph *g, tf_err *err);
void tf_cuda_graph_free(tf_cuda_graph *g);

/* ---- elementwise and per-row ops (f32 activations) ------------------------ */

/* x[i][:] = row tok_d[i] of the embedding table (f32, f16, bf16, q8_0, q4_0 or q4_1). */
void tf_cuda_embed(tf_cuda *cu, float *x, const void *table, uint32_t type, int64_t dim, const int32_t *tok_d,
                   int32_t n);
/* y = x / sqrt(mean(x^2) + eps) * w for n rows of dim (row stride dim). */
void tf_cuda_rmsnorm(tf_cuda *cu, float *y, const float *x, const float *w, int32_t n, int32_t dim, float eps);
/* Rotate pairs (2i, 2i+1), or (i, i + n_rot/2) with neox, i < n_rot/2, of
 * every head of n rows (stride ld) by theta = pos_d[r] * freq_d[i] (angles in
 * double), cos/sin times mscale — exactly the CPU's tf_op_rope_table +
 * tf_op_rope up to libm rounding. */
void tf_cuda_rope(tf_cuda *cu, float *x, int32_t n, int64_t ld, int32_t n_head, int32_t head_dim, int32_t n_rot,
                  int neox, const int32_t *pos_d, const float *freq_d, float mscale);
/* g = silu(g) * u */
void tf_cuda_silu_mul(tf_cuda *cu, float *g, const float *u, int64_t n);
/* y += x */
void tf_cuda_add(tf_cuda *cu, float *y, const float *x, int64_t n);
/* x += d, then y = rmsnorm(x) * w (n rows of dim): the bits of tf_cuda_add then
 * tf_cuda_rmsnorm, one launch. */
void tf_cuda_add_rmsnorm(tf_cuda *cu, float *x, const float *d, float *y, const float *w, int32_t n, int32_t dim,
                         float eps);
/* y[r][i] += b[i] for n rows of dim (row stride dim): q/k/v biases. */
void tf_cuda_add_bias(tf_cuda *cu, float *y, const float *b, int32_t n, int64_t dim);
/* Store n rows of keys / values (f32 [n][ld], heads side by side) into
 * slots [*slot0_d, *slot0_d + n) of one layer of an f16 cache. */
void tf_cuda_kv_store(tf_cuda *cu, uint16_t *k_layer, uint16_t *v_layer, int32_t n_head_kv, int32_t head_dim,
                      int32_t n_slots, const float *k, const float *v, int64_t ld, int32_t n,
                      const int32_t *slot0_d);

/* ---- matrix products ------------------------------------------------------ */

typedef struct tf_cuda_mat {
    const void *data;  /* device, row-major [n_rows][n_cols] of type */
    uint32_t type;     /* TF_DTYPE_F32, F16, BF16, Q8_0, Q4_0 or Q4_1 */
    int64_t n_rows, n_cols;
} tf_cuda_mat;

/* Up to this many tokens a product runs as a GEMV kernel with f32
 * activations whose per-token result does not depend on the batch (every
 * token's dot products are the same operations in the same order): the
 * decode and verification path, which greedy speculation needs bitwise
 * batch-invariant. Beyond it, F16/BF16 use cuBLAS (activations rounded to
 * the weight type, F32 accumulation) and F32 uses SGEMM; Q8_0 / Q4_x stay on the
 * GEMV kernel. */
#define TF_CUDA_GEMV_MAX_ROWS 16

/* True if this backend computes with weights of this type. */
int tf_cuda_mat_type_ok(uint32_t type);
/* Scratch bytes tf_cuda_matmul needs for up to n_max tokens of w. */
size_t tf_cuda_matmul_scratch(const tf_cuda_mat *w, int32_t n_max);
/* Y[t][r] = W[r] . X[t] for t < n (X: f32 [n][n_cols]; Y: f32, row stride ldy). */
tf_status tf_cuda_matmul(tf_cuda *cu, const tf_cuda_mat *w, const float *x, int32_t n, float *y, int64_t ldy,
                         void *scratch, tf_err *err);
/* y[i] = the product of w[i] and x for n_w matrices of one input (a layer's
 * q/k/v or gate/up), each with the bits tf_cuda_matmul gives it; on the GEMV
 * path up to 4 matrices of one type, width and alignment run as one launch
 * (TF_CUDA_GEMV_MULTI=0, read once: a launch each). */
tf_status tf_cuda_matmul_n(tf_cuda *cu, int n_w, const tf_cuda_mat *w, const float *x, int32_t n, float *const *y,
                           const int64_t *ldy, void *scratch, tf_err *err);
/* The two paths explicitly (tests, labs). gemm: F16/BF16/F32 only. */
void tf_cuda_gemv(tf_cuda *cu, const tf_cuda_mat *w, const float *x, int32_t n, float *y, int64_t ldy);
/* The GEMV with its variant chosen (labs, tests; tf_cuda_gemv reads
 * TF_CUDA_GEMV once: 1, 4 or 6..9, default 4): 1, a warp per weight row and
 * groups of 8 tokens, every weight type; 4 (and 5, the same bits with 2 rows
 * per block instead of 4), F16/BF16 rows with n_cols % 8 == 0 split over the
 * columns across a block's 4 warps, up to 16 tokens in one group (other
 * weights as 1); 6..9, F16/BF16 with n_cols % 32 == 0 on the tensor cores
 * (sm_80+; 16 rows x up to 16 tokens per block; 6: 4 warps, 7: 4 warps and 32
 * rows, the same bits as 6, 8: 8 warps, 9: 16 warps; other shapes as 4). Each
 * is batch-invariant; they differ from each other in the last bits. */
void tf_cuda_gemv_variant(tf_cuda *cu, const tf_cuda_mat *w, const float *x, int32_t n, float *y, int64_t ldy,
                          int variant);
/* The same for n_w matrices of x (up to 4 of one type, width and alignment in
 * one launch; others a launch each): y[i] with the bits a launch of w[i]
 * alone gives. */
void tf_cuda_gemv_n_variant(tf_cuda *cu, int n_w, const tf_cuda_mat *w, const float *x, int32_t n, float *const *y,
                            const int64_t *ldy, int variant);
tf_status tf_cuda_gemm(tf_cuda *cu, const tf_cuda_mat *w, const float *x, int32_t n, float *y, int64_t ldy,
                       void *scratch, tf_err *err);

/* ---- attention (f16 KV) ---------------------------------------------------- */

typedef struct tf_cuda_attn {
    const float *q;          /* [n_q][n_head * head_dim], row stride ldq, after RoPE */
    int64_t ldq;
    const uint16_t *k, *v;   /* one layer: [n_head_kv][n_slots][head_dim] f16 */
    int32_t n_slots;
    int32_t n_q, n_head, n_head_kv, head_dim; /* head_dim <= 256, n_head / n_head_kv <= 8 */
    const int32_t *kv_len_d; /* [n_q] visible slots of each row, 1..max_kv */
    const int32_t *gap_d;    /* NULL or [2]: slots [gap_d[0], gap_d[1]) are visible to no row */
    int32_t max_kv;          /* bound on kv_len (sizes the split grid) */
    float scale;             /* usually 1/sqrt(head_dim) */
    float *out;              /* [n_q][n_head * head_dim], row stride ldo */
    int64_t ldo;
    void *scratch;           /* tf_cuda_attn_scratch bytes (decode) */
} tf_cuda_attn;

/* Keys per split of the decode kernel: fixed, so a row's result depends only
 * on its kv_len and the data (batch invariance). */
#define TF_CUDA_ATTN_SPLIT 256

size_t tf_cuda_attn_scratch(int32_t n_q_max, int32_t n_head, int32_t head_dim, int32_t max_kv);
/* Split-K flash-decoding: one block per (KV head, split, group of up to 16
 * query vectors: rows x the query heads of the KV head) scores its keys once
 * for all of them; a second kernel merges the partial softmax states in a
 * fixed order. Any view (full, gathered C_r, the streaming cache with its
 * gap). Rows are independent (batch invariant). The variant is
 * TF_CUDA_ATTN_DECODE (0 or 2; default 2), read once. */
void tf_cuda_attn_decode(tf_cuda *cu, const tf_cuda_attn *a);
/* The same with the variant chosen (labs, tests; tf_cuda_attn_decode reads
 * TF_CUDA_ATTN_DECODE once: 0, 2, 3 or 4, default 2): 2 (any value but 0, 3
 * and 4), a block per (KV head, split, group of rows) with 4 keys in flight
 * per team and the splits merged in parallel runs; 3 and 4, the same blocks
 * on the tensor cores for head sizes 64, 128 and 256 on sm_80+ (4 pipelines
 * its loads and gives 3's bits; other head sizes as 2); 0, a block per (KV
 * head, split, row) and a serial merge. Head sizes that are not a power of
 * two from 8 to 256 take variant 0's blocks whatever is asked. */
void tf_cuda_attn_decode_variant(tf_cuda *cu, const tf_cuda_attn *a, int variant);
/* Flash-attention prefill with an online softmax; no scratch. Not
 * batch-invariant (prefill needs no invariance). tf_cuda_attn_prefill reads
 * TF_CUDA_ATTN_PREFILL once: variant 1 (the default), the tensor cores for
 * head sizes 64 and 128 (f16 inputs as the prefill's cuBLAS products, f32
 * accumulation; 128 rows x 64 keys), other head sizes as 0; 0, CUDA cores,
 * tiles of 16 query rows x 64 keys, f32. */
void tf_cuda_attn_prefill(tf_cuda *cu, const tf_cuda_attn *a);
void tf_cuda_attn_prefill_variant(tf_cuda *cu, const tf_cuda_attn *a, int variant);

/* ---- retrieval cache C_r ------------------------------------------------- */

/* Recompute the key sums of the chunks overlapping slots [s0, s1), each from
 * its first slot up to min(its end, s1), in slot order (f32), for every
 * (layer, KV head) pair of an f16 cache k [n_pairs][n_slots][head_dim]:
 * after appends (s0 = the first new slot) and after a rollback to s1 (s0 = s1 - 1,
 * or any slot of the partial chunk). */
void tf_cuda_chunk_sums(tf_cuda *cu, float *sum, const uint16_t *k, int32_t n_pairs, int32_t n_slots,
                        int32_t head_dim, int32_t chunk, int32_t n_chunk_cap, int32_t s0, int32_t s1);

/* Selection of tf_rcache_select (same plan: the first chunk, the recent
 * complete chunks, the partial chunk, and the k best middle chunks by
 * q_group . sum, ties to the lower index), per pair, into sel_d
 * [n_pairs][max_sel] ascending. q_d: [n_layer][n_head * head_dim].
 * scratch: tf_cuda_select_scratch bytes. Writes the chunk count and slot
 * count of every pair's selection to *n_sel_chunks / *n_sel (host values,
 * known from the plan). */
size_t tf_cuda_select_scratch(int32_t n_pairs, int32_t n_chunk_cap);
void tf_cuda_chunk_select(tf_cuda *cu, int32_t *sel_d, void *scratch, const float *sum, const float *q_d,
                          int32_t n_layer, int32_t n_head, int32_t n_head_kv, int32_t head_dim, int32_t n_chunk_cap,
                          int32_t chunk, int32_t n_tok, int32_t budget, int32_t r_chunks, int32_t max_sel,
                          int32_t *n_sel_chunks, int32_t *n_sel);
/* Copy the selected chunks of every pair of full (f16, n_full_slots per
 * head) to slots [0, n_sel) of view (n_view_slots per head), in order. */
void tf_cuda_gather(tf_cuda *cu, uint16_t *view_k, uint16_t *view_v, int32_t n_view_slots, const uint16_t *full_k,
                    const uint16_t *full_v, int32_t n_full_slots, int32_t n_pairs, int32_t head_dim,
                    const int32_t *sel_d, int32_t max_sel, int32_t n_sel_chunks, int32_t chunk, int32_t n_tok);

/* ---- sampling -------------------------------------------------------------- */

/* out_d[r] = argmax of row r of logits [n_rows][n_vocab]; NaN never wins,
 * ties go to the lowest id (as tf_argmax). */
void tf_cuda_argmax(tf_cuda *cu, int32_t *out_d, const float *logits, int32_t n_rows, int32_t n_vocab);
/* The backend table's topk (backend.h): for each row the k <= TF_TOPK_MAX
 * (64) best z = logit / temp (correctly rounded; NaN as -inf, -inf never
 * kept), larger z first and then lower id, as tf_topk_scaled (core/topk.c):
 * out_d = ids [n_rows][k] | z [n_rows][k] | counts [n_rows]. */
void tf_cuda_topk(tf_cuda *cu, int32_t *out_d, const float *logits, int32_t n_rows, int32_t n_vocab, int32_t k,
                  float temp);

#ifdef __cplusplus
}
#endif
#endif
