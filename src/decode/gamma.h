/*
 * gamma.h — choosing gamma2 (candidates per target pass) while decoding.
 *
 * A target pass over k candidates confirms on average E(k) = sum_{j=0..k}
 * alpha^j tokens (alpha: the per-candidate acceptance rate) and costs k draft
 * tokens plus one target pass over k + 1 rows. The controller keeps running
 * estimates of alpha, of the draft's time per candidate and of the target's
 * time per pass for each row count it has seen (a least-squares line through
 * them for row counts not seen), and proposes the k in [1, k_max] with the most
 * tokens per second. It explores: the first passes alternate between k_max and
 * k_max / 2, and every EXPLORE_EVERY passes it tries a neighbour of its choice.
 *
 * The choice changes only how much is drafted per target pass, never what is
 * emitted: every pass is an exact speculative verification (and under the
 * keyed coupling, keyed.h, even the sampled text is the same). Under the
 * residual coupling it changes how the random stream is consumed, so the same
 * seed gives the same text only with a fixed gamma2.
 */
#ifndef TF_DECODE_GAMMA_H
#define TF_DECODE_GAMMA_H

#include <stdint.h>

#define TF_GAMMA_MAX_ROWS 17 /* row counts 1..16 */

typedef struct tf_gamma_ctl {
    int k_max;
    double t_rows[TF_GAMMA_MAX_ROWS]; /* running seconds of a target pass by its row count */
    int n_rows[TF_GAMMA_MAX_ROWS];    /* passes seen by row count */
    double draft_s;                   /* running seconds per candidate from the level below */
    int n_draft;
    double acc_a, acc_r;              /* decayed counts of accepted candidates and of rejections */
    int64_t passes;
    int last;                         /* the latest choice */
} tf_gamma_ctl;

void tf_gamma_init(tf_gamma_ctl *c, int k_max);
/* Candidates to ask for in the next target pass. */
int tf_gamma_next(tf_gamma_ctl *c);
/* After a target pass: the level below produced n_cand candidates in
 * draft_s seconds; the target verified them in a pass of rows rows taking
 * target_s seconds and accepted `accepted` (rejecting one if accepted < n_cand). */
void tf_gamma_observe(tf_gamma_ctl *c, int n_cand, double draft_s, int rows, double target_s, int accepted);
/* Expected tokens per second of k candidates per pass under the current
 * estimates (0 while there is not enough to estimate; for tests and logs). */
double tf_gamma_rate(const tf_gamma_ctl *c, int k);
/* The estimated cost of a target pass over `rows` rows (seconds; < 0 unknown). */
double tf_gamma_target_cost(const tf_gamma_ctl *c, int rows);

#endif
