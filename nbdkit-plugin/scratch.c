/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - scratch memory for the plans.  See scratch.h. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "log.h"
#include "scratch.h"

#define MiB ((size_t) 1 << 20)
#define HOST_POOL_MAX (1024 * MiB)      /* all page-locked scratch */
#define HOST_ALLOC_MAX (64 * MiB)       /* one page-locked buffer */


_Static_assert (GR_SCRATCH_KEEP >= GR_PLAN_DEGRADED_SCRATCH,
                "a degraded read's plan fits a thread's kept scratch");
/* A thread's buffers: the one it keeps, and the one of the plan running
 * now if that is another (large). */
struct buf {
  void *p;
  size_t size;
  bool pinned;                  /* page-locked, from the pool */
};

struct tls {
  struct gr_scratch *sc;
  struct buf keep, big;
  struct buf begun;             /* the begun plans' (one region each) */
};

/* Page-locked buffers of ended threads (two each: the one it keeps, and
 * its begun plans'), kept for the next threads: nbdkit starts threads
 * with each connection, and allocating page-locked memory is slow and
 * slows the GPU calls of other threads meanwhile (docs/performance.md). */
#define SPARE_MAX 512

/* Large buffers given back, kept mapped for the next large plans within
 * the cap: a partial-stripe write of 10+4 or 16+16 with 64 KiB chunks
 * needs 1.1 to 3 MiB, and each mapped afresh faults in every page. */
#define CACHE_MAX 256
#define BIG_ROUND ((size_t) 256 << 10)  /* large sizes rounded up to */

struct gr_scratch {
  struct gr_coding *coding;
  pthread_key_t key;
  uint64_t cap;
  pthread_mutex_t lock;         /* big_used, cache, spare */
  pthread_cond_t cond;
  uint64_t big_used;            /* large buffers held by plans */
  struct buf cache[CACHE_MAX];  /* large buffers kept: with big_used, */
  int ncache;                   /* within the cap */
  uint64_t cache_bytes;
  uint64_t big_mapped, big_reused;      /* under lock */
  struct buf spare[SPARE_MAX];
  int nspare;
  size_t pool_used;             /* atomic: page-locked bytes (spares
                                 * included) */
  int pool_off;                 /* atomic: an allocation failed */
  uint64_t pinned_new, pinned_taken;    /* atomic: buffers allocated,
                                         * taken over from ended threads */
};

static void buf_free (struct gr_scratch *sc, struct buf *b, bool big);

/* Would a page-locked buffer of size bytes be used, and fit the pool? */
static bool
pinned_wanted (struct gr_scratch *sc, size_t size)
{
  return gr_coding_gpu_usable (sc->coding) &&
    !__atomic_load_n (&sc->pool_off, __ATOMIC_RELAXED) &&
    size <= HOST_ALLOC_MAX &&
    __atomic_load_n (&sc->pool_used, __ATOMIC_RELAXED) + size
    <= HOST_POOL_MAX;
}

/* A spare page-locked buffer of at least size bytes, taken (true), or
 * false; then, if the pool has no room for size more bytes, spares too
 * small are freed to make it. */
static bool
spare_take (struct gr_scratch *sc, size_t size, struct buf *out)
{
  struct buf drop[SPARE_MAX];
  size_t used = __atomic_load_n (&sc->pool_used, __ATOMIC_RELAXED);
  int ndrop = 0;
  bool got = false;

  pthread_mutex_lock (&sc->lock);
  for (int i = 0; i < sc->nspare; i++)
    if (sc->spare[i].size >= size) {
      *out = sc->spare[i];
      sc->spare[i] = sc->spare[--sc->nspare];
      got = true;
      break;
    }
  while (!got && sc->nspare > 0 && used + size > HOST_POOL_MAX) {
    drop[ndrop] = sc->spare[--sc->nspare];
    used -= drop[ndrop++].size;
  }
  pthread_mutex_unlock (&sc->lock);
  for (int i = 0; i < ndrop; i++)
    buf_free (sc, &drop[i], false);
  if (got)
    __atomic_add_fetch (&sc->pinned_taken, 1, __ATOMIC_RELAXED);
  return got;
}

/* A page-locked buffer (from the pool, else from the spares), kept by
 * the spares if there is room, else freed. */
static void
spare_put (struct gr_scratch *sc, struct buf *b)
{
  if (b->pinned) {
    pthread_mutex_lock (&sc->lock);
    if (sc->nspare < SPARE_MAX) {
      sc->spare[sc->nspare++] = *b;
      b->p = NULL;
      b->size = 0;
    }
    pthread_mutex_unlock (&sc->lock);
  }
  buf_free (sc, b, false);
}

/* A page-locked buffer from the pool (*size rounded up to what it
 * holds), or NULL. */
static void *
pinned_alloc (struct gr_scratch *sc, size_t *size)
{
  struct buf b;
  void *p;

  if (!pinned_wanted (sc, *size))
    return NULL;
  /* Sizes up to what a thread keeps anyway are rounded up to it, so
   * that any spare fits any such plan. */
  if (*size < GR_SCRATCH_KEEP)
    *size = GR_SCRATCH_KEEP;
  if (spare_take (sc, *size, &b)) {
    *size = b.size;
    return b.p;
  }
  if (__atomic_add_fetch (&sc->pool_used, *size, __ATOMIC_RELAXED) >
      HOST_POOL_MAX) {
    __atomic_sub_fetch (&sc->pool_used, *size, __ATOMIC_RELAXED);
    return NULL;
  }
  __atomic_add_fetch (&sc->pinned_new, 1, __ATOMIC_RELAXED);
  p = gr_coding_host_alloc (sc->coding, *size);
  if (p == NULL) {
    __atomic_sub_fetch (&sc->pool_used, *size, __ATOMIC_RELAXED);
    if (!__atomic_exchange_n (&sc->pool_off, 1, __ATOMIC_RELAXED))
      gr_debug ("no page-locked memory for scratch (%zu bytes): using "
                "ordinary memory, which the GPU engine stages", *size);
  }
  return p;
}

/* A buffer of size bytes, mapped (big) or from malloc.  false after
 * nbdkit_error. */
static bool
buf_alloc (struct buf *b, size_t size, bool big)
{
  void *p = NULL;

  if (big) {
    p = mmap (NULL, size, PROT_READ | PROT_WRITE,
              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      p = NULL;
  }
  else if (posix_memalign (&p, 4096, size) != 0)
    p = NULL;
  if (p == NULL) {
    nbdkit_error ("scratch: %zu bytes: %m", size);
    errno = ENOMEM;
    return false;
  }
  *b = (struct buf) { .p = p, .size = size, .pinned = false };
  return true;
}

static void
buf_free (struct gr_scratch *sc, struct buf *b, bool big)
{
  if (b->p == NULL)
    return;
  if (b->pinned) {
    gr_coding_host_free (sc->coding, b->p);
    __atomic_sub_fetch (&sc->pool_used, b->size, __ATOMIC_RELAXED);
  }
  else if (big)
    munmap (b->p, b->size);
  else
    free (b->p);
  b->p = NULL;
  b->size = 0;
}

/* A thread ends: its page-locked buffer goes to the spares (if there
 * is room), its others are freed. */
static void
tls_free (void *v)
{
  struct tls *t = v;
  struct gr_scratch *sc;

  if (t == NULL)
    return;
  sc = t->sc;
  spare_put (sc, &t->keep);
  spare_put (sc, &t->begun);
  free (t);
}

struct gr_scratch *
gr_scratch_new (struct gr_coding *coding, uint64_t cap)
{
  struct gr_scratch *sc = calloc (1, sizeof *sc);

  if (sc == NULL || pthread_key_create (&sc->key, tls_free) != 0) {
    nbdkit_error ("scratch: %m");
    free (sc);
    return NULL;
  }
  sc->coding = coding;
  sc->cap = cap;
  pthread_mutex_init (&sc->lock, NULL);
  pthread_cond_init (&sc->cond, NULL);
  return sc;
}

void
gr_scratch_free (struct gr_scratch *sc)
{
  if (sc == NULL)
    return;
  /* The calling thread's; other threads' went with them (at shutdown
   * nbdkit's workers have ended).  No destructor runs after this. */
  tls_free (pthread_getspecific (sc->key));
  pthread_key_delete (sc->key);
  for (int i = 0; i < sc->nspare; i++)
    buf_free (sc, &sc->spare[i], false);
  for (int i = 0; i < sc->ncache; i++)
    buf_free (sc, &sc->cache[i], true);
  if (sc->big_mapped > 0)
    gr_debug ("large scratch: %" PRIu64 " buffers mapped, %" PRIu64
              " plans served from those kept", sc->big_mapped,
              sc->big_reused);
  if (sc->pinned_new > 0)
    gr_debug ("page-locked scratch: %" PRIu64 " buffers allocated, %" PRIu64
              " taken over from threads that ended", sc->pinned_new,
              sc->pinned_taken);
  pthread_mutex_destroy (&sc->lock);
  pthread_cond_destroy (&sc->cond);
  free (sc);
}

static struct tls *
get_tls (struct gr_scratch *sc)
{
  struct tls *t = pthread_getspecific (sc->key);

  if (t == NULL) {
    t = calloc (1, sizeof *t);
    if (t == NULL || pthread_setspecific (sc->key, t) != 0) {
      free (t);
      nbdkit_error ("scratch: %m");
      errno = ENOMEM;
      return NULL;
    }
    t->sc = sc;
  }
  return t;
}

/* The kept buffer k, of at least size bytes: k as it is if it fits
 * (page-locked while a GPU is used: slow to allocate, and the
 * page-locked pool bounds them), else a page-locked one in its place,
 * else (up to GR_SCRATCH_KEEP bytes) one from malloc.  NULL: larger than
 * that and none page-locked, or (*err) after nbdkit_error. */
static void *
keep_get (struct gr_scratch *sc, struct buf *k, size_t size, bool *err)
{
  size_t psize = size;
  void *p;

  *err = false;
  if (k->size >= size && (k->pinned || !pinned_wanted (sc, size)))
    return k->p;
  if ((p = pinned_alloc (sc, &psize)) != NULL) {
    spare_put (sc, k);
    *k = (struct buf) { .p = p, .size = psize, .pinned = true };
    return p;
  }
  if (size > GR_SCRATCH_KEEP)
    return NULL;
  buf_free (sc, k, false);
  if (buf_alloc (k, size < 65536 ? 65536 : size, false))
    return k->p;
  *err = true;
  return NULL;
}

uint8_t *
gr_scratch_get_begun (struct gr_scratch *sc, int slot, size_t size)
{
  struct tls *t;
  uint8_t *p;
  bool err;

  if (slot < 0 || slot >= GR_SCRATCH_BEGUN_SLOTS ||
      size > GR_SCRATCH_BEGUN_SIZE) {
    nbdkit_error ("scratch: begun plan %d of %zu bytes: too large", slot,
                  size);
    errno = EINVAL;
    return NULL;
  }
  t = get_tls (sc);
  if (t == NULL)
    return NULL;
  /* Above slot 0 the lower slots hold their regions: the buffer stays
   * as it is (were it replaced, page-locked now, theirs would go). */
  if (slot > 0 && t->begun.size >= GR_SCRATCH_KEEP)
    p = t->begun.p;
  else if ((p = keep_get (sc, &t->begun, GR_SCRATCH_KEEP, &err)) == NULL)
    return NULL;
  return p + (size_t) slot * GR_SCRATCH_BEGUN_SIZE;
}

uint8_t *
gr_scratch_get (struct gr_scratch *sc, size_t size)
{
  struct tls *t = get_tls (sc);
  void *p;
  bool err;

  if (t == NULL)
    return NULL;
  if ((p = keep_get (sc, &t->keep, size, &err)) != NULL || err)
    return p;
  /* A large one, within the cap: wait while plans hold too much, then
   * a kept one that fits, else a new one, unmapping kept ones to make
   * room. */
  size = (size + BIG_ROUND - 1) / BIG_ROUND * BIG_ROUND;
  {
    struct buf drop[CACHE_MAX];
    int ndrop = 0, best = -1;

    pthread_mutex_lock (&sc->lock);
    while (sc->big_used > 0 && sc->big_used + size > sc->cap)
      pthread_cond_wait (&sc->cond, &sc->lock);
    for (int i = 0; i < sc->ncache; i++)
      if (sc->cache[i].size >= size && sc->cache[i].size <= 2 * size &&
          (best == -1 || sc->cache[i].size < sc->cache[best].size))
        best = i;
    if (best >= 0 && (sc->big_used == 0 ||
                      sc->big_used + sc->cache[best].size <= sc->cap)) {
      t->big = sc->cache[best];
      sc->cache[best] = sc->cache[--sc->ncache];
      sc->cache_bytes -= t->big.size;
      sc->big_used += t->big.size;
      sc->big_reused++;
      pthread_mutex_unlock (&sc->lock);
      return t->big.p;
    }
    while (sc->ncache > 0 &&
           sc->big_used + sc->cache_bytes + size > sc->cap) {
      drop[ndrop] = sc->cache[--sc->ncache];
      sc->cache_bytes -= drop[ndrop++].size;
    }
    sc->big_used += size;
    sc->big_mapped++;
    pthread_mutex_unlock (&sc->lock);
    for (int i = 0; i < ndrop; i++)
      buf_free (sc, &drop[i], true);
  }
  if (!buf_alloc (&t->big, size, true)) {
    pthread_mutex_lock (&sc->lock);
    sc->big_used -= size;
    pthread_cond_broadcast (&sc->cond);
    pthread_mutex_unlock (&sc->lock);
    return NULL;
  }
  return t->big.p;
}

void
gr_scratch_put (struct gr_scratch *sc)
{
  struct tls *t = pthread_getspecific (sc->key);
  struct buf b;

  if (t == NULL || t->big.size == 0)
    return;
  b = t->big;
  t->big = (struct buf) { 0 };
  pthread_mutex_lock (&sc->lock);
  sc->big_used -= b.size;
  if (sc->ncache < CACHE_MAX &&
      sc->big_used + sc->cache_bytes + b.size <= sc->cap) {
    sc->cache[sc->ncache++] = b;
    sc->cache_bytes += b.size;
    b.p = NULL;
  }
  pthread_cond_broadcast (&sc->cond);
  pthread_mutex_unlock (&sc->lock);
  buf_free (sc, &b, true);
}
