/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the layout of the metadata area: the write-intent bitmap's
 * place and size, journal slots and entries.  See format.h. */
#include <errno.h>
#include <string.h>

#include "format-internal.h"

uint64_t
gr_bitmap_layout_regions (uint64_t stripes, uint64_t region)
{
  return (stripes + region - 1) / region;
}

size_t
gr_bitmap_layout_bytes (uint64_t regions)
{
  return ((regions + 7) / 8 + 4095) / 4096 * 4096;
}

bool
gr_bitmap_layout_fits (size_t bytes, uint64_t data_offset)
{
  return GR_BITMAP_OFFSET + bytes <= GR_JOURNAL_OFFSET &&
    GR_JOURNAL_OFFSET <= data_offset;
}

void
gr_maps_layout (uint64_t stripes, uint64_t bitmap_region, uint32_t chunk,
                uint64_t data_offset, struct gr_maps_layout *out)
{
  const size_t room = GR_JOURNAL_OFFSET - GR_BITMAP_OFFSET;
  size_t bits, share;

  memset (out, 0, sizeof *out);
  if (bitmap_region == 0)
    return;
  bits = gr_bitmap_layout_bytes (gr_bitmap_layout_regions (stripes,
                                                           bitmap_region));
  if (!gr_bitmap_layout_fits (bits, data_offset))
    return;
  share = (room - bits) / 2 / 4096 * 4096;
  if (share == 0)
    return;
  out->region = 1;
  while (out->region * chunk < GR_MAPS_MIN_BYTES ||
         gr_bitmap_layout_regions (stripes, out->region) > share * 8)
    out->region *= 2;
  out->regions = gr_bitmap_layout_regions (stripes, out->region);
  out->bytes = gr_bitmap_layout_bytes (out->regions);
  out->written_off = GR_BITMAP_OFFSET + bits;
  out->degraded_off = out->written_off + out->bytes;
  out->kept = true;
}

size_t
gr_journal_slot_size (uint32_t k, uint32_t m, uint32_t chunk)
{
  return GR_JOURNAL_HDR + (size_t) (m < k ? m : k) * chunk;
}

unsigned
gr_journal_slot_count (uint64_t end, size_t slot_size)
{
  const uint64_t area = end > GR_JOURNAL_OFFSET ? end - GR_JOURNAL_OFFSET : 0;

  return area / slot_size > GR_JOURNAL_MAX_SLOTS ? GR_JOURNAL_MAX_SLOTS
    : (unsigned) (area / slot_size);
}

uint64_t
gr_sb_journal_end (const struct gr_sb *sb)
{
  return sb->cksum_offset ? sb->cksum_offset : sb->data_offset;
}

uint64_t
gr_journal_slot_offset (size_t slot_size, unsigned q)
{
  return GR_JOURNAL_OFFSET + (uint64_t) q * slot_size;
}

/* The crc of entry e: its header (but the crc) and payload bytes of
 * payload. */
static uint32_t
entry_crc (const uint8_t *e, size_t payload)
{
  return gr_crc32c (gr_crc32c (0, e, GR_JOURNAL_HDR - 4),
                    e + GR_JOURNAL_HDR, payload);
}

void
gr_journal_entry_encode (const struct gr_journal_entry *h, uint8_t *e)
{
  const size_t payload = (size_t) h->nlost * (h->hi - h->lo);

  memset (e, 0, GR_JOURNAL_HDR);
  memcpy (e, GR_JOURNAL_MAGIC, 8);
  memcpy (e + 8, h->uuid, 16);
  gr_le_put64 (e + 24, h->seq);
  gr_le_put64 (e + 32, h->stripe);
  gr_le_put32 (e + 40, h->lo);
  gr_le_put32 (e + 44, h->hi);
  gr_le_put32 (e + 48, h->nlost);
  gr_le_put32 (e + 52, (uint32_t) payload);
  for (uint32_t x = 0; x < h->nlost; x++) {
    e[56 + 2 * x] = (uint8_t) h->lost[x];
    e[57 + 2 * x] = (uint8_t) (h->lost[x] >> 8);
  }
  gr_le_put32 (e + GR_JOURNAL_HDR - 4, entry_crc (e, payload));
}

int
gr_journal_entry_decode (const uint8_t *e, size_t len,
                         struct gr_journal_entry *h)
{
  uint64_t payload;

  if (len < GR_JOURNAL_HDR || memcmp (e, GR_JOURNAL_MAGIC, 8) != 0)
    return -ENOENT;
  memset (h, 0, sizeof *h);
  memcpy (h->uuid, e + 8, 16);
  h->seq = gr_le_get64 (e + 24);
  h->stripe = gr_le_get64 (e + 32);
  h->lo = gr_le_get32 (e + 40);
  h->hi = gr_le_get32 (e + 44);
  h->nlost = gr_le_get32 (e + 48);
  payload = gr_le_get32 (e + 52);
  if (h->lo >= h->hi || h->nlost > GR_SB_MAX_MEMBERS ||
      payload != (uint64_t) h->nlost * (h->hi - h->lo) ||
      payload > len - GR_JOURNAL_HDR)
    return -EINVAL;
  for (uint32_t x = 0; x < h->nlost; x++)
    h->lost[x] = (uint16_t) (e[56 + 2 * x] | e[57 + 2 * x] << 8);
  if (gr_le_get32 (e + GR_JOURNAL_HDR - 4) != entry_crc (e, payload))
    return -EBADMSG;
  return 0;
}
