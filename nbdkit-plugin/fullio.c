/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - whole reads and writes.  See fullio.h. */
#include <errno.h>
#include <unistd.h>
#include <sys/uio.h>

#include "fullio.h"

int
gr_pread_full (int fd, void *buf, size_t len, uint64_t off)
{
  uint8_t *p = buf;

  while (len > 0) {
    ssize_t r = pread (fd, p, len, (off_t) off);
    if (r == -1) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    if (r == 0)
      return -ENODATA;          /* short read: past the end */
    p += r; len -= r; off += r;
  }
  return 0;
}

int
gr_pwrite_flags (int fd, const void *buf, size_t len, uint64_t off, int flags)
{
  const uint8_t *p = buf;

  while (len > 0) {
    struct iovec iov = { .iov_base = (void *) p, .iov_len = len };
    ssize_t r = flags ? pwritev2 (fd, &iov, 1, (off_t) off, flags)
      : pwrite (fd, p, len, (off_t) off);
    if (r == -1) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    if (r == 0)
      return -ENOSPC;
    p += r; len -= r; off += r;
  }
  return 0;
}

int
gr_pwrite_full (int fd, const void *buf, size_t len, uint64_t off)
{
  return gr_pwrite_flags (fd, buf, len, off, 0);
}
