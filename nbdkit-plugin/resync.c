/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - resync after an unclean shutdown.  See resync.h. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>

#include "job.h"
#include "log.h"
#include "resync.h"
#include "events.h"

/* Member bytes of every member read per batch, all lanes together. */
#define BATCH_BYTES (64u << 20)

struct gr_resync {
  struct gr_exec *x;
  struct gr_bitmap *b;
  struct gr_job *job;
  bool started;                 /* the session's dirty update is done */
  uint64_t todo;                /* pending regions at the start */
  pthread_mutex_t lock;         /* the counts below; leaf */
  uint64_t ndone, stripes, rewritten;
};

/* The next batch: inside the pending region at or after *s. */
static enum gr_job_next
resync_next (void *arg, bool drained, uint64_t *s, uint64_t *end)
{
  struct gr_resync *rs = arg;
  const struct gr_geom *g = gr_exec_geom (rs->x);
  const uint64_t rsz = gr_bitmap_region_size (rs->b);
  const uint64_t nreg = gr_bitmap_regions (rs->b);
  uint64_t r;

  pthread_mutex_lock (&rs->lock);       /* rs->job is set */
  pthread_mutex_unlock (&rs->lock);
  /* The resync writes: the session's dirty update first (it carries the
   * pending bits to every member). */
  if (!rs->started) {
    if (gr_members_begin_write (gr_exec_members (rs->x)) == -1) {
      nbdkit_error ("resync: cannot start; %" PRIu64 " regions stay "
                    "pending", rs->todo);
      return GR_JOB_FAIL;
    }
    rs->started = true;
  }
  if (*s >= g->stripes)
    return GR_JOB_END;
  r = *s / rsz;
  if (*s % rsz == 0)
    r = gr_bitmap_next_pending (rs->b, r);
  if (r >= nreg)
    return GR_JOB_END;
  if (*s < r * rsz)
    *s = r * rsz;
  *end = (r + 1) * rsz < g->stripes ? (r + 1) * rsz : g->stripes;
  return GR_JOB_GO;
}

static enum gr_plan_kind
resync_plan (void *arg, const struct gr_plan_ctx *c, uint64_t s0,
             uint64_t ns, struct gr_plan *p)
{
  const uint64_t width = gr_map_stripe_width (c->g);

  /* Without block checksums, with two chunks of redundancy: a chunk
   * that alone disagrees with the others is located and rewritten, not
   * laundered into the parity (which is recomputed only where no chunk
   * is located).  With checksums a corrupt block fails its checksum as
   * the batch is read and is repaired before (exec.h). */
  if (!c->cksum && c->g->m >= 2)
    return gr_plan_resync_check (c, s0, ns, p);
  /* Degraded: refused (the job stops). */
  if (gr_plan_next (c, GR_REQ_RESYNC, s0 * width, ns * width, p)
      == GR_PLAN_RESYNC && p->nstripes != ns) {
    nbdkit_error ("resync: a plan covers %" PRIu64 " of the batch's %"
                  PRIu64 " stripes", p->nstripes, ns);
    return p->kind = GR_PLAN_REFUSE;
  }
  return p->kind;
}

/* A batch done: a region whose last batch it is is resynced. */
static void
resync_done (void *arg, const struct gr_plan *p, enum gr_exec_outcome o,
             const struct gr_exec_result *res)
{
  struct gr_resync *rs = arg;
  const struct gr_geom *g = gr_exec_geom (rs->x);
  const uint64_t rsz = gr_bitmap_region_size (rs->b);
  const uint64_t end = p->s0 + p->nstripes;

  if (o != GR_EXEC_DONE)
    return;
  pthread_mutex_lock (&rs->lock);
  rs->stripes += p->nstripes;
  rs->rewritten += res->rewritten;
  if (end % rsz == 0 || end == g->stripes) {
    gr_bitmap_resynced (rs->b, p->s0 / rsz);
    rs->ndone++;
  }
  pthread_mutex_unlock (&rs->lock);
}

/* Each tenth: a checkpoint (a restart goes on from here), progress. */
static bool
resync_tick (void *arg, enum gr_job_tick why, int pct)
{
  struct gr_resync *rs = arg;
  struct gr_progress p;

  if (why != GR_JOB_TENTH)
    return true;
  gr_bitmap_checkpoint (rs->b);
  gr_job_progress (rs->job, &p);
  pthread_mutex_lock (&rs->lock);
  gr_debug ("resync: %d%% (%" PRIu64 " of %" PRIu64 " regions, %" PRIu64
            " MiB in %.1f s, %" PRIu64 " parity chunks rewritten)", pct,
            rs->ndone, rs->todo, p.done_bytes >> 20, p.seconds,
            rs->rewritten);
  pthread_mutex_unlock (&rs->lock);
  return true;
}

static void
resync_finish (void *arg, enum gr_job_state st)
{
  struct gr_resync *rs = arg;
  struct gr_members *ms = gr_exec_members (rs->x);

  pthread_mutex_lock (&rs->lock);
  switch (st) {
  case GR_JOB_STOPPED:
    gr_bitmap_checkpoint (rs->b);
    gr_debug ("resync: stopped at shutdown, %" PRIu64 " of %" PRIu64
              " regions done; the rest at the next start", rs->ndone,
              rs->todo);
    break;
  case GR_JOB_FAILED:
    if (rs->started)
      gr_warn ("resync stopped (%d of %d members failed): "
               "%" PRIu64 " of %" PRIu64 " regions were not resynced, and "
               "rebuilding a lost chunk from their parity fails with EIO",
               gr_members_nfailed (ms), gr_members_n (ms),
               rs->todo - rs->ndone, rs->todo);
    break;
  default:
    gr_warn ("resync done: %" PRIu64 " stripes checked, %" PRIu64 " parity "
             "chunks were inconsistent and rewritten (%" PRIu64 " of %"
             PRIu64 " regions, %.1f s)", rs->stripes, rs->rewritten,
             rs->todo, gr_bitmap_regions (rs->b), gr_job_seconds (rs->job));
    gr_event (GR_EV_RESYNC_FINISHED, -1, NULL, NULL, "stripes=%" PRIu64
              " rewritten=%" PRIu64 " regions=%" PRIu64 " seconds=%.1f",
              rs->stripes, rs->rewritten, rs->todo,
              gr_job_seconds (rs->job));
  }
  pthread_mutex_unlock (&rs->lock);
}

struct gr_resync *
gr_resync_start (struct gr_exec *x, struct gr_bitmap *b, uint64_t rate)
{
  const struct gr_geom *g = gr_exec_geom (x);
  const uint64_t nreg = gr_bitmap_regions (b), rsz = gr_bitmap_region_size (b);
  const uint64_t width = gr_map_stripe_width (g);
  const size_t n = (size_t) g->k + g->m;
  struct gr_resync *rs = calloc (1, sizeof *rs);
  struct gr_job_def def;
  uint64_t r, total = 0, batch;

  if (rs == NULL) {
    nbdkit_error ("resync: %m");
    return NULL;
  }
  rs->x = x;
  rs->b = b;
  pthread_mutex_init (&rs->lock, NULL);
  for (r = gr_bitmap_next_pending (b, 0); r < nreg;
       r = gr_bitmap_next_pending (b, r + 1)) {
    uint64_t s1 = (r + 1) * rsz < g->stripes ? (r + 1) * rsz : g->stripes;

    rs->todo++;
    total += (s1 - r * rsz) * width;
  }
  batch = BATCH_BYTES / (n * g->chunk) / GR_EXEC_LANES;
  if (batch < 1)
    batch = 1;
  def = (struct gr_job_def) {
    .batches = { .lock = GR_LOCK_EXCL, .policy = GR_MIO_FAIL_MEMBER,
                 .plan = resync_plan, .done = resync_done },
    .batch = batch,
    /* plan.c: every member's chunks, then the new parity; plan-jobs.c's
     * locating resync: those, the fixes and VERIFY's room */
    .scratch = ((n + g->m + 1) * batch + n) * g->chunk,
    .total_bytes = total, .next = resync_next, .tick = resync_tick,
    .finish = resync_finish, .arg = rs,
  };
  pthread_mutex_lock (&rs->lock);
  rs->job = gr_job_start (x, &def, rate, 0, 0);
  pthread_mutex_unlock (&rs->lock);
  if (rs->job == NULL) {
    pthread_mutex_destroy (&rs->lock);
    free (rs);
    return NULL;
  }
  return rs;
}

bool
gr_resync_stop (struct gr_resync *rs)
{
  struct gr_progress p;

  gr_job_stop (rs->job);
  gr_job_progress (rs->job, &p);
  gr_job_free (rs->job);
  pthread_mutex_destroy (&rs->lock);
  free (rs);
  return p.state == GR_JOB_DONE;
}

void
gr_resync_set_rate (struct gr_resync *rs, uint64_t rate)
{
  gr_job_set_rate (rs->job, rate);
}

void
gr_resync_progress (struct gr_resync *rs, struct gr_progress *out)
{
  gr_job_progress (rs->job, out);
  out->from_bytes = 0;
}
