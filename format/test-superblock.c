/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - unit test for superblock.c: crc32c known vector, encode /
 * decode round trip, and rejection of corrupt or invalid superblocks. */
#undef NDEBUG
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <isa-l/crc.h>

#include "format/format.h"
#include "tests/testkit.h"

static void
sample (struct gr_sb *sb)
{
  int i;

  memset (sb, 0, sizeof *sb);
  sb->version = GR_SB_VERSION;
  for (i = 0; i < 16; i++)
    sb->uuid[i] = (uint8_t) (0xa0 + i);
  sb->k = 4;
  sb->m = 2;
  sb->code = 2;
  sb->chunk = 65536;
  sb->index = 5;
  sb->flags = GR_SB_FLAG_DIRTY;
  sb->data_offset = 1048576;
  sb->data_size = 65536 * 100;
  sb->event = UINT64_C (0x0123456789abcdef);
  sb->ctime = 1700000000;
  sb->bitmap_region = 1024;
  gr_sb_failed_set (sb, 1);
  gr_sb_failed_set (sb, 5);
}

/* Re-encode after changing a field through a raw byte edit, fixing the
 * crc, so that only the field check can reject it. */
static int
decode_with_patch (const struct gr_sb *sb, size_t off, uint8_t val)
{
  uint8_t buf[GR_SB_SIZE];
  struct gr_sb out;
  uint32_t crc;

  gr_sb_encode (sb, buf);
  buf[off] = val;
  crc = gr_crc32c (0, buf, GR_SB_CRC_OFFSET);
  buf[GR_SB_CRC_OFFSET] = crc;
  buf[GR_SB_CRC_OFFSET + 1] = crc >> 8;
  buf[GR_SB_CRC_OFFSET + 2] = crc >> 16;
  buf[GR_SB_CRC_OFFSET + 3] = crc >> 24;
  return gr_sb_decode (buf, &out);
}

int
main (void)
{
  struct gr_sb sb, out, bad;
  uint8_t buf[GR_SB_SIZE], buf2[GR_SB_SIZE];
  char uuid[37];
  size_t i;

  /* crc32c known vectors. */
  CHECK (gr_crc32c (0, "123456789", 9) == 0xE3069283u);
  CHECK (gr_crc32c (0, "", 0) == 0);
  /* Chaining gives the same result as one call. */
  CHECK (gr_crc32c (gr_crc32c (0, "1234", 4), "56789", 5) == 0xE3069283u);
  memset (buf, 0, 32);
  CHECK (gr_crc32c (0, buf, 32) == 0x8A9136AAu); /* RFC 3720 B.4 */

  /* Round trip. */
  sample (&sb);
  CHECK (gr_sb_validate (&sb) == 0);
  gr_sb_encode (&sb, buf);
  CHECK (memcmp (buf, "GPURAID\0", 8) == 0);
  CHECK (buf[32] == 4 && buf[36] == 2 && buf[40] == 2);
  CHECK (buf[72] == 0xef && buf[79] == 0x01);   /* little-endian event */
  CHECK (gr_sb_decode (buf, &out) == 0);
  CHECK (out.version == sb.version);
  CHECK (memcmp (out.uuid, sb.uuid, 16) == 0);
  CHECK (out.k == 4 && out.m == 2 && out.code == 2);
  CHECK (out.chunk == 65536 && out.index == 5);
  CHECK (out.flags == GR_SB_FLAG_DIRTY);
  CHECK (out.data_offset == 1048576 && out.data_size == 65536 * 100);
  CHECK (out.event == sb.event && out.ctime == sb.ctime);
  CHECK (memcmp (out.failed, sb.failed, 32) == 0);
  CHECK (gr_sb_failed_test (&out, 1) && gr_sb_failed_test (&out, 5));
  CHECK (!gr_sb_failed_test (&out, 0) && !gr_sb_failed_test (&out, 2));
  gr_sb_encode (&out, buf2);
  CHECK (memcmp (buf, buf2, GR_SB_SIZE) == 0);

  /* Every single corrupted byte is rejected. */
  for (i = 0; i < GR_SB_SIZE; i++) {
    memcpy (buf2, buf, GR_SB_SIZE);
    buf2[i] ^= 0x10;
    if (i < 8)
      CHECK (gr_sb_decode (buf2, &out) == -ENOENT);
    else
      CHECK (gr_sb_decode (buf2, &out) == -EBADMSG);
  }

  /* All zeroes: not a member. */
  memset (buf2, 0, GR_SB_SIZE);
  CHECK (gr_sb_decode (buf2, &out) == -ENOENT);

  /* Bad version, with a correct crc. */
  CHECK (decode_with_patch (&sb, 8, 2) == -EPROTONOSUPPORT);
  CHECK (decode_with_patch (&sb, 8, 0) == -EPROTONOSUPPORT);
  /* Wrong superblock size field. */
  CHECK (decode_with_patch (&sb, 13, 0x20) == -EINVAL);
  /* Non-zero reserved byte. */
  CHECK (decode_with_patch (&sb, GR_SB_RESERVED_OFFSET, 1) == -EINVAL);
  CHECK (decode_with_patch (&sb, 4000, 1) == -EINVAL);
  /* k = 0, m = 0, code 3, chunk not a power of two, index >= n,
   * unknown flag, failed bit beyond n. */
  CHECK (decode_with_patch (&sb, 32, 0) == -EINVAL);
  CHECK (decode_with_patch (&sb, 36, 0) == -EINVAL);
  CHECK (decode_with_patch (&sb, 40, 3) == -EINVAL);
  CHECK (decode_with_patch (&sb, 44, 1) == -EINVAL);
  CHECK (decode_with_patch (&sb, 48, 6) == -EINVAL);
  CHECK (decode_with_patch (&sb, 52, 8) == -EINVAL);
  CHECK (decode_with_patch (&sb, 88, 0x40) == -EINVAL);
  /* Bitmap region not a power of two (1024 + 3). */
  CHECK (decode_with_patch (&sb, 120, 3) == -EINVAL);
  /* A scrub to go on from past the last stripe; one inside passes. */
  CHECK (decode_with_patch (&sb, 135, 1) == -EINVAL);
  CHECK (decode_with_patch (&sb, 128, 1) == 0);
  /* A rebuild: of members 1 and 4 at stripe 40 round-trips; of no
   * member, of one beyond k+m (6), past the last stripe, a set without
   * an id, the rebuilding flag on a member that is not rebuilt (sb is
   * index 5) or without a rebuild are refused; on member 5 itself it
   * passes. */
  bad = sb; bad.rebuild_id = 77; bad.rebuild_at = 40;
  gr_sb_rebuild_put (&bad, 1, true);
  gr_sb_rebuild_put (&bad, 4, true);
  gr_sb_encode (&bad, buf2);
  CHECK (gr_sb_decode (buf2, &out) == 0);
  CHECK (out.rebuild_id == 77 && gr_sb_rebuild_test (&out, 1) &&
         gr_sb_rebuild_test (&out, 4) && !gr_sb_rebuild_test (&out, 0) &&
         out.rebuild_at == 40);
  CHECK (decode_with_patch (&bad, 288, 1) == -EINVAL);
  bad.rebuild_at = 100;                         /* the end: done */
  CHECK (gr_sb_validate (&bad) == 0);
  bad.rebuild_at = 101;
  CHECK (gr_sb_validate (&bad) == -EINVAL);
  bad.rebuild_at = 0;
  gr_sb_rebuild_put (&bad, 6, true);
  CHECK (gr_sb_validate (&bad) == -EINVAL);
  gr_sb_rebuild_put (&bad, 6, false);
  gr_sb_rebuild_put (&bad, 1, false);
  gr_sb_rebuild_put (&bad, 4, false);
  CHECK (gr_sb_validate (&bad) == -EINVAL);     /* an id, no member */
  gr_sb_rebuild_put (&bad, 1, true);
  bad.flags = GR_SB_FLAG_REBUILDING;
  CHECK (gr_sb_validate (&bad) == -EINVAL);
  gr_sb_rebuild_put (&bad, 5, true);
  CHECK (gr_sb_validate (&bad) == 0);
  bad.rebuild_id = 0;
  CHECK (gr_sb_validate (&bad) == -EINVAL);
  bad = sb; bad.rebuild_at = 3;
  CHECK (gr_sb_validate (&bad) == -EINVAL);
  /* The degraded map's event (144) round-trips, never past the event;
   * the removed set (256) round-trips, within the failed set; a spare
   * (flag 0x20) is no replacement, a re-add (0x40) only one; the written
   * map's flag (0x10) passes. */
  bad = sb; bad.degraded_since = sb.event;
  gr_sb_failed_set (&bad, 3);
  gr_sb_removed_put (&bad, 3, true);
  gr_sb_encode (&bad, buf2);
  CHECK (buf2[144] == (uint8_t) sb.event && buf2[256] == 8);
  CHECK (gr_sb_decode (buf2, &out) == 0 && out.degraded_since == sb.event &&
         gr_sb_removed_test (&out, 3) && !gr_sb_removed_test (&out, 2));
  bad.degraded_since = sb.event + 1;
  CHECK (gr_sb_validate (&bad) == -EINVAL);
  bad.degraded_since = 0;
  gr_sb_removed_put (&bad, 2, true);            /* not failed */
  CHECK (gr_sb_validate (&bad) == -EINVAL);
  bad = sb; bad.flags = GR_SB_FLAG_WRITTEN | GR_SB_FLAG_SPARE;
  CHECK (gr_sb_validate (&bad) == 0);
  bad.flags = GR_SB_FLAG_READD;
  CHECK (gr_sb_validate (&bad) == -EINVAL);
  bad.rebuild_id = 77;
  gr_sb_rebuild_put (&bad, 5, true);
  bad.flags = GR_SB_FLAG_REBUILDING | GR_SB_FLAG_READD;
  CHECK (gr_sb_validate (&bad) == 0);
  bad.flags = GR_SB_FLAG_REBUILDING | GR_SB_FLAG_SPARE;
  CHECK (gr_sb_validate (&bad) == -EINVAL);
  CHECK (decode_with_patch (&sb, 52, 0x80) == -EINVAL);
  /* Valid edits pass: clear the dirty flag; dirty and journaled; dirty,
   * journaled and bitmap; region 1 stripe, 0 (unset). */
  CHECK (decode_with_patch (&sb, 52, 0) == 0);
  CHECK (decode_with_patch (&sb, 52, 3) == 0);
  CHECK (decode_with_patch (&sb, 52, 7) == 0);
  CHECK (decode_with_patch (&sb, 121, 0) == 0);
  bad = sb; bad.bitmap_region = 1;
  CHECK (gr_sb_validate (&bad) == 0);
  bad = sb; bad.bitmap_region = 0;
  CHECK (gr_sb_validate (&bad) == 0);
  /* Regions beyond what the bitmap holds. */
  bad = sb; bad.data_size = (uint64_t) 65536 * (GR_SB_BITMAP_BITS + 1);
  bad.bitmap_region = 1;
  CHECK (gr_sb_validate (&bad) == -EINVAL);
  bad.bitmap_region = 2;
  CHECK (gr_sb_validate (&bad) == 0);

  /* The region for a geometry: 64 MiB of a member by default, more when
   * the bits would not fit, at least one stripe. */
  CHECK (gr_sb_bitmap_region (65536, 100, 0) == 1024);
  CHECK (gr_sb_bitmap_region (4096, 100, 0) == 16384);
  CHECK (gr_sb_bitmap_region ((uint32_t) 1 << 27, 100, 0) == 1);
  CHECK (gr_sb_bitmap_region (65536, 100, 4096) == 1);
  CHECK (gr_sb_bitmap_region (65536, 100, 1 << 20) == 16);
  /* 16 TB members of 64 KiB chunks: 268435456 stripes. */
  CHECK (gr_sb_bitmap_region (65536, (uint64_t) 1 << 28, 0) == 1024);
  CHECK (gr_sb_bitmap_region (65536, (uint64_t) 1 << 28, 4096) == 1024);
  CHECK (gr_sb_bitmap_region (65536, (uint64_t) 1 << 30, 0) == 4096);

  /* validate() on its own. */
  bad = sb; bad.k = 200; bad.m = 57;            /* k + m = 257 */
  CHECK (gr_sb_validate (&bad) == -EINVAL);
  bad = sb; bad.k = 200; bad.m = 56; bad.index = 255;
  CHECK (gr_sb_validate (&bad) == 0);
  bad = sb; bad.chunk = 2048;
  CHECK (gr_sb_validate (&bad) == -EINVAL);
  bad = sb; bad.data_offset = 65536 + 4096;     /* not chunk aligned */
  CHECK (gr_sb_validate (&bad) == -EINVAL);
  bad = sb; bad.data_offset = 0;
  CHECK (gr_sb_validate (&bad) == -EINVAL);
  bad = sb; bad.data_size = 0;
  CHECK (gr_sb_validate (&bad) == -EINVAL);
  bad = sb; bad.data_size = 65536 + 1;
  CHECK (gr_sb_validate (&bad) == -EINVAL);
  bad = sb; bad.version = 7;
  CHECK (gr_sb_validate (&bad) == -EPROTONOSUPPORT);

  /* The checksum area: round trip at 192; a multiple of 4096 from the
   * journal's offset on, ending by the data offset (sb: 6553600 bytes of
   * data, 6400 bytes of checksums, 8192 with whole blocks). */
  CHECK (gr_cksum_layout_bytes (65536 * 100) == 8192);
  CHECK (gr_cksum_layout_bytes (4096 * 1024) == 4096);
  CHECK (gr_cksum_layout_bytes (4096 * 1025) == 8192);
  bad = sb; bad.cksum_offset = 1048576 - 8192;
  CHECK (gr_sb_validate (&bad) == 0);
  gr_sb_encode (&bad, buf2);
  CHECK (buf2[192] == 0 && buf2[193] == 0xe0 && buf2[194] == 0x0f);
  CHECK (gr_sb_decode (buf2, &out) == 0 && out.cksum_offset == 1048576 - 8192);
  CHECK (gr_sb_journal_end (&out) == 1048576 - 8192);
  CHECK (gr_sb_journal_end (&sb) == 1048576);
  bad.cksum_offset = 1048576 - 4096;            /* overlaps the data */
  CHECK (gr_sb_validate (&bad) == -EINVAL);
  bad.cksum_offset = 1048576 - 8192 - 512;      /* not a block */
  CHECK (gr_sb_validate (&bad) == -EINVAL);
  bad.cksum_offset = 4096;                      /* in the bitmap */
  CHECK (gr_sb_validate (&bad) == -EINVAL);
  /* The last scrub's record: round trip at 200; counts that nest; nothing
   * without an end time. */
  bad = sb;
  bad.last_scrub = (struct gr_sb_scrub) { .end = 1795000000, .secs = 12,
                                          .repair = 1, .checked = 100,
                                          .mismatched = 3, .repaired = 2,
                                          .cksum_repaired = 7,
                                          .cksum_unrecoverable = 1 };
  CHECK (gr_sb_validate (&bad) == 0);
  gr_sb_encode (&bad, buf2);
  CHECK (buf2[208] == 12 && buf2[212] == 1 && buf2[216] == 100 &&
         buf2[224] == 3 && buf2[232] == 2 && buf2[240] == 7 &&
         buf2[248] == 1);
  CHECK (gr_sb_decode (buf2, &out) == 0 &&
         memcmp (&out.last_scrub, &bad.last_scrub, sizeof out.last_scrub)
         == 0);
  bad.last_scrub.checked = 101;                 /* more than the stripes */
  CHECK (gr_sb_validate (&bad) == -EINVAL);
  bad.last_scrub.checked = 2;                   /* fewer than mismatched */
  CHECK (gr_sb_validate (&bad) == -EINVAL);
  bad.last_scrub.checked = 100;
  bad.last_scrub.repair = 2;
  CHECK (gr_sb_validate (&bad) == -EINVAL);
  bad.last_scrub.repair = 0;
  bad.last_scrub.end = 0;                       /* counts, no end time */
  CHECK (gr_sb_validate (&bad) == -EINVAL);

  /* A block's value: 0 for zeros, else its crc32c xor that of zeros. */
  {
    static uint8_t blk[GR_CKSUM_BLOCK];

    CHECK (gr_cksum_block (blk) == 0);
    blk[100] = 1;
    {
      static const uint8_t zeros[GR_CKSUM_BLOCK];

      CHECK (gr_cksum_block (blk) == (gr_crc32c (0, blk, sizeof blk) ^
                                      gr_crc32c (0, zeros, sizeof zeros)));
      CHECK (gr_cksum_block (blk) != 0);
    }
    /* ... which is the CRC without its inversions, the value the coding
     * computes with an encode (gf.h, gr_code_op's cksums), for any
     * block. */
    for (int t = 0; t < 64; t++) {
      for (size_t j = 0; j < sizeof blk; j++)
        blk[j] = (uint8_t) (j * 131 + (size_t) t * 7919 + (j >> 7) * t);
      CHECK (gr_cksum_block (blk) == crc32_iscsi (blk, sizeof blk, 0),
             "block %d", t);
    }
  }

  gr_sb_uuid_str (sb.uuid, uuid);
  CHECK (strcmp (uuid, "a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf") == 0);
  CHECK (strcmp (gr_sb_strerror (-EBADMSG), "superblock checksum mismatch")
         == 0);

  return test_done ("test-superblock");
}
