/* gpuraid - resync after an unclean shutdown.
 *
 * The parity of every stripe is recomputed from its data and the parity
 * chunks that differ are rewritten (md's resync), as resync plans
 * (plan.h) run by the executor, a batch of stripes at a time.  Run at
 * start-up, before any request, on a dirty array with every member:
 * stripes being written at the crash may have new data with old parity
 * (the write hole), and a later degraded read would rebuild wrong data
 * from them.  Progress is logged every 10 % (nbdkit -v). */
#ifndef GPURAID_RESYNC_H
#define GPURAID_RESYNC_H

#include "exec.h"

/* 0, or -1 after nbdkit_error (an I/O error: the caller refuses to
 * start; no member is failed for it). */
int gr_resync (struct gr_exec *x);

#endif /* GPURAID_RESYNC_H */
