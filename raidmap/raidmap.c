/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - array geometry.  See raidmap.h for the layout. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "raidmap.h"

int
gr_map_check (const struct gr_geom *g)
{
  if (g->k < 1 || g->m < 1 || g->k + g->m > 256)
    return -EINVAL;
  if (g->chunk < 4096 || (g->chunk & (g->chunk - 1)) != 0)
    return -EINVAL;
  if (g->data_offset % 4096 != 0)
    return -EINVAL;
  /* The logical size and every member offset must fit in 63 bits. */
  if (g->stripes > (UINT64_C (1) << 62) / g->chunk / (uint64_t) g->k)
    return -EINVAL;
  if (g->data_offset > (UINT64_C (1) << 62) - g->stripes * g->chunk)
    return -EINVAL;
  return 0;
}

uint64_t
gr_map_stripe_width (const struct gr_geom *g)
{
  return (uint64_t) g->k * g->chunk;
}

uint64_t
gr_map_size (const struct gr_geom *g)
{
  return g->stripes * gr_map_stripe_width (g);
}

/* Code index i of stripe s is on member (i - s) mod n. */
int
gr_map_member (const struct gr_geom *g, uint64_t stripe, int index)
{
  int n = g->k + g->m;
  int rot = (int) (stripe % (uint64_t) n);
  return (index - rot + n) % n;
}

int
gr_map_index (const struct gr_geom *g, uint64_t stripe, int member)
{
  int n = g->k + g->m;
  int rot = (int) (stripe % (uint64_t) n);
  return (member + rot) % n;
}

uint64_t
gr_map_member_offset (const struct gr_geom *g, uint64_t stripe,
                      uint32_t chunk_off)
{
  return g->data_offset + stripe * g->chunk + chunk_off;
}

void
gr_map_extent (const struct gr_geom *g, uint64_t offset, uint64_t len,
               struct gr_extent *ext)
{
  uint64_t width = gr_map_stripe_width (g);
  uint64_t in_stripe = offset % width;
  uint64_t room;

  ext->logical = offset;
  ext->stripe = offset / width;
  ext->index = (int) (in_stripe / g->chunk);
  ext->chunk_off = (uint32_t) (in_stripe % g->chunk);
  room = g->chunk - ext->chunk_off;
  ext->len = (uint32_t) (len < room ? len : room);
  ext->member = gr_map_member (g, ext->stripe, ext->index);
  ext->member_off = gr_map_member_offset (g, ext->stripe, ext->chunk_off);
}

int
gr_map_inverse (const struct gr_geom *g, int member, uint64_t member_off,
                uint64_t *stripe, int *index, uint32_t *chunk_off,
                uint64_t *logical)
{
  uint64_t rel;

  if (member < 0 || member >= g->k + g->m)
    return -ERANGE;
  if (member_off < g->data_offset)
    return -ERANGE;
  rel = member_off - g->data_offset;
  if (rel / g->chunk >= g->stripes)
    return -ERANGE;
  *stripe = rel / g->chunk;
  *chunk_off = (uint32_t) (rel % g->chunk);
  *index = gr_map_index (g, *stripe, member);
  if (*index < g->k)
    *logical = *stripe * gr_map_stripe_width (g)
      + (uint64_t) *index * g->chunk + *chunk_off;
  else
    *logical = UINT64_MAX;
  return 0;
}

void
gr_map_walk_init (struct gr_walk *w, const struct gr_geom *g,
                  uint64_t offset, uint64_t len)
{
  w->g = g;
  w->pos = offset;
  w->end = offset + len;
}

bool
gr_map_walk_next (struct gr_walk *w, struct gr_span *sp)
{
  uint64_t width = gr_map_stripe_width (w->g), room;

  if (w->pos >= w->end)
    return false;
  sp->logical = w->pos;
  sp->stripe = w->pos / width;
  sp->so = w->pos % width;
  room = width - sp->so;
  sp->len = w->end - w->pos < room ? w->end - w->pos : room;
  w->pos += sp->len;
  return true;
}

bool
gr_map_span_whole (const struct gr_geom *g, const struct gr_span *sp)
{
  return sp->so == 0 && sp->len == gr_map_stripe_width (g);
}

void
gr_map_span_chunks (const struct gr_geom *g, const struct gr_span *sp,
                    int *first, int *last)
{
  *first = (int) (sp->so / g->chunk);
  *last = (int) ((sp->so + sp->len - 1) / g->chunk);
}

void
gr_map_span_range (const struct gr_geom *g, const struct gr_span *sp, int i,
                   uint32_t *a, uint32_t *b, uint64_t *from)
{
  uint64_t start = (uint64_t) i * g->chunk, end = sp->so + sp->len - start;

  *a = sp->so > start ? (uint32_t) (sp->so - start) : 0;
  *b = end < g->chunk ? (uint32_t) end : g->chunk;
  *from = start + *a - sp->so;
}
