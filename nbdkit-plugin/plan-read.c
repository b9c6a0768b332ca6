/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the planner's reads: healthy (every touched chunk straight
 * into the request) and degraded (survivors read, the lost chunks
 * rebuilt).  See plan.h. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plan.h"
#include "plan-internal.h"
#include "format/format.h"

/* Extent e, for request offset at, in whole blocks (plan.h): the
 * blocks it covers straight into the request, a block it covers only
 * in part into scratch and the part copied out. */
static void
read_blocks (struct gr_plan *p, const struct gr_extent *e, size_t at)
{
  const uint64_t B = GR_CKSUM_BLOCK, end = e->member_off + e->len;
  uint64_t pos = e->member_off;

  while (pos < end) {
    const uint64_t b = pos / B * B;
    uint64_t to = b + B < end ? b + B : end;

    if (pos == b && to == b + B) {
      /* Whole blocks from here: as many as there are. */
      to = end / B * B;
      add_read (p, e->member, pos, to - pos,
                loc (GR_SPACE_REQ, at + (pos - e->member_off)));
    }
    else {
      add_read (p, e->member, b, B, loc (GR_SPACE_SCRATCH, p->scratch_len));
      add_move (p, GR_STEP_COPY,
                loc (GR_SPACE_REQ, at + (pos - e->member_off)),
                loc (GR_SPACE_SCRATCH, p->scratch_len + (pos - b)),
                to - pos);
      p->scratch_len += B;
    }
    pos = to;
  }
}

/* Healthy reads: every touched chunk straight into the request, for as
 * many stripes in a row as are healthy and fit. */
void
gr_plan_read_healthy (const struct gr_plan_ctx *c, struct gr_walk *w,
                      const struct gr_span *first, struct gr_plan *p)
{
  struct gr_span sp = *first;
  struct gr_walk save;
  struct gr_extent e;

  start (p, GR_PLAN_READ, GR_LOCK_NONE, &sp);
  p->len = 0;
  p->nstripes = 0;
  for (;;) {
    uint64_t pos = sp.logical, left = sp.len;

    while (left > 0) {
      gr_map_extent (c->g, pos, left, &e);
      if (c->blocks)
        read_blocks (p, &e, pos - p->offset);
      else
        add_read (p, e.member, e.member_off, e.len,
                  loc (GR_SPACE_REQ, pos - p->offset));
      pos += e.len;
      left -= e.len;
    }
    p->len += sp.len;
    p->nstripes++;
    save = *w;
    if (!gr_map_walk_next (w, &sp) || !span_healthy (c, &sp) ||
        p->nread + (size_t) c->g->k + 2 > p->cap_io) {
      *w = save;
      return;
    }
  }
}

/* Degraded reads: at most this many stripes a plan (their reconstructs
 * then go to the coder together: steps.h), and more than one only
 * within GR_PLAN_DEGRADED_SCRATCH bytes of scratch (plan.h). */
#define DEGRADED_STRIPES 8

/* Stripe sp of a degraded read, its blocks from blk[p->nblk], its
 * scratch from p->scratch_len, its request bytes from at. */
static void
read_degraded_stripe (const struct gr_plan_ctx *c, const struct gr_span *sp,
                      size_t at, struct gr_plan *p)
{
  int k = c->g->k, n = k + c->g->m, i;
  const size_t blk0 = p->nblk;
  struct piece pc;
  bool want[GR_MAX_MEMBERS] = { false }, used[GR_MAX_MEMBERS] = { false };
  bool read[GR_MAX_MEMBERS] = { false };
  bool lst[GR_MAX_MEMBERS], gpu;
  int surv[GR_MAX_MEMBERS], er[GR_MAX_MEMBERS], ne;
  size_t L;

  piece_init (&pc, c->g, c->lm, sp);
  L = pc.hi - pc.lo;
  for (i = pc.i0; i <= pc.i1; i++)
    want[i] = true;
  for (i = 0; i < n; i++)
    lst[i] = lost (c, sp->stripe, i);
  /* At most m lost (checked by the caller): never -EIO here. */
  ne = gr_reconstruct_choose (k, c->g->m, lst, want, er, surv);
  /* The blocks the coding uses: the survivors and the lost blocks the
   * request wants.  A lost block before the k-th survivor that it does
   * not want is erased but not rebuilt (a block that is not there: gf.h),
   * nor is any other block there. */
  for (i = 0; i < k; i++)
    used[surv[i]] = read[surv[i]] = true;
  for (i = 0; i < ne; i++)
    used[er[i]] = want[er[i]];
  gpu = c->gpu (c->gpu_arg, GR_OP_RECONSTRUCT, (size_t) k * L,
                members_lost (c));
  /* On the CPU, chunks the request covers are read or rebuilt in place;
   * on the GPU too where the request is page-locked, else every block is
   * in scratch (page-locked) and the request's part is copied out.  On
   * the GPU, a survivor read where O_DIRECT would bounce it is read into
   * scratch and copied in by the GPU (gpu_copy_in). */
  for (i = 0; i < n; i++)
    if (!used[i])
      p->blk[blk0 + i] = loc (GR_SPACE_NONE, 0);
    else if ((!gpu || c->req_pinned) && piece_covers (&pc, i) &&
             !(gpu && read[i] && gpu_copy_in (c, at + piece_lo_off (&pc, i))))
      p->blk[blk0 + i] = loc (GR_SPACE_REQ, at + piece_lo_off (&pc, i));
    else {
      p->blk[blk0 + i] = loc (GR_SPACE_SCRATCH, p->scratch_len);
      p->scratch_len += L;
    }
  p->nblk += n;
  for (i = 0; i < k; i++)
    add_read (p, gr_map_member (c->g, sp->stripe, surv[i]),
              moff (c, sp->stripe, pc.lo), L, p->blk[blk0 + surv[i]]);
  add_reconstruct (p, blk0, 1, L, er, ne, gpu);
}

/* The request's part of each stripe of a degraded read rebuilt or read
 * in scratch, copied out (after all the reconstructs, which so follow
 * one another: steps.h): by the GPU for the survivors read there for it
 * (a whole block the request covers, where gpu_copy_in: the request's
 * blocks in scratch are else the GPU's outputs, not page-locked, or
 * parts of blocks). */
static void
read_degraded_copies (const struct gr_plan_ctx *c, struct gr_plan *p)
{
  const size_t n = (size_t) c->g->k + c->g->m;
  struct gr_walk w;
  struct gr_span sp;
  size_t blk0 = 0;

  gr_map_walk_init (&w, c->g, p->offset, p->len);
  while (gr_map_walk_next (&w, &sp)) {
    const size_t at = (size_t) (sp.logical - p->offset);
    struct piece pc;
    int i;

    piece_init (&pc, c->g, c->lm, &sp);
    for (i = pc.i0; i <= pc.i1; i++) {
      uint32_t a, b;
      size_t off;

      piece_range (&pc, i, &a, &b, &off);
      if (p->blk[blk0 + i].space == GR_SPACE_SCRATCH) {
        const struct gr_loc dst = loc (GR_SPACE_REQ, at + off);
        const struct gr_loc src = loc (GR_SPACE_SCRATCH,
                                       p->blk[blk0 + i].off + (a - pc.lo));

        if (piece_covers (&pc, i) && gpu_copy_in (c, dst.off))
          add_gpu_copy (p, dst, src, b - a);
        else
          add_move (p, GR_STEP_COPY, dst, src, b - a);
      }
    }
    blk0 += n;
  }
}

/* A read that needs a touched chunk on a failed member: that stripe and
 * the next ones that do too, as many as fit (one member read of them
 * all, then their reconstructs together). */
void
gr_plan_read_degraded (const struct gr_plan_ctx *c, struct gr_walk *w,
                       const struct gr_span *first, struct gr_plan *p)
{
  const int k = c->g->k, n = k + c->g->m;
  struct gr_span sp = *first;
  struct gr_walk save = *w;

  start (p, GR_PLAN_READ_DEGRADED, GR_LOCK_SHARED, &sp);
  p->len = 0;
  p->nstripes = 0;
  for (;;) {
    const size_t nread = p->nread, nblk = p->nblk, nstep = p->nstep;
    const size_t ner = p->ner, scratch = p->scratch_len;

    read_degraded_stripe (c, &sp, (size_t) (sp.logical - p->offset), p);
    if (p->nstripes > 0 && p->scratch_len > GR_PLAN_DEGRADED_SCRATCH) {
      /* Not this one: it goes in the next plan. */
      p->nread = nread;
      p->nblk = nblk;
      p->nstep = nstep;
      p->ner = ner;
      p->scratch_len = scratch;
      *w = save;
      break;
    }
    p->len += sp.len;
    p->nstripes++;
    save = *w;
    if (p->nstripes == DEGRADED_STRIPES || !gr_map_walk_next (w, &sp) ||
        span_healthy (c, &sp) ||
        p->nread + (size_t) k > p->cap_io ||
        p->nblk + (size_t) n > p->cap_blk ||
        (p->nstripes + 1) * (1 + (size_t) k) > p->cap_step ||
        p->ner + (size_t) c->g->m > p->cap_er) {
      *w = save;
      break;
    }
  }
  read_degraded_copies (c, p);
}
