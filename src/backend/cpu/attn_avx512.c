/* attn_avx512.c — attention work item compiled for avx512. */
#define ATTN_ITEM_FN tf_attn_item_avx512
#include "backend/cpu/attn_kernel.inc"
