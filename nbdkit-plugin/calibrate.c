/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - accel=auto's start-up measurement.  See calibrate.h. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate.h"
#include "fakegpu.h"
#include "log.h"
#include "common/now.h"

#define MiB ((size_t) 1 << 20)
#define CAL_MAX_DATA (16 * MiB)         /* largest call measured */
#define CAL_MAX_BLOCK (4 * MiB)
#define CAL_MIN_BLOCK 4096
/* The GPU must be this much faster per call to be used: it measured
 * alone, while under load the GPU path shares PCIe and the engine's
 * streams and the CPU path scales with the cores; and on the H200 a
 * near-tie flipped between two starts (docs/performance.md, array run
 * 3). */
#define CAL_MARGIN 0.9

/* --- calibration ---------------------------------------------------------- */

struct cal {
  struct gr_coding *coding;
  int k, m, n;
  int kind, nerased;
  size_t L;
  uint8_t *req;         /* k blocks: stands for a request buffer */
  uint8_t *pg;          /* n + m blocks of ordinary scratch */
  uint8_t *pin;         /* n + m blocks of page-locked scratch (or not) */
  bool pinned;          /* pin is page-locked */
};

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
    else if (i < c->k && c->kind != GR_ROUTE_UPDATE)
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
  case GR_ROUTE_ENCODE:
    /* Data from the request buffer, parity into scratch. */
    if (gpu)
      for (i = 0; i < c->k; i++)
        blk[i] = c->req + (size_t) i * c->L;
    return gr_coding_encode (c->coding, gpu, blk, 1, c->L, NULL);
  case GR_ROUTE_UPDATE:
    /* Delta and parity in scratch. */
    return gr_coding_update (c->coding, gpu, 0, 1,
                             (const uint8_t *const *) blk, &blk[c->k],
                             &blk[c->n], c->L);
  default:
    for (i = 0; i < c->nerased; i++)
      erased[i] = i;
    r = gr_coding_reconstruct (c->coding, gpu, erased, c->nerased, blk,
                               c->L);
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
    double t0 = gr_now ();

    if (cal_op (c, gpu) == -1)
      return -1;
    t0 = gr_now () - t0;
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
  return c->kind == GR_ROUTE_UPDATE ? c->L : (size_t) c->k * c->L;
}

/* Measure one kind over block lengths lmin .. lmax, set from[kind] and
 * log.  -1 if the GPU failed or gave different bytes (already logged). */
static int
cal_kind (struct cal *c, const char *what, size_t lmin, size_t lmax,
          size_t *from)
{
  char line[2048], a[32];
  size_t at = 0, gpu_from = SIZE_MAX;
  bool all_above = true;
  size_t Ls[32];
  double tc[32], tg[32];
  int nl = 0, i;

  for (c->L = lmin; c->L <= lmax && nl < 32; c->L *= 2) {
    Ls[nl] = c->L;
    tc[nl] = cal_time (c, false);
    tg[nl] = cal_time (c, true);
    if (tc[nl] < 0 || tg[nl] < 0 || !gr_coding_gpu_usable (c->coding))
      return -1;
    nl++;
  }
  /* Smallest size from which the GPU is faster by the margin at every
   * size. */
  for (i = nl - 1; i >= 0 && all_above; i--) {
    if (tg[i] <= CAL_MARGIN * tc[i]) {
      c->L = Ls[i];
      gpu_from = cal_bytes (c);
    }
    else
      all_above = false;
  }
  from[c->kind] = gpu_from;

  at = snprintf (line, sizeof line, "%s, us per call CPU/GPU:", what);
  for (i = 0; i < nl && at < sizeof line; i++) {
    c->L = Ls[i];
    fmt_size (a, sizeof a, cal_bytes (c));
    at += snprintf (line + at, sizeof line - at, " %s %.0f/%.0f", a,
                    tc[i] * 1e6, tg[i] * 1e6);
  }
  fmt_size (a, sizeof a, gpu_from);
  gr_debug ("accel=auto: %s; GPU from %s", line, a);
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
  c->kind = GR_ROUTE_ENCODE;
  cal_blocks (c, false, blk);
  if (gr_coding_encode (c->coding, false, blk, 1, c->L, NULL) == -1)
    return -1;
  memcpy (c->pin, c->req, len);
  memcpy (c->pin + len, c->pg + len, (size_t) c->m * c->L);
  memset (c->pin, 0xa5, (size_t) c->m * c->L);
  for (i = 0; i < c->m; i++)
    erased[i] = i;
  cal_blocks (c, true, blk);
  if (gr_coding_reconstruct (c->coding, true, erased, c->m, blk, c->L)
      == -1 || !gr_coding_gpu_usable (c->coding))
    return -1;
  if (memcmp (c->pin, c->req, len) != 0) {
    nbdkit_error ("GPU check: the GPU rebuilt different bytes than the CPU "
                  "backend %s; coding on the CPU only",
                  gr_coding_cpu_name (c->coding));
    gr_coding_gpu_off (c->coding);
    return -1;
  }
  return 0;
}

int
gr_calibrate (struct gr_coding *coding, uint32_t chunk)
{
  struct cal c = { .coding = coding, .k = gr_coding_k (coding),
                   .m = gr_coding_m (coding) };
  size_t lmin = CAL_MIN_BLOCK, lmax = CAL_MAX_BLOCK, blocks, i;
  size_t from[GR_ROUTE_NKINDS];
  size_t lm = gr_coding_len_multiple (coding);
  const int half = (c.m + 1) / 2;
  char line[256], s[GR_ROUTE_NKINDS][32];
  double t0 = gr_now ();
  int r = -1;

  if (!gr_coding_gpu_usable (coding) || gr_coding_gpu_all (coding))
    return 0;
  for (i = 0; i < GR_ROUTE_NKINDS; i++)
    from[i] = SIZE_MAX;
  c.n = c.k + c.m;
  while (lmin % lm)
    lmin *= 2;
  while (lmax > lmin && (size_t) c.k * lmax > CAL_MAX_DATA)
    lmax /= 2;
  blocks = (size_t) (c.n + c.m);
  gr_debug ("accel=auto: measuring CPU (%s) against GPU per operation, %zu "
            "to %zu bytes per block", gr_coding_cpu_name (coding), lmin,
            lmax);
  c.req = malloc ((size_t) c.k * lmax);
  c.pg = malloc (blocks * lmax);
  c.pin = gr_coding_host_alloc (coding, blocks * lmax);
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
  c.kind = GR_ROUTE_ENCODE;
  if (cal_kind (&c, "encode", lmin, lmax, from) == -1)
    goto out;
  snprintf (line, sizeof line, "reconstruct with 1 of %d+%d lost",
            c.k, c.m);
  c.kind = GR_ROUTE_RECON_ONE;
  c.nerased = 1;
  if (cal_kind (&c, line, lmin, lmax < chunk ? lmax : chunk, from) == -1)
    goto out;
  /* And with about half and with all m lost (the router takes the
   * nearest for the count an array has lost). */
  from[GR_ROUTE_RECON_HALF] = from[GR_ROUTE_RECON_ONE];
  if (half > 1 && half < c.m) {
    snprintf (line, sizeof line, "reconstruct with %d of %d+%d lost",
              half, c.k, c.m);
    c.kind = GR_ROUTE_RECON_HALF;
    c.nerased = half;
    if (cal_kind (&c, line, lmin, lmax < chunk ? lmax : chunk, from) == -1)
      goto out;
  }
  if (c.m > 1) {
    snprintf (line, sizeof line, "reconstruct with %d of %d+%d lost",
              c.m, c.k, c.m);
    c.kind = GR_ROUTE_RECON_ALL;
    c.nerased = c.m;
    if (cal_kind (&c, line, lmin, lmax < chunk ? lmax : chunk, from) == -1)
      goto out;
  }
  else
    from[GR_ROUTE_RECON_ALL] = from[GR_ROUTE_RECON_ONE];
  c.kind = GR_ROUTE_UPDATE;
  if (cal_kind (&c, "parity update from one data delta", lmin,
                lmax < chunk ? lmax : chunk, from) == -1)
    goto out;
  if (gr_fakegpu_auto () == GR_FAKE_AUTO_ALL) {
    gr_debug ("testing: every operation to the fake GPU");
    for (i = 0; i < GR_ROUTE_NKINDS; i++)
      from[i] = 0;
  }
  for (i = 0; i < GR_ROUTE_NKINDS; i++)
    fmt_size (s[i], sizeof s[i], from[i]);
  gr_coding_set_gpu_from (coding, from,
                          gr_fakegpu_auto () != GR_FAKE_AUTO_ALL);
  gr_debug ("accel=auto: on the GPU from (data bytes per operation): "
            "encode %s, reconstruct %s (1 lost) / %s (%d lost) / %s (%d "
            "lost), update %s; smaller operations on the CPU (measured in "
            "%.0f ms)", s[GR_ROUTE_ENCODE], s[GR_ROUTE_RECON_ONE],
            s[GR_ROUTE_RECON_HALF], half, s[GR_ROUTE_RECON_ALL], c.m,
            s[GR_ROUTE_UPDATE], (gr_now () - t0) * 1e3);
  r = 0;
 out:
  if (r == -1)
    gr_debug ("accel=auto: measurement not completed; all coding on the "
              "CPU");
  free (c.req);
  free (c.pg);
  if (c.pinned)
    gr_coding_host_free (coding, c.pin);
  else
    free (c.pin);
  return r;
}
