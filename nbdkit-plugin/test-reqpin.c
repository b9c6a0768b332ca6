/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - unit test of the registry of page-locked request buffers
 * (reqpin.c), without nbdkit or a GPU: the registering is a stand-in
 * that keeps the ranges as CUDA would (a range sharing a page with a
 * registered one is refused with EEXIST) and checks how it is used:
 *   - a buffer grown by realloc, as nbdkit grows it: registered at its
 *     first use of 64 KiB or more, again only when it moves or grows,
 *     the old range unregistered first; a smaller request reuses it;
 *   - threads that come and go ("connections"), each growing its own
 *     buffer: their ranges are unregistered when they end, none is ever
 *     unregistered while in use or registered twice, the bound holds;
 *   - a stale range (a buffer freed without the registry knowing, its
 *     memory given to another thread): unregistered once, by the thread
 *     whose buffer overlaps it;
 *   - a failed registration: staged, not tried again (for good after
 *     ENOMEM, warned once; for that buffer only after EEXIST, no
 *     warning);
 *   - the bound: a buffer beyond it staged, registered once room is
 *     given back; the bound on moves per thread;
 *   - in use exactly between a true begin and its end.
 * Exit 0 on success, 1 on a failed check. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nbdkit-plugin/reqpin.h"
#define TESTKIT_NBDKIT_LOG
#include "tests/testkit.h"

/* --- stubs for what reqpin.c links against ------------------------------ */

static int warnings;                    /* atomic */


void
gr_warn (const char *fs, ...)
{
  va_list ap;

  __atomic_add_fetch (&warnings, 1, __ATOMIC_RELAXED);
  va_start (ap, fs);
  fputs ("warning: ", stderr);
  vfprintf (stderr, fs, ap);
  va_end (ap);
  fputc ('\n', stderr);
}

/* --- the stand-in registering ------------------------------------------- */

#define NR 4096
#define PAGE ((uintptr_t) 4096)
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct { uintptr_t base; size_t len; bool in_use; } reg[NR];
static int nreg;
static size_t reg_bytes, reg_bytes_max;
static int fail_with;                   /* 0, or the errno to fail with */
static long nreg_calls, nunreg_calls, bad;

static int
find (uintptr_t p)
{
  for (int i = 0; i < nreg; i++)
    if (reg[i].base == p)
      return i;
  return -1;
}

static int
st_reg (void *p, size_t len)
{
  const uintptr_t a = (uintptr_t) p & ~(PAGE - 1);
  const uintptr_t e = ((uintptr_t) p + len + PAGE - 1) & ~(PAGE - 1);
  int r = 0;

  pthread_mutex_lock (&lock);
  nreg_calls++;
  if (fail_with)
    r = -fail_with;
  for (int i = 0; i < nreg && r == 0; i++) {
    const uintptr_t b = reg[i].base & ~(PAGE - 1);
    const uintptr_t f = (reg[i].base + reg[i].len + PAGE - 1) & ~(PAGE - 1);

    if (a < f && b < e) {
      r = -EEXIST;
      /* Bytes overlapping (not only a page): the registry should have
       * unregistered that stale range first. */
      if ((uintptr_t) p < reg[i].base + reg[i].len &&
          reg[i].base < (uintptr_t) p + len)
        bad++;
    }
  }
  if (r == 0) {
    reg[nreg].base = (uintptr_t) p;
    reg[nreg].len = len;
    reg[nreg].in_use = false;
    nreg++;
    reg_bytes += len;
    if (reg_bytes > reg_bytes_max)
      reg_bytes_max = reg_bytes;
  }
  pthread_mutex_unlock (&lock);
  return r;
}

static int
st_unreg (void *p)
{
  int i, r = 0;

  pthread_mutex_lock (&lock);
  nunreg_calls++;
  i = find ((uintptr_t) p);
  if (i < 0 || reg[i].in_use) {       /* unknown, or under a request */
    bad++;
    r = -EINVAL;
  }
  else {
    reg_bytes -= reg[i].len;
    reg[i] = reg[--nreg];
  }
  pthread_mutex_unlock (&lock);
  return r;
}

static void
st_in_use (void *p, bool on)
{
  int i;

  pthread_mutex_lock (&lock);
  i = find ((uintptr_t) p);
  if (i < 0 || reg[i].in_use == on)
    bad++;
  else
    reg[i].in_use = on;
  pthread_mutex_unlock (&lock);
}

static const struct gr_reqpin_ops ops = {
  .reg = st_reg, .unreg = st_unreg, .in_use = st_in_use, .why = NULL,
};

/* Is [p, p + len) registered as one range, in use (want_use)? */
static bool
registered (const void *p, size_t len, bool want_use)
{
  bool ok = false;

  pthread_mutex_lock (&lock);
  for (int i = 0; i < nreg; i++)
    if (reg[i].base == (uintptr_t) p && reg[i].len >= len &&
        reg[i].in_use == want_use)
      ok = true;
  pthread_mutex_unlock (&lock);
  return ok;
}

static int
count_reg (void)
{
  int n;

  pthread_mutex_lock (&lock);
  n = nreg;
  pthread_mutex_unlock (&lock);
  return n;
}

static void
reset (void)
{
  pthread_mutex_lock (&lock);
  nreg = 0;
  reg_bytes = reg_bytes_max = 0;
  fail_with = 0;
  nreg_calls = nunreg_calls = bad = 0;
  pthread_mutex_unlock (&lock);
  warnings = 0;
}

/* One request on buffer [p, p + len): begin, check, end. */
static bool
request (struct gr_reqpin *rp, void *p, size_t len)
{
  bool pinned = gr_reqpin_begin (rp, p, len);

  if (pinned) {
    CHECK (registered (p, len, true), "a true begin: [%p, +%zu) registered "
           "and in use", p, len);
    gr_reqpin_end (rp);
    CHECK (registered (p, len, false), "after end: not in use");
  }
  return pinned;
}

/* --- the scenarios ------------------------------------------------------- */

#define KiB ((size_t) 1 << 10)
#define MiB ((size_t) 1 << 20)

/* An nbdkit-like buffer: realloc only when a request is larger. */
struct nbuf {
  void *p;
  size_t size;
};

static void *
nbuf_get (struct nbuf *b, size_t size)
{
  if (b->size < size) {
    void *q = realloc (b->p, size);

    if (q == NULL)
      abort ();
    memset (q, 0, size);
    b->p = q;
    b->size = size;
  }
  return b->p;
}

static void
grow (void)
{
  struct gr_reqpin *rp = gr_reqpin_new (&ops, GR_REQPIN_CAP_DEFAULT);
  static const size_t sizes[] = { 4 * KiB, 64 * KiB, 100 * KiB, 64 * KiB,
                                  1 * MiB, 3 * MiB, 512 * KiB, 8 * MiB,
                                  8 * MiB, 7 * MiB };
  struct nbuf b = { NULL, 0 };
  long calls;
  size_t i;

  reset ();
  CHECK (!request (rp, nbuf_get (&b, 4 * KiB), 4 * KiB),
         "a buffer under 64 KiB is not registered");
  CHECK (nreg_calls == 0, "nothing registered for it");
  for (i = 1; i < sizeof sizes / sizeof sizes[0]; i++) {
    void *old = b.p;
    size_t oldsize = b.size;
    void *p = nbuf_get (&b, sizes[i]);

    calls = nreg_calls;
    CHECK (request (rp, p, sizes[i]), "request of %zu: page-locked",
           sizes[i]);
    if (p == old && sizes[i] <= oldsize)
      CHECK (nreg_calls == calls, "same buffer, no larger: no new "
             "registration");
    CHECK (count_reg () == 1, "one range for the one thread (%d)",
           count_reg ());
  }
  {
    struct gr_reqpin_stats st;

    /* The account: the registrations' time within the requests' wait. */
    gr_reqpin_stats (rp, &st);
    CHECK (st.registered > 0 && st.reg_s > 0 && st.wait_s >= st.reg_s &&
           st.wait_max_s >= st.reg_max_s && st.reg_max_s > 0,
           "the wait's account: %" PRIu64 " registrations, %g s waiting "
           "(longest %g), %g s registering (longest %g)", st.registered,
           st.wait_s, st.wait_max_s, st.reg_s, st.reg_max_s);
  }
  gr_reqpin_free (rp);
  CHECK (count_reg () == 0 && bad == 0, "free: every range unregistered, "
         "none wrongly (%ld)", bad);
  free (b.p);
}

/* Connections: threads that grow their buffers and end. */
static struct gr_reqpin *conn_rp;

static void *
conn_thread (void *arg)
{
  struct nbuf b = { NULL, 0 };
  uint64_t seed = (uintptr_t) arg;
  int i;

  for (i = 0; i < 40; i++) {
    size_t len;

    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    len = (size_t) (seed >> 33) % (4 * MiB) + 1;
    request (conn_rp, nbuf_get (&b, len), len);
  }
  /* As nbdkit: the buffer is freed when the thread ends, before the
   * registry's destructor runs (keys made earlier go first). */
  free (b.p);
  return NULL;
}

static void
connections (void)
{
  pthread_t t[4];
  int c, i;

  reset ();
  conn_rp = gr_reqpin_new (&ops, 8 * MiB);
  for (c = 0; c < 12; c++) {
    for (i = 0; i < 4; i++)
      pthread_create (&t[i], NULL, conn_thread,
                      (void *) (uintptr_t) (c * 4 + i + 1));
    for (i = 0; i < 4; i++)
      pthread_join (t[i], NULL);
    CHECK (count_reg () == 0, "connection %d: its threads' ranges "
           "unregistered when they ended (%d left)", c, count_reg ());
  }
  CHECK (bad == 0, "no range unregistered in use, unknown, or registered "
         "over another (%ld)", bad);
  CHECK (reg_bytes_max <= 8 * MiB, "the bound held (%zu)", reg_bytes_max);
  CHECK (nreg_calls > 12 * 4, "buffers were registered (%ld)", nreg_calls);
  gr_reqpin_free (conn_rp);
}

/* A range whose memory its thread gave up without telling (nbdkit
 * replaced the buffer and the plugin was not called): another thread's
 * buffer there finds it stale. */
static uint8_t *arena;
static pthread_barrier_t bar;
static struct gr_reqpin *stale_rp;

static void *
stale_a (void *arg)
{
  (void) arg;
  CHECK (request (stale_rp, arena, 1 * MiB), "A: its first buffer");
  pthread_barrier_wait (&bar);          /* B takes that memory */
  pthread_barrier_wait (&bar);
  CHECK (request (stale_rp, arena + 2 * MiB, 1 * MiB), "A: its new buffer");
  return NULL;
}

static void *
stale_b (void *arg)
{
  struct gr_reqpin_stats st;

  (void) arg;
  pthread_barrier_wait (&bar);
  CHECK (request (stale_rp, arena + 512 * KiB, 1 * MiB),
         "B: a buffer over A's stale range is page-locked");
  gr_reqpin_stats (stale_rp, &st);
  CHECK (st.stale == 1 && !registered (arena, 1 * MiB, false),
         "A's stale range unregistered (%" PRIu64 ")", st.stale);
  pthread_barrier_wait (&bar);
  return NULL;
}

static void
stale (void)
{
  pthread_t a, b;

  reset ();
  arena = aligned_alloc (4096, 4 * MiB);
  stale_rp = gr_reqpin_new (&ops, GR_REQPIN_CAP_DEFAULT);
  pthread_barrier_init (&bar, NULL, 2);
  pthread_create (&a, NULL, stale_a, NULL);
  pthread_create (&b, NULL, stale_b, NULL);
  pthread_join (a, NULL);
  pthread_join (b, NULL);
  CHECK (bad == 0 && count_reg () == 0, "stale: nothing unregistered "
         "twice or in use (%ld), all gone with the threads (%d)", bad,
         count_reg ());
  gr_reqpin_free (stale_rp);
  pthread_barrier_destroy (&bar);
  free (arena);
}

/* Failures: ENOMEM stops registering; EEXIST leaves that buffer staged. */
static void
failures (void)
{
  struct gr_reqpin *rp = gr_reqpin_new (&ops, GR_REQPIN_CAP_DEFAULT);
  struct gr_reqpin_stats st;
  uint8_t *a = aligned_alloc (4096, 4 * MiB);
  int i;

  reset ();
  fail_with = ENOMEM;
  for (i = 0; i < 5; i++)
    CHECK (!request (rp, a + i * 128 * KiB, 128 * KiB), "ENOMEM: staged");
  CHECK (nreg_calls == 1, "ENOMEM: not tried again (%ld calls)", nreg_calls);
  CHECK (warnings == 1, "ENOMEM: warned once (%d)", warnings);
  gr_reqpin_stats (rp, &st);
  CHECK (st.off && st.failed == 1, "ENOMEM: stopped, one failure");
  gr_reqpin_free (rp);

  /* EEXIST: a neighbour shares a page with this buffer (live, not
   * stale: no byte in common). */
  reset ();
  rp = gr_reqpin_new (&ops, GR_REQPIN_CAP_DEFAULT);
  CHECK (st_reg (a, 100000) == 0, "a neighbour's range");
  CHECK (!request (rp, a + 100016, 256 * KiB), "EEXIST: staged");
  CHECK (!request (rp, a + 100016, 200 * KiB), "EEXIST: still staged");
  CHECK (nreg_calls == 2, "EEXIST: that buffer not tried again (%ld)",
         nreg_calls - 1);
  CHECK (request (rp, a + MiB, 256 * KiB), "EEXIST: a moved buffer is "
         "page-locked");
  CHECK (warnings == 0, "EEXIST: no warning (%d)", warnings);
  CHECK (registered (a, 100000, false), "the neighbour left alone");
  CHECK (st_unreg (a) == 0, "the neighbour's range");
  gr_reqpin_free (rp);
  CHECK (count_reg () == 0 && bad == 0, "failures: nothing left");
  free (a);
}

/* The bound: bytes in all, and moves per thread. */
static struct gr_reqpin *cap_rp;
static uint8_t *cap_mem;

static void *
cap_holder (void *arg)
{
  (void) arg;
  CHECK (request (cap_rp, cap_mem, 768 * KiB), "768 KiB under a 1 MiB "
         "bound");
  return NULL;
}

static void
bound (void)
{
  struct gr_reqpin_stats st;
  pthread_t t;
  int i;

  reset ();
  cap_mem = aligned_alloc (4096, 512 * MiB);
  cap_rp = gr_reqpin_new (&ops, 1 * MiB);
  pthread_create (&t, NULL, cap_holder, NULL);
  pthread_join (t, NULL);               /* its range goes with it */
  CHECK (count_reg () == 0, "the holder's range went with it");
  CHECK (request (cap_rp, cap_mem + 2 * MiB, 512 * KiB), "room again");
  gr_reqpin_free (cap_rp);
  reset ();
  cap_rp = gr_reqpin_new (&ops, 1 * MiB);
  CHECK (request (cap_rp, cap_mem, 768 * KiB), "768 KiB");
  CHECK (request (cap_rp, cap_mem + 2 * MiB, 1 * MiB), "the thread's own "
         "range replaced within the bound");
  gr_reqpin_free (cap_rp);

  /* Over the bound from another thread's range: staged. */
  reset ();
  cap_rp = gr_reqpin_new (&ops, 1 * MiB);
  CHECK (!request (cap_rp, cap_mem, 2 * MiB), "a buffer over the bound "
         "is staged");
  gr_reqpin_stats (cap_rp, &st);
  CHECK (st.over_cap == 1 && nreg_calls == 0, "counted, not registered");
  gr_reqpin_free (cap_rp);

  /* Moves: at most GR_REQPIN_MOVES registrations per thread. */
  reset ();
  cap_rp = gr_reqpin_new (&ops, GR_REQPIN_CAP_DEFAULT);
  for (i = 0; i < GR_REQPIN_MOVES + 5; i++)
    request (cap_rp, cap_mem + (size_t) i * 4 * MiB, 64 * KiB + i * 4096);
  CHECK (nreg_calls == GR_REQPIN_MOVES, "%d registrations at most per "
         "thread (%ld)", GR_REQPIN_MOVES, nreg_calls);
  gr_reqpin_free (cap_rp);
  CHECK (count_reg () == 0 && bad == 0, "bound: nothing left (%ld)", bad);
  free (cap_mem);
}

int
main (void)
{
  grow ();
  connections ();
  stale ();
  failures ();
  bound ();
  return test_done ("test-reqpin");
}
