/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - splitmix64, the one small pseudo-random generator of the
 * tests and benchmarks (header only, like now.h): fast, any seed,
 * good enough for offsets and data, not for secrets.
 *
 *   gr_splitmix64 (&state)   the next 64 bits; advances state */
#ifndef GPURAID_COMMON_SPLITMIX_H
#define GPURAID_COMMON_SPLITMIX_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

static inline uint64_t
gr_splitmix64 (uint64_t *state)
{
  uint64_t z = (*state += UINT64_C (0x9e3779b97f4a7c15));

  z = (z ^ (z >> 30)) * UINT64_C (0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C (0x94d049bb133111eb);
  return z ^ (z >> 31);
}

#ifdef __cplusplus
}
#endif

#endif /* GPURAID_COMMON_SPLITMIX_H */
