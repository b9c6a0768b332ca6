/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the planner: what a request or a job's batch does to the
 * members (pure).
 *
 * Deciding apart from doing, like md's raid5.c (analyse_stripe decides,
 * handle_stripe does, for requests, resync, check and rebuild alike):
 * for a range of a request and a snapshot of which members have failed,
 * gr_plan_next returns a plan for the first part of the range; for a
 * batch of stripes of a background job, gr_plan_rebuild,
 * gr_plan_check and gr_plan_replay (and gr_plan_next with
 * GR_REQ_RESYNC) return one for the batch.  A plan is a value that lists
 *   - the member reads (member, offset, length, destination),
 *   - the steps on the plan's buffers: moves (zero, copy, XOR) and coding
 *     operations (encode, parity update of data chunks i .. j,
 *     reconstruct of a given erased set for given wanted chunks),
 *   - the member writes (or fallocate calls, for zero and trim),
 * and the stripe lock it needs.  The executor (exec.h) runs it.  Nothing
 * here does I/O, locks, allocates or logs; test-plan checks every plan
 * kind by brute force over small geometries and runs plans on in-memory
 * members.
 *
 * Bytes live in three spaces: the request's buffer (its offsets count
 * from the plan's first byte, plan->offset), the plan's scratch area
 * (plan->scratch_len bytes that the executor provides), and zeros (a
 * source only; any offset); a joined write (GR_PLAN_WRITE_JOINED) has a
 * fourth, the bytes of the concurrent write it joins (its offsets count
 * from gr_plan_ctx's peer's first byte).
 */
#ifndef GPURAID_PLAN_H
#define GPURAID_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gf/gf.h"
#include "raidmap/raidmap.h"

enum gr_space {
  GR_SPACE_REQ, GR_SPACE_SCRATCH, GR_SPACE_ZERO,
  GR_SPACE_PEER,                /* a joined write's other part (a source
                                 * only) */
  GR_SPACE_NONE,                /* a block that is not there (a lost
                                 * chunk a check passes over) */
};

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
  GR_IO_WRITE_LOCATED,          /* a check's repair: written only if the
                                 * check located one corrupt chunk in
                                 * stripe slot `slot` of the plan, to
                                 * that chunk's member (member is -1 in
                                 * the plan) */
  GR_IO_WRITE_UNLOCATED,        /* a locating resync's parity: written
                                 * only if the check found stripe slot
                                 * `slot` inconsistent and located no
                                 * chunk, and it differs from cmp */
  GR_IO_WRITE_SHADOW,           /* written to the member's live
                                 * replacement only (gr_plan_copy) */
};

/* One member access. */
struct gr_io {
  enum gr_io_kind kind;
  int member;
  uint64_t off;                 /* byte offset on the member */
  uint64_t len;
  struct gr_loc buf;            /* read: destination; write: source */
  struct gr_loc cmp;            /* GR_IO_WRITE_CHANGED: the bytes read */
  uint32_t slot;                /* GR_IO_WRITE_LOCATED: the stripe, from
                                 * the plan's s0 */
};

/* The coding operations, as the router (coding.h) weighs them. */
enum gr_op { GR_OP_ENCODE, GR_OP_RECONSTRUCT, GR_OP_UPDATE };

enum gr_step_kind {
  GR_STEP_ZERO,                 /* dst = 0 over len */
  GR_STEP_COPY,                 /* dst = src over len */
  GR_STEP_XOR,                  /* dst ^= src over len */
  GR_STEP_ENCODE,               /* parity of nstripes stripes */
  GR_STEP_UPDATE,               /* parity ^= G[.][index ..] * deltas */
  GR_STEP_RECONSTRUCT,          /* rebuild the erased blocks */
  GR_STEP_VERIFY,               /* a check's verdicts (below) */
};

/* Coding steps work on blocks of len bytes: plan->blk[blk0 ...], n per
 * stripe (code index order) for ENCODE and RECONSTRUCT (which rebuilds
 * the erasure set plan->er[er0 .. er0 + ner), the same for each of its
 * nstripes stripes); for UPDATE the deltas of data chunks index .. index
 * + count - 1 are blk[blk0 + index ...], the parity blk[blk0 + k ...]
 * and m blocks of scratch for the GPU's partial results blk[blk0 + n
 * ...].
 *
 * VERIFY gives each of the plan's nstripes stripes a verdict
 * (plan->verdict[slot]): stripe slot t's chunks as read are blk[blk0 +
 * t * n ...] (GR_SPACE_NONE where lost), the same chunks computed again
 * from the others by the coding steps before it are blk[cmp0 + t * n
 * ...] (GR_SPACE_NONE where not computed); the stripe is consistent when
 * every computed chunk equals the one read.  When not, and at least two
 * live chunks of redundancy are left, each live chunk in turn is taken
 * as erased: if exactly one choice makes the rest consistent, that chunk
 * is the corrupt one (located), and its bytes rebuilt from the others
 * are left in blk[fix0 + t]; it never guesses.  tmp0: n blocks of
 * scratch it works in. */
struct gr_step {
  enum gr_step_kind kind;
  struct gr_loc dst, src;       /* moves */
  size_t len;                   /* moves: bytes; coding: block length */
  size_t blk0, nstripes;        /* coding */
  size_t er0;                   /* RECONSTRUCT: its erasure set */
  int ner;
  size_t cmp0, fix0, tmp0;      /* VERIFY */
  int index, count;             /* UPDATE: the data chunks */
  bool gpu;                     /* coding: the route chosen (coding.h);
                                 * COPY: made by the GPU where it can
                                 * (gr_plan_ctx's gpu_copies) */
};

/* What VERIFY found in a stripe. */
enum gr_verdict_kind {
  GR_VERDICT_CONSISTENT,
  GR_VERDICT_LOCATED,           /* one corrupt chunk: index */
  GR_VERDICT_UNLOCATED,         /* not consistent, and no single chunk
                                 * explains it */
  GR_VERDICT_UNDECIDABLE,       /* not consistent, one chunk of
                                 * redundancy left: which chunk is wrong
                                 * cannot be told */
  GR_VERDICT_SKIPPED,           /* not checked (the plan did nothing) */
};
struct gr_verdict {
  enum gr_verdict_kind kind;
  int index;                    /* LOCATED: the chunk's code index */
};

enum gr_plan_kind {
  GR_PLAN_READ,                 /* data chunks straight into the request */
  GR_PLAN_READ_DEGRADED,        /* k survivors, reconstruct, copy out */
  GR_PLAN_WRITE_FULL,           /* whole stripes: encode, write all */
  GR_PLAN_WRITE_RCW,            /* read the untouched data, encode */
  GR_PLAN_WRITE_RMW,            /* read old data and parity, update */
  GR_PLAN_WRITE_DEGRADED,       /* reconstruct, overlay, encode */
  GR_PLAN_WRITE_JOINED,         /* part of a stripe whose rest a
                                 * concurrent write gave it (peer): the
                                 * whole stripe encoded, written all, no
                                 * reads */
  GR_PLAN_FALLOCATE,            /* whole stripes: the same range of every
                                 * live member punched or zeroed */
  GR_PLAN_SKIP,                 /* nothing to do (trim of part of a stripe) */
  GR_PLAN_RESYNC,               /* whole stripes: recompute the parity,
                                 * rewrite what differs */
  GR_PLAN_REBUILD,              /* a rebuild's batch: k survivors of each
                                 * stripe, the replacements' chunks
                                 * reconstructed and written */
  GR_PLAN_CHECK,                /* a scrub's batch: every live chunk
                                 * read, verdicts; with repair, a located
                                 * chunk rewritten */
  GR_PLAN_REPLAY,               /* a journal entry: parity recomputed
                                 * from the live data and the journaled
                                 * chunks, written */
  GR_PLAN_REPAIR,               /* blocks that failed their checksums
                                 * rebuilt from the others, rewritten */
  GR_PLAN_REFUSE,               /* more than m members lost: EIO */
};

/* A degraded read's plan takes a second stripe and more only while its
 * scratch stays within this (a thread's kept buffer, scratch.h); so does
 * a healthy read's whose blocks go through scratch for the GPU's copies
 * (gr_plan_ctx's gpu_copies). */
#define GR_PLAN_DEGRADED_SCRATCH ((size_t) 1 << 20)

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
  int *er;                      /* RECONSTRUCT steps' erasure sets */
  size_t ner;
  /* REBUILD: the members whose rebuild front the plan moves to member
   * byte rb_end once written (its writes to them are done only once the
   * front may move there: exec.h). */
  bool rb_adv[GR_MAX_MEMBERS];
  uint64_t rb_end;
  struct gr_verdict *verdict;   /* CHECK: one a stripe (VERIFY's) */
  /* gr_steps_run, asked for them (steps.h): the block checksums its GPU
   * encodes computed with the coding, in a plan of those alone (a
   * full-stripe write): bsum[i] those of block i, of its first sum_len
   * bytes (0: none); sums holds them (cap_sums). */
  size_t sum_len, cap_sums;
  uint32_t **bsum;
  uint32_t *sums;
  int *wer, *wner;              /* the planner's work arrays (batch
                                 * plans: cap_stripes * m and
                                 * cap_stripes entries) */
  size_t cap_io, cap_step, cap_blk, cap_er, cap_stripes;
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
  bool req_zero_write;          /* requests zero and trim by writing
                                 * (degraded with a journal: each stripe
                                 * journaled), not by fallocate; the
                                 * jobs' zeroing (not journaled) still
                                 * fallocates */
  /* Where a coding operation of that many data bytes (a reconstruct's
   * nerased: the members lost, members_lost in plan-internal.h) runs:
   * true for the GPU, whose blocks are then all in scratch (the engine
   * copies page-locked memory directly), or in the request where
   * req_pinned. */
  bool (*gpu) (void *arg, enum gr_op op, size_t bytes, int nerased);
  void *gpu_arg;
  bool req_pinned;              /* the request's buffer is page-locked
                                 * too (coding.h): GPU blocks may lie in
                                 * it */
  /* Members being rebuilt (failed[] says lost), or NULL if none:
   * rb_front[member] (stripes; 0 for the others) is the front below
   * which a replacement is live, so a plan starting there ends at its
   * front and uses it; a plan starting above treats it as lost. */
  const uint64_t *rb_front;
  bool rb_live;                 /* set by gr_plan_next for a plan below
                                 * a front: its writes are journaled */
  /* The array keeps block checksums (cksum.h); blocks is set too. */
  bool cksum;
  /* Every member read and write of the data area covers whole 4096-byte
   * blocks (lm is then a multiple of 4096): with checksums, so that each
   * block read can be verified and each block written gets its checksum
   * from its whole contents; with a member opened with O_DIRECT
   * (members.h: gr_members_direct), so that the write of part of a block
   * has its old bytes from the plan's own reads, not from a
   * read-modify-write below (storage.h). */
  bool blocks;
  /* O_DIRECT's copies on the GPU.  A member opened with O_DIRECT reads
   * into and writes from memory aligned to dio_align (members.h
   * gr_members_dio_align; 0 or 1: none is); a block read into the
   * request or written from it where it is not (its address req_addr,
   * the plan's first request byte, plus its offset) goes through the
   * storage library's bounce buffer, a memcpy of every byte.  With
   * gpu_copies (a read or a write whose buffer is page-locked for a
   * usable GPU: req_pinned), such a block that a degraded read's GPU
   * reconstruct reads is read into scratch instead (page-locked and
   * aligned) and copied into the request by a COPY step marked gpu,
   * which the GPU makes (steps.h: host_copy), and a full-stripe write
   * encoded on the GPU has its data copied into scratch first by such a
   * step, then encoded and written from there; a healthy read's blocks
   * are not (measured slower: docs/performance.md).  Pure arithmetic on
   * the address: the planner touches no memory. */
  uint32_t dio_align;
  uintptr_t req_addr;
  bool gpu_copies;
  /* A write's part of a stripe, given the rest of that stripe by a
   * concurrent write (join.h): the rest's logical range, or NULL.  A
   * span of that stripe that is exactly the other part (the two
   * disjoint, whole chunks each, together the stripe) is planned
   * GR_PLAN_WRITE_JOINED. */
  const struct gr_plan_peer *peer;
};

struct gr_plan_peer {
  uint64_t offset, len;
};

/* gr_plan_new and gr_plan_free: steps.h (the plan's arrays). */

/* A job's batch of stripes can be planned whole (its plan's arrays were
 * sized for it: steps.h gr_plan_new_batch). */
bool gr_plan_fits (const struct gr_plan *p, const struct gr_geom *g,
                   uint64_t nstripes);

/* A batch of stripes [s0, s0 + ns) with nothing to do (a job passes
 * over it). */
enum gr_plan_kind gr_plan_skip (const struct gr_plan_ctx *c, uint64_t s0,
                                uint64_t ns, struct gr_plan *p);

/* What a rebuild's batch does for a member. */
enum gr_rb_action {
  GR_RB_NONE,                   /* not rebuilt */
  GR_RB_DECODE,                 /* its chunks reconstructed and written */
  GR_RB_ZERO,                   /* its chunks zeroed (a region never
                                 * written: a replacement reads zeros
                                 * there as the others do) */
  GR_RB_KEEP,                   /* its chunks left as they are (a member
                                 * re-added: a region not written since it
                                 * left) */
};

/* A rebuild's batch: the members with an action in act[] (being
 * rebuilt: c->failed says lost, c->rb_front their fronts, or NULL for 0)
 * rebuilt on stripes [s0, s0 + ns) where their front is not past the
 * stripe: decoded, each stripe's chunks reconstructed from its first k
 * live chunks (a member being rebuilt is no survivor), one coding step
 * per erasure pattern, blocks in scratch (ns * (k + m) chunks); zeroed
 * (punched or zeroed in one fallocate, or written from zeros where the
 * members allow neither); kept (no access).  The members rebuilt get
 * rb_adv and rb_end.  GR_PLAN_SKIP if no stripe needs it, GR_PLAN_REFUSE
 * if a stripe to decode has fewer than k live chunks. */
enum gr_plan_kind gr_plan_rebuild (const struct gr_plan_ctx *c,
                                   const enum gr_rb_action *act, uint64_t s0,
                                   uint64_t ns, struct gr_plan *p);

/* A live replacement's batch (members.h: gr_members_live_begin), member
 * i's chunks of stripes [s0, s0 + ns) read (in one access, verified as
 * any read) and written to its replacement (GR_IO_WRITE_SHADOW); its
 * kind is GR_PLAN_REBUILD (rb_adv[i], rb_end: the replacement's front
 * moves once written). */
enum gr_plan_kind gr_plan_copy (const struct gr_plan_ctx *c, int i,
                                uint64_t s0, uint64_t ns, struct gr_plan *p);

/* A scrub's batch, stripes [s0, s0 + ns): every live chunk read, the
 * chunks that redundancy determines computed again (on a healthy array
 * the parity, in one encode; degraded, the live chunks beyond the first
 * k, one reconstruct per erasure pattern) and VERIFY's verdicts; with
 * repair a GR_IO_WRITE_LOCATED write per stripe.  GR_PLAN_REFUSE if no
 * live chunk of redundancy is left (m or more members lost). */
enum gr_plan_kind gr_plan_check (const struct gr_plan_ctx *c, bool repair,
                                 uint64_t s0, uint64_t ns,
                                 struct gr_plan *p);

/* The resync of a batch of a healthy array without block checksums and
 * with two chunks of redundancy or more: a check with repair
 * (gr_plan_check) whose stripes, where no single corrupt chunk is
 * located, get the parity recomputed from their data (written where it
 * differs, GR_IO_WRITE_UNLOCATED: md's resync); a located chunk is
 * rewritten instead of the parity being recomputed from it.  Its kind is
 * GR_PLAN_RESYNC. */
enum gr_plan_kind gr_plan_resync_check (const struct gr_plan_ctx *c,
                                        uint64_t s0, uint64_t ns,
                                        struct gr_plan *p);

/* A journal entry (journal.h) to replay: the stripe, its coding range
 * and its journaled data chunks (code index index[x]'s bytes [lo, hi) at
 * request offset x * (hi - lo)). */
struct gr_replay_entry {
  uint64_t stripe;
  uint32_t lo, hi;
  int nlost;
  int index[GR_MAX_MEMBERS];
};
/* Its plan: the live data chunks not journaled read over [lo, hi), the
 * parity encoded from them and the journaled ones (from the request
 * buffer), written to every live parity chunk, and a journaled chunk
 * written where its member is live again (below a rebuild's front).
 * Live: not failed, or below its rb_front.  GR_PLAN_REFUSE if a data
 * chunk that was not journaled is not live. */
enum gr_plan_kind gr_plan_replay (const struct gr_plan_ctx *c,
                                  const struct gr_replay_entry *e,
                                  struct gr_plan *p);

/* A repair of stripe s over [lo, hi) of its chunks (multiples of 4096),
 * the chunks in bad[] (by code index) having failed their checksums:
 * every chunk not lost (bad ones included) read into blk[n + i], the
 * first k good ones copied to blk[i] and every other chunk computed from
 * them into blk[i] (blocks of hi - lo bytes in scratch, 2n of them), the
 * bad ones written from there.  The executor compares the good chunks
 * computed with those read before it writes.  GR_PLAN_REFUSE (with the
 * reads only) if fewer than k chunks are good, GR_PLAN_SKIP if none is
 * bad. */
enum gr_plan_kind gr_plan_repair (const struct gr_plan_ctx *c, uint64_t s,
                                  uint32_t lo, uint32_t hi, const bool *bad,
                                  struct gr_plan *p);

/* Plan the first part of [offset, offset + len) (inside the array, len
 * >= 1; for GR_REQ_RESYNC whole stripes) and return its kind; the plan
 * covers [p->offset, p->offset + p->len), p->offset == offset. */
enum gr_plan_kind gr_plan_next (const struct gr_plan_ctx *c, enum gr_req req,
                                uint64_t offset, uint64_t len,
                                struct gr_plan *p);

#endif /* GPURAID_PLAN_H */
