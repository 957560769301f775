/*
 * mem.h — aligned allocation, overflow-checked size arithmetic, read-only
 * file mapping.
 */
#ifndef TF_CORE_MEM_H
#define TF_CORE_MEM_H

#include "core/error.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TF_ALIGN 64

/* 64-byte aligned allocation; NULL on failure (or size 0 -> valid pointer). */
void *tf_alloc(size_t size);
/* Same, zero-filled. */
void *tf_calloc(size_t size);
void tf_free(void *p);

/* Large zero-filled region from the OS (pages are committed on first touch);
 * NULL on failure. Free with tf_free_pages and the same size. */
void *tf_alloc_pages(size_t size);
void tf_free_pages(void *p, size_t size);

/* Overflow-checked arithmetic: return false on overflow (out unchanged). */
static inline bool tf_mul_ok(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool tf_add_ok(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

/* A read-only mapping of a whole file. */
typedef struct tf_mmap {
    const uint8_t *data;
    size_t size;
} tf_mmap;

/* Map `path` read-only. On failure fills err (naming the path) and leaves
 * *map zeroed. An empty file maps to data == NULL, size == 0. */
tf_status tf_mmap_open(tf_mmap *map, const char *path, tf_err *err);
void tf_mmap_close(tf_mmap *map);

/* Read a whole (small) file into a malloc'd, NUL-terminated buffer. Pipes
 * and devices are read to their end; a directory is refused by name. */
tf_status tf_read_file(const char *path, char **out, size_t *out_len, tf_err *err);
/* The same from an open stream (standard input, say); name is for messages. */
tf_status tf_read_stream(FILE *f, const char *name, char **out, size_t *out_len, tf_err *err);

/* What a file of stat mode `mode` is, for messages: "a regular file",
 * "a directory", "a FIFO", "a character device", ... */
const char *tf_file_kind(unsigned mode);

/* Whether `path` is there as a regular file: TF_OK with *present false when
 * it does not exist; an error naming what it is when it exists but is not a
 * regular file (a FIFO, a directory), or when it cannot be looked at. */
tf_status tf_probe_regular_file(const char *path, bool *present, tf_err *err);

#endif
