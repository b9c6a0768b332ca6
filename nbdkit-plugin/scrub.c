/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - scrub.  See scrub.h. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>

#include "job.h"
#include "log.h"
#include "scrub.h"
#include "events.h"

/* Member bytes checked per batch, all lanes together (the stripes held
 * against writes). */
#define BATCH_BYTES (4u << 20)
/* Mismatches logged one by one; the rest are counted. */
#define LOGGED 100

struct gr_scrub {
  struct gr_exec *x;
  struct gr_bitmap *b;
  bool repair;
  struct gr_job *job;
  uint64_t from;                /* stripes */
  pthread_mutex_t lock;         /* counts and reports */
  struct gr_scrub_counts counts;
  struct gr_scrub_report reports[GR_SCRUB_REPORTS];
  size_t nreports;
};

static void
report (struct gr_scrub *sc, const struct gr_scrub_report *r,
        const char *why)
{
  const struct gr_geom *g = gr_exec_geom (sc->x);
  struct gr_members *ms = gr_exec_members (sc->x);
  uint64_t nth;

  pthread_mutex_lock (&sc->lock);
  nth = sc->counts.mismatched++;
  if (r->member >= 0)
    sc->counts.located++;
  if (r->repaired)
    sc->counts.repaired++;
  if (sc->nreports < GR_SCRUB_REPORTS)
    sc->reports[sc->nreports++] = *r;
  pthread_mutex_unlock (&sc->lock);
  if (nth < LOGGED && r->member >= 0)
    gr_warn ("scrub: stripe %" PRIu64 " (array bytes %" PRIu64 "-%" PRIu64
             "): member %d (%s), %s chunk at member offset %" PRIu64
             ", does not match the rest of its stripe: %s", r->stripe,
             r->offset, r->offset + r->length - 1, r->member,
             gr_members_path (ms, r->member) ? gr_members_path (ms, r->member)
             : "-", r->index < g->k ? "its data" : "its parity",
             r->member_offset, r->repaired ? "repaired"
             : sc->repair ? "NOT repaired (the write failed)"
             : "not repaired (gpuraidctl scrub --repair)");
  else if (nth < LOGGED)
    gr_warn ("scrub: stripe %" PRIu64 " (array bytes %" PRIu64 "-%" PRIu64
             ", member offset %" PRIu64 "): parity does not match the data "
             "and %s: not repaired", r->stripe, r->offset,
             r->offset + r->length - 1, r->member_offset, why);
  else if (nth == LOGGED)
    gr_warn ("scrub: more than %d stripes do not match: the rest are "
             "counted (gpuraidctl status), not logged", LOGGED);
}

/* The job's next batch (job.h): the stripes in order. */
static enum gr_job_next
scrub_next (void *arg, bool drained, uint64_t *s, uint64_t *end)
{
  struct gr_scrub *sc = arg;

  pthread_mutex_lock (&sc->lock);       /* sc->job is set */
  pthread_mutex_unlock (&sc->lock);
  return *s < gr_exec_geom (sc->x)->stripes ? GR_JOB_GO : GR_JOB_END;
}

/* A batch's plan, its stripes held: passed over (counted) where its
 * parity waits for a resync. */
static enum gr_plan_kind
scrub_plan (void *arg, const struct gr_plan_ctx *c, uint64_t s0,
            uint64_t ns, struct gr_plan *p)
{
  struct gr_scrub *sc = arg;

  if (sc->b && gr_bitmap_pending (sc->b, s0, ns))
    return gr_plan_skip (c, s0, ns, p);
  return gr_plan_check (c, sc->repair, s0, ns, p);
}

/* A batch checked: its verdicts reported. */
static void
scrub_done (void *arg, const struct gr_plan *p, enum gr_exec_outcome o,
            const struct gr_exec_result *res)
{
  struct gr_scrub *sc = arg;
  struct gr_members *ms = gr_exec_members (sc->x);
  const struct gr_geom *g = gr_exec_geom (sc->x);
  const uint64_t width = gr_map_stripe_width (g);

  if (p->kind == GR_PLAN_REFUSE) {
    nbdkit_error ("scrub: stopped at stripe %" PRIu64 ": %d members have "
                  "failed, no redundancy is left to check against", p->s0,
                  gr_members_nfailed (ms));
    return;
  }
  pthread_mutex_lock (&sc->lock);
  sc->counts.cksum_repaired += res->repaired;
  sc->counts.cksum_unrecoverable += res->unrecoverable;
  pthread_mutex_unlock (&sc->lock);
  if (o != GR_EXEC_DONE)
    return;
  if (p->kind == GR_PLAN_SKIP) {
    pthread_mutex_lock (&sc->lock);
    sc->counts.skipped += p->nstripes;
    pthread_mutex_unlock (&sc->lock);
    return;
  }
  for (uint64_t t = 0; t < p->nstripes; t++) {
    const struct gr_verdict *v = &p->verdict[t];
    const uint64_t s = p->s0 + t;
    struct gr_scrub_report r = {
      .stripe = s, .offset = s * width, .length = width, .member = -1,
      .index = -1, .member_offset = gr_map_member_offset (g, s, 0) };
    const char *why = v->kind == GR_VERDICT_UNDECIDABLE
      ? "which chunk is wrong cannot be told with one chunk of redundancy "
      "left" : "no single chunk explains it (several are corrupt)";

    if (v->kind == GR_VERDICT_CONSISTENT)
      continue;
    if (v->kind == GR_VERDICT_LOCATED) {
      r.index = v->index;
      r.member = gr_map_member (g, s, v->index);
      if (v->index < g->k) {
        r.offset = s * width + (uint64_t) v->index * g->chunk;
        r.length = g->chunk;
      }
      r.repaired = sc->repair && res->touched[r.member] &&
        !gr_members_failed (ms, r.member);
    }
    report (sc, &r, why);
  }
  pthread_mutex_lock (&sc->lock);
  sc->counts.checked += p->nstripes;
  pthread_mutex_unlock (&sc->lock);
}

/* Each tenth: progress, and where a restart after a crash goes on. */
static bool
scrub_tick (void *arg, enum gr_job_tick why, int pct)
{
  struct gr_scrub *sc = arg;
  const uint64_t pos = gr_job_position (sc->job);
  struct gr_progress p;

  if (why != GR_JOB_TENTH)
    return true;
  gr_job_progress (sc->job, &p);
  gr_debug ("scrub: %d%% (%" PRIu64 " MiB in %.1f s)", pct,
            (p.done_bytes - p.from_bytes) >> 20, p.seconds);
  if (pos < gr_exec_geom (sc->x)->stripes)
    (void) gr_members_set_scrub_at (gr_exec_members (sc->x), pos, true);
  return true;
}

static void
scrub_finish (void *arg, enum gr_job_state st)
{
  struct gr_scrub *sc = arg;
  const uint64_t s = gr_job_position (sc->job);
  const uint64_t stripes = gr_exec_geom (sc->x)->stripes;
  struct gr_scrub_counts ct;

  gr_scrub_counts (sc, &ct);
  /* The next scrub goes on from here; one that ran to its end is
   * recorded (status shows it after a restart too). */
  if (st == GR_JOB_DONE && s >= stripes) {
    const struct gr_sb_scrub rec = {
      .end = (uint64_t) time (NULL),
      .secs = (uint32_t) (gr_job_seconds (sc->job) + 0.5),
      .repair = sc->repair,
      .checked = ct.checked < stripes ? ct.checked : stripes,
      .mismatched = ct.mismatched < ct.checked ? ct.mismatched : ct.checked,
      .repaired = ct.repaired < ct.mismatched ? ct.repaired : ct.mismatched,
      .cksum_repaired = ct.cksum_repaired,
      .cksum_unrecoverable = ct.cksum_unrecoverable,
    };

    (void) gr_members_set_scrub_done (gr_exec_members (sc->x), &rec);
  }
  else
    (void) gr_members_set_scrub_at (gr_exec_members (sc->x),
                                    s < stripes ? s : 0, true);
  gr_event (GR_EV_SCRUB_FINISHED, -1, NULL, NULL,
            "result=%s repair=%d checked=%" PRIu64 " mismatched=%" PRIu64
            " located=%" PRIu64 " repaired=%" PRIu64 " skipped=%" PRIu64
            " cksum_repaired=%" PRIu64 " cksum_unrecoverable=%" PRIu64
            " seconds=%.1f", st == GR_JOB_DONE ? "done" : st == GR_JOB_STOPPED
            ? "stopped" : "failed", sc->repair, ct.checked, ct.mismatched,
            ct.located, ct.repaired, ct.skipped, ct.cksum_repaired,
            ct.cksum_unrecoverable, gr_job_seconds (sc->job));
  if (st == GR_JOB_FAILED)
    gr_warn ("scrub failed at stripe %" PRIu64 " (see the error before): "
             "%" PRIu64 " stripes checked, %" PRIu64 " did not match",
             s, ct.checked, ct.mismatched);
  else if (ct.mismatched > ct.repaired || ct.skipped)
    gr_warn ("scrub %s: %" PRIu64 " stripes checked, %" PRIu64 " did not "
             "match, %" PRIu64 " of those located, %" PRIu64 " repaired; %"
             PRIu64 " skipped (parity waiting for a resync)",
             st == GR_JOB_DONE ? "done" : "stopped", ct.checked,
             ct.mismatched, ct.located, ct.repaired, ct.skipped);
  else
    gr_debug ("scrub %s: %" PRIu64 " stripes checked in %.1f s, %" PRIu64
              " did not match, all repaired",
              st == GR_JOB_DONE ? "done" : "stopped", ct.checked,
              gr_job_seconds (sc->job), ct.mismatched);
}

struct gr_scrub *
gr_scrub_start (struct gr_exec *x, struct gr_bitmap *b, bool repair,
                uint64_t rate, uint64_t from)
{
  const struct gr_geom *g = gr_exec_geom (x);
  const size_t n = (size_t) g->k + g->m;
  const uint64_t width = gr_map_stripe_width (g);
  struct gr_scrub *sc = calloc (1, sizeof *sc);
  struct gr_job_def def;
  uint64_t batch;

  if (sc == NULL) {
    nbdkit_error ("scrub: %m");
    return NULL;
  }
  pthread_mutex_init (&sc->lock, NULL);
  sc->x = x;
  sc->b = b;
  sc->repair = repair;
  sc->from = from < g->stripes ? from : 0;
  batch = BATCH_BYTES / g->chunk / GR_EXEC_LANES;
  if (batch < 1)
    batch = 1;
  if (batch > g->stripes)
    batch = g->stripes;
  def = (struct gr_job_def) {
    .batches = { .lock = repair ? GR_LOCK_EXCL : GR_LOCK_SHARED,
                 .policy = GR_MIO_FAIL_MEMBER, .plan = scrub_plan,
                 .done = scrub_done, .go_on_unrecoverable = true },
    .batch = batch,
    /* plan-jobs.c: what was read, computed, fixes, and VERIFY's room */
    .scratch = ((n + g->m + 1) * batch + n) * g->chunk,
    .total_bytes = g->stripes * width, .next = scrub_next,
    .tick = scrub_tick, .finish = scrub_finish, .arg = sc,
  };
  gr_debug ("scrub%s: stripes %" PRIu64 " to %" PRIu64, repair
            ? " --repair" : "", sc->from, g->stripes - 1);
  /* The hooks read sc->job: set before they run (they take sc->lock
   * first). */
  pthread_mutex_lock (&sc->lock);
  sc->job = gr_job_start (x, &def, rate, sc->from, sc->from * width);
  pthread_mutex_unlock (&sc->lock);
  if (sc->job == NULL) {
    pthread_mutex_destroy (&sc->lock);
    free (sc);
    return NULL;
  }
  return sc;
}

void
gr_scrub_progress (struct gr_scrub *sc, struct gr_progress *out)
{
  gr_job_progress (sc->job, out);
}

bool
gr_scrub_repairing (const struct gr_scrub *sc)
{
  return sc->repair;
}

void
gr_scrub_counts (struct gr_scrub *sc, struct gr_scrub_counts *out)
{
  struct gr_progress p;

  gr_job_progress (sc->job, &p);
  pthread_mutex_lock (&sc->lock);
  *out = sc->counts;
  pthread_mutex_unlock (&sc->lock);
  out->bytes = p.done_bytes - p.from_bytes;
}

size_t
gr_scrub_reports (struct gr_scrub *sc, struct gr_scrub_report *out,
                  size_t max)
{
  size_t n;

  pthread_mutex_lock (&sc->lock);
  n = sc->nreports < max ? sc->nreports : max;
  memcpy (out, sc->reports, n * sizeof *out);
  pthread_mutex_unlock (&sc->lock);
  return n;
}

void
gr_scrub_set_rate (struct gr_scrub *sc, uint64_t rate)
{
  gr_job_set_rate (sc->job, rate);
}

void
gr_scrub_stop (struct gr_scrub *sc)
{
  if (sc)
    gr_job_stop (sc->job);
}

void
gr_scrub_free (struct gr_scrub *sc)
{
  if (sc == NULL)
    return;
  gr_job_free (sc->job);
  pthread_mutex_destroy (&sc->lock);
  free (sc);
}
