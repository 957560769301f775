/* backend.c — what every backend shares: op names and the refusal message. */
#include "backend/backend.h"

#include "backend/cpu/backend_cpu.h"
#include "core/dtype.h"
#ifdef TF_HAVE_CUDA
#include "backend/cuda/backend_cuda.h"
#endif

#include <string.h>

static const char *const k_op_names[TF_OP_COUNT] = {
    [TF_OP_EMBED] = "embed",       [TF_OP_RMSNORM] = "rmsnorm",   [TF_OP_ROPE] = "rope",
    [TF_OP_ROPE_NEOX] = "rope_neox", [TF_OP_MATMUL] = "matmul",   [TF_OP_ADD_BIAS] = "add_bias",
    [TF_OP_ADD] = "add",           [TF_OP_SILU_MUL] = "silu_mul", [TF_OP_KV_STORE] = "kv_store",
    [TF_OP_ATTN] = "attn",         [TF_OP_ARGMAX] = "argmax",     [TF_OP_TOPK] = "topk",         [TF_OP_GRAPH] = "graph",
    [TF_OP_RC_SUMS] = "rc_sums",   [TF_OP_RC_SELECT] = "rc_select", [TF_OP_RC_GATHER] = "rc_gather",
};

const char *tf_op_name(tf_op op) { return (unsigned)op < TF_OP_COUNT ? k_op_names[op] : "unknown"; }

static bool op_has_type(tf_op op) {
    return op == TF_OP_EMBED || op == TF_OP_MATMUL || op == TF_OP_KV_STORE || op == TF_OP_ATTN ||
           op == TF_OP_RC_SUMS || op == TF_OP_RC_GATHER;
}

tf_status tf_backend_require(const tf_backend *be, tf_op op, uint32_t type, const char *what, tf_err *err) {
    if (tf_backend_supports(be, op, type)) return TF_OK;
    if (op_has_type(op))
        return tf_errf(err, TF_ERR_UNSUPPORTED, "%s: the %s backend has no %s op for %s", what, be->ops->name,
                       tf_op_name(op), tf_dtype_name(type));
    return tf_errf(err, TF_ERR_UNSUPPORTED, "%s: the %s backend has no %s op", what, be->ops->name, tf_op_name(op));
}

tf_status tf_backend_open(tf_backend *be, const char *name, tf_pool *pool, int isa, tf_err *err) {
    be->ops = NULL;
    be->ctx = NULL;
    if (strcmp(name, "cpu") == 0) return tf_backend_cpu_init(be, pool, (tf_isa)isa, err);
    if (strcmp(name, "cuda") == 0) {
#ifdef TF_HAVE_CUDA
        return tf_backend_cuda_open(be, 0, err);
#else
        return tf_errf(err, TF_ERR_UNSUPPORTED, "this build has no CUDA backend (rebuild with `make CUDA=1`)");
#endif
    }
    return tf_errf(err, TF_ERR_INVALID_ARG, "backend '%s': expected cpu or cuda", name);
}

void tf_backend_free(tf_backend *be) {
    if (be->ops && be->ops->destroy) be->ops->destroy(be);
    be->ops = NULL;
    be->ctx = NULL;
}
