/*
 * fuzz_gguf.c — libFuzzer harness for the GGUF reader (src/format/gguf.c).
 *
 * Each input is parsed from an exact-size heap copy; on success every
 * metadata value, array element and tensor byte is touched so that
 * AddressSanitizer catches any pointer the parser let escape the buffer,
 * and the typed getters are exercised on every key.
 *
 * Build and run: `make fuzz FUZZ_TARGETS=gguf FUZZ_SECONDS=300` (clang with
 * its libFuzzer runtime) compiles this file twice (the fuzzer under ASan +
 * UBSan, and with -DTF_FUZZ_WRITE_SEEDS a seed writer), writes the seeds to
 * build-fuzz/corpus/gguf and fuzzes for FUZZ_SECONDS with dev/fuzz_gguf.dict;
 * see the Makefile and dev/fuzz_run.sh.
 *
 * The seed writer makes a handful of small valid files (every value type,
 * every tensor type, several alignments) with the GGUF writer.
 */
#include "core/dtype.h"
#include "format/gguf.h"
#include "format/gguf_write.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef TF_FUZZ_WRITE_SEEDS

static volatile unsigned g_sink;

static void touch(const void *p, uint64_t n) {
    const volatile uint8_t *b = p;
    unsigned s = 0;
    for (uint64_t i = 0; i < n; i++) s += b[i];
    g_sink += s;
}

static void exercise(const tf_gguf *g) {
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const tf_gguf_kv *kv = &g->kv[i];
        touch(kv->key.data, kv->key.len);
        char key[256];
        size_t n = kv->key.len < sizeof key - 1 ? (size_t)kv->key.len : sizeof key - 1;
        memcpy(key, kv->key.data, n);
        key[n] = '\0';
        tf_err err = {0};
        uint32_t u32;
        int64_t i64;
        float f;
        bool b, found;
        tf_gguf_str s;
        const tf_gguf_kv *arr;
        (void)tf_gguf_get_u32(g, key, &u32, &found, &err);
        tf_err_clear(&err);
        (void)tf_gguf_get_i64(g, key, &i64, &found, &err);
        tf_err_clear(&err);
        (void)tf_gguf_get_f32(g, key, &f, &found, &err);
        tf_err_clear(&err);
        (void)tf_gguf_get_bool(g, key, &b, &found, &err);
        tf_err_clear(&err);
        if (tf_gguf_get_str(g, key, &s, &found, &err) == TF_OK && found) touch(s.data, s.len);
        tf_err_clear(&err);
        if (kv->type == TF_GGUF_ARRAY) {
            if (kv->arr_type == TF_GGUF_STRING) {
                for (uint64_t k = 0; k < kv->arr_n; k++) touch(kv->arr_str[k].data, kv->arr_str[k].len);
            } else {
                for (uint64_t k = 0; k < kv->arr_n; k++) {
                    g_sink += (unsigned)tf_gguf_arr_int(kv, k);
                    g_sink += (unsigned)(tf_gguf_arr_float(kv, k) != 0.0);
                }
            }
            (void)tf_gguf_get_arr(g, key, kv->arr_type, &arr, &found, &err);
            tf_err_clear(&err);
        }
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const tf_gguf_tensor *t = &g->tensors[i];
        if (strlen(t->name) > TF_GGUF_NAME_MAX) __builtin_trap();
        if (tf_gguf_find_tensor(g, t->name) == NULL) __builtin_trap();
        if ((t->offset % g->alignment) != 0) __builtin_trap();
        if (t->data < g->base || t->data + t->nbytes > g->base + g->size) __builtin_trap();
        touch(t->data, t->nbytes);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    memcpy(copy, data, size);
    tf_gguf g;
    tf_err err = {0};
    tf_status st = tf_gguf_parse(&g, "fuzz.gguf", size ? copy : NULL, size, &err);
    if (st == TF_OK) exercise(&g);
    else if (strncmp(err.msg, "fuzz.gguf: ", 11) != 0) __builtin_trap(); /* every error names the file */
    tf_gguf_close(&g);
    free(copy);
    return 0;
}

#else

static int write_seed(const char *dir, const char *name, tf_gguf_writer *w) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    tf_err err = {0};
    uint8_t *buf;
    size_t size;
    if (tf_gguf_writer_write_mem(w, &buf, &size, &err) != TF_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, size, f) != size) {
        fprintf(stderr, "cannot write %s\n", path);
        return 1;
    }
    fclose(f);
    free(buf);
    tf_gguf_writer_free(w);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    static uint8_t bytes[4096];
    for (size_t i = 0; i < sizeof bytes; i++) bytes[i] = (uint8_t)(i * 37 + 11);
    tf_err err = {0};
    int rc = 0;

    /* 1: every value type */
    tf_gguf_writer *w = tf_gguf_writer_new();
    tf_gguf_writer_set_u8(w, "u8", 1, &err);
    tf_gguf_writer_set_i8(w, "i8", -1, &err);
    tf_gguf_writer_set_u16(w, "u16", 2, &err);
    tf_gguf_writer_set_i16(w, "i16", -2, &err);
    tf_gguf_writer_set_u32(w, "u32", 3, &err);
    tf_gguf_writer_set_i32(w, "i32", -3, &err);
    tf_gguf_writer_set_u64(w, "u64", 4, &err);
    tf_gguf_writer_set_i64(w, "i64", -4, &err);
    tf_gguf_writer_set_f32(w, "f32", 0.5f, &err);
    tf_gguf_writer_set_f64(w, "f64", 0.25, &err);
    tf_gguf_writer_set_bool(w, "bool", true, &err);
    tf_gguf_writer_set_str(w, "str", "hello", &err);
    const char *strs[] = {"a", "bc", ""};
    tf_gguf_writer_set_arr_str(w, "astr", strs, 3, &err);
    int32_t ai[] = {1, -2, 3};
    tf_gguf_writer_set_arr(w, "ai32", TF_GGUF_INT32, ai, 3, &err);
    float af[] = {1.5f, -2.5f};
    tf_gguf_writer_set_arr(w, "af32", TF_GGUF_FLOAT32, af, 2, &err);
    bool ab[] = {true, false};
    tf_gguf_writer_set_arr(w, "abool", TF_GGUF_BOOL, ab, 2, &err);
    rc |= write_seed(argv[1], "values.gguf", w);

    /* 2..4: every tensor type, under three alignments */
    const uint32_t aligns[] = {0, 1, 64};
    for (int a = 0; a < 3; a++) {
        w = tf_gguf_writer_new();
        tf_gguf_writer_set_str(w, "general.architecture", "llama", &err);
        if (aligns[a]) tf_gguf_writer_set_u32(w, "general.alignment", aligns[a], &err);
        tf_gguf_writer_add_tensor(w, "f32", TF_DTYPE_F32, 1, (int64_t[]){3}, bytes, &err);
        tf_gguf_writer_add_tensor(w, "f16", TF_DTYPE_F16, 2, (int64_t[]){2, 3}, bytes, &err);
        tf_gguf_writer_add_tensor(w, "bf16", TF_DTYPE_BF16, 3, (int64_t[]){1, 2, 2}, bytes, &err);
        tf_gguf_writer_add_tensor(w, "q8_0", TF_DTYPE_Q8_0, 4, (int64_t[]){32, 1, 2, 1}, bytes, &err);
        tf_gguf_writer_add_tensor(w, "q4_0", TF_DTYPE_Q4_0, 2, (int64_t[]){32, 2}, bytes, &err);
        tf_gguf_writer_add_tensor(w, "q4_k", TF_DTYPE_Q4_K, 1, (int64_t[]){256}, bytes, &err);
        tf_gguf_writer_add_tensor(w, "q6_k", TF_DTYPE_Q6_K, 1, (int64_t[]){256}, bytes, &err);
        char name[32];
        snprintf(name, sizeof name, "tensors_align%u.gguf", aligns[a]);
        rc |= write_seed(argv[1], name, w);
    }
    if (err.status != TF_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    return rc;
}

#endif
