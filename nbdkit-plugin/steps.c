/* gpuraid - running a plan's steps in memory.  See steps.h. */
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
