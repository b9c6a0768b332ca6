/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the write journal of a degraded array (closes the write hole).
 *
 * While a member is missing or failed, a write to a stripe is not atomic:
 * a crash between its data and parity writes leaves a stripe whose lost
 * chunk, rebuilt from new data and old parity, is wrong, though it was
 * never written.  So before the member writes of a write plan on a
 * degraded array, an entry is written to the journal area of some live
 * members and synced: the stripe, the coding range [lo, hi), and the final
 * contents of its lost data chunks over that range.  After a crash the
 * latest entry of each journal slot is replayed: parity recomputed from
 * the live data chunks and the journaled lost ones, which makes the
 * stripe one codeword again whatever part of the write reached the
 * members (replay.h).  docs/format.md ("The journal") has the layout and
 * argument.
 *
 * One owner: struct gr_journal holds the slot locks and the sequence
 * counter.  A write to stripe s uses slot s mod nslots, held from its
 * entry to the end of its member writes, so a slot's latest entry is the
 * latest write to its stripe whenever another entry could replace it. */
#ifndef GPURAID_JOURNAL_H
#define GPURAID_JOURNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "members.h"
#include "plan.h"
#include "steps.h"

struct gr_journal;

/* The journal of an array of geometry g (NULL after nbdkit_error).  An
 * array whose metadata area has no room for one slot has none:
 * gr_journal_slots () is 0, and degraded writes are not journaled. */
struct gr_journal *gr_journal_new (const struct gr_geom *g,
                                   struct gr_members *ms);
void gr_journal_free (struct gr_journal *j);
unsigned gr_journal_slots (const struct gr_journal *j);

/* Before the member writes of plan p (a write plan of one stripe, made
 * with failed[] as its snapshot): write and sync its entry, the lost data
 * chunks taken from the plan's blocks in b.  The slot stays held until
 * gr_journal_end.  0, or -1 with errno set (the plan must not write). */
int gr_journal_begin (struct gr_journal *j, const struct gr_plan *p,
                      const bool *failed, const struct gr_bufs *b);
void gr_journal_end (struct gr_journal *j, const struct gr_plan *p);

/* At start-up, on a dirty degraded array (replay.h replays them): the
 * latest valid entry of slot q on any live member, into e, and its
 * payload (e's journaled chunks, one after the other: to free).  false
 * if the slot holds none. */
bool gr_journal_entry (struct gr_journal *j, unsigned q,
                       struct gr_replay_entry *e, uint8_t **payload);

/* Zero the journal slots of the live members, before the first write of
 * a session (gr_members_on_dirty), so that every entry found after a
 * crash is from the session that crashed.  Errors are only reported (it
 * runs under the superblock lock).  0 or -1. */
int gr_journal_clear (struct gr_journal *j);

#endif /* GPURAID_JOURNAL_H */
