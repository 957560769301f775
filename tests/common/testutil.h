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

/* Path of a model fetched by `make models` (models/<name>, or
 * $TF_MODELS_DIR/<name>), or NULL if it is not there. Static buffer. */
const char *tu_model_path(const char *name);

/* Skip the current test with a "skipped: models/<name> not found" line if the
 * registry-fetched model is absent; otherwise evaluate to its path. */
#define TU_REQUIRE_MODEL(var, name)                                                 \
    const char *var = tu_model_path(name);                                          \
    if (!var) {                                                                     \
        print_message("skipped: models/%s not found (make models)\n", name);       \
        skip();                                                                     \
    }

/* The SmolLM2 file `make models` fetches. */
#define TU_SMOLLM2 "SmolLM2-135M-Instruct.Q4_1.gguf"

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
