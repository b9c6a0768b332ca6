/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the executor: where the plans it runs one at a time
 * (requests', the journal's, repairs) spend their time, by plan kind:
 * waiting for their stripe locks, reading, coding (a GPU operation's
 * wait for its batch included), writing (a member's write turn
 * included).  Logged at exit, so that a run's log says what its
 * requests waited for.  See exec-internal.h. */
#include <inttypes.h>
#include <stdio.h>

#include "exec.h"
#include "exec-internal.h"
#include "log.h"

void
gr_exec_times_add (struct gr_exec *x, enum gr_plan_kind kind,
                   const double s[GR_EXEC_NSTAGES])
{
  struct gr_exec_times *t;

  if ((unsigned) kind >= sizeof x->times / sizeof x->times[0])
    return;
  t = &x->times[kind];
  __atomic_add_fetch (&t->plans, 1, __ATOMIC_RELAXED);
  for (int i = 0; i < GR_EXEC_NSTAGES; i++)
    __atomic_add_fetch (&t->ns[i], (uint64_t) (s[i] > 0 ? s[i] * 1e9 : 0),
                        __ATOMIC_RELAXED);
}

void
gr_exec_times_log (const struct gr_exec *x)
{
  char line[1024];
  size_t at = 0;

  for (size_t k = 0; k < sizeof x->times / sizeof x->times[0]; k++) {
    const struct gr_exec_times *t = &x->times[k];
    int n;

    if (t->plans == 0)
      continue;
    n = snprintf (line + at, sizeof line - at, "%s%s %" PRIu64 ": %" PRIu64
                  ", %" PRIu64 ", %" PRIu64 ", %" PRIu64, at ? "; " : "",
                  gr_plan_kind_name ((enum gr_plan_kind) k), t->plans,
                  t->ns[GR_EXEC_LOCK] / 1000 / t->plans,
                  t->ns[GR_EXEC_READ] / 1000 / t->plans,
                  t->ns[GR_EXEC_CODE] / 1000 / t->plans,
                  t->ns[GR_EXEC_WRITE] / 1000 / t->plans);
    if (n < 0 || (size_t) n >= sizeof line - at)
      break;
    at += (size_t) n;
  }
  if (at > 0)
    gr_debug ("plans run one at a time, mean us waiting for the stripe "
              "locks, reading, coding, writing: %s", line);
}
