/* st_write.c — the test-only safetensors writer (see st_write.h). */
#include "st_write.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int st_build_raw(const void *header, size_t header_len, uint64_t len_field, const void *data, size_t data_len,
                 uint8_t **out, size_t *out_len) {
    size_t n = 8 + header_len + data_len;
    uint8_t *p = malloc(n);
    if (!p) return -1;
    uint64_t len = len_field == ST_LEN_AUTO ? header_len : len_field;
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(len >> (8 * i));
    if (header_len) memcpy(p + 8, header, header_len);
    if (data) memcpy(p + 8 + header_len, data, data_len);
    else memset(p + 8 + header_len, 0, data_len);
    *out = p;
    *out_len = n;
    return 0;
}

/* The header JSON for e[0..n) laid out back to back; *data_len gets the total. */
static char *header_json(const st_entry *e, size_t n, const char *const *meta, size_t *data_len) {
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    if (meta) {
        cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
        for (size_t i = 0; m && meta[i] && meta[i + 1]; i += 2) cJSON_AddStringToObject(m, meta[i], meta[i + 1]);
    }
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        cJSON *t = cJSON_CreateObject(), *shape = cJSON_CreateArray(), *offs = cJSON_CreateArray();
        cJSON_AddItemToObject(root, e[i].name, t);
        cJSON_AddStringToObject(t, "dtype", e[i].dtype);
        for (int d = 0; d < e[i].n_dims; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)e[i].shape[d]));
        cJSON_AddItemToObject(t, "shape", shape);
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(off + e[i].nbytes)));
        cJSON_AddItemToObject(t, "data_offsets", offs);
        off += e[i].nbytes;
    }
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    *data_len = off;
    return text;
}

int st_build(const st_entry *e, size_t n, const char *const *meta, uint8_t **out, size_t *out_len) {
    size_t data_len = 0;
    char *json = header_json(e, n, meta, &data_len);
    if (!json) return -1;
    size_t hl = strlen(json), padded = (hl + 7) / 8 * 8;
    char *hdr = malloc(padded);
    if (!hdr) {
        free(json);
        return -1;
    }
    memcpy(hdr, json, hl);
    memset(hdr + hl, ' ', padded - hl);
    free(json);
    int rc = st_build_raw(hdr, padded, ST_LEN_AUTO, NULL, data_len, out, out_len);
    free(hdr);
    if (rc) return rc;
    size_t off = 8 + padded;
    for (size_t i = 0; i < n; i++) {
        if (e[i].nbytes) memcpy(*out + off, e[i].data, e[i].nbytes);
        off += e[i].nbytes;
    }
    return 0;
}

int st_write_bytes(const char *path, const void *p, size_t n) {
    if (n == (size_t)-1) n = strlen(p);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int rc = (n && fwrite(p, 1, n, f) != n) ? -1 : 0;
    if (fclose(f) != 0) rc = -1;
    return rc;
}

int st_write(const char *path, const st_entry *e, size_t n, const char *const *meta) {
    uint8_t *p;
    size_t len;
    if (st_build(e, n, meta, &p, &len)) return -1;
    int rc = st_write_bytes(path, p, len);
    free(p);
    return rc;
}

int st_write_raw(const char *path, const void *header, size_t header_len, uint64_t len_field, const void *data,
                 size_t data_len) {
    uint8_t *p;
    size_t len;
    if (st_build_raw(header, header_len, len_field, data, data_len, &p, &len)) return -1;
    int rc = st_write_bytes(path, p, len);
    free(p);
    return rc;
}
