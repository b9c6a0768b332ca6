/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - member superblock encode/decode.  See format.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <isa-l/crc.h>

#include "format.h"

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

static void
put32 (uint8_t *p, uint32_t v)
{
  p[0] = v; p[1] = v >> 8; p[2] = v >> 16; p[3] = v >> 24;
}

static void
put64 (uint8_t *p, uint64_t v)
{
  put32 (p, (uint32_t) v);
  put32 (p + 4, (uint32_t) (v >> 32));
}

static uint32_t
get32 (const uint8_t *p)
{
  return p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16
    | (uint32_t) p[3] << 24;
}

static uint64_t
get64 (const uint8_t *p)
{
  return get32 (p) | (uint64_t) get32 (p + 4) << 32;
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
  put32 (buf + 8, sb->version);
  put32 (buf + 12, GR_SB_SIZE);
  memcpy (buf + 16, sb->uuid, 16);
  put32 (buf + 32, sb->k);
  put32 (buf + 36, sb->m);
  put32 (buf + 40, sb->code);
  put32 (buf + 44, sb->chunk);
  put32 (buf + 48, sb->index);
  put32 (buf + 52, sb->flags);
  put64 (buf + 56, sb->data_offset);
  put64 (buf + 64, sb->data_size);
  put64 (buf + 72, sb->event);
  put64 (buf + 80, sb->ctime);
  memcpy (buf + 88, sb->failed, 32);
  put64 (buf + 120, sb->bitmap_region);
  put64 (buf + 128, sb->scrub_at);
  put64 (buf + 136, sb->rebuild_id);
  put64 (buf + 152, sb->rebuild_at);
  memcpy (buf + 160, sb->rebuild_set, 32);
  put32 (buf + GR_SB_CRC_OFFSET, gr_crc32c (0, buf, GR_SB_CRC_OFFSET));
}

int
gr_sb_decode (const uint8_t *buf, struct gr_sb *sb)
{
  size_t i;

  if (memcmp (buf, GR_SB_MAGIC, 8) != 0)
    return -ENOENT;
  if (get32 (buf + GR_SB_CRC_OFFSET) != gr_crc32c (0, buf, GR_SB_CRC_OFFSET))
    return -EBADMSG;
  memset (sb, 0, sizeof *sb);
  sb->version = get32 (buf + 8);
  if (sb->version != GR_SB_VERSION)
    return -EPROTONOSUPPORT;
  if (get32 (buf + 12) != GR_SB_SIZE)
    return -EINVAL;
  memcpy (sb->uuid, buf + 16, 16);
  sb->k = get32 (buf + 32);
  sb->m = get32 (buf + 36);
  sb->code = get32 (buf + 40);
  sb->chunk = get32 (buf + 44);
  sb->index = get32 (buf + 48);
  sb->flags = get32 (buf + 52);
  sb->data_offset = get64 (buf + 56);
  sb->data_size = get64 (buf + 64);
  sb->event = get64 (buf + 72);
  sb->ctime = get64 (buf + 80);
  memcpy (sb->failed, buf + 88, 32);
  sb->bitmap_region = get64 (buf + 120);
  sb->scrub_at = get64 (buf + 128);
  sb->rebuild_id = get64 (buf + 136);
  sb->rebuild_at = get64 (buf + 152);
  memcpy (sb->rebuild_set, buf + 160, 32);
  if (get64 (buf + 144) != 0)
    return -EINVAL;
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
  snprintf (out, 37,
            "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
            "%02x%02x%02x%02x%02x%02x",
            u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7],
            u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}
