/* gpuraid - per-stripe planning for the data paths (pure functions).
 *
 * Deciding, apart from doing (like md's raid5.c): which bytes of which
 * chunks a request touches in one stripe, the aligned range the coding
 * works on, and how a partial-stripe write is done.  No I/O, no globals;
 * unit-tested by test-plan. */
#ifndef GPURAID_PLAN_H
#define GPURAID_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The part of one stripe a request touches: data bytes [so, so+len) of
 * stripe s (so + len <= k * chunk), i.e. chunks i0..i1; chunk i is
 * touched over [gr_piece_a (i), gr_piece_b (i)).  [lo, hi) is the union
 * of the touched ranges widened to multiples of lm (clipped to chunk). */
struct gr_piece {
  uint64_t s;
  uint32_t chunk;
  uint32_t so, len;
  int i0, i1;
  uint32_t lo, hi;
};

/* len >= 1; chunk a multiple of lm (lm >= 1). */
void gr_piece_init (struct gr_piece *pc, uint32_t chunk, uint32_t lm,
                    uint64_t s, uint32_t so, uint32_t len);
uint32_t gr_piece_a (const struct gr_piece *pc, int i);
uint32_t gr_piece_b (const struct gr_piece *pc, int i);
/* Offset in the request buffer of byte a of chunk i. */
size_t gr_piece_bufoff (const struct gr_piece *pc, int i, uint32_t a);
/* Is chunk i touched and fully overwritten over [lo, hi)? */
bool gr_piece_covers (const struct gr_piece *pc, int i);

enum gr_write_plan {
  GR_WRITE_RCW,             /* read untouched data over [lo,hi), encode */
  GR_WRITE_RMW,             /* read touched data + live parity, update */
  GR_WRITE_DEGRADED,        /* a data chunk is failed: reconstruct, encode */
  GR_WRITE_TOO_MANY,        /* more than m failed: cannot be done */
};

/* How to write a partial stripe.  failed[i] for code index i (0..k+m-1).
 * Chooses RMW when it reads fewer chunks than RCW (like md); chunk reads
 * counted: RMW t touched data + live parity, RCW the data chunks not
 * fully overwritten over [lo, hi).  *reads gets the chosen count (for
 * the degraded plan: k). */
enum gr_write_plan gr_plan_write (const struct gr_piece *pc, int k, int m,
                                  const bool *failed, int *reads);

#endif /* GPURAID_PLAN_H */
