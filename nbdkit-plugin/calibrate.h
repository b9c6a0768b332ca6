/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - accel=auto's start-up measurement.
 *
 * In the server process, with a GPU coder in use and not every operation
 * sent to it: for each kind of operation (encode; reconstruct with 1,
 * with (m + 1) / 2 and with m blocks lost; parity update) one call on the
 * CPU coder and one on the GPU coder are timed at sizes from 4 KiB per
 * block up to the chunk (encodes to 4 MiB per block), in the buffers the
 * data paths use; an operation then goes to the GPU from the smallest
 * size at which the GPU was at least 10 % faster at every larger size
 * (gr_coding_set_gpu_from): the router's prior, from which it tries both
 * sides while the array serves (router.h; an array that has lost another
 * count is routed as the nearest measured).  The same step rebuilds a
 * stripe on both and compares the bytes: a GPU that gives different
 * bytes is not used.
 * Every time and decision is logged (nbdkit -v). */
#ifndef GPURAID_CALIBRATE_H
#define GPURAID_CALIBRATE_H

#include <stdint.h>

#include "coding.h"

/* 0, or -1 if the measurement did not complete (logged; the coding then
 * stays on the CPU). */
int gr_calibrate (struct gr_coding *coding, uint32_t chunk);

#endif /* GPURAID_CALIBRATE_H */
