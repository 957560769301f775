/* test_gguf_write.c — GGUF writer: round trips through the reader for every
 * value type, tensor type, shape rank and alignment; streaming fill
 * callbacks; errors (duplicates, bad shapes, bad alignment, I/O, cancel). */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/dtype.h"
#include "format/gguf.h"
#include "format/gguf_write.h"

#define OK(expr) assert_int_equal((expr), TF_OK)

/* ---- every metadata value type ---- */

static void add_all_values(tf_gguf_writer *w) {
    tf_err err = {0};
    OK(tf_gguf_writer_set_u8(w, "t.u8", 200, &err));
    OK(tf_gguf_writer_set_i8(w, "t.i8", -100, &err));
    OK(tf_gguf_writer_set_u16(w, "t.u16", 60000, &err));
    OK(tf_gguf_writer_set_i16(w, "t.i16", -30000, &err));
    OK(tf_gguf_writer_set_u32(w, "t.u32", 4000000000u, &err));
    OK(tf_gguf_writer_set_i32(w, "t.i32", -2000000000, &err));
    OK(tf_gguf_writer_set_u64(w, "t.u64", 0xfedcba9876543210ull, &err));
    OK(tf_gguf_writer_set_i64(w, "t.i64", INT64_MIN + 5, &err));
    OK(tf_gguf_writer_set_f32(w, "t.f32", -1.5e-3f, &err));
    OK(tf_gguf_writer_set_f64(w, "t.f64", 3.141592653589793, &err));
    OK(tf_gguf_writer_set_bool(w, "t.true", true, &err));
    OK(tf_gguf_writer_set_bool(w, "t.false", false, &err));
    OK(tf_gguf_writer_set_str(w, "t.str", "h\xc3\xa9llo", &err));
    OK(tf_gguf_writer_set_str(w, "t.empty", "", &err));
    OK(tf_gguf_writer_set_strn(w, "t.nul", "a\0b", 3, &err));
    uint8_t au8[] = {0, 1, 255};
    int8_t ai8[] = {-128, 0, 127};
    uint16_t au16[] = {0, 65535};
    int16_t ai16[] = {-32768, 32767};
    uint32_t au32[] = {1, 2, 4294967295u};
    int32_t ai32[] = {-5, 7, INT32_MIN};
    uint64_t au64[] = {UINT64_MAX, 0};
    int64_t ai64[] = {INT64_MIN, INT64_MAX, -1};
    float af32[] = {0.5f, -2.0f, INFINITY};
    double af64[] = {1e300, -1e-300};
    bool abool[] = {true, false, true};
    OK(tf_gguf_writer_set_arr(w, "a.u8", TF_GGUF_UINT8, au8, 3, &err));
    OK(tf_gguf_writer_set_arr(w, "a.i8", TF_GGUF_INT8, ai8, 3, &err));
    OK(tf_gguf_writer_set_arr(w, "a.u16", TF_GGUF_UINT16, au16, 2, &err));
    OK(tf_gguf_writer_set_arr(w, "a.i16", TF_GGUF_INT16, ai16, 2, &err));
    OK(tf_gguf_writer_set_arr(w, "a.u32", TF_GGUF_UINT32, au32, 3, &err));
    OK(tf_gguf_writer_set_arr(w, "a.i32", TF_GGUF_INT32, ai32, 3, &err));
    OK(tf_gguf_writer_set_arr(w, "a.u64", TF_GGUF_UINT64, au64, 2, &err));
    OK(tf_gguf_writer_set_arr(w, "a.i64", TF_GGUF_INT64, ai64, 3, &err));
    OK(tf_gguf_writer_set_arr(w, "a.f32", TF_GGUF_FLOAT32, af32, 3, &err));
    OK(tf_gguf_writer_set_arr(w, "a.f64", TF_GGUF_FLOAT64, af64, 2, &err));
    OK(tf_gguf_writer_set_arr(w, "a.bool", TF_GGUF_BOOL, abool, 3, &err));
    OK(tf_gguf_writer_set_arr(w, "a.empty", TF_GGUF_UINT32, NULL, 0, &err));
    const char *strs[] = {"<unk>", "", "\xe2\x96\x81the"};
    OK(tf_gguf_writer_set_arr_str(w, "a.str", strs, 3, &err));
    tf_gguf_str sn[] = {{"x\0y", 3}, {"z", 1}};
    OK(tf_gguf_writer_set_arr_strn(w, "a.strn", sn, 2, &err));
    OK(tf_gguf_writer_set_arr_str(w, "a.str_empty", NULL, 0, &err));
}

static void check_all_values(const tf_gguf *g) {
    const tf_gguf_kv *kv;
#define SCALAR(key, T, field, expect)                                                                            \
    kv = tf_gguf_find_kv(g, key);                                                                                \
    assert_non_null(kv);                                                                                         \
    assert_int_equal(kv->type, T);                                                                               \
    assert_true(kv->val.field == (expect));
    SCALAR("t.u8", TF_GGUF_UINT8, u, 200);
    SCALAR("t.i8", TF_GGUF_INT8, i, -100);
    SCALAR("t.u16", TF_GGUF_UINT16, u, 60000);
    SCALAR("t.i16", TF_GGUF_INT16, i, -30000);
    SCALAR("t.u32", TF_GGUF_UINT32, u, 4000000000u);
    SCALAR("t.i32", TF_GGUF_INT32, i, -2000000000);
    SCALAR("t.u64", TF_GGUF_UINT64, u, 0xfedcba9876543210ull);
    SCALAR("t.i64", TF_GGUF_INT64, i, INT64_MIN + 5);
    SCALAR("t.f32", TF_GGUF_FLOAT32, f, (double)-1.5e-3f);
    SCALAR("t.f64", TF_GGUF_FLOAT64, f, 3.141592653589793);
    SCALAR("t.true", TF_GGUF_BOOL, u, 1);
    SCALAR("t.false", TF_GGUF_BOOL, u, 0);
#undef SCALAR
    kv = tf_gguf_find_kv(g, "t.str");
    assert_int_equal(kv->type, TF_GGUF_STRING);
    assert_true(tf_gguf_str_eq(kv->val.s, "h\xc3\xa9llo"));
    kv = tf_gguf_find_kv(g, "t.empty");
    assert_int_equal(kv->val.s.len, 0);
    kv = tf_gguf_find_kv(g, "t.nul");
    assert_int_equal(kv->val.s.len, 3);
    assert_memory_equal(kv->val.s.data, "a\0b", 3);

    struct { const char *key; uint32_t type; uint64_t n; int64_t i[3]; } ints[] = {
        {"a.u8", TF_GGUF_UINT8, 3, {0, 1, 255}},
        {"a.i8", TF_GGUF_INT8, 3, {-128, 0, 127}},
        {"a.u16", TF_GGUF_UINT16, 2, {0, 65535}},
        {"a.i16", TF_GGUF_INT16, 2, {-32768, 32767}},
        {"a.u32", TF_GGUF_UINT32, 3, {1, 2, 4294967295ll}},
        {"a.i32", TF_GGUF_INT32, 3, {-5, 7, INT32_MIN}},
        {"a.u64", TF_GGUF_UINT64, 2, {-1 /* UINT64_MAX as raw */, 0}},
        {"a.i64", TF_GGUF_INT64, 3, {INT64_MIN, INT64_MAX, -1}},
        {"a.bool", TF_GGUF_BOOL, 3, {1, 0, 1}},
        {"a.empty", TF_GGUF_UINT32, 0, {0}},
    };
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++) {
        kv = tf_gguf_find_kv(g, ints[k].key);
        assert_non_null(kv);
        assert_int_equal(kv->type, TF_GGUF_ARRAY);
        assert_int_equal(kv->arr_type, ints[k].type);
        assert_int_equal(kv->arr_n, ints[k].n);
        for (uint64_t i = 0; i < ints[k].n; i++) assert_true(tf_gguf_arr_int(kv, i) == ints[k].i[i]);
    }
    kv = tf_gguf_find_kv(g, "a.f32");
    assert_int_equal(kv->arr_type, TF_GGUF_FLOAT32);
    assert_true(tf_gguf_arr_float(kv, 0) == 0.5 && tf_gguf_arr_float(kv, 1) == -2.0 &&
                isinf(tf_gguf_arr_float(kv, 2)));
    kv = tf_gguf_find_kv(g, "a.f64");
    assert_true(tf_gguf_arr_float(kv, 0) == 1e300 && tf_gguf_arr_float(kv, 1) == -1e-300);
    const tf_gguf_kv *a;
    tf_err err = {0};
    OK(tf_gguf_get_arr(g, "a.str", TF_GGUF_STRING, &a, NULL, &err));
    assert_int_equal(a->arr_n, 3);
    assert_true(tf_gguf_str_eq(a->arr_str[0], "<unk>"));
    assert_int_equal(a->arr_str[1].len, 0);
    assert_true(tf_gguf_str_eq(a->arr_str[2], "\xe2\x96\x81the"));
    OK(tf_gguf_get_arr(g, "a.strn", TF_GGUF_STRING, &a, NULL, &err));
    assert_int_equal(a->arr_str[0].len, 3);
    assert_memory_equal(a->arr_str[0].data, "x\0y", 3);
    OK(tf_gguf_get_arr(g, "a.str_empty", TF_GGUF_STRING, &a, NULL, &err));
    assert_int_equal(a->arr_n, 0);
}

static void test_values_roundtrip(void **state) {
    (void)state;
    tf_gguf_writer *w = tf_gguf_writer_new();
    add_all_values(w);
    uint8_t *buf;
    size_t size;
    tf_err err = {0};
    OK(tf_gguf_writer_write_mem(w, &buf, &size, &err));
    assert_int_equal(size, tf_gguf_writer_file_size(w));
    tf_gguf g;
    OK(tf_gguf_parse(&g, "mem", buf, size, &err));
    assert_int_equal(g.version, 3);
    assert_int_equal(g.n_tensors, 0);
    assert_int_equal(g.n_kv, tf_gguf_writer_n_kv(w));
    check_all_values(&g);

    /* copying every pair into a second writer reproduces the file byte for byte */
    tf_gguf_writer *w2 = tf_gguf_writer_new();
    for (uint64_t i = 0; i < g.n_kv; i++) OK(tf_gguf_writer_copy_kv(w2, &g.kv[i], &err));
    uint8_t *buf2;
    size_t size2;
    OK(tf_gguf_writer_write_mem(w2, &buf2, &size2, &err));
    assert_int_equal(size2, size);
    assert_memory_equal(buf2, buf, size);
    free(buf2);
    tf_gguf_writer_free(w2);
    tf_gguf_close(&g);
    free(buf);
    tf_gguf_writer_free(w);
}

/* ---- tensors ---- */

typedef struct fill_ctx {
    const uint8_t *src; /* expected bytes of the tensor */
    int64_t next_row;   /* rows must come in order, each once */
    int calls;
    int fail_at_call;   /* > 0: return an error at this call */
} fill_ctx;

static tf_status fill_copy(void *ud, const tf_gguf_tensor_desc *t, int64_t row0, int64_t n_rows, void *dst,
                           tf_err *err) {
    fill_ctx *c = ud;
    assert_int_equal(row0, c->next_row);
    assert_true(n_rows >= 1 && row0 + n_rows <= t->n_rows);
    c->next_row += n_rows;
    c->calls++;
    if (c->fail_at_call && c->calls == c->fail_at_call)
        return tf_errf(err, TF_ERR_INVALID_ARG, "synthetic failure in row %lld", (long long)row0);
    memcpy(dst, c->src + (uint64_t)row0 * t->row_size, (size_t)((uint64_t)n_rows * t->row_size));
    return TF_OK;
}

typedef struct spec {
    const char *name;
    tf_dtype type;
    uint32_t n_dims;
    int64_t ne[4];
} spec;

static const spec k_specs[] = {
    {"f32.1d", TF_DTYPE_F32, 1, {7}},
    {"f16.2d", TF_DTYPE_F16, 2, {5, 3}},
    {"bf16.3d", TF_DTYPE_BF16, 3, {3, 2, 2}},
    {"q8_0.4d", TF_DTYPE_Q8_0, 4, {64, 2, 1, 3}},
    {"q4_0.2d", TF_DTYPE_Q4_0, 2, {32, 5}},
    {"q4_k.2d", TF_DTYPE_Q4_K, 2, {512, 3}},
    {"q6_k.2d", TF_DTYPE_Q6_K, 2, {256, 2}},
    {"q4_1.2d", TF_DTYPE_Q4_1, 2, {64, 3}},
    {"blk.0.a_name_that_is_exactly_sixty_four_bytes_long_xxxxxxxxxxxxx", TF_DTYPE_F32, 1, {1}},
};
#define N_SPECS (sizeof k_specs / sizeof k_specs[0])

static uint64_t spec_bytes(const spec *s) {
    uint64_t rows = 1;
    for (uint32_t d = 1; d < s->n_dims; d++) rows *= (uint64_t)s->ne[d];
    return tf_dtype_row_size(s->type, s->ne[0]) * rows;
}

/* Build a writer with every spec'd tensor (even ones borrowed, odd ones
 * filled in chunks of `chunk` bytes); data[i] receives random bytes. */
static tf_gguf_writer *build_tensors(uint32_t alignment, size_t chunk, uint8_t **data, fill_ctx *ctx) {
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed());
    tf_gguf_writer *w = tf_gguf_writer_new();
    tf_err err = {0};
    OK(tf_gguf_writer_set_str(w, "general.architecture", "test", &err));
    if (alignment) OK(tf_gguf_writer_set_u32(w, "general.alignment", alignment, &err));
    tf_gguf_writer_set_chunk_bytes(w, chunk);
    assert_int_equal(strlen(k_specs[N_SPECS - 1].name), TF_GGUF_NAME_MAX);
    for (size_t i = 0; i < N_SPECS; i++) {
        const spec *s = &k_specs[i];
        uint64_t nb = spec_bytes(s);
        data[i] = malloc((size_t)nb);
        for (uint64_t b = 0; b < nb; b++) data[i][b] = (uint8_t)tf_rng_next(&rng);
        if (i % 2 == 0) {
            OK(tf_gguf_writer_add_tensor(w, s->name, s->type, s->n_dims, s->ne, data[i], &err));
        } else {
            ctx[i] = (fill_ctx){.src = data[i]};
            OK(tf_gguf_writer_add_tensor_fill(w, s->name, s->type, s->n_dims, s->ne, fill_copy, &ctx[i], &err));
        }
    }
    assert_int_equal(tf_gguf_writer_n_tensors(w), N_SPECS);
    return w;
}

static void check_tensors(const tf_gguf *g, uint32_t alignment, uint8_t **data) {
    assert_int_equal(g->alignment, alignment ? alignment : TF_GGUF_DEFAULT_ALIGNMENT);
    assert_int_equal(g->data_offset % g->alignment, 0);
    assert_int_equal(g->n_tensors, N_SPECS);
    for (size_t i = 0; i < N_SPECS; i++) {
        const spec *s = &k_specs[i];
        const tf_gguf_tensor *t = &g->tensors[i]; /* insertion order is kept */
        assert_string_equal(t->name, s->name);
        assert_int_equal(t->type, s->type);
        assert_int_equal(t->n_dims, s->n_dims);
        for (uint32_t d = 0; d < 4; d++) assert_int_equal(t->ne[d], d < s->n_dims ? s->ne[d] : 1);
        assert_int_equal(t->offset % g->alignment, 0);
        assert_int_equal(t->nbytes, spec_bytes(s));
        assert_memory_equal(t->data, data[i], (size_t)t->nbytes);
    }
}

static void roundtrip_tensors(uint32_t alignment, size_t chunk) {
    uint8_t *data[N_SPECS];
    fill_ctx ctx[N_SPECS];
    memset(ctx, 0, sizeof ctx);
    tf_gguf_writer *w = build_tensors(alignment, chunk, data, ctx);
    tf_err err = {0};
    uint8_t *buf;
    size_t size;
    OK(tf_gguf_writer_write_mem(w, &buf, &size, &err));
    uint32_t a = alignment ? alignment : TF_GGUF_DEFAULT_ALIGNMENT;
    assert_int_equal(size % a, 0); /* the last tensor is padded too */
    tf_gguf g;
    OK(tf_gguf_parse(&g, "mem", buf, size, &err));
    check_tensors(&g, alignment, data);
    tf_gguf_close(&g);

    /* the same builder written to a file gives the same bytes */
    for (size_t i = 0; i < N_SPECS; i++) ctx[i].next_row = 0;
    const char *path = tu_tmp_path(".gguf");
    char p[512];
    snprintf(p, sizeof p, "%s", path);
    OK(tf_gguf_writer_write_file(w, p, NULL, NULL, &err));
    OK(tf_gguf_open(&g, p, &err));
    assert_int_equal(g.size, size);
    assert_memory_equal(g.base, buf, size);
    check_tensors(&g, alignment, data);
    tf_gguf_close(&g);
    unlink(p);

    free(buf);
    for (size_t i = 0; i < N_SPECS; i++) free(data[i]);
    tf_gguf_writer_free(w);
}

static void test_tensors_alignments(void **state) {
    (void)state;
    const uint32_t aligns[] = {0, 1, 2, 8, 32, 64, 256, 4096, 65536};
    for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; i++) roundtrip_tensors(aligns[i], 1 << 20);
}

static void test_tensors_small_chunks(void **state) {
    (void)state;
    /* chunk smaller than a row (one row per call) and a few rows per call */
    roundtrip_tensors(32, 1);
    roundtrip_tensors(0, 300);
}

static void test_mixed_with_values(void **state) {
    (void)state;
    tf_gguf_writer *w = tf_gguf_writer_new();
    add_all_values(w);
    tf_err err = {0};
    float x[6] = {1, 2, 3, 4, 5, 6};
    OK(tf_gguf_writer_add_tensor(w, "x", TF_DTYPE_F32, 2, (int64_t[]){3, 2}, x, &err));
    uint8_t *buf;
    size_t size;
    OK(tf_gguf_writer_write_mem(w, &buf, &size, &err));
    tf_gguf g;
    OK(tf_gguf_parse(&g, "mem", buf, size, &err));
    check_all_values(&g);
    const tf_gguf_tensor *t = tf_gguf_find_tensor(&g, "x");
    assert_non_null(t);
    assert_memory_equal(t->data, x, sizeof x);
    tf_gguf_close(&g);
    free(buf);
    tf_gguf_writer_free(w);
}

/* ---- errors ---- */

static void expect_err(tf_status st, tf_err *err, tf_status want, const char *substr) {
    assert_int_equal(st, want);
    if (!strstr(err->msg, substr)) fail_msg("message '%s' lacks '%s'", err->msg, substr);
    tf_err_clear(err);
}

static void test_errors(void **state) {
    (void)state;
    tf_gguf_writer *w = tf_gguf_writer_new();
    tf_err err = {0};
    OK(tf_gguf_writer_set_u32(w, "k", 1, &err));
    expect_err(tf_gguf_writer_set_str(w, "k", "x", &err), &err, TF_ERR_INVALID_ARG, "'k'");
    expect_err(tf_gguf_writer_set_u32(w, "", 1, &err), &err, TF_ERR_INVALID_ARG, "empty");
    char *longkey = malloc(TF_GGUF_KEY_MAX + 2);
    memset(longkey, 'k', TF_GGUF_KEY_MAX + 1);
    longkey[TF_GGUF_KEY_MAX + 1] = '\0';
    expect_err(tf_gguf_writer_set_u8(w, longkey, 1, &err), &err, TF_ERR_INVALID_ARG, "65536 bytes");
    longkey[TF_GGUF_KEY_MAX] = '\0';
    OK(tf_gguf_writer_set_u8(w, longkey, 1, &err)); /* exactly the limit is fine */
    free(longkey);
    expect_err(tf_gguf_writer_set_arr(w, "nested", TF_GGUF_ARRAY, NULL, 0, &err), &err, TF_ERR_INVALID_ARG,
               "'nested'");
    expect_err(tf_gguf_writer_set_arr(w, "strs", TF_GGUF_STRING, NULL, 0, &err), &err, TF_ERR_INVALID_ARG, "'strs'");
    uint8_t two[] = {1, 2};
    expect_err(tf_gguf_writer_set_arr(w, "b", TF_GGUF_BOOL, two, 2, &err), &err, TF_ERR_INVALID_ARG, "element 1");
    /* general.alignment: wrong type, zero, not a power of two, too big */
    expect_err(tf_gguf_writer_set_u64(w, "general.alignment", 32, &err), &err, TF_ERR_INVALID_ARG,
               "general.alignment");
    expect_err(tf_gguf_writer_set_u32(w, "general.alignment", 0, &err), &err, TF_ERR_INVALID_ARG,
               "general.alignment");
    expect_err(tf_gguf_writer_set_u32(w, "general.alignment", 48, &err), &err, TF_ERR_INVALID_ARG, "48");
    expect_err(tf_gguf_writer_set_u32(w, "general.alignment", 1u << 17, &err), &err, TF_ERR_INVALID_ARG,
               "general.alignment");
    assert_false(tf_gguf_writer_has_kv(w, "general.alignment"));
    OK(tf_gguf_writer_set_u32(w, "general.alignment", 16, &err));
    assert_true(tf_gguf_writer_remove_kv(w, "general.alignment"));
    assert_false(tf_gguf_writer_remove_kv(w, "general.alignment"));
    assert_true(tf_gguf_writer_remove_kv(w, "k"));
    OK(tf_gguf_writer_set_str(w, "k", "now a string", &err));

    float x[64] = {0};
    int64_t ne2[] = {4, 2};
    OK(tf_gguf_writer_add_tensor(w, "t", TF_DTYPE_F32, 2, ne2, x, &err));
    expect_err(tf_gguf_writer_add_tensor(w, "t", TF_DTYPE_F32, 2, ne2, x, &err), &err, TF_ERR_INVALID_ARG, "'t'");
    expect_err(tf_gguf_writer_add_tensor(w, "", TF_DTYPE_F32, 2, ne2, x, &err), &err, TF_ERR_INVALID_ARG, "empty");
    expect_err(tf_gguf_writer_add_tensor(w, "blk.0.a_name_that_is_sixty_five_bytes_long_xxxxxxxxxxxxxxxxxxxxxx",
                                         TF_DTYPE_F32, 2, ne2, x, &err),
               &err, TF_ERR_INVALID_ARG, "65 bytes");
    expect_err(tf_gguf_writer_add_tensor(w, "d0", TF_DTYPE_F32, 0, ne2, x, &err), &err, TF_ERR_INVALID_ARG, "'d0'");
    expect_err(tf_gguf_writer_add_tensor(w, "d5", TF_DTYPE_F32, 5, (int64_t[]){1, 1, 1, 1, 1}, x, &err), &err,
               TF_ERR_INVALID_ARG, "n_dims = 5");
    expect_err(tf_gguf_writer_add_tensor(w, "z", TF_DTYPE_F32, 2, (int64_t[]){4, 0}, x, &err), &err,
               TF_ERR_INVALID_ARG, "ne[1] = 0");
    expect_err(tf_gguf_writer_add_tensor(w, "neg", TF_DTYPE_F32, 1, (int64_t[]){-4}, x, &err), &err,
               TF_ERR_INVALID_ARG, "'neg'");
    expect_err(tf_gguf_writer_add_tensor(w, "ovf", TF_DTYPE_F32, 3, (int64_t[]){4, INT64_MAX, 4}, x, &err), &err,
               TF_ERR_INVALID_ARG, "'ovf'");
    expect_err(tf_gguf_writer_add_tensor(w, "big", TF_DTYPE_F32, 1, (int64_t[]){INT64_MAX}, x, &err), &err,
               TF_ERR_INVALID_ARG, "'big'");
    expect_err(tf_gguf_writer_add_tensor(w, "q", TF_DTYPE_Q8_0, 2, (int64_t[]){33, 2}, x, &err), &err,
               TF_ERR_INVALID_ARG, "block size 32");
    expect_err(tf_gguf_writer_add_tensor(w, "q1", (tf_dtype)9 /* q8_1 */, 1, (int64_t[]){32}, x, &err), &err,
               TF_ERR_UNSUPPORTED, "'q1'");
    expect_err(tf_gguf_writer_add_tensor_fill(w, "nofill", TF_DTYPE_F32, 1, (int64_t[]){4}, NULL, NULL, &err), &err,
               TF_ERR_INVALID_ARG, "'nofill'");
    assert_int_equal(tf_gguf_writer_n_tensors(w), 1);

    /* I/O failure names the path and leaves nothing behind */
    expect_err(tf_gguf_writer_write_file(w, "/nonexistent-dir/out.gguf", NULL, NULL, &err), &err, TF_ERR_IO,
               "/nonexistent-dir/out.gguf");
    tf_gguf_writer_free(w);
}

static bool cancel_after_first(void *ud, uint64_t done, uint64_t total) {
    int *calls = ud;
    assert_true(done <= total);
    return ++*calls < 2;
}

static void test_fill_failure_and_cancel(void **state) {
    (void)state;
    uint8_t *data[N_SPECS];
    fill_ctx ctx[N_SPECS];
    memset(ctx, 0, sizeof ctx);
    tf_gguf_writer *w = build_tensors(0, 64, data, ctx);
    ctx[5].fail_at_call = 2; /* q4_k.2d: 3 rows of 288 bytes, one row per call */
    tf_err err = {0};
    char p[512];
    snprintf(p, sizeof p, "%s", tu_tmp_path(".gguf"));
    char partial[600];
    snprintf(partial, sizeof partial, "%s.partial", p);
    tf_status st = tf_gguf_writer_write_file(w, p, NULL, NULL, &err);
    assert_int_equal(st, TF_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "q4_k.2d"));
    assert_non_null(strstr(err.msg, "synthetic failure in row 1"));
    assert_non_null(strstr(err.msg, p));
    assert_int_not_equal(access(p, F_OK), 0);
    assert_int_not_equal(access(partial, F_OK), 0);
    tf_err_clear(&err);

    for (size_t i = 0; i < N_SPECS; i++) ctx[i] = (fill_ctx){.src = data[i]};
    int calls = 0;
    st = tf_gguf_writer_write_file(w, p, cancel_after_first, &calls, &err);
    assert_int_equal(st, TF_ERR_CANCELLED);
    assert_non_null(strstr(err.msg, p));
    assert_int_not_equal(access(p, F_OK), 0);
    assert_int_not_equal(access(partial, F_OK), 0);

    for (size_t i = 0; i < N_SPECS; i++) free(data[i]);
    tf_gguf_writer_free(w);
}

static bool count_progress(void *ud, uint64_t done, uint64_t total) {
    uint64_t *last = ud;
    assert_true(done >= *last && done <= total);
    *last = done;
    return true;
}

static void test_progress_reaches_total(void **state) {
    (void)state;
    uint8_t *data[N_SPECS];
    fill_ctx ctx[N_SPECS];
    memset(ctx, 0, sizeof ctx);
    tf_gguf_writer *w = build_tensors(64, 100, data, ctx);
    tf_err err = {0};
    char p[512];
    snprintf(p, sizeof p, "%s", tu_tmp_path(".gguf"));
    uint64_t last = 0;
    OK(tf_gguf_writer_write_file(w, p, count_progress, &last, &err));
    /* the final padding is written after the last progress call */
    assert_true(last + 64 > tf_gguf_writer_file_size(w));
    unlink(p);
    for (size_t i = 0; i < N_SPECS; i++) free(data[i]);
    tf_gguf_writer_free(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values_roundtrip),
        cmocka_unit_test(test_tensors_alignments),
        cmocka_unit_test(test_tensors_small_chunks),
        cmocka_unit_test(test_mixed_with_values),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_fill_failure_and_cancel),
        cmocka_unit_test(test_progress_reaches_total),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
