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
#include "members.h"

/* Each batch's buffer (all members' chunks of the stripes it holds
 * exclusively): large, so that each erasure pattern's stripes make one
 * large coding operation. */
#define BUF_BYTES ((size_t) 128 << 20)
/* Batches in flight, each on its own thread (a lane): one is read while
 * the one before is coded and the one before that is written. */
#define NLANES 3
/* Seconds between checkpoints (each is a superblock update). */
#define CHECKPOINT_S 1.0

/* A lane's batch: given to it (ISSUED), then DONE (outcome). */
enum lane_state { IDLE, ISSUED, DONE };

/* The steps of a batch, taken in batch order, one batch at a time each
 * (turn[] is the batch whose turn it is): locking (so that batches never
 * wait for each other's locks out of order), coding (one coder busy, as
 * one core codes on a CPU), writing (the fronts move in order). */
enum step { STEP_LOCK, STEP_CODE, STEP_WRITE, NSTEPS };

struct lane {
  struct gr_rebuild *rb;
  pthread_t thread;
  bool started;
  struct gr_exec_rbatch *b;
  uint8_t *buf;
  bool pinned;                  /* buf from the coder (page-locked) */
  /* Under pl: */
  enum lane_state state;
  uint64_t seq;                 /* the batch's number in the pass */
  uint64_t s0, ns;
  bool which[GR_MAX_MEMBERS];
  enum gr_exec_outcome out;
};

struct gr_rebuild {
  struct gr_exec *x;
  struct gr_bitmap *b;
  pthread_t thread;             /* gives out the batches */
  struct gr_pace *pace;
  uint64_t batch;               /* stripes */
  struct lane lane[NLANES];
  pthread_mutex_t pl;           /* lanes' states, turn, failed, quit,
                                 * busy; leaf */
  pthread_cond_t pc;
  uint64_t turn[NSTEPS];
  bool failed;                  /* a batch failed: no later one writes */
  bool quit;
  double busy[3];               /* seconds reading, coding, writing */
  pthread_mutex_t lock;         /* the fields below; leaf */
  bool which[GR_MAX_MEMBERS];   /* the members of the pass */
  bool added[GR_MAX_MEMBERS];   /* joining at the next batch */
  bool closed;                  /* the pass takes no more members */
  uint64_t pos, from;           /* stripes: the written front, and where
                                 * it went on from last (start, join) */
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

static bool
any_added (struct gr_rebuild *rb, int n)
{
  bool any = false;

  pthread_mutex_lock (&rb->lock);
  for (int i = 0; i < n; i++)
    any |= rb->added[i];
  pthread_mutex_unlock (&rb->lock);
  return any;
}

/* Under rb->pl: wait for batch seq's turn at step st. */
static void
wait_turn (struct gr_rebuild *rb, enum step st, uint64_t seq)
{
  while (rb->turn[st] != seq)
    pthread_cond_wait (&rb->pc, &rb->pl);
}

/* Under rb->pl: the next batch's turn at step st. */
static void
pass_turn (struct gr_rebuild *rb, enum step st)
{
  rb->turn[st]++;
  pthread_cond_broadcast (&rb->pc);
}

/* One batch on lane ln: lock, read, code, write, each step in its turn. */
static void
run_batch (struct gr_rebuild *rb, struct lane *ln)
{
  struct gr_members *ms = gr_exec_members (rb->x);
  enum gr_exec_outcome r;
  double t[4];

  pthread_mutex_lock (&rb->pl);
  wait_turn (rb, STEP_LOCK, ln->seq);
  pthread_mutex_unlock (&rb->pl);
  gr_exec_rebuild_lock (ln->b, ln->s0, ln->ns);
  pthread_mutex_lock (&rb->pl);
  pass_turn (rb, STEP_LOCK);
  pthread_mutex_unlock (&rb->pl);
  t[0] = gr_pace_seconds (rb->pace);
  /* A survivor that fails: read again without it (the stripes stay
   * held, so no batch overtakes this one). */
  while ((r = gr_exec_rebuild_read (ln->b, ln->which)) == GR_EXEC_REPLAN &&
         !gr_members_too_degraded (ms))
    ;
  t[1] = gr_pace_seconds (rb->pace);
  pthread_mutex_lock (&rb->pl);
  wait_turn (rb, STEP_CODE, ln->seq);
  pthread_mutex_unlock (&rb->pl);
  t[2] = gr_pace_seconds (rb->pace);
  if (r == GR_EXEC_DONE)
    r = gr_exec_rebuild_code (ln->b);
  t[3] = gr_pace_seconds (rb->pace);
  pthread_mutex_lock (&rb->pl);
  rb->busy[0] += t[1] - t[0];
  rb->busy[1] += t[3] - t[2];
  pass_turn (rb, STEP_CODE);
  wait_turn (rb, STEP_WRITE, ln->seq);
  /* After a batch that failed none is written: the fronts must not pass
   * stripes that were not rebuilt. */
  if (r != GR_EXEC_DONE)
    rb->failed = true;
  else if (rb->failed)
    r = GR_EXEC_ERROR;
  pthread_mutex_unlock (&rb->pl);
  t[0] = gr_pace_seconds (rb->pace);
  gr_exec_rebuild_write (ln->b, r == GR_EXEC_DONE);
  t[1] = gr_pace_seconds (rb->pace);
  pthread_mutex_lock (&rb->pl);
  rb->busy[2] += t[1] - t[0];
  /* The position the status shows is the written front, as the
   * checkpoints are (moved here, in batch order, not when the issuer
   * next looks at this lane: it may be waiting for the rate limit). */
  if (r == GR_EXEC_DONE) {
    pthread_mutex_lock (&rb->lock);
    rb->pos = ln->s0 + ln->ns;
    pthread_mutex_unlock (&rb->lock);
  }
  pass_turn (rb, STEP_WRITE);
  ln->out = r;
  ln->state = DONE;
  pthread_cond_broadcast (&rb->pc);
  pthread_mutex_unlock (&rb->pl);
}

static void *
lane_thread (void *arg)
{
  struct lane *ln = arg;
  struct gr_rebuild *rb = ln->rb;

  for (;;) {
    bool issued;

    pthread_mutex_lock (&rb->pl);
    while (ln->state != ISSUED && !rb->quit)
      pthread_cond_wait (&rb->pc, &rb->pl);
    issued = ln->state == ISSUED;
    pthread_mutex_unlock (&rb->pl);
    if (!issued)
      return NULL;
    run_batch (rb, ln);
  }
}

/* Wait until lane ln is idle; a batch it has done moves the issuer's
 * position to its end (*pos).  false if that batch failed. */
static bool
retire (struct gr_rebuild *rb, struct lane *ln, uint64_t *pos)
{
  bool ok = true;

  pthread_mutex_lock (&rb->pl);
  while (ln->state == ISSUED)
    pthread_cond_wait (&rb->pc, &rb->pl);
  if (ln->state == DONE) {
    ok = ln->out == GR_EXEC_DONE;
    ln->state = IDLE;
    if (ok)
      *pos = ln->s0 + ln->ns;
  }
  pthread_mutex_unlock (&rb->pl);
  return ok;
}

/* Wait for every batch in flight, oldest first (batch `next` is the
 * next to be given out).  false if one failed. */
static bool
drain (struct gr_rebuild *rb, uint64_t next, uint64_t *pos)
{
  bool ok = true;

  for (uint64_t i = next; i < next + NLANES; i++)
    ok &= retire (rb, &rb->lane[i % NLANES], pos);
  return ok;
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
  uint64_t s = rb->from, pos = rb->from;
  int last_pct = (int) (s * 10 / g->stripes), i, left;
  double checkpointed = gr_pace_seconds (rb->pace);
  uint64_t next = 0;            /* batches given out */

  memcpy (which, rb->which, sizeof which);
  list (which, n, names, sizeof names);
  gr_debug ("rebuild of member%s %s: %" PRIu64 " stripes from stripe %"
            PRIu64, strchr (names, ',') ? "s" : "", names, g->stripes, s);
  for (;;) {
    struct lane *ln = &rb->lane[next % NLANES];
    uint64_t ns;

    /* A member that joins: the batches in flight end first. */
    if (any_added (rb, n) && !drain (rb, next, &pos)) {
      st = GR_RESYNC_FAILED;
      goto end;
    }
    pthread_mutex_lock (&rb->lock);
    if (take_added_locked (rb, n, &s)) {
      memcpy (which, rb->which, sizeof which);
      gr_warn ("rebuild of members %s goes on from stripe %" PRIu64 ", "
               "where the member that joined starts",
               list (which, n, names, sizeof names), s);
      last_pct = (int) (s * 10 / g->stripes);
      pos = s;
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
               "failed", i, gr_members_path (ms, i), pos, g->stripes);
      which[i] = false;
      pthread_mutex_lock (&rb->lock);
      rb->which[i] = false;
      pthread_mutex_unlock (&rb->lock);
    }
    if (left == 0) {
      st = GR_RESYNC_FAILED;
      goto end;
    }
    if (!retire (rb, ln, &pos)) {
      st = GR_RESYNC_FAILED;
      goto end;
    }
    if (pos * 10 / g->stripes > (uint64_t) last_pct) {
      last_pct = (int) (pos * 10 / g->stripes);
      gr_debug ("rebuild of member%s %s: %d0%% (%.1f s)",
                left > 1 ? "s" : "", list (which, n, names, sizeof names),
                last_pct, gr_pace_seconds (rb->pace));
    }
    ns = gr_pace_batch (rb->pace, width, rb->batch);
    if (ns > g->stripes - s)
      ns = g->stripes - s;
    pthread_mutex_lock (&rb->pl);
    ln->seq = next++;
    ln->s0 = s;
    ln->ns = ns;
    memcpy (ln->which, which, sizeof which);
    ln->state = ISSUED;
    pthread_cond_broadcast (&rb->pc);
    pthread_mutex_unlock (&rb->pl);
    s += ns;
    pthread_mutex_lock (&rb->lock);
    rb->moved += ns * width;
    pthread_mutex_unlock (&rb->lock);
    /* A checkpoint every CHECKPOINT_S: a restart resumes from there (the
     * least front, which only written batches move). */
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
  if (!drain (rb, next, &pos) && st == GR_RESYNC_DONE)
    st = GR_RESYNC_FAILED;
  gr_debug ("rebuild: %.1f s, in which its %d lanes were reading %.1f s, "
            "coding %.1f s and writing %.1f s", gr_pace_seconds (rb->pace),
            NLANES, rb->busy[0], rb->busy[1], rb->busy[2]);
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
             ? "s" : "", names, pos, g->stripes,
             strchr (names, ',') ? "their" : "its",
             strchr (names, ',') ? "s" : "");
  }
  else {
    gr_members_rebuild_end (ms, which, GR_REBUILD_ABANDONED);
    if (st == GR_RESYNC_STOPPED)
      gr_warn ("rebuild of member%s %s stopped at shutdown after %" PRIu64
               " of %" PRIu64 " stripes, its checkpoint not recorded: the "
               "members stay failed; replace them again",
               strchr (names, ',') ? "s" : "", names, pos, g->stripes);
    else if (names[0])
      gr_warn ("rebuild of member%s %s failed after %" PRIu64 " of %"
               PRIu64 " stripes (see the error before): the members stay "
               "failed", strchr (names, ',') ? "s" : "", names, pos,
               g->stripes);
  }
  gr_pace_finish (rb->pace);
  __atomic_store_n (&rb->state, st, __ATOMIC_RELEASE);
  return NULL;
}

/* The lanes stop (all idle by then) and are freed. */
static void
teardown (struct gr_rebuild *rb)
{
  struct gr_coding *c = gr_exec_coding (rb->x);

  pthread_mutex_lock (&rb->pl);
  rb->quit = true;
  pthread_cond_broadcast (&rb->pc);
  pthread_mutex_unlock (&rb->pl);
  for (int i = 0; i < NLANES; i++) {
    struct lane *ln = &rb->lane[i];

    if (ln->started)
      pthread_join (ln->thread, NULL);
    gr_exec_rbatch_free (ln->b);
    if (ln->pinned)
      gr_coding_host_free (c, ln->buf);
    else
      free (ln->buf);
  }
  gr_pace_free (rb->pace);
  pthread_cond_destroy (&rb->pc);
  pthread_mutex_destroy (&rb->pl);
  pthread_mutex_destroy (&rb->lock);
  free (rb);
}

struct gr_rebuild *
gr_rebuild_start (struct gr_exec *x, struct gr_bitmap *b, const bool *which,
                  uint64_t from, uint64_t rate)
{
  const struct gr_geom *g = gr_exec_geom (x);
  struct gr_coding *c = gr_exec_coding (x);
  struct gr_rebuild *rb = calloc (1, sizeof *rb);
  size_t bytes;
  int e, i;

  if (rb == NULL) {
    nbdkit_error ("rebuild: %m");
    gr_members_rebuild_end (gr_exec_members (x), which, GR_REBUILD_PAUSED);
    return NULL;
  }
  rb->x = x;
  rb->b = b;
  memcpy (rb->which, which, (size_t) (g->k + g->m) * sizeof *which);
  pthread_mutex_init (&rb->lock, NULL);
  pthread_mutex_init (&rb->pl, NULL);
  pthread_cond_init (&rb->pc, NULL);
  rb->batch = BUF_BYTES / ((size_t) (g->k + g->m) * g->chunk);
  if (rb->batch < 1)
    rb->batch = 1;
  if (rb->batch > g->stripes)
    rb->batch = g->stripes;
  bytes = rb->batch * (size_t) (g->k + g->m) * g->chunk;
  rb->from = rb->pos = from;
  rb->state = GR_RESYNC_RUNNING;
  rb->pace = gr_pace_new (rate, gr_exec_requests (x));
  if (rb->pace == NULL)
    goto nomem;
  for (i = 0; i < NLANES; i++) {
    struct lane *ln = &rb->lane[i];

    ln->rb = rb;
    /* Page-locked where a GPU codes, so that its copies run at full
     * speed. */
    ln->buf = gr_coding_host_alloc (c, bytes);
    ln->pinned = ln->buf != NULL;
    if (!ln->pinned)
      ln->buf = malloc (bytes);
    if (ln->buf == NULL)
      goto nomem;
    ln->b = gr_exec_rbatch_new (x, rb->batch, ln->buf);
    if (ln->b == NULL)
      goto fail;
  }
  for (i = 0; i < NLANES; i++) {
    e = pthread_create (&rb->lane[i].thread, NULL, lane_thread, &rb->lane[i]);
    if (e != 0)
      goto nothread;
    rb->lane[i].started = true;
  }
  e = pthread_create (&rb->thread, NULL, rebuild_thread, rb);
  if (e == 0)
    return rb;
 nothread:
  errno = e;
  nbdkit_error ("rebuild: pthread_create: %m");
  goto fail;

 nomem:
  nbdkit_error ("rebuild: %m");
 fail:
  gr_members_rebuild_end (gr_exec_members (x), which, GR_REBUILD_PAUSED);
  teardown (rb);
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
  teardown (rb);
}
