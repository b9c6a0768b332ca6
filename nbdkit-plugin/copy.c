/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - a live replacement's copy.  See copy.h. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "cksum.h"
#include "copy.h"
#include "events.h"
#include "log.h"
#include "members.h"

/* Bytes of the member a batch copies. */
#define BUF_BYTES ((size_t) 64 << 20)

struct gr_copy {
  struct gr_exec *x;
  struct gr_job *job;
  int i;
  char path[1024];              /* the replacement's */
};

static enum gr_job_next
copy_next (void *arg, bool drained, uint64_t *s, uint64_t *end)
{
  struct gr_copy *c = arg;

  if (!gr_members_live (gr_exec_members (c->x), c->i, NULL, NULL, 0))
    return GR_JOB_FAIL;         /* the replacement failed (said) */
  return *s < gr_exec_geom (c->x)->stripes ? GR_JOB_GO : GR_JOB_END;
}

static enum gr_plan_kind
copy_plan (void *arg, const struct gr_plan_ctx *pc, uint64_t s0, uint64_t ns,
           struct gr_plan *p)
{
  struct gr_copy *c = arg;

  return gr_plan_copy (pc, c->i, s0, ns, p);
}

static void
copy_done (void *arg, const struct gr_plan *p, enum gr_exec_outcome o,
           const struct gr_exec_result *res)
{
  /* The position (job.h) is all a copy keeps of its batches. */
}

static bool
copy_tick (void *arg, enum gr_job_tick why, int pct)
{
  struct gr_copy *c = arg;

  if (why == GR_JOB_TENTH)
    gr_debug ("live replacement of member %d onto %s: %d%% (%.1f s)", c->i,
              c->path, pct, gr_job_seconds (c->job));
  return true;
}

static void
copy_finish (void *arg, enum gr_job_state st)
{
  struct gr_copy *c = arg;
  struct gr_members *ms = gr_exec_members (c->x);
  struct gr_cksum *cs = gr_exec_cksum (c->x);
  char old[1024];

  snprintf (old, sizeof old, "%s", gr_members_path (ms, c->i));
  if (st == GR_JOB_DONE && (cs == NULL || gr_cksum_flush (cs) == 0) &&
      gr_members_live_swap (ms, c->i)) {
    gr_warn ("live replacement of member %d done: %s took its place (%"
             PRIu64 " stripes in %.1f s, the member in service throughout); "
             "%s is no member any more", c->i, c->path,
             gr_exec_geom (c->x)->stripes, gr_job_seconds (c->job), old);
    gr_event (GR_EV_REPLACED, c->i, c->path, NULL, "old=%s seconds=%.1f",
              old, gr_job_seconds (c->job));
    return;
  }
  gr_members_live_end (ms, c->i);
  gr_warn ("live replacement of member %d onto %s %s after %" PRIu64 " of %"
           PRIu64 " stripes: member %d stays on %s%s", c->i, c->path,
           st == GR_JOB_STOPPED ? "stopped (shutdown)" : "failed (see the "
           "error before)", gr_job_position (c->job),
           gr_exec_geom (c->x)->stripes, c->i, old,
           gr_members_failed (ms, c->i) ? ", which has failed (gpuraidctl "
           "replace rebuilds it)" : "; gpuraidctl replace --live starts "
           "over");
}

struct gr_copy *
gr_copy_start (struct gr_exec *x, int i, uint64_t rate)
{
  const struct gr_geom *g = gr_exec_geom (x);
  struct gr_copy *c = calloc (1, sizeof *c);
  struct gr_job_def def;
  uint64_t batch;

  if (c == NULL) {
    nbdkit_error ("live replacement: %m");
    gr_members_live_end (gr_exec_members (x), i);
    return NULL;
  }
  c->x = x;
  c->i = i;
  (void) gr_members_live (gr_exec_members (x), i, NULL, c->path,
                          sizeof c->path);
  batch = BUF_BYTES / g->chunk;
  if (batch > g->stripes)
    batch = g->stripes;
  def = (struct gr_job_def) {
    .batches = { .lock = GR_LOCK_EXCL, .policy = GR_MIO_FAIL_MEMBER,
                 .plan = copy_plan, .done = copy_done },
    .batch = batch, .scratch = batch * g->chunk,
    .total_bytes = g->stripes * gr_map_stripe_width (g), .next = copy_next,
    .tick = copy_tick, .finish = copy_finish, .arg = c,
  };
  gr_debug ("live replacement of member %d onto %s: %" PRIu64 " stripes",
            i, c->path, g->stripes);
  c->job = gr_job_start (x, &def, rate, 0, 0);
  if (c->job == NULL) {
    gr_members_live_end (gr_exec_members (x), i);
    free (c);
    return NULL;
  }
  return c;
}

void
gr_copy_progress (struct gr_copy *c, struct gr_progress *out)
{
  gr_job_progress (c->job, out);
}

int
gr_copy_member (const struct gr_copy *c)
{
  return c->i;
}

void
gr_copy_set_rate (struct gr_copy *c, uint64_t rate)
{
  gr_job_set_rate (c->job, rate);
}

void
gr_copy_stop (struct gr_copy *c)
{
  if (c == NULL)
    return;
  gr_job_free (c->job);
  free (c);
}
