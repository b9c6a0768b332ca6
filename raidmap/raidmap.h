/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - array geometry: logical offsets to members and back.
 *
 * Pure functions over a const geometry; no I/O, no allocation.
 *
 * A stripe is k data chunks + m parity chunks, one chunk per member.
 * Code index i (0..k-1 data, k..n-1 parity, n = k+m) of stripe s lives on
 * member (i - s) mod n, so parity rotates one member left per stripe and
 * data starts right after the last parity chunk (md's left-symmetric,
 * generalised to m parities).  For k = 3, m = 2 (D data, P/Q parity):
 *
 *   member:    0   1   2   3   4
 *   stripe 0:  D0  D1  D2  P   Q
 *   stripe 1:  D1  D2  P   Q   D0
 *   stripe 2:  D2  P   Q   D0  D1
 *   stripe 3:  P   Q   D0  D1  D2
 *   stripe 4:  Q   D0  D1  D2  P
 *
 * Chunk c of stripe s sits at member byte offset
 * data_offset + s * chunk + (offset within chunk); bytes below
 * data_offset hold the superblock and other metadata.
 */
#ifndef GPURAID_RAIDMAP_H
#define GPURAID_RAIDMAP_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct gr_geom {
  int k, m;                  /* data and parity chunks per stripe */
  uint32_t chunk;            /* chunk size in bytes, power of two >= 4096 */
  uint64_t data_offset;      /* start of the data area on each member */
  uint64_t stripes;          /* number of stripes */
};

/* One contiguous piece of a logical range, inside one chunk. */
struct gr_extent {
  uint64_t logical;          /* logical byte offset of this piece */
  uint64_t stripe;
  int index;                 /* data code index 0..k-1 */
  int member;
  uint32_t chunk_off;        /* offset inside the chunk */
  uint32_t len;              /* bytes, never crossing a chunk boundary */
  uint64_t member_off;       /* byte offset on the member */
};

/* Check a geometry: 0, or -EINVAL (k < 1, m < 1, k+m > 256, chunk not a
 * power of two >= 4096, data_offset not chunk-aligned... see raidmap.c). */
int gr_map_check (const struct gr_geom *g);

/* Logical size in bytes: stripes * k * chunk. */
uint64_t gr_map_size (const struct gr_geom *g);
/* Data bytes in one stripe: k * chunk. */
uint64_t gr_map_stripe_width (const struct gr_geom *g);

/* Member holding code index i (0..n-1) of stripe s. */
int gr_map_member (const struct gr_geom *g, uint64_t stripe, int index);
/* Code index held by member on stripe s (inverse of gr_map_member). */
int gr_map_index (const struct gr_geom *g, uint64_t stripe, int member);
/* Byte offset on any member of offset chunk_off inside stripe s. */
uint64_t gr_map_member_offset (const struct gr_geom *g, uint64_t stripe,
                               uint32_t chunk_off);

/* Forward map: the piece of [offset, offset+len) that starts at offset
 * and stays inside one chunk.  Requires offset < size, len >= 1; the
 * piece is clipped to len and to the end of the chunk.  Call repeatedly,
 * advancing by ext->len, to walk a range. */
void gr_map_extent (const struct gr_geom *g, uint64_t offset, uint64_t len,
                    struct gr_extent *ext);

/* The part of a logical range inside one stripe. */
struct gr_span {
  uint64_t logical;          /* logical byte offset of its first byte */
  uint64_t stripe;
  uint64_t so;               /* offset inside the stripe's data, < k * chunk */
  uint64_t len;              /* bytes, so + len <= k * chunk */
};

/* A walk over a logical range, stripe by stripe:
 *   struct gr_walk w;  struct gr_span sp;
 *   gr_map_walk_init (&w, g, offset, len);
 *   while (gr_map_walk_next (&w, &sp)) ...
 * The range must lie inside the array. */
struct gr_walk {
  const struct gr_geom *g;
  uint64_t pos, end;
};
void gr_map_walk_init (struct gr_walk *w, const struct gr_geom *g,
                       uint64_t offset, uint64_t len);
/* The next stripe's part (true), or false at the end of the range. */
bool gr_map_walk_next (struct gr_walk *w, struct gr_span *sp);
/* Does the span cover its whole stripe? */
bool gr_map_span_whole (const struct gr_geom *g, const struct gr_span *sp);

/* The data chunks a span touches, first .. last (code indices). */
void gr_map_span_chunks (const struct gr_geom *g, const struct gr_span *sp,
                         int *first, int *last);
/* The bytes [*a, *b) of data chunk i (first <= i <= last) that a span
 * touches, and where byte *a is from the span's first byte. */
void gr_map_span_range (const struct gr_geom *g, const struct gr_span *sp,
                        int i, uint32_t *a, uint32_t *b, uint64_t *from);

/* Inverse map: for a byte at member_off on member, the stripe, code index
 * and chunk offset; *logical is the logical offset for a data index, or
 * UINT64_MAX for parity.  Returns 0, or -ERANGE if member_off is outside
 * the data area or member is out of range. */
int gr_map_inverse (const struct gr_geom *g, int member, uint64_t member_off,
                    uint64_t *stripe, int *index, uint32_t *chunk_off,
                    uint64_t *logical);

#ifdef __cplusplus
}
#endif

#endif /* GPURAID_RAIDMAP_H */
