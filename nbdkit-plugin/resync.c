/* gpuraid - resync after an unclean shutdown.  See resync.h. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "log.h"
#include "resync.h"

struct gr_resync {
  struct gr_exec *x;
  struct gr_bitmap *b;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond;          /* stop, or a new rate */
  bool stop;                    /* under lock */
  /* Under lock: the limit, and the time and bytes done when it was set
   * (the pace is measured from there). */
  uint64_t rate;
  double rate_t0;
  uint64_t rate_done0;
  /* Progress, atomic: array bytes done and to do, start time (seconds,
   * CLOCK_MONOTONIC, as double bits) and enum gr_resync_state. */
  uint64_t done, total;
  double t0;
  int state;
};

static double
now (void)
{
  struct timespec t;

  clock_gettime (CLOCK_MONOTONIC, &t);
  return (double) t.tv_sec + t.tv_nsec / 1e9;
}

/* Keep the pace of the rate limit: wait while the bytes done are ahead
 * of it (a new limit is applied at once).  Returns whether to stop. */
static bool
throttle (struct gr_resync *rs)
{
  bool stop;

  pthread_mutex_lock (&rs->lock);
  while (!rs->stop && rs->rate > 0) {
    uint64_t done = __atomic_load_n (&rs->done, __ATOMIC_RELAXED);
    double left = rs->rate_t0 + (double) (done - rs->rate_done0) / rs->rate
      - now ();
    struct timespec ts;

    if (left <= 0)
      break;
    clock_gettime (CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t) left;
    ts.tv_nsec += (long) ((left - (double) (time_t) left) * 1e9);
    if (ts.tv_nsec >= 1000000000) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait (&rs->cond, &rs->lock, &ts);
  }
  stop = rs->stop;
  pthread_mutex_unlock (&rs->lock);
  return stop;
}

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
  bool failed[GR_MAX_MEMBERS];
  struct gr_plan_ctx c;

  while (pos < end) {
    enum gr_exec_outcome o;

    gr_exec_plan_ctx (rs->x, failed, &c);
    if (gr_plan_next (&c, GR_REQ_RESYNC, pos, end - pos, p)
        != GR_PLAN_RESYNC)
      return REGION_FAILED;     /* degraded */
    o = gr_exec_run (rs->x, p, NULL, GR_MIO_FAIL_MEMBER, res);
    if (o == GR_EXEC_REPLAN)
      continue;                 /* a member failed: the next plan says */
    if (o != GR_EXEC_DONE)
      return REGION_FAILED;
    pos += p->len;
    __atomic_add_fetch (&rs->done, p->len, __ATOMIC_RELAXED);
    if (throttle (rs))
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
  const double t0 = rs->t0;
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
      __atomic_store_n (&rs->state, GR_RESYNC_STOPPED, __ATOMIC_RELEASE);
      return NULL;
    case REGION_FAILED:
      gr_warn ("resync stopped (%d of %d members failed): "
               "%" PRIu64 " of %" PRIu64 " regions were not resynced, and "
               "rebuilding a lost chunk from their parity fails with EIO",
               gr_members_nfailed (ms), gr_members_n (ms), todo - ndone,
               todo);
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
                now () - t0, res.rewritten);
    }
  }
  __atomic_store_n (&rs->state, GR_RESYNC_DONE, __ATOMIC_RELEASE);
  gr_warn ("resync done: %" PRIu64 " stripes checked, %" PRIu64 " parity "
           "chunks were inconsistent and rewritten (%" PRIu64 " of %"
           PRIu64 " regions, %.1f s)", stripes, res.rewritten, todo, nreg,
           now () - t0);
  return NULL;
}

struct gr_resync *
gr_resync_start (struct gr_exec *x, struct gr_bitmap *b, uint64_t rate)
{
  struct gr_resync *rs = calloc (1, sizeof *rs);
  int e;

  if (rs == NULL) {
    nbdkit_error ("resync: %m");
    return NULL;
  }
  rs->x = x;
  rs->b = b;
  rs->rate = rate;
  rs->t0 = rs->rate_t0 = now ();
  rs->state = GR_RESYNC_RUNNING;
  pthread_mutex_init (&rs->lock, NULL);
  pthread_cond_init (&rs->cond, NULL);
  e = pthread_create (&rs->thread, NULL, resync_thread, rs);
  if (e != 0) {
    errno = e;
    nbdkit_error ("resync: pthread_create: %m");
    pthread_mutex_destroy (&rs->lock);
    pthread_cond_destroy (&rs->cond);
    free (rs);
    return NULL;
  }
  return rs;
}

bool
gr_resync_stop (struct gr_resync *rs)
{
  bool complete;

  pthread_mutex_lock (&rs->lock);
  rs->stop = true;
  pthread_cond_broadcast (&rs->cond);
  pthread_mutex_unlock (&rs->lock);
  pthread_join (rs->thread, NULL);
  complete = rs->state == GR_RESYNC_DONE;
  pthread_mutex_destroy (&rs->lock);
  pthread_cond_destroy (&rs->cond);
  free (rs);
  return complete;
}

void
gr_resync_set_rate (struct gr_resync *rs, uint64_t rate)
{
  pthread_mutex_lock (&rs->lock);
  rs->rate = rate;
  rs->rate_t0 = now ();
  rs->rate_done0 = __atomic_load_n (&rs->done, __ATOMIC_RELAXED);
  pthread_cond_broadcast (&rs->cond);
  pthread_mutex_unlock (&rs->lock);
}

void
gr_resync_progress (struct gr_resync *rs, struct gr_resync_progress *out)
{
  out->state = __atomic_load_n (&rs->state, __ATOMIC_ACQUIRE);
  out->done_bytes = __atomic_load_n (&rs->done, __ATOMIC_RELAXED);
  out->total_bytes = __atomic_load_n (&rs->total, __ATOMIC_RELAXED);
  out->seconds = now () - rs->t0;
  pthread_mutex_lock (&rs->lock);
  out->rate_limit = rs->rate;
  pthread_mutex_unlock (&rs->lock);
}
