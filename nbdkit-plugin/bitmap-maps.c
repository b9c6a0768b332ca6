/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the written and degraded maps, beside the write-intent bits
 * (part of the bitmap module).  See bitmap.h. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "bitmap.h"
#include "bitmap-internal.h"
#include "log.h"

/* Mark the map regions of stripes [s0, s0 + ns) in map; true if a bit
 * was clear. */
static bool
mark (struct gr_bitmap *b, uint8_t *map, uint64_t s0, uint64_t ns)
{
  const uint64_t r1 = (s0 + ns - 1) / b->maps.region;
  bool changed = false;

  for (uint64_t r = s0 / b->maps.region; r <= r1; r++)
    if (!gr_bit_test (map, r)) {
      gr_bit_set (map, r);
      changed = true;
    }
  return changed;
}

bool
gr_bitmap_maps_any_locked (const struct gr_bitmap *b, const uint8_t *map,
                           uint64_t s0, uint64_t ns)
{
  const uint64_t r1 = (s0 + ns - 1) / b->maps.region;

  for (uint64_t r = s0 / b->maps.region; r <= r1 && r < b->maps.regions;
       r++)
    if (gr_bit_test (map, r))
      return true;
  return false;
}

bool
gr_bitmap_maps_follow_locked (struct gr_bitmap *b)
{
  const int nf = gr_members_nfailed (b->ms);
  bool changed = false;

  if (!b->maps.kept)
    return false;
  if (nf > 0 && !b->degraded_on) {
    b->degraded_on = true;
    for (uint64_t r = 0; r < b->nregions; r++)
      if (gr_bit_test (b->bits, r))
        changed |= mark (b, b->degraded, r * b->region, b->region);
    gr_debug ("bitmap: a member has failed: the degraded map is kept from "
              "now on (a member that comes back is re-added by it)");
  }
  else if (nf == 0 && b->degraded_on) {
    b->degraded_on = false;
    memset (b->degraded, 0, b->maps.bytes);
    changed = true;
    gr_debug ("bitmap: no member is failed: the degraded map is dropped");
  }
  return changed;
}

bool
gr_bitmap_maps_mark_locked (struct gr_bitmap *b, uint64_t s0, uint64_t ns)
{
  bool changed = false;

  if (!b->maps.kept || !b->written_kept)
    return false;
  for (uint64_t r = s0 / b->maps.region;
       r <= (s0 + ns - 1) / b->maps.region; r++) {
    gr_bit_clear (b->trimmed, r);
    b->trim_front[r] = r * b->maps.region;
  }
  changed = mark (b, b->written, s0, ns);
  if (b->degraded_on)
    changed |= mark (b, b->degraded, s0, ns);
  return changed;
}

bool
gr_bitmap_maps_untrim_locked (struct gr_bitmap *b, const uint8_t *cand)
{
  uint64_t n = 0;

  if (!b->maps.kept)
    return false;
  for (uint64_t r = 0; r < b->maps.regions; r++)
    if (gr_bit_test (cand, r) && gr_bit_test (b->trimmed, r)) {
      gr_bit_clear (b->trimmed, r);
      b->trim_front[r] = r * b->maps.region;
      if (gr_bit_test (b->written, r)) {
        gr_bit_clear (b->written, r);
        n++;
      }
    }
  if (n)
    gr_verbose ("bitmap: %" PRIu64 " regions trimmed whole: not written", n);
  return n > 0;
}

void
gr_bitmap_trimmed (struct gr_bitmap *b, uint64_t s0, uint64_t ns)
{
  const uint64_t R = b->maps.region;

  if (!b->maps.kept || ns == 0)
    return;
  pthread_mutex_lock (&b->lock);
  /* Healthy only: a failed member's chunks were not trimmed.  A region
   * is trimmed whole by the plans of a trim, one after another, from its
   * start (a write starts it over). */
  if (b->written_kept && gr_members_nfailed (b->ms) == 0)
    for (uint64_t r = s0 / R; r <= (s0 + ns - 1) / R; r++) {
      const uint64_t hi = (r + 1) * R < b->stripes ? (r + 1) * R
        : b->stripes;

      if (s0 <= b->trim_front[r] && s0 + ns > b->trim_front[r])
        b->trim_front[r] = s0 + ns < hi ? s0 + ns : hi;
      if (b->trim_front[r] >= hi)
        gr_bit_set (b->trimmed, r);
    }
  pthread_mutex_unlock (&b->lock);
}

int
gr_bitmap_load_maps (struct gr_bitmap *b, bool crashed)
{
  const bool maps = b->maps.kept && (b->written_kept || b->degraded_on);
  const bool bits = crashed && b->room;
  uint8_t *buf;
  bool lost = false;

  if (!maps && !bits)
    return 0;
  buf = aligned_alloc (4096, b->total);  /* O_DIRECT: no bounce */
  if (buf == NULL) {
    nbdkit_error ("bitmap: %m");
    return -1;
  }
  for (int i = 0; i < b->n && !lost; i++) {
    struct gr_mio v = { .kind = GR_MIO_READ, .member = i,
                        .off = GR_BITMAP_OFFSET, .len = b->total,
                        .buf = buf };

    if (gr_members_failed (b->ms, i))
      continue;
    gr_members_io (b->ms, &v, 1, GR_MIO_REPORT);
    if (v.result != GR_MIO_DONE) {
      lost = true;
      break;
    }
    /* The crash's regions, kept set from now on: the start may write
     * the bits before they are loaded (bitmap.h). */
    if (bits)
      for (uint64_t r = 0; r < b->nregions; r++)
        if (gr_bit_test (buf, r))
          gr_bit_set (b->bits, r);
    if (!maps)
      continue;
    for (size_t j = 0; j < b->maps.bytes; j++) {
      b->written[j] |= buf[b->nbytes + j];
      b->degraded[j] |= buf[b->nbytes + b->maps.bytes + j];
    }
    /* A write in flight when a member failed set its bit here before
     * the degraded map was written: it counts as degraded too (a clean
     * shutdown wrote the map: gr_bitmap_close). */
    if (b->degraded_on && crashed)
      for (uint64_t r = 0; r < b->nregions; r++)
        if (gr_bit_test (buf, r))
          mark (b, b->degraded, r * b->region, b->region);
  }
  free (buf);
  if (lost && maps) {
    /* Taken as all written (since the member left) rather than guessed. */
    gr_debug ("bitmap: a member's maps cannot be read: every region taken "
              "as written");
    memset (b->written, 0xff, b->maps.bytes);
    memset (b->degraded, 0xff, b->maps.bytes);
  }
  /* Bits that cannot be read: gr_bitmap_load and gr_bitmap_load_suspect
   * take every region then. */
  return 0;
}

uint64_t
gr_bitmap_maps_run (struct gr_bitmap *b, uint64_t s, bool *written,
                    bool *degraded)
{
  const uint64_t R = b->maps.region;
  uint64_t r;

  if (!b->maps.kept) {
    *written = true;
    *degraded = false;
    return b->stripes;
  }
  pthread_mutex_lock (&b->lock);
  r = s / R;
  *written = !b->written_kept || gr_bit_test (b->written, r);
  *degraded = b->degraded_on && gr_bit_test (b->degraded, r);
  for (r++; r < b->maps.regions; r++)
    if ((!b->written_kept || gr_bit_test (b->written, r)) != *written ||
        (b->degraded_on && gr_bit_test (b->degraded, r)) != *degraded)
      break;
  pthread_mutex_unlock (&b->lock);
  return r * R < b->stripes ? r * R : b->stripes;
}

bool
gr_bitmap_maps_kept (const struct gr_bitmap *b)
{
  return b->maps.kept;
}

bool
gr_bitmap_degraded_kept (struct gr_bitmap *b)
{
  bool r;

  pthread_mutex_lock (&b->lock);
  r = b->degraded_on;
  pthread_mutex_unlock (&b->lock);
  return r;
}

uint64_t
gr_bitmap_map_bytes (struct gr_bitmap *b, bool degraded,
                     uint64_t stripe_bytes)
{
  uint64_t n = 0, s;

  if (!b->maps.kept)
    return degraded ? 0 : b->stripes * stripe_bytes;
  pthread_mutex_lock (&b->lock);
  for (uint64_t r = 0; r < b->maps.regions; r++)
    if (degraded ? b->degraded_on && gr_bit_test (b->degraded, r)
        : !b->written_kept || gr_bit_test (b->written, r)) {
      s = (r + 1) * b->maps.region < b->stripes ? b->maps.region
        : b->stripes - r * b->maps.region;
      n += s;
    }
  pthread_mutex_unlock (&b->lock);
  return n * stripe_bytes;
}
