/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - rebuilding members online.  See rebuild.h. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "pace.h"
#include "rebuild.h"
#include "replacing.h"

/* The batch buffer (all members' chunks of the stripes held exclusively
 * at once): large, so that each erasure pattern's stripes make one
 * large coding operation. */
#define BUF_BYTES ((size_t) 128 << 20)
/* Seconds between checkpoints (each is a superblock update). */
#define CHECKPOINT_S 1.0

struct gr_rebuild {
  struct gr_exec *x;
  struct gr_bitmap *b;
  pthread_t thread;
  struct gr_pace *pace;
  uint8_t *buf;
  bool pinned;                  /* buf from the coder (page-locked) */
  uint64_t batch;               /* stripes */
  pthread_mutex_t lock;         /* the fields below; leaf */
  bool which[GR_MAX_MEMBERS];   /* the members of the pass */
  bool added[GR_MAX_MEMBERS];   /* joining at the next batch */
  bool closed;                  /* the pass takes no more members */
  uint64_t pos, from;           /* stripes: where it is, and where it
                                 * went on from last (start, join) */
  double t0;                    /* seconds when it went on from there */
  uint64_t moved;               /* array bytes done, for the pace */
  int state;                    /* enum gr_resync_state */
};

/* The members of the pass as a list "1, 3", into buf[len]. */
static const char *
list (const bool *which, int n, char *buf, size_t len)
{
  size_t o = 0;

  buf[0] = '\0';
  for (int i = 0; i < n && o < len; i++)
    if (which[i])
      o += (size_t) snprintf (buf + o, len - o, "%s%d", o ? ", " : "", i);
  return buf;
}

/* Under rb->lock: take the members that joined; the pass goes back to
 * the least front among them.  true if any joined. */
static bool
take_added_locked (struct gr_rebuild *rb, int n, uint64_t *s)
{
  struct gr_members *ms = gr_exec_members (rb->x);
  uint64_t front[GR_MAX_MEMBERS];
  bool any = false;

  gr_members_rebuilding (ms, front);
  for (int i = 0; i < n; i++)
    if (rb->added[i]) {
      rb->added[i] = false;
      rb->which[i] = true;
      if (front[i] < *s)
        *s = front[i];
      any = true;
    }
  if (any) {
    rb->from = rb->pos = *s;
    rb->t0 = gr_pace_seconds (rb->pace);
  }
  return any;
}

static void *
rebuild_thread (void *arg)
{
  struct gr_rebuild *rb = arg;
  struct gr_members *ms = gr_exec_members (rb->x);
  const struct gr_geom *g = gr_exec_geom (rb->x);
  const int n = g->k + g->m;
  const uint64_t width = gr_map_stripe_width (g);
  enum gr_resync_state st = GR_RESYNC_DONE;
  bool which[GR_MAX_MEMBERS];
  char names[1024];
  uint64_t s = rb->from;
  int last_pct = (int) (s * 10 / g->stripes), i, left;
  double checkpointed = gr_pace_seconds (rb->pace);

  memcpy (which, rb->which, sizeof which);
  list (which, n, names, sizeof names);
  gr_debug ("rebuild of member%s %s: %" PRIu64 " stripes from stripe %"
            PRIu64, strchr (names, ',') ? "s" : "", names, g->stripes, s);
  for (;;) {
    uint64_t ns;

    pthread_mutex_lock (&rb->lock);
    if (take_added_locked (rb, n, &s)) {
      memcpy (which, rb->which, sizeof which);
      gr_warn ("rebuild of members %s goes on from stripe %" PRIu64 ", "
               "where the member that joined starts",
               list (which, n, names, sizeof names), s);
      last_pct = (int) (s * 10 / g->stripes);
    }
    if (s >= g->stripes)
      rb->closed = true;
    pthread_mutex_unlock (&rb->lock);
    if (s >= g->stripes)
      break;
    /* A replacement that failed leaves the pass (the error said why). */
    left = 0;
    for (i = 0; i < n; i++) {
      bool one[GR_MAX_MEMBERS] = { false };

      if (!which[i])
        continue;
      if (gr_members_state (ms, i) == GR_MEMBER_REBUILDING) {
        left++;
        continue;
      }
      one[i] = true;
      gr_members_rebuild_end (ms, one, GR_REBUILD_ABANDONED);
      gr_warn ("rebuild of member %d (%s) failed after %" PRIu64 " of %"
               PRIu64 " stripes (see the error before): the member stays "
               "failed", i, gr_members_path (ms, i), s, g->stripes);
      which[i] = false;
      pthread_mutex_lock (&rb->lock);
      rb->which[i] = false;
      pthread_mutex_unlock (&rb->lock);
    }
    if (left == 0) {
      st = GR_RESYNC_FAILED;
      goto end;
    }
    ns = gr_pace_batch (rb->pace, width, rb->batch);
    if (ns > g->stripes - s)
      ns = g->stripes - s;
    switch (gr_exec_rebuild (rb->x, which, s, ns, rb->buf)) {
    case GR_EXEC_DONE:
      break;
    case GR_EXEC_REPLAN:
      if (!gr_members_too_degraded (ms))
        continue;               /* a survivor failed: again without it */
      /* fallthrough */
    default:
      st = GR_RESYNC_FAILED;
      goto end;
    }
    s += ns;
    pthread_mutex_lock (&rb->lock);
    rb->pos = s;
    rb->moved += ns * width;
    pthread_mutex_unlock (&rb->lock);
    if (s * 10 / g->stripes > (uint64_t) last_pct) {
      last_pct = (int) (s * 10 / g->stripes);
      gr_debug ("rebuild of member%s %s: %d0%% (%.1f s)",
                left > 1 ? "s" : "", list (which, n, names, sizeof names),
                last_pct, gr_pace_seconds (rb->pace));
    }
    /* A checkpoint every CHECKPOINT_S: a restart resumes from there. */
    if (s < g->stripes &&
        gr_pace_seconds (rb->pace) - checkpointed >= CHECKPOINT_S) {
      if (!gr_members_rebuild_checkpoint (ms)) {
        st = GR_RESYNC_FAILED;
        goto end;
      }
      checkpointed = gr_pace_seconds (rb->pace);
    }
    if (s < g->stripes && gr_pace_wait (rb->pace, rb->moved)) {
      st = GR_RESYNC_STOPPED;
      goto end;
    }
  }
 end:
  /* No member joins from here; one that joined since the last batch
   * ends with the others (paused or abandoned: it never gets done). */
  pthread_mutex_lock (&rb->lock);
  rb->closed = true;
  for (i = 0; i < n; i++)
    if (rb->added[i]) {
      rb->added[i] = false;
      rb->which[i] = which[i] = true;
    }
  pthread_mutex_unlock (&rb->lock);
  list (which, n, names, sizeof names);
  if (st == GR_RESYNC_DONE) {
    /* Synced there before the superblocks say that they are live. */
    if (!gr_members_rebuild_end (ms, which, GR_REBUILD_DONE))
      st = GR_RESYNC_FAILED;
    gr_bitmap_checkpoint (rb->b);
    for (i = 0; i < n; i++)
      if (which[i]) {
        if (gr_members_state (ms, i) == GR_MEMBER_ACTIVE)
          gr_warn ("rebuild of member %d (%s) done: %" PRIu64 " stripes in "
                   "%.1f s; %d of %d members failed", i,
                   gr_members_path (ms, i), g->stripes,
                   gr_pace_seconds (rb->pace), gr_members_nfailed (ms), n);
        else
          gr_warn ("rebuild of member %d (%s) failed at its end (see the "
                   "error before): the member stays failed", i,
                   gr_members_path (ms, i));
      }
  }
  else if (st == GR_RESYNC_STOPPED && gr_members_rebuild_checkpoint (ms)) {
    gr_members_rebuild_end (ms, which, GR_REBUILD_PAUSED);
    gr_warn ("rebuild of member%s %s paused at shutdown after %" PRIu64
             " of %" PRIu64 " stripes: it resumes from there when the array "
             "starts with %s replacement%s as member=", strchr (names, ',')
             ? "s" : "", names, s, g->stripes,
             strchr (names, ',') ? "their" : "its",
             strchr (names, ',') ? "s" : "");
  }
  else {
    gr_members_rebuild_end (ms, which, GR_REBUILD_ABANDONED);
    if (st == GR_RESYNC_STOPPED)
      gr_warn ("rebuild of member%s %s stopped at shutdown after %" PRIu64
               " of %" PRIu64 " stripes, its checkpoint not recorded: the "
               "members stay failed; replace them again",
               strchr (names, ',') ? "s" : "", names, s, g->stripes);
    else if (names[0])
      gr_warn ("rebuild of member%s %s failed after %" PRIu64 " of %"
               PRIu64 " stripes (see the error before): the members stay "
               "failed", strchr (names, ',') ? "s" : "", names, s,
               g->stripes);
  }
  gr_pace_finish (rb->pace);
  __atomic_store_n (&rb->state, st, __ATOMIC_RELEASE);
  return NULL;
}

static void
free_buf (struct gr_rebuild *rb)
{
  if (rb->pinned)
    gr_coding_host_free (gr_exec_coding (rb->x), rb->buf);
  else
    free (rb->buf);
}

struct gr_rebuild *
gr_rebuild_start (struct gr_exec *x, struct gr_bitmap *b, const bool *which,
                  uint64_t from, uint64_t rate)
{
  const struct gr_geom *g = gr_exec_geom (x);
  struct gr_rebuild *rb = calloc (1, sizeof *rb);
  int e;

  if (rb == NULL)
    goto nomem;
  rb->x = x;
  rb->b = b;
  memcpy (rb->which, which, (size_t) (g->k + g->m) * sizeof *which);
  pthread_mutex_init (&rb->lock, NULL);
  rb->batch = BUF_BYTES / ((size_t) (g->k + g->m) * g->chunk);
  if (rb->batch < 1)
    rb->batch = 1;
  if (rb->batch > g->stripes)
    rb->batch = g->stripes;
  rb->from = rb->pos = from;
  rb->state = GR_RESYNC_RUNNING;
  rb->pace = gr_pace_new (rate, gr_exec_requests (x));
  /* Page-locked where a GPU codes, so that its copies run at full speed. */
  rb->buf = gr_coding_host_alloc (gr_exec_coding (x),
                                  rb->batch * (size_t) (g->k + g->m)
                                  * g->chunk);
  rb->pinned = rb->buf != NULL;
  if (!rb->pinned)
    rb->buf = malloc (rb->batch * (size_t) (g->k + g->m) * g->chunk);
  if (rb->pace == NULL || rb->buf == NULL)
    goto nomem;
  e = pthread_create (&rb->thread, NULL, rebuild_thread, rb);
  if (e != 0) {
    errno = e;
    nbdkit_error ("rebuild: pthread_create: %m");
    goto fail;
  }
  return rb;

 nomem:
  nbdkit_error ("rebuild: %m");
 fail:
  gr_members_rebuild_end (gr_exec_members (x), which, GR_REBUILD_PAUSED);
  if (rb) {
    gr_pace_free (rb->pace);
    free_buf (rb);
    pthread_mutex_destroy (&rb->lock);
  }
  free (rb);
  return NULL;
}

bool
gr_rebuild_add (struct gr_rebuild *rb, int i)
{
  bool ok;

  pthread_mutex_lock (&rb->lock);
  ok = !rb->closed;
  if (ok)
    rb->added[i] = true;
  pthread_mutex_unlock (&rb->lock);
  return ok;
}

void
gr_rebuild_progress (struct gr_rebuild *rb, struct gr_resync_progress *out)
{
  const uint64_t width = gr_map_stripe_width (gr_exec_geom (rb->x));

  out->state = __atomic_load_n (&rb->state, __ATOMIC_ACQUIRE);
  pthread_mutex_lock (&rb->lock);
  out->done_bytes = rb->pos * width;
  out->from_bytes = rb->from * width;
  out->seconds = gr_pace_seconds (rb->pace) - rb->t0;
  pthread_mutex_unlock (&rb->lock);
  out->total_bytes = gr_exec_geom (rb->x)->stripes * width;
  out->rate_limit = gr_pace_rate (rb->pace);
}

int
gr_rebuild_members (struct gr_rebuild *rb, bool *which)
{
  const struct gr_geom *g = gr_exec_geom (rb->x);
  int count = 0;

  pthread_mutex_lock (&rb->lock);
  for (int i = 0; i < g->k + g->m; i++) {
    which[i] = rb->which[i] || rb->added[i];
    count += which[i];
  }
  pthread_mutex_unlock (&rb->lock);
  return count;
}

void
gr_rebuild_set_rate (struct gr_rebuild *rb, uint64_t rate)
{
  uint64_t moved;

  pthread_mutex_lock (&rb->lock);
  moved = rb->moved;
  pthread_mutex_unlock (&rb->lock);
  gr_pace_set_rate (rb->pace, rate, moved);
}

void
gr_rebuild_stop (struct gr_rebuild *rb)
{
  if (rb == NULL)
    return;
  gr_pace_stop (rb->pace);
  pthread_join (rb->thread, NULL);
  gr_pace_free (rb->pace);
  free_buf (rb);
  pthread_mutex_destroy (&rb->lock);
  free (rb);
}
