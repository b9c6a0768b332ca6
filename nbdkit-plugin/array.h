/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - opening and closing the array.
 *
 * Opening probes every member= path (opens it, reads its superblock),
 * lets the assembly decision (assemble.h) say what the array is, and
 * acts on it: for create=true zeroes the members and writes the new
 * superblocks; to assemble, fills the member slots (members.h), warns
 * once about what is missing, and resyncs a dirty array (resync.h).
 * Members without a valid superblock are never written.  Closing is the
 * clean shutdown. */
#ifndef GPURAID_ARRAY_H
#define GPURAID_ARRAY_H

#include "coding.h"
#include "config.h"
#include "exec.h"
#include "members.h"
#include "resync.h"
#include "heal.h"

struct gr_array;

/* Create or assemble; the CPU coder is set up on coding.  NULL after
 * nbdkit_error. */
struct gr_array *gr_array_open (const struct gr_config *cfg,
                                struct gr_coding *coding);
/* Clean shutdown: sync, clear the dirty flag, close the members. */
/* In the server process (after nbdkit's fork): the bitmap's clearing
 * thread and, after an unclean shutdown, the background resync.  0, or
 * -1 after nbdkit_error. */
int gr_array_start (struct gr_array *a);
/* Stops the resync (the array stays dirty if it had not finished), then
 * a clean shutdown. */
void gr_array_close (struct gr_array *a);

struct gr_exec *gr_array_exec (const struct gr_array *a);
struct gr_members *gr_array_members (const struct gr_array *a);

/* The background resync's progress; false if none was started. */
bool gr_array_resync_progress (const struct gr_array *a,
                               struct gr_progress *p);
/* The background resync's rate limit (bytes a second, 0: none), from
 * now on and for a resync started later. */
void gr_array_set_rate (struct gr_array *a, uint64_t rate);

/* Replacing members, spares and scrubs (heal.h). */
struct gr_heal *gr_array_heal (const struct gr_array *a);

/* The operator fails member i (gpuraidctl fail): refused where it would
 * cost data or redundancy the array cannot spare. */
enum gr_array_fail_outcome {
  GR_ARRAY_FAIL_DONE,
  GR_ARRAY_FAIL_NO_SUCH_MEMBER,
  GR_ARRAY_FAIL_ALREADY,        /* failed or missing already */
  GR_ARRAY_FAIL_NO_REDUNDANCY,  /* m have failed: it would fail the array */
  GR_ARRAY_FAIL_RESYNCING,      /* a resync runs: the regions it has not
                                 * done could not be rebuilt */
  GR_ARRAY_FAIL_READ_ONLY,      /* salvage */
  GR_ARRAY_FAIL_ARRAY_FAILED,   /* done, but recording it failed members
                                 * past m */
};
enum gr_array_fail_outcome gr_array_fail (struct gr_array *a, int i,
                                          const char *why);

#endif /* GPURAID_ARRAY_H */
