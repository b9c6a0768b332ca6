/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - whole reads and writes of a file: short transfers and EINTR
 * retried.  Each returns 0, or -errno (-ENODATA: a read past the end;
 * -ENOSPC: a write that made no progress). */
#ifndef GPURAID_FULLIO_H
#define GPURAID_FULLIO_H

#include <stddef.h>
#include <stdint.h>

int gr_pread_full (int fd, void *buf, size_t len, uint64_t off);
int gr_pwrite_full (int fd, const void *buf, size_t len, uint64_t off);
/* With pwritev2's flags (RWF_DSYNC); 0 for a plain pwrite. */
int gr_pwrite_flags (int fd, const void *buf, size_t len, uint64_t off,
                     int flags);

#endif /* GPURAID_FULLIO_H */
