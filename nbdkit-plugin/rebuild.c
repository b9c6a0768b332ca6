/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - rebuilding members online.  See rebuild.h. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cksum.h"
#include "events.h"
#include "job.h"
#include "log.h"
#include "rebuild.h"
#include "members.h"

/* Each batch's buffer (all members' chunks of the stripes it holds
 * exclusively): large, so that each erasure pattern's stripes make one
 * large coding operation. */
#define BUF_BYTES ((size_t) 128 << 20)

struct gr_rebuild {
  struct gr_exec *x;
  struct gr_bitmap *b;
  struct gr_job *job;
  pthread_mutex_t lock;         /* the fields below; leaf */
  bool which[GR_MAX_MEMBERS];   /* the members of the pass */
  bool added[GR_MAX_MEMBERS];   /* joining at the next batch */
  bool closed;                  /* the pass takes no more members */
  char names[1024];             /* which[], as a list "1, 3" */
  /* Each member's stripes decoded, zeroed (never written) and kept (a
   * re-add's, not written since it left) by the batches done. */
  uint64_t decoded[GR_MAX_MEMBERS], zeroed[GR_MAX_MEMBERS],
    kept[GR_MAX_MEMBERS];
};

/* Do the stripes [s0, s0 + ns) hold a region written, degraded? */
static void
range_maps (struct gr_rebuild *rb, uint64_t s0, uint64_t ns, bool *anyw,
            bool *anyd)
{
  uint64_t s = s0;

  *anyw = *anyd = false;
  while (s < s0 + ns && !(*anyw && *anyd)) {
    bool w, d;

    s = gr_bitmap_maps_run (rb->b, s, &w, &d);
    *anyw |= w;
    *anyd |= d;
  }
}

/* What the batch does for member i of the pass (being rebuilt), the
 * stripes holding a region written (anyw), one written since the
 * degraded map began (anyd): a re-add rebuilds only the latter, a
 * replacement the former and zeroes the rest. */
static enum gr_rb_action
action (struct gr_rebuild *rb, int i, bool anyw, bool anyd)
{
  if (gr_members_rebuild_readd (gr_exec_members (rb->x), i))
    return anyd ? GR_RB_DECODE : GR_RB_KEEP;
  return anyw ? GR_RB_DECODE : GR_RB_ZERO;
}

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

static const char *
plural (const char *names)
{
  return strchr (names, ',') ? "s" : "";
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
  list (rb->which, n, rb->names, sizeof rb->names);
  return any;
}

/* The event of member i's rebuild ending (result: done, failed,
 * paused). */
static void
finished (struct gr_rebuild *rb, int i, const char *result)
{
  uint64_t d, z, k;

  pthread_mutex_lock (&rb->lock);
  d = rb->decoded[i];
  z = rb->zeroed[i];
  k = rb->kept[i];
  pthread_mutex_unlock (&rb->lock);
  gr_event (GR_EV_REBUILD_FINISHED, i,
            gr_members_path (gr_exec_members (rb->x), i), NULL,
            "result=%s seconds=%.1f rebuilt_stripes=%" PRIu64
            " zeroed_stripes=%" PRIu64 " kept_stripes=%" PRIu64, result,
            gr_job_seconds (rb->job), d, z, k);
}

/* The job's next batch (job.h). */
static enum gr_job_next
rebuild_next (void *arg, bool drained, uint64_t *s, uint64_t *end)
{
  struct gr_rebuild *rb = arg;
  struct gr_members *ms = gr_exec_members (rb->x);
  const struct gr_geom *g = gr_exec_geom (rb->x);
  const int n = g->k + g->m;
  enum gr_job_next r = GR_JOB_GO;
  bool any = false;
  int i, left = 0;

  /* A member that joins: the batches in flight end first. */
  pthread_mutex_lock (&rb->lock);
  for (i = 0; i < n; i++)
    any |= rb->added[i];
  if (any && !drained) {
    pthread_mutex_unlock (&rb->lock);
    return GR_JOB_DRAIN;
  }
  if (any)
    for (i = 0; i < n; i++)
      if (rb->added[i])
        gr_event (GR_EV_REBUILD_STARTED, i, gr_members_path (ms, i), NULL,
                  "joined=1");
  if (any && take_added_locked (rb, n, s)) {
    gr_warn ("rebuild of members %s goes on from stripe %" PRIu64 ", "
             "where the member that joined starts", rb->names, *s);
    r = GR_JOB_GO_FROM;
  }
  if (*s >= g->stripes) {
    rb->closed = true;
    pthread_mutex_unlock (&rb->lock);
    return GR_JOB_END;
  }
  pthread_mutex_unlock (&rb->lock);
  /* A replacement that failed leaves the pass (the error said why). */
  for (i = 0; i < n; i++) {
    bool one[GR_MAX_MEMBERS] = { false };

    if (!rb->which[i])
      continue;
    if (gr_members_state (ms, i) == GR_MEMBER_REBUILDING) {
      left++;
      continue;
    }
    one[i] = true;
    gr_members_rebuild_end (ms, one, GR_REBUILD_ABANDONED);
    gr_warn ("rebuild of member %d (%s) failed after %" PRIu64 " of %"
             PRIu64 " stripes (see the error before): the member stays "
             "failed", i, gr_members_path (ms, i),
             gr_job_position (rb->job), g->stripes);
    finished (rb, i, "failed");
    pthread_mutex_lock (&rb->lock);
    rb->which[i] = false;
    list (rb->which, n, rb->names, sizeof rb->names);
    pthread_mutex_unlock (&rb->lock);
  }
  if (left == 0)
    return GR_JOB_FAIL;
  /* A run of regions alike: one with nothing to decode goes fast. */
  {
    bool w, d, decode = false;

    *end = gr_bitmap_maps_run (rb->b, *s, &w, &d);
    pthread_mutex_lock (&rb->lock);
    for (i = 0; i < n; i++)
      if (rb->which[i] && action (rb, i, w, d) == GR_RB_DECODE)
        decode = true;
    pthread_mutex_unlock (&rb->lock);
    return r == GR_JOB_GO && !decode ? GR_JOB_GO_LIGHT : r;
  }
}

/* A batch's plan (exec.h), its stripes held: the members of the pass
 * still being rebuilt. */
static enum gr_plan_kind
rebuild_plan (void *arg, const struct gr_plan_ctx *c, uint64_t s0,
              uint64_t ns, struct gr_plan *p)
{
  struct gr_rebuild *rb = arg;
  struct gr_members *ms = gr_exec_members (rb->x);
  const struct gr_geom *g = gr_exec_geom (rb->x);
  enum gr_rb_action act[GR_MAX_MEMBERS];
  bool anyw, anyd;

  /* The maps as they are now, the stripes held: a write there since the
   * batch was cut made its region written before its member writes. */
  range_maps (rb, s0, ns, &anyw, &anyd);
  pthread_mutex_lock (&rb->lock);
  for (int i = 0; i < g->k + g->m; i++)
    act[i] = rb->which[i] && gr_members_state (ms, i) == GR_MEMBER_REBUILDING
      ? action (rb, i, anyw, anyd) : GR_RB_NONE;
  pthread_mutex_unlock (&rb->lock);
  return gr_plan_rebuild (c, act, s0, ns, p);
}

/* A batch done: what it did for each member, counted. */
static void
rebuild_done (void *arg, const struct gr_plan *p, enum gr_exec_outcome o,
              const struct gr_exec_result *res)
{
  struct gr_rebuild *rb = arg;
  const struct gr_geom *g = gr_exec_geom (rb->x);
  uint64_t dec[GR_MAX_MEMBERS] = { 0 }, zer[GR_MAX_MEMBERS] = { 0 };

  if (o != GR_EXEC_DONE || p->kind != GR_PLAN_REBUILD)
    return;
  for (size_t w = 0; w < p->nwrite; w++) {
    const struct gr_io *io = &p->write[w];

    if (io->kind == GR_IO_PUNCH || io->kind == GR_IO_ZERO_RANGE ||
        io->buf.space == GR_SPACE_ZERO)
      zer[io->member] += io->len / g->chunk;
    else
      dec[io->member] += io->len / g->chunk;
  }
  pthread_mutex_lock (&rb->lock);
  for (int i = 0; i < g->k + g->m; i++)
    if (p->rb_adv[i]) {
      rb->decoded[i] += dec[i];
      rb->zeroed[i] += zer[i];
      if (dec[i] + zer[i] < p->nstripes)
        rb->kept[i] += p->nstripes - dec[i] - zer[i];
    }
  pthread_mutex_unlock (&rb->lock);
}

/* The replacements' block checksums are written before they are synced
 * (a checkpoint, the end): below a checkpoint they are right too. */
static bool
flush_cksum (struct gr_rebuild *rb)
{
  struct gr_cksum *cs = gr_exec_cksum (rb->x);

  return cs == NULL || gr_cksum_flush (cs) == 0;
}

/* A checkpoint: the fronts taken first, then the checksums flushed, then
 * the fronts recorded no further than where they were taken (a lane's
 * batch that ends during the flush sets checksums it does not write). */
static bool
checkpoint (struct gr_rebuild *rb)
{
  struct gr_members *ms = gr_exec_members (rb->x);
  uint64_t upto[GR_MAX_MEMBERS];

  gr_members_rebuilding (ms, upto);
  return flush_cksum (rb) && gr_members_rebuild_checkpoint (ms, upto);
}

/* Every second a checkpoint: a restart resumes from there (the least
 * front, which only written batches move); each tenth, progress. */
static bool
rebuild_tick (void *arg, enum gr_job_tick why, int pct)
{
  struct gr_rebuild *rb = arg;
  const struct gr_geom *g = gr_exec_geom (rb->x);

  if (why == GR_JOB_SECOND)
    return gr_job_position (rb->job) >= g->stripes ||
      checkpoint (rb);
  pthread_mutex_lock (&rb->lock);
  gr_debug ("rebuild of member%s %s: %d%% (%.1f s)", plural (rb->names),
            rb->names, pct, gr_job_seconds (rb->job));
  pthread_mutex_unlock (&rb->lock);
  return true;
}

/* The end: the members live, paused (resumed at the next start) or
 * abandoned. */
static void
rebuild_finish (void *arg, enum gr_job_state st)
{
  struct gr_rebuild *rb = arg;
  struct gr_members *ms = gr_exec_members (rb->x);
  const struct gr_geom *g = gr_exec_geom (rb->x);
  const int n = g->k + g->m;
  const uint64_t pos = gr_job_position (rb->job);
  bool which[GR_MAX_MEMBERS], readd[GR_MAX_MEMBERS];
  double busy[3];
  int i;

  for (i = 0; i < n; i++)
    readd[i] = gr_members_rebuild_readd (ms, i);
  gr_job_busy (rb->job, busy);
  gr_debug ("rebuild: %.1f s, in which its %d lanes were reading %.1f s, "
            "coding %.1f s and writing %.1f s", gr_job_seconds (rb->job),
            GR_EXEC_LANES, busy[0], busy[1], busy[2]);
  /* No member joins from here; one that joined since the last batch
   * ends with the others (paused or abandoned: it never gets done). */
  pthread_mutex_lock (&rb->lock);
  rb->closed = true;
  for (i = 0; i < n; i++)
    if (rb->added[i]) {
      rb->added[i] = false;
      rb->which[i] = true;
    }
  memcpy (which, rb->which, sizeof which);
  list (which, n, rb->names, sizeof rb->names);
  pthread_mutex_unlock (&rb->lock);
  if (st == GR_JOB_DONE) {
    /* Synced there before the superblocks say that they are live. */
    if (!flush_cksum (rb) ||
        !gr_members_rebuild_end (ms, which, GR_REBUILD_DONE))
      st = GR_JOB_FAILED;
    gr_bitmap_checkpoint (rb->b);
    for (i = 0; i < n; i++)
      if (which[i]) {
        if (gr_members_state (ms, i) == GR_MEMBER_ACTIVE && readd[i])
          gr_warn ("re-add of member %d (%s) done in %.1f s: %" PRIu64
                   " of %" PRIu64 " stripes rebuilt (written since it "
                   "left), %" PRIu64 " kept; %d of %d members failed", i,
                   gr_members_path (ms, i), gr_job_seconds (rb->job),
                   rb->decoded[i], g->stripes, rb->kept[i],
                   gr_members_nfailed (ms), n);
        else if (gr_members_state (ms, i) == GR_MEMBER_ACTIVE)
          gr_warn ("rebuild of member %d (%s) done: %" PRIu64 " stripes in "
                   "%.1f s (%" PRIu64 " rebuilt, %" PRIu64 " never written: "
                   "zeroed); %d of %d members failed", i,
                   gr_members_path (ms, i), g->stripes,
                   gr_job_seconds (rb->job), rb->decoded[i], rb->zeroed[i],
                   gr_members_nfailed (ms), n);
        else
          gr_warn ("rebuild of member %d (%s) failed at its end (see the "
                   "error before): the member stays failed", i,
                   gr_members_path (ms, i));
        if (gr_members_state (ms, i) == GR_MEMBER_ACTIVE && readd[i])
          gr_event (GR_EV_RE_ADDED, i, gr_members_path (ms, i), NULL,
                    "rebuilt_stripes=%" PRIu64 " kept_stripes=%" PRIu64
                    " seconds=%.1f", rb->decoded[i], rb->kept[i],
                    gr_job_seconds (rb->job));
        else
          finished (rb, i, gr_members_state (ms, i) == GR_MEMBER_ACTIVE
                    ? "done" : "failed");
      }
  }
  else if (st == GR_JOB_STOPPED && checkpoint (rb)) {
    gr_members_rebuild_end (ms, which, GR_REBUILD_PAUSED);
    for (i = 0; i < n; i++)
      if (which[i])
        finished (rb, i, "paused");
    gr_warn ("rebuild of member%s %s paused at shutdown after %" PRIu64
             " of %" PRIu64 " stripes: it resumes from there when the array "
             "starts with %s replacement%s as member=", plural (rb->names),
             rb->names, pos, g->stripes,
             strchr (rb->names, ',') ? "their" : "its", plural (rb->names));
  }
  else {
    gr_members_rebuild_end (ms, which, GR_REBUILD_ABANDONED);
    for (i = 0; i < n; i++)
      if (which[i])
        finished (rb, i, "failed");
    if (st == GR_JOB_STOPPED)
      gr_warn ("rebuild of member%s %s stopped at shutdown after %" PRIu64
               " of %" PRIu64 " stripes, its checkpoint not recorded: the "
               "members stay failed; replace them again",
               plural (rb->names), rb->names, pos, g->stripes);
    else if (rb->names[0])
      gr_warn ("rebuild of member%s %s failed after %" PRIu64 " of %"
               PRIu64 " stripes (see the error before): the members stay "
               "failed", plural (rb->names), rb->names, pos, g->stripes);
  }
}

struct gr_rebuild *
gr_rebuild_start (struct gr_exec *x, struct gr_bitmap *b, const bool *which,
                  uint64_t from, uint64_t rate)
{
  const struct gr_geom *g = gr_exec_geom (x);
  const int n = g->k + g->m;
  const uint64_t width = gr_map_stripe_width (g);
  struct gr_rebuild *rb = calloc (1, sizeof *rb);
  struct gr_job_def def;
  uint64_t batch;

  if (rb == NULL) {
    nbdkit_error ("rebuild: %m");
    gr_members_rebuild_end (gr_exec_members (x), which, GR_REBUILD_PAUSED);
    return NULL;
  }
  rb->x = x;
  rb->b = b;
  memcpy (rb->which, which, (size_t) n * sizeof *which);
  list (rb->which, n, rb->names, sizeof rb->names);
  pthread_mutex_init (&rb->lock, NULL);
  batch = BUF_BYTES / ((size_t) n * g->chunk);
  if (batch < 1)
    batch = 1;
  if (batch > g->stripes)
    batch = g->stripes;
  def = (struct gr_job_def) {
    .batches = { .lock = GR_LOCK_EXCL, .policy = GR_MIO_FAIL_MEMBER,
                 .go_on_unrecoverable = true,
                 .plan = rebuild_plan, .done = rebuild_done },
    .batch = batch, .scratch = batch * (size_t) n * g->chunk,
    .total_bytes = g->stripes * width, .next = rebuild_next,
    .tick = rebuild_tick, .finish = rebuild_finish, .arg = rb,
  };
  gr_debug ("rebuild of member%s %s: %" PRIu64 " stripes from stripe %"
            PRIu64, plural (rb->names), rb->names, g->stripes, from);
  for (int i = 0; i < n; i++)
    if (which[i])
      gr_event (GR_EV_REBUILD_STARTED, i,
                gr_members_path (gr_exec_members (x), i), NULL,
                "from_stripe=%" PRIu64 " stripes=%" PRIu64 " readd=%d", from,
                g->stripes, gr_members_rebuild_readd (gr_exec_members (x),
                                                      i));
  /* The job's hooks read rb->job: it is set before they run. */
  pthread_mutex_lock (&rb->lock);
  rb->job = gr_job_start (x, &def, rate, from, from * width);
  pthread_mutex_unlock (&rb->lock);
  if (rb->job == NULL) {
    gr_members_rebuild_end (gr_exec_members (x), which, GR_REBUILD_PAUSED);
    pthread_mutex_destroy (&rb->lock);
    free (rb);
    return NULL;
  }
  return rb;
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
gr_rebuild_progress (struct gr_rebuild *rb, struct gr_progress *out)
{
  gr_job_progress (rb->job, out);
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
gr_rebuild_counts (struct gr_rebuild *rb, uint64_t *rebuilt,
                   uint64_t *skipped)
{
  const struct gr_geom *g = gr_exec_geom (rb->x);

  *rebuilt = *skipped = 0;
  pthread_mutex_lock (&rb->lock);
  for (int i = 0; i < g->k + g->m; i++) {
    if (rb->decoded[i] > *rebuilt)
      *rebuilt = rb->decoded[i];
    if (rb->zeroed[i] + rb->kept[i] > *skipped)
      *skipped = rb->zeroed[i] + rb->kept[i];
  }
  pthread_mutex_unlock (&rb->lock);
}

void
gr_rebuild_set_rate (struct gr_rebuild *rb, uint64_t rate)
{
  gr_job_set_rate (rb->job, rate);
}

void
gr_rebuild_stop (struct gr_rebuild *rb)
{
  if (rb == NULL)
    return;
  gr_job_free (rb->job);
  pthread_mutex_destroy (&rb->lock);
  free (rb);
}
