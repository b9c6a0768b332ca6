/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - GPU coding engine, public header.
 *
 * Plain C; no CUDA types.  The engine fills the same backend table as the
 * CPU backends (gf/gf-backend.h) under the name "cuda": gr_encode,
 * gr_reconstruct and gr_update on a coder made with this backend run on
 * the GPU, bit-identical to the CPU reference.  Functions return 0 or a
 * negative errno (-ENODEV no usable device, -ENOMEM, -EIO any other CUDA
 * failure); the CUDA message of the last failure is kept and can be read
 * with gr_gpu_last_error().
 *
 * The backend:
 *  - prefer is below the CPU backends isal and gfc (above ref), so
 *    gr_backend_best() picks the CPU: ask for "cuda" by name;
 *  - probe() succeeds only when device gr_gpu_select()ed (default 0) is
 *    usable (driver present, compute capability 9.0+: kernels are built
 *    for sm_90 with compute_90 PTX);
 *  - is thread-safe: any number of threads may code on one coder; they
 *    share a fixed pool of 4 slots, each with 3 CUDA streams, 64 MiB of
 *    page-locked staging memory and 64 MiB of device memory (allocated on
 *    first use, freed by gr_gpu_release()), and wait for a free one;
 *  - uploads each coder's matrix once (coder_init) and each decode plan's
 *    once (plan_init); batches of 4 MiB of data or more also get a kernel
 *    compiled for that matrix at run time (NVRTC, loaded with dlopen; in a
 *    background thread; the generic kernel runs meanwhile and whenever
 *    NVRTC is missing).
 * Batches are copied host to device and back around each kernel, so they
 * pay PCIe; blocks in page-locked memory (gr_gpu_host_alloc) skip the
 * engine's own staging copy and go through a pipeline of small chunks
 * (one slot), blocks back to back or equally spaced in such memory in
 * single or 2D copies; a batch whose outputs alone are page-locked has
 * them downloaded in place (only its inputs are staged).  gr_code_many
 * merges its operations by table (the coder's, or a decode plan's) and
 * length into jobs, and runs those whose blocks are all page-locked in
 * one submission: one slot, its device buffers taken in turn by the
 * jobs' chunks, one wait for all (the others each on their own); where
 * every block of such a job lies in the engine's page-locked allocations
 * or registered ranges in use, a chunk's copies are one launch of a copy
 * kernel per direction, reading and writing host memory through the
 * device's mapping of it, instead of a CUDA copy per block.  A
 * submission whose direct jobs are all such, their blocks 16-byte
 * aligned, their tables of at most half as many output rows as inputs
 * and their blocks 64 MiB or fewer in all, is coded where the blocks
 * are: the generic kernel reads and writes them through the mapping,
 * nothing copied, a launch for up to 448 blocks, RS up to 8 output rows
 * a pass (later passes read the inputs from a copy the kernel keeps in
 * device memory, as are the blocks whose checksums are asked: each
 * crosses the link once).  The block
 * checksums an operation asks for (gr_code_op's cksums) are computed on
 * the GPU for the encodes of that one submission, where the blocks are,
 * up to those of 1 GiB of blocks; gr_code_many computes the others on
 * the CPU.
 * docs/performance.md has the measured figures.
 */
#ifndef GPURAID_GPU_H
#define GPURAID_GPU_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct gr_backend;
struct gr_coder;

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

/* The caller's memory [p, p + size) page-locked in place (cudaHostRegister)
 * until gr_gpu_host_unregister (p).  The engine copies blocks inside such
 * a range directly only while it is marked in use (gr_gpu_host_in_use):
 * between uses the caller may have freed the memory and the address may
 * hold other memory, to which CUDA would still map the old pages, so
 * blocks touching a registered range not in use are always staged.  The
 * caller unregisters a range once it knows the memory was freed or moved
 * (and before registering memory that overlaps it).  0, -EEXIST (it
 * overlaps a registered range or an allocation of the engine's, or CUDA
 * says pages of it are registered already), -ENOSPC (more than 1024
 * ranges and allocations), -ENOMEM or -EIO (message kept). */
int gr_gpu_host_register (void *p, size_t size);
/* 0; -EIO (message kept) where CUDA refuses, as for memory that was never
 * registered (a range that fails stays listed, never copied directly);
 * -EINVAL if CUDA let go of a range the engine had not listed. */
int gr_gpu_host_unregister (void *p);
/* Mark the range registered at p in use (on) or not. */
void gr_gpu_host_in_use (void *p, int on);

/* Before serving: set up the engine's slots (streams, staging and device
 * buffers) and compile coder c's encode kernel (c: a "cuda" coder), so
 * that a server's first batches pay for neither.  0 and *compiled (1:
 * the run-time compiled kernel is ready; 0: the generic one runs, the
 * reason in gr_gpu_last_error()), or -EINVAL (not a "cuda" coder) or
 * another negative errno (message kept). */
int gr_gpu_coder_prepare (struct gr_coder *c, int *compiled);

/* Free the engine's staging buffers, streams and shared tables, which are
 * otherwise kept for the life of the process.  Call only while no
 * operation is running (at shutdown); later operations allocate them
 * again.  Coders stay valid. */
void gr_gpu_release (void);

/* What the submissions of several operations (gr_code_many) did since
 * the process started: calls, their jobs (operations merged by table)
 * copied directly and staged, and the nanoseconds summed over calls that
 * went to waiting for a slot, enqueueing the direct jobs' copies and
 * kernels, waiting for them to end, the staged jobs, the checksums'
 * return (it waits for the GPU too), building the jobs, and the whole
 * calls. */
struct gr_gpu_many_stats {
  unsigned long long calls, direct_jobs, staged_jobs;
  unsigned long long summed_jobs;       /* direct encodes and
                                         * reconstructs whose block
                                         * checksums the GPU computed */
  unsigned long long mapped_jobs;       /* direct jobs whose copies the
                                         * copy kernel made */
  unsigned long long gathered_jobs;     /* direct jobs coded where their
                                         * blocks are, nothing copied */
  unsigned long long chunks, copies;    /* the direct jobs' chunks (or
                                         * the gathered jobs' launches)
                                         * and the copies queued for
                                         * them */
  unsigned long long slot_ns, enqueue_ns, wait_ns, staged_ns;
  unsigned long long launch_ns; /* of enqueue_ns, in the coding kernels'
                                 * launches of the jobs coded where their
                                 * blocks are */
  unsigned long long cksums_ns; /* the direct jobs' block checksums
                                 * brought back (waits for the GPU) */
  unsigned long long prep_ns;   /* building the jobs (operations merged by
                                 * table, the page-lock checks) */
  unsigned long long total_ns;  /* the calls, from entry to return */
};
void gr_gpu_many_account (struct gr_gpu_many_stats *st);

/* Copies from host memory to host memory by the GPU (its copy kernel
 * reads and writes both through the device's mapping), so that the host
 * spends a launch and a wait asleep on them, not a memcpy: row i copies
 * len bytes from src to dst (no overlap).  Every row's both ends must lie
 * inside page-locked memory the engine copies directly (an allocation of
 * gr_gpu_host_alloc, or a registered range in use): else -EAGAIN and
 * nothing is copied, as where the device cannot map host memory.  0,
 * -EAGAIN, -EINVAL (a row over 4 GiB) or -EIO (message kept). */
struct gr_gpu_host_row {
  void *dst;
  const void *src;
  size_t len;
};
int gr_gpu_host_copy (const struct gr_gpu_host_row *rows, size_t n);
/* What gr_gpu_host_copy did since the process started. */
struct gr_gpu_host_copy_stats {
  unsigned long long calls, rows, bytes;
};
void gr_gpu_host_copy_account (struct gr_gpu_host_copy_stats *st);

/* Message of the last CUDA failure in this process ("" if none). */
const char *gr_gpu_last_error (void);

#ifdef __cplusplus
}
#endif

#endif /* GPURAID_GPU_H */
