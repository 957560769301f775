/*
 * route.h — choosing, per target pass, where a three-level hierarchy's
 * candidates come from: through the middle level (target <- middle <- draft,
 * TriForce proper) or straight from the bottom level (target <- draft, the
 * middle level skipped).
 *
 * Which route is faster depends on what a fixed setting cannot know: how much
 * the middle level's cheaper cache saves over a target step at this context,
 * how often each level's candidates are accepted on this text, and what a pass
 * costs on this machine. A middle level pays when the KV cache dwarfs the
 * weights and the bottom level alone is poorly accepted; at short contexts, or
 * under a bottom level the target accepts well (text lookup on repetitive
 * text), it only adds passes. The controller keeps, per route, decayed sums
 * of the tokens its target passes emitted and of the seconds they took
 * (drafting, verification and any cache work included), and takes the route
 * with more tokens per second. It explores: the first two passes take one
 * route each; until each route has been seen four times, the other one gets
 * every third pass; after that, one pass of the other route every 24 passes,
 * times how much faster the chosen route has been (at most every 128), keeps
 * that estimate current at a bounded cost. A decoder keeps one controller per
 * situation (TF_ROUTE_CTX_*, below) and asks the one of the situation at hand.
 *
 * The route changes which level drafts, never what is emitted: every target
 * pass is an exact speculative verification of whatever proposed (and under
 * the keyed coupling, keyed.h, even the sampled text is the same). Under the
 * residual coupling it changes how the random stream is consumed, so the same
 * seed reproduces a text only with a fixed route (and a fixed gamma2).
 */
#ifndef TF_DECODE_ROUTE_H
#define TF_DECODE_ROUTE_H

#include <stdint.h>

enum { TF_ROUTE_MIDDLE = 0, TF_ROUTE_SKIP = 1 };

/* The situations a decoder keeps one controller each for, since the faster
 * route differs between them: with a text lookup at the bottom, whether it
 * has a match to propose before the pass (with one, the skip route lets the
 * target judge the quote directly; without, the skip route is a plain
 * one-token step and the middle level's own drafts are all there is). A
 * model draft always proposes: one situation. */
enum { TF_ROUTE_CTX_NONE = 0, TF_ROUTE_CTX_DRAFT = 1, TF_ROUTE_N_CTX = 2 };

typedef struct tf_route_ctl {
    double tokens[2], seconds[2]; /* per route: decayed sums over its passes */
    int64_t n[2];                 /* passes observed per route */
    int64_t passes;               /* choices made */
    int since_explore;            /* passes since the other route was last tried */
    int last;                     /* the latest choice */
} tf_route_ctl;

void tf_route_init(tf_route_ctl *c);
/* The route of the next target pass (TF_ROUTE_MIDDLE or TF_ROUTE_SKIP). */
int tf_route_next(tf_route_ctl *c);
/* After a target pass on `route`: it emitted `tokens` in `seconds`. */
void tf_route_observe(tf_route_ctl *c, int route, int tokens, double seconds);
/* Estimated tokens per second of a route (0 before it was observed). */
double tf_route_rate(const tf_route_ctl *c, int route);

#endif
