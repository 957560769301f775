/* test_gguf_corrupt.c — hostile files for the GGUF reader.
 *
 * (a) A valid model-like file (written with the writer) truncated at every
 *     byte of its header and at a sample of offsets in its data: every cut
 *     before the end of the last tensor's data fails with TF_ERR_FORMAT and a
 *     message naming the file ("truncated" inside the header, "beyond the
 *     end" once the tensor infos are complete); cuts that only drop the final
 *     alignment padding still parse.
 * (b) Hand-assembled files with one hostile value each, with the exact
 *     status and a message substring (the key or tensor involved).
 * Every parse runs on a malloc'd copy of exactly the file's size so that
 * AddressSanitizer sees any read past the end. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/dtype.h"
#include "format/gguf.h"
#include "format/gguf_write.h"

#define OK(expr) assert_int_equal((expr), TF_OK)

/* ---- raw byte builder for hand-made files ---- */

typedef struct rb {
    uint8_t *p;
    size_t n, cap;
} rb;

static void rb_put(rb *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void rb_le(rb *b, uint64_t v, int n) {
    for (int i = 0; i < n; i++) {
        uint8_t c = (uint8_t)(v >> (8 * i));
        rb_put(b, &c, 1);
    }
}
static void rb_u32(rb *b, uint32_t v) { rb_le(b, v, 4); }
static void rb_u64(rb *b, uint64_t v) { rb_le(b, v, 8); }
static void rb_strn(rb *b, const char *s, size_t n) {
    rb_u64(b, n);
    rb_put(b, s, n);
}
static void rb_str(rb *b, const char *s) { rb_strn(b, s, strlen(s)); }
static void rb_zeros(rb *b, size_t n) {
    for (size_t i = 0; i < n; i++) rb_le(b, 0, 1);
}
static void rb_pad(rb *b, size_t align) {
    while (b->n % align) rb_le(b, 0, 1);
}

static void hdr(rb *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    rb_u32(b, TF_GGUF_MAGIC);
    rb_u32(b, version);
    rb_u64(b, n_tensors);
    rb_u64(b, n_kv);
}
static void kv_u32(rb *b, const char *key, uint32_t v) {
    rb_str(b, key);
    rb_u32(b, TF_GGUF_UINT32);
    rb_u32(b, v);
}
static void kv_str(rb *b, const char *key, const char *v) {
    rb_str(b, key);
    rb_u32(b, TF_GGUF_STRING);
    rb_str(b, v);
}
/* tensor info with n_dims dims from ne */
static void tinfo(rb *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t off) {
    rb_str(b, name);
    rb_u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++) rb_u64(b, ne[i]);
    rb_u32(b, type);
    rb_u64(b, off);
}
/* A plain well-formed file with one F32 tensor "w" [8, 2] (64 bytes) and
 * `extra_kv` pairs the caller has already been given room for. */
static void one_tensor_file(rb *b, uint64_t ne0, uint64_t ne1, uint32_t type, uint64_t off) {
    hdr(b, 3, 1, 1);
    kv_str(b, "general.architecture", "llama");
    tinfo(b, "w", 2, (uint64_t[]){ne0, ne1}, type, off);
    rb_pad(b, 32);
    rb_zeros(b, 64);
}

/* ---- the model-like file ---- */

static tf_gguf_writer *model_like_writer(float *f32, uint8_t *q) {
    tf_gguf_writer *w = tf_gguf_writer_new();
    tf_err err = {0};
    OK(tf_gguf_writer_set_str(w, "general.architecture", "llama", &err));
    OK(tf_gguf_writer_set_str(w, "general.name", "corrupt-test", &err));
    OK(tf_gguf_writer_set_u32(w, "general.file_type", 7, &err));
    OK(tf_gguf_writer_set_u32(w, "llama.context_length", 128, &err));
    OK(tf_gguf_writer_set_u32(w, "llama.embedding_length", 32, &err));
    OK(tf_gguf_writer_set_u32(w, "llama.block_count", 1, &err));
    OK(tf_gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f, &err));
    OK(tf_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true, &err));
    OK(tf_gguf_writer_set_u64(w, "test.u64", 1, &err));
    OK(tf_gguf_writer_set_f64(w, "test.f64", 0.25, &err));
    OK(tf_gguf_writer_set_i16(w, "test.i16", -2, &err));
    OK(tf_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama", &err));
    const char *toks[] = {"<unk>", "<s>", "</s>", "<0x00>", "a", "b", "ab", "\xe2\x96\x81" "ab"};
    float scores[] = {0, 0, 0, 0, -1, -2, -3, -4};
    int32_t types[] = {2, 3, 3, 6, 1, 1, 1, 1};
    OK(tf_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 8, &err));
    OK(tf_gguf_writer_set_arr(w, "tokenizer.ggml.scores", TF_GGUF_FLOAT32, scores, 8, &err));
    OK(tf_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", TF_GGUF_INT32, types, 8, &err));
    OK(tf_gguf_writer_add_tensor(w, "token_embd.weight", TF_DTYPE_F32, 2, (int64_t[]){32, 8}, f32, &err));
    OK(tf_gguf_writer_add_tensor(w, "output_norm.weight", TF_DTYPE_F32, 1, (int64_t[]){32}, f32, &err));
    OK(tf_gguf_writer_add_tensor(w, "blk.0.attn_q.weight", TF_DTYPE_Q8_0, 2, (int64_t[]){32, 32}, q, &err));
    OK(tf_gguf_writer_add_tensor(w, "blk.0.ffn_up.weight", TF_DTYPE_F16, 2, (int64_t[]){32, 3}, q, &err));
    OK(tf_gguf_writer_add_tensor(w, "blk.0.ffn_down.weight", TF_DTYPE_Q4_K, 2, (int64_t[]){256, 1}, q, &err));
    return w;
}

/* End of the tensor-info section of a well-formed file (walks the header). */
static size_t info_end(const uint8_t *p) {
    size_t pos = 8;
    uint64_t n_t, n_kv;
    memcpy(&n_t, p + pos, 8);
    memcpy(&n_kv, p + pos + 8, 8);
    pos += 16;
    static const uint8_t sz[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    for (uint64_t i = 0; i < n_kv; i++) {
        uint64_t len;
        uint32_t t;
        memcpy(&len, p + pos, 8);
        pos += 8 + len;
        memcpy(&t, p + pos, 4);
        pos += 4;
        if (t == TF_GGUF_STRING) {
            memcpy(&len, p + pos, 8);
            pos += 8 + len;
        } else if (t == TF_GGUF_ARRAY) {
            uint32_t et;
            uint64_t n;
            memcpy(&et, p + pos, 4);
            memcpy(&n, p + pos + 4, 8);
            pos += 12;
            for (uint64_t k = 0; k < n; k++) {
                if (et == TF_GGUF_STRING) {
                    memcpy(&len, p + pos, 8);
                    pos += 8 + len;
                } else {
                    pos += sz[et];
                }
            }
        } else {
            pos += sz[t];
        }
    }
    for (uint64_t i = 0; i < n_t; i++) {
        uint64_t len;
        uint32_t nd;
        memcpy(&len, p + pos, 8);
        pos += 8 + len;
        memcpy(&nd, p + pos, 4);
        pos += 4 + 8 * nd + 4 + 8;
    }
    return pos;
}

/* Parse the first `len` bytes of `full` from an exact-size copy. */
static tf_status parse_prefix(const uint8_t *full, size_t len, const char *name, tf_err *err) {
    uint8_t *copy = malloc(len ? len : 1);
    if (len) memcpy(copy, full, len);
    tf_gguf g;
    tf_err_clear(err);
    tf_status st = tf_gguf_parse(&g, name, len ? copy : NULL, len, err);
    if (st == TF_OK) {
        /* touch every tensor byte: they must lie inside the copy */
        unsigned sum = 0;
        for (uint64_t i = 0; i < g.n_tensors; i++)
            for (uint64_t k = 0; k < g.tensors[i].nbytes; k++) sum += g.tensors[i].data[k];
        (void)sum;
    }
    tf_gguf_close(&g);
    free(copy);
    return st;
}

static void check_cut(const uint8_t *full, size_t len, size_t end_info, uint64_t end_data) {
    tf_err err = {0};
    tf_status st = parse_prefix(full, len, "cut.gguf", &err);
    if (len >= end_data) {
        if (st != TF_OK) fail_msg("cut at %zu (data ends at %llu): %s", len, (unsigned long long)end_data, err.msg);
        return;
    }
    if (st != TF_ERR_FORMAT) fail_msg("cut at %zu: status %d (%s)", len, st, err.msg);
    if (strncmp(err.msg, "cut.gguf: ", 10) != 0) fail_msg("cut at %zu: message does not name the file: %s", len, err.msg);
    /* inside the header: a read ran out ("truncated") or a count is larger
     * than the bytes left could hold ("cannot fit"); after it: a tensor's data
     * range is missing */
    bool ok = len < end_info ? strstr(err.msg, "truncated") || strstr(err.msg, "cannot fit")
                             : strstr(err.msg, "beyond the end") != NULL;
    if (!ok) fail_msg("cut at %zu (tensor infos end at %zu): unexpected message: %s", len, end_info, err.msg);
}

static void test_truncation_every_offset(void **state) {
    (void)state;
    float f32[256];
    uint8_t q[2048];
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed());
    tu_fill_uniform(&rng, f32, 256, -1, 1);
    for (size_t i = 0; i < sizeof q; i++) q[i] = (uint8_t)tf_rng_next(&rng);
    tf_gguf_writer *w = model_like_writer(f32, q);
    uint8_t *full;
    size_t size;
    tf_err err = {0};
    OK(tf_gguf_writer_write_mem(w, &full, &size, &err));
    tf_gguf g;
    OK(tf_gguf_parse(&g, "full.gguf", full, size, &err));
    uint64_t end_data = 0;
    for (uint64_t i = 0; i < g.n_tensors; i++) {
        uint64_t e = g.data_offset + g.tensors[i].offset + g.tensors[i].nbytes;
        if (e > end_data) end_data = e;
    }
    size_t end_info = info_end(full);
    assert_true(end_info <= g.data_offset && g.data_offset < end_data && end_data <= size);
    print_message("model-like file: %zu bytes, tensor infos end at %zu, data at %llu..%llu\n", size, end_info,
                  (unsigned long long)g.data_offset, (unsigned long long)end_data);
    tf_gguf_close(&g);

    for (size_t len = 0; len <= end_info + 32; len++) check_cut(full, len, end_info, end_data);
    for (size_t len = end_info; len < end_data; len += 7) check_cut(full, len, end_info, end_data);
    for (size_t len = (size_t)end_data - 40; len <= size; len++) check_cut(full, len, end_info, end_data);

    /* the same through files on disk (tf_gguf_open names the path) */
    const size_t cuts[] = {0, 3, 4, 11, 24, end_info / 2, end_info - 1, end_info, (size_t)end_data - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s", tu_tmp_path(".gguf"));
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(full, 1, cuts[i], f), cuts[i]);
        fclose(f);
        tf_err_clear(&err);
        assert_int_equal(tf_gguf_open(&g, path, &err), TF_ERR_FORMAT);
        if (!strstr(err.msg, path)) fail_msg("cut %zu: '%s' lacks the path", cuts[i], err.msg);
        tf_gguf_close(&g);
        unlink(path);
    }
    free(full);
    tf_gguf_writer_free(w);
}

/* ---- (b) hostile values ---- */

typedef void (*build_fn)(rb *b);

static void c_bad_magic(rb *b) { one_tensor_file(b, 8, 2, 0, 0); memcpy(b->p, "GGUX", 4); }
static void c_magic_only(rb *b) { rb_u32(b, TF_GGUF_MAGIC); }
static void c_version(rb *b, uint32_t v) { one_tensor_file(b, 8, 2, 0, 0); memcpy(b->p + 4, &v, 4); }
static void c_version0(rb *b) { c_version(b, 0); }
static void c_version1(rb *b) { c_version(b, 1); }
static void c_version4(rb *b) { c_version(b, 4); }
static void c_version_be(rb *b) { c_version(b, 0x03000000u); }
static void c_version2_ok(rb *b) { c_version(b, 2); }
static void c_huge_tensors(rb *b) { hdr(b, 3, 1ull << 63, 0); rb_zeros(b, 64); }
static void c_huge_kv(rb *b) { hdr(b, 3, 0, UINT64_MAX); rb_zeros(b, 64); }
static void c_many_tensors(rb *b) { hdr(b, 3, 3, 0); rb_zeros(b, 95); } /* 3 * 32 bytes needed */
static void c_key_past_end(rb *b) {
    hdr(b, 3, 0, 1);
    rb_u64(b, 1000);
    rb_put(b, "general.name", 12);
    rb_zeros(b, 20);
}
static void c_key_huge(rb *b) { hdr(b, 3, 0, 1); rb_u64(b, 1ull << 63); rb_zeros(b, 20); }
static void c_val_str_past_end(rb *b) {
    hdr(b, 3, 0, 1);
    rb_str(b, "general.name");
    rb_u32(b, TF_GGUF_STRING);
    rb_u64(b, 100);
    rb_put(b, "short", 5);
}
static void c_val_str_huge(rb *b) {
    hdr(b, 3, 0, 1);
    rb_str(b, "general.name");
    rb_u32(b, TF_GGUF_STRING);
    rb_u64(b, 1ull << 63);
    rb_zeros(b, 16);
}
static void c_val_type(rb *b, uint32_t t) {
    hdr(b, 3, 0, 1);
    rb_str(b, "bad.type");
    rb_u32(b, t);
    rb_zeros(b, 16);
}
static void c_val_type13(rb *b) { c_val_type(b, 13); }
static void c_val_type_max(rb *b) { c_val_type(b, UINT32_MAX); }
static void arr_hdr(rb *b, const char *key, uint32_t et, uint64_t n) {
    rb_str(b, key);
    rb_u32(b, TF_GGUF_ARRAY);
    rb_u32(b, et);
    rb_u64(b, n);
}
static void c_nested(rb *b) {
    hdr(b, 3, 0, 1);
    arr_hdr(b, "nested", TF_GGUF_ARRAY, 1);
    rb_u32(b, TF_GGUF_UINT8);
    rb_u64(b, 1);
    rb_zeros(b, 8);
}
static void c_arr_elem_type(rb *b) { hdr(b, 3, 0, 1); arr_hdr(b, "arr", 77, 1); rb_zeros(b, 8); }
static void c_arr_ovf64(rb *b) { hdr(b, 3, 0, 1); arr_hdr(b, "arr", TF_GGUF_UINT64, 1ull << 61); rb_zeros(b, 64); }
static void c_arr_ovf32(rb *b) { hdr(b, 3, 0, 1); arr_hdr(b, "arr", TF_GGUF_FLOAT32, (1ull << 62) + 1); rb_zeros(b, 64); }
static void c_arr_past_end(rb *b) { hdr(b, 3, 0, 1); arr_hdr(b, "arr", TF_GGUF_UINT8, 1000); rb_zeros(b, 64); }
static void c_arr_str_huge(rb *b) { hdr(b, 3, 0, 1); arr_hdr(b, "arr", TF_GGUF_STRING, 1ull << 63); rb_zeros(b, 64); }
static void c_arr_str_elem(rb *b) {
    hdr(b, 3, 0, 1);
    arr_hdr(b, "arr", TF_GGUF_STRING, 2);
    rb_str(b, "ok");
    rb_u64(b, UINT64_MAX);
    rb_zeros(b, 16);
}
static void c_bool2(rb *b) {
    hdr(b, 3, 0, 1);
    rb_str(b, "flag");
    rb_u32(b, TF_GGUF_BOOL);
    rb_le(b, 2, 1);
}
static void c_bool_arr2(rb *b) {
    hdr(b, 3, 0, 1);
    arr_hdr(b, "flags", TF_GGUF_BOOL, 3);
    rb_put(b, "\x01\x00\x02", 3);
}
static void c_dup_key(rb *b) {
    hdr(b, 3, 0, 3);
    kv_u32(b, "dup.key", 1);
    kv_u32(b, "other", 1);
    kv_str(b, "dup.key", "x");
}
static void align_file(rb *b, uint32_t type, uint64_t v) {
    hdr(b, 3, 0, 1);
    rb_str(b, "general.alignment");
    rb_u32(b, type);
    rb_le(b, v, type == TF_GGUF_UINT64 ? 8 : 4);
}
static void c_align_u64(rb *b) { align_file(b, TF_GGUF_UINT64, 32); }
static void c_align_i32(rb *b) { align_file(b, TF_GGUF_INT32, 32); }
static void c_align_str(rb *b) { hdr(b, 3, 0, 1); kv_str(b, "general.alignment", "32"); }
static void c_align_zero(rb *b) { align_file(b, TF_GGUF_UINT32, 0); }
static void c_align_48(rb *b) { align_file(b, TF_GGUF_UINT32, 48); }
static void c_align_big(rb *b) { align_file(b, TF_GGUF_UINT32, 1u << 17); }
static void one_tensor(rb *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t off,
                       size_t data) {
    hdr(b, 3, 1, 0);
    tinfo(b, name, n_dims, ne, type, off);
    rb_pad(b, 32);
    rb_zeros(b, data);
}
static void c_ndims0(rb *b) { one_tensor(b, "t0", 0, NULL, 0, 0, 64); }
static void c_ndims5(rb *b) { one_tensor(b, "t5", 5, (uint64_t[]){1, 1, 1, 1, 1}, 0, 0, 64); }
static void c_dim_zero(rb *b) { one_tensor(b, "tz", 2, (uint64_t[]){4, 0}, 0, 0, 64); }
static void c_dim_ovf(rb *b) { one_tensor(b, "tbig", 2, (uint64_t[]){1ull << 32, 1ull << 32}, 0, 0, 64); }
static void c_dim_huge(rb *b) { one_tensor(b, "thuge", 1, (uint64_t[]){UINT64_MAX}, 0, 0, 64); }
static void c_bytes_ovf(rb *b) { one_tensor(b, "tbytes", 2, (uint64_t[]){1ull << 30, 1ull << 30}, 0, 0, 64); }
static void c_type4(rb *b) { one_tensor(b, "tq", 1, (uint64_t[]){32}, 4, 0, 64); }
static void c_type_huge(rb *b) { one_tensor(b, "tq", 1, (uint64_t[]){32}, 1000000, 0, 64); }
static void c_block(rb *b) { one_tensor(b, "tq8", 2, (uint64_t[]){33, 1}, TF_DTYPE_Q8_0, 0, 64); }
static void c_misaligned(rb *b) { one_tensor(b, "tm", 1, (uint64_t[]){4}, 0, 4, 64); }
static void c_past_end(rb *b) { one_tensor(b, "tf", 1, (uint64_t[]){8}, 0, 64, 64); }
static void c_off_wrap(rb *b) { one_tensor(b, "tw", 1, (uint64_t[]){8}, 0, UINT64_MAX - 31, 64); }
static void c_data_short(rb *b) { one_tensor(b, "ts", 1, (uint64_t[]){16}, 0, 0, 63); }
static void c_exact_ok(rb *b) { one_tensor(b, "ok", 1, (uint64_t[]){16}, 0, 0, 64); }
static void c_overlap(rb *b) {
    hdr(b, 3, 2, 0);
    tinfo(b, "ta", 1, (uint64_t[]){16}, 0, 0);
    tinfo(b, "tb", 1, (uint64_t[]){16}, 0, 32);
    rb_pad(b, 32);
    rb_zeros(b, 128);
}
static void c_same_offset(rb *b) {
    hdr(b, 3, 2, 0);
    tinfo(b, "ta", 1, (uint64_t[]){8}, 0, 0);
    tinfo(b, "tb", 1, (uint64_t[]){8}, 0, 0);
    rb_pad(b, 32);
    rb_zeros(b, 64);
}
static void c_dup_tensor(rb *b) {
    hdr(b, 3, 2, 0);
    tinfo(b, "tdup", 1, (uint64_t[]){8}, 0, 0);
    tinfo(b, "tdup", 1, (uint64_t[]){8}, 0, 32);
    rb_pad(b, 32);
    rb_zeros(b, 64);
}
static void c_name_nul(rb *b) {
    hdr(b, 3, 1, 0);
    rb_strn(b, "blk\0x", 5);
    rb_u32(b, 1);
    rb_u64(b, 8);
    rb_u32(b, 0);
    rb_u64(b, 0);
    rb_pad(b, 32);
    rb_zeros(b, 32);
}
static const char k_name65[] = "blk.0.a_name_that_is_sixty_five_bytes_long_xxxxxxxxxxxxxxxxxxxxxx";
static const char k_name64[] = "blk.0.a_name_that_is_sixty_four_bytes_long_xxxxxxxxxxxxxxxxxxxxx";
static void c_name65(rb *b) { one_tensor(b, k_name65, 1, (uint64_t[]){8}, 0, 0, 32); }
static void c_name64_ok(rb *b) { one_tensor(b, k_name64, 1, (uint64_t[]){8}, 0, 0, 32); }
static void c_align64_off32(rb *b) {
    hdr(b, 3, 1, 1);
    kv_u32(b, "general.alignment", 64);
    tinfo(b, "t64", 1, (uint64_t[]){8}, 0, 32);
    rb_pad(b, 64);
    rb_zeros(b, 128);
}
static void c_align1_ok(rb *b) {
    hdr(b, 3, 2, 1);
    kv_u32(b, "general.alignment", 1);
    tinfo(b, "a", 1, (uint64_t[]){3}, TF_DTYPE_F16, 0);
    tinfo(b, "b", 1, (uint64_t[]){1}, 0, 6);
    rb_zeros(b, 10);
}
static void c_empty_ok(rb *b) { hdr(b, 3, 0, 0); }
static void c_trailing_ok(rb *b) { hdr(b, 3, 0, 0); rb_zeros(b, 1000); }
static void c_unsupported_type_ok(rb *b) { one_tensor(b, "q8_1", 1, (uint64_t[]){32}, 9 /* q8_1 */, 0, 36); }

typedef struct hcase {
    const char *name;
    build_fn build;
    tf_status status;
    const char *substr; /* NULL: only the file name */
} hcase;

static const hcase k_cases[] = {
    {"empty file", NULL, TF_ERR_FORMAT, "magic"},
    {"bad magic", c_bad_magic, TF_ERR_FORMAT, "not a GGUF file"},
    {"magic only", c_magic_only, TF_ERR_FORMAT, "version"},
    {"version 0", c_version0, TF_ERR_UNSUPPORTED, "version 0"},
    {"version 1", c_version1, TF_ERR_UNSUPPORTED, "version 1"},
    {"version 4", c_version4, TF_ERR_UNSUPPORTED, "version 4"},
    {"big-endian version", c_version_be, TF_ERR_UNSUPPORTED, "big-endian"},
    {"version 2 is fine", c_version2_ok, TF_OK, NULL},
    {"huge tensor count", c_huge_tensors, TF_ERR_FORMAT, "tensor count 9223372036854775808"},
    {"huge kv count", c_huge_kv, TF_ERR_FORMAT, "metadata key count 18446744073709551615"},
    {"tensor count too big for the file", c_many_tensors, TF_ERR_FORMAT, "tensor count 3"},
    {"key beyond the file", c_key_past_end, TF_ERR_FORMAT, "truncated: key of metadata entry 0"},
    {"key length 2^63", c_key_huge, TF_ERR_FORMAT, "exceeds the limit"},
    {"string value beyond the file", c_val_str_past_end, TF_ERR_FORMAT, "'general.name'"},
    {"string value length 2^63", c_val_str_huge, TF_ERR_FORMAT, "'general.name'"},
    {"value type 13", c_val_type13, TF_ERR_FORMAT, "key 'bad.type': value type 13"},
    {"value type 2^32-1", c_val_type_max, TF_ERR_FORMAT, "key 'bad.type': value type 4294967295"},
    {"nested array", c_nested, TF_ERR_FORMAT, "key 'nested': array element type 9"},
    {"array element type 77", c_arr_elem_type, TF_ERR_FORMAT, "key 'arr': array element type 77"},
    {"array count overflow (u64)", c_arr_ovf64, TF_ERR_FORMAT, "key 'arr': array length 2305843009213693952 overflows"},
    {"array count overflow (f32)", c_arr_ovf32, TF_ERR_FORMAT, "key 'arr': array length"},
    {"array beyond the file", c_arr_past_end, TF_ERR_FORMAT, "value of key 'arr'"},
    {"string array count 2^63", c_arr_str_huge, TF_ERR_FORMAT, "key 'arr': array of 9223372036854775808 strings"},
    {"string array element beyond the file", c_arr_str_elem, TF_ERR_FORMAT, "element 1 of array 'arr'"},
    {"bool value 2", c_bool2, TF_ERR_FORMAT, "key 'flag': bool value 2"},
    {"bool array element 2", c_bool_arr2, TF_ERR_FORMAT, "key 'flags': element 2 of the bool array is 2"},
    {"duplicate key", c_dup_key, TF_ERR_FORMAT, "metadata key 'dup.key' appears more than once"},
    {"alignment uint64", c_align_u64, TF_ERR_FORMAT, "general.alignment must be a uint32"},
    {"alignment int32", c_align_i32, TF_ERR_FORMAT, "general.alignment must be a uint32"},
    {"alignment string", c_align_str, TF_ERR_FORMAT, "general.alignment must be a uint32"},
    {"alignment zero", c_align_zero, TF_ERR_FORMAT, "general.alignment"},
    {"alignment 48", c_align_48, TF_ERR_FORMAT, "(got uint32 48)"},
    {"alignment 2^17", c_align_big, TF_ERR_FORMAT, "(got uint32 131072)"},
    {"n_dims 0", c_ndims0, TF_ERR_FORMAT, "tensor 't0': n_dims = 0"},
    {"n_dims 5", c_ndims5, TF_ERR_FORMAT, "tensor 't5': n_dims = 5"},
    {"zero dimension", c_dim_zero, TF_ERR_FORMAT, "tensor 'tz': dimension 1 = 0"},
    {"element count overflow", c_dim_ovf, TF_ERR_FORMAT, "tensor 'tbig': dimension 1"},
    {"dimension 2^64-1", c_dim_huge, TF_ERR_FORMAT, "tensor 'thuge': dimension 0"},
    {"byte size beyond the file", c_bytes_ovf, TF_ERR_FORMAT, "tensor 'tbytes'"},
    {"unknown type 4", c_type4, TF_ERR_UNSUPPORTED, "tensor 'tq': unknown element type 4"},
    {"unknown type 10^6", c_type_huge, TF_ERR_UNSUPPORTED, "tensor 'tq': unknown element type 1000000"},
    {"row not a block multiple", c_block, TF_ERR_FORMAT, "tensor 'tq8': row length 33"},
    {"misaligned offset", c_misaligned, TF_ERR_FORMAT, "tensor 'tm': data offset 4"},
    {"offset past the end", c_past_end, TF_ERR_FORMAT, "tensor 'tf'"},
    {"offset that wraps", c_off_wrap, TF_ERR_FORMAT, "tensor 'tw'"},
    {"data one byte short", c_data_short, TF_ERR_FORMAT, "tensor 'ts'"},
    {"data exactly to the end", c_exact_ok, TF_OK, NULL},
    {"overlapping tensors", c_overlap, TF_ERR_FORMAT, "tensor 'ta' data [0, 64) overlaps tensor 'tb'"},
    {"same offset", c_same_offset, TF_ERR_FORMAT, "overlaps"},
    {"duplicate tensor name", c_dup_tensor, TF_ERR_FORMAT, "tensor name 'tdup' appears more than once"},
    {"NUL in a tensor name", c_name_nul, TF_ERR_FORMAT, "('blk?x') contains a NUL byte"},
    {"65-byte tensor name", c_name65, TF_ERR_FORMAT, "is 65 bytes long (expected at most 64)"},
    {"64-byte tensor name", c_name64_ok, TF_OK, NULL},
    {"offset misaligned for general.alignment 64", c_align64_off32, TF_ERR_FORMAT, "alignment 64"},
    {"general.alignment 1", c_align1_ok, TF_OK, NULL},
    {"no tensors, no keys", c_empty_ok, TF_OK, NULL},
    {"trailing bytes", c_trailing_ok, TF_OK, NULL},
    {"type without kernels still parses", c_unsupported_type_ok, TF_OK, NULL},
};

static void run_case(const hcase *c, bool via_file) {
    rb b = {0};
    if (c->build) c->build(&b);
    tf_err err = {0};
    tf_status st;
    char path[512];
    if (via_file) {
        snprintf(path, sizeof path, "%s", tu_tmp_path(".gguf"));
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        if (b.n) assert_int_equal(fwrite(b.p, 1, b.n, f), b.n);
        fclose(f);
        tf_gguf g;
        st = tf_gguf_open(&g, path, &err);
        tf_gguf_close(&g);
        unlink(path);
    } else {
        snprintf(path, sizeof path, "hostile.gguf");
        st = parse_prefix(b.p, b.n, path, &err);
    }
    if (st != c->status) fail_msg("%s: status %d, expected %d (%s)", c->name, st, c->status, err.msg);
    if (st != TF_OK) {
        if (!strstr(err.msg, path)) fail_msg("%s: message does not name the file: %s", c->name, err.msg);
        if (c->substr && !strstr(err.msg, c->substr))
            fail_msg("%s: message lacks '%s': %s", c->name, c->substr, err.msg);
    }
    free(b.p);
}

static void test_hostile_values(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) run_case(&k_cases[i], false);
}

static void test_hostile_values_files(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) run_case(&k_cases[i], true);
}

/* Every single-byte corruption of the header of the model-like file either
 * parses or fails cleanly with a message naming the file. */
static void test_byte_flips(void **state) {
    (void)state;
    float f32[256] = {0};
    uint8_t q[2048] = {0};
    tf_gguf_writer *w = model_like_writer(f32, q);
    uint8_t *full;
    size_t size;
    tf_err err = {0};
    OK(tf_gguf_writer_write_mem(w, &full, &size, &err));
    size_t end = info_end(full);
    const uint8_t vals[] = {0x00, 0x01, 0x02, 0x7f, 0x80, 0xff};
    int fails = 0;
    for (size_t pos = 0; pos < end; pos++) {
        uint8_t keep = full[pos];
        for (size_t v = 0; v < sizeof vals; v++) {
            if (vals[v] == keep) continue;
            full[pos] = vals[v];
            tf_status st = parse_prefix(full, size, "flip.gguf", &err);
            if (st != TF_OK) {
                fails++;
                if (strncmp(err.msg, "flip.gguf: ", 11) != 0)
                    fail_msg("flip at %zu to 0x%02x: '%s' does not name the file", pos, vals[v], err.msg);
                assert_true(st == TF_ERR_FORMAT || st == TF_ERR_UNSUPPORTED || st == TF_ERR_NOMEM);
            }
        }
        full[pos] = keep;
    }
    assert_true(fails > 0);
    free(full);
    tf_gguf_writer_free(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_truncation_every_offset),
        cmocka_unit_test(test_hostile_values),
        cmocka_unit_test(test_hostile_values_files),
        cmocka_unit_test(test_byte_flips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
