/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - accel=auto's router.  See router.h. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "router.h"
#include "log.h"
#include "common/now.h"

#define KiB ((size_t) 1 << 10)
#define MiB ((size_t) 1 << 20)

#define FIRST_S 1.0     /* a kind's prior holds this long from its first use */
#define PHASE_S 0.25    /* a trial's phase */
#define WARM_S 0.05     /* its start, not counted: the other side's
                         * operations still in flight */
#define LATE_S 0.1      /* a stage end reached later than this: the kind
                         * paused, its figures are not its rate */
#define HOLD_S 30.0     /* a decision confirmed holds at most */
#define SHORT_S 4.0     /* a first or changed decision holds */
#define RETRY_S 5.0     /* after an abandoned trial */
#define WAIT_S 0.1      /* another kind's trial runs: look again */
#define MIN_OPS 8       /* operations a phase must count */
#define PAUSE_S 0.02    /* no operation of the kind for this long, and */
#define PAUSE_X 8       /* this many times the phase's mean interval: a
                         * pause (the client between two runs), and the
                         * phase is measured again */
#define MAX_AGAIN 4     /* phases measured again in a trial, at most */
#define MARGIN 0.05     /* a side must be this much better to win */
#define NPHASES 4
#define NSIZES 4

/* Data bytes per operation: the upper edges of the sizes. */
static const size_t size_edge[NSIZES - 1] = { 64 * KiB, MiB, 4 * MiB };
static const char *const size_name[NSIZES] = {
  "below 64K", "64K to 1M", "1M to 4M", "4M and more"
};

/* A trial's phases: CPU, GPU, GPU, CPU (a drift in the load during the
 * trial weighs on both sides alike). */
static const int phase_side[NPHASES] = {
  GR_SIDE_CPU, GR_SIDE_GPU, GR_SIDE_GPU, GR_SIDE_CPU
};

#define SIDE_PRIOR (-1)

enum stage { ST_UNUSED, ST_HOLD, ST_WARM, ST_COUNT };

struct kind {
  /* Read by every route (atomic). */
  int side;                     /* SIDE_PRIOR or enum gr_route_side */
  double until;                 /* when the stage ends (ST_UNUSED: 0) */
  uint64_t bytes, ops;          /* routed since the phase's count began */
  double last, pause;           /* the last operation's time; the longest
                                 * interval since the count began */
  /* Under the router's lock. */
  enum stage stage;
  int phase, held;              /* the trial's phase; the side decided */
  int again;                    /* phases measured again in this trial */
  double t0, cpu0;              /* the count's start: time, CPU time */
  double secs[2], cpu[2], b[2]; /* this trial, per side */
  unsigned trials, to_gpu, abandoned;
  double hold_s;                /* how long the last decision holds */
  double rate[2], cpb[2];       /* the last decision's figures */
};

struct gr_router {
  int m, nkinds;
  struct gr_router_clock clk;
  double born;                  /* the clock at creation: the log's times */
  size_t from[GR_ROUTE_NKINDS];
  bool adaptive;
  pthread_mutex_t lock;
  struct kind *trial;           /* the kind in a trial, or NULL */
  struct kind *k;               /* nkinds * NSIZES */
};

static double
real_now (void *arg)
{
  (void) arg;
  return gr_now ();
}

static double
real_cpu (void *arg)
{
  struct timespec t;

  (void) arg;
  clock_gettime (CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double) t.tv_sec + t.tv_nsec / 1e9;
}

struct gr_router *
gr_router_new (int m, const struct gr_router_clock *clk)
{
  struct gr_router *r = calloc (1, sizeof *r);

  if (r == NULL)
    return NULL;
  r->m = m;
  r->nkinds = m + 2;            /* encode, update, reconstruct 1 .. m */
  r->k = calloc ((size_t) r->nkinds * NSIZES, sizeof *r->k);
  if (r->k == NULL) {
    free (r);
    return NULL;
  }
  r->clk = clk ? *clk : (struct gr_router_clock) { real_now, real_cpu, NULL };
  r->born = r->clk.now (r->clk.arg);
  for (int i = 0; i < GR_ROUTE_NKINDS; i++)
    r->from[i] = SIZE_MAX;
  for (int i = 0; i < r->nkinds * NSIZES; i++)
    r->k[i].side = r->k[i].held = SIDE_PRIOR;
  pthread_mutex_init (&r->lock, NULL);
  return r;
}

void
gr_router_set_prior (struct gr_router *r,
                     const size_t from[GR_ROUTE_NKINDS], bool adaptive)
{
  memcpy (r->from, from, sizeof r->from);
  r->adaptive = adaptive;
}

bool
gr_router_may_gpu (const struct gr_router *r)
{
  if (r->adaptive)
    return true;
  for (int i = 0; i < GR_ROUTE_NKINDS; i++)
    if (r->from[i] != SIZE_MAX)
      return true;
  return false;
}

/* The kind's number (0: encode, 1: update, 1 + e: reconstruct with e
 * lost) and the start-up measurement's kind for it. */
static int
kind_of (const struct gr_router *r, enum gr_op op, int nerased,
         enum gr_route_kind *measured)
{
  switch (op) {
  case GR_OP_ENCODE:
    *measured = GR_ROUTE_ENCODE;
    return 0;
  case GR_OP_UPDATE:
    *measured = GR_ROUTE_UPDATE;
    return 1;
  default:
    if (nerased < 1)
      nerased = 1;
    if (nerased > r->m)
      nerased = r->m;
    {
      /* Measured with 1, (m + 1) / 2 and m lost: the nearest, a tie to
       * the one with more lost. */
      const int h = (r->m + 1) / 2;

      *measured = 2 * nerased >= h + r->m ? GR_ROUTE_RECON_ALL
        : 2 * nerased >= 1 + h && h > 1 ? GR_ROUTE_RECON_HALF
        : GR_ROUTE_RECON_ONE;
    }
    return 1 + nerased;
  }
}

static int
size_of (size_t bytes)
{
  int s = 0;

  while (s < NSIZES - 1 && bytes >= size_edge[s])
    s++;
  return s;
}

static void
kind_name (const struct gr_router *r, const struct kind *kd, char *buf,
           size_t len)
{
  const size_t x = (size_t) (kd - r->k);
  const int kind = (int) (x / NSIZES);

  if (kind == 0)
    snprintf (buf, len, "encode, %s", size_name[x % NSIZES]);
  else if (kind == 1)
    snprintf (buf, len, "parity update, %s", size_name[x % NSIZES]);
  else
    snprintf (buf, len, "reconstruct with %d of %d lost, %s", kind - 1,
              r->m, size_name[x % NSIZES]);
}

/* A double read by every route and written by others (the kinds'
 * stage ends and pauses). */
static double
load_d (double *p)
{
  double v;

  __atomic_load (p, &v, __ATOMIC_ACQUIRE);
  return v;
}

static void
store_d (double *p, double v)
{
  __atomic_store (p, &v, __ATOMIC_RELEASE);
}

static void
set_side (struct kind *kd, int side)
{
  __atomic_store_n (&kd->side, side, __ATOMIC_RELEASE);
}

/* Back to holding the side decided, for `secs`; the trial ends. */
static void
hold (struct gr_router *r, struct kind *kd, double now, double secs)
{
  kd->stage = ST_HOLD;
  set_side (kd, kd->held);
  store_d (&kd->until, now + secs);
  if (r->trial == kd)
    r->trial = NULL;
}

static void
warm (struct kind *kd, double now)
{
  kd->stage = ST_WARM;
  set_side (kd, phase_side[kd->phase]);
  store_d (&kd->until, now + WARM_S);
}

/* kd's trial abandoned: its operations paused (logged); tried again
 * later. */
static void
abandon (struct gr_router *r, struct kind *kd, double now)
{
  char name[96];

  kind_name (r, kd, name, sizeof name);
  gr_debug ("accel=auto: %s: trial abandoned in phase %d, its operations "
            "paused (at %.2f s)", name, kd->phase + 1, now - r->born);
  kd->abandoned++;
  hold (r, kd, now, RETRY_S);
}

/* The trial's figures decide; logged. */
static void
decide (struct gr_router *r, struct kind *kd, double now)
{
  char name[96];
  double rate[2], cpb[2];
  int win = kd->held;

  for (int s = 0; s < 2; s++) {
    rate[s] = kd->b[s] / kd->secs[s];
    cpb[s] = kd->cpu[s] / kd->b[s];
  }
  if (rate[GR_SIDE_GPU] > (1 + MARGIN) * rate[GR_SIDE_CPU])
    win = GR_SIDE_GPU;
  else if (rate[GR_SIDE_CPU] > (1 + MARGIN) * rate[GR_SIDE_GPU])
    win = GR_SIDE_CPU;
  else if (cpb[GR_SIDE_GPU] < (1 - MARGIN) * cpb[GR_SIDE_CPU])
    win = GR_SIDE_GPU;
  else if (cpb[GR_SIDE_CPU] < (1 - MARGIN) * cpb[GR_SIDE_GPU])
    win = GR_SIDE_CPU;
  /* A first decision, or one that changes the side, is checked again
   * soon (a fresh array's first seconds, a load that moved); each that
   * confirms the last holds twice as long, up to HOLD_S. */
  kd->hold_s = kd->trials > 0 && win == kd->held
    ? (2 * kd->hold_s < HOLD_S ? 2 * kd->hold_s : HOLD_S) : SHORT_S;
  kd->trials++;
  kd->to_gpu += win == GR_SIDE_GPU;
  memcpy (kd->rate, rate, sizeof rate);
  memcpy (kd->cpb, cpb, sizeof cpb);
  kind_name (r, kd, name, sizeof name);
  gr_debug ("accel=auto: %s: CPU %.0f MB/s %.2f CPU-s/GB, GPU %.0f MB/s "
            "%.2f CPU-s/GB: on the %s%s for %.0f s (at %.2f s)", name,
            rate[GR_SIDE_CPU] / 1e6, cpb[GR_SIDE_CPU] * 1e9,
            rate[GR_SIDE_GPU] / 1e6, cpb[GR_SIDE_GPU] * 1e9,
            win == GR_SIDE_GPU ? "GPU" : win == GR_SIDE_CPU ? "CPU"
            : "sides measured at start-up",
            win == SIDE_PRIOR ? " (neither better)" : "", kd->hold_s,
            now - r->born);
  kd->held = win;
  hold (r, kd, now, kd->hold_s);
}

/* kd's stage has ended (or it is first used): move on.  Under r->lock. */
static void
step (struct gr_router *r, struct kind *kd, double now)
{
  const double until = load_d (&kd->until);
  double secs, cpu;
  uint64_t b, ops;
  int s;

  if (kd->stage != ST_UNUSED && now < until)
    return;                     /* another thread moved it on */
  switch (kd->stage) {
  case ST_UNUSED:
    hold (r, kd, now, FIRST_S);
    return;
  case ST_HOLD:
    /* Another kind's trial: wait, unless that kind has stopped coming
     * (its stage ended a while ago): its trial is abandoned. */
    if (r->trial != NULL && now > load_d (&r->trial->until) + LATE_S)
      abandon (r, r->trial, now);
    if (r->trial != NULL) {
      store_d (&kd->until, now + WAIT_S);
      return;
    }
    r->trial = kd;
    memset (kd->secs, 0, sizeof kd->secs);
    memset (kd->cpu, 0, sizeof kd->cpu);
    memset (kd->b, 0, sizeof kd->b);
    kd->phase = 0;
    kd->again = 0;
    warm (kd, now);
    return;
  case ST_WARM:
    if (now > until + LATE_S)
      break;
    kd->stage = ST_COUNT;
    kd->t0 = now;
    kd->cpu0 = r->clk.cpu (r->clk.arg);
    __atomic_store_n (&kd->bytes, 0, __ATOMIC_RELAXED);
    __atomic_store_n (&kd->ops, 0, __ATOMIC_RELAXED);
    store_d (&kd->pause, 0);
    store_d (&kd->until, now + PHASE_S - WARM_S);
    return;
  case ST_COUNT:
    secs = now - kd->t0;
    cpu = r->clk.cpu (r->clk.arg) - kd->cpu0;
    b = __atomic_exchange_n (&kd->bytes, 0, __ATOMIC_RELAXED);
    ops = __atomic_exchange_n (&kd->ops, 0, __ATOMIC_RELAXED);
    if (now > until + LATE_S || ops < MIN_OPS || secs <= 0)
      break;
    s = phase_side[kd->phase];
    {
      const double pause = load_d (&kd->pause);
      char name[96];

      kind_name (r, kd, name, sizeof name);
      if (pause > PAUSE_S && pause > PAUSE_X * secs / (double) ops) {
        gr_debug ("accel=auto: %s: trial phase %d on the %s: a pause of "
                  "%.0f ms in it (%.2f to %.2f s), measured again", name,
                  kd->phase + 1, s == GR_SIDE_GPU ? "GPU" : "CPU",
                  pause * 1e3, kd->t0 - r->born, now - r->born);
        if (++kd->again > MAX_AGAIN)
          break;
        warm (kd, now);
        return;
      }
      gr_debug ("accel=auto: %s: trial phase %d on the %s: %.0f MB/s, "
                "%.2f CPU-s/GB (%.2f to %.2f s)", name, kd->phase + 1,
                s == GR_SIDE_GPU ? "GPU" : "CPU", (double) b / secs / 1e6,
                b ? cpu / (double) b * 1e9 : 0.0, kd->t0 - r->born,
                now - r->born);
    }
    kd->secs[s] += secs;
    kd->cpu[s] += cpu;
    kd->b[s] += (double) b;
    if (++kd->phase < NPHASES)
      warm (kd, now);
    else
      decide (r, kd, now);
    return;
  }
  /* The kind paused during its trial. */
  abandon (r, kd, now);
}

static bool
prior (const struct gr_router *r, enum gr_route_kind measured, size_t bytes)
{
  return bytes >= r->from[measured];
}

enum gr_route_side
gr_router_route (struct gr_router *r, enum gr_op op, size_t bytes,
                 int nerased)
{
  enum gr_route_kind measured;
  const int kind = kind_of (r, op, nerased, &measured);
  struct kind *kd;
  double now;
  int side;

  if (!r->adaptive)
    return prior (r, measured, bytes) ? GR_SIDE_GPU : GR_SIDE_CPU;
  kd = &r->k[kind * NSIZES + size_of (bytes)];
  now = r->clk.now (r->clk.arg);
  {
    /* The interval since the kind's last operation, the longest kept
     * (a racing thread may lose one: a pause is seen by the next). */
    double prev;

    __atomic_exchange (&kd->last, &now, &prev, __ATOMIC_RELAXED);
    if (now - prev > load_d (&kd->pause))
      store_d (&kd->pause, now - prev);
  }
  if (now >= load_d (&kd->until)) {
    pthread_mutex_lock (&r->lock);
    step (r, kd, now);
    pthread_mutex_unlock (&r->lock);
  }
  side = __atomic_load_n (&kd->side, __ATOMIC_ACQUIRE);
  __atomic_add_fetch (&kd->bytes, bytes, __ATOMIC_RELAXED);
  __atomic_add_fetch (&kd->ops, 1, __ATOMIC_RELAXED);
  if (side == SIDE_PRIOR)
    return prior (r, measured, bytes) ? GR_SIDE_GPU : GR_SIDE_CPU;
  return (enum gr_route_side) side;
}

size_t
gr_router_states (struct gr_router *r, struct gr_route_state *out,
                  size_t max)
{
  size_t n = 0;

  if (!r->adaptive)
    return 0;
  pthread_mutex_lock (&r->lock);
  for (int i = 0; i < r->nkinds * NSIZES; i++) {
    const struct kind *kd = &r->k[i];
    struct gr_route_state *st = &out[n];

    if (kd->stage == ST_UNUSED)
      continue;
    if (n++ >= max)
      continue;
    kind_name (r, kd, st->kind, sizeof st->kind);
    st->decided = kd->held != SIDE_PRIOR;
    st->side = st->decided ? (enum gr_route_side) kd->held : GR_SIDE_CPU;
    st->trying = r->trial == kd;
    st->trials = kd->trials;
    st->to_gpu = kd->to_gpu;
    for (int s = 0; s < 2; s++) {
      st->mbs[s] = kd->rate[s] / 1e6;
      st->cpu_s_gb[s] = kd->cpb[s] * 1e9;
    }
  }
  pthread_mutex_unlock (&r->lock);
  return n;
}

void
gr_router_free (struct gr_router *r)
{
  char name[96];

  if (r == NULL)
    return;
  for (int i = 0; r->adaptive && i < r->nkinds * NSIZES; i++) {
    const struct kind *kd = &r->k[i];

    if (kd->stage == ST_UNUSED)
      continue;
    kind_name (r, kd, name, sizeof name);
    if (kd->trials == 0)
      gr_debug ("accel=auto: %s: no trial completed (%u abandoned when "
                "its operations paused); routed as measured at start-up",
                name, kd->abandoned);
    else
      gr_debug ("accel=auto: %s: %u trials, %u to the GPU, %u abandoned; "
                "the last: CPU %.0f MB/s %.2f CPU-s/GB, GPU %.0f MB/s %.2f "
                "CPU-s/GB", name, kd->trials, kd->to_gpu, kd->abandoned,
                kd->rate[GR_SIDE_CPU] / 1e6, kd->cpb[GR_SIDE_CPU] * 1e9,
                kd->rate[GR_SIDE_GPU] / 1e6, kd->cpb[GR_SIDE_GPU] * 1e9);
  }
  pthread_mutex_destroy (&r->lock);
  free (r->k);
  free (r);
}
