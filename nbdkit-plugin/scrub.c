/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - scrub.  See scrub.h. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "pace.h"
#include "scrub.h"

/* Member bytes checked per batch (the stripes held against writes). */
#define BATCH_BYTES (4u << 20)
/* Mismatches logged one by one; the rest are counted. */
#define LOGGED 100

struct gr_scrub {
  struct gr_exec *x;
  struct gr_bitmap *b;
  bool repair;
  pthread_t thread;
  bool joinable;
  struct gr_pace *pace;
  uint64_t from, batch;         /* stripes */
  uint8_t *buf;                 /* batch stripes of n chunks */
  uint8_t *parity;              /* batch stripes of m chunks, recomputed */
  bool pinned;                  /* buf and parity from the coder */
  uint8_t *tmp;                 /* one stripe, for the examination */
  uint8_t *fix;                 /* one chunk: the corrupt one rebuilt */
  uint8_t **blocks;             /* batch * n */
  /* Atomic: array bytes done (from 0) and to do, bytes done by this run
   * (the pace's count), enum gr_resync_state. */
  uint64_t done, total, moved;
  int state;
  pthread_mutex_t lock;         /* counts and reports */
  struct gr_scrub_counts counts;
  struct gr_scrub_report reports[GR_SCRUB_REPORTS];
  size_t nreports;
};

/* Does stripe blk (n chunks; lost[] unavailable, plus excl if >= 0) hold
 * one codeword?  The live chunks beyond the first k are rebuilt into
 * sc->tmp from those and compared; so the excluded chunk's rebuilt bytes
 * are left in sc->tmp.  -1 when it cannot be checked (a coding error, or
 * no redundancy left), else 0 or 1. */
static int
consistent (struct gr_scrub *sc, uint8_t *const *blk, const bool *lost,
            int excl)
{
  const struct gr_geom *g = gr_exec_geom (sc->x);
  struct gr_coding *cd = gr_exec_coding (sc->x);
  const int k = g->k, n = g->k + g->m;
  const size_t chunk = g->chunk;
  bool gone[GR_MAX_MEMBERS], surv[GR_MAX_MEMBERS] = { false };
  int er[GR_MAX_MEMBERS], sv[GR_MAX_MEMBERS], ner = 0, ncheck = 0, c;
  uint8_t *t[GR_MAX_MEMBERS];

  memcpy (gone, lost, n * sizeof *gone);
  if (excl >= 0)
    gone[excl] = true;
  if (gr_reconstruct_choose (k, g->m, gone, NULL, er, sv) < 0)
    return -1;
  for (c = 0; c < k; c++)
    surv[sv[c]] = true;
  for (c = 0; c < n; c++) {
    t[c] = surv[c] ? blk[c] : sc->tmp + (size_t) c * chunk;
    if (!surv[c])
      er[ner++] = c;
    if (!surv[c] && !gone[c])
      ncheck++;
  }
  if (ncheck == 0)
    return -1;
  if (gr_coding_reconstruct (cd, gr_coding_route (cd, GR_OP_RECONSTRUCT,
                                                  (size_t) k * chunk, ner),
                             er, ner, t, chunk) == -1)
    return -1;
  for (c = 0; c < n; c++)
    if (!surv[c] && !gone[c] && memcmp (t[c], blk[c], chunk) != 0)
      return 0;
  return 1;
}

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

/* Stripe s (blk: its n chunks, lost[]: unavailable) did not match: find
 * the corrupt chunk, repair it if asked, report. */
static void
examine (struct gr_scrub *sc, uint64_t s, uint8_t *const *blk,
         const bool *lost, int nlost)
{
  const struct gr_geom *g = gr_exec_geom (sc->x);
  const int n = g->k + g->m;
  const uint64_t width = gr_map_stripe_width (g);
  struct gr_scrub_report r = {
    .stripe = s, .offset = s * width, .length = width, .member = -1,
    .index = -1, .member_offset = gr_map_member_offset (g, s, 0) };
  const char *why = "which chunk is wrong cannot be told with one chunk "
    "of redundancy left";
  int found = -1, c;

  if (g->m - nlost >= 2) {
    why = "no single chunk explains it (several are corrupt)";
    for (c = 0; c < n; c++) {
      if (lost[c] || consistent (sc, blk, lost, c) != 1)
        continue;
      if (found >= 0) {
        found = -2;
        break;
      }
      found = c;
      memcpy (sc->fix, sc->tmp + (size_t) c * g->chunk, g->chunk);
    }
  }
  if (found >= 0) {
    r.index = found;
    r.member = gr_map_member (g, s, found);
    if (found < g->k) {
      r.offset = s * width + (uint64_t) found * g->chunk;
      r.length = g->chunk;
    }
    if (sc->repair) {
      struct gr_mio v = { .kind = GR_MIO_WRITE, .member = r.member,
                          .off = r.member_offset, .len = g->chunk,
                          .buf = sc->fix };

      gr_members_io (gr_exec_members (sc->x), &v, 1, GR_MIO_FAIL_MEMBER);
      r.repaired = v.result == GR_MIO_DONE;
    }
  }
  report (sc, &r, why);
}

/* Check stripes [s0, s0 + ns). */
static enum gr_exec_outcome
scrub_batch (struct gr_scrub *sc, uint64_t s0, uint64_t ns)
{
  const struct gr_geom *g = gr_exec_geom (sc->x);
  struct gr_members *ms = gr_exec_members (sc->x);
  struct gr_coding *cd = gr_exec_coding (sc->x);
  const int k = g->k, m = g->m, n = k + m;
  const size_t chunk = g->chunk;
  enum gr_exec_outcome r = GR_EXEC_DONE;
  bool failed[GR_MAX_MEMBERS];
  struct gr_mio *v = malloc (ns * (size_t) n * sizeof *v);
  size_t nv = 0;
  uint64_t s;
  int nlost = 0, c;

  if (v == NULL) {
    nbdkit_error ("scrub: %m");
    return GR_EXEC_ERROR;
  }
  gr_exec_lock (sc->x, s0, ns, sc->repair ? GR_LOCK_EXCL : GR_LOCK_SHARED);
  if (sc->b && gr_bitmap_pending (sc->b, s0, ns)) {
    pthread_mutex_lock (&sc->lock);
    sc->counts.skipped += ns;
    pthread_mutex_unlock (&sc->lock);
    goto out;
  }
  (void) gr_members_snapshot (ms, failed);
  for (c = 0; c < n; c++)
    nlost += failed[c];
  if (nlost >= m) {
    r = GR_EXEC_REPLAN;         /* nothing to check against: the caller
                                 * stops */
    goto out;
  }
  for (s = 0; s < ns; s++)
    for (c = 0; c < n; c++) {
      const int mb = gr_map_member (g, s0 + s, c);

      sc->blocks[s * n + c] = sc->buf + (s * n + (size_t) c) * chunk;
      if (!failed[mb])
        v[nv++] = (struct gr_mio) {
          .kind = GR_MIO_READ, .member = mb,
          .off = gr_map_member_offset (g, s0 + s, 0), .len = chunk,
          .buf = sc->blocks[s * n + c] };
    }
  gr_members_io (ms, v, nv, GR_MIO_FAIL_MEMBER);
  for (size_t i = 0; i < nv; i++)
    if (v[i].result != GR_MIO_DONE) {
      r = GR_EXEC_REPLAN;       /* a member failed: again without it */
      goto out;
    }
  if (nlost == 0) {
    /* The batch's parity again, in one operation, beside what was read. */
    for (s = 0; s < ns; s++)
      for (c = k; c < n; c++)
        sc->blocks[s * n + c] = sc->parity + (s * m + (size_t) (c - k))
          * chunk;
    if (gr_coding_encode (cd, gr_coding_route (cd, GR_OP_ENCODE,
                                               ns * (size_t) k * chunk, 0),
                          sc->blocks, ns, chunk) == -1) {
      r = GR_EXEC_ERROR;
      goto out;
    }
  }
  for (s = 0; s < ns; s++) {
    uint8_t **blk = sc->blocks + s * n;
    bool lost[GR_MAX_MEMBERS];
    bool ok;

    for (c = 0; c < n; c++)
      lost[c] = failed[gr_map_member (g, s0 + s, c)];
    if (nlost == 0) {
      ok = memcmp (sc->parity + s * m * chunk,
                   sc->buf + (s * n + (size_t) k) * chunk,
                   (size_t) m * chunk) == 0;
      for (c = k; c < n; c++)     /* what was read, for the examination */
        blk[c] = sc->buf + (s * n + (size_t) c) * chunk;
    }
    else {
      const int q = consistent (sc, blk, lost, -1);

      if (q < 0) {
        r = GR_EXEC_ERROR;
        goto out;
      }
      ok = q == 1;
    }
    if (!ok)
      examine (sc, s0 + s, blk, lost, nlost);
  }
  pthread_mutex_lock (&sc->lock);
  sc->counts.checked += ns;
  pthread_mutex_unlock (&sc->lock);
 out:
  gr_exec_unlock (sc->x, s0, ns);
  free (v);
  return r;
}

static void *
scrub_thread (void *arg)
{
  struct gr_scrub *sc = arg;
  struct gr_members *ms = gr_exec_members (sc->x);
  const struct gr_geom *g = gr_exec_geom (sc->x);
  const uint64_t width = gr_map_stripe_width (g);
  enum gr_resync_state st = GR_RESYNC_DONE;
  struct gr_scrub_counts ct;
  uint64_t s = sc->from;
  int last_pct = (int) (s * 10 / g->stripes);

  gr_debug ("scrub%s: stripes %" PRIu64 " to %" PRIu64, sc->repair
            ? " --repair" : "", s, g->stripes - 1);
  while (s < g->stripes) {
    uint64_t ns = gr_pace_batch (sc->pace, width, sc->batch);
    uint64_t moved;

    if (ns > g->stripes - s)
      ns = g->stripes - s;

    switch (scrub_batch (sc, s, ns)) {
    case GR_EXEC_DONE:
      break;
    case GR_EXEC_REPLAN:
      if (gr_members_nfailed (ms) < g->m)
        continue;               /* a member failed: again without it */
      nbdkit_error ("scrub: stopped at stripe %" PRIu64 ": %d members have "
                    "failed, no redundancy is left to check against", s,
                    gr_members_nfailed (ms));
      st = GR_RESYNC_FAILED;
      goto end;
    default:
      st = GR_RESYNC_FAILED;
      goto end;
    }
    s += ns;
    __atomic_store_n (&sc->done, s * width, __ATOMIC_RELAXED);
    moved = __atomic_add_fetch (&sc->moved, ns * width, __ATOMIC_RELAXED);
    if (s * 10 / g->stripes > (uint64_t) last_pct) {
      last_pct = (int) (s * 10 / g->stripes);
      gr_debug ("scrub: %d0%% (%" PRIu64 " MiB in %.1f s)", last_pct,
                moved >> 20, gr_pace_seconds (sc->pace));
      if (s < g->stripes)       /* where a restart after a crash goes on */
        (void) gr_members_set_scrub_at (ms, s, true);
    }
    if (s < g->stripes && gr_pace_wait (sc->pace, moved)) {
      st = GR_RESYNC_STOPPED;
      break;
    }
  }
 end:
  /* The next scrub goes on from here, or starts again at the end. */
  (void) gr_members_set_scrub_at (ms, s < g->stripes ? s : 0, true);
  gr_scrub_counts (sc, &ct);
  if (st == GR_RESYNC_FAILED)
    gr_warn ("scrub failed at stripe %" PRIu64 " (see the error before): "
             "%" PRIu64 " stripes checked, %" PRIu64 " did not match",
             s, ct.checked, ct.mismatched);
  else if (ct.mismatched > ct.repaired || ct.skipped)
    gr_warn ("scrub %s: %" PRIu64 " stripes checked, %" PRIu64 " did not "
             "match, %" PRIu64 " of those located, %" PRIu64 " repaired; %"
             PRIu64 " skipped (parity waiting for a resync)",
             st == GR_RESYNC_DONE ? "done" : "stopped", ct.checked,
             ct.mismatched, ct.located, ct.repaired, ct.skipped);
  else
    gr_debug ("scrub %s: %" PRIu64 " stripes checked in %.1f s, %" PRIu64
              " did not match, all repaired",
              st == GR_RESYNC_DONE ? "done" : "stopped", ct.checked,
              gr_pace_seconds (sc->pace), ct.mismatched);
  gr_pace_finish (sc->pace);
  __atomic_store_n (&sc->state, st, __ATOMIC_RELEASE);
  return NULL;
}

struct gr_scrub *
gr_scrub_start (struct gr_exec *x, struct gr_bitmap *b, bool repair,
                uint64_t rate, uint64_t from)
{
  const struct gr_geom *g = gr_exec_geom (x);
  struct gr_coding *cd = gr_exec_coding (x);
  const size_t n = (size_t) g->k + g->m;
  struct gr_scrub *sc = calloc (1, sizeof *sc);
  int e;

  if (sc == NULL)
    goto nomem;
  pthread_mutex_init (&sc->lock, NULL);
  sc->x = x;
  sc->b = b;
  sc->repair = repair;
  sc->from = from < g->stripes ? from : 0;
  sc->batch = BATCH_BYTES / g->chunk ? BATCH_BYTES / g->chunk : 1;
  sc->total = g->stripes * gr_map_stripe_width (g);
  sc->done = sc->from * gr_map_stripe_width (g);
  sc->state = GR_RESYNC_RUNNING;
  sc->pace = gr_pace_new (rate, gr_exec_requests (x));
  /* Page-locked where a GPU codes, so that its copies run at full speed. */
  sc->buf = gr_coding_host_alloc (cd, sc->batch * n * g->chunk);
  sc->parity = gr_coding_host_alloc (cd, sc->batch * g->m * g->chunk);
  sc->pinned = sc->buf != NULL && sc->parity != NULL;
  if (!sc->pinned) {
    gr_coding_host_free (cd, sc->buf);
    gr_coding_host_free (cd, sc->parity);
    sc->buf = malloc (sc->batch * n * g->chunk);
    sc->parity = malloc (sc->batch * g->m * g->chunk);
  }
  sc->tmp = malloc (n * g->chunk);
  sc->fix = malloc (g->chunk);
  sc->blocks = malloc (sc->batch * n * sizeof *sc->blocks);
  if (sc->pace == NULL || sc->buf == NULL || sc->parity == NULL ||
      sc->tmp == NULL || sc->fix == NULL || sc->blocks == NULL)
    goto nomem;
  e = pthread_create (&sc->thread, NULL, scrub_thread, sc);
  if (e != 0) {
    errno = e;
    nbdkit_error ("scrub: pthread_create: %m");
    goto fail;
  }
  sc->joinable = true;
  return sc;

 nomem:
  nbdkit_error ("scrub: %m");
 fail:
  if (sc) {
    sc->state = GR_RESYNC_FAILED;
    gr_scrub_free (sc);
  }
  return NULL;
}

void
gr_scrub_progress (struct gr_scrub *sc, struct gr_resync_progress *out)
{
  out->state = __atomic_load_n (&sc->state, __ATOMIC_ACQUIRE);
  out->done_bytes = __atomic_load_n (&sc->done, __ATOMIC_RELAXED);
  out->total_bytes = sc->total;
  out->from_bytes = sc->from * gr_map_stripe_width (gr_exec_geom (sc->x));
  out->seconds = gr_pace_seconds (sc->pace);
  out->rate_limit = gr_pace_rate (sc->pace);
}

bool
gr_scrub_repairing (const struct gr_scrub *sc)
{
  return sc->repair;
}

void
gr_scrub_counts (struct gr_scrub *sc, struct gr_scrub_counts *out)
{
  pthread_mutex_lock (&sc->lock);
  *out = sc->counts;
  pthread_mutex_unlock (&sc->lock);
  out->bytes = __atomic_load_n (&sc->moved, __ATOMIC_RELAXED);
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
  gr_pace_set_rate (sc->pace, rate,
                    __atomic_load_n (&sc->moved, __ATOMIC_RELAXED));
}

void
gr_scrub_stop (struct gr_scrub *sc)
{
  if (sc == NULL || !sc->joinable)
    return;
  gr_pace_stop (sc->pace);
  pthread_join (sc->thread, NULL);
  sc->joinable = false;
}

void
gr_scrub_free (struct gr_scrub *sc)
{
  struct gr_coding *cd;

  if (sc == NULL)
    return;
  gr_scrub_stop (sc);
  cd = gr_exec_coding (sc->x);
  if (sc->pinned) {
    gr_coding_host_free (cd, sc->buf);
    gr_coding_host_free (cd, sc->parity);
  }
  else {
    free (sc->buf);
    free (sc->parity);
  }
  free (sc->tmp);
  free (sc->fix);
  free (sc->blocks);
  gr_pace_free (sc->pace);
  pthread_mutex_destroy (&sc->lock);
  free (sc);
}
