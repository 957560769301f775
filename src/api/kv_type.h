/* kv_type.h — the public KV cache types (tf_kv_type) as element types. */
#ifndef TF_API_KV_TYPE_H
#define TF_API_KV_TYPE_H

#include "triforce.h"

#include "core/dtype.h"

static inline bool tf_kv_type_valid(tf_kv_type t) {
    return t == TF_KV_F32 || t == TF_KV_F16 || t == TF_KV_Q8_0 || t == TF_KV_Q4_0;
}

/* The element type of a valid tf_kv_type. */
static inline tf_dtype tf_kv_type_dtype(tf_kv_type t) {
    switch (t) {
    case TF_KV_F32: return TF_DTYPE_F32;
    case TF_KV_Q8_0: return TF_DTYPE_Q8_0;
    case TF_KV_Q4_0: return TF_DTYPE_Q4_0;
    default: return TF_DTYPE_F16;
    }
}

#endif
