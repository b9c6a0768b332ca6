/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - resync after an unclean shutdown.  See resync.h. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>

#include "log.h"
#include "pace.h"
#include "resync.h"

struct gr_resync {
  struct gr_exec *x;
  struct gr_bitmap *b;
  pthread_t thread;
  struct gr_pace *pace;         /* the rate limit and the stop */
  /* Progress, atomic: array bytes done and to do, and enum
   * gr_resync_state. */
  uint64_t done, total;
  int state;
};

enum region_outcome { REGION_DONE, REGION_STOPPED, REGION_FAILED };

/* Resync the stripes of region r; rs->done counts array bytes. */
static enum region_outcome
resync_region (struct gr_resync *rs, uint64_t r, struct gr_plan *p,
               struct gr_exec_result *res)
{
  const struct gr_geom *g = gr_exec_geom (rs->x);
  uint64_t width = gr_map_stripe_width (g), rsz = gr_bitmap_region_size (rs->b);
  uint64_t s0 = r * rsz, s1 = s0 + rsz < g->stripes ? s0 + rsz : g->stripes;
  uint64_t pos = s0 * width, end = s1 * width;
  struct gr_exec_snap sn;
  struct gr_plan_ctx c;

  while (pos < end) {
    enum gr_exec_outcome o;

    gr_exec_plan_ctx (rs->x, &sn, &c);
    if (gr_plan_next (&c, GR_REQ_RESYNC, pos, end - pos, p)
        != GR_PLAN_RESYNC)
      return REGION_FAILED;     /* degraded */
    o = gr_exec_run (rs->x, p, NULL, GR_MIO_FAIL_MEMBER, res);
    if (o == GR_EXEC_REPLAN)
      continue;                 /* a member failed: the next plan says */
    if (o != GR_EXEC_DONE)
      return REGION_FAILED;
    pos += p->len;
    if (gr_pace_wait (rs->pace, __atomic_add_fetch (&rs->done, p->len,
                                                     __ATOMIC_RELAXED)))
      return REGION_STOPPED;
  }
  return REGION_DONE;
}

static void *
resync_thread (void *arg)
{
  struct gr_resync *rs = arg;
  struct gr_members *ms = gr_exec_members (rs->x);
  const struct gr_geom *g = gr_exec_geom (rs->x);
  uint64_t nreg = gr_bitmap_regions (rs->b), rsz = gr_bitmap_region_size (rs->b);
  const uint64_t width = gr_map_stripe_width (g);
  uint64_t r, todo = 0, ndone = 0, stripes = 0, total = 0;
  struct gr_exec_result res = { .rewritten = 0 };
  struct gr_plan *p = gr_exec_plan (rs->x);
  int last_pct = 0;

  for (r = gr_bitmap_next_pending (rs->b, 0); r < nreg;
       r = gr_bitmap_next_pending (rs->b, r + 1)) {
    uint64_t s1 = (r + 1) * rsz < g->stripes ? (r + 1) * rsz : g->stripes;

    todo++;
    total += (s1 - r * rsz) * width;
  }
  __atomic_store_n (&rs->total, total, __ATOMIC_RELAXED);
  /* The resync writes: the session's dirty update first (it carries the
   * pending bits to every member). */
  if (p == NULL || gr_members_begin_write (ms) == -1) {
    nbdkit_error ("resync: cannot start; %" PRIu64 " regions stay pending",
                  todo);
    gr_pace_finish (rs->pace);
    __atomic_store_n (&rs->state, GR_RESYNC_FAILED, __ATOMIC_RELEASE);
    return NULL;
  }
  for (r = gr_bitmap_next_pending (rs->b, 0); r < nreg;
       r = gr_bitmap_next_pending (rs->b, r + 1)) {
    uint64_t s1 = (r + 1) * rsz < g->stripes ? (r + 1) * rsz : g->stripes;

    switch (resync_region (rs, r, p, &res)) {
    case REGION_DONE:
      break;
    case REGION_STOPPED:
      gr_bitmap_checkpoint (rs->b);
      gr_debug ("resync: stopped at shutdown, %" PRIu64 " of %" PRIu64
                " regions done; the rest at the next start", ndone, todo);
      gr_pace_finish (rs->pace);
      __atomic_store_n (&rs->state, GR_RESYNC_STOPPED, __ATOMIC_RELEASE);
      return NULL;
    case REGION_FAILED:
      gr_warn ("resync stopped (%d of %d members failed): "
               "%" PRIu64 " of %" PRIu64 " regions were not resynced, and "
               "rebuilding a lost chunk from their parity fails with EIO",
               gr_members_nfailed (ms), gr_members_n (ms), todo - ndone,
               todo);
      gr_pace_finish (rs->pace);
      __atomic_store_n (&rs->state, GR_RESYNC_FAILED, __ATOMIC_RELEASE);
      return NULL;
    }
    gr_bitmap_resynced (rs->b, r);
    stripes += s1 - r * rsz;
    ndone++;
    if (ndone * 10 / todo > (uint64_t) last_pct) {
      last_pct = (int) (ndone * 10 / todo);
      gr_bitmap_checkpoint (rs->b);     /* a restart goes on from here */
      gr_debug ("resync: %d0%% (%" PRIu64 " of %" PRIu64 " regions, %"
                PRIu64 " MiB in %.1f s, %" PRIu64 " parity chunks "
                "rewritten)", last_pct, ndone, todo,
                __atomic_load_n (&rs->done, __ATOMIC_RELAXED) >> 20,
                gr_pace_seconds (rs->pace), res.rewritten);
    }
  }
  gr_pace_finish (rs->pace);
  __atomic_store_n (&rs->state, GR_RESYNC_DONE, __ATOMIC_RELEASE);
  gr_warn ("resync done: %" PRIu64 " stripes checked, %" PRIu64 " parity "
           "chunks were inconsistent and rewritten (%" PRIu64 " of %"
           PRIu64 " regions, %.1f s)", stripes, res.rewritten, todo, nreg,
           gr_pace_seconds (rs->pace));
  return NULL;
}

struct gr_resync *
gr_resync_start (struct gr_exec *x, struct gr_bitmap *b, uint64_t rate)
{
  struct gr_resync *rs = calloc (1, sizeof *rs);
  int e;

  if (rs == NULL ||
      (rs->pace = gr_pace_new (rate, gr_exec_requests (x))) == NULL) {
    nbdkit_error ("resync: %m");
    free (rs);
    return NULL;
  }
  rs->x = x;
  rs->b = b;
  rs->state = GR_RESYNC_RUNNING;
  e = pthread_create (&rs->thread, NULL, resync_thread, rs);
  if (e != 0) {
    errno = e;
    nbdkit_error ("resync: pthread_create: %m");
    gr_pace_free (rs->pace);
    free (rs);
    return NULL;
  }
  return rs;
}

bool
gr_resync_stop (struct gr_resync *rs)
{
  bool complete;

  gr_pace_stop (rs->pace);
  pthread_join (rs->thread, NULL);
  complete = rs->state == GR_RESYNC_DONE;
  gr_pace_free (rs->pace);
  free (rs);
  return complete;
}

void
gr_resync_set_rate (struct gr_resync *rs, uint64_t rate)
{
  gr_pace_set_rate (rs->pace, rate,
                    __atomic_load_n (&rs->done, __ATOMIC_RELAXED));
}

void
gr_resync_progress (struct gr_resync *rs, struct gr_resync_progress *out)
{
  out->state = __atomic_load_n (&rs->state, __ATOMIC_ACQUIRE);
  out->done_bytes = __atomic_load_n (&rs->done, __ATOMIC_RELAXED);
  out->total_bytes = __atomic_load_n (&rs->total, __ATOMIC_RELAXED);
  out->from_bytes = 0;
  out->seconds = gr_pace_seconds (rs->pace);
  out->rate_limit = gr_pace_rate (rs->pace);
}
