/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the executor's state and stages, shared by its two files
 * (exec.c: running one plan; exec-lanes.c: a job's batches in lanes).
 * Nothing else includes it; include exec.h first. */
#ifndef GPURAID_EXEC_INTERNAL_H
#define GPURAID_EXEC_INTERNAL_H

#include <pthread.h>

#include "steps.h"

#define NLOCKS 1024                     /* stripe lock table size */

struct gr_exec {
  struct gr_geom g;
  struct gr_members *ms;
  struct gr_coding *coding;
  struct gr_journal *journal;           /* none: NULL or no slots */
  struct gr_scratch *scratch;
  struct gr_bitmap *bitmap;             /* may be NULL */
  pthread_rwlock_t locks[NLOCKS];
  pthread_rwlock_t unjournaled;         /* held (read) by the member writes
                                         * of a plan that is not journaled
                                         * (gr_exec_journal_drain) */
  uint8_t *zero;                        /* a chunk of zeros */
  pthread_key_t work_key;
  uint64_t requests;                    /* atomic: the clients' */
};

/* Hold (release) plan p's stripes in its lock mode (table order). */
void gr_exec_lock_plan (struct gr_exec *x, const struct gr_plan *p);
void gr_exec_unlock_plan (struct gr_exec *x, const struct gr_plan *p);

/* The stages of a plan, in this order, on its buffers b; mio: room for
 * p->cap_io accesses.  Read: REPLAN if a member failed since the plan
 * was made (its stripes held) or during its reads (with GR_MIO_REPORT:
 * ERROR), ERROR (EIO) if it would rebuild from parity not resynced.
 * Code: its steps, a CPU coding step of several stripes split over
 * `threads` threads (ERROR: a coding failure).  Write: its writes (the
 * bitmap marked, the journal written first where it says so; a
 * rebuild's fronts moved). */
enum gr_exec_outcome gr_exec_read_stage (struct gr_exec *x,
                                         const struct gr_plan *p,
                                         const struct gr_bufs *b,
                                         struct gr_mio *mio,
                                         enum gr_mio_policy policy);
enum gr_exec_outcome gr_exec_code_stage (struct gr_exec *x,
                                         struct gr_plan *p,
                                         const struct gr_bufs *b,
                                         int threads);
enum gr_exec_outcome gr_exec_write_stage (struct gr_exec *x,
                                          struct gr_plan *p,
                                          const struct gr_bufs *b,
                                          struct gr_mio *mio,
                                          enum gr_mio_policy policy,
                                          struct gr_exec_result *res);

#endif /* GPURAID_EXEC_INTERNAL_H */
