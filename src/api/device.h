/* device.h — choosing where a decoder or a context computes (tf_device), and
 * the decoding configuration the public parameters give there. */
#ifndef TF_API_DEVICE_H
#define TF_API_DEVICE_H

#include "triforce.h"

#include "core/error.h"
#include "decode/spec.h"
#include "model/model.h"

/* TF_ERR_INVALID_ARG for a value outside the enum; TF_ERR_UNSUPPORTED for
 * cuda in a build without it. */
tf_status tf_api_check_device(tf_device dev, tf_err *err);

/* AUTO resolved to CPU or CUDA for these models (draft may be NULL) and KV
 * type; CPU and CUDA are returned as given. */
tf_device tf_api_resolve_device(tf_device dev, tf_kv_type kv_type, const tf_model *target, const tf_model *draft);

/* The internal configuration of decoder parameters on device dev (CPU or
 * CUDA), field for field; decoders and contexts both start from it. */
tf_spec_cfg tf_api_spec_cfg(const tf_decoder_params *p, tf_device dev);

#endif
