/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - scratch memory for the plans, bounded by configuration.
 *
 * A plan's scratch (scratch_len bytes: blocks read, rebuilt or encoded)
 * comes from here.  Each thread keeps one buffer of up to
 * GR_SCRATCH_KEEP bytes for reuse; a plan needing more gets a buffer of
 * its own (mapped, not from an allocator that would keep it), and those
 * held by plans and those kept mapped for the next large plans (so that
 * their pages are not faulted in again each plan) together stay within
 * the configured cap (scratch-max=): a plan that would go over waits
 * until others give theirs back (one alone may always run), and kept
 * ones are unmapped to make room.  While a GPU is in use the
 * kept buffer is page-locked, up to 64 MiB, where the page-locked pool
 * (1 GiB) allows, so that GPU operations skip the engine's staging copy;
 * it is at least GR_SCRATCH_KEEP bytes, and when its thread ends it is
 * kept (up to 512 of them) for the next thread, as nbdkit starts threads
 * with each connection and page-locking memory stalls the GPU driver.
 *
 * A thread that has begun plans (exec.h) keeps one more buffer, a
 * region for each (gr_scratch_get_begun).
 *
 * One owner: struct gr_scratch holds the thread keys, the byte counts and
 * the pool's state (its spare buffers included). */
#ifndef GPURAID_SCRATCH_H
#define GPURAID_SCRATCH_H

#include <stddef.h>
#include <stdint.h>

#include "coding.h"

#define GR_SCRATCH_KEEP ((size_t) 1 << 20)      /* per thread, reused */
#define GR_SCRATCH_MAX_DEFAULT ((uint64_t) 256 << 20)

struct gr_scratch;

/* cap: bytes of plan buffers beyond what threads keep.  NULL after
 * nbdkit_error. */
struct gr_scratch *gr_scratch_new (struct gr_coding *coding, uint64_t cap);
void gr_scratch_free (struct gr_scratch *sc);

/* The calling thread's buffer for one plan, of at least size bytes,
 * 4096-aligned.  NULL (errno ENOMEM) after nbdkit_error. */
uint8_t *gr_scratch_get (struct gr_scratch *sc, size_t size);
/* The plan is done with it. */
void gr_scratch_put (struct gr_scratch *sc);

/* A plan the thread has begun and not finished (exec.h) has its own
 * region, slot, of one more buffer the thread keeps (page-locked as the
 * other): up to GR_SCRATCH_BEGUN_SIZE bytes, 4096-aligned.  A slot's
 * region is the thread's until it asks for that slot again; a slot above
 * 0 is asked for only while the slots below it hold theirs (the buffer
 * is replaced only for slot 0).  NULL
 * (errno ENOMEM, or EINVAL for a slot or size out of range) after
 * nbdkit_error. */
#define GR_SCRATCH_BEGUN_SLOTS 3
#define GR_SCRATCH_BEGUN_SIZE \
  ((GR_SCRATCH_KEEP / GR_SCRATCH_BEGUN_SLOTS) & ~(size_t) 4095)
uint8_t *gr_scratch_get_begun (struct gr_scratch *sc, int slot, size_t size);

#endif /* GPURAID_SCRATCH_H */
