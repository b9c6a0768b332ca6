/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - replaying the write journal.  See replay.h. */
#include <inttypes.h>
#include <stdlib.h>

#include "format/format.h"
#include "log.h"
#include "replay.h"

enum gr_replay_outcome
gr_replay_journal (struct gr_exec *x, struct gr_journal *j,
                   unsigned *nreplayed)
{
  struct gr_members *ms = gr_exec_members (x);
  const struct gr_geom *g = gr_exec_geom (x);
  struct gr_plan *p = gr_exec_plan (x);
  /* An entry's plan is made again after each block of its stripe that
   * failed its checksum was repaired (one a time: exec.h) and after a
   * member failed: at most once for each block and each member, and a
   * last time.  (A crash in its write leaves up to every block of the
   * chunks written failing: 8 tries refused the start of an array with
   * chunks of 64 KiB.) */
  const unsigned max_tries =
    (unsigned) (g->k + g->m) * (g->chunk / GR_CKSUM_BLOCK + 1) + 1;
  enum gr_replay_outcome out = GR_REPLAY_DONE;
  struct gr_exec_result res = { .rewritten = 0 };
  unsigned q;

  *nreplayed = 0;
  if (p == NULL)
    return GR_REPLAY_FAILED;
  for (q = 0; q < gr_journal_slots (j); q++) {
    struct gr_replay_entry e;
    struct gr_exec_snap sn;
    struct gr_plan_ctx c;
    uint8_t *payload;
    enum gr_exec_outcome o = GR_EXEC_ERROR;

    if (!gr_journal_entry (j, q, &e, &payload))
      continue;
    for (unsigned tries = 0; tries < max_tries; tries++) {
      gr_exec_plan_ctx (x, &sn, &c);
      if (gr_plan_replay (&c, &e, p) == GR_PLAN_REFUSE)
        break;
      o = gr_exec_run (x, p, payload, NULL, GR_MIO_REPORT, &res);
      if (o != GR_EXEC_REPLAN)
        break;
    }
    if (p->kind == GR_PLAN_REFUSE) {
      gr_warn ("journal: stripe %" PRIu64 " cannot be replayed: a data "
               "chunk it did not journal is lost too", e.stripe);
      out = GR_REPLAY_PARTLY;
      free (payload);
      continue;
    }
    free (payload);
    if (o != GR_EXEC_DONE) {
      nbdkit_error ("journal: replaying stripe %" PRIu64 " failed",
                    e.stripe);
      return GR_REPLAY_FAILED;
    }
    (*nreplayed)++;
  }
  for (int i = 0; i < gr_members_n (ms); i++)
    if (gr_members_sync (ms, i) == -1)
      return GR_REPLAY_FAILED;
  return out;
}
