/* route.c — the route controller of route.h. */
#include "decode/route.h"

#include <string.h>

#define WARMUP_PASSES 2 /* middle, skip */
#define MIN_OBS 4       /* then the other route every EXPLORE_EARLY passes until it was seen this often */
#define EXPLORE_EARLY 3
#define EXPLORE_MIN 24  /* then one pass of it every EXPLORE_MIN x (better rate / its rate) */
#define EXPLORE_MAX 128 /* ... passes, at most this many */
#define DECAY 0.9       /* per observation of a route, of its sums */

void tf_route_init(tf_route_ctl *c) {
    memset(c, 0, sizeof *c);
    c->last = TF_ROUTE_MIDDLE;
}

double tf_route_rate(const tf_route_ctl *c, int route) {
    if (route < 0 || route > 1 || c->n[route] == 0 || !(c->seconds[route] > 0)) return 0;
    return c->tokens[route] / c->seconds[route];
}

int tf_route_next(tf_route_ctl *c) {
    int64_t p = c->passes++;
    int r;
    if (p < WARMUP_PASSES) {
        r = (int)(p & 1);
    } else {
        double rate[2] = {tf_route_rate(c, TF_ROUTE_MIDDLE), tf_route_rate(c, TF_ROUTE_SKIP)};
        r = rate[TF_ROUTE_SKIP] > rate[TF_ROUTE_MIDDLE] ? TF_ROUTE_SKIP : TF_ROUTE_MIDDLE;
        /* explore the other route, the less often the further behind it is:
         * a pass of a much slower route costs more than its estimate gains */
        double period = rate[1 - r] > 0 ? EXPLORE_MIN * rate[r] / rate[1 - r] : EXPLORE_MIN;
        if (period > EXPLORE_MAX) period = EXPLORE_MAX;
        if (c->n[1 - r] < MIN_OBS) period = EXPLORE_EARLY;
        if (++c->since_explore >= period) {
            c->since_explore = 0;
            r = 1 - r;
        }
    }
    c->last = r;
    return r;
}

void tf_route_observe(tf_route_ctl *c, int route, int tokens, double seconds) {
    if (route < 0 || route > 1 || tokens < 0 || !(seconds >= 0)) return;
    c->tokens[route] = DECAY * c->tokens[route] + tokens;
    c->seconds[route] = DECAY * c->seconds[route] + seconds;
    c->n[route]++;
}
