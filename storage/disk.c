/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - a member's storage, local or remote: the calls of
 * storage.h, and local accesses.  See storage.h. */
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
#include <sys/uio.h>
#include <sys/vfs.h>
#include <linux/magic.h>

#include "storage-internal.h"
#include "../common/thread.h"

static unsigned remote_timeout_ms = 30000, remote_retries = 3;
static bool use_uring = true, use_turns = true;
static enum gr_disk_direct direct_mode = GR_DIRECT_OFF;

void
gr_disk_set_remote (unsigned timeout_ms, unsigned retries)
{
  remote_timeout_ms = timeout_ms;
  remote_retries = retries;
}

void
gr_disk_set_uring (bool use)
{
  use_uring = use;
}

void
gr_disk_set_turns (bool use)
{
  use_turns = use;
}

void
gr_disk_set_direct (enum gr_disk_direct mode)
{
  direct_mode = mode;
}

bool
gr_disk_remote_built (void)
{
  return gr_remote_built ();
}

bool
gr_disk_is_uri (const char *path)
{
  static const char *const schemes[] = {
    "nbd://", "nbds://", "nbd+unix://", "nbds+unix://", "nbd+vsock://",
    "nbds+vsock://",
  };

  for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++)
    if (strncmp (path, schemes[i], strlen (schemes[i])) == 0)
      return true;
  return false;
}

static enum gr_disk_open_outcome
open_local (struct gr_disk *d, bool read_only, int *err, char *why,
            size_t whylen)
{
  struct stat st;

  d->fd = open (d->path, (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
  if (d->fd == -1 || fstat (d->fd, &st) == -1) {
    *err = errno;
    snprintf (why, whylen, "%s", strerror (errno));
    return GR_DISK_CANNOT_OPEN;
  }
  d->dev = st.st_dev;
  d->ino = st.st_ino;
  d->blk = S_ISBLK (st.st_mode);
  if (d->blk) {
    if (ioctl (d->fd, BLKGETSIZE64, &d->size) == -1) {
      *err = errno;
      snprintf (why, whylen, "BLKGETSIZE64: %s", strerror (errno));
      return GR_DISK_CANNOT_OPEN;
    }
  }
  else if (S_ISREG (st.st_mode)) {
    struct statfs sf;

    d->size = (uint64_t) st.st_size;
    d->memory = fstatfs (d->fd, &sf) == 0 &&
      (sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC);
  }
  else {
    *err = 0;
    snprintf (why, whylen, "not a regular file or block device");
    return GR_DISK_NOT_STORAGE;
  }
  if (direct_mode == GR_DIRECT_ON ||
      (direct_mode == GR_DIRECT_AUTO && d->blk)) {
    if (!gr_direct_on (d, why, whylen)) {
      *err = EINVAL;
      return direct_mode == GR_DIRECT_ON ? GR_DISK_NO_DIRECT
        : GR_DISK_OPENED_BUFFERED;
    }
  }
  return GR_DISK_OPENED;
}

enum gr_disk_open_outcome
gr_disk_open (const char *path, bool read_only, struct gr_disk **out,
              int *err, char *why, size_t whylen)
{
  struct gr_disk *d = calloc (1, sizeof *d);
  enum gr_disk_open_outcome o;

  *out = NULL;
  *err = 0;
  if (d == NULL || (d->path = strdup (path)) == NULL) {
    *err = errno;
    snprintf (why, whylen, "%s", strerror (errno));
    free (d);
    return GR_DISK_CANNOT_OPEN;
  }
  d->fd = -1;
  pthread_mutex_init (&d->turn, NULL);
  if (gr_disk_is_uri (path)) {
    static const enum gr_disk_open_outcome map[] = {
      [GR_REMOTE_OPENED] = GR_DISK_OPENED,
      [GR_REMOTE_CANNOT_OPEN] = GR_DISK_CANNOT_OPEN,
      [GR_REMOTE_NO_NBD] = GR_DISK_NO_NBD,
      [GR_REMOTE_READ_ONLY] = GR_DISK_READ_ONLY_EXPORT,
    };

    /* Never O_DIRECT: how an export caches is its server's choice. */
    o = map[gr_remote_open (path, read_only, remote_timeout_ms,
                            remote_retries, &d->r, &d->size, err, why,
                            whylen)];
  }
  else
    o = open_local (d, read_only, err, why, whylen);
  if (o != GR_DISK_OPENED && o != GR_DISK_OPENED_BUFFERED)
    gr_disk_close (d);
  else
    *out = d;
  return o;
}

void
gr_disk_close (struct gr_disk *d)
{
  if (d == NULL)
    return;
  if (d->fd >= 0)
    close (d->fd);
  gr_remote_close (d->r);
  pthread_mutex_destroy (&d->turn);
  free (d->path);
  free (d);
}

uint64_t
gr_disk_size (const struct gr_disk *d)
{
  return d->size;
}

bool
gr_disk_direct (const struct gr_disk *d)
{
  return d->direct;
}

uint32_t
gr_disk_mem_align (const struct gr_disk *d)
{
  return d->direct && d->mem_align > 1 ? d->mem_align : 1;
}

void
gr_disk_bounced (const struct gr_disk *d, struct gr_disk_bounced *out)
{
  out->accesses = __atomic_load_n (&d->bounced.accesses, __ATOMIC_RELAXED);
  out->bytes = __atomic_load_n (&d->bounced.bytes, __ATOMIC_RELAXED);
  out->partial_writes = __atomic_load_n (&d->bounced.partial_writes,
                                         __ATOMIC_RELAXED);
}

bool
gr_disk_is (const struct gr_disk *d, const char *other)
{
  struct stat st;

  if (gr_disk_is_uri (other) || d->r)
    return strcmp (d->path, other) == 0;
  return stat (other, &st) == 0 && st.st_dev == d->dev &&
    st.st_ino == d->ino;
}

bool
gr_disk_same (const struct gr_disk *a, const struct gr_disk *b)
{
  if (a->r || b->r)
    return strcmp (a->path, b->path) == 0;
  return a->dev == b->dev && a->ino == b->ino;
}

/* --- local accesses ------------------------------------------------------ */

/* Is [off, off + len) of local disk d a hole? */
static bool
local_hole (const struct gr_disk *d, uint64_t off, uint64_t len)
{
  off_t r;

  if (d->blk)
    return false;               /* not asked: counted as data */
  r = lseek (d->fd, (off_t) off, SEEK_DATA);
  if (r == -1)
    return errno == ENXIO;      /* no data from off to the end */
  return (uint64_t) r >= off + len;
}

static void
local_one (struct gr_dio *v)
{
  const int fd = v->disk->fd;
  int r;

  assert (gr_direct_ok (v));
  switch (v->kind) {
  case GR_DIO_HOLE:
    v->hole = local_hole (v->disk, v->off, v->len);
    v->res = 0;
    return;
  case GR_DIO_READ:
    v->res = gr_pread_full (fd, v->buf, v->len, v->off);
    return;
  case GR_DIO_WRITE:
    v->res = gr_pwrite_full (fd, v->buf, v->len, v->off);
    return;
  case GR_DIO_WRITE_DSYNC:
    v->res = gr_pwrite_flags (fd, v->buf, v->len, v->off, RWF_DSYNC);
    return;
  case GR_DIO_SYNC:
    v->res = fdatasync (fd) == -1 ? -errno : 0;
    return;
  case GR_DIO_PUNCH:
  case GR_DIO_ZERO:
    r = fallocate (fd, v->kind == GR_DIO_PUNCH
                   ? FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
                   : FALLOC_FL_ZERO_RANGE, (off_t) v->off, (off_t) v->len);
    if (r == -1 && (errno == EOPNOTSUPP || errno == ENOSYS ||
                    errno == EINVAL || errno == ENODEV))
      v->res = -EOPNOTSUPP;
    else
      v->res = r == -1 ? -errno : 0;
    return;
  }
}

/* --- turns: one writer of this process in a file at a time -------------
 *
 * A buffered write into a file holds the file's lock (i_rwsem) in the
 * kernel, and a writer that finds it held spins while the holder runs.
 * The requests of one GPU batch end together and their threads then
 * write the same member files in the same order: they spun for the locks
 * (docs/performance.md, "Where a write's CPU goes now").  So the buffered
 * writes of a batch into regular files take the file's turn first: a
 * thread whose next file is being written by another goes on to its
 * other files, and sleeps until a turn is free only when every access it
 * has left is behind a busy one.  The accesses of one file keep their
 * order.  -D gpuraid.write_turns=0 (gr_disk_set_turns) writes in the
 * batch's order, for comparison. */
#define TURNS_MAX 64            /* larger batches in order, as given */

static bool
turned (const struct gr_dio *v)
{
  return use_turns && !v->disk->blk && !v->disk->direct &&
    (v->kind == GR_DIO_WRITE || v->kind == GR_DIO_WRITE_DSYNC);
}

/* v[0], and every later access of its disk, in the disk's turn. */
static size_t
in_turn (struct gr_dio **v, size_t n, bool wait)
{
  struct gr_disk *d = v[0]->disk;
  size_t i, kept = 0;

  if (wait)
    pthread_mutex_lock (&d->turn);
  else if (pthread_mutex_trylock (&d->turn) != 0)
    return n;
  for (i = 0; i < n; i++) {
    if (v[i]->disk == d)
      local_one (v[i]);
    else
      v[kept++] = v[i];
  }
  pthread_mutex_unlock (&d->turn);
  return kept;
}

/* The accesses v[0..n), each by local_one; the turned ones in their
 * file's turn (v is used up). */
static void
by_turns (struct gr_dio **v, size_t n)
{
  size_t i, j, kept, was;

  if (n > TURNS_MAX) {
    for (i = 0; i < n; i++)
      local_one (v[i]);
    return;
  }
  while (n > 0) {
    was = n;
    i = kept = 0;
    while (i < n) {
      /* behind an access of its disk still waiting: keeps its place */
      for (j = 0; j < kept && v[j]->disk != v[i]->disk; j++)
        ;
      if (j < kept)
        v[kept++] = v[i++];
      else if (!turned (v[i]))
        local_one (v[i++]);
      else {
        const size_t left = in_turn (v + i, n - i, false);

        if (left == n - i)
          v[kept++] = v[i++];   /* busy */
        else
          n = i + left;         /* v[i..n) now what its disk left */
      }
    }
    n = kept;
    if (n == was)               /* every one behind a busy file */
      n = in_turn (v, n, true);
  }
}

/* Batches of at least PAR_BYTES (a rebuild's, a scrub's, a large
 * request's) are done by up to PAR_THREADS threads at once, each taking
 * all of one member's accesses: I/O that hits the page cache (tmpfs,
 * buffered files) is a copy in the thread that asks, so one thread moves
 * what one core copies, and writes to one file take its lock one at a
 * time (docs/performance.md, bench-rebuild).  A member's reads (writes)
 * that follow each other on it are one preadv (pwritev). */
#define PAR_BYTES ((uint64_t) 8 << 20)
#define PAR_THREADS 16
#define PAR_IOV 256                     /* buffers per preadv, pwritev */

struct par {
  struct gr_dio **v;            /* sorted by member, then offset */
  size_t *group;                /* ngroups + 1 starts in v: a member's */
  size_t ngroups;
  size_t next;                  /* atomic: the next group to do */
};

static int
by_disk_off (const void *a, const void *b)
{
  const struct gr_dio *x = *(struct gr_dio *const *) a;
  const struct gr_dio *y = *(struct gr_dio *const *) b;

  if (x->disk != y->disk)
    return (uintptr_t) x->disk < (uintptr_t) y->disk ? -1 : 1;
  return x->off < y->off ? -1 : x->off > y->off;
}

/* v[0..n): one member's accesses, by offset. */
static void
par_group (struct gr_dio **v, size_t n)
{
  struct iovec iov[PAR_IOV];
  size_t i = 0, j, c;

  while (i < n) {
    const enum gr_dio_kind kind = v[i]->kind;

    if (kind != GR_DIO_READ && kind != GR_DIO_WRITE) {
      local_one (v[i++]);
      continue;
    }
    for (j = i + 1; j < n && j - i < PAR_IOV && v[j]->kind == kind &&
           v[j]->off == v[j - 1]->off + v[j - 1]->len; j++)
      ;
    if (j - i == 1) {
      local_one (v[i++]);
      continue;
    }
    for (c = i; c < j; c++) {
      assert (gr_direct_ok (v[c]));
      iov[c - i] = (struct iovec) { .iov_base = v[c]->buf,
                                    .iov_len = v[c]->len };
    }
    if (gr_prwv_full (v[i]->disk->fd, iov, (int) (j - i), v[i]->off,
                      kind == GR_DIO_WRITE) == 0)
      for (c = i; c < j; c++)
        v[c]->res = 0;
    else                        /* each on its own: each its result */
      for (c = i; c < j; c++)
        local_one (v[c]);
    i = j;
  }
}

static void *
par_worker (void *arg)
{
  struct par *p = arg;
  size_t g;

  while ((g = __atomic_fetch_add (&p->next, 1, __ATOMIC_RELAXED)) <
         p->ngroups)
    par_group (p->v + p->group[g], p->group[g + 1] - p->group[g]);
  return NULL;
}

/* Every entry, each member's by one of several threads (the caller one
 * of them).  false if out of memory (nothing done). */
static bool
par_io (struct gr_dio **v, size_t n)
{
  struct par p = { .v = malloc (n * sizeof *v),
                   .group = malloc ((n + 1) * sizeof *p.group) };
  pthread_t t[PAR_THREADS - 1];
  size_t nt = 0, i;

  if (p.v == NULL || p.group == NULL) {
    free (p.v);
    free (p.group);
    return false;
  }
  memcpy (p.v, v, n * sizeof *v);
  qsort (p.v, n, sizeof *p.v, by_disk_off);
  for (i = 0; i < n; i++)
    if (i == 0 || p.v[i]->disk != p.v[i - 1]->disk)
      p.group[p.ngroups++] = i;
  p.group[p.ngroups] = n;
  while (nt < PAR_THREADS - 1 && nt + 1 < p.ngroups &&
         gr_thread_create (&t[nt], NULL, par_worker, &p) == 0)
    nt++;
  par_worker (&p);
  while (nt > 0)
    pthread_join (t[--nt], NULL);
  free (p.v);
  free (p.group);
  return true;
}

/* Does v go through the ring with the batch's others?  Reads, and the
 * writes of members opened with O_DIRECT (which wait for the device);
 * buffered writes one by one (through io_uring they were measured
 * slower: docs/performance.md, make bench of the executor).  Not the
 * accesses of files in memory (tmpfs): the kernel cannot do them at once
 * in the ring (tmpfs takes no RWF_NOWAIT), so each would go to one of
 * io_uring's worker threads and back, for a copy that waits for no
 * device (docs/performance.md, "Members in memory read without the
 * ring"). */
static bool
ringed (const struct gr_dio *v)
{
  return !v->disk->memory &&
    (v->kind == GR_DIO_READ ||
     (v->disk->direct && (v->kind == GR_DIO_WRITE ||
                          v->kind == GR_DIO_WRITE_DSYNC)));
}

/* The local entries (O_DIRECT's bounced first): several reads, and
 * direct writes, together through io_uring; what it could not do and
 * the rest one by one. */
static void
local_io (struct gr_dio **v, size_t n)
{
  struct gr_dio *stackr[32], **rv = NULL;
  struct gr_bounce bounce;
  uint64_t bytes = 0;
  size_t i, nr = 0;
  bool batched = false;

  n = gr_direct_prepare (v, n, &bounce);
  for (i = 0; i < n && bytes < PAR_BYTES; i++)
    bytes += v[i]->len;
  if (bytes >= PAR_BYTES && n >= 2 && par_io (v, n))
    goto out;
  for (i = 0; i < n && nr < 2; i++)
    nr += ringed (v[i]);
  if (nr >= 2 && use_uring && gr_uring_available ())
    rv = n <= 32 ? stackr : malloc (n * sizeof *rv);
  nr = 0;
  if (rv) {
    for (i = 0; i < n; i++) {
      v[i]->res = 1;            /* not done yet */
      if (ringed (v[i]))
        rv[nr++] = v[i];
    }
    gr_uring_batch (rv, nr);
    if (rv != stackr)
      free (rv);
    batched = true;
  }
  for (i = 0, nr = 0; i < n; i++)
    if (!batched || v[i]->res != 0)
      v[nr++] = v[i];           /* in order: the bounce keeps its own */
  by_turns (v, nr);
 out:
  gr_direct_finish (&bounce);
}

void
gr_disk_io (struct gr_dio *v, size_t n)
{
  struct gr_dio *stackl[32], *stackr[32], **loc, **rem;
  struct gr_remote_batch *b = NULL;
  size_t i, nl = 0, nrem = 0;
  const bool small = n <= 32;

  loc = small ? stackl : malloc (n * sizeof *loc);
  rem = small ? stackr : malloc (n * sizeof *rem);
  if (loc == NULL || rem == NULL) {
    for (i = 0; i < n; i++)
      v[i].res = -ENOMEM;
    goto out;
  }
  for (i = 0; i < n; i++) {
    if (v[i].disk->r)
      rem[nrem++] = &v[i];
    else
      loc[nl++] = &v[i];
  }
  /* The remote accesses go out first and are in flight while the local
   * ones run. */
  if (nrem)
    b = gr_remote_start (rem, nrem);
  if (nl)
    local_io (loc, nl);
  gr_remote_finish (b);
 out:
  if (!small) {
    free (loc);
    free (rem);
  }
}

static int
one (struct gr_disk *d, enum gr_dio_kind kind, void *buf, uint64_t len,
     uint64_t off)
{
  struct gr_dio v = { .disk = d, .kind = kind, .buf = buf, .len = len,
                      .off = off };

  gr_disk_io (&v, 1);
  return v.res;
}

bool
gr_disk_hole (struct gr_disk *d, uint64_t off, uint64_t len)
{
  struct gr_dio v = { .disk = d, .kind = GR_DIO_HOLE, .len = len,
                      .off = off };

  gr_disk_io (&v, 1);
  return v.res == 0 && v.hole;
}

int
gr_disk_pread (struct gr_disk *d, void *buf, uint64_t len, uint64_t off)
{
  return one (d, GR_DIO_READ, buf, len, off);
}

int
gr_disk_pwrite (struct gr_disk *d, const void *buf, uint64_t len,
                uint64_t off)
{
  return one (d, GR_DIO_WRITE, (void *) buf, len, off);
}

int
gr_disk_sync (struct gr_disk *d)
{
  return one (d, GR_DIO_SYNC, NULL, 0, 0);
}

int
gr_disk_zero (struct gr_disk *d, uint64_t off, uint64_t len)
{
  /* bss, not in the file; aligned for O_DIRECT */
  static uint8_t zeros[1024 * 1024] __attribute__ ((aligned (4096)));
  int r;

  if (len == 0)
    return 0;
  r = one (d, GR_DIO_PUNCH, NULL, len, off);
  if (r != -EOPNOTSUPP)
    return r;
  if (d->blk) {
    uint64_t range[2] = { off, len };

    if (ioctl (d->fd, BLKZEROOUT, range) == 0)
      return 0;
  }
  while (len > 0) {
    const uint64_t n = len < sizeof zeros ? len : sizeof zeros;

    r = gr_disk_pwrite (d, zeros, n, off);
    if (r < 0)
      return r;
    off += n;
    len -= n;
  }
  return 0;
}
