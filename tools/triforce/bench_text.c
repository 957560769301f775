/* bench_text.c — the context tokens of `triforce bench` (see bench_text.h). */
#include "bench_text.h"
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A deterministic filler of about `bytes` bytes: plain sentences from small
 * word lists, numbered so that no stretch repeats (a haystack with no needle). */
static char *filler_text(size_t bytes) {
    static const char *const subj[] = {"The archivist", "A traveller", "The old miller", "Her brother",
                                       "The harbour master", "A clerk", "The gardener", "The captain"};
    static const char *const verb[] = {"carried", "counted", "mended", "painted", "sold", "hid", "found", "weighed"};
    static const char *const obj[] = {"the blue lantern", "a crate of apples", "the ledger", "seven silver keys",
                                      "the torn map", "a basket of bread", "the brass compass", "two wool blankets"};
    static const char *const when[] = {"near the north gate", "before the market opened", "in the cellar",
                                       "by the river", "after the storm", "at the edge of town", "behind the chapel",
                                       "on the third day"};
    char *s = malloc(bytes + 256);
    if (!s) return NULL;
    size_t used = 0;
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (unsigned k = 0; used < bytes; k++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int w = snprintf(s + used, 256, "%s%s %s %s %s on day %u.%s", k % 40 == 0 ? "Record of the town. " : "",
                         subj[x & 7], verb[(x >> 3) & 7], obj[(x >> 6) & 7], when[(x >> 9) & 7], k + 1,
                         k % 6 == 5 ? "\n\n" : " ");
        used += (size_t)w;
    }
    s[used] = '\0';
    return s;
}

/* Tokenizes the start of text[0..len) (with BOS), reading more until `need`
 * tokens come out or the text ends. 0, or 1 with a message. */
static int tokenize_prefix(const tf_model *m, const char *text, size_t len, int64_t need, const char *what,
                           bench_tokens *t) {
    size_t bytes = (size_t)need * 8 + 4096;
    for (;;) {
        size_t take = bytes < len ? bytes : len;
        while (take < len && take > 0 && text[take] != ' ' && text[take] != '\n') take--; /* whole words */
        if (take == 0) take = bytes < len ? bytes : len;
        size_t n = 0;
        free(t->ids);
        if (!(t->ids = cli_tokenize(m, text, take, true, false, &n))) {
            fprintf(stderr, "triforce bench: cannot tokenize %s\n", what);
            return 1;
        }
        if ((int64_t)n >= need) {
            t->n = (int64_t)n;
            return 0;
        }
        if (take >= len) {
            fprintf(stderr,
                    "triforce bench: %s gives %zu tokens, fewer than the %lld that the largest -p / -d / --rows "
                    "needs; give a longer text or smaller sizes\n",
                    what, n, (long long)need);
            return 1;
        }
        bytes *= 2;
    }
}

int bench_text_tokens(const tf_model *m, const tf_model_info *info, const char *file, int64_t need, bench_tokens *t) {
    if (!info->has_tokenizer) {
        /* no tokenizer: deterministic ids (the timing does not depend on them; acceptance does) */
        t->ids = malloc(sizeof(int32_t) * (size_t)need);
        if (!t->ids) return 1;
        uint64_t x = 88172645463325252ull;
        for (int64_t i = 0; i < need; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            t->ids[i] = (int32_t)(x % (uint64_t)info->n_vocab);
        }
        t->n = need;
        t->fill = "random ids";
        return 0;
    }
    if (file) {
        size_t len;
        char *text = cli_read_text(file, &len);
        if (!text) return 1;
        char what[1200];
        snprintf(what, sizeof what, "-f %s", file);
        int rc = tokenize_prefix(m, text, len, need, what, t);
        free(text);
        t->fill = "text";
        return rc;
    }
    for (size_t bytes = (size_t)need * 8 + 4096;; bytes *= 2) {
        char *text = filler_text(bytes);
        if (!text) return 1;
        size_t len = strlen(text);
        int rc = tokenize_prefix(m, text, len, need, "the filler text", t);
        free(text);
        t->fill = "filler";
        if (rc == 0 || bytes > ((size_t)1 << 34)) return rc;
        fprintf(stderr, "triforce bench: generating a longer filler text\n");
    }
}
