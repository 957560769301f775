/* gamma.c — the gamma2 controller of gamma.h. */
#include "decode/gamma.h"

#include <math.h>
#include <string.h>

#define WARMUP_PASSES 6   /* alternate k_max and k_max / 2 this long */
#define EXPLORE_EVERY 16  /* then try a neighbour of the choice this often */
#define EWMA 0.25         /* weight of a new observation in the running times */
#define ACC_DECAY 0.97    /* per pass, of the acceptance counts */

void tf_gamma_init(tf_gamma_ctl *c, int k_max) {
    memset(c, 0, sizeof *c);
    if (k_max < 1) k_max = 1;
    if (k_max > TF_GAMMA_MAX_ROWS - 2) k_max = TF_GAMMA_MAX_ROWS - 2;
    c->k_max = k_max;
    c->last = k_max;
}

double tf_gamma_target_cost(const tf_gamma_ctl *c, int rows) {
    if (rows < 1 || rows >= TF_GAMMA_MAX_ROWS) return -1;
    if (c->n_rows[rows] > 0) return c->t_rows[rows];
    /* least squares over the row counts seen, each weighted by its passes (at most 8) */
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    int distinct = 0;
    for (int r = 1; r < TF_GAMMA_MAX_ROWS; r++) {
        if (!c->n_rows[r]) continue;
        double w = c->n_rows[r] < 8 ? c->n_rows[r] : 8;
        sw += w, sx += w * r, sy += w * c->t_rows[r], sxx += w * r * r, sxy += w * r * c->t_rows[r];
        distinct++;
    }
    if (distinct < 2) return -1;
    double den = sw * sxx - sx * sx;
    if (!(den > 0)) return -1;
    double b = (sw * sxy - sx * sy) / den, a = (sy - b * sx) / sw;
    if (b < 0) b = 0; /* more rows never cost less; noise must not say otherwise */
    double t = a + b * rows;
    return t > 0 ? t : -1;
}

double tf_gamma_rate(const tf_gamma_ctl *c, int k) {
    if (c->n_draft == 0 || c->acc_a + c->acc_r <= 0 || k < 1) return 0;
    double t = tf_gamma_target_cost(c, k + 1);
    if (t <= 0) return 0;
    double alpha = c->acc_a / (c->acc_a + c->acc_r);
    if (alpha > 0.995) alpha = 0.995;
    double tokens = (1 - pow(alpha, k + 1)) / (1 - alpha);
    return tokens / (k * c->draft_s + t);
}

int tf_gamma_next(tf_gamma_ctl *c) {
    int k = c->k_max;
    if (c->passes < WARMUP_PASSES) {
        k = (c->passes & 1) && c->k_max > 1 ? c->k_max / 2 : c->k_max;
    } else {
        double best = 0;
        for (int g = 1; g <= c->k_max; g++) {
            double r = tf_gamma_rate(c, g);
            if (r > best) best = r, k = g;
        }
        if (best == 0) k = c->last;
        if (c->passes % EXPLORE_EVERY == 0) { /* keep the neighbours' costs current */
            int up = (c->passes / EXPLORE_EVERY) & 1;
            k = up ? (k < c->k_max ? k + 1 : k - 1) : (k > 1 ? k - 1 : k + 1);
            if (k < 1) k = 1;
            if (k > c->k_max) k = c->k_max;
        }
    }
    c->last = k;
    return k;
}

void tf_gamma_observe(tf_gamma_ctl *c, int n_cand, double draft_s, int rows, double target_s, int accepted) {
    c->passes++;
    if (n_cand > 0) {
        double per = draft_s / n_cand;
        c->draft_s = c->n_draft ? (1 - EWMA) * c->draft_s + EWMA * per : per;
        c->n_draft++;
        c->acc_a = ACC_DECAY * c->acc_a + accepted;
        c->acc_r = ACC_DECAY * c->acc_r + (accepted < n_cand);
    }
    if (rows >= 1 && rows < TF_GAMMA_MAX_ROWS) {
        c->t_rows[rows] = c->n_rows[rows] ? (1 - EWMA) * c->t_rows[rows] + EWMA * target_s : target_s;
        c->n_rows[rows]++;
    }
}
