/* SPDX-License-Identifier: BSD-3-Clause */
/* Exhaustive checks of the raidmap geometry on small arrays:
 * - every (stripe, index) maps to a distinct member and back;
 * - parity rotates: over n consecutive stripes each member holds each
 *   code index exactly once;
 * - every logical byte maps forward to one (member, offset) and the
 *   inverse map returns the same logical byte; member bytes are covered
 *   exactly once by data or parity;
 * - range walks with gr_map_extent cover [offset, offset+len) exactly,
 *   and so do stripe walks (gr_map_walk_*), whose spans, chunk lists and
 *   chunk ranges agree with gr_map_extent;
 * - the k=3,m=2 layout matches the diagram in raidmap.h.
 */
#undef NDEBUG
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "raidmap.h"
#include "tests/testkit.h"

/* Check one geometry exhaustively, at a granularity of `step` bytes
 * (a divisor of the chunk size; every step-th byte is mapped). */
static void
check_geom (int k, int m, uint32_t chunk, uint64_t stripes, uint32_t step)
{
  struct gr_geom g = { .k = k, .m = m, .chunk = chunk,
                       .data_offset = 1 << 20, .stripes = stripes };
  int n = k + m;
  uint64_t size = gr_map_size (&g);
  uint64_t units_per_member = stripes * (chunk / step);
  unsigned char *seen;
  uint64_t s, off;
  int i, mem;

  CHECK (gr_map_check (&g) == 0, "k=%d m=%d", k, m);
  CHECK (size == stripes * k * chunk, "size");

  /* Member <-> index bijection per stripe. */
  for (s = 0; s < stripes; s++) {
    unsigned used[256] = { 0 };
    for (i = 0; i < n; i++) {
      mem = gr_map_member (&g, s, i);
      CHECK (mem >= 0 && mem < n, "member range");
      CHECK (!used[mem], "member %d used twice in stripe %" PRIu64, mem, s);
      used[mem] = 1;
      CHECK (gr_map_index (&g, s, mem) == i, "index inverse");
    }
  }
  /* Rotation: over any n consecutive stripes, a member holds each index once. */
  for (mem = 0; mem < n; mem++) {
    unsigned cnt[256] = { 0 };
    for (s = 0; s < (uint64_t) n && s < stripes; s++)
      cnt[gr_map_index (&g, s, mem)]++;
    if (stripes >= (uint64_t) n)
      for (i = 0; i < n; i++)
        CHECK (cnt[i] == 1, "rotation member %d index %d", mem, i);
  }

  /* Forward then inverse for every step-th logical byte; mark coverage. */
  seen = calloc ((size_t) n * units_per_member, 1);
  if (!seen) { perror ("calloc"); exit (1); }
  for (off = 0; off < size; off += step) {
    struct gr_extent e;
    uint64_t st, logical;
    int idx;
    uint32_t co;

    gr_map_extent (&g, off, step, &e);
    CHECK (e.len == step, "extent len %u", e.len);
    CHECK (e.index >= 0 && e.index < k, "data index");
    CHECK (e.member == gr_map_member (&g, e.stripe, e.index), "member");
    CHECK (gr_map_inverse (&g, e.member, e.member_off, &st, &idx, &co,
                           &logical) == 0, "inverse rc");
    CHECK (st == e.stripe && idx == e.index && co == e.chunk_off
           && logical == off, "round trip at %" PRIu64, off);
    {
      uint64_t u = (e.member_off - g.data_offset) / step;
      CHECK (!seen[(size_t) e.member * units_per_member + u], "overlap");
      seen[(size_t) e.member * units_per_member + u] = 1;
    }
  }
  /* Whatever data did not cover must be parity, and map back as parity. */
  for (mem = 0; mem < n; mem++)
    for (uint64_t u = 0; u < units_per_member; u++) {
      uint64_t st, logical;
      int idx;
      uint32_t co;
      uint64_t moff = g.data_offset + u * step;
      CHECK (gr_map_inverse (&g, mem, moff, &st, &idx, &co, &logical) == 0,
             "inverse");
      if (seen[(size_t) mem * units_per_member + u])
        CHECK (idx < k && logical != UINT64_MAX, "data unit");
      else
        CHECK (idx >= k && logical == UINT64_MAX, "parity unit");
    }
  free (seen);

  /* Out of range. */
  {
    uint64_t st, logical;
    int idx;
    uint32_t co;
    CHECK (gr_map_inverse (&g, n, g.data_offset, &st, &idx, &co, &logical)
           == -ERANGE, "bad member");
    CHECK (gr_map_inverse (&g, 0, g.data_offset - 1, &st, &idx, &co, &logical)
           == -ERANGE, "metadata area");
    CHECK (gr_map_inverse (&g, 0, g.data_offset + stripes * chunk, &st, &idx,
                           &co, &logical) == -ERANGE, "past end");
  }
}

/* Walk random ranges with gr_map_extent: pieces are contiguous, inside
 * one chunk, and add up to the range. */
static void
check_walks (void)
{
  struct gr_geom g = { .k = 5, .m = 3, .chunk = 4096,
                       .data_offset = 8192, .stripes = 37 };
  uint64_t size = gr_map_size (&g);
  for (int t = 0; t < 20000; t++) {
    uint64_t off = test_rand () % size;
    uint64_t len = 1 + test_rand () % (3 * 5 * 4096);
    uint64_t pos = off, left;
    if (len > size - off)
      len = size - off;
    left = len;
    while (left > 0) {
      struct gr_extent e;
      gr_map_extent (&g, pos, left, &e);
      CHECK (e.logical == pos, "contiguous");
      CHECK (e.len >= 1 && e.len <= left, "len");
      CHECK ((uint64_t) e.chunk_off + e.len <= g.chunk, "inside chunk");
      pos += e.len;
      left -= e.len;
    }
    CHECK (pos == off + len, "walk end");
  }
}

/* Walk random ranges stripe by stripe: the spans tile the range, stay
 * inside one stripe, say whether they cover it whole, and their chunks
 * and touched ranges are the pieces gr_map_extent gives. */
static void
check_stripe_walks (void)
{
  struct gr_geom g = { .k = 5, .m = 3, .chunk = 4096,
                       .data_offset = 8192, .stripes = 37 };
  uint64_t size = gr_map_size (&g), width = gr_map_stripe_width (&g);

  for (int t = 0; t < 20000; t++) {
    uint64_t off = test_rand () % size;
    uint64_t len = 1 + test_rand () % (3 * width);
    uint64_t pos;
    struct gr_walk w;
    struct gr_span sp;

    if (t % 4 == 0)
      off -= off % width;               /* stripe-aligned starts too */
    if (len > size - off)
      len = size - off;
    pos = off;
    gr_map_walk_init (&w, &g, off, len);
    while (gr_map_walk_next (&w, &sp)) {
      struct gr_extent e;
      uint64_t at = sp.logical, from;
      uint32_t a, b;
      int first, last, i;

      CHECK (sp.logical == pos && sp.len >= 1 &&
             sp.stripe == pos / width && sp.so == pos % width &&
             sp.so + sp.len <= width, "span at %" PRIu64, pos);
      CHECK (gr_map_span_whole (&g, &sp) == (sp.so == 0 && sp.len == width),
             "whole");
      gr_map_span_chunks (&g, &sp, &first, &last);
      for (i = first; i <= last; i++) {
        gr_map_extent (&g, at, off + len - at, &e);
        gr_map_span_range (&g, &sp, i, &a, &b, &from);
        CHECK (e.index == i && e.chunk_off == a && e.len == b - a &&
               from == at - sp.logical, "chunk %d of the span at %" PRIu64,
               i, pos);
        at += e.len;
      }
      CHECK (at == sp.logical + sp.len, "chunks cover the span");
      pos += sp.len;
    }
    CHECK (pos == off + len, "walk end");
  }
}

int
main (void)
{
  static const int km[][2] = {
    { 1, 1 }, { 2, 1 }, { 3, 2 }, { 4, 2 }, { 6, 3 }, { 10, 4 }, { 8, 8 },
    { 1, 5 }, { 13, 3 }, { 200, 55 },
  };

  test_seed ("test-raidmap");

  /* The diagram in raidmap.h for k=3, m=2. */
  {
    static const char *want[5] = {
      "D0 D1 D2 P0 P1", "D1 D2 P0 P1 D0", "D2 P0 P1 D0 D1",
      "P0 P1 D0 D1 D2", "P1 D0 D1 D2 P0",
    };
    struct gr_geom g = { .k = 3, .m = 2, .chunk = 4096,
                         .data_offset = 1 << 20, .stripes = 5 };
    for (int s = 0; s < 5; s++) {
      char row[128] = "", cell[32];
      for (int mem = 0; mem < 5; mem++) {
        int i = gr_map_index (&g, s, mem);
        snprintf (cell, sizeof cell, "%s%c%d", mem ? " " : "",
                  i < 3 ? 'D' : 'P', i < 3 ? i : i - 3);
        strcat (row, cell);
      }
      CHECK (strcmp (row, want[s]) == 0, "stripe %d: got '%s' want '%s'",
             s, row, want[s]);
    }
  }

  for (size_t t = 0; t < sizeof km / sizeof km[0]; t++) {
    int n = km[t][0] + km[t][1];
    uint64_t stripes = n < 20 ? 3 * (uint64_t) n + 1 : (uint64_t) n + 2;
    uint32_t step = n < 20 ? 512 : 4096;
    check_geom (km[t][0], km[t][1], 4096, stripes, step);
    check_geom (km[t][0], km[t][1], 65536, n < 20 ? 2 * n : 3, 4096);
  }
  check_walks ();
  check_stripe_walks ();

  /* Invalid geometries. */
  {
    struct gr_geom g = { .k = 4, .m = 2, .chunk = 4096, .data_offset = 0,
                         .stripes = 10 };
    struct gr_geom b;
    b = g; b.k = 0;          CHECK (gr_map_check (&b) == -EINVAL, "k=0");
    b = g; b.m = 0;          CHECK (gr_map_check (&b) == -EINVAL, "m=0");
    b = g; b.k = 250; b.m = 7; CHECK (gr_map_check (&b) == -EINVAL, "n>256");
    b = g; b.chunk = 6144;   CHECK (gr_map_check (&b) == -EINVAL, "chunk pow2");
    b = g; b.chunk = 2048;   CHECK (gr_map_check (&b) == -EINVAL, "chunk small");
    b = g; b.data_offset = 100; CHECK (gr_map_check (&b) == -EINVAL, "align");
    b = g; b.stripes = UINT64_MAX / 2; CHECK (gr_map_check (&b) == -EINVAL, "huge");
    CHECK (gr_map_check (&g) == 0, "good");
  }

  return test_done ("test-raidmap");
}
