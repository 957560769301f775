/*
 * bench_text.h — the tokens `triforce bench` prefills: the start of -f TEXT, else of a
 * deterministic filler text (no data needed), else (a model without a tokenizer) random ids.
 */
#ifndef TF_BENCH_TEXT_H
#define TF_BENCH_TEXT_H

#include "triforce.h"

/* The tokens every test reads: the first n of -f TEXT, of a filler text, or random ids. */
typedef struct bench_tokens {
    int32_t *ids;
    int64_t n;
    const char *fill; /* "text", "filler" or "random ids" */
} bench_tokens;

/* At least `need` tokens (with BOS) into t (t->ids malloc'ed; the caller frees them).
 * 0, or 1 with a message on stderr naming -f when the text is too short. */
int bench_text_tokens(const tf_model *m, const tf_model_info *info, const char *file, int64_t need, bench_tokens *t);

#endif
