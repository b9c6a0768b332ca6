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

/* rate: bytes a second, 0 for no limit.  NULL if out of memory. */
struct gr_pace *gr_pace_new (uint64_t rate);
void gr_pace_free (struct gr_pace *p);

/* done bytes so far: wait while ahead of the limit.  true: stop. */
bool gr_pace_wait (struct gr_pace *p, uint64_t done);
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
