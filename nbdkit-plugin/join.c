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
  uint64_t taken, written, back;        /* parts, since the start */
  uint64_t later;               /* answers GR_JOIN_LATER */
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
  if (j->taken)
    gr_debug ("joined writes: %" PRIu64 " parts of stripes taken from the "
              "concurrent write that had them, %" PRIu64 " written "
              "with it as whole stripes, %" PRIu64 " handed back; %" PRIu64
              " parts put off until later", j->taken, j->written, j->back,
              j->later);
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
 * has no part of s taken: r takes its part; or NULL.  *near: some write
 * in flight other than r has bytes in [a, b).  j->lock held. */
static struct gr_join_req *
owner_of_rest (struct gr_join *j, const struct gr_join_req *r, uint64_t s,
               uint64_t a, uint64_t b, uint64_t w0, uint64_t w1, bool *near)
{
  *near = false;
  for (struct gr_join_req *q = j->head; q; q = q->next) {
    const uint64_t qa = q->offset, qb = q->offset + q->len;
    const int e = end_of (j, q, s);
    bool has = false;

    if (q == r || q->gone || qb <= a || qa >= b)
      continue;
    *near = true;
    if (e < 0 || q->reached[e] || q->nparts == 2 ||
        (qa > w0 ? qa : w0) != a || (qb < w1 ? qb : w1) != b)
      continue;
    for (int i = 0; i < q->nparts; i++)
      has |= q->parts[i].offset / (w1 - w0) == s;
    if (!has)
      return q;
  }
  return NULL;
}

/* r has reached stripe s.  j->lock held. */
static void
reach (struct gr_join *j, struct gr_join_req *r, uint64_t s)
{
  const uint64_t W = gr_map_stripe_width (&j->g);

  r->reached[0] |= s == r->offset / W;
  r->reached[1] |= s == (r->offset + r->len - 1) / W;
}

enum gr_join_outcome
gr_join_at (struct gr_join *j, struct gr_join_req *r, uint64_t pos,
            uint64_t end, bool later, uint64_t *len,
            struct gr_join_part **part)
{
  const uint64_t W = gr_map_stripe_width (&j->g), s = pos / W;
  const uint64_t w0 = s * W, w1 = w0 + W, e = end < w1 ? end : w1;
  enum gr_join_outcome o = GR_JOIN_ALONE;
  struct gr_join_part *pc;
  struct gr_join_req *q;
  bool near;
  int slot;

  *len = e - pos;
  pthread_mutex_lock (&j->lock);
  /* r's part here, taken by the write that has the rest: written by it;
   * or handed back since (that write failed): r's again, written now
   * (not again when r leaves). */
  for (int i = 0; i < r->nparts; i++)
    if (r->parts[i].offset / W == s) {
      if (r->parts[i].state == GR_JOIN_PART_BACK)
        r->parts[i].state = GR_JOIN_PART_WRITTEN;
      else
        o = GR_JOIN_GIVEN;
      goto out;
    }
  /* r's part [pos, e): one end of the stripe, the other on a chunk
   * bound; the rest [a, b) from a write that has it whole. */
  slot = r->taken[0] == NULL ? 0 : r->taken[1] == NULL ? 1 : -1;
  if (e - pos == W || slot < 0 || (pos != w0 && e != w1) ||
      (pos == w0 ? e - w0 : pos - w0) % j->g.chunk)
    goto out;
  q = owner_of_rest (j, r, s, pos == w0 ? e : w0, pos == w0 ? w1 : pos, w0,
                     w1, &near);
  if (q == NULL) {
    if (later && !near) {
      j->later++;
      pthread_mutex_unlock (&j->lock);
      return GR_JOIN_LATER;
    }
    goto out;
  }
  pc = &q->parts[q->nparts++];
  *pc = (struct gr_join_part) {
    .offset = pos == w0 ? e : w0, .len = pos == w0 ? w1 - e : pos - w0,
    .owner = q, .state = GR_JOIN_PART_TAKEN,
  };
  pc->buf = q->buf + (pc->offset - q->offset);
  q->pending++;
  *part = r->taken[slot] = pc;
  j->taken++;
  o = GR_JOIN_TAKEN;
 out:
  reach (j, r, s);
  pthread_mutex_unlock (&j->lock);
  return o;
}

void
gr_join_written (struct gr_join *j, struct gr_join_req *r,
                 struct gr_join_part *part, int err, bool back)
{
  pthread_mutex_lock (&j->lock);
  if (back)
    j->back++;
  else
    j->written++;
  part_ends (part, back ? GR_JOIN_PART_BACK : GR_JOIN_PART_WRITTEN, err);
  for (int i = 0; i < 2; i++)
    if (r->taken[i] == part)
      r->taken[i] = NULL;
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
  for (int i = 0; i < 2; i++)
    if (r->taken[i]) {
      j->back++;
      part_ends (r->taken[i], GR_JOIN_PART_BACK, 0);
      r->taken[i] = NULL;
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
