/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - one skeleton for the background jobs (rebuild, scrub,
 * resync): a thread that walks stripes in batches, the rate limit and the
 * stop (pace.h), progress, a checkpoint hook, the end.
 *
 * The thread asks the job where the next batch starts (next: the stripe
 * after the last batch given out, or another: the resync goes to the
 * next pending region, a rebuild back to the front of a member that
 * joined), cuts the batch to the pace's size (a tenth of a second's
 * worth under a fixed limit, the job's largest otherwise) and gives it
 * to the executor's lanes (exec.h), which plan it with the job's
 * planner and run it, three in flight; the job hears of each batch in
 * batch order (done).  Its position is the end of the last batch done
 * (the written front); progress in array bytes counts from where it
 * went on from.  Each second, and as the position passes each tenth of
 * the total, the job's hook runs (checkpoints, progress lines).  A stop
 * (shutdown, gpuraidctl) waits for the batches in flight.
 *
 * One owner: struct gr_job holds the thread, the pace, the lanes and
 * the progress; the job's own state stays with the job. */
#ifndef GPURAID_JOB_H
#define GPURAID_JOB_H

#include <stdbool.h>
#include <stdint.h>

#include "exec.h"

struct gr_job;

/* A job's state and progress (the status shows them). */
enum gr_job_state {
  GR_JOB_RUNNING,
  GR_JOB_DONE,                  /* all done */
  GR_JOB_STOPPED,               /* stopped (shutdown, gpuraidctl): the rest
                                 * later */
  GR_JOB_FAILED,                /* failed (or could not start) */
};
struct gr_progress {
  enum gr_job_state state;
  uint64_t done_bytes, total_bytes;     /* of array data */
  uint64_t from_bytes;                  /* done before it started (one
                                         * that went on from there) */
  double seconds;                       /* since it started */
  uint64_t rate_limit;                  /* 0: none */
};

/* What the job does next (its next hook). */
enum gr_job_next {
  GR_JOB_GO,                    /* a batch from *s, ending by *end */
  GR_JOB_GO_FROM,               /* the same, progress counted again from
                                 * *s (a rebuild that goes back) */
  GR_JOB_GO_LIGHT,              /* a batch from *s, ending by *end, that
                                 * moves little data (a rebuild's regions
                                 * never written): the job's largest
                                 * batch, the pace neither counting nor
                                 * waiting for it */
  GR_JOB_DRAIN,                 /* wait for the batches in flight, then
                                 * ask again (drained: true) */
  GR_JOB_END,                   /* done */
  GR_JOB_FAIL,                  /* failed (said why) */
};

/* Why the hook runs. */
enum gr_job_tick {
  GR_JOB_SECOND,                /* a second since the last */
  GR_JOB_TENTH,                 /* the position passed a tenth */
};

struct gr_job_def {
  /* The lanes' batches: lock mode, policy, planner, done (exec.h). */
  struct gr_exec_batches batches;
  uint64_t batch;               /* stripes a batch at most */
  size_t scratch;               /* bytes a batch's plan needs at most */
  uint64_t total_bytes;         /* array bytes it does in all */
  /* The next batch: *s is where the last one given out ended, *end the
   * array's stripes; the job may move both. */
  enum gr_job_next (*next) (void *arg, bool drained, uint64_t *s,
                            uint64_t *end);
  /* Each second and each tenth (pct, 10 .. 100); false: the job fails. */
  bool (*tick) (void *arg, enum gr_job_tick why, int pct);
  /* The end, after the last batch (state: done, stopped or failed). */
  void (*finish) (void *arg, enum gr_job_state st);
  void *arg;                    /* the hooks' (and the lanes') */
};

/* Start it from stripe from (progress counts from_bytes done already).
 * NULL after nbdkit_error. */
struct gr_job *gr_job_start (struct gr_exec *x, const struct gr_job_def *def,
                             uint64_t rate, uint64_t from,
                             uint64_t from_bytes);
/* Its progress (state, bytes of array data done and to do, ...). */
void gr_job_progress (struct gr_job *j, struct gr_progress *out);
/* Its position: the end of the last batch done, a stripe. */
uint64_t gr_job_position (struct gr_job *j);
/* Seconds since it started (went on from its position). */
double gr_job_seconds (struct gr_job *j);
/* The lanes' busy seconds (reading, coding, writing). */
void gr_job_busy (struct gr_job *j, double busy[3]);
void gr_job_set_rate (struct gr_job *j, uint64_t rate);
/* Stop it and wait (a finished one just returns); free frees. */
void gr_job_stop (struct gr_job *j);
void gr_job_free (struct gr_job *j);

#endif /* GPURAID_JOB_H */
