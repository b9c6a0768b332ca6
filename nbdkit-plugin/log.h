/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the plugin's messages.
 *
 * Four levels, each with one use:
 *   nbdkit_error  something failed: a request or the start (naming the
 *               key or member concerned), a member or the GPU at run time;
 *   gr_warn     a state an operator must act on that is not a failure of
 *               this moment (the array starts degraded, or was not shut
 *               down cleanly); always shown (nbdkit_error, "warning: "
 *               in front).  Each event is said once, in one line.
 *   gr_debug    what happened and why (choices, progress), nbdkit -v.
 *   gr_verbose  per-request detail, -D gpuraid.verbose=1 as well.
 */
#ifndef GPURAID_LOG_H
#define GPURAID_LOG_H

#include <stdbool.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

void gr_warn (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

#define gr_debug(fs, ...) nbdkit_debug ("gpuraid: " fs, ##__VA_ARGS__)

/* Is -D gpuraid.verbose=1 set? */
bool gr_verbose_on (void);

#define gr_verbose(fs, ...)                                     \
  do {                                                          \
    if (gr_verbose_on ())                                       \
      nbdkit_debug ("gpuraid: " fs, ##__VA_ARGS__);             \
  } while (0)

#endif /* GPURAID_LOG_H */
