/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - unit test of pace.h: the fixed limit, the default (auto)
 * that yields to clients' requests, and stop waking a sleeping job.
 * Only lower bounds of sleeps are timed strictly (a loaded machine makes
 * sleeps longer, never shorter); the one upper bound is 3 times the
 * sleep it tells apart from. */
#include <pthread.h>
#include <unistd.h>

#include "pace.h"
#include "tests/testkit.h"
#include "common/now.h"

/* A step of 0.1 s, then gr_pace_wait: its seconds. */
static double
step_then_wait (struct gr_pace *p, uint64_t done, bool *stop)
{
  double t;

  usleep (100000);
  t = gr_now ();
  *stop = gr_pace_wait (p, done);
  return gr_now () - t;
}

static void *
stop_later (void *p)
{
  usleep (200000);
  gr_pace_stop (p);
  return NULL;
}

int
main (void)
{
  uint64_t requests = 0;
  struct gr_pace *p;
  bool stop;
  double s;

  test_seed ("test-pace");

  /* Auto, no requests: no wait. */
  p = gr_pace_new (GR_PACE_AUTO, &requests);
  s = step_then_wait (p, 1, &stop);
  CHECK (!stop && s < 0.3, "idle: waited %.3f s", s);
  /* Requests during the step: it sleeps GR_PACE_YIELD times the step. */
  __atomic_add_fetch (&requests, 1, __ATOMIC_RELAXED);
  usleep (100000);
  s = gr_now ();
  stop = gr_pace_wait (p, 2);
  s = gr_now () - s;
  CHECK (!stop && s >= 0.1 * GR_PACE_YIELD * 0.95, "busy: waited only "
         "%.3f s", s);
  /* Idle again: no wait. */
  s = step_then_wait (p, 3, &stop);
  CHECK (!stop && s < 0.3, "idle again: waited %.3f s",
         s);
  /* gr_pace_stop wakes a yielding job at once. */
  {
    pthread_t t;

    __atomic_add_fetch (&requests, 1, __ATOMIC_RELAXED);
    usleep (400000);                    /* asks for a 1.6 s sleep */
    CHECK (pthread_create (&t, NULL, stop_later, p) == 0);
    s = gr_now ();
    stop = gr_pace_wait (p, 4);
    s = gr_now () - s;
    CHECK (stop && s >= 0.15 && s < 1.2, "stopped after %.3f s", s);
    pthread_join (t, NULL);
  }
  gr_pace_free (p);

  /* A fixed limit: 1 MB at 10 MB/s takes 0.1 s, requests or not. */
  p = gr_pace_new (10000000, &requests);
  s = gr_now ();
  stop = gr_pace_wait (p, 1000000);
  s = gr_now () - s;
  CHECK (!stop && s >= 0.095, "10 MB/s: 1 MB after %.3f s", s);
  CHECK (gr_pace_rate (p) == 10000000);
  /* Batches: a tenth of a second's worth, at least 1, at most max. */
  CHECK (gr_pace_batch (p, 100000, 64) == 10);
  CHECK (gr_pace_batch (p, 100000, 4) == 4);
  CHECK (gr_pace_batch (p, 1 << 30, 64) == 1);
  /* A new limit (none) applies at once. */
  gr_pace_set_rate (p, 0, 1000000);
  s = gr_now ();
  stop = gr_pace_wait (p, 1000000000);
  CHECK (!stop && gr_now () - s < 0.3, "no limit: waited");
  CHECK (gr_pace_batch (p, 100000, 64) == 64);
  gr_pace_set_rate (p, GR_PACE_AUTO, 1000000000);
  CHECK (gr_pace_batch (p, 100000, 64) == 64);
  gr_pace_free (p);
  return test_done ("test-pace");
}
