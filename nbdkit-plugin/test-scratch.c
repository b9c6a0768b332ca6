/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - unit test of the scratch pool's cap (scratch.c), without
 * nbdkit or a coding backend (both stubbed below).
 *
 * Threads take plan buffers of various sizes at once and check:
 *   - every buffer is 4096-aligned, of the size asked, and private to
 *     its holder while held (filled and checked);
 *   - large buffers (> GR_SCRATCH_KEEP) held at once never add up to
 *     more than the cap, except one alone (which may be larger);
 *   - a thread's small buffer is kept across plans (same address);
 *   - a large buffer given back is kept within the cap for the next
 *     large plan: plans of one stripe of 10+4 or 16+16 with 64 KiB
 *     chunks take 1.1 to 3 MiB, and mapping each afresh faulted in every
 *     page of it (counted: the thread's minor page faults);
 *   - with a stand-in GPU, every buffer handed out is a live one from
 *     the page-locked pool (kept per thread, bounded by the pool, not by
 *     the cap; a thread that ends leaves its own to the next, so how many
 *     are allocated depends on how the threads overlap) and all of it is
 *     given back when the threads end.
 * Exit 0 on success, 1 on a failed check. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "nbdkit-plugin/scratch.h"
#define TESTKIT_NBDKIT_LOG
#include "tests/testkit.h"

/* --- stubs for what scratch.c links against ------------------------- */

static bool gpu_usable;
static long pinned_live;                /* atomic: host_alloc - host_free */
static long pinned_calls;               /* atomic: host_alloc calls */
static pthread_mutex_t pinned_mu = PTHREAD_MUTEX_INITIALIZER;
#define PINNED_MAX 1024
static void *pinned[PINNED_MAX];        /* under pinned_mu: live ones */
static long pinned_served;              /* atomic: gets given one */

static void
pinned_track (void *p, bool add)
{
  pthread_mutex_lock (&pinned_mu);
  for (int i = 0; i < PINNED_MAX; i++)
    if (pinned[i] == (add ? NULL : p)) {
      pinned[i] = add ? p : NULL;
      break;
    }
  pthread_mutex_unlock (&pinned_mu);
}

/* Is p the start of a live page-locked buffer? */
static bool
pinned_is (const void *p)
{
  bool found = false;

  pthread_mutex_lock (&pinned_mu);
  for (int i = 0; i < PINNED_MAX && !found; i++)
    found = pinned[i] == p;
  pthread_mutex_unlock (&pinned_mu);
  return found;
}

bool
gr_coding_gpu_usable (const struct gr_coding *c)
{
  (void) c;
  return gpu_usable;
}

void *
gr_coding_host_alloc (struct gr_coding *c, size_t size)
{
  void *p;

  (void) c;
  if (posix_memalign (&p, 4096, size) != 0)
    return NULL;
  __atomic_add_fetch (&pinned_live, 1, __ATOMIC_RELAXED);
  __atomic_add_fetch (&pinned_calls, 1, __ATOMIC_RELAXED);
  pinned_track (p, true);
  return p;
}

void
gr_coding_host_free (struct gr_coding *c, void *p)
{
  (void) c;
  pinned_track (p, false);
  free (p);
  __atomic_sub_fetch (&pinned_live, 1, __ATOMIC_RELAXED);
}

/* --- the test ------------------------------------------------------- */

#define MiB ((size_t) 1 << 20)
#define THREADS 8
#define ROUNDS 40

static struct gr_scratch *sc;
static uint64_t cap;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t big_held, big_peak;     /* under mu */
static unsigned holders, peak_holders;  /* large buffers, under mu */
static int bad;                         /* atomic: failed checks */

static void
check (bool ok, const char *what, size_t size)
{
  if (!ok) {
    fprintf (stderr, "test-scratch: FAIL: %s (size %zu)\n", what, size);
    __atomic_store_n (&bad, 1, __ATOMIC_RELAXED);
  }
}

static void *
worker (void *arg)
{
  unsigned id = (unsigned) (uintptr_t) arg;
  uint64_t rng = 0x9e3779b97f4a7c15ULL * (id + 1);
  uint8_t *kept = NULL;                 /* the last small buffer */
  size_t kept_size = 0;

  for (int r = 0; r < ROUNDS; r++) {
    size_t size;
    uint8_t *p;
    bool big;

    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    switch (rng % 4) {
    case 0: size = 4096 + rng % 65536; break;           /* small */
    case 1: size = GR_SCRATCH_KEEP; break;               /* largest kept */
    case 2: size = GR_SCRATCH_KEEP + 4096 + rng % (2 * MiB); break;
    default: size = (size_t) cap + MiB; break;           /* over the cap */
    }
    big = size > GR_SCRATCH_KEEP;
    p = gr_scratch_get (sc, size);
    check (p != NULL, "gr_scratch_get failed", size);
    if (p == NULL)
      continue;
    check ((uintptr_t) p % 4096 == 0, "not 4096-aligned", size);
    if (gpu_usable) {
      check (pinned_is (p), "not a live page-locked buffer", size);
      __atomic_add_fetch (&pinned_served, 1, __ATOMIC_RELAXED);
    }
    if (!big && !gpu_usable) {
      if (size <= kept_size)
        check (p == kept, "small buffer not kept", size);
      else {
        kept = p;
        kept_size = size;
      }
    }
    if (big && !gpu_usable) {
      pthread_mutex_lock (&mu);
      big_held += size;
      holders++;
      if (holders > 1)
        check (big_held <= cap, "large buffers over the cap", size);
      if (big_held > big_peak) big_peak = big_held;
      if (holders > peak_holders) peak_holders = holders;
      pthread_mutex_unlock (&mu);
    }
    memset (p, (int) (id + 1), size);
    for (size_t i = 0; i < size; i += 509)
      if (p[i] != (uint8_t) (id + 1)) {
        check (false, "buffer written by another thread", size);
        break;
      }
    if (big && !gpu_usable) {
      pthread_mutex_lock (&mu);
      big_held -= size;
      holders--;
      pthread_mutex_unlock (&mu);
    }
    gr_scratch_put (sc);
  }
  return NULL;
}

static void
run (bool gpu, uint64_t c)
{
  pthread_t t[THREADS];

  gpu_usable = gpu;
  cap = c;
  big_peak = 0;
  peak_holders = 0;
  sc = gr_scratch_new ((struct gr_coding *) &sc, cap);
  CHECK (sc != NULL);
  for (unsigned i = 0; i < THREADS; i++)
    CHECK (pthread_create (&t[i], NULL, worker,
                              (void *) (uintptr_t) i) == 0);
  for (unsigned i = 0; i < THREADS; i++)
    pthread_join (t[i], NULL);
  gr_scratch_free (sc);
  if (gpu) {
    printf ("stand-in GPU: %ld plans served from %ld page-locked buffers, "
            "%ld left\n", pinned_served, pinned_calls, pinned_live);
    CHECK (pinned_served == THREADS * ROUNDS);
    CHECK (pinned_calls >= 1);
  }
  else {
    printf ("cap %3llu MiB: large buffers at most %llu bytes in %u "
            "threads at once\n", (unsigned long long) (cap / MiB),
            (unsigned long long) big_peak, peak_holders);
    CHECK (peak_holders >= 1);
    if (cap <= 2 * MiB)
      CHECK (peak_holders == 1);
  }
  CHECK (pinned_live == 0);
}

static long
minor_faults (void)
{
  struct rusage ru;

  CHECK (getrusage (RUSAGE_THREAD, &ru) == 0);
  return ru.ru_minflt;
}

/* Large plans one after another, as one thread's partial-stripe writes:
 * after the first, no page of theirs is faulted in again. */
static void
run_reuse (void)
{
  const size_t sizes[] = { 18 * 64 * 1024, 48 * 64 * 1024, 18 * 64 * 1024 };
  long before, faults;

  gpu_usable = false;
  sc = gr_scratch_new ((struct gr_coding *) &sc, 64 * MiB);
  CHECK (sc != NULL);
  for (size_t i = 0; i < 3; i++) {     /* the first of each size */
    uint8_t *p = gr_scratch_get (sc, sizes[i]);

    CHECK (p != NULL);
    memset (p, 1, sizes[i]);
    gr_scratch_put (sc);
  }
  before = minor_faults ();
  for (int r = 0; r < 20; r++)
    for (size_t i = 0; i < 3; i++) {
      uint8_t *p = gr_scratch_get (sc, sizes[i]);

      CHECK (p != NULL);
      memset (p, r, sizes[i]);
      gr_scratch_put (sc);
    }
  faults = minor_faults () - before;
  printf ("large plans reused: %ld pages faulted in 60 plans of 1.1 to "
          "3 MiB\n", faults);
  /* One plan's pages afresh would be 288 to 768; malloc's own small
   * allocations may fault a few. */
  CHECK (faults < 64, "large buffers mapped afresh: %ld faults", faults);
  gr_scratch_free (sc);
}

int
main (void)
{
  run_reuse ();
  run (false, 1 * MiB);         /* every large plan alone */
  run (false, 4 * MiB);
  run (false, 64 * MiB);        /* room for several */
  run (true, 4 * MiB);
  CHECK (!bad, "see the messages above");
  return test_done ("test-scratch");
}
