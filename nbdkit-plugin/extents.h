/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - which parts of the array are holes (NBD block status, so that
 * nbdinfo --map and qemu-img map see a sparse or trimmed array's holes).
 *
 * Chunk by chunk: a data chunk is a hole where the member that holds it
 * is live and the chunk is a hole on it (members.h: gr_members_hole:
 * local files and remote members; block devices count as data).  A chunk whose
 * member is failed, missing or being rebuilt is a hole where the first k
 * live chunks of its stripe are all holes: k zero chunks of a codeword
 * make every chunk of it zero.  Anything not known to be a hole is
 * reported as data, which is always correct.  Advisory, as on any
 * file: requests running meanwhile may change it. */
#ifndef GPURAID_EXTENTS_H
#define GPURAID_EXTENTS_H

#include <stdbool.h>
#include <stdint.h>

#include "exec.h"

struct nbdkit_extents;

/* The extents of [offset, offset + count) (at least the first chunk's;
 * only that one if req_one) into e.  0, or -1 after nbdkit_error. */
int gr_extents (struct gr_exec *x, uint32_t count, uint64_t offset,
                bool req_one, struct nbdkit_extents *e);

#endif /* GPURAID_EXTENTS_H */
