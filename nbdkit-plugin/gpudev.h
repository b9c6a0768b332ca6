/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the GPU as the plugin sees it: the only file that knows
 * whether CUDA is built in (GR_HAVE_CUDA); without it, stubs say that no
 * GPU is usable.  Errors come back as text in why/name, not logged. */
#ifndef GPURAID_GPUDEV_H
#define GPURAID_GPUDEV_H

#include <stdbool.h>
#include <stddef.h>

#include "gf/gf.h"
#include "steps.h"

/* Was the plugin built with CUDA? */
bool gr_gpudev_built (void);
/* Register the "cuda" coding backend with gf/ (once; no-op without CUDA). */
void gr_gpudev_register (void);
/* Probe GPU `device` in a child process (CUDA does not survive fork, and
 * nbdkit forks into the background after get_ready).  0 and the device
 * name in name, or -ENODEV and the reason. */
int gr_gpudev_probe_in_child (int device, char *name, size_t namelen);
/* In the server process: a "cuda" coder for (k, m, code) on `device`,
 * the engine set up and the encode kernel compiled (gpu.h
 * gr_gpu_coder_prepare).  0, or a negative errno and the reason in why. */
int gr_gpudev_coder (struct gr_coder **out, int device, int k, int m,
                     enum gr_code code, char *why, size_t whylen);
/* Page-locked host memory (NULL if none). */
void *gr_gpudev_host_alloc (size_t size);
void gr_gpudev_host_free (void *p);
/* Memory page-locked in place, and marked in use (gpu.h
 * gr_gpu_host_register): 0 or a negative errno (-EEXIST: pages of it are
 * registered already; -ENOTSUP without CUDA). */
int gr_gpudev_host_register (void *p, size_t size);
int gr_gpudev_host_unregister (void *p);
void gr_gpudev_host_in_use (void *p, bool on);
/* Host-to-host copies by the GPU (gpu.h gr_gpu_host_copy): 0, -EAGAIN
 * (an end not in page-locked memory the engine copies directly: nothing
 * copied), -ENOTSUP without CUDA, or -EIO. */
int gr_gpudev_host_copy (const struct gr_copy_row *rows, size_t n);
/* What they did, one line in buf ("" if none). */
void gr_gpudev_host_copy_account (char *buf, size_t len);
/* The CUDA message of the engine's last failure ("" if none). */
const char *gr_gpudev_last_error (void);
/* The engine's account of its submissions of several operations
 * (gpu.h gr_gpu_many_account) as one line in buf, "" if none. */
void gr_gpudev_many_account (char *buf, size_t len);
/* Free the engine's buffers and streams (at shutdown). */
void gr_gpudev_release (void);

#endif /* GPURAID_GPUDEV_H */
