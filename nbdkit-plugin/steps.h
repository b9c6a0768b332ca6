/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - running a plan's steps in memory.
 *
 * The moves (zero, copy, XOR) and coding operations of a plan (plan.h),
 * in order, on the plan's buffers: the part of running a plan that does
 * no I/O, shared by the executor (exec.h) and test-plan's simulated
 * executor.  The coding goes through a table of callbacks, so that the
 * executor routes it (coding.h) and the test uses a plain CPU coder. */
#ifndef GPURAID_STEPS_H
#define GPURAID_STEPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gf/gf.h"
#include "plan.h"

struct gr_pool;

/* A plan with room for geometry g (its arrays, used here); NULL if out
 * of memory. */
struct gr_plan *gr_plan_new (const struct gr_geom *g);
/* A plan with room for a job's batch of up to max_stripes stripes as
 * well (plan.h: gr_plan_fits); NULL if out of memory. */
struct gr_plan *gr_plan_new_batch (const struct gr_geom *g,
                                   uint64_t max_stripes);
void gr_plan_free (struct gr_plan *p);

/* The buffers of a plan being run: the request's (at the plan's first
 * byte), scratch (scratch_len bytes), zeros (at least a chunk) and a
 * joined write's other part (plan.h: GR_SPACE_PEER). */
struct gr_bufs {
  uint8_t *req;
  uint8_t *scratch;
  const uint8_t *zero;
  uint8_t *peer;                /* a joined write's other part */
};

/* Where a plan's location is in memory. */
static inline uint8_t *
gr_steps_at (const struct gr_bufs *b, struct gr_loc l)
{
  if (l.space == GR_SPACE_ZERO)
    return (uint8_t *) b->zero;         /* any offset: zeros */
  if (l.space == GR_SPACE_NONE)
    return NULL;
  return (l.space == GR_SPACE_REQ ? b->req : l.space == GR_SPACE_PEER
          ? b->peer : b->scratch) + l.off;
}

/* One copy of a plan's copies by the GPU (host_copy, below). */
struct gr_copy_row {
  void *dst;
  const void *src;
  size_t len;
};

/* The coding operations a plan's steps call: 0, or -1 with errno set. */
struct gr_plan_coder {
  int (*encode) (void *arg, bool gpu, uint8_t *const *blocks,
                 size_t nstripes, size_t len);
  int (*reconstruct) (void *arg, bool gpu, const int *erased, int nerased,
                      uint8_t *const *blocks, size_t nstripes, size_t len);
  /* parity ^= G[.][index + i] * delta[i] for i < count; pdelta: m blocks
   * of scratch (coding.h: gr_coding_update). */
  int (*update) (void *arg, bool gpu, int index, int count,
                 const uint8_t *const *delta, uint8_t *const *parity,
                 uint8_t *const *pdelta, size_t len);
  /* Optional: a request's GPU coding steps (no pool), or a rebuild's
   * batch's summed (below), one or several independent ones that follow
   * one another (a degraded read's stripes, a batch's erasure
   * patterns), in one call (one submission, one wait); NULL: each step
   * through encode or reconstruct. */
  int (*many) (void *arg, bool gpu, const struct gr_code_op *ops,
               size_t nops);
  /* Optional: the copies of a run of COPY steps marked gpu (plan.h), by
   * the GPU; false where they were not made (no GPU, an end not
   * page-locked), and then memcpy makes them.  NULL: memcpy. */
  bool (*host_copy) (void *arg, const struct gr_copy_row *rows, size_t n);
  /* Optional: a GPU encode begun without waiting (NULL where it cannot
   * be: coding.h gr_coding_encode_begin), and waited for (0 or -1). */
  void *(*encode_begin) (void *arg, uint8_t *const *blocks, size_t nstripes,
                         size_t len, uint32_t *cksums);
  int (*encode_end) (void *arg, void *e);
  void *arg;
  /* The threads a CPU coding step of several stripes is split over
   * (pool.h; NULL: the calling thread alone); a step on the GPU is never
   * split. */
  struct gr_pool *pool;
  /* A plan of GPU coding steps alone (a request's, with no pool, or a
   * rebuild's batch) asks them for the checksums of its blocks
   * (gr_code_op's cksums, into the plan's bsum), so that the executor
   * sets those of its writes, and verifies those of its reads, without
   * reading the blocks again. */
  bool sums;
};

/* Would the coding of p, given sums, compute the checksums of the blocks
 * it reads (a plan of GPU coding steps alone with a reconstruct: a
 * degraded read, a rebuild's batch), so that they can be verified after
 * it? */
bool gr_steps_sums_reads (const struct gr_plan *p);

/* d ^= s over len bytes (the XOR move). */
void gr_steps_xor (uint8_t *d, const uint8_t *s, size_t len);

/* Run p's steps in order on the buffers b (after its reads, before its
 * writes); VERIFY's verdicts into p->verdict.  0, or -1 with errno set
 * by a failed coding operation. */
int gr_steps_run (struct gr_plan *p, const struct gr_geom *g,
                  const struct gr_bufs *b, const struct gr_plan_coder *cd);

/* The same begun without waiting, where p's steps are one encode on the
 * GPU that the coder can begin (cd->encode_begin): its blocks, and their
 * checksums where it sums them, as gr_steps_run sets them; the encode
 * begun, or NULL (nothing begun: run p with gr_steps_run).  Then waited
 * for: 0, or -1 with errno set. */
void *gr_steps_begin (struct gr_plan *p, const struct gr_geom *g,
                      const struct gr_bufs *b, const struct gr_plan_coder *cd);
int gr_steps_end (const struct gr_plan_coder *cd, void *e);

#endif /* GPURAID_STEPS_H */
