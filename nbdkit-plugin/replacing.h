/* gpuraid - a replacement being rebuilt, as the members see it: its
 * superblock, its front and checkpoint, the record on the members.  Part
 * of the members module (members.h owns the state; rebuild.h drives the
 * rebuild). */
#ifndef GPURAID_REPLACING_H
#define GPURAID_REPLACING_H

#include <stdbool.h>
#include <stdint.h>

#include "members.h"

/* Rebuilding member i onto a replacement (rebuild.h drives it).  The
 * member stays failed: plans treat it as lost, except the stripes below
 * the front (plan.h: gr_plan_ctx.rb_member), where it is read and written
 * like a live member; member I/O allows exactly that part.  Every change
 * of the front changes the failure generation, so that a plan made
 * before it is made again (exec.h).  An I/O error on the replacement
 * ends the rebuild (the member stays failed).
 *
 * The rebuild is recorded in the superblocks (docs/format.md, "Rebuild
 * checkpoints"): the replacement's own says REBUILDING with the
 * rebuild's id, the members' say which member is rebuilt, the id and a
 * checkpoint below which every stripe is rebuilt and synced there; a
 * start with the replacement in place resumes from the checkpoint.
 *
 * Begin: write the replacement's superblock (fd, its metadata area
 * zeroed), then record the rebuild on the members, front at stripe 0.
 * fd is owned from now on (closed on IO_ERROR). */
enum gr_members_outcome gr_members_rebuild_begin (struct gr_members *ms,
                                                  int i, const char *path,
                                                  int fd);
/* At assembly: slot i (failed) is the replacement of the rebuild the
 * superblock records, rebuilt up to stripe at; nothing is written. */
void gr_members_rebuild_resume (struct gr_members *ms, int i,
                                const char *path, int fd, uint64_t at);
/* At assembly: the rebuild the superblock records is not resumed (its
 * replacement not given, or stale): forget it, so that the superblock
 * update before the first write says so.  Writes from then on miss the
 * replacement, so its rebuilt part is no longer to be trusted. */
void gr_members_rebuild_forget (struct gr_members *ms);
/* !written: the rebuild may now write below front (member bytes);
 * written: those bytes are rebuilt, and from now on plans read and write
 * them (lock-free healthy reads included: so only once they are there).
 * false if the rebuild has ended (the replacement failed). */
bool gr_members_rebuild_advance (struct gr_members *ms, int i,
                                 uint64_t front, bool written);
/* Every stripe below at is rebuilt: sync the replacement, then record the
 * checkpoint on the members.  false if the rebuild has ended or the
 * update failed. */
bool gr_members_rebuild_checkpoint (struct gr_members *ms, int i,
                                    uint64_t at);
/* The member being rebuilt and its front, or -1. */
int gr_members_rebuilding (const struct gr_members *ms, uint64_t *front);
/* Is [off, off + len) of member i in use: a live member, or the rebuilt
 * part of a replacement? */
bool gr_members_in_use (const struct gr_members *ms, int i, uint64_t off,
                        uint64_t len);
/* How a rebuild ends. */
enum gr_rebuild_end {
  GR_REBUILD_DONE,              /* every stripe rebuilt: the replacement is
                                 * synced, then the member is live again,
                                 * recorded on every live member's
                                 * superblock (its own included) */
  GR_REBUILD_PAUSED,            /* shutdown: the member stays failed, the
                                 * record and checkpoint stay (resumed at
                                 * the next start) */
  GR_REBUILD_ABANDONED,         /* failed: the member stays failed, the
                                 * record is cleared */
};
/* true if the member is live. */
bool gr_members_rebuild_end (struct gr_members *ms, int i,
                             enum gr_rebuild_end how);
#endif /* GPURAID_REPLACING_H */
