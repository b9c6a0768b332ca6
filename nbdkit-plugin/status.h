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
/* The operation gpuraidctl wait follows: a running one (rebuild, scrub,
 * resync), else the last rebuild or scrub, else the resync; its name
 * and progress, or NULL for none. */
const char *gr_status_operation (struct gr_array *a,
                                 struct gr_resync_progress *p);
/* running, done, stopped or failed. */
const char *gr_status_state_name (enum gr_resync_state s);

#endif /* GPURAID_STATUS_H */
