/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - reqpin: nbdkit's request buffers page-locked in place.
 *
 * nbdkit gives each worker thread one request buffer that it keeps for
 * the thread's life and only grows (realloc, in nbdkit's
 * server/threadlocal.c; freed when the thread ends).  While a GPU codes,
 * the registry page-locks (registers) that buffer once per thread, and
 * again only when it moves or grows, so that the GPU reads a write's data
 * where nbdkit received it and writes a degraded read's data straight
 * into it, instead of the engine copying them through its staging
 * memory.
 *
 * One owner: struct gr_reqpin holds every thread's registered range (a
 * thread key whose destructor unregisters the range when the thread
 * ends), the bytes registered and their bound, the counters and the
 * once-only warning.  The registering itself is done by the ops given
 * (the GPU engine's, or the test stand-in's).
 *
 * The rules:
 *  - a request's buffer [p, p + len) counts as page-locked when the
 *    thread's range starts at p and is at least len long.  nbdkit
 *    replaces the buffer only with a larger one, so a buffer that moved
 *    shows a new address, and one grown in place a larger len: the old
 *    range is unregistered and the new one registered;
 *  - no two live buffers overlap, so a range of another thread that the
 *    new one overlaps is stale (its memory was freed: the other thread
 *    moved on or is ending): it is unregistered first;
 *  - the engine trusts a registered range only between gr_reqpin_begin
 *    and gr_reqpin_end (while the request owns the buffer); between
 *    requests memory at a stale address is staged, never copied through
 *    the old registration (gpu.h);
 *  - bounded: ranges of at least GR_REQPIN_MIN bytes only (the engine
 *    copies shorter blocks through staging anyway), at most `cap` bytes
 *    registered in all and GR_REQPIN_MOVES registrations per thread;
 *    beyond them a buffer is staged as before;
 *  - a registration that fails leaves the buffer staged.  EEXIST (pages
 *    shared with a neighbouring buffer registered already, as small heap
 *    buffers may) stages that buffer until it moves, said once in the
 *    debug log; any other failure stops registering for good, said once
 *    as a warning.
 *
 * Plugin code: returns false where the buffer stays staged; never
 * fails a request. */
#ifndef GPURAID_REQPIN_H
#define GPURAID_REQPIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GR_REQPIN_MIN ((size_t) 64 << 10)
#define GR_REQPIN_CAP_DEFAULT ((size_t) 1 << 30)
#define GR_REQPIN_MOVES 64

/* What registers.  reg: 0, -EEXIST (pages of it are registered already)
 * or another negative errno; unreg: 0 or a negative errno; in_use: the
 * engine may copy the range directly (on) or not; why: the last
 * failure's text, or NULL. */
struct gr_reqpin_ops {
  int (*reg) (void *p, size_t len);
  int (*unreg) (void *p);
  void (*in_use) (void *p, bool on);
  const char *(*why) (void);
};

struct gr_reqpin;

/* NULL after nbdkit_error. */
struct gr_reqpin *gr_reqpin_new (const struct gr_reqpin_ops *ops,
                                 size_t cap);
/* Unregisters every range left (call when no request runs). */
void gr_reqpin_free (struct gr_reqpin *rp);

/* A request of the calling thread owns [p, p + len) until gr_reqpin_end:
 * is it page-locked (registered now if need be)? */
bool gr_reqpin_begin (struct gr_reqpin *rp, void *p, size_t len);
/* The request is done with its buffer (after a true begin). */
void gr_reqpin_end (struct gr_reqpin *rp);

struct gr_reqpin_stats {
  size_t bytes, ranges;         /* registered now */
  uint64_t registered;          /* registrations made */
  uint64_t moved;               /* a thread's range replaced (moved or
                                 * grown) */
  uint64_t stale;               /* another thread's range unregistered */
  uint64_t failed;              /* registrations refused */
  uint64_t over_cap;            /* buffers staged for the bound */
  bool off;                     /* stopped after a failure */
  double wait_s, wait_max_s;    /* requests' time page-locking their
                                 * thread's buffer (the lock's wait
                                 * included): in all, the longest */
  double reg_s, reg_max_s;      /* of it, in the registrations (ops.reg)
                                 * themselves: in all, the longest */
  double end_s;                 /* ending threads' time unregistering */
};
void gr_reqpin_stats (struct gr_reqpin *rp, struct gr_reqpin_stats *s);

#endif /* GPURAID_REQPIN_H */
