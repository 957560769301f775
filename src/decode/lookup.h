/*
 * lookup.h — drafting by looking the text up in itself: the newest tokens of
 * the sequence are matched against every earlier place in it (prompt and
 * generated text alike), and the tokens that followed the longest match (the
 * newest of equally long ones) are proposed.
 *
 * Long documents are where this pays: an answer quotes names, numbers and
 * phrases of the document, code repeats identifiers, and a model that loops
 * repeats itself. It needs no model and no cache, so a proposal costs
 * microseconds; whether it is worth the rows it adds to the pass that verifies
 * it is measured, not assumed (docs/BENCHMARKS.md).
 *
 * The decoder proposes at most as many tokens as the match is long: a match of
 * 2 tokens rarely predicts 8 more, and every wrong proposal is a row the
 * verifying pass pays for.
 *
 * A proposal is deterministic: as a draft distribution it is one-hot, so exact
 * verification (verify.h) accepts it with probability p(x) and otherwise draws
 * from p without x; the output is distributed as the verifying level's model.
 */
#ifndef TF_DECODE_LOOKUP_H
#define TF_DECODE_LOOKUP_H

#include <stdint.h>

/* Longest suffix compared (a longer match is not preferred over this). */
#define TF_LOOKUP_MAX_MATCH 16

/* Find the newest j < n - 1 whose last L tokens seq[j-L+1 .. j] equal the
 * sequence's last L tokens seq[n-L .. n-1], with L as long as possible up to
 * max_len (ties: the newest j). Returns L when L >= min_len >= 1, with *from =
 * j + 1, the first token to propose (*from <= n - 1: the copy may run into the
 * tokens it proposes, as a repeated phrase does); otherwise 0. */
int32_t tf_lookup_match(const int32_t *seq, int64_t n, int32_t min_len, int32_t max_len, int64_t *from);

#endif
