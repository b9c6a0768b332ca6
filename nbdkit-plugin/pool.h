/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - a pool of threads that share out a job's CPU work.
 *
 * gr_pool_run (pool, n, fn, arg) calls fn (arg, i) once for each i in
 * 0 .. n-1, on the pool's threads and on the calling thread, and returns
 * when every call has returned.  The items are handed out one at a time
 * to whichever thread is free, so a thread that the scheduler sets aside
 * (member I/O shares the cores) holds up one item, not a fixed share.
 * Several callers may run at once (a job's lanes read, code and write
 * different batches at the same time): their items are served in the
 * order the calls came.  A NULL pool, or one of 0 threads, runs every
 * item on the calling thread.
 *
 * Used by the executor's lanes (exec-lanes.c) for a batch's CPU coding
 * (steps.c) and the block checksums of what it reads and writes
 * (exec.c); a client's request runs on its own thread, without it.
 *
 * One owner: struct gr_pool holds the threads, started by gr_pool_new
 * and joined by gr_pool_free. */
#ifndef GPURAID_POOL_H
#define GPURAID_POOL_H

#include <stddef.h>

struct gr_pool;

/* A pool of `threads` threads (0: none); NULL if out of memory or no
 * thread could start (the caller then runs alone: gr_pool_run takes a
 * NULL pool).  Threads that cannot start are left out. */
struct gr_pool *gr_pool_new (int threads);
void gr_pool_free (struct gr_pool *pool);

/* Threads an item may run on at once: the pool's and the caller's. */
int gr_pool_width (const struct gr_pool *pool);

void gr_pool_run (struct gr_pool *pool, size_t n,
                  void (*fn) (void *arg, size_t i), void *arg);

#endif /* GPURAID_POOL_H */
