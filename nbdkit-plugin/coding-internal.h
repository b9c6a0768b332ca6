/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - coding's state, shared by its two files (coding.c: set-up,
 * routing and the operations; coding-batch.c: the group commit and the
 * gathered small operations).  Nothing else includes it; include coding.h
 * first. */
#ifndef GPURAID_CODING_INTERNAL_H
#define GPURAID_CODING_INTERNAL_H

#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gf/gf.h"

/* -D gpuraid.group_commit=0: GPU encodes of whole chunks each on their
 * own, not gathered across requests (to measure what the group commit
 * brings); -D gpuraid.pin_requests=0: nbdkit's request buffers not
 * page-locked in place (reqpin.h), staged as before. */
extern int gpuraid_debug_group_commit;
extern int gpuraid_debug_pin_requests;
/* -D gpuraid.adaptive=0: accel=auto routes by the start-up measurement
 * alone, never tries both sides while running (router.h). */
extern int gpuraid_debug_adaptive;
#define MiB ((size_t) 1 << 20)

/* Small GPU operations (reconstructs, and encodes of less than whole
 * chunks) of less data than this are gathered across requests (larger
 * ones, a job's batches, fill the link on their own), by at most
 * GATHER_LEADERS submissions in flight at once. */
#define GATHER_MAX_BYTES (4 * MiB)
#define GATHER_LEADERS 2

/* -D gpuraid.gather=N: small GPU operations (a degraded read's
 * stripes, a small write's encode) gathered across requests with at
 * most N submissions in flight (0: each on its own). */
extern int gpuraid_debug_gather;

/* Under accel=auto routed by the start-up measurement alone
 * (-D gpuraid.adaptive=0), at most this many operations on the GPU at
 * once (writers inside the group commit count one each); more would
 * wait there for the engine's streams while CPU cores are free, so they
 * run on the CPU instead ("spill"), and the GPU adds to the CPU under
 * load instead of becoming a queue (docs/performance.md, array run 3).
 * The adaptive router does not spill: a kind it puts on the GPU goes
 * there whole, as in its trials, and gathers as under accel=gpu (a cap
 * of 2 left a write's group commit two requests to gather). */
#define GPU_MAX_INFLIGHT 2

/* Group commit: a batch gathers at most this much data, and its leader
 * waits at most this long for more. */
#define BATCH_MAX_BYTES (64 * MiB)
#define BATCH_WAIT_US 200
/* Group commit: batches on the GPU at once (two fill the link: bench-gpu
 * (bc), docs/performance.md). */
#define COMB_INFLIGHT 2


/* A request's small operations waiting to be gathered. */
struct gather_item {
  const struct gr_code_op *ops; /* a request's operations */
  size_t nops;
  size_t bytes;
  enum { GATHER_WAIT, GATHER_LEAD, GATHER_DONE } state;
  int rc;
  double queued_at, done_at;    /* when it queued, when its batch ended
                                 * (gr_now) */
  struct gather_item *batch;    /* GATHER_LEAD: the batch it runs, from
                                 * itself */
  sem_t woken;                  /* posted once its state has changed */
  struct gather_item *next;
};

/* An encode in the group commit: a writer's, waited for at once, or
 * begun by one (gr_coding_encode_begin) and waited for later. */
struct gr_coding_enc {
  uint8_t *const *blocks;
  size_t nstripes, len;
  bool queued;                  /* in the queue, not yet in a batch */
  uint32_t *cksums;             /* its block checksums, or NULL */
  int rc;
  double t_in, t_done;          /* gr_now: queued; its batch's result */
  pthread_cond_t cv;            /* the leader's: a writer joined, a
                                 * batch ended */
  sem_t done;                   /* a follower's: posted with its result */
  struct gr_coding_enc *next;
};

struct gr_coding {
  /* Chosen at config_complete. */
  const struct gr_backend *cpu_be;
  bool use_gpu;                 /* a GPU was found usable */
  bool forced;                  /* accel=gpu or backend=cuda */
  int device;
  char gpu_name[256];

  int k, m;
  enum gr_code code;
  uint32_t chunk, lm;
  struct gr_coder *cpu;
  struct gr_coder *gpu;         /* NULL: none */
  bool gpu_all;
  int fallen_back;              /* atomic: the GPU failed */
  void *(*host_alloc) (size_t size);
  void (*host_free) (void *p);
  const char *(*gpu_error) (void);      /* the GPU's last failure, or
                                         * NULL (a stand-in) */
  struct gr_reqpin *reqpin;     /* request buffers page-locked, or NULL */

  struct gr_router *router;     /* accel=auto's (NULL before setup) */
  bool spill;                   /* beyond GPU_MAX_INFLIGHT, or a full
                                 * gather queue: the CPU */
  int inflight;                 /* atomic */
  uint64_t ops_gpu, ops_spilled;        /* atomic */
  uint64_t copies_gpu, copies_cpu;      /* host copies (plan_host_copy):
                                         * calls by the GPU, and those it
                                         * did not make; atomic */

  /* Group commit (flat combining), under comb_lock: the queue, its
   * leader (waiting for more), writers held back by a full queue. */
  pthread_mutex_t comb_lock;
  pthread_cond_t comb_room;
  struct gr_coding_enc *comb_head, **comb_tail;
  size_t comb_stripes, comb_reqs;
  struct gr_coding_enc *comb_leader;
  int comb_held;
  /* The group commit's batches, the requests in them, the leaders'
   * windows that ran out waiting for writers in flight, and the batches
   * whose leaders then waited for one on the GPU to end. */
  uint64_t comb_batches, comb_reqs_done, comb_timeouts, comb_gpu_waits;
  /* Summed over its requests: waiting for their batch to go, the batch
   * on the GPU, and after its result until woken (ns). */
  uint64_t comb_go_ns, comb_gpu_ns;
  uint64_t comb_wake_ns;                                   /* atomic */
  int comb_inflight;            /* batches on the GPU (COMB_INFLIGHT) */
  int writers;                  /* atomic: requests inside a write */

  /* Gathered small operations, under gather_lock: the queue (not yet in a
   * batch) and the submissions in flight. */
  pthread_mutex_t gather_lock;
  struct gather_item *gather_head, **gather_tail;
  size_t gather_bytes;
  int gather_leaders;
  uint64_t gathered_ops, gathered_encodes;                 /* gather_lock */
  uint64_t gathered_plans;                                 /* gather_lock */
  uint64_t gathered_batches;                               /* atomic */
  /* Where a gathered plan's time goes, summed over plans (gather_lock):
   * queued until its batch started, in its batch's submission, the
   * batches' data; and (atomic) from the batch's end until its thread
   * ran again; summed over batches, and the longest: their submissions. */
  uint64_t gather_queued_ns, gather_run_ns, gather_bytes_done;
  uint64_t gather_sub_ns, gather_sub_max_ns;
  uint64_t gather_woken_ns;
};

/* coding.c: take one of the GPU's places for an operation about to run
 * there (false: GPU unusable, or busy under accel=auto: run it on the
 * CPU); an operation on the GPU ends (claimed); the GPU failed (this
 * operation and all later ones on the CPU); an encode on the CPU (0, or
 * -1 with errno EIO). */
bool gr_coding_claim (struct gr_coding *c);
void gr_coding_release (struct gr_coding *c);
void gr_coding_gpu_failed (struct gr_coding *c, const char *op, int r);
int gr_coding_encode_cpu (struct gr_coding *c, uint8_t *const *blocks,
                          size_t nstripes, size_t len, uint32_t *cksums);

/* coding-batch.c: the group commit's and the gathering's accounts
 * logged (at exit);
 * full-stripe encodes of whole chunks through the group commit (0 or a
 * negative errno); does a small GPU operation of `bytes` of data go to
 * be gathered; the operations ops[0..nops) (reconstructs, encodes; bytes
 * of data) gathered with others (0, or -EIO after nbdkit_error). */
void gr_coding_batch_log (const struct gr_coding *c);
int gr_coding_encode_combined (struct gr_coding *c, uint8_t *const *blocks,
                               size_t nstripes, size_t len,
                               uint32_t *cksums);
/* coding-batch.c: such an encode queued without waiting (NULL: no room
 * in the queue, or no memory); its batch waited for, led if it has not
 * gone (0 or a negative errno), and e freed. */
struct gr_coding_enc *gr_coding_comb_begin (struct gr_coding *c,
                                            uint8_t *const *blocks,
                                            size_t nstripes, size_t len,
                                            uint32_t *cksums);
int gr_coding_comb_end (struct gr_coding *c, struct gr_coding_enc *e);
bool gr_coding_gather_this (struct gr_coding *c, size_t bytes);
int gr_coding_gathered (struct gr_coding *c, const struct gr_code_op *ops,
                        size_t nops, size_t bytes);

#endif /* GPURAID_CODING_INTERNAL_H */
