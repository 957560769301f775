/*
 * rope.c — RoPE frequency tables for the scaling variants.
 *
 * Every variant keeps theta linear in the position, theta(pos, i) = pos *
 * freq[i], so one table describes it:
 *   none:   freq[i] = base^(-2i/n_rot)
 *   linear: freq[i] / factor
 *   yarn:   per pair, a ramp between interpolation (freq/factor) for
 *           low-frequency pairs and extrapolation (freq) for high-frequency
 *           pairs, bounded by the correction range of beta_fast / beta_slow
 *           over the original context; cos/sin scaled by
 *           attn_factor * (1 + 0.1 ln factor)
 *   llama3: freq[i] / factors[i] with the factors stored in the model.
 */
#include "model/model.h"

#include <math.h>

/* Pair index at which a rotation completes n_rot_cycles turns over the original context. */
static double yarn_corr_dim(int n_rot, int orig_ctx, double n_rotations, double base) {
    return n_rot * log(orig_ctx / (n_rotations * 2.0 * M_PI)) / (2.0 * log(base));
}

void tf_rope_init(const tf_hparams *hp, const float *freq_factors, float *rope_freq, float *mscale) {
    int half = hp->n_rot / 2;
    double low = 0, high = 0;
    if (hp->rope_scaling == TF_ROPE_SCALING_YARN) {
        low = floor(yarn_corr_dim(hp->n_rot, hp->rope_orig_ctx, hp->yarn_beta_fast, hp->rope_base));
        high = ceil(yarn_corr_dim(hp->n_rot, hp->rope_orig_ctx, hp->yarn_beta_slow, hp->rope_base));
        if (low < 0) low = 0;
        if (high > hp->n_rot - 1) high = hp->n_rot - 1;
    }
    for (int i = 0; i < half; i++) {
        double f = pow((double)hp->rope_base, -2.0 * i / hp->n_rot);
        switch (hp->rope_scaling) {
        case TF_ROPE_SCALING_NONE: break;
        case TF_ROPE_SCALING_LINEAR: f /= hp->rope_factor; break;
        case TF_ROPE_SCALING_YARN: {
            double span = high - low < 0.001 ? 0.001 : high - low;
            double ramp = (i - low) / span;
            ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
            double extrap = 1.0 - ramp; /* 1: keep the original frequency */
            f = (f / hp->rope_factor) * (1.0 - extrap) + f * extrap;
            break;
        }
        case TF_ROPE_SCALING_LLAMA3: f /= freq_factors[i]; break;
        }
        rope_freq[i] = (float)f;
    }
    *mscale = 1.0f;
    if (hp->rope_scaling == TF_ROPE_SCALING_YARN && hp->rope_factor > 1.0f)
        *mscale = hp->yarn_attn_factor * (float)(1.0 + 0.1 * log(hp->rope_factor));
    else if (hp->rope_scaling == TF_ROPE_SCALING_YARN)
        *mscale = hp->yarn_attn_factor;
}

uint64_t tf_hparams_kv_bytes_per_token(const tf_hparams *hp, int elem_size) {
    return (uint64_t)hp->n_layer * 2u * (uint64_t)hp->n_head_kv * (uint64_t)hp->head_dim * (uint64_t)elem_size;
}

void tf_rope_llama3_factors(float *out, int32_t head_dim, float rope_base, float factor, float low_freq_factor,
                            float high_freq_factor, int32_t orig_ctx) {
    const double low_wavelen = (double)orig_ctx / low_freq_factor;
    const double high_wavelen = (double)orig_ctx / high_freq_factor;
    for (int32_t i = 0; i < head_dim / 2; i++) {
        double freq = 1.0 / pow((double)rope_base, (double)(2 * i) / (double)head_dim);
        double wavelen = 2.0 * M_PI / freq;
        double f;
        if (wavelen < high_wavelen) f = 1.0;
        else if (wavelen > low_wavelen) f = factor;
        else {
            double smooth = ((double)orig_ctx / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
            f = 1.0 / ((1.0 - smooth) / factor + smooth);
        }
        out[i] = (float)f;
    }
}
