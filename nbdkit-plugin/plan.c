/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the planner.  See plan.h. */
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "plan-internal.h"
#include "format/format.h"

/* Parity of full-stripe writes is encoded in batches of this much. */
#define FULL_BATCH_PARITY (32u << 20)
/* Resync reads this much of every member at once (all members). */
#define RESYNC_BATCH (64u << 20)
/* Whole stripes per fallocate call (the stripes stay locked meanwhile). */
#define FALLOC_BATCH 64

const char *
gr_plan_kind_name (enum gr_plan_kind kind)
{
  static const char *const names[] = {
    "read", "read-degraded", "write-full", "write-rcw", "write-rmw",
    "write-degraded", "write-joined", "fallocate", "skip", "resync", "rebuild", "check",
    "replay", "repair", "refuse",
  };
  _Static_assert (sizeof names / sizeof names[0] == GR_PLAN_REFUSE + 1,
                  "a name for every plan kind");

  return kind <= GR_PLAN_REFUSE ? names[kind] : "?";
}

/* --- building plans ------------------------------------------------------ */

/* Is any member failed (or being rebuilt, and used: a crash would leave
 * it missing, so its writes are journaled like a degraded array's)? */
static bool
degraded (const struct gr_plan_ctx *c)
{
  int i;

  if (c->rb_live)
    return true;
  for (i = 0; i < c->g->k + c->g->m; i++)
    if (c->failed[i])
      return true;
  return false;
}

/* Read the k survivors of stripe s over [lo, lo + L) into blk[0..n-1]
 * and rebuild there the lost chunks that want names.  The reconstruct
 * has a list of its own, blk[n..2n-1] (p->nblk set past it): the same
 * blocks, but for the lost chunks before the k-th survivor that it does
 * not want, which are erased and not rebuilt (no block: gf.h). */
static void
read_and_reconstruct (const struct gr_plan_ctx *c, struct gr_plan *p,
                      uint64_t s, uint32_t lo, size_t L, const bool *want)
{
  int k = c->g->k, n = k + c->g->m, i;
  bool lst[GR_MAX_MEMBERS];
  int surv[GR_MAX_MEMBERS], er[GR_MAX_MEMBERS], ne;

  for (i = 0; i < n; i++)
    lst[i] = lost (c, s, i);
  /* At most m lost (checked by the caller): never -EIO here. */
  ne = gr_reconstruct_choose (k, c->g->m, lst, want, er, surv);
  for (i = 0; i < k; i++)
    add_read (p, gr_map_member (c->g, s, surv[i]), moff (c, s, lo), L,
              p->blk[surv[i]]);
  for (i = 0; i < n; i++)
    p->blk[n + i] = p->blk[i];
  for (i = 0; i < ne; i++)
    if (!want[er[i]])
      p->blk[n + er[i]] = loc (GR_SPACE_NONE, 0);
  p->nblk = (size_t) 2 * n;
  add_reconstruct (p, (size_t) n, 1, L, er, ne,
                   c->gpu (c->gpu_arg, GR_OP_RECONSTRUCT, (size_t) k * L,
                           members_lost (c)));
}

/* The writes of a partial-stripe plan: the touched data from the
 * chunks' blocks where they hold the new bytes (news: a reconstruct-write,
 * a degraded write; no second copy of them through an O_DIRECT member's
 * bounce buffer), else from the source; the live parity from its
 * blocks. */
static void
write_piece (const struct gr_plan_ctx *c, struct gr_plan *p,
             const struct piece *pc, enum gr_space src, bool news)
{
  int k = c->g->k, n = k + c->g->m, i;

  for (i = pc->i0; i <= pc->i1; i++) {
    uint32_t a, b;
    size_t off;

    piece_range (pc, i, &a, &b, &off);
    if (lost (c, pc->s, i))
      continue;
    if (news) {
      /* With whole blocks, those of [a, b) (the block holds the new
       * bytes over the old over [lo, hi)). */
      if (c->blocks) {
        a = a / GR_CKSUM_BLOCK * GR_CKSUM_BLOCK;
        b = (b + GR_CKSUM_BLOCK - 1) / GR_CKSUM_BLOCK * GR_CKSUM_BLOCK;
      }
      add_write (p, gr_map_member (c->g, pc->s, i), moff (c, pc->s, a),
                 b - a, loc (p->blk[i].space, p->blk[i].off + (a - pc->lo)));
    }
    else
      add_write (p, gr_map_member (c->g, pc->s, i), moff (c, pc->s, a),
                 b - a, loc (src, off));
  }
  for (i = k; i < n; i++)
    if (!lost (c, pc->s, i))
      add_write (p, gr_map_member (c->g, pc->s, i), moff (c, pc->s, pc->lo),
                 pc->hi - pc->lo, p->blk[i]);
}

/* Part of one stripe.  Read-modify-write when it reads fewer chunks than
 * reconstruct-write (like md): RMW reads the touched data and the live
 * parity, RCW the data chunks not fully overwritten over [lo, hi).  A
 * failed data chunk makes it a degraded write. */
static void
plan_write_part (const struct gr_plan_ctx *c, const struct gr_span *sp,
                 enum gr_space src, struct gr_plan *p)
{
  int k = c->g->k, m = c->g->m, n = k + m, i, j;
  int failed_data = 0, failed_parity = 0, rcw = 0, rmw;
  struct piece pc;
  uint64_t s = sp->stripe;
  size_t L;

  piece_init (&pc, c->g, c->lm, sp);
  L = pc.hi - pc.lo;
  for (i = 0; i < n; i++)
    if (lost (c, s, i))
      i < k ? failed_data++ : failed_parity++;
  for (i = 0; i < k; i++)
    if (!piece_covers (&pc, i))
      rcw++;
  rmw = (pc.i1 - pc.i0 + 1) + (m - failed_parity);
  /* With checksums a chunk written in part of a block is written whole:
   * reconstruct-write has its whole new bytes, read-modify-write only
   * their delta. */
  if (c->blocks)
    for (i = pc.i0; i <= pc.i1; i++) {
      uint32_t a, b;
      size_t off;

      piece_range (&pc, i, &a, &b, &off);
      if (a % GR_CKSUM_BLOCK || b % GR_CKSUM_BLOCK)
        rmw = rcw + 1;
    }

  for (i = 0; i < n + m; i++)
    p->blk[i] = loc (GR_SPACE_SCRATCH, (size_t) i * L);

  if (failed_data > 0) {
    /* Rebuild the old stripe's lost data over [lo, hi) (not its lost
     * parity: the encode recomputes it), overlay the new data, encode
     * every parity. */
    bool want[GR_MAX_MEMBERS] = { false };

    start (p, GR_PLAN_WRITE_DEGRADED, GR_LOCK_EXCL, sp);
    p->scratch_len = (size_t) n * L;
    for (i = 0; i < k; i++)
      want[i] = lost (c, s, i);
    read_and_reconstruct (c, p, s, pc.lo, L, want);
    for (i = pc.i0; i <= pc.i1; i++) {
      uint32_t a, b;
      size_t off;

      piece_range (&pc, i, &a, &b, &off);
      add_move (p, GR_STEP_COPY,
                loc (GR_SPACE_SCRATCH, (size_t) i * L + (a - pc.lo)),
                loc (src, off), b - a);
    }
    add_coding (p, GR_STEP_ENCODE, 1, L, 0,
                c->gpu (c->gpu_arg, GR_OP_ENCODE, (size_t) k * L, 0));
  }
  else if (rmw < rcw && !c->rb_live) {
    /* delta = old ^ new over the touched bytes (zero elsewhere in
     * [lo, hi)); parity ^= G * delta for the touched chunks (one
     * operation: on the GPU, one encode of all their deltas).  Not below
     * a rebuild's front: the journal holds the replacement's chunks as
     * lost (a crash leaves it out), so the plan must hold them whole,
     * as a reconstruct-write does, not as deltas or not at all. */
    bool gpu = c->gpu (c->gpu_arg, GR_OP_UPDATE, L, 0);

    start (p, GR_PLAN_WRITE_RMW, GR_LOCK_EXCL, sp);
    p->nblk = n + m;
    p->scratch_len = (size_t) (n + m) * L;
    for (j = k; j < n; j++) {
      if (!lost (c, s, j))
        add_read (p, gr_map_member (c->g, s, j), moff (c, s, pc.lo), L,
                  p->blk[j]);
      else
        add_move (p, GR_STEP_ZERO, p->blk[j], p->blk[j], L);
    }
    for (i = pc.i0; i <= pc.i1; i++) {
      size_t at = (size_t) i * L, off;
      uint32_t a, b;

      piece_range (&pc, i, &a, &b, &off);
      add_read (p, gr_map_member (c->g, s, i), moff (c, s, a), b - a,
                loc (GR_SPACE_SCRATCH, at + (a - pc.lo)));
      add_move (p, GR_STEP_ZERO, loc (GR_SPACE_SCRATCH, at),
                loc (GR_SPACE_SCRATCH, at), a - pc.lo);
      add_move (p, GR_STEP_ZERO, loc (GR_SPACE_SCRATCH, at + (b - pc.lo)),
                loc (GR_SPACE_SCRATCH, at + (b - pc.lo)), pc.hi - b);
      add_move (p, GR_STEP_XOR, loc (GR_SPACE_SCRATCH, at + (a - pc.lo)),
                loc (src, off), b - a);
    }
    add_coding (p, GR_STEP_UPDATE, 1, L, pc.i0, gpu)->count =
      pc.i1 - pc.i0 + 1;
  }
  else {
    /* Read the data not overwritten, overlay the new data, encode. */
    start (p, GR_PLAN_WRITE_RCW, GR_LOCK_EXCL, sp);
    p->nblk = n;
    p->scratch_len = (size_t) n * L;
    for (i = 0; i < k; i++) {
      if (piece_covers (&pc, i)) {
        p->blk[i] = loc (src, piece_lo_off (&pc, i));
        continue;
      }
      add_read (p, gr_map_member (c->g, s, i), moff (c, s, pc.lo), L,
                p->blk[i]);
      if (i >= pc.i0 && i <= pc.i1) {
        uint32_t a, b;
        size_t off;

        piece_range (&pc, i, &a, &b, &off);
        add_move (p, GR_STEP_COPY,
                  loc (GR_SPACE_SCRATCH, p->blk[i].off + (a - pc.lo)),
                  loc (src, off), b - a);
      }
    }
    add_coding (p, GR_STEP_ENCODE, 1, L, 0,
                c->gpu (c->gpu_arg, GR_OP_ENCODE, (size_t) k * L, 0));
  }
  write_piece (c, p, &pc, src, p->kind != GR_PLAN_WRITE_RMW);
  p->lo = pc.lo;
  p->hi = pc.hi;
  p->journal = degraded (c);
}

/* Is sp, part of a stripe, the other part of c->peer's (the two
 * disjoint, in whole chunks, together the whole stripe)? */
static bool
joins_peer (const struct gr_plan_ctx *c, const struct gr_span *sp)
{
  const uint64_t W = gr_map_stripe_width (c->g), w0 = sp->stripe * W;
  const struct gr_plan_peer *q = c->peer;

  if (q == NULL || q->len == 0 || q->len >= W || sp->len >= W ||
      q->offset < w0 || q->offset + q->len > w0 + W ||
      q->len + sp->len != W || (sp->so + sp->len) % c->g->chunk ||
      sp->so % c->g->chunk)
    return false;
  return sp->logical + sp->len == q->offset || q->offset + q->len ==
    sp->logical;
}

/* Part of a stripe joined with the rest, a concurrent write's
 * (c->peer): the whole stripe from both requests' buffers, encoded and
 * written all (lost members left out; degraded, journaled as a
 * full-stripe write is), no reads. */
static void
plan_write_joined (const struct gr_plan_ctx *c, const struct gr_span *sp,
                   struct gr_plan *p)
{
  int k = c->g->k, m = c->g->m, n = k + m, i;
  const uint32_t C = c->g->chunk;
  const uint64_t s = sp->stripe, w0 = s * gr_map_stripe_width (c->g);

  start (p, GR_PLAN_WRITE_JOINED, GR_LOCK_EXCL, sp);
  p->journal = degraded (c);
  p->lo = 0;
  p->hi = C;
  for (i = 0; i < n; i++) {
    const uint64_t at = w0 + (uint64_t) i * C;   /* data chunk i's */
    struct gr_loc *b = &p->blk[i];

    if (i >= k)
      *b = loc (GR_SPACE_SCRATCH, (size_t) (i - k) * C);
    else if (at >= sp->logical && at < sp->logical + sp->len)
      *b = loc (GR_SPACE_REQ, at - sp->logical);
    else
      *b = loc (GR_SPACE_PEER, at - c->peer->offset);
    if (!lost (c, s, i))
      add_write (p, gr_map_member (c->g, s, i), moff (c, s, 0), C, *b);
  }
  p->nblk = n;
  p->scratch_len = (size_t) m * C;
  add_coding (p, GR_STEP_ENCODE, 1, C, 0,
              c->gpu (c->gpu_arg, GR_OP_ENCODE, (size_t) k * C, 0));
}

/* Most whole stripes a multi-stripe plan takes, given per-stripe use of
 * the plan's arrays, and a limit of its own. */
static uint64_t
batch_limit (const struct gr_plan *p, size_t io_per, size_t blk_per,
             uint64_t limit)
{
  if (limit < 1)
    limit = 1;
  if (io_per && limit > p->cap_io / io_per)
    limit = p->cap_io / io_per;
  if (blk_per && limit > p->cap_blk / blk_per)
    limit = p->cap_blk / blk_per;
  return limit;
}

/* Extend a plan that starts with whole stripe first over the whole
 * stripes that follow, up to max stripes in all. */
static void
take_whole (const struct gr_plan_ctx *c, struct gr_walk *w,
            const struct gr_span *first, uint64_t max, struct gr_plan *p)
{
  struct gr_walk save;
  struct gr_span sp;

  p->s0 = first->stripe;
  p->nstripes = 1;
  p->len = first->len;
  while (p->nstripes < max) {
    save = *w;
    if (!gr_map_walk_next (w, &sp) || !gr_map_span_whole (c->g, &sp)) {
      *w = save;
      return;
    }
    p->nstripes++;
    p->len += sp.len;
  }
}

/* Whole stripes: parity encoded straight from the source in one batch;
 * no reads, so failed members are simply not written.  Where an
 * O_DIRECT member would bounce the request's data (gpu_copy_in), the
 * GPU first copies it into scratch (one COPY step: whole stripes are
 * contiguous in the request), and the encode and the writes take it
 * from there. */
static void
plan_write_full (const struct gr_plan_ctx *c, struct gr_walk *w,
                 const struct gr_span *first, enum gr_space src,
                 struct gr_plan *p)
{
  int k = c->g->k, m = c->g->m, n = k + m, i;
  uint32_t C = c->g->chunk;
  uint64_t width = gr_map_stripe_width (c->g), st;
  const bool copy = src == GR_SPACE_REQ && gpu_copy_in (c, 0);
  size_t dbase;

  /* Degraded, each stripe is journaled: one at a time.  Where the data
   * may be copied, its copy counts in the batch's scratch too (the
   * route, asked for the batch's size, is known only after). */
  p->kind = GR_PLAN_WRITE_FULL;
  p->lock = GR_LOCK_EXCL;
  p->journal = degraded (c);
  p->lo = 0;
  p->hi = C;
  take_whole (c, w, first, p->journal ? 1 : batch_limit (p, n, n,
              FULL_BATCH_PARITY / ((uint64_t) (copy ? n : m) * C)), p);
  const bool gpu = c->gpu (c->gpu_arg, GR_OP_ENCODE, p->nstripes * k * C, 0);
  const bool copied = copy && gpu;

  dbase = p->nstripes * m * C;  /* the data's copy, after the parity */
  if (copied) {
    src = GR_SPACE_SCRATCH;
    add_gpu_copy (p, loc (GR_SPACE_SCRATCH, dbase), loc (GR_SPACE_REQ, 0),
                  p->nstripes * width);
  }
  for (st = 0; st < p->nstripes; st++) {
    uint64_t s = p->s0 + st;

    for (i = 0; i < n; i++) {
      struct gr_loc *b = &p->blk[st * n + i];

      *b = i < k ? loc (src, (copied ? dbase : 0) + st * width + (size_t) i * C)
        : loc (GR_SPACE_SCRATCH, (st * m + (i - k)) * C);
      if (!lost (c, s, i))
        add_write (p, gr_map_member (c->g, s, i), moff (c, s, 0), C, *b);
    }
  }
  p->nblk = p->nstripes * n;
  p->scratch_len = p->nstripes * (copied ? n : m) * C;
  add_coding (p, GR_STEP_ENCODE, p->nstripes, C, 0, gpu);
}

/* Whole stripes zeroed by fallocate: the chunk of stripe s is at the same
 * offset on every member, so the same range on every live member leaves
 * data and parity zero and consistent. */
static void
plan_fallocate (const struct gr_plan_ctx *c, struct gr_walk *w,
                const struct gr_span *first, enum gr_io_kind mode,
                struct gr_plan *p)
{
  int n = c->g->k + c->g->m, i;

  p->kind = GR_PLAN_FALLOCATE;
  p->lock = GR_LOCK_EXCL;
  take_whole (c, w, first, FALLOC_BATCH, p);
  for (i = 0; i < n; i++)
    if (!c->failed[i])
      add_io (p->write, &p->nwrite, mode, i, moff (c, p->s0, 0),
              p->nstripes * c->g->chunk, loc (GR_SPACE_ZERO, 0));
}

/* Recompute the parity of whole stripes and rewrite what differs (md's
 * resync).  Member-major: for a batch of stripes each member's chunks are
 * contiguous, so one read per member per batch. */
static void
plan_resync (const struct gr_plan_ctx *c, struct gr_walk *w,
             const struct gr_span *first, struct gr_plan *p)
{
  int k = c->g->k, m = c->g->m, n = k + m, i, j;
  uint32_t C = c->g->chunk;
  uint64_t st, nb;

  p->kind = GR_PLAN_RESYNC;
  p->lock = GR_LOCK_EXCL;
  take_whole (c, w, first, batch_limit (p, m, n, RESYNC_BATCH /
                                        ((uint64_t) n * C)), p);
  nb = p->nstripes;
  /* Member j's chunks of the batch at j * nb * C, new parity after. */
  for (j = 0; j < n; j++)
    add_read (p, j, moff (c, p->s0, 0), nb * C,
              loc (GR_SPACE_SCRATCH, j * nb * C));
  for (st = 0; st < nb; st++) {
    uint64_t s = p->s0 + st;

    for (i = 0; i < n; i++) {
      struct gr_loc ondisk = loc (GR_SPACE_SCRATCH,
                                  ((size_t) gr_map_member (c->g, s, i) * nb
                                   + st) * C);

      if (i < k)
        p->blk[st * n + i] = ondisk;
      else {
        p->blk[st * n + i] = loc (GR_SPACE_SCRATCH,
                                  (n * nb + st * m + (i - k)) * C);
        add_io (p->write, &p->nwrite, GR_IO_WRITE_CHANGED,
                gr_map_member (c->g, s, i), moff (c, s, 0), C,
                p->blk[st * n + i]);
        p->write[p->nwrite - 1].cmp = ondisk;
      }
    }
  }
  p->nblk = nb * n;
  p->scratch_len = (n + m) * nb * C;
  add_coding (p, GR_STEP_ENCODE, nb, C, 0,
              c->gpu (c->gpu_arg, GR_OP_ENCODE, nb * k * C, 0));
}

/* The fallocate mode a zero or trim of whole stripes uses, or 0. */
static enum gr_io_kind
falloc_mode (const struct gr_plan_ctx *c, enum gr_req req)
{
  bool punch = c->falloc & GR_FALLOC_PUNCH, zero = c->falloc & GR_FALLOC_ZERO;

  if (c->req_zero_write)
    punch = zero = false;

  switch (req) {
  case GR_REQ_TRIM:
    return punch ? GR_IO_PUNCH : GR_IO_READ;
  case GR_REQ_ZERO_MAY_TRIM:
    return punch ? GR_IO_PUNCH : zero ? GR_IO_ZERO_RANGE : GR_IO_READ;
  case GR_REQ_ZERO:
    return zero ? GR_IO_ZERO_RANGE : punch ? GR_IO_PUNCH : GR_IO_READ;
  default:
    return GR_IO_READ;
  }
}

enum gr_plan_kind
gr_plan_next (const struct gr_plan_ctx *c0, enum gr_req req, uint64_t offset,
              uint64_t len, struct gr_plan *p)
{
  int n = c0->g->k + c0->g->m, i, nfailed = 0;
  struct gr_plan_ctx rc;
  bool rfailed[GR_MAX_MEMBERS];
  const struct gr_plan_ctx *c = c0;
  enum gr_space src = req == GR_REQ_WRITE ? GR_SPACE_REQ : GR_SPACE_ZERO;
  enum gr_io_kind mode;
  struct gr_walk w;
  struct gr_span sp;

  p->offset = offset;
  p->len = len;
  p->s0 = offset / gr_map_stripe_width (c->g);
  p->nstripes = 0;
  p->lock = GR_LOCK_NONE;
  p->gen = c->gen;
  p->journal = false;
  p->lo = p->hi = 0;
  p->scratch_len = 0;
  plan_reset (p);

  /* A member being rebuilt is live below its front: a plan that starts
   * there stops at the front, one that starts above it treats the member
   * as lost. */
  if (c0->rb_front) {
    const uint64_t width = gr_map_stripe_width (c0->g);

    for (i = 0; i < n; i++) {
      const uint64_t fb = c0->rb_front[i] * width;

      if (!c0->failed[i] || offset >= fb)
        continue;
      if (len > fb - offset)
        len = fb - offset;
      if (c == c0) {
        memcpy (rfailed, c0->failed, n * sizeof *rfailed);
        rc = *c0;
        rc.failed = rfailed;
        rc.rb_live = true;
        c = &rc;
      }
      rfailed[i] = false;
    }
    p->len = len;
  }

  for (i = 0; i < n; i++)
    nfailed += c->failed[i];
  if (nfailed > c->g->m || (req == GR_REQ_RESYNC && nfailed > 0))
    return p->kind = GR_PLAN_REFUSE;

  gr_map_walk_init (&w, c->g, offset, len);
  gr_map_walk_next (&w, &sp);
  switch (req) {
  case GR_REQ_READ:
    if (span_healthy (c, &sp))
      gr_plan_read_healthy (c, &w, &sp, p);
    else
      gr_plan_read_degraded (c, &w, &sp, p);
    break;
  case GR_REQ_RESYNC:
    plan_resync (c, &w, &sp, p);
    break;
  case GR_REQ_TRIM:
  case GR_REQ_ZERO:
  case GR_REQ_ZERO_MAY_TRIM:
  case GR_REQ_WRITE:
    mode = falloc_mode (c, req);
    if (!gr_map_span_whole (c->g, &sp)) {
      if (req == GR_REQ_TRIM) {
        start (p, GR_PLAN_SKIP, GR_LOCK_NONE, &sp);
        p->nstripes = 0;
      }
      else if (req == GR_REQ_WRITE && joins_peer (c, &sp))
        plan_write_joined (c, &sp, p);
      else
        plan_write_part (c, &sp, src, p);
    }
    else if (mode != GR_IO_READ)
      plan_fallocate (c, &w, &sp, mode, p);
    else if (req == GR_REQ_TRIM) {
      /* Trim is advisory: without punch-hole, nothing is done. */
      start (p, GR_PLAN_SKIP, GR_LOCK_NONE, &sp);
      p->nstripes = 0;
    }
    else
      plan_write_full (c, &w, &sp, src, p);
    break;
  }
  return p->kind;
}
