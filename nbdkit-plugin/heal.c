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
#include "heal-internal.h"
#include "events.h"
#include "log.h"
#include "members.h"
#include "rebuild.h"
#include "format/format.h"
#include "common/thread.h"

/* Under h->lock: does a resync or a scrub run (what a rebuild waits
 * for)? */
bool
gr_heal_blocks_rebuild_locked (struct gr_heal *h)
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
bool
gr_heal_copying_locked (struct gr_heal *h)
{
  struct gr_progress p;

  if (h->copy == NULL)
    return false;
  gr_copy_progress (h->copy, &p);
  return p.state == GR_JOB_RUNNING;
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
  return gr_heal_copying_locked (h) || gr_heal_blocks_rebuild_locked (h);
}

/* Under h->lock: rebuild the members being rebuilt in one pass: member
 * i (just begun; -1: none) joins the running pass, or a new pass starts
 * for all of them from the least front.  false after nbdkit_error. */
bool
gr_heal_rebuild_locked (struct gr_heal *h, int i)
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
    gr_heal_use_spare_locked (h);
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
    gr_heal_use_spare_locked (h);
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
  e = gr_thread_create (&h->thread, NULL, heal_thread, h);
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
  gr_copy_stop (h->copy);       /* abandoned: the member stays */
  gr_rebuild_stop (h->rebuild);
  gr_scrub_free (h->scrub);     /* records where the next one goes on */
  for (int s = 0; s < h->nspares; s++)
    free (h->spares[s].path);
  for (int i = 0; i < GR_MAX_MEMBERS; i++) {
    gr_disk_close (h->back[i].d);
    free (h->back[i].path);
  }
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
  if (h->copy)
    gr_copy_set_rate (h->copy, rate);
  pthread_mutex_unlock (&h->lock);
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
    snprintf (buf, len, "a resync, rebuild, scrub or live replacement is "
              "running (gpuraidctl wait)");
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
  case GR_HEAL_NOT_THIS_MEMBER:
    snprintf (buf, len, "it holds no superblock of member %d of this array "
              "(gpuraidctl replace rebuilds onto it)", err);
    return;
  case GR_HEAL_NO_PATH:
    snprintf (buf, len, "the member was missing since the start: give its "
              "path");
    return;
  case GR_HEAL_NOT_ACTIVE:
    snprintf (buf, len, "the member is not in service (gpuraidctl replace "
              "rebuilds it)");
    return;
  }
  snprintf (buf, len, "?");
}

int
gr_heal_rebuild_progress (struct gr_heal *h, struct gr_progress *p,
                          bool *which, uint64_t *rebuilt, uint64_t *skipped)
{
  int count = -1;

  pthread_mutex_lock (&h->lock);
  if (h->rebuild) {
    gr_rebuild_progress (h->rebuild, p);
    count = gr_rebuild_members (h->rebuild, which);
    gr_rebuild_counts (h->rebuild, rebuilt, skipped);
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
  struct gr_progress rb, sc, rs, cp;
  enum gr_heal_job job = GR_HEAL_JOB_NONE;

  pthread_mutex_lock (&h->lock);
  if (h->copy)
    gr_copy_progress (h->copy, &cp);
  if (h->copy && (cp.state == GR_JOB_RUNNING ||
                  h->last_job == GR_HEAL_JOB_REPLACE)) {
    pthread_mutex_unlock (&h->lock);
    *p = cp;
    return GR_HEAL_JOB_REPLACE;
  }
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
  case GR_HEAL_JOB_REPLACE: /* returned above */
  case GR_HEAL_JOB_NONE: break;
  }
  return job;
}

int
gr_heal_replace_progress (struct gr_heal *h, struct gr_progress *p,
                          char *path, size_t len)
{
  int i = -1;

  pthread_mutex_lock (&h->lock);
  if (h->copy) {
    gr_copy_progress (h->copy, p);
    i = gr_copy_member (h->copy);
    if (!gr_members_live (h->ms, i, NULL, path, len))
      snprintf (path, len, "-");
  }
  pthread_mutex_unlock (&h->lock);
  return i;
}
