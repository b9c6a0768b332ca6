/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the one clock for timing, header only, so that every folder
 * may include it without linking anything: the plugin, the libraries,
 * their tests and benchmarks, scripts/nbdbench.
 *
 *   gr_now ()   seconds on CLOCK_MONOTONIC, as a double (differences of
 *               two calls are elapsed time; the origin means nothing)
 *
 * Deadlines for pthread_cond_timedwait are on CLOCK_REALTIME and are not
 * made here. */
#ifndef GPURAID_COMMON_NOW_H
#define GPURAID_COMMON_NOW_H

#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

static inline double
gr_now (void)
{
  struct timespec t;

  clock_gettime (CLOCK_MONOTONIC, &t);
  return (double) t.tv_sec + t.tv_nsec / 1e9;
}

#ifdef __cplusplus
}
#endif

#endif /* GPURAID_COMMON_NOW_H */
