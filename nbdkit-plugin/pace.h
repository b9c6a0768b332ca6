/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - pacing a background job (the resync, a rebuild): a rate
 * limit that can change while it runs, and a stop request.
 *
 * The job counts the bytes it has done and calls gr_pace_wait after each
 * step: it returns at once while the job is behind the limit, sleeps
 * while it is ahead, and says whether to stop.  A new limit applies from
 * the moment it is set.  Thread-safe; one owner: struct gr_pace. */
#ifndef GPURAID_PACE_H
#define GPURAID_PACE_H

#include <stdbool.h>
#include <stdint.h>

struct gr_pace;

/* The default limit: none while the array is idle, and while clients'
 * requests come in (the counter moved during the last step) the job
 * sleeps GR_PACE_YIELD times as long as the step took, so that it works
 * at most 1 / (1 + GR_PACE_YIELD) of the time and the requests keep most
 * of their speed (docs/performance.md measures it). */
#define GR_PACE_AUTO UINT64_MAX
#define GR_PACE_YIELD 4

/* rate: bytes a second, 0 for no limit, GR_PACE_AUTO; activity: the
 * clients' request counter (atomic; NULL: none).  NULL if out of
 * memory. */
struct gr_pace *gr_pace_new (uint64_t rate, const uint64_t *activity);
void gr_pace_free (struct gr_pace *p);

/* done bytes so far: wait while ahead of the limit (or yield).  true:
 * stop. */
bool gr_pace_wait (struct gr_pace *p, uint64_t done);
/* How many steps of unit bytes the next batch takes: a tenth of a
 * second's worth under a fixed limit (at least 1), so that the limit is
 * kept smoothly and writers wait for short batches only; otherwise
 * (none, auto) max. */
uint64_t gr_pace_batch (struct gr_pace *p, uint64_t unit, uint64_t max);
/* From now on (done: the bytes done so far). */
void gr_pace_set_rate (struct gr_pace *p, uint64_t rate, uint64_t done);
uint64_t gr_pace_rate (struct gr_pace *p);
/* Ask the job to stop (wakes it); gr_pace_wait returns true from now. */
void gr_pace_stop (struct gr_pace *p);
/* The job has ended: its seconds stop counting. */
void gr_pace_finish (struct gr_pace *p);
/* Seconds since gr_pace_new (until gr_pace_finish). */
double gr_pace_seconds (struct gr_pace *p);

#endif /* GPURAID_PACE_H */
