/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the write-intent bitmap.  See bitmap.h. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bitmap.h"
#include "bitmap-internal.h"
#include "cksum.h"
#include "format/format.h"
#include "log.h"
#include "common/thread.h"

/* -D gpuraid.bitmap_ms=N: the clearing pass interval (tests). */
NBDKIT_DLL_PUBLIC int gpuraid_debug_bitmap_ms = 5000;

/* n bytes (whole 4096-byte blocks) of zeros, 4096-aligned: what is read
 * and written goes to O_DIRECT members without a bounce (storage.h). */
static uint8_t *
block_alloc (size_t n)
{
  uint8_t *p = aligned_alloc (4096, n);

  if (p)
    memset (p, 0, n);
  return p;
}

struct gr_bitmap *
gr_bitmap_new (const struct gr_geom *g, struct gr_members *ms,
               uint64_t region, struct gr_cksum *cksum)
{
  struct gr_bitmap *b = calloc (1, sizeof *b);
  struct gr_sb sb;

  if (b == NULL)
    goto err;
  gr_members_sb (ms, &sb);
  b->ms = ms;
  b->cksum = cksum;
  b->n = g->k + g->m;
  b->stripes = g->stripes;
  b->region = region;
  b->nregions = gr_bitmap_layout_regions (g->stripes, b->region);
  b->nbytes = gr_bitmap_layout_bytes (b->nregions);
  b->room = gr_bitmap_layout_fits (b->nbytes, g->data_offset);
  gr_maps_layout (g->stripes, region, g->chunk, g->data_offset, &b->maps);
  b->total = b->nbytes + (b->maps.kept ? 2 * b->maps.bytes : 0);
  b->written_kept = b->maps.kept && (sb.flags & GR_SB_FLAG_WRITTEN);
  b->degraded_on = b->maps.kept && sb.degraded_since != 0;
  b->area = block_alloc (b->total);
  b->out = block_alloc (b->total);
  b->trimmed = calloc (1, b->maps.kept ? b->maps.bytes : 1);
  b->trim_front = calloc (b->maps.kept ? b->maps.regions : 1,
                          sizeof *b->trim_front);
  b->pending = calloc (1, b->nbytes);
  b->suspect = calloc (1, b->nbytes);
  b->touched = calloc (1, b->nbytes);
  b->set_gen = calloc (b->nregions, sizeof *b->set_gen);
  b->inflight = calloc (b->nregions, sizeof *b->inflight);
  if (!b->area || !b->out || !b->trimmed || !b->trim_front || !b->pending ||
      !b->suspect ||
      !b->touched || !b->set_gen || !b->inflight)
    goto err;
  for (uint64_t r = 0; r < b->maps.regions; r++)
    b->trim_front[r] = r * b->maps.region;
  b->bits = b->area;
  b->written = b->area + b->nbytes;
  b->degraded = b->written + b->maps.bytes;
  pthread_mutex_init (&b->lock, NULL);
  pthread_cond_init (&b->cond, NULL);
  pthread_cond_init (&b->stop_cond, NULL);
  return b;

 err:
  nbdkit_error ("bitmap: %m");
  if (b) {
    free (b->area); free (b->out); free (b->trimmed); free (b->trim_front);
    free (b->pending); free (b->suspect); free (b->touched);
    free (b->set_gen); free (b->inflight);
  }
  free (b);
  return NULL;
}

void
gr_bitmap_free (struct gr_bitmap *b)
{
  if (b == NULL)
    return;
  if (b->started) {
    pthread_mutex_lock (&b->lock);
    b->stop = true;
    pthread_cond_broadcast (&b->stop_cond);
    pthread_mutex_unlock (&b->lock);
    pthread_join (b->thread, NULL);
  }
  pthread_mutex_destroy (&b->lock);
  pthread_cond_destroy (&b->cond);
  pthread_cond_destroy (&b->stop_cond);
  free (b->area); free (b->out); free (b->trimmed); free (b->trim_front);
  free (b->pending); free (b->suspect); free (b->touched); free (b->set_gen);
  free (b->inflight);
  free (b);
}

uint64_t
gr_bitmap_regions (const struct gr_bitmap *b)
{
  return b->nregions;
}

uint64_t
gr_bitmap_region_size (const struct gr_bitmap *b)
{
  return b->region;
}

/* The regions whose bit is set on a live member (every region: all)
 * set, and marked in `into` (pending or suspect); their count. */
static uint64_t
load (struct gr_bitmap *b, bool all, uint8_t *into)
{
  uint8_t *buf = block_alloc (b->nbytes);
  uint64_t r, npending = 0;
  int i;

  if (buf == NULL || !b->room)
    all = true;
  for (i = 0; i < b->n && !all; i++) {
    struct gr_mio v = { .kind = GR_MIO_READ, .member = i,
                        .off = GR_BITMAP_OFFSET, .len = b->nbytes,
                        .buf = buf };
    size_t j;

    if (gr_members_failed (b->ms, i))
      continue;
    gr_members_io (b->ms, &v, 1, GR_MIO_REPORT);
    if (v.result != GR_MIO_DONE) {
      gr_debug ("bitmap of member %d cannot be read: every region will be "
                "resynced", i);
      all = true;
      break;
    }
    for (j = 0; j < b->nbytes; j++)
      b->bits[j] |= buf[j];
  }
  free (buf);
  for (r = 0; r < b->nregions; r++) {
    /* Every region: every region written (a region never written since
     * the array was made holds zeros, consistent). */
    if (all && (!b->written_kept ||
                gr_bitmap_maps_any_locked (b, b->written, r * b->region,
                                           b->region)))
      gr_bit_set (b->bits, r);
    if (gr_bit_test (b->bits, r)) {
      gr_bit_set (into, r);
      npending++;
    }
  }
  /* Bits past the last region are never set. */
  for (r = b->nregions; r < (uint64_t) b->nbytes * 8; r++)
    gr_bit_clear (b->bits, r);
  return npending;
}

uint64_t
gr_bitmap_load (struct gr_bitmap *b, bool all)
{
  uint64_t n = load (b, all, b->pending);

  __atomic_store_n (&b->npending, n, __ATOMIC_RELEASE);
  return n;
}

uint64_t
gr_bitmap_load_suspect (struct gr_bitmap *b, bool all)
{
  uint64_t n = load (b, all, b->suspect);

  __atomic_store_n (&b->nsuspect, n, __ATOMIC_RELEASE);
  return n;
}


/* Write the bits and the maps (the area, total bytes) to every live
 * member, durably when sync (RWF_DSYNC:
 * the rest of the members' data need not be).  policy: GR_MIO_FAIL_MEMBER
 * at run time, GR_MIO_REPORT under the superblock lock.  true when every
 * live member took them. */
static bool
write_out (struct gr_bitmap *b, const uint8_t *bits, bool sync,
           enum gr_mio_policy policy)
{
  struct gr_mio v[GR_MAX_MEMBERS];
  size_t nv = 0, j;
  bool all = true;

  for (int i = 0; i < b->n; i++)
    if (!gr_members_failed (b->ms, i))
      v[nv++] = (struct gr_mio) { .kind = sync ? GR_MIO_WRITE_DSYNC
                                  : GR_MIO_WRITE, .member = i,
                                  .off = GR_BITMAP_OFFSET, .len = b->total,
                                  .buf = (void *) bits };
  gr_members_io (b->ms, v, nv, policy);
  for (j = 0; j < nv; j++)
    if (v[j].result != GR_MIO_DONE)
      all = false;
  return all;
}

/* Make the bits of generation want durable: write them out, or wait for
 * the thread writing them.  Lock held.  0, or -1 when the array has
 * failed. */
static int
flush_locked (struct gr_bitmap *b, uint64_t want)
{
  while (b->done_gen < want) {
    if (b->writing) {
      pthread_cond_wait (&b->cond, &b->lock);
      continue;
    }
    uint64_t g = b->gen;

    b->writing = true;
    memcpy (b->out, b->area, b->total);
    pthread_mutex_unlock (&b->lock);
    /* A member that fails here is failed (and the others go on); what
     * matters is that every member still live has the bits. */
    (void) write_out (b, b->out, true, GR_MIO_FAIL_MEMBER);
    pthread_mutex_lock (&b->lock);
    b->writing = false;
    pthread_cond_broadcast (&b->cond);
    if (gr_members_too_degraded (b->ms)) {
      nbdkit_error ("write-intent bitmap: too many failed members");
      errno = EIO;
      return -1;
    }
    if (g > b->done_gen)
      b->done_gen = g;
  }
  return 0;
}

bool
gr_bitmap_write_for_dirty (struct gr_bitmap *b)
{
  bool ok;

  if (!b->room)
    return false;
  pthread_mutex_lock (&b->lock);
  /* A member missing at start: the degraded map is kept from now on.
   * An array whose written map was not kept (made before it) keeps it
   * from this session on, every region taken as written. */
  (void) gr_bitmap_maps_follow_locked (b);
  if (b->maps.kept && !b->written_kept) {
    memset (b->written, 0xff, b->maps.bytes);
    b->written_kept = true;
    gr_debug ("bitmap: the written map is kept from now on (every region "
              "taken as written until trimmed)");
  }
  /* Nothing else writes the bits before the array is dirty. */
  ok = write_out (b, b->area, false, GR_MIO_REPORT);
  if (ok)
    b->done_gen = b->gen;
  pthread_mutex_unlock (&b->lock);
  return ok;
}

int
gr_bitmap_start_write (struct gr_bitmap *b, uint64_t s0, uint64_t ns)
{
  uint64_t r, r0 = s0 / b->region, r1 = (s0 + ns - 1) / b->region;
  uint64_t want = 0;
  bool changed = false;
  int ret = 0;

  if (!b->room)
    return 0;
  pthread_mutex_lock (&b->lock);
  /* The maps first: a change there is written out with the bits. */
  changed = gr_bitmap_maps_follow_locked (b);
  changed |= gr_bitmap_maps_mark_locked (b, s0, ns);
  if (changed)
    want = ++b->gen;
  for (r = r0; r <= r1; r++) {
    b->inflight[r]++;
    gr_bit_set (b->touched, r);
    if (!gr_bit_test (b->bits, r)) {
      gr_bit_set (b->bits, r);
      if (!changed)
        b->gen++;
      changed = true;
      b->set_gen[r] = b->gen;
    }
    if (b->set_gen[r] > want)
      want = b->set_gen[r];
  }
  if (changed)
    gr_verbose ("bitmap: regions %" PRIu64 "-%" PRIu64 " set", r0, r1);
  if (flush_locked (b, want) == -1) {
    for (r = r0; r <= r1; r++)
      b->inflight[r]--;
    ret = -1;
  }
  pthread_mutex_unlock (&b->lock);
  return ret;
}

void
gr_bitmap_end_write (struct gr_bitmap *b, uint64_t s0, uint64_t ns)
{
  uint64_t r, r0 = s0 / b->region, r1 = (s0 + ns - 1) / b->region;

  if (!b->room)
    return;
  pthread_mutex_lock (&b->lock);
  for (r = r0; r <= r1; r++) {
    b->inflight[r]--;
    gr_bit_set (b->touched, r);
  }
  pthread_mutex_unlock (&b->lock);
}

/* Is a region of stripes [s0, s0 + ns) marked in set (count: its
 * count)? */
static bool
any_marked (struct gr_bitmap *b, const uint8_t *set, const uint64_t *count,
            uint64_t s0, uint64_t ns)
{
  uint64_t r, r0 = s0 / b->region, r1 = (s0 + ns - 1) / b->region;
  bool any = false;

  if (__atomic_load_n (count, __ATOMIC_ACQUIRE) == 0)
    return false;
  pthread_mutex_lock (&b->lock);
  for (r = r0; r <= r1 && !any; r++)
    any = gr_bit_test (set, r);
  pthread_mutex_unlock (&b->lock);
  return any;
}

/* The first region at or after r marked in set, or nregions. */
static uint64_t
next_marked (struct gr_bitmap *b, const uint8_t *set, uint64_t r)
{
  pthread_mutex_lock (&b->lock);
  while (r < b->nregions && !gr_bit_test (set, r))
    r++;
  pthread_mutex_unlock (&b->lock);
  return r;
}

/* Region r done (resynced or verified): no longer marked in set; its bit
 * is cleared lazily, as after a write. */
static void
unmark (struct gr_bitmap *b, uint8_t *set, uint64_t *count, uint64_t r)
{
  pthread_mutex_lock (&b->lock);
  if (gr_bit_test (set, r))
    __atomic_sub_fetch (count, 1, __ATOMIC_RELEASE);
  gr_bit_clear (set, r);
  gr_bit_set (b->touched, r);
  pthread_mutex_unlock (&b->lock);
}

bool
gr_bitmap_pending (struct gr_bitmap *b, uint64_t s0, uint64_t ns)
{
  return any_marked (b, b->pending, &b->npending, s0, ns);
}

uint64_t
gr_bitmap_next_pending (struct gr_bitmap *b, uint64_t r)
{
  return next_marked (b, b->pending, r);
}

void
gr_bitmap_resynced (struct gr_bitmap *b, uint64_t r)
{
  unmark (b, b->pending, &b->npending, r);
}

bool
gr_bitmap_suspect (struct gr_bitmap *b, uint64_t s0, uint64_t ns)
{
  return any_marked (b, b->suspect, &b->nsuspect, s0, ns);
}

uint64_t
gr_bitmap_next_suspect (struct gr_bitmap *b, uint64_t r)
{
  return next_marked (b, b->suspect, r);
}

void
gr_bitmap_unsuspect (struct gr_bitmap *b, uint64_t r)
{
  unmark (b, b->suspect, &b->nsuspect, r);
}

/* One clearing pass: a region whose bit is set, with nothing pending or
 * in flight, and no write since the last pass (now: since this pass
 * began), is cleared once the members have been synced (after its last
 * write). */
static void
clear_pass (struct gr_bitmap *b, uint8_t *cand, bool now)
{
  uint8_t *tcand = cand + b->nbytes;    /* the map regions trimmed */
  uint64_t r, ncand = 0, ncleared = 0;
  bool untrim = false;

  memset (cand, 0, b->nbytes);
  pthread_mutex_lock (&b->lock);
  /* A member failed: the regions whose bits are set are in the degraded
   * map on disk before any bit is cleared. */
  if (gr_bitmap_maps_follow_locked (b) &&
      flush_locked (b, ++b->gen) == -1) {
    pthread_mutex_unlock (&b->lock);
    return;
  }
  if (b->maps.kept) {
    memcpy (tcand, b->trimmed, b->maps.bytes);
    for (r = 0; r < b->maps.regions && !untrim; r++)
      untrim = gr_bit_test (tcand, r);
  }
  for (r = 0; r < b->nregions; r++) {
    if (!gr_bit_test (b->bits, r) || gr_bit_test (b->pending, r) ||
        gr_bit_test (b->suspect, r) || b->inflight[r] > 0)
      continue;
    if (gr_bit_test (b->touched, r) && !now)
      gr_bit_clear (b->touched, r);        /* idle for one more pass */
    else {
      gr_bit_clear (b->touched, r);
      gr_bit_set (cand, r);
      ncand++;
    }
  }
  pthread_mutex_unlock (&b->lock);
  if (ncand == 0 && !untrim)
    return;
  /* Everything written to those regions before this pass is durable
   * after this, the block checksums of what was written there included;
   * a write since sets touched or inflight. */
  if (b->cksum && gr_cksum_flush (b->cksum) == -1)
    return;                     /* a member failed: later, without it */
  for (int i = 0; i < b->n; i++)
    if (!gr_members_failed (b->ms, i))
      (void) gr_members_sync (b->ms, i);
  pthread_mutex_lock (&b->lock);
  for (r = 0; r < b->nregions; r++)
    if (gr_bit_test (cand, r) && b->inflight[r] == 0 &&
        !gr_bit_test (b->touched, r) && !gr_bit_test (b->pending, r)) {
      gr_bit_clear (b->bits, r);
      ncleared++;
    }
  /* The trims before the sync are durable: their regions hold zeros. */
  if (untrim && gr_bitmap_maps_untrim_locked (b, tcand))
    ncleared++;
  if (ncleared > 0) {
    b->gen++;
    if (flush_locked (b, b->gen) == 0)
      gr_verbose ("bitmap: %" PRIu64 " regions cleared", ncleared);
  }
  pthread_mutex_unlock (&b->lock);
}

static void *
clear_thread (void *arg)
{
  struct gr_bitmap *b = arg;
  uint8_t *cand = malloc (b->nbytes + b->maps.bytes);

  if (cand == NULL) {
    nbdkit_error ("bitmap: %m: bits will not be cleared");
    return NULL;
  }
  pthread_mutex_lock (&b->lock);
  while (!b->stop) {
    struct timespec t;
    int ms = gpuraid_debug_bitmap_ms > 0 ? gpuraid_debug_bitmap_ms : 5000;

    clock_gettime (CLOCK_REALTIME, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += (long) (ms % 1000) * 1000000;
    if (t.tv_nsec >= 1000000000) {
      t.tv_sec++;
      t.tv_nsec -= 1000000000;
    }
    if (pthread_cond_timedwait (&b->stop_cond, &b->lock, &t) != ETIMEDOUT)
      continue;                 /* stop, or woken early: wait again */
    if (b->stop || gr_members_too_degraded (b->ms))
      continue;
    pthread_mutex_unlock (&b->lock);
    clear_pass (b, cand, false);
    pthread_mutex_lock (&b->lock);
  }
  pthread_mutex_unlock (&b->lock);
  free (cand);
  return NULL;
}

void
gr_bitmap_checkpoint (struct gr_bitmap *b)
{
  uint8_t *cand;

  if (!b->room || gr_members_too_degraded (b->ms))
    return;
  cand = malloc (b->nbytes + b->maps.bytes);
  if (cand == NULL)
    return;                     /* cleared later by the thread */
  clear_pass (b, cand, true);
  free (cand);
}

int
gr_bitmap_start (struct gr_bitmap *b)
{
  int e;

  if (!b->room)
    return 0;
  e = gr_thread_create (&b->thread, NULL, clear_thread, b);
  if (e != 0) {
    errno = e;
    nbdkit_error ("bitmap: pthread_create: %m");
    return -1;
  }
  b->started = true;
  return 0;
}

void
gr_bitmap_close (struct gr_bitmap *b)
{
  if (!b->room || gr_members_read_only_p (b->ms))
    return;
  pthread_mutex_lock (&b->lock);
  if (gr_bitmap_maps_follow_locked (b))
    (void) flush_locked (b, ++b->gen);
  pthread_mutex_unlock (&b->lock);
}
