/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the format library's private header: what its files share
 * (superblock.c, metadata.c).  Nothing outside format/ includes it. */
#ifndef GPURAID_FORMAT_INTERNAL_H
#define GPURAID_FORMAT_INTERNAL_H

#include <stdint.h>

#include "format.h"

/* Little-endian integers at p: every integer on disk is one. */
static inline void
gr_le_put32 (uint8_t *p, uint32_t v)
{
  p[0] = (uint8_t) v;
  p[1] = (uint8_t) (v >> 8);
  p[2] = (uint8_t) (v >> 16);
  p[3] = (uint8_t) (v >> 24);
}

static inline void
gr_le_put64 (uint8_t *p, uint64_t v)
{
  gr_le_put32 (p, (uint32_t) v);
  gr_le_put32 (p + 4, (uint32_t) (v >> 32));
}

static inline uint32_t
gr_le_get32 (const uint8_t *p)
{
  return p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16
    | (uint32_t) p[3] << 24;
}

static inline uint64_t
gr_le_get64 (const uint8_t *p)
{
  return gr_le_get32 (p) | (uint64_t) gr_le_get32 (p + 4) << 32;
}

#endif /* GPURAID_FORMAT_INTERNAL_H */
