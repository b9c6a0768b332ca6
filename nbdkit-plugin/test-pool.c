/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - unit test of pool.h: every item of every call runs exactly
 * once, and only before its call returns, with several callers at once
 * (a job's lanes share one pool); a NULL pool and one of 0 threads run
 * the items on the caller; the pool's threads do take items; freeing a
 * pool that served calls, and one that never did, joins its threads.
 * Exit 0 on success, 1 on a failed check. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "pool.h"
#include "tests/testkit.h"

#define CALLERS 4
#define ROUNDS 300
#define MAX_ITEMS 64

/* One call's items: how often each ran, and on which thread. */
struct call {
  size_t n;
  unsigned runs[MAX_ITEMS];      /* atomic */
  pthread_t ran_on[MAX_ITEMS];
  unsigned spin;                 /* busy loop per item, to overlap */
};

static void
item (void *arg, size_t i)
{
  struct call *c = arg;
  volatile unsigned x = 0;

  for (unsigned s = 0; s < c->spin; s++)
    x += s;
  c->ran_on[i] = pthread_self ();
  __atomic_add_fetch (&c->runs[i], 1, __ATOMIC_RELAXED);
}

struct caller {
  struct gr_pool *pool;
  uint64_t rng;
  unsigned bad;                  /* items not run exactly once */
  unsigned elsewhere;            /* items run on a thread of the pool */
};

static void *
caller (void *arg)
{
  struct caller *me = arg;

  for (int r = 0; r < ROUNDS; r++) {
    struct call c = { 0 };

    me->rng = me->rng * 6364136223846793005ull + 1442695040888963407ull;
    c.n = (me->rng >> 33) % (MAX_ITEMS + 1);     /* 0 .. MAX_ITEMS */
    c.spin = (unsigned) (me->rng >> 20) % 20000;
    gr_pool_run (me->pool, c.n, item, &c);
    /* Read once the call returned: every item ran, once. */
    for (size_t i = 0; i < MAX_ITEMS; i++) {
      const unsigned runs = __atomic_load_n (&c.runs[i], __ATOMIC_RELAXED);

      if (runs != (i < c.n ? 1u : 0u))
        me->bad++;
      if (i < c.n && !pthread_equal (c.ran_on[i], pthread_self ()))
        me->elsewhere++;
    }
  }
  return NULL;
}

/* CALLERS threads calling gr_pool_run on one pool at once; the items
 * that ran on a thread other than their caller's. */
static unsigned
callers_at_once (struct gr_pool *pool, const char *what)
{
  pthread_t t[CALLERS];
  struct caller c[CALLERS];
  unsigned elsewhere = 0;

  for (int i = 0; i < CALLERS; i++) {
    c[i] = (struct caller) { .pool = pool, .rng = test_rand () };
    CHECK (pthread_create (&t[i], NULL, caller, &c[i]) == 0, "%s", what);
  }
  for (int i = 0; i < CALLERS; i++) {
    pthread_join (t[i], NULL);
    CHECK (c[i].bad == 0, "%s: caller %d: %u items not run exactly once",
           what, i, c[i].bad);
    elsewhere += c[i].elsewhere;
  }
  return elsewhere;
}

int
main (void)
{
  struct gr_pool *pool;
  unsigned elsewhere;

  test_seed ("test-pool");

  /* No pool: the caller alone. */
  CHECK (gr_pool_width (NULL) == 1);
  elsewhere = callers_at_once (NULL, "NULL pool");
  CHECK (elsewhere == 0, "NULL pool: %u items ran on another thread",
         elsewhere);

  /* A pool of 0 threads: the caller alone too. */
  pool = gr_pool_new (0);
  CHECK (pool != NULL && gr_pool_width (pool) == 1);
  elsewhere = callers_at_once (pool, "0 threads");
  CHECK (elsewhere == 0, "0 threads: %u items ran on another thread",
         elsewhere);
  gr_pool_free (pool);

  /* 3 threads and 4 callers: each item once; the threads take some. */
  pool = gr_pool_new (3);
  CHECK (pool != NULL && gr_pool_width (pool) == 4);
  elsewhere = callers_at_once (pool, "3 threads");
  CHECK (elsewhere > 0, "3 threads: no item ran on the pool's threads");
  printf ("test-pool: 3 threads, %d callers: %u items ran on the pool's "
          "threads\n", CALLERS, elsewhere);
  gr_pool_free (pool);

  /* A pool that never served a call stops at once. */
  pool = gr_pool_new (2);
  CHECK (pool != NULL);
  gr_pool_free (pool);
  gr_pool_free (NULL);

  return test_done ("test-pool");
}
