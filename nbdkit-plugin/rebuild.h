/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - rebuilding failed members onto replacements, online, several
 * in one pass.
 *
 * The replacements (members.h: gr_members_rebuild_begin) are filled
 * stripe by stripe from the first k survivors of each stripe, where the
 * written map (bitmap.h) says a region was ever written (elsewhere a
 * replacement's chunks are zeroed, in one fallocate where it can be); a
 * member re-added (the member itself, back) only where the degraded map
 * says a region was written since it left, the rest kept.  As a job
 * (job.h) whose batches are rebuild plans (plan.h: gr_plan_rebuild; one
 * coding operation per erasure pattern of a batch, in a lane's
 * page-locked buffer where a GPU codes; a tenth of a second's worth
 * under a rate limit) run by the executor's lanes, three in flight, while
 * the array serves requests: below a replacement's front it is read and
 * written like a live member, above it the member is lost.  A member
 * replaced while a pass runs joins it: the pass goes back to the least
 * front among them and rebuilds each member where its front is behind,
 * so all end together.  Progress logged every 10 % (nbdkit -v), and at
 * the end how long the lanes were reading, coding and writing.  At the
 * end the replacements are synced and the members are live again,
 * recorded on every superblock in one update.  Every second, and at a
 * shutdown, the replacements are synced and the least front is recorded
 * as the checkpoint in the members' superblocks (members.h): a start
 * with the replacements in place, after a shutdown or a crash, resumes
 * from there.  A replacement failing ends its member's rebuild (that
 * member stays failed, the others go on); more than m members lost stops
 * the pass.
 *
 * One owner: struct gr_rebuild holds its job and its members. */
#ifndef GPURAID_REBUILD_H
#define GPURAID_REBUILD_H

#include <stdbool.h>
#include <stdint.h>

#include "bitmap.h"
#include "exec.h"
#include "resync.h"

struct gr_rebuild;

/* Rebuild the members in which[] (already begun or resumed in
 * members.h) from stripe from.  NULL after nbdkit_error (their
 * rebuilds are then paused: still failed, resumed at the next start). */
struct gr_rebuild *gr_rebuild_start (struct gr_exec *x,
                                     struct gr_bitmap *b, const bool *which,
                                     uint64_t from, uint64_t rate);
/* Member i (begun in members.h) joins the pass.  false if the pass has
 * ended or is ending (stop it and start another). */
bool gr_rebuild_add (struct gr_rebuild *rb, int i);
/* Its progress, in the resync's terms (state, bytes of array data: the
 * position of the pass, which goes back to 0 when a member joins). */
void gr_rebuild_progress (struct gr_rebuild *rb,
                          struct gr_progress *out);
/* Its members (those still in it, or at its end) into which[i]; how
 * many. */
int gr_rebuild_members (struct gr_rebuild *rb, bool *which);
/* The stripes its batches rebuilt (decoded), and skipped (a region
 * never written, zeroed on a replacement; a re-add's region not written
 * since the member left, kept), the most for one member of the pass. */
void gr_rebuild_counts (struct gr_rebuild *rb, uint64_t *rebuilt,
                        uint64_t *skipped);
void gr_rebuild_set_rate (struct gr_rebuild *rb, uint64_t rate);
/* Stop it and wait (a finished one is just freed). */
void gr_rebuild_stop (struct gr_rebuild *rb);

#endif /* GPURAID_REBUILD_H */
