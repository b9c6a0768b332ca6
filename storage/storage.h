/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the storage library (storage/, libgrstorage.a): a member's
 * storage, a local file or block device or an NBD export on another
 * host, behind one set of calls.  Its one public header; the files
 * share storage-internal.h.
 *
 * A member= (spare=, replace=, gpuraidctl replace) that libnbd takes for
 * an NBD URI (nbd://, nbds://, nbd+unix://, ...) is remote; anything else
 * is a local path.  gr_disk_io does a batch of accesses together: those
 * on remote members are sent at once (several in flight per member, all
 * members in parallel) and waited for while the local ones run (reads
 * through io_uring, large batches on several threads).
 *
 * A library (STYLE 3.4): no nbdkit, no printing, no exit; results are
 * -errno, open failures an outcome and a one-line reason.  The plugin
 * and gpuraidctl (which examines remote members too) link it. */
#ifndef GPURAID_STORAGE_H
#define GPURAID_STORAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gr_disk;

/* Was this build made with libnbd (remote members)? */
bool gr_disk_remote_built (void);
/* Is path an NBD URI (a remote member)? */
bool gr_disk_is_uri (const char *path);

/* Remote members: an access (its retries included) that has not ended
 * after timeout_ms fails with -ETIMEDOUT; a lost connection is made
 * again up to retries times, with backoff, within that time.  Set once,
 * before the first open. */
void gr_disk_set_remote (unsigned timeout_ms, unsigned retries);

/* Local reads of a batch go through io_uring where the build and the
 * kernel allow (the default), and the writes of members opened with
 * O_DIRECT; use == false: one by one with pread and pwrite (for
 * comparison: the plugin's -D gpuraid.no_uring=1).  Set once, before the
 * first access. */
void gr_disk_set_uring (bool use);

/* The buffered writes of a batch into local files each in its file's
 * turn, one writer of the process in a file at a time, a thread going
 * on to its other files while one is busy (the default); use == false:
 * in the batch's order (for comparison: -D gpuraid.write_turns=0).  Set
 * once, before the first access. */
void gr_disk_set_turns (bool use);

/* Whether local members (files, block devices) are opened with O_DIRECT,
 * below the page cache (the plugin's direct=); NBD exports are the
 * server's business.  Set once, before the first open (default off).
 *
 * With O_DIRECT every access must have its buffer address, offset and
 * length aligned (statx's STATX_DIOALIGN where the kernel says, else 4096
 * for all three; EINVAL otherwise, which would fail a member).  The
 * callers need not care: an access that is not aligned goes through an
 * aligned bounce buffer of this library's (its part of a block read
 * whole; a write of part of a block reads the block first, after the
 * batch's other accesses, one such write at a time: the caller must not
 * write other bytes of that block meanwhile, as stripe locks see to),
 * and no O_DIRECT system call is issued unaligned (asserted).  Durability
 * is as buffered: GR_DIO_SYNC is fdatasync (the device's cache),
 * GR_DIO_WRITE_DSYNC a write with RWF_DSYNC (FUA). */
enum gr_disk_direct {
  GR_DIRECT_OFF,                /* buffered */
  GR_DIRECT_ON,                 /* O_DIRECT, or the open fails */
  GR_DIRECT_AUTO,               /* O_DIRECT for block devices, as md lives
                                 * below the page cache; buffered for
                                 * files, and for a device that refuses
                                 * it */
};
void gr_disk_set_direct (enum gr_disk_direct mode);

enum gr_disk_open_outcome {
  GR_DISK_OPENED,
  GR_DISK_CANNOT_OPEN,          /* not found, refused, timed out... (why) */
  GR_DISK_NOT_STORAGE,          /* not a regular file or block device */
  GR_DISK_NO_NBD,               /* a URI, and this build has no libnbd */
  GR_DISK_READ_ONLY_EXPORT,     /* the export is read-only, and we write */
  GR_DISK_NO_DIRECT,            /* direct=on, and the file or device
                                 * refuses O_DIRECT (why) */
  GR_DISK_OPENED_BUFFERED,      /* opened, buffered: direct=auto, and the
                                 * device refuses O_DIRECT (why) */
};
/* Open path (read-write unless read_only).  *err: an errno for the
 * failure (0 when none fits); why: one line for the log. */
enum gr_disk_open_outcome gr_disk_open (const char *path, bool read_only,
                                        struct gr_disk **out, int *err,
                                        char *why, size_t whylen);
void gr_disk_close (struct gr_disk *d);

uint64_t gr_disk_size (const struct gr_disk *d);
/* Was d opened with O_DIRECT? */
bool gr_disk_direct (const struct gr_disk *d);
/* The alignment of buffer addresses d's accesses need to skip the bounce
 * buffer (a power of two; 1 where not opened with O_DIRECT). */
uint32_t gr_disk_mem_align (const struct gr_disk *d);
/* What O_DIRECT's alignment cost on d so far: accesses that went through
 * the bounce buffer, their bytes, and the writes of parts of blocks
 * among them (each read its block first). */
struct gr_disk_bounced {
  uint64_t accesses, bytes, partial_writes;
};
void gr_disk_bounced (const struct gr_disk *d, struct gr_disk_bounced *out);
/* Is other the same storage as d: the same file or device, or the same
 * URI?  other is a path, not opened. */
bool gr_disk_is (const struct gr_disk *d, const char *other);
bool gr_disk_same (const struct gr_disk *a, const struct gr_disk *b);

enum gr_dio_kind {
  GR_DIO_READ, GR_DIO_WRITE,
  GR_DIO_WRITE_DSYNC,           /* durable when done (RWF_DSYNC; FUA) */
  GR_DIO_PUNCH,                 /* reads back zeros, space may go */
  GR_DIO_ZERO,                  /* reads back zeros, space stays */
  GR_DIO_SYNC,                  /* fdatasync; NBD flush (off, len unused) */
  GR_DIO_HOLE,                  /* is it all a hole? (hole; buf unused) */
};
/* One access: the one descriptor from here down to the local file, the
 * ring and the NBD connection (they take it as it is). */
struct gr_dio {
  struct gr_disk *disk;
  enum gr_dio_kind kind;
  void *buf;
  uint64_t off, len;
  int res;                      /* 0, or -errno: -ENODATA a short read,
                                 * -EOPNOTSUPP a punch or zero the
                                 * member cannot do, -ETIMEDOUT */
  bool hole;                    /* GR_DIO_HOLE, res 0: all of it is
                                 * known to be a hole (gr_disk_hole) */
};

/* Is [off, off + len) known to be a hole (reads as zeros, nothing
 * allocated)?  Asked of local files (SEEK_DATA) and remote members (NBD
 * block status, base:allocation, where the server has it); block
 * devices answer false (data). */
bool gr_disk_hole (struct gr_disk *d, uint64_t off, uint64_t len);

/* Do the n accesses, each with its result. */
void gr_disk_io (struct gr_dio *v, size_t n);

/* One access each.  0 or -errno. */
int gr_disk_pread (struct gr_disk *d, void *buf, uint64_t len, uint64_t off);
int gr_disk_pwrite (struct gr_disk *d, const void *buf, uint64_t len,
                    uint64_t off);
int gr_disk_sync (struct gr_disk *d);
/* Zeros over [off, off + len): a hole where the member can, else
 * written zeros. */
int gr_disk_zero (struct gr_disk *d, uint64_t off, uint64_t len);

/* The storage the shell patterns globs[0 .. n) name (glob(3); scan=,
 * gpuraidctl scan): regular files and block devices, each once (another
 * name of one is left out), in the patterns' order.  *paths: the paths
 * (free with gr_disk_scan_free); their count, or -errno. */
int gr_disk_scan (const char *const *globs, int n, char ***paths);
void gr_disk_scan_free (char **paths, int count);

#endif /* GPURAID_STORAGE_H */
