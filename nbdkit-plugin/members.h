/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the members: their files, their state and member I/O.
 *
 * One owner of member state: struct gr_members holds every member's file
 * descriptor and failed flag, and the in-memory authoritative superblock
 * that records the failures and the dirty flag on every live member
 * (docs/format.md, "State changes").  A failed member is never read or
 * written again.  The superblock and the failure state change under one
 * internal mutex, a leaf lock; the failed flags and the failure
 * generation are read atomically without it.
 *
 * Plugin code: failures are reported with nbdkit_error (operator events
 * with gr_warn, once) and return -1 with errno set, or a named outcome.
 *
 * One module in three files: members.c (state, superblocks),
 * members-io.c (member I/O) and members-rebuild.c (replacements being
 * rebuilt), sharing members-internal.h. */
#ifndef GPURAID_MEMBERS_H
#define GPURAID_MEMBERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/format.h"
#include "storage/storage.h"

struct gr_members;

/* n = k + m slots, all missing, and the authoritative superblock sb (its
 * index field unused).  NULL after nbdkit_error. */
struct gr_members *gr_members_new (const struct gr_sb *sb);

/* Fill slot i with an open member (d is owned from now on). */
void gr_members_attach (struct gr_members *ms, int i, const char *path,
                        struct gr_disk *d);
/* Has a member (or a replacement) been opened with O_DIRECT (storage.h:
 * gr_disk_direct)?  Plans then read and write whole 4 KiB blocks of the
 * data area (plan.h), so that none goes through the bounce buffer's
 * read-modify-write. */
bool gr_members_direct (const struct gr_members *ms);
/* The largest memory alignment a member opened with O_DIRECT needs of a
 * buffer for it to be read or written without the bounce buffer
 * (storage.h: gr_disk_mem_align); 0 if none is. */
uint32_t gr_members_dio_align (const struct gr_members *ms);
/* Slot i is missing or not to be used, for the reason why (assembly; not
 * logged here).  Its failed bit is set in the in-memory superblock and
 * written with the next superblock update.  path may be NULL. */
void gr_members_set_failed (struct gr_members *ms, int i, const char *path,
                            const char *why);
/* The array started dirty and degraded: keep the dirty flag on disk. */
void gr_members_keep_dirty (struct gr_members *ms);
/* The metadata area holds the written and degraded maps (bitmap.h):
 * the superblock says from which event on the degraded map is kept
 * (degraded_since) while a member is failed. */
void gr_members_keep_maps (struct gr_members *ms);
/* Salvage: never write to the members (superblocks included). */
void gr_members_read_only (struct gr_members *ms);
/* What the session that marks the array dirty keeps (the hook's answer). */
enum gr_dirty_keeps {
  GR_KEEPS_NOTHING = 0,
  GR_KEEPS_JOURNAL = 1,         /* every write journaled (journal.h) */
  GR_KEEPS_BITMAP = 2,          /* the write-intent bitmap (bitmap.h) */
  GR_KEEPS_WRITTEN = 4,         /* the written map (GR_SB_FLAG_WRITTEN) */
};
/* fn (arg) runs once, under the superblock lock, before the first write
 * marks the array dirty (it must not fail members); it says what the
 * session keeps.  A journal on a degraded array is said in the dirty
 * superblock (GR_SB_FLAG_JOURNALED) until a member fails; a bitmap
 * always (GR_SB_FLAG_BITMAP). */
void gr_members_on_dirty (struct gr_members *ms,
                          unsigned (*fn) (void *arg), void *arg);

int gr_members_n (const struct gr_members *ms);
const char *gr_members_path (const struct gr_members *ms, int i);
const char *gr_members_why (const struct gr_members *ms, int i);
bool gr_members_failed (const struct gr_members *ms, int i);
/* Is member i live and [off, off + len) of it a hole (disk.h:
 * gr_disk_hole)? */
bool gr_members_hole (struct gr_members *ms, int i, uint64_t off,
                      uint64_t len);
int gr_members_nfailed (const struct gr_members *ms);
/* More than m members failed: requests fail with EIO. */
bool gr_members_too_degraded (const struct gr_members *ms);
/* failed[i] for every member; returns the failure generation, which
 * changes whenever a member fails. */
uint64_t gr_members_snapshot (const struct gr_members *ms, bool *failed);
uint64_t gr_members_generation (const struct gr_members *ms);
/* A copy of the authoritative superblock. */
void gr_members_sb (struct gr_members *ms, struct gr_sb *out);

enum gr_members_outcome {
  GR_MEMBERS_OK,                /* done; at most m members failed */
  GR_MEMBERS_ARRAY_FAILED,      /* more than m members have failed */
  GR_MEMBERS_IO_ERROR,          /* a replacement's superblock could not
                                 * be written (errno set) */
};

/* Write the superblock, event + 1, to every live member and fdatasync
 * it.  A member that cannot take it fails, and the update is redone. */
enum gr_members_outcome gr_members_write_sbs (struct gr_members *ms);
/* Record where a stopped scrub goes on from (0: none) and, if now,
 * write it (else with the next superblock update). */
enum gr_members_outcome gr_members_set_scrub_at (struct gr_members *ms,
                                                 uint64_t stripe, bool now);
/* A scrub ran to its end: its record (format.h) and no stopped scrub to
 * go on from, written now. */
enum gr_members_outcome gr_members_set_scrub_done (struct gr_members *ms,
                                                   const struct gr_sb_scrub *r);
/* The array's data is consistent: clear the dirty flag on disk. */
enum gr_members_outcome gr_members_mark_clean (struct gr_members *ms);
/* Member i failed (the reason, printf-style): logged once with the
 * redundancy left, recorded on the survivors' superblocks (also past m:
 * the array has then failed, and will refuse to start). */
enum gr_members_outcome gr_members_fail (struct gr_members *ms, int i,
                                         const char *fmt, ...)
  __attribute__ ((format (printf, 3, 4)));
/* The operator fails member i (why: for the log and the superblock
 * record), but only while that keeps the array working: not a member
 * that has failed already, not when m have failed, not read-only.  It
 * is recorded as removed: no start re-adds it (gpuraidctl re-add
 * does). */
enum gr_members_fail_outcome {
  GR_FAIL_DONE,                 /* failed, recorded on the survivors */
  GR_FAIL_ALREADY,              /* it had failed (or is missing) */
  GR_FAIL_NO_REDUNDANCY,        /* m members have failed already */
  GR_FAIL_READ_ONLY,            /* salvage: nothing may be written */
  GR_FAIL_ARRAY_FAILED,         /* failed, and the superblock update
                                 * failed others past m */
};
enum gr_members_fail_outcome gr_members_fail_keeping (struct gr_members *ms,
                                                      int i,
                                                      const char *why);
/* A member as the status shows it. */
enum gr_member_state {
  GR_MEMBER_ACTIVE,
  GR_MEMBER_FAILED,             /* failed while the array ran */
  GR_MEMBER_MISSING,            /* not in use since the start (not found,
                                 * stale or recorded failed; why says) */
  GR_MEMBER_REBUILDING,         /* a replacement being rebuilt */
};
enum gr_member_state gr_members_state (const struct gr_members *ms, int i);
/* Is d the storage of a member (the same file, or URI)?  Which one in
 * *which. */
bool gr_members_same_disk (const struct gr_members *ms,
                           const struct gr_disk *d, int *which);

bool gr_members_read_only_p (const struct gr_members *ms);
/* Before the first write: persist the dirty flag and the failed set.
 * 0, or -1 with errno EIO. */
int gr_members_begin_write (struct gr_members *ms);
/* A member failed at run time while the session journals its degraded
 * writes: the superblock no longer says that every write since is
 * journaled (the writes in flight then were not).  true in that case,
 * and *failures counts the failures so far.  Once the writes in flight
 * at the failure are done (exec.h: gr_exec_journal_drain), every write
 * is journaled again: gr_members_journaled says so (JOURNALED in the
 * superblock, written), unless another member failed since (failures
 * changed), so that a crash from then on is repaired by the journal's
 * replay alone. */
bool gr_members_journal_lost (struct gr_members *ms, uint64_t *failures);
enum gr_members_outcome gr_members_journaled (struct gr_members *ms,
                                              uint64_t failures);

/* One member access.  The result says how it went. */
enum gr_mio_kind {
  GR_MIO_READ, GR_MIO_WRITE, GR_MIO_PUNCH, GR_MIO_ZERO,
  GR_MIO_WRITE_DSYNC,           /* a write durable when done (RWF_DSYNC:
                                 * that range and the device cache, not
                                 * the rest of the file as fdatasync) */
  GR_MIO_WRITE_SHADOW,          /* a write to the member's live
                                 * replacement only (the copy): SKIPPED
                                 * if there is none (any more) */
};
enum gr_mio_result {
  GR_MIO_DONE,
  GR_MIO_FAILED,                /* an error: the member is now failed */
  GR_MIO_SKIPPED,               /* the member had failed: not done */
  GR_MIO_UNSUPPORTED,           /* the member cannot fallocate this way */
  GR_MIO_READ_ERROR,            /* a read of the data area failed with EIO
                                 * (a medium error): counted, and the
                                 * member not failed while at most
                                 * max-read-errors were met; the caller
                                 * answers from the other chunks and
                                 * rewrites these bytes (exec-repair.c) */
};
struct gr_mio {
  enum gr_mio_kind kind;
  int member;
  uint64_t off, len;
  void *buf;
  enum gr_mio_result result;
  const uint32_t *sums;         /* a write's block checksums, computed
                                 * with its coding, or a read's,
                                 * computed by the coding that used it
                                 * (exec.h), or NULL */
};

/* What an error on a member does. */
enum gr_mio_policy {
  GR_MIO_FAIL_MEMBER,           /* fail it (gr_members_fail) */
  GR_MIO_REPORT,                /* only report it (nbdkit_error): resync at
                                 * start-up refuses the start instead */
  GR_MIO_REPAIR,                /* as FAIL_MEMBER, but a read error
                                 * (GR_MIO_READ_ERROR) is not counted
                                 * again: the repair of one re-reads it */
};

/* Do the n accesses together (gr_disk_io), each with its result, errors
 * handled by policy before this returns. */
void gr_members_io (struct gr_members *ms, struct gr_mio *v, size_t n,
                    enum gr_mio_policy policy);
/* Has no member refused fallocate in this mode (GR_MIO_PUNCH or
 * GR_MIO_ZERO) so far? */
bool gr_members_falloc_ok (const struct gr_members *ms,
                           enum gr_mio_kind mode);

/* Member i's accesses since start (gr_members_io's reads and writes
 * done, their bytes) and errors met (failed accesses and syncs). */
struct gr_member_counts {
  uint64_t reads, writes, read_bytes, written_bytes, errors;
  uint64_t cksum_errors;        /* blocks read that failed their checksum */
  uint64_t read_errors;         /* reads that failed with EIO, repaired */
};
void gr_members_counts (const struct gr_members *ms, int i,
                        struct gr_member_counts *out);

/* fdatasync (NBD flush) member i (FUA, flush).  A failure fails the member; -1 with
 * errno EIO only when the array has failed. */
int gr_members_sync (struct gr_members *ms, int i);

/* Read errors a member may meet before it fails (max-read-errors=;
 * default 20, md's; 0: the first fails it).  Set before any I/O. */
void gr_members_set_max_read_errors (struct gr_members *ms, unsigned max);
/* A block of member i failed its checksum (cksum.h): counted. */
void gr_members_count_cksum (struct gr_members *ms, int i);
/* Changes each time a replacement takes slot i (a new device there: what
 * was cached of the old one is not its). */
uint32_t gr_members_device (const struct gr_members *ms, int i);

/* --- a live replacement (members-rebuild.c) --------------------------
 *
 * gpuraidctl replace --live: member i stays in service (read, written,
 * active) while its chunks are copied onto d (GR_MIO_WRITE_SHADOW);
 * every write to it goes to d as well where d holds the copy already
 * (below its front) and in the metadata area past the superblock (the
 * bitmap, the journal, the checksums); reads never do.  d's own
 * superblock says REBUILDING, of a rebuild the array never records, so
 * that no start takes it before the swap (a shutdown or a crash
 * abandons it).  A write or sync of d that fails ends it: member i stays
 * as it was.
 *
 * Begin: write d's superblock (its metadata area zeroed), front 0.  d is
 * owned from now on (closed on IO_ERROR, errno set). */
enum gr_members_outcome gr_members_live_begin (struct gr_members *ms, int i,
                                               const char *path,
                                               struct gr_disk *d);
/* Is member i being replaced live, d not failed?  Its front (member
 * bytes) and d's path into path[len] (may be NULL). */
bool gr_members_live (const struct gr_members *ms, int i, uint64_t *front,
                      char *path, size_t len);
/* The copy is done: d takes member i's slot (its data and checksum
 * areas synced first) in a superblock update that the old storage does
 * not get, then one more (so that it is two events behind, stale, before
 * a write misses it; until then it takes the writes too), and the old
 * storage is closed.  false if d failed (member i as it was) or the
 * updates did (see the error). */
bool gr_members_live_swap (struct gr_members *ms, int i);
/* Abandon it: d closed, member i as it was. */
void gr_members_live_end (struct gr_members *ms, int i);

/* Clean shutdown: sync the members, clear the dirty flag (unless kept),
 * close them, free ms. */
void gr_members_close (struct gr_members *ms);

/* --- replacements being rebuilt (members-rebuild.c) ------------------- */

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
 * IO_ERROR).  readd: d is the member itself, back (its own superblock
 * says READD): its rebuild keeps what the degraded map does not mark
 * (rebuild.h). */
enum gr_members_outcome gr_members_rebuild_begin (struct gr_members *ms,
                                                  int i, const char *path,
                                                  struct gr_disk *d,
                                                  bool readd);
/* At assembly: slot i (failed) is a replacement of the rebuild the
 * superblock records (a re-add: readd), rebuilt up to stripe at;
 * nothing is written. */
void gr_members_rebuild_resume (struct gr_members *ms, int i,
                                const char *path, struct gr_disk *d,
                                uint64_t at, bool readd);
/* Is member i being re-added (rather than rebuilt onto a replacement)? */
bool gr_members_rebuild_readd (const struct gr_members *ms, int i);
/* At assembly: member i of the recorded rebuild is not resumed (its
 * replacement not given, or stale): it is dropped from the record (the
 * whole record if no member is left in progress), so that the superblock
 * update before the first write says so.  Writes from then on miss the
 * replacement, so its rebuilt part is no longer to be trusted. */
void gr_members_rebuild_forget (struct gr_members *ms, int i);
/* !written: the rebuild may now write below front (member bytes);
 * written: those bytes are rebuilt, and from now on plans read and write
 * them (lock-free healthy reads included: so only once they are there).
 * false if member i's rebuild has ended (the replacement failed).  For a
 * live replacement (below): its front, writes mirrored below it. */
bool gr_members_rebuild_advance (struct gr_members *ms, int i,
                                 uint64_t front, bool written);
/* Sync every replacement being rebuilt, then record the least of their
 * fronts as the checkpoint on the members (one whose sync fails is
 * dropped), member i's front taken no further than upto[i]: where it
 * was (gr_members_rebuilding) before the caller wrote what must be
 * durable below the checkpoint (the block checksums), so that a batch
 * written since is not covered.  false if the update failed. */
bool gr_members_rebuild_checkpoint (struct gr_members *ms,
                                    const uint64_t *upto);
/* The fronts of the members being rebuilt, in stripes, into front[i]
 * for every member (0 for the others); how many are being rebuilt. */
int gr_members_rebuilding (const struct gr_members *ms, uint64_t *front);
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

#endif /* GPURAID_MEMBERS_H */
