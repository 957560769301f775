/* attn_generic_isa.h — the portable f16 conversion behind attn_kernel.inc's
 * CVT_LOAD16 (16 halves to a v16f, one at a time), for the variants compiled
 * for any x86-64 (attn_generic.c, attn_f32_generic.c); include before the
 * kernel. */
#ifndef TF_BACKEND_CPU_ATTN_GENERIC_ISA_H
#define TF_BACKEND_CPU_ATTN_GENERIC_ISA_H

#include "core/fp16.h"
#define CVT_LOAD16(src)                                                                   \
    ({                                                                                    \
        v16f r_;                                                                          \
        for (int cvt_i_ = 0; cvt_i_ < 16; cvt_i_++)                                       \
            r_[cvt_i_] = tf_f16_to_f32(((const uint16_t *)(src))[cvt_i_]);                 \
        r_;                                                                               \
    })

#endif
