/*
 * cuda_device.cu — the device handle, memory, copies, graphs and the
 * translation of CUDA / cuBLAS failures into tf_status with messages.
 */
#include "backend/cuda/cuda_common.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

tf_status tfc_cuda_err(tf_err *err, cudaError_t e, const char *what) {
    tf_status st = TF_ERR_INTERNAL;
    if (e == cudaErrorMemoryAllocation) st = TF_ERR_NOMEM;
    else if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorNoKernelImageForDevice ||
             e == cudaErrorUnsupportedPtxVersion || e == cudaErrorCallRequiresNewerDriver)
        st = TF_ERR_UNSUPPORTED;
    return tf_errf(err, st, "%s: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
}

tf_status tfc_blas_err(tf_err *err, cublasStatus_t s, const char *what) {
    return tf_errf(err, s == CUBLAS_STATUS_ALLOC_FAILED ? TF_ERR_NOMEM : TF_ERR_INTERNAL, "%s: cuBLAS %s (%s)", what,
                   cublasGetStatusName(s), cublasGetStatusString(s));
}

extern "C" int tf_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky-free error so later calls start clean */
        return 0;
    }
    return n;
}

extern "C" tf_status tf_cuda_open(tf_cuda **out, int device, tf_err *err) {
    *out = NULL;
    int drv = 0, rt = 0, n = 0;
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    if (drv == 0)
        return tf_errf(err, TF_ERR_UNSUPPORTED, "no CUDA device: no NVIDIA driver is loaded (runtime %d.%d)",
                       rt / 1000, rt % 1000 / 10);
    if (drv < rt)
        return tf_errf(err, TF_ERR_UNSUPPORTED,
                       "the NVIDIA driver supports CUDA %d.%d but this build uses CUDA %d.%d: update the driver",
                       drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaErrorNoDevice || (e == cudaSuccess && n == 0)) {
        cudaGetLastError();
        return tf_errf(err, TF_ERR_UNSUPPORTED, "no CUDA device");
    }
    if (e != cudaSuccess) return tfc_cuda_err(err, e, "counting CUDA devices");
    if (device < 0 || device >= n)
        return tf_errf(err, TF_ERR_INVALID_ARG, "CUDA device %d: expected 0..%d", device, n - 1);
    if ((e = cudaSetDevice(device)) != cudaSuccess) return tfc_cuda_err(err, e, "selecting the CUDA device");
    cudaDeviceProp prop;
    if ((e = cudaGetDeviceProperties(&prop, device)) != cudaSuccess)
        return tfc_cuda_err(err, e, "reading the CUDA device's properties");
    if (prop.major < 8)
        return tf_errf(err, TF_ERR_UNSUPPORTED, "CUDA device %d (%s) is sm_%d%d: this build needs sm_80 or newer",
                       device, prop.name, prop.major, prop.minor);
    tf_cuda *cu = (tf_cuda *)calloc(1, sizeof *cu);
    if (!cu) return tf_errf(err, TF_ERR_NOMEM, "CUDA handle: out of memory");
    cu->device = device;
    cu->sm = prop.major * 10 + prop.minor;
    int clk_khz = 0, bus_bits = 0;
    cudaDeviceGetAttribute(&clk_khz, cudaDevAttrMemoryClockRate, device);
    cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device);
    cudaGetLastError();
    cu->peak_gbps = 2.0 * clk_khz * 1e3 * (bus_bits / 8.0) / 1e9;
    snprintf(cu->desc, sizeof cu->desc, "%.200s (sm_%d, %.1f GiB, driver %d.%d, runtime %d.%d)", prop.name, cu->sm,
             (double)prop.totalGlobalMem / (1 << 30), drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
    tf_status st = TF_OK;
    if ((e = cudaStreamCreateWithFlags(&cu->stream, cudaStreamNonBlocking)) != cudaSuccess)
        st = tfc_cuda_err(err, e, "creating a CUDA stream");
    cublasStatus_t bs;
    if (st == TF_OK && (bs = cublasCreate(&cu->blas)) != CUBLAS_STATUS_SUCCESS)
        st = tfc_blas_err(err, bs, "creating the cuBLAS handle");
    if (st == TF_OK && (bs = cublasSetStream(cu->blas, cu->stream)) != CUBLAS_STATUS_SUCCESS)
        st = tfc_blas_err(err, bs, "binding cuBLAS to the stream");
    cu->blas_ws_bytes = (size_t)32 << 20;
    if (st == TF_OK) st = tf_cuda_malloc(cu, &cu->blas_ws, cu->blas_ws_bytes, "cuBLAS workspace", err);
    if (st == TF_OK && (bs = cublasSetWorkspace(cu->blas, cu->blas_ws, cu->blas_ws_bytes)) != CUBLAS_STATUS_SUCCESS)
        st = tfc_blas_err(err, bs, "setting the cuBLAS workspace");
    if (st != TF_OK) {
        tf_cuda_close(cu);
        return st;
    }
    tfc_attn_init();
    tfc_attn_prefill_init();
    *out = cu;
    return TF_OK;
}

extern "C" void tf_cuda_close(tf_cuda *cu) {
    if (!cu) return;
    if (cu->stream) cudaStreamSynchronize(cu->stream);
    if (cu->blas) cublasDestroy(cu->blas);
    if (cu->blas_ws) cudaFree(cu->blas_ws);
    if (cu->stream) cudaStreamDestroy(cu->stream);
    free(cu);
}

extern "C" const char *tf_cuda_describe(const tf_cuda *cu) { return cu->desc; }
extern "C" void *tf_cuda_stream(tf_cuda *cu) { return (void *)cu->stream; }
extern "C" double tf_cuda_peak_gbps(const tf_cuda *cu) { return cu->peak_gbps; }

extern "C" void tf_cuda_mem_info(const tf_cuda *cu, size_t *free_b, size_t *total_b) {
    size_t f = 0, t = 0;
    if (cudaMemGetInfo(&f, &t) != cudaSuccess) cudaGetLastError();
    if (free_b) *free_b = f;
    if (total_b) *total_b = t;
}

extern "C" tf_status tf_cuda_malloc(tf_cuda *cu, void **p, size_t bytes, const char *what, tf_err *err) {
    *p = NULL;
    if (bytes == 0) bytes = 1;
    cudaError_t e = cudaMalloc(p, bytes);
    if (e == cudaSuccess) return TF_OK;
    *p = NULL;
    cudaGetLastError();
    size_t f = 0, t = 0;
    tf_cuda_mem_info(cu, &f, &t);
    if (e == cudaErrorMemoryAllocation)
        return tf_errf(err, TF_ERR_NOMEM,
                       "out of device memory: %s needs %zu bytes (%.2f GiB) but %zu bytes (%.2f GiB) of %.2f GiB are "
                       "free (hint: a smaller context -c, budget or batch)",
                       what, bytes, (double)bytes / (1 << 30), f, (double)f / (1 << 30), (double)t / (1 << 30));
    return tfc_cuda_err(err, e, what);
}

extern "C" void tf_cuda_mfree(tf_cuda *cu, void *p) {
    if (p) cudaFree(p);
}

extern "C" tf_status tf_cuda_host_malloc(tf_cuda *cu, void **p, size_t bytes, const char *what, tf_err *err) {
    *p = NULL;
    cudaError_t e = cudaMallocHost(p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        *p = NULL;
        cudaGetLastError();
        return tf_errf(err, TF_ERR_NOMEM, "cannot reserve %zu bytes of page-locked host memory for %s: %s", bytes,
                       what, cudaGetErrorString(e));
    }
    return TF_OK;
}

extern "C" void tf_cuda_host_free(tf_cuda *cu, void *p) {
    if (p) cudaFreeHost(p);
}

extern "C" tf_status tf_cuda_h2d(tf_cuda *cu, void *dst, const void *src, size_t bytes, tf_err *err) {
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cu->stream);
    return e == cudaSuccess ? TF_OK : tfc_cuda_err(err, e, "copying to the device");
}

extern "C" tf_status tf_cuda_d2h(tf_cuda *cu, void *dst, const void *src, size_t bytes, tf_err *err) {
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, cu->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(cu->stream);
    return e == cudaSuccess ? TF_OK : tfc_cuda_err(err, e, "copying from the device");
}

extern "C" tf_status tf_cuda_d2d(tf_cuda *cu, void *dst, const void *src, size_t bytes, tf_err *err) {
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cu->stream);
    return e == cudaSuccess ? TF_OK : tfc_cuda_err(err, e, "copying on the device");
}

extern "C" tf_status tf_cuda_memset0(tf_cuda *cu, void *dst, size_t bytes, tf_err *err) {
    cudaError_t e = cudaMemsetAsync(dst, 0, bytes, cu->stream);
    return e == cudaSuccess ? TF_OK : tfc_cuda_err(err, e, "clearing device memory");
}

extern "C" tf_status tf_cuda_check(tf_cuda *cu, const char *what, tf_err *err) {
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? TF_OK : tfc_cuda_err(err, e, what);
}

extern "C" tf_status tf_cuda_sync(tf_cuda *cu, const char *what, tf_err *err) {
    cudaError_t e = cudaStreamSynchronize(cu->stream);
    if (e == cudaSuccess) e = cudaGetLastError();
    return e == cudaSuccess ? TF_OK : tfc_cuda_err(err, e, what);
}

extern "C" tf_status tf_cuda_graph_begin(tf_cuda *cu, tf_err *err) {
    cudaError_t e = cudaStreamBeginCapture(cu->stream, cudaStreamCaptureModeThreadLocal);
    return e == cudaSuccess ? TF_OK : tfc_cuda_err(err, e, "starting a CUDA graph capture");
}

extern "C" tf_status tf_cuda_graph_end(tf_cuda *cu, tf_cuda_graph **out, tf_err *err) {
    *out = NULL;
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(cu->stream, &g);
    if (e != cudaSuccess) return tfc_cuda_err(err, e, "ending a CUDA graph capture");
    tf_cuda_graph *cg = (tf_cuda_graph *)calloc(1, sizeof *cg);
    if (!cg) {
        cudaGraphDestroy(g);
        return tf_errf(err, TF_ERR_NOMEM, "CUDA graph: out of memory");
    }
    e = cudaGraphInstantiate(&cg->exec, g, 0);
    cudaGraphDestroy(g);
    if (e != cudaSuccess) {
        free(cg);
        return tfc_cuda_err(err, e, "instantiating a CUDA graph");
    }
    *out = cg;
    return TF_OK;
}

extern "C" tf_status tf_cuda_graph_launch(tf_cuda *cu, tf_cuda_graph *g, tf_err *err) {
    cudaError_t e = cudaGraphLaunch(g->exec, cu->stream);
    return e == cudaSuccess ? TF_OK : tfc_cuda_err(err, e, "launching a CUDA graph");
}

extern "C" void tf_cuda_graph_free(tf_cuda_graph *g) {
    if (!g) return;
    cudaGraphExecDestroy(g->exec);
    free(g);
}

int tfc_env_variant(const char *name, const char *allowed, int dflt) {
    const char *e = getenv(name);
    return e && e[0] && !e[1] && strchr(allowed, e[0]) ? e[0] - '0' : dflt;
}
