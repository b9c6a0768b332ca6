/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - unit test of joined writes (join.c), without nbdkit: two
 * writes that share a stripe (5+2, 64 KiB chunks, 320 KiB stripes), in
 * the orders they meet:
 *   - the later one reaches the shared stripe first: its part is given
 *     to the earlier one, which has not reached it; it leaves (another
 *     thread) and waits; the earlier one takes the part at that stripe,
 *     writes it (or fails: the giver fails with its errno), and the giver
 *     is let go;
 *   - the earlier one reaches it first (the later one not started):
 *     given the other way, taken the same way;
 *   - the taker leaves without taking it (it failed before): the part
 *     comes back to its owner, to write alone; taken and planned
 *     otherwise: the same;
 *   - given to a write that has planned its last stripe but not its
 *     first (the part's), as a write plans its first part last;
 *   - no part given: to a write that has reached the stripe, that
 *     overlaps the part, that does not cover the rest exactly or whose
 *     bound is not on a chunk; not a whole stripe, nor a part in the
 *     middle of one; at most one part of a stripe given to one write;
 *     none registered with gpuraid.join=0.
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
  return gr_join_at (j, r, pos, r->offset + r->len, len, part);
}

/* A sequential pair [a0, cut) and [cut, a1) sharing stripe s; the later
 * (b) reaches s first, or (first_a) the earlier; the taker writes with
 * err, or leaves without taking (drop), or hands it back (back). */
static void
pair (bool first_a, int err, bool drop, bool back)
{
  struct gr_join *j = gr_join_new (&geom);
  const uint64_t s = 3, cut = s * W + 2 * C;
  struct gr_join_req a, b, *giver, *tk;
  struct gr_join_part *part = NULL;
  struct leaver l;
  pthread_t t;
  uint64_t len;
  bool tback;

  enter (j, &a, W + C, cut - (W + C));
  enter (j, &b, cut, 2 * W);
  giver = first_a ? &a : &b;
  tk = first_a ? &b : &a;
  /* The giver reaches s: its part given. */
  CHECK (at (j, giver, first_a ? s * W : cut, &len, &part) == GR_JOIN_GIVEN,
         "the first at the shared stripe gives its part");
  CHECK (len == (first_a ? 2 * C : 3 * C), "given part of %lu bytes",
         (unsigned long) len);
  CHECK (giver->nparts == 1 && giver->pending == 1, "giver's part pending");
  l = (struct leaver) { .j = j, .r = giver };
  pthread_create (&t, NULL, leave_thread, &l);
  CHECK (!has_left (&l), "the giver waits for its part");
  if (drop) {
    /* The taker failed before reaching s: leaves, hands it back. */
    CHECK (gr_join_leave (j, tk, &tback) == 0 && !tback, "taker leaves");
  }
  else {
    /* The taker's stripes before s: alone; at s: taken. */
    if (!first_a)
      CHECK (at (j, tk, W + C, &len, &part) == GR_JOIN_ALONE,
             "the taker's part of its first stripe is alone");
    part = NULL;
    CHECK (at (j, tk, first_a ? cut : s * W, &len, &part) == GR_JOIN_TAKEN &&
           part == tk->taken && part && part->owner == giver &&
           part->offset == (first_a ? s * W : cut) &&
           part->buf == buf + part->offset, "the taker takes the part");
    CHECK (!has_left (&l), "the giver waits for the stripe's write");
    gr_join_written (j, tk, err, back);
    CHECK (tk->taken == NULL, "taken part ended");
    CHECK (gr_join_leave (j, tk, &tback) == 0 && !tback, "taker leaves");
  }
  pthread_join (t, NULL);
  CHECK (l.err == (drop || back ? 0 : err), "giver's outcome %d", l.err);
  CHECK (l.back == (drop || back), "giver's part %s", l.back ? "back"
         : "written");
  CHECK (giver->parts[0].state == (drop || back ? GR_JOIN_PART_BACK
                                   : GR_JOIN_PART_WRITTEN), "part's state");
  gr_join_free (j);
}

/* Parts not given. */
static void
refusals (void)
{
  struct gr_join *j = gr_join_new (&geom);
  struct gr_join_req a, b, c;
  struct gr_join_part *part = NULL;
  uint64_t len;
  bool back;

  /* b reached stripe 3 before a started: alone; then a's part of it is
   * not given to b. */
  enter (j, &b, 3 * W + 2 * C, W);
  CHECK (at (j, &b, 3 * W + 2 * C, &len, &part) == GR_JOIN_ALONE,
         "no write has the rest: alone");
  enter (j, &a, W, 2 * W + 2 * C);
  CHECK (at (j, &a, W, &len, &part) == GR_JOIN_ALONE && len == W &&
         at (j, &a, 2 * W, &len, &part) == GR_JOIN_ALONE &&
         at (j, &a, 3 * W, &len, &part) == GR_JOIN_ALONE && len == 2 * C,
         "no part given to a write that has reached the stripe");
  gr_join_leave (j, &b, &back);
  gr_join_leave (j, &a, &back);
  gr_join_free (j);

  j = gr_join_new (&geom);
  enter (j, &a, W, 2 * W + 2 * C);
  enter (j, &b, 3 * W + 2 * C, W);
  CHECK (at (j, &a, W, &len, &part) == GR_JOIN_ALONE && len == W,
         "a whole stripe: alone");
  CHECK (at (j, &a, 2 * W, &len, &part) == GR_JOIN_ALONE, "alone");
  /* a reached stripe 2 < 3: b may give it its part of 3 ... */
  CHECK (at (j, &b, 3 * W + 2 * C, &len, &part) == GR_JOIN_GIVEN,
         "b gives to a, behind");
  CHECK (at (j, &a, 3 * W, &len, &part) == GR_JOIN_TAKEN, "a takes");
  gr_join_written (j, &a, 0, false);
  gr_join_leave (j, &a, &back);
  CHECK (gr_join_leave (j, &b, &back) == 0 && !back, "b's part written");
  gr_join_free (j);

  /* b has written its whole stripe and its last stripe's part (a write
   * takes its first stripe's part last: io.c), not its first: a gives
   * it a's part of b's first stripe. */
  j = gr_join_new (&geom);
  enter (j, &b, 3 * W + 2 * C, 2 * W - C);
  CHECK (at (j, &b, 4 * W, &len, &part) == GR_JOIN_ALONE && len == W &&
         at (j, &b, 5 * W, &len, &part) == GR_JOIN_ALONE && len == C,
         "b's whole stripe and its last part: alone");
  enter (j, &a, W, 2 * W + 2 * C);
  CHECK (at (j, &a, 3 * W, &len, &part) == GR_JOIN_GIVEN,
         "a write that has not reached its first stripe takes a part of it");
  CHECK (at (j, &b, 3 * W + 2 * C, &len, &part) == GR_JOIN_TAKEN &&
         part->owner == &a, "b takes a's part");
  gr_join_written (j, &b, 0, false);
  gr_join_leave (j, &b, &back);
  CHECK (gr_join_leave (j, &a, &back) == 0 && !back, "a's part written");
  gr_join_free (j);

  /* a has reached stripe 3 already: b gives it nothing. */
  j = gr_join_new (&geom);
  enter (j, &a, 3 * W, 2 * C);
  CHECK (at (j, &a, 3 * W, &len, &part) == GR_JOIN_ALONE, "a alone");
  enter (j, &b, 3 * W + 2 * C, W);
  CHECK (at (j, &b, 3 * W + 2 * C, &len, &part) == GR_JOIN_ALONE,
         "no part given to a write past the stripe");
  gr_join_leave (j, &a, &back);
  gr_join_leave (j, &b, &back);
  gr_join_free (j);

  j = gr_join_new (&geom);
  /* Overlap: a covers 3W .. 3W + 3C, b's part is from 3W + 2C. */
  enter (j, &a, 2 * W, W + 3 * C);
  enter (j, &b, 3 * W + 2 * C, W);
  CHECK (at (j, &b, 3 * W + 2 * C, &len, &part) == GR_JOIN_ALONE,
         "no part given to an overlapping write");
  gr_join_leave (j, &b, &back);
  /* Not exactly the rest: a ends at 3W + C, b starts at 3W + 2C. */
  enter (j, &b, 3 * W + 2 * C, W);
  enter (j, &c, 3 * W + C, C / 2);
  gr_join_leave (j, &a, &back);
  enter (j, &a, 2 * W, W + C);
  CHECK (at (j, &b, 3 * W + 2 * C, &len, &part) == GR_JOIN_ALONE,
         "no part given to a write that leaves a gap");
  gr_join_leave (j, &a, &back);
  gr_join_leave (j, &b, &back);
  gr_join_leave (j, &c, &back);
  /* Not on a chunk bound. */
  enter (j, &a, 2 * W, W + 2 * C + 4096);
  enter (j, &b, 3 * W + 2 * C + 4096, W);
  CHECK (at (j, &b, 3 * W + 2 * C + 4096, &len, &part) == GR_JOIN_ALONE,
         "no part off a chunk bound");
  gr_join_leave (j, &a, &back);
  gr_join_leave (j, &b, &back);
  /* A part in the middle of a stripe. */
  enter (j, &a, 2 * W, W + C);
  enter (j, &b, 3 * W + C, C);
  enter (j, &c, 3 * W + 2 * C, 3 * C);
  CHECK (at (j, &b, 3 * W + C, &len, &part) == GR_JOIN_ALONE,
         "no part from the middle of a stripe");
  /* One part of a stripe given to a write at most: c's and another's. */
  gr_join_leave (j, &b, &back);
  enter (j, &b, 3 * W + 2 * C, 3 * C);
  gr_join_leave (j, &a, &back);
  enter (j, &a, 2 * W, W + 2 * C);
  CHECK (at (j, &c, 3 * W + 2 * C, &len, &part) == GR_JOIN_GIVEN,
         "c gives to a");
  CHECK (at (j, &b, 3 * W + 2 * C, &len, &part) == GR_JOIN_ALONE,
         "a second part of the same stripe is not given to a");
  gr_join_leave (j, &b, &back);
  CHECK (gr_join_leave (j, &a, &back) == 0 && !back, "a leaves");
  CHECK (gr_join_leave (j, &c, &back) == 0 && back &&
         c.parts[0].state == GR_JOIN_PART_BACK, "c's part back");
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
    pair (first_a, 0, false, false);
    pair (first_a, 5, false, false);
    pair (first_a, 0, true, false);
    pair (first_a, 0, false, true);
  }
  refusals ();
  return test_done ("test-join");
}
