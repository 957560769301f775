/* ops.c — RMSNorm, RoPE, SiLU-gating and residual add (see ops.h). */
#include "backend/cpu/ops.h"

#include <math.h>

void tf_op_rmsnorm(float *y, const float *x, const float *w, int64_t n, int64_t dim, int64_t ld, float eps) {
    for (int64_t r = 0; r < n; r++) {
        const float *xr = x + r * ld;
        float *yr = y + r * ld;
        double ss = 0;
        for (int64_t i = 0; i < dim; i++) ss += (double)xr[i] * xr[i];
        float scale = (float)(1.0 / sqrt(ss / (double)dim + (double)eps));
        for (int64_t i = 0; i < dim; i++) yr[i] = xr[i] * scale * w[i];
    }
}

void tf_op_rope_table(float *cos_t, float *sin_t, const int32_t *pos, int64_t n, int n_rot, const float *freq,
                      float mscale) {
    int half = n_rot / 2;
    for (int64_t r = 0; r < n; r++)
        for (int i = 0; i < half; i++) {
            double theta = (double)pos[r] * (double)freq[i];
            cos_t[r * half + i] = (float)cos(theta) * mscale;
            sin_t[r * half + i] = (float)sin(theta) * mscale;
        }
}

void tf_op_rope(float *x, int64_t n, int64_t ld, int n_head, int head_dim, int n_rot, bool neox, const float *cos_t,
                const float *sin_t) {
    int half = n_rot / 2;
    /* pair i is (2i, 2i+1), or (i, i + half) in the rotate-half (NeoX) layout */
    int stride = neox ? 1 : 2, off = neox ? half : 1;
    for (int64_t r = 0; r < n; r++) {
        const float *c = cos_t + r * half, *s = sin_t + r * half;
        for (int h = 0; h < n_head; h++) {
            float *v = x + r * ld + (int64_t)h * head_dim;
            for (int i = 0; i < half; i++) {
                float a = v[stride * i], b = v[stride * i + off];
                v[stride * i] = a * c[i] - b * s[i];
                v[stride * i + off] = a * s[i] + b * c[i];
            }
        }
    }
}

void tf_op_add_bias(float *y, const float *b, int64_t n, int64_t dim, int64_t ld) {
    for (int64_t r = 0; r < n; r++)
        for (int64_t i = 0; i < dim; i++) y[r * ld + i] += b[i];
}

void tf_op_silu_mul(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

void tf_op_add(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}
