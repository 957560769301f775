/* dtype.c — element type geometry and names, from the registry (dtype_list.h). */
#include "core/dtype.h"

#include <strings.h>

const int8_t tf_iq4_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

bool tf_dtype_supported(uint32_t type) { return tf_dtype_block_size(type) != 0; }

uint32_t tf_dtype_block_size(uint32_t type) {
    switch (type) {
#define TF_DTYPE_BS_(ID, nm, id, bs, ...) case TF_DTYPE_##ID: return bs;
        TF_DTYPE_LIST(TF_DTYPE_BS_)
#undef TF_DTYPE_BS_
    default: return 0;
    }
}

uint32_t tf_dtype_type_size(uint32_t type) {
    switch (type) {
#define TF_DTYPE_BYTES_(ID, nm, id, bs, bytes, ...) case TF_DTYPE_##ID: return bytes;
        TF_DTYPE_LIST(TF_DTYPE_BYTES_)
#undef TF_DTYPE_BYTES_
    default: return 0;
    }
}

/* ggml's names of the types this engine does not compute with, so messages
 * can name what a file holds. */
static const char *const k_other_names[] = {
    [9] = "q8_1", [15] = "q8_k", [16] = "iq2_xxs", [17] = "iq2_xs", [18] = "iq3_xxs", [19] = "iq1_s",
    [21] = "iq3_s", [22] = "iq2_s", [24] = "i8", [25] = "i16", [26] = "i32", [27] = "i64", [28] = "f64",
    [29] = "iq1_m", [34] = "tq1_0", [35] = "tq2_0",
};
_Static_assert(sizeof k_other_names / sizeof k_other_names[0] <= TF_DTYPE_COUNT, "dtype names");

const char *tf_dtype_name(uint32_t type) {
    switch (type) {
#define TF_DTYPE_NAME_(ID, nm, ...) case TF_DTYPE_##ID: return #nm;
        TF_DTYPE_LIST(TF_DTYPE_NAME_)
#undef TF_DTYPE_NAME_
    default: break;
    }
    if (type < sizeof k_other_names / sizeof k_other_names[0] && k_other_names[type]) return k_other_names[type];
    return "unknown";
}

bool tf_dtype_from_name(const char *name, tf_dtype *out) {
#define TF_DTYPE_PARSE_(ID, nm, ...) \
    if (strcasecmp(name, #nm) == 0) { *out = TF_DTYPE_##ID; return true; }
    TF_DTYPE_LIST(TF_DTYPE_PARSE_)
#undef TF_DTYPE_PARSE_
    return false;
}

size_t tf_dtype_row_size(uint32_t type, int64_t n) {
    uint32_t bs = tf_dtype_block_size(type);
    if (bs == 0 || n < 0 || n % bs != 0) return 0;
    return (size_t)(n / bs) * tf_dtype_type_size(type);
}
