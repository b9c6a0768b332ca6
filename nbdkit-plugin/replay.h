/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - replaying the write journal at start-up (journal.h).
 *
 * On a dirty degraded array, the latest entry of every journal slot is
 * replayed as a plan (plan.h: gr_plan_replay) run by the executor: the
 * parity of its stripe over its coding range recomputed from the live
 * data chunks and the journaled lost ones, which makes the stripe one
 * codeword again whatever part of the write reached the members; a
 * journaled chunk is written too where its member is live again (the
 * rebuilt part of a replacement).  Then every member is synced.  Errors
 * are reported, not failed members: the start is refused instead. */
#ifndef GPURAID_REPLAY_H
#define GPURAID_REPLAY_H

#include "exec.h"
#include "journal.h"

enum gr_replay_outcome {
  GR_REPLAY_DONE,               /* every entry replayed */
  GR_REPLAY_PARTLY,             /* some could not be (logged) */
  GR_REPLAY_FAILED,             /* an I/O error: after nbdkit_error */
};

/* *nreplayed gets the count. */
enum gr_replay_outcome gr_replay_journal (struct gr_exec *x,
                                          struct gr_journal *j,
                                          unsigned *nreplayed);

#endif /* GPURAID_REPLAY_H */
