/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - unit test of joined writes (join.c), without nbdkit: two
 * writes that share a stripe (5+2, 64 KiB chunks, 320 KiB stripes), in
 * the orders they meet:
 *   - either reaches the shared stripe first and takes the other's part
 *     (which has not reached it); the owner, reaching it, finds its part
 *     taken and goes on; it leaves (another thread) and waits; the taker
 *     writes the stripe (or fails: the owner fails with its errno), and
 *     the owner is let go;
 *   - the taker leaves without writing it (it failed): the part comes
 *     back to its owner, to write alone after it leaves, or, if it has
 *     not reached the stripe yet, when it does; taken and planned
 *     otherwise: the same;
 *   - asked, a part whose stripe no write in flight has any of the rest
 *     of waits (LATER, nothing marked): a neighbour that comes takes it;
 *     one with a neighbour there that cannot give it is alone;
 *   - taken from a write that has planned its last stripe but not its
 *     first (the part's);
 *   - no part taken: from a write that has reached the stripe, that
 *     overlaps the part, that does not cover the rest exactly or whose
 *     bound is not on a chunk; not for a whole stripe, nor a part in the
 *     middle of one; at most one part of a write's stripe taken; none
 *     registered with gpuraid.join=0.
 * Exit 0 on success, 1 on a failed check. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "nbdkit-plugin/join.h"
#define TESTKIT_NBDKIT_LOG
#include "tests/testkit.h"

extern int gpuraid_debug_join;

#define C ((uint64_t) 65536)
#define W (5 * C)

static const struct gr_geom geom = { .k = 5, .m = 2, .chunk = C,
                                     .stripes = 64 };
static uint8_t buf[64 * W];

struct leaver {
  struct gr_join *j;
  struct gr_join_req *r;
  int err;
  bool back;
  bool left;                    /* atomic */
};

static void *
leave_thread (void *arg)
{
  struct leaver *l = arg;

  l->err = gr_join_leave (l->j, l->r, &l->back);
  __atomic_store_n (&l->left, true, __ATOMIC_RELEASE);
  return NULL;
}

/* Has l left, after a moment to do so? */
static bool
has_left (struct leaver *l)
{
  usleep (20000);
  return __atomic_load_n (&l->left, __ATOMIC_ACQUIRE);
}

static void
enter (struct gr_join *j, struct gr_join_req *r, uint64_t off, uint64_t len)
{
  CHECK (gr_join_enter (j, r, off, len, buf + off), "registered");
}

/* r at pos: the outcome, its length. */
static enum gr_join_outcome
at (struct gr_join *j, struct gr_join_req *r, uint64_t pos, uint64_t *len,
    struct gr_join_part **part)
{
  return gr_join_at (j, r, pos, r->offset + r->len, false, len, part);
}

/* The same, GR_JOIN_LATER allowed. */
static enum gr_join_outcome
at_later (struct gr_join *j, struct gr_join_req *r, uint64_t pos,
          uint64_t *len, struct gr_join_part **part)
{
  return gr_join_at (j, r, pos, r->offset + r->len, true, len, part);
}

/* A sequential pair [a0, cut) and [cut, a1) sharing stripe s; the later
 * (b) reaches s first, or (first_a) the earlier, and takes the other's
 * part; it writes with err, or leaves without writing (drop), or hands
 * it back (back); with reclaim, the owner reaches s only after the part
 * came back. */
static void
pair (bool first_a, int err, bool drop, bool back, bool reclaim)
{
  struct gr_join *j = gr_join_new (&geom);
  const uint64_t s = 3, cut = s * W + 2 * C;
  struct gr_join_req a, b, *ow, *tk;
  struct gr_join_part *part = NULL, *none = NULL;
  struct leaver l;
  pthread_t t;
  uint64_t len;
  bool tback;

  enter (j, &a, W + C, cut - (W + C));
  enter (j, &b, cut, 2 * W);
  tk = first_a ? &a : &b;
  ow = first_a ? &b : &a;
  /* The taker's stripes before s: alone. */
  if (!first_a)
    CHECK (at (j, tk, 4 * W, &len, &part) == GR_JOIN_ALONE && part == NULL,
           "the taker's whole stripe is alone");
  CHECK (at (j, tk, first_a ? s * W : cut, &len, &part) == GR_JOIN_TAKEN &&
         part && part == tk->taken[0] && part->owner == ow &&
         part->offset == (first_a ? cut : s * W) &&
         part->len == (first_a ? 3 * C : 2 * C) &&
         part->buf == buf + part->offset, "the first at s takes the rest");
  CHECK (len == (first_a ? 2 * C : 3 * C), "its own part of %lu bytes",
         (unsigned long) len);
  CHECK (ow->nparts == 1 && ow->pending == 1, "owner's part pending");
  /* Before the part comes back (or, with reclaim, after): the owner
   * reaches s. */
  if (!reclaim)
    CHECK (at (j, ow, first_a ? cut : s * W, &len, &none) == GR_JOIN_GIVEN &&
           none == NULL && len == (first_a ? 3 * C : 2 * C),
           "the owner finds its part taken");
  if (drop || back) {
    if (drop)                   /* the taker failed: leaves, hands it back */
      CHECK (gr_join_leave (j, tk, &tback) == 0 && !tback, "taker leaves");
    else
      gr_join_written (j, tk, part, 0, true);
    CHECK (ow->pending == 0 && ow->parts[0].state == GR_JOIN_PART_BACK,
           "the part is back");
  }
  if (reclaim) {
    /* Back before the owner reached s: its own again, written now. */
    CHECK (at (j, ow, first_a ? cut : s * W, &len, &none) == GR_JOIN_ALONE &&
           none == NULL, "the owner writes its part back alone");
    CHECK (ow->parts[0].state == GR_JOIN_PART_WRITTEN, "reclaimed");
  }
  l = (struct leaver) { .j = j, .r = ow };
  pthread_create (&t, NULL, leave_thread, &l);
  if (!drop && !back) {
    CHECK (!has_left (&l), "the owner waits for the stripe's write");
    gr_join_written (j, tk, part, err, false);
    CHECK (tk->taken[0] == NULL, "taken part ended");
  }
  if (!drop)
    CHECK (gr_join_leave (j, tk, &tback) == 0 && !tback, "taker leaves");
  pthread_join (t, NULL);
  CHECK (l.err == (drop || back ? 0 : err), "owner's outcome %d", l.err);
  CHECK (l.back == ((drop || back) && !reclaim), "owner's part %s",
         l.back ? "back" : "written");
  gr_join_free (j);
}

/* Parts put off: until a neighbour comes, or alone. */
static void
later (void)
{
  struct gr_join *j = gr_join_new (&geom);
  struct gr_join_req a, b;
  struct gr_join_part *part = NULL;
  uint64_t len;
  bool back;

  /* a alone in flight: its last part waits, unmarked; b comes and takes
   * it; a finds it taken. */
  enter (j, &a, W + C, 2 * W + C);
  CHECK (at_later (j, &a, 3 * W, &len, &part) == GR_JOIN_LATER &&
         len == 2 * C && part == NULL && !a.reached[1],
         "no neighbour: later, nothing marked");
  enter (j, &b, 3 * W + 2 * C, W);
  CHECK (at_later (j, &b, 3 * W + 2 * C, &len, &part) == GR_JOIN_TAKEN &&
         part && part->owner == &a, "the neighbour that came takes it");
  CHECK (at (j, &a, 3 * W, &len, &part) == GR_JOIN_GIVEN,
         "back to it later: taken");
  gr_join_written (j, &b, b.taken[0], 0, false);
  gr_join_leave (j, &b, &back);
  CHECK (gr_join_leave (j, &a, &back) == 0 && !back, "a's part written");
  gr_join_free (j);

  /* A neighbour there that has reached the stripe: alone, not later. */
  j = gr_join_new (&geom);
  enter (j, &a, W + C, 2 * W + C);
  CHECK (at (j, &a, 3 * W, &len, &part) == GR_JOIN_ALONE, "a alone");
  enter (j, &b, 3 * W + 2 * C, 2 * W - 2 * C);
  CHECK (at_later (j, &b, 3 * W + 2 * C, &len, &part) == GR_JOIN_ALONE,
         "a neighbour past the stripe: alone");
  /* A whole stripe is never put off. */
  CHECK (at_later (j, &b, 4 * W, &len, &part) == GR_JOIN_ALONE,
         "a whole stripe: alone");
  gr_join_leave (j, &a, &back);
  gr_join_leave (j, &b, &back);
  gr_join_free (j);
}

/* Parts not taken. */
static void
refusals (void)
{
  struct gr_join *j = gr_join_new (&geom);
  struct gr_join_req a, b, c;
  struct gr_join_part *part = NULL;
  uint64_t len;
  bool back;

  /* b reached stripe 3 before a started: alone; then a takes nothing
   * of b. */
  enter (j, &b, 3 * W + 2 * C, W);
  CHECK (at (j, &b, 3 * W + 2 * C, &len, &part) == GR_JOIN_ALONE,
         "no write has the rest: alone");
  enter (j, &a, W, 2 * W + 2 * C);
  CHECK (at (j, &a, W, &len, &part) == GR_JOIN_ALONE && len == W &&
         at (j, &a, 2 * W, &len, &part) == GR_JOIN_ALONE &&
         at (j, &a, 3 * W, &len, &part) == GR_JOIN_ALONE && len == 2 * C,
         "nothing taken from a write that has reached the stripe");
  gr_join_leave (j, &b, &back);
  gr_join_leave (j, &a, &back);
  gr_join_free (j);

  /* b has planned its whole stripe and its last stripe's part, not its
   * first: a takes b's part of b's first stripe. */
  j = gr_join_new (&geom);
  enter (j, &b, 3 * W + 2 * C, 2 * W - C);
  CHECK (at (j, &b, 4 * W, &len, &part) == GR_JOIN_ALONE && len == W &&
         at (j, &b, 5 * W, &len, &part) == GR_JOIN_ALONE && len == C,
         "b's whole stripe and its last part: alone");
  enter (j, &a, W, 2 * W + 2 * C);
  CHECK (at (j, &a, 3 * W, &len, &part) == GR_JOIN_TAKEN &&
         part->owner == &b, "a takes b's part of b's first stripe");
  CHECK (at (j, &b, 3 * W + 2 * C, &len, &part) == GR_JOIN_GIVEN,
         "b finds it taken");
  gr_join_written (j, &a, a.taken[0], 0, false);
  gr_join_leave (j, &a, &back);
  CHECK (gr_join_leave (j, &b, &back) == 0 && !back, "b's part written");
  gr_join_free (j);

  j = gr_join_new (&geom);
  /* Overlap: a covers 3W .. 3W + 3C, b's part is from 3W + 2C. */
  enter (j, &a, 2 * W, W + 3 * C);
  enter (j, &b, 3 * W + 2 * C, W);
  CHECK (at (j, &b, 3 * W + 2 * C, &len, &part) == GR_JOIN_ALONE,
         "nothing taken from an overlapping write");
  gr_join_leave (j, &b, &back);
  /* Not exactly the rest: a ends at 3W + C, b starts at 3W + 2C. */
  enter (j, &b, 3 * W + 2 * C, W);
  enter (j, &c, 3 * W + C, C / 2);
  gr_join_leave (j, &a, &back);
  enter (j, &a, 2 * W, W + C);
  CHECK (at (j, &b, 3 * W + 2 * C, &len, &part) == GR_JOIN_ALONE,
         "nothing taken from a write that leaves a gap");
  gr_join_leave (j, &a, &back);
  gr_join_leave (j, &b, &back);
  gr_join_leave (j, &c, &back);
  /* Not on a chunk bound. */
  enter (j, &a, 2 * W, W + 2 * C + 4096);
  enter (j, &b, 3 * W + 2 * C + 4096, W);
  CHECK (at (j, &b, 3 * W + 2 * C + 4096, &len, &part) == GR_JOIN_ALONE,
         "nothing taken off a chunk bound");
  gr_join_leave (j, &a, &back);
  gr_join_leave (j, &b, &back);
  /* A part in the middle of a stripe. */
  enter (j, &a, 2 * W, W + C);
  enter (j, &b, 3 * W + C, C);
  enter (j, &c, 3 * W + 2 * C, 3 * C);
  CHECK (at (j, &b, 3 * W + C, &len, &part) == GR_JOIN_ALONE,
         "nothing taken for a part in the middle of a stripe");
  gr_join_leave (j, &b, &back);
  gr_join_leave (j, &c, &back);
  /* One part of a write's stripe taken at most: b and c cover the same
   * rest of a's stripe 3; the first takes a's part, the second not. */
  enter (j, &b, 3 * W + 2 * C, 3 * C);
  enter (j, &c, 3 * W + 2 * C, 3 * C);
  gr_join_leave (j, &a, &back);
  enter (j, &a, 2 * W, W + 2 * C);
  CHECK (at (j, &c, 3 * W + 2 * C, &len, &part) == GR_JOIN_TAKEN &&
         part->owner == &a, "c takes a's part");
  CHECK (at (j, &b, 3 * W + 2 * C, &len, &part) == GR_JOIN_ALONE,
         "a second taker of the same part: alone");
  gr_join_leave (j, &b, &back);
  CHECK (gr_join_leave (j, &c, &back) == 0 && !back, "c leaves (hands it back)");
  CHECK (gr_join_leave (j, &a, &back) == 0 && back &&
         a.parts[0].state == GR_JOIN_PART_BACK, "a's part back");
  /* gpuraid.join=0: no write registered. */
  gpuraid_debug_join = 0;
  CHECK (!gr_join_enter (j, &a, 2 * W, W + 2 * C, buf),
         "none registered with gpuraid.join=0");
  gpuraid_debug_join = 1;
  gr_join_free (j);
}

int
main (void)
{
  test_seed ("test-join");
  for (int first_a = 0; first_a <= 1; first_a++) {
    pair (first_a, 0, false, false, false);
    pair (first_a, 5, false, false, false);
    pair (first_a, 0, true, false, false);
    pair (first_a, 0, false, true, false);
    pair (first_a, 0, true, false, true);
    pair (first_a, 0, false, true, true);
  }
  later ();
  refusals ();
  return test_done ("test-join");
}
