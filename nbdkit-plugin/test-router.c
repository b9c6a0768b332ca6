/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - unit test of router.h (accel=auto's router) on a simulated
 * clock: a workload whose operations come at a rate, and cost CPU time,
 * that depend on the side each is routed to; the router must find the
 * better side, hold it (longer each time a trial confirms it), try again
 * after the hold and follow a change,
 * abandon a trial its operations left, keep kinds apart, run one trial at
 * a time, route by the thresholds alone when not adaptive; then threads
 * routing at once on the real clock (for ThreadSanitizer). */
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router.h"
#include "tests/testkit.h"
#include "common/now.h"

/* The router logs through nbdkit_debug, every line shown.  Its
 * decisions and exit lines are kept: the last, and how many; a
 * decision's hold, in order.  A trial's phase lines, and an abandoned
 * trial's, are only shown. */
static char last_log[512];
static unsigned nlogs;
static int holds[64];
static unsigned nholds;
static double last_at;          /* the last decision's simulated time */
static unsigned nphases;        /* trial phase lines */
static const double *sim_t;     /* the running simulation's clock */

void
nbdkit_debug (const char *fs, ...)
{
  char line[512];
  const char *f;
  va_list ap;

  va_start (ap, fs);
  vsnprintf (line, sizeof line, fs, ap);
  va_end (ap);
  printf ("  log: %s\n", line);
  nphases += strstr (line, "trial phase") != NULL;
  if (strstr (line, "trial phase") || strstr (line, "trial abandoned"))
    return;
  memcpy (last_log, line, sizeof line);
  nlogs++;
  f = strstr (line, " for ");
  if (f && strstr (line, "CPU-s/GB, GPU") && nholds < 64)
    holds[nholds++] = atoi (f + 5);
  last_at = sim_t ? *sim_t : 0;
}

struct sim {
  double t, cpu;
};

static double
sim_now (void *arg)
{
  return ((struct sim *) arg)->t;
}

static double
sim_cpu (void *arg)
{
  return ((struct sim *) arg)->cpu;
}

/* A workload of one kind: each operation, routed to side s, is followed
 * by gap[s] seconds until the next and costs cpu[s] CPU seconds. */
struct load {
  enum gr_op op;
  size_t bytes;
  int nerased;
  double gap[2], cpu[2];
};

/* Run ld for secs simulated seconds; the operations routed to the GPU,
 * and those in all. */
static void
run (struct gr_router *r, struct sim *sm, const struct load *ld,
     double secs, unsigned long *gpu, unsigned long *all)
{
  const double end = sm->t + secs;

  *gpu = *all = 0;
  while (sm->t < end) {
    const enum gr_route_side s = gr_router_route (r, ld->op, ld->bytes,
                                                  ld->nerased);

    *gpu += s == GR_SIDE_GPU;
    ++*all;
    sm->t += ld->gap[s];
    sm->cpu += ld->cpu[s];
  }
}

static struct gr_router *
new_router (struct sim *sm, int m, size_t from, bool adaptive)
{
  const struct gr_router_clock clk = { sim_now, sim_cpu, sm };
  size_t f[GR_ROUTE_NKINDS];
  struct gr_router *r = gr_router_new (m, &clk);

  for (int i = 0; i < GR_ROUTE_NKINDS; i++)
    f[i] = from;
  if (r)
    gr_router_set_prior (r, f, adaptive);
  return r;
}

/* 512 KiB degraded-read reconstructs with 2 of 4 lost. */
static struct load
recon (double gap_cpu, double gap_gpu, double cpu_cpu, double cpu_gpu)
{
  return (struct load) { .op = GR_OP_RECONSTRUCT, .bytes = 512 << 10,
                         .nerased = 2, .gap = { gap_cpu, gap_gpu },
                         .cpu = { cpu_cpu, cpu_gpu } };
}

/* The GPU twice the rate: tried after a second, then on the GPU, held
 * 4 s; each trial that confirms it holds twice as long, up to 30 s; when
 * the GPU has become the slower, back on the CPU, held 4 s, then 8. */
static void
test_finds_faster (void)
{
  struct sim sm = { 100, 0 };
  struct gr_router *r = new_router (&sm, 4, SIZE_MAX, true);
  struct load ld = recon (1e-3, 0.5e-3, 1e-4, 1e-4);
  unsigned long g, a;
  char seq[128] = "";

  CHECK (r != NULL, "gr_router_new");
  nholds = 0;
  sim_t = &sm.t;
  run (r, &sm, &ld, 0.9, &g, &a);
  CHECK (g == 0 && a > 800, "before the trial: the prior (CPU): %lu of %lu "
         "on the GPU", g, a);
  run (r, &sm, &ld, 1.5, &g, &a);       /* the trial (1 s) and after */
  CHECK (strstr (last_log, "reconstruct with 2 of 4 lost, 64K to 1M") &&
         strstr (last_log, "on the GPU for 4 s"), "decision: %s",
         last_log);
  run (r, &sm, &ld, 3, &g, &a);
  CHECK (g == a, "held: %lu of %lu on the GPU", g, a);
  {
    struct gr_route_state st[4];
    const size_t n = gr_router_states (r, st, 4);

    CHECK (n == 1 && st[0].decided && st[0].side == GR_SIDE_GPU &&
           !st[0].trying && st[0].trials == 1 && st[0].to_gpu == 1 &&
           st[0].mbs[GR_SIDE_GPU] > 1.9 * st[0].mbs[GR_SIDE_CPU] &&
           strcmp (st[0].kind, "reconstruct with 2 of 4 lost, 64K to 1M")
           == 0, "the status: %zu kinds, %s: %s, %u trials, %.0f/%.0f MB/s",
           n, st[0].kind, st[0].side == GR_SIDE_GPU ? "GPU" : "CPU",
           st[0].trials, st[0].mbs[0], st[0].mbs[1]);
  }
  run (r, &sm, &ld, 60, &g, &a);        /* trials at 6, 15, 32, 63 s */
  CHECK (g > 0.97 * a, "held, but for the trials: %lu of %lu on the GPU",
         g, a);
  ld.gap[GR_SIDE_GPU] = 4e-3;           /* the GPU slows down */
  run (r, &sm, &ld, 40, &g, &a);        /* a trial at 94 s, 99 s */
  CHECK (strstr (last_log, "on the CPU for 8 s"), "back on the CPU, "
         "confirmed: %s", last_log);
  for (unsigned i = 0; i < nholds; i++)
    snprintf (seq + strlen (seq), sizeof seq - strlen (seq), "%s%d",
              i ? " " : "", holds[i]);
  CHECK (strcmp (seq, "4 8 16 30 30 4 8") == 0, "the holds, in s: %s",
         seq);
  run (r, &sm, &ld, last_at + 7.5 - sm.t, &g, &a);
  CHECK (g == 0, "held on the CPU for 8 s: %lu of %lu on the GPU", g, a);
  sim_t = NULL;
  gr_router_free (r);
}

/* The CPU faster, the prior the GPU (measured faster at start-up): the
 * trial moves the kind to the CPU. */
static void
test_prior_overruled (void)
{
  struct sim sm = { 0, 0 };
  struct gr_router *r = new_router (&sm, 4, 0, true);
  struct load ld = recon (0.5e-3, 2e-3, 1e-4, 1e-4);
  unsigned long g, a;

  CHECK (r != NULL, "gr_router_new");
  run (r, &sm, &ld, 0.9, &g, &a);
  CHECK (g == a, "before the trial: the prior (GPU): %lu of %lu", g, a);
  run (r, &sm, &ld, 1.5, &g, &a);
  CHECK (strstr (last_log, "on the CPU for 4 s"), "decision: %s",
         last_log);
  run (r, &sm, &ld, 3, &g, &a);         /* within the 4 s hold */
  CHECK (g == 0, "held on the CPU: %lu of %lu on the GPU", g, a);
  gr_router_free (r);
}

/* The same rate: the side with less CPU time a byte; neither better:
 * the prior stays. */
static void
test_ties (void)
{
  struct sim sm = { 0, 0 };
  struct gr_router *r = new_router (&sm, 4, SIZE_MAX, true);
  struct load ld = recon (1e-3, 1e-3, 4e-4, 2e-4);
  unsigned long g, a;

  CHECK (r != NULL, "gr_router_new");
  run (r, &sm, &ld, 2.5, &g, &a);
  CHECK (strstr (last_log, "on the GPU for 4 s"), "less CPU a byte on the "
         "GPU: %s", last_log);
  gr_router_free (r);

  r = new_router (&sm, 4, SIZE_MAX, true);
  ld = recon (1e-3, 1.02e-3, 2e-4, 2.04e-4);
  CHECK (r != NULL, "gr_router_new");
  run (r, &sm, &ld, 2.5, &g, &a);
  CHECK (strstr (last_log, "sides measured at start-up (neither better)"),
         "a tie keeps the prior: %s", last_log);
  run (r, &sm, &ld, 3, &g, &a);
  CHECK (g == 0, "the prior (CPU) held: %lu of %lu on the GPU", g, a);
  gr_router_free (r);
}

/* Operations that stop during a trial: abandoned, no decision; tried
 * again 5 s later, and decided then. */
static void
test_abandoned (void)
{
  struct sim sm = { 0, 0 };
  struct gr_router *r = new_router (&sm, 4, SIZE_MAX, true);
  struct load ld = recon (1e-3, 0.5e-3, 1e-4, 1e-4);
  const unsigned before = nlogs;
  unsigned long g, a;

  CHECK (r != NULL, "gr_router_new");
  run (r, &sm, &ld, 1.3, &g, &a);        /* into the trial */
  sm.t += 2;                             /* the kind pauses */
  run (r, &sm, &ld, 1, &g, &a);
  CHECK (nlogs == before, "no decision from an abandoned trial (%s)",
         last_log);
  CHECK (g == 0, "after the abandoned trial, the prior: %lu of %lu on the "
         "GPU", g, a);
  run (r, &sm, &ld, 6, &g, &a);
  CHECK (nlogs == before + 1 && strstr (last_log, "on the GPU for 4 s"),
         "tried again: %s", last_log);
  gr_router_free (r);
}

/* A pause shorter than a late phase end (the client between two runs),
 * inside the trial's first GPU phase: that phase is measured again, not
 * taken for the GPU's rate.  The GPU 1.15 times the CPU's rate; counted
 * with the pause, its phases would average 0.92 times the CPU's. */
static void
test_pause_in_phase (void)
{
  struct sim sm = { 0, 0 };
  struct gr_router *r = new_router (&sm, 4, SIZE_MAX, true);
  struct load ld = recon (1e-3, 0.87e-3, 1e-4, 1e-4);
  unsigned long g, a;
  unsigned p0;

  CHECK (r != NULL, "gr_router_new");
  run (r, &sm, &ld, 0.9, &g, &a);
  p0 = nphases;
  while (nphases == p0 && sm.t < 3)     /* to the end of phase 1 */
    run (r, &sm, &ld, 1e-3, &g, &a);
  CHECK (nphases == p0 + 1, "phase 1 ended (%u phases)", nphases - p0);
  run (r, &sm, &ld, 0.1, &g, &a);       /* into phase 2's count */
  CHECK (g == a, "phase 2 on the GPU: %lu of %lu", g, a);
  sm.t += 0.08;
  run (r, &sm, &ld, 2, &g, &a);
  CHECK (strstr (last_log, "on the GPU for 4 s"), "the GPU, measured "
         "without the pause: %s", last_log);
  gr_router_free (r);
}

/* Kinds apart: a decision for one erasure count and size moves no other;
 * two kinds interleaved are tried one after the other, each decided by
 * its own figures. */
static void
test_kinds_apart (void)
{
  struct sim sm = { 0, 0 };
  struct gr_router *r = new_router (&sm, 4, SIZE_MAX, true);
  struct load a2 = recon (1e-3, 0.5e-3, 1e-4, 1e-4);
  struct load a3 = a2, small = a2, enc;
  unsigned long g, a, g3 = 0, n3 = 0;
  enum gr_route_side s;

  CHECK (r != NULL, "gr_router_new");
  run (r, &sm, &a2, 2.5, &g, &a);
  CHECK (strstr (last_log, "2 of 4 lost, 64K to 1M: CPU") &&
         strstr (last_log, "on the GPU"), "decision: %s", last_log);
  a3.nerased = 3;
  small.bytes = 16 << 10;
  for (int i = 0; i < 100; i++) {
    CHECK (gr_router_route (r, a3.op, a3.bytes, 3) == GR_SIDE_CPU,
           "3 lost follows its own prior");
    CHECK (gr_router_route (r, small.op, small.bytes, 2) == GR_SIDE_CPU,
           "16 KiB follows its own prior");
    CHECK (gr_router_route (r, GR_OP_ENCODE, 512 << 10, 0) == GR_SIDE_CPU,
           "encode follows its own prior");
  }
  gr_router_free (r);

  /* Interleaved: reconstructs where the GPU is faster, encodes where
   * the CPU is, the encodes' prior the GPU. */
  r = new_router (&sm, 4, 0, true);
  enc = (struct load) { .op = GR_OP_ENCODE, .bytes = 8 << 20,
                        .gap = { 1e-3, 3e-3 }, .cpu = { 1e-4, 1e-4 } };
  CHECK (r != NULL, "gr_router_new");
  nlogs = 0;
  for (double end = sm.t + 4; sm.t < end;) {
    s = gr_router_route (r, a2.op, a2.bytes, a2.nerased);
    sm.t += a2.gap[s] / 2;
    s = gr_router_route (r, enc.op, enc.bytes, 0);
    sm.t += enc.gap[s] / 2;
    if (nlogs == 1) {           /* one decided, the other in its trial */
      n3++;
      g3 += s == GR_SIDE_GPU;
    }
  }
  CHECK (nlogs == 2, "both kinds decided, one after the other (%u)", nlogs);
  CHECK (n3 > 0 && g3 > 0 && g3 < n3, "the second kind's trial ran after "
         "the first's decision (%lu of %lu on the GPU)", g3, n3);
  for (int i = 0; i < 100; i++) {
    CHECK (gr_router_route (r, a2.op, a2.bytes, 2) == GR_SIDE_GPU,
           "reconstructs on the GPU");
    CHECK (gr_router_route (r, GR_OP_ENCODE, 8 << 20, 0) == GR_SIDE_CPU,
           "encodes on the CPU");
  }
  gr_router_free (r);
}

/* A kind that stops for good during its trial (the load changed): the
 * next kind's trial is not held up by it. */
static void
test_trial_left (void)
{
  struct sim sm = { 0, 0 };
  struct gr_router *r = new_router (&sm, 4, SIZE_MAX, true);
  struct load a2 = recon (1e-3, 0.5e-3, 1e-4, 1e-4), a3 = a2;
  unsigned long g, a;

  CHECK (r != NULL, "gr_router_new");
  run (r, &sm, &a2, 1.3, &g, &a);        /* 2 lost: into its trial */
  a3.nerased = 3;
  run (r, &sm, &a3, 4, &g, &a);          /* only 3 lost from now on */
  CHECK (strstr (last_log, "3 of 4 lost, 64K to 1M") &&
         strstr (last_log, "on the GPU for 4 s"), "the second kind "
         "decided: %s", last_log);
  CHECK (g > a / 2, "and on the GPU: %lu of %lu", g, a);
  gr_router_free (r);
}

/* Not adaptive: the thresholds, whatever the load. */
static void
test_thresholds (void)
{
  struct sim sm = { 0, 0 };
  struct gr_router *r = new_router (&sm, 4, SIZE_MAX, false);
  const size_t from[GR_ROUTE_NKINDS] = {
    [GR_ROUTE_ENCODE] = 1 << 20, [GR_ROUTE_RECON_ONE] = 256 << 10,
    [GR_ROUTE_RECON_HALF] = 128 << 10, [GR_ROUTE_RECON_ALL] = 64 << 10,
    [GR_ROUTE_UPDATE] = SIZE_MAX
  };
  const size_t from16[GR_ROUTE_NKINDS] = {
    [GR_ROUTE_ENCODE] = SIZE_MAX, [GR_ROUTE_RECON_ONE] = SIZE_MAX,
    [GR_ROUTE_RECON_HALF] = 1 << 20, [GR_ROUTE_RECON_ALL] = 256 << 10,
    [GR_ROUTE_UPDATE] = SIZE_MAX
  };
  struct load ld = recon (1e-3, 0.1e-3, 1e-4, 1e-4);
  unsigned long g, a;

  CHECK (r != NULL && !gr_router_may_gpu (r), "no GPU without thresholds");
  run (r, &sm, &ld, 5, &g, &a);
  CHECK (g == 0, "never tried: %lu of %lu on the GPU", g, a);
  gr_router_set_prior (r, from, false);
  CHECK (gr_router_may_gpu (r), "some kind may go to the GPU");
  CHECK (gr_router_route (r, GR_OP_ENCODE, 1 << 20, 0) == GR_SIDE_GPU &&
         gr_router_route (r, GR_OP_ENCODE, 512 << 10, 0) == GR_SIDE_CPU,
         "encode from 1 MiB");
  CHECK (gr_router_route (r, GR_OP_RECONSTRUCT, 256 << 10, 1) ==
         GR_SIDE_GPU && gr_router_route (r, GR_OP_RECONSTRUCT, 128 << 10, 1)
         == GR_SIDE_CPU, "1 of 4 lost: as measured with 1 lost");
  CHECK (gr_router_route (r, GR_OP_RECONSTRUCT, 128 << 10, 2) ==
         GR_SIDE_GPU && gr_router_route (r, GR_OP_RECONSTRUCT, 64 << 10, 2)
         == GR_SIDE_CPU, "2 of 4 lost: as measured with 2 lost");
  CHECK (gr_router_route (r, GR_OP_RECONSTRUCT, 64 << 10, 3) ==
         GR_SIDE_GPU, "3 of 4 lost: as measured with 4 lost (a tie)");
  CHECK (gr_router_route (r, GR_OP_UPDATE, 4 << 20, 0) == GR_SIDE_CPU,
         "updates never");
  gr_router_free (r);

  /* m = 16: measured with 1, 8 and 16 lost; each count the nearest. */
  r = new_router (&sm, 16, SIZE_MAX, false);
  CHECK (r != NULL, "gr_router_new (16)");
  gr_router_set_prior (r, from16, false);
  for (int e = 1; e <= 16; e++) {
    const enum gr_route_side at1m =
      gr_router_route (r, GR_OP_RECONSTRUCT, 1 << 20, e);
    const enum gr_route_side at256k =
      gr_router_route (r, GR_OP_RECONSTRUCT, 256 << 10, e);
    const char *want = e <= 4 ? "1" : e <= 11 ? "8" : "16";
    const bool ok = e <= 4 ? at1m == GR_SIDE_CPU
      : e <= 11 ? at1m == GR_SIDE_GPU && at256k == GR_SIDE_CPU
      : at256k == GR_SIDE_GPU;

    CHECK (ok, "%d of 16 lost: as measured with %s lost (1 MiB %s, 256 "
           "KiB %s)", e, want, at1m == GR_SIDE_GPU ? "GPU" : "CPU",
           at256k == GR_SIDE_GPU ? "GPU" : "CPU");
  }
  gr_router_free (r);
}

/* Threads routing at once on the real clock. */
struct th {
  struct gr_router *r;
  int id;
  unsigned long gpu;
};

static void *
hammer (void *p)
{
  struct th *t = p;
  const double end = gr_now () + 1.6;

  while (gr_now () < end)
    for (int i = 0; i < 64; i++)
      t->gpu += gr_router_route (t->r, i % 3 ? GR_OP_RECONSTRUCT
                                 : GR_OP_ENCODE, (size_t) (1 + t->id) << 16,
                                 1 + (i + t->id) % 4) == GR_SIDE_GPU;
  return NULL;
}

static void
test_threads (void)
{
  const size_t from[GR_ROUTE_NKINDS] = { 0 };
  struct gr_router *r = gr_router_new (4, NULL);
  pthread_t th[8];
  struct th a[8];
  unsigned long gpu = 0;

  CHECK (r != NULL, "gr_router_new");
  gr_router_set_prior (r, from, true);
  for (int i = 0; i < 8; i++) {
    a[i] = (struct th) { .r = r, .id = i };
    pthread_create (&th[i], NULL, hammer, &a[i]);
  }
  for (int i = 0; i < 8; i++) {
    pthread_join (th[i], NULL);
    gpu += a[i].gpu;
  }
  CHECK (gpu > 0, "8 threads routed, %lu to the GPU", gpu);
  gr_router_free (r);
}

int
main (void)
{
  test_seed ("test-router");
  test_finds_faster ();
  test_prior_overruled ();
  test_ties ();
  test_abandoned ();
  test_pause_in_phase ();
  test_kinds_apart ();
  test_trial_left ();
  test_thresholds ();
  test_threads ();
  return test_done ("test-router");
}
