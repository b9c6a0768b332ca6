/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - building plans: shared by the planner's two files (plan.c:
 * requests and the resync; plan-jobs.c: the jobs' batches).  Nothing
 * else includes it; include plan.h first. */
#ifndef GPURAID_PLAN_INTERNAL_H
#define GPURAID_PLAN_INTERNAL_H

#include <string.h>

static inline struct gr_loc
loc (enum gr_space space, size_t off)
{
  return (struct gr_loc) { .space = space, .off = off };
}

static inline void
add_io (struct gr_io *v, size_t *nv, enum gr_io_kind kind, int member,
        uint64_t off, uint64_t len, struct gr_loc buf)
{
  v[(*nv)++] = (struct gr_io) { .kind = kind, .member = member, .off = off,
                                .len = len, .buf = buf };
}

static inline void
add_read (struct gr_plan *p, int member, uint64_t off, uint64_t len,
          struct gr_loc dst)
{
  add_io (p->read, &p->nread, GR_IO_READ, member, off, len, dst);
}

static inline void
add_write (struct gr_plan *p, int member, uint64_t off, uint64_t len,
           struct gr_loc src)
{
  add_io (p->write, &p->nwrite, GR_IO_WRITE, member, off, len, src);
}

static inline void
add_move (struct gr_plan *p, enum gr_step_kind kind, struct gr_loc dst,
          struct gr_loc src, size_t len)
{
  if (len > 0)
    p->step[p->nstep++] = (struct gr_step) { .kind = kind, .dst = dst,
                                             .src = src, .len = len };
}

/* Would a block read into the request at plan offset `at` go through an
 * O_DIRECT member's bounce buffer where the GPU can copy it instead
 * (plan.h: gpu_copies)? */
static inline bool
gpu_copy_in (const struct gr_plan_ctx *c, size_t at)
{
  return c->gpu_copies && c->dio_align > 1 &&
    (c->req_addr + at) % c->dio_align != 0;
}

/* A COPY step that the GPU makes (plan.h: gpu_copies). */
static inline void
add_gpu_copy (struct gr_plan *p, struct gr_loc dst, struct gr_loc src,
              size_t len)
{
  const size_t at = p->nstep;

  add_move (p, GR_STEP_COPY, dst, src, len);
  if (p->nstep > at)
    p->step[at].gpu = true;
}

/* A coding step on the blocks from blk[0] (the step, to adjust). */
static inline struct gr_step *
add_coding (struct gr_plan *p, enum gr_step_kind kind, size_t nstripes,
            size_t len, int index, bool gpu)
{
  struct gr_step *st = &p->step[p->nstep++];

  *st = (struct gr_step) { .kind = kind, .blk0 = 0, .nstripes = nstripes,
                           .len = len, .index = index, .count = 1,
                           .gpu = gpu };
  return st;
}

/* A RECONSTRUCT step of erasure set er[0 .. ne) (copied into the plan)
 * on blocks from blk[blk0]. */
static inline void
add_reconstruct (struct gr_plan *p, size_t blk0, size_t nstripes,
                 size_t len, const int *er, int ne, bool gpu)
{
  struct gr_step *st = add_coding (p, GR_STEP_RECONSTRUCT, nstripes, len,
                                   0, gpu);

  st->blk0 = blk0;
  st->er0 = p->ner;
  st->ner = ne;
  memcpy (p->er + p->ner, er, (size_t) ne * sizeof *er);
  p->ner += (size_t) ne;
}

/* Is code index i of stripe s on a failed member? */
static inline bool
lost (const struct gr_plan_ctx *c, uint64_t s, int i)
{
  return c->failed[gr_map_member (c->g, s, i)];
}

/* The members lost: each stripe has a chunk on every one.  A
 * reconstruct's route is asked with it, the array's state, not with the
 * chunks the reconstruct rebuilds (which vary with the part of each
 * stripe a request wants): accel=auto's router then takes all of a
 * degraded array's reconstructs of a size for one kind of operation,
 * and one trial moves them all (router.h). */
static inline int
members_lost (const struct gr_plan_ctx *c)
{
  int n = 0;

  for (int i = 0; i < c->g->k + c->g->m; i++)
    n += c->failed[i];
  return n;
}

static inline uint64_t
moff (const struct gr_plan_ctx *c, uint64_t s, uint32_t chunk_off)
{
  return gr_map_member_offset (c->g, s, chunk_off);
}

/* An empty plan (no I/O, steps, blocks or erasure sets). */
static inline void
plan_reset (struct gr_plan *p)
{
  p->nread = p->nstep = p->nwrite = p->nblk = p->ner = 0;
  memset (p->rb_adv, 0, sizeof p->rb_adv);
  p->rb_end = 0;
}

/* --- pieces of one stripe ----------------------------------------------- */

/* A request's bytes inside one stripe: span sp, i.e. chunks i0..i1;
 * [lo, hi) is the union of the touched ranges widened to multiples of lm
 * (clipped to the chunk): the range coding works on. */
struct piece {
  const struct gr_geom *g;
  struct gr_span sp;
  uint64_t s;
  int i0, i1;
  uint32_t lo, hi;
};

/* Chunk i (i0 <= i <= i1) is touched over [a, b), which starts at off
 * from the piece's first byte. */
static inline void
piece_range (const struct piece *pc, int i, uint32_t *a, uint32_t *b,
             size_t *off)
{
  uint64_t from;

  gr_map_span_range (pc->g, &pc->sp, i, a, b, &from);
  *off = (size_t) from;
}

/* Is chunk i touched and fully overwritten over [lo, hi)? */
static inline bool
piece_covers (const struct piece *pc, int i)
{
  uint32_t a, b;
  size_t off;

  if (i < pc->i0 || i > pc->i1)
    return false;
  piece_range (pc, i, &a, &b, &off);
  return a <= pc->lo && b >= pc->hi;
}

/* Offset from the piece's first byte of byte lo of a chunk it covers. */
static inline size_t
piece_lo_off (const struct piece *pc, int i)
{
  return (size_t) ((uint64_t) i * pc->g->chunk + pc->lo - pc->sp.so);
}

static inline void
piece_init (struct piece *pc, const struct gr_geom *g, uint32_t lm,
            const struct gr_span *sp)
{
  uint32_t a, b;
  size_t off;
  int i;

  pc->g = g;
  pc->sp = *sp;
  pc->s = sp->stripe;
  gr_map_span_chunks (g, sp, &pc->i0, &pc->i1);
  pc->lo = g->chunk;
  pc->hi = 0;
  for (i = pc->i0; i <= pc->i1; i++) {
    piece_range (pc, i, &a, &b, &off);
    if (a < pc->lo)
      pc->lo = a;
    if (b > pc->hi)
      pc->hi = b;
  }
  pc->lo -= pc->lo % lm;
  pc->hi = (pc->hi + lm - 1) / lm * lm;
  if (pc->hi > g->chunk)
    pc->hi = g->chunk;
}

/* A plan of one stripe's span (more are added by the caller). */
static inline void
start (struct gr_plan *p, enum gr_plan_kind kind, enum gr_lock_mode lock,
       const struct gr_span *sp)
{
  p->kind = kind;
  p->lock = lock;
  p->s0 = sp->stripe;
  p->nstripes = 1;
  p->len = sp->len;
}

/* Are the chunks of sp that it touches all on live members? */
static inline bool
span_healthy (const struct gr_plan_ctx *c, const struct gr_span *sp)
{
  int i0 = (int) (sp->so / c->g->chunk);
  int i1 = (int) ((sp->so + sp->len - 1) / c->g->chunk), i;

  for (i = i0; i <= i1; i++)
    if (lost (c, sp->stripe, i))
      return false;
  return true;
}

/* plan-read.c: reads (the first span sp of walk w). */
void gr_plan_read_healthy (const struct gr_plan_ctx *c, struct gr_walk *w,
                           const struct gr_span *first, struct gr_plan *p);
void gr_plan_read_degraded (const struct gr_plan_ctx *c, struct gr_walk *w,
                            const struct gr_span *first, struct gr_plan *p);

#endif /* GPURAID_PLAN_INTERNAL_H */
