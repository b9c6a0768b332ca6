/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - joined writes: two concurrent writes that each cover part
 * of one stripe, together all of it, make one full-stripe write.
 *
 * Writes of sizes that stripes do not divide (1 MiB on 10+4 with 64 KiB
 * chunks: 640 KiB stripes) leave a part of a stripe at each end; a
 * sequential stream's neighbours each write one part of the stripe they
 * share, each by a read-modify-write or a reconstruct-write of its own:
 * reads, an encode and m parity writes each, where one full-stripe write
 * would read nothing and write the parity once.  md joins them in its
 * stripe cache; here, as the writes are in flight together:
 *
 *   - each write request in flight is registered (gr_join_enter), with
 *     whether it has reached its first and its last stripe yet;
 *   - before planning a part of a stripe that touches one end of it, on
 *     a chunk bound, a request looks for the write in flight that covers
 *     exactly the rest of the stripe and has not reached it: it takes
 *     that write's part (GR_JOIN_TAKEN) and plans the whole stripe, its
 *     bytes and the part's (plan.h GR_PLAN_WRITE_JOINED), then says it
 *     is written (gr_join_written).  The owner, reaching the stripe,
 *     finds its part taken (GR_JOIN_GIVEN), goes on with the rest of its
 *     range, and waits for the part when it leaves (gr_join_leave).  So
 *     whichever of the two reaches the stripe first writes it, at once;
 *   - where no write in flight has any of the rest yet, a request may
 *     ask to come back later (GR_JOIN_LATER: it has not reached the
 *     stripe, so a neighbour that comes meanwhile takes its part);
 *   - a request that leaves with a part it took still unwritten (it
 *     failed first, or planned that stripe otherwise) hands it back:
 *     its owner then writes it alone.
 *
 * A request waits only for its own parts taken, and only when it
 * leaves, after all its plans; a taker writes what it took within its
 * plans, which never wait for a part: no cycle.  Only writes of a buffer
 * without FUA take part.  The owner's buffer stays its own request's
 * (page-locked for the GPU as the request's is) until it leaves.  The
 * state is this module's, under one lock. */
#ifndef GPURAID_JOIN_H
#define GPURAID_JOIN_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "raidmap/raidmap.h"

struct gr_join;

/* A write's part of one stripe, taken by another write to make the
 * stripe whole. */
struct gr_join_part {
  uint64_t offset, len;         /* logical */
  uint8_t *buf;                 /* its bytes (the owner's buffer) */
  struct gr_join_req *owner;
  enum { GR_JOIN_PART_TAKEN, GR_JOIN_PART_WRITTEN,
         GR_JOIN_PART_BACK } state;
  int err;                      /* WRITTEN: 0, or the errno it failed
                                 * with */
};

/* A write request in flight (its caller's, for gr_join_enter to
 * gr_join_leave). */
struct gr_join_req {
  uint64_t offset, len;
  uint8_t *buf;
  bool reached[2];              /* its first stripe, its last: planned */
  bool gone;                    /* left: takes no part */
  struct gr_join_part *taken[2];        /* others' parts it took, until
                                         * written (NULL: none) */
  struct gr_join_part parts[2]; /* its own taken by others (a range has
                                 * at most two ends) */
  int nparts, pending;          /* taken; not yet written or back */
  pthread_cond_t done;          /* pending reached 0 */
  struct gr_join_req *prev, *next;
};

struct gr_join *gr_join_new (const struct gr_geom *g);
/* Logs what it joined. */
void gr_join_free (struct gr_join *j);

/* Register r; false (r not registered) with -D gpuraid.join=0. */
bool gr_join_enter (struct gr_join *j, struct gr_join_req *r,
                    uint64_t offset, uint64_t len, uint8_t *buf);

enum gr_join_outcome {
  GR_JOIN_ALONE,                /* plan the span as it is */
  GR_JOIN_GIVEN,                /* r's part [pos, pos + *len) was taken by
                                 * the write that has the rest: go on
                                 * after it */
  GR_JOIN_TAKEN,                /* *part: the rest of this stripe, taken
                                 * by r: plan them joined, then
                                 * gr_join_written */
  GR_JOIN_LATER,                /* (asked for) no write in flight has
                                 * any of the rest: nothing marked, come
                                 * back to [pos, pos + *len) later */
};

/* Before r plans its range from pos on (end: its range's end); later:
 * GR_JOIN_LATER may be the answer. */
enum gr_join_outcome gr_join_at (struct gr_join *j, struct gr_join_req *r,
                                 uint64_t pos, uint64_t end, bool later,
                                 uint64_t *len, struct gr_join_part **part);

/* Part (taken by r) is written (err 0), failed (err an errno: its owner
 * fails too), or, with back, not written (its owner writes it alone). */
void gr_join_written (struct gr_join *j, struct gr_join_req *r,
                      struct gr_join_part *part, int err, bool back);

/* r leaves: parts it took and has not written go back to their owners
 * (it failed); then it waits for its own taken by others.  0, or the
 * errno one failed with; *back: some were handed back (r writes them
 * alone: parts[] in state GR_JOIN_PART_BACK). */
int gr_join_leave (struct gr_join *j, struct gr_join_req *r, bool *back);

#endif /* GPURAID_JOIN_H */
