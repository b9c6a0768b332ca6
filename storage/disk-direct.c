/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - O_DIRECT's rules for local members: their alignment, and the
 * bounce buffer for the accesses that do not meet it.  Part of disk.c's
 * module; see storage.h (gr_disk_set_direct) and storage-internal.h. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "storage-internal.h"

/* A thread keeps a bounce buffer of up to this much for its next batch
 * (a client's 1 MiB request fits); a batch that needs more gets one of
 * its own, freed after it. */
#define KEEP ((size_t) 4 << 20)
/* Where the kernel does not say (statx without STATX_DIOALIGN: tmpfs,
 * older kernels), 4096, which every device of 512 or 4096-byte sectors
 * takes. */
#define SAFE_ALIGN 4096u

static bool
pow2 (uint32_t x)
{
  return x != 0 && (x & (x - 1)) == 0;
}

bool
gr_direct_on (struct gr_disk *d, char *why, size_t whylen)
{
  const int fl = fcntl (d->fd, F_GETFL);
  struct statx sx;
  uint32_t mem = SAFE_ALIGN, off = SAFE_ALIGN;
  void *probe = NULL;
  int ss, r;

  /* The same checks as open (2) with O_DIRECT (FMODE_CAN_ODIRECT). */
  if (fl == -1 || fcntl (d->fd, F_SETFL, fl | O_DIRECT) == -1) {
    snprintf (why, whylen, "O_DIRECT refused: %s", strerror (errno));
    return false;
  }
  if (statx (d->fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 &&
      (sx.stx_mask & STATX_DIOALIGN)) {
    if (sx.stx_dio_offset_align == 0) {
      snprintf (why, whylen, "O_DIRECT refused: the file system does not "
                "do direct I/O on it (statx)");
      goto refused;
    }
    mem = sx.stx_dio_mem_align;
    off = sx.stx_dio_offset_align;
  }
  else if (d->blk && ioctl (d->fd, BLKSSZGET, &ss) == 0 &&
           (uint32_t) ss > off)
    mem = off = (uint32_t) ss;
  if (mem == 0)
    mem = 1;
  if (!pow2 (mem) || !pow2 (off) || mem > (1u << 20) || off > (1u << 20)) {
    snprintf (why, whylen, "O_DIRECT refused: alignment %u (memory) and %u "
              "(offsets) not powers of two up to 1 MiB", mem, off);
    goto refused;
  }
  /* Some file systems take O_DIRECT at open and refuse the I/O: read the
   * first block (nothing is written). */
  if (d->size >= off) {
    const size_t len = off < SAFE_ALIGN && d->size >= SAFE_ALIGN
      ? SAFE_ALIGN : off;

    if (posix_memalign (&probe, mem < SAFE_ALIGN ? SAFE_ALIGN : mem,
                        len) != 0) {
      snprintf (why, whylen, "O_DIRECT: out of memory");
      goto refused;
    }
    r = gr_pread_full (d->fd, probe, len, 0);
    if (r == -EINVAL) {
      snprintf (why, whylen, "O_DIRECT refused: a read of its first %zu "
                "bytes failed: %s", len, strerror (-r));
      free (probe);
      goto refused;
    }
    free (probe);
  }
  d->direct = true;
  d->mem_align = mem;
  d->off_align = off;
  return true;

 refused:
  (void) fcntl (d->fd, F_SETFL, fl);
  return false;
}

static bool
range_aligned (const struct gr_disk *d, uint64_t off, uint64_t len)
{
  return off % d->off_align == 0 && len % d->off_align == 0;
}

/* --- the bounce buffer --------------------------------------------------- */

struct kept {
  void *mem;
  size_t size;
};

static pthread_key_t kept_key;
static pthread_once_t kept_once = PTHREAD_ONCE_INIT;
static int kept_key_ok;

static void
kept_free (void *p)
{
  struct kept *k = p;

  if (k) {
    free (k->mem);
    free (k);
  }
}

static void
kept_key_init (void)
{
  kept_key_ok = pthread_key_create (&kept_key, kept_free) == 0;
}

/* size bytes aligned to align (a power of two, >= 4096): the thread's
 * kept buffer where it fits (*own false), else one of the caller's to
 * free (*own true).  NULL if out of memory. */
static uint8_t *
bounce_get (size_t size, size_t align, bool *own)
{
  struct kept *k = NULL;
  void *p;

  *own = false;
  pthread_once (&kept_once, kept_key_init);
  if (size <= KEEP && align == SAFE_ALIGN && kept_key_ok) {
    k = pthread_getspecific (kept_key);
    if (k == NULL && (k = calloc (1, sizeof *k)) != NULL &&
        pthread_setspecific (kept_key, k) != 0) {
      free (k);
      k = NULL;
    }
    if (k && k->size >= size)
      return k->mem;
  }
  if (posix_memalign (&p, align, size ? size : align) != 0)
    return NULL;
  if (k) {
    free (k->mem);
    k->mem = p;
    k->size = size;
  }
  else
    *own = true;
  return p;
}

static size_t
round_up (uint64_t x, uint64_t a)
{
  return (size_t) ((x + a - 1) / a * a);
}

static uint32_t
buf_align (const struct gr_disk *d)
{
  return d->mem_align > SAFE_ALIGN ? d->mem_align : SAFE_ALIGN;
}

size_t
gr_direct_prepare (struct gr_dio **v, size_t n, struct gr_bounce *b)
{
  size_t i, j, total = 0, at = 0, align = SAFE_ALIGN;

  b->e = b->stack;
  b->n = 0;
  b->mem = NULL;
  b->own = false;
  for (i = 0; i < n; i++)
    if (!gr_direct_ok (v[i])) {
      if (buf_align (v[i]->disk) > align)
        align = buf_align (v[i]->disk);
      b->n++;
    }
  if (b->n == 0)
    return n;
  /* Each access's blocks, at a multiple of the largest alignment. */
  for (i = 0; i < n; i++)
    if (!gr_direct_ok (v[i])) {
      const struct gr_disk *d = v[i]->disk;
      const uint64_t a = v[i]->off / d->off_align * d->off_align;

      total += round_up (round_up (v[i]->off + v[i]->len, d->off_align) - a,
                         align);
    }
  if (b->n > sizeof b->stack / sizeof b->stack[0])
    b->e = malloc (b->n * sizeof *b->e);
  if (b->e)
    b->mem = bounce_get (total, align, &b->own);
  b->n = 0;
  for (i = j = 0; i < n; i++) {
    struct gr_dio *o = v[i];
    struct gr_disk *d = o->disk;
    struct gr_bounce_ent *e;
    uint64_t a;

    if (gr_direct_ok (o)) {
      v[j++] = o;
      continue;
    }
    if (b->mem == NULL) {
      o->res = -ENOMEM;
      continue;
    }
    e = &b->e[b->n++];
    a = o->off / d->off_align * d->off_align;
    *e = (struct gr_bounce_ent) {
      .orig = o, .head = (size_t) (o->off - a),
      .partial = o->kind != GR_DIO_READ && !range_aligned (d, o->off, o->len),
      .dio = { .disk = d, .kind = o->kind, .buf = b->mem + at, .off = a,
               .len = round_up (o->off + o->len, d->off_align) - a },
    };
    at += round_up (e->dio.len, align);
    __atomic_add_fetch (&d->bounced.accesses, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch (&d->bounced.bytes, o->len, __ATOMIC_RELAXED);
    if (e->partial) {
      __atomic_add_fetch (&d->bounced.partial_writes, 1, __ATOMIC_RELAXED);
      continue;                 /* after the batch */
    }
    if (o->kind != GR_DIO_READ)
      memcpy (e->dio.buf, o->buf, o->len);
    v[j++] = &e->dio;
  }
  if (b->mem == NULL && b->e != b->stack) {
    free (b->e);
    b->e = b->stack;
  }
  return j;
}

/* e's write of part of a block: the blocks at its ends read, its bytes
 * put between, the whole written.  0 or -errno. */
static int
partial_write (struct gr_bounce_ent *e)
{
  const struct gr_disk *d = e->dio.disk;
  const size_t A = d->off_align, len = e->dio.len;
  uint8_t *p = e->dio.buf;
  int r;

  assert (gr_direct_ok (&e->dio));
  if (e->head && (r = gr_pread_full (d->fd, p, A, e->dio.off)) < 0)
    return r;
  if ((e->head + e->orig->len) % A && (len > A || e->head == 0) &&
      (r = gr_pread_full (d->fd, p + len - A, A, e->dio.off + len - A)) < 0)
    return r;
  memcpy (p + e->head, e->orig->buf, e->orig->len);
  return gr_pwrite_flags (d->fd, p, len, e->dio.off,
                          e->dio.kind == GR_DIO_WRITE_DSYNC ? RWF_DSYNC : 0);
}

void
gr_direct_finish (struct gr_bounce *b)
{
  size_t i;

  for (i = 0; i < b->n; i++) {
    struct gr_bounce_ent *e = &b->e[i];

    if (e->partial)
      e->orig->res = partial_write (e);
    else {
      e->orig->res = e->dio.res;
      if (e->dio.res == 0 && e->orig->kind == GR_DIO_READ)
        memcpy (e->orig->buf, (uint8_t *) e->dio.buf + e->head,
                e->orig->len);
    }
  }
  if (b->own)
    free (b->mem);
  if (b->e != b->stack)
    free (b->e);
}
