/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - batched member I/O through io_uring: reads, and the writes
 * of members opened with O_DIRECT.  See storage-internal.h.
 *
 * One ring per nbdkit worker thread, made on first use (after nbdkit's
 * fork) and freed when the thread exits.  On any unexpected ring error
 * the thread's ring is drained, closed and not used again; the
 * accesses not done report an error and the caller redoes them with
 * pread or pwrite. */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "storage-internal.h"

#ifdef GR_HAVE_URING
#include <liburing.h>

#define RING_DEPTH 64

struct ring {
  struct io_uring r;
  int ok;                       /* 1 usable, 0 broken or never set up */
};

static pthread_key_t ring_key;
static pthread_once_t ring_once = PTHREAD_ONCE_INIT;
static int ring_key_ok;
static int uring_disabled;      /* atomic: io_uring_queue_init failed */

static void
ring_free (void *p)
{
  struct ring *rg = p;

  if (rg) {
    if (rg->ok)
      io_uring_queue_exit (&rg->r);
    free (rg);
  }
}

static void
ring_key_init (void)
{
  ring_key_ok = pthread_key_create (&ring_key, ring_free) == 0;
}

static struct ring *
get_ring (void)
{
  struct ring *rg;

  pthread_once (&ring_once, ring_key_init);
  if (!ring_key_ok || __atomic_load_n (&uring_disabled, __ATOMIC_RELAXED))
    return NULL;
  rg = pthread_getspecific (ring_key);
  if (rg == NULL) {
    rg = calloc (1, sizeof *rg);
    if (rg == NULL)
      return NULL;
    if (pthread_setspecific (ring_key, rg) != 0) {
      free (rg);
      return NULL;
    }
    if (io_uring_queue_init (RING_DEPTH, &rg->r, 0) == 0)
      rg->ok = 1;
    else
      /* Not supported here (old kernel, seccomp): pread from now on. */
      __atomic_store_n (&uring_disabled, 1, __ATOMIC_RELAXED);
  }
  return rg->ok ? rg : NULL;
}

bool
gr_uring_available (void)
{
  return get_ring () != NULL;
}

static void
reap (struct ring *rg, struct gr_dio **v, size_t *inflight, int wait)
{
  struct io_uring_cqe *cqe;

  while (*inflight > 0) {
    int r = wait ? io_uring_wait_cqe (&rg->r, &cqe)
      : io_uring_peek_cqe (&rg->r, &cqe);
    struct gr_dio *io;

    if (r == -EINTR)
      continue;
    if (r != 0)
      return;
    io = v[io_uring_cqe_get_data64 (cqe)];
    if (cqe->res < 0)
      io->res = cqe->res;
    else if ((uint64_t) cqe->res != io->len)
      io->res = -ENODATA;
    else
      io->res = 0;
    io_uring_cqe_seen (&rg->r, cqe);
    (*inflight)--;
    wait = 0;
  }
}

void
gr_uring_batch (struct gr_dio **v, size_t n)
{
  struct ring *rg = get_ring ();
  size_t next = 0, pending = 0, inflight = 0, i;
  int r;

  if (rg == NULL)
    return;
  for (i = 0; i < n; i++)
    v[i]->res = -EINPROGRESS;
  while (next < n || pending > 0 || inflight > 0) {
    while (next < n && pending + inflight < RING_DEPTH) {
      struct io_uring_sqe *sqe = io_uring_get_sqe (&rg->r);

      if (sqe == NULL)
        break;
      assert (gr_direct_ok (v[next]));
      if (v[next]->kind == GR_DIO_READ)
        io_uring_prep_read (sqe, v[next]->disk->fd, v[next]->buf,
                            (unsigned) v[next]->len, v[next]->off);
      else {
        io_uring_prep_write (sqe, v[next]->disk->fd, v[next]->buf,
                             (unsigned) v[next]->len, v[next]->off);
        if (v[next]->kind == GR_DIO_WRITE_DSYNC)
          sqe->rw_flags = RWF_DSYNC;
      }
      io_uring_sqe_set_data64 (sqe, next);
      next++;
      pending++;
    }
    if (pending > 0) {
      r = io_uring_submit (&rg->r);
      if (r == -EINTR || r == -EAGAIN || r == -EBUSY) {
        if (inflight == 0 && r != -EINTR)
          goto broken;          /* no progress possible */
      }
      else if (r < 0)
        goto broken;
      else {
        pending -= (size_t) r;
        inflight += (size_t) r;
      }
    }
    reap (rg, v, &inflight, 1);
  }
  return;

 broken:
  /* Wait for what the kernel has, then drop the ring (the SQEs never
   * submitted die with it); the accesses left report EIO. */
  reap (rg, v, &inflight, 1);
  io_uring_queue_exit (&rg->r);
  rg->ok = 0;
  for (i = 0; i < n; i++)
    if (v[i]->res == -EINPROGRESS)
      v[i]->res = -EIO;
}

#else /* !GR_HAVE_URING */

bool
gr_uring_available (void)
{
  return false;
}

void
gr_uring_batch (struct gr_dio **v, size_t n)
{
}

#endif
