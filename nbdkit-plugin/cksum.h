/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the block checksums of an array with integrity: a CRC-32C
 * of every 4 KiB block of every member, data and parity, kept in each
 * member's checksum area (docs/format.md, "Checksums"; format.h has the
 * layout and gr_cksum_block the value).
 *
 * The executor verifies every block a plan reads against them and sets
 * them for every block it writes (exec.h); they are cached in memory by
 * page (a page holds 1024 blocks' values: 4 MiB of a member), at most
 * GR_CKSUM_CACHE bytes of pages, read from the member when first needed
 * and written back when evicted or flushed.  Crash consistency comes
 * from the write-intent bitmap (bitmap.h): it flushes the pages before a
 * region's bit is cleared, so outside the regions whose bit is set every
 * value on disk is that of the block on disk; inside, a block and its
 * value may disagree after a crash, and the resync sorts them out.
 *
 * One owner: struct gr_cksum holds the cache, cut into shards by page,
 * each with its own lock, a leaf (no member I/O is done under it). */
#ifndef GPURAID_CKSUM_H
#define GPURAID_CKSUM_H

#include <stdbool.h>
#include <stdint.h>

#include "members.h"

struct gr_cksum;

/* Bytes of pages cached at most (64 MiB: the values of 64 GiB of member
 * data, about 16 TiB of member data a GiB). */
#define GR_CKSUM_CACHE ((size_t) 64 << 20)

/* The checksums of the members of ms, their area at member byte area
 * (the superblock's cksum_offset), the data at data_offset.  NULL after
 * nbdkit_error. */
struct gr_cksum *gr_cksum_new (struct gr_members *ms, uint64_t area,
                               uint64_t data_offset);
/* Frees it (without writing: gr_cksum_flush first). */
void gr_cksum_free (struct gr_cksum *cs);

enum gr_cksum_outcome {
  GR_CKSUM_MATCH,               /* every block matches its checksum */
  GR_CKSUM_MISMATCH,            /* one or more do not: *bad is the first */
  GR_CKSUM_UNREADABLE,          /* a page of checksums could not be read
                                 * (the member failed) */
};

/* The blocks of buf, read from member i at member byte off (in the data
 * area; off and len multiples of 4096). */
enum gr_cksum_outcome gr_cksum_verify (struct gr_cksum *cs, int i,
                                       uint64_t off, const uint8_t *buf,
                                       uint64_t len, uint64_t *bad);
/* The same, the blocks' values given (gr_cksum_block's, computed by the
 * coding that read them: gr_code_op's cksums). */
enum gr_cksum_outcome gr_cksum_check (struct gr_cksum *cs, int i,
                                      uint64_t off, const uint32_t *vals,
                                      uint64_t len, uint64_t *bad);
/* They were written (or read and found right) with these bytes: their
 * checksums set.  -1 if a page could not be read (the member failed). */
int gr_cksum_update (struct gr_cksum *cs, int i, uint64_t off,
                     const uint8_t *buf, uint64_t len);
/* The same, their values given (gr_cksum_block's, computed with the
 * coding: gr_code_op's cksums are the same values). */
int gr_cksum_set (struct gr_cksum *cs, int i, uint64_t off,
                  const uint32_t *vals, uint64_t len);
/* They are zeros (punched or zeroed by fallocate). */
int gr_cksum_zeroed (struct gr_cksum *cs, int i, uint64_t off, uint64_t len);
/* Their pages are written again as they are (a member's live
 * replacement, which takes the pages written from now on, gets them). */
int gr_cksum_touch (struct gr_cksum *cs, int i, uint64_t off, uint64_t len);
/* A block's checksum made wrong on purpose: its contents could not be
 * verified (rebuilt from a chunk that failed its checksum, with no
 * redundancy left to repair it), so that reading it answers EIO instead
 * of data that may be wrong. */
int gr_cksum_poison (struct gr_cksum *cs, int i, uint64_t off,
                     const uint8_t *block);

/* Write every changed page to its member (not synced: the caller syncs
 * the members).  0, or -1 if a member's write failed (it has failed). */
int gr_cksum_flush (struct gr_cksum *cs);

#endif /* GPURAID_CKSUM_H */
