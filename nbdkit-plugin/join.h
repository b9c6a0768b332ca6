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
 *     whether it has reached its first and its last stripe yet (it
 *     writes its whole stripes first and its parts of stripes last, so
 *     that a neighbour that arrives a little later still finds them
 *     there: io.c);
 *   - before planning a part of a stripe that touches one end of it, on
 *     chunk bounds, a request looks for a part given to it for that
 *     stripe (GR_JOIN_TAKEN: it plans the whole stripe, its bytes and
 *     the given part's, plan.h GR_PLAN_WRITE_JOINED); else for a request
 *     in flight that covers exactly the rest of the stripe and has not
 *     reached it yet: it gives that request its part (GR_JOIN_GIVEN),
 *     goes on with the rest of its range, and waits for the part to be
 *     written when it leaves (gr_join_leave);
 *   - a request that leaves without having taken a part given to it (it
 *     failed first, or planned that stripe otherwise) hands it back:
 *     its owner then writes it alone.
 *
 * A request waits only for parts it gave away, and only when it leaves,
 * and a taker reaches the stripe by planning its range, which never
 * waits for a part: no cycle.  Only writes of a buffer without FUA
 * take part.  The owner's buffer stays its own request's (page-locked
 * for the GPU as the request's is) until it leaves.  The state is this
 * module's, under one lock. */
#ifndef GPURAID_JOIN_H
#define GPURAID_JOIN_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "raidmap/raidmap.h"

struct gr_join;

/* A write's part of one stripe, given to another write to make. */
struct gr_join_part {
  uint64_t offset, len;         /* logical */
  uint8_t *buf;                 /* its bytes (the owner's buffer) */
  struct gr_join_req *owner;
  enum { GR_JOIN_PART_GIVEN, GR_JOIN_PART_WRITTEN,
         GR_JOIN_PART_BACK } state;
  int err;                      /* WRITTEN: 0, or the errno it failed
                                 * with */
  struct gr_join_part *next;    /* in its taker's list */
};

/* A write request in flight (its caller's, for gr_join_enter to
 * gr_join_leave). */
struct gr_join_req {
  uint64_t offset, len;
  uint8_t *buf;
  bool reached[2];              /* its first stripe, its last: planned */
  bool gone;                    /* left: takes no part */
  struct gr_join_part *given;   /* parts given to it, not yet taken */
  struct gr_join_part *taken;   /* the one taken, until written */
  struct gr_join_part parts[2]; /* its own given away (a range has at
                                 * most two ends) */
  int nparts, pending;          /* given away; not yet written or back */
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
  GR_JOIN_GIVEN,                /* the part [pos, pos + *len) is given
                                 * away: go on after it */
  GR_JOIN_TAKEN,                /* *part: the rest of this stripe, given
                                 * to r: plan them joined, then
                                 * gr_join_written */
};

/* Before r plans its range from pos on (end: its range's end). */
enum gr_join_outcome gr_join_at (struct gr_join *j, struct gr_join_req *r,
                                 uint64_t pos, uint64_t end, uint64_t *len,
                                 struct gr_join_part **part);

/* r's taken part's end: written (err 0), failed (err an errno: its
 * owner fails too), or, with back, not written (its owner writes it
 * alone). */
void gr_join_written (struct gr_join *j, struct gr_join_req *r, int err,
                      bool back);

/* r leaves: parts given to it and not written go back to their owners
 * (the one it took too: it failed); then it waits for its own given
 * away.  0, or the errno one failed with; *back: some were handed back
 * (r writes them alone: parts[] in state GR_JOIN_PART_BACK). */
int gr_join_leave (struct gr_join *j, struct gr_join_req *r, bool *back);

#endif
