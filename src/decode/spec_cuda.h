/*
 * spec_cuda.h — the device side of the decoding levels (private to spec.c).
 *
 * With tf_spec_cfg.device == TF_SPEC_DEVICE_CUDA, spec.c keeps its algorithm
 * (extend / verify / roll back, the host bookkeeping of every cache) and
 * hands the data work of each level to these functions: forward passes over
 * device caches (C_p, the gathered C_r view, the rotated C_q view), chunk
 * sums, selection and gather for C_r, the C_q ring, and the per-position
 * distributions (greedy: argmax on the device, 4 bytes per row come back;
 * sampled: the logits rows come back and the host transform runs on them).
 * The draft and middle levels replay CUDA graphs.
 *
 * Compiled only with TF_HAVE_CUDA.
 */
#ifndef TF_DECODE_SPEC_CUDA_H
#define TF_DECODE_SPEC_CUDA_H

#include "decode/spec.h"

#ifdef TF_HAVE_CUDA

/* Open the device, upload the weights, reserve C_p and the chunk sums. */
tf_status tf_spec_dev_init(tf_spec *s, tf_err *err);
/* Device buffers of level L (its index in s->lv) with the batch and logits
 * rows spec.c chose; sets the host fields spec.c reads (fwd.n_batch, view.n_slots). */
tf_status tf_spec_dev_level_init(tf_spec *s, spec_level *L, int32_t n_batch, int32_t n_logits, int32_t rows,
                                 tf_err *err);
void tf_spec_dev_free(tf_spec *s);
void tf_spec_dev_reset(tf_spec *s);

tf_status tf_spec_dev_forward(tf_spec *s, int i, const int32_t *toks, int32_t n, int32_t logits_from);
tf_status tf_spec_dev_truncate(tf_spec *s, int i, int64_t n);
/* Distributions of rows [from, n) of level i's last pass into its ring at positions c + r + 1. */
tf_status tf_spec_dev_dists(tf_spec *s, int i, int64_t c, int32_t from, int32_t n);
/* Select and gather C_r from the newest target query; sets s->rc.n_sel. */
tf_status tf_spec_dev_rebuild(tf_spec *s, spec_level *L);
tf_status tf_spec_dev_save_query(tf_spec *s, int32_t row);
/* The description of the device in use (tf_cuda_describe). */
const char *tf_spec_dev_describe(const tf_spec *s);

#endif
#endif
