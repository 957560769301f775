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

/* Read a whole (small) file into a malloc'd, NUL-terminated buffer. */
tf_status tf_read_file(const char *path, char **out, size_t *out_len, tf_err *err);

#endif
