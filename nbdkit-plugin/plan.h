/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the planner: what a request does to the members (pure).
 *
 * Deciding apart from doing, like md's raid5.c: for a range of a request
 * and a snapshot of which members have failed, gr_plan_next returns a
 * plan for the first part of the range, a value that lists
 *   - the member reads (member, offset, length, destination),
 *   - the steps on the plan's buffers: moves (zero, copy, XOR) and coding
 *     operations (encode, parity update of data chunk i, reconstruct of a
 *     given erased set for given wanted chunks),
 *   - the member writes (or fallocate calls, for zero and trim),
 * and the stripe lock it needs.  The executor (exec.h) runs it.  Nothing
 * here does I/O, locks, allocates or logs; test-plan checks every plan
 * kind by brute force over small geometries and runs plans on in-memory
 * members.
 *
 * Bytes live in three spaces: the request's buffer (its offsets count
 * from the plan's first byte, plan->offset), the plan's scratch area
 * (plan->scratch_len bytes that the executor provides), and zeros (a
 * source only; any offset).
 */
#ifndef GPURAID_PLAN_H
#define GPURAID_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gf/gf.h"
#include "raidmap/raidmap.h"

enum gr_space { GR_SPACE_REQ, GR_SPACE_SCRATCH, GR_SPACE_ZERO };

struct gr_loc {
  enum gr_space space;
  size_t off;
};

enum gr_io_kind {
  GR_IO_READ,
  GR_IO_WRITE,
  GR_IO_WRITE_CHANGED,          /* write only if it differs from cmp */
  GR_IO_PUNCH,                  /* fallocate punch-hole (no buffer) */
  GR_IO_ZERO_RANGE,             /* fallocate zero-range (no buffer) */
};

/* One member access. */
struct gr_io {
  enum gr_io_kind kind;
  int member;
  uint64_t off;                 /* byte offset on the member */
  uint64_t len;
  struct gr_loc buf;            /* read: destination; write: source */
  struct gr_loc cmp;            /* GR_IO_WRITE_CHANGED: the bytes read */
};

/* The coding operations, as the router (coding.h) weighs them. */
enum gr_op { GR_OP_ENCODE, GR_OP_RECONSTRUCT, GR_OP_UPDATE };

enum gr_step_kind {
  GR_STEP_ZERO,                 /* dst = 0 over len */
  GR_STEP_COPY,                 /* dst = src over len */
  GR_STEP_XOR,                  /* dst ^= src over len */
  GR_STEP_ENCODE,               /* parity of nstripes stripes */
  GR_STEP_UPDATE,               /* parity ^= G[.][index] * delta */
  GR_STEP_RECONSTRUCT,          /* rebuild the erased blocks */
};

/* Coding steps work on blocks of len bytes: plan->blk[blk0 ...], n per
 * stripe (code index order) for ENCODE and RECONSTRUCT (which rebuilds
 * plan->erased); for UPDATE the delta is blk[blk0 + index], the parity
 * blk[blk0 + k ...] and m blocks of scratch for the GPU's partial results
 * blk[blk0 + n ...]. */
struct gr_step {
  enum gr_step_kind kind;
  struct gr_loc dst, src;       /* moves */
  size_t len;                   /* moves: bytes; coding: block length */
  size_t blk0, nstripes;        /* coding */
  int index;                    /* UPDATE: the data chunk */
  bool gpu;                     /* coding: the route chosen (coding.h) */
};

enum gr_plan_kind {
  GR_PLAN_READ,                 /* data chunks straight into the request */
  GR_PLAN_READ_DEGRADED,        /* k survivors, reconstruct, copy out */
  GR_PLAN_WRITE_FULL,           /* whole stripes: encode, write all */
  GR_PLAN_WRITE_RCW,            /* read the untouched data, encode */
  GR_PLAN_WRITE_RMW,            /* read old data and parity, update */
  GR_PLAN_WRITE_DEGRADED,       /* reconstruct, overlay, encode */
  GR_PLAN_FALLOCATE,            /* whole stripes: the same range of every
                                 * live member punched or zeroed */
  GR_PLAN_SKIP,                 /* nothing to do (trim of part of a stripe) */
  GR_PLAN_RESYNC,               /* whole stripes: recompute the parity,
                                 * rewrite what differs */
  GR_PLAN_REFUSE,               /* more than m members lost: EIO */
};

/* "read", "write-rmw", ... for logs. */
const char *gr_plan_kind_name (enum gr_plan_kind kind);

enum gr_lock_mode { GR_LOCK_NONE, GR_LOCK_SHARED, GR_LOCK_EXCL };

/* A plan.  The arrays are allocated once by gr_plan_new for a geometry
 * and reused; a plan never holds more than their capacity (a large
 * request takes several plans). */
struct gr_plan {
  enum gr_plan_kind kind;
  uint64_t offset, len;         /* the logical range it covers */
  uint64_t s0, nstripes;        /* the stripes it touches */
  enum gr_lock_mode lock;       /* held on those stripes while it runs */
  bool journal;                 /* a write on a degraded array: journal it
                                 * before its writes (journal.h) */
  uint32_t lo, hi;              /* one stripe's coding range in the chunk */
  uint64_t gen;                 /* the member snapshot it was made from */
  size_t scratch_len;
  struct gr_io *read;
  size_t nread;
  struct gr_step *step;
  size_t nstep;
  struct gr_io *write;
  size_t nwrite;
  struct gr_loc *blk;
  size_t nblk;
  uint8_t **ptr;                /* gr_steps_run: blk resolved */
  int nerased;                  /* RECONSTRUCT's erased set, ascending */
  int erased[GR_MAX_MEMBERS];
  size_t cap_io, cap_step, cap_blk;
};

/* What a request asks for. */
enum gr_req {
  GR_REQ_READ,
  GR_REQ_WRITE,
  GR_REQ_ZERO,                  /* write zeros (fallocate zero-range first) */
  GR_REQ_ZERO_MAY_TRIM,         /* the same, punching holes first */
  GR_REQ_TRIM,                  /* punch whole stripes, skip the rest */
  GR_REQ_RESYNC,                /* recompute parity (whole stripes only) */
};

/* fallocate modes (gr_plan_ctx.falloc). */
#define GR_FALLOC_PUNCH 1u
#define GR_FALLOC_ZERO 2u

/* What plans are made from. */
struct gr_plan_ctx {
  const struct gr_geom *g;
  uint32_t lm;                  /* coding lengths are multiples of this */
  const bool *failed;           /* failed[member] */
  uint64_t gen;                 /* the snapshot's generation */
  unsigned falloc;              /* GR_FALLOC_* modes the members support */
  /* Where a coding operation of that many data bytes (nerased lost)
   * runs: true for the GPU, whose blocks are then all in scratch (the
   * engine copies page-locked memory directly). */
  bool (*gpu) (void *arg, enum gr_op op, size_t bytes, int nerased);
  void *gpu_arg;
  /* Members being rebuilt (failed[] says lost), or NULL if none:
   * rb_front[member] (stripes; 0 for the others) is the front below
   * which a replacement is live, so a plan starting there ends at its
   * front and uses it; a plan starting above treats it as lost. */
  const uint64_t *rb_front;
  bool rb_live;                 /* set by gr_plan_next for a plan below
                                 * a front: its writes are journaled */
};

/* gr_plan_new and gr_plan_free: steps.h (the plan's arrays). */

/* Plan the first part of [offset, offset + len) (inside the array, len
 * >= 1; for GR_REQ_RESYNC whole stripes) and return its kind; the plan
 * covers [p->offset, p->offset + p->len), p->offset == offset. */
enum gr_plan_kind gr_plan_next (const struct gr_plan_ctx *c, enum gr_req req,
                                uint64_t offset, uint64_t len,
                                struct gr_plan *p);

#endif /* GPURAID_PLAN_H */
