/*
 * fp16.h — IEEE half and bfloat16 conversions (scalar, exact, round-to-nearest-even).
 */
#ifndef TF_CORE_FP16_H
#define TF_CORE_FP16_H

#include <stdint.h>
#include <string.h>

typedef uint16_t tf_f16;  /* IEEE 754 binary16 bits */
typedef uint16_t tf_bf16; /* bfloat16 bits */

static inline float tf_f32_from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t tf_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static inline float tf_f16_to_f32(tf_f16 h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    uint32_t u;
    if (exp == 0) {
        if (mant == 0) u = sign;
        else { /* subnormal: normalize */
            int e = -1;
            do { e++; mant <<= 1; } while (!(mant & 0x400));
            u = sign | ((uint32_t)(127 - 15 - e) << 23) | ((mant & 0x3ff) << 13);
        }
    } else if (exp == 31) u = sign | 0x7f800000u | (mant << 13);
    else u = sign | ((exp + 112) << 23) | (mant << 13);
    return tf_f32_from_bits(u);
}

static inline tf_f16 tf_f32_to_f16(float f) {
    uint32_t u = tf_f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000;
    uint32_t a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) /* inf or nan */
        return (tf_f16)(sign | 0x7c00 | (a > 0x7f800000u ? 0x200 : 0));
    if (a >= 0x477ff000u) return (tf_f16)(sign | 0x7c00); /* overflow -> inf */
    if (a < 0x38800000u) { /* subnormal or zero in half */
        if (a < 0x33000000u) return (tf_f16)sign;
        uint32_t e = a >> 23;
        uint32_t m = (a & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e; /* 14 + (112 - e) ... */
        uint32_t hm = m >> (shift);
        uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (hm & 1))) hm++;
        return (tf_f16)(sign | hm);
    }
    uint32_t r = a + 0xfff + ((a >> 13) & 1); /* round to nearest even */
    r -= 0x38000000u;
    return (tf_f16)(sign | (r >> 13));
}

static inline float tf_bf16_to_f32(tf_bf16 b) { return tf_f32_from_bits((uint32_t)b << 16); }

static inline tf_bf16 tf_f32_to_bf16(float f) {
    uint32_t u = tf_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (tf_bf16)((u >> 16) | 0x40); /* quiet nan */
    u += 0x7fff + ((u >> 16) & 1);
    return (tf_bf16)(u >> 16);
}

#endif
