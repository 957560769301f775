/* test_safetensors.c — the safetensors reader and sharded checkpoint sets.
 *
 * Every file is generated here (tests/common/st_write) into a mkdtemp
 * directory under /tmp that the group teardown removes. In-memory parses run
 * on a malloc'd copy of exactly the file's size, and successful parses touch
 * every tensor byte, so AddressSanitizer sees any read past the end. Each
 * malformed case asserts the status and that the message names the file and
 * the tensor, key or value involved. */
#include "testutil.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/dtype.h"
#include "format/safetensors.h"
#include "st_write.h"

#define OK(expr) assert_int_equal((expr), TF_OK)
#define HOSTILE "hostile.safetensors"

static char g_root[64]; /* the test's temp directory */

/* ---- helpers ---- */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static int group_setup(void **state) {
    (void)state;
    snprintf(g_root, sizeof g_root, "/tmp/tf_st_XXXXXX");
    return mkdtemp(g_root) ? 0 : -1;
}

static int group_teardown(void **state) {
    (void)state;
    return nftw(g_root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* A fresh subdirectory of the temp dir; returns a static path. */
static const char *new_dir(const char *name) {
    static char buf[256];
    snprintf(buf, sizeof buf, "%s/%s", g_root, name);
    assert_int_equal(mkdir(buf, 0700), 0);
    return buf;
}

static const char *path_in(const char *dir, const char *name) {
    static char buf[512];
    snprintf(buf, sizeof buf, "%s/%s", dir, name);
    return buf;
}

/* Parse bytes from an exact-size copy; on success touch every tensor byte. */
static tf_status parse_exact(const uint8_t *p, size_t n, tf_err *err) {
    uint8_t *copy = malloc(n ? n : 1);
    assert_non_null(copy);
    if (n) memcpy(copy, p, n);
    tf_st_file f;
    tf_err_clear(err);
    tf_status st = tf_st_parse(&f, HOSTILE, n ? copy : NULL, n, err);
    if (st == TF_OK) {
        unsigned sum = 0;
        for (uint64_t i = 0; i < f.n_tensors; i++)
            for (uint64_t k = 0; k < f.tensors[i].nbytes; k++) sum += f.tensors[i].data[k];
        (void)sum;
        for (uint64_t i = 0; i < f.n_meta; i++) assert_non_null(tf_st_meta_get(&f, f.meta[i].key));
    } else {
        assert_int_equal(f.n_tensors, 0);
        assert_null(f.tensors);
    }
    tf_st_close(&f);
    free(copy);
    return st;
}

/* Assert the status and (on failure) that the message names the file and
 * contains sub1 and sub2 (either may be NULL). */
static void expect_bytes(const char *what, const uint8_t *p, size_t n, tf_status want, const char *sub1,
                         const char *sub2) {
    tf_err err = {0};
    tf_status st = parse_exact(p, n, &err);
    if (st != want) fail_msg("%s: status %d (%s), expected %d: %s", what, st, tf_status_str(st), want, err.msg);
    if (st == TF_OK) return;
    if (strncmp(err.msg, HOSTILE ": ", strlen(HOSTILE) + 2) != 0)
        fail_msg("%s: message lacks the file: %s", what, err.msg);
    if (sub1 && !strstr(err.msg, sub1)) fail_msg("%s: message lacks '%s': %s", what, sub1, err.msg);
    if (sub2 && !strstr(err.msg, sub2)) fail_msg("%s: message lacks '%s': %s", what, sub2, err.msg);
}

/* A file with the given header text (length field = its length) and data_len zero bytes. */
static void expect_raw(const char *header, size_t data_len, tf_status want, const char *sub1, const char *sub2) {
    uint8_t *p;
    size_t n;
    assert_int_equal(st_build_raw(header, strlen(header), ST_LEN_AUTO, NULL, data_len, &p, &n), 0);
    expect_bytes(header, p, n, want, sub1, sub2);
    free(p);
}

/* One tensor "w" with the given dtype, shape and offsets JSON, and data_len data bytes. */
static void expect_tensor_n(const char *dtype, const char *shape, const char *offs, size_t data_len, tf_status want,
                            const char *sub1, const char *sub2) {
    char hdr[1024];
    snprintf(hdr, sizeof hdr, "{\"w\":{\"dtype\":%s,\"shape\":%s,\"data_offsets\":%s}}", dtype, shape, offs);
    expect_raw(hdr, data_len, want, sub1, sub2);
}

/* The same with 64 data bytes, for headers that fail before the layout checks. */
static void expect_tensor(const char *dtype, const char *shape, const char *offs, tf_status want, const char *sub1,
                          const char *sub2) {
    expect_tensor_n(dtype, shape, offs, 64, want, sub1, sub2);
}

/* A small valid file: three tensors and metadata. */
static void small_file(uint8_t **p, size_t *n) {
    static float a[6] = {1, 2, 3, 4, 5, 6};
    static uint16_t b[4] = {0x3c00, 0x4000, 0x4200, 0x4400};
    static uint16_t c[2] = {0x3f80, 0x4000};
    const st_entry e[] = {
        {"a", "F32", 2, (int64_t[]){2, 3}, a, sizeof a},
        {"b.weight", "F16", 1, (int64_t[]){4}, b, sizeof b},
        {"c", "BF16", 2, (int64_t[]){1, 2}, c, sizeof c},
    };
    const char *meta[] = {"format", "pt", NULL};
    assert_int_equal(st_build(e, 3, meta, p, n), 0);
}

/* ---- round trips ---- */

static void test_round_trip(void **state) {
    (void)state;
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed());
    float f32[12], one = 3.5f;
    uint16_t f16[5], bf16[12];
    int64_t ids[3] = {-1, 0, 1ll << 40};
    tu_fill_uniform(&rng, f32, 12, -2, 2);
    for (int i = 0; i < 5; i++) f16[i] = (uint16_t)tf_rng_next(&rng);
    for (int i = 0; i < 12; i++) bf16[i] = (uint16_t)tf_rng_next(&rng);
    const st_entry e[] = {
        {"model.embed_tokens.weight", "F32", 2, (int64_t[]){4, 3}, f32, sizeof f32},
        {"model.norm.weight", "F16", 1, (int64_t[]){5}, f16, sizeof f16},
        {"model.layers.0.self_attn.q_proj.weight", "BF16", 3, (int64_t[]){2, 3, 2}, bf16, sizeof bf16},
        {"scalar", "F32", 0, NULL, &one, 4},
        {"empty", "F16", 2, (int64_t[]){0, 7}, NULL, 0},
        {"ids", "I64", 1, (int64_t[]){3}, ids, sizeof ids},
    };
    const size_t n = sizeof e / sizeof e[0];
    const char *meta[] = {"format", "pt", "note", "h\xc3\xa9llo \"quoted\"", NULL};
    const char *dir = new_dir("round_trip");
    char path[512];
    snprintf(path, sizeof path, "%s", path_in(dir, "m.safetensors"));
    assert_int_equal(st_write(path, e, n, meta), 0);

    tf_st_file f;
    tf_err err = {0};
    OK(tf_st_open(&f, path, &err));
    assert_string_equal(f.path, path);
    assert_int_equal(f.n_tensors, n);
    assert_int_equal(f.header_len % 8, 0);
    assert_ptr_equal(f.data, f.base + 8 + f.header_len);
    assert_int_equal(f.data_size, f.size - 8 - f.header_len);
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const tf_st_tensor *t = tf_st_find(&f, e[i].name);
        assert_non_null(t);
        assert_string_equal(t->name, e[i].name);
        assert_string_equal(t->dtype_name, e[i].dtype);
        tf_st_dtype dt;
        assert_true(tf_st_dtype_from_name(e[i].dtype, &dt));
        assert_int_equal(t->dtype, dt);
        assert_int_equal(t->elem_size, tf_st_dtype_size(dt));
        assert_int_equal(t->n_dims, e[i].n_dims);
        uint64_t count = 1;
        for (int d = 0; d < TF_ST_MAX_DIMS; d++) {
            assert_int_equal(t->shape[d], d < e[i].n_dims ? e[i].shape[d] : 0);
            if (d < e[i].n_dims) count *= (uint64_t)e[i].shape[d];
        }
        assert_int_equal(t->n_elements, count);
        assert_int_equal(t->nbytes, e[i].nbytes);
        assert_ptr_equal(t->data, f.data + t->offset);
        if (e[i].nbytes) assert_memory_equal(t->data, e[i].data, e[i].nbytes);
        total += t->nbytes;
    }
    assert_int_equal(f.total_bytes, total);
    assert_int_equal(tf_st_find(&f, "model.embed_tokens.weight")->engine_type, TF_DTYPE_F32);
    assert_int_equal(tf_st_find(&f, "model.norm.weight")->engine_type, TF_DTYPE_F16);
    assert_int_equal(tf_st_find(&f, "model.layers.0.self_attn.q_proj.weight")->engine_type, TF_DTYPE_BF16);
    assert_int_equal(tf_st_find(&f, "ids")->engine_type, TF_ST_ENGINE_NONE);
    for (uint64_t i = 1; i < f.n_tensors; i++) assert_true(strcmp(f.tensors[i - 1].name, f.tensors[i].name) < 0);
    assert_null(tf_st_find(&f, "missing"));
    assert_null(tf_st_find(&f, ""));
    char longname[400];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    assert_null(tf_st_find(&f, longname));
    assert_int_equal(f.n_meta, 2);
    assert_string_equal(tf_st_meta_get(&f, "format"), "pt");
    assert_string_equal(tf_st_meta_get(&f, "note"), "h\xc3\xa9llo \"quoted\"");
    assert_null(tf_st_meta_get(&f, "missing"));
    tf_st_close(&f);
    assert_null(f.tensors);
    tf_st_close(&f); /* twice is fine */

    /* the same bytes through tf_st_parse */
    uint8_t *p;
    size_t len;
    assert_int_equal(st_build(e, n, meta, &p, &len), 0);
    OK(tf_st_parse(&f, "mem", p, len, &err));
    assert_int_equal(f.n_tensors, n);
    assert_memory_equal(tf_st_find(&f, "ids")->data, ids, sizeof ids);
    tf_st_close(&f);
    free(p);
}

static void test_every_dtype(void **state) {
    (void)state;
    static const struct { const char *name; uint32_t size; int32_t engine; } k[] = {
        {"F64", 8, TF_ST_ENGINE_NONE}, {"F32", 4, TF_DTYPE_F32}, {"F16", 2, TF_DTYPE_F16},
        {"BF16", 2, TF_DTYPE_BF16}, {"I64", 8, TF_ST_ENGINE_NONE}, {"I32", 4, TF_ST_ENGINE_NONE},
        {"I16", 2, TF_ST_ENGINE_NONE}, {"I8", 1, TF_ST_ENGINE_NONE}, {"U8", 1, TF_ST_ENGINE_NONE},
        {"BOOL", 1, TF_ST_ENGINE_NONE}, {"U16", 2, TF_ST_ENGINE_NONE}, {"U32", 4, TF_ST_ENGINE_NONE},
        {"U64", 8, TF_ST_ENGINE_NONE}, {"F8_E4M3", 1, TF_ST_ENGINE_NONE}, {"F8_E5M2", 1, TF_ST_ENGINE_NONE},
    };
    assert_int_equal(sizeof k / sizeof k[0], TF_ST_DTYPE_COUNT);
    uint8_t bytes[3 * 8];
    for (size_t i = 0; i < sizeof bytes; i++) bytes[i] = (uint8_t)(i * 7 + 1);
    static const int64_t three[1] = {3};
    st_entry e[TF_ST_DTYPE_COUNT];
    char names[TF_ST_DTYPE_COUNT][16];
    for (int i = 0; i < TF_ST_DTYPE_COUNT; i++) {
        snprintf(names[i], sizeof names[i], "t_%s", k[i].name);
        e[i] = (st_entry){names[i], k[i].name, 1, three, bytes, 3 * k[i].size};
        assert_string_equal(tf_st_dtype_name((tf_st_dtype)i), k[i].name);
        assert_int_equal(tf_st_dtype_size((tf_st_dtype)i), k[i].size);
    }
    assert_string_equal(tf_st_dtype_name(TF_ST_DTYPE_COUNT), "invalid");
    assert_int_equal(tf_st_dtype_size(TF_ST_DTYPE_COUNT), 0);
    tf_st_dtype dt;
    assert_false(tf_st_dtype_from_name("f16", &dt)); /* names are case-sensitive */
    uint8_t *p;
    size_t n;
    assert_int_equal(st_build(e, TF_ST_DTYPE_COUNT, NULL, &p, &n), 0);
    tf_st_file f;
    tf_err err = {0};
    OK(tf_st_parse(&f, "dtypes", p, n, &err));
    for (int i = 0; i < TF_ST_DTYPE_COUNT; i++) {
        const tf_st_tensor *t = tf_st_find(&f, names[i]);
        assert_non_null(t);
        assert_int_equal(t->dtype, i);
        assert_int_equal(t->elem_size, k[i].size);
        assert_int_equal(t->engine_type, k[i].engine);
        assert_int_equal(t->nbytes, 3 * k[i].size);
        assert_memory_equal(t->data, bytes, t->nbytes);
    }
    assert_int_equal(f.n_meta, 0);
    assert_null(tf_st_meta_get(&f, "format"));
    tf_st_close(&f);
    free(p);
}

/* The format does not align the data section: an odd-length header puts the
 * data at an odd file offset, and the pointers are recorded as they are. */
static void test_unaligned(void **state) {
    (void)state;
    const char *hdr = "{\"x\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,3]},"
                      "\"y\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[3,7]}} ";
    uint8_t *p;
    size_t n;
    assert_int_equal(st_build_raw(hdr, strlen(hdr), ST_LEN_AUTO, NULL, 7, &p, &n), 0);
    assert_true((8 + strlen(hdr)) % 2 == 1);
    tf_st_file f;
    tf_err err = {0};
    OK(tf_st_parse(&f, "odd", p, n, &err));
    assert_ptr_equal(f.data, p + 8 + strlen(hdr));
    assert_ptr_equal(tf_st_find(&f, "y")->data, f.data + 3);
    tf_st_close(&f);
    free(p);
}

/* The tensors must tile the data section: a gap before, between or after them
 * means the header and the data disagree. */
static void test_gaps_and_trailing_bytes(void **state) {
    (void)state;
    const char *one = "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[3,7]}}";
    expect_raw(one, 7, TF_ERR_FORMAT, "the first tensor's data ('x') begins at byte 3", "expected 0");
    const char *two = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}";
    expect_raw(two, 12, TF_ERR_FORMAT, "tensor 'b' data begins at byte 8 of the data section but tensor 'a' ends at byte 4",
               NULL);
    const char *fit = "{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}";
    expect_raw(fit, 16, TF_OK, NULL, NULL);
    expect_raw(fit, 17, TF_ERR_FORMAT, "the data section is 17 bytes but the tensors end at byte 16",
               "1 bytes after the last tensor");
    expect_raw("{}", 5, TF_ERR_FORMAT, "the data section is 5 bytes but the tensors end at byte 0", NULL);
    /* empty tensors hold no bytes and may sit anywhere inside the data section */
    expect_raw("{\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}", 0, TF_OK, NULL, NULL);
}

/* A valid file whose header length field is a few bytes short (the header's
 * padding spaces then still parse as JSON) would read every weight shifted by
 * those bytes: it is refused, naming the header length. */
static void test_short_header_length(void **state) {
    (void)state;
    const char *hdr = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}     ";
    const float w[2] = {1.5f, -2.0f};
    uint8_t *p;
    size_t n;
    uint64_t hl = strlen(hdr);
    assert_int_equal(st_build_raw(hdr, hl, ST_LEN_AUTO, w, sizeof w, &p, &n), 0);
    expect_bytes("padded header", p, n, TF_OK, NULL, NULL);
    for (uint64_t k = 1; k <= 5; k++) {
        uint64_t shorter = hl - k;
        memcpy(p, &shorter, 8); /* little-endian host */
        char what[64], sub[96];
        snprintf(what, sizeof what, "header length %llu - %llu", (unsigned long long)hl, (unsigned long long)k);
        snprintf(sub, sizeof sub, "(%llu bytes after the last tensor: the header length %llu is wrong",
                 (unsigned long long)k, (unsigned long long)shorter);
        expect_bytes(what, p, n, TF_ERR_FORMAT, sub, NULL);
    }
    free(p);
}

static void test_close_and_open_failures(void **state) {
    (void)state;
    tf_st_file f;
    memset(&f, 0, sizeof f);
    tf_st_close(&f);
    tf_st_close(&f);
    tf_st_set s;
    memset(&s, 0, sizeof s);
    tf_st_set_close(&s);
    tf_err err = {0};
    const char *missing = path_in(g_root, "does-not-exist.safetensors");
    assert_int_equal(tf_st_open(&f, missing, &err), TF_ERR_IO);
    assert_non_null(strstr(err.msg, missing));
    assert_null(f.tensors);
    tf_st_close(&f);
    tf_err_clear(&err);
    assert_int_equal(tf_st_open(&f, g_root, &err), TF_ERR_IO); /* a directory */
    tf_st_close(&f);
}

/* ---- sharded sets ---- */

static float g_w1[8] = {1, 2, 3, 4, 5, 6, 7, 8}, g_w2[4] = {-1, -2, -3, -4}, g_w3[2] = {9, 10};

/* dir/s1.safetensors holds "a" (+ extra), dir/s2.safetensors holds "b" and "c". */
static void write_two_shards(const char *dir, const char *extra_in_s2) {
    const st_entry s1[] = {{"a", "F32", 2, (int64_t[]){2, 4}, g_w1, sizeof g_w1}};
    const st_entry s2[] = {
        {"b", "F32", 1, (int64_t[]){4}, g_w2, sizeof g_w2},
        {"c", "F32", 1, (int64_t[]){2}, g_w3, sizeof g_w3},
        {extra_in_s2 ? extra_in_s2 : "", "F32", 1, (int64_t[]){2}, g_w3, sizeof g_w3},
    };
    assert_int_equal(st_write(path_in(dir, "s1.safetensors"), s1, 1, NULL), 0);
    assert_int_equal(st_write(path_in(dir, "s2.safetensors"), s2, extra_in_s2 ? 3 : 2, NULL), 0);
}

static void write_index(const char *dir, const char *text) {
    assert_int_equal(st_write_bytes(path_in(dir, TF_ST_INDEX_NAME), text, (size_t)-1), 0);
}

static const char k_good_index[] =
    "{\"metadata\": {\"total_size\": 56, \"format\": \"pt\", \"nested\": {\"x\": 1}},\n"
    " \"weight_map\": {\"a\": \"s1.safetensors\", \"b\": \"s2.safetensors\", \"c\": \"s2.safetensors\"}}\n";

static void test_sharded(void **state) {
    (void)state;
    const char *dir = new_dir("sharded");
    char d[256];
    snprintf(d, sizeof d, "%s", dir);
    write_two_shards(d, "extra");
    write_index(d, k_good_index);
    tf_st_set s;
    tf_err err = {0};
    OK(tf_st_set_open(&s, d, &err));
    assert_true(s.sharded);
    assert_int_equal(s.n_files, 2);
    assert_int_equal(s.n_tensors, 4);
    assert_int_equal(s.total_bytes, sizeof g_w1 + sizeof g_w2 + 2 * sizeof g_w3);
    const struct { const char *name, *file; const float *data; size_t nbytes; } k[] = {
        {"a", "s1.safetensors", g_w1, sizeof g_w1}, {"b", "s2.safetensors", g_w2, sizeof g_w2},
        {"c", "s2.safetensors", g_w3, sizeof g_w3}, {"extra", "s2.safetensors", g_w3, sizeof g_w3},
    };
    for (size_t i = 0; i < 4; i++) {
        const tf_st_file *file;
        const tf_st_tensor *t = tf_st_set_find(&s, k[i].name, &file);
        assert_non_null(t);
        assert_non_null(file);
        assert_string_equal(strrchr(file->path, '/') + 1, k[i].file);
        assert_int_equal(t->nbytes, k[i].nbytes);
        assert_memory_equal(t->data, k[i].data, k[i].nbytes);
        assert_ptr_equal(tf_st_find(file, k[i].name), t);
    }
    const tf_st_file *file = (const tf_st_file *)1;
    assert_null(tf_st_set_find(&s, "nope", &file));
    assert_null(file);
    assert_non_null(tf_st_set_find(&s, "a", NULL));
    assert_string_equal(tf_st_set_meta_get(&s, "total_size"), "56");
    assert_string_equal(tf_st_set_meta_get(&s, "format"), "pt");
    assert_null(tf_st_set_meta_get(&s, "nested"));
    tf_st_set_close(&s);
    tf_st_set_close(&s);

    /* a trailing slash on the directory is fine */
    char slash[300];
    snprintf(slash, sizeof slash, "%s/", d);
    OK(tf_st_set_open(&s, slash, &err));
    assert_int_equal(s.n_tensors, 4);
    tf_st_set_close(&s);
}

static void test_single_file_dir(void **state) {
    (void)state;
    const char *dir = new_dir("single");
    const st_entry e[] = {{"w", "BF16", 1, (int64_t[]){2}, "\x01\x02\x03\x04", 4}};
    assert_int_equal(st_write(path_in(dir, TF_ST_SINGLE_NAME), e, 1, (const char *[]){"format", "pt", NULL}), 0);
    tf_st_set s;
    tf_err err = {0};
    OK(tf_st_set_open(&s, dir, &err));
    assert_false(s.sharded);
    assert_int_equal(s.n_files, 1);
    assert_int_equal(s.n_tensors, 1);
    assert_int_equal(s.total_bytes, 4);
    const tf_st_file *file;
    const tf_st_tensor *t = tf_st_set_find(&s, "w", &file);
    assert_non_null(t);
    assert_ptr_equal(file, &s.files[0]);
    assert_string_equal(tf_st_meta_get(file, "format"), "pt");
    assert_null(tf_st_set_meta_get(&s, "format"));
    tf_st_set_close(&s);
}

/* Open dir as a set and assert the status and up to three substrings. */
static void expect_set(const char *dir, tf_status want, const char *sub1, const char *sub2, const char *sub3) {
    tf_st_set s;
    tf_err err = {0};
    tf_status st = tf_st_set_open(&s, dir, &err);
    if (st != want) fail_msg("%s: status %d, expected %d: %s", dir, st, want, err.msg);
    assert_int_equal(s.n_files, 0); /* left closed */
    assert_null(s.files);
    const char *subs[] = {sub1, sub2, sub3};
    for (int i = 0; i < 3; i++)
        if (subs[i] && !strstr(err.msg, subs[i])) fail_msg("%s: message lacks '%s': %s", dir, subs[i], err.msg);
    tf_st_set_close(&s);
}

static void test_set_neither_file(void **state) {
    (void)state;
    const char *dir = new_dir("empty_dir");
    char d[256];
    snprintf(d, sizeof d, "%s", dir);
    expect_set(d, TF_ERR_IO, d, TF_ST_INDEX_NAME, TF_ST_SINGLE_NAME);
    assert_int_equal(st_write_bytes(path_in(d, "pytorch_model.bin"), "PK", 2), 0);
    expect_set(d, TF_ERR_IO, TF_ST_SINGLE_NAME, "pytorch_model.bin", NULL);
    char gone[300];
    snprintf(gone, sizeof gone, "%s/no_such_dir", g_root);
    expect_set(gone, TF_ERR_IO, gone, "cannot access", NULL);
    expect_set(path_in(d, "pytorch_model.bin"), TF_ERR_IO, "not a directory", NULL, NULL);
}

static void test_set_missing_shard(void **state) {
    (void)state;
    const char *dir = new_dir("missing_shard");
    char d[256];
    snprintf(d, sizeof d, "%s", dir);
    write_two_shards(d, NULL);
    unlink(path_in(d, "s2.safetensors"));
    write_index(d, k_good_index);
    expect_set(d, TF_ERR_IO, TF_ST_INDEX_NAME, "shard \"s2.safetensors\"", "cannot open");
}

static void test_set_tensor_absent(void **state) {
    (void)state;
    const char *dir = new_dir("absent");
    char d[256];
    snprintf(d, sizeof d, "%s", dir);
    write_two_shards(d, NULL);
    write_index(d, "{\"weight_map\": {\"a\": \"s1.safetensors\", \"b\": \"s2.safetensors\", "
                   "\"c\": \"s2.safetensors\", \"ghost\": \"s1.safetensors\"}}");
    expect_set(d, TF_ERR_FORMAT, "tensor 'ghost'", "\"s1.safetensors\"", "no such tensor");
    /* listed in the wrong shard: absent there */
    write_index(d, "{\"weight_map\": {\"a\": \"s2.safetensors\", \"b\": \"s2.safetensors\"}}");
    expect_set(d, TF_ERR_FORMAT, "tensor 'a'", "\"s2.safetensors\"", NULL);
}

static void test_set_tensor_in_two_shards(void **state) {
    (void)state;
    const char *dir = new_dir("two_shards");
    char d[256];
    snprintf(d, sizeof d, "%s", dir);
    write_two_shards(d, "a"); /* s2 also holds "a" */
    write_index(d, k_good_index);
    expect_set(d, TF_ERR_FORMAT, "tensor 'a' appears in two shards", "s1.safetensors", "s2.safetensors");
}

static void test_set_hostile_shard_names(void **state) {
    (void)state;
    const char *dir = new_dir("hostile_names");
    char d[256];
    snprintf(d, sizeof d, "%s", dir);
    write_two_shards(d, NULL);
    /* a valid shard really exists at ../x.safetensors: rejection must be by name */
    const st_entry e[] = {{"a", "F32", 2, (int64_t[]){2, 4}, g_w1, sizeof g_w1}};
    assert_int_equal(st_write(path_in(g_root, "x.safetensors"), e, 1, NULL), 0);
    char longname[400];
    memset(longname, 'n', 300);
    strcpy(longname + 300, ".safetensors");
    const char *bad[] = {"../x.safetensors", "a/b.safetensors", "..", ".", "", "a\\\\b.safetensors",
                         "/etc/passwd", "x..safetensors", "tab\\t.safetensors", longname};
    const char *why[] = {"path separator", "path separator", "\"..\"", "\"..\"", "empty", "path separator",
                         "path separator", "\"..\"", "control character", "longer than 255"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char idx[1024];
        snprintf(idx, sizeof idx, "{\"weight_map\": {\"b\": \"s2.safetensors\", \"a\": \"%s\"}}", bad[i]);
        write_index(d, idx);
        expect_set(d, TF_ERR_FORMAT, "tensor 'a'", "not a plain file name", why[i]);
    }
}

static void test_set_bad_index(void **state) {
    (void)state;
    const char *dir = new_dir("bad_index");
    char d[256];
    snprintf(d, sizeof d, "%s", dir);
    write_two_shards(d, NULL);
    static const struct { const char *text, *sub1, *sub2; tf_status st; } k[] = {
        {"", "index file is 0 bytes", NULL, TF_ERR_FORMAT},
        {"{\"weight_map\": {\"a\": ", "not valid JSON", NULL, TF_ERR_FORMAT},
        {"[1, 2]", "index is an array of 2 elements", "expected a JSON object", TF_ERR_FORMAT},
        {"{\"metadata\": {}}", "\"weight_map\" is missing", NULL, TF_ERR_FORMAT},
        {"{\"weight_map\": {}}", "\"weight_map\" is empty", NULL, TF_ERR_FORMAT},
        {"{\"weight_map\": [\"a\"]}", "\"weight_map\" is an array of 1 elements", NULL, TF_ERR_FORMAT},
        {"{\"weight_map\": {\"a\": 1}}", "entry for tensor 'a' is 1", "expected a file name", TF_ERR_FORMAT},
        {"{\"weight_map\": {\"a\": \"s1.safetensors\", \"a\": \"s1.safetensors\"}}", "tensor 'a' is listed more",
         NULL, TF_ERR_FORMAT},
        {"{\"weight_map\": {\"a\": \"s1.safetensors\"}, \"weight_map\": {}}", "\"weight_map\" appears more", NULL,
         TF_ERR_FORMAT},
        {"{\"metadata\": [1], \"weight_map\": {\"a\": \"s1.safetensors\"}}", "\"metadata\" is an array",
         "expected an object", TF_ERR_FORMAT},
        {"{\"weight_map\": {\"a\": \"s1.safetensors\"}} x", "non-whitespace", NULL, TF_ERR_FORMAT},
        {"{\"weight_map\": {\"\": \"s1.safetensors\"}}", "tensor name '' is 0 bytes", NULL, TF_ERR_FORMAT},
        {"{\"weight_map\": {\"a\": \"s1.safetensors\", \"z\": \"broken.safetensors\"}}", "shard \"broken.safetensors\"",
         "header length", TF_ERR_FORMAT},
    };
    assert_int_equal(st_write_bytes(path_in(d, "broken.safetensors"), "\x05\0\0\0\0\0\0\0{}", 10), 0);
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        write_index(d, k[i].text);
        expect_set(d, k[i].st, TF_ST_INDEX_NAME, k[i].sub1, k[i].sub2);
    }
}

/* ---- malformed files ---- */

static void test_truncation_every_length(void **state) {
    (void)state;
    uint8_t *p;
    size_t n;
    small_file(&p, &n);
    uint64_t hl = 0;
    memcpy(&hl, p, 8); /* little-endian host */
    for (size_t len = 0; len <= n; len++) {
        char what[64];
        snprintf(what, sizeof what, "cut at %zu of %zu", len, n);
        if (len == n) expect_bytes(what, p, len, TF_OK, NULL, NULL);
        else if (len < 8) expect_bytes(what, p, len, TF_ERR_FORMAT, "too short for the 8-byte header length", NULL);
        else if (len < 8 + hl) expect_bytes(what, p, len, TF_ERR_FORMAT, "exceeds the file's size", NULL);
        else expect_bytes(what, p, len, TF_ERR_FORMAT, "end beyond the", "data section");
    }
    /* the same through files on disk: the message names the path */
    const size_t cuts[] = {0, 7, 8, 8 + hl - 1, 8 + hl, n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/cut_%zu.safetensors", g_root, cuts[i]);
        assert_int_equal(st_write_bytes(path, p, cuts[i]), 0);
        tf_st_file f;
        tf_err err = {0};
        assert_int_equal(tf_st_open(&f, path, &err), TF_ERR_FORMAT);
        if (!strstr(err.msg, path)) fail_msg("cut %zu: '%s' lacks the path", cuts[i], err.msg);
        tf_st_close(&f);
    }
    free(p);
}

static void test_lying_header_length(void **state) {
    (void)state;
    uint8_t *p;
    size_t n;
    small_file(&p, &n);
    uint64_t hl;
    memcpy(&hl, p, 8);
    char buf[64];
    uint64_t lies[] = {n - 8 + 1, hl + 1000, 1ull << 20};
    for (size_t i = 0; i < 3; i++) {
        memcpy(p, &lies[i], 8);
        snprintf(buf, sizeof buf, "header length %llu exceeds the file's size %zu", (unsigned long long)lies[i], n);
        expect_bytes("longer than the file", p, n, TF_ERR_FORMAT, buf, NULL);
    }
    uint64_t shorter = hl - 10; /* cuts the JSON */
    memcpy(p, &shorter, 8);
    expect_bytes("shorter than the header", p, n, TF_ERR_FORMAT, "header is not valid JSON", NULL);
    uint64_t zero = 0;
    memcpy(p, &zero, 8);
    expect_bytes("zero", p, n, TF_ERR_FORMAT, "header length is 0", NULL);
    uint64_t huge[] = {(100ull << 20) + 1, 1ull << 40, UINT64_MAX};
    for (size_t i = 0; i < 3; i++) {
        memcpy(p, &huge[i], 8);
        snprintf(buf, sizeof buf, "header length %llu exceeds the limit", (unsigned long long)huge[i]);
        expect_bytes("absurd", p, n, TF_ERR_FORMAT, buf, "is this a safetensors file?");
    }
    /* hints for files that are something else */
    memcpy(p, "GGUF\x03\0\0\0", 8);
    expect_bytes("gguf", p, n, TF_ERR_FORMAT, "exceeds the limit", "GGUF file");
    memcpy(p, "PK\x03\x04\x14\0\0\0", 8);
    expect_bytes("zip", p, n, TF_ERR_FORMAT, "exceeds", "zip archive");
    const char *lfs = "version https://git-lfs.github.com/spec/v1\noid sha256:0\nsize 100\n";
    expect_bytes("lfs", (const uint8_t *)lfs, strlen(lfs), TF_ERR_FORMAT, "exceeds", "git lfs pull");
    const char *json = "{\"a\": 1, \"b\": 2}";
    expect_bytes("json", (const uint8_t *)json, strlen(json), TF_ERR_FORMAT, "exceeds", "JSON file");
    free(p);
}

static void test_bad_json(void **state) {
    (void)state;
    expect_raw("{\"a\":", 0, TF_ERR_FORMAT, "header is not valid JSON", "file offset");
    expect_raw("{'a': 1}", 0, TF_ERR_FORMAT, "not valid JSON", NULL);
    expect_raw("hello", 0, TF_ERR_FORMAT, "not valid JSON", "expected it to start with '{'");
    expect_raw("{}  x", 0, TF_ERR_FORMAT, "1 bytes of non-whitespace", "file offset 12");
    expect_raw("{}{}", 0, TF_ERR_FORMAT, "non-whitespace", NULL);
    expect_raw("{}   \n\t ", 0, TF_OK, NULL, NULL);
    expect_raw("{\"a\x01\": 1}", 0, TF_ERR_FORMAT, "is 0x01", "control characters");
    expect_raw("{\"a\xff\": 1}", 0, TF_ERR_FORMAT, "not valid UTF-8", "file offset 11");
    expect_raw("{\"a\xc0\xaf\": 1}", 0, TF_ERR_FORMAT, "not valid UTF-8", NULL);  /* overlong */
    expect_raw("{\"a\xed\xa0\x80\": 1}", 0, TF_ERR_FORMAT, "not valid UTF-8", NULL); /* surrogate */
    expect_raw("{\"a\xe2\x96\": 1}", 0, TF_ERR_FORMAT, "not valid UTF-8", NULL);  /* cut sequence */
    expect_raw("{\"a\xe2\x96", 0, TF_ERR_FORMAT, "not valid UTF-8", NULL);       /* cut at the end */
    expect_raw("{\"w\\u0000x\":{}}", 0, TF_ERR_FORMAT, "escaped NUL", NULL);
    expect_raw("{\"__metadata__\":{\"k\":\"\\u0000\"}}", 0, TF_ERR_FORMAT, "escaped NUL", NULL);
    expect_raw("{\"__metadata__\":{\"k\":\"\\\\u0000\"}}", 0, TF_OK, NULL, NULL); /* an escaped backslash */
    /* NUL padding (a header length past the real header) */
    const char hdr[] = "{}\0\0\0\0\0";
    uint8_t *p;
    size_t n;
    assert_int_equal(st_build_raw(hdr, 8, ST_LEN_AUTO, NULL, 0, &p, &n), 0);
    expect_bytes("nul padding", p, n, TF_ERR_FORMAT, "is 0x00", "wrong header length");
    free(p);
    /* deep nesting stops at cJSON's limit instead of the stack */
    size_t depth = 100000;
    char *deep = malloc(2 * depth + 1);
    assert_non_null(deep);
    memset(deep, '[', depth);
    memset(deep + depth, ']', depth);
    deep[2 * depth] = '\0';
    expect_raw(deep, 0, TF_ERR_FORMAT, "not valid JSON", NULL);
    free(deep);
}

static void test_not_an_object(void **state) {
    (void)state;
    expect_raw("[]", 0, TF_ERR_FORMAT, "header is an array of 0 elements", "expected a JSON object");
    expect_raw("\"str\"", 0, TF_ERR_FORMAT, "header is the string \"str\"", NULL);
    expect_raw("42", 0, TF_ERR_FORMAT, "header is 42", NULL);
    expect_raw("null", 0, TF_ERR_FORMAT, "header is null", NULL);
    expect_raw("true", 0, TF_ERR_FORMAT, "header is true", NULL);
    expect_raw("{}", 0, TF_OK, NULL, NULL); /* no tensors is a valid (empty) file */
}

static void test_entry_fields(void **state) {
    (void)state;
    expect_raw("{\"w\": 5}", 0, TF_ERR_FORMAT, "tensor 'w': entry is 5", "expected an object");
    expect_raw("{\"w\": [1]}", 0, TF_ERR_FORMAT, "tensor 'w': entry is an array", NULL);
    expect_raw("{\"w\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", 8, TF_ERR_FORMAT,
               "tensor 'w': \"dtype\" is missing", NULL);
    expect_tensor("16", "[1]", "[0, 2]", TF_ERR_FORMAT, "tensor 'w': \"dtype\" is 16", "expected a string");
    expect_raw("{\"w\": {\"dtype\": \"F32\", \"data_offsets\": [0, 4]}}", 8, TF_ERR_FORMAT,
               "tensor 'w': \"shape\" is missing", NULL);
    expect_tensor("\"F32\"", "{}", "[0, 4]", TF_ERR_FORMAT, "tensor 'w': \"shape\" is an object", NULL);
    expect_raw("{\"w\": {\"dtype\": \"F32\", \"shape\": [1]}}", 8, TF_ERR_FORMAT,
               "tensor 'w': \"data_offsets\" is missing", NULL);
    expect_raw("{\"w\": {\"dtype\": \"F32\", \"dtype\": \"F16\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 8,
               TF_ERR_FORMAT, "tensor 'w': key \"dtype\" appears more than once", NULL);
    expect_raw("{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4], \"extra\": [1, 2]}}", 4,
               TF_OK, NULL, NULL); /* unknown keys are ignored */
}

static void test_unknown_dtype(void **state) {
    (void)state;
    expect_tensor("\"F4\"", "[2]", "[0, 1]", TF_ERR_UNSUPPORTED, "tensor 'w': unknown dtype \"F4\"", "F8_E5M2");
    expect_tensor("\"f32\"", "[2]", "[0, 8]", TF_ERR_UNSUPPORTED, "unknown dtype \"f32\"", NULL);
    expect_tensor("\"\"", "[2]", "[0, 8]", TF_ERR_UNSUPPORTED, "unknown dtype \"\"", NULL);
}

static void test_wrong_dtype_size(void **state) {
    (void)state;
    expect_tensor("\"F32\"", "[2, 2]", "[0, 8]", TF_ERR_FORMAT, "tensor 'w': data_offsets [0, 8] hold 8 bytes",
                  "needs 16");
    expect_tensor("\"BF16\"", "[3]", "[0, 8]", TF_ERR_FORMAT, "dtype BF16 (2 bytes) x shape [3]", "needs 6");
    expect_tensor_n("\"F32\"", "[]", "[0, 4]", 4, TF_OK, NULL, NULL);  /* a scalar: one element */
    expect_tensor("\"F32\"", "[]", "[0, 0]", TF_ERR_FORMAT, "shape [] (1 elements) needs 4", NULL);
}

static void test_shape_values(void **state) {
    (void)state;
    expect_tensor("\"F32\"", "[-1]", "[0, 4]", TF_ERR_FORMAT, "tensor 'w': shape[0] is -1", "expected an integer");
    expect_tensor("\"F32\"", "[2, 1.5]", "[0, 4]", TF_ERR_FORMAT, "tensor 'w': shape[1] is 1.5", NULL);
    expect_tensor("\"F32\"", "[1e16]", "[0, 4]", TF_ERR_FORMAT, "shape[0] is 1e+16", "2^53");
    expect_tensor("\"F32\"", "[1e400]", "[0, 4]", TF_ERR_FORMAT, "shape[0] is inf", NULL);
    expect_tensor("\"F32\"", "[\"2\"]", "[0, 8]", TF_ERR_FORMAT, "shape[0] is the string \"2\"", NULL);
    expect_tensor("\"F32\"", "[null]", "[0, 8]", TF_ERR_FORMAT, "shape[0] is null", NULL);
    expect_tensor("\"F32\"", "[1,1,1,1,1,1,1,1,1]", "[0, 4]", TF_ERR_FORMAT, "shape has 9 dimensions",
                  "at most 8");
    expect_tensor_n("\"F32\"", "[1,1,1,1,1,1,1,1]", "[0, 4]", 4, TF_OK, NULL, NULL);
    expect_tensor("\"F32\"", "[9007199254740992, 9007199254740992]", "[0, 4]", TF_ERR_FORMAT,
                  "shape [9007199254740992, 9007199254740992] has more than 2^64 elements", NULL);
    expect_tensor("\"F64\"", "[4294967296, 1073741824]", "[0, 8]", TF_ERR_FORMAT, "dtype F64 x shape",
                  "more than 2^64 bytes");
    expect_tensor_n("\"F32\"", "[9007199254740992, 9007199254740992, 0]", "[0, 0]", 0, TF_OK, NULL,
                    NULL); /* empty */
}

static void test_offset_values(void **state) {
    (void)state;
    expect_tensor("\"F32\"", "[2]", "[0, 7.5]", TF_ERR_FORMAT, "tensor 'w': data_offsets[1] is 7.5",
                  "expected an integer");
    expect_tensor("\"F32\"", "[2]", "[0.5, 8]", TF_ERR_FORMAT, "data_offsets[0] is 0.5", NULL);
    expect_tensor("\"F32\"", "[2]", "[-8, 0]", TF_ERR_FORMAT, "data_offsets[0] is -8", NULL);
    expect_tensor("\"F32\"", "[2]", "[0, 9007199254740994]", TF_ERR_FORMAT, "data_offsets[1] is 9007199254740994",
                  "2^53");
    expect_tensor("\"F32\"", "[2]", "[\"0\", 8]", TF_ERR_FORMAT, "data_offsets[0] is the string \"0\"", NULL);
    expect_tensor("\"F32\"", "[2]", "[0, 8, 16]", TF_ERR_FORMAT, "\"data_offsets\" is an array of 3 elements",
                  "two integers");
    expect_tensor("\"F32\"", "[2]", "[8]", TF_ERR_FORMAT, "\"data_offsets\" is an array of 1 elements", NULL);
    expect_tensor("\"F32\"", "[2]", "8", TF_ERR_FORMAT, "\"data_offsets\" is 8", NULL);
    expect_tensor("\"F32\"", "[0]", "[8, 0]", TF_ERR_FORMAT, "data_offsets [8, 0] has begin > end", NULL);
    expect_tensor_n("\"F32\"", "[2]", "[0.0, 8e0]", 8, TF_OK, NULL, NULL); /* integral values in any spelling */
}

static void test_end_past_data(void **state) {
    (void)state;
    const char *hdr = "{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}";
    expect_raw(hdr, 15, TF_ERR_FORMAT, "tensor 'w': data_offsets [0, 16] end beyond the 15-byte data section", NULL);
    expect_raw(hdr, 16, TF_OK, NULL, NULL);
    expect_raw(hdr, 0, TF_ERR_FORMAT, "beyond the 0-byte data section", NULL);
    expect_tensor("\"U8\"", "[9007199254740992]", "[0, 9007199254740992]", TF_ERR_FORMAT, "end beyond", NULL);
}

static void test_overlapping_ranges(void **state) {
    (void)state;
    expect_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
               24, TF_ERR_FORMAT, "tensor 'a' data [0, 16) overlaps tensor 'b' data [8, 24)", NULL);
    /* listed out of order, far apart in the header */
    expect_raw("{\"z\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[20,24]},"
               "\"m\":{\"dtype\":\"U8\",\"shape\":[16],\"data_offsets\":[0,16]},"
               "\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[16,24]}}",
               24, TF_ERR_FORMAT, "tensor 'a' data [16, 24) overlaps tensor 'z' data [20, 24)", NULL);
    expect_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}",
               8, TF_ERR_FORMAT, "overlaps", NULL);
    /* adjacent ranges and empty tensors anywhere are fine */
    expect_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]},"
               "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]}}",
               16, TF_OK, NULL, NULL);
}

static void test_duplicates(void **state) {
    (void)state;
    expect_raw("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
               8, TF_ERR_FORMAT, "tensor name 'w' appears more than once", NULL);
    expect_raw("{\"__metadata__\":{},\"__metadata__\":{}}", 0, TF_ERR_FORMAT, "\"__metadata__\" appears more", NULL);
    expect_raw("{\"__metadata__\":{\"k\":\"1\",\"j\":\"2\",\"k\":\"3\"}}", 0, TF_ERR_FORMAT,
               "__metadata__ key 'k' appears more than once", NULL);
}

static void test_names(void **state) {
    (void)state;
    char name[300], hdr[600];
    expect_raw("{\"\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, TF_ERR_FORMAT,
               "a tensor name is empty", NULL);
    for (int len = 255; len <= 256; len++) {
        memset(name, 'n', (size_t)len);
        name[len] = '\0';
        snprintf(hdr, sizeof hdr, "{\"%s\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", name);
        if (len == 255) expect_raw(hdr, 4, TF_OK, NULL, NULL);
        else expect_raw(hdr, 4, TF_ERR_FORMAT, "is 256 bytes long (expected at most 255)", "'nnnnnnnn");
    }
    /* an escaped newline in a name is shown as '?' in messages */
    expect_raw("{\"a\\nb\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,5]}}", 8, TF_ERR_FORMAT,
               "tensor 'a?b'", NULL);
}

static void test_metadata(void **state) {
    (void)state;
    expect_raw("{\"__metadata__\":{\"n\":1}}", 0, TF_ERR_FORMAT, "__metadata__ key 'n' has value 1",
               "expected a string");
    expect_raw("{\"__metadata__\":{\"o\":{}}}", 0, TF_ERR_FORMAT, "key 'o' has value an object", NULL);
    expect_raw("{\"__metadata__\":[\"a\"]}", 0, TF_ERR_FORMAT, "\"__metadata__\" is an array", "expected an object");
    expect_raw("{\"__metadata__\":\"pt\"}", 0, TF_ERR_FORMAT, "\"__metadata__\" is the string \"pt\"", NULL);
    expect_raw("{\"__metadata__\":{}}", 0, TF_OK, NULL, NULL);
}

/* Random byte changes in the length field and header of a valid file never
 * crash; every failure is a clean status with a message naming the file. */
static void test_fuzz_header(void **state) {
    (void)state;
    uint8_t *p;
    size_t n;
    small_file(&p, &n);
    uint64_t hl;
    memcpy(&hl, p, 8);
    uint8_t *work = malloc(n);
    assert_non_null(work);
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() ^ 0xf022);
    static const uint8_t interesting[] = {'{', '}', '[', ']', '"', ':', ',', '\\',
                                          '-', '.', 'e', '0', '9', ' ', 0,   0xff};
    int ok = 0, failed = 0;
    for (int it = 0; it < 5000; it++) {
        memcpy(work, p, n);
        int flips = 1 + (int)(tf_rng_next(&rng) % 4);
        for (int k = 0; k < flips; k++) {
            size_t at = (size_t)(tf_rng_next(&rng) % (8 + hl));
            uint64_t r = tf_rng_next(&rng);
            work[at] = (r & 1) ? interesting[(r >> 1) % sizeof interesting] : (uint8_t)(r >> 8);
        }
        tf_err err = {0};
        tf_status st = parse_exact(work, n, &err);
        if (st == TF_OK) {
            ok++;
            continue;
        }
        failed++;
        if (st != TF_ERR_FORMAT && st != TF_ERR_UNSUPPORTED)
            fail_msg("iteration %d: status %d: %s", it, st, err.msg);
        if (strncmp(err.msg, HOSTILE ": ", strlen(HOSTILE) + 2) != 0)
            fail_msg("iteration %d: message lacks the file: %s", it, err.msg);
    }
    print_message("fuzz: %d parsed, %d rejected\n", ok, failed);
    assert_true(failed > 0);
    free(work);
    free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_every_dtype),
        cmocka_unit_test(test_unaligned),
        cmocka_unit_test(test_gaps_and_trailing_bytes),
        cmocka_unit_test(test_short_header_length),
        cmocka_unit_test(test_close_and_open_failures),
        cmocka_unit_test(test_sharded),
        cmocka_unit_test(test_single_file_dir),
        cmocka_unit_test(test_set_neither_file),
        cmocka_unit_test(test_set_missing_shard),
        cmocka_unit_test(test_set_tensor_absent),
        cmocka_unit_test(test_set_tensor_in_two_shards),
        cmocka_unit_test(test_set_hostile_shard_names),
        cmocka_unit_test(test_set_bad_index),
        cmocka_unit_test(test_truncation_every_length),
        cmocka_unit_test(test_lying_header_length),
        cmocka_unit_test(test_bad_json),
        cmocka_unit_test(test_not_an_object),
        cmocka_unit_test(test_entry_fields),
        cmocka_unit_test(test_unknown_dtype),
        cmocka_unit_test(test_wrong_dtype_size),
        cmocka_unit_test(test_shape_values),
        cmocka_unit_test(test_offset_values),
        cmocka_unit_test(test_end_past_data),
        cmocka_unit_test(test_overlapping_ranges),
        cmocka_unit_test(test_duplicates),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_metadata),
        cmocka_unit_test(test_fuzz_header),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
