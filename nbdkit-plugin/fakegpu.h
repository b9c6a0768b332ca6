/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - stand-in GPUs for tests on machines without one.
 *
 *   -D gpuraid.fake_gpu=1  a "GPU" coder whose every operation fails, so
 *                          that the run-time GPU -> CPU fallback is tested;
 *   -D gpuraid.fake_gpu=2  a working one (a second CPU coder), so that
 *                          every GPU-only path (group commit, staging)
 *                          runs;
 *   -D gpuraid.fake_gpu=3  one whose rebuilt blocks are wrong (one byte
 *                          flipped), which accel=auto's check must catch.
 *   -D gpuraid.fake_auto=1 route between it and the CPU as accel=auto does
 *                          with a real GPU (measured at start-up), its
 *                          "page-locked" memory ordinary memory;
 *   -D gpuraid.fake_auto=2 the same, but after the measurement every
 *                          operation goes to the stand-in.
 * Used only when no real GPU is. */
#ifndef GPURAID_FAKEGPU_H
#define GPURAID_FAKEGPU_H

#include <stddef.h>

#include "gf/gf.h"

enum gr_fake_gpu { GR_FAKE_NONE, GR_FAKE_FAILING, GR_FAKE_WORKING,
                   GR_FAKE_WRONG };
enum gr_fake_auto { GR_FAKE_AUTO_OFF, GR_FAKE_AUTO_MEASURED,
                    GR_FAKE_AUTO_ALL };

enum gr_fake_gpu gr_fakegpu_mode (void);
enum gr_fake_auto gr_fakegpu_auto (void);
/* The stand-in's coder for (k, m, code); cpu is the CPU backend it
 * computes with where it works.  0 or a negative errno. */
int gr_fakegpu_coder (struct gr_coder **out, int k, int m,
                      enum gr_code code, const struct gr_backend *cpu);
const char *gr_fakegpu_name (void);
/* Its "page-locked" memory: 4096-aligned ordinary memory. */
void *gr_fakegpu_host_alloc (size_t size);
void gr_fakegpu_host_free (void *p);

#endif /* GPURAID_FAKEGPU_H */
