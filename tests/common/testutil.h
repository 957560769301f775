/*
 * testutil.h — helpers shared by the test binaries (cmocka based).
 */
#ifndef TF_TESTUTIL_H
#define TF_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/rng.h"

/* Path of a file under ../shared (or $TF_SHARED_DIR), or NULL if it does not
 * exist. The result is a static buffer (valid until the next call). */
const char *tu_shared_path(const char *rel);

/* Skip the current cmocka test with a "skipped: ../shared/<rel> not found" line
 * if the shared file is absent; otherwise evaluate to its path. */
#define TU_REQUIRE_SHARED(var, rel)                                                 \
    const char *var = tu_shared_path(rel);                                          \
    if (!var) {                                                                     \
        print_message("skipped: ../shared/%s not found\n", rel);                   \
        skip();                                                                     \
    }

/* Fill with uniform values in [lo, hi). */
void tu_fill_uniform(tf_rng *rng, float *x, size_t n, float lo, float hi);
/* Normalized mean squared error sum((a-b)^2) / sum(b^2) in double. */
double tu_nmse(const float *a, const float *b, size_t n);
/* True if any element is NaN or infinite. */
int tu_has_nonfinite(const float *x, size_t n);
/* A per-test-run seed: fixed unless TF_TEST_SEED is set; printed for reproduction. */
uint64_t tu_seed(void);
/* Temporary file path under $TMPDIR (unique per call). */
const char *tu_tmp_path(const char *suffix);

#endif
