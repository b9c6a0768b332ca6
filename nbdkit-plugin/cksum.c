/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the block checksums' cache.  See cksum.h. */
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cksum.h"
#include "format/format.h"
#include "log.h"

/* Pages and the flush's buffer are PAGE-aligned: they go to O_DIRECT
 * members without a bounce (storage.h). */
#define PAGE 4096
#define PER_PAGE (PAGE / 4)             /* blocks a page covers */
#define FLUSH_BATCH 64                  /* pages written at once */

enum page_state { PAGE_FREE, PAGE_LOADING, PAGE_READY };

struct page {
  enum page_state st;
  int member;
  uint32_t attach;              /* gr_members_device when loaded */
  uint64_t pgno;
  bool dirty;                   /* changed since read or written */
  bool ref;                     /* used since the clock hand passed */
  bool writing;                 /* being written: not evicted meanwhile */
  uint32_t *v;                  /* PER_PAGE values, host order */
  int next;                     /* hash chain, -1: end */
};

/* The cache is cut into shards by page (its own lock, pages and clock
 * each), so that threads touching different pages seldom meet. */
#define NSHARD 32

struct shard {
  struct gr_members *ms;
  uint64_t area;
  pthread_mutex_t lock;
  pthread_cond_t cond;          /* a page loaded or written */
  struct page *pg;
  size_t cap, used, hand;
  int *bucket;                  /* hash heads, -1: empty */
  size_t nbucket;               /* a power of two */
};

struct gr_cksum {
  uint64_t data_offset;
  struct shard sh[NSHARD];
};

static void
shard_free (struct shard *cs)
{
  for (size_t i = 0; i < cs->used; i++)
    free (cs->pg[i].v);
  free (cs->pg);
  free (cs->bucket);
  pthread_mutex_destroy (&cs->lock);
  pthread_cond_destroy (&cs->cond);
}

void
gr_cksum_free (struct gr_cksum *c)
{
  if (c == NULL)
    return;
  for (int i = 0; i < NSHARD; i++)
    shard_free (&c->sh[i]);
  free (c);
}

struct gr_cksum *
gr_cksum_new (struct gr_members *ms, uint64_t area, uint64_t data_offset)
{
  struct gr_cksum *c = calloc (1, sizeof *c);
  int j;

  if (c == NULL)
    goto nomem;
  c->data_offset = data_offset;
  for (j = 0; j < NSHARD; j++) {
    struct shard *cs = &c->sh[j];

    cs->ms = ms;
    cs->area = area;
    cs->cap = GR_CKSUM_CACHE / PAGE / NSHARD;
    for (cs->nbucket = 1; cs->nbucket < cs->cap * 2; cs->nbucket *= 2)
      ;
    pthread_mutex_init (&cs->lock, NULL);
    pthread_cond_init (&cs->cond, NULL);
    cs->pg = calloc (cs->cap, sizeof *cs->pg);
    cs->bucket = malloc (cs->nbucket * sizeof *cs->bucket);
    if (cs->pg == NULL || cs->bucket == NULL) {
      for (; j >= 0; j--)
        shard_free (&c->sh[j]);
      free (c);
      goto nomem;
    }
    for (size_t i = 0; i < cs->nbucket; i++)
      cs->bucket[i] = -1;
  }
  return c;
 nomem:
  nbdkit_error ("checksums: out of memory");
  return NULL;
}

/* --- the hash of pages --------------------------------------------------- */

static size_t
hash (const struct shard *cs, int member, uint64_t pgno)
{
  uint64_t h = (pgno * 0x9E3779B97F4A7C15ull) ^ ((uint64_t) member << 48);

  return (size_t) (h ^ (h >> 29)) & (cs->nbucket - 1);
}

static int
find_locked (const struct shard *cs, int member, uint64_t pgno)
{
  int i;

  for (i = cs->bucket[hash (cs, member, pgno)]; i >= 0; i = cs->pg[i].next)
    if (cs->pg[i].member == member && cs->pg[i].pgno == pgno)
      return i;
  return -1;
}

static void
insert_locked (struct shard *cs, int i)
{
  size_t h = hash (cs, cs->pg[i].member, cs->pg[i].pgno);

  cs->pg[i].next = cs->bucket[h];
  cs->bucket[h] = i;
}

static void
remove_locked (struct shard *cs, int i)
{
  int *at = &cs->bucket[hash (cs, cs->pg[i].member, cs->pg[i].pgno)];

  while (*at != i)
    at = &cs->pg[*at].next;
  *at = cs->pg[i].next;
  cs->pg[i].st = PAGE_FREE;
  cs->pg[i].dirty = false;
}

/* --- member I/O (without the lock) --------------------------------------- */

static uint64_t
page_off (const struct shard *cs, uint64_t pgno)
{
  return cs->area + pgno * PAGE;
}

/* Write pages idx[0..n) (marked writing; their values copied to buf
 * under the lock).  Drops and retakes the lock.  false if a write
 * failed (the member has failed). */
static bool
write_pages_locked (struct shard *cs, const int *idx, int n, uint8_t *buf)
{
  struct gr_mio v[FLUSH_BATCH];
  bool ok = true;
  int j;

  for (j = 0; j < n; j++) {
    const struct page *p = &cs->pg[idx[j]];
    uint32_t *le = (uint32_t *) (buf + (size_t) j * PAGE);

    for (int b = 0; b < PER_PAGE; b++)
      le[b] = htole32 (p->v[b]);
    v[j] = (struct gr_mio) { .kind = GR_MIO_WRITE, .member = p->member,
                             .off = page_off (cs, p->pgno), .len = PAGE,
                             .buf = le };
  }
  pthread_mutex_unlock (&cs->lock);
  gr_members_io (cs->ms, v, (size_t) n, GR_MIO_FAIL_MEMBER);
  pthread_mutex_lock (&cs->lock);
  for (j = 0; j < n; j++) {
    cs->pg[idx[j]].writing = false;
    if (v[j].result == GR_MIO_FAILED)
      ok = false;
  }
  pthread_cond_broadcast (&cs->cond);
  return ok;
}

/* Is page p of a device no longer in its slot (a replacement took it)?
 * Its values are not the new device's: never written there. */
static bool
stale (const struct shard *cs, const struct page *p)
{
  return p->attach != gr_members_device (cs->ms, p->member);
}

/* A free slot, or -1 when the lock was dropped (a dirty page written
 * on the way, or all pages busy): look again. */
static int
slot_locked (struct shard *cs)
{
  size_t step;

  if (cs->used < cs->cap) {
    struct page *p = &cs->pg[cs->used];

    p->v = aligned_alloc (PAGE, PAGE);
    if (p->v == NULL)
      return -2;
    return (int) cs->used++;
  }
  for (step = 0; step < 2 * cs->cap; step++) {
    int i = (int) cs->hand;
    struct page *p = &cs->pg[i];

    cs->hand = (cs->hand + 1) % cs->cap;
    if (p->st == PAGE_FREE)
      return i;
    if (p->st != PAGE_READY || p->writing)
      continue;
    if (p->ref) {
      p->ref = false;
      continue;
    }
    if (p->dirty && stale (cs, p)) {
      remove_locked (cs, i);    /* the old device's: never written */
      return i;
    }
    if (p->dirty) {
      static __thread uint8_t buf[PAGE];  /* an O_DIRECT member bounces
                                           * it: a page now and then */

      p->dirty = false;
      p->writing = true;
      write_pages_locked (cs, &i, 1, buf);
      return -1;
    }
    remove_locked (cs, i);
    return i;
  }
  pthread_cond_wait (&cs->cond, &cs->lock);
  return -1;
}

/* The page of member i's block values pgno, ready (under the lock, which
 * it may drop to read it).  -1 if it could not be read or held. */
static int
page_locked (struct shard *cs, int member, uint64_t pgno)
{
  const uint32_t attach = gr_members_device (cs->ms, member);
  struct gr_mio v;
  int i;

  for (;;) {
    i = find_locked (cs, member, pgno);
    if (i >= 0) {
      struct page *p = &cs->pg[i];

      if (p->st == PAGE_LOADING ||
          (p->attach != attach && p->writing)) {
        pthread_cond_wait (&cs->cond, &cs->lock);
        continue;
      }
      if (p->attach != attach) {
        /* The device that was in the slot: its values go with it. */
        remove_locked (cs, i);
        continue;
      }
      p->ref = true;
      return i;
    }
    i = slot_locked (cs);
    if (i == -2) {
      nbdkit_error ("checksums: out of memory");
      return -1;
    }
    if (i < 0)
      continue;
    break;
  }
  cs->pg[i] = (struct page) { .st = PAGE_LOADING, .member = member,
                              .attach = attach, .pgno = pgno, .ref = true,
                              .v = cs->pg[i].v };
  insert_locked (cs, i);
  v = (struct gr_mio) { .kind = GR_MIO_READ, .member = member,
                        .off = page_off (cs, pgno), .len = PAGE,
                        .buf = cs->pg[i].v };
  pthread_mutex_unlock (&cs->lock);
  gr_members_io (cs->ms, &v, 1, GR_MIO_FAIL_MEMBER);
  pthread_mutex_lock (&cs->lock);
  pthread_cond_broadcast (&cs->cond);
  if (v.result != GR_MIO_DONE) {
    remove_locked (cs, i);
    return -1;
  }
  for (int b = 0; b < PER_PAGE; b++)
    cs->pg[i].v[b] = le32toh (cs->pg[i].v[b]);
  cs->pg[i].st = PAGE_READY;
  return i;
}

/* --- the operations ------------------------------------------------------ */

enum op { OP_VERIFY, OP_SET, OP_TOUCH };

/* Compare (OP_VERIFY) or set (OP_SET) the values of blocks [b0, b0 + nb)
 * of member i against or to val[], or mark their pages changed
 * (OP_TOUCH: written again as they are). */
static struct shard *
shard_of (struct gr_cksum *c, int member, uint64_t pgno)
{
  return &c->sh[(pgno + (uint64_t) member * 7) % NSHARD];
}

static enum gr_cksum_outcome
apply (struct gr_cksum *c, enum op op, int member, uint64_t b0,
       const uint32_t *val, size_t nb, uint64_t *bad)
{
  enum gr_cksum_outcome r = GR_CKSUM_MATCH;
  size_t j = 0;

  while (j < nb && r == GR_CKSUM_MATCH) {
    const uint64_t b = b0 + j, pgno = b / PER_PAGE;
    struct shard *cs = shard_of (c, member, pgno);
    size_t in = PER_PAGE - (size_t) (b % PER_PAGE), t;
    struct page *p;
    int i;

    pthread_mutex_lock (&cs->lock);
    i = page_locked (cs, member, pgno);
    if (i < 0) {
      pthread_mutex_unlock (&cs->lock);
      return GR_CKSUM_UNREADABLE;
    }
    p = &cs->pg[i];
    if (in > nb - j)
      in = nb - j;
    if (op == OP_TOUCH)
      p->dirty = true;
    for (t = 0; t < in && op != OP_TOUCH; t++) {
      uint32_t *at = &p->v[(b + t) % PER_PAGE];

      if (op == OP_SET) {
        if (*at != val[j + t]) {
          *at = val[j + t];
          p->dirty = true;
        }
      }
      else if (*at != val[j + t]) {
        r = GR_CKSUM_MISMATCH;
        *bad = c->data_offset + (b + t) * GR_CKSUM_BLOCK;
        break;
      }
    }
    pthread_mutex_unlock (&cs->lock);
    j += in;
  }
  return r;
}

/* Blocks a call computes at once (their values on the stack). */
#define STEP 256

static enum gr_cksum_outcome
each (struct gr_cksum *cs, enum op op, int member, uint64_t off,
      const uint8_t *buf, uint64_t len, uint64_t *bad, uint32_t flip)
{
  uint64_t b0 = (off - cs->data_offset) / GR_CKSUM_BLOCK;
  size_t nb = (size_t) (len / GR_CKSUM_BLOCK), j = 0;
  uint32_t val[STEP];

  while (j < nb) {
    size_t in = nb - j > STEP ? STEP : nb - j, t;
    enum gr_cksum_outcome r;

    for (t = 0; t < in; t++)
      val[t] = buf ? gr_cksum_block (buf + (j + t) * GR_CKSUM_BLOCK) ^ flip
        : 0;
    r = apply (cs, op, member, b0 + j, val, in, bad);
    if (r != GR_CKSUM_MATCH)
      return r;
    j += in;
  }
  return GR_CKSUM_MATCH;
}

enum gr_cksum_outcome
gr_cksum_verify (struct gr_cksum *cs, int i, uint64_t off,
                 const uint8_t *buf, uint64_t len, uint64_t *bad)
{
  return each (cs, OP_VERIFY, i, off, buf, len, bad, 0);
}

enum gr_cksum_outcome
gr_cksum_check (struct gr_cksum *cs, int i, uint64_t off,
                const uint32_t *vals, uint64_t len, uint64_t *bad)
{
  return apply (cs, OP_VERIFY, i, (off - cs->data_offset) / GR_CKSUM_BLOCK,
                vals, (size_t) (len / GR_CKSUM_BLOCK), bad);
}

int
gr_cksum_update (struct gr_cksum *cs, int i, uint64_t off,
                 const uint8_t *buf, uint64_t len)
{
  uint64_t bad;

  return each (cs, OP_SET, i, off, buf, len, &bad, 0) == GR_CKSUM_MATCH
    ? 0 : -1;
}

int
gr_cksum_set (struct gr_cksum *cs, int i, uint64_t off, const uint32_t *vals,
              uint64_t len)
{
  uint64_t bad;

  return apply (cs, OP_SET, i, (off - cs->data_offset) / GR_CKSUM_BLOCK,
                vals, (size_t) (len / GR_CKSUM_BLOCK), &bad)
    == GR_CKSUM_MATCH ? 0 : -1;
}

int
gr_cksum_zeroed (struct gr_cksum *cs, int i, uint64_t off, uint64_t len)
{
  uint64_t bad;

  return each (cs, OP_SET, i, off, NULL, len, &bad, 0) == GR_CKSUM_MATCH
    ? 0 : -1;
}

int
gr_cksum_touch (struct gr_cksum *cs, int i, uint64_t off, uint64_t len)
{
  uint64_t bad;

  return each (cs, OP_TOUCH, i, off, NULL, len, &bad, 0) == GR_CKSUM_MATCH
    ? 0 : -1;
}

int
gr_cksum_poison (struct gr_cksum *cs, int i, uint64_t off,
                 const uint8_t *block)
{
  uint64_t bad;

  return each (cs, OP_SET, i, off, block, GR_CKSUM_BLOCK, &bad,
               0xffffffffu) == GR_CKSUM_MATCH ? 0 : -1;
}

/* One pass over shard cs: every page changed before it began is written
 * when it returns (one being written by another thread: waited for);
 * pages changed meanwhile may or may not be.  false if a write failed. */
static bool
flush_shard (struct shard *cs, uint8_t *buf)
{
  int idx[FLUSH_BATCH], n = 0;
  bool ok = true;
  size_t i;

  pthread_mutex_lock (&cs->lock);
  for (i = 0; i < cs->used; i++) {
    struct page *p = &cs->pg[i];

    while (p->st == PAGE_READY && p->writing)
      pthread_cond_wait (&cs->cond, &cs->lock);
    if (p->st != PAGE_READY || !p->dirty)
      continue;
    if (stale (cs, p)) {
      remove_locked (cs, (int) i);      /* the old device's: dropped */
      continue;
    }
    p->dirty = false;
    p->writing = true;
    idx[n++] = (int) i;
    if (n == FLUSH_BATCH) {
      ok &= write_pages_locked (cs, idx, n, buf);
      n = 0;
    }
  }
  if (n > 0)
    ok &= write_pages_locked (cs, idx, n, buf);
  pthread_mutex_unlock (&cs->lock);
  return ok;
}

int
gr_cksum_flush (struct gr_cksum *c)
{
  uint8_t *buf = aligned_alloc (PAGE, (size_t) FLUSH_BATCH * PAGE);
  bool ok = true;

  if (buf == NULL) {
    nbdkit_error ("checksums: flush: out of memory");
    return -1;
  }
  for (int j = 0; j < NSHARD; j++)
    ok &= flush_shard (&c->sh[j], buf);
  free (buf);
  return ok ? 0 : -1;
}
