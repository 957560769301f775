/*
 * lookup.c — the text-lookup draft of lookup.h.
 */
#include "decode/lookup.h"

int32_t tf_lookup_match(const int32_t *seq, int64_t n, int32_t min_len, int32_t max_len, int64_t *from) {
    *from = 0;
    if (n < 2 || min_len < 1 || max_len < min_len) return 0;
    const int32_t last = seq[n - 1];
    int32_t best = 0;
    for (int64_t j = n - 2; j >= 0; j--) {
        if (seq[j] != last) continue;
        int32_t len = 1;
        while (len < max_len && j - len >= 0 && seq[j - len] == seq[n - 1 - len]) len++;
        if (len > best) {
            best = len;
            *from = j + 1;
            if (best == max_len) break;
        }
    }
    if (best < min_len) {
        *from = 0;
        return 0;
    }
    return best;
}
