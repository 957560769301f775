/*
 * spec.c — the level hierarchy of spec.h.
 *
 * Invariant between steps: seq[0, n_seq) is the emitted text; every level's
 * cache holds a prefix of it that excludes at least the newest token, so the
 * next pass of any level starts by feeding what it has not seen (>= 1 token)
 * and its logits give the distribution of the next position.
 *
 * extend(level i, want): appends >= want candidate tokens to seq, each
 * distributed exactly as level i's model given the prefix, and leaves level
 * i's distribution for every appended position in its ring — the level above
 * needs them as its q. Rejected candidates are rolled back in every level
 * below that saw them; rolling back copies nothing.
 */
#include "decode/spec.h"

#include "core/mem.h"
#include "core/topk.h"
#include "decode/lookup.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *const k_mode_names[] = {"ar", "draft", "retrieval", "streaming", "triforce"};

const char *tf_spec_mode_name(tf_spec_mode mode) {
    return (unsigned)mode < 5 ? k_mode_names[mode] : "unknown";
}

bool tf_spec_mode_from_name(const char *name, tf_spec_mode *out) {
    if (strcmp(name, "spec") == 0) { /* the draft mode's former name */
        *out = TF_SPEC_DRAFT;
        return true;
    }
    for (int i = 0; i < 5; i++)
        if (strcmp(name, k_mode_names[i]) == 0) {
            *out = (tf_spec_mode)i;
            return true;
        }
    return false;
}

static tf_dist *dist_at(tf_spec *s, spec_level *L, int64_t pos) { return &L->dist[pos % s->dmax]; }

static void dist_copy(tf_dist *dst, const tf_dist *src) {
    dst->n = src->n;
    memcpy(dst->id, src->id, sizeof(int32_t) * (size_t)src->n);
    memcpy(dst->p, src->p, sizeof(float) * (size_t)src->n);
}

/* ---- per-level cache operations ---- */

/* Where the level's next token goes and how the pass is positioned. qout
 * (NULL: none): the target's queries the caller keeps for retrieval scoring. */
static tf_status level_forward(tf_spec *s, int i, const int32_t *toks, int32_t n, int32_t logits_from,
                               const tf_fwd_out *qout) {
    spec_level *L = &s->lv[i];
    int64_t c = L->n_cached;
    tf_status st = TF_OK;
    switch (L->kind) {
    case LEVEL_FULL: {
        for (int32_t j = 0; j < n; j++) L->pos[j] = (int32_t)(c + j);
        st = tf_forward(&L->fwd, &s->kv_p, toks, L->pos, n, (int32_t)c, NULL, logits_from, qout, &s->err);
        if (st == TF_OK && s->has_rc) tf_rcache_note_append(&s->rc, &s->kv_p, (int32_t)c, n);
        break;
    }
    case LEVEL_RETRIEVAL: {
        int32_t slot0 = L->r_sel + (int32_t)(c - L->r_base);
        if (slot0 + n > L->view.n_slots)
            return tf_errf(&s->err, TF_ERR_INTERNAL, "retrieval view full (%d + %d > %d slots)", slot0, n,
                           L->view.n_slots);
        for (int32_t j = 0; j < n; j++) L->pos[j] = (int32_t)(c + j);
        st = tf_forward(&L->fwd, &L->view, toks, L->pos, n, slot0, NULL, logits_from, NULL, &s->err);
        break;
    }
    case LEVEL_STREAMING: {
        if (L->sc.n_seen != c) return tf_errf(&s->err, TF_ERR_INTERNAL, "streaming cache out of step");
        int32_t slot0, pos0;
        const bool keys = tf_scache_wants_keys(&L->sc); /* the sinks' keys, captured while they are fed */
        TF_TRY(tf_scache_view(&L->sc, n, &slot0, &pos0, &s->err));
        const tf_fwd_out kvout = {.k = keys ? L->cap_k : NULL, .v = keys ? L->cap_v : NULL};
        for (int32_t j = 0; j < n; j++) L->pos[j] = pos0 + j;
        st = tf_forward(&L->fwd, &L->sc.view, toks, L->pos, n, slot0, NULL, logits_from, &kvout, &s->err);
        if (st == TF_OK) st = tf_scache_append(&L->sc, kvout.k, kvout.v, n, L->fwd.n_batch, &s->err);
        break;
    }
    case LEVEL_LOOKUP: return tf_errf(&s->err, TF_ERR_INTERNAL, "a lookup level has no forward pass");
    }
    if (st == TF_OK) L->n_cached = c + n;
    return st;
}

static tf_status level_truncate(tf_spec *s, int i, int64_t n) {
    if (s->lv[i].kind == LEVEL_LOOKUP) return TF_OK; /* nothing cached */
    spec_level *L = &s->lv[i];
    if (n >= L->n_cached) return TF_OK;
    switch (L->kind) {
    case LEVEL_FULL:
        tf_kv_truncate(&s->kv_p, (int32_t)n);
        if (s->has_rc) tf_rcache_truncate(&s->rc, &s->kv_p, (int32_t)n);
        break;
    case LEVEL_RETRIEVAL:
        if (n < L->r_base) return tf_errf(&s->err, TF_ERR_INTERNAL, "retrieval rollback below its base");
        L->view.n_used = L->r_sel + (int32_t)(n - L->r_base);
        break;
    case LEVEL_STREAMING:
        TF_TRY(tf_scache_truncate(&L->sc, n, &s->err));
        break;
    case LEVEL_LOOKUP: break; /* returned above */
    }
    L->n_cached = n;
    return TF_OK;
}

/* The distributions of rows [from, n) of level L's last pass (which started
 * at sequence position c) into its ring. On a device, greedy decoding reads
 * back one token per row (argmax there); sampled decoding reads the logits
 * rows back and transforms them here, as on the CPU. */
static tf_status level_dists(tf_spec *s, spec_level *L, int64_t c, int32_t from, int32_t n) {
    const int32_t V = L->m->hp.n_vocab, rows = n - from;
    if (rows < 1) return TF_OK;
    if (!s->be.ops->host_memory && s->cfg.sampling.temp <= 0.0f) {
        TF_TRY(tf_fwd_argmax(&L->fwd, rows, s->tok_h, &s->err));
        for (int32_t r = 0; r < rows; r++) {
            tf_dist *d = dist_at(s, L, c + from + r + 1);
            d->n = 1, d->id[0] = s->tok_h[r], d->p[0] = 1.0f;
        }
        return TF_OK;
    }
    /* with top-k on, the k candidates of each row are selected where the logits are and only they come back */
    const int32_t k = tf_sampling_top_k(&s->samp);
    if (k > 0 && k <= TF_TOPK_MAX) {
        TF_TRY(tf_fwd_topk(&L->fwd, rows, k, s->cfg.sampling.temp, s->topk_h, &s->err));
        const float *z = (const float *)(s->topk_h + (size_t)rows * k);
        const int32_t *n_kept = s->topk_h + (size_t)2 * rows * k;
        for (int32_t r = 0; r < rows; r++) {
            tf_sampling_dist_top(&s->samp, s->topk_h + (size_t)r * k, z + (size_t)r * k, n_kept[r]);
            dist_copy(dist_at(s, L, c + from + r + 1), &s->samp.dist);
        }
        return TF_OK;
    }
    const float *logits = L->fwd.logits;
    if (!s->be.ops->host_memory) {
        TF_TRY(tf_fwd_logits(&L->fwd, rows, s->logits_h, &s->err));
        logits = s->logits_h;
    }
    for (int32_t r = 0; r < rows; r++) {
        tf_sampling_dist(&s->samp, logits + (size_t)r * V);
        dist_copy(dist_at(s, L, c + from + r + 1), &s->samp.dist);
    }
    return TF_OK;
}

/* Feed seq[n_cached, upto) to level i and store its distributions for the
 * positions [need_from, upto] (need_from - 1 >= n_cached). */
static tf_status level_feed(tf_spec *s, int i, int64_t upto, int64_t need_from) {
    spec_level *L = &s->lv[i];
    /* A level that was bypassed or skipped catches up in batches first, up to
     * the last token before the positions whose distributions are needed
     * (those of the skipped positions are not: only each batch's last is
     * made), until the rest fits one pass. */
    while (upto - L->n_cached > L->fwd.n_batch && need_from - 1 > L->n_cached) {
        int64_t mid = L->n_cached + L->fwd.n_batch;
        if (mid > need_from - 1) mid = need_from - 1;
        TF_TRY(level_feed(s, i, mid, mid));
    }
    int64_t c = L->n_cached;
    int32_t n = (int32_t)(upto - c);
    if (n < 1 || need_from - 1 < c)
        return tf_errf(&s->err, TF_ERR_INTERNAL, "level %d fed %d tokens, dist from %lld, cached %lld", i, n,
                       (long long)need_from, (long long)c);
    if (n > L->fwd.n_batch)
        return tf_errf(&s->err, TF_ERR_INTERNAL, "level %d: %d tokens exceed its batch of %d", i, n, L->fwd.n_batch);
    int32_t from = (int32_t)(need_from - 1 - c);
    double t0 = now_s();
    const tf_fwd_out qout = {.q = s->q_cap, .q_row = 0, .q_max = s->q_cap_rows};
    L->last_feed = c;
    TF_TRY(level_forward(s, i, s->seq + c, n, from, i == 0 && s->q_cap ? &qout : NULL));
    TF_TRY(level_dists(s, L, c, from, n));
    L->st.passes++;
    L->st.rows += n;
    L->st.seconds += now_s() - t0;
    return TF_OK;
}

/* Rebuild C_r from the newest target query and C_p's current contents. */
static tf_status rebuild_retrieval(tf_spec *s, spec_level *L) {
    double t0 = now_s();
    TF_TRY(tf_rcache_build(&s->rc, &s->kv_p, s->q_last, s->target->hp.n_head, &L->view, &s->err));
    L->r_base = s->lv[0].n_cached;
    L->r_sel = s->rc.n_sel;
    L->view.n_used = L->r_sel;
    L->n_cached = L->r_base;
    L->st.rebuilds++;
    L->st.seconds += now_s() - t0;
    s->passes_since_rebuild = 0;
    return TF_OK;
}

/* Keep the query of the newest token in C_p (captured row `row` of the last
 * target pass) for the next retrieval rebuild. */
static void save_last_query(tf_spec *s, int32_t row) {
    const tf_hparams *hp = &s->target->hp;
    size_t q_dim = (size_t)hp->n_head * hp->head_dim;
    if (row < 0 || row >= s->q_cap_rows) return;
    tf_backend *be = &s->be;
    for (int il = 0; il < hp->n_layer; il++)
        if (be->ops->copy(be, s->q_last + (size_t)il * q_dim,
                          s->q_cap + ((size_t)il * s->q_cap_rows + (size_t)row) * q_dim, sizeof(float) * q_dim,
                          &s->err) != TF_OK) {
            s->passes_since_rebuild = s->cfg.rebuild_stride; /* a rebuild reports the kept error */
            return;
        }
}

static void push(tf_spec *s, int32_t tok) { s->seq[s->n_seq++] = tok; }

/* The level's token for sequence position pos, drawn from d. */
static int32_t draw(tf_spec *s, const tf_dist *d, int64_t pos) {
    if (s->cfg.coupling == TF_SPEC_COUPLING_KEYED) return tf_keyed_draw(d, tf_keyed_key(s->cfg.sampling.seed, pos));
    return tf_dist_sample(d, &s->rng);
}

/* Verify candidate x at sequence position pos against the level's p (the
 * level below drew it from q); *out: x, or the replacement. */
static bool verify(tf_spec *s, const tf_dist *p, const tf_dist *q, int32_t x, int64_t pos, int32_t *out) {
    if (s->cfg.coupling == TF_SPEC_COUPLING_KEYED)
        return tf_keyed_verify(&s->ver, p, x, tf_keyed_key(s->cfg.sampling.seed, pos), out);
    return tf_verify_token(&s->ver, p, q, x, &s->rng, out);
}

static tf_status extend(tf_spec *s, int i, int want, int *added_out);

static tf_status truncate_below(tf_spec *s, int i, int64_t n) {
    for (int j = i; j < s->n_levels; j++) TF_TRY(level_truncate(s, j, n));
    return TF_OK;
}

static tf_status extend(tf_spec *s, int i, int want, int *added_out) {
    spec_level *L = &s->lv[i];
    int added = 0;
    *added_out = 0;
    if (L->kind == LEVEL_LOOKUP) {
        /* bottom level by text lookup: copy what followed the newest text's
         * longest earlier match, as one-hot distributions, at most as many
         * tokens as the match is long (a short match predicts little); none
         * without a match */
        int64_t from;
        int32_t len = tf_lookup_match(s->seq, s->n_seq, s->cfg.lookup, TF_LOOKUP_MAX_MATCH, &from);
        if (len < want) want = len;
        for (; added < want && s->n_seq < s->cfg.n_ctx; added++) {
            int32_t tok = s->seq[from + added];
            tf_dist *d = dist_at(s, L, s->n_seq);
            d->n = 1, d->id[0] = tok, d->p[0] = 1.0f;
            push(s, tok);
        }
        if (added) L->st.passes++;
        L->st.rows += added;
        *added_out = added;
        return TF_OK;
    }
    if (i == s->n_levels - 1) {
        /* bottom level: sample autoregressively */
        for (int t = 0; t < want; t++) {
            if (s->n_seq >= s->cfg.n_ctx)
                break;
            TF_TRY(level_feed(s, i, s->n_seq, s->n_seq));
            push(s, draw(s, dist_at(s, L, s->n_seq), s->n_seq));
            added++;
        }
        *added_out = added;
        return TF_OK;
    }
    /* the level whose candidates this one verifies: the next one down, or for
     * the target on the skip route (route.h) the bottom level */
    const int lo = i == 0 && s->route == TF_ROUTE_SKIP && s->n_levels == 3 ? 2 : i + 1;
    spec_level *lower = &s->lv[lo];
    while (added < want) {
        /* A middle level whose draft is rarely accepted proposes alone (exactly
         * as the bottom level would), trying the draft again every
         * bypass_probe tokens. */
        if (i > 0 && lower->accept_ewma < s->cfg.bypass_accept && ++L->bypass_run < s->cfg.bypass_probe) {
            if (s->n_seq >= s->cfg.n_ctx) break;
            TF_TRY(level_feed(s, i, s->n_seq, s->n_seq));
            push(s, draw(s, dist_at(s, L, s->n_seq), s->n_seq));
            added++;
            L->st.bypassed++;
            continue;
        }
        L->bypass_run = 0;
        int64_t base = s->n_seq;
        int room = (int)(s->cfg.n_ctx - base); /* keep the sequence within the context */
        bool adapt = i == 0 && s->cfg.gamma2 == 0;
        tf_gamma_ctl *gctl = &s->gctl[lo == i + 1 ? 0 : 1];
        int gamma = adapt ? tf_gamma_next(gctl) : L->gamma;
        int ask = gamma < room - 1 ? gamma : room - 1;
        int k = 0;
        double t_draft = now_s();
        if (ask > 0) TF_TRY(extend(s, lo, ask, &k));
        t_draft = now_s() - t_draft;
        double t_target = L->st.seconds;
        if (k > room - 1) { /* the lower level overshot the context: drop the excess */
            s->n_seq = base + room - 1;
            TF_TRY(truncate_below(s, i + 1, s->n_seq));
            k = room - 1;
        }
        TF_TRY(level_feed(s, i, base + k, base));
        int acc = 0;
        int32_t next = -1;
        for (; acc < k; acc++) {
            int32_t out;
            if (!verify(s, dist_at(s, L, base + acc), dist_at(s, lower, base + acc), s->seq[base + acc], base + acc,
                        &out)) {
                next = out;
                break;
            }
        }
        if (acc == k) next = draw(s, dist_at(s, L, base + k), base + k);
        if (adapt)
            tf_gamma_observe(gctl, k, t_draft, (int)(L->n_cached - L->last_feed), L->st.seconds - t_target, acc);
        L->st.verified += k;
        L->st.accepted += acc;
        if (acc < k) L->st.rejected++;
        /* the acceptance of a level by the one above it (bypass, rebuilds): not
         * by the target on the skip route */
        if (k > 0 && lo == i + 1) lower->accept_ewma = 0.8f * lower->accept_ewma + 0.2f * (float)acc / (float)k;
        s->n_seq = base + acc;
        push(s, next);
        /* this level keeps the accepted candidates; the levels below roll back */
        TF_TRY(truncate_below(s, i, base + acc));
        added += acc + 1;
        if (s->n_seq >= s->cfg.n_ctx) break;
    }
    *added_out = added;
    return TF_OK;
}

int tf_spec_route_ctx(const tf_spec *s) {
    int64_t from;
    if (s->n_levels == 3 && s->lv[2].kind == LEVEL_LOOKUP &&
        tf_lookup_match(s->seq, s->n_seq, s->cfg.lookup, TF_LOOKUP_MAX_MATCH, &from) == 0)
        return TF_ROUTE_CTX_NONE;
    return TF_ROUTE_CTX_DRAFT;
}

/* Extend the sequence by one target pass (>= 1 tokens). */
static tf_status decode_pass(tf_spec *s) {
    if (s->n_seq >= s->cfg.n_ctx)
        return tf_errf(&s->err, TF_ERR_RANGE, "the context of %d tokens is full", s->cfg.n_ctx);
    const bool three = s->n_levels == 3;
    s->route = TF_ROUTE_MIDDLE;
    /* auto: the controller's choice for the situation at hand (route.h): a
     * text lookup at the bottom proposes now or has nothing to propose. A
     * model draft that the middle level bypasses (the level nearest the
     * target rejects it) is not worth a target pass of its candidates, so
     * then the middle route is taken without exploring; a lookup's rejection
     * by the middle level says little of the target's verdict (what it
     * quotes may lie outside the middle level's small cache) */
    const bool lookup = three && s->lv[2].kind == LEVEL_LOOKUP;
    const int ctx = tf_spec_route_ctx(s);
    const bool auto_route = three && s->cfg.middle == TF_SPEC_MIDDLE_AUTO;
    if (auto_route && (lookup || !(s->cfg.bypass_accept > 0 && s->lv[2].accept_ewma < s->cfg.bypass_accept)))
        s->route = tf_route_next(&s->rctl[ctx]);
    if (three && s->cfg.middle == TF_SPEC_MIDDLE_NEVER) s->route = TF_ROUTE_SKIP;
    double t0 = now_s();
    for (int i = 1; i < s->n_levels && s->route == TF_ROUTE_MIDDLE; i++) {
        spec_level *L = &s->lv[i];
        if (L->kind != LEVEL_RETRIEVAL) continue;
        /* rebuild on the stride, when acceptance drops, when the view is about
         * to fill, or when the level lags the target by more than the token a
         * pass leaves it behind (the skip route left it out): gathering the
         * cache anew costs less than feeding it the missed tokens */
        int32_t need = L->r_sel + (int32_t)(s->lv[0].n_cached - L->r_base) + tf_spec_gamma2_max(&s->cfg) + s->cfg.gamma1 + 4;
        if (s->passes_since_rebuild >= s->cfg.rebuild_stride || L->accept_ewma < s->cfg.rebuild_accept ||
            need > L->view.n_slots || L->n_cached + 1 < s->lv[0].n_cached) {
            TF_TRY(rebuild_retrieval(s, L));
            L->accept_ewma = 1.0f;
        }
    }
    int added;
    TF_TRY(extend(s, 0, 1, &added));
    if (auto_route) tf_route_observe(&s->rctl[ctx], s->route, added, now_s() - t0);
    s->route_passes[s->route]++;
    s->passes_since_rebuild++;
    if (s->q_cap) save_last_query(s, (int32_t)(s->lv[0].n_cached - 1 - s->lv[0].last_feed));
    return TF_OK;
}

/* Tokens of the sequence not yet handed out (n_emitted .. n_seq) go first; a
 * pass runs only when there are none, so a small cap never loses tokens and
 * never changes the sequence. */
tf_status tf_spec_step(tf_spec *s, int32_t *out, int32_t cap, int32_t *n_out) {
    tf_err_clear(&s->err);
    if (n_out) *n_out = 0;
    if (!out || !n_out || cap < 1)
        return tf_errf(&s->err, TF_ERR_INVALID_ARG, "step: out %s, n_out %s, cap %d: expected both and cap >= 1",
                       out ? "given" : "NULL", n_out ? "given" : "NULL", cap);
    if (s->n_emitted >= s->n_seq) TF_TRY(decode_pass(s));
    int64_t n = s->n_seq - s->n_emitted;
    if (n > cap) n = cap;
    memcpy(out, s->seq + s->n_emitted, sizeof(int32_t) * (size_t)n);
    s->n_emitted += n;
    *n_out = (int32_t)n;
    return TF_OK;
}

/* ---- set-up ---- */

/* Most rows a target pass feeds: the newest emitted token plus the candidates
 * of the level below (a middle level can overshoot gamma2 by gamma1). */
static int32_t max_target_rows(const tf_spec_cfg *c) {
    bool three = c->mode == TF_SPEC_TRIFORCE || c->mode == TF_SPEC_STREAMING;
    return 1 + tf_spec_gamma2_max(c) + (three ? c->gamma1 : 0);
}

tf_status tf_spec_check_cfg(const tf_spec_cfg *c, tf_err *err) {
    if ((unsigned)c->mode > TF_SPEC_TRIFORCE) return tf_errf(err, TF_ERR_INVALID_ARG, "unknown mode %d", c->mode);
    if (c->gamma1 < 1 || c->gamma1 > 16 || c->gamma2 < 0 || c->gamma2 > 15)
        return tf_errf(err, TF_ERR_INVALID_ARG, "gamma1 %d / gamma2 %d: expected 1..16 / 0..15 (0: adaptive)",
                       c->gamma1, c->gamma2);
    if (max_target_rows(c) > 16)
        return tf_errf(err, TF_ERR_INVALID_ARG,
                       "gamma2 %d + gamma1 %d: a target pass would verify %d tokens; at most 15 keep verification "
                       "bitwise identical to decoding one token at a time",
                       tf_spec_gamma2_max(c), c->gamma1, max_target_rows(c) - 1);
    if (c->sinks < 0 || c->window < 1)
        return tf_errf(err, TF_ERR_INVALID_ARG, "sinks %d / window %d: expected >= 0 / >= 1", c->sinks, c->window);
    if (c->rebuild_stride < 1)
        return tf_errf(err, TF_ERR_INVALID_ARG, "rebuild stride %d: expected >= 1", c->rebuild_stride);
    if (!(c->bypass_accept >= 0 && c->bypass_accept <= 1) || (c->bypass_accept > 0 && c->bypass_probe < 1))
        return tf_errf(err, TF_ERR_INVALID_ARG, "bypass acceptance %g / probe %d: expected 0..1 / >= 1",
                       (double)c->bypass_accept, c->bypass_probe);
    if ((unsigned)c->coupling > TF_SPEC_COUPLING_RESIDUAL)
        return tf_errf(err, TF_ERR_INVALID_ARG, "coupling %d: expected keyed (0) or residual (1)", (int)c->coupling);
    if ((unsigned)c->middle > TF_SPEC_MIDDLE_NEVER)
        return tf_errf(err, TF_ERR_INVALID_ARG, "middle-level policy %d: expected always (0), auto (1) or never (2)",
                       (int)c->middle);
    if (c->lookup < 0 || c->lookup > TF_LOOKUP_MAX_MATCH)
        return tf_errf(err, TF_ERR_INVALID_ARG, "lookup %d: expected 0 (off) or a match of 1..%d tokens", c->lookup,
                       TF_LOOKUP_MAX_MATCH);
    if (c->n_ctx < 2) return tf_errf(err, TF_ERR_INVALID_ARG, "context %d: expected >= 2", c->n_ctx);
    if (c->budget < 0)
        return tf_errf(err, TF_ERR_INVALID_ARG, "retrieval budget %d: expected tokens, or 0 for %d..%d by the context",
                       c->budget, TF_SPEC_AUTO_BUDGET_MIN, TF_SPEC_AUTO_BUDGET_MAX);
    return TF_OK;
}

static tf_status check_cfg(const tf_spec_cfg *c, const tf_model *target, const tf_model *draft, tf_err *err) {
    TF_TRY(tf_spec_check_cfg(c, err));
    bool needs_draft = c->mode == TF_SPEC_DRAFT || c->mode == TF_SPEC_STREAMING || c->mode == TF_SPEC_TRIFORCE;
    if (needs_draft && c->lookup > 0 && draft)
        return tf_errf(err, TF_ERR_INVALID_ARG, "a draft model and lookup drafting (%d) were both given: the bottom "
                       "level is one or the other", c->lookup);
    if (needs_draft && !draft && c->lookup <= 0)
        return tf_errf(err, TF_ERR_INVALID_ARG, "mode %s needs a draft model (-md DRAFT) or lookup drafting",
                       tf_spec_mode_name(c->mode));
    if (draft && needs_draft) {
        if (draft->hp.n_vocab != target->hp.n_vocab)
            return tf_errf(err, TF_ERR_INVALID_ARG,
                           "draft %s has %d tokens but the target %s has %d: the vocabularies must be the same",
                           draft->path, draft->hp.n_vocab, target->path, target->hp.n_vocab);
        if (draft->tok && target->tok)
            for (int32_t t = 0; t < target->hp.n_vocab; t++)
                if (strcmp(tf_token_text(draft->tok, t), tf_token_text(target->tok, t)) != 0)
                    return tf_errf(err, TF_ERR_INVALID_ARG,
                                   "draft %s and target %s differ at token %d ('%s' vs '%s'): the vocabularies must "
                                   "be the same",
                                   draft->path, target->path, t, tf_token_text(draft->tok, t),
                                   tf_token_text(target->tok, t));
    }
    if (c->kv_type != TF_DTYPE_F32 && c->kv_type != TF_DTYPE_F16 && c->device == TF_SPEC_DEVICE_CUDA)
        return tf_errf(err, TF_ERR_UNSUPPORTED, "KV cache type %s runs on the CPU only: use f16 or f32 with cuda",
                       tf_dtype_name(c->kv_type));
    TF_TRY(tf_kv_check_type(c->kv_type, target->hp.head_dim, err));
    if (draft && needs_draft) TF_TRY(tf_kv_check_type(c->kv_type, draft->hp.head_dim, err));
    return TF_OK;
}

/* Host memory of a level on either device: positions and the distribution ring. */
static tf_status level_alloc_host(tf_spec *s, spec_level *L, const tf_model *m, int32_t n_batch, tf_err *err) {
    L->pos = tf_alloc(sizeof(int32_t) * (size_t)n_batch);
    L->dist = calloc((size_t)s->dmax, sizeof *L->dist);
    if (!L->pos || !L->dist) return tf_errf(err, TF_ERR_NOMEM, "level: out of memory");
    L->n_dist = s->dmax;
    size_t n_cand = m ? (size_t)m->hp.n_vocab : 1; /* a lookup level's distributions are one-hot */
    for (int32_t d = 0; d < s->dmax; d++) {
        L->dist[d].id = tf_alloc(sizeof(int32_t) * n_cand);
        L->dist[d].p = tf_alloc(sizeof(float) * n_cand);
        if (!L->dist[d].id || !L->dist[d].p) return tf_errf(err, TF_ERR_NOMEM, "level: out of memory");
    }
    return TF_OK;
}

/* The keys a target graph's attention is sized for are rounded up to a
 * multiple of this: one capture per 4,096 tokens of context, and the blocks
 * past a row's keys (at most 16 splits of 256 per head) return at once. */
#define TARGET_GRAPH_KEYS 4096

static bool target_graphs(void) {
    const char *e = getenv("TF_TARGET_GRAPHS");
    return !(e && strcmp(e, "0") == 0);
}

static tf_status level_init(tf_spec *s, spec_level *L, level_kind kind, const tf_model *m, int32_t rows,
                            tf_err *err) {
    const tf_spec_cfg *c = &s->cfg;
    tf_backend *be = &s->be;
    L->kind = kind;
    L->m = m;
    L->accept_ewma = 1.0f;
    int32_t n_batch = rows, n_kv = c->n_ctx;
    if (kind == LEVEL_LOOKUP) return level_alloc_host(s, L, NULL, 1, err); /* no forward, no cache */
    const tf_bweights *w = m == s->target || !s->wd.m ? &s->wt : &s->wd;
    if (kind == LEVEL_FULL) {
        n_batch = c->n_batch > rows ? c->n_batch : rows;
        n_kv = s->kv_p.n_slots;
    } else if (kind == LEVEL_RETRIEVAL) {
        n_batch = rows + 2;
        TF_TRY(tf_rcache_view_init(&L->view, &s->rc, &s->kv_p, 256 + 4 * rows, err)); /* on C_p's backend */
        n_kv = L->view.n_slots;
    } else {
        n_batch = rows + 2 > 64 ? rows + 2 : 64;
        TF_TRY(tf_scache_init_on(&L->sc, be, m->hp.n_layer, m->hp.n_head_kv, m->hp.head_dim, m->hp.n_rot,
                                 m->hp.rope_neox, w->rope_freq, m->rope_mscale, c->sinks, c->window, 2 * rows + 8,
                                 n_batch, c->n_ctx, tf_kv_type_on(be, c->kv_type), err));
        n_kv = L->sc.view.n_slots;
    }
    int32_t n_logits = kind == LEVEL_FULL && c->n_logits > rows + 2 ? c->n_logits : rows + 2;
    TF_TRY(tf_fwd_init_on(&L->fwd, w, n_batch, n_logits < n_batch ? n_logits : n_batch, n_kv, err));
    /* Where the backend has graphs, every level's passes of up to graph_rows
     * rows replay them; the target's attention is bounded per graph by its
     * keys rounded up to TARGET_GRAPH_KEYS (TF_TARGET_GRAPHS=0 launches the
     * target's passes one kernel at a time, for A/B runs). */
    L->fwd.use_graphs = kind != LEVEL_FULL || target_graphs();
    L->fwd.graph_kv_step = kind == LEVEL_FULL ? TARGET_GRAPH_KEYS : 0;
    if (kind == LEVEL_STREAMING) {
        size_t cap = sizeof(float) * (size_t)m->hp.n_layer * (size_t)n_batch * (size_t)m->hp.n_head_kv * m->hp.head_dim;
        TF_TRY(be->ops->alloc(be, (void **)&L->cap_k, cap, "the streaming level's captured keys", err));
        TF_TRY(be->ops->alloc(be, (void **)&L->cap_v, cap, "the streaming level's captured values", err));
    }
    return level_alloc_host(s, L, m, n_batch, err);
}

static void level_free(tf_spec *s, spec_level *L) {
    if (L->cap_k) s->be.ops->free(&s->be, L->cap_k);
    if (L->cap_v) s->be.ops->free(&s->be, L->cap_v);
    tf_fwd_free(&L->fwd);
    if (L->kind == LEVEL_RETRIEVAL) tf_kv_free(&L->view);
    if (L->kind == LEVEL_STREAMING) tf_scache_free(&L->sc);
    tf_free(L->pos);
    if (L->dist) {
        for (int32_t d = 0; d < L->n_dist; d++) {
            tf_free(L->dist[d].id);
            tf_free(L->dist[d].p);
        }
        free(L->dist);
    }
    memset(L, 0, sizeof *L);
}

/* The running choices (gamma2 per route, the route) and the route counts, from scratch. */
static void controllers_init(tf_spec *s) {
    for (int r = 0; r < 2; r++) tf_gamma_init(&s->gctl[r], TF_SPEC_GAMMA2_AUTO_MAX);
    for (int c = 0; c < TF_ROUTE_N_CTX; c++) tf_route_init(&s->rctl[c]);
    s->route_passes[0] = s->route_passes[1] = 0;
}

tf_status tf_spec_eval(tf_spec *s, const int32_t *tokens, int32_t n, int32_t logits_from) {
    spec_level *L = &s->lv[0];
    if (n < 1 || n > L->fwd.n_batch || L->n_cached + n > s->cfg.n_ctx)
        return tf_errf(&s->err, TF_ERR_RANGE, "eval: %d tokens after %lld (at most %d at once, %d in all)", n,
                       (long long)L->n_cached, L->fwd.n_batch, s->cfg.n_ctx);
    memcpy(s->seq + L->n_cached, tokens, sizeof(int32_t) * (size_t)n);
    TF_TRY(level_forward(s, 0, tokens, n, logits_from, NULL));
    s->n_seq = L->n_cached;
    return TF_OK;
}

void tf_spec_eval_truncate(tf_spec *s, int32_t n) {
    if (n < 0 || n >= s->lv[0].n_cached) return;
    (void)level_truncate(s, 0, n); /* a full cache only forgets slots: no error */
    s->n_seq = n;
}

tf_status tf_spec_eval_fill_random(tf_spec *s, int32_t n, uint64_t seed) {
    if (n > s->cfg.n_ctx)
        return tf_errf(&s->err, TF_ERR_RANGE, "fill: %d positions do not fit in the context of %d", n, s->cfg.n_ctx);
    TF_TRY(tf_kv_fill_random(&s->kv_p, n, seed, &s->err));
    s->lv[0].n_cached = s->n_seq = n;
    return TF_OK;
}

tf_status tf_spec_init(tf_spec *s, const tf_model *target, const tf_model *draft, const tf_spec_cfg *cfg,
                       tf_pool *pool, tf_err *err) {
    memset(s, 0, sizeof *s);
    TF_TRY(check_cfg(cfg, target, draft, err));
    s->cfg = *cfg;
    /* A streaming cache never holds more than the context: sinks or a window
     * past n_ctx mean "evict nothing", which n_ctx slots already do, so the
     * memory follows the context rather than the flag. */
    if (s->cfg.sinks > s->cfg.n_ctx) s->cfg.sinks = s->cfg.n_ctx;
    if (s->cfg.window > s->cfg.n_ctx) s->cfg.window = s->cfg.n_ctx;
    if (s->cfg.budget == 0) s->cfg.budget = tf_spec_auto_budget(s->cfg.n_ctx, s->cfg.chunk);
    s->target = target;
    s->draft = draft;
    s->pool = pool;
    int32_t rows = max_target_rows(cfg);
    s->dmax = rows + 8; /* positions alive at once: a target pass's candidates and its bonus */
    const tf_hparams *hp = &target->hp;
    tf_status st;
    if (cfg->device != TF_SPEC_DEVICE_CPU && cfg->device != TF_SPEC_DEVICE_CUDA)
        st = tf_errf(err, TF_ERR_INVALID_ARG, "device %d: expected cpu (0) or cuda (1)", cfg->device);
    else
        st = tf_backend_open(&s->be, cfg->device == TF_SPEC_DEVICE_CUDA ? "cuda" : "cpu", pool, cfg->isa, err);
    if (st == TF_OK) st = tf_bweights_init(&s->wt, &s->be, target, err);
    if (st == TF_OK && draft && draft != target) st = tf_bweights_init(&s->wd, &s->be, draft, err);
    if (st == TF_OK)
        st = tf_kv_init_on(&s->kv_p, &s->be, hp->n_layer, hp->n_head_kv, hp->head_dim, cfg->n_ctx,
                           tf_kv_type_on(&s->be, cfg->kv_type), "the full cache C_p", err);
    level_kind kinds[TF_SPEC_MAX_LEVELS];
    const tf_model *models[TF_SPEC_MAX_LEVELS];
    int n = 0;
    kinds[n] = LEVEL_FULL, models[n++] = target;
    switch (cfg->mode) {
    case TF_SPEC_AR: break;
    case TF_SPEC_DRAFT: kinds[n] = LEVEL_STREAMING, models[n++] = draft; break;
    case TF_SPEC_RETRIEVAL: kinds[n] = LEVEL_RETRIEVAL, models[n++] = target; break;
    case TF_SPEC_STREAMING:
        kinds[n] = LEVEL_STREAMING, models[n++] = target;
        kinds[n] = LEVEL_STREAMING, models[n++] = draft;
        break;
    case TF_SPEC_TRIFORCE:
        kinds[n] = LEVEL_RETRIEVAL, models[n++] = target;
        kinds[n] = LEVEL_STREAMING, models[n++] = draft;
        break;
    }
    if (cfg->lookup > 0 && n > 1 && kinds[n - 1] == LEVEL_STREAMING && !draft) /* ar and retrieval ignore it */
        kinds[n - 1] = LEVEL_LOOKUP, models[n - 1] = NULL;
    s->n_levels = n;
    for (int i = 0; i < n && st == TF_OK; i++)
        if (kinds[i] == LEVEL_RETRIEVAL && !s->has_rc) {
            const tf_rcache_params rp = {.chunk = s->cfg.chunk, .budget = s->cfg.budget, .recent = s->cfg.recent};
            st = tf_rcache_init(&s->rc, &s->kv_p, &rp, pool, err);
            s->has_rc = st == TF_OK;
        }
    for (int i = 0; i < n && st == TF_OK; i++) st = level_init(s, &s->lv[i], kinds[i], models[i], rows, err);
    s->lv[0].gamma = tf_spec_gamma2_max(cfg);
    controllers_init(s);
    if (n == 3) s->lv[1].gamma = cfg->gamma1;
    if (st == TF_OK) st = tf_sampling_init(&s->samp, &cfg->sampling, hp->n_vocab, err);
    if (st == TF_OK) st = tf_verifier_init(&s->ver, hp->n_vocab, err);
    tf_rng_seed(&s->rng, cfg->sampling.seed ^ 0x7f4a7c159e3779b9ull);
    size_t q_dim = (size_t)hp->n_head * hp->head_dim;
    s->q_cap_rows = rows + 2; /* also the most logits rows of any level's pass */
    if (st == TF_OK && s->has_rc) {
        tf_backend *be = &s->be;
        st = be->ops->alloc(be, (void **)&s->q_cap, sizeof(float) * (size_t)hp->n_layer * s->q_cap_rows * q_dim,
                            "the captured target queries", err);
        if (st == TF_OK)
            st = be->ops->alloc(be, (void **)&s->q_last, sizeof(float) * (size_t)hp->n_layer * q_dim,
                                "the newest target query", err);
    }
    s->seq = tf_alloc(sizeof(int32_t) * (size_t)cfg->n_ctx);
    const int32_t top_k = tf_sampling_top_k(&s->samp);
    const bool top = top_k > 0 && top_k <= TF_TOPK_MAX;
    if (st == TF_OK && top) { /* what a sampled pass reads back: each row's candidates */
        s->topk_h = tf_alloc(sizeof(int32_t) * (size_t)s->q_cap_rows * (2 * TF_TOPK_MAX + 1));
        if (!s->topk_h) st = tf_errf(err, TF_ERR_NOMEM, "decoder: out of memory");
    }
    if (st == TF_OK && !s->be.ops->host_memory) { /* what a device's passes read back */
        s->tok_h = tf_alloc(sizeof(int32_t) * (size_t)s->q_cap_rows);
        if (cfg->sampling.temp > 0.0f && !top)
            s->logits_h = tf_alloc(sizeof(float) * (size_t)s->q_cap_rows * hp->n_vocab);
        if (!s->tok_h || (cfg->sampling.temp > 0.0f && !top && !s->logits_h))
            st = tf_errf(err, TF_ERR_NOMEM, "decoder: out of memory");
    }
    if (st == TF_OK && !s->seq) st = tf_errf(err, TF_ERR_NOMEM, "decoder: out of memory");
    if (st != TF_OK) tf_spec_free(s);
    return st;
}

void tf_spec_free(tf_spec *s) {
    for (int i = 0; i < TF_SPEC_MAX_LEVELS; i++) level_free(s, &s->lv[i]);
    if (s->has_rc) tf_rcache_free(&s->rc);
    tf_kv_free(&s->kv_p);
    if (s->q_cap) s->be.ops->free(&s->be, s->q_cap);
    if (s->q_last) s->be.ops->free(&s->be, s->q_last);
    tf_bweights_free(&s->wd);
    tf_bweights_free(&s->wt);
    tf_backend_free(&s->be);
    tf_sampling_free(&s->samp);
    tf_verifier_free(&s->ver);
    tf_free(s->seq);
    tf_free(s->tok_h);
    tf_free(s->logits_h);
    tf_free(s->topk_h);
    memset(s, 0, sizeof *s);
}

void tf_spec_reset(tf_spec *s, uint64_t seed) {
    for (int i = 0; i < s->n_levels; i++) {
        spec_level *L = &s->lv[i];
        if (L->kind == LEVEL_STREAMING) {
            tf_scache_reset(&L->sc);
        } else if (L->kind == LEVEL_RETRIEVAL) {
            L->view.n_used = 0;
            L->r_base = 0;
            L->r_sel = 0;
        }
        L->n_cached = 0;
        L->accept_ewma = 1.0f;
        L->bypass_run = 0;
        memset(&L->st, 0, sizeof L->st);
    }
    tf_kv_truncate(&s->kv_p, 0);
    if (s->has_rc) tf_rcache_truncate(&s->rc, &s->kv_p, 0);
    s->n_seq = s->n_emitted = 0;
    s->passes_since_rebuild = 0;
    controllers_init(s);
    s->cfg.sampling.seed = seed;
    tf_rng_seed(&s->samp.rng, seed);
    tf_rng_seed(&s->rng, seed ^ 0x7f4a7c159e3779b9ull);
}

/* Feed seq[n_cached, upto) to level i in batches, computing no logits. */
static tf_status feed_quiet(tf_spec *s, int i, int64_t upto, tf_progress_fn progress, void *ud, int64_t *done,
                            int64_t total) {
    spec_level *L = &s->lv[i];
    while (L->n_cached < upto) {
        int32_t nb = (int32_t)(upto - L->n_cached < L->fwd.n_batch ? upto - L->n_cached : L->fwd.n_batch);
        /* the prompt's newest query, at q_cap's layer stride as save_last_query reads it */
        const tf_fwd_out qout = {.q = s->q_cap, .q_row = nb - 1, .q_max = s->q_cap_rows};
        const bool last = i == 0 && s->q_cap && L->n_cached + nb == upto;
        TF_TRY(level_forward(s, i, s->seq + L->n_cached, nb, nb, last ? &qout : NULL));
        *done += nb;
        if (progress && !progress(ud, (uint64_t)*done, (uint64_t)total))
            return tf_errf(&s->err, TF_ERR_CANCELLED, "prefill cancelled after %lld tokens", (long long)*done);
    }
    return TF_OK;
}

static int64_t lower_prefill_tokens(const tf_spec *s, int64_t P);
static tf_status prefill_lower(tf_spec *s, tf_progress_fn progress, void *ud, int64_t *done, int64_t total);

/* Check the prompt and make it the sequence (nothing cached yet). */
static tf_status start_prompt(tf_spec *s, const int32_t *tokens, int32_t n) {
    const int32_t V = s->target->hp.n_vocab;
    if (n < 1 || n >= s->cfg.n_ctx)
        return tf_errf(&s->err, TF_ERR_RANGE, "prompt of %d tokens: expected 1..%d for a context of %d", n,
                       s->cfg.n_ctx - 1, s->cfg.n_ctx);
    if (s->n_seq != 0) return tf_errf(&s->err, TF_ERR_INVALID_ARG, "prefill: the decoder already holds a sequence");
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= V)
            return tf_errf(&s->err, TF_ERR_INVALID_ARG, "prompt token %d at index %d is out of range (0..%d)",
                           tokens[i], i, V - 1);
    memcpy(s->seq, tokens, sizeof(int32_t) * (size_t)n);
    s->n_seq = s->n_emitted = n;
    s->n_prefilled = n - 1;
    return TF_OK;
}

tf_status tf_spec_prefill(tf_spec *s, const int32_t *tokens, int32_t n, tf_progress_fn progress, void *ud) {
    tf_err_clear(&s->err);
    TF_TRY(start_prompt(s, tokens, n));
    int64_t P = n - 1, done = 0, total = P + lower_prefill_tokens(s, P);
    TF_TRY(feed_quiet(s, 0, P, progress, ud, &done, total));
    if (s->q_cap) save_last_query(s, 0);
    return prefill_lower(s, progress, ud, &done, total);
}

/* Tokens the levels below the target feed at prefill for a prompt whose first
 * P tokens are cached: each streaming level its sinks and window. */
static int64_t lower_prefill_tokens(const tf_spec *s, int64_t P) {
    int64_t total = 0, SW = (int64_t)s->cfg.sinks + s->cfg.window;
    for (int i = 1; i < s->n_levels; i++)
        if (s->lv[i].kind == LEVEL_STREAMING) total += P < SW ? P : SW;
    return total;
}

/* The first n slots of src's full cache as this decoder's (src's device work
 * finished first), with the retrieval sums brought up to date. */
static tf_status copy_target_cache(tf_spec *s, const tf_spec *src, int32_t n) {
    if (!src->be.ops->host_memory) TF_TRY(src->be.ops->sync((tf_backend *)&src->be, "the source decoder", &s->err));
    TF_TRY(tf_kv_copy_prefix(&s->kv_p, &src->kv_p, n, &s->err));
    s->lv[0].n_cached = n;
    if (s->has_rc) tf_rcache_note_append(&s->rc, &s->kv_p, 0, n);
    return TF_OK;
}

tf_status tf_spec_prefill_from(tf_spec *s, const tf_spec *src, tf_progress_fn progress, void *ud) {
    tf_err_clear(&s->err);
    if (strcmp(s->be.ops->name, src->be.ops->name) != 0)
        return tf_errf(&s->err, TF_ERR_INVALID_ARG, "prefill from another decoder: it runs on %s, this one on %s",
                       src->be.ops->name, s->be.ops->name);
    if (s->n_seq != 0) return tf_errf(&s->err, TF_ERR_INVALID_ARG, "prefill: the decoder already holds a sequence");
    if (src->target != s->target)
        return tf_errf(&s->err, TF_ERR_INVALID_ARG, "prefill from another decoder: its target model is not this one's");
    if (src->kv_p.type != s->kv_p.type)
        return tf_errf(&s->err, TF_ERR_INVALID_ARG, "prefill from another decoder: KV cache types differ");
    int64_t n = src->n_seq, P = src->lv[0].n_cached;
    if (n < 1 || n >= s->cfg.n_ctx)
        return tf_errf(&s->err, TF_ERR_RANGE, "prefill from another decoder of %lld tokens: expected 1..%d for a "
                       "context of %d", (long long)n, s->cfg.n_ctx - 1, s->cfg.n_ctx);
    if (s->has_rc && (!src->q_cap || P != n - 1))
        return tf_errf(&s->err, TF_ERR_INVALID_ARG, "prefill from another decoder: a retrieval level needs the "
                       "source's newest query (a source in retrieval or triforce mode, fresh from its prefill)");
    memcpy(s->seq, src->seq, sizeof(int32_t) * (size_t)n);
    s->n_seq = s->n_emitted = n;
    s->n_prefilled = n - 1;
    TF_TRY(copy_target_cache(s, src, (int32_t)P));
    if (s->has_rc) {
        size_t q_floats = (size_t)s->target->hp.n_layer * s->target->hp.n_head * s->target->hp.head_dim;
        TF_TRY(s->be.ops->copy(&s->be, s->q_last, src->q_last, sizeof(float) * q_floats, &s->err));
    }
    int64_t done = 0, total = (n - 1 - P) + lower_prefill_tokens(s, n - 1);
    TF_TRY(feed_quiet(s, 0, n - 1, progress, ud, &done, total));
    if (P < n - 1 && s->q_cap) save_last_query(s, 0);
    return prefill_lower(s, progress, ud, &done, total);
}

tf_status tf_spec_prefill_reuse(tf_spec *s, const int32_t *tokens, int32_t n, const tf_spec *src,
                                tf_progress_fn progress, void *ud, int32_t *n_reused) {
    tf_err_clear(&s->err);
    if (n_reused) *n_reused = 0;
    int32_t C = 0;
    const int32_t nb = s->lv[0].fwd.n_batch;
    if (src && strcmp(s->be.ops->name, src->be.ops->name) == 0 && src->target == s->target && src->kv_p.type == s->kv_p.type &&
        src->lv[0].fwd.n_batch == nb) {
        int64_t lim = src->n_prefilled < n - 1 ? src->n_prefilled : n - 1;
        while (C < lim && src->seq[C] == tokens[C]) C++;
        /* whole batches only: the rest goes through the batches a fresh prefill would use (which
         * also feeds the newest prompt token, whose query a retrieval level needs) */
        C = C / nb * nb;
        if (C >= n - 1) C = (n - 2) / nb * nb;
    }
    if (C == 0) return tf_spec_prefill(s, tokens, n, progress, ud);
    TF_TRY(start_prompt(s, tokens, n));
    /* positions 0..C-1 hold the same tokens after the same prefix, computed in
     * the same batches: their keys and values are bitwise what a prefill computes */
    TF_TRY(copy_target_cache(s, src, C));
    int64_t done = 0, total = (n - 1 - C) + lower_prefill_tokens(s, n - 1);
    TF_TRY(feed_quiet(s, 0, n - 1, progress, ud, &done, total));
    if (s->q_cap) save_last_query(s, 0);
    TF_TRY(prefill_lower(s, progress, ud, &done, total));
    if (n_reused) *n_reused = C;
    return TF_OK;
}

/* The levels below the target after it has cached the prompt's first P =
 * n_seq - 1 tokens: retrieval levels build their cache from the newest query,
 * streaming levels feed the sinks and the window. */
static tf_status prefill_lower(tf_spec *s, tf_progress_fn progress, void *ud, int64_t *done, int64_t total) {
    int64_t P = s->n_seq - 1;
    for (int i = 1; i < s->n_levels; i++) {
        spec_level *L = &s->lv[i];
        if (L->kind == LEVEL_RETRIEVAL) {
            TF_TRY(rebuild_retrieval(s, L));
        } else if (L->kind == LEVEL_STREAMING) {
            int64_t S = s->cfg.sinks, W = s->cfg.window;
            TF_TRY(feed_quiet(s, i, P < S ? P : S, progress, ud, done, total));
            if (P > S + W) {
                tf_scache_skip(&L->sc, P - W);
                L->n_cached = P - W;
            }
            TF_TRY(feed_quiet(s, i, P, progress, ud, done, total));
        }
    }
    return TF_OK;
}
