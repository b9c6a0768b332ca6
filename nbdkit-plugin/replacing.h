/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - a replacement being rebuilt, as the members see it: its
 * superblock, its front and checkpoint, the record on the members.  Part
 * of the members module (members.h owns the state; rebuild.h drives the
 * rebuild). */
#ifndef GPURAID_REPLACING_H
#define GPURAID_REPLACING_H

#include <stdbool.h>
#include <stdint.h>

#include "members.h"

/* Rebuilding members onto replacements (rebuild.h drives them, several
 * in one pass).  A member stays failed: plans treat it as lost, except
 * the stripes below its front (plan.h: gr_plan_ctx.rb_front), where it
 * is read and written like a live member; member I/O allows exactly that
 * part.  Every change of a front changes the failure generation, so that
 * a plan made before it is made again (exec.h).  An I/O error on a
 * replacement ends its rebuild (the member stays failed, dropped from
 * the record at once).
 *
 * The rebuild is recorded in the superblocks (docs/format.md, "Rebuilding
 * a member onto a replacement"): each replacement's own says REBUILDING
 * with the rebuild's id, the members' say which members are rebuilt, the
 * id and a checkpoint below which every stripe is rebuilt and synced on
 * each of them; a start with the replacements in place resumes from the
 * checkpoint.
 *
 * Begin: write the replacement's superblock (d, its metadata area
 * zeroed), then record the rebuild on the members, its front at stripe
 * 0.  While other replacements are being rebuilt it joins them: the
 * rebuild gets a new id (their own superblocks rewritten with it) and
 * the checkpoint goes back to 0.  d is owned from now on (closed on
 * IO_ERROR). */
enum gr_members_outcome gr_members_rebuild_begin (struct gr_members *ms,
                                                  int i, const char *path,
                                                  struct gr_disk *d);
/* At assembly: slot i (failed) is a replacement of the rebuild the
 * superblock records, rebuilt up to stripe at; nothing is written. */
void gr_members_rebuild_resume (struct gr_members *ms, int i,
                                const char *path, struct gr_disk *d,
                                uint64_t at);
/* At assembly: member i of the recorded rebuild is not resumed (its
 * replacement not given, or stale): it is dropped from the record (the
 * whole record if no member is left in progress), so that the superblock
 * update before the first write says so.  Writes from then on miss the
 * replacement, so its rebuilt part is no longer to be trusted. */
void gr_members_rebuild_forget (struct gr_members *ms, int i);
/* !written: the rebuild may now write below front (member bytes);
 * written: those bytes are rebuilt, and from now on plans read and write
 * them (lock-free healthy reads included: so only once they are there).
 * false if member i's rebuild has ended (the replacement failed). */
bool gr_members_rebuild_advance (struct gr_members *ms, int i,
                                 uint64_t front, bool written);
/* Sync every replacement being rebuilt, then record the least of their
 * fronts as the checkpoint on the members (one whose sync fails is
 * dropped).  false if the update failed. */
bool gr_members_rebuild_checkpoint (struct gr_members *ms);
/* The fronts of the members being rebuilt, in stripes, into front[i]
 * for every member (0 for the others); how many are being rebuilt. */
int gr_members_rebuilding (const struct gr_members *ms, uint64_t *front);
/* Is [off, off + len) of member i in use: a live member, or the rebuilt
 * part of a replacement? */
bool gr_members_in_use (const struct gr_members *ms, int i, uint64_t off,
                        uint64_t len);
/* How a rebuild ends. */
enum gr_rebuild_end {
  GR_REBUILD_DONE,              /* every stripe rebuilt: the replacements
                                 * are synced, then the members are live
                                 * again, recorded on every live member's
                                 * superblock (their own included) in one
                                 * update */
  GR_REBUILD_PAUSED,            /* shutdown: the members stay failed, the
                                 * record and checkpoint stay (resumed at
                                 * the next start) */
  GR_REBUILD_ABANDONED,         /* failed: the members stay failed and are
                                 * dropped from the record */
};
/* End the rebuild of the members in which[] (n entries).  true if all of
 * them are live. */
bool gr_members_rebuild_end (struct gr_members *ms, const bool *which,
                             enum gr_rebuild_end how);
#endif /* GPURAID_REPLACING_H */
