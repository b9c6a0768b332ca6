/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the data paths.  See io.h. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "io.h"
#include "join.h"
#include "log.h"

/* -D gpuraid.gpu_copies=0: a degraded read's survivors whose O_DIRECT
 * would bounce are read into the request all the same (through the
 * storage library's bounce buffer), not copied in by the GPU, and a
 * full-stripe write's data is written from the request (plan.h; for
 * comparison). */
NBDKIT_DLL_PUBLIC int gpuraid_debug_gpu_copies = 1;

/* A request that cannot be served: EIO.  Logged for the first few and
 * then every 1024th, so that a failed array does not flood the log. */
static int
fail_eio (struct gr_exec *x, const char *op, uint64_t offset)
{
  static uint64_t count;
  uint64_t c = __atomic_add_fetch (&count, 1, __ATOMIC_RELAXED);
  const struct gr_geom *g = gr_exec_geom (x);

  if (c <= 5 || c % 1024 == 0)
    nbdkit_error ("%s at offset %" PRIu64 ": too many failed members "
                  "(%d of %d, the array tolerates %d); %" PRIu64
                  " requests failed so far", op, offset,
                  gr_members_nfailed (gr_exec_members (x)), g->k + g->m,
                  g->m, c);
  errno = EIO;
  return -1;
}

static const char *
req_name (enum gr_req req)
{
  switch (req) {
  case GR_REQ_READ: return "read";
  case GR_REQ_WRITE: return "write";
  case GR_REQ_TRIM: return "trim";
  case GR_REQ_RESYNC: return "resync";
  default: return "zero";
  }
}

/* A request's plans begun (exec.h: its whole stripes and those it joins,
 * which read nothing), not yet finished: each with the part of another
 * write it took (join.h) or NULL, and where it starts. */
struct begun {
  struct gr_exec_begun bg[GR_EXEC_BEGUN_MAX];
  struct gr_join_part *part[GR_EXEC_BEGUN_MAX];
  uint64_t pos[GR_EXEC_BEGUN_MAX];
  int n;
};

/* Plan p of a request of kind req done: bad if it wrote while more than
 * m members are lost (it cannot be read back).  The part it took (or
 * NULL) ends: written with its stripe, or (planned otherwise, or bad)
 * back to its owner or failed.  Is it bad? */
static bool
plan_done (struct gr_exec *x, enum gr_req req, struct gr_join_req *jr,
           struct gr_join_part *part, const struct gr_plan *p)
{
  const bool bad = req != GR_REQ_READ &&
    gr_members_too_degraded (gr_exec_members (x));

  if (part)
    gr_join_written (gr_exec_join (x), jr, part, bad ? EIO : 0,
                     !bad && p->kind != GR_PLAN_WRITE_JOINED);
  return bad;
}

/* Plan and run [pos, end) of a request that starts at offset; buf is its
 * buffer (NULL for zero and trim), pinned if it is page-locked for the
 * GPU (coding.h); jr its registration as a write whose parts of stripes
 * may be joined with others' (join.h), or NULL; part, another write's
 * part of pos's stripe that it took (or NULL); bn, where plans that read
 * nothing may be begun (NULL: each run at once).  0 or -1. */
static int
run_range (struct gr_exec *x, enum gr_req req, uint8_t *buf, bool pinned,
           uint64_t offset, uint64_t pos, uint64_t end,
           struct gr_join_req *jr, struct gr_join_part *part,
           struct begun *bn, struct gr_exec_result *res)
{
  struct gr_exec_snap sn;
  uint64_t plen;
  struct gr_plan_ctx c;
  struct gr_plan_peer peer;
  struct gr_plan *p;
  bool bad;

  while (pos < end) {
    /* A part of a stripe taken by the concurrent write that has the
     * rest; or, that write's part taken, the whole stripe (kept on a
     * replan). */
    if (jr && part == NULL) {
      switch (gr_join_at (gr_exec_join (x), jr, pos, end, false, &plen,
                          &part)) {
      case GR_JOIN_GIVEN:
        pos += plen;
        continue;
      case GR_JOIN_ALONE:
      case GR_JOIN_TAKEN:
      case GR_JOIN_LATER:       /* not asked for */
        break;
      }
    }
    p = bn && bn->n < GR_EXEC_BEGUN_MAX ? gr_exec_begun_plan (x, bn->n)
      : gr_exec_plan (x);
    if (p == NULL)
      return -1;
    gr_exec_plan_ctx (x, &sn, &c);
    if (part) {
      peer = (struct gr_plan_peer) { part->offset, part->len };
      c.peer = &peer;
    }
    c.req_pinned = pinned;
    /* O_DIRECT's copies of a read's or a write's blocks by the GPU
     * (plan.h). */
    c.req_addr = (uintptr_t) (buf ? buf + (pos - offset) : NULL);
    c.gpu_copies = gpuraid_debug_gpu_copies && pinned &&
      (req == GR_REQ_READ || req == GR_REQ_WRITE);
    gr_plan_next (&c, req, pos, end - pos, p);
    if (p->kind == GR_PLAN_REFUSE)
      return fail_eio (x, req_name (req), pos);
    plen = p->len;
    if (p->kind == GR_PLAN_SKIP) {
      pos += plen;
      continue;
    }
    gr_verbose ("%s: plan %s at %" PRIu64 " (%" PRIu64 " bytes, stripes %"
                PRIu64 "+%" PRIu64 "): %zu reads, %zu writes",
                req_name (req), gr_plan_kind_name (p->kind), pos, plen,
                p->s0, p->nstripes, p->nread, p->nwrite);
    if (bn && bn->n < GR_EXEC_BEGUN_MAX &&
        gr_exec_begin (x, p, bn->n, buf ? buf + (pos - offset) : NULL,
                       part ? part->buf : NULL, &bn->bg[bn->n])) {
      bn->part[bn->n] = part;
      bn->pos[bn->n++] = pos;
      part = NULL;
      pos += plen;
      continue;
    }
    switch (gr_exec_run (x, p, buf ? buf + (pos - offset) : NULL,
                         part ? part->buf : NULL, GR_MIO_FAIL_MEMBER, res)) {
    case GR_EXEC_DONE:
      bad = plan_done (x, req, jr, part, p);
      part = NULL;
      if (bad)
        return fail_eio (x, req_name (req), pos);
      pos += plen;
      break;
    case GR_EXEC_REPLAN:
      break;
    case GR_EXEC_UNSUPPORTED:
      /* Some members may have punched part of it: zero the range for
       * sure (trim is advisory: the rest of it is skipped). */
      if (req == GR_REQ_TRIM) {
        if (run_range (x, GR_REQ_ZERO_MAY_TRIM, NULL, false, pos, pos,
                       pos + plen, NULL, NULL, NULL, res) == -1)
          return -1;
        pos += plen;
      }
      break;
    case GR_EXEC_ERROR:
      return -1;
    }
  }
  return 0;
}

/* Finish the plans begun, in order (all of them, whatever fails): a
 * plan made again is run at once.  0 or -1. */
static int
finish_begun (struct gr_exec *x, uint8_t *buf, bool pinned, uint64_t offset,
              struct gr_join_req *jr, struct begun *bn,
              struct gr_exec_result *res)
{
  int r = 0;

  for (int i = 0; i < bn->n; i++) {
    const struct gr_plan *p = bn->bg[i].p;
    const uint64_t pos = bn->pos[i];

    switch (gr_exec_finish (x, &bn->bg[i], GR_MIO_FAIL_MEMBER, res)) {
    case GR_EXEC_DONE:
      if (plan_done (x, GR_REQ_WRITE, jr, bn->part[i], p) && r == 0)
        r = fail_eio (x, "write", pos);
      break;
    case GR_EXEC_REPLAN:
    case GR_EXEC_UNSUPPORTED:   /* not of a write */
      if (run_range (x, GR_REQ_WRITE, buf, pinned, offset, pos, pos + p->len,
                     jr, bn->part[i], NULL, res) == -1)
        r = -1;
      break;
    case GR_EXEC_ERROR:
      r = -1;                   /* its part handed back when jr leaves */
      break;
    }
  }
  bn->n = 0;
  return r;
}

/* Plan and run [offset, offset + len) of a request (run_range).  A write
 * that may be joined (jr) begins its whole stripes (exec.h), then meets
 * the writes in flight beside it at its parts of stripes, the first
 * then the last (join.h): a part taken by one is done; one of theirs
 * taken, the stripe is begun joined; with none in flight there, the
 * part waits until the plans begun are finished (one coming meanwhile
 * takes it); else it is planned alone.  Then the plans begun are
 * finished (their encodes in one batch, one wait), then the parts that
 * waited, joined if they can be now. */
static int
run (struct gr_exec *x, enum gr_req req, uint8_t *buf, bool pinned,
     uint64_t offset, uint64_t len, struct gr_join_req *jr,
     struct gr_exec_result *res)
{
  const uint64_t W = gr_map_stripe_width (gr_exec_geom (x));
  const uint64_t end = offset + len;
  uint64_t h, t, ends[2][2], later[2][2], plen;
  struct gr_join_part *part;
  struct begun bn = { .n = 0 };
  int nlater = 0, r;

  gr_exec_count_request (x);
  if (jr == NULL)
    return run_range (x, req, buf, pinned, offset, offset, end, NULL, NULL,
                      NULL, res);
  h = (offset + W - 1) / W * W;
  if (h > end)
    h = end;
  t = end / W * W;
  if (t < h)
    t = h;
  r = run_range (x, req, buf, pinned, offset, h, t, NULL, NULL, &bn, res);
  ends[0][0] = offset;
  ends[0][1] = h;
  ends[1][0] = t;
  ends[1][1] = end;
  for (int i = 0; i < 2 && r == 0; i++) {
    if (ends[i][0] == ends[i][1])
      continue;
    part = NULL;
    switch (gr_join_at (gr_exec_join (x), jr, ends[i][0], ends[i][1], true,
                        &plen, &part)) {
    case GR_JOIN_GIVEN:
      break;
    case GR_JOIN_LATER:
      later[nlater][0] = ends[i][0];
      later[nlater++][1] = ends[i][1];
      break;
    case GR_JOIN_TAKEN:
      r = run_range (x, req, buf, pinned, offset, ends[i][0], ends[i][1],
                     jr, part, &bn, res);
      break;
    case GR_JOIN_ALONE:
      r = run_range (x, req, buf, pinned, offset, ends[i][0], ends[i][1],
                     NULL, NULL, &bn, res);
      break;
    }
  }
  if (finish_begun (x, buf, pinned, offset, jr, &bn, res) == -1)
    r = -1;
  for (int i = 0; i < nlater && r == 0; i++)
    r = run_range (x, req, buf, pinned, offset, later[i][0], later[i][1], jr,
                   NULL, NULL, res);
  return r;
}

/* fdatasync the members a request wrote (FUA). */
static int
sync_touched (struct gr_exec *x, const struct gr_exec_result *res)
{
  struct gr_members *ms = gr_exec_members (x);
  int i;

  for (i = 0; i < gr_members_n (ms); i++)
    if (res->touched[i] && gr_members_sync (ms, i) == -1)
      return -1;
  return 0;
}

int
gr_io_pread (struct gr_exec *x, void *buf, uint32_t count, uint64_t offset)
{
  struct gr_coding *coding = gr_exec_coding (x);
  struct gr_exec_result res = { .rewritten = 0 };
  bool pinned;
  int r;

  gr_verbose ("pread count=%" PRIu32 " offset=%" PRIu64, count, offset);
  /* nbdkit's buffer page-locked in place: a degraded read's GPU
   * reconstruct writes straight into it.  A read with no member failed
   * codes nothing: not page-locked, so that its thread's first read does
   * not wait in line with every new thread's registration
   * (docs/performance.md, session 61).  A member failing meanwhile: its
   * reconstructs staged. */
  pinned = gr_members_nfailed (gr_exec_members (x)) > 0 &&
    gr_coding_request_begin (coding, buf, count);
  r = run (x, GR_REQ_READ, buf, pinned, offset, count, NULL, &res);
  if (pinned)
    gr_coding_request_end (coding);
  return r;
}

/* A write-like request: dirty first, FUA after. */
static int
write_req (struct gr_exec *x, enum gr_req req, const void *buf,
           uint64_t offset, uint64_t count, bool fua)
{
  struct gr_coding *coding = gr_exec_coding (x);
  struct gr_join *join = gr_exec_join (x);
  struct gr_exec_result res = { .rewritten = 0 };
  struct gr_join_req jr;
  bool pinned, back;
  int r, err;

  if (gr_members_begin_write (gr_exec_members (x)) == -1)
    return -1;
  /* nbdkit's buffer page-locked in place: the GPU reads the data from
   * it. */
  pinned = buf && gr_coding_request_begin (coding, (void *) buf, count);
  /* Its parts of stripes may be joined with other writes' (its own
   * bytes stay in its buffer until it leaves: not with FUA). */
  if (req != GR_REQ_WRITE || fua ||
      (join && !gr_join_enter (join, &jr, offset, count, (uint8_t *) buf)))
    join = NULL;
  gr_coding_writer_enter (coding);
  r = run (x, req, (uint8_t *) buf, pinned, offset, count,
           join ? &jr : NULL, &res);
  gr_coding_writer_leave (coding);
  if (join && (err = gr_join_leave (join, &jr, &back)) != 0 && r == 0) {
    nbdkit_error ("write at offset %" PRIu64 ": the stripe it shared with "
                  "another write failed: %s", offset, strerror (err));
    errno = err;
    r = -1;
  }
  /* Its parts handed back: written alone. */
  for (int i = 0; join && back && r == 0 && i < jr.nparts; i++)
    if (jr.parts[i].state == GR_JOIN_PART_BACK)
      r = run_range (x, req, jr.parts[i].buf, pinned, jr.parts[i].offset,
                     jr.parts[i].offset,
                     jr.parts[i].offset + jr.parts[i].len, NULL, NULL, NULL,
                     &res);
  if (pinned)
    gr_coding_request_end (coding);
  if (r == -1)
    return -1;
  return fua ? sync_touched (x, &res) : 0;
}

int
gr_io_pwrite (struct gr_exec *x, const void *buf, uint32_t count,
              uint64_t offset, bool fua)
{
  gr_verbose ("pwrite count=%" PRIu32 " offset=%" PRIu64 "%s", count,
              offset, fua ? " fua" : "");
  return write_req (x, GR_REQ_WRITE, buf, offset, count, fua);
}

/* Does the range cover whole stripes, and does it have parts of
 * stripes? */
static void
shape (struct gr_exec *x, uint64_t offset, uint64_t count, bool *whole,
       bool *partial)
{
  const struct gr_geom *g = gr_exec_geom (x);
  struct gr_walk w;
  struct gr_span sp;

  *whole = *partial = false;
  gr_map_walk_init (&w, g, offset, count);
  while (gr_map_walk_next (&w, &sp))
    if (gr_map_span_whole (g, &sp))
      *whole = true;
    else
      *partial = true;
}

int
gr_io_zero (struct gr_exec *x, uint32_t count, uint64_t offset,
            bool may_trim, bool fast, bool fua)
{
  struct gr_members *ms = gr_exec_members (x);
  bool whole, partial;

  gr_verbose ("zero count=%" PRIu32 " offset=%" PRIu64 "%s%s%s", count,
              offset, may_trim ? " may_trim" : "", fast ? " fast" : "",
              fua ? " fua" : "");
  /* Only whole stripes can be zeroed faster than by writing; refuse a
   * fast zero before changing anything. */
  shape (x, offset, count, &whole, &partial);
  if (fast && (partial || !whole ||
               (!gr_members_falloc_ok (ms, GR_MIO_PUNCH) &&
                !gr_members_falloc_ok (ms, GR_MIO_ZERO)))) {
    errno = ENOTSUP;
    return -1;
  }
  return write_req (x, may_trim ? GR_REQ_ZERO_MAY_TRIM : GR_REQ_ZERO, NULL,
                    offset, count, fua);
}

int
gr_io_trim (struct gr_exec *x, uint32_t count, uint64_t offset, bool fua)
{
  bool whole, partial;

  gr_verbose ("trim count=%" PRIu32 " offset=%" PRIu64 "%s", count, offset,
              fua ? " fua" : "");
  /* Trim is advisory: parts of stripes are left alone, and without
   * punch-hole nothing is done. */
  shape (x, offset, count, &whole, &partial);
  if (!whole || !gr_members_falloc_ok (gr_exec_members (x), GR_MIO_PUNCH))
    return 0;
  return write_req (x, GR_REQ_TRIM, NULL, offset, count, fua);
}

int
gr_io_flush (struct gr_exec *x)
{
  struct gr_members *ms = gr_exec_members (x);
  int i;

  gr_verbose ("flush");
  for (i = 0; i < gr_members_n (ms); i++)
    if (gr_members_sync (ms, i) == -1)
      return -1;
  if (gr_members_too_degraded (ms))
    return fail_eio (x, "flush", 0);
  return 0;
}
