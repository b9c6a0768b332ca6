/* gpuraid - rebuilding a failed member onto a replacement, online.
 *
 * The replacement (members.h: gr_members_rebuild_begin) is filled stripe
 * by stripe from the first k survivors of each stripe, in batches of
 * stripes held exclusively (exec.h: gr_exec_rebuild; one coding
 * operation per erasure pattern of a batch, in a page-locked buffer
 * where a GPU codes; a tenth of a second's worth under a rate limit),
 * while the array serves requests: below the rebuild's front the
 * replacement is read and written like a live member, above it the
 * member is lost.  At most rate
 * bytes of array data a second; progress logged every 10 % (nbdkit -v).
 * At the end the replacement is synced and the member is live again,
 * recorded on every superblock.  Every second, and at a shutdown, the
 * stripes done are synced on the replacement and recorded as its
 * checkpoint in the members' superblocks (members.h): a start with the
 * replacement in place, after a shutdown or a crash, resumes from there.
 * The replacement failing, or more than m members lost, stops it: the
 * member stays failed, the rebuild forgotten (replace again).
 *
 * One owner: struct gr_rebuild holds the thread, its buffers and its
 * progress. */
#ifndef GPURAID_REBUILD_H
#define GPURAID_REBUILD_H

#include <stdint.h>

#include "bitmap.h"
#include "exec.h"
#include "resync.h"

struct gr_rebuild;

/* Rebuild member (already begun or resumed in members.h) from stripe
 * from.  NULL after nbdkit_error (the member's rebuild is then paused:
 * still failed, resumed at the next start). */
struct gr_rebuild *gr_rebuild_start (struct gr_exec *x,
                                     struct gr_bitmap *b, int member,
                                     uint64_t from, uint64_t rate);
/* Its progress, in the resync's terms (state, bytes of array data). */
void gr_rebuild_progress (struct gr_rebuild *rb,
                          struct gr_resync_progress *out);
int gr_rebuild_member (const struct gr_rebuild *rb);
void gr_rebuild_set_rate (struct gr_rebuild *rb, uint64_t rate);
/* Stop it and wait (a finished one is just freed). */
void gr_rebuild_stop (struct gr_rebuild *rb);

#endif /* GPURAID_REBUILD_H */
