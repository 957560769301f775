/*
 * attn_decode.cu — lab for split-K flash-decoding over an f16 KV cache.
 *
 * CPU reference (double) over the f16-rounded keys and values; variant 2 is
 * the library's default (tf_cuda_attn_decode: U keys in flight per team, a
 * reduce-scatter over the team, the splits merged in parallel runs), variant 3
 * the same blocks on the tensor cores (TF32 mma, queries and probabilities as
 * two TF32 terms; head sizes 64 / 128 / 256, others as 2), variant 4 the same
 * with its loads pipelined (3's bits), variant 6 variant 2 with at most 4 query
 * vectors per pass over the values everywhere (2's bits), variants 7 and 8
 * variant 2 with each vector's key count read once per pass over the values
 * (8: and the vectors' weights of a key loaded first; 2's bits), variant 0
 * a block per row and a serial merge (tf_cuda_attn_decode_variant). Every validated
 * shape is checked on fresh random data, the output poisoned with NaN first;
 * GB/s counts the K and V bytes once (what a pass must read). Run: make -C dev/cuda attn_decode && dev/cuda/attn_decode
 */
#include "lab_common.cuh"

#include <cuda_fp16.h>

struct shape { int n_head, n_head_kv, hd, n_kv, n_q; bool validate; };

int main(void) {
    tf_cuda *cu = lab_open();
    const shape shapes[] = {
        {32, 32, 128, 4096, 1, true},    {32, 8, 128, 4096, 6, true},      {12, 12, 64, 260, 1, true},
        {32, 32, 128, 32768, 1, false},  {32, 32, 128, 65536, 1, false},   {32, 32, 128, 122880, 1, false},
        {32, 32, 128, 122880, 8, false}, {32, 32, 128, 4096 + 256, 4, false}, {32, 32, 128, 32768, 8, false},
        {32, 8, 128, 32768, 8, false},   {9, 3, 64, 8192, 1, false},      {9, 3, 64, 8192, 8, false},
        {9, 3, 64, 1000, 11, true},      {32, 4, 64, 700, 16, true},      {8, 8, 8, 300, 3, true},
        {8, 2, 256, 600, 5, true},       {4, 4, 16, 530, 2, true},        {6, 2, 32, 777, 7, true},
        {2, 1, 128, 70000, 2, true},     {32, 32, 128, 122880, 16, false}, {32, 8, 128, 65536, 1, false},
    };
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const shape &s = shapes[si];
        if (lab_skip(si)) continue;
        size_t kvn = (size_t)s.n_head_kv * s.n_kv * s.hd, qn = (size_t)s.n_q * s.n_head * s.hd;
        float *q = lab_rand(qn, -1.5f, 1.5f), *k = NULL, *v = NULL;
        void *dk, *dv;
        lab_kv(kvn, s.validate, &k, &v, &dk, &dv);
        int32_t *len = (int32_t *)malloc(sizeof(int32_t) * s.n_q);
        for (int i = 0; i < s.n_q; i++) len[i] = s.n_kv - s.n_q + 1 + i;
        void *dq = lab_dev(q, sizeof(float) * qn);
        void *dout = lab_dev(NULL, sizeof(float) * qn), *dlen = lab_dev(len, sizeof(int32_t) * s.n_q);
        void *scr = lab_dev(NULL, tf_cuda_attn_scratch(s.n_q, s.n_head, s.hd, s.n_kv));
        tf_cuda_attn a = {};
        a.q = (float *)dq, a.ldq = s.n_head * s.hd, a.k = (uint16_t *)dk, a.v = (uint16_t *)dv, a.n_slots = s.n_kv;
        a.n_q = s.n_q, a.n_head = s.n_head, a.n_head_kv = s.n_head_kv, a.head_dim = s.hd;
        a.kv_len_d = (int32_t *)dlen, a.max_kv = s.n_kv, a.scale = 1.0f / sqrtf((float)s.hd);
        a.out = (float *)dout, a.ldo = s.n_head * s.hd, a.scratch = scr;
        char name[96];
        double ms_var[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
        const int vars[] = {2, 6, 7, 8, 3, 4, 0};
        for (int var : vars) {
            snprintf(name, sizeof name, "v%d split-K heads %d/%d hd %d kv %d rows %d", var, s.n_head, s.n_head_kv,
                     s.hd, s.n_kv, s.n_q);
            LAB_CHECK(cudaMemset(dout, 0xff, sizeof(float) * qn)); /* NaN: every output must be written */
            tf_cuda_attn_decode_variant(cu, &a, var);
            LAB_CHECK(cudaGetLastError());
            LAB_CHECK(cudaStreamSynchronize(lab_stream));
            if (s.validate) {
                float *got = (float *)malloc(sizeof(float) * qn);
                double *ref = (double *)malloc(sizeof(double) * qn);
                LAB_CHECK(cudaMemcpy(got, dout, sizeof(float) * qn, cudaMemcpyDeviceToHost));
                lab_attn_ref(q, k, v, s.n_head, s.n_head_kv, s.hd, s.n_kv, s.n_q, ref);
                lab_validate(name, got, ref, qn, 1e-9);
                if (var != 2) { /* v2 ran first: how far from this one (the order of sums differs) */
                    float *g2 = (float *)malloc(sizeof(float) * qn);
                    tf_cuda_attn_decode_variant(cu, &a, 2);
                    LAB_CHECK(cudaStreamSynchronize(lab_stream));
                    LAB_CHECK(cudaMemcpy(g2, dout, sizeof(float) * qn, cudaMemcpyDeviceToHost));
                    double md = 0;
                    for (size_t e = 0; e < qn; e++) md = fmax(md, fabs((double)g2[e] - got[e]));
                    printf("  v2 vs v%d: max |diff| %.3g%s\n", var, md, md == 0 ? " (bit for bit)" : "");
                    free(g2);
                }
                free(got), free(ref);
            } else {
                double ms = lab_time_ms([&] { tf_cuda_attn_decode_variant(cu, &a, var); }, 20);
                double bytes = 2.0 * 2.0 * s.n_head_kv * (double)s.n_kv * s.hd; /* K + V read once */
                ms_var[var] = ms;
                printf("%-44s %8.3f ms  %7.0f GB/s (K and V once)", name, ms, bytes / (ms * 1e-3) / 1e9);
                if (var == 0) printf("  v2 %.2fx faster", ms / ms_var[2]);
                if (var >= 3) printf("  %.2fx v2's speed", ms_var[2] / ms);
                printf("\n");
            }
        }
        cudaFree(dk), cudaFree(dv), cudaFree(dq), cudaFree(dout), cudaFree(dlen), cudaFree(scr);
        free(k), free(v), free(q), free(len);
    }
    tf_cuda_close(cu);
    return 0;
}
