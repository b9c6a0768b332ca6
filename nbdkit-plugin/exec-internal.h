/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the executor's state and stages, shared by its files
 * (exec.c: running one plan; exec-lanes.c: a job's batches in lanes;
 * exec-cksum.c, exec-repair.c, exec-times.c).
 * Nothing else includes it; include exec.h first. */
#ifndef GPURAID_EXEC_INTERNAL_H
#define GPURAID_EXEC_INTERNAL_H

#include <pthread.h>

#include "common/now.h"

#include "steps.h"

struct gr_pool;

#define NLOCKS 1024                     /* stripe lock table size */

/* The stages of a plan that gr_exec_run times (reads: their
 * verification included). */
enum gr_exec_stage { GR_EXEC_LOCK, GR_EXEC_READ, GR_EXEC_CODE,
                     GR_EXEC_WRITE, GR_EXEC_NSTAGES };

struct gr_exec {
  struct gr_geom g;
  struct gr_members *ms;
  struct gr_coding *coding;
  struct gr_journal *journal;           /* none: NULL or no slots */
  struct gr_scratch *scratch;
  struct gr_join *join;                 /* or NULL */
  struct gr_bitmap *bitmap;             /* may be NULL */
  struct gr_cksum *cksum;               /* may be NULL */
  pthread_rwlock_t locks[NLOCKS];
  pthread_rwlock_t unjournaled;         /* held (read) by the member writes
                                         * of a plan that is not journaled
                                         * (gr_exec_journal_drain) */
  uint8_t *zero;                        /* a chunk of zeros */
  pthread_key_t work_key;
  uint64_t requests;                    /* atomic: the clients' */
  uint64_t sums_given;                  /* atomic: writes whose block
                                         * checksums came with their
                                         * coding (gpu_sums) */
  uint64_t sums_read;                   /* atomic: reads verified against
                                         * the checksums their coding
                                         * computed (gpu_sums) */
  uint64_t begun;                       /* atomic: plans begun and finished
                                         * (gr_exec_begin) */
  int sums_wrong;                       /* atomic: the GPU's were found
                                         * wrong (said once) */
  struct gr_exec_times {                /* atomic: plans run or finished */
    uint64_t plans, ns[GR_EXEC_NSTAGES];
  } times[GR_PLAN_REFUSE + 1];          /* by plan kind */
};

/* Each thread's plans (its own, and those it has begun: gr_exec_begin)
 * and the member I/O vector their reads and writes go through
 * (exec-work.c). */
struct gr_exec_work {
  struct gr_plan *plan;
  struct gr_plan *begun[GR_EXEC_BEGUN_MAX];     /* made on first use */
  struct gr_mio *mio;
  size_t cap;                   /* of mio */
};
/* The calling thread's work, its I/O vector with room for plan p's
 * accesses (NULL: the thread's own plan); NULL after nbdkit_error
 * (errno ENOMEM).  Freed with the thread (the key's destructor). */
struct gr_exec_work *gr_exec_work (struct gr_exec *x, const struct gr_plan *p);
void gr_exec_work_free (void *w);

/* Where gr_exec_run's plans spend their time (exec-times.c): seconds in
 * each stage (enum gr_exec_stage), added to the account of the plan's
 * kind; the account logged (at exit). */
void gr_exec_times_add (struct gr_exec *x, enum gr_plan_kind kind,
                        const double s[GR_EXEC_NSTAGES]);
void gr_exec_times_log (const struct gr_exec *x);
/* Seconds since *t, which moves to now. */
static inline double
gr_exec_lap (double *t)
{
  const double now = gr_now ();
  const double d = now - *t;

  *t = now;
  return d;
}

/* Hold (release) plan p's stripes in its lock mode (table order). */
void gr_exec_lock_plan (struct gr_exec *x, const struct gr_plan *p);
void gr_exec_unlock_plan (struct gr_exec *x, const struct gr_plan *p);

/* A block read that failed its checksum. */
struct gr_exec_bad {
  int member;                   /* -1: none */
  uint64_t off;
  uint64_t len;                 /* 0: the block at off failed its
                                 * checksum; else a read of [off, off +
                                 * len) failed (GR_MIO_READ_ERROR) */
  const struct gr_exec_result *skip;    /* may be NULL: its rows are
                                 * passed over (known past repair) */
  bool after_coding;            /* the read stage leaves the checksums
                                 * of the reads to be verified after
                                 * the coding, which computes them (a
                                 * request's degraded read, a rebuild's
                                 * batch, on the GPU: exec.c,
                                 * exec-lanes.c) */
};

/* Does plan p's coding compute the checksums of the blocks it reads, to
 * verify its reads against after it (gr_exec_verify_coded), not before
 * (a plan of GPU reconstructs, summed: steps.h)? */
bool gr_exec_sums_after (const struct gr_exec *x, const struct gr_plan *p);
/* After the code stage: the reads of p (accesses mio) verified against
 * the checksums its coding computed of their blocks (a read it did not
 * sum: of its bytes): DONE, or REPLAN with bad->member (-1: a member
 * failed while its checksums were read, or the GPU's checksums proved
 * wrong and the GPU is not used again) and bad->off, as the read
 * stage. */
enum gr_exec_outcome gr_exec_verify_coded (struct gr_exec *x,
                                           const struct gr_plan *p,
                                           struct gr_mio *mio,
                                           struct gr_exec_bad *bad);

/* The stages of a plan, in this order, on its buffers b; mio: room for
 * p->cap_io accesses.  Read: REPLAN if a member failed since the plan
 * was made (its stripes held) or during its reads (with GR_MIO_REPORT:
 * ERROR), ERROR (EIO) if it would rebuild from parity not resynced;
 * REPLAN with bad->member >= 0 if a block read failed its checksum or a
 * read failed with a read error: the caller repairs it
 * (gr_exec_repair_bad) and plans again.
 * Code: its steps (ERROR: a coding failure).  Write: its writes (the
 * bitmap marked, the journal written first where it says so; a
 * rebuild's fronts moved: gr_exec_fronts_open, gr_exec_write_members,
 * then gr_exec_fronts_close but after REPLAN).  pool (pool.h; NULL: the calling thread
 * alone): the threads that verify the checksums of what is read, split
 * a CPU coding step of several stripes, and set the checksums of what
 * is written. */
enum gr_exec_outcome gr_exec_read_stage (struct gr_exec *x,
                                         const struct gr_plan *p,
                                         const struct gr_bufs *b,
                                         struct gr_mio *mio,
                                         enum gr_mio_policy policy,
                                         struct gr_pool *pool,
                                         struct gr_exec_bad *bad);
/* The coder of x's plans (gr_exec_code_stage's; pool as there). */
struct gr_plan_coder gr_exec_coder (const struct gr_exec *x,
                                    struct gr_pool *pool);
enum gr_exec_outcome gr_exec_code_stage (struct gr_exec *x,
                                         struct gr_plan *p,
                                         const struct gr_bufs *b,
                                         struct gr_pool *pool);
enum gr_exec_outcome gr_exec_write_stage (struct gr_exec *x,
                                          struct gr_plan *p,
                                          const struct gr_bufs *b,
                                          struct gr_mio *mio,
                                          enum gr_mio_policy policy,
                                          struct gr_pool *pool,
                                          struct gr_exec_result *res);
/* A plan's writes once its steps are done (gr_exec_run's, and a begun
 * plan's, exec-work.c): its stripes held first if not yet (*locked), and
 * REPLAN if it was made before a member failed; then the write stage,
 * the stages' times s (*t: the lap's start) added to its kind's account
 * when done.  Lets go of nothing. */
enum gr_exec_outcome gr_exec_write_held (struct gr_exec *x,
                                         struct gr_plan *p,
                                         const struct gr_bufs *b,
                                         struct gr_mio *mio,
                                         enum gr_mio_policy policy,
                                         struct gr_exec_result *res,
                                         double *s, double *t,
                                         bool *locked);
/* The write stage in its parts, for lanes whose writes overlap
 * (exec-lanes.c): a rebuild plan's fronts must move in batch order, its
 * stripes held.  Open: each replacement the plan writes may be written
 * up to its end (wfront; one whose rebuild has ended is left out of the
 * plan).  Close: reads may use them there (front). */
void gr_exec_fronts_open (struct gr_exec *x, struct gr_plan *p);
enum gr_exec_outcome gr_exec_write_members (struct gr_exec *x,
                                            struct gr_plan *p,
                                            const struct gr_bufs *b,
                                            struct gr_mio *mio,
                                            enum gr_mio_policy policy,
                                            struct gr_pool *pool,
                                            struct gr_exec_result *res);
void gr_exec_fronts_close (struct gr_exec *x, const struct gr_plan *p);

/* Repair what the read stage found bad (exec-repair.c): the block that
 * failed its checksum, or each block of a read that failed with a read
 * error, rebuilt from the other chunks of its row and rewritten: DONE
 * (repaired, or it passes now: a write changed it meanwhile) or ERROR
 * (EIO: too few good chunks to rebuild it from).  A rewrite that fails
 * fails the member.  held: the caller holds the stripes (a job's
 * batch), else each row is taken exclusively.  torn: the stripe may hold
 * a write torn by a crash (a journal's replay), as in a region pending a
 * resync. */
enum gr_exec_outcome gr_exec_repair_bad (struct gr_exec *x,
                                         const struct gr_exec_bad *bad,
                                         bool held, bool torn,
                                         struct gr_exec_result *res);

/* After a batch that went on over rows past repair (res->rows): every
 * block it wrote in them marked unreadable (cksum_poison). */
void gr_exec_poison_rows (struct gr_exec *x, const struct gr_plan *p,
                          const struct gr_exec_result *res);

/* exec-cksum.c.  The first block read by plan p (its accesses mio) that
 * fails its checksum, but in the rows skip lists, the reads verified on
 * pool's threads (NULL: this one): false, or true with *member and *off
 * (the member failed while its checksums were read: *member -1). */
bool gr_exec_read_bad (struct gr_exec *x, const struct gr_plan *p,
                       const struct gr_mio *mio,
                       const struct gr_exec_result *skip,
                       struct gr_pool *pool, int *member, uint64_t *off);
/* Set the checksums of the blocks of a write done (cksum: may be NULL). */
void gr_exec_cksum_written (struct gr_exec *x, const struct gr_mio *v);
/* The same for the writes done among mio[0..nw), on pool's threads. */
void gr_exec_cksum_writes (struct gr_exec *x, const struct gr_mio *mio,
                           size_t nw, struct gr_pool *pool);

#endif /* GPURAID_EXEC_INTERNAL_H */
