/* gpuraid - GPU coding engine, public header.
 *
 * Plain C; no CUDA types.  The engine fills the same backend table as the
 * CPU backends (gf/gf-backend.h) under the name "cuda": gr_encode,
 * gr_reconstruct and gr_update on a coder made with this backend run on
 * the GPU, bit-identical to the CPU reference.  Functions return 0 or a
 * negative errno; the CUDA message of the last failure is kept and can be
 * read with gr_gpu_last_error().
 */
#ifndef GPURAID_GPU_H
#define GPURAID_GPU_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct gr_backend;

/* Is CUDA device `device` usable?  0 and its name in name[namelen], or
 * -ENODEV (no device / no driver) with the reason in name. */
int gr_gpu_probe_device (int device, char *name, size_t namelen);

/* Choose the device the "cuda" backend uses (default 0).  Call before
 * creating coders.  0, or -ENODEV. */
int gr_gpu_select (int device);

/* The "cuda" backend table, to pass to gr_backend_register(). */
const struct gr_backend *gr_gpu_backend (void);

/* Page-locked host memory (cudaHostAlloc) of size bytes, or NULL (the
 * reason in gr_gpu_last_error()).  Batches whose blocks all lie in such
 * memory, at least 64 KiB each, are copied straight to and from the GPU
 * without the engine's staging copy.  Free with gr_gpu_host_free. */
void *gr_gpu_host_alloc (size_t size);
void gr_gpu_host_free (void *p);

/* Free the engine's staging buffers, streams and shared tables, which are
 * otherwise kept for the life of the process.  Call only while no
 * operation is running (at shutdown); later operations allocate them
 * again.  Coders stay valid. */
void gr_gpu_release (void);

/* Message of the last CUDA failure in this process ("" if none). */
const char *gr_gpu_last_error (void);

#ifdef __cplusplus
}
#endif

#endif /* GPURAID_GPU_H */
