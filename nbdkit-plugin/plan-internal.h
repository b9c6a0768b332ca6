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

/* A coding step on the blocks from blk[0] (the step, to adjust). */
static inline struct gr_step *
add_coding (struct gr_plan *p, enum gr_step_kind kind, size_t nstripes,
            size_t len, int index, bool gpu)
{
  struct gr_step *st = &p->step[p->nstep++];

  *st = (struct gr_step) { .kind = kind, .blk0 = 0, .nstripes = nstripes,
                           .len = len, .index = index, .gpu = gpu };
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

#endif /* GPURAID_PLAN_INTERNAL_H */
