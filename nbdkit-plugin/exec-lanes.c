/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the executor: a job's batches in lanes.  See exec.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/now.h"
#include "exec.h"
#include "exec-internal.h"
#include "log.h"
#include "pool.h"
#include "common/thread.h"

/* -D gpuraid.job_threads=N: a job's CPU work (checksums, coding) on N
 * threads instead of one a core (to measure what every core brings). */
NBDKIT_DLL_PUBLIC int gpuraid_debug_job_threads = 0;
/* -D gpuraid.lane_stall_ms=N (tests): each even batch waits N ms before
 * its writes, so that the odd one after it writes first. */
NBDKIT_DLL_PUBLIC int gpuraid_debug_lane_stall_ms = 0;

/* A lane's batch: given to it (ISSUED), then DONE (outcome). */
enum lane_state { IDLE, ISSUED, DONE };

/* The steps taken in batch order, one batch at a time each (turn[] is
 * the batch whose turn it is): the lock, the coding, the start of the
 * writes (which then overlap) and the end (fronts, release, done). */
enum step { STEP_LOCK, STEP_CODE, STEP_WRITE, STEP_END, NSTEPS };

struct lane {
  struct gr_exec_lanes *l;
  pthread_t thread;
  bool started;
  struct gr_plan *p;
  struct gr_mio *mio;
  uint8_t *buf;
  bool pinned;                  /* buf from the coder (page-locked) */
  /* Under l->pl: */
  enum lane_state state;
  uint64_t seq;                 /* the batch's number */
  uint64_t s0, ns;
  enum gr_exec_outcome out;
};

struct gr_exec_lanes {
  struct gr_exec *x;
  struct gr_exec_batches ops;
  size_t scratch;
  struct gr_pool *pool;         /* a batch's CPU work (checksums, coding):
                                 * one thread a core, the lanes' own
                                 * among them */
  struct lane lane[GR_EXEC_LANES];
  pthread_mutex_t pl;           /* the fields below, lanes' states; leaf */
  pthread_cond_t pc;
  uint64_t turn[NSTEPS];
  uint64_t next;                /* batches given out */
  bool failed;                  /* a batch failed: no later one starts
                                 * writing or ends done */
  bool failed_since;            /* ... since the last drain */
  bool quit;
  double busy[3];               /* seconds reading, coding, writing */
  int writers;                  /* batches writing now */
  uint64_t batches, overlapped; /* batches that wrote; of them, those that
                                 * began while another one was writing */
};

/* Under l->pl: wait for batch seq's turn at step st. */
static void
wait_turn (struct gr_exec_lanes *l, enum step st, uint64_t seq)
{
  while (l->turn[st] != seq)
    pthread_cond_wait (&l->pc, &l->pl);
}

/* Under l->pl: the next batch's turn at step st. */
static void
pass_turn (struct gr_exec_lanes *l, enum step st)
{
  l->turn[st]++;
  pthread_cond_broadcast (&l->pc);
}

/* A block of the batch that failed its checksum (or a read error)
 * repaired, its stripes held: DONE (or past repair: its row recorded,
 * and skipped when the batch is read again, where the job goes on over
 * such rows), else ERROR. */
static enum gr_exec_outcome
repair (struct gr_exec_lanes *l, struct gr_exec_bad *bad,
        struct gr_exec_result *res)
{
  const size_t nrows = res->nrows;

  if (gr_exec_repair_bad (l->x, bad, true, false, res) == GR_EXEC_DONE)
    return GR_EXEC_DONE;
  if (!l->ops.go_on_unrecoverable || errno != EIO || res->nrows == nrows)
    return GR_EXEC_ERROR;
  res->unrecoverable++;
  return GR_EXEC_DONE;
}

/* Plan and read the batch on lane ln, its stripes held: planned again
 * while a member fails under it, or after a block that failed its
 * checksum was repaired.  bad->after_coding: the reads are verified
 * after the coding (a rebuild's GPU reconstructs sum them). */
static enum gr_exec_outcome
plan_and_read (struct gr_exec_lanes *l, struct lane *ln,
               const struct gr_bufs *b, struct gr_exec_result *res,
               struct gr_exec_bad *bad)
{
  struct gr_exec *x = l->x;
  struct gr_plan *p = ln->p;
  enum gr_exec_outcome r;
  struct gr_exec_snap sn;
  struct gr_plan_ctx c;

  do {
    gr_exec_plan_ctx (x, &sn, &c);
    switch (l->ops.plan (l->ops.arg, &c, ln->s0, ln->ns, p)) {
    case GR_PLAN_SKIP:
      return GR_EXEC_DONE;
    case GR_PLAN_REFUSE:
      errno = EIO;
      return GR_EXEC_ERROR;
    default:
      break;
    }
    if (p->scratch_len > l->scratch) {
      nbdkit_error ("batch of stripes %" PRIu64 "+%" PRIu64 ": its plan "
                    "needs %zu bytes of a lane's %zu", ln->s0, ln->ns,
                    p->scratch_len, l->scratch);
      errno = ENOMEM;
      return GR_EXEC_ERROR;
    }
    bad->after_coding = gr_exec_sums_after (x, p);
    r = gr_exec_read_stage (x, p, b, ln->mio, l->ops.policy, l->pool,
                            bad);
    /* The batch's stripes are held: the repair runs under them. */
    if (bad->member >= 0 && repair (l, bad, res) != GR_EXEC_DONE)
      return GR_EXEC_ERROR;
  } while (r == GR_EXEC_REPLAN);
  return r;
}

/* Code the batch on lane ln (read, its stripes held); reads verified
 * after the coding against the checksums it computed: a bad block
 * repaired and the batch planned, read and coded again. */
static enum gr_exec_outcome
code_batch (struct gr_exec_lanes *l, struct lane *ln,
            const struct gr_bufs *b, struct gr_exec_result *res,
            struct gr_exec_bad *bad)
{
  struct gr_plan *p = ln->p;
  enum gr_exec_outcome r;

  for (;;) {
    r = gr_exec_code_stage (l->x, p, b, l->pool);
    if (r != GR_EXEC_DONE || !bad->after_coding ||
        gr_exec_verify_coded (l->x, p, ln->mio, bad) == GR_EXEC_DONE)
      return r;
    if (bad->member >= 0 && repair (l, bad, res) != GR_EXEC_DONE)
      return GR_EXEC_ERROR;
    p->kind = GR_PLAN_SKIP;
    r = plan_and_read (l, ln, b, res, bad);
    if (r != GR_EXEC_DONE || p->kind == GR_PLAN_SKIP)
      return r;
  }
}

/* One batch on lane ln: lock, plan and read, code, write, end, each step
 * but the reads and the writes in its turn. */
static void
run_batch (struct gr_exec_lanes *l, struct lane *ln)
{
  struct gr_exec *x = l->x;
  struct gr_plan *p = ln->p;
  const struct gr_plan held = { .s0 = ln->s0, .nstripes = ln->ns,
                                .lock = l->ops.lock };
  struct gr_bufs b = { .scratch = ln->buf, .zero = x->zero };
  struct gr_exec_result res = { .rewritten = 0 };
  struct gr_exec_bad bad = { .skip = &res };
  enum gr_exec_outcome r;
  bool write, before_failed;
  double t[4];

  pthread_mutex_lock (&l->pl);
  wait_turn (l, STEP_LOCK, ln->seq);
  pthread_mutex_unlock (&l->pl);
  gr_exec_lock_plan (x, &held);
  pthread_mutex_lock (&l->pl);
  pass_turn (l, STEP_LOCK);
  pthread_mutex_unlock (&l->pl);

  t[0] = gr_now ();
  p->kind = GR_PLAN_SKIP;
  r = plan_and_read (l, ln, &b, &res, &bad);
  t[1] = gr_now ();
  pthread_mutex_lock (&l->pl);
  wait_turn (l, STEP_CODE, ln->seq);
  pthread_mutex_unlock (&l->pl);
  t[2] = gr_now ();
  if (r == GR_EXEC_DONE && p->kind != GR_PLAN_SKIP)
    r = code_batch (l, ln, &b, &res, &bad);
  t[3] = gr_now ();

  pthread_mutex_lock (&l->pl);
  l->busy[0] += t[1] - t[0];
  l->busy[1] += t[3] - t[2];
  pass_turn (l, STEP_CODE);
  wait_turn (l, STEP_WRITE, ln->seq);
  /* After a batch that failed none starts writing: a job's position must
   * not pass stripes that were not done. */
  if (r != GR_EXEC_DONE)
    l->failed = l->failed_since = true;
  else if (l->failed) {
    errno = EIO;
    r = GR_EXEC_ERROR;
  }
  pthread_mutex_unlock (&l->pl);
  write = r == GR_EXEC_DONE && p->kind != GR_PLAN_SKIP;
  /* A rebuild's replacements may be written up to the batch's end, in
   * batch order (the fronts only go forward). */
  if (write)
    gr_exec_fronts_open (x, p);
  pthread_mutex_lock (&l->pl);
  if (write) {
    l->batches++;
    l->overlapped += l->writers > 0;
    l->writers++;
  }
  pass_turn (l, STEP_WRITE);
  pthread_mutex_unlock (&l->pl);
  if (write && gpuraid_debug_lane_stall_ms > 0 && ln->seq % 2 == 0)
    usleep (gpuraid_debug_lane_stall_ms * 1000);
  /* The writes of the batches after this one overlap its own: each
   * batch's stripes are its own, held. */
  t[0] = gr_now ();
  if (write)
    r = gr_exec_write_members (x, p, &b, ln->mio, l->ops.policy, l->pool,
                               &res);
  t[1] = gr_now ();
  pthread_mutex_lock (&l->pl);
  l->writers -= write;
  wait_turn (l, STEP_END, ln->seq);
  /* A batch before this one failed while this one was writing: this one
   * is not done either (written, it is done again when the job goes on
   * from its position), and its fronts stay where that one left them. */
  before_failed = l->failed;
  if (before_failed && r == GR_EXEC_DONE) {
    errno = EIO;
    r = GR_EXEC_ERROR;
  }
  pthread_mutex_unlock (&l->pl);
  /* Reads may use the replacements up to the batch's end once every
   * batch before it is there: in batch order, its stripes held. */
  if (write && !before_failed && r != GR_EXEC_REPLAN)
    gr_exec_fronts_close (x, p);
  /* Then the rows past repair marked unreadable: what a rebuild wrote
   * there is read back from its replacements, below their fronts. */
  if (r == GR_EXEC_DONE && res.nrows > 0)
    gr_exec_poison_rows (x, p, &res);
  gr_exec_unlock_plan (x, &held);
  /* The job hears of its batches in batch order (its position is the
   * written front). */
  l->ops.done (l->ops.arg, p, r, &res);
  pthread_mutex_lock (&l->pl);
  if (r != GR_EXEC_DONE)
    l->failed = l->failed_since = true;
  l->busy[2] += t[1] - t[0];
  pass_turn (l, STEP_END);
  ln->out = r;
  ln->state = DONE;
  pthread_cond_broadcast (&l->pc);
  pthread_mutex_unlock (&l->pl);
}

static void *
lane_thread (void *arg)
{
  struct lane *ln = arg;
  struct gr_exec_lanes *l = ln->l;

  for (;;) {
    bool issued;

    pthread_mutex_lock (&l->pl);
    while (ln->state != ISSUED && !l->quit)
      pthread_cond_wait (&l->pc, &l->pl);
    issued = ln->state == ISSUED;
    pthread_mutex_unlock (&l->pl);
    if (!issued)
      return NULL;
    run_batch (l, ln);
  }
}

/* Wait until lane ln is idle.  false if the batch it ran last failed. */
static bool
retire (struct gr_exec_lanes *l, struct lane *ln)
{
  bool ok = true;

  pthread_mutex_lock (&l->pl);
  while (ln->state == ISSUED)
    pthread_cond_wait (&l->pc, &l->pl);
  if (ln->state == DONE) {
    ok = ln->out == GR_EXEC_DONE;
    ln->state = IDLE;
  }
  pthread_mutex_unlock (&l->pl);
  return ok;
}

bool
gr_exec_lanes_submit (struct gr_exec_lanes *l, uint64_t s0, uint64_t ns)
{
  struct lane *ln = &l->lane[l->next % GR_EXEC_LANES];

  if (!retire (l, ln))
    return false;
  pthread_mutex_lock (&l->pl);
  ln->seq = l->next++;
  ln->s0 = s0;
  ln->ns = ns;
  ln->state = ISSUED;
  pthread_cond_broadcast (&l->pc);
  pthread_mutex_unlock (&l->pl);
  return true;
}

bool
gr_exec_lanes_drain (struct gr_exec_lanes *l)
{
  bool ok = true;

  /* Oldest first. */
  for (uint64_t i = l->next; i < l->next + GR_EXEC_LANES; i++)
    ok &= retire (l, &l->lane[i % GR_EXEC_LANES]);
  pthread_mutex_lock (&l->pl);
  ok &= !l->failed_since;
  l->failed_since = false;
  pthread_mutex_unlock (&l->pl);
  return ok;
}

void
gr_exec_lanes_busy (struct gr_exec_lanes *l, double busy[3])
{
  pthread_mutex_lock (&l->pl);
  memcpy (busy, l->busy, sizeof l->busy);
  pthread_mutex_unlock (&l->pl);
}

void
gr_exec_lanes_free (struct gr_exec_lanes *l)
{
  if (l == NULL)
    return;
  gr_exec_lanes_drain (l);
  if (l->batches > 0)
    gr_debug ("lanes: %" PRIu64 " batches written, %" PRIu64 " of them "
              "begun while another was writing", l->batches, l->overlapped);
  pthread_mutex_lock (&l->pl);
  l->quit = true;
  pthread_cond_broadcast (&l->pc);
  pthread_mutex_unlock (&l->pl);
  for (int i = 0; i < GR_EXEC_LANES; i++) {
    struct lane *ln = &l->lane[i];

    if (ln->started)
      pthread_join (ln->thread, NULL);
    gr_plan_free (ln->p);
    free (ln->mio);
    if (ln->pinned)
      gr_coding_host_free (l->x->coding, ln->buf);
    else
      free (ln->buf);
  }
  gr_pool_free (l->pool);
  pthread_cond_destroy (&l->pc);
  pthread_mutex_destroy (&l->pl);
  free (l);
}

struct gr_exec_lanes *
gr_exec_lanes_new (struct gr_exec *x, const struct gr_exec_batches *ops,
                   uint64_t max_ns, size_t scratch)
{
  struct gr_exec_lanes *l = calloc (1, sizeof *l);
  int e, i;

  if (l == NULL) {
    nbdkit_error ("lanes: %m");
    return NULL;
  }
  l->x = x;
  l->ops = *ops;
  l->scratch = scratch;
  /* NULL (out of memory): each lane works alone. */
  l->pool = gr_pool_new ((gpuraid_debug_job_threads > 0
                          ? gpuraid_debug_job_threads
                          : (int) sysconf (_SC_NPROCESSORS_ONLN)) - 1);
  pthread_mutex_init (&l->pl, NULL);
  pthread_cond_init (&l->pc, NULL);
  for (i = 0; i < GR_EXEC_LANES; i++) {
    struct lane *ln = &l->lane[i];

    ln->l = l;
    ln->p = gr_plan_new_batch (&x->g, max_ns);
    ln->mio = ln->p ? malloc (ln->p->cap_io * sizeof *ln->mio) : NULL;
    /* Page-locked where a GPU codes, so that its copies run at full
     * speed; else page-aligned all the same, so that O_DIRECT members
     * read and write its blocks in place, not through a bounce buffer
     * (malloc's alignment is 16 bytes). */
    ln->buf = gr_coding_host_alloc (x->coding, scratch);
    ln->pinned = ln->buf != NULL;
    if (!ln->pinned && posix_memalign ((void **) &ln->buf, 4096,
                                       scratch ? scratch : 4096) != 0)
      ln->buf = NULL;
    if (ln->p == NULL || ln->mio == NULL || ln->buf == NULL) {
      nbdkit_error ("lanes: out of memory (%zu bytes a lane)", scratch);
      goto fail;
    }
  }
  for (i = 0; i < GR_EXEC_LANES; i++) {
    e = gr_thread_create (&l->lane[i].thread, NULL, lane_thread, &l->lane[i]);
    if (e != 0) {
      errno = e;
      nbdkit_error ("lanes: pthread_create: %m");
      goto fail;
    }
    l->lane[i].started = true;
  }
  return l;
 fail:
  gr_exec_lanes_free (l);
  return NULL;
}
