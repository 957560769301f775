/*
 * attn_prefill.cu — lab for prefill attention over an f16 KV cache: a chunk
 * of n_q query rows whose row i sees the first n_kv - n_q + 1 + i keys
 * (causal, bottom-right), as the engine's chunked prefill calls it.
 *
 * Variant 0: CUDA cores (16 rows x 64 keys, the default); variant 1: the
 * tensor cores (f16 mma, 128 rows x 64 keys, head sizes 64 and 128;
 * tf_cuda_attn_prefill_variant). Small shapes are validated against a
 * double-precision CPU reference over the f16-rounded keys and values
 * (output poisoned with NaN first); large ones are timed, reporting TFLOP/s
 * (4 flops per query, key and dimension: the two products) next to the
 * tensor cores' f16 dense peak of the H100 SXM (989 TFLOP/s, datasheet).
 */
#include "lab_common.cuh"

struct shape { int n_head, n_head_kv, hd, n_kv, n_q; bool validate; };

int main(void) {
    tf_cuda *cu = lab_open();
    const shape shapes[] = {
        {8, 8, 128, 600, 300, true},       {32, 8, 128, 1000, 257, true},    {9, 3, 64, 700, 129, true},
        {12, 12, 64, 130, 130, true},      {8, 2, 256, 300, 40, true},       {32, 32, 128, 4096, 4096, false},
        {32, 32, 128, 16384, 4096, false}, {32, 32, 128, 65536, 4096, false}, {32, 32, 128, 122880, 4096, false},
        {9, 3, 64, 8192, 4096, false},
    };
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const shape &s = shapes[si];
        if (lab_skip(si)) continue;
        size_t kvn = (size_t)s.n_head_kv * s.n_kv * s.hd, qn = (size_t)s.n_q * s.n_head * s.hd;
        float *q = lab_rand(qn, -1.5f, 1.5f), *k = NULL, *v = NULL;
        void *dk, *dv;
        lab_kv(kvn, s.validate, &k, &v, &dk, &dv);
        int32_t *len = (int32_t *)malloc(sizeof(int32_t) * s.n_q);
        double pairs = 0; /* (query, key) pairs: the work */
        for (int i = 0; i < s.n_q; i++) pairs += len[i] = s.n_kv - s.n_q + 1 + i;
        void *dq = lab_dev(q, sizeof(float) * qn), *dout = lab_dev(NULL, sizeof(float) * qn);
        void *dlen = lab_dev(len, sizeof(int32_t) * s.n_q);
        tf_cuda_attn a = {};
        a.q = (float *)dq, a.ldq = s.n_head * s.hd, a.k = (uint16_t *)dk, a.v = (uint16_t *)dv, a.n_slots = s.n_kv;
        a.n_q = s.n_q, a.n_head = s.n_head, a.n_head_kv = s.n_head_kv, a.head_dim = s.hd;
        a.kv_len_d = (int32_t *)dlen, a.max_kv = s.n_kv, a.scale = 1.0f / sqrtf((float)s.hd);
        a.out = (float *)dout, a.ldo = s.n_head * s.hd;
        double ms_var[2] = {0, 0};
        for (int var = 1; var >= 0; var--) {
            char name[96];
            snprintf(name, sizeof name, "v%d prefill heads %d/%d hd %d kv %d rows %d", var, s.n_head, s.n_head_kv,
                     s.hd, s.n_kv, s.n_q);
            LAB_CHECK(cudaMemset(dout, 0xff, sizeof(float) * qn));
            tf_cuda_attn_prefill_variant(cu, &a, var);
            LAB_CHECK(cudaGetLastError());
            LAB_CHECK(cudaStreamSynchronize(lab_stream));
            if (s.validate) {
                float *got = (float *)malloc(sizeof(float) * qn);
                double *ref = (double *)malloc(sizeof(double) * qn);
                LAB_CHECK(cudaMemcpy(got, dout, sizeof(float) * qn, cudaMemcpyDeviceToHost));
                lab_attn_ref(q, k, v, s.n_head, s.n_head_kv, s.hd, s.n_kv, s.n_q, ref);
                /* v1 rounds the queries and probabilities to f16 */
                lab_validate(name, got, ref, qn, var == 1 && (s.hd == 64 || s.hd == 128) ? 1e-5 : 1e-9);
                free(got), free(ref);
            } else {
                const int reps = s.n_kv > 20000 ? 3 : 10;
                double ms = lab_time_ms([&] { tf_cuda_attn_prefill_variant(cu, &a, var); }, reps);
                ms_var[var] = ms;
                const double tflops = 4.0 * pairs * s.hd * s.n_head / (ms * 1e-3) / 1e12;
                printf("%-52s %9.3f ms  %7.1f TFLOP/s (%4.1f%% of 989)", name, ms, tflops, tflops / 989.0 * 100);
                if (var == 0) printf("  v1 %.2fx faster", ms / ms_var[1]);
                printf("\n");
            }
        }
        cudaFree(dk), cudaFree(dv), cudaFree(dq), cudaFree(dout), cudaFree(dlen);
        free(k), free(v), free(q), free(len);
    }
    tf_cuda_close(cu);
    return 0;
}
