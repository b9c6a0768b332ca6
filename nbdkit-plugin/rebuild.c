/* gpuraid - rebuilding a member online.  See rebuild.h. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
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
  int member;
  pthread_t thread;
  struct gr_pace *pace;
  uint8_t *buf;
  bool pinned;                  /* buf from the coder (page-locked) */
  uint64_t batch;               /* stripes */
  uint64_t from;                /* the stripe it started from (resumed) */
  /* Progress, atomic: array bytes done and to do, enum gr_resync_state. */
  uint64_t done, total;
  int state;
};

static void *
rebuild_thread (void *arg)
{
  struct gr_rebuild *rb = arg;
  struct gr_members *ms = gr_exec_members (rb->x);
  const struct gr_geom *g = gr_exec_geom (rb->x);
  const uint64_t width = gr_map_stripe_width (g);
  enum gr_resync_state st = GR_RESYNC_DONE;
  uint64_t s = rb->from;
  int last_pct = (int) (s * 10 / g->stripes);
  double checkpointed = gr_pace_seconds (rb->pace);

  gr_debug ("rebuild of member %d (%s): %" PRIu64 " stripes from stripe %"
            PRIu64, rb->member, gr_members_path (ms, rb->member), g->stripes,
            s);
  while (s < g->stripes) {
    /* A tenth of a second's worth under a rate limit: the limit is kept
     * smoothly and writers wait for short batches only. */
    const uint64_t rate = gr_pace_rate (rb->pace);
    uint64_t ns = rate && rate / 10 / width < rb->batch
      ? (rate / 10 / width ? rate / 10 / width : 1) : rb->batch;
    uint64_t done;

    if (ns > g->stripes - s)
      ns = g->stripes - s;

    switch (gr_exec_rebuild (rb->x, rb->member, s, ns, rb->buf)) {
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
    done = __atomic_add_fetch (&rb->done, ns * width, __ATOMIC_RELAXED);
    if (s * 10 / g->stripes > (uint64_t) last_pct) {
      last_pct = (int) (s * 10 / g->stripes);
      gr_debug ("rebuild of member %d: %d0%% (%" PRIu64 " MiB in %.1f s)",
                rb->member, last_pct, done >> 20, gr_pace_seconds (rb->pace));
    }
    /* A checkpoint every CHECKPOINT_S: a restart resumes from there. */
    if (s < g->stripes &&
        gr_pace_seconds (rb->pace) - checkpointed >= CHECKPOINT_S) {
      if (!gr_members_rebuild_checkpoint (ms, rb->member, s)) {
        st = GR_RESYNC_FAILED;
        goto end;
      }
      checkpointed = gr_pace_seconds (rb->pace);
    }
    if (s < g->stripes && gr_pace_wait (rb->pace,
                                        done - rb->from * width)) {
      st = GR_RESYNC_STOPPED;
      goto end;
    }
  }
  if (gr_members_state (ms, rb->member) != GR_MEMBER_REBUILDING)
    st = GR_RESYNC_FAILED;      /* the replacement failed */
 end:
  if (st == GR_RESYNC_DONE) {
    /* Synced there before the superblocks say that it is live. */
    if (!gr_members_rebuild_end (ms, rb->member, GR_REBUILD_DONE))
      st = GR_RESYNC_FAILED;
    else {
      gr_bitmap_checkpoint (rb->b);
      gr_warn ("rebuild of member %d (%s) done: %" PRIu64 " stripes in "
               "%.1f s; %d of %d members failed", rb->member,
               gr_members_path (ms, rb->member), g->stripes,
               gr_pace_seconds (rb->pace), gr_members_nfailed (ms),
               gr_members_n (ms));
    }
  }
  else if (st == GR_RESYNC_STOPPED &&
           gr_members_rebuild_checkpoint (ms, rb->member, s)) {
    gr_members_rebuild_end (ms, rb->member, GR_REBUILD_PAUSED);
    gr_warn ("rebuild of member %d paused at shutdown after %" PRIu64
             " of %" PRIu64 " stripes: it resumes from there when the array "
             "starts with member=%s", rb->member, s, g->stripes,
             gr_members_path (ms, rb->member));
  }
  else {
    gr_members_rebuild_end (ms, rb->member, GR_REBUILD_ABANDONED);
    if (st == GR_RESYNC_STOPPED)
      gr_warn ("rebuild of member %d stopped at shutdown after %" PRIu64
               " of %" PRIu64 " stripes, its checkpoint not recorded: the "
               "member stays failed; replace it again", rb->member, s,
               g->stripes);
    else
      gr_warn ("rebuild of member %d (%s) failed after %" PRIu64 " of %"
               PRIu64 " stripes (see the error before): the member stays "
               "failed", rb->member, gr_members_path (ms, rb->member), s,
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
gr_rebuild_start (struct gr_exec *x, struct gr_bitmap *b, int member,
                  uint64_t from, uint64_t rate)
{
  const struct gr_geom *g = gr_exec_geom (x);
  struct gr_rebuild *rb = calloc (1, sizeof *rb);
  int e;

  if (rb == NULL)
    goto nomem;
  rb->x = x;
  rb->b = b;
  rb->member = member;
  rb->batch = BUF_BYTES / ((size_t) (g->k + g->m) * g->chunk);
  if (rb->batch < 1)
    rb->batch = 1;
  if (rb->batch > g->stripes)
    rb->batch = g->stripes;
  rb->from = from;
  rb->done = from * gr_map_stripe_width (g);
  rb->total = g->stripes * gr_map_stripe_width (g);
  rb->state = GR_RESYNC_RUNNING;
  rb->pace = gr_pace_new (rate);
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
  gr_members_rebuild_end (gr_exec_members (x), member, GR_REBUILD_PAUSED);
  if (rb) {
    gr_pace_free (rb->pace);
    free_buf (rb);
  }
  free (rb);
  return NULL;
}

void
gr_rebuild_progress (struct gr_rebuild *rb, struct gr_resync_progress *out)
{
  out->state = __atomic_load_n (&rb->state, __ATOMIC_ACQUIRE);
  out->done_bytes = __atomic_load_n (&rb->done, __ATOMIC_RELAXED);
  out->total_bytes = rb->total;
  out->from_bytes = rb->from * gr_map_stripe_width (gr_exec_geom (rb->x));
  out->seconds = gr_pace_seconds (rb->pace);
  out->rate_limit = gr_pace_rate (rb->pace);
}

int
gr_rebuild_member (const struct gr_rebuild *rb)
{
  return rb->member;
}

void
gr_rebuild_set_rate (struct gr_rebuild *rb, uint64_t rate)
{
  gr_pace_set_rate (rb->pace, rate,
                    __atomic_load_n (&rb->done, __ATOMIC_RELAXED)
                    - rb->from * gr_map_stripe_width (gr_exec_geom (rb->x)));
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
  free (rb);
}
