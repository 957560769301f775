/* outpath.c — output path checks (see outpath.h). */
#include "core/outpath.h"

#include "core/mem.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int same_file(const struct stat *a, const struct stat *b) { return a->st_dev == b->st_dev && a->st_ino == b->st_ino; }

tf_status tf_out_path_check(const char *out, const char *in, tf_err *err) {
    struct stat so, si;
    if (stat(out, &so) != 0) return TF_OK; /* a new file (a missing folder fails at create, with its reason) */
    if (!S_ISREG(so.st_mode))
        return tf_errf(err, TF_ERR_INVALID_ARG, "%s: exists and is not a regular file (%s); write to a file path", out,
                       tf_file_kind(so.st_mode));
    if (!in || stat(in, &si) != 0) return TF_OK;
    if (same_file(&so, &si))
        return tf_errf(err, TF_ERR_INVALID_ARG, "%s: is the input file %s; write to another path", out, in);
    if (!S_ISDIR(si.st_mode)) return TF_OK;
    DIR *d = opendir(in);
    if (!d) return TF_OK; /* the reader reports an unreadable directory */
    tf_status st = TF_OK;
    size_t n = strlen(in);
    for (struct dirent *e; st == TF_OK && (e = readdir(d));) {
        size_t m = strlen(e->d_name);
        char *p = malloc(n + m + 2);
        if (!p) {
            st = tf_errf(err, TF_ERR_NOMEM, "%s: out of memory", out);
            break;
        }
        snprintf(p, n + m + 2, "%s/%s", in, e->d_name);
        struct stat sf;
        if (stat(p, &sf) == 0 && S_ISREG(sf.st_mode) && same_file(&so, &sf))
            st = tf_errf(err, TF_ERR_INVALID_ARG, "%s: is %s, a file of the input directory; write to another path",
                         out, p);
        free(p);
    }
    closedir(d);
    return st;
}
