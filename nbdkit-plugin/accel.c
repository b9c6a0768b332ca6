/* gpuraid - where each coding operation runs (accel=auto|cpu|gpu).
 *
 * accel=cpu: always the CPU coder.  accel=gpu (or backend=cuda): every
 * operation on the GPU.  accel=auto with a usable GPU: at start-up the
 * plugin measures, for each kind of operation, one call on the CPU coder
 * and one on the GPU coder at a range of sizes, in the buffers the data
 * paths use (gr_accel_calibrate); from then on an operation goes to the
 * GPU only if it is at least as large as the smallest size from which
 * the GPU was measured at least 10 % faster than the CPU, and only while
 * fewer than GPU_MAX_INFLIGHT such operations are on the GPU: under load
 * the rest spill to the CPU cores, so the GPU adds to them.  The measurements and the
 * decision are logged (nbdkit -v).  The GPU's results are also compared
 * with the CPU's there: a GPU that computes different bytes is not used.
 *
 * This file also holds the bounded pool of page-locked memory that the
 * data paths' scratch buffers come from when the GPU is in use. */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "gpuraid-internal.h"

#define MiB ((size_t) 1 << 20)
#define HOST_POOL_MAX (1024 * MiB)      /* all page-locked scratch */
#define HOST_ALLOC_MAX (64 * MiB)       /* one page-locked buffer */
#define CAL_MAX_DATA (16 * MiB)         /* largest call measured */
#define CAL_MAX_BLOCK (4 * MiB)
#define CAL_MIN_BLOCK 4096
/* The GPU must be this much faster per call to be used: it measured
 * alone, while under load the GPU path shares PCIe and the engine's
 * streams and the CPU path scales with the cores; and on the H200 a
 * near-tie flipped between two starts (8+8, 8 lost, 512K: 81/89 us,
 * then 95/91). */
#define CAL_MARGIN 0.9

/* Data bytes per call from which the GPU is used, per kind (SIZE_MAX:
 * never).  Written once by gr_accel_calibrate before any request. */
enum cal_kind { CAL_ENCODE, CAL_RECON_ONE, CAL_RECON_ALL, CAL_UPDATE,
                CAL_NKINDS };
static size_t gpu_min[CAL_NKINDS] = { SIZE_MAX, SIZE_MAX, SIZE_MAX,
                                      SIZE_MAX };

bool
gr_accel_gpu_usable (void)
{
  return gr_a.coder != gr_a.cpu_coder &&
    !__atomic_load_n (&gr_a.gpu_fallen_back, __ATOMIC_ACQUIRE);
}

bool
gr_accel_gpu (enum gr_op op, size_t bytes, int nerased)
{
  enum cal_kind kind;

  if (!gr_accel_gpu_usable ())
    return false;
  if (gr_a.gpu_all)
    return true;
  switch (op) {
  case GR_OP_ENCODE: kind = CAL_ENCODE; break;
  case GR_OP_UPDATE: kind = CAL_UPDATE; break;
  default:
    /* Measured with 1 and with m blocks lost: the nearer one. */
    kind = 2 * nerased > 1 + gr_a.geom.m ? CAL_RECON_ALL : CAL_RECON_ONE;
  }
  return bytes >= gpu_min[kind];
}

/* Under accel=auto, at most this many operations on the GPU at once
 * (writers inside the group commit count one each); more would wait
 * there for the engine's streams (or for a group-commit leader copying
 * its whole batch through staging) while CPU cores are free, so they run
 * on the CPU instead ("spill").  The GPU then adds to the CPU under load
 * instead of becoming a queue.  Measured on the H200: 8+8 arrays with
 * 1 MiB chunks wrote 31 % slower than on the CPU when every writer's
 * 8 MiB encode joined the group commit. */
#define GPU_MAX_INFLIGHT 2

static int inflight;                    /* atomic */
static uint64_t ops_gpu, ops_spilled;   /* atomic */

bool
gr_accel_claim (void)
{
  if (!gr_accel_gpu_usable ())
    return false;
  if (__atomic_add_fetch (&inflight, 1, __ATOMIC_ACQ_REL) >
      GPU_MAX_INFLIGHT && !gr_a.gpu_all) {
    __atomic_sub_fetch (&inflight, 1, __ATOMIC_ACQ_REL);
    __atomic_add_fetch (&ops_spilled, 1, __ATOMIC_RELAXED);
    return false;
  }
  __atomic_add_fetch (&ops_gpu, 1, __ATOMIC_RELAXED);
  return true;
}

void
gr_accel_release (void)
{
  __atomic_sub_fetch (&inflight, 1, __ATOMIC_ACQ_REL);
}

void
gr_accel_stats (void)
{
  if (gr_a.coder == gr_a.cpu_coder)
    return;
  nbdkit_debug ("gpuraid: coding operations on the GPU: %" PRIu64 "; sent "
                "to the CPU because %d were already on the GPU: %" PRIu64,
                __atomic_load_n (&ops_gpu, __ATOMIC_RELAXED),
                GPU_MAX_INFLIGHT,
                __atomic_load_n (&ops_spilled, __ATOMIC_RELAXED));
}

void
gr_accel_failed (const char *op, int r)
{
  if (!__atomic_exchange_n (&gr_a.gpu_fallen_back, 1, __ATOMIC_ACQ_REL))
    nbdkit_error ("GPU %s failed: %s; redoing it and all later coding on "
                  "the CPU backend %s", op, strerror (-r),
                  gr_backend_name (gr_coder_backend (gr_a.cpu_coder)));
}

/* --- page-locked scratch -------------------------------------------------- */

static size_t pool_used;                /* atomic */
static int pool_off;                    /* atomic: an allocation failed */

bool
gr_host_alloc_wanted (size_t size)
{
  return gr_a.host_alloc != NULL && gr_accel_gpu_usable () &&
    !__atomic_load_n (&pool_off, __ATOMIC_RELAXED) &&
    size <= HOST_ALLOC_MAX &&
    __atomic_load_n (&pool_used, __ATOMIC_RELAXED) + size <= HOST_POOL_MAX;
}

void *
gr_host_alloc (size_t size)
{
  void *p;

  if (!gr_host_alloc_wanted (size))
    return NULL;
  if (__atomic_add_fetch (&pool_used, size, __ATOMIC_RELAXED) >
      HOST_POOL_MAX) {
    __atomic_sub_fetch (&pool_used, size, __ATOMIC_RELAXED);
    return NULL;
  }
  p = gr_a.host_alloc (size);
  if (p == NULL) {
    __atomic_sub_fetch (&pool_used, size, __ATOMIC_RELAXED);
    if (!__atomic_exchange_n (&pool_off, 1, __ATOMIC_RELAXED))
      nbdkit_debug ("gpuraid: no page-locked memory for scratch (%zu bytes):"
                    " using ordinary memory, which the GPU engine stages",
                    size);
  }
  return p;
}

void
gr_host_free (void *p, size_t size)
{
  if (p) {
    gr_a.host_free (p);
    __atomic_sub_fetch (&pool_used, size, __ATOMIC_RELAXED);
  }
}

/* --- calibration ---------------------------------------------------------- */

struct cal {
  int k, m, n;
  int kind, nerased;
  size_t L;
  uint8_t *req;         /* k blocks: stands for a request buffer */
  uint8_t *pg;          /* n + m blocks of ordinary scratch */
  uint8_t *pin;         /* n + m blocks of page-locked scratch (or not) */
  bool pinned;          /* pin is from gr_a.host_alloc */
};

static double
now (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Lay out n + m blocks of length c->L for the CPU path (data in the
 * request buffer, the rest in scratch) or the GPU path (all in the
 * page-locked scratch). */
static void
cal_blocks (const struct cal *c, bool gpu, uint8_t **blk)
{
  int i;

  for (i = 0; i < c->n + c->m; i++) {
    if (gpu)
      blk[i] = c->pin + (size_t) i * c->L;
    else if (i < c->k && c->kind != CAL_UPDATE)
      blk[i] = c->req + (size_t) i * c->L;
    else
      blk[i] = c->pg + (size_t) i * c->L;
  }
}

/* One operation of c's kind on the path gpu, as the data paths do it. */
static int
cal_op (const struct cal *c, bool gpu)
{
  uint8_t *blk[2 * GR_MAX_MEMBERS];
  int erased[GR_MAX_MEMBERS], i, r;

  cal_blocks (c, gpu, blk);
  switch (c->kind) {
  case CAL_ENCODE:
    /* Data from the request buffer, parity into scratch. */
    if (gpu)
      for (i = 0; i < c->k; i++)
        blk[i] = c->req + (size_t) i * c->L;
    return gr_code_encode (gpu, blk, 1, c->L);
  case CAL_UPDATE:
    /* Delta and parity in scratch. */
    return gr_code_update (gpu, 0, blk[0], &blk[c->k], &blk[c->n], c->L);
  default:
    for (i = 0; i < c->nerased; i++)
      erased[i] = i;
    r = gr_code_reconstruct (gpu, erased, c->nerased, blk, c->L);
    /* The GPU path reads every chunk into scratch and copies the
     * request's part out. */
    if (r == 0 && gpu)
      memcpy (c->req, c->pin, (size_t) c->k * c->L);
    return r;
  }
}

/* Best time of a few calls, or a negative value on error. */
static double
cal_time (const struct cal *c, bool gpu)
{
  int reps = c->L <= 256 * 1024 ? 7 : 3, i;
  double best = 1e9;

  if (cal_op (c, gpu) == -1)            /* warm up: plans, tables */
    return -1;
  for (i = 0; i < reps; i++) {
    double t0 = now ();

    if (cal_op (c, gpu) == -1)
      return -1;
    t0 = now () - t0;
    if (t0 < best)
      best = t0;
  }
  return best;
}

static void
fmt_size (char *buf, size_t len, size_t bytes)
{
  if (bytes == SIZE_MAX)
    snprintf (buf, len, "never");
  else if (bytes >= MiB && bytes % MiB == 0)
    snprintf (buf, len, "%zuM", bytes / MiB);
  else if (bytes >= MiB)
    snprintf (buf, len, "%.1fM", (double) bytes / MiB);
  else
    snprintf (buf, len, "%zuK", bytes / 1024);
}

/* Data bytes of one call of c's kind. */
static size_t
cal_bytes (const struct cal *c)
{
  return c->kind == CAL_UPDATE ? c->L : (size_t) c->k * c->L;
}

/* Measure one kind over block lengths lm .. lmax, set gpu_min[kind] and
 * log.  -1 if the GPU failed or gave different bytes (already logged). */
static int
cal_kind (struct cal *c, const char *what, size_t lmin, size_t lmax)
{
  char line[2048], a[32];
  size_t at = 0, from = SIZE_MAX;
  bool all_above = true;
  size_t Ls[32];
  double tc[32], tg[32];
  int nl = 0, i;

  for (c->L = lmin; c->L <= lmax && nl < 32; c->L *= 2) {
    Ls[nl] = c->L;
    tc[nl] = cal_time (c, false);
    tg[nl] = cal_time (c, true);
    if (tc[nl] < 0 || tg[nl] < 0 || !gr_accel_gpu_usable ())
      return -1;
    nl++;
  }
  /* Smallest size from which the GPU is faster by the margin at every
   * size. */
  for (i = nl - 1; i >= 0 && all_above; i--) {
    if (tg[i] <= CAL_MARGIN * tc[i]) {
      c->L = Ls[i];
      from = cal_bytes (c);
    }
    else
      all_above = false;
  }
  gpu_min[c->kind] = from;

  at = snprintf (line, sizeof line, "%s, us per call CPU/GPU:", what);
  for (i = 0; i < nl && at < sizeof line; i++) {
    c->L = Ls[i];
    fmt_size (a, sizeof a, cal_bytes (c));
    at += snprintf (line + at, sizeof line - at, " %s %.0f/%.0f", a,
                    tc[i] * 1e6, tg[i] * 1e6);
  }
  fmt_size (a, sizeof a, from);
  nbdkit_debug ("gpuraid: accel=auto: %s; GPU from %s", line, a);
  return 0;
}

/* The GPU's rebuilt blocks must be the CPU's, byte for byte. */
static int
cal_verify (struct cal *c)
{
  uint8_t *blk[2 * GR_MAX_MEMBERS];
  size_t len = (size_t) c->k * c->L;
  int i, erased[GR_MAX_MEMBERS];

  /* Same stripe in both places; erase m data blocks of the GPU copy. */
  c->kind = CAL_ENCODE;
  cal_blocks (c, false, blk);
  if (gr_code_encode (false, blk, 1, c->L) == -1)
    return -1;
  memcpy (c->pin, c->req, len);
  memcpy (c->pin + len, c->pg + len, (size_t) c->m * c->L);
  memset (c->pin, 0xa5, (size_t) c->m * c->L);
  for (i = 0; i < c->m; i++)
    erased[i] = i;
  cal_blocks (c, true, blk);
  if (gr_code_reconstruct (true, erased, c->m, blk, c->L) == -1 ||
      !gr_accel_gpu_usable ())
    return -1;
  if (memcmp (c->pin, c->req, len) != 0) {
    nbdkit_error ("GPU check: the GPU rebuilt different bytes than the CPU "
                  "backend %s; coding on the CPU only",
                  gr_backend_name (gr_coder_backend (gr_a.cpu_coder)));
    __atomic_store_n (&gr_a.gpu_fallen_back, 1, __ATOMIC_RELEASE);
    return -1;
  }
  return 0;
}

int
gr_accel_calibrate (void)
{
  struct cal c = { .k = gr_a.geom.k, .m = gr_a.geom.m, .n = gr_a.n };
  size_t lmin = CAL_MIN_BLOCK, lmax = CAL_MAX_BLOCK, chunk = gr_a.geom.chunk;
  size_t blocks, i;
  char line[256], s[CAL_NKINDS][32];
  double t0 = now ();
  int r = -1;

  if (!gr_accel_gpu_usable () || gr_a.gpu_all)
    return 0;
  while (lmin % gr_a.lm)
    lmin *= 2;
  while (lmax > lmin && (size_t) c.k * lmax > CAL_MAX_DATA)
    lmax /= 2;
  blocks = (size_t) (c.n + c.m);
  nbdkit_debug ("gpuraid: accel=auto: measuring CPU (%s) against GPU per "
                "operation, %zu to %zu bytes per block",
                gr_backend_name (gr_coder_backend (gr_a.cpu_coder)),
                lmin, lmax);
  c.req = malloc ((size_t) c.k * lmax);
  c.pg = malloc (blocks * lmax);
  c.pin = gr_a.host_alloc ? gr_a.host_alloc (blocks * lmax) : NULL;
  c.pinned = c.pin != NULL;
  if (c.req == NULL || c.pg == NULL) {
    nbdkit_error ("accel=auto: out of memory for the measurement");
    goto out;
  }
  if (c.pin == NULL && (c.pin = malloc (blocks * lmax)) == NULL)
    goto out;
  for (i = 0; i < (size_t) c.k * lmax; i++)
    c.req[i] = (uint8_t) (i * 2654435761u >> 13);
  memset (c.pg, 0x3c, blocks * lmax);
  memcpy (c.pin, c.pg, blocks * lmax);

  c.L = lmax < chunk ? lmax : chunk;
  if (cal_verify (&c) == -1)
    goto out;

  /* Reconstructs and updates never exceed one chunk per block. */
  c.kind = CAL_ENCODE;
  if (cal_kind (&c, "encode", lmin, lmax) == -1)
    goto out;
  snprintf (line, sizeof line, "reconstruct with 1 of %d+%d lost",
            c.k, c.m);
  c.kind = CAL_RECON_ONE;
  c.nerased = 1;
  if (cal_kind (&c, line, lmin, lmax < chunk ? lmax : chunk) == -1)
    goto out;
  if (c.m > 1) {
    snprintf (line, sizeof line, "reconstruct with %d of %d+%d lost",
              c.m, c.k, c.m);
    c.kind = CAL_RECON_ALL;
    c.nerased = c.m;
    if (cal_kind (&c, line, lmin, lmax < chunk ? lmax : chunk) == -1)
      goto out;
  }
  else
    gpu_min[CAL_RECON_ALL] = gpu_min[CAL_RECON_ONE];
  c.kind = CAL_UPDATE;
  if (cal_kind (&c, "parity update from one data delta", lmin,
                lmax < chunk ? lmax : chunk) == -1)
    goto out;
  if (gpuraid_debug_fake_auto == 2) {
    nbdkit_debug ("gpuraid: testing: every operation to the fake GPU");
    for (i = 0; i < CAL_NKINDS; i++)
      gpu_min[i] = 0;
  }
  for (i = 0; i < CAL_NKINDS; i++)
    fmt_size (s[i], sizeof s[i], gpu_min[i]);
  /* Count the data paths' operations only. */
  __atomic_store_n (&ops_gpu, 0, __ATOMIC_RELAXED);
  __atomic_store_n (&ops_spilled, 0, __ATOMIC_RELAXED);
  nbdkit_debug ("gpuraid: accel=auto: on the GPU from (data bytes per "
                "operation): encode %s, reconstruct %s (1 lost) / %s (%d "
                "lost), update %s; smaller operations on the CPU "
                "(measured in %.0f ms)", s[CAL_ENCODE], s[CAL_RECON_ONE],
                s[CAL_RECON_ALL], c.m, s[CAL_UPDATE], (now () - t0) * 1e3);
  r = 0;
 out:
  if (r == -1) {
    for (i = 0; i < CAL_NKINDS; i++)
      gpu_min[i] = SIZE_MAX;
    nbdkit_debug ("gpuraid: accel=auto: measurement not completed; all "
                  "coding on the CPU");
  }
  free (c.req);
  free (c.pg);
  if (c.pinned)
    gr_a.host_free (c.pin);
  else
    free (c.pin);
  return r;
}
