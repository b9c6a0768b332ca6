/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - healing online: replacements, spares and re-adds (part of the
 * heal module).  See heal.h. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heal.h"
#include "heal-internal.h"
#include "events.h"
#include "log.h"
#include "members.h"
#include "rebuild.h"
#include "format/format.h"

/* Zero [0, len) of d and sync it.  0 or -errno. */
static int
zero_metadata (struct gr_disk *d, uint64_t len)
{
  const int r = gr_disk_zero (d, 0, len);

  return r < 0 ? r : gr_disk_sync (d);
}

/* Write d's superblock as a spare of the array's and sync it.  0 or
 * -errno. */
static int
write_spare_sb (struct gr_heal *h, struct gr_disk *d)
{
  gr_sb_buf buf;
  struct gr_sb sb, sp;
  int r;

  gr_members_sb (h->ms, &sb);
  gr_sb_spare (&sb, &sp);
  gr_sb_encode (&sp, buf);
  r = gr_disk_pwrite (d, buf, GR_SB_SIZE, 0);
  return r < 0 ? r : gr_disk_sync (d);
}

/* Can path take a member's place (not member i: -1 for any)?  STARTED
 * with *d open (read-write) if so; nothing is written. */
enum gr_heal_outcome
gr_heal_check_path_locked (struct gr_heal *h, int i, const char *path,
                           struct gr_disk **d, int *err, bool taking)
{
  struct gr_sb sb, old;
  gr_sb_buf buf;
  char why[256];
  enum gr_heal_outcome o = GR_HEAL_STARTED;
  int which, s;

  *err = 0;
  gr_members_sb (h->ms, &sb);
  switch (gr_disk_open (path, false, d, err, why, sizeof why)) {
  case GR_DISK_OPENED: break;
  case GR_DISK_OPENED_BUFFERED:
    if (taking)
      gr_warn ("member %d (%s): %s; buffered (direct=auto), through the "
               "page cache", i, path, why);
    break;
  case GR_DISK_NO_DIRECT:
    gr_debug ("%s: %s", path, why);
    return GR_HEAL_NO_DIRECT;
  case GR_DISK_CANNOT_OPEN:
    gr_debug ("%s: cannot open: %s", path, why);
    if (*err == 0)
      *err = EIO;
    return GR_HEAL_CANNOT_OPEN;
  case GR_DISK_NOT_STORAGE: return GR_HEAL_NOT_FILE;
  case GR_DISK_NO_NBD: return GR_HEAL_NO_NBD;
  case GR_DISK_READ_ONLY_EXPORT: return GR_HEAL_READ_ONLY_EXPORT;
  }
  if (gr_members_same_disk (h->ms, *d, &which) && which != i) {
    *err = which;
    o = GR_HEAL_IS_MEMBER;
  }
  for (s = 0; o == GR_HEAL_STARTED && s < h->nspares; s++)
    if (gr_disk_is (*d, h->spares[s].path))
      o = GR_HEAL_IS_SPARE;
  if (o == GR_HEAL_STARTED &&
      gr_disk_size (*d) < sb.data_offset + sb.data_size)
    o = GR_HEAL_TOO_SMALL;
  if (o == GR_HEAL_STARTED &&
      gr_disk_pread (*d, buf, GR_SB_SIZE, 0) == 0 &&
      gr_sb_decode (buf, &old) == 0) {
    if (memcmp (old.uuid, sb.uuid, sizeof sb.uuid) != 0)
      o = GR_HEAL_OTHER_ARRAY;
    /* A spare or a replacement that is a current member of this array
     * the member list left out (yesterday's list after a takeover):
     * current as assembly counts it (one event behind at most), for a
     * slot missing since the start (a member failed while running is one
     * event behind too); not a replacement whose rebuild did not finish
     * (its superblock says so, or records its slot failed).  Named as
     * its own slot's replacement it is refused too: given as the member,
     * it needs no rebuild. */
    else if (old.index < (uint32_t) gr_members_n (h->ms) &&
             !(old.flags & (GR_SB_FLAG_REBUILDING | GR_SB_FLAG_SPARE)) &&
             !gr_sb_failed_test (&old, (int) old.index) &&
             old.event + 1 >= sb.event &&
             gr_members_state (h->ms, (int) old.index)
             == GR_MEMBER_MISSING) {
      *err = (int) old.index;
      o = GR_HEAL_CURRENT_MEMBER;
    }
  }
  if (o != GR_HEAL_STARTED) {
    gr_disk_close (*d);
    *d = NULL;
  }
  return o;
}

/* Under h->lock: member i's rebuild begun onto d (path), the first zero
 * bytes of it zeroed (its metadata: what is not trusted of it); readd: d
 * is the member itself, back.  STARTED (the pass not started yet), or
 * IO_ERROR with *err; d is owned from now on. */
static enum gr_heal_outcome
begin_locked (struct gr_heal *h, int i, const char *path, struct gr_disk *d,
              uint64_t zero, bool readd, int *err)
{
  const int r = zero_metadata (d, zero);

  if (r < 0) {
    *err = -r;
    gr_disk_close (d);
    return GR_HEAL_IO_ERROR;
  }
  switch (gr_members_rebuild_begin (h->ms, i, path, d, readd)) {
  case GR_MEMBERS_OK:
    break;
  case GR_MEMBERS_IO_ERROR:
    *err = errno;
    return GR_HEAL_IO_ERROR;
  case GR_MEMBERS_ARRAY_FAILED: {
    bool one[GR_MAX_MEMBERS] = { false };

    one[i] = true;
    gr_members_rebuild_end (h->ms, one, GR_REBUILD_ABANDONED);
    return GR_HEAL_IO_ERROR;
  }
  }
  h->auto_m[i] = false;
  return GR_HEAL_STARTED;
}

/* Under h->lock.  was: for a spare put in, the member's state before
 * ("failed", "missing"; said in the event), NULL for a replace. */
static enum gr_heal_outcome
replace_locked (struct gr_heal *h, int i, const char *path, const char *was,
                int *err)
{
  struct gr_sb sb;
  enum gr_heal_outcome o;
  struct gr_disk *d;
  int r;

  *err = 0;
  gr_members_sb (h->ms, &sb);
  if (i < 0 || i >= gr_members_n (h->ms))
    return GR_HEAL_NO_SUCH_MEMBER;
  if (gr_members_read_only_p (h->ms))
    return GR_HEAL_READ_ONLY;
  if (gr_heal_blocks_rebuild_locked (h))
    return GR_HEAL_BUSY;
  if (gr_members_state (h->ms, i) == GR_MEMBER_ACTIVE)
    return GR_HEAL_ACTIVE;
  if (gr_members_state (h->ms, i) == GR_MEMBER_REBUILDING)
    return GR_HEAL_REBUILDING;
  o = gr_heal_check_path_locked (h, i, path, &d, err, true);
  if (o != GR_HEAL_STARTED)
    return o;
  /* Its old superblock, bitmap and journal go: until the rebuild ends it
   * is no member (a restart finds no superblock there). */
  r = begin_locked (h, i, path, d, sb.data_offset, false, err);
  if (r == GR_HEAL_STARTED && was)
    gr_event (GR_EV_SPARE_ACTIVATED, i, path, NULL, "was=%s", was);
  return r == GR_HEAL_STARTED && !gr_heal_rebuild_locked (h, i)
    ? GR_HEAL_IO_ERROR : (enum gr_heal_outcome) r;
}

/* Under h->lock: re-add member i from d (open, path: its own file,
 * back): only the regions the degraded map marks are rebuilt where its
 * superblock says it left while the map was kept (*full false), else a
 * full rebuild onto it.  d is owned from now on. */
static enum gr_heal_outcome
readd_locked (struct gr_heal *h, int i, const char *path, struct gr_disk *d,
              bool *full, int *err)
{
  struct gr_sb sb, own;
  gr_sb_buf buf;
  int which, r;

  *err = 0;
  *full = true;
  gr_members_sb (h->ms, &sb);
  if (gr_members_same_disk (h->ms, d, &which) && which != i) {
    *err = which;
    gr_disk_close (d);
    return GR_HEAL_IS_MEMBER;
  }
  if (gr_disk_size (d) < sb.data_offset + sb.data_size) {
    gr_disk_close (d);
    return GR_HEAL_TOO_SMALL;
  }
  r = gr_disk_pread (d, buf, GR_SB_SIZE, 0);
  if (r < 0 || gr_sb_decode (buf, &own) != 0) {
    gr_disk_close (d);
    *err = i;
    return r < 0 ? GR_HEAL_CANNOT_OPEN : GR_HEAL_NOT_THIS_MEMBER;
  }
  if (memcmp (own.uuid, sb.uuid, sizeof sb.uuid) != 0) {
    gr_disk_close (d);
    return GR_HEAL_OTHER_ARRAY;
  }
  if (own.index != (uint32_t) i || (own.flags & GR_SB_FLAG_SPARE)) {
    gr_disk_close (d);
    *err = i;
    return GR_HEAL_NOT_THIS_MEMBER;
  }
  *full = !gr_readd_covered (&sb, &own) || !gr_bitmap_degraded_kept (h->b);
  /* Its superblock, bitmap and journal go (stale); the checksum area and
   * the data stay, kept where the degraded map does not mark them. */
  r = begin_locked (h, i, path, d, *full ? sb.data_offset
                    : gr_sb_journal_end (&sb), !*full, err);
  return r == GR_HEAL_STARTED && !gr_heal_rebuild_locked (h, i)
    ? GR_HEAL_IO_ERROR : (enum gr_heal_outcome) r;
}

/* The bytes a re-add rebuilds, for the log. */
static uint64_t
readd_bytes (struct gr_heal *h)
{
  return gr_bitmap_map_bytes (h->b, true, gr_map_stripe_width
                              (gr_exec_geom (h->x)));
}

/* Under h->lock: the members back at assembly re-added, if nothing stops
 * it. */
static void
readd_back_locked (struct gr_heal *h)
{
  for (int i = 0; i < gr_members_n (h->ms); i++) {
    enum gr_heal_outcome o;
    char why[256];
    bool full;
    int err;

    if (h->back[i].d == NULL || gr_heal_blocks_rebuild_locked (h))
      continue;
    gr_warn ("member %d (%s) is back: re-adding it, %" PRIu64 " MiB written "
             "since it left rebuilt", i, h->back[i].path,
             readd_bytes (h) >> 20);
    o = readd_locked (h, i, h->back[i].path, h->back[i].d, &full, &err);
    h->back[i].d = NULL;
    if (o != GR_HEAL_STARTED) {
      gr_heal_explain (o, err, why, sizeof why);
      gr_warn ("member %d (%s) could not be re-added: %s", i,
               h->back[i].path, why);
    }
    free (h->back[i].path);
    h->back[i].path = NULL;
  }
}

/* The thread's step, under h->lock: a spare put in for a member that
 * needs one, if nothing stops it. */
void
gr_heal_use_spare_locked (struct gr_heal *h)
{
  struct gr_progress p;
  int i, s, err;

  for (i = 0; i < gr_members_n (h->ms); i++) {
    const enum gr_member_state st = gr_members_state (h->ms, i);

    if (!h->auto_m[i] || st == GR_MEMBER_REBUILDING)
      continue;
    h->auto_m[i] = false;
    if (st != GR_MEMBER_ACTIVE && !h->stopping) {
      h->no_auto[i] = true;
      gr_warn ("the rebuild of member %d onto a spare ended without "
               "finishing: spares are not used for it again (gpuraidctl "
               "replace)", i);
    }
  }
  readd_back_locked (h);
  if (h->resume && !gr_heal_blocks_rebuild_locked (h)) {
    uint64_t front[GR_MAX_MEMBERS];

    gr_members_rebuilding (h->ms, front);
    for (i = 0; i < gr_members_n (h->ms); i++)
      if (gr_members_state (h->ms, i) == GR_MEMBER_REBUILDING)
        gr_warn ("resuming the rebuild of member %d (%s) at stripe %" PRIu64
                 " (its checkpoint)", i, gr_members_path (h->ms, i),
                 front[i]);
    if (!gr_heal_rebuild_locked (h, -1))
      gr_warn ("the rebuild could not be resumed (see the error before)");
    h->resume = false;
    return;
  }
  if (h->nspares == 0 || gr_members_read_only_p (h->ms) ||
      gr_members_too_degraded (h->ms))
    return;
  for (i = 0; i < gr_members_n (h->ms); i++) {
    const enum gr_member_state st = gr_members_state (h->ms, i);

    if ((st != GR_MEMBER_FAILED && st != GR_MEMBER_MISSING) || h->no_auto[i])
      continue;
    for (s = 0; s < h->nspares; s++)
      if (h->spares[s].member == i)
        break;
    if (s == h->nspares)
      for (s = 0; s < h->nspares; s++)
        if (h->spares[s].member < 0)
          break;
    if (s == h->nspares)
      continue;
    if (h->scrub) {             /* a rebuild comes first */
      gr_scrub_progress (h->scrub, &p);
      if (p.state == GR_JOB_RUNNING) {
        gr_warn ("scrub stopped to rebuild member %d onto a spare; the "
                 "next gpuraidctl scrub goes on from there", i);
        gr_scrub_stop (h->scrub);
      }
    }
    if (gr_heal_blocks_rebuild_locked (h))
      return;
    {
      struct spare sp = h->spares[s];

      memmove (&h->spares[s], &h->spares[s + 1],
               (size_t) (h->nspares - s - 1) * sizeof *h->spares);
      h->nspares--;
      if (replace_locked (h, i, sp.path, st == GR_MEMBER_FAILED ? "failed"
                          : "missing", &err) == GR_HEAL_STARTED) {
        gr_warn ("member %d is %s: rebuilding it onto %s %s", i,
                 st == GR_MEMBER_FAILED ? "failed" : "missing",
                 sp.member < 0 ? "spare" : "its replacement (replace=)",
                 sp.path);
        h->auto_m[i] = true;
      }
      else
        gr_warn ("%s %s cannot take member %d's place (%s): dropped",
                 sp.member < 0 ? "spare" : "replacement", sp.path, i,
                 err > 0 ? strerror (err) : "it changed since it was "
                 "added");
      free (sp.path);
    }
  }
}

enum gr_heal_outcome
gr_heal_replace (struct gr_heal *h, int i, const char *path, int *err)
{
  enum gr_heal_outcome o;

  pthread_mutex_lock (&h->lock);
  o = replace_locked (h, i, path, NULL, err);
  if (o == GR_HEAL_STARTED)
    h->no_auto[i] = false;
  pthread_mutex_unlock (&h->lock);
  return o;
}

enum gr_heal_outcome
gr_heal_replace_live (struct gr_heal *h, int i, const char *path, int *err)
{
  enum gr_heal_outcome o = GR_HEAL_STARTED;
  struct gr_sb sb;
  struct gr_disk *d;
  int r;

  *err = 0;
  pthread_mutex_lock (&h->lock);
  gr_members_sb (h->ms, &sb);
  if (i < 0 || i >= gr_members_n (h->ms))
    o = GR_HEAL_NO_SUCH_MEMBER;
  else if (gr_members_read_only_p (h->ms))
    o = GR_HEAL_READ_ONLY;
  else if (gr_members_state (h->ms, i) != GR_MEMBER_ACTIVE)
    o = GR_HEAL_NOT_ACTIVE;
  else if (gr_heal_copying_locked (h) || gr_heal_blocks_rebuild_locked (h))
    o = GR_HEAL_BUSY;
  else if ((o = gr_heal_check_path_locked (h, -1, path, &d, err, true))
           == GR_HEAL_STARTED) {
    /* Nothing of it is trusted until it takes the slot. */
    r = zero_metadata (d, sb.data_offset);
    if (r < 0) {
      *err = -r;
      gr_disk_close (d);
      o = GR_HEAL_IO_ERROR;
    }
    else if (gr_members_live_begin (h->ms, i, path, d) != GR_MEMBERS_OK) {
      *err = errno;
      o = GR_HEAL_IO_ERROR;
    }
    else {
      gr_copy_stop (h->copy);
      h->copy = gr_copy_start (h->x, i, h->rate);
      h->last_job = GR_HEAL_JOB_REPLACE;
      if (h->copy == NULL)
        o = GR_HEAL_IO_ERROR;
    }
  }
  pthread_mutex_unlock (&h->lock);
  return o;
}

enum gr_heal_outcome
gr_heal_readd (struct gr_heal *h, int i, const char *path, bool *full,
               int *err)
{
  enum gr_heal_outcome o;
  struct gr_disk *d;
  char why[256];

  *err = 0;
  *full = false;
  o = GR_HEAL_IO_ERROR;
  pthread_mutex_lock (&h->lock);
  if (i < 0 || i >= gr_members_n (h->ms))
    o = GR_HEAL_NO_SUCH_MEMBER;
  else if (gr_members_read_only_p (h->ms))
    o = GR_HEAL_READ_ONLY;
  else if (gr_members_state (h->ms, i) == GR_MEMBER_ACTIVE)
    o = GR_HEAL_ACTIVE;
  else if (gr_members_state (h->ms, i) == GR_MEMBER_REBUILDING)
    o = GR_HEAL_REBUILDING;
  else if (gr_heal_blocks_rebuild_locked (h))
    o = GR_HEAL_BUSY;
  else if (path == NULL && (path = gr_members_path (h->ms, i)) == NULL)
    o = GR_HEAL_NO_PATH;
  else {
    switch (gr_disk_open (path, false, &d, err, why, sizeof why)) {
    case GR_DISK_OPENED_BUFFERED:
      gr_warn ("member %d (%s): %s; buffered (direct=auto), through the "
               "page cache", i, path, why);
      /* fall through */
    case GR_DISK_OPENED:
      o = readd_locked (h, i, path, d, full, err);
      if (o == GR_HEAL_STARTED)
        h->no_auto[i] = false;
      break;
    case GR_DISK_CANNOT_OPEN:
      gr_debug ("%s: cannot open: %s", path, why);
      if (*err == 0)
        *err = EIO;
      o = GR_HEAL_CANNOT_OPEN;
      break;
    case GR_DISK_NOT_STORAGE: o = GR_HEAL_NOT_FILE; break;
    case GR_DISK_NO_NBD: o = GR_HEAL_NO_NBD; break;
    case GR_DISK_READ_ONLY_EXPORT: o = GR_HEAL_READ_ONLY_EXPORT; break;
    case GR_DISK_NO_DIRECT: o = GR_HEAL_NO_DIRECT; break;
    }
  }
  pthread_mutex_unlock (&h->lock);
  return o;
}

void
gr_heal_readd_at_start (struct gr_heal *h, int i, const char *path,
                        struct gr_disk *d)
{
  pthread_mutex_lock (&h->lock);
  gr_disk_close (h->back[i].d);
  free (h->back[i].path);
  h->back[i].d = d;
  h->back[i].path = strdup (path);
  pthread_mutex_unlock (&h->lock);
}

uint64_t
gr_heal_readd_bytes (struct gr_heal *h)
{
  return readd_bytes (h);
}

enum gr_heal_outcome
gr_heal_spare_add (struct gr_heal *h, const char *path, int member,
                   int *err)
{
  enum gr_heal_outcome o = GR_HEAL_STARTED;
  char *copy;
  struct gr_disk *d;

  *err = 0;
  pthread_mutex_lock (&h->lock);
  if (member >= gr_members_n (h->ms))
    o = GR_HEAL_NO_SUCH_MEMBER;
  else if (member >= 0 && gr_members_state (h->ms, member)
           == GR_MEMBER_ACTIVE)
    o = GR_HEAL_ACTIVE;
  else if (gr_members_read_only_p (h->ms))
    o = GR_HEAL_READ_ONLY;
  else if (h->nspares == MAX_SPARES) {
    o = GR_HEAL_IO_ERROR;
    *err = ENOSPC;
  }
  else if ((o = gr_heal_check_path_locked (h, member, path, &d, err, false))
           == GR_HEAL_STARTED) {
    /* A spare says so on itself: a scan finds it again. */
    const int r = write_spare_sb (h, d);

    gr_disk_close (d);
    copy = r < 0 ? NULL : strdup (path);
    if (r < 0)
      *err = -r;
    else if (copy == NULL)
      *err = ENOMEM;
    if (copy == NULL)
      o = GR_HEAL_IO_ERROR;
    else {
      h->spares[h->nspares++] = (struct spare) { .path = copy,
                                                 .member = member };
      pthread_cond_broadcast (&h->cond);
    }
  }
  pthread_mutex_unlock (&h->lock);
  return o;
}

bool
gr_heal_spare (struct gr_heal *h, int i, char *path, size_t len)
{
  bool r;

  pthread_mutex_lock (&h->lock);
  r = i < h->nspares;
  if (r)
    snprintf (path, len, "%s", h->spares[i].path);
  pthread_mutex_unlock (&h->lock);
  return r;
}

