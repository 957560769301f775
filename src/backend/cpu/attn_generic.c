/* attn_generic.c — attention work item for any x86-64 (scalar F16 conversion). */
#include "backend/cpu/attn_generic_isa.h"
#define ATTN_ISA(name) ATTN_CAT_(name, _generic)
#include "backend/cpu/attn_kernel.inc"
