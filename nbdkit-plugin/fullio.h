/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - whole reads and writes of a file: short transfers and EINTR
 * retried.  Each returns 0, or -errno (-ENODATA: a read past the end;
 * -ENOSPC: a write that made no progress). */
#ifndef GPURAID_FULLIO_H
#define GPURAID_FULLIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

int gr_pread_full (int fd, void *buf, size_t len, uint64_t off);
int gr_pwrite_full (int fd, const void *buf, size_t len, uint64_t off);
/* With pwritev2's flags (RWF_DSYNC); 0 for a plain pwrite. */
int gr_pwrite_flags (int fd, const void *buf, size_t len, uint64_t off,
                     int flags);

/* preadv or pwritev of cnt buffers (iov is used up). */
int gr_prwv_full (int fd, struct iovec *iov, int cnt, uint64_t off,
                  bool write);

#endif /* GPURAID_FULLIO_H */
