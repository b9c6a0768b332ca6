/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the executor.  See exec.h. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "journal.h"
#include "scratch.h"
#include "bitmap.h"
#include "log.h"
#include "steps.h"
#include "members.h"

#define NLOCKS 1024                     /* stripe lock table size */

/* Each thread's plan and the member I/O vector its reads and writes go
 * through. */
struct work {
  struct gr_plan *plan;
  struct gr_mio *mio;
};

struct gr_exec {
  struct gr_geom g;
  struct gr_members *ms;
  struct gr_coding *coding;
  struct gr_journal *journal;           /* none: NULL or no slots */
  struct gr_scratch *scratch;
  struct gr_bitmap *bitmap;             /* may be NULL */
  pthread_rwlock_t locks[NLOCKS];
  uint8_t *zero;                        /* a chunk of zeros */
  pthread_key_t work_key;
  uint64_t requests;                    /* atomic: the clients' */
};

static void
work_free (void *v)
{
  struct work *w = v;

  if (w) {
    gr_plan_free (w->plan);
    free (w->mio);
    free (w);
  }
}

struct gr_exec *
gr_exec_new (const struct gr_geom *g, struct gr_members *ms,
             const struct gr_exec_parts *parts)
{
  struct gr_exec *x = calloc (1, sizeof *x);
  int i;

  if (x == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  x->g = *g;
  x->ms = ms;
  x->coding = parts->coding;
  x->journal = parts->journal && gr_journal_slots (parts->journal)
    ? parts->journal : NULL;
  x->scratch = parts->scratch;
  x->bitmap = parts->bitmap;
  x->zero = calloc (1, g->chunk);
  if (x->zero == NULL || pthread_key_create (&x->work_key, work_free) != 0) {
    nbdkit_error ("executor: %m");
    free (x->zero);
    free (x);
    return NULL;
  }
  for (i = 0; i < NLOCKS; i++)
    pthread_rwlock_init (&x->locks[i], NULL);
  return x;
}

void
gr_exec_free (struct gr_exec *x)
{
  int i;

  if (x == NULL)
    return;
  /* The calling thread's work; other threads' went with them. */
  work_free (pthread_getspecific (x->work_key));
  pthread_key_delete (x->work_key);
  for (i = 0; i < NLOCKS; i++)
    pthread_rwlock_destroy (&x->locks[i]);
  free (x->zero);
  free (x);
}

const struct gr_geom *
gr_exec_geom (const struct gr_exec *x)
{
  return &x->g;
}

struct gr_members *
gr_exec_members (const struct gr_exec *x)
{
  return x->ms;
}

struct gr_coding *
gr_exec_coding (const struct gr_exec *x)
{
  return x->coding;
}

void
gr_exec_count_request (struct gr_exec *x)
{
  __atomic_add_fetch (&x->requests, 1, __ATOMIC_RELAXED);
}

const uint64_t *
gr_exec_requests (const struct gr_exec *x)
{
  return &x->requests;
}

static struct work *
get_work (struct gr_exec *x)
{
  struct work *w = pthread_getspecific (x->work_key);

  if (w)
    return w;
  w = calloc (1, sizeof *w);
  if (w)
    w->plan = gr_plan_new (&x->g);
  if (w && w->plan)
    w->mio = malloc (w->plan->cap_io * sizeof *w->mio);
  if (w == NULL || w->plan == NULL || w->mio == NULL ||
      pthread_setspecific (x->work_key, w) != 0) {
    work_free (w);
    nbdkit_error ("plan: out of memory");
    errno = ENOMEM;
    return NULL;
  }
  return w;
}

struct gr_plan *
gr_exec_plan (struct gr_exec *x)
{
  struct work *w = get_work (x);

  return w ? w->plan : NULL;
}

void
gr_exec_plan_ctx (struct gr_exec *x, struct gr_exec_snap *sn,
                  struct gr_plan_ctx *c)
{
  *c = (struct gr_plan_ctx) {
    .g = &x->g,
    .lm = gr_coding_len_multiple (x->coding),
    .failed = sn->failed,
    .gen = gr_members_snapshot (x->ms, sn->failed),
    .falloc = (gr_members_falloc_ok (x->ms, GR_MIO_PUNCH)
               ? GR_FALLOC_PUNCH : 0) |
              (gr_members_falloc_ok (x->ms, GR_MIO_ZERO)
               ? GR_FALLOC_ZERO : 0),
    .gpu = gr_coding_route,
    .gpu_arg = x->coding,
  };
  /* After the snapshot: a front that moves on changes its generation. */
  if (gr_members_rebuilding (x->ms, sn->front) > 0)
    c->rb_front = sn->front;
  /* Degraded with a journal: zero by writing (each stripe journaled), not
   * by fallocate over many stripes. */
  if (x->journal && gr_members_nfailed (x->ms) > 0)
    c->falloc = 0;
}

/* --- stripe locks ----------------------------------------------------- */

/* The lock table entries of stripes [s0, s0 + ns), in table order (so
 * that threads holding several never deadlock): one range, or two when
 * it wraps round the table. */
static void
lock_range (const struct gr_plan *p, int *lo1, int *hi1, int *lo2, int *hi2)
{
  int b = (int) (p->s0 % NLOCKS), e;

  *lo2 = 0;
  *hi2 = -1;
  if (p->nstripes >= NLOCKS) {
    *lo1 = 0;
    *hi1 = NLOCKS - 1;
    return;
  }
  e = (int) ((p->s0 + p->nstripes - 1) % NLOCKS);
  if (e >= b) {
    *lo1 = b;
    *hi1 = e;
  }
  else {
    *lo1 = 0;
    *hi1 = e;
    *lo2 = b;
    *hi2 = NLOCKS - 1;
  }
}

static void
lock_stripes (struct gr_exec *x, const struct gr_plan *p)
{
  int lo1, hi1, lo2, hi2, i;

  lock_range (p, &lo1, &hi1, &lo2, &hi2);
  for (i = lo1; i <= hi1; i++)
    p->lock == GR_LOCK_SHARED ? pthread_rwlock_rdlock (&x->locks[i])
      : pthread_rwlock_wrlock (&x->locks[i]);
  for (i = lo2; i <= hi2; i++)
    p->lock == GR_LOCK_SHARED ? pthread_rwlock_rdlock (&x->locks[i])
      : pthread_rwlock_wrlock (&x->locks[i]);
}

static void
unlock_stripes (struct gr_exec *x, const struct gr_plan *p)
{
  int lo1, hi1, lo2, hi2, i;

  lock_range (p, &lo1, &hi1, &lo2, &hi2);
  for (i = hi2; i >= lo2; i--)
    pthread_rwlock_unlock (&x->locks[i]);
  for (i = hi1; i >= lo1; i--)
    pthread_rwlock_unlock (&x->locks[i]);
}

void
gr_exec_lock (struct gr_exec *x, uint64_t s0, uint64_t ns,
              enum gr_lock_mode mode)
{
  const struct gr_plan lp = { .s0 = s0, .nstripes = ns, .lock = mode };

  lock_stripes (x, &lp);
}

void
gr_exec_unlock (struct gr_exec *x, uint64_t s0, uint64_t ns)
{
  const struct gr_plan lp = { .s0 = s0, .nstripes = ns };

  unlock_stripes (x, &lp);
}

/* --- running a plan ------------------------------------------------------ */

static enum gr_mio_kind
mio_kind (enum gr_io_kind k)
{
  switch (k) {
  case GR_IO_READ: return GR_MIO_READ;
  case GR_IO_PUNCH: return GR_MIO_PUNCH;
  case GR_IO_ZERO_RANGE: return GR_MIO_ZERO;
  default: return GR_MIO_WRITE;
  }
}

/* The plan's reads; false if one was not done. */
static bool
do_reads (struct gr_exec *x, struct work *w, const struct gr_plan *p,
          const struct gr_bufs *b, enum gr_mio_policy policy)
{
  size_t i;

  for (i = 0; i < p->nread; i++) {
    const struct gr_io *io = &p->read[i];

    w->mio[i] = (struct gr_mio) { .kind = GR_MIO_READ, .member = io->member,
                                  .off = io->off, .len = io->len,
                                  .buf = gr_steps_at (b, io->buf) };
  }
  gr_members_io (x->ms, w->mio, p->nread, policy);
  for (i = 0; i < p->nread; i++)
    if (w->mio[i].result != GR_MIO_DONE)
      return false;
  return true;
}

/* The plan's writes; GR_EXEC_DONE, UNSUPPORTED or (with GR_MIO_REPORT)
 * ERROR. */
static enum gr_exec_outcome
do_writes (struct gr_exec *x, struct work *w, const struct gr_plan *p,
           const struct gr_bufs *b, enum gr_mio_policy policy,
           struct gr_exec_result *res)
{
  enum gr_exec_outcome r = GR_EXEC_DONE;
  size_t i, nw = 0;

  for (i = 0; i < p->nwrite; i++) {
    const struct gr_io *io = &p->write[i];
    uint8_t *src = gr_steps_at (b, io->buf);

    if (io->kind == GR_IO_WRITE_CHANGED) {
      uint64_t s, logical;
      uint32_t co;
      int idx;

      if (memcmp (src, gr_steps_at (b, io->cmp), io->len) == 0)
        continue;
      res->rewritten++;
      if (gr_map_inverse (&x->g, io->member, io->off, &s, &idx, &co,
                          &logical) == 0)
        gr_verbose ("resync: stripe %" PRIu64 ": parity %d on member %d "
                    "rewritten", s, idx - x->g.k, io->member);
    }
    w->mio[nw++] = (struct gr_mio) { .kind = mio_kind (io->kind),
                                     .member = io->member, .off = io->off,
                                     .len = io->len, .buf = src };
  }
  gr_members_io (x->ms, w->mio, nw, policy);
  for (i = 0; i < nw; i++)
    switch (w->mio[i].result) {
    case GR_MIO_DONE:
      res->touched[w->mio[i].member] = true;
      break;
    case GR_MIO_UNSUPPORTED:
      r = GR_EXEC_UNSUPPORTED;
      break;
    case GR_MIO_FAILED:
      if (policy == GR_MIO_REPORT && r == GR_EXEC_DONE) {
        errno = EIO;
        r = GR_EXEC_ERROR;
      }
      break;
    case GR_MIO_SKIPPED:
      break;
    }
  return r;
}

/* Does plan p rebuild a lost chunk from parity? */
static bool
rebuilds (const struct gr_plan *p)
{
  for (size_t i = 0; i < p->nstep; i++)
    if (p->step[i].kind == GR_STEP_RECONSTRUCT)
      return true;
  return false;
}

enum gr_exec_outcome
gr_exec_run (struct gr_exec *x, struct gr_plan *p, uint8_t *req,
             enum gr_mio_policy policy, struct gr_exec_result *res)
{
  struct work *w = get_work (x);
  struct gr_plan_coder coder = gr_coding_plan_coder (x->coding);
  struct gr_bufs b = { .req = req, .zero = x->zero };
  bool locked = false, marked = false;
  enum gr_exec_outcome r;

  if (w == NULL)
    return GR_EXEC_ERROR;
  if (x->bitmap && rebuilds (p) &&
      gr_bitmap_pending (x->bitmap, p->s0, p->nstripes)) {
    nbdkit_error ("stripes %" PRIu64 "-%" PRIu64 ": a lost chunk would be "
                  "rebuilt from parity that may be inconsistent since the "
                  "crash (not resynced): EIO", p->s0,
                  p->s0 + p->nstripes - 1);
    errno = EIO;
    return GR_EXEC_ERROR;
  }
  if (p->scratch_len > 0 &&
      (b.scratch = gr_scratch_get (x->scratch, p->scratch_len)) == NULL)
    return GR_EXEC_ERROR;

  /* All reads happen before any write, under the lock, from members
   * that have not failed since the plan was made. */
  if (p->nread > 0 && p->lock != GR_LOCK_NONE) {
    lock_stripes (x, p);
    locked = true;
    if (gr_members_generation (x->ms) != p->gen) {
      r = GR_EXEC_REPLAN;
      goto out;
    }
  }
  if (p->nread > 0 && !do_reads (x, w, p, &b, policy)) {
    r = GR_EXEC_REPLAN;
    if (policy == GR_MIO_REPORT) {
      errno = EIO;
      r = GR_EXEC_ERROR;
    }
    goto out;
  }
  if (gr_steps_run (p, &x->g, &b, &coder) == -1) {
    r = GR_EXEC_ERROR;
    goto out;
  }
  if (p->nwrite > 0 && !locked && p->lock != GR_LOCK_NONE) {
    lock_stripes (x, p);
    locked = true;
    /* Made before a member failed, or before a rebuild's front moved
     * past these stripes: it would miss a member it must write. */
    if (gr_members_generation (x->ms) != p->gen) {
      r = GR_EXEC_REPLAN;
      goto out;
    }
  }
  /* The regions' bits are on disk before any member write. */
  if (p->nwrite > 0 && x->bitmap) {
    if (gr_bitmap_start_write (x->bitmap, p->s0, p->nstripes) == -1) {
      r = GR_EXEC_ERROR;
      goto out;
    }
    marked = true;
  }
  if (p->journal && x->journal) {
    bool failed[GR_MAX_MEMBERS];

    /* The entry says which chunks are lost: those of the plan's
     * snapshot, which must still be current. */
    if (gr_members_snapshot (x->ms, failed) != p->gen) {
      r = GR_EXEC_REPLAN;
      goto out;
    }
    if (gr_journal_begin (x->journal, p, failed, &b) == -1) {
      r = GR_EXEC_ERROR;
      goto out;
    }
    r = do_writes (x, w, p, &b, policy, res);
    gr_journal_end (x->journal, p);
  }
  else
    r = do_writes (x, w, p, &b, policy, res);
 out:
  if (marked)
    gr_bitmap_end_write (x->bitmap, p->s0, p->nstripes);
  if (locked)
    unlock_stripes (x, p);
  if (p->scratch_len > 0)
    gr_scratch_put (x->scratch);
  return r;
}

/* --- a rebuild's batches ------------------------------------------------- */

struct gr_exec_rbatch {
  struct gr_exec *x;
  uint64_t max_ns;
  uint8_t *buf;
  uint64_t s0, ns;
  bool locked;
  struct gr_mio *v;
  int (*er)[GR_MAX_MEMBERS];    /* each stripe's erasure list */
  int *ner;
  uint8_t **blk;
  bool *done;                   /* stripe: nothing to rebuild there */
  bool adv[GR_MAX_MEMBERS];     /* members whose front the batch moves */
  uint64_t front[GR_MAX_MEMBERS];
};

struct gr_exec_rbatch *
gr_exec_rbatch_new (struct gr_exec *x, uint64_t max_ns, uint8_t *buf)
{
  const size_t n = (size_t) (x->g.k + x->g.m);
  struct gr_exec_rbatch *b = calloc (1, sizeof *b);

  if (b == NULL)
    goto nomem;
  b->x = x;
  b->max_ns = max_ns;
  b->buf = buf;
  b->v = malloc (max_ns * n * sizeof *b->v);
  b->er = malloc (max_ns * sizeof *b->er);
  b->ner = malloc (max_ns * sizeof *b->ner);
  b->blk = malloc (max_ns * n * sizeof *b->blk);
  b->done = malloc (max_ns * sizeof *b->done);
  if (b->v && b->er && b->ner && b->blk && b->done)
    return b;
 nomem:
  nbdkit_error ("rebuild: %m");
  gr_exec_rbatch_free (b);
  return NULL;
}

void
gr_exec_rbatch_free (struct gr_exec_rbatch *b)
{
  if (b == NULL)
    return;
  free (b->v);
  free (b->er);
  free (b->ner);
  free (b->blk);
  free (b->done);
  free (b);
}

void
gr_exec_rebuild_lock (struct gr_exec_rbatch *b, uint64_t s0, uint64_t ns)
{
  b->s0 = s0;
  b->ns = ns < b->max_ns ? ns : b->max_ns;
  gr_exec_lock (b->x, s0, b->ns, GR_LOCK_EXCL);
  b->locked = true;
}

enum gr_exec_outcome
gr_exec_rebuild_read (struct gr_exec_rbatch *b, const bool *which)
{
  struct gr_exec *x = b->x;
  const struct gr_geom *g = &x->g;
  const int k = g->k, m = g->m, n = k + m;
  const size_t chunk = g->chunk;
  const uint64_t s0 = b->s0;
  bool failed[GR_MAX_MEMBERS];
  size_t nv = 0, s;
  int i;

  memset (b->adv, 0, sizeof b->adv);
  if (x->bitmap && gr_bitmap_pending (x->bitmap, s0, b->ns)) {
    nbdkit_error ("rebuild: stripes %" PRIu64 "-%" PRIu64 " have parity "
                  "that may be inconsistent since a crash (not resynced): "
                  "no member can be rebuilt from it", s0, s0 + b->ns - 1);
    errno = EIO;
    return GR_EXEC_ERROR;
  }
  (void) gr_members_snapshot (x->ms, failed);
  /* The fronts only the rebuild moves; they may lag behind batches that
   * are still being written (those stripes are then simply done
   * again). */
  gr_members_rebuilding (x->ms, b->front);
  /* Each stripe: the first k survivors read, the members' chunks rebuilt
   * from them (with any other lost chunk). */
  for (s = 0; s < b->ns; s++) {
    bool lost[GR_MAX_MEMBERS], want[GR_MAX_MEMBERS] = { false };
    int surv[GR_MAX_MEMBERS], c, nwant = 0;

    b->done[s] = false;
    for (c = 0; c < n; c++)
      lost[c] = failed[gr_map_member (g, s0 + s, c)];
    for (i = 0; i < n; i++)
      if (which[i] && failed[i] && gr_members_state (x->ms, i)
          == GR_MEMBER_REBUILDING && b->front[i] <= s0 + s) {
        want[gr_map_index (g, s0 + s, i)] = true;
        b->adv[i] = true;
        nwant++;
      }
    if (nwant == 0) {
      b->done[s] = true;        /* below every front: rebuilt already */
      continue;
    }
    b->ner[s] = gr_reconstruct_choose (k, m, lost, want, b->er[s], surv);
    if (b->ner[s] < 0)
      return GR_EXEC_REPLAN;    /* more than m lost: the caller stops */
    for (c = 0; c < k; c++)
      b->v[nv++] = (struct gr_mio) {
        .kind = GR_MIO_READ, .member = gr_map_member (g, s0 + s, surv[c]),
        .off = gr_map_member_offset (g, s0 + s, 0), .len = chunk,
        .buf = b->buf + (s * n + (size_t) surv[c]) * chunk };
  }
  gr_members_io (x->ms, b->v, nv, GR_MIO_FAIL_MEMBER);
  for (size_t j = 0; j < nv; j++)
    if (b->v[j].result != GR_MIO_DONE)
      return GR_EXEC_REPLAN;    /* a survivor failed: again without it */
  return GR_EXEC_DONE;
}

enum gr_exec_outcome
gr_exec_rebuild_code (struct gr_exec_rbatch *b)
{
  struct gr_exec *x = b->x;
  const int k = x->g.k, n = k + x->g.m;
  const size_t chunk = x->g.chunk;

  /* One coding operation per erasure pattern: the batch's stripes that
   * lose the same chunks, side by side (parity rotates, so there are few
   * patterns). */
  for (size_t s = 0; s < b->ns; s++) {
    size_t grp = 0, t;

    if (b->done[s])
      continue;
    for (t = s; t < b->ns; t++)
      if (!b->done[t] && b->ner[t] == b->ner[s] &&
          memcmp (b->er[t], b->er[s],
                  (size_t) b->ner[s] * sizeof b->er[s][0]) == 0) {
        for (int c = 0; c < n; c++)
          b->blk[grp * n + c] = b->buf + (t * n + (size_t) c) * chunk;
        b->done[t] = true;
        grp++;
      }
    if (gr_coding_reconstruct_n (x->coding,
                                 gr_coding_route (x->coding,
                                                  GR_OP_RECONSTRUCT,
                                                  grp * k * chunk,
                                                  b->ner[s]),
                                 b->er[s], b->ner[s], b->blk, grp,
                                 chunk) == -1)
      return GR_EXEC_ERROR;
  }
  return GR_EXEC_DONE;
}

void
gr_exec_rebuild_write (struct gr_exec_rbatch *b, bool coded)
{
  struct gr_exec *x = b->x;
  const struct gr_geom *g = &x->g;
  const int n = g->k + g->m;
  const uint64_t end = gr_map_member_offset (g, b->s0 + b->ns, 0);
  size_t nv = 0, s;
  int i;

  if (!coded)
    goto out;
  /* The rebuild's writes first (a failed one ends that member's
   * rebuild); a front moves only once they are there: healthy reads take
   * no lock. */
  for (i = 0; i < n; i++) {
    if (!b->adv[i])
      continue;
    if (!gr_members_rebuild_advance (x->ms, i, end, false)) {
      b->adv[i] = false;
      continue;
    }
    for (s = b->front[i] > b->s0 ? b->front[i] - b->s0 : 0; s < b->ns; s++)
      b->v[nv++] = (struct gr_mio) {
        .kind = GR_MIO_WRITE, .member = i,
        .off = gr_map_member_offset (g, b->s0 + s, 0), .len = g->chunk,
        .buf = b->buf + (s * n + (size_t) gr_map_index (g, b->s0 + s, i))
               * g->chunk };
  }
  gr_members_io (x->ms, b->v, nv, GR_MIO_FAIL_MEMBER);
  for (size_t j = 0; j < nv; j++)
    if (b->v[j].result != GR_MIO_DONE)
      b->adv[b->v[j].member] = false;
  for (i = 0; i < n; i++)
    if (b->adv[i])
      gr_members_rebuild_advance (x->ms, i, end, true);
 out:
  if (b->locked)
    gr_exec_unlock (x, b->s0, b->ns);
  b->locked = false;
}
