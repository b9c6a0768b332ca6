/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the executor: runs a plan (plan.h) on the members, a
 * request's one at a time, a background job's batches in lanes.
 *
 * For a plan it takes the stripe locks the plan asks for (writes hold
 * their stripes exclusively, degraded reads shared, healthy reads none;
 * a plan without reads locks only around its writes), checks that the
 * member snapshot the plan was made from is still current, submits the
 * plan's reads together (members.h: io_uring where there are several),
 * runs its steps on the coder each step was routed to (coding.h), then
 * submits its writes together.  A read error fails the member and the
 * plan is made again without it; a block read that fails its checksum
 * (cksum.h) is repaired (rebuilt from the stripe's other chunks, which
 * must pass theirs, and rewritten, the member's count of checksum errors
 * raised) and the plan made again; a write error fails the member and the
 * other writes go on, so the live members still hold one consistent
 * codeword in which the failed member's chunk is simply erased.
 *
 * Only the executor (and the start-up measurement, calibrate.h) calls
 * the coding module's operations: requests, rebuilds, scrubs, the
 * resync and the journal's replay all code through plans.
 *
 * One owner: struct gr_exec holds the stripe lock table, the zero buffer
 * and each thread's plan and I/O vectors; struct gr_exec_lanes a job's
 * lanes (exec-lanes.c). */
#ifndef GPURAID_EXEC_H
#define GPURAID_EXEC_H

#include <stdbool.h>
#include <stdint.h>

#include "coding.h"
#include "members.h"
#include "plan.h"

struct gr_bitmap;
struct gr_cksum;
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
  struct gr_cksum *cksum;       /* may be NULL: the block checksums, set
                                 * by every write and verified on every
                                 * read (a block that fails is rebuilt
                                 * from the others and rewritten) */
  struct gr_join *join;         /* may be NULL: concurrent writes' parts
                                 * of a stripe joined (join.h) */
};

/* NULL after nbdkit_error. */
struct gr_exec *gr_exec_new (const struct gr_geom *g, struct gr_members *ms,
                             const struct gr_exec_parts *parts);
void gr_exec_free (struct gr_exec *x);

const struct gr_geom *gr_exec_geom (const struct gr_exec *x);
struct gr_members *gr_exec_members (const struct gr_exec *x);
struct gr_coding *gr_exec_coding (const struct gr_exec *x);
struct gr_cksum *gr_exec_cksum (const struct gr_exec *x);   /* or NULL */
struct gr_join *gr_exec_join (const struct gr_exec *x);     /* or NULL */

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

/* A row (the same 4 KiB of every chunk of a stripe: bytes [lo, lo +
 * 4096) of its chunks) where a block failed its checksum with too few good
 * chunks left to rebuild it. */
struct gr_exec_row {
  uint64_t stripe;
  uint32_t lo;
};
#define GR_EXEC_ROWS 64

/* What a run did. */
struct gr_exec_result {
  bool touched[GR_MAX_MEMBERS]; /* members written (for FUA): or-ed in */
  uint64_t rewritten;           /* GR_IO_WRITE_CHANGED writes done */
  uint64_t repaired;            /* blocks that failed their checksums,
                                 * rebuilt and rewritten */
  uint64_t unrecoverable;       /* such blocks that could not be */
  /* The rows of those that a job's batch went on over
   * (go_on_unrecoverable): what it wrote there is marked unreadable. */
  struct gr_exec_row rows[GR_EXEC_ROWS];
  size_t nrows;
};

/* Run plan p; req is the request's buffer at the plan's first byte
 * (NULL if the plan has no request space), peer a joined write's other
 * part (GR_SPACE_PEER; else NULL).  policy: what a member error
 * does (members.h); with GR_MIO_REPORT an error ends the run with
 * GR_EXEC_ERROR instead of failing the member. */
enum gr_exec_outcome gr_exec_run (struct gr_exec *x, struct gr_plan *p,
                                  uint8_t *req, uint8_t *peer,
                                  enum gr_mio_policy policy,
                                  struct gr_exec_result *res);

/* --- a request's plans begun together ---------------------------------- */

/* A request whose plans read nothing (its whole stripes, the stripes it
 * joins: join.h) begins them (their encodes queued in the group commit,
 * coding.h) before it runs its others, so that their encodes go to the
 * GPU in one batch and it waits once; then it finishes them (each
 * waited for, then written as gr_exec_run writes).  A plan begun holds
 * no stripe (a plan without reads locks only around its writes), only
 * its buffers; a thread has at most GR_EXEC_BEGUN_MAX begun, each in a
 * plan of its own. */
#define GR_EXEC_BEGUN_MAX 3

struct gr_exec_begun {
  struct gr_plan *p;
  uint8_t *req, *peer;          /* as gr_exec_run's */
  uint8_t *scratch;             /* its region (scratch.h) */
  void *enc;                    /* its encode (steps.h) */
};

/* The calling thread's plan for begun plans in slot (0 ..
 * GR_EXEC_BEGUN_MAX - 1), made on first use.  NULL after nbdkit_error. */
struct gr_plan *gr_exec_begun_plan (struct gr_exec *x, int slot);

/* Begin p (slot's plan; req and peer as gr_exec_run's) into *bg: where
 * it is a write of whole stripes (full or joined) that reads nothing and
 * codes by one GPU encode of whole chunks that goes through the group
 * commit; true, and gr_exec_finish must follow.  Else false, nothing
 * done: run p with gr_exec_run. */
bool gr_exec_begin (struct gr_exec *x, struct gr_plan *p, int slot,
                    uint8_t *req, uint8_t *peer, struct gr_exec_begun *bg);

/* A begun plan's encode waited for, then its writes, its stripes held
 * around them: as gr_exec_run (REPLAN: run it again with gr_exec_run). */
enum gr_exec_outcome gr_exec_finish (struct gr_exec *x,
                                     struct gr_exec_begun *bg,
                                     enum gr_mio_policy policy,
                                     struct gr_exec_result *res);

/* Read every live chunk of stripes [s0, s0 + ns) and verify their block
 * checksums, repairing those that fail (as any read does): DONE,
 * UNSUPPORTED (no chunk of redundancy left to check against: nothing
 * read) or ERROR. */
enum gr_exec_outcome gr_exec_verify_stripes (struct gr_exec *x, uint64_t s0,
                                             uint64_t ns);

/* Wait until the member writes of every plan that is not journaled and
 * has begun writing are done.  From the moment a member has failed, a
 * request's or the resync's plan that is not journaled (made before the
 * failure) does not begin writing: it is made again, journaled (plan.h).
 * So once this returns after a member failed, every write in flight is
 * journaled (members.h: gr_members_journaled). */
void gr_exec_journal_drain (struct gr_exec *x);

/* --- a background job's batches, in lanes ------------------------------ */

/* Batches in flight, each on its own thread (a lane): one is read while
 * the one before is coded and the one before that is written. */
#define GR_EXEC_LANES 3

/* What a job does with its batches (job.h runs the jobs). */
struct gr_exec_batches {
  enum gr_lock_mode lock;       /* a batch's stripes are held so */
  enum gr_mio_policy policy;
  /* A block that fails its checksum and cannot be repaired (too few good
   * chunks left) does not fail the batch (up to GR_EXEC_ROWS rows of such
   * blocks): it is counted (unrecoverable), the batch goes on with what
   * was read, and every block the batch writes in that row is marked
   * unreadable (its checksum made wrong: reads of it answer EIO), never
   * trusted (a scrub, whose check then reports the stripe; a rebuild,
   * whose replacement holds no wrong data in that row). */
  bool go_on_unrecoverable;
  /* Plan batch [s0, s0 + ns) into p (made with gr_plan_new_batch for
   * the largest batch), its stripes held, from context c (made now).
   * GR_PLAN_SKIP: nothing to do; GR_PLAN_REFUSE: the batch fails. */
  enum gr_plan_kind (*plan) (void *arg, const struct gr_plan_ctx *c,
                             uint64_t s0, uint64_t ns, struct gr_plan *p);
  /* Batch p ran (outcome o; GR_EXEC_ERROR for a refused plan, whose
   * kind is then GR_PLAN_REFUSE): called in batch order, once its
   * writes are done and its stripes released. */
  void (*done) (void *arg, const struct gr_plan *p, enum gr_exec_outcome o,
                const struct gr_exec_result *res);
  void *arg;
};

/* Lanes that run batches of up to max_ns stripes through the stages
 * (exec.c): the locks, the coding and the start of the writes taken in
 * batch order, one batch at a time each (batches never wait for each
 * other's locks out of order; a batch's coding on the CPU is split by
 * stripes over every core, on the GPU it is one operation); the writes
 * of several batches overlap, and each batch ends in batch order (a
 * rebuild's fronts moved, its stripes released, done); a batch whose
 * plan meets a failed member is planned again, its stripes still held.
 * After a batch that failed, none begins writing, and one writing then
 * ends failed (done again from the job's position).  Each lane's
 * buffer: scratch bytes, page-locked where a GPU codes.  NULL after
 * nbdkit_error. */
struct gr_exec_lanes;
struct gr_exec_lanes *gr_exec_lanes_new (struct gr_exec *x,
                                         const struct gr_exec_batches *ops,
                                         uint64_t max_ns, size_t scratch);
/* Give out batch [s0, s0 + ns) (ns <= max_ns), once a lane is free.
 * false if the batch that lane ran last failed (this one is not given
 * out). */
bool gr_exec_lanes_submit (struct gr_exec_lanes *l, uint64_t s0,
                           uint64_t ns);
/* Wait for every batch given out; false if one failed since the last
 * drain. */
bool gr_exec_lanes_drain (struct gr_exec_lanes *l);
/* Seconds the lanes have spent reading, coding and writing (summed). */
void gr_exec_lanes_busy (struct gr_exec_lanes *l, double busy[3]);
/* Drain and stop the lanes, free them. */
void gr_exec_lanes_free (struct gr_exec_lanes *l);

#endif /* GPURAID_EXEC_H */
