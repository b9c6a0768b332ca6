/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - member superblock encode/decode.  See format.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <isa-l/crc.h>
#include <uuid/uuid.h>

#include "format-internal.h"

uint32_t
gr_crc32c (uint32_t crc, const void *buf, size_t len)
{
  const unsigned char *p = buf;

  /* ISA-L's crc32_iscsi neither inverts its start value nor its result:
   * the iSCSI CRC is ~crc32_iscsi (buf, len, ~crc).  Its length is an
   * int: longer buffers go in pieces. */
  crc = ~crc;
  while (len > 0) {
    const int n = len > (size_t) 1 << 30 ? 1 << 30 : (int) len;

    crc = crc32_iscsi ((unsigned char *) p, n, crc);
    p += n;
    len -= (size_t) n;
  }
  return ~crc;
}

uint64_t
gr_cksum_layout_bytes (uint64_t data_size)
{
  return (data_size / GR_CKSUM_BLOCK * 4 + 4095) / 4096 * 4096;
}

uint32_t
gr_cksum_block (const void *block)
{
  static uint32_t zero_crc;     /* crc32c of a zero block, made once */
  uint32_t z = __atomic_load_n (&zero_crc, __ATOMIC_RELAXED);

  if (z == 0) {
    static const uint8_t zeros[GR_CKSUM_BLOCK];

    z = gr_crc32c (0, zeros, sizeof zeros);
    __atomic_store_n (&zero_crc, z, __ATOMIC_RELAXED);
  }
  return gr_crc32c (0, block, GR_CKSUM_BLOCK) ^ z;
}

int
gr_sb_validate (const struct gr_sb *sb)
{
  uint32_t n;
  int i, rebuilt = 0;

  if (sb->version != GR_SB_VERSION)
    return -EPROTONOSUPPORT;
  if (sb->k < 1 || sb->m < 1 || sb->k + sb->m > GR_SB_MAX_MEMBERS)
    return -EINVAL;
  n = sb->k + sb->m;
  if (sb->code != 1 && sb->code != 2)
    return -EINVAL;
  if (sb->chunk < 4096 || (sb->chunk & (sb->chunk - 1)) != 0)
    return -EINVAL;
  if (sb->index >= n)
    return -EINVAL;
  if (sb->flags & ~GR_SB_FLAGS_KNOWN)
    return -EINVAL;
  if (sb->data_offset < GR_SB_SIZE || sb->data_offset % 4096 != 0
      || sb->data_offset % sb->chunk != 0)
    return -EINVAL;
  if (sb->data_size == 0 || sb->data_size % sb->chunk != 0)
    return -EINVAL;
  if (sb->data_offset > (UINT64_C (1) << 62)
      || sb->data_size > (UINT64_C (1) << 62) - sb->data_offset)
    return -EINVAL;
  for (i = n; i < GR_SB_MAX_MEMBERS; i++)
    if (gr_sb_failed_test (sb, i))
      return -EINVAL;
  if (sb->bitmap_region != 0 &&
      ((sb->bitmap_region & (sb->bitmap_region - 1)) != 0 ||
       (sb->data_size / sb->chunk + sb->bitmap_region - 1) /
       sb->bitmap_region > GR_SB_BITMAP_BITS))
    return -EINVAL;
  if (sb->scrub_at >= sb->data_size / sb->chunk)
    return -EINVAL;
  for (i = 0; i < GR_SB_MAX_MEMBERS; i++)
    if (gr_sb_rebuild_test (sb, i)) {
      if ((uint32_t) i >= n || sb->rebuild_id == 0)
        return -EINVAL;
      rebuilt++;
    }
  if (sb->rebuild_id == 0
      ? sb->rebuild_at != 0
      : rebuilt == 0 || sb->rebuild_at > sb->data_size / sb->chunk)
    return -EINVAL;
  if ((sb->flags & GR_SB_FLAG_REBUILDING) &&
      !gr_sb_rebuild_test (sb, (int) sb->index))
    return -EINVAL;
  /* A spare is no replacement; a re-add is one. */
  if ((sb->flags & GR_SB_FLAG_SPARE) && (sb->flags & GR_SB_FLAG_REBUILDING))
    return -EINVAL;
  if ((sb->flags & GR_SB_FLAG_READD) && !(sb->flags & GR_SB_FLAG_REBUILDING))
    return -EINVAL;
  /* The degraded map is kept from an update that happened. */
  if (sb->degraded_since > sb->event)
    return -EINVAL;
  for (i = 0; i < GR_SB_MAX_MEMBERS; i++)
    if (gr_sb_removed_test (sb, i) && !gr_sb_failed_test (sb, i))
      return -EINVAL;
  {
    const struct gr_sb_scrub *ls = &sb->last_scrub;

    if (ls->end == 0
        ? ls->secs || ls->repair || ls->checked || ls->mismatched ||
          ls->repaired || ls->cksum_repaired || ls->cksum_unrecoverable
        : ls->repair > 1 || ls->checked > sb->data_size / sb->chunk ||
          ls->mismatched > ls->checked || ls->repaired > ls->mismatched)
      return -EINVAL;
  }
  if (sb->cksum_offset != 0 &&
      (sb->cksum_offset % 4096 != 0 || sb->cksum_offset < GR_JOURNAL_OFFSET ||
       sb->cksum_offset > sb->data_offset ||
       gr_cksum_layout_bytes (sb->data_size) >
       sb->data_offset - sb->cksum_offset))
    return -EINVAL;
  return 0;
}

uint64_t
gr_sb_bitmap_region (uint32_t chunk, uint64_t stripes, uint64_t want)
{
  uint64_t r = 1;

  if (want == 0)
    want = (uint64_t) 64 << 20;
  while (r * chunk < want || (stripes + r - 1) / r > GR_SB_BITMAP_BITS)
    r *= 2;
  return r;
}

void
gr_sb_encode (const struct gr_sb *sb, uint8_t *buf)
{
  memset (buf, 0, GR_SB_SIZE);
  memcpy (buf, GR_SB_MAGIC, 8);
  gr_le_put32 (buf + 8, sb->version);
  gr_le_put32 (buf + 12, GR_SB_SIZE);
  memcpy (buf + 16, sb->uuid, 16);
  gr_le_put32 (buf + 32, sb->k);
  gr_le_put32 (buf + 36, sb->m);
  gr_le_put32 (buf + 40, sb->code);
  gr_le_put32 (buf + 44, sb->chunk);
  gr_le_put32 (buf + 48, sb->index);
  gr_le_put32 (buf + 52, sb->flags);
  gr_le_put64 (buf + 56, sb->data_offset);
  gr_le_put64 (buf + 64, sb->data_size);
  gr_le_put64 (buf + 72, sb->event);
  gr_le_put64 (buf + 80, sb->ctime);
  memcpy (buf + 88, sb->failed, 32);
  gr_le_put64 (buf + 120, sb->bitmap_region);
  gr_le_put64 (buf + 128, sb->scrub_at);
  gr_le_put64 (buf + 136, sb->rebuild_id);
  gr_le_put64 (buf + 144, sb->degraded_since);
  gr_le_put64 (buf + 152, sb->rebuild_at);
  memcpy (buf + 160, sb->rebuild_set, 32);
  gr_le_put64 (buf + 192, sb->cksum_offset);
  gr_le_put64 (buf + 200, sb->last_scrub.end);
  gr_le_put32 (buf + 208, sb->last_scrub.secs);
  gr_le_put32 (buf + 212, sb->last_scrub.repair);
  gr_le_put64 (buf + 216, sb->last_scrub.checked);
  gr_le_put64 (buf + 224, sb->last_scrub.mismatched);
  gr_le_put64 (buf + 232, sb->last_scrub.repaired);
  gr_le_put64 (buf + 240, sb->last_scrub.cksum_repaired);
  gr_le_put64 (buf + 248, sb->last_scrub.cksum_unrecoverable);
  memcpy (buf + 256, sb->removed, 32);
  gr_le_put32 (buf + GR_SB_CRC_OFFSET, gr_crc32c (0, buf, GR_SB_CRC_OFFSET));
}

int
gr_sb_decode (const uint8_t *buf, struct gr_sb *sb)
{
  size_t i;

  if (memcmp (buf, GR_SB_MAGIC, 8) != 0)
    return -ENOENT;
  if (gr_le_get32 (buf + GR_SB_CRC_OFFSET) !=
      gr_crc32c (0, buf, GR_SB_CRC_OFFSET))
    return -EBADMSG;
  memset (sb, 0, sizeof *sb);
  sb->version = gr_le_get32 (buf + 8);
  if (sb->version != GR_SB_VERSION)
    return -EPROTONOSUPPORT;
  if (gr_le_get32 (buf + 12) != GR_SB_SIZE)
    return -EINVAL;
  memcpy (sb->uuid, buf + 16, 16);
  sb->k = gr_le_get32 (buf + 32);
  sb->m = gr_le_get32 (buf + 36);
  sb->code = gr_le_get32 (buf + 40);
  sb->chunk = gr_le_get32 (buf + 44);
  sb->index = gr_le_get32 (buf + 48);
  sb->flags = gr_le_get32 (buf + 52);
  sb->data_offset = gr_le_get64 (buf + 56);
  sb->data_size = gr_le_get64 (buf + 64);
  sb->event = gr_le_get64 (buf + 72);
  sb->ctime = gr_le_get64 (buf + 80);
  memcpy (sb->failed, buf + 88, 32);
  sb->bitmap_region = gr_le_get64 (buf + 120);
  sb->scrub_at = gr_le_get64 (buf + 128);
  sb->rebuild_id = gr_le_get64 (buf + 136);
  sb->degraded_since = gr_le_get64 (buf + 144);
  sb->rebuild_at = gr_le_get64 (buf + 152);
  memcpy (sb->rebuild_set, buf + 160, 32);
  sb->cksum_offset = gr_le_get64 (buf + 192);
  sb->last_scrub.end = gr_le_get64 (buf + 200);
  sb->last_scrub.secs = gr_le_get32 (buf + 208);
  sb->last_scrub.repair = gr_le_get32 (buf + 212);
  sb->last_scrub.checked = gr_le_get64 (buf + 216);
  sb->last_scrub.mismatched = gr_le_get64 (buf + 224);
  sb->last_scrub.repaired = gr_le_get64 (buf + 232);
  sb->last_scrub.cksum_repaired = gr_le_get64 (buf + 240);
  sb->last_scrub.cksum_unrecoverable = gr_le_get64 (buf + 248);
  memcpy (sb->removed, buf + 256, 32);
  for (i = GR_SB_RESERVED_OFFSET; i < GR_SB_CRC_OFFSET; i++)
    if (buf[i] != 0)
      return -EINVAL;
  return gr_sb_validate (sb);
}

const char *
gr_sb_strerror (int err)
{
  switch (err) {
  case 0: return "valid superblock";
  case -ENOENT: return "no gpuraid superblock";
  case -EBADMSG: return "superblock checksum mismatch";
  case -EPROTONOSUPPORT: return "unsupported superblock format version";
  case -EINVAL: return "invalid superblock field";
  default: return "unreadable superblock";
  }
}

void
gr_sb_uuid_str (const uint8_t *u, char *out)
{
  uuid_unparse_lower (u, out);
}

bool
gr_sb_uuid_parse (const char *s, uint8_t *u)
{
  return uuid_parse (s, u) == 0;
}

void
gr_sb_spare (const struct gr_sb *array, struct gr_sb *out)
{
  *out = *array;
  out->flags = GR_SB_FLAG_SPARE;
  out->index = 0;
  out->rebuild_id = out->rebuild_at = 0;
  memset (out->rebuild_set, 0, sizeof out->rebuild_set);
}
