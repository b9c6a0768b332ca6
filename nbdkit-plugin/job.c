/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the background jobs' skeleton.  See job.h. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "job.h"
#include "log.h"
#include "pace.h"
#include "common/thread.h"

/* Seconds between the hook's GR_JOB_SECOND ticks. */
#define TICK_S 1.0

struct gr_job {
  struct gr_exec *x;
  struct gr_job_def def;
  struct gr_exec_lanes *lanes;
  struct gr_pace *pace;
  pthread_t thread;
  bool joinable;
  uint64_t from;                /* stripes: where it (went on from) */
  pthread_mutex_t lock;         /* the fields below; leaf */
  uint64_t pos;                 /* the end of the last batch done */
  uint64_t from_bytes, done_bytes;      /* array bytes */
  double t0;                    /* seconds when it went on from there */
  uint64_t moved;               /* atomic: array bytes given out (the
                                 * pace's count) */
  int state;                    /* atomic: enum gr_job_state */
};

/* A batch is done (lanes, in batch order): the position moves to its end
 * when it was done (a failed one stops the job), then the job hears. */
static void
batch_done (void *arg, const struct gr_plan *p, enum gr_exec_outcome o,
            const struct gr_exec_result *res)
{
  struct gr_job *j = arg;

  if (o == GR_EXEC_DONE) {
    pthread_mutex_lock (&j->lock);
    j->pos = p->s0 + p->nstripes;
    j->done_bytes += p->len;
    pthread_mutex_unlock (&j->lock);
  }
  j->def.batches.done (j->def.arg, p, o, res);
}

static enum gr_plan_kind
batch_plan (void *arg, const struct gr_plan_ctx *c, uint64_t s0,
            uint64_t ns, struct gr_plan *p)
{
  struct gr_job *j = arg;

  return j->def.batches.plan (j->def.arg, c, s0, ns, p);
}

static int
pct_of (struct gr_job *j)
{
  uint64_t done;

  pthread_mutex_lock (&j->lock);
  done = j->done_bytes;
  pthread_mutex_unlock (&j->lock);
  return j->def.total_bytes ? (int) (done * 10 / j->def.total_bytes) : 10;
}

/* The hook for each tenth from the one after *last up to pct (the
 * batches done may pass several between two looks).  false: fail. */
static bool
tenths (struct gr_job *j, int *last, int pct)
{
  while (*last < pct)
    if (!j->def.tick (j->def.arg, GR_JOB_TENTH, ++*last * 10))
      return false;
  return true;
}

static void *
job_thread (void *arg)
{
  struct gr_job *j = arg;
  const struct gr_geom *g = gr_exec_geom (j->x);
  const uint64_t width = gr_map_stripe_width (g);
  enum gr_job_state st = GR_JOB_DONE;
  uint64_t s = j->from, moved;
  double ticked = gr_pace_seconds (j->pace);
  int last_pct = pct_of (j), pct;
  bool drained = false;

  for (;;) {
    uint64_t end = g->stripes, ns;
    bool light = false;

    switch (j->def.next (j->def.arg, drained, &s, &end)) {
    case GR_JOB_GO:
      break;
    case GR_JOB_GO_LIGHT:
      light = true;
      break;
    case GR_JOB_GO_FROM:
      pthread_mutex_lock (&j->lock);
      j->from = j->pos = s;
      j->from_bytes = j->done_bytes = s * width;
      j->t0 = gr_pace_seconds (j->pace);
      pthread_mutex_unlock (&j->lock);
      last_pct = pct_of (j);
      break;
    case GR_JOB_DRAIN:
      if (!gr_exec_lanes_drain (j->lanes)) {
        st = GR_JOB_FAILED;
        goto end;
      }
      drained = true;
      continue;
    case GR_JOB_END:
      goto end;
    case GR_JOB_FAIL:
      st = GR_JOB_FAILED;
      goto end;
    }
    drained = false;
    if (s >= end)
      goto end;                 /* nothing left */
    ns = light ? j->def.batch : gr_pace_batch (j->pace, width, j->def.batch);
    if (ns > end - s)
      ns = end - s;
    if (!gr_exec_lanes_submit (j->lanes, s, ns)) {
      st = GR_JOB_FAILED;
      goto end;
    }
    s += ns;
    moved = __atomic_add_fetch (&j->moved, light ? 0 : ns * width,
                                __ATOMIC_RELAXED);
    pct = pct_of (j);
    if (!tenths (j, &last_pct, pct)) {
      st = GR_JOB_FAILED;
      goto end;
    }
    if (gr_pace_seconds (j->pace) - ticked >= TICK_S) {
      if (!j->def.tick (j->def.arg, GR_JOB_SECOND, pct * 10)) {
        st = GR_JOB_FAILED;
        goto end;
      }
      ticked = gr_pace_seconds (j->pace);
    }
    /* Past the last stripe nothing waits (a stop now would leave the
     * job stopped with its work done). */
    if (s < g->stripes && gr_pace_wait (j->pace, moved)) {
      st = GR_JOB_STOPPED;
      goto end;
    }
  }
 end:
  if (!gr_exec_lanes_drain (j->lanes) && st == GR_JOB_DONE)
    st = GR_JOB_FAILED;
  if (st == GR_JOB_DONE && !tenths (j, &last_pct, pct_of (j)))
    st = GR_JOB_FAILED;
  j->def.finish (j->def.arg, st);
  gr_pace_finish (j->pace);
  __atomic_store_n (&j->state, st, __ATOMIC_RELEASE);
  return NULL;
}

struct gr_job *
gr_job_start (struct gr_exec *x, const struct gr_job_def *def, uint64_t rate,
              uint64_t from, uint64_t from_bytes)
{
  struct gr_job *j = calloc (1, sizeof *j);
  struct gr_exec_batches b;
  int e;

  if (j == NULL) {
    nbdkit_error ("job: %m");
    return NULL;
  }
  j->x = x;
  j->def = *def;
  j->from = j->pos = from;
  j->from_bytes = j->done_bytes = from_bytes;
  j->state = GR_JOB_RUNNING;
  pthread_mutex_init (&j->lock, NULL);
  b = def->batches;
  b.plan = batch_plan;
  b.done = batch_done;
  b.arg = j;
  j->pace = gr_pace_new (rate, gr_exec_requests (x));
  if (j->pace == NULL) {
    nbdkit_error ("job: %m");
    goto fail;
  }
  j->lanes = gr_exec_lanes_new (x, &b, def->batch, def->scratch);
  if (j->lanes == NULL)
    goto fail;
  e = gr_thread_create (&j->thread, NULL, job_thread, j);
  if (e != 0) {
    errno = e;
    nbdkit_error ("job: pthread_create: %m");
    goto fail;
  }
  j->joinable = true;
  return j;
 fail:
  j->state = GR_JOB_FAILED;
  gr_job_free (j);
  return NULL;
}

void
gr_job_progress (struct gr_job *j, struct gr_progress *out)
{
  out->state = __atomic_load_n (&j->state, __ATOMIC_ACQUIRE);
  pthread_mutex_lock (&j->lock);
  out->done_bytes = j->done_bytes;
  out->from_bytes = j->from_bytes;
  out->seconds = gr_pace_seconds (j->pace) - j->t0;
  pthread_mutex_unlock (&j->lock);
  out->total_bytes = j->def.total_bytes;
  out->rate_limit = gr_pace_rate (j->pace);
}

uint64_t
gr_job_position (struct gr_job *j)
{
  uint64_t pos;

  pthread_mutex_lock (&j->lock);
  pos = j->pos;
  pthread_mutex_unlock (&j->lock);
  return pos;
}

double
gr_job_seconds (struct gr_job *j)
{
  double t;

  pthread_mutex_lock (&j->lock);
  t = gr_pace_seconds (j->pace) - j->t0;
  pthread_mutex_unlock (&j->lock);
  return t;
}

void
gr_job_busy (struct gr_job *j, double busy[3])
{
  gr_exec_lanes_busy (j->lanes, busy);
}

void
gr_job_set_rate (struct gr_job *j, uint64_t rate)
{
  gr_pace_set_rate (j->pace, rate,
                    __atomic_load_n (&j->moved, __ATOMIC_RELAXED));
}

void
gr_job_stop (struct gr_job *j)
{
  if (j == NULL || !j->joinable)
    return;
  gr_pace_stop (j->pace);
  pthread_join (j->thread, NULL);
  j->joinable = false;
}

void
gr_job_free (struct gr_job *j)
{
  if (j == NULL)
    return;
  gr_job_stop (j);
  gr_exec_lanes_free (j->lanes);
  gr_pace_free (j->pace);
  pthread_mutex_destroy (&j->lock);
  free (j);
}
