/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the on-disk format library (format/, libgrformat.a): the
 * member superblock (encode, decode, validate), the layout of the
 * metadata area (the write-intent bitmap, journal entries), and the
 * assembly decision made from the superblocks read.  Its one public
 * header; the files share format-internal.h.
 *
 * A library (STYLE 3.4): pure functions, no I/O, no locks, no nbdkit, no
 * printing; errors are -errno or an outcome with a line of text.  The
 * plugin and gpuraidctl link it.  docs/format.md has the layout and the
 * arguments.
 *
 * --- the superblock ----------------------------------------------------
 *
 * The superblock is the first GR_SB_SIZE bytes of every member.  All
 * integers are little-endian:
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
 *    52     4  state flags (bit 0: dirty, 1: journaled, 2: bitmap,
 *              3: rebuilding, 4: written map, 5: spare, 6: re-add)
 *    56     8  data offset (bytes)
 *    64     8  data size per member (bytes)
 *    72     8  event counter
 *    80     8  creation time (seconds since the epoch, UTC)
 *    88    32  failed-member bitmap (bit i of byte i/8 = member index i)
 *   120     8  stripes per write-intent bitmap region (a power of two;
 *              0 in superblocks of writers before the bitmap)
 *   128     8  stripe a stopped scrub goes on from (0: none)
 *   136     8  rebuild id: a rebuild is recorded (0: none)
 *   144     8  degraded since: the event from which on the degraded
 *              map marks every region written (0: not kept)
 *   152     8  rebuild checkpoint: every stripe below it is rebuilt and
 *              synced on the replacements
 *   160    32  rebuilt set (bit i of byte i/8 = member index i)
 *   192     8  checksum area offset: where each member's block checksums
 *              start (0: the array keeps none; see "the checksum area")
 *   200    56  the last scrub that ran to its end (struct gr_sb_scrub):
 *              200 end time (seconds since the epoch; 0: none), 208
 *              seconds it took, 212 1 if --repair, 216 stripes checked,
 *              224 of those not consistent, 232 chunks rewritten where
 *              located, 240 blocks that failed their checksums and were
 *              rebuilt, 248 such blocks past repair
 *   256    32  removed set: members failed by the operator (a subset
 *              of the failed set), not re-added at a start
 *   288  3804  reserved, zero
 *  4092     4  crc32c of bytes 0..4091
 */
#ifndef GPURAID_FORMAT_H
#define GPURAID_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gf/gf.h"
#include "raidmap/raidmap.h"

#define GR_SB_SIZE 4096
/* A superblock's bytes in memory, aligned for members opened with
 * O_DIRECT (a buffer that is not goes through storage's bounce buffer). */
typedef uint8_t gr_sb_buf[GR_SB_SIZE] __attribute__ ((aligned (4096)));
_Static_assert (_Alignof (gr_sb_buf) == 4096, "gr_sb_buf is page-aligned");
#define GR_SB_VERSION 1
#define GR_SB_MAGIC "GPURAID\0"         /* 8 bytes, NUL included */
#define GR_SB_FLAG_DIRTY 0x1u
/* Dirty, and every write since was journaled (the journal below): a
 * crash is repaired by replaying the journal, degraded or not. */
#define GR_SB_FLAG_JOURNALED 0x2u
/* Dirty, and the write-intent bitmap (below) was kept on every live
 * member since before the first write: after a crash only the regions
 * whose bit is set need a resync. */
#define GR_SB_FLAG_BITMAP 0x4u
/* On a replacement's own superblock only: it is being rebuilt (the
 * rebuild named by rebuild_id, recorded on the array's members with its
 * checkpoint) and is no member until that rebuild ends. */
#define GR_SB_FLAG_REBUILDING 0x8u
/* The written map (below) is kept: every region written since the array
 * was created has its bit set on every live member. */
#define GR_SB_FLAG_WRITTEN 0x10u
/* Only on a hot spare's own superblock: it is this array's spare (its
 * index, event and the rest of the array's fields say nothing), no
 * member.  Never with REBUILDING. */
#define GR_SB_FLAG_SPARE 0x20u
/* Only with REBUILDING: the replacement is the member itself, back (a
 * re-add): its rebuild rebuilds only the regions the degraded map marks
 * and keeps the rest as it is. */
#define GR_SB_FLAG_READD 0x40u
#define GR_SB_FLAGS_KNOWN (GR_SB_FLAG_DIRTY | GR_SB_FLAG_JOURNALED | \
                           GR_SB_FLAG_BITMAP | GR_SB_FLAG_REBUILDING | \
                           GR_SB_FLAG_WRITTEN | GR_SB_FLAG_SPARE | \
                           GR_SB_FLAG_READD)
#define GR_SB_MAX_MEMBERS 256
#define GR_SB_CRC_OFFSET (GR_SB_SIZE - 4)
#define GR_SB_RESERVED_OFFSET 288
/* The write-intent bitmap holds at most this many regions: as many bits
 * as there are bytes from its offset to the journal's (below). */
#define GR_SB_BITMAP_BITS ((GR_JOURNAL_OFFSET - GR_BITMAP_OFFSET) * 8)

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
  uint64_t degraded_since;      /* the degraded map marks every region
                                 * written from this event on; 0: none */
  uint64_t rebuild_at;          /* its checkpoint (a stripe) */
  uint8_t rebuild_set[GR_SB_MAX_MEMBERS / 8];   /* the members it
                                 * rebuilds (those still failed: in
                                 * progress; live: done) */
  uint64_t cksum_offset;        /* the checksum area, 0: none */
  struct gr_sb_scrub {          /* the last scrub that ran to its end */
    uint64_t end;               /* seconds since the epoch, 0: none */
    uint32_t secs, repair;
    uint64_t checked, mismatched, repaired, cksum_repaired,
      cksum_unrecoverable;
  } last_scrub;
  uint8_t removed[GR_SB_MAX_MEMBERS / 8];       /* failed by the
                                 * operator: not re-added at a start */
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
 * the rebuilding flag without a rebuild of this member, a last scrub
 * record with counts that do not nest (mismatched <= checked <= stripes,
 * repaired <= mismatched) or fields without an end time, a checksum area
 * not a multiple of 4096, below the journal's offset or not ending by
 * the data offset).  -EPROTONOSUPPORT if version != GR_SB_VERSION. */
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
/* Parse one so formatted (uuid=, gpuraidctl); false if s is not one. */
bool gr_sb_uuid_parse (const char *s, uint8_t *uuid);

/* The superblock a hot spare of the array (whose superblock is array)
 * carries: the array's, flag GR_SB_FLAG_SPARE alone, index 0, no
 * rebuild; it makes the spare found again by a scan, never a member. */
void gr_sb_spare (const struct gr_sb *array, struct gr_sb *out);

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
gr_sb_removed_test (const struct gr_sb *sb, int i)
{
  return (sb->removed[i / 8] >> (i % 8)) & 1;
}

static inline void
gr_sb_removed_put (struct gr_sb *sb, int i, bool in)
{
  if (in)
    sb->removed[i / 8] |= (uint8_t) (1u << (i % 8));
  else
    sb->removed[i / 8] &= (uint8_t) ~(1u << (i % 8));
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

/* --- the metadata area (metadata.c) -------------------------------------
 *
 * Between the superblock and the data (data_offset, at least
 * GR_MIN_DATA_OFFSET at creation), on every member:
 *
 *      off  what
 *        0  the superblock (GR_SB_SIZE bytes)
 *     4096  the write-intent bitmap: one bit per region of bitmap_region
 *           stripes (region r: byte r / 8, bit r % 8), set while the
 *           region may hold a stripe whose parity misses its data;
 *           whole 4096-byte blocks, kept only where they end by 65536
 *    65536  the journal of a degraded array's writes: slots of
 *           gr_journal_slot_size bytes, up to GR_JOURNAL_MAX_SLOTS of
 *           them before data_offset; slot s mod nslots holds the latest
 *           entry of a write to stripe s
 *
 * A journal entry is a GR_JOURNAL_HDR-byte header and its payload:
 *
 *      off  size  field
 *        0     8  magic "GRJOURNL"
 *        8    16  array UUID
 *       24     8  sequence number (grows within a session)
 *       32     8  stripe
 *       40     4  lo, 44 4 hi (the coding range inside the chunk)
 *       48     4  number of lost data chunks journaled (nlost)
 *       52     4  payload length (nlost * (hi - lo))
 *       56  2*nlost  their code indices
 *     4092     4  crc32c of bytes 0..4091 and of the payload
 *   then the payload: each lost chunk's bytes [lo, hi), in that order.
 *
 * docs/format.md ("The write-intent bitmap", "The journal") has the
 * arguments.  The plugin's bitmap.c and journal.c keep them at run
 * time. */

/* --- the checksum area ---
 *
 * An array with integrity (cksum_offset != 0) keeps a CRC-32C of every
 * 4096-byte block of every member's data area, data and parity alike, on
 * that member: block b (member byte data_offset + b * 4096) has the 4
 * bytes at cksum_offset + 4 * b, little-endian.  The value kept is
 * gr_cksum_block's: the block's CRC-32C xor that of a block of zeros,
 * so that a zeroed (new or punched) area is correct without being
 * written.  The journal's slots end at cksum_offset (instead of
 * data_offset); the area is gr_cksum_layout_bytes long and ends by
 * data_offset.  Written lazily, before a bitmap region's bit is cleared
 * (docs/format.md, "Checksums"). */

#define GR_BITMAP_OFFSET 4096
#define GR_JOURNAL_OFFSET 65536
#define GR_JOURNAL_HDR 4096             /* an entry's header */
#define GR_JOURNAL_MAGIC "GRJOURNL"     /* 8 bytes */
#define GR_JOURNAL_MAX_SLOTS 64
#define GR_JOURNAL_MIN_SLOTS 4          /* room made for at creation */

/* The regions of the bitmap of an array of stripes stripes, region
 * stripes a region (the superblock's bitmap_region). */
uint64_t gr_bitmap_layout_regions (uint64_t stripes, uint64_t region);
/* The bytes it takes on a member: whole 4096-byte blocks. */
size_t gr_bitmap_layout_bytes (uint64_t regions);
/* Does the metadata area of an array whose data starts at data_offset
 * hold bytes of bitmap?  (Else the array keeps none.) */
bool gr_bitmap_layout_fits (size_t bytes, uint64_t data_offset);

/* The written map and the degraded map, after the write-intent bitmap's
 * bytes in the same area (docs/format.md, "The written and degraded
 * maps"): each a bit per map region of `region` stripes (the smallest
 * power of two of stripes that holds GR_MAPS_MIN_BYTES of each member
 * and fits the map in its share of what the bitmap leaves, whole
 * 4096-byte blocks), the written map first.  kept is false where no
 * share is left: the array keeps neither. */
#define GR_MAPS_MIN_BYTES (UINT64_C (1) << 20)
struct gr_maps_layout {
  bool kept;
  uint64_t region;              /* stripes a map region */
  uint64_t regions;
  size_t bytes;                 /* of each map */
  uint64_t written_off, degraded_off;   /* member byte offsets */
};
void gr_maps_layout (uint64_t stripes, uint64_t bitmap_region,
                     uint32_t chunk, uint64_t data_offset,
                     struct gr_maps_layout *out);

#define GR_CKSUM_BLOCK 4096
/* The bytes of the checksum area for data_size bytes of data: whole
 * 4096-byte blocks. */
uint64_t gr_cksum_layout_bytes (uint64_t data_size);
/* The value kept for a block of GR_CKSUM_BLOCK bytes (0 for zeros). */
uint32_t gr_cksum_block (const void *block);
/* Where the journal's slots end on a member: the checksum area, or the
 * data. */
uint64_t gr_sb_journal_end (const struct gr_sb *sb);

/* The bytes of a journal slot of a k+m array of chunk-byte chunks: a
 * header and the lost data chunks of a stripe, at most min (k, m). */
size_t gr_journal_slot_size (uint32_t k, uint32_t m, uint32_t chunk);
/* How many slots of slot_size bytes fit before end (gr_sb_journal_end)
 * (0: the array keeps no journal). */
unsigned gr_journal_slot_count (uint64_t end, size_t slot_size);
/* Where slot q starts on a member. */
uint64_t gr_journal_slot_offset (size_t slot_size, unsigned q);

/* A journal entry's header. */
struct gr_journal_entry {
  uint8_t uuid[16];
  uint64_t seq;
  uint64_t stripe;
  uint32_t lo, hi;              /* the coding range inside the chunk */
  uint32_t nlost;               /* lost data chunks journaled */
  uint16_t lost[GR_SB_MAX_MEMBERS];     /* their code indices */
};

/* Write h's header into e (GR_JOURNAL_HDR bytes, zero where unused) and
 * its crc, which covers the payload the caller has put at
 * e + GR_JOURNAL_HDR (h->nlost * (h->hi - h->lo) bytes).  h->nlost is
 * at most GR_SB_MAX_MEMBERS. */
void gr_journal_entry_encode (const struct gr_journal_entry *h,
                              uint8_t *e);
/* Parse the entry at e, of which len bytes were read (a slot); its
 * payload is at e + GR_JOURNAL_HDR.  0, or
 *   -ENOENT   no entry (no journal magic)
 *   -EINVAL   fields that do not agree (lo >= hi, too many lost chunks,
 *             payload length, a payload past len)
 *   -EBADMSG  crc32c mismatch
 * Whether it belongs to the array (UUID, stripe, chunk, k) is the
 * caller's to check. */
int gr_journal_entry_decode (const uint8_t *e, size_t len,
                             struct gr_journal_entry *h);

/* --- the assembly decision (assemble.c) ---------------------------------
 *
 * From what was read off each member= path (struct gr_probe: opened or
 * not, size, superblock), decide what the array is: for create=true the
 * new superblock and geometry, or that the members are refused; to
 * assemble, which superblock is authoritative, which member goes in
 * which slot, which slots are missing, stale or marked failed (and why),
 * whether the array can start, and whether it needs a resync
 * (docs/format.md, "Assembling an array").  No I/O, no logging: the
 * plugin (array.c) and gpuraidctl do the I/O and say what this decided;
 * test-assemble checks it. */

#define GR_MIN_DATA_OFFSET (1024 * 1024)

/* One member= path, as read. */
struct gr_probe {
  const char *path;
  int open_errno;               /* 0: opened; else missing, with the reason
                                 * it could not be opened or read */
  char open_why[160];           /* that reason in words, if not just
                                 * strerror (a remote member's: libnbd's) */
  uint64_t size;
  int sb_status;                /* gr_sb_decode's result; -ENOENT: none */
  struct gr_sb sb;
};

/* What the command line says of the geometry (0 or -1: not given). */
struct gr_assemble_args {
  int m;                        /* -1: not given */
  uint32_t chunk;               /* 0: not given */
  int code;                     /* 0: not given */
  bool force;                   /* create over existing superblocks */
  bool salvage;                 /* bring a failed array up read-only */
  uint64_t bitmap_chunk;        /* create: member bytes a bitmap bit
                                 * covers at least; 0: the default */
  enum gr_integrity_arg {
    GR_INTEGRITY_DEFAULT,       /* not given: on at create, either at
                                 * assembly */
    GR_INTEGRITY_ON,            /* checksums (must match at assembly) */
    GR_INTEGRITY_OFF,
  } integrity;
};

enum gr_slot_state {
  GR_SLOT_ACTIVE,
  GR_SLOT_MISSING,              /* no member with this index */
  GR_SLOT_STALE,                /* its event is 2 or more behind the
                                 * array's: an old copy of the member */
  GR_SLOT_FAILED,               /* marked failed in the array */
  GR_SLOT_SALVAGED,             /* marked failed or stale, but present and
                                 * used, read-only (salvage) */
  GR_SLOT_REBUILDING,           /* the replacement of the rebuild the
                                 * array records: its rebuild resumes from
                                 * the checkpoint (sb.rebuild_at) */
  GR_SLOT_READD,                /* marked failed, but it left while the
                                 * degraded map was kept
                                 * (gr_readd_covered): re-added, the
                                 * regions the map marks rebuilt */
};

enum gr_resync_need {
  GR_RESYNC_NONE,               /* shut down cleanly */
  GR_RESYNC_FULL,               /* dirty, every member: resync (of the
                                 * regions in the bitmap, if kept) */
  GR_RESYNC_DEGRADED,           /* dirty and degraded: replay the journal;
                                 * consistent if it was journaled
                                 * (GR_SB_FLAG_JOURNALED), else warn and
                                 * keep the dirty flag */
};

enum gr_assembly_outcome { GR_ASSEMBLY_OK, GR_ASSEMBLY_REFUSED };

struct gr_assembly {
  enum gr_assembly_outcome outcome;
  char error[1024];             /* when refused: one line */
  struct gr_sb sb;              /* the array's superblock (create: without
                                 * UUID and time, event 0) */
  struct gr_geom geom;
  int n;
  int nfailed;                  /* slots not active */
  int slot[GR_MAX_MEMBERS];     /* the probe in each slot, or -1 */
  enum gr_slot_state state[GR_MAX_MEMBERS];
  const char *path[GR_MAX_MEMBERS];     /* a path for the slot, or NULL */
  char why[GR_MAX_MEMBERS][512];        /* why a slot is not active */
  bool reordered;               /* members not in index order */
  enum gr_resync_need resync;
  bool bitmap_kept;             /* resync: the newest dirty superblock
                                 * says the write-intent bitmap was kept
                                 * (GR_SB_FLAG_BITMAP) */
  bool read_only;               /* salvage: nothing may be written */
  bool salvaged;                /* members marked failed brought back */
  char warning[2048];           /* "" or one line for the operator: the
                                 * slots not active, paths not used */
  char copies[512];             /* other copies of members, left out */
};

/* Does the array's degraded map (array: its superblock) cover member, the
 * superblock of one of its members that is marked failed: did it leave
 * while the map was kept (its event at least degraded_since - 1)?  Then
 * re-adding it rebuilds only the regions the map marks; else it needs a
 * full rebuild. */
bool gr_readd_covered (const struct gr_sb *array, const struct gr_sb *member);

/* create=true over probes p[0..np-1]: member i of the new array is p[i];
 * m parity members. */
void gr_assemble_create (const struct gr_probe *p, int np,
                         const struct gr_assemble_args *args,
                         struct gr_assembly *a);

/* Assemble an existing array from probes p[0..np-1].  More than m
 * members missing, stale or failed: refused ("the array has failed"),
 * unless args->salvage, which brings the present members marked failed
 * or stale back, read-only, if that leaves at most m missing. */
void gr_assemble (const struct gr_probe *p, int np,
                  const struct gr_assemble_args *args, struct gr_assembly *a);

#endif /* GPURAID_FORMAT_H */
