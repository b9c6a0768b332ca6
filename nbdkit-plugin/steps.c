/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - running a plan's steps in memory.  See steps.h. */
#include <stdlib.h>
#include <string.h>

#include "steps.h"

void
gr_steps_xor (uint8_t *d, const uint8_t *s, size_t len)
{
  size_t x;

  for (x = 0; x + 8 <= len; x += 8) {
    uint64_t a, b;

    memcpy (&a, d + x, 8);
    memcpy (&b, s + x, 8);
    a ^= b;
    memcpy (d + x, &a, 8);
  }
  for (; x < len; x++)
    d[x] ^= s[x];
}

int
gr_steps_run (struct gr_plan *p, const struct gr_geom *g,
                   const struct gr_bufs *b, const struct gr_plan_coder *cd)
{
  int k = g->k, n = k + g->m;
  size_t i;

  for (i = 0; i < p->nblk; i++)
    p->ptr[i] = gr_steps_at (b, p->blk[i]);
  for (i = 0; i < p->nstep; i++) {
    const struct gr_step *st = &p->step[i];
    uint8_t **bp = p->ptr + st->blk0;
    int r = 0;

    switch (st->kind) {
    case GR_STEP_ZERO:
      memset (gr_steps_at (b, st->dst), 0, st->len);
      break;
    case GR_STEP_COPY:
      memcpy (gr_steps_at (b, st->dst), gr_steps_at (b, st->src), st->len);
      break;
    case GR_STEP_XOR:
      gr_steps_xor (gr_steps_at (b, st->dst), gr_steps_at (b, st->src), st->len);
      break;
    case GR_STEP_ENCODE:
      r = cd->encode (cd->arg, st->gpu, bp, st->nstripes, st->len);
      break;
    case GR_STEP_RECONSTRUCT:
      r = cd->reconstruct (cd->arg, st->gpu, p->erased, p->nerased, bp,
                           st->len);
      break;
    case GR_STEP_UPDATE:
      r = cd->update (cd->arg, st->gpu, st->index, bp[st->index], bp + k,
                      bp + n, st->len);
      break;
    }
    if (r == -1)
      return -1;
  }
  return 0;
}

/* --- the plan's arrays --------------------------------------------------- */

struct gr_plan *
gr_plan_new (const struct gr_geom *g)
{
  struct gr_plan *p = calloc (1, sizeof *p);
  size_t n = (size_t) g->k + g->m;

  if (p == NULL)
    return NULL;
  /* Per thread, and nbdkit may run hundreds: a 32 MiB read of 64K chunks
   * fits one plan, larger counts take several. */
  p->cap_io = 512 + 2 * n;
  p->cap_blk = 512 + 2 * n;
  p->cap_step = 4 * n + 8;
  p->read = malloc (p->cap_io * sizeof *p->read);
  p->write = malloc (p->cap_io * sizeof *p->write);
  p->blk = malloc (p->cap_blk * sizeof *p->blk);
  p->step = malloc (p->cap_step * sizeof *p->step);
  p->ptr = malloc (p->cap_blk * sizeof *p->ptr);
  if (p->read == NULL || p->write == NULL || p->blk == NULL ||
      p->step == NULL || p->ptr == NULL) {
    gr_plan_free (p);
    return NULL;
  }
  return p;
}

void
gr_plan_free (struct gr_plan *p)
{
  if (p) {
    free (p->read);
    free (p->write);
    free (p->blk);
    free (p->step);
    free (p->ptr);
    free (p);
  }
}
