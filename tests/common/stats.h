/*
 * stats.h — Pearson chi-square goodness of fit with exact critical values,
 * shared by the distribution tests of the verifier and of the decoding
 * hierarchy.
 */
#ifndef TF_TEST_STATS_H
#define TF_TEST_STATS_H

/* Regularized upper incomplete gamma Q(a, x), a > 0 (~1e-15 relative). */
double tu_gamma_q(double a, double x);
/* Survival function of the chi-square distribution with df degrees of freedom. */
double tu_chi2_sf(double x, int df);
/* The x with tu_chi2_sf(x, df) = alpha. */
double tu_chi2_crit(int df, double alpha);

typedef struct tu_gof {
    double chi2;           /* Pearson statistic over the merged cells with prob > 0 */
    int df;                /* merged cells - 1 */
    double crit;           /* critical value at the requested false-alarm rate */
    long long off_support; /* observations in cells with prob == 0 */
} tu_gof;

/* Pearson chi-square of counts obs[0..n) against probabilities prob[0..n)
 * (normalized here). Cells with prob 0 are not cells of the test: what falls
 * there is reported in off_support. The others are sorted by expected count
 * and pooled from the smallest until each pool expects >= 5; an unfinished
 * last pool joins the previous one. */
tu_gof tu_chi2_gof(const long long *obs, const double *prob, int n, double alpha);

#endif
