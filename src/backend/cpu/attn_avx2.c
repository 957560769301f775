/* attn_avx2.c — attention work item compiled for avx2. */
#define ATTN_ITEM_FN tf_attn_item_avx2
#include "backend/cpu/attn_kernel.inc"
