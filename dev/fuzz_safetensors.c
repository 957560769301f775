/*
 * fuzz_safetensors.c — libFuzzer harness for the safetensors reader
 * (src/format/safetensors.c).
 *
 * The first input byte chooses what the rest is:
 *   even: a safetensors file, parsed from an exact-size heap copy with
 *         tf_st_parse (header length, UTF-8 and JSON checks, dtypes, shapes,
 *         data offsets, overlaps, __metadata__);
 *   odd:  a model.safetensors.index.json, written into a per-process
 *         directory under $TMPDIR (or /tmp) next to two fixed shard files and
 *         opened with tf_st_set_open (weight_map, shard names, metadata).
 * On success every record is checked against what safetensors.h promises
 * (sorted unique names, byte ranges inside the data section and disjoint,
 * sizes = dtype size x element count, lookups find every entry) and every
 * tensor byte is read, so AddressSanitizer catches a pointer the parser let
 * escape the buffer; a broken promise is __builtin_trap(). On failure the
 * message must name the file (or the directory). With TF_FUZZ_VERBOSE set it
 * prints what became of each input (to check seeds: `fuzz_safetensors -runs=0 DIR`).
 *
 * Build and run: `make fuzz FUZZ_TARGETS=safetensors` (see the Makefile). With
 * -DTF_FUZZ_WRITE_SEEDS this file is instead a seed writer: `seeds_safetensors
 * DIR` writes small valid files (every dtype, scalar / empty / 8-D shapes,
 * metadata, unpadded headers) and index files, each with its mode byte.
 */
#include "format/safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The two shards every index is opened next to (names as in real checkpoints). */
#define SHARD1 "model-00001-of-00002.safetensors"
#define SHARD2 "model-00002-of-00002.safetensors"

/* Build a safetensors file: the 8-byte length, the header padded with spaces
 * to a multiple of 8 when pad is set, then data_len bytes (a repeating
 * pattern). Returns a malloc'd buffer and its size in *size, NULL on failure. */
static uint8_t *st_file(const char *header, bool pad, size_t data_len, size_t *size) {
    size_t h = strlen(header), hp = pad ? (h + 7) / 8 * 8 : h;
    uint8_t *b = malloc(8 + hp + data_len + 1);
    if (!b) return NULL;
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)hp >> (8 * i));
    memcpy(b + 8, header, h);
    memset(b + 8 + h, ' ', hp - h);
    for (size_t i = 0; i < data_len; i++) b[8 + hp + i] = (uint8_t)(i * 37 + 11);
    *size = 8 + hp + data_len;
    return b;
}

static int write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(p, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

/* The shards: SHARD1 holds "a" and "b", SHARD2 holds "c", "d" and "e". */
static const char k_shard1[] =
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
    "\"b\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[8,16]}}";
static const char k_shard2[] =
    "{\"__metadata__\":{\"format\":\"pt\"},\"c\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[0,6]},"
    "\"d\":{\"dtype\":\"I8\",\"shape\":[],\"data_offsets\":[6,7]},"
    "\"e\":{\"dtype\":\"U8\",\"shape\":[0,4],\"data_offsets\":[7,7]}}";

#ifndef TF_FUZZ_WRITE_SEEDS

static volatile unsigned g_sink;
static char g_dir[256];
static char g_index[320];
static bool g_verbose; /* TF_FUZZ_VERBOSE set: say what became of each input (for checking seeds) */

static void touch(const void *p, uint64_t n) {
    const volatile uint8_t *b = p;
    unsigned s = 0;
    for (uint64_t i = 0; i < n; i++) s += b[i];
    g_sink += s;
}

static void remove_dir(void) {
    static const char *const names[] = {TF_ST_INDEX_NAME, SHARD1, SHARD2};
    char path[512];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", g_dir, names[i]);
        unlink(path);
    }
    rmdir(g_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/tf_fuzz_st_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("fuzz_safetensors: mkdtemp");
        exit(1);
    }
    atexit(remove_dir);
    snprintf(g_index, sizeof g_index, "%s/%s", g_dir, TF_ST_INDEX_NAME);
    g_verbose = getenv("TF_FUZZ_VERBOSE") != NULL;
    const char *hdr[2] = {k_shard1, k_shard2};
    const char *name[2] = {SHARD1, SHARD2};
    const size_t data_len[2] = {16, 7};
    for (int i = 0; i < 2; i++) {
        char path[512];
        size_t size;
        uint8_t *b = st_file(hdr[i], true, data_len[i], &size);
        snprintf(path, sizeof path, "%s/%s", g_dir, name[i]);
        if (!b || write_file(path, b, size) != 0) {
            fprintf(stderr, "fuzz_safetensors: cannot write %s\n", path);
            exit(1);
        }
        free(b);
    }
    return 0;
}

/* Everything safetensors.h promises about a parsed file. */
static void check_file(const tf_st_file *f) {
    if (f->size < 8 || f->header_len == 0 || f->header_len > f->size - 8) __builtin_trap();
    if (f->data != f->base + 8 + f->header_len || f->data_size != f->size - 8 - f->header_len) __builtin_trap();
    uint64_t total = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const tf_st_tensor *t = &f->tensors[i];
        size_t len = strnlen(t->name, sizeof t->name);
        if (len == 0 || len > TF_ST_NAME_MAX) __builtin_trap();
        if (i > 0 && strcmp(f->tensors[i - 1].name, t->name) >= 0) __builtin_trap(); /* sorted, unique */
        if ((unsigned)t->dtype >= TF_ST_DTYPE_COUNT || t->elem_size != tf_st_dtype_size(t->dtype)) __builtin_trap();
        if (strcmp(t->dtype_name, tf_st_dtype_name(t->dtype)) != 0) __builtin_trap();
        if (t->n_dims > TF_ST_MAX_DIMS) __builtin_trap();
        uint64_t count = 1;
        for (uint32_t d = 0; d < TF_ST_MAX_DIMS; d++) {
            if (d >= t->n_dims) {
                if (t->shape[d] != 0) __builtin_trap();
                continue;
            }
            if (t->shape[d] < 0) __builtin_trap();
            if (t->shape[d] == 0) count = 0;
            else if (count && __builtin_mul_overflow(count, (uint64_t)t->shape[d], &count)) __builtin_trap();
        }
        if (t->n_elements != count || t->nbytes != count * t->elem_size) __builtin_trap();
        if (t->offset > f->data_size || t->nbytes > f->data_size - t->offset) __builtin_trap();
        if (t->data != f->data + t->offset) __builtin_trap();
        if (tf_st_find(f, t->name) != t) __builtin_trap();
        touch(t->data, t->nbytes);
        total += t->nbytes;
        /* no other non-empty tensor shares a byte with this one */
        for (uint64_t j = 0; j < i && f->n_tensors <= 64; j++) {
            const tf_st_tensor *u = &f->tensors[j];
            if (t->nbytes && u->nbytes && t->offset < u->offset + u->nbytes && u->offset < t->offset + t->nbytes)
                __builtin_trap();
        }
    }
    if (total != f->total_bytes || total > f->data_size) __builtin_trap();
    for (uint64_t i = 0; i < f->n_meta; i++) {
        if (i > 0 && strcmp(f->meta[i - 1].key, f->meta[i].key) >= 0) __builtin_trap();
        if (tf_st_meta_get(f, f->meta[i].key) != f->meta[i].value) __builtin_trap();
        touch(f->meta[i].value, strlen(f->meta[i].value));
    }
    if (tf_st_find(f, "") != NULL) __builtin_trap();
}

static void fuzz_file(const uint8_t *data, size_t size) {
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return;
    memcpy(copy, data, size);
    tf_st_file f;
    tf_err err = {0};
    tf_status st = tf_st_parse(&f, "fuzz.safetensors", size ? copy : NULL, size, &err);
    if (g_verbose) fprintf(stderr, "fuzz_safetensors: file: %s\n", st == TF_OK ? "accepted" : err.msg);
    if (st == TF_OK) check_file(&f);
    else if (err.status != st || strncmp(err.msg, "fuzz.safetensors: ", 18) != 0) __builtin_trap();
    tf_st_close(&f);
    tf_st_close(&f); /* closing twice is safe */
    free(copy);
}

static void fuzz_index(const uint8_t *data, size_t size) {
    if (write_file(g_index, data, size) != 0) {
        fprintf(stderr, "fuzz_safetensors: cannot write %s\n", g_index);
        abort();
    }
    tf_st_set s;
    tf_err err = {0};
    tf_status st = tf_st_set_open(&s, g_dir, &err);
    if (g_verbose) fprintf(stderr, "fuzz_safetensors: index: %s\n", st == TF_OK ? "accepted" : err.msg);
    if (st == TF_OK) {
        if (!s.sharded || s.n_files == 0) __builtin_trap();
        uint64_t n = 0, bytes = 0;
        for (uint32_t i = 0; i < s.n_files; i++) {
            check_file(&s.files[i]);
            n += s.files[i].n_tensors;
            bytes += s.files[i].total_bytes;
        }
        if (n != s.n_tensors || bytes != s.total_bytes) __builtin_trap();
        for (uint64_t i = 0; i < s.n_tensors; i++) {
            const tf_st_file *file = NULL;
            const tf_st_tensor *t = tf_st_set_find(&s, s.index[i].tensor->name, &file);
            if (t != s.index[i].tensor || file != &s.files[s.index[i].file]) __builtin_trap();
            if (i > 0 && strcmp(s.index[i - 1].tensor->name, t->name) >= 0) __builtin_trap();
        }
        for (uint64_t i = 0; i < s.n_meta; i++)
            if (tf_st_set_meta_get(&s, s.meta[i].key) != s.meta[i].value) __builtin_trap();
    } else if (err.status != st || !strstr(err.msg, g_dir)) {
        __builtin_trap();
    }
    tf_st_set_close(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    if (data[0] & 1) fuzz_index(data + 1, size - 1);
    else fuzz_file(data + 1, size - 1);
    return 0;
}

#else

/* Write mode byte + bytes as DIR/name. */
static int seed(const char *dir, const char *name, uint8_t mode, const void *p, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    uint8_t *b = malloc(n + 1);
    if (!b) return 1;
    b[0] = mode;
    memcpy(b + 1, p, n);
    int rc = write_file(path, b, n + 1);
    free(b);
    if (rc) fprintf(stderr, "cannot write %s\n", path);
    return rc ? 1 : 0;
}

static int seed_st(const char *dir, const char *name, const char *header, bool pad, size_t data_len) {
    size_t size;
    uint8_t *b = st_file(header, pad, data_len, &size);
    if (!b) return 1;
    int rc = seed(dir, name, 0, b, size);
    free(b);
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    int rc = 0;
    /* files: the data section ends where the last tensor ends */
    rc |= seed_st(dir, "file_shard1", k_shard1, true, 16);
    rc |= seed_st(dir, "file_shard2", k_shard2, true, 7);
    rc |= seed_st(dir, "file_unpadded", k_shard2, false, 7);
    rc |= seed_st(dir, "file_empty", "{}", true, 0);
    rc |= seed_st(dir, "file_meta_only", "{\"__metadata__\":{\"format\":\"pt\",\"a\":\"\\u00e9\\n\"}}", true, 0);
    rc |= seed_st(dir, "file_dtypes",
                  "{\"f64\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},"
                  "\"i64\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[8,16]},"
                  "\"u64\":{\"dtype\":\"U64\",\"shape\":[1],\"data_offsets\":[16,24]},"
                  "\"f32\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[24,28]},"
                  "\"i32\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[28,32]},"
                  "\"u32\":{\"dtype\":\"U32\",\"shape\":[1],\"data_offsets\":[32,36]},"
                  "\"f16\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[36,38]},"
                  "\"bf16\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[38,40]},"
                  "\"i16\":{\"dtype\":\"I16\",\"shape\":[1],\"data_offsets\":[40,42]},"
                  "\"u16\":{\"dtype\":\"U16\",\"shape\":[1],\"data_offsets\":[42,44]},"
                  "\"i8\":{\"dtype\":\"I8\",\"shape\":[1],\"data_offsets\":[44,45]},"
                  "\"u8\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[45,46]},"
                  "\"bool\":{\"dtype\":\"BOOL\",\"shape\":[1],\"data_offsets\":[46,47]},"
                  "\"e4m3\":{\"dtype\":\"F8_E4M3\",\"shape\":[1],\"data_offsets\":[47,48]},"
                  "\"e5m2\":{\"dtype\":\"F8_E5M2\",\"shape\":[1],\"data_offsets\":[48,49]}}",
                  true, 49);
    rc |= seed_st(dir, "file_shapes",
                  "{\"scalar\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
                  "\"zero\":{\"dtype\":\"F32\",\"shape\":[3,0,2],\"data_offsets\":[4,4]},"
                  "\"eight\":{\"dtype\":\"U8\",\"shape\":[1,2,1,2,1,2,1,2],\"data_offsets\":[4,20]},"
                  "\"x\":{\"dtype\":\"F16\",\"shape\":[2,3],\"data_offsets\":[20,32],\"extra\":[1,{\"k\":null}]}}",
                  true, 32);
    rc |= seed_st(dir, "file_order",
                  "{\"model.layers.0.self_attn.q_proj.weight\":{\"dtype\":\"BF16\",\"shape\":[4,2],"
                  "\"data_offsets\":[16,32]},\"model.embed_tokens.weight\":{\"dtype\":\"BF16\",\"shape\":[4,2],"
                  "\"data_offsets\":[0,16]}}",
                  false, 32);
    /* indexes next to SHARD1 and SHARD2 */
    static const char idx_full[] = "{\"metadata\":{\"total_size\":23,\"format\":\"pt\",\"ok\":true,\"x\":null},"
                                   "\"weight_map\":{\"a\":\"" SHARD1 "\",\"b\":\"" SHARD1 "\",\"c\":\"" SHARD2
                                   "\",\"d\":\"" SHARD2 "\",\"e\":\"" SHARD2 "\"}}";
    static const char idx_part[] = "{\"weight_map\":{\"b\":\"" SHARD1 "\",\"c\":\"" SHARD2 "\"}}";
    static const char idx_one[] = "{\"metadata\":{},\"weight_map\":{\"a\":\"" SHARD1 "\"}}";
    rc |= seed(dir, "index_full", 1, idx_full, sizeof idx_full - 1);
    rc |= seed(dir, "index_part", 1, idx_part, sizeof idx_part - 1);
    rc |= seed(dir, "index_one", 1, idx_one, sizeof idx_one - 1);
    return rc;
}

#endif
