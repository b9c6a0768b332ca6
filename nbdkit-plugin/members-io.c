/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - member I/O: the accesses of a plan to the members, their
 * errors handled by policy, the counts.  One file of the members module
 * (members.h; its state is members-internal.h). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "members.h"
#include "members-internal.h"

/* A write or sync of member i's live replacement failed: it ends there
 * (the copy's job sees it), said once. */
static void
shadow_failed (struct gr_members *ms, int i, const char *what, int r)
{
  if (__atomic_exchange_n (&ms->mem[i].shadow_failed, 1, __ATOMIC_ACQ_REL))
    return;
  nbdkit_error ("live replacement of member %d (%s) failed: %s: %s; member "
                "%d stays on %s", i, ms->mem[i].shadow_path, what,
                strerror (-r), i, ms->mem[i].path);
}

int
gr_members_sync (struct gr_members *ms, int i)
{
  if (gr_members_failed (ms, i))
    return 0;
  if (__atomic_load_n (&ms->nlive, __ATOMIC_ACQUIRE)) {
    pthread_rwlock_rdlock (&ms->shadow_lock);
    if (ms->mem[i].live && !ms->mem[i].shadow_failed) {
      const int s = gr_disk_sync (ms->mem[i].shadow);

      if (s < 0)
        shadow_failed (ms, i, "fdatasync", s);
    }
    pthread_rwlock_unlock (&ms->shadow_lock);
  }
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
  /* Reads below front; the rebuild's writes, fallocate calls (its
   * zeroing of what was never written) included, below wfront. */
  return v->off >= ms->sb.data_offset &&
    v->off + v->len <= __atomic_load_n (v->kind == GR_MIO_READ
                                        ? &mb->front : &mb->wfront,
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
  [GR_MIO_WRITE_SHADOW] = GR_DIO_WRITE,
};

/* The part of v that member v->member's live replacement takes as well:
 * below its front in the data area, all of the metadata area past the
 * superblock (shadow_lock held).  Its length, 0 for none. */
static uint64_t
mirrored (const struct gr_members *ms, const struct gr_mio *v)
{
  const struct member *mb = &ms->mem[v->member];
  const uint64_t front = __atomic_load_n (&mb->sfront, __ATOMIC_ACQUIRE);

  if (!mb->live || mb->shadow_failed || v->kind == GR_MIO_READ ||
      v->kind == GR_MIO_WRITE_SHADOW || v->off < GR_SB_SIZE)
    return 0;
  if (v->off < ms->sb.data_offset)
    return v->len;
  return v->off >= front ? 0 : front - v->off < v->len ? front - v->off
    : v->len;
}

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

/* Which access of the batch a storage access does, and how: to the
 * member, its mirror on the live replacement, or the copy to it. */
enum dio_role { TO_MEMBER, TO_MIRROR, TO_SHADOW };

void
gr_members_io (struct gr_members *ms, struct gr_mio *v, size_t n,
               enum gr_mio_policy policy)
{
  const bool live = __atomic_load_n (&ms->nlive, __ATOMIC_ACQUIRE) > 0;
  struct gr_dio stackd[32], *d;
  size_t *which, stackw[32];
  enum dio_role stackr[32], *role;
  size_t i, nd = 0, n1 = 0;       /* n1: then one at a time (no memory) */

  d = 2 * n <= 32 ? stackd : malloc (2 * n * sizeof *d);
  which = 2 * n <= 32 ? stackw : malloc (2 * n * sizeof *which);
  role = 2 * n <= 32 ? stackr : malloc (2 * n * sizeof *role);
  if (d == NULL || which == NULL || role == NULL) {
    /* One at a time, then. */
    n1 = n;
    goto out;
  }
  if (live)
    pthread_rwlock_rdlock (&ms->shadow_lock);
  for (i = 0; i < n; i++) {
    struct member *mb = &ms->mem[v[i].member];
    uint64_t len;

    v[i].result = GR_MIO_SKIPPED;
    if (v[i].kind == GR_MIO_WRITE_SHADOW) {
      if (live && mb->live && !mb->shadow_failed) {
        d[nd] = (struct gr_dio) { .disk = mb->shadow, .kind = GR_DIO_WRITE,
                                  .buf = v[i].buf, .off = v[i].off,
                                  .len = v[i].len };
        role[nd] = TO_SHADOW;
        which[nd++] = i;
      }
      continue;
    }
    if (!gr_members_usable (ms, &v[i]))
      continue;
    if ((v[i].kind == GR_MIO_PUNCH || v[i].kind == GR_MIO_ZERO) &&
        !gr_members_falloc_ok (ms, v[i].kind)) {
      v[i].result = GR_MIO_UNSUPPORTED;
      continue;
    }
    d[nd] = (struct gr_dio) { .disk = mb->disk, .kind = dio_kind[v[i].kind],
                              .buf = v[i].buf, .off = v[i].off,
                              .len = v[i].len };
    role[nd] = TO_MEMBER;
    which[nd++] = i;
    if (live && (len = mirrored (ms, &v[i])) > 0) {
      d[nd] = d[nd - 1];
      d[nd].disk = mb->shadow;
      d[nd].len = len;
      role[nd] = TO_MIRROR;
      which[nd++] = i;
    }
  }
  gr_disk_io (d, nd);
  for (i = 0; i < nd; i++) {
    struct gr_mio *w = &v[which[i]];

    switch (role[i]) {
    case TO_MEMBER:
      mio_done (ms, w, &d[i], policy);
      break;
    case TO_MIRROR:
    case TO_SHADOW:
      if (d[i].res < 0)
        shadow_failed (ms, w->member, "write", d[i].res);
      else if (role[i] == TO_SHADOW)
        w->result = GR_MIO_DONE;
      break;
    }
  }
  if (live)
    pthread_rwlock_unlock (&ms->shadow_lock);
 out:
  if (d != stackd)
    free (d);
  if (which != stackw)
    free (which);
  if (role != stackr)
    free (role);
  for (i = 0; i < n1; i++)
    gr_members_io (ms, &v[i], 1, policy);
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

