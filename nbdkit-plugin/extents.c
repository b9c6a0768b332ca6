/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - holes of the array.  See extents.h. */
#include <nbdkit-plugin.h>

#include "extents.h"

/* Chunks looked at in one call, at most (the client asks again from
 * where the answer ends). */
#define MAX_CHUNKS 4096

/* Is the piece ext of a data chunk a hole? */
static bool
chunk_hole (struct gr_members *ms, const struct gr_geom *g,
            const struct gr_extent *ext)
{
  const int n = g->k + g->m;
  int live = 0;

  if (!gr_members_failed (ms, ext->member))
    return gr_members_hole (ms, ext->member, ext->member_off, ext->len);
  /* Its member is lost: the first k live chunks of the stripe decide. */
  for (int i = 0; i < n && live < g->k; i++) {
    const int mi = gr_map_member (g, ext->stripe, i);

    if (gr_members_failed (ms, mi))
      continue;
    if (!gr_members_hole (ms, mi, gr_map_member_offset (g, ext->stripe, 0),
                          g->chunk))
      return false;
    live++;
  }
  return live == g->k;
}

int
gr_extents (struct gr_exec *x, uint32_t count, uint64_t offset,
            bool req_one, struct nbdkit_extents *e)
{
  const struct gr_geom *g = gr_exec_geom (x);
  struct gr_members *ms = gr_exec_members (x);
  const uint64_t size = gr_map_size (g);
  uint64_t left = count;

  for (int i = 0; i < MAX_CHUNKS && left > 0 && offset < size; i++) {
    struct gr_extent ext;
    bool hole;

    gr_map_extent (g, offset, left, &ext);
    hole = chunk_hole (ms, g, &ext);
    if (nbdkit_add_extent (e, offset, ext.len, hole ?
                           NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO : 0)
        == -1)
      return -1;
    offset += ext.len;
    left -= ext.len;
    if (req_one)
      break;
  }
  return 0;
}
