/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the bitmap's state, shared by the two files of the bitmap
 * module (bitmap.c: the write-intent bits, pending and suspect regions,
 * the clearing thread; bitmap-maps.c: the written and degraded maps).
 * Nothing else includes it; include bitmap.h first. */
#ifndef GPURAID_BITMAP_INTERNAL_H
#define GPURAID_BITMAP_INTERNAL_H

#include <pthread.h>

#include "format/format.h"

struct gr_bitmap {
  struct gr_members *ms;
  struct gr_cksum *cksum;       /* NULL: none */
  int n;
  uint64_t stripes;
  uint64_t region, nregions;
  size_t nbytes;                /* the bits, whole 4096 blocks */
  bool room;                    /* the metadata area has room for them */
  struct gr_maps_layout maps;   /* the written and degraded maps' (kept:
                                 * maps.kept) */
  size_t total;                 /* bytes written out: the bits and the
                                 * maps, from GR_BITMAP_OFFSET */
  pthread_mutex_t lock;         /* everything below */
  pthread_cond_t cond;          /* a bitmap write ended */
  pthread_cond_t stop_cond;     /* stop */
  uint8_t *area;                /* as wanted on disk (total): */
  uint8_t *bits;                /*   the write-intent bits (nbytes), */
  uint8_t *written;             /*   the written map (maps.bytes), */
  uint8_t *degraded;            /*   the degraded map (maps.bytes) */
  bool written_kept;            /* the written map is trusted
                                 * (GR_SB_FLAG_WRITTEN) */
  bool degraded_on;             /* the degraded map is being kept: a
                                 * member has failed */
  uint8_t *trimmed;             /* a bit per map region: trimmed whole
                                 * since, its written bit to be cleared
                                 * once that is durable */
  uint64_t *trim_front;         /* per map region: the stripe up to which
                                 * it was trimmed from its start, without
                                 * a write since */
  uint8_t *pending;             /* a bit per region: resync not done */
  uint64_t npending;            /* atomic: its count */
  uint8_t *suspect;             /* a bit per region: its block checksums
                                 * may miss writes of a crash (kept set) */
  uint64_t nsuspect;            /* atomic: its count */
  uint8_t *touched;             /* a bit per region: written this pass */
  uint64_t *set_gen;            /* per region: gen that set its bit */
  uint32_t *inflight;           /* per region: plans writing */
  uint64_t gen, done_gen;       /* changes to bits; written and synced */
  bool writing;                 /* a thread is writing bits out */
  uint8_t *out;                 /* its copy (total) */
  bool started, stop;
  pthread_t thread;
};

static inline bool
gr_bit_test (const uint8_t *v, uint64_t r)
{
  return (v[r / 8] >> (r % 8)) & 1;
}

static inline void
gr_bit_set (uint8_t *v, uint64_t r)
{
  v[r / 8] |= (uint8_t) (1u << (r % 8));
}

static inline void
gr_bit_clear (uint8_t *v, uint64_t r)
{
  v[r / 8] &= (uint8_t) ~(1u << (r % 8));
}

/* bitmap-maps.c, under b->lock (the callers move b->gen when the area
 * changed): */
/* Does map mark a region of stripes [s0, s0 + ns)? */
bool gr_bitmap_maps_any_locked (const struct gr_bitmap *b, const uint8_t *map,
                                uint64_t s0, uint64_t ns);
/* A member has failed and the degraded map is not kept yet: it is from
 * now on, every region whose write-intent bit is set marked in it (a
 * write in flight at the failure may have missed the member); no member
 * failed: it is dropped.  true if the area changed. */
bool gr_bitmap_maps_follow_locked (struct gr_bitmap *b);
/* Before the writes of stripes [s0, s0 + ns): their map regions written
 * (and degraded, while kept), no longer trimmed.  true if a bit was
 * set. */
bool gr_bitmap_maps_mark_locked (struct gr_bitmap *b, uint64_t s0,
                                 uint64_t ns);
/* After a sync that followed the trims in cand (a copy of b->trimmed
 * taken before it): the map regions trimmed whole and not written since
 * are not written.  true if a bit was cleared. */
bool gr_bitmap_maps_untrim_locked (struct gr_bitmap *b, const uint8_t *cand);

#endif /* GPURAID_BITMAP_INTERNAL_H */
