/* ref_forward.c — float64 reference forward pass (see ref_forward.h). */
#include "ref_forward.h"

#include "backend/cpu/quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Dequantize a whole matrix to double [rows][cols]. */
static double *deq(const tf_tensor *t) {
    int64_t rows = t->ne[1], cols = t->ne[0];
    double *out = malloc(sizeof(double) * (size_t)(rows * cols));
    float *row = malloc(sizeof(float) * (size_t)cols);
    size_t rs = tf_dtype_row_size(t->type, cols);
    for (int64_t r = 0; r < rows; r++) {
        tf_ref_dequantize_row((tf_dtype)t->type, (const uint8_t *)t->data + (size_t)r * rs, row, cols);
        for (int64_t c = 0; c < cols; c++) out[r * cols + c] = row[c];
    }
    free(row);
    return out;
}

static void matvec(const double *W, int64_t rows, int64_t cols, const double *x, double *y) {
    for (int64_t r = 0; r < rows; r++) {
        double s = 0;
        for (int64_t c = 0; c < cols; c++) s += W[r * cols + c] * x[c];
        y[r] = s;
    }
}

static void rmsnorm(const double *x, const float *w, int64_t n, double eps, double *y) {
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    double s = 1.0 / sqrt(ss / n + eps);
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * s * w[i];
}

/* Per-pair inverse frequencies and the cos/sin scale, from first principles. */
static void rope_freqs(const tf_model *m, double *inv, double *mscale) {
    const tf_hparams *hp = &m->hp;
    int half = hp->n_rot / 2;
    const tf_gguf_tensor *ff = tf_gguf_find_tensor(&m->gguf, "rope_freqs.weight");
    *mscale = 1.0;
    for (int i = 0; i < half; i++) {
        double base_f = 1.0 / pow(hp->rope_base, (2.0 * i) / hp->n_rot);
        double f = base_f;
        if (ff) {
            f = base_f / ((const float *)ff->data)[i];
        } else if (hp->rope_scaling == TF_ROPE_SCALING_LINEAR) {
            f = base_f / hp->rope_factor;
        } else if (hp->rope_scaling == TF_ROPE_SCALING_YARN) {
            /* dimension at which a pair completes `rot` rotations in the original context */
            double lo = floor(hp->n_rot * log(hp->rope_orig_ctx / (hp->yarn_beta_fast * 2 * M_PI)) /
                              (2 * log(hp->rope_base)));
            double hi = ceil(hp->n_rot * log(hp->rope_orig_ctx / (hp->yarn_beta_slow * 2 * M_PI)) /
                             (2 * log(hp->rope_base)));
            lo = fmax(lo, 0);
            hi = fmin(hi, hp->n_rot - 1);
            if (hi == lo) hi += 0.001;
            double ramp = fmin(fmax((i - lo) / (hi - lo), 0.0), 1.0);
            double extrapolation_weight = 1.0 - ramp;
            f = base_f / hp->rope_factor * ramp + base_f * extrapolation_weight;
            *mscale = (0.1 * log(hp->rope_factor) + 1.0) * hp->yarn_attn_factor;
        }
        inv[i] = f;
    }
}

double *ref_forward(const tf_model *m, const int32_t *tokens, int n) { return ref_forward_ex(m, tokens, n, false); }

/* Bias `which` ("attn_q", ...) of layer il from the file, or NULL. */
static const float *bias(const tf_model *m, int il, const char *which) {
    char nm[96];
    snprintf(nm, sizeof nm, "blk.%d.%s.bias", il, which);
    const tf_gguf_tensor *t = tf_gguf_find_tensor(&m->gguf, nm);
    if (!t) return NULL;
    if (t->type != TF_DTYPE_F32) abort(); /* the reference reads f32 vectors only */
    return (const float *)t->data;
}

double *ref_forward_ex(const tf_model *m, const int32_t *tokens, int n, bool rotate_half) {
    ref_opts o = {.rotate_half = rotate_half};
    return ref_forward_opts(m, tokens, n, &o);
}

double *ref_forward_opts(const tf_model *m, const int32_t *tokens, int n, const ref_opts *o) {
    const bool rotate_half = o->rotate_half;
    const tf_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, hd = hp->head_dim, H = hp->n_head, Hkv = hp->n_head_kv, F = hp->n_ff;
    const int64_t V = hp->n_vocab, qd = H * hd, kvd = Hkv * hd;
    double inv[512], mscale;
    rope_freqs(m, inv, &mscale);
    double *x = calloc((size_t)(n * E), sizeof(double));
    double *emb = deq(&m->tok_embd);
    for (int t = 0; t < n; t++) memcpy(x + t * E, emb + (int64_t)tokens[t] * E, sizeof(double) * E);
    free(emb);
    double *xn = malloc(sizeof(double) * E), *q = malloc(sizeof(double) * n * qd);
    double *k = malloc(sizeof(double) * n * kvd), *v = malloc(sizeof(double) * n * kvd);
    double *att = malloc(sizeof(double) * qd), *tmp = malloc(sizeof(double) * E);
    double *g = malloc(sizeof(double) * F), *u = malloc(sizeof(double) * F), *sc = malloc(sizeof(double) * n);
    for (int il = 0; il < hp->n_layer; il++) {
        const tf_layer_weights *L = &m->layers[il];
        double *Wq = deq(&L->wq), *Wk = deq(&L->wk), *Wv = deq(&L->wv), *Wo = deq(&L->wo);
        double *Wg = deq(&L->w_gate), *Wu = deq(&L->w_up), *Wd = deq(&L->w_down);
        const float *bq = o->no_bias ? NULL : bias(m, il, "attn_q");
        const float *bk = o->no_bias ? NULL : bias(m, il, "attn_k");
        const float *bv = o->no_bias ? NULL : bias(m, il, "attn_v");
        for (int t = 0; t < n; t++) {
            rmsnorm(x + t * E, L->attn_norm.data, E, hp->rms_eps, xn);
            matvec(Wq, qd, E, xn, q + t * qd);
            matvec(Wk, kvd, E, xn, k + t * kvd);
            matvec(Wv, kvd, E, xn, v + t * kvd);
            for (int64_t i = 0; bq && i < qd; i++) q[t * qd + i] += bq[i];
            for (int64_t i = 0; bk && i < kvd; i++) k[t * kvd + i] += bk[i];
            for (int64_t i = 0; bv && i < kvd; i++) v[t * kvd + i] += bv[i];
            for (int which = 0; which < 2; which++) {
                double *vec = which ? k + t * kvd : q + t * qd;
                int nh = which ? (int)Hkv : (int)H;
                for (int h = 0; h < nh; h++)
                    for (int i = 0; i < hp->n_rot / 2; i++) {
                        double th = t * inv[i], c = cos(th) * mscale, s = sin(th) * mscale;
                        /* pair (2i, 2i+1) in GGUF's layout; (i, i + n_rot/2) in rotate-half */
                        int64_t ia = rotate_half ? i : 2 * i, ib = rotate_half ? i + hp->n_rot / 2 : 2 * i + 1;
                        double a = vec[h * hd + ia], b = vec[h * hd + ib];
                        vec[h * hd + ia] = a * c - b * s;
                        vec[h * hd + ib] = a * s + b * c;
                    }
            }
        }
        for (int t = 0; t < n; t++) {
            for (int h = 0; h < H; h++) {
                int hk = h / (int)(H / Hkv);
                double mx = -INFINITY, l = 0;
                for (int s = 0; s <= t; s++) {
                    double d = 0;
                    for (int j = 0; j < hd; j++) d += q[t * qd + h * hd + j] * k[s * kvd + hk * hd + j];
                    sc[s] = d / sqrt((double)hd);
                    mx = fmax(mx, sc[s]);
                }
                for (int j = 0; j < hd; j++) att[h * hd + j] = 0;
                for (int s = 0; s <= t; s++) {
                    double w = exp(sc[s] - mx);
                    l += w;
                    for (int j = 0; j < hd; j++) att[h * hd + j] += w * v[s * kvd + hk * hd + j];
                }
                for (int j = 0; j < hd; j++) att[h * hd + j] /= l;
            }
            matvec(Wo, E, qd, att, tmp);
            for (int64_t i = 0; i < E; i++) x[t * E + i] += tmp[i];
            rmsnorm(x + t * E, L->ffn_norm.data, E, hp->rms_eps, xn);
            matvec(Wg, F, E, xn, g);
            matvec(Wu, F, E, xn, u);
            for (int64_t i = 0; i < F; i++) g[i] = g[i] / (1 + exp(-g[i])) * u[i];
            matvec(Wd, E, F, g, tmp);
            for (int64_t i = 0; i < E; i++) x[t * E + i] += tmp[i];
        }
        free(Wq); free(Wk); free(Wv); free(Wo); free(Wg); free(Wu); free(Wd);
    }
    double *Wout = deq(&m->output);
    double *logits = malloc(sizeof(double) * (size_t)(n * V));
    for (int t = 0; t < n; t++) {
        rmsnorm(x + t * E, m->output_norm.data, E, hp->rms_eps, xn);
        matvec(Wout, V, E, xn, logits + (int64_t)t * V);
    }
    free(Wout); free(x); free(xn); free(q); free(k); free(v); free(att); free(tmp); free(g); free(u); free(sc);
    return logits;
}
