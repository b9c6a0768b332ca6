/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - joined writes.  See join.h. */
#include <inttypes.h>
#include <stdlib.h>

#include "join.h"
#include "log.h"

/* -D gpuraid.join=0: no write is registered: each plans its range in
 * order, its parts of stripes alone (for comparison). */
NBDKIT_DLL_PUBLIC int gpuraid_debug_join = 1;

struct gr_join {
  struct gr_geom g;
  pthread_mutex_t lock;
  struct gr_join_req *head;     /* the writes in flight */
  uint64_t given, taken, back;  /* parts, since the start */
};

struct gr_join *
gr_join_new (const struct gr_geom *g)
{
  struct gr_join *j = calloc (1, sizeof *j);

  if (j == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  j->g = *g;
  pthread_mutex_init (&j->lock, NULL);
  return j;
}

void
gr_join_free (struct gr_join *j)
{
  if (j == NULL)
    return;
  if (j->given)
    gr_debug ("joined writes: %" PRIu64 " parts of stripes given to the "
              "concurrent write that had the rest, %" PRIu64 " written "
              "with it as whole stripes, %" PRIu64 " handed back",
              j->given, j->taken, j->back);
  pthread_mutex_destroy (&j->lock);
  free (j);
}

bool
gr_join_enter (struct gr_join *j, struct gr_join_req *r, uint64_t offset,
               uint64_t len, uint8_t *buf)
{
  if (!gpuraid_debug_join)
    return false;
  *r = (struct gr_join_req) { .offset = offset, .len = len, .buf = buf };
  pthread_cond_init (&r->done, NULL);
  pthread_mutex_lock (&j->lock);
  r->next = j->head;
  if (j->head)
    j->head->prev = r;
  j->head = r;
  pthread_mutex_unlock (&j->lock);
  return true;
}

/* A part of r's, no longer pending.  j->lock held. */
static void
part_ends (struct gr_join_part *pc, int state, int err)
{
  pc->state = state;
  pc->err = err;
  if (--pc->owner->pending == 0)
    pthread_cond_signal (&pc->owner->done);
}

/* Its first stripe (0) or its last (1), or -1. */
static int
end_of (const struct gr_join *j, const struct gr_join_req *r, uint64_t s)
{
  const uint64_t W = gr_map_stripe_width (&j->g);

  return s == r->offset / W ? 0 : s == (r->offset + r->len - 1) / W ? 1
    : -1;
}

/* The write in flight, other than r, that covers exactly [a, b) of
 * stripe s (disjoint from r's part there), has not reached s yet and
 * has no part of s given to it: it makes the stripe whole; or NULL.
 * j->lock held. */
static struct gr_join_req *
taker (struct gr_join *j, const struct gr_join_req *r, uint64_t s,
       uint64_t a, uint64_t b, uint64_t w0, uint64_t w1)
{
  for (struct gr_join_req *q = j->head; q; q = q->next) {
    const uint64_t qa = q->offset, qb = q->offset + q->len;
    const int e = end_of (j, q, s);
    bool has = false;

    if (q == r || q->gone || e < 0 || q->reached[e] ||
        (qa > w0 ? qa : w0) != a || (qb < w1 ? qb : w1) != b)
      continue;
    for (const struct gr_join_part *pc = q->given; pc; pc = pc->next)
      has |= pc->offset / (w1 - w0) == s;
    if (!has)
      return q;
  }
  return NULL;
}

enum gr_join_outcome
gr_join_at (struct gr_join *j, struct gr_join_req *r, uint64_t pos,
            uint64_t end, uint64_t *len, struct gr_join_part **part)
{
  const uint64_t W = gr_map_stripe_width (&j->g), s = pos / W;
  const uint64_t w0 = s * W, w1 = w0 + W, e = end < w1 ? end : w1;
  enum gr_join_outcome o = GR_JOIN_ALONE;
  struct gr_join_part **pp, *pc;
  struct gr_join_req *q;

  *len = e - pos;
  pthread_mutex_lock (&j->lock);
  r->reached[0] |= s == r->offset / W;
  r->reached[1] |= s == (r->offset + r->len - 1) / W;
  /* A part given to r for this stripe: taken. */
  for (pp = &r->given; (pc = *pp) != NULL; pp = &pc->next)
    if (pc->offset / W == s) {
      *pp = pc->next;
      *part = r->taken = pc;
      j->taken++;
      o = GR_JOIN_TAKEN;
      goto out;
    }
  /* r's part [pos, e): one end of the stripe, the other on a chunk
   * bound; the rest [a, b) to a write that has it whole. */
  if (e - pos == W || r->nparts == 2 ||
      (pos != w0 && e != w1) || (pos == w0 ? e - w0 : pos - w0) %
      j->g.chunk)
    goto out;
  q = taker (j, r, s, pos == w0 ? e : w0, pos == w0 ? w1 : pos, w0, w1);
  if (q == NULL)
    goto out;
  pc = &r->parts[r->nparts++];
  *pc = (struct gr_join_part) {
    .offset = pos, .len = e - pos, .buf = r->buf + (pos - r->offset),
    .owner = r, .state = GR_JOIN_PART_GIVEN, .next = q->given,
  };
  q->given = pc;
  r->pending++;
  j->given++;
  o = GR_JOIN_GIVEN;
 out:
  pthread_mutex_unlock (&j->lock);
  return o;
}

void
gr_join_written (struct gr_join *j, struct gr_join_req *r, int err,
                 bool back)
{
  pthread_mutex_lock (&j->lock);
  if (back)
    j->back++;
  part_ends (r->taken, back ? GR_JOIN_PART_BACK : GR_JOIN_PART_WRITTEN,
             err);
  r->taken = NULL;
  pthread_mutex_unlock (&j->lock);
}

int
gr_join_leave (struct gr_join *j, struct gr_join_req *r, bool *back)
{
  int err = 0;

  pthread_mutex_lock (&j->lock);
  r->gone = true;
  if (r->prev)
    r->prev->next = r->next;
  else
    j->head = r->next;
  if (r->next)
    r->next->prev = r->prev;
  for (struct gr_join_part *pc = r->given, *next; pc; pc = next) {
    next = pc->next;
    j->back++;
    part_ends (pc, GR_JOIN_PART_BACK, 0);
  }
  r->given = NULL;
  if (r->taken) {
    j->back++;
    part_ends (r->taken, GR_JOIN_PART_BACK, 0);
    r->taken = NULL;
  }
  while (r->pending > 0)
    pthread_cond_wait (&r->done, &j->lock);
  pthread_mutex_unlock (&j->lock);
  pthread_cond_destroy (&r->done);
  *back = false;
  for (int i = 0; i < r->nparts; i++) {
    *back |= r->parts[i].state == GR_JOIN_PART_BACK;
    if (r->parts[i].state == GR_JOIN_PART_WRITTEN && r->parts[i].err)
      err = r->parts[i].err;
  }
  return err;
}
