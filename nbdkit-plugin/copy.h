/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - a live replacement's copy (gpuraidctl replace --live): member
 * i's chunks copied onto its replacement while the member stays in
 * service, read from, written to and active, as md's --replace does.
 *
 * The replacement is begun in members.h (gr_members_live_begin: the
 * member's writes go to it too below its front).  The copy is a job
 * (job.h) of copy plans (plan.h: gr_plan_copy: the member's chunks of a
 * batch read in one access, verified by their checksums, written to the
 * replacement), its front moved after each batch; the block checksums'
 * pages of what it copies are written again so that the replacement
 * gets them.  At the end the checksums are flushed and the replacement
 * takes the member's place in one superblock update
 * (gr_members_live_swap); the old storage is released.  A shutdown, a
 * crash, the member failing or the replacement failing abandons it: the
 * member stays as it was (a start never takes the replacement: its
 * superblock says so), and gpuraidctl replace --live starts over.
 *
 * One owner: struct gr_copy holds its job. */
#ifndef GPURAID_COPY_H
#define GPURAID_COPY_H

#include <stdint.h>

#include "exec.h"
#include "job.h"

struct gr_copy;

/* Copy member i (its replacement begun) from stripe 0.  NULL after
 * nbdkit_error (the replacement abandoned). */
struct gr_copy *gr_copy_start (struct gr_exec *x, int i, uint64_t rate);
void gr_copy_progress (struct gr_copy *c, struct gr_progress *out);
/* The member it replaces. */
int gr_copy_member (const struct gr_copy *c);
void gr_copy_set_rate (struct gr_copy *c, uint64_t rate);
/* Stop it (abandoned, unless it has ended) and free it. */
void gr_copy_stop (struct gr_copy *c);

#endif /* GPURAID_COPY_H */
