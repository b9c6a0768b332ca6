/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - accel=auto's router: where each kind of coding operation runs,
 * decided by what each side achieves in the running array.
 *
 * The start-up measurement (calibrate.h) times single operations on an
 * idle machine.  Under load the sides compare otherwise: the GPU's small
 * operations are gathered across requests, the CPU's compete with the
 * members' I/O and the checksums for the cores.  So each kind of
 * operation is tried on both while it runs.  A kind is the operation
 * (full-stripe encode, parity update, reconstruct in an array with e
 * members lost, one kind per e = 1 .. m: a degraded read's stripes are
 * one kind, whatever part of their lost chunks each rebuilds, so that a
 * trial moves them all) and its data bytes per operation (below 64 KiB,
 * below 1 MiB, below 4 MiB: requests'; larger: a job's batches, a large
 * write's stripes).
 *
 * A kind is routed as the start-up measurement says (the prior) for its
 * first second of use; then a trial: four phases of 0.25 s, on the CPU,
 * the GPU, the GPU and the CPU, each counting (after its first 50 ms) the
 * kind's data bytes routed and the process's CPU time.  The side with
 * more bytes a second by more than 5 % wins; within that, the side with
 * less CPU time a byte by more than 5 %; else the side held before.  A
 * first decision, or one that changes the side, holds for 4 s (a fresh
 * array's first seconds are not its steady state: members' first writes,
 * buffers registered); each that confirms the one before holds twice as
 * long as it, up to 30 s; then a new trial.  One trial runs at a time,
 * among all kinds, so that two kinds' switches do not blur each other; a
 * trial whose kind stops coming (a phase with fewer than 8 operations, or
 * reached late) is abandoned and tried again 5 s later; a phase with a
 * shorter pause in it (no operation of the kind for 20 ms and for 8
 * times the phase's mean interval: a client between two runs) is
 * measured again, at most 4 times a trial, so that the pause is not
 * taken for the side's rate.  Every decision is logged with its figures
 * (nbdkit -v), and at exit each kind that ran.
 *
 * One owner: struct gr_router holds every kind's state.  Thread-safe: a
 * route is a few atomic loads, adds and an exchange (its time); the
 * thread that finds a stage ended moves the trial on, under the router's
 * lock.  No I/O but the log.
 */
#ifndef GPURAID_ROUTER_H
#define GPURAID_ROUTER_H

#include <stdbool.h>
#include <stddef.h>

#include "plan.h"

/* The kinds the start-up measurement times (calibrate.h). */
enum gr_route_kind { GR_ROUTE_ENCODE, GR_ROUTE_RECON_ONE,
                     GR_ROUTE_RECON_HALF, GR_ROUTE_RECON_ALL,
                     GR_ROUTE_UPDATE, GR_ROUTE_NKINDS };

/* Where an operation runs. */
enum gr_route_side { GR_SIDE_CPU, GR_SIDE_GPU };

/* The clocks a router reads: seconds (monotonic), and the process's CPU
 * seconds; arg is passed to both.  For tests; NULL in gr_router_new takes
 * the real ones. */
struct gr_router_clock {
  double (*now) (void *arg);
  double (*cpu) (void *arg);
  void *arg;
};

struct gr_router;

/* For an array of m parity members; routes everything to the CPU until
 * gr_router_set_prior.  NULL when out of memory. */
struct gr_router *gr_router_new (int m, const struct gr_router_clock *clk);
/* Logs each kind that ran (its trials and last decision), frees. */
void gr_router_free (struct gr_router *r);

/* The start-up measurement's thresholds: data bytes per operation from
 * which the GPU was faster, per measured kind (SIZE_MAX: never).
 * adaptive: try both sides while running (else the thresholds alone). */
void gr_router_set_prior (struct gr_router *r,
                          const size_t from[GR_ROUTE_NKINDS], bool adaptive);

/* Where an operation of `bytes` data bytes goes (nerased: members lost,
 * for GR_OP_RECONSTRUCT). */
enum gr_route_side gr_router_route (struct gr_router *r, enum gr_op op,
                                    size_t bytes, int nerased);

/* May some operation go to the GPU (now or in a trial)? */
bool gr_router_may_gpu (const struct gr_router *r);

/* A kind that has run, for the status. */
struct gr_route_state {
  char kind[80];                /* "reconstruct with 2 of 4 lost, 64K to 1M" */
  bool decided;                 /* by a trial (else as measured at start-up) */
  enum gr_route_side side;      /* decided: where it goes */
  bool trying;                  /* in a trial now */
  unsigned trials, to_gpu;
  double mbs[2], cpu_s_gb[2];   /* the last trial's, per side */
};
/* The kinds that have run (adaptive only), up to max of them into out;
 * how many have run. */
size_t gr_router_states (struct gr_router *r, struct gr_route_state *out,
                         size_t max);

#endif /* GPURAID_ROUTER_H */
