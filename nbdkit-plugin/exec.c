/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the executor.  See exec.h. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "exec-internal.h"
#include "journal.h"
#include "scratch.h"
#include "bitmap.h"
#include "cksum.h"
#include "log.h"
#include "steps.h"
#include "members.h"

/* -D gpuraid.gpu_sums=0: a write's block checksums computed from its
 * blocks once written, as before, not by its GPU encode (for
 * comparison). */
NBDKIT_DLL_PUBLIC int gpuraid_debug_gpu_sums = 1;

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
  x->cksum = parts->cksum;
  x->join = parts->join;
  x->zero = aligned_alloc (4096, g->chunk);   /* O_DIRECT takes it */
  if (x->zero)
    memset (x->zero, 0, g->chunk);
  if (x->zero == NULL ||
      pthread_key_create (&x->work_key, gr_exec_work_free) != 0) {
    nbdkit_error ("executor: %m");
    free (x->zero);
    free (x);
    return NULL;
  }
  for (i = 0; i < NLOCKS; i++)
    pthread_rwlock_init (&x->locks[i], NULL);
  pthread_rwlock_init (&x->unjournaled, NULL);
  return x;
}

void
gr_exec_free (struct gr_exec *x)
{
  int i;

  if (x == NULL)
    return;
  if (x->sums_given)
    gr_debug ("block checksums set from the coding's: %" PRIu64 " writes",
              x->sums_given);
  if (x->sums_read)
    gr_debug ("block checksums verified against the coding's: %" PRIu64
              " reads", x->sums_read);
  if (x->begun)
    gr_debug ("plans begun with a request's others, their encodes queued "
              "together, and finished after: %" PRIu64, x->begun);
  gr_exec_times_log (x);
  /* The calling thread's work; other threads' went with them. */
  gr_exec_work_free (pthread_getspecific (x->work_key));
  pthread_key_delete (x->work_key);
  for (i = 0; i < NLOCKS; i++)
    pthread_rwlock_destroy (&x->locks[i]);
  pthread_rwlock_destroy (&x->unjournaled);
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

struct gr_cksum *
gr_exec_cksum (const struct gr_exec *x)
{
  return x->cksum;
}

struct gr_join *
gr_exec_join (const struct gr_exec *x)
{
  return x->join;
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
  c->cksum = x->cksum != NULL;
  c->blocks = c->cksum || gr_members_direct (x->ms);
  c->dio_align = gr_members_dio_align (x->ms);
  if (c->blocks && c->lm < GR_CKSUM_BLOCK)
    c->lm = GR_CKSUM_BLOCK;
  /* After the snapshot: a front that moves on changes its generation. */
  if (gr_members_rebuilding (x->ms, sn->front) > 0)
    c->rb_front = sn->front;
  /* Degraded with a journal: requests zero by writing (each stripe
   * journaled), not by fallocate over many stripes. */
  c->req_zero_write = x->journal && gr_members_nfailed (x->ms) > 0;
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

void
gr_exec_lock_plan (struct gr_exec *x, const struct gr_plan *p)
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

void
gr_exec_unlock_plan (struct gr_exec *x, const struct gr_plan *p)
{
  int lo1, hi1, lo2, hi2, i;

  lock_range (p, &lo1, &hi1, &lo2, &hi2);
  for (i = hi2; i >= lo2; i--)
    pthread_rwlock_unlock (&x->locks[i]);
  for (i = hi1; i >= lo1; i--)
    pthread_rwlock_unlock (&x->locks[i]);
}

/* --- running a plan ------------------------------------------------------ */

static enum gr_mio_kind
mio_kind (enum gr_io_kind k)
{
  switch (k) {
  case GR_IO_READ: return GR_MIO_READ;
  case GR_IO_PUNCH: return GR_MIO_PUNCH;
  case GR_IO_ZERO_RANGE: return GR_MIO_ZERO;
  case GR_IO_WRITE_SHADOW: return GR_MIO_WRITE_SHADOW;
  default: return GR_MIO_WRITE;
  }
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
gr_exec_read_stage (struct gr_exec *x, const struct gr_plan *p,
                    const struct gr_bufs *b, struct gr_mio *mio,
                    enum gr_mio_policy policy, struct gr_pool *pool,
                    struct gr_exec_bad *bad)
{
  int member;
  uint64_t off;

  size_t i;

  bad->member = -1;
  bad->len = 0;
  if (p->lock != GR_LOCK_NONE && p->nread > 0 &&
      gr_members_generation (x->ms) != p->gen)
    return GR_EXEC_REPLAN;
  if (x->bitmap && rebuilds (p) &&
      gr_bitmap_pending (x->bitmap, p->s0, p->nstripes)) {
    nbdkit_error ("stripes %" PRIu64 "-%" PRIu64 ": a lost chunk would be "
                  "rebuilt from parity that may be inconsistent since the "
                  "crash (not resynced): EIO", p->s0,
                  p->s0 + p->nstripes - 1);
    errno = EIO;
    return GR_EXEC_ERROR;
  }
  for (i = 0; i < p->nread; i++) {
    const struct gr_io *io = &p->read[i];

    mio[i] = (struct gr_mio) { .kind = GR_MIO_READ, .member = io->member,
                               .off = io->off, .len = io->len,
                               .buf = gr_steps_at (b, io->buf) };
  }
  gr_members_io (x->ms, mio, p->nread, policy);
  for (i = 0; i < p->nread; i++)
    if (mio[i].result == GR_MIO_READ_ERROR) {
      bad->member = mio[i].member;      /* answered from the others */
      bad->off = mio[i].off;
      bad->len = mio[i].len;
      return GR_EXEC_REPLAN;
    }
  for (i = 0; i < p->nread; i++)
    if (mio[i].result != GR_MIO_DONE) {
      if (policy == GR_MIO_REPORT) {
        errno = EIO;
        return GR_EXEC_ERROR;
      }
      return GR_EXEC_REPLAN;    /* a member failed: again without it */
    }
  /* Salvage (read-only) serves what is there, as it says: a member it
   * brought back missed the writes, and the checksums, made after it
   * failed, and nothing may be repaired. */
  if (x->cksum && !gr_members_read_only_p (x->ms) && !bad->after_coding &&
      gr_exec_read_bad (x, p, mio, bad->skip, pool, &member, &off)) {
    /* member -1: a member failed (again without it); else repair it. */
    bad->member = member;
    bad->off = off;
    return GR_EXEC_REPLAN;
  }
  return GR_EXEC_DONE;
}

bool
gr_exec_sums_after (const struct gr_exec *x, const struct gr_plan *p)
{
  return x->cksum != NULL && gpuraid_debug_gpu_sums &&
    !gr_members_read_only_p (x->ms) && gr_steps_sums_reads (p);
}

struct gr_plan_coder
gr_exec_coder (const struct gr_exec *x, struct gr_pool *pool)
{
  struct gr_plan_coder coder = gr_coding_plan_coder (x->coding);

  coder.pool = pool;
  coder.sums = x->cksum != NULL && gpuraid_debug_gpu_sums;
  return coder;
}

enum gr_exec_outcome
gr_exec_code_stage (struct gr_exec *x, struct gr_plan *p,
                    const struct gr_bufs *b, struct gr_pool *pool)
{
  const struct gr_plan_coder coder = gr_exec_coder (x, pool);

  return gr_steps_run (p, &x->g, b, &coder) == -1 ? GR_EXEC_ERROR
    : GR_EXEC_DONE;
}

/* The checksums the coding computed of the bytes write io takes from a
 * block of p (from its start, whole checksum blocks), or NULL; *at: the
 * block to look at first (a plan's writes follow its blocks). */
static const uint32_t *
block_sums (const struct gr_plan *p, const struct gr_io *io, size_t *at)
{
  if (p->sum_len == 0 || io->len > p->sum_len ||
      io->len % GR_CKSUM_BLOCK || p->nblk == 0)
    return NULL;
  for (size_t t = 0; t < p->nblk; t++) {
    const size_t j = (*at + t) % p->nblk;

    if (p->bsum[j] && p->blk[j].space == io->buf.space &&
        p->blk[j].off == io->buf.off) {
      *at = j + 1;
      return p->bsum[j];
    }
  }
  return NULL;
}

enum gr_exec_outcome
gr_exec_verify_coded (struct gr_exec *x, const struct gr_plan *p,
                      struct gr_mio *mio, struct gr_exec_bad *bad)
{
  size_t at = 0, given = 0;
  int member;
  uint64_t off;

  for (size_t i = 0; i < p->nread; i++) {
    mio[i].sums = block_sums (p, &p->read[i], &at);
    given += mio[i].sums != NULL;
  }
  __atomic_add_fetch (&x->sums_read, given, __ATOMIC_RELAXED);
  if (!gr_exec_read_bad (x, p, mio, bad->skip, NULL, &member, &off))
    return GR_EXEC_DONE;
  /* Confirmed from the blocks' bytes, else the GPU computed wrong
   * checksums (and may have rebuilt wrong data): it is not used again,
   * and the plan is run again on the CPU. */
  for (size_t i = 0; i < p->nread; i++)
    mio[i].sums = NULL;
  if (member >= 0 &&
      !gr_exec_read_bad (x, p, mio, bad->skip, NULL, &member, &off)) {
    if (!__atomic_exchange_n (&x->sums_wrong, 1, __ATOMIC_RELAXED))
      nbdkit_error ("GPU: the checksums its reconstruct computed disagree "
                    "with the blocks it read: coding on the CPU from now "
                    "on");
    gr_coding_gpu_off (x->coding);
    return GR_EXEC_REPLAN;
  }
  bad->member = member;
  bad->off = off;
  return GR_EXEC_REPLAN;
}

/* The plan's writes as member accesses into mio; how many. */
static size_t
write_list (struct gr_exec *x, const struct gr_plan *p,
            const struct gr_bufs *b, struct gr_mio *mio,
            struct gr_exec_result *res)
{
  size_t i, nw = 0, at = 0;

  for (i = 0; i < p->nwrite; i++) {
    const struct gr_io *io = &p->write[i];
    uint8_t *src = gr_steps_at (b, io->buf);
    int member = io->member;

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
    if (io->kind == GR_IO_WRITE_LOCATED) {
      const struct gr_verdict *v = &p->verdict[io->slot];

      if (v->kind != GR_VERDICT_LOCATED)
        continue;
      member = gr_map_member (&x->g, p->s0 + io->slot, v->index);
      if (p->kind == GR_PLAN_RESYNC) {
        res->rewritten++;
        gr_warn ("resync: stripe %" PRIu64 ": %s %d (member %d) does not "
                 "match the other chunks, which agree: rewritten from them "
                 "(not the parity recomputed from it)", p->s0 + io->slot,
                 v->index < x->g.k ? "data chunk" : "parity chunk",
                 v->index < x->g.k ? v->index : v->index - x->g.k, member);
      }
    }
    if (io->kind == GR_IO_WRITE_UNLOCATED) {
      const struct gr_verdict *v = &p->verdict[io->slot];

      if ((v->kind != GR_VERDICT_UNLOCATED &&
           v->kind != GR_VERDICT_UNDECIDABLE) ||
          memcmp (src, gr_steps_at (b, io->cmp), io->len) == 0)
        continue;
      res->rewritten++;
      gr_verbose ("resync: stripe %" PRIu64 ": no single chunk explains "
                  "the mismatch: parity on member %d recomputed from the "
                  "data", p->s0 + io->slot, io->member);
    }
    /* A rebuild writes a member only once its front may move there. */
    if (p->kind == GR_PLAN_REBUILD && !p->rb_adv[member])
      continue;
    mio[nw++] = (struct gr_mio) { .kind = mio_kind (io->kind),
                                  .member = member, .off = io->off,
                                  .len = io->len, .buf = src,
                                  .sums = io->kind == GR_IO_WRITE
                                  ? block_sums (p, io, &at) : NULL };
  }
  return nw;
}

void
gr_exec_fronts_open (struct gr_exec *x, struct gr_plan *p)
{
  if (p->kind == GR_PLAN_REBUILD)
    for (int m = 0; m < x->g.k + x->g.m; m++)
      if (p->rb_adv[m] &&
          !gr_members_rebuild_advance (x->ms, m, p->rb_end, false))
        p->rb_adv[m] = false;
}

void
gr_exec_fronts_close (struct gr_exec *x, const struct gr_plan *p)
{
  if (p->kind == GR_PLAN_REBUILD)
    for (int m = 0; m < x->g.k + x->g.m; m++)
      if (p->rb_adv[m])
        gr_members_rebuild_advance (x->ms, m, p->rb_end, true);
}

enum gr_exec_outcome
gr_exec_write_stage (struct gr_exec *x, struct gr_plan *p,
                     const struct gr_bufs *b, struct gr_mio *mio,
                     enum gr_mio_policy policy, struct gr_pool *pool,
                     struct gr_exec_result *res)
{
  enum gr_exec_outcome r;

  gr_exec_fronts_open (x, p);
  r = gr_exec_write_members (x, p, b, mio, policy, pool, res);
  if (r != GR_EXEC_REPLAN)
    gr_exec_fronts_close (x, p);
  return r;
}

enum gr_exec_outcome
gr_exec_write_held (struct gr_exec *x, struct gr_plan *p,
                    const struct gr_bufs *b, struct gr_mio *mio,
                    enum gr_mio_policy policy, struct gr_exec_result *res,
                    double *s, double *t, bool *locked)
{
  enum gr_exec_outcome r;

  if (p->nwrite > 0 && !*locked && p->lock != GR_LOCK_NONE) {
    gr_exec_lock_plan (x, p);
    *locked = true;
    s[GR_EXEC_LOCK] += gr_exec_lap (t);
    /* Made before a member failed, or before a rebuild's front moved
     * past these stripes: it would miss a member it must write. */
    if (gr_members_generation (x->ms) != p->gen)
      return GR_EXEC_REPLAN;
  }
  r = gr_exec_write_stage (x, p, b, mio, policy, NULL, res);
  s[GR_EXEC_WRITE] = gr_exec_lap (t);
  if (r == GR_EXEC_DONE)
    gr_exec_times_add (x, p->kind, s);
  return r;
}

enum gr_exec_outcome
gr_exec_write_members (struct gr_exec *x, struct gr_plan *p,
                       const struct gr_bufs *b, struct gr_mio *mio,
                       enum gr_mio_policy policy, struct gr_pool *pool,
                       struct gr_exec_result *res)
{
  enum gr_exec_outcome r = GR_EXEC_DONE;
  bool marked = false, gated = false;
  size_t i, nw;

  nw = write_list (x, p, b, mio, res);
  if (nw == 0)
    goto out;
  /* A request's or the resync's writes that are not journaled: not once
   * a member has failed on an array that journals (the plan was made
   * before: made again, journaled), and held against the drain. */
  if (!p->journal && x->journal && p->kind <= GR_PLAN_RESYNC) {
    pthread_rwlock_rdlock (&x->unjournaled);
    gated = true;
    if (gr_members_nfailed (x->ms) > 0) {
      r = GR_EXEC_REPLAN;
      goto out;
    }
  }
  /* The regions' bits are on disk before any member write (a rebuild
   * writes only replacements, trusted below their checkpoint; a replay
   * at start-up repairs what the crash left, before the bitmap is
   * loaded: as before it was a plan, it marks nothing). */
  if (x->bitmap && p->kind != GR_PLAN_REBUILD &&
      p->kind != GR_PLAN_REPLAY) {
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
    if (gr_journal_begin (x->journal, p, failed, b) == -1) {
      r = GR_EXEC_ERROR;
      goto out;
    }
    gr_members_io (x->ms, mio, nw, policy);
    gr_journal_end (x->journal, p);
  }
  else
    gr_members_io (x->ms, mio, nw, policy);
  gr_exec_cksum_writes (x, mio, nw, pool);
  for (i = 0; i < nw && (mio[i].result == GR_MIO_DONE ||
                         mio[i].result == GR_MIO_SKIPPED); i++)
    ;
  /* Whole stripes punched or zeroed on every member: their map regions
   * hold zeros again (bitmap.h). */
  if (p->kind == GR_PLAN_FALLOCATE && i == nw && x->bitmap)
    gr_bitmap_trimmed (x->bitmap, p->s0, p->nstripes);
  for (i = 0; i < nw; i++)
    switch (mio[i].result) {
    case GR_MIO_DONE:
      res->touched[mio[i].member] = true;
      break;
    case GR_MIO_UNSUPPORTED:
      r = GR_EXEC_UNSUPPORTED;
      break;
    case GR_MIO_FAILED:
    case GR_MIO_READ_ERROR:               /* not of a write: for -Wswitch */
      if (p->kind == GR_PLAN_REBUILD)
        p->rb_adv[mio[i].member] = false;
      if (policy == GR_MIO_REPORT && r == GR_EXEC_DONE) {
        errno = EIO;
        r = GR_EXEC_ERROR;
      }
      break;
    case GR_MIO_SKIPPED:
      break;
    }
 out:
  if (marked)
    gr_bitmap_end_write (x->bitmap, p->s0, p->nstripes);
  if (gated)
    pthread_rwlock_unlock (&x->unjournaled);
  return r;
}

void
gr_exec_journal_drain (struct gr_exec *x)
{
  pthread_rwlock_wrlock (&x->unjournaled);
  pthread_rwlock_unlock (&x->unjournaled);
}

enum gr_exec_outcome
gr_exec_run (struct gr_exec *x, struct gr_plan *p, uint8_t *req,
             uint8_t *peer, enum gr_mio_policy policy,
             struct gr_exec_result *res)
{
  struct gr_exec_work *w = gr_exec_work (x, p);
  struct gr_bufs b = { .req = req, .zero = x->zero, .peer = peer };
  bool locked = false;
  enum gr_exec_outcome r;
  struct gr_exec_bad bad = { .skip = NULL };
  double s[GR_EXEC_NSTAGES] = { 0 }, t = gr_now ();

  if (w == NULL)
    return GR_EXEC_ERROR;
  if (p->scratch_len > 0 &&
      (b.scratch = gr_scratch_get (x->scratch, p->scratch_len)) == NULL)
    return GR_EXEC_ERROR;

  /* All reads happen before any write, under the lock, from members
   * that have not failed since the plan was made. */
  if (p->nread > 0 && p->lock != GR_LOCK_NONE) {
    gr_exec_lock_plan (x, p);
    locked = true;
  }
  s[GR_EXEC_LOCK] = gr_exec_lap (&t);
  /* A degraded read whose GPU reconstructs compute the checksums of the
   * blocks they read: verified after the coding, against those (nothing
   * leaves the plan before, and a bad block is repaired and the request
   * planned again, as when found before the coding). */
  bad.after_coding = p->nwrite == 0 && gr_exec_sums_after (x, p);
  r = gr_exec_read_stage (x, p, &b, w->mio, policy, NULL, &bad);
  s[GR_EXEC_READ] = gr_exec_lap (&t);
  if (r == GR_EXEC_DONE)
    r = gr_exec_code_stage (x, p, &b, NULL);
  s[GR_EXEC_CODE] = gr_exec_lap (&t);
  if (r == GR_EXEC_DONE && bad.after_coding)
    r = gr_exec_verify_coded (x, p, w->mio, &bad);
  s[GR_EXEC_READ] += gr_exec_lap (&t);
  if (bad.member >= 0) {
    /* Not holding the stripe: the repair takes it exclusively. */
    if (locked)
      gr_exec_unlock_plan (x, p);
    locked = false;
    if (gr_exec_repair_bad (x, &bad, false, p->kind == GR_PLAN_REPLAY,
                            res) != GR_EXEC_DONE)
      r = GR_EXEC_ERROR;
    goto out;
  }
  if (r == GR_EXEC_DONE)
    r = gr_exec_write_held (x, p, &b, w->mio, policy, res, s, &t, &locked);
 out:
  if (locked)
    gr_exec_unlock_plan (x, p);
  if (p->scratch_len > 0)
    gr_scratch_put (x->scratch);
  return r;
}
