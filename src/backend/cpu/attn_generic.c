/* attn_generic.c — attention work item compiled for generic. */
#define ATTN_ITEM_FN tf_attn_item_generic
#include "backend/cpu/attn_kernel.inc"
