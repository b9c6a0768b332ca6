/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - resync after an unclean shutdown, in the background.
 *
 * After a crash, stripes being written may have new data with old parity
 * (the write hole), and a later degraded read would rebuild wrong data
 * from them.  The regions the write-intent bitmap holds pending
 * (bitmap.h) are resynced while the array serves requests: the parity of
 * each of their stripes is recomputed from its data and the parity chunks
 * that differ are rewritten (md's resync), as a job (job.h) whose
 * batches are resync plans (plan.h) run by the executor's lanes under
 * the stripe locks, at most rate bytes of array data a second.  Progress is logged every
 * 10 % (nbdkit -v) and the end once.  A member lost during the resync
 * stops it: the regions left stay pending (a rebuild from their parity is
 * refused), and the array stays dirty.
 *
 * One owner: struct gr_resync holds its job and its counts. */
#ifndef GPURAID_RESYNC_H
#define GPURAID_RESYNC_H

#include <stdbool.h>
#include <stdint.h>

#include "bitmap.h"
#include "exec.h"
#include "job.h"

struct gr_resync;

/* Start resyncing the pending regions of b (in the server process).
 * rate: bytes of array data a second, 0 for no limit.  NULL after
 * nbdkit_error. */
struct gr_resync *gr_resync_start (struct gr_exec *x, struct gr_bitmap *b,
                                   uint64_t rate);

/* A new limit (bytes of array data a second, 0: none), from now on. */
void gr_resync_set_rate (struct gr_resync *rs, uint64_t rate);

void gr_resync_progress (struct gr_resync *rs,
                         struct gr_progress *out);

/* Stop it (at shutdown) and wait for it.  true when every pending region
 * was resynced. */
bool gr_resync_stop (struct gr_resync *rs);

#endif /* GPURAID_RESYNC_H */
