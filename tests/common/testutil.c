/* testutil.c — shared test helpers. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

const char *tu_shared_path(const char *rel) {
    static char buf[1024];
    const char *dir = getenv("TF_SHARED_DIR");
    const char *cands[] = {dir, "../shared", "../../shared"};
    for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++) {
        if (!cands[i]) continue;
        snprintf(buf, sizeof buf, "%s/%s", cands[i], rel);
        if (access(buf, R_OK) == 0) return buf;
    }
    return NULL;
}

const char *tu_model_path(const char *name) {
    static char buf[1024];
    const char *dir = getenv("TF_MODELS_DIR");
    const char *cands[] = {dir, "models"};
    for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++) {
        if (!cands[i]) continue;
        snprintf(buf, sizeof buf, "%s/%s", cands[i], name);
        if (access(buf, R_OK) == 0) return buf;
    }
    return NULL;
}

void tu_fill_uniform(tf_rng *rng, float *x, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * (float)tf_rng_uniform(rng);
}

double tu_nmse(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
    }
    return den > 0 ? num / den : num;
}

int tu_has_nonfinite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 1;
    return 0;
}

uint64_t tu_seed(void) {
    static uint64_t seed;
    static int init;
    if (!init) {
        const char *s = getenv("TF_TEST_SEED");
        seed = s ? strtoull(s, NULL, 0) : 0x5eed1234ull;
        init = 1;
        if (s) fprintf(stderr, "test seed 0x%llx\n", (unsigned long long)seed);
    }
    return seed;
}

const char *tu_tmp_path(const char *suffix) {
    static char buf[512];
    static int counter;
    const char *tmp = getenv("TMPDIR");
    snprintf(buf, sizeof buf, "%s/tf_test_%d_%d%s", tmp ? tmp : "/tmp", (int)getpid(), counter++, suffix);
    return buf;
}
