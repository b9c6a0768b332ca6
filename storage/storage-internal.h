/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the storage library's private header: what its files share
 * (disk.c: the calls of storage.h, local accesses; disk-direct.c:
 * O_DIRECT's rules; remote.c: NBD exports; uring.c: batched reads and
 * direct writes; fullio.c: whole transfers).  Nothing outside storage/
 * includes it. */
#ifndef GPURAID_STORAGE_INTERNAL_H
#define GPURAID_STORAGE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "storage.h"

/* A member's storage (disk.c owns it; uring.c reads fd, remote.c r). */
struct gr_disk {
  char *path;                   /* as given: a path or a URI */
  uint64_t size;
  struct gr_remote *r;          /* remote; else the local file: */
  int fd;
  dev_t dev;
  ino_t ino;
  bool blk;                     /* a block device */
  /* A file in a memory file system (tmpfs, ramfs): its accesses are
   * copies that never wait for a device (disk.c: not through the ring). */
  bool memory;
  /* Opened with O_DIRECT (disk-direct.c): every access's buffer address
   * a multiple of mem_align, its offset and length of off_align (powers
   * of two). */
  bool direct;
  uint32_t mem_align, off_align;
  struct gr_disk_bounced bounced;       /* atomic (disk-direct.c) */
  /* A local file's turn: held by the one thread of this process whose
   * buffered write is in it (disk.c, "turns"). */
  pthread_mutex_t turn;
};

/* --- disk-direct.c: O_DIRECT's rules (of disk.c's module) ---------------
 *
 * Every read and write of a local batch passes gr_direct_prepare before
 * any system call: those on a disk opened with O_DIRECT that are not
 * aligned are served from an aligned bounce buffer, the calling thread's
 * (kept up to 4 MiB) or one for the batch. */

/* Turn O_DIRECT on for d (a local file or device, open): its alignment
 * learnt (statx, else 4096) and tried on a read of its first block.
 * false if refused (d stays buffered); why says. */
bool gr_direct_on (struct gr_disk *d, char *why, size_t whylen);

/* May v go to the system as it is: not a read or write on a disk opened
 * with O_DIRECT, or aligned?  (Asserted before every system call, in
 * uring.c too: inline, so that it calls nothing of disk's.) */
static inline bool
gr_direct_ok (const struct gr_dio *v)
{
  const struct gr_disk *d = v->disk;

  return !d->direct ||
    (v->kind != GR_DIO_READ && v->kind != GR_DIO_WRITE &&
     v->kind != GR_DIO_WRITE_DSYNC) ||
    ((uintptr_t) v->buf % d->mem_align == 0 && v->off % d->off_align == 0 &&
     v->len % d->off_align == 0);
}

/* A batch's accesses that went through the bounce buffer. */
struct gr_bounce_ent {
  struct gr_dio *orig;          /* the caller's access */
  struct gr_dio dio;            /* the aligned one done for it */
  size_t head;                  /* orig's bytes at dio.buf + head */
  bool partial;                 /* a write of part of a block: done by
                                 * gr_direct_finish, after the batch */
};
struct gr_bounce {
  struct gr_bounce_ent *e, stack[8];
  size_t n;
  uint8_t *mem;                 /* the bounce buffer */
  bool own;                     /* mem is this batch's (else the
                                 * thread's, kept) */
};
/* v[0..n) (local accesses): each that O_DIRECT cannot take as it is is
 * replaced in v by an aligned access on the bounce buffer (a write's
 * bytes copied there), or, a write of part of a block, taken out of v;
 * returns the new count.  Out of memory: those accesses end with
 * -ENOMEM, taken out. */
size_t gr_direct_prepare (struct gr_dio **v, size_t n, struct gr_bounce *b);
/* After the I/O of v: the bounced reads copied out, the writes of parts
 * of blocks done one at a time (the blocks at their ends read first);
 * every caller's access has its res. */
void gr_direct_finish (struct gr_bounce *b);

/* --- fullio.c: whole reads and writes of a file ------------------------- */

/* Short transfers and EINTR retried.  Each returns 0, or -errno
 * (-ENODATA: a read past the end; -ENOSPC: a write that made no
 * progress). */
int gr_pread_full (int fd, void *buf, size_t len, uint64_t off);
int gr_pwrite_full (int fd, const void *buf, size_t len, uint64_t off);
/* With pwritev2's flags (RWF_DSYNC); 0 for a plain pwrite. */
int gr_pwrite_flags (int fd, const void *buf, size_t len, uint64_t off,
                     int flags);
/* preadv or pwritev of cnt buffers (iov is used up). */
int gr_prwv_full (int fd, struct iovec *iov, int cnt, uint64_t off,
                  bool write);

/* --- uring.c: batched local I/O through io_uring ------------------------
 *
 * When built with liburing, so that the chunk reads of one plan run in
 * parallel, and the writes to members opened with O_DIRECT (which wait
 * for the device, where buffered writes return once copied).  Without
 * liburing (NOURING=1) the stubs say it is not available. */

/* Is io_uring usable in this build and process? */
bool gr_uring_available (void);

/* Do the n accesses (GR_DIO_READ, GR_DIO_WRITE, GR_DIO_WRITE_DSYNC: with
 * RWF_DSYNC; on local disks, gr_direct_ok), up to the ring depth at a
 * time, in the calling thread's ring.  Each res becomes 0 (all bytes
 * moved) or -errno (-ENODATA: short); with no ring, none is touched.
 * The caller redoes those that did not end with 0. */
void gr_uring_batch (struct gr_dio **v, size_t n);

/* --- remote.c: NBD exports as members -----------------------------------
 *
 * The libnbd client under disk.c, its only user.  Built with libnbd
 * unless NONBD=1 (then the stubs open nothing: GR_REMOTE_NO_NBD).
 *
 * One owner of state: struct gr_remote holds an export's connections.
 * A batch of commands on several exports is sent by gr_remote_start and
 * waited for by gr_remote_finish.
 *
 * Each remote member has up to four connections (one unless the server
 * allows multi-conn: a flush on one then covers the writes of all).  A
 * batch takes one connection of each remote member it touches (in
 * address order, so that batches never wait on each other in a cycle),
 * sends all its commands at once and polls all those connections
 * together until every command has its reply or a member has sent
 * nothing for the timeout (counted from when its commands went out, or
 * from its last reply: a member that hangs never makes the others of the
 * batch time out).  A connection that dies is made again and its failed
 * commands sent again, up to the retry count, with backoff, before the
 * deadline.  A member that times out is closed (its commands can never
 * complete into our buffers after that) and unresponsive from then on:
 * every later access fails at once, as on a dead disk.  An error that
 * the server itself returns (the connection stays up) is not retried: it
 * is the member's error, as EIO from a local disk is. */

/* Was this build made with libnbd? */
bool gr_remote_built (void);

enum gr_remote_open_outcome {
  GR_REMOTE_OPENED,
  GR_REMOTE_CANNOT_OPEN,        /* refused, not found, timed out (why) */
  GR_REMOTE_NO_NBD,             /* built without libnbd */
  GR_REMOTE_READ_ONLY,          /* a read-only export, to be written */
};
/* Connect to uri (libnbd's forms) within timeout_ms and learn its size.
 * *err: an errno; why: one line. */
enum gr_remote_open_outcome gr_remote_open (const char *uri, bool read_only,
                                            unsigned timeout_ms,
                                            unsigned retries,
                                            struct gr_remote **out,
                                            uint64_t *size, int *err,
                                            char *why, size_t whylen);
void gr_remote_close (struct gr_remote *r);

struct gr_remote_batch;
/* Send the n accesses (on remote disks; GR_DIO_SYNC a flush, GR_DIO_HOLE
 * block status); NULL if none could be (every res set then).  res: 0,
 * or -errno (-EOPNOTSUPP: no zero on this export; -ETIMEDOUT); hole: the
 * server said that all of it is unallocated and reads as zeros. */
struct gr_remote_batch *gr_remote_start (struct gr_dio **v, size_t n);
/* Wait for them (retrying, up to the timeout); every res set. */
void gr_remote_finish (struct gr_remote_batch *b);

#endif /* GPURAID_STORAGE_INTERNAL_H */
