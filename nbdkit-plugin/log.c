/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the plugin's messages.  See log.h. */
#include <stdarg.h>
#include <stdio.h>

#include "log.h"

/* -D gpuraid.verbose=1: per-request debug messages. */
NBDKIT_DLL_PUBLIC int gpuraid_debug_verbose = 0;

bool
gr_verbose_on (void)
{
  return gpuraid_debug_verbose;
}

void
gr_warn (const char *fmt, ...)
{
  char msg[1024];
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (msg, sizeof msg, fmt, ap);
  va_end (ap);
  nbdkit_error ("warning: %s", msg);
}
