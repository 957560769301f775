/* test_quantize.c — model type conversion: a generated F32 model converted
 * to every output type, reopened with the reader; every tensor's type
 * (policy: 2-D -> target or F16 fallback, 1-D -> F32), shape and values
 * (within the type's error bound of the source) checked; metadata copied,
 * file type updated; quantized inputs, bad types, cancellation and
 * in-place conversion; dequantization equal to that of llama.cpp's `gguf`
 * Python package on its own files; stories260K to Q8_0 when ../shared is
 * present. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cpu/quant.h"
#include "core/dtype.h"
#include "format/gguf.h"
#include "model/gen.h"
#include "model/quantize.h"

#define OK(expr)                                                                                                 \
    do {                                                                                                         \
        tf_status st_ = (expr);                                                                                  \
        if (st_ != TF_OK) fail_msg("%s failed: %s", #expr, err.msg);                                             \
    } while (0)

typedef struct log_capture {
    char text[8192];
} log_capture;

static void capture(void *ud, tf_log_level level, const char *msg) {
    log_capture *c = ud;
    size_t len = strlen(c->text);
    snprintf(c->text + len, sizeof c->text - len, "%d:%s\n", (int)level, msg);
}

/* n_embd 256 (K-quant rows fit), n_ff 320 (a multiple of 32, not of 256:
 * ffn_down falls back to F16 for Q4_K / Q6_K). */
static char *make_source(tf_dtype wtype, bool llama3) {
    tf_err err = {0};
    char *path = strdup(tu_tmp_path(".gguf"));
    tf_gen_params p = tf_gen_params_default();
    p.n_embd = 256;
    p.n_layer = 2;
    p.n_head = 4;
    p.n_head_kv = 2;
    p.n_ff = 320;
    p.n_vocab = 400;
    p.n_ctx_train = 512;
    p.tied_output = false;
    p.wtype = wtype;
    p.n_threads = 2;
    if (llama3) {
        p.rope_scaling = TF_ROPE_SCALING_LLAMA3;
        p.rope_factor = 8;
        p.rope_orig_ctx = 128;
    }
    OK(tf_gen_model(&p, path, &err));
    return path;
}

/* Largest allowed |dequant(quant(x)) - x| for one block of the type, given
 * the block's largest magnitude amax and element x. */
static double elem_bound(tf_dtype t, double x, double amax) {
    switch (t) {
    case TF_DTYPE_F32: return 0;
    case TF_DTYPE_F16: return fabs(x) * 0x1p-11 + 0x1p-24;
    case TF_DTYPE_BF16: return fabs(x) * 0x1p-8;
    case TF_DTYPE_Q8_0: return amax / 127.0 * 0.5 * 1.01 + amax * 0x1p-11; /* half a step + f16 scale rounding */
    /* Q4_0 maps the signed extreme to -8 with d = extreme / -8, so values on
     * the other side clip at +7: up to one full step there */
    case TF_DTYPE_Q4_0: return amax / 8.0 * 1.01 + amax * 0x1p-10;
    /* Q4_1 spans the block's range (at most 2 amax) in 15 steps: half a step,
     * plus the f16 rounding of d (times up to 15) and of m */
    case TF_DTYPE_Q4_1: return amax / 15.0 * 1.01 + amax * 0x1p-8;
    /* Q5_0 / Q5_1: as Q4_0 / Q4_1 with twice the levels */
    case TF_DTYPE_Q5_0: return amax / 16.0 * 1.01 + amax * 0x1p-9;
    case TF_DTYPE_Q5_1: return amax / 31.0 * 1.01 + amax * 0x1p-8;
    /* IQ4: half the widest gap of the table (24 steps of d, d about amax /
     * 127) or the clipping of an extreme value by the least-squares scale
     * (the quantizer minimizes the block's squared error, not its largest
     * one): up to 0.153 amax measured on these uniform weights */
    case TF_DTYPE_IQ4_NL: case TF_DTYPE_IQ4_XS: return amax * 0.2;
    default: return INFINITY; /* K-quants: checked by NMSE below */
    }
}

static double nmse_bound(tf_dtype t) {
    switch (t) {
    case TF_DTYPE_Q4_K: return 8e-3; /* measured ~3.7e-3 on uniform weights */
    case TF_DTYPE_Q6_K: return 5e-4; /* measured ~2.2e-4 */
    case TF_DTYPE_Q2_K: return 0.07; /* measured ~0.048 */
    case TF_DTYPE_Q3_K: return 0.03; /* measured ~0.018 */
    case TF_DTYPE_Q5_K: return 1.5e-3; /* measured ~7.8e-4 */
    case TF_DTYPE_IQ4_NL: case TF_DTYPE_IQ4_XS: return 6e-3; /* measured ~3.9e-3 / 4.0e-3 (q4_0 ~4.2e-3) */
    default: return INFINITY;
    }
}

static uint32_t block_of(uint32_t t) {
    uint32_t b = tf_dtype_block_size(t);
    return b > 1 ? b : 32;
}

static void compare_tensor(const tf_gguf_tensor *s, const tf_gguf_tensor *q) {
    int64_t ne0 = s->ne[0], rows = s->ne[1] * s->ne[2] * s->ne[3];
    float *a = malloc((size_t)ne0 * sizeof *a), *b = malloc((size_t)ne0 * sizeof *b);
    size_t srs = tf_dtype_row_size(s->type, ne0), qrs = tf_dtype_row_size(q->type, ne0);
    double num = 0, den = 0;
    for (int64_t r = 0; r < rows; r++) {
        tf_ref_dequantize_row((tf_dtype)s->type, s->data + (size_t)r * srs, a, ne0);
        tf_ref_dequantize_row((tf_dtype)q->type, q->data + (size_t)r * qrs, b, ne0);
        uint32_t blk = block_of(q->type);
        for (int64_t i0 = 0; i0 < ne0; i0 += blk) {
            double amax = 0;
            for (int64_t i = i0; i < i0 + blk && i < ne0; i++) amax = fmax(amax, fabs(a[i]));
            for (int64_t i = i0; i < i0 + blk && i < ne0; i++) {
                double e = fabs((double)a[i] - b[i]);
                double bound = elem_bound((tf_dtype)q->type, a[i], amax);
                if (e > bound)
                    fail_msg("%s (%s): row %lld elem %lld: %g vs %g (error %g > bound %g)", q->name,
                             tf_dtype_name(q->type), (long long)r, (long long)i, a[i], b[i], e, bound);
                num += e * e;
                den += (double)a[i] * a[i];
            }
        }
    }
    double nmse = num / den;
    if (nmse > nmse_bound((tf_dtype)q->type))
        fail_msg("%s (%s): nmse %g > %g", q->name, tf_dtype_name(q->type), nmse, nmse_bound((tf_dtype)q->type));
    free(a);
    free(b);
}

/* Check out against src for target type `type`. */
static void check_converted(const char *src_path, const char *out_path, tf_dtype type, const char *log_text) {
    tf_err err = {0};
    tf_gguf s, q;
    OK(tf_gguf_open(&s, src_path, &err));
    OK(tf_gguf_open(&q, out_path, &err));
    assert_int_equal(s.n_tensors, q.n_tensors);
    for (uint64_t i = 0; i < s.n_tensors; i++) {
        const tf_gguf_tensor *a = &s.tensors[i], *b = tf_gguf_find_tensor(&q, a->name);
        if (!b) fail_msg("%s missing", a->name);
        assert_int_equal(a->n_dims, b->n_dims);
        for (int d = 0; d < 4; d++) assert_int_equal(a->ne[d], b->ne[d]);
        uint32_t want;
        if (a->n_dims == 1) want = TF_DTYPE_F32;
        else if (a->ne[0] % tf_dtype_block_size(type) != 0) {
            want = TF_DTYPE_F16;
            if (!log_text || !strstr(log_text, a->name)) fail_msg("fallback of %s not logged", a->name);
        } else want = type;
        if (b->type != want)
            fail_msg("%s: type %s, expected %s", a->name, tf_dtype_name(b->type), tf_dtype_name(want));
        compare_tensor(a, b);
    }
    /* metadata: everything copied, file type updated */
    for (uint64_t i = 0; i < s.n_kv; i++) {
        const tf_gguf_kv *a = &s.kv[i];
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)a->key.len, a->key.data);
        const tf_gguf_kv *b = tf_gguf_find_kv(&q, key);
        if (!b) fail_msg("%s not copied", key);
        assert_int_equal(a->type, b->type);
        if (strcmp(key, "general.file_type") == 0 || strcmp(key, "general.quantization_version") == 0) continue;
        if (a->type == TF_GGUF_STRING) {
            assert_int_equal(a->val.s.len, b->val.s.len);
            assert_memory_equal(a->val.s.data, b->val.s.data, (size_t)a->val.s.len);
        } else if (a->type == TF_GGUF_ARRAY) {
            assert_int_equal(a->arr_n, b->arr_n);
        } else {
            assert_memory_equal(&a->val, &b->val, sizeof a->val);
        }
    }
    uint32_t ft, qv;
    OK(tf_gguf_get_u32(&q, "general.file_type", &ft, NULL, &err));
    assert_int_equal(ft, (uint32_t)tf_gguf_file_type(type));
    bool has_qv;
    OK(tf_gguf_get_u32(&q, "general.quantization_version", &qv, &has_qv, &err));
    assert_int_equal(has_qv, tf_dtype_block_size(type) > 1);
    tf_gguf_close(&s);
    tf_gguf_close(&q);
}

static void test_every_type(void **state) {
    (void)state;
    const tf_dtype types[] = {TF_DTYPE_F32,  TF_DTYPE_F16,  TF_DTYPE_BF16, TF_DTYPE_Q8_0, TF_DTYPE_Q4_0,
                              TF_DTYPE_Q4_1, TF_DTYPE_Q5_0, TF_DTYPE_Q5_1, TF_DTYPE_Q2_K, TF_DTYPE_Q3_K,
                              TF_DTYPE_Q4_K, TF_DTYPE_Q5_K, TF_DTYPE_Q6_K, TF_DTYPE_IQ4_NL, TF_DTYPE_IQ4_XS};
    char *src = make_source(TF_DTYPE_F32, true);
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        tf_err err = {0};
        log_capture lc = {{0}};
        tf_logger lg = {.fn = capture, .user_data = &lc, .min_level = TF_LOG_DEBUG};
        char *out = strdup(tu_tmp_path(".gguf"));
        OK(tf_quantize_file(src, out, types[k], &lg, NULL, NULL, &err));
        check_converted(src, out, types[k], lc.text);
        assert_non_null(strstr(lc.text, "quantize:"));
        unlink(out);
        free(out);
    }
    unlink(src);
    free(src);
}

static void test_f16_and_bf16_sources(void **state) {
    (void)state;
    const tf_dtype srcs[] = {TF_DTYPE_F16, TF_DTYPE_BF16};
    for (size_t k = 0; k < 2; k++) {
        tf_err err = {0};
        char *src = make_source(srcs[k], false);
        char *out = strdup(tu_tmp_path(".gguf"));
        log_capture lc = {{0}};
        tf_logger lg = {.fn = capture, .user_data = &lc, .min_level = TF_LOG_DEBUG};
        OK(tf_quantize_file_threads(src, out, TF_DTYPE_Q4_K, 3, &lg, NULL, NULL, &err));
        check_converted(src, out, TF_DTYPE_Q4_K, lc.text);
        OK(tf_quantize_file_threads(src, out, TF_DTYPE_Q8_0, 1, NULL, NULL, NULL, &err));
        check_converted(src, out, TF_DTYPE_Q8_0, NULL);
        unlink(out);
        unlink(src);
        free(out);
        free(src);
    }
}

static bool cancel_early(void *ud, uint64_t done, uint64_t total) {
    (void)ud;
    return done < total / 4;
}

static void test_errors(void **state) {
    (void)state;
    tf_err err = {0};
    char *src = make_source(TF_DTYPE_F32, false);
    char *q8 = strdup(tu_tmp_path(".gguf"));
    OK(tf_quantize_file(src, q8, TF_DTYPE_Q8_0, NULL, NULL, NULL, &err));

    /* already quantized input: names the file, a tensor and its type */
    char *out = strdup(tu_tmp_path(".gguf"));
    assert_int_equal(tf_quantize_file(q8, out, TF_DTYPE_Q4_0, NULL, NULL, NULL, &err), TF_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, q8));
    assert_non_null(strstr(err.msg, "has type q8_0"));
    assert_int_not_equal(access(out, F_OK), 0);
    tf_err_clear(&err);

    /* unsupported output type */
    assert_int_equal(tf_quantize_file(src, out, (tf_dtype)9, NULL, NULL, NULL, &err), TF_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "q8_1"));
    tf_err_clear(&err);

    /* missing input names it */
    assert_int_equal(tf_quantize_file("/nonexistent/in.gguf", out, TF_DTYPE_Q8_0, NULL, NULL, NULL, &err),
                     TF_ERR_IO);
    assert_non_null(strstr(err.msg, "/nonexistent/in.gguf"));
    tf_err_clear(&err);

    /* unwritable output names it */
    assert_int_equal(tf_quantize_file(src, "/nonexistent/out.gguf", TF_DTYPE_Q8_0, NULL, NULL, NULL, &err),
                     TF_ERR_IO);
    assert_non_null(strstr(err.msg, "/nonexistent/out.gguf"));
    tf_err_clear(&err);

    /* cancelled: nothing is left behind */
    assert_int_equal(tf_quantize_file(src, out, TF_DTYPE_Q8_0, NULL, cancel_early, NULL, &err), TF_ERR_CANCELLED);
    assert_int_not_equal(access(out, F_OK), 0);
    tf_err_clear(&err);

    /* in place: refused, naming the path, and the input is left as it was */
    char *copy = strdup(tu_tmp_path(".gguf"));
    OK(tf_quantize_file(src, copy, TF_DTYPE_F32, NULL, NULL, NULL, &err));
    assert_int_equal(tf_quantize_file(copy, copy, TF_DTYPE_Q8_0, NULL, NULL, NULL, &err), TF_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "is the input file"));
    char partial[1024];
    snprintf(partial, sizeof partial, "%s.partial", copy);
    assert_int_not_equal(access(partial, F_OK), 0);
    tf_err_clear(&err);
    check_converted(src, copy, TF_DTYPE_F32, NULL); /* still the f32 copy, tensor for tensor */

    unlink(copy);
    unlink(q8);
    unlink(src);
    free(copy);
    free(out);
    free(q8);
    free(src);
}

/* tests/data/quant_vectors.gguf (written by tests/data/gen_quant_vectors.py
 * with llama.cpp's `gguf` Python package): for Q5_0, Q5_1, Q2_K, Q3_K, Q5_K,
 * IQ4_NL, IQ4_XS and Q4_1, blocks of random bytes with random finite f16 scales
 * ("<t>.rand") and, for the three types the package can quantize (Q5_0, Q5_1,
 * Q4_1), its quantization of
 * Gaussian values ("<t>.quant"), each next to the f32 values the package
 * dequantizes them to ("<name>.f32"). The reference dequantization must give
 * those values bit for bit; every kernel table within one rounding of a
 * fused multiply-add (relative 2^-22 of the row's largest value). */
static void test_gguf_package_vectors(void **state) {
    (void)state;
    const char *path = "tests/data/quant_vectors.gguf";
    static const char *const names[] = {"q5_0.rand",   "q5_0.quant",  "q5_1.rand", "q5_1.quant", "q2_k.rand",
                                        "q3_k.rand",   "q5_k.rand",   "iq4_nl.rand", "iq4_xs.rand", "q4_1.rand",
                                        "q4_1.quant"};
    static const tf_dtype types[] = {TF_DTYPE_Q5_0,   TF_DTYPE_Q5_0,   TF_DTYPE_Q5_1, TF_DTYPE_Q5_1,
                                     TF_DTYPE_Q2_K,   TF_DTYPE_Q3_K,   TF_DTYPE_Q5_K, TF_DTYPE_IQ4_NL,
                                     TF_DTYPE_IQ4_XS, TF_DTYPE_Q4_1,   TF_DTYPE_Q4_1};
    _Static_assert(sizeof names / sizeof names[0] == sizeof types / sizeof types[0], "one type per tensor");
    tf_err err = {0};
    tf_gguf g;
    OK(tf_gguf_open(&g, path, &err));
    const tf_cpu_kernels *tables[8];
    int n_tables = tf_cpu_kernels_all(tables, 8);
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        char fname[64];
        snprintf(fname, sizeof fname, "%s.f32", names[k]);
        const tf_gguf_tensor *q = tf_gguf_find_tensor(&g, names[k]), *f = tf_gguf_find_tensor(&g, fname);
        if (!q || !f) fail_msg("%s: tensor %s or %s missing", path, names[k], fname);
        assert_int_equal(q->type, types[k]);
        assert_int_equal(f->type, TF_DTYPE_F32);
        assert_int_equal(q->ne[0], f->ne[0]);
        assert_int_equal(q->ne[1], f->ne[1]);
        int64_t ne0 = q->ne[0], rows = q->ne[1];
        assert_true(ne0 % TF_QK_K == 0 && rows >= 1);
        size_t qrs = tf_dtype_row_size(q->type, ne0);
        assert_int_equal(q->nbytes, qrs * (size_t)rows);
        float *y = malloc(sizeof(float) * (size_t)ne0), *want = malloc(sizeof(float) * (size_t)ne0);
        for (int64_t r = 0; r < rows; r++) {
            const void *src = q->data + (size_t)r * qrs;
            memcpy(want, f->data + (size_t)r * ne0 * sizeof(float), sizeof(float) * (size_t)ne0);
            assert_false(tu_has_nonfinite(want, (size_t)ne0));
            tf_ref_dequantize_row(types[k], src, y, ne0);
            for (int64_t i = 0; i < ne0; i++)
                if (memcmp(&y[i], &want[i], sizeof(float)) != 0)
                    fail_msg("%s row %lld element %lld: reference %.9g, gguf package %.9g", names[k], (long long)r,
                             (long long)i, y[i], want[i]);
            double amax = 0;
            for (int64_t i = 0; i < ne0; i++) amax = fmax(amax, fabs(want[i]));
            for (int t = 0; t < n_tables; t++) {
                tables[t]->dequantize[types[k]](src, y, ne0);
                for (int64_t i = 0; i < ne0; i++)
                    if (!(fabs((double)y[i] - want[i]) <= amax * 0x1p-22))
                        fail_msg("%s %s row %lld element %lld: %.9g, gguf package %.9g", tables[t]->isa, names[k],
                                 (long long)r, (long long)i, y[i], want[i]);
            }
        }
        free(y);
        free(want);
    }
    tf_gguf_close(&g);
}

static void test_stories260k_q8_0(void **state) {
    (void)state;
    TU_REQUIRE_SHARED(path, "models/stories260K/stories260K.gguf");
    char src[1024];
    snprintf(src, sizeof src, "%s", path);
    tf_err err = {0};
    char *out = strdup(tu_tmp_path(".gguf"));
    log_capture lc = {{0}};
    tf_logger lg = {.fn = capture, .user_data = &lc, .min_level = TF_LOG_DEBUG};
    OK(tf_quantize_file(src, out, TF_DTYPE_Q8_0, &lg, NULL, NULL, &err));
    check_converted(src, out, TF_DTYPE_Q8_0, lc.text);
    tf_gguf g;
    OK(tf_gguf_open(&g, out, &err));
    const tf_gguf_tensor *t = tf_gguf_find_tensor(&g, "blk.0.attn_k.weight");
    assert_int_equal(t->type, TF_DTYPE_Q8_0);
    assert_int_equal(t->nbytes, 32 * 2 * 34);
    tf_gguf_close(&g);
    unlink(out);
    free(out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_type),
        cmocka_unit_test(test_f16_and_bf16_sources),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_gguf_package_vectors),
        cmocka_unit_test(test_stories260k_q8_0),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
