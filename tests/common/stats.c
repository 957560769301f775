/* stats.c — chi-square goodness of fit for the distribution tests (see stats.h). */
#include "stats.h"

#include <math.h>
#include <stdlib.h>

/* Regularized upper incomplete gamma Q(a, x) = Gamma(a, x) / Gamma(a), a > 0.
 * Power series of P = 1 - Q for x < a + 1, else the continued fraction of Q
 * evaluated with the modified Lentz method; both converge to ~1e-15 relative. */
double tu_gamma_q(double a, double x) {
    if (x <= 0) return 1.0;
    double log_pre = -x + a * log(x) - lgamma(a);
    if (x < a + 1) {
        /* P(a, x) = x^a e^-x / Gamma(a + 1) * sum_n x^n / ((a + 1) ... (a + n)) */
        double term = 1.0 / a, sum = term;
        for (int n = 1; n < 1000; n++) {
            term *= x / (a + n);
            sum += term;
            if (fabs(term) < fabs(sum) * 1e-17) break;
        }
        return 1.0 - sum * exp(log_pre);
    }
    /* Q(a, x) = x^a e^-x / Gamma(a) * 1 / (x + 1 - a - 1 (1 - a) / (x + 3 - a - 2 (2 - a) / ...)) */
    const double tiny = 1e-300;
    double b = x + 1 - a, c = 1.0 / tiny, d = 1.0 / b, f = d;
    for (int n = 1; n < 1000; n++) {
        double an = -n * (n - a);
        b += 2;
        d = an * d + b;
        if (fabs(d) < tiny) d = tiny;
        c = b + an / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1.0 / d;
        double delta = c * d;
        f *= delta;
        if (fabs(delta - 1) < 1e-16) break;
    }
    return f * exp(log_pre);
}

/* Survival function of the chi-square distribution with df degrees of freedom. */
double tu_chi2_sf(double x, int df) { return tu_gamma_q(0.5 * df, 0.5 * x); }

/* The x with chi2_sf(x, df) = alpha, by bisection (sf is decreasing in x). */
double tu_chi2_crit(int df, double alpha) {
    double lo = 0, hi = df + 10.0;
    while (tu_chi2_sf(hi, df) > alpha) hi *= 2;
    for (int it = 0; it < 200 && hi - lo > 1e-12 * hi; it++) {
        double mid = 0.5 * (lo + hi);
        if (tu_chi2_sf(mid, df) > alpha) lo = mid;
        else hi = mid;
    }
    return 0.5 * (lo + hi);
}



/* Pearson chi-square of counts obs[0..n) (total N) against probabilities
 * prob[0..n) (normalized here). Cells with prob 0 are not cells of the test:
 * what falls there is reported in off_support. The others are sorted by
 * expected count and, from the smallest, pooled until each pool expects >= 5;
 * an unfinished last pool joins the previous one. */
tu_gof tu_chi2_gof(const long long *obs, const double *prob, int n, double alpha) {
    int *order = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    long long total = 0;
    double psum = 0;
    tu_gof g = {0};
    int m = 0;
    for (int i = 0; i < n; i++) {
        total += obs[i];
        psum += prob[i];
        if (prob[i] > 0) order[m++] = i;
        else g.off_support += obs[i];
    }
    for (int i = 1; i < m; i++) { /* insertion sort by expected count, ascending */
        int t = order[i], j = i;
        while (j > 0 && prob[order[j - 1]] > prob[t]) { order[j] = order[j - 1]; j--; }
        order[j] = t;
    }
    double pool_e = 0, pool_o = 0, last_e = 0, last_o = 0, chi2 = 0;
    int cells = 0;
    for (int i = 0; i < m; i++) {
        pool_e += (double)total * prob[order[i]] / psum;
        pool_o += (double)obs[order[i]];
        if (pool_e >= 5.0) {
            if (cells > 0) chi2 += (last_o - last_e) * (last_o - last_e) / last_e;
            last_e = pool_e; last_o = pool_o;
            cells++;
            pool_e = pool_o = 0;
        }
    }
    if (cells == 0) { /* everything expects < 5: one cell, nothing to test */
        last_e = pool_e; last_o = pool_o;
        cells = 1;
    } else {
        last_e += pool_e; last_o += pool_o;
    }
    chi2 += last_e > 0 ? (last_o - last_e) * (last_o - last_e) / last_e : 0;
    g.chi2 = chi2;
    g.df = cells - 1;
    g.crit = g.df > 0 ? tu_chi2_crit(g.df, alpha) : 0;
    free(order);
    return g;
}

