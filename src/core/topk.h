/*
 * topk.h — the k best entries of a row of logits scaled by a temperature:
 * the candidate selection of sampling (sampling.c) and of the backends' topk
 * op, written once so that both select the same set in the same order.
 */
#ifndef TF_CORE_TOPK_H
#define TF_CORE_TOPK_H

#include <stdint.h>

/* z = logit / temp (one correctly rounded division; NaN counts as -inf).
 * Writes the ids of the k largest finite z of logits[0, n) to ids, larger z
 * first and, among equal z, lower id first, and their z to z (NULL: not
 * written); returns how many were kept (k, or fewer where fewer z are
 * finite). temp > 0, k >= 1. */
int32_t tf_topk_scaled(const float *logits, int32_t n, float temp, int32_t k, int32_t *ids, float *z);

/* The most candidates per row a backend's topk op hands over (backend.h). */
#define TF_TOPK_MAX 64

#endif
