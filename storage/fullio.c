/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - whole reads and writes.  See storage-internal.h. */
#include <errno.h>
#include <unistd.h>
#include <sys/uio.h>

#include "storage-internal.h"

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

int
gr_prwv_full (int fd, struct iovec *iov, int cnt, uint64_t off, bool write)
{
  while (cnt > 0) {
    ssize_t r = write ? pwritev (fd, iov, cnt, (off_t) off)
      : preadv (fd, iov, cnt, (off_t) off);
    if (r == -1) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    if (r == 0)
      return write ? -ENOSPC : -ENODATA;
    off += (uint64_t) r;
    /* Past what was moved: whole buffers, then into the next one. */
    while (cnt > 0 && (size_t) r >= iov->iov_len) {
      r -= (ssize_t) iov->iov_len;
      iov++;
      cnt--;
    }
    if (cnt > 0) {
      iov->iov_base = (uint8_t *) iov->iov_base + r;
      iov->iov_len -= (size_t) r;
    }
  }
  return 0;
}
