/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - unit test for metadata.c: the write-intent bitmap's size and
 * place, journal slots, and journal entries (encode / decode round trip,
 * every field where docs/format.md puts it, and rejection of entries
 * that are absent, inconsistent or corrupt). */
#undef NDEBUG
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/format.h"
#include "tests/testkit.h"

#define KiB 1024u
#define MiB (1024u * 1024u)

static void
test_bitmap (void)
{
  CHECK (GR_SB_BITMAP_BITS == 61440 * 8);
  CHECK (gr_bitmap_layout_regions (100, 1024) == 1);
  CHECK (gr_bitmap_layout_regions (2048, 1024) == 2);
  CHECK (gr_bitmap_layout_regions (2049, 1024) == 3);
  CHECK (gr_bitmap_layout_bytes (1) == 4096);
  CHECK (gr_bitmap_layout_bytes (4096 * 8) == 4096);
  CHECK (gr_bitmap_layout_bytes (4096 * 8 + 1) == 8192);
  CHECK (gr_bitmap_layout_bytes (GR_SB_BITMAP_BITS) == 61440);
  CHECK (gr_bitmap_layout_fits (61440, MiB));
  CHECK (!gr_bitmap_layout_fits (65536, MiB));
  CHECK (gr_bitmap_layout_fits (4096, 65536));
  CHECK (!gr_bitmap_layout_fits (4096, 32768));
}

/* The written and degraded maps after the bitmap's bytes: a share each
 * of what it leaves, in whole blocks, their region the smallest power of
 * two of stripes of at least 1 MiB of each member that fits; none where
 * nothing is left. */
static void
test_maps (void)
{
  struct gr_maps_layout l;

  CHECK (GR_MAPS_MIN_BYTES == MiB);
  /* 160 bitmap regions: a block of bitmap; 64 KiB chunks: 16 stripes a
   * map region, 10240 of them, a block a map. */
  gr_maps_layout (160 * 1024, 1024, 64 * KiB, MiB, &l);
  CHECK (l.kept && l.region == 16 && l.regions == 10240 && l.bytes == 4096);
  CHECK (l.written_off == 8192 && l.degraded_off == 12288);
  /* 300000 bitmap regions (4 KiB chunks): 37500 bytes of bitmap (10
   * blocks), 20480 left, two blocks a map; 256 stripes a map region. */
  gr_maps_layout (300000, 1, 4096, MiB, &l);
  CHECK (l.kept && l.region == 256 && l.regions == 1172);
  CHECK (l.bytes == 4096 && l.written_off == 4096 + 40960);
  CHECK (l.degraded_off + l.bytes <= 65536);
  /* The share too small for 1 MiB regions: coarser until it fits. */
  gr_maps_layout ((uint64_t) 13 * 4096 * 8 * 256, 256, 4096, MiB, &l);
  CHECK (l.kept && l.region == 4096 && l.regions == 26624 &&
         l.bytes == 4096);
  /* Chunks of more than 1 MiB: a stripe a region. */
  gr_maps_layout (1000, 64, 4 * MiB, 4 * MiB, &l);
  CHECK (l.kept && l.region == 1 && l.regions == 1000);
  /* A full bitmap leaves nothing; neither does a bitmap that does not
   * fit (a metadata area too small) or none. */
  gr_maps_layout (GR_SB_BITMAP_BITS, 1, 4096, MiB, &l);
  CHECK (!l.kept);
  gr_maps_layout (100, 1, 4096, 32768, &l);
  CHECK (!l.kept);
  gr_maps_layout (100, 0, 4096, MiB, &l);
  CHECK (!l.kept);
}

static void
test_slots (void)
{
  const size_t s42 = 4096 + 2 * 64 * KiB;

  CHECK (gr_journal_slot_size (4, 2, 64 * KiB) == s42);
  CHECK (gr_journal_slot_size (2, 4, 64 * KiB) == s42);
  CHECK (gr_journal_slot_count (MiB, s42) == (MiB - 65536) / s42);
  CHECK (gr_journal_slot_count (65536, s42) == 0);
  CHECK (gr_journal_slot_count (4096, s42) == 0);
  CHECK (gr_journal_slot_count ((uint64_t) 1 << 30, s42) ==
         GR_JOURNAL_MAX_SLOTS);
  CHECK (gr_journal_slot_offset (s42, 0) == 65536);
  CHECK (gr_journal_slot_offset (s42, 3) == 65536 + 3 * s42);
}

static uint32_t
le32 (const uint8_t *p)
{
  return p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16
    | (uint32_t) p[3] << 24;
}

static uint64_t
le64 (const uint8_t *p)
{
  return le32 (p) | (uint64_t) le32 (p + 4) << 32;
}

static void
test_entries (void)
{
  const size_t slot = gr_journal_slot_size (4, 3, 64 * KiB);
  struct gr_journal_entry h = { .seq = 0x0102030405060708,
                                .stripe = 77, .lo = 4096, .hi = 12288,
                                .nlost = 3, .lost = { 0, 2, 300 } };
  struct gr_journal_entry d;
  const size_t plen = 3 * 8192;
  uint8_t *e = malloc (slot);
  int i;

  CHECK (e != NULL);
  for (i = 0; i < 16; i++)
    h.uuid[i] = (uint8_t) (0xa0 + i);
  memset (e, 0x55, slot);
  test_fill (e + GR_JOURNAL_HDR, plen);
  gr_journal_entry_encode (&h, e);

  /* Where docs/format.md puts each field. */
  CHECK (memcmp (e, "GRJOURNL", 8) == 0);
  CHECK (memcmp (e + 8, h.uuid, 16) == 0);
  CHECK (le64 (e + 24) == h.seq);
  CHECK (le64 (e + 32) == 77);
  CHECK (le32 (e + 40) == 4096 && le32 (e + 44) == 12288);
  CHECK (le32 (e + 48) == 3 && le32 (e + 52) == plen);
  CHECK (e[56] == 0 && e[57] == 0 && e[58] == 2 && e[59] == 0);
  CHECK (e[60] == 300 % 256 && e[61] == 1);
  for (i = 62; i < GR_JOURNAL_HDR - 4; i++)
    if (e[i] != 0)
      break;
  CHECK (i == GR_JOURNAL_HDR - 4, "byte %d of the header not zero", i);
  CHECK (le32 (e + GR_JOURNAL_HDR - 4) ==
         gr_crc32c (gr_crc32c (0, e, GR_JOURNAL_HDR - 4),
                    e + GR_JOURNAL_HDR, plen));

  /* Round trip. */
  CHECK (gr_journal_entry_decode (e, slot, &d) == 0);
  CHECK (memcmp (d.uuid, h.uuid, 16) == 0 && d.seq == h.seq &&
         d.stripe == 77 && d.lo == 4096 && d.hi == 12288 && d.nlost == 3);
  CHECK (d.lost[0] == 0 && d.lost[1] == 2 && d.lost[2] == 300);
  CHECK (gr_journal_entry_decode (e, GR_JOURNAL_HDR + plen, &d) == 0);

  /* Absent, inconsistent, corrupt. */
  CHECK (gr_journal_entry_decode (e, GR_JOURNAL_HDR + plen - 1, &d)
         == -EINVAL);                   /* payload past what was read */
  CHECK (gr_journal_entry_decode (e, GR_JOURNAL_HDR - 1, &d) == -ENOENT);
  e[GR_JOURNAL_HDR + 100] ^= 1;
  CHECK (gr_journal_entry_decode (e, slot, &d) == -EBADMSG);
  e[GR_JOURNAL_HDR + 100] ^= 1;
  e[30] ^= 1;                           /* seq */
  CHECK (gr_journal_entry_decode (e, slot, &d) == -EBADMSG);
  e[30] ^= 1;
  e[0] = 'X';
  CHECK (gr_journal_entry_decode (e, slot, &d) == -ENOENT);
  e[0] = 'G';
  e[52] ^= 1;                           /* payload length */
  CHECK (gr_journal_entry_decode (e, slot, &d) == -EINVAL);
  e[52] ^= 1;
  memcpy (e + 40, e + 44, 4);           /* lo == hi */
  CHECK (gr_journal_entry_decode (e, slot, &d) == -EINVAL);
  gr_journal_entry_encode (&h, e);
  CHECK (gr_journal_entry_decode (e, slot, &d) == 0);
  e[48] = 1; e[49] = 1;                 /* 257 lost chunks */
  CHECK (gr_journal_entry_decode (e, slot, &d) == -EINVAL);
  memset (e, 0, slot);                  /* a zeroed slot */
  CHECK (gr_journal_entry_decode (e, slot, &d) == -ENOENT);

  /* No lost data chunk (only parity lost): an entry with no payload. */
  h.nlost = 0;
  gr_journal_entry_encode (&h, e);
  CHECK (gr_journal_entry_decode (e, GR_JOURNAL_HDR, &d) == 0 &&
         d.nlost == 0);
  free (e);
}

int
main (void)
{
  test_seed ("test-metadata");
  test_bitmap ();
  test_maps ();
  test_slots ();
  test_entries ();
  return test_done ("test-metadata");
}
