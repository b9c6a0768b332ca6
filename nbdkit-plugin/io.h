/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the data paths: each request walked through plans.
 *
 * A request (read, write, zero, trim) is planned part by part from a
 * fresh member snapshot (plan.h) and each plan is run by the executor
 * (exec.h); a plan that meets a newly failed member is made again
 * without it.  A request that cannot be served correctly (more than m
 * members lost) fails with EIO; writes mark the array dirty first; FUA
 * syncs the members a request wrote.  Errors: -1 with errno set. */
#ifndef GPURAID_IO_H
#define GPURAID_IO_H

#include <stdbool.h>
#include <stdint.h>

#include "exec.h"

int gr_io_pread (struct gr_exec *x, void *buf, uint32_t count,
                 uint64_t offset);
int gr_io_pwrite (struct gr_exec *x, const void *buf, uint32_t count,
                  uint64_t offset, bool fua);
int gr_io_zero (struct gr_exec *x, uint32_t count, uint64_t offset,
                bool may_trim, bool fast, bool fua);
int gr_io_trim (struct gr_exec *x, uint32_t count, uint64_t offset,
                bool fua);
int gr_io_flush (struct gr_exec *x);

#endif /* GPURAID_IO_H */
