/* peak.c — the compute-peak probes (see peak.h). */
#include "peak.h"

#include "cli.h"

#include <pthread.h>
#include <stdint.h>

typedef enum { PK_VNNI512, PK_BF16512, PK_FMA512, PK_FMA256 } peak_kind;

typedef struct peak_arg {
    peak_kind kind;
    long iters;    /* loop iterations (16 instructions each) */
    double secs;   /* this thread's time */
} peak_arg;

/* 16 independent accumulators (more than latency x throughput on current
 * cores), the sources in two other registers. The instructions are written
 * out so that no compiler flag is needed; the callers check the CPU first. */
#define PK16(op, reg)                                                                                         \
    op " %%" reg "16, %%" reg "17, %%" reg "0\n\t" op " %%" reg "16, %%" reg "17, %%" reg "1\n\t"             \
    op " %%" reg "16, %%" reg "17, %%" reg "2\n\t" op " %%" reg "16, %%" reg "17, %%" reg "3\n\t"             \
    op " %%" reg "16, %%" reg "17, %%" reg "4\n\t" op " %%" reg "16, %%" reg "17, %%" reg "5\n\t"             \
    op " %%" reg "16, %%" reg "17, %%" reg "6\n\t" op " %%" reg "16, %%" reg "17, %%" reg "7\n\t"             \
    op " %%" reg "16, %%" reg "17, %%" reg "8\n\t" op " %%" reg "16, %%" reg "17, %%" reg "9\n\t"             \
    op " %%" reg "16, %%" reg "17, %%" reg "10\n\t" op " %%" reg "16, %%" reg "17, %%" reg "11\n\t"           \
    op " %%" reg "16, %%" reg "17, %%" reg "12\n\t" op " %%" reg "16, %%" reg "17, %%" reg "13\n\t"           \
    op " %%" reg "16, %%" reg "17, %%" reg "14\n\t" op " %%" reg "16, %%" reg "17, %%" reg "15\n\t"

/* ymm16+ exist only with AVX-512: the 256-bit FMA loop uses ymm0..15 (sources 14, 15, 12 accumulators). */
#define PK12_256(op)                                                                                          \
    op " %%ymm14, %%ymm15, %%ymm0\n\t" op " %%ymm14, %%ymm15, %%ymm1\n\t" op " %%ymm14, %%ymm15, %%ymm2\n\t" \
    op " %%ymm14, %%ymm15, %%ymm3\n\t" op " %%ymm14, %%ymm15, %%ymm4\n\t" op " %%ymm14, %%ymm15, %%ymm5\n\t" \
    op " %%ymm14, %%ymm15, %%ymm6\n\t" op " %%ymm14, %%ymm15, %%ymm7\n\t" op " %%ymm14, %%ymm15, %%ymm8\n\t" \
    op " %%ymm14, %%ymm15, %%ymm9\n\t" op " %%ymm14, %%ymm15, %%ymm10\n\t" op " %%ymm14, %%ymm15, %%ymm11\n\t"

#define PK_CLOBBERS_12 "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11"
#define PK_CLOBBERS_16 PK_CLOBBERS_12, "xmm12", "xmm13", "xmm14", "xmm15"

__attribute__((target("avx512f"))) static void zero512(void) {
    __asm__ volatile("vpxord %%zmm0, %%zmm0, %%zmm0\n\t"
                     "vmovdqa64 %%zmm0, %%zmm1\n\t vmovdqa64 %%zmm0, %%zmm2\n\t vmovdqa64 %%zmm0, %%zmm3\n\t"
                     "vmovdqa64 %%zmm0, %%zmm4\n\t vmovdqa64 %%zmm0, %%zmm5\n\t vmovdqa64 %%zmm0, %%zmm6\n\t"
                     "vmovdqa64 %%zmm0, %%zmm7\n\t vmovdqa64 %%zmm0, %%zmm8\n\t vmovdqa64 %%zmm0, %%zmm9\n\t"
                     "vmovdqa64 %%zmm0, %%zmm10\n\t vmovdqa64 %%zmm0, %%zmm11\n\t vmovdqa64 %%zmm0, %%zmm12\n\t"
                     "vmovdqa64 %%zmm0, %%zmm13\n\t vmovdqa64 %%zmm0, %%zmm14\n\t vmovdqa64 %%zmm0, %%zmm15\n\t"
                     "vmovdqa64 %%zmm0, %%zmm16\n\t vmovdqa64 %%zmm0, %%zmm17\n\t" ::
                         : PK_CLOBBERS_16, "xmm16", "xmm17");
}

/* Leaves no dirty upper state behind (the calibration runs on the caller's thread). */
__attribute__((target("avx512f"))) static void clean512(void) {
    __asm__ volatile("vpxord %%zmm16, %%zmm16, %%zmm16\n\t vpxord %%zmm17, %%zmm17, %%zmm17\n\t vzeroupper" ::
                         : PK_CLOBBERS_16, "xmm16", "xmm17");
}

static void *peak_run(void *a_) {
    peak_arg *a = a_;
    double t0 = cli_now();
    switch (a->kind) {
    case PK_VNNI512:
        zero512();
        for (long i = 0; i < a->iters; i++) __asm__ volatile(PK16("vpdpbusd", "zmm")::: PK_CLOBBERS_16);
        clean512();
        break;
    case PK_BF16512:
        zero512();
        for (long i = 0; i < a->iters; i++) __asm__ volatile(PK16("vdpbf16ps", "zmm")::: PK_CLOBBERS_16);
        clean512();
        break;
    case PK_FMA512:
        zero512();
        for (long i = 0; i < a->iters; i++) __asm__ volatile(PK16("vfmadd231ps", "zmm")::: PK_CLOBBERS_16);
        clean512();
        break;
    case PK_FMA256:
        __asm__ volatile("vzeroall" ::: PK_CLOBBERS_16);
        for (long i = 0; i < a->iters; i++) __asm__ volatile(PK12_256("vfmadd231ps")::: PK_CLOBBERS_12);
        __asm__ volatile("vzeroupper" ::: PK_CLOBBERS_16);
        break;
    }
    a->secs = cli_now() - t0;
    return NULL;
}

/* Operations a second of `kind` on n threads: the iterations for `ms` are
 * found on one thread first, then all threads run them together; the
 * slowest thread's time counts. */
static double peak_measure(peak_kind kind, int n_threads, int ms, double ops_per_iter) {
    enum { MAX_THREADS = 64 };
    if (n_threads < 1) n_threads = 1;
    if (n_threads > MAX_THREADS) n_threads = MAX_THREADS;
    peak_arg cal = {kind, 1000, 0};
    for (;;) { /* warm the unit up and size the loop */
        peak_run(&cal);
        if (cal.secs * 1000 >= ms / 4.0 || cal.iters > (1L << 40)) break;
        cal.iters *= 4;
    }
    const long iters = (long)((double)cal.iters * (ms / 1000.0) / (cal.secs > 0 ? cal.secs : 1e-9));
    pthread_t th[MAX_THREADS];
    peak_arg args[MAX_THREADS];
    int started = 0;
    for (int t = 0; t < n_threads; t++) {
        args[t] = (peak_arg){kind, iters > 0 ? iters : 1, 0};
        if (pthread_create(&th[t], NULL, peak_run, &args[t]) != 0) break;
        started++;
    }
    for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
    if (started < n_threads) return -1;
    double slowest = 0;
    for (int t = 0; t < n_threads; t++)
        if (args[t].secs > slowest) slowest = args[t].secs;
    return slowest > 0 ? (double)n_threads * (double)args[0].iters * ops_per_iter / slowest / 1e9 : -1;
}

double peak_int8_gops(int n_threads, int ms) {
    if (!__builtin_cpu_supports("avx512vnni") || !__builtin_cpu_supports("avx512f")) return 0;
    return peak_measure(PK_VNNI512, n_threads, ms, 16.0 * 64 * 2); /* 64 multiply-adds per instruction */
}

double peak_bf16_gflops(int n_threads, int ms) {
    if (!__builtin_cpu_supports("avx512bf16") || !__builtin_cpu_supports("avx512f")) return 0;
    return peak_measure(PK_BF16512, n_threads, ms, 16.0 * 32 * 2); /* 32 multiply-adds per instruction */
}

double peak_f32_gflops(int n_threads, int ms) {
    if (__builtin_cpu_supports("avx512f")) return peak_measure(PK_FMA512, n_threads, ms, 16.0 * 16 * 2);
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return peak_measure(PK_FMA256, n_threads, ms, 12.0 * 8 * 2);
    return 0;
}
