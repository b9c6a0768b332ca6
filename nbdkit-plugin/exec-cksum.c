/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the executor: the block checksums of what a plan reads
 * (verified, the first bad block found) and writes (set), each access an
 * item on a job's pool (a request's on its own thread).  See
 * exec-internal.h. */
#include <inttypes.h>
#include <pthread.h>

#include "exec.h"
#include "exec-internal.h"
#include "cksum.h"
#include "log.h"
#include "pool.h"

/* Is the block at member byte off of member in a row skip lists? */
static bool
skipped (struct gr_exec *x, const struct gr_exec_result *skip, int member,
         uint64_t off)
{
  uint64_t s, logical;
  uint32_t co;
  int idx;

  if (skip == NULL || skip->nrows == 0 ||
      gr_map_inverse (&x->g, member, off, &s, &idx, &co, &logical) != 0)
    return false;
  for (size_t i = 0; i < skip->nrows; i++)
    if (skip->rows[i].stripe == s &&
        skip->rows[i].lo == co / GR_CKSUM_BLOCK * GR_CKSUM_BLOCK)
      return true;
  return false;
}

/* Does member access v (a read of plan p) hold a block that fails its
 * checksum (but in the rows skip lists)?  false, or true with *member
 * and *off (the member failed while its checksums were read: *member
 * -1). */
static bool
read_bad_one (struct gr_exec *x, const struct gr_plan *p,
              const struct gr_mio *v, const struct gr_exec_result *skip,
              int *member, uint64_t *off)
{
  uint64_t pos = v->off;

  if (v->off < x->g.data_offset)
    return false;               /* metadata */
  if (v->off % GR_CKSUM_BLOCK || v->len % GR_CKSUM_BLOCK) {
    gr_debug ("plan %s: read of member %d at %" PRIu64 " (%" PRIu64
              " bytes) not in whole blocks: not verified",
              gr_plan_kind_name (p->kind), v->member, v->off, v->len);
    return false;
  }
  /* Against the values the coding computed of the blocks, if it did
   * (exec.c: a degraded read's GPU reconstruct), else of its bytes. */
  while (pos < v->off + v->len)
    switch (v->sums
            ? gr_cksum_check (x->cksum, v->member, pos,
                              v->sums + (pos - v->off) / GR_CKSUM_BLOCK,
                              v->off + v->len - pos, off)
            : gr_cksum_verify (x->cksum, v->member, pos,
                               (const uint8_t *) v->buf + (pos - v->off),
                               v->off + v->len - pos, off)) {
    case GR_CKSUM_MATCH:
      pos = v->off + v->len;
      break;
    case GR_CKSUM_MISMATCH:
      if (!skipped (x, skip, v->member, *off)) {
        *member = v->member;
        return true;
      }
      pos = *off + GR_CKSUM_BLOCK;
      break;
    case GR_CKSUM_UNREADABLE:
      *member = -1;
      return true;
    }
  return false;
}

/* The reads of a plan verified on a pool's threads, one access an item:
 * the first access (in plan order) that holds a bad block. */
struct read_check {
  struct gr_exec *x;
  const struct gr_plan *p;
  const struct gr_mio *mio;
  const struct gr_exec_result *skip;
  pthread_mutex_t lock;
  size_t first;                 /* p->nread: none bad */
  int member;
  uint64_t off;
};

static void
read_check_item (void *arg, size_t i)
{
  struct read_check *rc = arg;
  int member;
  uint64_t off;

  /* Past an access already found bad: its verdict would not be used. */
  if (__atomic_load_n (&rc->first, __ATOMIC_RELAXED) < i ||
      !read_bad_one (rc->x, rc->p, &rc->mio[i], rc->skip, &member, &off))
    return;
  pthread_mutex_lock (&rc->lock);
  if (i < rc->first) {
    rc->member = member;
    rc->off = off;
    __atomic_store_n (&rc->first, i, __ATOMIC_RELAXED);
  }
  pthread_mutex_unlock (&rc->lock);
}

bool
gr_exec_read_bad (struct gr_exec *x, const struct gr_plan *p, const struct gr_mio *mio,
          const struct gr_exec_result *skip, struct gr_pool *pool,
          int *member, uint64_t *off)
{
  struct read_check rc = { .x = x, .p = p, .mio = mio, .skip = skip,
                           .first = p->nread };

  pthread_mutex_init (&rc.lock, NULL);
  gr_pool_run (pool, p->nread, read_check_item, &rc);
  pthread_mutex_destroy (&rc.lock);
  if (rc.first == p->nread)
    return false;
  *member = rc.member;
  *off = rc.off;
  return true;
}

/* The checksums of a plan's writes set on a pool's threads, one access
 * an item. */
struct written {
  struct gr_exec *x;
  const struct gr_mio *mio;
};

static void
written_item (void *arg, size_t i)
{
  const struct written *w = arg;

  if (w->mio[i].result == GR_MIO_DONE)
    gr_exec_cksum_written (w->x, &w->mio[i]);
}

void
gr_exec_cksum_writes (struct gr_exec *x, const struct gr_mio *mio, size_t nw,
                      struct gr_pool *pool)
{
  struct written w = { .x = x, .mio = mio };

  if (x->cksum)
    gr_pool_run (pool, nw, written_item, &w);
}

void
gr_exec_cksum_written (struct gr_exec *x, const struct gr_mio *v)
{
  if (x->cksum == NULL || v->off < x->g.data_offset)
    return;
  if (v->off % GR_CKSUM_BLOCK || v->len % GR_CKSUM_BLOCK) {
    /* The planner writes whole blocks (plan.h): a bug if not. */
    nbdkit_error ("member %d: a write at %" PRIu64 " of %" PRIu64 " bytes "
                  "is not in whole blocks: its checksums are not set",
                  v->member, v->off, v->len);
    return;
  }
  if (v->kind == GR_MIO_WRITE_SHADOW)
    (void) gr_cksum_touch (x->cksum, v->member, v->off, v->len);
  else if (v->kind == GR_MIO_PUNCH || v->kind == GR_MIO_ZERO)
    (void) gr_cksum_zeroed (x->cksum, v->member, v->off, v->len);
  else if (v->sums) {
    (void) gr_cksum_set (x->cksum, v->member, v->off, v->sums, v->len);
    __atomic_add_fetch (&x->sums_given, 1, __ATOMIC_RELAXED);
  }
  else
    (void) gr_cksum_update (x->cksum, v->member, v->off, v->buf, v->len);
}
