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
  return ms;
}

void
gr_members_attach (struct gr_members *ms, int i, const char *path,
                   struct gr_disk *d)
{
  free (ms->mem[i].path);
  ms->mem[i].path = strdup (path);
  ms->mem[i].disk = d;
  if (d && gr_disk_direct (d))
    __atomic_store_n (&ms->direct, 1, __ATOMIC_RELEASE);
}

bool
gr_members_direct (const struct gr_members *ms)
{
  return __atomic_load_n (&ms->direct, __ATOMIC_ACQUIRE);
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
  uint8_t buf[GR_SB_SIZE] __attribute__ ((aligned (4096)));  /* O_DIRECT */
  bool redo;
  int i, r;

  if (ms->read_only)
    return ms->nfailed > ms->m ? GR_MEMBERS_ARRAY_FAILED : GR_MEMBERS_OK;
  do {
    redo = false;
    ms->sb.event++;
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

int
gr_members_sync (struct gr_members *ms, int i)
{
  if (gr_members_failed (ms, i))
    return 0;
  const int e = gr_disk_sync (ms->mem[i].disk);

  if (e < 0) {
    __atomic_add_fetch (&ms->mem[i].errors, 1, __ATOMIC_RELAXED);
    if (gr_members_fail (ms, i, "fdatasync: %s", strerror (-e))
        != GR_MEMBERS_OK) {
      errno = EIO;
      return -1;
    }
  }
  return 0;
}

/* --- member I/O ---------------------------------------------------------- */

bool
gr_members_falloc_ok (const struct gr_members *ms, enum gr_mio_kind mode)
{
  return !(__atomic_load_n (&ms->falloc_refused, __ATOMIC_ACQUIRE)
           & (1 << mode));
}

bool
gr_members_usable (const struct gr_members *ms, const struct gr_mio *v)
{
  const struct member *mb = &ms->mem[v->member];

  if (!gr_members_failed (ms, v->member))
    return true;
  /* Its data area and its checksum area (cksum.h) only: the rest of its
   * metadata area stays zero until it is live. */
  if (!__atomic_load_n (&mb->rebuilding, __ATOMIC_ACQUIRE))
    return false;
  if (ms->sb.cksum_offset && v->off >= ms->sb.cksum_offset &&
      v->off + v->len <= ms->sb.data_offset)
    return true;
  return v->off >= ms->sb.data_offset &&
    v->off + v->len <= __atomic_load_n (v->kind == GR_MIO_WRITE
                                        ? &mb->wfront : &mb->front,
                                        __ATOMIC_ACQUIRE);
}

/* An error on member v->member (r = -errno): handled by policy. */
static void
mio_error (struct gr_members *ms, struct gr_mio *v, int r,
           enum gr_mio_policy policy)
{
  const char *what = v->kind == GR_MIO_READ ? "read"
    : v->kind == GR_MIO_WRITE || v->kind == GR_MIO_WRITE_DSYNC ? "write"
    : "fallocate";
  const char *err = r == -ENODATA ? "short read" : strerror (-r);

  __atomic_add_fetch (&ms->mem[v->member].errors, 1, __ATOMIC_RELAXED);
  /* A medium error reading the data area of a live member: answered
   * from the other chunks and rewritten (md's way), up to the limit. */
  if (v->kind == GR_MIO_READ && r == -EIO && policy != GR_MIO_REPORT &&
      v->off >= ms->sb.data_offset &&
      !__atomic_load_n (&ms->mem[v->member].rebuilding, __ATOMIC_ACQUIRE)) {
    const uint64_t e = policy == GR_MIO_REPAIR
      ? __atomic_load_n (&ms->mem[v->member].read_errors, __ATOMIC_RELAXED)
      : __atomic_add_fetch (&ms->mem[v->member].read_errors, 1,
                            __ATOMIC_RELAXED);

    if (e <= ms->max_read_errors) {
      v->result = GR_MIO_READ_ERROR;
      gr_debug ("member %d: read of %" PRIu64 " bytes at offset %" PRIu64
                ": %s (read error %" PRIu64 " of %u allowed)", v->member,
                v->len, v->off, err, e, ms->max_read_errors);
      return;
    }
    v->result = GR_MIO_FAILED;
    gr_members_fail (ms, v->member, "read of %" PRIu64 " bytes at offset %"
                     PRIu64 ": %s: %" PRIu64 " read errors (max-read-errors="
                     "%u)", v->len, v->off, err, e, ms->max_read_errors);
    return;
  }
  v->result = GR_MIO_FAILED;
  if (__atomic_exchange_n (&ms->mem[v->member].rebuilding, 0,
                           __ATOMIC_ACQ_REL)) {
    __atomic_add_fetch (&ms->gen, 1, __ATOMIC_ACQ_REL);
    nbdkit_error ("replacement member %d (%s) failed: %s of %" PRIu64
                  " bytes at offset %" PRIu64 ": %s; the rebuild stops and "
                  "the member stays failed", v->member,
                  ms->mem[v->member].path, what, v->len, v->off, err);
    /* Its chunk there is stale now: dropped from the record before the
     * request completes, so that no restart resumes it. */
    pthread_mutex_lock (&ms->lock);
    if (gr_members_rebuild_drop_locked (ms, v->member))
      gr_members_write_sbs_locked (ms);
    pthread_mutex_unlock (&ms->lock);
    return;
  }
  if (policy == GR_MIO_REPORT)
    nbdkit_error ("member %d (%s): %s of %" PRIu64 " bytes at offset %"
                  PRIu64 ": %s", v->member, ms->mem[v->member].path, what,
                  v->len, v->off, err);
  else
    gr_members_fail (ms, v->member, "%s of %" PRIu64 " bytes at offset %"
                     PRIu64 ": %s", what, v->len, v->off, err);
}

static const enum gr_dio_kind dio_kind[] = {
  [GR_MIO_READ] = GR_DIO_READ, [GR_MIO_WRITE] = GR_DIO_WRITE,
  [GR_MIO_PUNCH] = GR_DIO_PUNCH, [GR_MIO_ZERO] = GR_DIO_ZERO,
  [GR_MIO_WRITE_DSYNC] = GR_DIO_WRITE_DSYNC,
};

/* v's outcome, d's result. */
static void
mio_done (struct gr_members *ms, struct gr_mio *v, const struct gr_dio *d,
          enum gr_mio_policy policy)
{
  struct member *mb = &ms->mem[v->member];

  if (d->res == -EOPNOTSUPP &&
      (v->kind == GR_MIO_PUNCH || v->kind == GR_MIO_ZERO)) {
    if (!(__atomic_fetch_or (&ms->falloc_refused, 1 << v->kind,
                             __ATOMIC_ACQ_REL) & (1 << v->kind)))
      gr_debug ("%s not supported on member %d (%s)",
                v->kind == GR_MIO_PUNCH ? "punch-hole" : "zero-range",
                v->member, mb->path);
    v->result = GR_MIO_UNSUPPORTED;
    return;
  }
  if (d->res < 0) {
    mio_error (ms, v, d->res, policy);
    return;
  }
  v->result = GR_MIO_DONE;
  if (v->kind == GR_MIO_READ) {
    __atomic_add_fetch (&mb->reads, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch (&mb->read_bytes, v->len, __ATOMIC_RELAXED);
  }
  else if (v->kind == GR_MIO_WRITE || v->kind == GR_MIO_WRITE_DSYNC) {
    __atomic_add_fetch (&mb->writes, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch (&mb->written_bytes, v->len, __ATOMIC_RELAXED);
  }
}

void
gr_members_io (struct gr_members *ms, struct gr_mio *v, size_t n,
               enum gr_mio_policy policy)
{
  struct gr_dio stackd[32], *d;
  size_t *which, stackw[32];
  size_t i, nd = 0;

  d = n <= 32 ? stackd : malloc (n * sizeof *d);
  which = n <= 32 ? stackw : malloc (n * sizeof *which);
  if (d == NULL || which == NULL) {
    /* One at a time, then. */
    if (d != stackd)
      free (d);
    if (which != stackw)
      free (which);
    for (i = 0; i < n; i++)
      gr_members_io (ms, &v[i], 1, policy);
    return;
  }
  for (i = 0; i < n; i++) {
    v[i].result = GR_MIO_SKIPPED;
    if (!gr_members_usable (ms, &v[i]))
      continue;
    if ((v[i].kind == GR_MIO_PUNCH || v[i].kind == GR_MIO_ZERO) &&
        !gr_members_falloc_ok (ms, v[i].kind)) {
      v[i].result = GR_MIO_UNSUPPORTED;
      continue;
    }
    d[nd] = (struct gr_dio) { .disk = ms->mem[v[i].member].disk,
                              .kind = dio_kind[v[i].kind], .buf = v[i].buf,
                              .off = v[i].off, .len = v[i].len };
    which[nd++] = i;
  }
  gr_disk_io (d, nd);
  for (i = 0; i < nd; i++)
    mio_done (ms, &v[which[i]], &d[i], policy);
  if (d != stackd)
    free (d);
  if (which != stackw)
    free (which);
}

void
gr_members_counts (const struct gr_members *ms, int i,
                   struct gr_member_counts *out)
{
  const struct member *mb = &ms->mem[i];

  out->reads = __atomic_load_n (&mb->reads, __ATOMIC_RELAXED);
  out->writes = __atomic_load_n (&mb->writes, __ATOMIC_RELAXED);
  out->read_bytes = __atomic_load_n (&mb->read_bytes, __ATOMIC_RELAXED);
  out->written_bytes = __atomic_load_n (&mb->written_bytes,
                                        __ATOMIC_RELAXED);
  out->errors = __atomic_load_n (&mb->errors, __ATOMIC_RELAXED);
  out->cksum_errors = __atomic_load_n (&mb->cksum_errors, __ATOMIC_RELAXED);
  out->read_errors = __atomic_load_n (&mb->read_errors, __ATOMIC_RELAXED);
}

void
gr_members_set_max_read_errors (struct gr_members *ms, unsigned max)
{
  ms->max_read_errors = max;
}

void
gr_members_count_cksum (struct gr_members *ms, int i)
{
  __atomic_add_fetch (&ms->mem[i].cksum_errors, 1, __ATOMIC_RELAXED);
}

uint32_t
gr_members_device (const struct gr_members *ms, int i)
{
  return __atomic_load_n (&ms->mem[i].attach, __ATOMIC_ACQUIRE);
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
    free (ms->mem[i].path);
  }
  pthread_mutex_destroy (&ms->lock);
  free (ms->mem);
  free (ms);
}
