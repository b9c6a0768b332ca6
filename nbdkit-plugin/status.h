/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the array's status as text or JSON (gpuraidctl status), and
 * the background operation gpuraidctl wait follows.
 *
 * Reads only: the array, its members, the coder and the resync, rebuild
 * and scrub through their own accessors; the JSON's fields are listed in
 * the plugin's man page ("CONTROL SOCKET AND gpuraidctl"). */
#ifndef GPURAID_STATUS_H
#define GPURAID_STATUS_H

#include <stdbool.h>
#include <stdio.h>

#include "array.h"
#include "coding.h"

void gr_status_write (struct gr_array *a, struct gr_coding *coding, FILE *f,
                      bool json);
/* The operation gpuraidctl wait follows, as one line: its name (a
 * running rebuild, scrub or resync, else the last rebuild or scrub, else
 * the resync), state (running, done, stopped, failed), done and total
 * bytes, seconds and rate limit (0: none or auto); or "none". */
void gr_status_progress_write (struct gr_array *a, FILE *f);

#endif /* GPURAID_STATUS_H */
