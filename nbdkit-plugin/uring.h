/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - batched member reads through io_uring (when built with
 * liburing), so that the chunk reads of one plan run in parallel.
 * Without liburing (NOURING=1) the stubs say it is not available. */
#ifndef GPURAID_URING_H
#define GPURAID_URING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One read of len bytes at off of file descriptor fd into buf.  res is
 * set to 0 (all bytes read) or a negative errno (-ENODATA: short). */
struct gr_rio {
  int fd;
  void *buf;
  size_t len;
  uint64_t off;
  uint64_t tag;                 /* the caller's */
  int res;
};

/* Is io_uring usable in this build and process (and not turned off with
 * -D gpuraid.no_uring=1)? */
bool gr_uring_available (void);

enum gr_uring_outcome {
  GR_URING_DONE,                /* every entry has its result in res (some
                                 * may have failed: the caller redoes
                                 * those) */
  GR_URING_UNAVAILABLE,         /* nothing was done: use pread/pwrite */
};

/* Run the n entries, up to the ring depth at a time, in the calling
 * thread's ring. */
enum gr_uring_outcome gr_uring_read_batch (struct gr_rio *v, size_t n);

#endif /* GPURAID_URING_H */
