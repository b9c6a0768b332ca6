/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - replacements being rebuilt: their state among the members
 * (part of the members module).  See members.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "members.h"
#include "members-internal.h"

/* Under ms->lock: member i is being rebuilt onto d, rebuilt up to
 * stripe `at`. */
static void
rebuild_set_locked (struct gr_members *ms, int i, const char *path,
                    struct gr_disk *d, uint64_t at, bool readd)
{
  struct member *mb = &ms->mem[i];
  char *p = path ? strdup (path) : NULL;
  const uint64_t front = ms->sb.data_offset + at * ms->sb.chunk;

  if (mb->disk && mb->disk != d)
    gr_disk_close (mb->disk);
  if (mb->disk != d)
    __atomic_add_fetch (&mb->attach, 1, __ATOMIC_ACQ_REL);
  if (p) {
    free (mb->path);
    mb->path = p;
  }
  mb->disk = d;
  gr_members_note_disk (ms, d);
  mb->readd = readd;
  snprintf (mb->why, sizeof mb->why, readd ? "being re-added"
            : "being rebuilt");
  __atomic_store_n (&mb->front, front, __ATOMIC_RELEASE);
  __atomic_store_n (&mb->wfront, front, __ATOMIC_RELEASE);
  __atomic_store_n (&mb->rebuilding, 1, __ATOMIC_RELEASE);
  __atomic_add_fetch (&ms->gen, 1, __ATOMIC_ACQ_REL);
}

static bool
rebuilding (const struct gr_members *ms, int i)
{
  return __atomic_load_n (&ms->mem[i].rebuilding, __ATOMIC_ACQUIRE);
}

/* Member i's front in stripes. */
static uint64_t
front_stripe (const struct gr_members *ms, int i)
{
  const uint64_t f = __atomic_load_n (&ms->mem[i].front, __ATOMIC_ACQUIRE);

  return f <= ms->sb.data_offset ? 0
    : (f - ms->sb.data_offset) / ms->sb.chunk;
}

/* Under ms->lock: write replacement i's own superblock (REBUILDING,
 * rebuild id) and sync it.  0 or -errno. */
static int
write_own_sb_locked (struct gr_members *ms, int i, struct gr_disk *d,
                     uint64_t id)
{
  gr_sb_buf buf;
  struct gr_sb own = ms->sb;
  int e;

  own.index = (uint32_t) i;
  own.flags |= GR_SB_FLAG_REBUILDING;
  if (ms->mem[i].readd)
    own.flags |= GR_SB_FLAG_READD;
  own.rebuild_id = id;
  memset (own.rebuild_set, 0, sizeof own.rebuild_set);
  gr_sb_rebuild_put (&own, i, true);
  own.rebuild_at = 0;
  gr_sb_encode (&own, buf);
  e = gr_disk_pwrite (d, buf, GR_SB_SIZE, 0);
  if (e == 0)
    e = gr_disk_sync (d);
  return e;
}

enum gr_members_outcome
gr_members_rebuild_begin (struct gr_members *ms, int i, const char *path,
                          struct gr_disk *d, bool readd)
{
  enum gr_members_outcome r = GR_MEMBERS_OK;
  bool join = false;
  uint64_t id;
  int e, j;

  pthread_mutex_lock (&ms->lock);
  id = ms->sb.event + 1;
  ms->mem[i].readd = readd;
  /* Its own superblock first: REBUILDING, named by the event of the
   * update that records the rebuild on the members (docs/format.md). */
  e = write_own_sb_locked (ms, i, d, id);
  if (e < 0) {
    nbdkit_error ("replacement member %d (%s): superblock write: %s", i,
                  path, strerror (-e));
    gr_disk_close (d);
    pthread_mutex_unlock (&ms->lock);
    errno = -e;
    return GR_MEMBERS_IO_ERROR;
  }
  /* Joining replacements being rebuilt: they take the new id too, so
   * that a replacement dropped from an earlier record is never taken
   * for one of this one. */
  for (j = 0; j < ms->n; j++) {
    if (j == i || !rebuilding (ms, j) || !gr_sb_rebuild_test (&ms->sb, j))
      continue;
    e = write_own_sb_locked (ms, j, ms->mem[j].disk, id);
    if (e < 0) {
      __atomic_add_fetch (&ms->mem[j].errors, 1, __ATOMIC_RELAXED);
      __atomic_store_n (&ms->mem[j].rebuilding, 0, __ATOMIC_RELEASE);
      __atomic_add_fetch (&ms->gen, 1, __ATOMIC_ACQ_REL);
      gr_sb_rebuild_put (&ms->sb, j, false);
      nbdkit_error ("replacement member %d (%s) failed: superblock write: "
                    "%s; its rebuild stops and the member stays failed", j,
                    ms->mem[j].path, strerror (-e));
      continue;
    }
    join = true;
  }
  if (!join)
    memset (ms->sb.rebuild_set, 0, sizeof ms->sb.rebuild_set);
  ms->sb.rebuild_id = id;
  gr_sb_rebuild_put (&ms->sb, i, true);
  ms->sb.rebuild_at = 0;
  r = gr_members_write_sbs_locked (ms);
  rebuild_set_locked (ms, i, path, d, 0, readd);
  pthread_mutex_unlock (&ms->lock);
  return r;
}

void
gr_members_rebuild_resume (struct gr_members *ms, int i, const char *path,
                           struct gr_disk *d, uint64_t at, bool readd)
{
  pthread_mutex_lock (&ms->lock);
  rebuild_set_locked (ms, i, path, d, at, readd);
  pthread_mutex_unlock (&ms->lock);
}

bool
gr_members_rebuild_readd (const struct gr_members *ms, int i)
{
  return rebuilding (ms, i) && ms->mem[i].readd;
}

void
gr_members_rebuild_forget (struct gr_members *ms, int i)
{
  pthread_mutex_lock (&ms->lock);
  gr_members_rebuild_drop_locked (ms, i);
  pthread_mutex_unlock (&ms->lock);
}

bool
gr_members_rebuild_checkpoint (struct gr_members *ms, const uint64_t *upto)
{
  uint64_t at = UINT64_MAX;
  bool ok = true;
  int e;

  pthread_mutex_lock (&ms->lock);
  for (int i = 0; i < ms->n; i++) {
    struct member *mb = &ms->mem[i];
    uint64_t f;

    if (!rebuilding (ms, i) || !gr_sb_rebuild_test (&ms->sb, i))
      continue;
    f = front_stripe (ms, i);           /* written before it moved */
    if (f > upto[i])
      f = upto[i];                      /* its checksums: maybe not yet */
    if ((e = gr_disk_sync (mb->disk)) < 0) {
      __atomic_add_fetch (&mb->errors, 1, __ATOMIC_RELAXED);
      __atomic_store_n (&mb->rebuilding, 0, __ATOMIC_RELEASE);
      __atomic_add_fetch (&ms->gen, 1, __ATOMIC_ACQ_REL);
      nbdkit_error ("replacement member %d (%s) failed: fdatasync: %s; its "
                    "rebuild stops and the member stays failed", i,
                    mb->path, strerror (-e));
      gr_members_rebuild_drop_locked (ms, i);
      continue;
    }
    if (f < at)
      at = f;
  }
  if (ms->sb.rebuild_id) {
    if (at != UINT64_MAX)
      ms->sb.rebuild_at = at;
    ok = gr_members_write_sbs_locked (ms) == GR_MEMBERS_OK;
    if (ok)
      gr_debug ("rebuild checkpoint: a restart resumes at stripe %" PRIu64,
                ms->sb.rebuild_at);
  }
  pthread_mutex_unlock (&ms->lock);
  return ok;
}

bool
gr_members_rebuild_advance (struct gr_members *ms, int i, uint64_t front,
                            bool written)
{
  struct member *mb = &ms->mem[i];

  if (__atomic_load_n (&mb->live, __ATOMIC_ACQUIRE)) {
    if (written)
      __atomic_store_n (&mb->sfront, front, __ATOMIC_RELEASE);
    return !__atomic_load_n (&mb->shadow_failed, __ATOMIC_ACQUIRE);
  }
  if (!rebuilding (ms, i))
    return false;
  if (!written) {
    __atomic_store_n (&mb->wfront, front, __ATOMIC_RELEASE);
    return true;
  }
  __atomic_store_n (&mb->front, front, __ATOMIC_RELEASE);
  __atomic_add_fetch (&ms->gen, 1, __ATOMIC_ACQ_REL);
  return true;
}

int
gr_members_rebuilding (const struct gr_members *ms, uint64_t *front)
{
  int count = 0;

  for (int i = 0; i < ms->n; i++) {
    front[i] = 0;
    if (rebuilding (ms, i)) {
      front[i] = front_stripe (ms, i);
      count++;
    }
  }
  return count;
}

bool
gr_members_rebuild_end (struct gr_members *ms, const bool *which,
                        enum gr_rebuild_end how)
{
  bool live = true, going = false;
  int i, e;

  pthread_mutex_lock (&ms->lock);
  for (i = 0; i < ms->n; i++) {
    struct member *mb = &ms->mem[i];

    if (!which[i])
      continue;
    if (how == GR_REBUILD_DONE && rebuilding (ms, i) &&
        (e = gr_disk_sync (mb->disk)) < 0) {
      __atomic_add_fetch (&mb->errors, 1, __ATOMIC_RELAXED);
      __atomic_store_n (&mb->rebuilding, 0, __ATOMIC_RELEASE);
      nbdkit_error ("replacement member %d (%s) failed: fdatasync: %s; the "
                    "member stays failed", i, mb->path, strerror (-e));
    }
    if (how == GR_REBUILD_DONE && rebuilding (ms, i)) {
      /* Trusted from the superblock update on: its bit cleared on every
       * live member, the rebuild recorded (so that its own superblock,
       * still REBUILDING if a crash cuts this update off, is known as
       * finished) and its own superblock written (docs/format.md). */
      mb->why[0] = '\0';
      ms->sb.failed[i / 8] &= (uint8_t) ~(1u << (i % 8));
      __atomic_store_n (&mb->failed, 0, __ATOMIC_RELEASE);
      __atomic_sub_fetch (&ms->nfailed, 1, __ATOMIC_ACQ_REL);
      going = true;
      continue;
    }
    live = false;
    if (mb->why[0] == '\0' || strcmp (mb->why, "being rebuilt") == 0)
      snprintf (mb->why, sizeof mb->why, how == GR_REBUILD_PAUSED
                ? "rebuild paused (resumes at the next start)"
                : "rebuild not finished");
    /* Paused: the record and its checkpoint stay, so that the next start
     * with the replacement resumes it; otherwise it is dropped. */
    if (how != GR_REBUILD_PAUSED && gr_sb_rebuild_test (&ms->sb, i) &&
        !ms->read_only) {
      gr_members_rebuild_drop_locked (ms, i);
      going = true;
    }
  }
  if (how == GR_REBUILD_DONE && ms->sb.rebuild_id &&
      !gr_members_rebuild_in_progress_locked (ms))
    ms->sb.rebuild_at = ms->sb.data_size / ms->sb.chunk;
  if (going && gr_members_write_sbs_locked (ms) != GR_MEMBERS_OK)
    live = false;
  for (i = 0; i < ms->n; i++)
    if (which[i]) {
      if (how == GR_REBUILD_DONE && ms->mem[i].failed)
        live = false;
      __atomic_store_n (&ms->mem[i].rebuilding, 0, __ATOMIC_RELEASE);
    }
  __atomic_add_fetch (&ms->gen, 1, __ATOMIC_ACQ_REL);
  pthread_mutex_unlock (&ms->lock);
  return live;
}

/* Under ms->lock: does the record hold a member still in progress
 * (failed)? */
bool
gr_members_rebuild_in_progress_locked (const struct gr_members *ms)
{
  for (int j = 0; j < ms->n; j++)
    if (gr_sb_rebuild_test (&ms->sb, j) && gr_sb_failed_test (&ms->sb, j))
      return true;
  return false;
}

bool
gr_members_rebuild_drop_locked (struct gr_members *ms, int i)
{
  if (!gr_sb_rebuild_test (&ms->sb, i))
    return false;
  gr_sb_rebuild_put (&ms->sb, i, false);
  if (!gr_members_rebuild_in_progress_locked (ms)) {
    ms->sb.rebuild_id = 0;
    ms->sb.rebuild_at = 0;
    memset (ms->sb.rebuild_set, 0, sizeof ms->sb.rebuild_set);
  }
  return true;
}

/* --- a live replacement -------------------------------------------------- */

enum gr_members_outcome
gr_members_live_begin (struct gr_members *ms, int i, const char *path,
                       struct gr_disk *d)
{
  struct member *mb = &ms->mem[i];
  gr_sb_buf buf;
  struct gr_sb own;
  char *p = strdup (path);
  int e;

  pthread_mutex_lock (&ms->lock);
  /* REBUILDING of a rebuild no superblock of the array records: no
   * start takes it (format.md, "Rebuilding a member onto a
   * replacement"). */
  own = ms->sb;
  own.index = (uint32_t) i;
  own.flags = GR_SB_FLAG_REBUILDING;
  own.rebuild_id = ms->sb.event + 1;
  own.rebuild_at = 0;
  memset (own.rebuild_set, 0, sizeof own.rebuild_set);
  gr_sb_rebuild_put (&own, i, true);
  gr_sb_encode (&own, buf);
  e = p == NULL ? -ENOMEM : gr_disk_pwrite (d, buf, GR_SB_SIZE, 0);
  if (e == 0)
    e = gr_disk_sync (d);
  if (e < 0) {
    pthread_mutex_unlock (&ms->lock);
    nbdkit_error ("live replacement of member %d (%s): superblock write: %s",
                  i, path, strerror (-e));
    gr_disk_close (d);
    free (p);
    errno = -e;
    return GR_MEMBERS_IO_ERROR;
  }
  gr_members_note_disk (ms, d);
  pthread_rwlock_wrlock (&ms->shadow_lock);
  mb->shadow = d;
  free (mb->shadow_path);
  mb->shadow_path = p;
  __atomic_store_n (&mb->sfront, ms->sb.data_offset, __ATOMIC_RELEASE);
  __atomic_store_n (&mb->shadow_failed, 0, __ATOMIC_RELEASE);
  __atomic_store_n (&mb->live, 1, __ATOMIC_RELEASE);
  __atomic_add_fetch (&ms->nlive, 1, __ATOMIC_ACQ_REL);
  pthread_rwlock_unlock (&ms->shadow_lock);
  pthread_mutex_unlock (&ms->lock);
  return GR_MEMBERS_OK;
}

bool
gr_members_live (const struct gr_members *ms, int i, uint64_t *front,
                 char *path, size_t len)
{
  const struct member *mb = &ms->mem[i];
  bool r;

  pthread_rwlock_rdlock ((pthread_rwlock_t *) &ms->shadow_lock);
  r = __atomic_load_n (&mb->live, __ATOMIC_ACQUIRE) &&
    !__atomic_load_n (&mb->shadow_failed, __ATOMIC_ACQUIRE);
  if (r && front)
    *front = __atomic_load_n (&mb->sfront, __ATOMIC_ACQUIRE);
  if (r && path)
    snprintf (path, len, "%s", mb->shadow_path);
  pthread_rwlock_unlock ((pthread_rwlock_t *) &ms->shadow_lock);
  return r;
}

/* Under shadow_lock written: member i's shadow gone. */
static void
live_drop_locked (struct gr_members *ms, int i)
{
  struct member *mb = &ms->mem[i];

  if (!mb->live)
    return;
  __atomic_store_n (&mb->live, 0, __ATOMIC_RELEASE);
  __atomic_sub_fetch (&ms->nlive, 1, __ATOMIC_ACQ_REL);
  gr_disk_close (mb->shadow);
  mb->shadow = NULL;
}

void
gr_members_live_end (struct gr_members *ms, int i)
{
  pthread_rwlock_wrlock (&ms->shadow_lock);
  live_drop_locked (ms, i);
  pthread_rwlock_unlock (&ms->shadow_lock);
}

bool
gr_members_live_swap (struct gr_members *ms, int i)
{
  struct member *mb = &ms->mem[i];
  struct gr_disk *old;
  char *oldpath;
  bool ok = true;
  int e;

  pthread_mutex_lock (&ms->lock);
  if (!gr_members_live (ms, i, NULL, NULL, 0) || mb->failed) {
    pthread_mutex_unlock (&ms->lock);
    return false;
  }
  /* Everything it holds is durable before it is the member. */
  if ((e = gr_disk_sync (mb->shadow)) < 0) {
    nbdkit_error ("live replacement of member %d (%s) failed: fdatasync: "
                  "%s; member %d stays on %s", i, mb->shadow_path,
                  strerror (-e), i, mb->path);
    pthread_rwlock_wrlock (&ms->shadow_lock);
    live_drop_locked (ms, i);
    pthread_rwlock_unlock (&ms->shadow_lock);
    pthread_mutex_unlock (&ms->lock);
    return false;
  }
  /* The slot's storage is the new one now (the same bytes: the block
   * checksums cached stay right); the old one takes the writes as the
   * shadow did, everywhere, until it is stale. */
  pthread_rwlock_wrlock (&ms->shadow_lock);
  old = mb->disk;
  oldpath = mb->path;
  mb->disk = mb->shadow;
  mb->path = mb->shadow_path;
  mb->shadow = old;
  mb->shadow_path = oldpath;
  __atomic_store_n (&mb->sfront, UINT64_MAX, __ATOMIC_RELEASE);
  pthread_rwlock_unlock (&ms->shadow_lock);
  /* Two updates the old storage does not get: two events behind, it is
   * stale (format.md, "Why an interrupted update is safe"). */
  if (gr_members_write_sbs_locked (ms) != GR_MEMBERS_OK ||
      gr_members_write_sbs_locked (ms) != GR_MEMBERS_OK)
    ok = false;
  pthread_rwlock_wrlock (&ms->shadow_lock);
  live_drop_locked (ms, i);
  pthread_rwlock_unlock (&ms->shadow_lock);
  pthread_mutex_unlock (&ms->lock);
  return ok && !mb->failed;
}
