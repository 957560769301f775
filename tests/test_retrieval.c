/* test_retrieval.c — retrieval cache C_r: chunk sums (appends in pieces, rollback),
 * selection against the brute-force reference (ties included), the gather into a
 * view, and parameter / shape errors.
 *
 * Most data is on a lattice (multiples of 1/16, |key| <= 2, |query| <= 1): then
 * every f32 sum and dot product the fast path computes is exact, as is the
 * double reference, so the selections must match exactly, ties included (ties
 * are frequent on a lattice). One test uses continuous data, where the f32 and
 * double scores differ by rounding: there a difference is accepted only
 * between chunks whose reference scores are within 1e-5 of the boundary.
 * In q8_0 / q4_0 caches the lattice keys get one value per 32-value block
 * that fixes the block's scale at 1/16 (127/16 or -8/16), so that they are
 * stored exactly and the same exact checks apply.
 */
#include "testutil.h"

#include "core/mem.h"
#include "kv/retrieval.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct shape { int n_layer, n_head, n_head_kv, hd; } shape;

static const shape shapes[] = {
    {2, 4, 4, 8},  /* MHA */
    {2, 8, 4, 64}, /* GQA 2 */
    {3, 8, 2, 8},  /* GQA 4 */
    {1, 4, 1, 64}, /* GQA 4, one KV head */
};

/* The element types a cache of head_dim hd can have, the i-th of them in turn. */
static tf_dtype kv_type_at(int i, int hd) {
    static const tf_dtype types[] = {TF_DTYPE_F32, TF_DTYPE_F16, TF_DTYPE_Q8_0, TF_DTYPE_Q4_0};
    return types[i % (hd % 32 == 0 ? 4 : 2)];
}

/* Uniform multiples of 1/16 in [-lim, lim). */
static void fill_lattice(tf_rng *rng, float *x, size_t n, int lim) {
    for (size_t i = 0; i < n; i++) x[i] = (float)((int)(tf_rng_next(rng) % (uint64_t)(32 * lim)) - 16 * lim) / 16.0f;
}

/* Store n random tokens at slot0 of every layer (lattice keys unless
 * continuous), positions 1000 + slot; n_used grows to slot0 + n. */
static void store_random(tf_kv_cache *kv, tf_rng *rng, int32_t slot0, int32_t n, int continuous) {
    if (n <= 0) return;
    size_t kvd = (size_t)kv->n_head_kv * kv->head_dim;
    float *k = malloc(sizeof(float) * n * kvd), *v = malloc(sizeof(float) * n * kvd);
    for (int il = 0; il < kv->n_layer; il++) {
        if (continuous) tu_fill_uniform(rng, k, n * kvd, -2.0f, 2.0f);
        else fill_lattice(rng, k, n * kvd, 2);
        if (!continuous && (kv->type == TF_DTYPE_Q8_0 || kv->type == TF_DTYPE_Q4_0))
            for (size_t b = 0; b < n * kvd; b += 32) {
                /* q4_0: keys in [-8, 7]/16 with a -8/16; q8_0: a 127/16 (scale 1/16 either way) */
                if (kv->type == TF_DTYPE_Q4_0)
                    for (size_t i = b; i < b + 32; i++) k[i] = (float)((int)(tf_rng_next(rng) % 16) - 8) / 16.0f;
                k[b + tf_rng_next(rng) % 32] = kv->type == TF_DTYPE_Q4_0 ? -0.5f : 127.0f / 16.0f;
            }
        tu_fill_uniform(rng, v, n * kvd, -3.0f, 3.0f);
        tf_kv_store(kv, il, slot0, n, k, v, (int64_t)kvd);
    }
    for (int32_t i = 0; i < n; i++) kv->pos[slot0 + i] = 1000 + slot0 + i;
    if (kv->n_used < slot0 + n) kv->n_used = slot0 + n;
    free(k);
    free(v);
}

static float *random_q(tf_rng *rng, const shape *sh, int continuous) {
    size_t n = (size_t)sh->n_layer * sh->n_head * sh->hd;
    float *q = malloc(sizeof(float) * n);
    if (continuous) tu_fill_uniform(rng, q, n, -1.0f, 1.0f);
    else fill_lattice(rng, q, n, 1);
    return q;
}

/* Slots of chunk list sel (n_ch chunks) of an n_tok-slot cache, in order. */
static int32_t chunk_slots(const int32_t *sel, int32_t n_ch, int32_t c, int32_t n_tok, int32_t *slots) {
    int32_t n = 0;
    for (int32_t t = 0; t < n_ch; t++)
        for (int32_t s = sel[t] * c; s < (sel[t] + 1) * c && s < n_tok; s++) slots[n++] = s;
    return n;
}

/* The sums of every live chunk equal a from-scratch double sum of the cache. */
static void check_sums_exact(const tf_rcache *rc, const tf_kv_cache *full) {
    int32_t c = rc->p.chunk, n_ch = (rc->n_tok + c - 1) / c;
    float kr[64];
    double acc[64];
    for (int il = 0; il < full->n_layer; il++)
        for (int h = 0; h < full->n_head_kv; h++)
            for (int32_t j = 0; j < n_ch; j++) {
                for (int d = 0; d < full->head_dim; d++) acc[d] = 0;
                for (int32_t s = j * c; s < (j + 1) * c && s < rc->n_tok; s++) {
                    tf_kv_read(full, il, h, s, kr, NULL);
                    for (int d = 0; d < full->head_dim; d++) acc[d] += kr[d];
                }
                const float *sum = tf_rcache_chunk_sum(rc, il, h, j);
                for (int d = 0; d < full->head_dim; d++) assert_true((double)sum[d] == acc[d]);
            }
}

/* Bitwise equal sums over the chunks live in both. */
static void check_sums_equal(const tf_rcache *a, const tf_rcache *b) {
    assert_int_equal(a->n_tok, b->n_tok);
    int32_t n_ch = (a->n_tok + a->p.chunk - 1) / a->p.chunk;
    for (int il = 0; il < a->n_layer; il++)
        for (int h = 0; h < a->n_head_kv; h++)
            if (n_ch)
                assert_memory_equal(tf_rcache_chunk_sum(a, il, h, 0), tf_rcache_chunk_sum(b, il, h, 0),
                                    sizeof(float) * (size_t)n_ch * a->head_dim);
}

/* The view holds, in slots [0, n_sel), exactly the K/V of full's selected slots. */
static void check_view(const tf_rcache *rc, const tf_kv_cache *full, const tf_kv_cache *view) {
    int32_t *slots = malloc(sizeof(int32_t) * (size_t)(rc->n_tok + 1));
    float ka[64], va[64], kb[64], vb[64];
    assert_int_equal(view->n_used, rc->n_sel);
    for (int il = 0; il < full->n_layer; il++)
        for (int h = 0; h < full->n_head_kv; h++) {
            int32_t n = chunk_slots(tf_rcache_selection(rc, il, h), rc->n_sel_chunks, rc->p.chunk, rc->n_tok, slots);
            assert_int_equal(n, rc->n_sel);
            for (int32_t i = 0; i < n; i++) {
                tf_kv_read(full, il, h, slots[i], ka, va);
                tf_kv_read(view, il, h, i, kb, vb);
                assert_memory_equal(ka, kb, sizeof(float) * full->head_dim);
                assert_memory_equal(va, vb, sizeof(float) * full->head_dim);
                if (il == 0 && h == 0) assert_int_equal(view->pos[i], full->pos[slots[i]]);
            }
        }
    free(slots);
}

/* The fast selection equals the reference for every layer and head. With
 * near_tie_tol > 0 (continuous data), a chunk may differ only if its reference
 * score is within tol of the score at the selection boundary. Returns the
 * number of such tolerated differences. Also checks the always-kept chunks and
 * the tie rule on the reference scores. */
static int check_selection(const tf_rcache *rc, const tf_kv_cache *full, const float *q, int n_head,
                           double near_tie_tol) {
    const int32_t c = rc->p.chunk, n_tok = rc->n_tok, n_full = n_tok / c, n_ch = (n_tok + c - 1) / c;
    int32_t *ref = malloc(sizeof(int32_t) * (size_t)(n_ch + 1));
    double *score = malloc(sizeof(double) * (size_t)(n_full + 1));
    uint8_t *in_fast = malloc((size_t)n_ch + 1), *in_ref = malloc((size_t)n_ch + 1);
    tf_err err = {0};
    int tolerated = 0;
    for (int il = 0; il < full->n_layer; il++)
        for (int h = 0; h < full->n_head_kv; h++) {
            int32_t n_ref = -1;
            assert_int_equal(tf_rcache_select_ref(full, n_tok, &rc->p, q, n_head, il, h, ref, &n_ref, score, &err),
                             TF_OK);
            const int32_t *sel = tf_rcache_selection(rc, il, h);
            assert_int_equal(n_ref, rc->n_sel_chunks);
            memset(in_fast, 0, (size_t)n_ch + 1);
            memset(in_ref, 0, (size_t)n_ch + 1);
            for (int32_t t = 0; t < n_ref; t++) {
                if (t) assert_true(sel[t] > sel[t - 1]);
                assert_true(sel[t] >= 0 && sel[t] < n_ch);
                in_fast[sel[t]] = 1;
                in_ref[ref[t]] = 1;
            }
            if (n_tok == 0) continue;
            /* always kept: first chunk, recent window, partial chunk */
            assert_true(in_fast[0]);
            if (n_tok % c || rc->r_chunks || n_tok <= rc->p.budget) assert_true(in_fast[n_ch - 1]);
            if (n_tok > rc->p.budget)
                for (int32_t j = n_full - rc->r_chunks; j < n_full; j++) assert_true(in_fast[j]);
            if (n_tok <= rc->p.budget) {
                assert_int_equal(n_ref, n_ch);
                continue;
            }
            /* boundary: the worst selected middle chunk (by reference score and the tie rule) */
            double worst = INFINITY;
            for (int32_t j = 0; j < n_full; j++)
                if (in_ref[j] && !isnan(score[j]) && score[j] < worst) worst = score[j];
            for (int32_t j = 0; j < n_ch; j++) {
                if (in_fast[j] == in_ref[j]) continue;
                if (near_tie_tol > 0 && j < n_full && fabs(score[j] - worst) <= near_tie_tol) {
                    tolerated++;
                    continue;
                }
                print_error("layer %d head %d chunk %d: fast %d ref %d (score %.17g, boundary %.17g), n_tok %d "
                            "c %d budget %d recent %d\n",
                            il, h, j, in_fast[j], in_ref[j], j < n_full ? score[j] : NAN, worst, n_tok, c,
                            rc->p.budget, rc->p.recent);
                fail();
            }
            if (near_tie_tol > 0) continue;
            /* tie rule: a chunk left out never ranks before the last-ranked
             * middle chunk taken (score, then lower index first; NaN last) */
            for (int32_t j = 1; j < n_full - rc->r_chunks; j++)
                if (isnan(score[j])) score[j] = -INFINITY;
            int32_t last = -1;
            for (int32_t j = 1; j < n_full - rc->r_chunks; j++)
                if (in_fast[j] && (last < 0 || score[j] <= score[last])) last = j;
            for (int32_t u = 1; last >= 0 && u < n_full - rc->r_chunks; u++)
                if (!in_fast[u]) assert_true(score[last] > score[u] || (score[last] == score[u] && last < u));
        }
    free(ref);
    free(score);
    free(in_fast);
    free(in_ref);
    return tolerated;
}

/* Fill a view's every slot with canary data (what it holds is returned in
 * *snap as f32 K then V per layer/head/slot) to check the gather leaves slots
 * from n_sel on alone. */
static float *view_snapshot(const tf_kv_cache *view) {
    size_t per = (size_t)view->n_slots * view->head_dim * 2;
    float *snap = malloc(sizeof(float) * per * view->n_layer * view->n_head_kv);
    for (int il = 0; il < view->n_layer; il++)
        for (int h = 0; h < view->n_head_kv; h++) {
            float *p = snap + ((size_t)il * view->n_head_kv + h) * per;
            for (int32_t s = 0; s < view->n_slots; s++)
                tf_kv_read(view, il, h, s, p + (size_t)s * view->head_dim * 2,
                           p + (size_t)s * view->head_dim * 2 + view->head_dim);
        }
    return snap;
}

static void check_untouched(const tf_kv_cache *view, const float *snap, int32_t from) {
    size_t per = (size_t)view->n_slots * view->head_dim * 2;
    float kv[128];
    for (int il = 0; il < view->n_layer; il++)
        for (int h = 0; h < view->n_head_kv; h++)
            for (int32_t s = from; s < view->n_slots; s++) {
                tf_kv_read(view, il, h, s, kv, kv + view->head_dim);
                const float *p = snap + ((size_t)il * view->n_head_kv + h) * per + (size_t)s * view->head_dim * 2;
                assert_memory_equal(kv, p, sizeof(float) * view->head_dim * 2);
            }
}

typedef struct rcase {
    const shape *sh;
    tf_dtype type;
    int32_t chunk, budget, recent, n_tok;
    int pieces;
    tf_pool *pool;
} rcase;

/* One full check: appends in pieces vs one append, sums vs double, selection
 * vs the reference, the gather, the untouched tail of the view. */
static void run_case(const rcase *rc_case, tf_rng *rng) {
    const shape *sh = rc_case->sh;
    tf_err err = {0};
    tf_kv_cache full, view;
    int32_t cap = rc_case->n_tok + 1 + (int32_t)(tf_rng_next(rng) % 40);
    assert_int_equal(tf_kv_init(&full, sh->n_layer, sh->n_head_kv, sh->hd, cap, rc_case->type, &err), TF_OK);
    tf_rcache_params p = {.chunk = rc_case->chunk, .budget = rc_case->budget, .recent = rc_case->recent};
    tf_rcache rc, rc1;
    assert_int_equal(tf_rcache_init(&rc, &full, &p, rc_case->pool, &err), TF_OK);
    assert_int_equal(tf_rcache_init(&rc1, &full, &p, NULL, &err), TF_OK);
    /* append in random pieces, noting each */
    int32_t at = 0;
    for (int i = 0; i < rc_case->pieces && at < rc_case->n_tok; i++) {
        int32_t n = i == rc_case->pieces - 1 ? rc_case->n_tok - at
                                              : (int32_t)(tf_rng_next(rng) % (uint64_t)(rc_case->n_tok - at + 1));
        store_random(&full, rng, at, n, 0);
        tf_rcache_note_append(&rc, &full, at, n);
        at += n;
    }
    if (at < rc_case->n_tok) {
        store_random(&full, rng, at, rc_case->n_tok - at, 0);
        tf_rcache_note_append(&rc, &full, at, rc_case->n_tok - at);
    }
    assert_int_equal(rc.n_tok, rc_case->n_tok);
    tf_rcache_note_append(&rc1, &full, 0, rc_case->n_tok);
    check_sums_equal(&rc, &rc1);
    check_sums_exact(&rc, &full);

    float *q = random_q(rng, sh, 0);
    assert_int_equal(tf_rcache_view_init(&view, &rc, &full, 7, &err), TF_OK);
    store_random(&view, rng, 0, view.n_slots, 1);
    view.n_used = 0;
    float *snap = view_snapshot(&view);
    assert_int_equal(tf_rcache_build(&rc, &full, q, sh->n_head, &view, &err), TF_OK);
    assert_true(rc.n_sel <= p.budget);
    if (rc_case->n_tok > p.budget) assert_true(rc.n_sel > p.budget - p.chunk);
    else assert_int_equal(rc.n_sel, rc_case->n_tok);
    check_selection(&rc, &full, q, sh->n_head, 0.0);
    check_view(&rc, &full, &view);
    check_untouched(&view, snap, rc.n_sel);
    /* the same selection on the caller's thread */
    assert_int_equal(tf_rcache_select(&rc1, &full, q, sh->n_head, &err), TF_OK);
    assert_int_equal(rc1.n_sel_chunks, rc.n_sel_chunks);
    for (int pr = 0; pr < sh->n_layer * sh->n_head_kv; pr++)
        assert_memory_equal(rc1.sel + (size_t)pr * rc1.max_sel, rc.sel + (size_t)pr * rc.max_sel,
                            sizeof(int32_t) * rc.n_sel_chunks);
    free(snap);
    free(q);
    tf_kv_free(&view);
    tf_rcache_free(&rc);
    tf_rcache_free(&rc1);
    tf_kv_free(&full);
}

/* Selections and views against the reference over shapes, element types,
 * chunk sizes, budgets below / equal to / above the cache length and lengths
 * that are and are not multiples of the chunk. */
static void test_selection_vs_reference(void **state) {
    (void)state;
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed());
    tf_err err = {0};
    tf_pool *pool;
    assert_int_equal(tf_pool_create(&pool, 2, &err), TF_OK);
    static const int32_t chunks[] = {1, 5, 8, 12, 16, 64};
    int n_cases = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (size_t ci = 0; ci < sizeof chunks / sizeof chunks[0]; ci++) {
            int32_t c = chunks[ci];
            int32_t recents[3] = {0, 2 * c, 16};
            for (int ri = 0; ri < 3; ri++) {
                int32_t recent = recents[ri];
                int32_t r = (recent + c - 1) / c, min_b = c + r * c + c - 1;
                /* lengths: a multiple of c, not a multiple, short */
                int32_t lens[3] = {(min_b / c + 9) * c, (min_b / c + 13) * c + c / 2 + (c > 1), min_b - 3};
                for (int li = 0; li < 3; li++) {
                    int32_t n_tok = lens[li] < 0 ? 0 : lens[li];
                    int32_t budgets[4] = {min_b, min_b + 2 * c + 3, n_tok, n_tok + 5};
                    for (int bi = 0; bi < 4; bi++) {
                        if (budgets[bi] < min_b) continue;
                        rcase rcs = {.sh = &shapes[si], .type = kv_type_at(bi + li + ri + (int)ci, shapes[si].hd),
                                     .chunk = c, .budget = budgets[bi], .recent = recent, .n_tok = n_tok,
                                     .pieces = 1 + (int)(tf_rng_next(&rng) % 5), .pool = (bi & 1) ? pool : NULL};
                        run_case(&rcs, &rng);
                        n_cases++;
                    }
                }
            }
        }
    /* edge lengths: empty, one token, exactly one chunk */
    for (int t = 0; t < 2; t++)
        for (int32_t n_tok = 0; n_tok <= 8; n_tok += 4) {
            rcase rcs = {.sh = &shapes[2], .type = t ? TF_DTYPE_F16 : TF_DTYPE_F32, .chunk = 4, .budget = 15,
                         .recent = 4, .n_tok = n_tok, .pieces = 2, .pool = pool};
            run_case(&rcs, &rng);
            n_cases++;
        }
    print_message("%d cases\n", n_cases);
    tf_pool_free(pool);
}

/* Larger caches: the pool splits the pairs, and the sums go over the
 * serial-work threshold. */
static void test_large_threaded(void **state) {
    (void)state;
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() + 1);
    tf_err err = {0};
    tf_pool *pool;
    assert_int_equal(tf_pool_create(&pool, 2, &err), TF_OK);
    static const shape big = {2, 8, 4, 64};
    for (int t = 0; t < 4; t++) {
        rcase rcs = {.sh = &big, .type = kv_type_at(t, big.hd), .chunk = 8, .budget = 300, .recent = 16,
                     .n_tok = 3001, .pieces = 3, .pool = pool};
        run_case(&rcs, &rng);
    }
    /* thousands of candidates (the sampled-threshold path of the selection) */
    for (int t = 0; t < 2; t++) {
        rcase rcs = {.sh = &shapes[2], .type = t ? TF_DTYPE_F16 : TF_DTYPE_F32, .chunk = 1, .budget = 300,
                     .recent = 3, .n_tok = 5003, .pieces = 2, .pool = pool};
        run_case(&rcs, &rng);
    }
    tf_pool_free(pool);
}

/* Continuous data: f32 scores vs double reference; any difference must be a
 * near-tie at the selection boundary (none expected in practice). */
static void test_continuous_data(void **state) {
    (void)state;
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() + 2);
    tf_err err = {0};
    int tolerated = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int t = 0; t < 4; t++) {
            const shape *sh = &shapes[si];
            if (t >= 2 && sh->hd % 32) continue;
            tf_kv_cache full;
            tf_rcache rc;
            int32_t n_tok = 2000 + (int32_t)si * 37;
            tf_dtype type = kv_type_at(t, sh->hd);
            assert_int_equal(tf_kv_init(&full, sh->n_layer, sh->n_head_kv, sh->hd, n_tok, type, &err), TF_OK);
            tf_rcache_params p = {.chunk = 8, .budget = 500, .recent = 24};
            assert_int_equal(tf_rcache_init(&rc, &full, &p, NULL, &err), TF_OK);
            store_random(&full, &rng, 0, n_tok, 1);
            tf_rcache_note_append(&rc, &full, 0, n_tok);
            float *q = random_q(&rng, sh, 1);
            assert_int_equal(tf_rcache_select(&rc, &full, q, sh->n_head, &err), TF_OK);
            tolerated += check_selection(&rc, &full, q, sh->n_head, 1e-5);
            free(q);
            tf_rcache_free(&rc);
            tf_kv_free(&full);
        }
    print_message("continuous data: %d near-tie differences tolerated\n", tolerated);
}

/* Rollback: truncate, re-append different data (explicitly and through an
 * unreported overwrite); sums, selection and view equal those of a cache that
 * never saw the removed tokens. */
static void test_rollback(void **state) {
    (void)state;
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() + 3);
    tf_err err = {0};
    static const int32_t chunks[] = {1, 8, 12, 64};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (size_t ci = 0; ci < sizeof chunks / sizeof chunks[0]; ci++)
            for (int mode = 0; mode < 2; mode++) {
                const shape *sh = &shapes[si];
                int32_t c = chunks[ci], n0 = 40 * c + 3, cut = 17 * c + (c > 1 ? c / 2 : 0), n_new = 5 * c + 1;
                if (mode) cut = 17 * c; /* a chunk boundary */
                tf_dtype type = kv_type_at((int)(si + ci) + 2 * mode, sh->hd);
                tf_rcache_params p = {.chunk = c, .budget = 6 * c + 16, .recent = 16};
                tf_kv_cache a, b, va, vb;
                tf_rcache ra, rb;
                assert_int_equal(tf_kv_init(&a, sh->n_layer, sh->n_head_kv, sh->hd, n0 + n_new, type, &err), TF_OK);
                assert_int_equal(tf_kv_init(&b, sh->n_layer, sh->n_head_kv, sh->hd, n0 + n_new, type, &err), TF_OK);
                assert_int_equal(tf_rcache_init(&ra, &a, &p, NULL, &err), TF_OK);
                assert_int_equal(tf_rcache_init(&rb, &b, &p, NULL, &err), TF_OK);
                store_random(&a, &rng, 0, n0, 0);
                tf_rcache_note_append(&ra, &a, 0, n0 / 2);
                tf_rcache_note_append(&ra, &a, n0 / 2, n0 - n0 / 2);
                /* b gets a's first `cut` tokens, then the new ones, all at once */
                tf_kv_copy_slots(&b, 0, &a, 0, cut);
                if (mode == 0) {
                    tf_kv_truncate(&a, cut);
                    tf_rcache_truncate(&ra, &a, cut);
                    assert_int_equal(ra.n_tok, cut);
                    tf_rcache rfresh;
                    assert_int_equal(tf_rcache_init(&rfresh, &a, &p, NULL, &err), TF_OK);
                    tf_rcache_note_append(&rfresh, &a, 0, cut);
                    check_sums_equal(&ra, &rfresh);
                    tf_rcache_free(&rfresh);
                    store_random(&a, &rng, cut, n_new, 0);
                    tf_rcache_note_append(&ra, &a, cut, 2);
                    tf_rcache_note_append(&ra, &a, cut + 2, n_new - 2);
                } else { /* overwrite without reporting the rollback */
                    a.n_used = cut;
                    store_random(&a, &rng, cut, n_new, 0);
                    tf_rcache_note_append(&ra, &a, cut, n_new);
                }
                a.n_used = cut + n_new;
                tf_kv_copy_slots(&b, cut, &a, cut, n_new);
                assert_int_equal(b.n_used, cut + n_new);
                tf_rcache_note_append(&rb, &b, 0, cut + n_new);
                check_sums_equal(&ra, &rb);
                check_sums_exact(&ra, &a);
                float *q = random_q(&rng, sh, 0);
                assert_int_equal(tf_rcache_view_init(&va, &ra, &a, 0, &err), TF_OK);
                assert_int_equal(tf_rcache_view_init(&vb, &rb, &b, 0, &err), TF_OK);
                assert_int_equal(tf_rcache_build(&ra, &a, q, sh->n_head, &va, &err), TF_OK);
                assert_int_equal(tf_rcache_build(&rb, &b, q, sh->n_head, &vb, &err), TF_OK);
                assert_int_equal(ra.n_sel_chunks, rb.n_sel_chunks);
                assert_memory_equal(ra.sel, rb.sel, sizeof(int32_t) * ra.max_sel * sh->n_layer * sh->n_head_kv);
                check_selection(&ra, &a, q, sh->n_head, 0.0);
                check_view(&ra, &a, &va);
                assert_int_equal(va.n_used, vb.n_used);
                assert_memory_equal(va.k, vb.k, va.bytes);
                assert_memory_equal(va.v, vb.v, va.bytes);
                assert_memory_equal(va.pos, vb.pos, sizeof(int32_t) * va.n_used);
                free(q);
                tf_kv_free(&va);
                tf_kv_free(&vb);
                tf_rcache_free(&ra);
                tf_rcache_free(&rb);
                tf_kv_free(&a);
                tf_kv_free(&b);
            }
}

/* Continuous keys, where f32 sums round and the order of additions shows:
 * appends in random pieces (single tokens included), rollbacks to random
 * points and re-appends of different data give the same sum bits as one
 * append of the final contents into a cache that never saw the removed ones. */
static void test_sums_bit_exact(void **state) {
    (void)state;
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() + 9);
    tf_err err = {0};
    static const int32_t chunks[] = {1, 3, 8, 12, 16, 64};
    const shape *sh = &shapes[1];
    for (size_t ci = 0; ci < sizeof chunks / sizeof chunks[0]; ci++)
        for (int t = 0; t < 4; t++) {
            const int32_t cap = 700;
            tf_kv_cache a, b;
            tf_rcache ra, rb;
            tf_dtype type = kv_type_at(t, sh->hd);
            tf_rcache_params p = {.chunk = chunks[ci], .budget = 4096, .recent = 16};
            assert_int_equal(tf_kv_init(&a, sh->n_layer, sh->n_head_kv, sh->hd, cap, type, &err), TF_OK);
            assert_int_equal(tf_kv_init(&b, sh->n_layer, sh->n_head_kv, sh->hd, cap, type, &err), TF_OK);
            assert_int_equal(tf_rcache_init(&ra, &a, &p, NULL, &err), TF_OK);
            for (int step = 0; step < 12; step++) {
                int32_t at = a.n_used;
                if (step % 3 == 2 && at > 0) { /* rollback to a random point */
                    int32_t to = (int32_t)(tf_rng_next(&rng) % (uint64_t)at);
                    tf_kv_truncate(&a, to);
                    tf_rcache_truncate(&ra, &a, to);
                    continue;
                }
                int32_t room = cap - at;
                int32_t n = step % 3 == 1 ? 1 : (int32_t)(tf_rng_next(&rng) % (uint64_t)(room / 3 + 1));
                if (n > room) n = room;
                store_random(&a, &rng, at, n, 1);
                tf_rcache_note_append(&ra, &a, at, n);
            }
            tf_kv_copy_slots(&b, 0, &a, 0, a.n_used);
            assert_int_equal(tf_rcache_init(&rb, &b, &p, NULL, &err), TF_OK);
            tf_rcache_note_append(&rb, &b, 0, b.n_used);
            check_sums_equal(&ra, &rb);
            tf_rcache_free(&ra);
            tf_rcache_free(&rb);
            tf_kv_free(&a);
            tf_kv_free(&b);
        }
}

/* Explicit ties: chunks with equal keys score equally; lower indices win. */
static void test_ties(void **state) {
    (void)state;
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() + 4);
    tf_err err = {0};
    const shape *sh = &shapes[2]; /* GQA 4 */
    for (int pattern = 0; pattern < 4; pattern++)
        for (int t = 0; t < 2; t++) {
            const int32_t c = 8, n_tok = 50 * c + 5;
            tf_kv_cache full;
            tf_rcache rc;
            tf_dtype type = t ? TF_DTYPE_F16 : TF_DTYPE_F32;
            assert_int_equal(tf_kv_init(&full, sh->n_layer, sh->n_head_kv, sh->hd, n_tok, type, &err), TF_OK);
            tf_rcache_params p = {.chunk = c, .budget = 15 * c + 7, .recent = 16};
            assert_int_equal(tf_rcache_init(&rc, &full, &p, NULL, &err), TF_OK);
            /* chunk j's keys: pattern 0 all equal; 1: one of three chunks of
             * keys (by j % 3: three classes of equal scores, check_selection
             * checks the tie rule within them); 2: the same multiset of keys per chunk, permuted
             * within the chunk (equal sums, different slots); 3: varied
             * keys but a zero query (-0.0f): every score is zero */
            size_t kvd = (size_t)sh->n_head_kv * sh->hd;
            float *base = malloc(sizeof(float) * 3 * c * kvd), *k = malloc(sizeof(float) * kvd),
                  *v = malloc(sizeof(float) * kvd);
            fill_lattice(&rng, base, 3 * c * kvd, 2);
            for (int il = 0; il < sh->n_layer; il++)
                for (int32_t s = 0; s < n_tok; s++) {
                    int32_t j = s / c, i = s % c;
                    int32_t src = pattern == 0 ? 0 : pattern == 1 ? (j % 3) * c + i : pattern == 2 ? (i + j) % c
                                                                                    : (7 * j + i) % (3 * c);
                    memcpy(k, base + (size_t)src * kvd, sizeof(float) * kvd);
                    tu_fill_uniform(&rng, v, kvd, -1, 1);
                    tf_kv_store(&full, il, s, 1, k, v, (int64_t)kvd);
                }
            full.n_used = n_tok;
            for (int32_t s = 0; s < n_tok; s++) full.pos[s] = s;
            tf_rcache_note_append(&rc, &full, 0, n_tok);
            float *q = random_q(&rng, sh, 0);
            if (pattern == 3)
                for (int i = 0; i < sh->n_layer * sh->n_head * sh->hd; i++) q[i] = -0.0f;
            assert_int_equal(tf_rcache_select(&rc, &full, q, sh->n_head, &err), TF_OK);
            check_selection(&rc, &full, q, sh->n_head, 0.0);
            int32_t k_mid = rc.n_sel_chunks - 1 - rc.r_chunks - 1;
            assert_true(k_mid > 0);
            for (int il = 0; il < sh->n_layer; il++)
                for (int h = 0; h < sh->n_head_kv; h++) {
                    const int32_t *sel = tf_rcache_selection(&rc, il, h);
                    if (pattern != 1) /* everything ties: the lowest middle chunks win */
                        for (int32_t x = 0; x <= k_mid; x++) assert_int_equal(sel[x], x);
                }
            free(base);
            free(k);
            free(v);
            free(q);
            tf_rcache_free(&rc);
            tf_kv_free(&full);
        }
}

/* Adversarial scores for the sampled threshold: the chunks at the evenly
 * spaced positions the selection samples (candidate i = chunk i + 1, sample
 * t at (2t+1) * m / 512 of m candidates) score highest, so the threshold
 * keeps fewer than k chunks and the selection must fall back to all. The
 * result is checked against the reference whatever the internals do. */
static void test_adversarial_scores(void **state) {
    (void)state;
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() + 7);
    tf_err err = {0};
    const int32_t n_tok = 4002, m = n_tok - 1;
    tf_kv_cache full;
    tf_rcache rc;
    assert_int_equal(tf_kv_init(&full, 1, 1, 1, n_tok, TF_DTYPE_F32, &err), TF_OK);
    tf_rcache_params p = {.chunk = 1, .budget = 201, .recent = 0};
    assert_int_equal(tf_rcache_init(&rc, &full, &p, NULL, &err), TF_OK);
    float *k = malloc(sizeof(float) * n_tok), *v = malloc(sizeof(float) * n_tok);
    fill_lattice(&rng, k, (size_t)n_tok, 2);
    tu_fill_uniform(&rng, v, (size_t)n_tok, -1, 1);
    for (int t = 0; t < 256; t++) k[1 + (int64_t)(2 * t + 1) * m / 512] = 64.0f + (float)(t % 16) / 4.0f;
    tf_kv_store(&full, 0, 0, n_tok, k, v, 1);
    full.n_used = n_tok;
    tf_rcache_note_append(&rc, &full, 0, n_tok);
    const float q[2] = {1.0f, 0.5f};
    assert_int_equal(tf_rcache_select(&rc, &full, q, 2, &err), TF_OK);
    assert_int_equal(rc.n_sel, 201);
    check_selection(&rc, &full, q, 2, 0.0);
    free(k);
    free(v);
    tf_rcache_free(&rc);
    tf_kv_free(&full);
}

/* Keys that are f16 subnormals (exact sums), and infinities and NaNs: the
 * block-wise and the element-wise conversions give the same sums bit for bit,
 * and NaN scores rank last, as in the reference. */
static void test_special_values(void **state) {
    (void)state;
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() + 8);
    tf_err err = {0};
    const int32_t n_tok = 203, hd = 8;
    for (int t = 0; t < 2; t++)
        for (int phase = 0; phase < 2; phase++) {
            tf_kv_cache full;
            tf_rcache bulk, one;
            assert_int_equal(tf_kv_init(&full, 1, 1, hd, n_tok, t ? TF_DTYPE_F16 : TF_DTYPE_F32, &err), TF_OK);
            tf_rcache_params p = {.chunk = 4, .budget = 60, .recent = 4};
            assert_int_equal(tf_rcache_init(&bulk, &full, &p, NULL, &err), TF_OK);
            assert_int_equal(tf_rcache_init(&one, &full, &p, NULL, &err), TF_OK);
            float *k = malloc(sizeof(float) * n_tok * hd), *v = malloc(sizeof(float) * n_tok * hd);
            fill_lattice(&rng, k, (size_t)n_tok * hd, 2);
            tu_fill_uniform(&rng, v, (size_t)n_tok * hd, -1, 1);
            /* every third chunk (of 4 slots) holds only f16 subnormals: sums stay exact */
            for (int i = 0; i < n_tok * hd; i++)
                if ((i / (4 * hd)) % 3 == 1) k[i] = (float)((int)(tf_rng_next(&rng) % 2047) - 1023) * 0x1p-24f;
            if (phase) {
                k[7 * 4 * hd + 1] = INFINITY;                                   /* chunk 7: +inf */
                k[13 * 4 * hd] = INFINITY, k[13 * 4 * hd + hd] = -INFINITY;     /* chunk 13: NaN */
                k[20 * 4 * hd + 2 * hd + 5] = NAN;                              /* chunk 20: NaN */
                k[31 * 4 * hd + 3 * hd + 2] = -INFINITY;                        /* chunk 31: -inf */
            }
            tf_kv_store(&full, 0, 0, n_tok, k, v, hd);
            full.n_used = n_tok;
            tf_rcache_note_append(&bulk, &full, 0, n_tok);
            for (int32_t s = 0; s < n_tok; s++) tf_rcache_note_append(&one, &full, s, 1);
            check_sums_equal(&bulk, &one);
            if (!phase) check_sums_exact(&bulk, &full);
            const float q[2 * 8] = {1, -0.5f, 0.25f, 1, 0, 0.75f, -1, 0.5f, 0.5f, 0.5f, -0.25f, 1, 1, 0, -1, 0.25f};
            assert_int_equal(tf_rcache_select(&bulk, &full, q, 2, &err), TF_OK);
            check_selection(&bulk, &full, q, 2, 0.0);
            free(k);
            free(v);
            tf_rcache_free(&bulk);
            tf_rcache_free(&one);
            tf_kv_free(&full);
        }
}

/* Copying slots between caches at unaligned offsets, every element type. */
static void test_copy_slots(void **state) {
    (void)state;
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() + 5);
    tf_err err = {0};
    for (int t = 0; t < 4; t++) {
        tf_kv_cache a, b;
        const int hd = t < 2 ? 8 : 32;
        tf_dtype type = kv_type_at(t, hd);
        assert_int_equal(tf_kv_init(&a, 2, 3, hd, 200, type, &err), TF_OK);
        assert_int_equal(tf_kv_init(&b, 2, 3, hd, 100, type, &err), TF_OK);
        store_random(&a, &rng, 0, 200, 1);
        store_random(&b, &rng, 0, 100, 1);
        b.n_used = 20;
        static const int32_t cases[][3] = {{3, 77, 41}, {32, 64, 33}, {0, 0, 100}, {99, 5, 1}, {17, 150, 50}};
        for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
            int32_t dst = cases[ci][0], src = cases[ci][1], n = cases[ci][2];
            float *snap = view_snapshot(&b);
            tf_kv_copy_slots(&b, dst, &a, src, n);
            float ka[32], va[32], kb[32], vb[32];
            for (int il = 0; il < 2; il++)
                for (int h = 0; h < 3; h++)
                    for (int32_t s = 0; s < b.n_slots; s++) {
                        tf_kv_read(&b, il, h, s, kb, vb);
                        if (s >= dst && s < dst + n) tf_kv_read(&a, il, h, src + s - dst, ka, va);
                        else {
                            const float *p = snap + ((size_t)il * 3 + h) * b.n_slots * 2 * hd + (size_t)s * 2 * hd;
                            memcpy(ka, p, sizeof(float) * hd);
                            memcpy(va, p + hd, sizeof(float) * hd);
                        }
                        assert_memory_equal(ka, kb, sizeof(float) * hd);
                        assert_memory_equal(va, vb, sizeof(float) * hd);
                    }
            for (int32_t s = 0; s < n; s++) assert_int_equal(b.pos[dst + s], a.pos[src + s]);
            assert_true(b.n_used >= dst + n);
            free(snap);
        }
        tf_kv_free(&a);
        tf_kv_free(&b);
    }
}

/* Bad parameters, wrong views, misuse that input can cause. */
static void test_errors(void **state) {
    (void)state;
    tf_err err = {0};
    tf_kv_cache full, view;
    tf_rcache rc;
    assert_int_equal(tf_kv_init(&full, 2, 2, 8, 500, TF_DTYPE_F32, &err), TF_OK);
    const tf_rcache_params bad[] = {
        {.chunk = 0, .budget = 100, .recent = 16},  {.chunk = -3, .budget = 100, .recent = 16},
        {.chunk = 65, .budget = 1000, .recent = 16}, {.chunk = 8, .budget = 30, .recent = 16},
        {.chunk = 8, .budget = 100, .recent = -1},  {.chunk = 64, .budget = 190, .recent = 1},
        {.chunk = 1, .budget = 0, .recent = 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tf_err_clear(&err);
        assert_int_equal(tf_rcache_init(&rc, &full, &bad[i], NULL, &err), TF_ERR_INVALID_ARG);
        assert_true(strstr(err.msg, "retrieval cache") != NULL);
        assert_null(rc.sum);
        tf_rcache_free(&rc); /* no-op on a failed init */
    }
    /* the smallest budgets are accepted */
    const tf_rcache_params ok[] = {
        {.chunk = 8, .budget = 31, .recent = 16}, {.chunk = 64, .budget = 191, .recent = 1},
        {.chunk = 1, .budget = 1, .recent = 0},   {.chunk = 5, .budget = 24, .recent = 10},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        assert_int_equal(tf_rcache_init(&rc, &full, &ok[i], NULL, &err), TF_OK);
        tf_rcache_free(&rc);
    }
    tf_rcache_params p = tf_rcache_default_params();
    assert_int_equal(p.chunk, 8);
    p.budget = 64;
    assert_int_equal(tf_rcache_init(&rc, &full, &p, NULL, &err), TF_OK);
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() + 6);
    store_random(&full, &rng, 0, 300, 0);
    float *q = malloc(sizeof(float) * 2 * 4 * 8);
    fill_lattice(&rng, q, 2 * 4 * 8, 1);
    /* sums not told about the stores */
    tf_err_clear(&err);
    assert_int_equal(tf_rcache_select(&rc, &full, q, 4, &err), TF_ERR_INVALID_ARG);
    assert_true(strstr(err.msg, "note_append") != NULL);
    tf_rcache_note_append(&rc, &full, 0, 300);
    /* gather before any selection */
    assert_int_equal(tf_rcache_view_init(&view, &rc, &full, 4, &err), TF_OK);
    assert_int_equal(view.n_slots, 80); /* 64 + 4, rounded to blocks */
    tf_err_clear(&err);
    assert_int_equal(tf_rcache_gather(&rc, &full, &view, &err), TF_ERR_INVALID_ARG);
    /* n_head not a multiple of n_head_kv */
    tf_err_clear(&err);
    assert_int_equal(tf_rcache_select(&rc, &full, q, 3, &err), TF_ERR_INVALID_ARG);
    tf_err_clear(&err);
    assert_int_equal(tf_rcache_select(&rc, &full, q, 1, &err), TF_ERR_INVALID_ARG);
    assert_int_equal(tf_rcache_select(&rc, &full, q, 4, &err), TF_OK);
    /* views of the wrong shape, type or size, or the full cache itself */
    tf_kv_cache wrong;
    const int shapes_bad[][4] = {{3, 2, 8, 64}, {2, 1, 8, 64}, {2, 2, 16, 64}, {2, 2, 8, 48}};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(tf_kv_init(&wrong, shapes_bad[i][0], shapes_bad[i][1], shapes_bad[i][2], shapes_bad[i][3],
                                    TF_DTYPE_F32, &err),
                         TF_OK);
        tf_err_clear(&err);
        assert_int_equal(tf_rcache_build(&rc, &full, q, 4, &wrong, &err), TF_ERR_INVALID_ARG);
        assert_true(strstr(err.msg, "view") != NULL);
        tf_kv_free(&wrong);
    }
    assert_int_equal(tf_kv_init(&wrong, 2, 2, 8, 64, TF_DTYPE_F16, &err), TF_OK);
    tf_err_clear(&err);
    assert_int_equal(tf_rcache_build(&rc, &full, q, 4, &wrong, &err), TF_ERR_INVALID_ARG);
    tf_kv_free(&wrong);
    tf_err_clear(&err);
    assert_int_equal(tf_rcache_build(&rc, &full, q, 4, &full, &err), TF_ERR_INVALID_ARG);
    /* a full cache of another shape */
    assert_int_equal(tf_kv_init(&wrong, 2, 2, 4, 300, TF_DTYPE_F32, &err), TF_OK);
    wrong.n_used = 300;
    tf_err_clear(&err);
    assert_int_equal(tf_rcache_select(&rc, &wrong, q, 4, &err), TF_ERR_INVALID_ARG);
    tf_kv_free(&wrong);
    /* a selection made stale by an append */
    assert_int_equal(tf_rcache_select(&rc, &full, q, 4, &err), TF_OK);
    store_random(&full, &rng, 300, 1, 0);
    tf_rcache_note_append(&rc, &full, 300, 1);
    tf_err_clear(&err);
    assert_int_equal(tf_rcache_gather(&rc, &full, &view, &err), TF_ERR_INVALID_ARG);
    assert_int_equal(tf_rcache_build(&rc, &full, q, 4, &view, &err), TF_OK);
    free(q);
    tf_kv_free(&view);
    tf_rcache_free(&rc);
    tf_kv_free(&full);
    /* an uninitialized full cache */
    tf_kv_cache none;
    memset(&none, 0, sizeof none);
    tf_err_clear(&err);
    assert_int_equal(tf_rcache_init(&rc, &none, &p, NULL, &err), TF_ERR_INVALID_ARG);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_selection_vs_reference),
        cmocka_unit_test(test_large_threaded),
        cmocka_unit_test(test_continuous_data),
        cmocka_unit_test(test_rollback),
        cmocka_unit_test(test_sums_bit_exact),
        cmocka_unit_test(test_ties),
        cmocka_unit_test(test_adversarial_scores),
        cmocka_unit_test(test_special_values),
        cmocka_unit_test(test_copy_slots),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
