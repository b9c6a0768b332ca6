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

#endif /* GPURAID_ARRAY_H */
