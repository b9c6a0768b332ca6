/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the executor: runs a plan (plan.h) on the members.
 *
 * For a plan it takes the stripe locks the plan asks for (writes hold
 * their stripes exclusively, degraded reads shared, healthy reads none;
 * a plan without reads locks only around its writes), checks that the
 * member snapshot the plan was made from is still current, submits the
 * plan's reads together (members.h: io_uring where there are several),
 * runs its steps on the coder each step was routed to (coding.h), then
 * submits its writes together.  A read error fails the member and the
 * plan is made again without it; a write error fails the member and the
 * other writes go on, so the live members still hold one consistent
 * codeword in which the failed member's chunk is simply erased.
 *
 * One owner: struct gr_exec holds the stripe lock table, the zero buffer
 * and each thread's plan and I/O vectors. */
#ifndef GPURAID_EXEC_H
#define GPURAID_EXEC_H

#include <stdbool.h>
#include <stdint.h>

#include "coding.h"
#include "members.h"
#include "plan.h"

struct gr_bitmap;
struct gr_exec;
struct gr_journal;
struct gr_scratch;

/* Where an executor keeps what it needs beside the members. */
struct gr_exec_parts {
  struct gr_coding *coding;     /* where coding runs */
  struct gr_journal *journal;   /* may be NULL: where the writes of a
                                 * degraded array are journaled first */
  struct gr_scratch *scratch;   /* the plans' buffers */
  struct gr_bitmap *bitmap;     /* may be NULL: regions marked before
                                 * writes; a rebuild from a pending
                                 * region's parity is refused (EIO) */
};

/* NULL after nbdkit_error. */
struct gr_exec *gr_exec_new (const struct gr_geom *g, struct gr_members *ms,
                             const struct gr_exec_parts *parts);
void gr_exec_free (struct gr_exec *x);

const struct gr_geom *gr_exec_geom (const struct gr_exec *x);
struct gr_members *gr_exec_members (const struct gr_exec *x);
struct gr_coding *gr_exec_coding (const struct gr_exec *x);

/* The clients' requests: io.h counts each; the background jobs yield
 * to them (pace.h: GR_PACE_AUTO watches the counter). */
void gr_exec_count_request (struct gr_exec *x);
const uint64_t *gr_exec_requests (const struct gr_exec *x);

/* The calling thread's plan (made on first use, freed with the thread).
 * NULL after nbdkit_error (errno ENOMEM). */
struct gr_plan *gr_exec_plan (struct gr_exec *x);

/* A member snapshot that plans are made from (the caller's storage). */
struct gr_exec_snap {
  bool failed[GR_MAX_MEMBERS];
  uint64_t front[GR_MAX_MEMBERS];       /* replacements' fronts */
};
/* The context plans are made in now: a fresh member snapshot into sn,
 * the fallocate modes, the coding route. */
void gr_exec_plan_ctx (struct gr_exec *x, struct gr_exec_snap *sn,
                       struct gr_plan_ctx *c);

enum gr_exec_outcome {
  GR_EXEC_DONE,
  GR_EXEC_REPLAN,               /* a member failed (or had failed since
                                 * the plan was made): plan again */
  GR_EXEC_UNSUPPORTED,          /* a member refused the fallocate mode
                                 * (now known): plan again; the range may
                                 * be partly zeroed */
  GR_EXEC_ERROR,                /* errno set, after nbdkit_error */
};

/* What a run did. */
struct gr_exec_result {
  bool touched[GR_MAX_MEMBERS]; /* members written (for FUA): or-ed in */
  uint64_t rewritten;           /* GR_IO_WRITE_CHANGED writes done */
};

/* Run plan p; req is the request's buffer at the plan's first byte
 * (NULL if the plan has no request space).  policy: what a member error
 * does (members.h); with GR_MIO_REPORT an error ends the run with
 * GR_EXEC_ERROR instead of failing the member. */
enum gr_exec_outcome gr_exec_run (struct gr_exec *x, struct gr_plan *p,
                                  uint8_t *req, enum gr_mio_policy policy,
                                  struct gr_exec_result *res);

/* Hold stripes [s0, s0 + ns) against plans, in mode GR_LOCK_SHARED
 * (plans that write wait) or GR_LOCK_EXCL (all but healthy reads wait),
 * as a background job that does its own I/O (scrub.h). */
void gr_exec_lock (struct gr_exec *x, uint64_t s0, uint64_t ns,
                   enum gr_lock_mode mode);
void gr_exec_unlock (struct gr_exec *x, uint64_t s0, uint64_t ns);

/* A rebuild's batch: the members in which[] (being rebuilt, members.h)
 * rebuilt on stripes [s0, s0 + ns), each where its front is not past the
 * stripe, in steps, so that a pass can read one batch while it codes the
 * one before and writes the one before that (rebuild.h).  The thread
 * that locks a batch does all its steps; batches of a pass must be
 * locked and written in stripe order.  buf: max_ns * (k + m) chunks of
 * scratch.  NULL after nbdkit_error. */
struct gr_exec_rbatch;
struct gr_exec_rbatch *gr_exec_rbatch_new (struct gr_exec *x, uint64_t max_ns,
                                           uint8_t *buf);
void gr_exec_rbatch_free (struct gr_exec_rbatch *b);
/* Hold its stripes exclusively (until the write step); ns <= max_ns. */
void gr_exec_rebuild_lock (struct gr_exec_rbatch *b, uint64_t s0,
                           uint64_t ns);
/* Read k survivors of each stripe.  GR_EXEC_REPLAN if a survivor failed
 * (read again: it plans without it) or more than m are lost,
 * GR_EXEC_ERROR (errno) if the stripes' parity is not resynced. */
enum gr_exec_outcome gr_exec_rebuild_read (struct gr_exec_rbatch *b,
                                           const bool *which);
/* Reconstruct the members' chunks: one coding operation per erasure
 * pattern.  GR_EXEC_ERROR (errno) if the coding failed. */
enum gr_exec_outcome gr_exec_rebuild_code (struct gr_exec_rbatch *b);
/* If coded: write the chunks and move the fronts past them (a
 * replacement whose write fails is no longer being rebuilt, members.h,
 * and its front stays; the others go on).  Then unlock, coded or not. */
void gr_exec_rebuild_write (struct gr_exec_rbatch *b, bool coded);

#endif /* GPURAID_EXEC_H */
