/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - test-gpu: the "cuda" backend against the "ref" backend, byte
 * for byte.
 *
 * First (tier and default parts), decode tables used as soon as they
 * are made while the link is busy (8+8, four threads), ordinary memory
 * page-locked across a fork (as the JIT's compiler forks), a failed CUDA
 * call not left to fail the next launch, and the engine's list of
 * page-locked ranges (lookups, overlaps, rows merged across two).  Then,
 * for (k, m) in 1+1 2+1 4+2 6+3 10+4 16+4 8+8 20+12 200+55, RS and CRS:
 * encode (parity compared with ref's), parity update (compared with ref's
 * encode of the new data), reconstruct (every erasure set of size <= m
 * when k + m <= 12, random sets beyond; rebuilt blocks compared with the
 * originals); batches of 1, 3 and 17 stripes; RS lengths 1, 13, 4101 and
 * 1 MiB, CRS lengths 4096, 8192 and 1 MiB; host blocks at random offsets
 * 0..16 from their allocation (misaligned, and at the very end); blocks in
 * page-locked memory (the engine's direct path), also back to back in one
 * region (merged and 2D copies), with the default chunk size and with
 * small chunks (stripes split, chunk buffers reused); four threads sharing one coder.  Cases whose
 * reference computation would be slow are left out (printed).  Then the
 * same suite, reduced, with the run-time compiled XOR networks on every
 * batch (with 16+16 too), with those in their plain form (right shifts
 * by SHF, rows as C XORs) in passes of 2 output blocks and on 16+16, and
 * with inputs staged in shared memory (with 16+16 and big launches).  QUICK=1 runs the
 * reduced set throughout (for compute-sanitizer).
 *
 * TEST_GPU_PART runs one part (each fits one call on the GPU machine):
 *   tier     the default (make check, make check-gpu): every kernel the
 *            engine can choose, in its
 *            default form: the generic kernels on the reduced set, the JIT
 *            kernels (default form: staged from 12 output blocks, passes
 *            beyond 16) on the reduced set, 16+16 and big launches, with
 *            one random erasure set a case (each set is a compile)
 *   default  the generic kernels, whole suite
 *   jit      the JIT kernels in their default form, every erasure set
 *   plain    the JIT kernels in the plain form (SHF, C XORs)
 *   stage    the JIT kernels staged per item with SHF shifts
 *   all      default, jit, plain and stage in one run
 *   many     the default's submissions of several operations only (the
 *            engine's copies, and its batches coded where their blocks
 *            are), reduced
 * make check-gpu-long runs default, jit, plain and stage as separate
 * parts.  TEST_SEED sets the random seed (printed).
 *
 * Exit 0 pass, 1 fail, 77 skip (no usable CUDA device).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <isa-l/crc.h>

#include "gf/gf.h"
#include "tests/testkit.h"

#ifndef GR_HAVE_CUDA

int
main (void)
{
  test_skip ("test-gpu", "no usable CUDA device (built without CUDA: no "
             "nvcc, or NOCUDA=1)");
}

#else /* GR_HAVE_CUDA */

#include "gpu.h"

/* Internal hook (gpu/engine.cu): data bytes per chunk of the direct
 * path (0 leaves it); returns the previous value. */
extern size_t gr_gpu_set_chunk (size_t bytes);
/* Direct batches that started while another held a slot (and took the
 * shared chunk size). */
extern unsigned long gr_gpu_direct_shared (void);
/* Which direct jobs of gr_code_many the copy kernel copies (as
 * gpu-internal.h's enum gr_gpu_mapped_use, CUDA C++ only): none, those of
 * short runs (the default), all; returns the previous value. */
extern int gr_gpu_set_mapped (int use);
enum { MAPPED_NEVER, MAPPED_SHORT_RUNS, MAPPED_ALWAYS };
/* Which submissions gr_code_many codes where their blocks are, nothing
 * copied (as gpu-internal.h's enum gr_gpu_gather_use): never, by the
 * engine's rules (the default), by them but the table's shape (its
 * output rows more than half its inputs); returns the previous value. */
extern int gr_gpu_set_gather (int use);
enum { GATHER_NEVER, GATHER_RULE, GATHER_ANY_TABLE };
/* Internal hooks (gpu/engine.cu, gpu/jit.cu).  Batches of at least
 * min_bytes compile the JIT kernel. */
extern size_t gr_gpu_set_jit_min (size_t min_bytes);
extern int gr_gpu_jit_built (void);
/* How many of the engine's slots are set up (gpu/engine.cu). */
extern int gr_gpu_slots_ready (void);
extern int gr_gpu_set_jit_async (int on);
extern int gr_gpu_set_jit_passrows (int n);
extern void gr_gpu_set_jit_form (const int f[3], int old[3]);
/* What the engine makes of a span of host memory: unknown to it (0),
 * copied directly (1) or staged (2); does its copy kernel run? */
extern int gr_gpu_span_state (const void *p, size_t len);
extern int gr_gpu_mapped_ok (void);
enum { SPAN_UNKNOWN, SPAN_PINNED, SPAN_STAGE };

#define MiB ((size_t) 1 << 20)

static uint64_t rng;            /* from the kit's seed; threads fork it */
static int quick;
static int tier;                /* TEST_GPU_PART=tier: one erasure set */
static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;

#define FAIL(...)                                       \
  do {                                                  \
    pthread_mutex_lock (&fail_lock);                    \
    fprintf (stderr, "FAIL: " __VA_ARGS__);             \
    fprintf (stderr, " [gpu: %s]\n", gr_gpu_last_error ());     \
    test_failures++;                                    \
    pthread_mutex_unlock (&fail_lock);                  \
  } while (0)

static uint64_t
rnd_r (uint64_t *s)
{
  uint64_t x = *s;

  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

static uint64_t
rnd (void)
{
  return rnd_r (&rng);
}

static void
fill_r (uint64_t *s, uint8_t *p, size_t n)
{
  size_t i = 0;

  for (; i + 8 <= n; i += 8) {
    uint64_t v = rnd_r (s);
    memcpy (p + i, &v, 8);
  }
  for (; i < n; i++)
    p[i] = (uint8_t) rnd_r (s);
}

/* A batch of nstripes x n blocks of len bytes, each block at an offset of
 * 0..16 bytes into its own allocation of len + 16 bytes (offset 16: the
 * block ends exactly at the end of its allocation). */
struct batch {
  size_t ns, len;
  int n, k, pinned;             /* 0 malloc, 1 page-locked, 2 one region,
                                 * 3 parity page-locked, data malloc */
  uint8_t **mem, **blk;
};

static int
batch_new (struct batch *b, size_t ns, int n, int k, size_t len,
           int misalign, int pinned, uint64_t *s)
{
  size_t i;

  b->ns = ns;
  b->n = n;
  b->k = k;
  b->len = len;
  b->pinned = pinned;
  b->mem = calloc (ns * n, sizeof *b->mem);
  b->blk = calloc (ns * n, sizeof *b->blk);
  if (b->mem == NULL || b->blk == NULL)
    return -1;
  if (pinned == 2) {             /* one page-locked region, back to back */
    b->mem[0] = gr_gpu_host_alloc (ns * n * len);
    if (b->mem[0] == NULL)
      return -1;
    for (i = 0; i < ns * n; i++) {
      b->blk[i] = b->mem[0] + i * len;
      fill_r (s, b->blk[i], len);
    }
    return 0;
  }
  for (i = 0; i < ns * n; i++) {
    size_t off = misalign ? rnd_r (s) % 17 : 0;

    b->mem[i] = pinned == 1 || (pinned == 3 && (int) (i % n) >= k)
      ? gr_gpu_host_alloc (len + 16) : malloc (len + 16);
    if (b->mem[i] == NULL)
      return -1;
    b->blk[i] = b->mem[i] + off;
    fill_r (s, b->blk[i], len);
  }
  return 0;
}

static void
batch_free (struct batch *b)
{
  for (size_t i = 0; b->mem && i < b->ns * b->n; i++) {
    if (b->pinned == 1 || b->pinned == 2 ||
        (b->pinned == 3 && (int) (i % b->n) >= b->k))
      gr_gpu_host_free (b->mem[i]);
    else
      free (b->mem[i]);
  }
  free (b->mem);
  free (b->blk);
}

/* Copy every block of src into dst (same shape). */
static void
batch_copy (struct batch *dst, const struct batch *src)
{
  for (size_t i = 0; i < src->ns * src->n; i++)
    memcpy (dst->blk[i], src->blk[i], src->len);
}

/* Compare blocks with index in [i0, i1) of every stripe (one check of
 * the kit's count). */
static int
batch_cmp (const struct batch *a, const struct batch *b, int i0, int i1,
           const char *what, int k, int m, const char *code)
{
  pthread_mutex_lock (&fail_lock);
  test_checks++;
  pthread_mutex_unlock (&fail_lock);
  for (size_t s = 0; s < a->ns; s++)
    for (int i = i0; i < i1; i++) {
      const uint8_t *x = a->blk[s * a->n + i], *y = b->blk[s * b->n + i];

      if (memcmp (x, y, a->len) != 0) {
        size_t p = 0;
        while (x[p] == y[p])
          p++;
        FAIL ("%s %d+%d %s: %zu stripes len %zu: stripe %zu block %d "
              "differs at byte %zu (%02x, expected %02x)", what, k, m, code,
              a->ns, a->len, s, i, p, y[p], x[p]);
        return -1;
      }
    }
  return 0;
}

static const char *
code_name (enum gr_code code)
{
  return code == GR_CODE_RS ? "RS" : "CRS";
}

/* Reconstruct erasure set er[0..ne-1] on a copy of good; compare. */
static void
check_erasures (struct gr_coder *cg, const struct batch *good,
                struct batch *work, const int *er, int ne, uint64_t *s)
{
  const int k = gr_coder_k (cg), m = gr_coder_m (cg);
  int r;

  batch_copy (work, good);
  for (size_t st = 0; st < good->ns; st++)
    for (int e = 0; e < ne; e++)
      fill_r (s, work->blk[st * good->n + er[e]], good->len);
  r = gr_reconstruct (cg, er, ne, work->blk, good->ns, good->len);
  if (r < 0) {
    FAIL ("reconstruct %d+%d %s: %d erasures: error %d", k, m,
          code_name (gr_coder_code (cg)), ne, r);
    return;
  }
  if (batch_cmp (good, work, 0, good->n, "reconstruct", k, m,
                 code_name (gr_coder_code (cg))) < 0) {
    fprintf (stderr, "  erasures:");
    for (int e = 0; e < ne; e++)
      fprintf (stderr, " %d", er[e]);
    fprintf (stderr, "\n");
  }
}

/* Random erasure set of size ne. */
static void
random_erasures (int n, int ne, int *er, uint64_t *s)
{
  int perm[GR_MAX_MEMBERS];

  for (int i = 0; i < n; i++)
    perm[i] = i;
  for (int i = 0; i < ne; i++) {
    int j = i + (int) (rnd_r (s) % (uint64_t) (n - i));
    int t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
    er[i] = perm[i];
  }
}

/* One case: encode, update, nrand random erasure sets (all sets of size
 * <= m when all_sets). */
static void
test_case (struct gr_coder *cr, struct gr_coder *cg, size_t ns, size_t len,
           int misalign, int pinned, int all_sets, int nrand)
{
  const int k = gr_coder_k (cg), m = gr_coder_m (cg), n = k + m;
  const char *code = code_name (gr_coder_code (cg));
  struct batch a = { 0 }, b = { 0 }, w = { 0 };
  uint8_t **delta = NULL, **dmem = NULL, **par = NULL;
  int r, di, er[GR_MAX_MEMBERS], nsets = 0;

  printf ("  %d+%d %s: %zu stripes x %zu bytes%s%s\n", k, m, code, ns, len,
          misalign ? ", misaligned" : "",
          pinned == 2 ? ", page-locked, back to back"
          : pinned == 3 ? ", parity page-locked, data not"
          : pinned ? ", page-locked" : "");
  fflush (stdout);
  if (batch_new (&a, ns, n, k, len, misalign, 0, &rng) < 0 ||
      batch_new (&b, ns, n, k, len, misalign, pinned, &rng) < 0 ||
      batch_new (&w, ns, n, k, len, misalign, pinned, &rng) < 0) {
    FAIL ("out of memory");
    goto out;
  }
  /* Same data in a and b; b's parity blocks keep their random bytes. */
  for (size_t s = 0; s < ns; s++)
    for (int i = 0; i < k; i++)
      memcpy (b.blk[s * n + i], a.blk[s * n + i], len);

  /* Encode. */
  r = gr_encode (cr, a.blk, ns, len);
  if (r < 0) {
    FAIL ("ref encode: %d", r);
    goto out;
  }
  r = gr_encode (cg, b.blk, ns, len);
  if (r < 0) {
    FAIL ("encode %d+%d %s: error %d", k, m, code, r);
    goto out;
  }
  if (batch_cmp (&a, &b, k, n, "encode", k, m, code) < 0)
    goto out;

  /* Update: data block di ^= delta, on the GPU's parity; then compare
   * with ref's encode of the new data. */
  di = (int) (rnd () % (uint64_t) k);
  delta = calloc (ns, sizeof *delta);
  dmem = calloc (ns, sizeof *dmem);
  par = calloc (ns * m, sizeof *par);
  if (delta == NULL || dmem == NULL || par == NULL) {
    FAIL ("out of memory");
    goto out;
  }
  for (size_t s = 0; s < ns; s++) {
    size_t off = misalign ? rnd () % 17 : 0;

    dmem[s] = malloc (len + 16);
    if (dmem[s] == NULL) {
      FAIL ("out of memory");
      goto out;
    }
    delta[s] = dmem[s] + off;
    fill_r (&rng, delta[s], len);
    for (size_t p = 0; p < len; p++)
      a.blk[s * n + di][p] ^= delta[s][p];
    memcpy (b.blk[s * n + di], a.blk[s * n + di], len);
    for (int j = 0; j < m; j++)
      par[s * m + j] = b.blk[s * n + k + j];
  }
  r = gr_encode (cr, a.blk, ns, len);
  if (r < 0) {
    FAIL ("ref encode: %d", r);
    goto out;
  }
  r = gr_update (cg, di, (const uint8_t *const *) delta, par, ns, len);
  if (r < 0) {
    FAIL ("update %d+%d %s: error %d", k, m, code, r);
    goto out;
  }
  if (batch_cmp (&a, &b, k, n, "update", k, m, code) < 0)
    goto out;

  /* Reconstruct from a (now consistent). */
  if (all_sets) {
    for (uint32_t set = 1; set < (1u << n); set++) {
      int ne = __builtin_popcount (set);

      if (ne > m)
        continue;
      ne = 0;
      for (int i = 0; i < n; i++)
        if (set & (1u << i))
          er[ne++] = i;
      /* Every order is allowed; present some reversed. */
      if (set & 1)
        for (int i = 0; i < ne / 2; i++) {
          int t = er[i];
          er[i] = er[ne - 1 - i];
          er[ne - 1 - i] = t;
        }
      check_erasures (cg, &a, &w, er, ne, &rng);
      nsets++;
    }
  }
  for (int t = 0; t < nrand; t++) {
    int ne = t == 0 ? m : 1 + (int) (rnd () % (uint64_t) m);

    random_erasures (n, ne, er, &rng);
    check_erasures (cg, &a, &w, er, ne, &rng);
    nsets++;
  }
  if (nsets > 1)
    printf ("    %d erasure sets\n", nsets);

 out:
  for (size_t s = 0; dmem && s < ns; s++)
    free (dmem[s]);
  free (dmem);
  free (delta);
  free (par);
  batch_free (&a);
  batch_free (&b);
  batch_free (&w);
}

/* ---- threads ----------------------------------------------------------- */

struct thr {
  struct gr_coder *cr, *cg;
  uint64_t seed;
  int id;
};

static void *
thr_main (void *arg)
{
  struct thr *t = arg;
  const int k = gr_coder_k (t->cg), m = gr_coder_m (t->cg), n = k + m;
  const size_t len = gr_coder_code (t->cg) == GR_CODE_RS ? 65536 + 5 : 65536;
  const char *code = code_name (gr_coder_code (t->cg));
  struct batch a = { 0 }, b = { 0 };
  uint64_t s = t->seed;
  int er[GR_MAX_MEMBERS];

  for (int round = 0; round < (quick ? 2 : 6); round++) {
    const size_t ns = 1 + rnd_r (&s) % 9;

    if (batch_new (&a, ns, n, 0, len, 1, 0, &s) < 0 ||
        batch_new (&b, ns, n, 0, len, 1, 0, &s) < 0) {
      FAIL ("out of memory");
      break;
    }
    for (size_t i = 0; i < ns * n; i++)
      memcpy (b.blk[i], a.blk[i], len);
    if (gr_encode (t->cr, a.blk, ns, len) < 0 ||
        gr_encode (t->cg, b.blk, ns, len) < 0)
      FAIL ("thread %d: encode failed", t->id);
    else if (batch_cmp (&a, &b, k, n, "threaded encode", k, m, code) == 0) {
      random_erasures (n, 1 + (int) (rnd_r (&s) % (uint64_t) m), er, &s);
      for (size_t st = 0; st < ns; st++)
        fill_r (&s, b.blk[st * n + er[0]], len);
      if (gr_reconstruct (t->cg, er, 1, b.blk, ns, len) < 0)
        FAIL ("thread %d: reconstruct failed", t->id);
      else
        batch_cmp (&a, &b, 0, n, "threaded reconstruct", k, m, code);
    }
    batch_free (&a);
    batch_free (&b);
    memset (&a, 0, sizeof a);
    memset (&b, 0, sizeof b);
  }
  return NULL;
}

static void
test_threads (struct gr_coder *cr, struct gr_coder *cg)
{
  pthread_t th[4];
  struct thr t[4];

  printf ("  %d+%d %s: 4 threads sharing one coder\n", gr_coder_k (cg),
          gr_coder_m (cg), code_name (gr_coder_code (cg)));
  for (int i = 0; i < 4; i++) {
    t[i].cr = cr;
    t[i].cg = cg;
    t[i].seed = rnd () | 1;
    t[i].id = i;
    if (pthread_create (&th[i], NULL, thr_main, &t[i]) != 0) {
      FAIL ("pthread_create");
      return;
    }
  }
  for (int i = 0; i < 4; i++)
    pthread_join (th[i], NULL);
}

/* ---- direct batches beside another caller ----------------------------- */

struct shr {
  struct gr_coder *cg;
  const struct batch *good;
  struct batch *b;
  pthread_barrier_t *bar;
};

static void *
shared_main (void *arg)
{
  struct shr *t = arg;
  const int k = gr_coder_k (t->cg), m = gr_coder_m (t->cg), n = k + m;

  for (int round = 0; round < 3; round++) {
    for (size_t st = 0; st < t->b->ns; st++)
      for (int i = k; i < n; i++)
        memset (t->b->blk[st * n + i], 0x5a, t->b->len);
    pthread_barrier_wait (t->bar);
    if (gr_encode (t->cg, t->b->blk, t->b->ns, t->b->len) < 0)
      FAIL ("%d+%d: encode beside another caller failed", k, m);
    else
      batch_cmp (t->good, t->b, k, n, "encode beside another caller", k, m,
                 code_name (gr_coder_code (t->cg)));
  }
  return NULL;
}

/* Two threads encode page-locked batches of 48-64 MiB at once, three
 * times, with the automatic chunk size: the one that starts while the
 * other holds a slot takes the larger chunks of the shared rule (16+16
 * with blocks of 1 MiB + 96 bytes: stripes cut into byte ranges). */
static void
run_shared (const struct gr_backend *ref, const struct gr_backend *gpu)
{
  static const int geo[][3] = { { 16, 16, 4 }, { 8, 8, 6 } };
  const size_t old = gr_gpu_set_chunk (0);
  const unsigned long before = gr_gpu_direct_shared ();
  uint64_t s = rnd () | 1;

  for (int gi = 0; gi < 2; gi++) {
    const int k = geo[gi][0], m = geo[gi][1], n = k + m;
    const size_t ns = (size_t) geo[gi][2];
    const size_t len = gi == 0 ? MiB + 96 : MiB;
    struct gr_coder *cr = NULL, *cg = NULL;
    struct batch good = { 0 }, b[2] = { { 0 }, { 0 } };
    struct shr t[2];
    pthread_t th[2];
    pthread_barrier_t bar;

    printf ("  %d+%d RS: two callers' batches of %zu stripes of %zu bytes "
            "at once\n", k, m, ns, len);
    if (gr_coder_new (&cr, k, m, GR_CODE_RS, ref) < 0 ||
        gr_coder_new (&cg, k, m, GR_CODE_RS, gpu) < 0 ||
        batch_new (&good, ns, n, k, len, 0, 0, &s) < 0 ||
        batch_new (&b[0], ns, n, k, len, 0, 2, &s) < 0 ||
        batch_new (&b[1], ns, n, k, len, 0, 2, &s) < 0 ||
        gr_encode (cr, good.blk, ns, len) < 0) {
      FAIL ("%d+%d: set-up", k, m);
    }
    else {
      pthread_barrier_init (&bar, NULL, 2);
      for (int i = 0; i < 2; i++) {
        batch_copy (&b[i], &good);
        t[i] = (struct shr) { .cg = cg, .good = &good, .b = &b[i],
                              .bar = &bar };
        if (pthread_create (&th[i], NULL, shared_main, &t[i]) != 0) {
          FAIL ("pthread_create");
          exit (1);
        }
      }
      for (int i = 0; i < 2; i++)
        pthread_join (th[i], NULL);
      pthread_barrier_destroy (&bar);
    }
    batch_free (&b[1]);
    batch_free (&b[0]);
    batch_free (&good);
    gr_coder_free (cg);
    gr_coder_free (cr);
  }
  pthread_mutex_lock (&fail_lock);
  test_checks++;
  pthread_mutex_unlock (&fail_lock);
  if (gr_gpu_direct_shared () == before)
    FAIL ("no batch took the shared chunk size in 6 rounds of two callers");
  else
    printf ("  %lu batches took the shared chunk size\n",
            gr_gpu_direct_shared () - before);
  gr_gpu_set_chunk (old);
}

/* ---- main -------------------------------------------------------------- */

/* The whole suite with the engine's current kernels. */
static void
run_suite (const struct gr_backend *ref, const struct gr_backend *gpu)
{
  static const int pairs[][2] = {
    { 1, 1 }, { 2, 1 }, { 4, 2 }, { 6, 3 }, { 10, 4 }, { 16, 4 },
    { 8, 8 }, { 20, 12 }, { 200, 55 },
  };
  static const int quick_pairs[][2] = {
    { 1, 1 }, { 4, 2 }, { 10, 4 }, { 8, 8 }, { 20, 12 },
  };
  static const size_t rs_lens[] = { 1, 13, 4096 + 5, MiB };
  static const size_t crs_lens[] = { 4096, 8192, MiB };
  static const size_t nss[] = { 1, 3, 17 };
  int r, npairs;

  npairs = quick ? (int) (sizeof quick_pairs / sizeof quick_pairs[0])
    : (int) (sizeof pairs / sizeof pairs[0]);
  for (int pi = 0; pi < npairs; pi++) {
    const int k = quick ? quick_pairs[pi][0] : pairs[pi][0];
    const int m = quick ? quick_pairs[pi][1] : pairs[pi][1];

    for (int ci = 0; ci < 2; ci++) {
      const enum gr_code code = ci == 0 ? GR_CODE_RS : GR_CODE_CRS;
      const size_t *lens = ci == 0 ? rs_lens : crs_lens;
      const int nlens = ci == 0 ? 4 : 3;
      /* Reference cost per output byte, to keep the run short. */
      const double ref_cost = ci == 0 ? k : 64.0 * k;
      const double budget = quick ? 2e7 : 4e8;
      struct gr_coder *cr = NULL, *cg = NULL;
      int first = 1, all;

      r = gr_coder_new (&cr, k, m, code, ref);
      if (r == 0)
        r = gr_coder_new (&cg, k, m, code, gpu);
      if (r < 0) {
        FAIL ("coder %d+%d %s: %d", k, m, code_name (code), r);
        gr_coder_free (cr);
        continue;
      }
      for (int li = 0; li < nlens; li++)
        for (int si = 0; si < 3; si++) {
          const size_t len = lens[li], ns = nss[si];
          const double cost = (double) ns * m * len * ref_cost;
          const int misalign = (li + si) % 2 == 0;

          if (quick && (ns > 3 || len >= MiB))
            continue;
          if (!first && cost > budget) {
            printf ("  %d+%d %s: %zu stripes x %zu bytes: left out "
                    "(reference too slow)\n", k, m, code_name (code), ns, len);
            continue;
          }
          /* Every erasure set on one mid-sized case when k + m <= 12. */
          all = k + m <= 12 && si == 1 && li == (ci == 0 ? 2 : 0)
            && (!quick || k + m <= 9);
          if (tier)
            all = 0;
          test_case (cr, cg, ns, len, misalign, 0, all,
                     all ? 0 : tier ? 1 : quick ? 2 : 6);
          first = 0;
        }
      if (k == 4 && m == 2) {   /* page-locked blocks: the direct path */
        const size_t pl = quick ? 256 << 10 : MiB;
        test_case (cr, cg, quick ? 2 : 3, ci == 0 ? pl + 3 : pl, 1, 1, 0, 3);
        /* ... with blocks back to back (merged copies) */
        test_case (cr, cg, quick ? 2 : 3, pl, 0, 2, 0, 3);
        /* ... parity only (an array's write: the request's data, the
         * parity in page-locked scratch): staged up, straight down */
        test_case (cr, cg, quick ? 3 : 5, 65536, 1, 3, 0, 3);
        test_case (cr, cg, 2, ci == 0 ? pl + 3 : pl, 0, 3, 0, 3);
      }
      if (k == 10 && m == 4) {  /* direct path: chunks, 2D copies */
        const size_t old = gr_gpu_set_chunk (0);
        const size_t big = quick ? (256 << 10) + 3 : MiB;

        for (int cv = 0; cv < 2; cv++) {
          /* The default chunk, then one small enough to split every
           * stripe and to cycle through the slot's chunk buffers. */
          gr_gpu_set_chunk (cv ? 256 << 10 : old);
          if (ci == 0) {
            test_case (cr, cg, 3, big, 0, 2, 0, 2);
            test_case (cr, cg, quick ? 5 : 17, 65536 + 5, 0, 2, 0, 2);
            test_case (cr, cg, 2, 65536 + 32, 1, 1, 0, 1);
          }
          else
            test_case (cr, cg, 2, 65536, 0, 2, 0, 2);
        }
        gr_gpu_set_chunk (old);
        test_threads (cr, cg);
      }
      gr_coder_free (cg);
      gr_coder_free (cr);
    }
  }
  /* 8+4 (k + m = 12): every erasure set. */
  if (!quick)
    for (int ci = 0; ci < 2; ci++) {
      const enum gr_code code = ci == 0 ? GR_CODE_RS : GR_CODE_CRS;
      struct gr_coder *cr = NULL, *cg = NULL;

      if (gr_coder_new (&cr, 8, 4, code, ref) < 0 ||
          gr_coder_new (&cg, 8, 4, code, gpu) < 0)
        FAIL ("coder 8+4");
      else
        test_case (cr, cg, 2, ci == 0 ? 4096 + 5 : 4096, 1, 0, 1, 0);
      gr_coder_free (cg);
      gr_coder_free (cr);
    }

}

/* gr_code_many: nops operations of 1 to 3 stripes each, encodes,
 * encodes of 2 parts of the data and reconstructs of 3 erasure sets (so
 * that operations of one set or part are merged), page-locked (1, 2) or not (0) by turns, one in five of len2
 * bytes instead of len (4096: below the direct path); compared with the
 * reference coder's blocks. */
/* pinned_only: every operation's blocks page-locked by the engine
 * (gr_gpu_host_alloc, aligned), and the engine told which submissions
 * to code where their blocks are (gather: GATHER_*): where it does, as
 * the account says, must be `expect` (1: every direct job, 0: none) but
 * none under GATHER_NEVER.  Otherwise a mix of ordinary, page-locked and
 * unaligned memory. */
static void
many_case (struct gr_coder *cr, struct gr_coder *cg, int nops, size_t len,
           size_t len2, int pinned_only, int gather, int expect)
{
  const int k = gr_coder_k (cg), m = gr_coder_m (cg), n = k + m;
  const char *code = code_name (gr_coder_code (cg));
  struct batch good[64], work[64];
  struct gr_code_op ops[64];
  int sets[3][GR_MAX_MEMBERS], nset[3], pfirst[2], pcount[2], r, x;

  if (nops > 64)
    nops = 64;
  struct gr_gpu_many_stats sa, sb;
  const int old_gather = gr_gpu_set_gather (gather);

  printf ("  gr_code_many %d+%d %s: %d operations of %zu bytes (and %zu)%s\n",
          k, m, code, nops, len, len2, !pinned_only ? ""
          : !gather ? ", page-locked, copied"
          : expect ? gather == GATHER_ANY_TABLE
          ? ", page-locked, coded where they are (any table)"
          : ", page-locked, coded where they are"
          : ", page-locked, copied by the engine's rule");
  fflush (stdout);
  memset (good, 0, sizeof good);
  memset (work, 0, sizeof work);
  for (int i = 0; i < 3; i++) {
    nset[i] = 1 + (int) (rnd () % (uint64_t) m);
    random_erasures (n, nset[i], sets[i], &rng);
  }
  for (int i = 0; i < 2; i++) {
    pfirst[i] = (int) (rnd () % (uint64_t) k);
    pcount[i] = 1 + (int) (rnd () % (uint64_t) (k - pfirst[i]));
  }
  for (x = 0; x < nops; x++) {
    const size_t ns = 1 + rnd () % 3, l = x % 5 == 4 ? len2 : len;
    /* 3: an encode; 4: an encode of part of the data, of 2 parts (a
     * parity update's: the other data blocks scribbled on, which it must
     * not read) */
    /* (the first an encode: every submission has one) */
    const int kind = x == 0 ? 3 : (int) (rnd () % 5);
    const int part = (int) (rnd () % 2);
    const int first = pfirst[part], count = pcount[part];

    if (batch_new (&good[x], ns, n, k, l, 0, 0, &rng) < 0 ||
        batch_new (&work[x], ns, n, k, l, !pinned_only && x % 3 == 0,
                   pinned_only ? 1 + x % 2 : x % 3, &rng) < 0) {
      FAIL ("out of memory");
      nops = x + 1;
      goto out;
    }
    ops[x] = (struct gr_code_op) { .blocks = good[x].blk, .nstripes = ns,
                                   .len = l, .first = kind == 4 ? first : 0,
                                   .count = kind == 4 ? count : 0 };
    /* The reference: the ref backend's encode (of part: its updates). */
    if (gr_code_many (cr, &ops[x], 1) < 0) {
      FAIL ("ref encode");
      nops = x + 1;
      goto out;
    }
    batch_copy (&work[x], &good[x]);
    ops[x].blocks = work[x].blk;
    ops[x].erased = kind >= 3 ? NULL : sets[kind];
    ops[x].nerased = kind >= 3 ? 0 : nset[kind];
    for (size_t st = 0; st < ns; st++)
      for (int i = 0; i < n; i++) {
        int out = kind >= 3 && i >= k;

        for (int e = 0; kind < 3 && e < nset[kind]; e++)
          out |= sets[kind][e] == i;
        if (kind == 4 && i < k && (i < first || i >= first + count))
          out = 1;
        if (out)
          fill_r (&rng, work[x].blk[st * n + i], l);
      }
  }
  gr_gpu_many_account (&sa);
  r = gr_code_many (cg, ops, (size_t) nops);
  gr_gpu_many_account (&sb);
  if (r < 0) {
    FAIL ("gr_code_many %d+%d %s: error %d", k, m, code, r);
    goto out;
  }
  if (pinned_only) {
    const unsigned long long g = sb.gathered_jobs - sa.gathered_jobs,
      d = sb.direct_jobs - sa.direct_jobs;
    const bool want = gather && expect && gr_gpu_mapped_ok ();

    if (d == 0 || g != (want ? d : 0))
      FAIL ("gr_code_many %d+%d %s: %llu of %llu direct jobs coded where "
            "their blocks are, not %s (told %s)", k, m, code, g, d,
            want ? "all" : "none", gather ? "to" : "not to");
  }
  for (x = 0; x < nops; x++)
    if (batch_cmp (&good[x], &work[x], ops[x].count ? k : 0, n,
                   ops[x].nerased ? "gr_code_many (reconstruct)"
                   : ops[x].count ? "gr_code_many (encode of part)"
                   : "gr_code_many (encode)", k, m, code) < 0)
      break;
 out:
  for (x = 0; x < nops; x++) {
    batch_free (&good[x]);
    batch_free (&work[x]);
  }
  gr_gpu_set_gather (old_gather);
}

/* Which copies a direct job of gr_code_many gets: an encode of 2 stripes
 * of 64 KiB blocks back to back in one page-locked region (runs of 512
 * KiB: the copy engines), then the same blocks each in its own
 * page-locked allocation (the copy kernel, where the device maps host
 * memory); the parity checked each time. */
static void
mapped_rule_case (struct gr_coder *cr, struct gr_coder *cg)
{
  const int k = gr_coder_k (cg), n = k + gr_coder_m (cg);
  const size_t len = 65536;
  const int old_gather = gr_gpu_set_gather (0);       /* copies */

  for (int pinned = 2; pinned >= 1; pinned--) {
    struct batch good = { 0 }, work = { 0 };
    struct gr_code_op op = { NULL, 0, NULL, 2, len, NULL, 0, 0 };
    struct gr_gpu_many_stats a, b;
    const bool kernel = pinned == 1 && gr_gpu_mapped_ok ();

    if (batch_new (&good, 2, n, k, len, 0, 0, &rng) < 0 ||
        batch_new (&work, 2, n, k, len, 0, pinned, &rng) < 0 ||
        gr_encode (cr, good.blk, 2, len) < 0) {
      FAIL ("copy rule: set-up");
      batch_free (&good);
      batch_free (&work);
      return;
    }
    for (int i = 0; i < 2 * n; i++)
      if (i % n < k)
        memcpy (work.blk[i], good.blk[i], len);
    op.blocks = work.blk;
    gr_gpu_many_account (&a);
    if (gr_code_many (cg, &op, 1) < 0)
      FAIL ("copy rule: gr_code_many (%s)", pinned == 2 ? "one region"
            : "scattered");
    else {
      gr_gpu_many_account (&b);
      batch_cmp (&good, &work, k, n, pinned == 2
                 ? "encode, blocks back to back"
                 : "encode, blocks scattered", k, n - k, "RS");
      CHECK (b.direct_jobs - a.direct_jobs == 1,
             "copy rule: the encode not direct");
      CHECK (b.mapped_jobs - a.mapped_jobs == (kernel ? 1u : 0u),
             "copy rule: blocks %s: %llu jobs by the copy kernel, not %d",
             pinned == 2 ? "back to back" : "scattered",
             b.mapped_jobs - a.mapped_jobs, kernel ? 1 : 0);
    }
    batch_free (&good);
    batch_free (&work);
  }
  gr_gpu_set_gather (old_gather);
}

/* The engine's rule for coding where the blocks are (gather_ok): a table
 * of at most half as many output rows as inputs.  16+16, 3 stripes of
 * 64 KiB blocks page-locked: reconstructs of 8 erased blocks (8 rows of
 * 16 inputs: where they are), of 9 (copied), and an encode (16 rows:
 * copied); each block checked. */
static void
gather_rule_case (struct gr_coder *cr, struct gr_coder *cg)
{
  const int k = gr_coder_k (cg), m = gr_coder_m (cg), n = k + m;
  const size_t len = 65536, ns = 3;
  static const int nes[] = { 8, 9, 0 };        /* 0: an encode */

  for (int t = 0; t < 3; t++) {
    struct batch good = { 0 }, work = { 0 };
    struct gr_code_op op = { .nstripes = ns, .len = len };
    struct gr_gpu_many_stats a, b;
    int er[GR_MAX_MEMBERS];
    const bool want = nes[t] > 0 && 2 * nes[t] <= k && gr_gpu_mapped_ok ();
    char what[64];

    snprintf (what, sizeof what, nes[t] ? "reconstruct of %d (the rule)"
              : "encode (the rule)", nes[t]);
    if (batch_new (&good, ns, n, k, len, 0, 0, &rng) < 0 ||
        batch_new (&work, ns, n, k, len, 0, 1, &rng) < 0 ||
        gr_encode (cr, good.blk, ns, len) < 0) {
      FAIL ("gather rule: set-up");
      batch_free (&good);
      batch_free (&work);
      return;
    }
    batch_copy (&work, &good);
    random_erasures (n, nes[t], er, &rng);
    for (size_t st = 0; st < ns; st++)
      for (int i = 0; i < n; i++) {
        bool out = nes[t] == 0 && i >= k;

        for (int e = 0; e < nes[t]; e++)
          out |= er[e] == i;
        if (out)
          fill_r (&rng, work.blk[st * n + i], len);
      }
    op.blocks = work.blk;
    op.erased = nes[t] ? er : NULL;
    op.nerased = nes[t];
    gr_gpu_many_account (&a);
    if (gr_code_many (cg, &op, 1) < 0)
      FAIL ("gather rule: gr_code_many (%s)", what);
    else {
      gr_gpu_many_account (&b);
      batch_cmp (&good, &work, 0, n, what, k, m, "RS");
      CHECK (b.direct_jobs - a.direct_jobs == 1,
             "gather rule: the %s not direct", what);
      CHECK (b.gathered_jobs - a.gathered_jobs == (want ? 1u : 0u),
             "gather rule: the %s %s where its blocks are", what,
             want ? "not coded" : "coded");
    }
    batch_free (&good);
    batch_free (&work);
  }
}

/* Several operations in one submission: more chunks than a slot has
 * buffers (8+8), blocks wider than a buffer (16+16 with 1 MiB blocks),
 * CRS. */
static void
run_many (const struct gr_backend *ref, const struct gr_backend *gpu)
{
  static const int geo[][3] = { { 8, 8, GR_CODE_RS }, { 10, 4, GR_CODE_CRS },
                                { 16, 16, GR_CODE_RS },
                                { 10, 4, GR_CODE_RS } };

  for (int gi = 0; gi < 4; gi++) {
    const enum gr_code code = (enum gr_code) geo[gi][2];
    struct gr_coder *cr = NULL, *cg = NULL;

    if (gr_coder_new (&cr, geo[gi][0], geo[gi][1], code, ref) < 0 ||
        gr_coder_new (&cg, geo[gi][0], geo[gi][1], code, gpu) < 0)
      FAIL ("coder %d+%d %s", geo[gi][0], geo[gi][1], code_name (code));
    else if (gi < 2) {
      many_case (cr, cg, quick ? 24 : 48, 65536, 4096, 0, GATHER_RULE, 0);
      /* every block page-locked: 8+8's encodes (8 rows of 8 inputs)
       * copied by the rule, coded where the blocks are without it (8
       * rows in one pass); 10+4 CRS where they are (its second pass
       * reads the inputs kept), or copied if told */
      many_case (cr, cg, quick ? 12 : 16, 65536, 4096, 1,
                 gi == 0 ? GATHER_RULE : GATHER_NEVER, gi);
      many_case (cr, cg, quick ? 12 : 16, 65536, 4096, 1,
                 gi == 0 ? GATHER_ANY_TABLE : GATHER_RULE, 1);
      if (gi == 0) {
        /* the copies by the copy engines only, then by the copy
         * kernel only (as the engine chooses them: mapped_rule_case);
         * rows of a length the copy kernel moves byte by byte */
        const int old = gr_gpu_set_mapped (MAPPED_NEVER);

        many_case (cr, cg, quick ? 24 : 48, 65536, 4096, 0, GATHER_NEVER,
                   0);
        gr_gpu_set_mapped (MAPPED_ALWAYS);
        many_case (cr, cg, quick ? 24 : 48, 65536, 4096, 0, GATHER_NEVER,
                   0);
        gr_gpu_set_mapped (old);
        many_case (cr, cg, 12, 65536 + 5, 4096, 0, GATHER_RULE, 0);
        mapped_rule_case (cr, cg);
      }
    }
    else if (gi == 2) {
      many_case (cr, cg, 4, (size_t) 1 << 20, 65536, 0, GATHER_RULE, 0);
      /* page-locked, 48 MiB at most, coded where the blocks are without
       * the rule: the tables of more than 8 rows (encodes, updates,
       * reconstructs of 9 or more) in passes that read the inputs
       * kept */
      many_case (cr, cg, 8, 65536, 4096, 1, GATHER_ANY_TABLE, 1);
      gather_rule_case (cr, cg);
    }
    else {
      /* one pass (4 rows): coded where the blocks are, or copied if
       * told; then more than 64 MiB of blocks (6 operations of 1 to 3
       * stripes of 14 MiB), copied */
      many_case (cr, cg, quick ? 12 : 16, 65536, 4096, 1, GATHER_RULE, 1);
      many_case (cr, cg, quick ? 12 : 16, 65536, 4096, 1, GATHER_NEVER, 1);
      many_case (cr, cg, 6, (size_t) 1 << 20, (size_t) 1 << 20, 1,
                 GATHER_RULE, 0);
    }
    gr_coder_free (cg);
    gr_coder_free (cr);
  }
}

/* A k+m RS coder of each backend and one reference stripe of len-byte
 * blocks, encoded by the reference coder: the set-up of the threaded
 * and forked cases below.  0, or -1 with what was made left to free. */
static int
ref_stripe (const struct gr_backend *ref, const struct gr_backend *gpu,
            int k, int m, size_t len, struct gr_coder **cr,
            struct gr_coder **cg, struct batch *good)
{
  return gr_coder_new (cr, k, m, GR_CODE_RS, ref) < 0 ||
    gr_coder_new (cg, k, m, GR_CODE_RS, gpu) < 0 ||
    batch_new (good, 1, k + m, k, len, 0, 0, &rng) < 0 ||
    gr_encode (*cr, good->blk, 1, len) < 0 ? -1 : 0;
}

/* Decode tables used as soon as they are made, while the link is busy.
 * The array saw it: a degraded read's first chunk (256 KiB of each
 * rebuilt 1 MiB block) wrong, once per server process (the table's
 * pageable upload not yet on the device: gr_gpu_tab_make).  4 threads
 * each rebuild m blocks of a k+m stripe of page-locked 1 MiB blocks,
 * every round with a new erasure set (so a new table), by gr_code_many
 * (the copy kernel's path) and gr_reconstruct (the copy engines') in
 * turn, while a fifth keeps the copy engines busy with encodes of 64 MiB;
 * each rebuilt block must equal the original.  On the H200 before the
 * fix it caught the failure in 2 of 5 runs (1 MiB blocks; 64 KiB blocks,
 * whose one chunk goes up at once, in none of 5), never after. */
#define FRESH_LEN MiB
struct fresh {
  struct gr_coder *cg;
  const struct batch *good;
  uint64_t seed;
  int rounds;
  int *stop;                    /* the busy thread: until set */
};

static void *
fresh_busy (void *arg)
{
  struct fresh *f = arg;
  const int k = gr_coder_k (f->cg), n = k + gr_coder_m (f->cg);
  struct batch b = { 0 };
  uint64_t s = f->seed;

  if (batch_new (&b, 8, n, k, MiB, 0, 2, &s) < 0)
    FAIL ("out of page-locked memory");
  else
    while (!__atomic_load_n (f->stop, __ATOMIC_ACQUIRE))
      if (gr_encode (f->cg, b.blk, 8, MiB) < 0) {
        FAIL ("busy encode failed");
        break;
      }
  batch_free (&b);
  return NULL;
}

static void *
fresh_main (void *arg)
{
  struct fresh *f = arg;
  const int k = gr_coder_k (f->cg), m = gr_coder_m (f->cg), n = k + m;
  const char *code = code_name (gr_coder_code (f->cg));
  struct batch w = { 0 };
  uint64_t s = f->seed;
  int er[GR_MAX_MEMBERS];

  if (batch_new (&w, 1, n, k, FRESH_LEN, 0, 2, &s) < 0) {
    FAIL ("out of page-locked memory");
    batch_free (&w);
    return NULL;
  }
  for (int round = 0; round < f->rounds; round++) {
    const struct gr_code_op op = { .erased = er, .nerased = m,
                                   .blocks = w.blk, .nstripes = 1,
                                   .len = FRESH_LEN };
    int r;

    batch_copy (&w, f->good);
    random_erasures (n, m, er, &s);
    for (int e = 0; e < m; e++)
      fill_r (&s, w.blk[er[e]], FRESH_LEN);
    r = round % 2 ? gr_reconstruct (f->cg, er, m, w.blk, 1, FRESH_LEN)
      : gr_code_many (f->cg, &op, 1);
    if (r < 0)
      FAIL ("fresh table: reconstruct failed: %d", r);
    else if (batch_cmp (f->good, &w, 0, n, round % 2 ? "fresh table, "
                        "gr_reconstruct" : "fresh table, gr_code_many",
                        k, m, code) != 0)
      break;
  }
  batch_free (&w);
  return NULL;
}

static void
run_fresh_tables (const struct gr_backend *ref, const struct gr_backend *gpu)
{
  const int k = 8, m = 8;
  /* (no JIT kernel compiled: the generic kernels read the tables) */
  const size_t jm = gr_gpu_set_jit_min ((size_t) -1);
  struct gr_coder *cr = NULL, *cg = NULL;
  struct batch good = { 0 };
  struct fresh f[5];
  pthread_t th[5];
  int stop = 0, nth = 0;

  printf ("fresh decode tables used at once, the link busy: %d+%d RS, "
          "1 MiB blocks, 4 threads\n", k, m);
  if (ref_stripe (ref, gpu, k, m, FRESH_LEN, &cr, &cg, &good) < 0) {
    FAIL ("fresh tables: set-up");
    goto out;
  }
  for (int i = 0; i < 5; i++) {
    f[i] = (struct fresh) { .cg = cg, .good = &good, .seed = rnd () | 1,
                            .rounds = quick ? 128 : 256, .stop = &stop };
    if (pthread_create (&th[i], NULL, i == 0 ? fresh_busy : fresh_main,
                        &f[i]) != 0) {
      FAIL ("pthread_create");
      break;
    }
    nth++;
  }
  for (int i = 1; i < nth; i++)
    pthread_join (th[i], NULL);
  __atomic_store_n (&stop, 1, __ATOMIC_RELEASE);
  if (nth > 0)
    pthread_join (th[0], NULL);
 out:
  batch_free (&good);
  gr_coder_free (cg);
  gr_coder_free (cr);
  gr_gpu_set_jit_min (jm);
}

/* A server's engine set up before it serves (gr_gpu_coder_prepare):
 * every slot, and the encode kernel compiled once; refused for another
 * backend's coder; then a batch large enough for the compiled kernel
 * codes as the reference does. */
static void
run_prepare (const struct gr_backend *ref, const struct gr_backend *gpu)
{
  const int k = 10, m = 4;
  struct gr_coder *cr = NULL, *cg = NULL;
  int r, compiled = -1, again = -1, built, nslots;

  printf ("the engine set up before serving: %d+%d RS\n", k, m);
  gr_gpu_release ();
  CHECK (gr_gpu_slots_ready () == 0, "slots set up after gr_gpu_release: "
         "%d", gr_gpu_slots_ready ());
  if (gr_coder_new (&cr, k, m, GR_CODE_RS, ref) < 0 ||
      gr_coder_new (&cg, k, m, GR_CODE_RS, gpu) < 0) {
    FAIL ("prepare: coders");
    goto out;
  }
  r = gr_gpu_coder_prepare (cr, &compiled);
  CHECK (r == -EINVAL && compiled == 0, "prepare of a ref coder: %d, "
         "compiled %d", r, compiled);
  CHECK (gr_gpu_slots_ready () == 0, "a refused prepare set up %d slots",
         gr_gpu_slots_ready ());
  built = gr_gpu_jit_built ();
  r = gr_gpu_coder_prepare (cg, &compiled);
  nslots = gr_gpu_slots_ready ();
  CHECK (r == 0, "prepare: %d", r);
  CHECK (nslots == 4, "prepare set up %d slots of 4", nslots);
  CHECK (gr_gpu_jit_built () == built + (compiled == 1),
         "prepare: compiled %d, kernels built %d", compiled,
         gr_gpu_jit_built () - built);
  if (compiled != 1)
    printf ("note: no encode kernel compiled (%s); the generic one runs\n",
            gr_gpu_last_error ());
  r = gr_gpu_coder_prepare (cg, &again);
  CHECK (r == 0 && again == compiled &&
         gr_gpu_jit_built () == built + (compiled == 1),
         "prepare again: %d, compiled %d, kernels built %d", r, again,
         gr_gpu_jit_built () - built);
  /* 64 stripes of 64 KiB blocks: 40 MiB of data, above gr_gpu_jit_min. */
  test_case (cr, cg, 64, 65536, 0, 1, 0, 2);
 out:
  gr_coder_free (cg);
  gr_coder_free (cr);
}

/* The JIT's compiler runs in a forked child (gpu/jit.cu) while ordinary
 * memory is page-locked for the GPU (nbdkit's request buffers).  Shared
 * copy-on-write with the child, such a page would move away from the
 * GPU once the server wrote it; the driver pins them, so the kernel
 * copies them for the child instead.  Here: a malloc'd stripe
 * registered, a fork, the data written after it (the child alive, then
 * gone), encoded straight from and into it (the direct path): parity
 * equal to the reference coder's, data read as written. */
static void
run_fork (const struct gr_backend *ref, const struct gr_backend *gpu)
{
  const int k = 8, m = 8, n = k + m;
  const size_t len = MiB, total = (size_t) n * len;
  struct gr_coder *cr = NULL, *cg = NULL;
  struct batch good = { 0 };
  uint8_t *mem = NULL, *blk[16];

  printf ("page-locked ordinary memory across a fork: 8+8 RS, 1 MiB "
          "blocks\n");
  if (ref_stripe (ref, gpu, k, m, len, &cr, &cg, &good) < 0 ||
      posix_memalign ((void **) &mem, 4096, total) != 0) {
    FAIL ("fork: set-up");
    goto out;
  }
  memset (mem, 0, total);
  if (gr_gpu_host_register (mem, total) < 0) {
    FAIL ("fork: gr_gpu_host_register");
    free (mem);
    mem = NULL;
    goto out;
  }
  gr_gpu_host_in_use (mem, 1);
  for (int i = 0; i < n; i++)
    blk[i] = mem + (size_t) i * len;
  for (int round = 0; round < 2; round++) {
    struct batch w = { .ns = 1, .len = len, .n = n, .k = k, .blk = blk };
    pid_t pid = fork ();

    if (pid == 0) {
      usleep (200000);
      _exit (0);
    }
    if (pid < 0) {
      FAIL ("fork: %s", strerror (errno));
      break;
    }
    if (round == 1)
      waitpid (pid, NULL, 0);
    for (int i = 0; i < n; i++)  /* the server's writes after the fork */
      memcpy (blk[i], i < k ? good.blk[i] : good.blk[(i + 1) % k], len);
    if (gr_encode (cg, blk, 1, len) < 0)
      FAIL ("fork: encode failed");
    else
      batch_cmp (&good, &w, 0, n, round ? "after a fork, the child gone"
                 : "after a fork, the child alive", k, m, "RS");
    if (round == 0)
      waitpid (pid, NULL, 0);
  }
  gr_gpu_host_unregister (mem);
  free (mem);
 out:
  batch_free (&good);
  gr_coder_free (cg);
  gr_coder_free (cr);
}

/* A CUDA call that failed, reported, must not fail the next launch:
 * the runtime keeps a failure as the thread's last error, which the
 * engine reads back after each launch (cudaGetLastError).  Memory never
 * registered is unregistered (an error), then an 8+8 encode by
 * gr_code_many on the engine's own page-locked memory (the copy
 * kernel's launches) must succeed with the reference's parity.  Before
 * the fix it failed: "cudaMemcpyAsync (upload): pointer does not
 * correspond to a registered memory region".  Not inlined: make
 * check-gpu-sanitize knows this failed call on purpose by its frame
 * (gpu/sanitize-report). */
static void __attribute__ ((noinline))
run_stale_error (const struct gr_backend *ref, const struct gr_backend *gpu)
{
  const int k = 8, m = 8, n = k + m;
  const size_t len = (size_t) 64 << 10;
  struct gr_coder *cr = NULL, *cg = NULL;
  struct batch good = { 0 };
  uint8_t *mem = NULL, *blk[16], never[4096];
  struct gr_code_op op = { NULL, 0, blk, 1, len, NULL, 0, 0 };
  int r;

  printf ("a failed CUDA call reported, not left for the next launch\n");
  if (ref_stripe (ref, gpu, k, m, len, &cr, &cg, &good) < 0 ||
      (mem = (uint8_t *) gr_gpu_host_alloc (n * len)) == NULL) {
    FAIL ("stale error: set-up");
    goto out;
  }
  for (int i = 0; i < n; i++) {
    blk[i] = mem + (size_t) i * len;
    if (i < k)
      memcpy (blk[i], good.blk[i], len);
    else
      memset (blk[i], 0x5a, len);
  }
  r = gr_gpu_host_unregister (never);
  CHECK (r == -EIO, "stale error: unregistering memory never registered: "
         "%d, not -EIO", r);
  r = gr_code_many (cg, &op, 1);
  if (r < 0)
    FAIL ("stale error: the encode after it: %d (%s)", r,
          gr_gpu_last_error ());
  else {
    struct batch w = { .ns = 1, .len = len, .n = n, .k = k, .blk = blk };

    batch_cmp (&good, &w, k, n, "encode after a failed call", k, m, "RS");
  }
 out:
  gr_gpu_host_free (mem);
  batch_free (&good);
  gr_coder_free (cg);
  gr_coder_free (cr);
}

/* The engine's list of page-locked ranges (engine.cu, kept in address
 * order): 48 ranges of 64 KiB a page apart, registered in a shuffled
 * order, every third in use, and an allocation of the engine's; spans
 * inside, between and across them; registrations overlapping a listed
 * range refused (-EEXIST), the page between two accepted; every range
 * unregistered in another order (twice: -EIO, a failed call on purpose;
 * not inlined, as run_stale_error).  Then an 8+8 encode
 * by gr_code_many (the copy kernel) whose data blocks run back to back
 * from one registered range into the next: its parity equal to the
 * reference's, and its inputs in one copy. */
#define REG_N 48
#define REG_SZ ((size_t) 64 << 10)
#define REG_STEP (REG_SZ + 4096)

static void __attribute__ ((noinline))
run_reg_list (const struct gr_backend *ref, const struct gr_backend *gpu)
{
  const size_t total = REG_N * REG_STEP;
  uint8_t *mem = NULL, *a, *al;
  int order[REG_N], r;

  printf ("the list of page-locked ranges: %d ranges, lookups, overlaps\n",
          REG_N);
  if (posix_memalign ((void **) &mem, 4096, total) != 0) {
    FAIL ("reg list: out of memory");
    return;
  }
  for (int i = 0; i < REG_N; i++)
    order[i] = i;
  for (int i = REG_N - 1; i > 0; i--) {
    const int j = (int) (rnd () % (uint64_t) (i + 1)), t = order[i];

    order[i] = order[j];
    order[j] = t;
  }
  for (int i = 0; i < REG_N; i++) {
    r = gr_gpu_host_register (mem + order[i] * REG_STEP, REG_SZ);
    CHECK (r == 0, "reg list: register range %d: %d (%s)", order[i], r,
           gr_gpu_last_error ());
  }
  for (int i = 0; i < REG_N; i += 3)
    gr_gpu_host_in_use (mem + i * REG_STEP, 1);
  al = (uint8_t *) gr_gpu_host_alloc (REG_SZ);
  CHECK (al != NULL, "reg list: gr_gpu_host_alloc");
  for (int i = 0; i < REG_N; i++) {
    const int want = i % 3 == 0 ? SPAN_PINNED : SPAN_STAGE;

    a = mem + i * REG_STEP;
    CHECK (gr_gpu_span_state (a, REG_SZ) == want, "reg list: range %d", i);
    CHECK (gr_gpu_span_state (a + 100, 1000) == want,
           "reg list: inside range %d", i);
    CHECK (gr_gpu_span_state (a + REG_SZ - 1, 1) == want,
           "reg list: last byte of range %d", i);
    CHECK (gr_gpu_span_state (a + REG_SZ, 4096) == SPAN_UNKNOWN,
           "reg list: the page after range %d", i);
    CHECK (gr_gpu_span_state (a + REG_SZ - 1, 2) == SPAN_STAGE,
           "reg list: across the end of range %d", i);
    if (i > 0)
      CHECK (gr_gpu_span_state (a - 10, 20) == SPAN_STAGE,
             "reg list: across the start of range %d", i);
    if (i + 1 < REG_N)
      CHECK (gr_gpu_span_state (a + 100, REG_STEP) == SPAN_STAGE,
             "reg list: from range %d into the next", i);
  }
  CHECK (gr_gpu_span_state (mem, total) == SPAN_STAGE, "reg list: all");
  CHECK (al == NULL || gr_gpu_span_state (al + 5, REG_SZ - 5) == SPAN_PINNED,
         "reg list: the engine's allocation");
  r = gr_gpu_host_register (mem + 5 * REG_STEP + 4096, 8192);
  CHECK (r == -EEXIST, "reg list: inside range 5: %d", r);
  r = gr_gpu_host_register (mem + 6 * REG_STEP + REG_SZ, 2 * REG_STEP);
  CHECK (r == -EEXIST, "reg list: over range 7: %d", r);
  r = gr_gpu_host_register (mem + 8 * REG_STEP - 4096, 8192);
  CHECK (r == -EEXIST, "reg list: into range 8: %d", r);
  r = gr_gpu_host_register (mem + 9 * REG_STEP + REG_SZ, 4096);
  CHECK (r == 0, "reg list: the page between 9 and 10: %d (%s)", r,
         gr_gpu_last_error ());
  if (r == 0) {
    gr_gpu_host_in_use (mem + 9 * REG_STEP + REG_SZ, 1);
    CHECK (gr_gpu_span_state (mem + 9 * REG_STEP + REG_SZ, 4096) ==
           SPAN_PINNED, "reg list: the page between, in use");
    CHECK (gr_gpu_host_unregister (mem + 9 * REG_STEP + REG_SZ) == 0,
           "reg list: unregister the page between");
  }
  for (int i = 0; i < REG_N; i++) {
    a = mem + ((i * 7) % REG_N) * REG_STEP;     /* 7 and 48: coprime */
    r = gr_gpu_host_unregister (a);
    CHECK (r == 0, "reg list: unregister %d: %d", (i * 7) % REG_N, r);
    CHECK (gr_gpu_span_state (a, REG_SZ) == SPAN_UNKNOWN,
           "reg list: range %d gone", (i * 7) % REG_N);
  }
  r = gr_gpu_host_unregister (mem);
  CHECK (r == -EIO, "reg list: unregistered twice: %d, not -EIO", r);
  CHECK (gr_gpu_span_state (mem, total) == SPAN_UNKNOWN, "reg list: none");
  gr_gpu_host_free (al);
  free (mem);

  /* The encode across two ranges. */
  {
    const int k = 8, m = 8, n = k + m;
    const size_t len = REG_SZ, half = (size_t) 2 << 20;
    struct gr_coder *cr = NULL, *cg = NULL;
    struct gr_gpu_many_stats s0, s1;
    struct batch good = { 0 };
    uint8_t *blk[32], *region = NULL;
    struct gr_code_op op = { NULL, 0, blk, 2, len, NULL, 0, 0 };
    bool ok = false;
    int mapped, gather;

    if (gr_coder_new (&cr, k, m, GR_CODE_RS, ref) < 0 ||
        gr_coder_new (&cg, k, m, GR_CODE_RS, gpu) < 0 ||
        batch_new (&good, 2, n, k, len, 0, 0, &rng) < 0 ||
        gr_encode (cr, good.blk, 2, len) < 0 ||
        posix_memalign ((void **) &region, 4096, 2 * half) != 0) {
      FAIL ("reg list: encode set-up");
      goto out;
    }
    if (gr_gpu_host_register (region, half) < 0) {
      FAIL ("reg list: register the first half");
      goto out;
    }
    if (gr_gpu_host_register (region + half, half) < 0) {
      FAIL ("reg list: register the second half");
      gr_gpu_host_unregister (region);
      goto out;
    }
    ok = true;
    gr_gpu_host_in_use (region, 1);
    gr_gpu_host_in_use (region + half, 1);
    /* The data of stripe 0 ends where the second range starts, that of
     * stripe 1 starts there; the parity at the first range's start. */
    for (int s = 0; s < 2; s++)
      for (int i = 0; i < n; i++) {
        uint8_t *p = i < k ? region + half - k * len + (s * k + i) * len
          : region + (s * m + i - k) * len;

        blk[s * n + i] = p;
        if (i < k)
          memcpy (p, good.blk[s * n + i], len);
        else
          memset (p, 0xa5, len);
      }
    gr_gpu_many_account (&s0);
    mapped = gr_gpu_set_mapped (MAPPED_ALWAYS); /* runs of 512 KiB */
    gather = gr_gpu_set_gather (0);     /* copies, to count */
    r = gr_code_many (cg, &op, 1);
    gr_gpu_set_mapped (mapped);
    gr_gpu_set_gather (gather);
    gr_gpu_many_account (&s1);
    if (r < 0)
      FAIL ("reg list: gr_code_many across two ranges: %d", r);
    else {
      struct batch w = { .ns = 2, .len = len, .n = n, .k = k, .blk = blk };

      batch_cmp (&good, &w, k, n, "encode across two registered ranges",
                 k, m, "RS");
      CHECK (s1.direct_jobs - s0.direct_jobs == 1,
             "reg list: the encode not direct");
      if (gr_gpu_mapped_ok ())
        CHECK (s1.copies - s0.copies == 2, "reg list: %llu copies, not 2 "
               "(inputs in one, across the ranges; parity in one)",
               s1.copies - s0.copies);
      else
        printf ("  (no copy kernel on this device: copies not counted)\n");
    }
  out:
    if (ok) {
      gr_gpu_host_unregister (region + half);
      gr_gpu_host_unregister (region);
    }
    free (region);
    batch_free (&good);
    gr_coder_free (cg);
    gr_coder_free (cr);
  }
}

/* Reconstructs that rebuild part of their erasures, the others passed as
 * NULL blocks (unavailable, not rebuilt: gf.h), as degraded reads make
 * them: 8+8 RS and 10+4 CRS, 4 stripes of 1 MiB blocks, page-locked (the
 * direct path) and ordinary (staged), by gr_reconstruct and by
 * gr_code_many with checksums (page-locked: the GPU sums): each rebuilt
 * block equals the reference's, the skipped ones are untouched, and the
 * checksums of the survivors and rebuilt blocks are right while the
 * others' are left as they were. */
static void
run_partial (const struct gr_backend *ref, const struct gr_backend *gpu)
{
  static const int geo[][3] = { { 8, 8, GR_CODE_RS }, { 10, 4, GR_CODE_CRS } };
  const size_t ns = 4, len = MiB, nb = len / GR_SUM_BLOCK;

  for (size_t gi = 0; gi < sizeof geo / sizeof geo[0]; gi++)
    for (int pinned = 0; pinned < 2; pinned++) {
      const int k = geo[gi][0], m = geo[gi][1], n = k + m;
      const enum gr_code code = (enum gr_code) geo[gi][2];
      struct gr_coder *cr = NULL, *cg = NULL;
      struct batch good = { 0 }, w = { 0 };
      uint8_t *b[64];
      uint32_t *ck = NULL;
      int er[GR_MAX_MEMBERS], ne = m, surv[GR_MAX_MEMBERS], done = 0;
      bool gone[GR_MAX_MEMBERS] = { false }, want[GR_MAX_MEMBERS];

      if (gr_coder_new (&cr, k, m, code, ref) < 0 ||
          gr_coder_new (&cg, k, m, code, gpu) < 0 ||
          batch_new (&good, ns, n, k, len, 0, 0, &rng) < 0 ||
          batch_new (&w, ns, n, k, len, 0, pinned, &rng) < 0 ||
          gr_encode (cr, good.blk, ns, len) < 0 ||
          (ck = malloc (ns * n * nb * sizeof *ck)) == NULL) {
        FAIL ("partial: set-up");
        goto next;
      }
      /* m lost; those wanted: every other one, the first always. */
      random_erasures (n, ne, er, &rng);
      for (int e = 0; e < ne; e++) {
        gone[er[e]] = true;
        want[er[e]] = e % 2 == 0;
      }
      for (int i = 0, j = 0; i < n && j < k; i++)
        if (!gone[i])
          surv[j++] = i;
      for (int round = 0; round < 2; round++) {
        const struct gr_code_op op = { .erased = er, .nerased = ne,
                                       .blocks = b, .nstripes = ns,
                                       .len = len,
                                       .cksums = pinned ? ck : NULL };
        char what[96];
        int r;

        snprintf (what, sizeof what, "partial reconstruct (%s, %s)",
                  round ? "gr_code_many" : "gr_reconstruct",
                  pinned ? "page-locked" : "ordinary memory");
        batch_copy (&w, &good);
        memcpy (b, w.blk, ns * n * sizeof *b);
        for (size_t x = 0; x < ns * n * nb; x++)
          ck[x] = 0xdeadbeef;
        for (size_t st = 0; st < ns; st++)
          for (int e = 0; e < ne; e++)
            if (want[er[e]])
              fill_r (&rng, w.blk[st * n + er[e]], len);
            else {
              memset (w.blk[st * n + er[e]], 0x5c, len);
              b[st * n + er[e]] = NULL;
            }
        r = round ? gr_code_many (cg, &op, 1)
          : gr_reconstruct (cg, er, ne, b, ns, len);
        if (r < 0) {
          FAIL ("%s %d+%d %s: %d", what, k, m, code_name (code), r);
          continue;
        }
        for (size_t st = 0; st < ns; st++)
          for (int i = 0; i < n; i++) {
            const uint8_t *x = w.blk[st * n + i];
            const bool rebuilt = gone[i] && want[i];
            bool used = rebuilt;

            for (int j = 0; j < k; j++)
              used |= surv[j] == i;
            test_checks++;
            if (gone[i] && !want[i]) {
              for (size_t y = 0; y < len; y++)
                if (x[y] != 0x5c) {
                  FAIL ("%s %d+%d %s: block %d, not to be rebuilt, written "
                        "(stripe %zu byte %zu)", what, k, m,
                        code_name (code), i, st, y);
                  break;
                }
            }
            else if (memcmp (x, good.blk[st * n + i], len) != 0)
              FAIL ("%s %d+%d %s: block %d of stripe %zu wrong", what, k, m,
                    code_name (code), i, st);
            for (size_t t = 0; round && pinned && t < nb; t++) {
              const uint32_t v = ck[(st * n + i) * nb + t];
              const uint32_t e = used ? crc32_iscsi (good.blk[st * n + i]
                                                     + t * GR_SUM_BLOCK,
                                                     GR_SUM_BLOCK, 0)
                : 0xdeadbeef;

              if (v != e) {
                FAIL ("%s %d+%d %s: checksum of block %d of stripe %zu "
                      "(4 KiB block %zu) %08x, want %08x", what, k, m,
                      code_name (code), i, st, t, v, e);
                break;
              }
            }
          }
        done++;
      }
    next:
      printf ("  %d+%d %s, %s: %d reconstructs of %d erased, %d of them "
              "rebuilt\n", k, m, code_name (code),
              pinned ? "page-locked" : "ordinary memory", done, ne,
              (ne + 1) / 2);
      free (ck);
      batch_free (&good);
      batch_free (&w);
      gr_coder_free (cg);
      gr_coder_free (cr);
    }
}

/* The block checksums of encodes and reconstructs in one submission
 * (gr_code_op's cksums): every block's page-locked, so the operations go
 * directly and the GPU computes them (its account says so), for an
 * encode's data and parity as coded, a reconstruct's survivors and
 * rebuilt blocks (the other blocks' values left as they were); an
 * operation without checksums among them; each value ISA-L's
 * crc32_iscsi (block, 4096, 0) of the reference coder's block.  Then the
 * same with unaligned ordinary memory: staged, summed on the CPU by
 * gr_code_many, the same values. */
static void
cksum_case (struct gr_coder *cr, struct gr_coder *cg, int nops, size_t len,
            int pinned, int gather, int expect)
{
  const int k = gr_coder_k (cg), m = gr_coder_m (cg), n = k + m;
  const char *code = code_name (gr_coder_code (cg));
  const size_t nblk = len / GR_SUM_BLOCK;
  struct batch good[16], work[16];
  struct gr_code_op ops[16];
  uint32_t *ck[16];
  int er[16][GR_MAX_MEMBERS];
  bool used[16][GR_MAX_MEMBERS];
  struct gr_gpu_many_stats a, b;
  int x, r, old_gather;

  if (nops > 16)
    nops = 16;
  printf ("  block checksums %d+%d %s: %d encodes and reconstructs of %zu "
          "bytes, %s\n", k, m, code, nops, len,
          !pinned ? "ordinary memory" : !gather ? "page-locked, copied"
          : expect == 1 ? "page-locked, coded where they are"
          : expect == 0 ? "page-locked, copied by the engine's rule"
          : "page-locked");
  fflush (stdout);
  old_gather = gr_gpu_set_gather (gather);
  memset (good, 0, sizeof good);
  memset (work, 0, sizeof work);
  memset (ck, 0, sizeof ck);
  for (x = 0; x < nops; x++) {
    const size_t ns = 1 + rnd () % 3;

    if (batch_new (&good[x], ns, n, k, len, 0, 0, &rng) < 0 ||
        batch_new (&work[x], ns, n, k, len, !pinned, pinned ? 2 : 0,
                   &rng) < 0 ||
        (x % 4 != 3 && (ck[x] = malloc (ns * n * nblk * 4)) == NULL)) {
      FAIL ("out of memory");
      nops = x + 1;
      goto out;
    }
    for (size_t v = 0; ck[x] && v < ns * n * nblk; v++)
      ck[x][v] = 0xdeadbeefu;
    if (gr_encode (cr, good[x].blk, ns, len) < 0) {
      FAIL ("ref encode");
      nops = x + 1;
      goto out;
    }
    batch_copy (&work[x], &good[x]);
    ops[x] = (struct gr_code_op) { .blocks = work[x].blk, .nstripes = ns,
                                   .len = len, .cksums = ck[x] };
    for (int i = 0; i < n; i++)
      used[x][i] = x % 3 != 1;
    if (x % 3 == 1) {           /* a reconstruct of 1 to m blocks */
      bool lost[GR_MAX_MEMBERS] = { false };
      int surv[GR_MAX_MEMBERS], erl[GR_MAX_MEMBERS], ne;

      ops[x].nerased = 1 + (int) (rnd () % (unsigned) m);
      for (int e = 0; e < ops[x].nerased; e++) {
        int i;

        do
          i = (int) (rnd () % (unsigned) n);
        while (lost[i]);
        lost[i] = true;
        er[x][e] = i;
      }
      ops[x].erased = er[x];
      ne = gr_reconstruct_choose (k, m, lost, lost, erl, surv);
      for (int i = 0; i < k; i++)
        used[x][surv[i]] = true;
      for (int e = 0; e < ne; e++)
        used[x][erl[e]] = true;
    }
    /* The outputs spoiled: an encode's parity, a reconstruct's lost. */
    for (size_t st = 0; st < ns; st++) {
      for (int i = k; i < n && ops[x].nerased == 0; i++)
        fill_r (&rng, work[x].blk[st * n + i], len);
      for (int e = 0; e < ops[x].nerased; e++)
        fill_r (&rng, work[x].blk[st * n + er[x][e]], len);
    }
  }
  gr_gpu_many_account (&a);
  r = gr_code_many (cg, ops, (size_t) nops);
  gr_gpu_many_account (&b);
  if (r < 0) {
    FAIL ("gr_code_many %d+%d %s with checksums: error %d", k, m, code, r);
    goto out;
  }
  /* Page-locked by the engine, where the device maps it: coded where the
   * blocks are, every job, where expected (1) and told to; none where
   * not expected (0) or told not to; either where expect is -1. */
  if (pinned && (expect >= 0 || !gather)) {
    const unsigned long long g = b.gathered_jobs - a.gathered_jobs,
      d = b.direct_jobs - a.direct_jobs;
    const bool want = gather && expect == 1 && gr_gpu_mapped_ok ();

    if (g != (want ? d : 0))
      FAIL ("%d+%d %s: %llu of %llu direct jobs coded where their blocks "
            "are, not %s (told %s)", k, m, code, g, d, want ? "all" : "none",
            gather ? "to" : "not to");
  }
  if (pinned && b.summed_jobs == a.summed_jobs)
    FAIL ("%d+%d %s: page-locked encodes' checksums not computed on the "
          "GPU", k, m, code);
  /* The first two operations: an encode and a reconstruct, each a job
   * of its own, both with checksums. */
  if (pinned && nops >= 2 && b.summed_jobs - a.summed_jobs < 2)
    FAIL ("%d+%d %s: page-locked reconstructs' checksums not computed on "
          "the GPU (%llu jobs summed)", k, m, code,
          (unsigned long long) (b.summed_jobs - a.summed_jobs));
  if (!pinned && b.summed_jobs != a.summed_jobs)
    FAIL ("%d+%d %s: staged encodes' checksums counted as the GPU's", k, m,
          code);
  for (x = 0; x < nops; x++) {
    if (batch_cmp (&good[x], &work[x], 0, n, ops[x].nerased
                   ? "gr_code_many (reconstruct, checksums)"
                   : "gr_code_many (encode, checksums)", k, m, code) < 0)
      break;
    for (size_t st = 0; ck[x] && st < good[x].ns; st++)
      for (int i = 0; i < n; i++)
        for (size_t t = 0; t < nblk; t++) {
          const uint32_t want = !used[x][i] ? 0xdeadbeefu :
            crc32_iscsi (good[x].blk[st * n + i] + t * GR_SUM_BLOCK,
                         GR_SUM_BLOCK, 0);
          const uint32_t got = ck[x][(st * n + i) * nblk + t];

          if (got != want) {
            FAIL ("%d+%d %s: operation %d (%s), stripe %zu, block %d (%s), "
                  "checksum %zu: %08x, not %08x", k, m, code, x,
                  ops[x].nerased ? "reconstruct" : "encode", st, i,
                  used[x][i] ? "coded" : "not used", t, got, want);
            goto out;
          }
        }
  }
 out:
  for (x = 0; x < nops; x++) {
    batch_free (&good[x]);
    batch_free (&work[x]);
    free (ck[x]);
  }
  gr_gpu_set_gather (old_gather);
}

static void
run_cksums (const struct gr_backend *ref, const struct gr_backend *gpu)
{
  /* operations, how the engine is told to choose (GATHER_*), and
   * whether it codes them where the blocks are (1: CRS in passes that
   * read the inputs kept, 16+16 without the rule likewise; 48 MiB at
   * most), not (0: 8+8's encodes by the rule, 16+16's 1 MiB blocks more
   * than 64 MiB a submission), or either (-1: 6+3's may be more than 64
   * MiB) */
  static const int geo[][7] = {
    { 8, 8, GR_CODE_RS, 65536, 12, GATHER_RULE, 0 },
    { 10, 4, GR_CODE_CRS, 65536, 12, GATHER_RULE, 1 },
    { 16, 16, GR_CODE_RS, 1 << 20, 3, GATHER_RULE, 0 },
    { 16, 16, GR_CODE_RS, 65536, 8, GATHER_ANY_TABLE, 1 },
    { 6, 3, GR_CODE_RS, 1 << 18, 12, GATHER_RULE, -1 },
    { 10, 4, GR_CODE_RS, 65536, 12, GATHER_RULE, 1 } };

  for (int gi = 0; gi < 6; gi++) {
    const enum gr_code code = (enum gr_code) geo[gi][2];
    struct gr_coder *cr = NULL, *cg = NULL;

    if (gr_coder_new (&cr, geo[gi][0], geo[gi][1], code, ref) < 0 ||
        gr_coder_new (&cg, geo[gi][0], geo[gi][1], code, gpu) < 0)
      FAIL ("coder %d+%d %s", geo[gi][0], geo[gi][1], code_name (code));
    else {
      cksum_case (cr, cg, geo[gi][4], (size_t) geo[gi][3], 1, geo[gi][5],
                  geo[gi][6]);
      cksum_case (cr, cg, geo[gi][4], (size_t) geo[gi][3], 1, GATHER_NEVER,
                  geo[gi][6]);
      cksum_case (cr, cg, 4, (size_t) geo[gi][3], 0, GATHER_RULE,
                  geo[gi][6]);
    }
    gr_coder_free (cg);
    gr_coder_free (cr);
  }
}

/* 16+16 (the heaviest JIT kernels, staged by default): encode and
 * reconstruct, RS and CRS, a few lengths and batch sizes; and 12+16 RS,
 * whose staged kernel has more output blocks than input slots and so
 * stores its outputs by the loop in two rounds (gpu/jit.cu,
 * emit_stage_out). */
static void
run_16_16 (const struct gr_backend *ref, const struct gr_backend *gpu)
{
  /* Each erasure set costs a compile: few of them. */
  static const struct {
    int k, m;
    enum gr_code code;
    size_t ns, len;             /* test_case's stripes and length */
    int misalign;
  } cs[] = {
    { 16, 16, GR_CODE_RS, 1, 4096 + 5, 1 },
    { 16, 16, GR_CODE_RS, 3, 65536 + 13, 0 },
    { 16, 16, GR_CODE_CRS, 3, 4096, 1 },
    { 12, 16, GR_CODE_RS, 3, 65536 + 13, 0 },
  };
  struct gr_coder *cr = NULL, *cg = NULL;
  bool ok = false;

  for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
    if (i == 0 || cs[i].k != cs[i - 1].k || cs[i].m != cs[i - 1].m ||
        cs[i].code != cs[i - 1].code) {
      gr_coder_free (cg);
      gr_coder_free (cr);
      cr = cg = NULL;
      ok = gr_coder_new (&cr, cs[i].k, cs[i].m, cs[i].code, ref) >= 0 &&
        gr_coder_new (&cg, cs[i].k, cs[i].m, cs[i].code, gpu) >= 0;
      if (!ok)
        FAIL ("coder %d+%d %s", cs[i].k, cs[i].m, code_name (cs[i].code));
    }
    if (ok)
      test_case (cr, cg, cs[i].ns, cs[i].len, cs[i].misalign, 0, 0, 1);
  }
  gr_coder_free (cg);
  gr_coder_free (cr);
}

/* Big launches: page-locked batches back to back in one chunk of up to
 * 64 MiB, 16+16 RS with blocks of 1 MiB + 96 bytes (a last partial group
 * of RS items in every block) and 10+4 CRS with 1 MiB blocks; one random
 * erasure set each. */
static void
run_big (const struct gr_backend *ref, const struct gr_backend *gpu)
{
  static const int geo[][3] = { { 16, 16, GR_CODE_RS }, { 10, 4, GR_CODE_CRS } };
  const size_t old = gr_gpu_set_chunk ((size_t) 64 << 20);

  for (int gi = 0; gi < 2; gi++) {
    const enum gr_code code = (enum gr_code) geo[gi][2];
    struct gr_coder *cr = NULL, *cg = NULL;

    if (gr_coder_new (&cr, geo[gi][0], geo[gi][1], code, ref) < 0 ||
        gr_coder_new (&cg, geo[gi][0], geo[gi][1], code, gpu) < 0)
      FAIL ("coder %d+%d %s", geo[gi][0], geo[gi][1], code_name (code));
    else if (code == GR_CODE_RS)
      test_case (cr, cg, 3, ((size_t) 1 << 20) + 96, 0, 2, 0, 1);
    else
      test_case (cr, cg, 6, (size_t) 1 << 20, 0, 2, 0, 1);
    gr_coder_free (cg);
    gr_coder_free (cr);
  }
  gr_gpu_set_chunk (old);
}

/* The JIT kernels of the default form: reduced set, 16+16, big
 * launches. */
static void
run_jit_default (const struct gr_backend *ref, const struct gr_backend *gpu)
{
  printf ("kernels: JIT XOR networks on every batch, default form, reduced "
          "set, 16+16 and big launches\n");
  run_suite (ref, gpu);
  run_16_16 (ref, gpu);
  run_big (ref, gpu);
}

/* The unstaged plain form: in passes of 2 output blocks, and in one pass
 * on 16+16. */
static void
run_jit_plain (const struct gr_backend *ref, const struct gr_backend *gpu)
{
  {
    const int pr = gr_gpu_set_jit_passrows (2);
    /* The forms the defaults left: right shifts by SHF, rows as C
     * XORs. */
    const int plain[3] = { 0, 0, 0 };
    int old[3];

    gr_gpu_set_jit_form (plain, old);
    printf ("kernels: JIT XOR networks in passes of 2 output blocks, "
            "plain form (SHF, C XORs), reduced set\n");
    run_suite (ref, gpu);
    gr_gpu_set_jit_passrows (pr);
    printf ("kernels: JIT XOR networks, plain form, 16+16\n");
    run_16_16 (ref, gpu);
    gr_gpu_set_jit_form (old, NULL);
  }
}

/* Host-to-host copies by the GPU (gr_gpu_host_copy): rows from an
 * allocation of the engine's into a registered range in use, at
 * addresses 16 bytes past a page as nbdkit's request buffers lie and at
 * odd ones, lengths from one byte to 1 MiB; bytes around each row left
 * as they were; -EAGAIN (nothing copied) where an end lies in memory
 * the engine does not copy directly: a range not in use, plain memory. */
static void
run_host_copy (void)
{
  const size_t SZ = (size_t) 4 << 20;
  static const size_t lens[] = { 1, 13, 4096, 4111, 65536, 524288, 1048576,
                                 200000 };
  const size_t nl = sizeof lens / sizeof lens[0];
  struct gr_gpu_host_row rows[8];
  struct gr_gpu_host_copy_stats st0, st1;
  uint8_t *src = gr_gpu_host_alloc (SZ), *dst = NULL, *plain = NULL;
  size_t at = 16, i, bad = 0;
  int r;

  printf ("host-to-host copies by the GPU\n");
  if (src == NULL || posix_memalign ((void **) &dst, 4096, SZ) != 0 ||
      posix_memalign ((void **) &plain, 4096, SZ) != 0) {
    FAIL ("host copy: out of memory");
    goto out;
  }
  for (i = 0; i < SZ; i++) {
    src[i] = (uint8_t) (test_rand () >> 7);
    dst[i] = plain[i] = 0x5a;
  }
  if ((r = gr_gpu_host_register (dst, SZ)) < 0) {
    FAIL ("host copy: gr_gpu_host_register: %d (%s)", r,
          gr_gpu_last_error ());
    goto out;
  }
  /* Not in use yet: refused, nothing written. */
  rows[0] = (struct gr_gpu_host_row) { dst + 16, src, 65536 };
  r = gr_gpu_host_copy (rows, 1);
  CHECK (r == -EAGAIN, "host copy into a range not in use: %d", r);
  rows[0].dst = plain + 16;
  r = gr_gpu_host_copy (rows, 1);
  CHECK (r == -EAGAIN, "host copy into plain memory: %d", r);
  rows[0] = (struct gr_gpu_host_row) { dst + 16, plain, 65536 };
  gr_gpu_host_in_use (dst, 1);
  r = gr_gpu_host_copy (rows, 1);
  CHECK (r == -EAGAIN, "host copy from plain memory: %d", r);
  for (i = 0; i < SZ; i++)
    bad += dst[i] != 0x5a || plain[i] != 0x5a;
  CHECK (bad == 0, "refused host copies wrote %zu bytes", bad);

  gr_gpu_host_copy_account (&st0);
  for (i = 0; i < nl; i++) {
    rows[i] = (struct gr_gpu_host_row) { dst + at, src + (i * 7919) % 4096,
                                         lens[i] };
    at += lens[i] + 16 + i;     /* gaps: bytes to leave alone */
  }
  CHECK (at < SZ, "host copy: layout");
  r = gr_gpu_host_copy (rows, nl);
  CHECK (r == 0, "host copy: %d (%s)", r, gr_gpu_last_error ());
  for (i = 0, bad = 0; i < nl && r == 0; i++)
    bad += memcmp (rows[i].dst, rows[i].src, rows[i].len) != 0;
  CHECK (bad == 0, "host copy: %zu rows differ", bad);
  for (i = 0, at = 16, bad = 0; i < nl; i++) {
    for (size_t j = at - 16; j < at; j++)
      bad += dst[j] != 0x5a;
    at += lens[i] + 16 + i;
  }
  for (size_t j = at - 16; j < SZ; j++)
    bad += dst[j] != 0x5a;
  CHECK (bad == 0, "host copy wrote %zu bytes outside its rows", bad);
  gr_gpu_host_copy_account (&st1);
  CHECK (st1.calls == st0.calls + 1 && st1.rows == st0.rows + nl,
         "host copy account: %llu calls, %llu rows (before %llu, %llu)",
         st1.calls, st1.rows, st0.calls, st0.rows);
  gr_gpu_host_in_use (dst, 0);
  r = gr_gpu_host_unregister (dst);
  CHECK (r == 0, "host copy: unregister: %d", r);
 out:
  gr_gpu_host_free (src);
  free (dst);
  free (plain);
}

int
main (void)
{
  const struct gr_backend *ref, *gpu;
  const char *part = getenv ("TEST_GPU_PART");
  char name[256];
  int r;

  /* Line by line, so that a run stopped by a time limit (a sanitizer's
   * can take minutes) shows how far it got. */
  setvbuf (stdout, NULL, _IOLBF, 0);
  quick = test_quick ();
  if (gr_gpu_probe_device (0, name, sizeof name) < 0) {
    char why[300];

    snprintf (why, sizeof why, "no usable CUDA device (%s)", name);
    test_skip ("test-gpu", why);
  }
  printf ("device 0: %s\n", name);
  test_seed ("test-gpu");
  rng = test_rand () | 1;
  if (quick)
    printf ("QUICK=1\n");

  r = gr_backend_register (gr_gpu_backend ());
  if (r < 0 && r != -EEXIST) {
    printf ("FAIL: gr_backend_register: %d\n", r);
    return 1;
  }
  ref = gr_backend_find ("ref");
  gpu = gr_backend_find ("cuda");
  if (ref == NULL || gpu == NULL || gr_backend_probe (gpu) != 0) {
    printf ("FAIL: backends ref=%p cuda=%p, cuda probe %d (%s)\n",
            (void *) ref, (void *) gpu,
            gpu ? gr_backend_probe (gpu) : -1, gr_gpu_last_error ());
    return 1;
  }
  if (strcmp (gr_gpu_last_error (), "") != 0)
    printf ("note: last error before tests: %s\n", gr_gpu_last_error ());

  if (part == NULL || *part == '\0')
    part = "tier";
  if (strcmp (part, "tier") && strcmp (part, "default") &&
      strcmp (part, "jit") && strcmp (part, "plain") &&
      strcmp (part, "stage") && strcmp (part, "all") &&
      strcmp (part, "many")) {
    printf ("FAIL: TEST_GPU_PART=%s: tier, default, jit, plain, stage, many "
            "or all\n", part);
    return 1;
  }
  printf ("TEST_GPU_PART=%s\n", part);
  if (strcmp (part, "many") == 0) {
    quick = 1;
    run_reg_list (ref, gpu);
    printf ("several operations in one submission\n");
    run_many (ref, gpu);
    printf ("block checksums of encodes and reconstructs\n");
    run_cksums (ref, gpu);
    gr_gpu_release ();
    return test_done ("test-gpu");
  }
  tier = strcmp (part, "tier") == 0;
  if (strcmp (part, "all") == 0)
    part = NULL;
  if (tier)
    quick = 1;
  if (!part || tier || strcmp (part, "default") == 0) {
    /* First, while the process has made no table yet: the failure
     * showed once per process. */
    run_fresh_tables (ref, gpu);
    run_fork (ref, gpu);
    run_stale_error (ref, gpu);
    run_reg_list (ref, gpu);
    run_host_copy ();
    run_prepare (ref, gpu);
    printf ("kernels: default\n");
    run_suite (ref, gpu);
    printf ("several operations in one submission\n");
    run_many (ref, gpu);
    printf ("block checksums of encodes and reconstructs\n");
    run_cksums (ref, gpu);
    printf ("reconstructs that rebuild part of their erasures\n");
    run_partial (ref, gpu);
    printf ("direct batches beside another caller\n");
    run_shared (ref, gpu);
  }
  /* The run-time compiled XOR networks on every batch, reduced. */
  if (!part || strcmp (part, "default") != 0) {
    const int save = quick;
    const size_t jm = gr_gpu_set_jit_min (0);
    const int before = gr_gpu_jit_built ();
    const int as = gr_gpu_set_jit_async (0);     /* compile before use */

    quick = 1;
    if (!part || tier || strcmp (part, "jit") == 0)
      run_jit_default (ref, gpu);
    if (!part || strcmp (part, "plain") == 0)
      run_jit_plain (ref, gpu);
    if (!part || strcmp (part, "stage") == 0) {
      const int f[3] = { 1, 0, -1 };
      int saved[3];

      gr_gpu_set_jit_form (f, saved);
      printf ("kernels: JIT XOR networks with inputs staged in shared "
              "memory (per item, right shifts by SHF), reduced set, "
              "16+16 and big launches\n");
      run_suite (ref, gpu);
      run_16_16 (ref, gpu);
      run_big (ref, gpu);
      gr_gpu_set_jit_form (saved, NULL);
    }
    gr_gpu_set_jit_min (jm);
    gr_gpu_set_jit_async (as);
    if (gr_gpu_jit_built () == before)
      printf ("note: no JIT kernel could be built (%s); the generic "
              "kernels were tested instead\n", gr_gpu_last_error ());
    else
      printf ("%d JIT kernels built and tested\n",
              gr_gpu_jit_built () - before);
    quick = save;
  }
  gr_gpu_release ();

  return test_done ("test-gpu");
}

#endif /* GR_HAVE_CUDA */
