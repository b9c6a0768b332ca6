/* gpuraid - per-stripe planning.  See plan.h. */
#include "plan.h"

uint32_t
gr_piece_a (const struct gr_piece *pc, int i)
{
  uint64_t start = (uint64_t) i * pc->chunk;

  return pc->so > start ? (uint32_t) (pc->so - start) : 0;
}

uint32_t
gr_piece_b (const struct gr_piece *pc, int i)
{
  uint64_t start = (uint64_t) i * pc->chunk;
  uint64_t b = (uint64_t) pc->so + pc->len - start;

  return b < pc->chunk ? (uint32_t) b : pc->chunk;
}

size_t
gr_piece_bufoff (const struct gr_piece *pc, int i, uint32_t a)
{
  return (size_t) ((uint64_t) i * pc->chunk + a - pc->so);
}

bool
gr_piece_covers (const struct gr_piece *pc, int i)
{
  return i >= pc->i0 && i <= pc->i1 &&
    gr_piece_a (pc, i) <= pc->lo && gr_piece_b (pc, i) >= pc->hi;
}

void
gr_piece_init (struct gr_piece *pc, uint32_t chunk, uint32_t lm,
               uint64_t s, uint32_t so, uint32_t len)
{
  int i;

  pc->s = s;
  pc->chunk = chunk;
  pc->so = so;
  pc->len = len;
  pc->i0 = so / chunk;
  pc->i1 = (int) (((uint64_t) so + len - 1) / chunk);
  pc->lo = chunk;
  pc->hi = 0;
  for (i = pc->i0; i <= pc->i1; i++) {
    if (gr_piece_a (pc, i) < pc->lo)
      pc->lo = gr_piece_a (pc, i);
    if (gr_piece_b (pc, i) > pc->hi)
      pc->hi = gr_piece_b (pc, i);
  }
  pc->lo -= pc->lo % lm;
  pc->hi = (pc->hi + lm - 1) / lm * lm;
  if (pc->hi > chunk)
    pc->hi = chunk;
}

enum gr_write_plan
gr_plan_write (const struct gr_piece *pc, int k, int m, const bool *failed,
               int *reads)
{
  int i, failed_data = 0, failed_parity = 0, rcw = 0, rmw;

  for (i = 0; i < k + m; i++) {
    if (failed[i] && i < k)
      failed_data++;
    else if (failed[i])
      failed_parity++;
  }
  *reads = 0;
  if (failed_data + failed_parity > m)
    return GR_WRITE_TOO_MANY;
  if (failed_data > 0) {
    *reads = k;
    return GR_WRITE_DEGRADED;
  }
  for (i = 0; i < k; i++)
    if (!gr_piece_covers (pc, i))
      rcw++;
  rmw = (pc->i1 - pc->i0 + 1) + (m - failed_parity);
  if (rmw < rcw) {
    *reads = rmw;
    return GR_WRITE_RMW;
  }
  *reads = rcw;
  return GR_WRITE_RCW;
}
