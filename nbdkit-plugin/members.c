/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the members: their files, their state and member I/O.  See
 * members.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include "log.h"

#include "members.h"
#include "events.h"
#include "members-internal.h"

struct gr_members *
gr_members_new (const struct gr_sb *sb)
{
  struct gr_members *ms = calloc (1, sizeof *ms);

  if (ms == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  ms->n = (int) (sb->k + sb->m);
  ms->m = (int) sb->m;
  ms->sb = *sb;
  ms->max_read_errors = 20;     /* max-read-errors= sets it */
  ms->mem = calloc (ms->n, sizeof *ms->mem);
  if (ms->mem == NULL) {
    nbdkit_error ("calloc: %m");
    free (ms);
    return NULL;
  }
  pthread_mutex_init (&ms->lock, NULL);
  pthread_rwlock_init (&ms->shadow_lock, NULL);
  return ms;
}

void
gr_members_attach (struct gr_members *ms, int i, const char *path,
                   struct gr_disk *d)
{
  free (ms->mem[i].path);
  ms->mem[i].path = strdup (path);
  ms->mem[i].disk = d;
  gr_members_note_disk (ms, d);
}

void
gr_members_note_disk (struct gr_members *ms, const struct gr_disk *d)
{
  uint32_t a, was;

  if (d == NULL || !gr_disk_direct (d))
    return;
  __atomic_store_n (&ms->direct, 1, __ATOMIC_RELEASE);
  a = gr_disk_mem_align (d);
  was = __atomic_load_n (&ms->dio_align, __ATOMIC_RELAXED);
  while (a > was &&
         !__atomic_compare_exchange_n (&ms->dio_align, &was, a, false,
                                       __ATOMIC_RELEASE, __ATOMIC_RELAXED))
    ;
}

bool
gr_members_direct (const struct gr_members *ms)
{
  return __atomic_load_n (&ms->direct, __ATOMIC_ACQUIRE);
}

uint32_t
gr_members_dio_align (const struct gr_members *ms)
{
  return __atomic_load_n (&ms->dio_align, __ATOMIC_ACQUIRE);
}

int
gr_members_n (const struct gr_members *ms)
{
  return ms->n;
}

const char *
gr_members_path (const struct gr_members *ms, int i)
{
  return ms->mem[i].path;
}

const char *
gr_members_why (const struct gr_members *ms, int i)
{
  return ms->mem[i].why;
}

bool
gr_members_failed (const struct gr_members *ms, int i)
{
  return __atomic_load_n (&ms->mem[i].failed, __ATOMIC_ACQUIRE);
}

bool
gr_members_hole (struct gr_members *ms, int i, uint64_t off, uint64_t len)
{
  struct gr_disk *d = ms->mem[i].disk;

  return !gr_members_failed (ms, i) && d != NULL &&
    gr_disk_hole (d, off, len);
}

int
gr_members_nfailed (const struct gr_members *ms)
{
  return __atomic_load_n (&ms->nfailed, __ATOMIC_ACQUIRE);
}

bool
gr_members_too_degraded (const struct gr_members *ms)
{
  return gr_members_nfailed (ms) > ms->m;
}

uint64_t
gr_members_generation (const struct gr_members *ms)
{
  return __atomic_load_n (&ms->gen, __ATOMIC_ACQUIRE);
}

uint64_t
gr_members_snapshot (const struct gr_members *ms, bool *failed)
{
  uint64_t gen = gr_members_generation (ms);
  int i;

  for (i = 0; i < ms->n; i++)
    failed[i] = gr_members_failed (ms, i);
  return gen;
}

void
gr_members_sb (struct gr_members *ms, struct gr_sb *out)
{
  pthread_mutex_lock (&ms->lock);
  *out = ms->sb;
  pthread_mutex_unlock (&ms->lock);
}

void
gr_members_keep_dirty (struct gr_members *ms)
{
  ms->keep_dirty = true;
}

void
gr_members_keep_maps (struct gr_members *ms)
{
  ms->maps_kept = true;
}

void
gr_members_read_only (struct gr_members *ms)
{
  ms->read_only = true;
}

void
gr_members_on_dirty (struct gr_members *ms, unsigned (*fn) (void *arg),
                     void *arg)
{
  ms->on_dirty = fn;
  ms->on_dirty_arg = arg;
}

/* Member i goes from healthy to failed: counted, its bit set.  Lock held
 * (or still single-threaded).  At run time the event is logged once. */
static void
fail_locked (struct gr_members *ms, int i, const char *why, bool at_runtime)
{
  struct member *mb = &ms->mem[i];
  int left, tolerated, nf;

  if (mb->failed)
    return;
  snprintf (mb->why, sizeof mb->why, "%s", why);
  __atomic_store_n (&mb->failed, 1, __ATOMIC_RELEASE);
  nf = __atomic_add_fetch (&ms->nfailed, 1, __ATOMIC_ACQ_REL);
  __atomic_add_fetch (&ms->gen, 1, __ATOMIC_ACQ_REL);
  gr_sb_failed_set (&ms->sb, i);
  if (!at_runtime)
    return;
  /* Writes in flight now were not all journaled (gr_members_journaled
   * says so again once they are done). */
  ms->sb.flags &= ~GR_SB_FLAG_JOURNALED;
  ms->runtime_failures++;
  left = ms->n - nf;
  tolerated = ms->m - nf;
  if (tolerated >= 0)
    nbdkit_error ("member %d (%s) failed: %s; continuing degraded with %d of %d "
             "members, %d more failures tolerated", i,
             mb->path ? mb->path : "missing", why, left, ms->n, tolerated);
  else
    nbdkit_error ("member %d (%s) failed: %s; only %d of %d members left, %d "
             "needed: the array has failed, requests now fail with EIO", i,
             mb->path ? mb->path : "missing", why, left, ms->n,
             ms->n - ms->m);
  gr_event (GR_EV_MEMBER_FAILED, i, mb->path, why, "left=%d tolerated=%d",
            left, tolerated >= 0 ? tolerated : 0);
  if (nf == 1)
    gr_event (GR_EV_DEGRADED, -1, NULL, why, "failed=%d left=%d", nf, left);
  if (nf == ms->m + 1)
    gr_event (GR_EV_ARRAY_FAILED, -1, NULL, why, "failed=%d left=%d", nf,
              left);
}

void
gr_members_set_failed (struct gr_members *ms, int i, const char *path,
                       const char *why)
{
  if (path && ms->mem[i].path == NULL)
    ms->mem[i].path = strdup (path);
  fail_locked (ms, i, why, false);
}

/* Write the in-memory superblock, event + 1, to every live member and
 * fdatasync it.  A member that cannot be written fails, and the write is
 * redone with a new event so that it is stale.  Lock held. */
enum gr_members_outcome
gr_members_write_sbs_locked (struct gr_members *ms)
{
  gr_sb_buf buf;
  uint64_t first;
  bool redo;
  int i, r;

  if (ms->read_only)
    return ms->nfailed > ms->m ? GR_MEMBERS_ARRAY_FAILED : GR_MEMBERS_OK;
  /* A member back in use is no longer one the operator removed. */
  for (i = 0; i < ms->n; i++)
    if (!gr_sb_failed_test (&ms->sb, i))
      gr_sb_removed_put (&ms->sb, i, false);
  first = ms->sb.event + 1;
  do {
    redo = false;
    ms->sb.event++;
    /* The degraded map (bitmap.h) marks every write from the first
     * update that records a failed member on, until none is; a member
     * that fails in an update fails before its first attempt's event
     * (nothing else was written since: redone at once). */
    if (!ms->maps_kept || ms->nfailed == 0)
      ms->sb.degraded_since = 0;
    else if (ms->sb.degraded_since == 0)
      ms->sb.degraded_since = first;
    for (i = 0; i < ms->n; i++) {
      struct gr_sb sb = ms->sb;
      char why[128];

      if (ms->mem[i].failed)
        continue;
      sb.index = i;
      gr_sb_encode (&sb, buf);
      r = gr_disk_pwrite (ms->mem[i].disk, buf, GR_SB_SIZE, 0);
      if (r == 0)
        r = gr_disk_sync (ms->mem[i].disk);
      if (r < 0) {
        snprintf (why, sizeof why, "superblock write: %s", strerror (-r));
        fail_locked (ms, i, why, true);
        redo = true;
        break;
      }
    }
  } while (redo && ms->nfailed < ms->n);
  gr_verbose ("superblocks written: event %" PRIu64 " flags 0x%x",
              ms->sb.event, ms->sb.flags);
  return ms->nfailed > ms->m ? GR_MEMBERS_ARRAY_FAILED : GR_MEMBERS_OK;
}

enum gr_members_outcome
gr_members_write_sbs (struct gr_members *ms)
{
  enum gr_members_outcome r;

  pthread_mutex_lock (&ms->lock);
  r = gr_members_write_sbs_locked (ms);
  pthread_mutex_unlock (&ms->lock);
  return r;
}

enum gr_members_outcome
gr_members_set_scrub_at (struct gr_members *ms, uint64_t stripe, bool now)
{
  enum gr_members_outcome r = GR_MEMBERS_OK;

  pthread_mutex_lock (&ms->lock);
  if (ms->sb.scrub_at == stripe)
    now = false;
  ms->sb.scrub_at = stripe;
  if (now && !ms->read_only)
    r = gr_members_write_sbs_locked (ms);
  pthread_mutex_unlock (&ms->lock);
  return r;
}

enum gr_members_outcome
gr_members_set_scrub_done (struct gr_members *ms, const struct gr_sb_scrub *r)
{
  enum gr_members_outcome o = GR_MEMBERS_OK;

  pthread_mutex_lock (&ms->lock);
  ms->sb.scrub_at = 0;
  ms->sb.last_scrub = *r;
  if (!ms->read_only)
    o = gr_members_write_sbs_locked (ms);
  pthread_mutex_unlock (&ms->lock);
  return o;
}

enum gr_members_outcome
gr_members_mark_clean (struct gr_members *ms)
{
  enum gr_members_outcome r;

  pthread_mutex_lock (&ms->lock);
  ms->sb.flags &= ~(GR_SB_FLAG_DIRTY | GR_SB_FLAG_JOURNALED |
                    GR_SB_FLAG_BITMAP);
  r = gr_members_write_sbs_locked (ms);
  pthread_mutex_unlock (&ms->lock);
  return r;
}

enum gr_members_outcome
gr_members_fail (struct gr_members *ms, int i, const char *fmt, ...)
{
  enum gr_members_outcome r = GR_MEMBERS_OK;
  char why[256];
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (why, sizeof why, fmt, ap);
  va_end (ap);

  pthread_mutex_lock (&ms->lock);
  if (!ms->mem[i].failed) {
    /* Recorded even past m: an array that has failed must not come back
     * trusting this member (its chunks miss the write that failed). */
    fail_locked (ms, i, why, true);
    r = gr_members_write_sbs_locked (ms);
  }
  if (ms->nfailed > ms->m)
    r = GR_MEMBERS_ARRAY_FAILED;
  pthread_mutex_unlock (&ms->lock);
  return r;
}

enum gr_members_fail_outcome
gr_members_fail_keeping (struct gr_members *ms, int i, const char *why)
{
  enum gr_members_fail_outcome r;

  pthread_mutex_lock (&ms->lock);
  if (ms->read_only)
    r = GR_FAIL_READ_ONLY;
  else if (ms->mem[i].failed)
    r = GR_FAIL_ALREADY;
  else if (ms->nfailed >= ms->m)
    r = GR_FAIL_NO_REDUNDANCY;
  else {
    fail_locked (ms, i, why, true);
    /* Not re-added at a start: the operator took it out. */
    gr_sb_removed_put (&ms->sb, i, true);
    r = gr_members_write_sbs_locked (ms) == GR_MEMBERS_OK ? GR_FAIL_DONE
      : GR_FAIL_ARRAY_FAILED;
  }
  pthread_mutex_unlock (&ms->lock);
  return r;
}

enum gr_member_state
gr_members_state (const struct gr_members *ms, int i)
{
  if (!gr_members_failed (ms, i))
    return GR_MEMBER_ACTIVE;
  if (__atomic_load_n (&ms->mem[i].rebuilding, __ATOMIC_ACQUIRE))
    return GR_MEMBER_REBUILDING;
  return ms->mem[i].disk ? GR_MEMBER_FAILED : GR_MEMBER_MISSING;
}

bool
gr_members_read_only_p (const struct gr_members *ms)
{
  return ms->read_only;
}

bool
gr_members_same_disk (const struct gr_members *ms, const struct gr_disk *d,
                      int *which)
{
  for (int i = 0; i < ms->n; i++)
    if (ms->mem[i].disk && gr_disk_same (ms->mem[i].disk, d)) {
      *which = i;
      return true;
    }
  return false;
}

int
gr_members_begin_write (struct gr_members *ms)
{
  enum gr_members_outcome r = GR_MEMBERS_OK;

  if (__atomic_load_n (&ms->dirty_on_disk, __ATOMIC_ACQUIRE))
    return 0;
  pthread_mutex_lock (&ms->lock);
  if (!ms->dirty_on_disk) {
    unsigned keeps = ms->on_dirty ? ms->on_dirty (ms->on_dirty_arg)
      : GR_KEEPS_NOTHING;

    ms->sb.flags |= GR_SB_FLAG_DIRTY;
    ms->sb.flags &= ~(GR_SB_FLAG_JOURNALED | GR_SB_FLAG_BITMAP);
    /* Not over a crash that was not repaired (keep_dirty). */
    ms->keeps_journal = keeps & GR_KEEPS_JOURNAL;
    if (ms->keeps_journal && ms->nfailed > 0 && !ms->keep_dirty)
      ms->sb.flags |= GR_SB_FLAG_JOURNALED;
    if (keeps & GR_KEEPS_BITMAP)
      ms->sb.flags |= GR_SB_FLAG_BITMAP;
    if (keeps & GR_KEEPS_WRITTEN)
      ms->sb.flags |= GR_SB_FLAG_WRITTEN;
    r = gr_members_write_sbs_locked (ms);
    if (r == GR_MEMBERS_OK)
      __atomic_store_n (&ms->dirty_on_disk, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock (&ms->lock);
  if (r != GR_MEMBERS_OK) {
    nbdkit_error ("cannot mark the array dirty: too many failed members");
    errno = EIO;
    return -1;
  }
  return 0;
}

/* Under ms->lock: is the session dirty, journaling, degraded but
 * working, and not said to be journaled (a member failed since)? */
static bool
journal_lost_locked (const struct gr_members *ms)
{
  return ms->dirty_on_disk && ms->keeps_journal && !ms->keep_dirty &&
    !ms->read_only && ms->nfailed > 0 && ms->nfailed <= ms->m &&
    !(ms->sb.flags & GR_SB_FLAG_JOURNALED);
}

bool
gr_members_journal_lost (struct gr_members *ms, uint64_t *failures)
{
  bool r;

  pthread_mutex_lock (&ms->lock);
  r = journal_lost_locked (ms);
  *failures = ms->runtime_failures;
  pthread_mutex_unlock (&ms->lock);
  return r;
}

enum gr_members_outcome
gr_members_journaled (struct gr_members *ms, uint64_t failures)
{
  enum gr_members_outcome r = GR_MEMBERS_OK;

  pthread_mutex_lock (&ms->lock);
  if (journal_lost_locked (ms) && ms->runtime_failures == failures) {
    ms->sb.flags |= GR_SB_FLAG_JOURNALED;
    r = gr_members_write_sbs_locked (ms);
  }
  pthread_mutex_unlock (&ms->lock);
  return r;
}

/* --- shutdown ------------------------------------------------------------ */

void
gr_members_close (struct gr_members *ms)
{
  int i, e;

  if (ms == NULL)
    return;
  pthread_mutex_lock (&ms->lock);
  if (ms->dirty_on_disk && ms->nfailed <= ms->m) {
    for (i = 0; i < ms->n; i++)
      if (!ms->mem[i].failed && (e = gr_disk_sync (ms->mem[i].disk)) < 0) {
        char why[128];

        snprintf (why, sizeof why, "fdatasync: %s", strerror (-e));
        fail_locked (ms, i, why, true);
      }
    if (ms->nfailed <= ms->m && !ms->keep_dirty) {
      ms->sb.flags &= ~(GR_SB_FLAG_DIRTY | GR_SB_FLAG_JOURNALED |
                        GR_SB_FLAG_BITMAP);
      if (gr_members_write_sbs_locked (ms) == GR_MEMBERS_OK)
        ms->dirty_on_disk = 0;
    }
  }
  pthread_mutex_unlock (&ms->lock);
  for (i = 0; i < ms->n; i++) {
    struct gr_disk_bounced b;

    if (ms->mem[i].disk && gr_disk_direct (ms->mem[i].disk)) {
      gr_disk_bounced (ms->mem[i].disk, &b);
      gr_debug ("member %d: O_DIRECT: %" PRIu64 " accesses (%" PRIu64
                " bytes) not aligned, through the bounce buffer, %" PRIu64
                " of them writes of parts of blocks", i, b.accesses, b.bytes,
                b.partial_writes);
    }
    gr_disk_close (ms->mem[i].disk);
    gr_disk_close (ms->mem[i].shadow);
    free (ms->mem[i].path);
    free (ms->mem[i].shadow_path);
  }
  pthread_rwlock_destroy (&ms->shadow_lock);
  pthread_mutex_destroy (&ms->lock);
  free (ms->mem);
  free (ms);
}
