/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - stand-in GPUs for tests on machines without one.
 *
 *   -D gpuraid.fake_gpu=1  a "GPU" coder whose every operation fails, so
 *                          that the run-time GPU -> CPU fallback is tested;
 *   -D gpuraid.fake_gpu=2  a working one (a second CPU coder), so that
 *                          every GPU-only path (group commit, staging)
 *                          runs;
 *   -D gpuraid.fake_gpu=3  one whose rebuilt blocks are wrong (one byte
 *                          flipped), which accel=auto's check must catch;
 *   -D gpuraid.fake_gpu=4  a working one whose reconstructs give wrong
 *                          block checksums (gr_code_op's cksums), which
 *                          the reads verified against them must catch.
 *   -D gpuraid.fake_gpu_us=N  the working one takes N us more for each
 *                          submission, as a GPU's round trip does (so
 *                          that batches gathered across requests form),
 *                          and counts how many were in it at once;
 *   -D gpuraid.fake_fail_after=N  the working one fails (-EIO) every
 *                          operation after its first N (a GPU lost while
 *                          it runs: work queued by then is redone on the
 *                          CPU);
 *   -D gpuraid.fake_cpu_us=N  with a stand-in, the CPU coder takes N us
 *                          more for each operation (so that accel=auto's
 *                          router has a faster "GPU" to find);
 *   -D gpuraid.fake_auto=1 route between it and the CPU as accel=auto does
 *                          with a real GPU (measured at start-up), its
 *                          "page-locked" memory ordinary memory;
 *   -D gpuraid.fake_auto=2 the same, but after the measurement every
 *                          operation goes to the stand-in.
 * With fake_auto the stand-in also emulates page-locking in place
 * (registration, gpu.h gr_gpu_host_register): it records the ranges,
 * refuses one that shares a page with another (-EEXIST, as CUDA does),
 * and counts its operations whose every block it would copy directly
 * (its "page-locked" allocations and registered ranges in use) against
 * the staged ones; gr_fakegpu_report logs the counts (and the most
 * submissions at once, with fake_gpu_us).
 *   -D gpuraid.fake_pin=1  every registration fails (-ENOMEM);
 *   -D gpuraid.fake_pin=2  every registration fails with -EEXIST.
 * Used only when no real GPU is. */
#ifndef GPURAID_FAKEGPU_H
#define GPURAID_FAKEGPU_H

#include <stdbool.h>
#include <stddef.h>

#include "gf/gf.h"
#include "steps.h"

enum gr_fake_gpu { GR_FAKE_NONE, GR_FAKE_FAILING, GR_FAKE_WORKING,
                   GR_FAKE_WRONG, GR_FAKE_BAD_SUMS };
enum gr_fake_auto { GR_FAKE_AUTO_OFF, GR_FAKE_AUTO_MEASURED,
                    GR_FAKE_AUTO_ALL };

enum gr_fake_gpu gr_fakegpu_mode (void);
enum gr_fake_auto gr_fakegpu_auto (void);
/* The stand-in's coder for (k, m, code); cpu is the CPU backend it
 * computes with where it works.  0 or a negative errno. */
int gr_fakegpu_coder (struct gr_coder **out, int k, int m,
                      enum gr_code code, const struct gr_backend *cpu);
const char *gr_fakegpu_name (void);
/* Before each CPU operation while a stand-in is used: fake_cpu_us. */
void gr_fakegpu_cpu_latency (void);
/* Its "page-locked" memory: 4096-aligned ordinary memory. */
void *gr_fakegpu_host_alloc (size_t size);
void gr_fakegpu_host_free (void *p);
/* Its page-locking in place: as gpudev.h's gr_gpudev_host_register,
 * gr_gpudev_host_unregister (-EINVAL for a range not registered) and
 * gr_gpudev_host_in_use. */
int gr_fakegpu_host_register (void *p, size_t size);
int gr_fakegpu_host_unregister (void *p);
void gr_fakegpu_host_in_use (void *p, bool on);
const char *gr_fakegpu_pin_error (void);
/* Host copies as gpudev.h's gr_gpudev_host_copy: -EAGAIN where an end
 * lies outside its "page-locked" memory (allocations, registered ranges
 * in use), else memcpy. */
int gr_fakegpu_host_copy (const struct gr_copy_row *rows, size_t n);
/* Log (debug) its operations direct and staged, and the ranges still
 * registered, unregistered wrongly or marked in use wrongly. */
void gr_fakegpu_report (void);

#endif /* GPURAID_FAKEGPU_H */
