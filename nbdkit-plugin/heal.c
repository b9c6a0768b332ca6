/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - healing online.  See heal.h. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "heal.h"
#include "log.h"
#include "members.h"
#include "rebuild.h"
#include "format/format.h"

#define MAX_SPARES 32

struct spare {
  char *path;
  int member;                   /* replace=: for this member; -1: any */
};

struct gr_heal {
  struct gr_exec *x;
  struct gr_members *ms;
  struct gr_bitmap *b;
  struct gr_resync *rs;
  uint64_t rate;
  pthread_mutex_t lock;
  pthread_cond_t cond;          /* wakes the thread: a spare, a stop */
  pthread_t thread;
  bool started, stopping;
  struct gr_rebuild *rebuild;   /* the last one started, running or ended */
  struct gr_scrub *scrub;       /* the same */
  enum gr_heal_job last_job;
  struct spare spares[MAX_SPARES];
  int nspares;
  bool auto_m[GR_MAX_MEMBERS];  /* being rebuilt onto a spare */
  bool resume;                  /* rebuilds to resume (at assembly) */
  bool no_auto[GR_MAX_MEMBERS]; /* its rebuild onto a spare failed */
};

/* Under h->lock: does a resync or a scrub run (what a rebuild waits
 * for)? */
static bool
blocks_rebuild_locked (struct gr_heal *h)
{
  struct gr_progress p;

  if (h->rs) {
    gr_resync_progress (h->rs, &p);
    if (p.state == GR_JOB_RUNNING)
      return true;
  }
  if (h->scrub) {
    gr_scrub_progress (h->scrub, &p);
    if (p.state == GR_JOB_RUNNING)
      return true;
  }
  return false;
}

/* Under h->lock. */
static bool
running_locked (struct gr_heal *h)
{
  struct gr_progress p;

  if (h->rebuild) {
    gr_rebuild_progress (h->rebuild, &p);
    if (p.state == GR_JOB_RUNNING)
      return true;
  }
  return blocks_rebuild_locked (h);
}

/* Under h->lock: rebuild the members being rebuilt in one pass: member
 * i (just begun; -1: none) joins the running pass, or a new pass starts
 * for all of them from the least front.  false after nbdkit_error. */
static bool
rebuild_locked (struct gr_heal *h, int i)
{
  const struct gr_geom *g = gr_exec_geom (h->x);
  uint64_t front[GR_MAX_MEMBERS], from = UINT64_MAX;
  bool which[GR_MAX_MEMBERS] = { false };

  h->last_job = GR_HEAL_JOB_REBUILD;
  if (i >= 0 && h->rebuild && gr_rebuild_add (h->rebuild, i))
    return true;
  gr_rebuild_stop (h->rebuild);         /* ended, or ending */
  h->rebuild = NULL;
  if (gr_members_rebuilding (h->ms, front) == 0)
    return i < 0;
  for (int j = 0; j < g->k + g->m; j++)
    if (gr_members_state (h->ms, j) == GR_MEMBER_REBUILDING) {
      which[j] = true;
      if (front[j] < from)
        from = front[j];
    }
  h->rebuild = gr_rebuild_start (h->x, h->b, which, from, h->rate);
  return h->rebuild != NULL;
}

/* Zero [0, len) of d and sync it.  0 or -errno. */
static int
zero_metadata (struct gr_disk *d, uint64_t len)
{
  const int r = gr_disk_zero (d, 0, len);

  return r < 0 ? r : gr_disk_sync (d);
}

/* Can path take a member's place (not member i: -1 for any)?  STARTED
 * with *d open (read-write) if so; nothing is written.  taking: it is
 * taken now (a device that refused O_DIRECT under direct=auto is said
 * then, once, not each time a spare is checked). */
static enum gr_heal_outcome
check_path (struct gr_heal *h, int i, const char *path, struct gr_disk **d,
            int *err, bool taking)
{
  struct gr_sb sb, old;
  uint8_t buf[GR_SB_SIZE];
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
             !(old.flags & GR_SB_FLAG_REBUILDING) &&
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

/* Under h->lock. */
static enum gr_heal_outcome
replace_locked (struct gr_heal *h, int i, const char *path, int *err)
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
  if (blocks_rebuild_locked (h))
    return GR_HEAL_BUSY;
  if (gr_members_state (h->ms, i) == GR_MEMBER_ACTIVE)
    return GR_HEAL_ACTIVE;
  if (gr_members_state (h->ms, i) == GR_MEMBER_REBUILDING)
    return GR_HEAL_REBUILDING;
  o = check_path (h, i, path, &d, err, true);
  if (o != GR_HEAL_STARTED)
    return o;
  /* Its old superblock, bitmap and journal go: until the rebuild ends it
   * is no member (a restart finds no superblock there). */
  r = zero_metadata (d, sb.data_offset);
  if (r < 0) {
    *err = -r;
    gr_disk_close (d);
    return GR_HEAL_IO_ERROR;
  }
  switch (gr_members_rebuild_begin (h->ms, i, path, d)) {
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
  return rebuild_locked (h, i) ? GR_HEAL_STARTED : GR_HEAL_IO_ERROR;
}

/* The thread's step, under h->lock: a spare put in for a member that
 * needs one, if nothing stops it. */
static void
use_spare_locked (struct gr_heal *h)
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
  if (h->resume && !blocks_rebuild_locked (h)) {
    uint64_t front[GR_MAX_MEMBERS];

    gr_members_rebuilding (h->ms, front);
    for (i = 0; i < gr_members_n (h->ms); i++)
      if (gr_members_state (h->ms, i) == GR_MEMBER_REBUILDING)
        gr_warn ("resuming the rebuild of member %d (%s) at stripe %" PRIu64
                 " (its checkpoint)", i, gr_members_path (h->ms, i),
                 front[i]);
    if (!rebuild_locked (h, -1))
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
    if (blocks_rebuild_locked (h))
      return;
    {
      struct spare sp = h->spares[s];

      memmove (&h->spares[s], &h->spares[s + 1],
               (size_t) (h->nspares - s - 1) * sizeof *h->spares);
      h->nspares--;
      if (replace_locked (h, i, sp.path, &err) == GR_HEAL_STARTED) {
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

void
gr_heal_journal_again (struct gr_heal *h)
{
  uint64_t failures;

  if (!gr_members_journal_lost (h->ms, &failures))
    return;
  gr_exec_journal_drain (h->x);
  if (gr_members_journaled (h->ms, failures) == GR_MEMBERS_OK)
    gr_debug ("every write since the last member failure is journaled: "
              "recorded in the superblocks");
}

void
gr_heal_member_failed (struct gr_heal *h)
{
  gr_heal_journal_again (h);
  pthread_mutex_lock (&h->lock);
  if (h->started && !h->stopping)
    use_spare_locked (h);
  pthread_mutex_unlock (&h->lock);
}

static void *
heal_thread (void *arg)
{
  struct gr_heal *h = arg;

  pthread_mutex_lock (&h->lock);
  while (!h->stopping) {
    struct timespec t;

    pthread_mutex_unlock (&h->lock);
    gr_heal_journal_again (h);
    pthread_mutex_lock (&h->lock);
    use_spare_locked (h);
    clock_gettime (CLOCK_REALTIME, &t);
    t.tv_nsec += 200 * 1000 * 1000;
    if (t.tv_nsec >= 1000000000) {
      t.tv_sec++;
      t.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait (&h->cond, &h->lock, &t);
  }
  pthread_mutex_unlock (&h->lock);
  return NULL;
}

struct gr_heal *
gr_heal_new (struct gr_exec *x, struct gr_bitmap *b, uint64_t rate)
{
  struct gr_heal *h = calloc (1, sizeof *h);

  if (h == NULL) {
    nbdkit_error ("heal: %m");
    return NULL;
  }
  h->x = x;
  h->ms = gr_exec_members (x);
  h->b = b;
  h->rate = rate;
  pthread_mutex_init (&h->lock, NULL);
  pthread_cond_init (&h->cond, NULL);
  return h;
}

int
gr_heal_start (struct gr_heal *h, struct gr_resync *rs)
{
  uint64_t front[GR_MAX_MEMBERS];
  int e;

  h->rs = rs;
  /* Rebuilds resumed at assembly (members.h) go on once the resync is
   * done. */
  h->resume = gr_members_rebuilding (h->ms, front) > 0;
  e = pthread_create (&h->thread, NULL, heal_thread, h);
  if (e != 0) {
    errno = e;
    nbdkit_error ("heal: pthread_create: %m");
    return -1;
  }
  h->started = true;
  return 0;
}

void
gr_heal_free (struct gr_heal *h)
{
  if (h == NULL)
    return;
  if (h->started) {
    pthread_mutex_lock (&h->lock);
    h->stopping = true;
    pthread_cond_broadcast (&h->cond);
    pthread_mutex_unlock (&h->lock);
    pthread_join (h->thread, NULL);
  }
  gr_rebuild_stop (h->rebuild);
  gr_scrub_free (h->scrub);     /* records where the next one goes on */
  for (int s = 0; s < h->nspares; s++)
    free (h->spares[s].path);
  pthread_cond_destroy (&h->cond);
  pthread_mutex_destroy (&h->lock);
  free (h);
}

void
gr_heal_set_rate (struct gr_heal *h, uint64_t rate)
{
  pthread_mutex_lock (&h->lock);
  h->rate = rate;
  if (h->rebuild)
    gr_rebuild_set_rate (h->rebuild, rate);
  if (h->scrub)
    gr_scrub_set_rate (h->scrub, rate);
  pthread_mutex_unlock (&h->lock);
}

enum gr_heal_outcome
gr_heal_replace (struct gr_heal *h, int i, const char *path, int *err)
{
  enum gr_heal_outcome o;

  pthread_mutex_lock (&h->lock);
  o = replace_locked (h, i, path, err);
  if (o == GR_HEAL_STARTED)
    h->no_auto[i] = false;
  pthread_mutex_unlock (&h->lock);
  return o;
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
  else if ((o = check_path (h, member, path, &d, err, false))
           == GR_HEAL_STARTED) {
    gr_disk_close (d);
    copy = strdup (path);
    if (copy == NULL) {
      o = GR_HEAL_IO_ERROR;
      *err = ENOMEM;
    }
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

void
gr_heal_explain (enum gr_heal_outcome o, int err, char *buf, size_t len)
{
  switch (o) {
  case GR_HEAL_STARTED: snprintf (buf, len, "started"); return;
  case GR_HEAL_NO_SUCH_MEMBER: snprintf (buf, len, "no such member"); return;
  case GR_HEAL_ACTIVE:
    snprintf (buf, len, "the member is active (fail it first)");
    return;
  case GR_HEAL_REBUILDING:
    snprintf (buf, len, "the member is being rebuilt (fail it first to "
              "rebuild it onto another file)");
    return;
  case GR_HEAL_BUSY:
    snprintf (buf, len, "a resync, rebuild or scrub is running "
              "(gpuraidctl wait)");
    return;
  case GR_HEAL_READ_ONLY:
    snprintf (buf, len, "the array is read-only (salvage=true)");
    return;
  case GR_HEAL_CANNOT_OPEN: snprintf (buf, len, "%s", strerror (err)); return;
  case GR_HEAL_NOT_FILE:
    snprintf (buf, len, "not a regular file or block device");
    return;
  case GR_HEAL_NO_NBD:
    snprintf (buf, len, "an NBD URI, and this gpuraid was built without "
              "libnbd");
    return;
  case GR_HEAL_READ_ONLY_EXPORT:
    snprintf (buf, len, "the NBD export is read-only");
    return;
  case GR_HEAL_NO_DIRECT:
    snprintf (buf, len, "it refuses O_DIRECT (%s), and direct=on",
              strerror (err));
    return;
  case GR_HEAL_IS_MEMBER:
    snprintf (buf, len, "it is member %d of this array", err);
    return;
  case GR_HEAL_IS_SPARE: snprintf (buf, len, "it is a spare already"); return;
  case GR_HEAL_CURRENT_MEMBER:
    snprintf (buf, len, "it is member %d of this array, current (not "
              "overwritten: give it as member=%d instead of the member list's "
              "file there)", err, err);
    return;
  case GR_HEAL_TOO_SMALL:
    snprintf (buf, len, "smaller than a member (data offset + data size)");
    return;
  case GR_HEAL_OTHER_ARRAY:
    snprintf (buf, len, "it holds a superblock of another gpuraid array "
              "(not overwritten)");
    return;
  case GR_HEAL_IO_ERROR:
    snprintf (buf, len, "%s", err ? strerror (err) : "could not start (see "
              "the server's log)");
    return;
  case GR_HEAL_NO_REDUNDANCY:
    snprintf (buf, len, "%d members have failed: no parity is left to "
              "check against (replace members first)", err);
    return;
  }
  snprintf (buf, len, "?");
}

int
gr_heal_rebuild_progress (struct gr_heal *h, struct gr_progress *p,
                          bool *which)
{
  int count = -1;

  pthread_mutex_lock (&h->lock);
  if (h->rebuild) {
    gr_rebuild_progress (h->rebuild, p);
    count = gr_rebuild_members (h->rebuild, which);
  }
  pthread_mutex_unlock (&h->lock);
  return count;
}

enum gr_heal_outcome
gr_heal_scrub (struct gr_heal *h, bool repair, uint64_t *from)
{
  enum gr_heal_outcome o = GR_HEAL_STARTED;
  struct gr_sb sb;

  pthread_mutex_lock (&h->lock);
  gr_members_sb (h->ms, &sb);
  *from = sb.scrub_at;
  if (running_locked (h))
    o = GR_HEAL_BUSY;
  else if (repair && gr_members_read_only_p (h->ms))
    o = GR_HEAL_READ_ONLY;
  else if (gr_members_nfailed (h->ms) >= (int) sb.m)
    o = GR_HEAL_NO_REDUNDANCY;
  else {
    gr_scrub_free (h->scrub);
    h->scrub = gr_scrub_start (h->x, h->b, repair, h->rate, sb.scrub_at);
    h->last_job = GR_HEAL_JOB_SCRUB;
    if (h->scrub == NULL)
      o = GR_HEAL_IO_ERROR;
  }
  pthread_mutex_unlock (&h->lock);
  return o;
}

bool
gr_heal_scrub_stop (struct gr_heal *h)
{
  struct gr_progress p;
  bool stopped = false;

  pthread_mutex_lock (&h->lock);
  if (h->scrub) {
    gr_scrub_progress (h->scrub, &p);
    if (p.state == GR_JOB_RUNNING) {
      gr_scrub_stop (h->scrub);
      stopped = true;
    }
  }
  pthread_mutex_unlock (&h->lock);
  return stopped;
}

struct gr_scrub *
gr_heal_scrub_last (struct gr_heal *h)
{
  return h->scrub;
}

enum gr_heal_job
gr_heal_operation (struct gr_heal *h, struct gr_progress *p)
{
  struct gr_progress rb, sc, rs;
  enum gr_heal_job job = GR_HEAL_JOB_NONE;

  pthread_mutex_lock (&h->lock);
  if (h->rebuild)
    gr_rebuild_progress (h->rebuild, &rb);
  if (h->scrub)
    gr_scrub_progress (h->scrub, &sc);
  if (h->rs)
    gr_resync_progress (h->rs, &rs);
  if (h->rebuild && rb.state == GR_JOB_RUNNING)
    job = GR_HEAL_JOB_REBUILD;
  else if (h->scrub && sc.state == GR_JOB_RUNNING)
    job = GR_HEAL_JOB_SCRUB;
  else if (h->rs && (rs.state == GR_JOB_RUNNING ||
                     (!h->rebuild && !h->scrub)))
    job = GR_HEAL_JOB_RESYNC;
  else if (h->last_job == GR_HEAL_JOB_SCRUB && h->scrub)
    job = GR_HEAL_JOB_SCRUB;
  else if (h->rebuild)
    job = GR_HEAL_JOB_REBUILD;
  pthread_mutex_unlock (&h->lock);
  switch (job) {
  case GR_HEAL_JOB_REBUILD: *p = rb; break;
  case GR_HEAL_JOB_SCRUB: *p = sc; break;
  case GR_HEAL_JOB_RESYNC: *p = rs; break;
  case GR_HEAL_JOB_NONE: break;
  }
  return job;
}

bool
gr_heal_busy (struct gr_heal *h)
{
  bool r;

  pthread_mutex_lock (&h->lock);
  r = running_locked (h);
  pthread_mutex_unlock (&h->lock);
  return r;
}
