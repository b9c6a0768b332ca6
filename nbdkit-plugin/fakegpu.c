/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - stand-in GPUs for tests.  See fakegpu.h. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "fakegpu.h"
#include "gf/gf-backend.h"

NBDKIT_DLL_PUBLIC int gpuraid_debug_fake_gpu = 0;
NBDKIT_DLL_PUBLIC int gpuraid_debug_fake_auto = 0;
NBDKIT_DLL_PUBLIC int gpuraid_debug_fake_pin = 0;
NBDKIT_DLL_PUBLIC int gpuraid_debug_fake_gpu_us = 0;
NBDKIT_DLL_PUBLIC int gpuraid_debug_fake_cpu_us = 0;
NBDKIT_DLL_PUBLIC int gpuraid_debug_fake_fail_after = 0;

static void classify (const uint8_t *const *b, size_t n, size_t len);

enum gr_fake_gpu
gr_fakegpu_mode (void)
{
  int v = gpuraid_debug_fake_gpu;

  return v >= GR_FAKE_FAILING && v <= GR_FAKE_BAD_SUMS ? (enum gr_fake_gpu) v
    : GR_FAKE_NONE;
}

enum gr_fake_auto
gr_fakegpu_auto (void)
{
  int v = gpuraid_debug_fake_auto;

  return v == 1 ? GR_FAKE_AUTO_MEASURED : v == 2 ? GR_FAKE_AUTO_ALL
    : GR_FAKE_AUTO_OFF;
}

const char *
gr_fakegpu_name (void)
{
  switch (gr_fakegpu_mode ()) {
  case GR_FAKE_WORKING: return "working";
  case GR_FAKE_WRONG: return "wrong";
  case GR_FAKE_BAD_SUMS: return "wrong-checksums";
  default: return "failing";
  }
}

static int
any_probe (void)
{
  return 0;
}

/* --- the failing stand-in ------------------------------------------------ */

static int
failing_encode (struct gr_coder *c, uint8_t *const *blocks, size_t nstripes,
                size_t len)
{
  return -EIO;
}

static int
failing_reconstruct (struct gr_coder *c, const struct gr_decode *d,
                     uint8_t *const *blocks, size_t nstripes, size_t len)
{
  return -EIO;
}

static int
failing_update (struct gr_coder *c, int data_index,
                const uint8_t *const *delta, uint8_t *const *parity,
                size_t nstripes, size_t len)
{
  /* Scribble on the output first, as a half-done GPU operation might. */
  if (nstripes > 0 && len > 0)
    parity[0][0] ^= 0x5a;
  return -EIO;
}

static const struct gr_backend failing_backend = {
  .name = "fake-gpu",
  .prefer = -1000,
  .probe = any_probe,
  .encode = failing_encode,
  .reconstruct = failing_reconstruct,
  .update = failing_update,
};

/* --- the wrong stand-in: right parity, wrong rebuilt bytes --------------- */

/* Its per-coder state is a CPU coder of the same geometry. */
static int
wrong_init (struct gr_coder *c, void **priv)
{
  struct gr_coder *inner;
  int r = gr_coder_new (&inner, gr_coder_k (c), gr_coder_m (c),
                        gr_coder_code (c), gr_backend_best ());

  if (r == 0)
    *priv = inner;
  return r;
}

static void
wrong_fini (struct gr_coder *c, void *priv)
{
  gr_coder_free (priv);
}

static int
wrong_encode (struct gr_coder *c, uint8_t *const *blocks, size_t nstripes,
              size_t len)
{
  return gr_encode (gr_coder_priv (c), blocks, nstripes, len);
}

static int
wrong_reconstruct (struct gr_coder *c, const struct gr_decode *d,
                   uint8_t *const *blocks, size_t nstripes, size_t len)
{
  int r = gr_reconstruct (gr_coder_priv (c), d->lost, d->nlost, blocks,
                          nstripes, len);

  if (r == 0 && d->nerased > 0 && len > 0)
    blocks[d->erased[0]][len / 2] ^= 0x01;
  return r;
}

static int
wrong_update (struct gr_coder *c, int data_index, const uint8_t *const *delta,
              uint8_t *const *parity, size_t nstripes, size_t len)
{
  return gr_update (gr_coder_priv (c), data_index, delta, parity, nstripes,
                    len);
}

static const struct gr_backend wrong_backend = {
  .name = "wrong-gpu",
  .prefer = -1000,
  .probe = any_probe,
  .coder_init = wrong_init,
  .coder_fini = wrong_fini,
  .encode = wrong_encode,
  .reconstruct = wrong_reconstruct,
  .update = wrong_update,
};

/* --- the working stand-in: a CPU coder, its blocks counted ------------- */

static const struct gr_backend *working_cpu;

static int
working_init (struct gr_coder *c, void **priv)
{
  struct gr_coder *inner;
  int r = gr_coder_new (&inner, gr_coder_k (c), gr_coder_m (c),
                        gr_coder_code (c), working_cpu);

  if (r == 0)
    *priv = inner;
  return r;
}

void
gr_fakegpu_cpu_latency (void)
{
  if (gpuraid_debug_fake_cpu_us > 0)
    usleep ((useconds_t) gpuraid_debug_fake_cpu_us);
}

/* Submissions in their round trip now, and the most there were at once
 * (reported at exit: the plugin bounds how many it has on the GPU). */
static int trips_now, trips_max;

/* A submission's round trip, as a GPU's (fake_gpu_us). */
static void
latency (void)
{
  int now, max;

  if (gpuraid_debug_fake_gpu_us <= 0)
    return;
  now = __atomic_add_fetch (&trips_now, 1, __ATOMIC_ACQ_REL);
  max = __atomic_load_n (&trips_max, __ATOMIC_RELAXED);
  while (now > max &&
         !__atomic_compare_exchange_n (&trips_max, &max, now, false,
                                       __ATOMIC_RELAXED, __ATOMIC_RELAXED))
    ;
  usleep ((useconds_t) gpuraid_debug_fake_gpu_us);
  __atomic_sub_fetch (&trips_now, 1, __ATOMIC_ACQ_REL);
}

/* fake_fail_after=N: has the working one done its N operations, and
 * fails from now on? */
static bool
gone_bad (void)
{
  static unsigned long ops;

  return gpuraid_debug_fake_fail_after > 0 &&
    __atomic_add_fetch (&ops, 1, __ATOMIC_RELAXED) >
    (unsigned long) gpuraid_debug_fake_fail_after;
}

static int
working_encode (struct gr_coder *c, uint8_t *const *blocks, size_t nstripes,
                size_t len)
{
  if (gone_bad ())
    return -EIO;
  latency ();
  classify ((const uint8_t *const *) blocks,
            nstripes * (gr_coder_k (c) + gr_coder_m (c)), len);
  return gr_encode (gr_coder_priv (c), blocks, nstripes, len);
}

static int
working_reconstruct (struct gr_coder *c, const struct gr_decode *d,
                     uint8_t *const *blocks, size_t nstripes, size_t len)
{
  const int k = gr_coder_k (c), n = k + gr_coder_m (c);
  const uint8_t *used[GR_MAX_MEMBERS];
  size_t s;
  int i, nu;

  if (gone_bad ())
    return -EIO;
  latency ();
  for (s = 0; s < nstripes; s++) {
    for (nu = 0, i = 0; i < k; i++)
      used[nu++] = blocks[s * n + d->survivors[i]];
    for (i = 0; i < d->nerased; i++)
      used[nu++] = blocks[s * n + d->erased[i]];
    classify (used, nu, len);
  }
  return gr_reconstruct (gr_coder_priv (c), d->lost, d->nlost, blocks,
                         nstripes, len);
}

static int
working_update (struct gr_coder *c, int data_index,
                const uint8_t *const *delta, uint8_t *const *parity,
                size_t nstripes, size_t len)
{
  const int m = gr_coder_m (c);
  const uint8_t *used[GR_MAX_MEMBERS + 1];
  size_t s;
  int j;

  if (gone_bad ())
    return -EIO;
  latency ();
  for (s = 0; s < nstripes; s++) {
    used[0] = delta[s];
    for (j = 0; j < m; j++)
      used[1 + j] = parity[s * m + j];
    classify (used, 1 + m, len);
  }
  return gr_update (gr_coder_priv (c), data_index, delta, parity, nstripes,
                    len);
}

/* Several operations: one round trip for all, as the GPU's submission. */
static int
working_many (struct gr_coder *c, const struct gr_decode *const *d,
              const struct gr_code_op *ops, size_t nops, bool *summed)
{
  const int k = gr_coder_k (c), n = k + gr_coder_m (c);
  const uint8_t *used[GR_MAX_MEMBERS];
  size_t i, s;
  int j, nu;

  if (gone_bad ())
    return -EIO;
  latency ();
  for (i = 0; i < nops; i++)
    for (s = 0; s < ops[i].nstripes; s++) {
      uint8_t *const *b = ops[i].blocks + s * n;

      if (d[i] == NULL && ops[i].count > 0) {  /* part of the data */
        for (nu = 0, j = 0; j < ops[i].count; j++)
          used[nu++] = b[ops[i].first + j];
        for (j = k; j < n; j++)
          used[nu++] = b[j];
        classify (used, nu, ops[i].len);
        continue;
      }
      if (d[i] == NULL) {
        classify ((const uint8_t *const *) b, n, ops[i].len);
        continue;
      }
      for (nu = 0, j = 0; j < k; j++)
        used[nu++] = b[d[i]->survivors[j]];
      for (j = 0; j < d[i]->nerased; j++)
        used[nu++] = b[d[i]->erased[j]];
      classify (used, nu, ops[i].len);
    }
  /* The CPU coder behind sums them all. */
  for (i = 0; i < nops; i++)
    summed[i] = ops[i].cksums != NULL;
  return gr_code_many (gr_coder_priv (c), ops, nops);
}

static const struct gr_backend working_backend = {
  .name = "working-gpu",
  .prefer = -1000,
  .probe = any_probe,
  .coder_init = working_init,
  .coder_fini = wrong_fini,
  .encode = working_encode,
  .reconstruct = working_reconstruct,
  .update = working_update,
  .code_many = working_many,
};

/* The working one, but every checksum of its reconstructs one bit off. */
static int
bad_sums_many (struct gr_coder *c, const struct gr_decode *const *d,
               const struct gr_code_op *ops, size_t nops, bool *summed)
{
  const size_t n = (size_t) (gr_coder_k (c) + gr_coder_m (c));
  int r = working_many (c, d, ops, nops, summed);

  for (size_t i = 0; i < nops && r == 0; i++)
    if (d[i] && ops[i].cksums)
      for (size_t v = 0; v < ops[i].nstripes * n * (ops[i].len / GR_SUM_BLOCK);
           v++)
        ops[i].cksums[v] ^= 1;
  return r;
}

static const struct gr_backend bad_sums_backend = {
  .name = "wrong-checksums-gpu",
  .prefer = -1000,
  .probe = any_probe,
  .coder_init = working_init,
  .coder_fini = wrong_fini,
  .encode = working_encode,
  .reconstruct = working_reconstruct,
  .update = working_update,
  .code_many = bad_sums_many,
};

int
gr_fakegpu_coder (struct gr_coder **out, int k, int m, enum gr_code code,
                  const struct gr_backend *cpu)
{
  switch (gr_fakegpu_mode ()) {
  case GR_FAKE_WORKING:
    working_cpu = cpu;
    return gr_coder_new (out, k, m, code, &working_backend);
  case GR_FAKE_WRONG:
    return gr_coder_new (out, k, m, code, &wrong_backend);
  case GR_FAKE_BAD_SUMS:
    working_cpu = cpu;
    return gr_coder_new (out, k, m, code, &bad_sums_backend);
  case GR_FAKE_FAILING:
    return gr_coder_new (out, k, m, code, &failing_backend);
  default:
    return -ENODEV;
  }
}


/* --- page-locking emulated ----------------------------------------------- */

/* The ranges the stand-in knows as page-locked: its allocations and the
 * registered ranges (in use or not). */
#define NRANGES 1024
#define PAGE ((uintptr_t) 4096)
enum { R_ALLOC, R_IDLE, R_IN_USE };
static pthread_mutex_t pin_lock = PTHREAD_MUTEX_INITIALIZER;
static struct { uintptr_t base; size_t size; int state; } ranges[NRANGES];
static int nranges;
static uint64_t ops_direct, ops_req, ops_staged, ops_idle, nregistered;
static uint64_t bad_unreg, bad_in_use, copies, copies_refused;
static char pin_err[128];

/* Under pin_lock: the index of the range at p, or -1. */
static int
find (uintptr_t p)
{
  for (int i = 0; i < nranges; i++)
    if (ranges[i].base == p)
      return i;
  return -1;
}

static void
add (void *p, size_t size, int state)
{
  pthread_mutex_lock (&pin_lock);
  if (nranges < NRANGES)
    ranges[nranges++] = (typeof (ranges[0])) { (uintptr_t) p, size, state };
  pthread_mutex_unlock (&pin_lock);
}

static void
del (void *p)
{
  int i;

  pthread_mutex_lock (&pin_lock);
  if ((i = find ((uintptr_t) p)) >= 0)
    ranges[i] = ranges[--nranges];
  pthread_mutex_unlock (&pin_lock);
}

void *
gr_fakegpu_host_alloc (size_t size)
{
  void *p;

  if (posix_memalign (&p, 4096, size) != 0)
    return NULL;
  add (p, size, R_ALLOC);
  return p;
}

void
gr_fakegpu_host_free (void *p)
{
  del (p);
  free (p);
}

int
gr_fakegpu_host_register (void *p, size_t size)
{
  const uintptr_t a = (uintptr_t) p & ~(PAGE - 1);
  const uintptr_t e = ((uintptr_t) p + size + PAGE - 1) & ~(PAGE - 1);
  int r = 0;

  pthread_mutex_lock (&pin_lock);
  if (gpuraid_debug_fake_pin == 1)
    r = -ENOMEM;
  else if (gpuraid_debug_fake_pin == 2)
    r = -EEXIST;
  else if (nranges == NRANGES)
    r = -ENOSPC;
  for (int i = 0; i < nranges && r == 0; i++) {
    const uintptr_t b = ranges[i].base & ~(PAGE - 1);
    const uintptr_t f = (ranges[i].base + ranges[i].size + PAGE - 1)
      & ~(PAGE - 1);

    if (ranges[i].state != R_ALLOC && a < f && b < e)
      r = -EEXIST;
  }
  if (r == 0) {
    ranges[nranges++] = (typeof (ranges[0])) { (uintptr_t) p, size, R_IDLE };
    nregistered++;
  }
  else
    snprintf (pin_err, sizeof pin_err, "fake cudaHostRegister: %s",
              r == -EEXIST ? "part or all of the range is registered already"
              : r == -ENOMEM ? "out of memory (fake_pin=1)" : "too many");
  pthread_mutex_unlock (&pin_lock);
  return r;
}

int
gr_fakegpu_host_unregister (void *p)
{
  int i, r = 0;

  pthread_mutex_lock (&pin_lock);
  i = find ((uintptr_t) p);
  if (i < 0 || ranges[i].state == R_ALLOC) {
    bad_unreg++;
    r = -EINVAL;
  }
  else
    ranges[i] = ranges[--nranges];
  pthread_mutex_unlock (&pin_lock);
  return r;
}

void
gr_fakegpu_host_in_use (void *p, bool on)
{
  int i;

  pthread_mutex_lock (&pin_lock);
  i = find ((uintptr_t) p);
  /* In use only from not in use, and back. */
  if (i < 0 || ranges[i].state == (on ? R_IN_USE : R_IDLE) ||
      ranges[i].state == R_ALLOC)
    bad_in_use++;
  else
    ranges[i].state = on ? R_IN_USE : R_IDLE;
  pthread_mutex_unlock (&pin_lock);
}

const char *
gr_fakegpu_pin_error (void)
{
  return pin_err;
}

/* Under pin_lock: 2 if [p, p + len) lies in a registered range in use,
 * 1 in an allocation, -1 if it touches a registered range not in use,
 * else 0. */
static int
span_state (const uint8_t *p, size_t len)
{
  const uintptr_t a = (uintptr_t) p;
  int st = 0;

  for (int i = 0; i < nranges && st < 1; i++) {
    const uintptr_t b = ranges[i].base;
    const size_t sz = ranges[i].size;

    if (a >= b && len <= sz && a - b <= sz - len && ranges[i].state != R_IDLE)
      st = ranges[i].state == R_IN_USE ? 2 : 1;
    else if (ranges[i].state != R_ALLOC && a < b + sz && b < a + len)
      st = -1;
  }
  return st;
}

int
gr_fakegpu_host_copy (const struct gr_copy_row *rows, size_t n)
{
  bool ok = true;

  pthread_mutex_lock (&pin_lock);
  for (size_t i = 0; i < n && ok; i++)
    ok = span_state (rows[i].dst, rows[i].len) >= 1 &&
      span_state (rows[i].src, rows[i].len) >= 1;
  if (ok)
    copies++;
  else
    copies_refused++;
  pthread_mutex_unlock (&pin_lock);
  if (!ok)
    return -EAGAIN;
  for (size_t i = 0; i < n; i++)
    memcpy (rows[i].dst, rows[i].src, rows[i].len);
  return 0;
}

/* Count an operation on these blocks as the engine would run it. */
static void
classify (const uint8_t *const *b, size_t n, size_t len)
{
  int worst = 2;
  bool req = false;

  pthread_mutex_lock (&pin_lock);
  for (size_t i = 0; i < n && worst != -1; i++) {
    int st = span_state (b[i], len);

    if (st < worst)
      worst = st;
    req |= st == 2;
  }
  if (worst >= 1)
    ops_direct++;
  if (worst >= 1 && req)
    ops_req++;
  else
    ops_staged++;
  if (worst == -1)
    ops_idle++;
  pthread_mutex_unlock (&pin_lock);
}

void
gr_fakegpu_report (void)
{
  int left = 0;

  pthread_mutex_lock (&pin_lock);
  for (int i = 0; i < nranges; i++)
    left += ranges[i].state != R_ALLOC;
  nbdkit_debug ("gpuraid: fake GPU: %" PRIu64 " operations with every block "
                "page-locked (%" PRIu64 " with blocks in request buffers), %"
                PRIu64 " staged (%" PRIu64 " touching a "
                "registered range not in use); %" PRIu64 " ranges registered, "
                "%d left registered, %" PRIu64 " bad unregisters, %" PRIu64
                " bad in-use marks; host copies %" PRIu64 " calls (%" PRIu64
                " refused); at most %d submissions at once",
                ops_direct, ops_req, ops_staged, ops_idle, nregistered, left,
                bad_unreg, bad_in_use, copies, copies_refused,
                __atomic_load_n (&trips_max, __ATOMIC_RELAXED));
  pthread_mutex_unlock (&pin_lock);
}
