/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the write-intent bitmap: which regions may need a resync.
 *
 * The array's stripes are cut into regions of a power of two of stripes
 * (the superblock's bitmap_region: 64 MiB of each member by default,
 * bitmap-chunk= at creation), one bit each, at most GR_SB_BITMAP_BITS.  Before the member writes of a plan, the bits of the regions
 * it touches are set on every live member and synced (when they were not
 * set already); a bit is cleared lazily, by a thread, once its region has
 * had no write for a whole pass (5 s) and the members were synced after
 * its last one.  So after a crash only the regions whose bit is set on a
 * live member can hold a stripe whose parity misses its data, and resync
 * reads only those (md's write-intent bitmap).  docs/format.md ("The
 * write-intent bitmap") has the layout and the argument.
 *
 * Regions left to resync are *pending*: their bits stay set until the
 * resync (resync.h) has done them; a plan that would rebuild a chunk from
 * a pending region's parity (a member lost before the resync got there)
 * is refused with EIO, never answered with what could be wrong data.
 *
 * One owner: struct gr_bitmap holds the bits (as wanted on disk), the
 * pending set, each region's writes in flight, and the clearing thread.
 * Its lock is a leaf: member I/O is done without it. */
#ifndef GPURAID_BITMAP_H
#define GPURAID_BITMAP_H

#include <stdbool.h>
#include <stdint.h>

#include "members.h"
#include "plan.h"

struct gr_bitmap;
struct gr_cksum;

/* All clear, nothing pending; region stripes a region (the superblock's
 * bitmap_region); the block checksums (cksum.h, or NULL) are written
 * before the members are synced for a bit to be cleared.  An array whose metadata area has no room for the bits
 * keeps none: it marks nothing, and after a crash every region is
 * pending.  NULL after nbdkit_error. */
struct gr_bitmap *gr_bitmap_new (const struct gr_geom *g,
                                 struct gr_members *ms, uint64_t region,
                                 struct gr_cksum *cksum);
/* Stops the clearing thread. */
void gr_bitmap_free (struct gr_bitmap *b);

uint64_t gr_bitmap_regions (const struct gr_bitmap *b);
uint64_t gr_bitmap_region_size (const struct gr_bitmap *b);  /* stripes */

/* At assembly of a dirty array, before anything is written: every region
 * whose bit is set on a live member becomes set and pending (all == false),
 * or every region (all == true: the session that crashed kept no bitmap,
 * or a member's bitmap cannot be read).  Returns the pending count. */
uint64_t gr_bitmap_load (struct gr_bitmap *b, bool all);

/* At assembly of a dirty degraded array with block checksums, after the
 * journal's replay: every region whose bit is set on a live member (every
 * region: all) becomes set and suspect: a write the crash tore may have
 * left a block and its checksum apart there, and no resync can run to
 * set them right: they are verified (gr_exec_verify_stripes) and then
 * unsuspected.  A suspect region's bit is not cleared.  Returns the
 * suspect count. */
uint64_t gr_bitmap_load_suspect (struct gr_bitmap *b, bool all);
/* Is a region of stripes [s0, s0 + ns) suspect? */
bool gr_bitmap_suspect (struct gr_bitmap *b, uint64_t s0, uint64_t ns);
/* The first suspect region at or after r (gr_bitmap_regions: none). */
uint64_t gr_bitmap_next_suspect (struct gr_bitmap *b, uint64_t r);
/* Region r's checksums were verified: no longer suspect (its bit is
 * cleared lazily, as after a write). */
void gr_bitmap_unsuspect (struct gr_bitmap *b, uint64_t r);

/* The hook of the dirty superblock update (gr_members_on_dirty, under the
 * superblock lock): write the bits to every live member, unsynced (the
 * superblock write syncs them).  true when all were written: the dirty
 * superblock may then say that the bitmap is kept (GR_SB_FLAG_BITMAP). */
bool gr_bitmap_write_for_dirty (struct gr_bitmap *b);

/* Before the member writes of stripes [s0, s0 + ns): set their regions'
 * bits, on disk (synced) if they were not.  0, or -1 with errno EIO (the
 * array has failed) after nbdkit_error: the plan must not write. */
int gr_bitmap_start_write (struct gr_bitmap *b, uint64_t s0, uint64_t ns);
/* Its member writes are done (or abandoned). */
void gr_bitmap_end_write (struct gr_bitmap *b, uint64_t s0, uint64_t ns);

/* Is a region of stripes [s0, s0 + ns) pending? */
bool gr_bitmap_pending (struct gr_bitmap *b, uint64_t s0, uint64_t ns);
/* The first pending region at or after r, or gr_bitmap_regions () when
 * there is none. */
uint64_t gr_bitmap_next_pending (struct gr_bitmap *b, uint64_t r);
/* Region r has been resynced: no longer pending (its bit is cleared
 * lazily, as after a write). */
void gr_bitmap_resynced (struct gr_bitmap *b, uint64_t r);

/* Sync the members and clear the bits of the regions neither pending nor
 * being written, now (the resync's progress, so that a restart does not
 * redo the regions done). */
void gr_bitmap_checkpoint (struct gr_bitmap *b);

/* --- the written and degraded maps (bitmap-maps.c) ---------------------
 *
 * Beside the bits, where the metadata area has room (format.h:
 * gr_maps_layout), two maps of coarser regions: the written map marks
 * every region written since the array was made (GR_SB_FLAG_WRITTEN; a
 * region trimmed whole while healthy is unmarked once the trim is
 * durable), the degraded map every region written since a member
 * failed (kept from the first failure until no member is failed:
 * sb.degraded_since).  Both are set with the bits, before a plan's
 * writes, and written out with them.  A rebuild rebuilds only the
 * regions written (zeroing the others on a replacement), a re-add only
 * the degraded ones; the resync without a bitmap, only the written. */

/* At assembly, before anything is written: the maps as the live members
 * hold them (written: with GR_SB_FLAG_WRITTEN; degraded: while
 * sb.degraded_since, and after a crash (crashed) the write-intent bits
 * on disk counted in: a write in flight when a member failed, before
 * the degraded map was written).  After a crash the bits set on a live
 * member are set in memory too, neither pending nor suspect yet: a
 * degraded start replays the journal before it loads them
 * (gr_bitmap_load_suspect), and a block the replay repairs is written
 * with its region's bit set, which writes every bit as memory has it.
 * 0, or -1 after nbdkit_error. */
int gr_bitmap_load_maps (struct gr_bitmap *b, bool crashed);
/* At a clean shutdown, before the members are closed: a member that
 * failed since the last write has the degraded map it needs on disk
 * (the next start trusts it as it is). */
void gr_bitmap_close (struct gr_bitmap *b);
/* Does the metadata area hold the maps? */
bool gr_bitmap_maps_kept (const struct gr_bitmap *b);
/* Is the degraded map kept now (a member has failed)? */
bool gr_bitmap_degraded_kept (struct gr_bitmap *b);
/* Stripe s's map region: is it written, degraded?  Returns where the
 * run of regions alike from s ends (a stripe, at most the stripes).
 * Without the maps: written, not degraded, to the end. */
uint64_t gr_bitmap_maps_run (struct gr_bitmap *b, uint64_t s, bool *written,
                             bool *degraded);
/* The bytes of array data in the regions the written map (degraded:
 * the degraded map) marks, stripe_bytes a stripe. */
uint64_t gr_bitmap_map_bytes (struct gr_bitmap *b, bool degraded,
                              uint64_t stripe_bytes);
/* Stripes [s0, s0 + ns) were punched or zeroed on every member (a trim):
 * the map regions they cover whole are no longer written, once that is
 * durable (the clearing thread's next sync). */
void gr_bitmap_trimmed (struct gr_bitmap *b, uint64_t s0, uint64_t ns);

/* Start the clearing thread (in the server process, after nbdkit's
 * fork).  0, or -1 after nbdkit_error. */
int gr_bitmap_start (struct gr_bitmap *b);

#endif /* GPURAID_BITMAP_H */
