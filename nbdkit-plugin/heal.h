/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - healing online: replacing members (gpuraidctl replace, hot
 * spares, replace= at start) and scrubbing.
 *
 * A replacement path is checked the same way wherever it comes from (a
 * regular file or block device, as large as a member, not another
 * member's file, not holding another array's superblock); then its
 * metadata area is zeroed and the member is rebuilt onto it online
 * (rebuild.h).  Spares (spare=, gpuraidctl spare add) and the
 * replacements named at start (replace=INDEX:PATH) wait in a list; a
 * thread puts one in for a failed or missing member as soon as no
 * resync, rebuild or scrub stops it (a running scrub is stopped, to go
 * on later: a rebuild comes first).  A spare whose rebuild fails is
 * dropped, and that member is not rebuilt automatically again (replace
 * it by hand).  Spares live as long as the server: they are not
 * recorded on the members.  Scrubs: scrub.h.  A member replaced while a
 * rebuild runs joins it (one pass rebuilds them all: rebuild.h).  One of
 * rebuild and scrub runs at a time, never during the resync.
 *
 * One owner: struct gr_heal holds the rebuild and the scrub started last
 * (and the resync, given at start: the jobs, job.h), the spares and the
 * thread, and answers which job runs.  Its calls are serialised by its
 * lock. */
#ifndef GPURAID_HEAL_H
#define GPURAID_HEAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bitmap.h"
#include "exec.h"
#include "resync.h"
#include "scrub.h"

struct gr_heal;

/* No thread yet.  NULL after nbdkit_error. */
struct gr_heal *gr_heal_new (struct gr_exec *x, struct gr_bitmap *b,
                             uint64_t rate);
/* In the server process: the spare thread; rs (may be NULL) is the
 * resync, waited for.  0, or -1 after nbdkit_error. */
int gr_heal_start (struct gr_heal *h, struct gr_resync *rs);
/* Stop the thread, the rebuild (the member stays failed) and the scrub
 * (it records where the next goes on). */
void gr_heal_free (struct gr_heal *h);

void gr_heal_set_rate (struct gr_heal *h, uint64_t rate);

/* A member failed at run time: once the writes in flight then are done,
 * every write is journaled again, and the superblocks say so (members.h:
 * gr_members_journal_lost), so that a crash from then on (during the
 * rebuild onto a spare, say) is repaired by the journal alone.  The
 * thread does it within 0.2 s of a failure. */
void gr_heal_journal_again (struct gr_heal *h);
/* The operator failed a member (gpuraidctl fail): the journal as above,
 * and a spare's takeover starts now, before the command answers, so
 * that gpuraidctl wait right after it follows the rebuild. */
void gr_heal_member_failed (struct gr_heal *h);

enum gr_heal_outcome {
  GR_HEAL_STARTED,
  GR_HEAL_NO_SUCH_MEMBER,
  GR_HEAL_ACTIVE,               /* the member works: fail it first */
  GR_HEAL_REBUILDING,           /* the member is being rebuilt */
  GR_HEAL_BUSY,                 /* a resync, rebuild or scrub runs */
  GR_HEAL_READ_ONLY,
  GR_HEAL_CANNOT_OPEN,
  GR_HEAL_NOT_FILE,             /* not a regular file or block device */
  GR_HEAL_NO_NBD,               /* a URI, and no libnbd in this build */
  GR_HEAL_READ_ONLY_EXPORT,     /* an NBD export that cannot be written */
  GR_HEAL_NO_DIRECT,            /* direct=on, and it refuses O_DIRECT */
  GR_HEAL_IS_MEMBER,            /* the file of a member */
  GR_HEAL_IS_SPARE,             /* a spare already */
  GR_HEAL_CURRENT_MEMBER,       /* holds a current member of this array
                                 * that the member list left out */
  GR_HEAL_TOO_SMALL,
  GR_HEAL_OTHER_ARRAY,          /* holds another array's superblock */
  GR_HEAL_IO_ERROR,
  GR_HEAL_NO_REDUNDANCY,        /* scrub: m members lost */
  GR_HEAL_NOT_THIS_MEMBER,      /* re-add: no superblock of that member */
  GR_HEAL_NOT_ACTIVE,           /* replace --live: the member is not in
                                 * service (replace rebuilds it) */
  GR_HEAL_NO_PATH,              /* re-add: no path known, none given */
};
/* gpuraidctl replace: rebuild failed member i onto path.  *err: errno
 * for CANNOT_OPEN and IO_ERROR, the member for IS_MEMBER and
 * CURRENT_MEMBER. */
enum gr_heal_outcome gr_heal_replace (struct gr_heal *h, int i,
                                      const char *path, int *err);
/* gpuraidctl replace --live: active member i copied onto path while it
 * stays in service, which then takes its place (copy.h); checked as any
 * replacement.  *err: errno for CANNOT_OPEN and IO_ERROR, the member for
 * IS_MEMBER and CURRENT_MEMBER. */
enum gr_heal_outcome gr_heal_replace_live (struct gr_heal *h, int i,
                                           const char *path, int *err);
/* The live replacement started last (running or ended): its progress,
 * the replacement's path into path[len] ("-" once it has ended); the
 * member, or -1 if none was started. */
int gr_heal_replace_progress (struct gr_heal *h, struct gr_progress *p,
                              char *path, size_t len);
/* gpuraidctl re-add: member i (failed or missing) back from path (NULL:
 * the path it had), which must hold this member's superblock: where it
 * left while the degraded map was kept (format.h: gr_readd_covered),
 * only the regions written since are rebuilt (*full false), else all of
 * it (*full true).  *err: errno for CANNOT_OPEN and IO_ERROR, the member
 * for IS_MEMBER and NOT_THIS_MEMBER. */
enum gr_heal_outcome gr_heal_readd (struct gr_heal *h, int i,
                                    const char *path, bool *full, int *err);
/* At assembly: member i is back on d (assemble: GR_SLOT_READD), re-added
 * as soon as no resync stops it (d owned from now on). */
void gr_heal_readd_at_start (struct gr_heal *h, int i, const char *path,
                             struct gr_disk *d);
/* The bytes of array data a re-add rebuilds now (the degraded map's). */
uint64_t gr_heal_readd_bytes (struct gr_heal *h);
/* A spare (member < 0) or the replacement for member (replace=): checked
 * now, STARTED when taken into the list. */
enum gr_heal_outcome gr_heal_spare_add (struct gr_heal *h, const char *path,
                                        int member, int *err);
/* The i-th spare waiting: its path into path[len]; false past the end. */
bool gr_heal_spare (struct gr_heal *h, int i, char *path, size_t len);
/* A refusal in words (err as the call returned it; for NO_REDUNDANCY the
 * number of failed members), into buf[len]. */
void gr_heal_explain (enum gr_heal_outcome o, int err, char *buf,
                      size_t len);

/* The rebuild started last (running or ended): its progress, its
 * members into which[] (GR_MAX_MEMBERS), the stripes rebuilt and skipped
 * (rebuild.h: gr_rebuild_counts), how many members; -1 if none was
 * started. */
int gr_heal_rebuild_progress (struct gr_heal *h, struct gr_progress *p,
                              bool *which, uint64_t *rebuilt,
                              uint64_t *skipped);

/* gpuraidctl scrub [--repair]: going on from where the last one stopped
 * (*from, a stripe).  STARTED, BUSY, READ_ONLY (repair), NO_REDUNDANCY
 * or IO_ERROR (could not start, logged). */
enum gr_heal_outcome gr_heal_scrub (struct gr_heal *h, bool repair,
                                    uint64_t *from);
/* Stop a running scrub; false if none runs. */
bool gr_heal_scrub_stop (struct gr_heal *h);
/* The scrub started last (running or ended), or NULL.  Valid until the
 * next gr_heal_scrub. */
struct gr_scrub *gr_heal_scrub_last (struct gr_heal *h);

/* The jobs (job.h) the healing owns, the resync given at start
 * included. */
enum gr_heal_job { GR_HEAL_JOB_NONE, GR_HEAL_JOB_REBUILD,
                   GR_HEAL_JOB_SCRUB, GR_HEAL_JOB_RESYNC,
                   GR_HEAL_JOB_REPLACE };
/* The one answer to "what is running" (status, gpuraidctl wait): a
 * running rebuild, scrub or resync, else the rebuild or scrub started
 * last, else the resync; its progress into p.  NONE if there is none. */
enum gr_heal_job gr_heal_operation (struct gr_heal *h, struct gr_progress *p);

#endif /* GPURAID_HEAL_H */
