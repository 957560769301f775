/* device.c — choosing where a decoder or a context computes (device.h). */
#include "api/device.h"

#ifdef TF_HAVE_CUDA
#include "backend/cuda/backend_cuda.h"
#include "model/weights.h"
#endif

tf_status tf_api_check_device(tf_device dev, tf_err *err) {
    if ((unsigned)dev > TF_DEVICE_CUDA)
        return tf_errf(err, TF_ERR_INVALID_ARG, "device %d: expected auto, cpu or cuda", (int)dev);
#ifndef TF_HAVE_CUDA
    if (dev == TF_DEVICE_CUDA)
        return tf_errf(err, TF_ERR_UNSUPPORTED, "device cuda: this build has no CUDA backend (build with make CUDA=1)");
#endif
    return TF_OK;
}

/* AUTO: CUDA if there is a device, the KV cache type is one it stores (f16,
 * or f32 which it keeps in f16) and its backend runs every op and weight type
 * of both models (tf_bweights_check: qwen2's biases and rotate-half RoPE have
 * no device kernels yet). */
tf_device tf_api_resolve_device(tf_device dev, tf_kv_type kv_type, const tf_model *target, const tf_model *draft) {
    if (dev != TF_DEVICE_AUTO) return dev;
#ifdef TF_HAVE_CUDA
    if (tf_cuda_device_count() < 1) return TF_DEVICE_CPU;
    if (kv_type != TF_KV_F16 && kv_type != TF_KV_F32) return TF_DEVICE_CPU; /* quantized KV: CPU kernels only */
    const tf_backend probe = {.ops = tf_backend_cuda_ops(), .ctx = NULL};
    const tf_model *ms[2] = {target, draft};
    for (int i = 0; i < 2; i++)
        if (ms[i] && tf_bweights_check(&probe, ms[i], NULL) != TF_OK) return TF_DEVICE_CPU;
    return TF_DEVICE_CUDA;
#else
    (void)kv_type, (void)target, (void)draft;
    return TF_DEVICE_CPU;
#endif
}

