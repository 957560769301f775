/* dtype.c — element type geometry and names. */
#include "core/dtype.h"

#include <strings.h>

const int8_t tf_iq4_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

bool tf_dtype_supported(uint32_t type) { return tf_dtype_block_size(type) != 0; }

uint32_t tf_dtype_block_size(uint32_t type) {
    switch (type) {
    case TF_DTYPE_F32: case TF_DTYPE_F16: case TF_DTYPE_BF16: return 1;
    case TF_DTYPE_Q8_0: return TF_QK8_0;
    case TF_DTYPE_Q4_0: return TF_QK4_0;
    case TF_DTYPE_Q4_1: return TF_QK4_1;
    case TF_DTYPE_Q5_0: return TF_QK5_0;
    case TF_DTYPE_Q5_1: return TF_QK5_1;
    case TF_DTYPE_IQ4_NL: return TF_QK4_NL;
    case TF_DTYPE_Q2_K: case TF_DTYPE_Q3_K: case TF_DTYPE_Q4_K: case TF_DTYPE_Q5_K: case TF_DTYPE_Q6_K:
    case TF_DTYPE_IQ4_XS:
        return TF_QK_K;
    default: return 0;
    }
}

uint32_t tf_dtype_type_size(uint32_t type) {
    switch (type) {
    case TF_DTYPE_F32: return 4;
    case TF_DTYPE_F16: case TF_DTYPE_BF16: return 2;
    case TF_DTYPE_Q8_0: return sizeof(tf_block_q8_0);
    case TF_DTYPE_Q4_0: return sizeof(tf_block_q4_0);
    case TF_DTYPE_Q4_1: return sizeof(tf_block_q4_1);
    case TF_DTYPE_Q5_0: return sizeof(tf_block_q5_0);
    case TF_DTYPE_Q5_1: return sizeof(tf_block_q5_1);
    case TF_DTYPE_Q2_K: return sizeof(tf_block_q2_k);
    case TF_DTYPE_Q3_K: return sizeof(tf_block_q3_k);
    case TF_DTYPE_Q4_K: return sizeof(tf_block_q4_k);
    case TF_DTYPE_Q5_K: return sizeof(tf_block_q5_k);
    case TF_DTYPE_Q6_K: return sizeof(tf_block_q6_k);
    case TF_DTYPE_IQ4_NL: return sizeof(tf_block_iq4_nl);
    case TF_DTYPE_IQ4_XS: return sizeof(tf_block_iq4_xs);
    default: return 0;
    }
}

static const char *const k_names[] = {
    [0] = "f32", [1] = "f16", [2] = "q4_0", [3] = "q4_1", [6] = "q5_0", [7] = "q5_1",
    [8] = "q8_0", [9] = "q8_1", [10] = "q2_k", [11] = "q3_k", [12] = "q4_k", [13] = "q5_k",
    [14] = "q6_k", [15] = "q8_k", [16] = "iq2_xxs", [17] = "iq2_xs", [18] = "iq3_xxs",
    [19] = "iq1_s", [20] = "iq4_nl", [21] = "iq3_s", [22] = "iq2_s", [23] = "iq4_xs",
    [24] = "i8", [25] = "i16", [26] = "i32", [27] = "i64", [28] = "f64", [29] = "iq1_m",
    [30] = "bf16", [34] = "tq1_0", [35] = "tq2_0",
};
_Static_assert(sizeof k_names / sizeof k_names[0] <= TF_DTYPE_COUNT, "dtype names");

const char *tf_dtype_name(uint32_t type) {
    if (type < sizeof k_names / sizeof k_names[0] && k_names[type]) return k_names[type];
    return "unknown";
}

bool tf_dtype_from_name(const char *name, tf_dtype *out) {
    static const tf_dtype ok[] = {TF_DTYPE_F32,  TF_DTYPE_F16,  TF_DTYPE_BF16, TF_DTYPE_Q8_0,
                                  TF_DTYPE_Q4_0, TF_DTYPE_Q4_1, TF_DTYPE_Q5_0, TF_DTYPE_Q5_1,
                                  TF_DTYPE_Q2_K, TF_DTYPE_Q3_K, TF_DTYPE_Q4_K, TF_DTYPE_Q5_K, TF_DTYPE_Q6_K,
                                  TF_DTYPE_IQ4_NL, TF_DTYPE_IQ4_XS};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (strcasecmp(name, k_names[ok[i]]) == 0) { *out = ok[i]; return true; }
    return false;
}

size_t tf_dtype_row_size(uint32_t type, int64_t n) {
    uint32_t bs = tf_dtype_block_size(type);
    if (bs == 0 || n < 0 || n % bs != 0) return 0;
    return (size_t)(n / bs) * tf_dtype_type_size(type);
}
