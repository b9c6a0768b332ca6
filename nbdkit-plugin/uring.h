/* gpuraid - batched member reads through io_uring (when built with
 * liburing), so that the chunk reads of one request run in parallel. */
#ifndef GPURAID_URING_H
#define GPURAID_URING_H

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

/* Is io_uring usable in this build and process? */
int gr_uring_available (void);

/* Run the n reads, up to the ring depth at a time, in the calling
 * thread's ring.  Returns 0 when every read has a result in res (some may
 * have failed: the caller redoes those), or -1 if io_uring cannot be used
 * (nothing was read; the caller falls back to pread). */
int gr_uring_read_batch (struct gr_rio *v, size_t n);

#endif /* GPURAID_URING_H */
