/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - coding: where each operation runs, and running it.
 *
 * One owner: struct gr_coding holds the CPU coder and, in the server
 * process, the GPU coder (a real GPU, or a test stand-in, fakegpu.h);
 * accel=auto's thresholds (set by the start-up measurement, calibrate.h)
 * and the count of operations on the GPU; the GPU -> CPU fallback; the
 * group commit of GPU encodes across concurrent writes; the registry of
 * request buffers page-locked in place (reqpin.h).
 *
 * accel=cpu: always the CPU coder.  accel=gpu (or backend=cuda): every
 * operation on the GPU.  accel=auto with a usable GPU: each kind of
 * operation goes where accel=auto's router (router.h) finds it does
 * better in the running array, starting from the sizes the start-up
 * measurement found the GPU at least 10 % faster; and only while fewer
 * than 2 are on the GPU (the rest spill to the CPU cores).  A GPU failure
 * redoes the operation, and all later ones, on the CPU.
 *
 * Lifecycle: gr_coding_new at config_complete (backend chosen, GPU
 * probed in a child process), gr_coding_setup once the geometry is known
 * (CPU coder), gr_coding_start_gpu after nbdkit's fork, gr_coding_free.
 * Plugin code: errors are reported with nbdkit_error and return -1 (or
 * NULL), with errno set for request paths. */
#ifndef GPURAID_CODING_H
#define GPURAID_CODING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "plan.h"
#include "router.h"
#include "steps.h"

struct gr_coding;

struct gr_coding *gr_coding_new (const struct gr_config *cfg);
/* chunk: whole-chunk GPU encodes go through the group commit. */
int gr_coding_setup (struct gr_coding *c, int k, int m, enum gr_code code,
                     uint32_t chunk);
int gr_coding_start_gpu (struct gr_coding *c);
/* Logs the GPU counts, frees the coders, releases the GPU. */
void gr_coding_free (struct gr_coding *c);

int gr_coding_k (const struct gr_coding *c);
int gr_coding_m (const struct gr_coding *c);
/* Coding lengths must be multiples of this (every coder in use). */
uint32_t gr_coding_len_multiple (const struct gr_coding *c);
const char *gr_coding_cpu_name (const struct gr_coding *c);
/* What codes, for the status. */
struct gr_coding_info {
  const char *cpu_backend;
  bool gpu;                     /* a GPU coder (or a test stand-in) */
  const char *gpu_name;         /* its name, or NULL */
  int device;                   /* CUDA device, -1 for none or a stand-in */
  bool gpu_all;                 /* every operation on it (accel=gpu) */
  bool fallen_back;             /* it failed: the CPU codes everything */
  uint64_t ops_gpu, ops_spilled;        /* operations on it; sent to the
                                         * CPU because it was busy */
};
void gr_coding_info (const struct gr_coding *c, struct gr_coding_info *out);
/* accel=auto's kinds that have run (router.h): up to max into out; how
 * many have run (0 without a router that tries both sides). */
size_t gr_coding_routes (struct gr_coding *c, struct gr_route_state *out,
                         size_t max);
/* Is there a GPU coder that has not failed? */
bool gr_coding_gpu_usable (const struct gr_coding *c);
/* accel=gpu or backend=cuda (or a stand-in not routed as auto): every
 * operation on the GPU, nothing to measure. */
bool gr_coding_gpu_all (const struct gr_coding *c);
/* The GPU gave wrong bytes: code on the CPU only from now on. */
void gr_coding_gpu_off (struct gr_coding *c);

/* accel=auto's start-up thresholds: data bytes per operation from which
 * the GPU is used (SIZE_MAX: never), per kind; adaptive: the router tries
 * both sides while running (router.h), unless -D gpuraid.adaptive=0. */
void gr_coding_set_gpu_from (struct gr_coding *c,
                             const size_t from[GR_ROUTE_NKINDS],
                             bool adaptive);
/* Where an operation of `bytes` data bytes (nerased lost) runs: true for
 * the GPU.  arg is the struct gr_coding (plan.h's route callback). */
bool gr_coding_route (void *arg, enum gr_op op, size_t bytes, int nerased);

/* One operation on the GPU coder if gpu (and it is still usable and has
 * room), else on the CPU coder.  0, or -1 with errno EIO.  cksums, if not
 * NULL: the block checksums of the stripes' blocks as coded, as
 * gr_code_op's (gf.h), filled on success (by the GPU where it can). */
int gr_coding_encode (struct gr_coding *c, bool gpu, uint8_t *const *blocks,
                      size_t nstripes, size_t len, uint32_t *cksums);
/* The same encode begun and not waited for, where it goes through the
 * group commit (on the GPU, of whole chunks): queued with the other
 * writers' (coding-batch.c); NULL where it does not (encode it with
 * gr_coding_encode).  Then waited for (and redone on the CPU if the GPU
 * failed), e freed: 0, or -1 with errno EIO.  A thread may have several
 * begun; waiting for the first leads their batch if none has taken them
 * yet. */
struct gr_coding_enc;
struct gr_coding_enc *gr_coding_encode_begin (struct gr_coding *c, bool gpu,
                                              uint8_t *const *blocks,
                                              size_t nstripes, size_t len,
                                              uint32_t *cksums);
int gr_coding_encode_end (struct gr_coding *c, struct gr_coding_enc *e);
int gr_coding_reconstruct (struct gr_coding *c, bool gpu, const int *erased,
                           int nerased, uint8_t *const *blocks, size_t len);
/* The same for nstripes stripes of one erasure pattern (blocks: nstripes
 * * (k + m) pointers, stripe after stripe). */
int gr_coding_reconstruct_n (struct gr_coding *c, bool gpu,
                             const int *erased, int nerased,
                             uint8_t *const *blocks, size_t nstripes,
                             size_t len);
/* parity[j] ^= G[j][index + i] * delta[i] for i < count (the data
 * chunks a read-modify-write changes, one after another); pdelta: m
 * blocks of scratch the GPU computes into first (one encode of all the
 * deltas), so that a failure half-way leaves parity whole. */
int gr_coding_update (struct gr_coding *c, bool gpu, int index, int count,
                      const uint8_t *const *delta, uint8_t *const *parity,
                      uint8_t *const *pdelta, size_t len);
/* The three above as a plan's coder (plan.h). */
struct gr_plan_coder gr_coding_plan_coder (struct gr_coding *c);

/* A write request enters or leaves (the group commit waits for writers
 * that have not queued yet). */
void gr_coding_writer_enter (struct gr_coding *c);
void gr_coding_writer_leave (struct gr_coding *c);

/* A request owns buffer [buf, buf + len) (nbdkit's, of this thread)
 * until gr_coding_request_end: true if it is page-locked in place for
 * the GPU meanwhile (reqpin.h), so that the plan may put GPU blocks in
 * it.  False without a GPU, for small buffers, beyond the bound or if
 * page-locking fails (staged; said once). */
bool gr_coding_request_begin (struct gr_coding *c, void *buf, size_t len);
/* After a true gr_coding_request_begin, once no coding uses the buffer. */
void gr_coding_request_end (struct gr_coding *c);

/* Page-locked memory (for scratch.h, and the start-up measurement), or
 * NULL when no GPU is in use. */
void *gr_coding_host_alloc (struct gr_coding *c, size_t size);
void gr_coding_host_free (struct gr_coding *c, void *p);

#endif /* GPURAID_CODING_H */
