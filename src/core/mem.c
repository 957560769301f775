/* mem.c — aligned allocation and read-only file mapping (POSIX mmap). */
#include "core/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

void *tf_alloc(size_t size) {
    void *p = NULL;
    size_t sz = (size + TF_ALIGN - 1) & ~(size_t)(TF_ALIGN - 1);
    if (sz < size) return NULL;
    if (sz == 0) sz = TF_ALIGN;
    if (posix_memalign(&p, TF_ALIGN, sz) != 0) return NULL;
    return p;
}

void *tf_calloc(size_t size) {
    void *p = tf_alloc(size);
    if (p) memset(p, 0, size);
    return p;
}

void tf_free(void *p) { free(p); }

void *tf_alloc_pages(size_t size) {
    if (size == 0) size = 1;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void tf_free_pages(void *p, size_t size) {
    if (p) munmap(p, size ? size : 1);
}

tf_status tf_mmap_open(tf_mmap *map, const char *path, tf_err *err) {
    memset(map, 0, sizeof *map);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return tf_errf(err, TF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return tf_errf(err, TF_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return tf_errf(err, TF_ERR_IO, "%s: is %s (expected a regular file)", path, tf_file_kind(st.st_mode));
    }
    if (st.st_size == 0) {
        close(fd);
        return TF_OK;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED)
        return tf_errf(err, TF_ERR_IO, "%s: cannot map %lld bytes: %s", path,
                       (long long)st.st_size, strerror(e));
    map->data = p;
    map->size = (size_t)st.st_size;
    return TF_OK;
}

void tf_mmap_close(tf_mmap *map) {
    if (map->data) munmap((void *)map->data, map->size);
    memset(map, 0, sizeof *map);
}

const char *tf_file_kind(unsigned mode) {
    return S_ISREG(mode)    ? "a regular file"
           : S_ISDIR(mode)  ? "a directory"
           : S_ISCHR(mode)  ? "a character device"
           : S_ISBLK(mode)  ? "a block device"
           : S_ISFIFO(mode) ? "a FIFO"
           : S_ISSOCK(mode) ? "a socket"
                            : "a special file";
}

tf_status tf_probe_regular_file(const char *path, bool *present, tf_err *err) {
    struct stat sb;
    *present = false;
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT) return TF_OK;
        return tf_errf(err, TF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    if (!S_ISREG(sb.st_mode))
        return tf_errf(err, TF_ERR_IO, "%s: is %s (expected a regular file)", path, tf_file_kind(sb.st_mode));
    *present = true;
    return TF_OK;
}

tf_status tf_read_stream(FILE *f, const char *name, char **out, size_t *out_len, tf_err *err) {
    *out = NULL;
    if (out_len) *out_len = 0;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    if (!buf) return tf_errf(err, TF_ERR_NOMEM, "%s: out of memory", name);
    for (;;) {
        if (len + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                return tf_errf(err, TF_ERR_NOMEM, "%s: out of memory reading it", name);
            }
            buf = nb;
            cap *= 2;
        }
        errno = 0;
        size_t n = fread(buf + len, 1, cap - 1 - len, f);
        len += n;
        if (n == 0) break;
    }
    if (ferror(f)) {
        int e = errno;
        free(buf);
        return tf_errf(err, TF_ERR_IO, "%s: read error: %s", name, e ? strerror(e) : "unknown error");
    }
    buf[len] = '\0';
    *out = buf;
    if (out_len) *out_len = len;
    return TF_OK;
}

tf_status tf_read_file(const char *path, char **out, size_t *out_len, tf_err *err) {
    *out = NULL;
    if (out_len) *out_len = 0;
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return tf_errf(err, TF_ERR_IO, "%s: is a directory (expected a file)", path);
    FILE *f = fopen(path, "rb");
    if (!f) return tf_errf(err, TF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    tf_status st = tf_read_stream(f, path, out, out_len, err);
    fclose(f);
    return st;
}
