/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - member superblock: encode, decode, validate (pure functions).
 *
 * The superblock is the first GR_SB_SIZE bytes of every member.  All
 * integers are little-endian.  See docs/format.md for the layout:
 *
 *   off  size  field
 *     0     8  magic "GPURAID\0"
 *     8     4  format version (1)
 *    12     4  superblock size (4096)
 *    16    16  array UUID
 *    32     4  k (data chunks per stripe)
 *    36     4  m (parity chunks per stripe)
 *    40     4  code (1 = RS, 2 = CRS)
 *    44     4  chunk size in bytes
 *    48     4  member index of this member (0 .. k+m-1)
 *    52     4  state flags (bit 0: dirty, 1: journaled, 2: bitmap)
 *    56     8  data offset (bytes)
 *    64     8  data size per member (bytes)
 *    72     8  event counter
 *    80     8  creation time (seconds since the epoch, UTC)
 *    88    32  failed-member bitmap (bit i of byte i/8 = member index i)
 *   120     8  stripes per write-intent bitmap region (a power of two;
 *              0 in superblocks of writers before the bitmap)
 *   128     8  stripe a stopped scrub goes on from (0: none)
 *   136     8  rebuild id: a replacement is being rebuilt (0: none)
 *   144     4  the member it replaces
 *   148     4  reserved, zero
 *   152     8  rebuild checkpoint: every stripe below it is rebuilt and
 *              synced on the replacement
 *   160  3932  reserved, zero
 *  4092     4  crc32c of bytes 0..4091
 *
 * Nothing here does I/O, prints or allocates.
 */
#ifndef GPURAID_SUPERBLOCK_H
#define GPURAID_SUPERBLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GR_SB_SIZE 4096
#define GR_SB_VERSION 1
#define GR_SB_MAGIC "GPURAID\0"         /* 8 bytes, NUL included */
#define GR_SB_FLAG_DIRTY 0x1u
/* Dirty, and every write since was journaled (journal.h): a crash is
 * repaired by replaying the journal, degraded or not. */
#define GR_SB_FLAG_JOURNALED 0x2u
/* Dirty, and the write-intent bitmap (bitmap.h) was kept on every live
 * member since before the first write: after a crash only the regions
 * whose bit is set need a resync. */
#define GR_SB_FLAG_BITMAP 0x4u
/* On a replacement's own superblock only: it is being rebuilt (the
 * rebuild named by rebuild_id, recorded on the array's members with its
 * checkpoint) and is no member until that rebuild ends. */
#define GR_SB_FLAG_REBUILDING 0x8u
#define GR_SB_FLAGS_KNOWN (GR_SB_FLAG_DIRTY | GR_SB_FLAG_JOURNALED | \
                           GR_SB_FLAG_BITMAP | GR_SB_FLAG_REBUILDING)
#define GR_SB_MAX_MEMBERS 256
#define GR_SB_CRC_OFFSET (GR_SB_SIZE - 4)
#define GR_SB_RESERVED_OFFSET 192
/* The write-intent bitmap (bitmap.h) holds at most this many regions. */
#define GR_SB_BITMAP_BITS (61440 * 8)

struct gr_sb {
  uint32_t version;
  uint8_t uuid[16];
  uint32_t k, m;
  uint32_t code;                /* enum gr_code: 1 RS, 2 CRS */
  uint32_t chunk;
  uint32_t index;               /* this member's index */
  uint32_t flags;               /* GR_SB_FLAG_* */
  uint64_t data_offset;
  uint64_t data_size;           /* per member, a multiple of chunk */
  uint64_t event;
  uint64_t ctime;
  uint8_t failed[GR_SB_MAX_MEMBERS / 8];
  uint64_t bitmap_region;       /* stripes per bitmap region, 0: unset */
  uint64_t scrub_at;            /* a stopped scrub's next stripe, 0: none */
  uint64_t rebuild_id;          /* a rebuild in progress, 0: none (the
                                 * event of the update that began it) */
  uint64_t rebuild_at;          /* its checkpoint (a stripe) */
  uint8_t rebuild_set[GR_SB_MAX_MEMBERS / 8];   /* the members it
                                 * rebuilds (those still failed: in
                                 * progress; live: done) */
};

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the iSCSI CRC,
 * computed by ISA-L (crc32_iscsi).
 * Start with crc = 0; chain by passing the previous result.
 * gr_crc32c (0, "123456789", 9) == 0xE3069283. */
uint32_t gr_crc32c (uint32_t crc, const void *buf, size_t len);

/* Check the fields of sb: 0 or -EINVAL (k < 1, m < 1, k+m > 256, unknown
 * code, chunk not a power of two >= 4096, index >= k+m, unknown flags,
 * data offset below GR_SB_SIZE or not a multiple of 4096 and of chunk,
 * data size zero or not a multiple of chunk, failed bits set beyond
 * k+m, bitmap region not 0 or a power of two, or too small for the
 * bitmap to hold every region, scrub stripe past the last stripe, a
 * rebuild of no member, of members beyond k+m or past the last stripe,
 * the rebuilding flag without a rebuild of this member).  -EPROTONOSUPPORT if version != GR_SB_VERSION. */
int gr_sb_validate (const struct gr_sb *sb);

/* Stripes per write-intent bitmap region for chunk-byte chunks, stripes
 * stripes and want bytes of each member per region (0: 64 MiB): the
 * smallest power of two of at least want / chunk stripes that keeps the
 * regions within GR_SB_BITMAP_BITS. */
uint64_t gr_sb_bitmap_region (uint32_t chunk, uint64_t stripes,
                              uint64_t want);

/* Write sb into buf (GR_SB_SIZE bytes), reserved bytes zero, crc last.
 * Does not validate. */
void gr_sb_encode (const struct gr_sb *sb, uint8_t *buf);

/* Parse buf (GR_SB_SIZE bytes) into sb.  Returns 0, or
 *   -ENOENT           no gpuraid magic (not a member)
 *   -EBADMSG          crc32c mismatch (corrupt superblock)
 *   -EPROTONOSUPPORT  unsupported format version
 *   -EINVAL           invalid field or non-zero reserved bytes
 * sb is only meaningful when 0 is returned. */
int gr_sb_decode (const uint8_t *buf, struct gr_sb *sb);

/* A short text for a gr_sb_decode error. */
const char *gr_sb_strerror (int err);

/* Format a UUID as 8-4-4-4-12 hex; out must hold 37 bytes. */
void gr_sb_uuid_str (const uint8_t *uuid, char *out);

static inline bool
gr_sb_failed_test (const struct gr_sb *sb, int i)
{
  return (sb->failed[i / 8] >> (i % 8)) & 1;
}

static inline void
gr_sb_failed_set (struct gr_sb *sb, int i)
{
  sb->failed[i / 8] |= (uint8_t) (1u << (i % 8));
}

static inline bool
gr_sb_rebuild_test (const struct gr_sb *sb, int i)
{
  return (sb->rebuild_set[i / 8] >> (i % 8)) & 1;
}

static inline void
gr_sb_rebuild_put (struct gr_sb *sb, int i, bool in)
{
  if (in)
    sb->rebuild_set[i / 8] |= (uint8_t) (1u << (i % 8));
  else
    sb->rebuild_set[i / 8] &= (uint8_t) ~(1u << (i % 8));
}

#endif /* GPURAID_SUPERBLOCK_H */
