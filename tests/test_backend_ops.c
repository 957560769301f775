/*
 * test_backend_ops.c — every op of every backend table against a scalar
 * reference, through the table itself (backend/backend.h): the CPU at each
 * instruction set this machine runs (scalar, avx2, avx512) and, in a CUDA
 * build on a machine with a device, the CUDA table; without one that part
 * is skipped with a line saying why.
 *
 * Inputs are fresh random data from the run's seed. Every buffer carries
 * guard bytes after its end that must survive the op; every output is checked
 * for NaN/Inf; errors are NMSE against double-precision references (or exact
 * where the op is a copy). Ops a table denies through supports() are listed,
 * and a table that claims an op must have the function for it.
 */
#include "testutil.h"

#include "backend/backend.h"
#include "backend/cpu/attn.h"
#include "backend/cpu/backend_cpu.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/quant.h"
#include "core/dtype.h"
#include "core/fp16.h"
#include "core/topk.h"
#include "kv/kv.h"
#include "kv/retrieval.h"
#include "kv/streaming.h"
#include "sampling/sampling.h"
#ifdef TF_HAVE_CUDA
#include "backend/cuda/backend_cuda.h"
#endif

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 64
static const uint8_t GUARD_BYTE = 0xA5;

static tf_rng g_rng;
static tf_pool *g_pool;
static tf_err g_err;

/* ---- buffers with guard bytes ------------------------------------------------------------------- */

static void *dbuf(tf_backend *be, const void *host, size_t bytes) {
    void *d = NULL;
    assert_int_equal(be->ops->alloc(be, &d, bytes + GUARD, "test buffer", &g_err), TF_OK);
    uint8_t *g = malloc(bytes + GUARD);
    if (host) memcpy(g, host, bytes);
    else memset(g, 0, bytes);
    memset(g + bytes, GUARD_BYTE, GUARD);
    assert_int_equal(be->ops->upload(be, d, g, bytes + GUARD, &g_err), TF_OK);
    assert_int_equal(be->ops->sync(be, "upload", &g_err), TF_OK);
    free(g);
    return d;
}

/* Download bytes of d to host and check that the guard after them survived. */
static void dget(tf_backend *be, void *host, const void *d, size_t bytes, const char *what) {
    uint8_t *g = malloc(bytes + GUARD);
    assert_int_equal(be->ops->check(be, what, &g_err), TF_OK);
    assert_int_equal(be->ops->download(be, g, d, bytes + GUARD, &g_err), TF_OK);
    for (int i = 0; i < GUARD; i++)
        if (g[bytes + i] != GUARD_BYTE) {
            print_error("%s (%s): wrote past the end of its output (guard byte %d)\n", what, be->ops->name, i);
            fail();
        }
    if (host) memcpy(host, g, bytes);
    free(g);
}

static void dfree(tf_backend *be, void *d) { be->ops->free(be, d); }

static float *rnd(size_t n, float lo, float hi) {
    float *x = malloc(sizeof(float) * (n ? n : 1));
    tu_fill_uniform(&g_rng, x, n, lo, hi);
    return x;
}

static double nmse_of(const float *got, const double *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)got[i] - ref[i];
        num += e * e;
        den += ref[i] * ref[i];
    }
    return num / (den > 0 ? den : 1);
}

static void expect_nmse(const char *be_desc, const char *what, const float *got, const double *ref, size_t n,
                        double bound) {
    if (tu_has_nonfinite(got, n)) {
        print_error("%s, %s: NaN or Inf in the output\n", be_desc, what);
        fail();
    }
    double nmse = nmse_of(got, ref, n);
    if (nmse > bound) {
        print_error("%s, %s: NMSE %g > %g\n", be_desc, what, nmse, bound);
        fail();
    }
}

/* ---- the ops ------------------------------------------------------------------------------------ */

/* Weight types of the matrix checks; 768 columns fit every block size and
 * hold one group of 16 blocks (a backend's own weight layout rearranges
 * those) and a tail. */
#define MM_COLS 768

static void quantize_rows(tf_dtype t, const float *x, int64_t rows, int64_t cols, uint8_t *out) {
    size_t rb = tf_dtype_row_size(t, cols);
    for (int64_t r = 0; r < rows; r++) tf_ref_quantize_row(t, x + r * cols, out + (size_t)r * rb, cols);
}

static void check_embed_matmul(tf_backend *be, const char *desc) {
    const int64_t rows = 96, cols = MM_COLS;
    int n_types = 0, n_packed = 0;
    for (int t = 0; t < TF_DTYPE_COUNT; t++) {
        if (!tf_backend_supports(be, TF_OP_MATMUL, (uint32_t)t)) continue;
        n_types++;
        float *wf = rnd((size_t)rows * cols, -1, 1);
        size_t wb = tf_dtype_row_size((tf_dtype)t, cols) * (size_t)rows;
        uint8_t *wq = malloc(wb);
        quantize_rows((tf_dtype)t, wf, rows, cols, wq);
        float *wd = malloc(sizeof(float) * rows * cols); /* the weights as stored */
        for (int64_t r = 0; r < rows; r++)
            tf_ref_dequantize_row((tf_dtype)t, wq + (size_t)r * (wb / rows), wd + r * cols, cols);
        void *dw = dbuf(be, wq, wb);
        tf_bmat w = {.data = dw, .type = (uint32_t)t, .n_rows = rows, .n_cols = cols};
        /* the backend's own layout of these rows, where it has one: the same
         * results bit for bit, or (R16) those of its own reference */
        uint32_t layout = be->ops->weight_layout ? be->ops->weight_layout(be, (uint32_t)t) : 0;
        tf_bmat wp = w;
        if (layout) {
            assert_true(be->ops->host_memory && be->ops->weight_pack);
            wp.data = dbuf(be, NULL, wb);
            wp.layout = layout;
            be->ops->weight_pack(be, (void *)wp.data, &w, layout);
            assert_true(memcmp(wp.data, wq, wb) != 0);
            n_packed++;
        }
        char what[96];
        /* embed: rows of the table, exactly as stored */
        if (tf_backend_supports(be, TF_OP_EMBED, (uint32_t)t)) {
            int32_t tok[5];
            for (int i = 0; i < 5; i++) tok[i] = (int32_t)(tf_rng_next(&g_rng) % rows);
            int32_t *dtok = dbuf(be, tok, sizeof tok);
            float *dx = dbuf(be, NULL, sizeof(float) * 5 * cols), *x = malloc(sizeof(float) * 5 * cols);
            be->ops->embed(be, dx, &w, dtok, 5);
            snprintf(what, sizeof what, "embed %s", tf_dtype_name(t));
            dget(be, x, dx, sizeof(float) * 5 * cols, what);
            double *ref = malloc(sizeof(double) * 5 * cols);
            for (int i = 0; i < 5; i++)
                for (int64_t c = 0; c < cols; c++) ref[i * cols + c] = wd[tok[i] * cols + c];
            expect_nmse(desc, what, x, ref, 5 * (size_t)cols, 1e-12);
            if (layout) {
                be->ops->embed(be, dx, &wp, dtok, 5);
                assert_memory_equal(dx, x, sizeof(float) * 5 * cols);
            }
            dfree(be, dtok), dfree(be, dx), free(x), free(ref);
        }
        /* matmul: 1 row (decode), 5 (verification), 19 (past CUDA's GEMV batch) */
        const int ns[] = {1, 5, 19};
        for (int k = 0; k < 3; k++) {
            int n = ns[k];
            float *x = rnd((size_t)n * cols, -1, 1);
            float *dx = dbuf(be, x, sizeof(float) * n * cols);
            float *dy = dbuf(be, NULL, sizeof(float) * n * rows), *y = malloc(sizeof(float) * n * rows);
            void *scr = dbuf(be, NULL, be->ops->matmul_scratch(be, &w, n));
            assert_int_equal(be->ops->matmul(be, &w, dx, n, dy, rows, scr, &g_err), TF_OK);
            snprintf(what, sizeof what, "matmul %s, %d rows", tf_dtype_name(t), n);
            dget(be, y, dy, sizeof(float) * n * rows, what);
            double *ref = malloc(sizeof(double) * n * rows);
            for (int i = 0; i < n; i++)
                for (int64_t r = 0; r < rows; r++) {
                    double acc = 0;
                    for (int64_t c = 0; c < cols; c++) acc += (double)wd[r * cols + c] * x[i * cols + c];
                    ref[i * rows + r] = acc;
                }
            /* float activations: rounding only; integer activations: their quantization */
            uint32_t act = tf_act_type((tf_dtype)t);
            double bound = act == TF_DTYPE_F32 || act == TF_DTYPE_F16 || act == TF_DTYPE_BF16 ? 1e-5 : 1e-4;
            expect_nmse(desc, what, y, ref, (size_t)n * rows, bound);
            if (layout == TF_WLAYOUT_R16) {
                /* a layout with arithmetic of its own (the AMX table's Q8_0, Q4_1):
                 * bitwise its reference, row by row */
                assert_int_equal(be->ops->matmul(be, &wp, dx, n, dy, rows, scr, &g_err), TF_OK);
                float *yr = malloc(sizeof(float) * n * rows);
                dget(be, yr, dy, sizeof(float) * n * rows, what);
                void *a16 = malloc(tf_act_r16_row_size((tf_dtype)t, cols));
                const size_t rb = wb / (size_t)rows;
                for (int i = 0; i < n; i++) {
                    tf_ref_act_r16((tf_dtype)t, x + i * cols, a16, cols);
                    for (int64_t r = 0; r < rows; r++) {
                        float want = tf_ref_r16_dot((tf_dtype)t, cols, wq + (size_t)r * rb, a16);
                        assert_memory_equal(&yr[i * rows + r], &want, sizeof want);
                    }
                }
                expect_nmse(desc, what, yr, ref, (size_t)n * rows, bound);
                free(a16), free(yr);
            } else if (layout) { /* a rearrangement only: the same results bit for bit */
                assert_int_equal(be->ops->matmul(be, &wp, dx, n, dy, rows, scr, &g_err), TF_OK);
                assert_memory_equal(dy, y, sizeof(float) * n * rows);
            }
            dfree(be, dx), dfree(be, dy), dfree(be, scr), free(x), free(y), free(ref);
        }
        if (layout) dfree(be, (void *)wp.data);
        dfree(be, dw), free(wf), free(wq), free(wd);
    }
    print_message("%s: matmul checked for %d weight types (%d also in the backend's own layout)\n", desc, n_types,
                  n_packed);
    assert_true(n_types >= 4); /* f32, f16, bf16, q8_0 at least on every backend */
}

/* matmul_n (several matrices of one input, as a layer's q/k/v): each output
 * bit for bit what matmul gives that matrix alone, at decode, verification
 * and prefill batch sizes, with row counts that are not multiples of the
 * kernels' row groups and output strides wider than the rows. */
static void check_matmul_n(tf_backend *be, const char *desc) {
    if (!be->ops->matmul_n) {
        print_message("%s: no matmul_n (the caller makes one matmul per matrix)\n", desc);
        return;
    }
    enum { N_W = 3 };
    const int64_t cols = MM_COLS, rows[N_W] = {96, 40, 33};
    const int ns[] = {1, 5, 16, 19};
    int n_cases = 0;
    for (int t = 0; t < TF_DTYPE_COUNT; t++) {
        if (!tf_backend_supports(be, TF_OP_MATMUL, (uint32_t)t)) continue;
        tf_bmat w[N_W];
        const tf_bmat *wp[N_W];
        size_t scr_bytes = 0;
        for (int i = 0; i < N_W; i++) {
            float *wf = rnd((size_t)rows[i] * cols, -1, 1);
            size_t wb = tf_dtype_row_size((tf_dtype)t, cols) * (size_t)rows[i];
            uint8_t *wq = malloc(wb);
            quantize_rows((tf_dtype)t, wf, rows[i], cols, wq);
            w[i] = (tf_bmat){.data = dbuf(be, wq, wb), .type = (uint32_t)t, .n_rows = rows[i], .n_cols = cols};
            wp[i] = &w[i];
            size_t sb = be->ops->matmul_scratch(be, &w[i], 19);
            if (sb > scr_bytes) scr_bytes = sb;
            free(wf), free(wq);
        }
        void *scr = dbuf(be, NULL, scr_bytes);
        for (int k = 0; k < (int)(sizeof ns / sizeof ns[0]); k++) {
            const int n = ns[k];
            float *x = rnd((size_t)n * cols, -1, 1);
            float *dx = dbuf(be, x, sizeof(float) * n * cols);
            float *dy[N_W], *one[N_W], *many[N_W];
            int64_t ldy[N_W];
            for (int i = 0; i < N_W; i++) {
                ldy[i] = rows[i] + 3;
                const size_t yb = sizeof(float) * (size_t)n * ldy[i];
                one[i] = malloc(yb), many[i] = malloc(yb);
                dy[i] = dbuf(be, NULL, yb);
                assert_int_equal(be->ops->matmul(be, &w[i], dx, n, dy[i], ldy[i], scr, &g_err), TF_OK);
                dget(be, one[i], dy[i], yb, "matmul");
                /* poison, so a row matmul_n leaves unwritten cannot keep matmul's value */
                float *nan = malloc(yb);
                for (size_t e = 0; e < yb / sizeof(float); e++) nan[e] = NAN;
                assert_int_equal(be->ops->upload(be, dy[i], nan, yb, &g_err), TF_OK);
                free(nan);
            }
            assert_int_equal(be->ops->matmul_n(be, N_W, wp, dx, n, dy, ldy, scr, &g_err), TF_OK);
            for (int i = 0; i < N_W; i++) {
                const size_t yb = sizeof(float) * (size_t)n * ldy[i];
                char what[96];
                snprintf(what, sizeof what, "matmul_n %s, %d rows, matrix %d", tf_dtype_name(t), n, i);
                dget(be, many[i], dy[i], yb, what);
                for (int r = 0; r < n; r++) {
                    assert_false(tu_has_nonfinite(many[i] + r * ldy[i], (size_t)rows[i]));
                    if (memcmp(many[i] + r * ldy[i], one[i] + r * ldy[i], sizeof(float) * rows[i]) != 0) {
                        print_error("%s, %s: token %d differs from matmul of the matrix alone\n", desc, what, r);
                        fail();
                    }
                }
                dfree(be, dy[i]), free(one[i]), free(many[i]);
            }
            dfree(be, dx), free(x);
            n_cases++;
        }
        dfree(be, scr);
        for (int i = 0; i < N_W; i++) dfree(be, (void *)w[i].data);
    }
    print_message("%s: matmul_n equal to matmul bit for bit in %d cases\n", desc, n_cases);
    assert_true(n_cases >= 16);
}

/* add_rmsnorm (the residual add and the next norm in one op): the bits of
 * add then rmsnorm on the same table, in both outputs. */
static void check_add_rmsnorm(tf_backend *be, const char *desc) {
    assert_non_null(be->ops->add_rmsnorm);
    static const int ns[] = {1, 5, 19}, dims[] = {576, 1000, 4096};
    int n_cases = 0;
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) {
            const int n = ns[a], dim = dims[b];
            const size_t N = (size_t)n * dim, bytes = sizeof(float) * N;
            float *x = rnd(N, -3, 3), *d = rnd(N, -2, 2), *w = rnd((size_t)dim, 0.5f, 1.5f);
            float *dx1 = dbuf(be, x, bytes), *dx2 = dbuf(be, x, bytes), *dd = dbuf(be, d, bytes);
            float *dw = dbuf(be, w, sizeof(float) * dim);
            float *dy1 = dbuf(be, NULL, bytes), *dy2 = dbuf(be, NULL, bytes);
            be->ops->add(be, dx1, dd, (int64_t)N);
            be->ops->rmsnorm(be, dy1, dx1, dw, n, dim, 1e-5f);
            be->ops->add_rmsnorm(be, dx2, dd, dy2, dw, n, dim, 1e-5f);
            float *x1 = malloc(bytes), *x2 = malloc(bytes), *y1 = malloc(bytes), *y2 = malloc(bytes);
            dget(be, x1, dx1, bytes, "add");
            dget(be, y1, dy1, bytes, "rmsnorm");
            dget(be, x2, dx2, bytes, "add_rmsnorm (sum)");
            dget(be, y2, dy2, bytes, "add_rmsnorm (norm)");
            assert_false(tu_has_nonfinite(x2, N));
            assert_false(tu_has_nonfinite(y2, N));
            if (memcmp(x1, x2, bytes) != 0 || memcmp(y1, y2, bytes) != 0) {
                print_error("%s: add_rmsnorm, %d rows of %d: not the bits of add then rmsnorm\n", desc, n, dim);
                fail();
            }
            dfree(be, dx1), dfree(be, dx2), dfree(be, dd), dfree(be, dw), dfree(be, dy1), dfree(be, dy2);
            free(x), free(d), free(w), free(x1), free(x2), free(y1), free(y2);
            n_cases++;
        }
    print_message("%s: add_rmsnorm equal to add then rmsnorm bit for bit at %d shapes\n", desc, n_cases);
}

static void check_elementwise(tf_backend *be, const char *desc) {
    const int n = 6, dim = 576;
    const size_t N = (size_t)n * dim;
    float *x = rnd(N, -3, 3), *u = rnd(N, -2, 2), *w = rnd(dim, 0.5f, 1.5f), *b = rnd(dim, -1, 1);
    float *got = malloc(sizeof(float) * N);
    double *ref = malloc(sizeof(double) * N);
    float *dx = dbuf(be, x, sizeof(float) * N), *du = dbuf(be, u, sizeof(float) * N), *dw = dbuf(be, w, sizeof(float) * dim);
    float *dy = dbuf(be, NULL, sizeof(float) * N);
    /* rmsnorm */
    const float eps = 1e-5f;
    be->ops->rmsnorm(be, dy, dx, dw, n, dim, eps);
    dget(be, got, dy, sizeof(float) * N, "rmsnorm");
    for (int r = 0; r < n; r++) {
        double ss = 0;
        for (int i = 0; i < dim; i++) ss += (double)x[r * dim + i] * x[r * dim + i];
        double s = 1.0 / sqrt(ss / dim + eps);
        for (int i = 0; i < dim; i++) ref[r * dim + i] = x[r * dim + i] * s * w[i];
    }
    expect_nmse(desc, "rmsnorm", got, ref, N, 1e-12);
    /* add: y = x, then y += u */
    assert_int_equal(be->ops->copy(be, dy, dx, sizeof(float) * N, &g_err), TF_OK);
    be->ops->add(be, dy, du, (int64_t)N);
    dget(be, got, dy, sizeof(float) * N, "add");
    for (size_t i = 0; i < N; i++) ref[i] = (double)x[i] + u[i];
    expect_nmse(desc, "add", got, ref, N, 1e-14);
    /* silu_mul: y = x, then y = silu(y) * u */
    assert_int_equal(be->ops->copy(be, dy, dx, sizeof(float) * N, &g_err), TF_OK);
    be->ops->silu_mul(be, dy, du, (int64_t)N);
    dget(be, got, dy, sizeof(float) * N, "silu_mul");
    for (size_t i = 0; i < N; i++) ref[i] = (double)x[i] / (1.0 + exp(-(double)x[i])) * u[i];
    expect_nmse(desc, "silu_mul", got, ref, N, 1e-12);
    /* add_bias */
    if (tf_backend_supports(be, TF_OP_ADD_BIAS, 0)) {
        float *db = dbuf(be, b, sizeof(float) * dim);
        assert_int_equal(be->ops->copy(be, dy, dx, sizeof(float) * N, &g_err), TF_OK);
        be->ops->add_bias(be, dy, db, n, dim);
        dget(be, got, dy, sizeof(float) * N, "add_bias");
        for (size_t i = 0; i < N; i++) ref[i] = (double)x[i] + b[i % dim];
        expect_nmse(desc, "add_bias", got, ref, N, 1e-14);
        dfree(be, db);
    }
    dfree(be, dx), dfree(be, du), dfree(be, dw), dfree(be, dy);
    free(x), free(u), free(w), free(b), free(got), free(ref);
}

static void check_rope(tf_backend *be, const char *desc) {
    const int n = 7, n_head = 4, hd = 64;
    const size_t N = (size_t)n * n_head * hd;
    for (int neox = 0; neox < 2; neox++)
        for (int partial = 0; partial < 2; partial++) {
            if (!tf_backend_supports(be, neox ? TF_OP_ROPE_NEOX : TF_OP_ROPE, 0)) continue;
            const int n_rot = partial ? 32 : hd;
            float freq[32];
            for (int i = 0; i < n_rot / 2; i++) freq[i] = powf(10000.0f, -2.0f * i / n_rot);
            int32_t pos[7];
            for (int i = 0; i < n; i++) pos[i] = (int32_t)(tf_rng_next(&g_rng) % 100000);
            float *x = rnd(N, -2, 2), *got = malloc(sizeof(float) * N);
            double *ref = malloc(sizeof(double) * N);
            int32_t *dpos = dbuf(be, pos, sizeof pos);
            float *dfreq = dbuf(be, freq, sizeof freq), *dx = dbuf(be, x, sizeof(float) * N);
            size_t tb = be->ops->rope_table_bytes(be, n, n_rot);
            void *table = tb ? dbuf(be, NULL, tb) : NULL;
            const float mscale = 1.1f;
            tf_rope_pass rp = {.pos = dpos, .freq = dfreq, .mscale = mscale, .n = n, .n_rot = n_rot,
                               .neox = neox != 0, .table = table};
            be->ops->rope_prepare(be, &rp);
            be->ops->rope(be, dx, (int64_t)n_head * hd, n_head, hd, &rp);
            char what[64];
            snprintf(what, sizeof what, "rope%s, %d of %d dims rotated", neox ? "_neox" : "", n_rot, hd);
            dget(be, got, dx, sizeof(float) * N, what);
            for (size_t i = 0; i < N; i++) ref[i] = x[i];
            for (int r = 0; r < n; r++)
                for (int h = 0; h < n_head; h++) {
                    const float *xh = x + ((size_t)r * n_head + h) * hd;
                    double *yh = ref + ((size_t)r * n_head + h) * hd;
                    for (int i = 0; i < n_rot / 2; i++) {
                        int a = neox ? i : 2 * i, c = neox ? i + n_rot / 2 : 2 * i + 1;
                        double th = (double)pos[r] * freq[i], cs = cos(th) * mscale, sn = sin(th) * mscale;
                        yh[a] = xh[a] * cs - xh[c] * sn;
                        yh[c] = xh[a] * sn + xh[c] * cs;
                    }
                }
            expect_nmse(desc, what, got, ref, N, 1e-10);
            dfree(be, dpos), dfree(be, dfreq), dfree(be, dx);
            if (table) dfree(be, table);
            free(x), free(got), free(ref);
        }
}

/* kv_store then attention, against tf_ref_attn over a host cache holding the
 * same values, with the slots [gap_lo, gap_hi) hidden (none when equal);
 * decode batches must also give every row's bits alone. */
static void attn_case(tf_backend *be, const char *desc, tf_dtype type, int n_head, int n_head_kv, int hd, int n_slots,
                      int n_q, int gap_lo, int gap_hi) {
    const int kv_dim = n_head_kv * hd, q_dim = n_head * hd;
    tf_kv_cache host, dev;
    assert_int_equal(tf_kv_init(&host, 1, n_head_kv, hd, n_slots, type, &g_err), TF_OK);
    assert_int_equal(tf_kv_init_on(&dev, be, 1, n_head_kv, hd, n_slots, type, "test cache", &g_err), TF_OK);
    float *k = rnd((size_t)n_slots * kv_dim, -2, 2), *v = rnd((size_t)n_slots * kv_dim, -1, 1);
    float *q = rnd((size_t)n_q * q_dim, -1.5f, 1.5f);
    tf_kv_store(&host, 0, 0, n_slots, k, v, kv_dim);
    /* through the op, in two calls (slot0 0, then the rest) */
    float *dk = dbuf(be, k, sizeof(float) * n_slots * kv_dim), *dv = dbuf(be, v, sizeof(float) * n_slots * kv_dim);
    int32_t s0[2] = {0, n_slots / 3};
    int32_t *ds0 = dbuf(be, s0, sizeof s0);
    tf_kv_view view = tf_kv_layer_view(&dev, 0);
    be->ops->kv_store(be, &view, ds0, s0[1], dk, dv, kv_dim);
    be->ops->kv_store(be, &view, ds0 + 1, n_slots - s0[1], dk + (size_t)s0[1] * kv_dim, dv + (size_t)s0[1] * kv_dim,
                      kv_dim);
    int32_t *len = malloc(sizeof(int32_t) * n_q);
    for (int i = 0; i < n_q; i++) len[i] = gap_hi + 1 + (int32_t)(tf_rng_next(&g_rng) % (n_slots - gap_hi));
    len[0] = n_slots;
    int32_t gap[2] = {gap_lo, gap_hi};
    float *ref = malloc(sizeof(float) * n_q * q_dim), *got = malloc(sizeof(float) * n_q * q_dim);
    tf_attn_args ra = {.q = q, .ldq = q_dim, .kv = tf_kv_layer_view(&host, 0), .n_q = n_q, .kv_len = len,
                       .gap_lo = gap_lo, .gap_hi = gap_hi, .n_head = n_head, .scale = 1.0f / sqrtf((float)hd),
                       .out = ref, .ldo = q_dim};
    tf_ref_attn(&ra);
    float *dq = dbuf(be, q, sizeof(float) * n_q * q_dim), *dout = dbuf(be, NULL, sizeof(float) * n_q * q_dim);
    int32_t *dlen = dbuf(be, len, sizeof(int32_t) * n_q), *dgap = dbuf(be, gap, sizeof gap);
    void *scr = dbuf(be, NULL, be->ops->attn_scratch(be, n_q, n_head, hd, n_slots));
    tf_attn_call ac = {.q = dq, .ldq = q_dim, .kv = view, .n_q = n_q, .n_head = n_head, .kv_len = dlen,
                       .max_kv = n_slots, .gap = dgap, .scale = 1.0f / sqrtf((float)hd), .out = dout, .ldo = q_dim,
                       .scratch = scr};
    be->ops->attn(be, &ac);
    char what[128];
    snprintf(what, sizeof what, "kv_store + attn, %s cache, heads %d/%d, head_dim %d, %d slots, %d rows, gap [%d, %d)",
             tf_dtype_name(type), n_head, n_head_kv, hd, n_slots, n_q, gap_lo, gap_hi);
    dget(be, got, dout, sizeof(float) * n_q * q_dim, what);
    double *refd = malloc(sizeof(double) * n_q * q_dim);
    for (int i = 0; i < n_q * q_dim; i++) refd[i] = ref[i];
    /* bf16 products on the f16 / quantized fast paths (attn.h): about 2^-9 per value */
    expect_nmse(desc, what, got, refd, (size_t)n_q * q_dim, type == TF_DTYPE_F32 ? 1e-10 : 1e-4);
    if (n_q > 1 && n_q <= 16) { /* batch invariance: each row alone gives the same bits */
        float *one = malloc(sizeof(float) * q_dim);
        for (int i = 0; i < n_q; i++) {
            tf_attn_call a1 = ac;
            a1.q = dq + (size_t)i * q_dim;
            a1.kv_len = dlen + i;
            a1.n_q = 1;
            be->ops->attn(be, &a1);
            assert_int_equal(be->ops->download(be, one, dout, sizeof(float) * q_dim, &g_err), TF_OK);
            if (memcmp(one, got + (size_t)i * q_dim, sizeof(float) * q_dim) != 0) {
                print_error("%s, %s: row %d alone differs from the batch (batch invariance)\n", desc, what, i);
                fail();
            }
        }
        free(one);
    }
    dfree(be, dk), dfree(be, dv), dfree(be, ds0), dfree(be, dq), dfree(be, dout), dfree(be, dlen), dfree(be, dgap);
    dfree(be, scr);
    tf_kv_free(&host);
    tf_kv_free(&dev);
    free(k), free(v), free(q), free(len), free(ref), free(got), free(refd);
}

static void check_attention(tf_backend *be, const char *desc) {
    const tf_dtype types[] = {TF_DTYPE_F16, TF_DTYPE_F32, TF_DTYPE_Q8_0, TF_DTYPE_Q4_0};
    int n_types = 0;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        if (!tf_backend_supports(be, TF_OP_ATTN, types[t]) || !tf_backend_supports(be, TF_OP_KV_STORE, types[t]))
            continue;
        n_types++;
        attn_case(be, desc, types[t], 8, 2, 64, 300, 1, 0, 0);
        attn_case(be, desc, types[t], 8, 2, 64, 300, 5, 0, 0);  /* verification rows, GQA */
        attn_case(be, desc, types[t], 4, 4, 128, 700, 3, 0, 0);
        attn_case(be, desc, types[t], 9, 3, 64, 160, 24, 0, 0); /* SmolLM2's heads; past the decode batch */
        /* a streaming cache's gap: sinks before it, the window from any slot after it */
        attn_case(be, desc, types[t], 8, 2, 64, 300, 5, 4, 83);
        attn_case(be, desc, types[t], 9, 3, 64, 400, 1, 16, 160);
        attn_case(be, desc, types[t], 9, 3, 64, 300, 24, 7, 101);  /* prefill batch */
        attn_case(be, desc, types[t], 4, 4, 128, 2600, 4, 13, 1037); /* across decode splits */
        attn_case(be, desc, types[t], 8, 2, 64, 200, 3, 0, 45);      /* no sinks */
        if (types[t] == TF_DTYPE_F16 || types[t] == TF_DTYPE_F32) { /* stories260K's head_dim 8: the row path */
            attn_case(be, desc, types[t], 8, 4, 8, 300, 5, 0, 0);
            attn_case(be, desc, types[t], 8, 4, 8, 300, 5, 3, 70);
        }
    }
    assert_true(n_types >= 1);
}

static void check_argmax(tf_backend *be, const char *desc) {
    const int rows = 4, V = 1000;
    float *l = rnd((size_t)rows * V, -5, 5);
    l[0 * V + 17] = NAN;                         /* NaN never wins */
    l[1 * V + 3] = 9.0f, l[1 * V + 700] = 9.0f;  /* a tie: the lower id */
    for (int i = 0; i < V; i++) l[2 * V + i] = NAN;
    l[2 * V + 999] = -1.0f;                      /* the only number in a row of NaN */
    float *dl = dbuf(be, l, sizeof(float) * rows * V);
    int32_t *dout = dbuf(be, NULL, sizeof(int32_t) * rows), got[4];
    be->ops->argmax(be, dout, dl, rows, V);
    dget(be, got, dout, sizeof got, "argmax");
    for (int r = 0; r < rows; r++)
        if (got[r] != tf_argmax(l + (size_t)r * V, V)) {
            print_error("%s, argmax row %d: %d, expected %d\n", desc, r, got[r], tf_argmax(l + (size_t)r * V, V));
            fail();
        }
    dfree(be, dl), dfree(be, dout), free(l);
}

/* Sampling's candidates: the op against tf_topk_scaled, every id, z and count
 * equal, on rows with ties (equal logits), NaN, -inf, a row with fewer finite
 * values than k and a row with none, for several k and temperatures. */
static void check_topk(tf_backend *be, const char *desc) {
    const int rows = 5, V = 3000;
    float *l = rnd((size_t)rows * V, -6, 6);
    for (int i = 0; i < V; i += 7) l[0 * V + i] = 2.5f;        /* many ties at the top */
    for (int i = 0; i < V; i += 11) l[1 * V + i] = NAN;
    for (int i = 0; i < V; i += 13) l[1 * V + i] = -INFINITY;
    for (int i = 0; i < V; i++) l[2 * V + i] = i % 500 ? NAN : (float)(i % 3); /* 6 finite values */
    for (int i = 0; i < V; i++) l[3 * V + i] = -INFINITY;       /* none */
    float *dl = dbuf(be, l, sizeof(float) * rows * V);
    static const struct { int k; float temp; } cases[] = {{1, 1.0f}, {4, 0.6f}, {40, 0.7f}, {64, 1.3f}, {17, 3.0f}};
    int32_t *got = malloc(sizeof(int32_t) * rows * (2 * TF_TOPK_MAX + 1)), ids[TF_TOPK_MAX];
    float z[TF_TOPK_MAX];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int k = cases[c].k;
        int32_t *dout = dbuf(be, NULL, sizeof(int32_t) * rows * (2 * k + 1)); /* its guard right after the layout */
        be->ops->topk(be, dout, dl, rows, V, k, cases[c].temp);
        dget(be, got, dout, sizeof(int32_t) * rows * (2 * k + 1), "topk");
        const float *gz = (const float *)(got + rows * k);
        for (int r = 0; r < rows; r++) {
            int32_t m = tf_topk_scaled(l + (size_t)r * V, V, cases[c].temp, k, ids, z);
            if (got[2 * rows * k + r] != m || memcmp(got + r * k, ids, sizeof(int32_t) * m) ||
                memcmp(gz + r * k, z, sizeof(float) * m)) {
                print_error("%s, topk k=%d temp %g row %d: %d kept (expected %d), or the ids / z differ\n", desc, k,
                            cases[c].temp, r, got[2 * rows * k + r], m);
                fail();
            }
        }
        dfree(be, dout);
    }
    dfree(be, dl), free(got), free(l);
}

/* Slot o of layer il, KV head h of a cache downloaded from be: through the
 * CPU's layout for host backends; a device keeps f16 keys row-major
 * ([slot][head_dim], kv_view.h), and values in both layouts. */
static void view_read(const tf_backend *be, const tf_kv_cache *kv, int il, int h, int32_t o, float *k, float *v) {
    tf_kv_read(kv, il, h, o, k, v);
    if (be->ops->host_memory) return;
    assert_int_equal(kv->type, TF_DTYPE_F16);
    const tf_f16 *kr = (const tf_f16 *)tf_kv_k(kv, il, h) + (size_t)o * kv->head_dim;
    for (int d = 0; d < kv->head_dim; d++) k[d] = tf_f16_to_f32(kr[d]);
}

/* The retrieval cache on this backend (kv/retrieval.h over the table's rc
 * ops; a host cache runs on the CPU's): keys stored through kv_store, chunk
 * sums kept through appends in pieces and a rollback, then checked bit for
 * bit against a float sum in slot order from zero of the stored keys; the
 * selection against tf_rcache_select_ref's double scores (a chunk may differ
 * only within a near-tie of the boundary); the gather bit for bit against the
 * host cache's selected slots. */
static void rc_case(tf_backend *be, const char *desc, tf_dtype type, int n_layer, int n_head, int n_head_kv, int hd,
                    int n_slots, int chunk, int budget) {
    const int kv_dim = n_head_kv * hd, q_dim = n_head * hd;
    tf_kv_cache host, dev, view;
    assert_int_equal(tf_kv_init(&host, n_layer, n_head_kv, hd, n_slots, type, &g_err), TF_OK);
    assert_int_equal(tf_kv_init_on(&dev, be, n_layer, n_head_kv, hd, n_slots, type, "test cache", &g_err), TF_OK);
    const size_t lay = (size_t)n_slots * kv_dim;
    float *k = rnd(lay * n_layer, -2, 2), *v = rnd(lay * n_layer, -1, 1), *q = rnd((size_t)n_layer * q_dim, -1, 1);
    float *dk = dbuf(be, k, sizeof(float) * lay * n_layer), *dv = dbuf(be, v, sizeof(float) * lay * n_layer);
    int32_t zero = 0, *ds0 = dbuf(be, &zero, sizeof zero);
    for (int il = 0; il < n_layer; il++) {
        tf_kv_store(&host, il, 0, n_slots, k + il * lay, v + il * lay, kv_dim);
        tf_kv_view vw = tf_kv_layer_view(&dev, il);
        be->ops->kv_store(be, &vw, ds0, n_slots, dk + il * lay, dv + il * lay, kv_dim);
    }
    for (int32_t s = 0; s < n_slots; s++) host.pos[s] = dev.pos[s] = 1000 + s;
    host.n_used = dev.n_used = n_slots;
    tf_rcache rc;
    tf_rcache_params p = {.chunk = chunk, .budget = budget, .recent = 2 * chunk};
    assert_int_equal(tf_rcache_init(&rc, &dev, &p, g_pool, &g_err), TF_OK);
    int32_t a = n_slots / 3 + 5, back = n_slots - 11;
    tf_rcache_note_append(&rc, &dev, 0, a); /* ends inside a chunk */
    tf_rcache_note_append(&rc, &dev, a, n_slots - a);
    tf_rcache_truncate(&rc, &dev, back); /* a rollback, then the slots again */
    tf_rcache_note_append(&rc, &dev, back, n_slots - back);
    char what[160];
    snprintf(what, sizeof what, "retrieval cache, %s, %d layers, heads %d/%d, head_dim %d, %d slots, chunk %d, "
             "budget %d", tf_dtype_name(type), n_layer, n_head, n_head_kv, hd, n_slots, chunk, budget);
    /* sums */
    const int pairs = n_layer * n_head_kv, n_ch = (n_slots + chunk - 1) / chunk;
    size_t n_sum = (size_t)pairs * rc.n_chunk_cap * hd;
    float *sums = malloc(sizeof(float) * n_sum), *kr = malloc(sizeof(float) * hd);
    assert_int_equal(be->ops->sync(be, what, &g_err), TF_OK);
    assert_int_equal(be->ops->download(be, sums, rc.sum, sizeof(float) * n_sum, &g_err), TF_OK);
    float *acc = malloc(sizeof(float) * hd);
    for (int pr = 0; pr < pairs; pr++)
        for (int32_t j = 0; j < n_ch; j++) {
            for (int d = 0; d < hd; d++) acc[d] = 0.0f;
            for (int32_t s = j * chunk; s < (j + 1) * chunk && s < n_slots; s++) {
                tf_kv_read(&host, pr / n_head_kv, pr % n_head_kv, s, kr, NULL);
                for (int d = 0; d < hd; d++) acc[d] += kr[d];
            }
            const float *got = sums + ((size_t)pr * rc.n_chunk_cap + j) * hd;
            if (memcmp(got, acc, sizeof(float) * hd) != 0) {
                print_error("%s, %s: pair %d chunk %d: the sum differs from the slot-order sum\n", desc, what, pr, j);
                fail();
            }
        }
    /* selection and gather */
    float *dq = dbuf(be, q, sizeof(float) * n_layer * q_dim);
    assert_int_equal(tf_rcache_view_init(&view, &rc, &dev, 8, &g_err), TF_OK);
    assert_int_equal(tf_rcache_build(&rc, &dev, dq, n_head, &view, &g_err), TF_OK);
    assert_true(rc.n_sel > budget - chunk && rc.n_sel <= budget);
    int32_t *sel = malloc(sizeof(int32_t) * pairs * rc.max_sel), *ref = malloc(sizeof(int32_t) * (n_ch + 1));
    double *score = malloc(sizeof(double) * (n_ch + 1));
    assert_int_equal(be->ops->download(be, sel, rc.sel, sizeof(int32_t) * pairs * rc.max_sel, &g_err), TF_OK);
    size_t vb = view.bytes;
    uint8_t *vk = malloc(vb), *vv = malloc(vb);
    assert_int_equal(be->ops->download(be, vk, view.k, vb, &g_err), TF_OK);
    assert_int_equal(be->ops->download(be, vv, view.v, vb, &g_err), TF_OK);
    tf_kv_cache vh = view; /* the downloaded view, read through the host functions */
    vh.k = vk, vh.v = vv, vh.be = NULL;
    float *vr = malloc(sizeof(float) * hd), *hr = malloc(sizeof(float) * hd), *hv = malloc(sizeof(float) * hd),
          *vvr = malloc(sizeof(float) * hd);
    for (int pr = 0; pr < pairs; pr++) {
        int il = pr / n_head_kv, h = pr % n_head_kv, n_ref = 0;
        assert_int_equal(tf_rcache_select_ref(&host, n_slots, &p, q, n_head, il, h, ref, &n_ref, score, &g_err), TF_OK);
        assert_int_equal(n_ref, rc.n_sel_chunks);
        const int32_t *sp = sel + (size_t)pr * rc.max_sel;
        double worst = INFINITY, span = 0;
        for (int t = 0; t < n_ref; t++)
            if (ref[t] < n_slots / chunk && !isnan(score[ref[t]]) && score[ref[t]] < worst) worst = score[ref[t]];
        for (int32_t j = 0; j < n_slots / chunk; j++)
            if (!isnan(score[j]) && fabs(score[j]) > span) span = fabs(score[j]);
        for (int t = 0; t < n_ref; t++) {
            if (t) assert_true(sp[t] > sp[t - 1]);
            if (sp[t] != ref[t] && !(fabs(score[sp[t]] - worst) <= 1e-5 * span)) {
                print_error("%s, %s: pair %d, chunk %d chosen (reference: %d)\n", desc, what, pr, sp[t], ref[t]);
                fail();
            }
        }
        /* the gather: view slot o holds the o-th selected slot */
        int32_t t = 0, s0, n, o = 0;
        while (tf_rc_next_run(sp, rc.n_sel_chunks, chunk, n_slots, &t, &s0, &n))
            for (int32_t i = 0; i < n; i++, o++) {
                tf_kv_read(&host, il, h, s0 + i, hr, hv);
                view_read(be, &vh, il, h, o, vr, vvr);
                if (memcmp(hr, vr, sizeof(float) * hd) != 0 || memcmp(hv, vvr, sizeof(float) * hd) != 0) {
                    print_error("%s, %s: pair %d, view slot %d differs from slot %d\n", desc, what, pr, o, s0 + i);
                    fail();
                }
                if (pr == 0) assert_int_equal(view.pos[o], 1000 + s0 + i);
            }
        assert_int_equal(o, rc.n_sel);
    }
    assert_int_equal(view.n_used, rc.n_sel);
    tf_kv_free(&view);
    tf_rcache_free(&rc);
    dfree(be, dk), dfree(be, dv), dfree(be, ds0), dfree(be, dq);
    tf_kv_free(&host);
    tf_kv_free(&dev);
    free(k), free(v), free(q), free(sums), free(kr), free(acc), free(sel), free(ref), free(score), free(vk), free(vv);
    free(vr), free(hr), free(hv), free(vvr);
}

static void check_retrieval(tf_backend *be, const char *desc) {
    const tf_dtype types[] = {TF_DTYPE_F16, TF_DTYPE_F32, TF_DTYPE_Q8_0, TF_DTYPE_Q4_0};
    int n_types = 0;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        if (!tf_backend_supports(be, TF_OP_RC_SUMS, types[t]) || !tf_backend_supports(be, TF_OP_KV_STORE, types[t]))
            continue;
        n_types++;
        rc_case(be, desc, types[t], 2, 9, 3, 64, 1000, 8, 256);  /* SmolLM2's heads */
        rc_case(be, desc, types[t], 1, 8, 8, 128, 700, 16, 300); /* MHA, a partial chunk */
    }
    assert_true(n_types >= 1);
}

/* The streaming cache on this backend (kv/streaming.h through the table's
 * copy, rope and kv_store) in lockstep with one in host memory (which
 * test_streaming checks against StreamingLLM itself): the same random keys
 * stored as the forward pass stores them, in random calls with rollbacks,
 * and after each call the backend's attention over its view (the gap, the
 * re-rotated sinks, the copied-back window) against tf_ref_attn over the
 * host's. */
static void stream_case(tf_backend *be, const char *desc, tf_dtype type, int n_rot, bool neox) {
    enum { NL = 2, NKV = 2, NH = 6, HD = 64, KVD = NKV * HD, QD = NH * HD, S = 4, W = 20, SLACK = 6, NB = 8, T = 300 };
    float freq[HD / 2];
    for (int i = 0; i < n_rot / 2; i++) freq[i] = powf(10000.0f, -2.0f * (float)i / (float)n_rot);
    float *dfreq = dbuf(be, freq, sizeof freq);
    tf_scache sc, hc;
    assert_int_equal(tf_scache_init_on(&sc, be, NL, NKV, HD, n_rot, neox, dfreq, 1.0f, S, W, SLACK, NB, 0, type, &g_err),
                     TF_OK);
    assert_int_equal(tf_scache_init(&hc, NL, NKV, HD, n_rot, neox, freq, 1.0f, S, W, SLACK, NB, 0, TF_DTYPE_F32, &g_err),
                     TF_OK);
    float *k = malloc(sizeof(float) * NL * NB * KVD), *v = malloc(sizeof(float) * NL * NB * KVD);
    float *kr = malloc(sizeof(float) * NB * KVD), *q = malloc(sizeof(float) * NB * QD);
    float *got = malloc(sizeof(float) * NB * QD), *ref = malloc(sizeof(float) * NB * QD);
    float *dk = dbuf(be, NULL, sizeof(float) * NL * NB * KVD), *dv = dbuf(be, NULL, sizeof(float) * NL * NB * KVD);
    float *dkr = dbuf(be, NULL, sizeof(float) * NB * KVD), *dq = dbuf(be, NULL, sizeof(float) * NB * QD);
    int32_t *dargs = dbuf(be, NULL, sizeof(int32_t) * (2 * NB + 3)); /* positions, lengths, slot0, gap */
    void *table = NULL;
    size_t tb = be->ops->rope_table_bytes(be, NB, n_rot);
    if (tb) table = dbuf(be, NULL, tb);
    void *scr = dbuf(be, NULL, be->ops->attn_scratch(be, NB, NH, HD, sc.view.n_slots));
    char what[128];
    snprintf(what, sizeof what, "streaming cache, %s view, n_rot %d%s", tf_dtype_name(type), n_rot,
             neox ? ", rotate-half pairs" : "");
    double num = 0, den = 0;
    int calls = 0;
    while (sc.n_seen < T - NB) {
        int n = 1 + (int)(tf_rng_next(&g_rng) % NB);
        const bool keys = tf_scache_wants_keys(&sc);
        int32_t slot0, pos0, hslot0, hpos0;
        assert_int_equal(tf_scache_view(&sc, n, &slot0, &pos0, &g_err), TF_OK);
        assert_int_equal(tf_scache_view(&hc, n, &hslot0, &hpos0, &g_err), TF_OK);
        assert_int_equal(slot0, hslot0);
        assert_int_equal(pos0, hpos0);
        assert_int_equal(sc.view.gap_lo, hc.view.gap_lo);
        assert_int_equal(sc.view.gap_hi, hc.view.gap_hi);
        int32_t args[2 * NB + 3];
        for (int i = 0; i < n; i++) args[i] = pos0 + i, args[NB + i] = slot0 + i + 1;
        args[2 * NB] = slot0, args[2 * NB + 1] = sc.view.gap_lo, args[2 * NB + 2] = sc.view.gap_hi;
        assert_int_equal(be->ops->upload(be, dargs, args, sizeof args, &g_err), TF_OK);
        const tf_rope_pass rp = {.pos = dargs, .freq = dfreq, .mscale = 1.0f, .n = n, .n_rot = n_rot, .neox = neox,
                                 .table = table};
        be->ops->rope_prepare(be, &rp);
        float cs[NB * HD / 2], sn[NB * HD / 2];
        tf_op_rope_table(cs, sn, args, n, n_rot, freq, 1.0f);
        tu_fill_uniform(&g_rng, k, (size_t)NL * NB * KVD, -1, 1);
        tu_fill_uniform(&g_rng, v, (size_t)NL * NB * KVD, -1, 1);
        assert_int_equal(be->ops->upload(be, dk, k, sizeof(float) * NL * NB * KVD, &g_err), TF_OK);
        assert_int_equal(be->ops->upload(be, dv, v, sizeof(float) * NL * NB * KVD, &g_err), TF_OK);
        for (int il = 0; il < NL; il++) { /* as the forward pass stores them */
            memcpy(kr, k + (size_t)il * NB * KVD, sizeof(float) * n * KVD);
            tf_op_rope(kr, n, KVD, NKV, HD, n_rot, neox, cs, sn);
            tf_kv_store(&hc.view, il, slot0, n, kr, v + (size_t)il * NB * KVD, KVD);
            assert_int_equal(be->ops->copy(be, dkr, dk + (size_t)il * NB * KVD, sizeof(float) * n * KVD, &g_err), TF_OK);
            be->ops->rope(be, dkr, KVD, NKV, HD, &rp);
            const tf_kv_view vl = tf_kv_layer_view(&sc.view, il);
            be->ops->kv_store(be, &vl, dargs + 2 * NB, n, dkr, dv + (size_t)il * NB * KVD, KVD);
        }
        assert_int_equal(tf_scache_append(&sc, keys ? dk : NULL, keys ? dv : NULL, n, NB, &g_err), TF_OK);
        assert_int_equal(tf_scache_append(&hc, keys ? k : NULL, keys ? v : NULL, n, NB, &g_err), TF_OK);
        /* every row of the call, every layer */
        tu_fill_uniform(&g_rng, q, (size_t)n * QD, -1, 1);
        tf_op_rope(q, n, QD, NH, HD, n_rot, neox, cs, sn);
        assert_int_equal(be->ops->upload(be, dq, q, sizeof(float) * n * QD, &g_err), TF_OK);
        float *dout = dbuf(be, NULL, sizeof(float) * n * QD); /* its guard right after the call's rows */
        for (int il = 0; il < NL; il++) {
            tf_attn_args ra = {.q = q, .ldq = QD, .kv = tf_kv_layer_view(&hc.view, il), .n_q = n, .kv_len = args + NB,
                               .gap_lo = hc.view.gap_lo, .gap_hi = hc.view.gap_hi, .n_head = NH,
                               .scale = 1.0f / sqrtf((float)HD), .out = ref, .ldo = QD};
            tf_ref_attn(&ra);
            tf_attn_call ac = {.q = dq, .ldq = QD, .kv = tf_kv_layer_view(&sc.view, il), .n_q = n, .n_head = NH,
                               .kv_len = dargs + NB, .max_kv = sc.view.n_slots, .gap = dargs + 2 * NB + 1,
                               .scale = 1.0f / sqrtf((float)HD), .out = dout, .ldo = QD, .scratch = scr};
            be->ops->attn(be, &ac);
            dget(be, got, dout, sizeof(float) * n * QD, what);
            for (int i = 0; i < n * QD; i++) {
                if (!isfinite(got[i])) {
                    print_error("%s, %s: NaN or Inf in the attention output\n", desc, what);
                    fail();
                }
                num += (got[i] - ref[i]) * (double)(got[i] - ref[i]);
                den += (double)ref[i] * ref[i];
            }
        }
        dfree(be, dout);
        if (n > 2 && tf_rng_next(&g_rng) % 3 == 0) { /* a rollback within the slack */
            assert_int_equal(tf_scache_truncate(&sc, sc.n_seen - 2, &g_err), TF_OK);
            assert_int_equal(tf_scache_truncate(&hc, hc.n_seen - 2, &g_err), TF_OK);
        }
        calls++;
    }
    double nmse = num / den, bound = type == TF_DTYPE_F32 ? 1e-10 : 1e-4; /* bf16 products (attn.h) */
    if (nmse > bound) {
        print_error("%s, %s: attention NMSE %g > %g over %d calls\n", desc, what, nmse, bound, calls);
        fail();
    }
    assert_true(sc.base_tok > S + W); /* the window was copied back at least once */
    tf_scache_free(&sc);
    tf_scache_free(&hc);
    dfree(be, dfreq), dfree(be, dk), dfree(be, dv), dfree(be, dkr), dfree(be, dq), dfree(be, dargs), dfree(be, scr);
    if (table) dfree(be, table);
    free(k), free(v), free(kr), free(q), free(got), free(ref);
}

static void check_streaming(tf_backend *be, const char *desc) {
    const tf_dtype types[] = {TF_DTYPE_F16, TF_DTYPE_F32, TF_DTYPE_Q8_0};
    int n_types = 0;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        if (!tf_backend_supports(be, TF_OP_ATTN, types[t]) || !tf_backend_supports(be, TF_OP_KV_STORE, types[t]))
            continue;
        n_types++;
        stream_case(be, desc, types[t], 64, false);
        stream_case(be, desc, types[t], 32, false); /* partial rotation */
        if (tf_backend_supports(be, TF_OP_ROPE_NEOX, 0)) {
            stream_case(be, desc, types[t], 64, true);
            stream_case(be, desc, types[t], 32, true);
        }
    }
    assert_true(n_types >= 1);
}

/* A table that claims an op has its function. */
static void check_table(const tf_backend *be, const char *desc) {
    const tf_backend_ops *o = be->ops;
    const struct { tf_op op; const void *fn; } ops[] = {
        {TF_OP_EMBED, (const void *)o->embed},       {TF_OP_RMSNORM, (const void *)o->rmsnorm},
        {TF_OP_ROPE, (const void *)o->rope},         {TF_OP_ROPE_NEOX, (const void *)o->rope},
        {TF_OP_MATMUL, (const void *)o->matmul},     {TF_OP_ADD_BIAS, (const void *)o->add_bias},
        {TF_OP_ADD, (const void *)o->add},           {TF_OP_SILU_MUL, (const void *)o->silu_mul},
        {TF_OP_KV_STORE, (const void *)o->kv_store}, {TF_OP_ATTN, (const void *)o->attn},
        {TF_OP_ARGMAX, (const void *)o->argmax},     {TF_OP_TOPK, (const void *)o->topk},
        {TF_OP_GRAPH, (const void *)o->graph_begin},
        {TF_OP_RC_SUMS, (const void *)o->rc_sums},   {TF_OP_RC_SELECT, (const void *)o->rc_select},
        {TF_OP_RC_GATHER, (const void *)o->rc_gather},
    };
    char denied[256] = "";
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        bool typed = ops[i].op == TF_OP_EMBED || ops[i].op == TF_OP_MATMUL || ops[i].op == TF_OP_KV_STORE ||
                     ops[i].op == TF_OP_ATTN || ops[i].op == TF_OP_RC_SUMS || ops[i].op == TF_OP_RC_GATHER;
        bool any = false;
        for (uint32_t t = 0; t < (typed ? TF_DTYPE_COUNT : 1); t++) any |= tf_backend_supports(be, ops[i].op, t);
        if (any && !ops[i].fn) {
            print_error("%s: claims %s but has no function for it\n", desc, tf_op_name(ops[i].op));
            fail();
        }
        if (!any) snprintf(denied + strlen(denied), sizeof denied - strlen(denied), " %s", tf_op_name(ops[i].op));
    }
    print_message("%s: ops it denies:%s\n", desc, denied[0] ? denied : " none");
    /* and a denied op is refused by name */
    if (!tf_backend_supports(be, TF_OP_MATMUL, TF_DTYPE_COUNT)) {
        tf_err e = {0};
        assert_int_equal(tf_backend_require(be, TF_OP_MATMUL, TF_DTYPE_COUNT, "tensor x", &e), TF_ERR_UNSUPPORTED);
        assert_non_null(strstr(e.msg, "tensor x"));
        assert_non_null(strstr(e.msg, "matmul"));
    }
}

static void check_backend(tf_backend *be) {
    const char *desc = be->ops->describe(be);
    check_table(be, desc);
    check_elementwise(be, desc);
    check_add_rmsnorm(be, desc);
    check_rope(be, desc);
    check_embed_matmul(be, desc);
    check_matmul_n(be, desc);
    check_attention(be, desc);
    check_argmax(be, desc);
    check_topk(be, desc);
    check_retrieval(be, desc);
    check_streaming(be, desc);
}

static void test_cpu_tables(void **state) {
    (void)state;
    const tf_isa isas[] = {TF_ISA_SCALAR, TF_ISA_AVX2, TF_ISA_AVX512, TF_ISA_AMX};
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
        if (isas[i] > tf_cpu_best_isa()) {
            print_message("cpu: instruction set %d not on this machine, not checked\n", (int)isas[i]);
            continue;
        }
        tf_backend be;
        assert_int_equal(tf_backend_cpu_init(&be, g_pool, isas[i], &g_err), TF_OK);
        assert_int_equal(tf_kv_type_on(&be, TF_DTYPE_F32), TF_DTYPE_F32); /* the CPU reads f32 caches */
        check_backend(&be);
        tf_backend_free(&be);
    }
}

/* The CPU backend splits element-wise ops over several rows across its pool
 * (backend_cpu.c): each value must be the one the op computes on a single
 * thread, bit for bit, at every size around the split's threshold and its
 * ragged ends (element counts not a multiple of 16, rows not a multiple of
 * the threads). Fresh random data; the one-thread results come from the
 * ops.h functions directly. */
static void test_cpu_elementwise_split(void **state) {
    (void)state;
    tf_backend be;
    assert_int_equal(tf_backend_cpu_init(&be, g_pool, TF_ISA_BEST, &g_err), TF_OK);
    static const int rows[] = {1, 2, 3, 7, 8, 9, 33};
    static const int dims[] = {576, 1536, 64 * 9};
    int n_checked = 0;
    for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
        for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
            const int n = rows[ri], dim = dims[di];
            const size_t N = (size_t)n * dim + (size_t)(ri % 3) * 5; /* + a ragged tail for add / silu */
            float *x = rnd(N, -3, 3), *u = rnd(N, -2, 2), *w = rnd(dim, 0.5f, 1.5f);
            float *a = malloc(sizeof(float) * N), *b = malloc(sizeof(float) * N);
            /* rmsnorm over n rows */
            be.ops->rmsnorm(&be, a, x, w, n, dim, 1e-5f);
            tf_op_rmsnorm(b, x, w, n, dim, dim, 1e-5f);
            assert_memory_equal(a, b, sizeof(float) * (size_t)n * dim);
            /* add and silu_mul over N values */
            memcpy(a, x, sizeof(float) * N), memcpy(b, x, sizeof(float) * N);
            be.ops->add(&be, a, u, (int64_t)N);
            tf_op_add(b, u, (int64_t)N);
            assert_memory_equal(a, b, sizeof(float) * N);
            memcpy(a, x, sizeof(float) * N), memcpy(b, x, sizeof(float) * N);
            be.ops->silu_mul(&be, a, u, (int64_t)N);
            tf_op_silu_mul(b, u, (int64_t)N);
            assert_memory_equal(a, b, sizeof(float) * N);
            /* rope over n rows of dim / 64 heads of 64, both layouts */
            for (int neox = 0; neox < 2; neox++) {
                float freq[32];
                for (int i = 0; i < 32; i++) freq[i] = powf(10000.0f, -2.0f * i / 64);
                int32_t pos[33];
                for (int i = 0; i < n; i++) pos[i] = (int32_t)(tf_rng_next(&g_rng) % 100000);
                const size_t tb = be.ops->rope_table_bytes(&be, n, 64);
                float *table = malloc(tb);
                tf_rope_pass rp = {.pos = pos, .freq = freq, .mscale = 1.0f, .n = n, .n_rot = 64,
                                   .neox = neox != 0, .table = table};
                be.ops->rope_prepare(&be, &rp);
                memcpy(a, x, sizeof(float) * N), memcpy(b, x, sizeof(float) * N);
                be.ops->rope(&be, a, dim, dim / 64, 64, &rp);
                tf_op_rope(b, n, dim, dim / 64, 64, 64, neox != 0, table, table + (size_t)n * 32);
                assert_memory_equal(a, b, sizeof(float) * (size_t)n * dim);
                free(table);
            }
            for (size_t i = 0; i < (size_t)n * dim; i++) assert_false(isnan(a[i]));
            free(x), free(u), free(w), free(a), free(b);
            n_checked++;
        }
    print_message("cpu: rmsnorm, add, silu_mul and rope on the pool equal one thread's bits at %d shapes\n",
                  n_checked);
    tf_backend_free(&be);
}

static void test_cuda_table(void **state) {
    (void)state;
#ifdef TF_HAVE_CUDA
    /* what a probe (no device opened) says: f32 caches are kept in f16, q8_0 refused */
    const tf_backend probe = {.ops = tf_backend_cuda_ops(), .ctx = NULL};
    assert_int_equal(tf_kv_type_on(&probe, TF_DTYPE_F32), TF_DTYPE_F16);
    assert_false(tf_backend_supports(&probe, TF_OP_ATTN, TF_DTYPE_Q8_0));
    tf_backend be;
    tf_err e = {0};
    if (tf_backend_cuda_open(&be, 0, &e) != TF_OK) {
        print_message("skipped: no usable CUDA device (%s)\n", e.msg);
        skip();
    }
    check_backend(&be);
    tf_backend_free(&be);
#else
    print_message("skipped: a CPU-only build (make CUDA=1 builds the CUDA table)\n");
    skip();
#endif
}

/* The harness itself: a kernel that is off by a little is caught (the
 * negative control of the NMSE checks). */
static void off_add(tf_backend *be, float *y, const float *x, int64_t n) {
    (void)be;
    for (int64_t i = 0; i < n; i++) y[i] += x[i] * 1.001f;
}
static void off_end_silu(tf_backend *be, float *g, const float *u, int64_t n) {
    (void)be;
    for (int64_t i = 0; i <= n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * (i < n ? u[i] : 1.0f); /* one past */
}

static void test_negative_control(void **state) {
    (void)state;
    tf_backend cpu;
    assert_int_equal(tf_backend_cpu_init(&cpu, g_pool, TF_ISA_BEST, &g_err), TF_OK);
    tf_backend_ops broken = *cpu.ops;
    broken.add = off_add;
    broken.silu_mul = off_end_silu;
    tf_backend be = {.ops = &broken, .ctx = cpu.ctx};
    const size_t N = 6 * 576;
    float *x = rnd(N, -3, 3), *u = rnd(N, -2, 2), *got = malloc(sizeof(float) * N);
    double *ref = malloc(sizeof(double) * N);
    float *dy = dbuf(&be, x, sizeof(float) * N), *du = dbuf(&be, u, sizeof(float) * N);
    be.ops->add(&be, dy, du, (int64_t)N);
    be.ops->download(&be, got, dy, sizeof(float) * N, &g_err);
    for (size_t i = 0; i < N; i++) ref[i] = (double)x[i] + u[i];
    assert_true(nmse_of(got, ref, N) > 1e-14); /* the bound check_elementwise applies to add */
    /* the guard after a buffer catches a write one element past the end */
    assert_int_equal(be.ops->upload(&be, dy, x, sizeof(float) * N, &g_err), TF_OK);
    be.ops->silu_mul(&be, dy, du, (int64_t)N);
    uint8_t tail[GUARD];
    memcpy(tail, (uint8_t *)dy + sizeof(float) * N, GUARD);
    int intact = 1;
    for (int i = 0; i < GUARD; i++) intact &= tail[i] == GUARD_BYTE;
    assert_false(intact);
    dfree(&be, dy), dfree(&be, du);
    free(x), free(u), free(got), free(ref);
    tf_backend_free(&cpu);
}

static int setup(void **state) {
    (void)state;
    tf_rng_seed(&g_rng, tu_seed());
    return tf_pool_create(&g_pool, 2, &g_err) == TF_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    tf_pool_free(g_pool);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_tables),
        cmocka_unit_test(test_cpu_elementwise_split),
        cmocka_unit_test(test_cuda_table),
        cmocka_unit_test(test_negative_control),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
