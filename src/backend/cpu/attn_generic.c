/* attn_generic.c — attention work item for any x86-64 (scalar F16 conversion). */
#include "core/fp16.h"
#define CVT_LOAD16(src)                                                                   \
    ({                                                                                    \
        v16f r_;                                                                          \
        for (int cvt_i_ = 0; cvt_i_ < 16; cvt_i_++)                                       \
            r_[cvt_i_] = tf_f16_to_f32(((const uint16_t *)(src))[cvt_i_]);                 \
        r_;                                                                               \
    })
#define ATTN_ISA(name) ATTN_CAT_(name, _generic)
#include "backend/cpu/attn_kernel.inc"
