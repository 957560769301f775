/*
 * attn.c — attention driver: plans work items over (KV head, query tile, key
 * split), runs the ISA-specific item kernel on the pool with dynamic
 * scheduling, then merges the partial softmax states exactly. Also the scalar
 * double-precision reference.
 */
#include "backend/cpu/attn.h"

#include "backend/cpu/attn_item.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define QTILE 16        /* batches of up to this many rows (decode, verification) split the keys */
#define QTILE_PF 64     /* query positions per item in prefill (larger batches), at most */
#define SPLIT_KEYS 1024 /* decode / verification: keys per split, at fixed slot boundaries */

typedef struct plan {
    const tf_attn_args *a;
    void (*item_fn)(const attn_item *);
    int g, hd, n_qt, n_split;
    int qt;            /* query positions per item: QTILE, or QTILE_PF in prefill */
    int32_t split_len; /* keys per split (multiple of 64) */
    /* the visible slots as up to two segments [seg_lo[i], seg_hi[i]), each cut
     * at the multiples of split_len into seg_n[i] splits */
    int32_t seg_lo[2], seg_hi[2], seg_n[2];
    int64_t n_items;
    float *part;       /* [n_items][qt*g][hd + 2] */
    uint8_t *thread_scratch;
    size_t thread_scratch_size;
    atomic_long next;
} plan;

/* Floats before the AMX scratch in a thread's scratch (rounded up to 64 bytes). */
static size_t amx_offset(int32_t n_head, int32_t hd) {
    return ((size_t)QTILE_PF * n_head * hd + 128u * hd + (size_t)QTILE_PF * n_head * 16 + 15) & ~(size_t)15;
}

static size_t thread_scratch_bytes(int32_t n_head, int32_t hd) {
    /* qbuf [QTILE_PF*g][hd] (g <= n_head) + kt [64][hd] + v [64][hd] + lvec [QTILE_PF*g][16], then the AMX scratch */
    return sizeof(float) * (amx_offset(n_head, hd) + TF_ATTN_AMX_SCRATCH((size_t)hd)) + 256;
}

/* Key range [*lo, *hi) of split i (segments in order, each cut at multiples of split_len). */
static void split_range(const plan *p, int i, int32_t *lo, int32_t *hi) {
    int sg = i < p->seg_n[0] ? 0 : 1;
    if (sg) i -= p->seg_n[0];
    int32_t first = p->seg_lo[sg] / p->split_len + i;
    *lo = first * p->split_len > p->seg_lo[sg] ? first * p->split_len : p->seg_lo[sg];
    *hi = (first + 1) * p->split_len < p->seg_hi[sg] ? (first + 1) * p->split_len : p->seg_hi[sg];
}

/* Splits of [lo, hi) at multiples of len. */
static int32_t n_cuts(int32_t lo, int32_t hi, int32_t len) { return hi <= lo ? 0 : (hi - 1) / len - lo / len + 1; }

static size_t part_floats(int32_t n_q, int qt, int32_t n_head, int32_t hd, int n_split) {
    int32_t n_qt = (n_q + qt - 1) / qt;
    return (size_t)n_split * n_qt * qt * n_head * (hd + 2);
}

size_t tf_attn_scratch_size(int n_threads, int32_t n_q_max, int32_t n_head, int32_t head_dim, int32_t n_kv_max) {
    int max_split = (n_kv_max + SPLIT_KEYS - 1) / SPLIT_KEYS + 1; /* + 1: a gap cuts one split in two */
    size_t a = part_floats(n_q_max, QTILE_PF, n_head, head_dim, 2);
    size_t b = part_floats(QTILE, QTILE, n_head, head_dim, max_split);
    return sizeof(float) * (a > b ? a : b) + (size_t)n_threads * thread_scratch_bytes(n_head, head_dim) + 256;
}

static void run_items(void *arg, int ith, int nth) {
    plan *p = arg;
    const tf_attn_args *a = p->a;
    const tf_kv_view *kv = &a->kv;
    float *ts = (float *)(p->thread_scratch + (size_t)ith * p->thread_scratch_size);
    const int g = p->g, hd = p->hd;
    for (;;) {
        long it_id = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (it_id >= p->n_items) break;
        int split = (int)(it_id % p->n_split);
        long rest = it_id / p->n_split;
        int qt = (int)(rest % p->n_qt);
        int h = (int)(rest / p->n_qt);
        int q0 = qt * p->qt;
        int nq = a->n_q - q0 < p->qt ? a->n_q - q0 : p->qt;
        int rows = nq * g;
        float *part = p->part + (size_t)it_id * p->qt * g * (hd + 2);
        int32_t klo, k1;
        split_range(p, split, &klo, &k1);
        attn_item item = {
            .q = a->q + (size_t)q0 * a->ldq + (size_t)h * g * hd,
            .ldq = a->ldq,
            .kbase = tf_kv_view_k(kv, h),
            .vbase = tf_kv_view_v(kv, h),
            .kv_type = kv->lay.type,
            .k_blk_bytes = kv->lay.k_blk_bytes,
            .v_row_bytes = kv->lay.v_row_bytes,
            .hd = hd,
            .g = g,
            .n_qpos = nq,
            .kv_len = a->kv_len + q0,
            .k0 = klo / TF_KV_BLK * TF_KV_BLK,
            .klo = klo,
            .k1 = k1,
            .scale = a->scale,
            .m = part,
            .l = part + rows,
            .acc = part + 2 * rows,
            .qbuf = ts,
            .kt_buf = ts + (size_t)QTILE_PF * a->n_head * hd,
            .v_buf = ts + (size_t)QTILE_PF * a->n_head * hd + 64u * hd,
            .lvec = ts + (size_t)QTILE_PF * a->n_head * hd + 128u * hd,
            .amx = ts + amx_offset(a->n_head, hd),
        };
        p->item_fn(&item);
    }
    (void)nth;
}

/* Combine the n_split partial states of every output row into out. */
static void merge_rows(void *arg, int ith, int nth) {
    plan *p = arg;
    const tf_attn_args *a = p->a;
    const int g = p->g, hd = p->hd;
    long total = (long)a->n_q * a->n_head, lo, hi;
    tf_split_range(total, ith, nth, &lo, &hi);
    for (long row = lo; row < hi; row++) {
        int qi = (int)(row / a->n_head), hq = (int)(row % a->n_head);
        int h = hq / g, gi = hq % g, qt = qi / p->qt, qr = qi % p->qt;
        int nq = a->n_q - qt * p->qt < p->qt ? a->n_q - qt * p->qt : p->qt;
        int rows = nq * g, r = qr * g + gi;
        float M = -INFINITY;
        for (int s = 0; s < p->n_split; s++) {
            const float *part = p->part + ((size_t)((long)h * p->n_qt + qt) * p->n_split + s) * p->qt * g * (hd + 2);
            if (part[r] > M) M = part[r];
        }
        float *out = a->out + (size_t)qi * a->ldo + (size_t)hq * hd;
        for (int d = 0; d < hd; d++) out[d] = 0.0f;
        float L = 0.0f;
        for (int s = 0; s < p->n_split; s++) {
            const float *part = p->part + ((size_t)((long)h * p->n_qt + qt) * p->n_split + s) * p->qt * g * (hd + 2);
            if (part[r] == -INFINITY) continue;
            float w = expf(part[r] - M);
            L += w * part[rows + r];
            const float *acc = part + 2 * rows + (size_t)r * hd;
            for (int d = 0; d < hd; d++) out[d] += w * acc[d];
        }
        float inv = L > 0 ? 1.0f / L : 0.0f;
        for (int d = 0; d < hd; d++) out[d] *= inv;
    }
}

/* ---- kernel variants ------------------------------------------------------- */

static const struct {
    const char *name;
    void (*item)(const attn_item *);
    void (*dot)(float *, const uint32_t *, const uint32_t *);
    void (*pack2)(uint32_t *, const float *, const float *);
} variants[] = {
    [TF_ATTN_GENERIC] = {"generic", tf_attn_item_generic, tf_attn_bf16_dot_generic, tf_attn_bf16_pack2_generic},
    [TF_ATTN_AVX2] = {"avx2", tf_attn_item_avx2, tf_attn_bf16_dot_avx2, tf_attn_bf16_pack2_avx2},
    [TF_ATTN_AVX512] = {"avx512", tf_attn_item_avx512, tf_attn_bf16_dot_avx512, tf_attn_bf16_pack2_avx512},
    [TF_ATTN_AVX512_BF16] = {"avx512_bf16", tf_attn_item_bf16_avx512, tf_attn_bf16_dot_bf16_avx512,
                             tf_attn_bf16_pack2_bf16_avx512},
    [TF_ATTN_AMX] = {"amx_bf16", tf_attn_item_amx_avx512, tf_attn_bf16_dot_amx_avx512, tf_attn_bf16_pack2_amx_avx512},
    [TF_ATTN_AVX512_F32] = {"avx512_f32", tf_attn_item_f32_avx512, tf_attn_bf16_dot_f32_avx512,
                            tf_attn_bf16_pack2_f32_avx512},
    [TF_ATTN_AVX512_F32_VNNI] = {"avx512_f32_vnni", tf_attn_item_f32_vnni_avx512, tf_attn_bf16_dot_f32_vnni_avx512,
                                 tf_attn_bf16_pack2_f32_vnni_avx512},
    [TF_ATTN_AVX2_VNNI] = {"avx2_vnni", tf_attn_item_vnni_avx2, tf_attn_bf16_dot_vnni_avx2, tf_attn_bf16_pack2_vnni_avx2},
    [TF_ATTN_GENERIC_F32] = {"generic_f32", tf_attn_item_f32_generic, tf_attn_bf16_dot_f32_generic,
                             tf_attn_bf16_pack2_f32_generic},
    [TF_ATTN_AVX2_F32] = {"avx2_f32", tf_attn_item_f32_avx2, tf_attn_bf16_dot_f32_avx2, tf_attn_bf16_pack2_f32_avx2},
    [TF_ATTN_AVX2_F32_VNNI] = {"avx2_f32_vnni", tf_attn_item_f32_vnni_avx2, tf_attn_bf16_dot_f32_vnni_avx2,
                               tf_attn_bf16_pack2_f32_vnni_avx2},
};
_Static_assert(sizeof variants / sizeof variants[0] == TF_ATTN_KERNEL_COUNT, "one entry per tf_attn_kernel");

/* Whether the CPU has feature f (a literal, as __builtin_cpu_supports takes it) */
#if defined(__x86_64__) || defined(__i386__)
#define X86_HAS(f) (__builtin_cpu_init(), __builtin_cpu_supports(f))
#else
#define X86_HAS(f) 0
#endif

static int cpu_has_avx512_vnni(void) { return tf_cpu_best_isa() >= TF_ISA_AVX512 && X86_HAS("avx512vnni"); }

static int cpu_has_avx_vnni(void) { return tf_cpu_best_isa() >= TF_ISA_AVX2 && X86_HAS("avxvnni"); }

static int cpu_has_avx512_bf16(void) {
    return tf_cpu_best_isa() >= TF_ISA_AVX512 && X86_HAS("avx512bf16") && X86_HAS("avx512vnni");
}

int tf_attn_kernel_supported(tf_attn_kernel k) {
    switch (k) {
    case TF_ATTN_GENERIC: return 1;
    case TF_ATTN_AVX2: return tf_cpu_best_isa() >= TF_ISA_AVX2;
    case TF_ATTN_AVX512: return tf_cpu_best_isa() >= TF_ISA_AVX512;
    case TF_ATTN_AVX512_BF16: return cpu_has_avx512_bf16();
    case TF_ATTN_AMX: return tf_cpu_best_isa() >= TF_ISA_AMX;
    case TF_ATTN_AVX512_F32: return tf_cpu_best_isa() >= TF_ISA_AVX512;
    case TF_ATTN_AVX512_F32_VNNI: return cpu_has_avx512_vnni();
    case TF_ATTN_AVX2_VNNI: return cpu_has_avx_vnni();
    case TF_ATTN_GENERIC_F32: return 1;
    case TF_ATTN_AVX2_F32: return tf_cpu_best_isa() >= TF_ISA_AVX2;
    case TF_ATTN_AVX2_F32_VNNI: return cpu_has_avx_vnni();
    default: return 0;
    }
}

tf_attn_kernel tf_attn_kernel_bits(tf_attn_kernel k, uint32_t type, int head_dim) {
    if (k == TF_ATTN_AMX && type == TF_DTYPE_F16 && head_dim % 32 == 0) return TF_ATTN_AMX;
    const int f32 = k == TF_ATTN_AVX512_F32 || k == TF_ATTN_AVX512_F32_VNNI || k == TF_ATTN_GENERIC_F32 ||
                    k == TF_ATTN_AVX2_F32 || k == TF_ATTN_AVX2_F32_VNNI;
    if (f32 && type == TF_DTYPE_F16 && head_dim % 16 == 0) return TF_ATTN_AVX512_F32;
    return TF_ATTN_GENERIC;
}

const char *tf_attn_kernel_name(tf_attn_kernel k) {
    return k >= 0 && k < TF_ATTN_KERNEL_COUNT ? variants[k].name : "?";
}

void tf_attn_bf16_dot(tf_attn_kernel k, float acc[16], const uint32_t a[16], const uint32_t b[16]) {
    TF_ASSERT(tf_attn_kernel_supported(k));
    variants[k].dot(acc, a, b);
}

void tf_attn_bf16_pack2(tf_attn_kernel k, uint32_t out[16], const float lo[16], const float hi[16]) {
    TF_ASSERT(tf_attn_kernel_supported(k));
    variants[k].pack2(out, lo, hi);
}

/* The arithmetic of an f16 cache without AMX. AVX-512: bf16 pairs where
 * VDPBF16PS issues at the FMA's rate, so doubles the multiply-adds (AMD: two
 * a cycle measured on Zen 5, docs/BENCHMARKS.md; Zen 4 taken to be alike, not
 * measured), f32 FMAs elsewhere: Intel's cores issue VDPBF16PS at a quarter of
 * the FMA rate (a Xeon of family 6 model 207: 1.3 G a second per core against
 * 5.4 G FMAs, so 43 against 86 G multiply-adds; docs/BENCHMARKS.md), and
 * without AVX512_BF16 the pairs are emulated. AVX2: f32 FMAs, whose emulated
 * bf16 pairs take four operations and two unpackings per pair of products
 * (an AMD EPYC of family 25, Zen 3: attention 4-7x faster, docs/BENCHMARKS.md).
 * TF_ATTN_ARITH=bf16 or f32 overrides the choice (a run's texts then follow
 * that variant's bits). */
static int attn_arith_bf16(tf_isa isa) {
    static atomic_int chosen; /* 0: not yet, 1: bf16, 2: f32, 3: the CPU's */
    int c = atomic_load_explicit(&chosen, memory_order_relaxed);
    if (c == 0) {
        const char *e = getenv("TF_ATTN_ARITH");
        c = e && !strcmp(e, "bf16") ? 1 : e && !strcmp(e, "f32") ? 2 : 3;
        atomic_store_explicit(&chosen, c, memory_order_relaxed);
    }
    if (c != 3) return c == 1;
    if (isa != TF_ISA_AVX512) return 0;
#if defined(__x86_64__) || defined(__i386__)
    return cpu_has_avx512_bf16() && __builtin_cpu_is("amd");
#else
    return 0;
#endif
}

tf_attn_kernel tf_attn_kernel_for(tf_isa isa) {
    tf_isa best = tf_cpu_best_isa();
    if (isa > best) isa = best;
    if (isa == TF_ISA_AVX512) {
        if (attn_arith_bf16(isa)) return cpu_has_avx512_bf16() ? TF_ATTN_AVX512_BF16 : TF_ATTN_AVX512;
        /* f16 in f32 FMAs; q8_0 / q4_0 in VNNI's integer products where the
         * CPU has them (their emulation ran 2-2.8x slower) */
        return cpu_has_avx512_vnni() ? TF_ATTN_AVX512_F32_VNNI : TF_ATTN_AVX512_F32;
    }
    if (isa == TF_ISA_AVX2) {
        if (attn_arith_bf16(isa)) return cpu_has_avx_vnni() ? TF_ATTN_AVX2_VNNI : TF_ATTN_AVX2;
        return cpu_has_avx_vnni() ? TF_ATTN_AVX2_F32_VNNI : TF_ATTN_AVX2_F32;
    }
    return isa == TF_ISA_AMX ? TF_ATTN_AMX : TF_ATTN_GENERIC;
}

void tf_cpu_attn(tf_pool *pool, tf_isa isa, const tf_attn_args *a, void *scratch) {
    tf_cpu_attn_kernel(pool, tf_attn_kernel_for(isa), a, scratch);
}

void tf_cpu_attn_kernel(tf_pool *pool, tf_attn_kernel k, const tf_attn_args *a, void *scratch) {
    TF_ASSERT(tf_attn_kernel_supported(k));
    const tf_kv_view *kv = &a->kv;
    plan p = {.a = a, .g = a->n_head / kv->n_head_kv, .hd = kv->lay.head_dim};
    p.item_fn = variants[k].item;
    int nth = tf_pool_size(pool);
    int32_t kmax = 0;
    for (int i = 0; i < a->n_q; i++) kmax = a->kv_len[i] > kmax ? a->kv_len[i] : kmax;
    /* Prefill items of up to QTILE_PF positions: every row group of an item
     * reads the tile's K / V pairs its first group converted, so the more
     * rows an item has, the less conversion per product (an MHA layer's
     * items have one head per position); fewer positions where the batch
     * would leave fewer than 4 items per thread. A row's result depends on its
     * own data alone, so the item size changes no bit. */
    p.qt = QTILE;
    if (a->n_q > QTILE) {
        p.qt = QTILE_PF;
        while (p.qt > QTILE && (int64_t)kv->n_head_kv * ((a->n_q + p.qt - 1) / p.qt) < 4L * nth) p.qt /= 2;
    }
    p.n_qt = (a->n_q + p.qt - 1) / p.qt;
    /* Batches of at most QTILE rows (decode, verification of drafted tokens)
     * split the keys at fixed slot boundaries, so a row's result depends only
     * on its own data and visible length: bitwise the same whether it is
     * computed alone or with other rows, on any number of threads. Prefill
     * (larger batches) is parallel over query tiles instead. */
    if (a->n_q <= QTILE) {
        p.split_len = SPLIT_KEYS;
    } else {
        p.split_len = (kmax + 63) / 64 * 64;
        if (p.split_len == 0) p.split_len = 64;
    }
    /* the visible slots: [0, kmax) less the gap, as one or two segments */
    int nseg = 0;
    if (a->gap_lo < a->gap_hi && a->gap_lo < kmax) {
        if (a->gap_lo > 0) p.seg_lo[nseg] = 0, p.seg_hi[nseg++] = a->gap_lo;
        if (a->gap_hi < kmax) p.seg_lo[nseg] = a->gap_hi, p.seg_hi[nseg++] = kmax;
    } else {
        p.seg_lo[nseg] = 0, p.seg_hi[nseg++] = kmax;
    }
    p.n_split = 0;
    for (int i = 0; i < 2; i++) {
        p.seg_n[i] = i < nseg ? n_cuts(p.seg_lo[i], p.seg_hi[i], p.split_len) : 0;
        p.n_split += p.seg_n[i];
    }
    if (p.n_split < 1) p.seg_n[0] = p.n_split = 1; /* an empty segment [0, 0): no row sees anything */
    p.n_items = (int64_t)kv->n_head_kv * p.n_qt * p.n_split;
    uintptr_t base = ((uintptr_t)scratch + 63) & ~(uintptr_t)63;
    p.part = (float *)base;
    size_t part_bytes = sizeof(float) * part_floats(a->n_q, p.qt, a->n_head, p.hd, p.n_split);
    p.thread_scratch = (uint8_t *)(((base + part_bytes) + 63) & ~(uintptr_t)63);
    p.thread_scratch_size = (thread_scratch_bytes(a->n_head, p.hd) + 63) & ~(size_t)63;
    atomic_init(&p.next, 0);
    if (nth > 1 && p.n_items > 1) tf_pool_run(pool, run_items, &p);
    else run_items(&p, 0, 1);
    long rows = (long)a->n_q * a->n_head;
    if (nth > 1 && rows >= 64) tf_pool_run(pool, merge_rows, &p);
    else merge_rows(&p, 0, 1);
}

void tf_ref_attn(const tf_attn_args *a) {
    const tf_kv_view *kv = &a->kv;
    const int hd = kv->lay.head_dim, g = a->n_head / kv->n_head_kv;
    for (int32_t i = 0; i < a->n_q; i++) {
        for (int hq = 0; hq < a->n_head; hq++) {
            const float *q = a->q + (size_t)i * a->ldq + (size_t)hq * hd;
            float *out = a->out + (size_t)i * a->ldo + (size_t)hq * hd;
            double mx = -INFINITY;
            float k[1024], v[1024];
            for (int32_t s = 0; s < a->kv_len[i]; s++) {
                if (s >= a->gap_lo && s < a->gap_hi) continue;
                tf_kv_head_read(&kv->lay, tf_kv_view_k(kv, hq / g), tf_kv_view_v(kv, hq / g), s, k, NULL);
                double dot = 0;
                for (int d = 0; d < hd; d++) dot += (double)q[d] * k[d];
                dot *= a->scale;
                if (dot > mx) mx = dot;
            }
            double l = 0, acc[1024] = {0};
            for (int32_t s = 0; s < a->kv_len[i]; s++) {
                if (s >= a->gap_lo && s < a->gap_hi) continue;
                tf_kv_head_read(&kv->lay, tf_kv_view_k(kv, hq / g), tf_kv_view_v(kv, hq / g), s, k, v);
                double dot = 0;
                for (int d = 0; d < hd; d++) dot += (double)q[d] * k[d];
                double w = exp(dot * a->scale - mx);
                l += w;
                for (int d = 0; d < hd; d++) acc[d] += w * v[d];
            }
            for (int d = 0; d < hd; d++) out[d] = (float)(acc[d] / l);
        }
    }
}
