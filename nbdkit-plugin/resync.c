/* gpuraid - resync after an unclean shutdown.  See resync.h. */
#include <inttypes.h>

#include "log.h"
#include "resync.h"

int
gr_resync (struct gr_exec *x)
{
  const struct gr_geom *g = gr_exec_geom (x);
  struct gr_members *ms = gr_exec_members (x);
  struct gr_exec_result res = { .rewritten = 0 };
  uint64_t width = gr_map_stripe_width (g), size = gr_map_size (g), pos;
  struct gr_plan *p = gr_exec_plan (x);
  bool failed[GR_MAX_MEMBERS];
  struct gr_plan_ctx c;
  int last_pct = 0, i;

  if (p == NULL)
    return -1;
  for (pos = 0; pos < size; pos += p->len) {
    gr_exec_plan_ctx (x, failed, &c);
    if (gr_plan_next (&c, GR_REQ_RESYNC, pos, size - pos, p)
        != GR_PLAN_RESYNC) {
      nbdkit_error ("resync: the array is degraded");
      return -1;
    }
    if (gr_exec_run (x, p, NULL, GR_MIO_REPORT, &res) != GR_EXEC_DONE) {
      nbdkit_error ("resync: stopped at stripe %" PRIu64, pos / width);
      return -1;
    }
    if ((pos + p->len) * 10 / size > (uint64_t) last_pct) {
      last_pct = (int) ((pos + p->len) * 10 / size);
      gr_debug ("resync: %d0%% (%" PRIu64 " of %" PRIu64 " stripes, %"
                PRIu64 " parity chunks rewritten)", last_pct,
                (pos + p->len) / width, g->stripes, res.rewritten);
    }
  }
  for (i = 0; i < gr_members_n (ms); i++)
    if (gr_members_sync (ms, i) == -1 || gr_members_failed (ms, i)) {
      nbdkit_error ("resync: member %d (%s): fdatasync failed", i,
                    gr_members_path (ms, i));
      return -1;
    }
  gr_warn ("resync done: %" PRIu64 " stripes checked, %" PRIu64 " parity "
           "chunks were inconsistent and rewritten", g->stripes,
           res.rewritten);
  return 0;
}
