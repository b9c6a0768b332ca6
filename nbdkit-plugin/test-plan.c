/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - test of the planner (plan.c), in the spirit of Linux's
 * raid6test: for every (k, m) with k + m <= 7, RS and CRS, and every set
 * of failed members of size <= m + 1, requests over sampled ranges
 * (aligned, unaligned, across stripes) are planned and the plans are run
 * by a simulated executor on in-memory members with the ref backend (RS;
 * CRS on the best backend).
 * Asserted:
 *   - a plan never reads or writes a failed member;
 *   - it reads no more than needed (exactly the request for healthy
 *     reads; k survivors over the coding range for a degraded read or
 *     write; the cheaper of read-modify-write and reconstruct-write);
 *   - the plans of a request tile it exactly;
 *   - refusal (EIO) exactly when more than m members are lost;
 *   - reads return the reference image, healthy and degraded, after
 *     writes, zeros and trims made healthy and degraded; the live members
 *     always hold one consistent codeword per stripe; a resync repairs
 *     corrupted parity;
 *   - the jobs' batches: a rebuild of every subset of every failed set
 *     (beyond 5 members: each member and all; random fronts) leaves each replacement the reference chunks from
 *     its front on and nothing else written, reading k chunks a stripe;
 *     a check (scrub) finds every stripe consistent but one with one
 *     corrupt chunk (located, or undecidable with one chunk of
 *     redundancy left) or two (not located), and its repair writes only
 *     the located chunk, right; a journal replay of a torn write makes
 *     the stripe the new data's codeword (refused when a lost chunk was
 *     not journaled).
 * The GPU route is chosen at random per plan, so that both placements of
 * the blocks (in the request or all in scratch) run. */
#undef NDEBUG
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/testkit.h"
#include "gf/gf.h"
#include "nbdkit-plugin/plan.h"
#include "nbdkit-plugin/steps.h"
#include "nbdkit-plugin/pool.h"

#define DATA_OFFSET 4096

struct sim {
  struct gr_geom g;
  int n;
  enum gr_code code;
  uint32_t lm;
  bool cksum;                     /* the array keeps block checksums */
  bool blocks;                    /* plans in whole 4 KiB blocks (with
                                   * checksums, or O_DIRECT members) */
  struct gr_coder *coder;
  uint8_t *mem[GR_MAX_MEMBERS];   /* member images */
  size_t mem_size;
  bool failed[GR_MAX_MEMBERS];
  uint8_t *ref;                   /* the logical image */
  uint64_t size;
  uint8_t *zero;
  struct gr_plan *plan;
  struct gr_plan *batch;          /* a job's batch plan */
  uint64_t nplans[GR_PLAN_REFUSE + 1];
  bool live_failed[GR_MAX_MEMBERS];     /* failed, but may be accessed
                                         * (a replacement) */
  bool written[GR_MAX_MEMBERS];
  uint8_t *shadow;                /* a live replacement's image (one) */
  const struct gr_plan_peer *peer;      /* a joined write's other part */
  uint8_t *peer_buf;                    /* and its bytes */
};

static const char *const kind_names[] = {
  "read", "read-degraded", "write-full", "write-rcw", "write-rmw",
  "write-degraded", "write-joined", "fallocate", "skip", "resync",
  "rebuild", "check", "replay", "repair", "refuse",
};

/* --- the plan's coding calls, on the ref coder ---------------------------- */

static int
sim_encode (void *arg, bool gpu, uint8_t *const *blocks, size_t nstripes,
            size_t len)
{
  struct sim *s = arg;
  int r = gr_encode (s->coder, blocks, nstripes, len);

  CHECK (r == 0, "encode: %d", r);
  return r == 0 ? 0 : -1;
}

static int
sim_reconstruct (void *arg, bool gpu, const int *erased, int nerased,
                 uint8_t *const *blocks, size_t nstripes, size_t len)
{
  struct sim *s = arg;
  int r = gr_reconstruct (s->coder, erased, nerased, blocks, nstripes, len);

  CHECK (r == 0, "reconstruct: %d", r);
  return r == 0 ? 0 : -1;
}

static int
sim_update (void *arg, bool gpu, int index, int count,
            const uint8_t *const *delta, uint8_t *const *parity,
            uint8_t *const *pdelta, size_t len)
{
  struct sim *s = arg;
  int r = 0;

  for (int i = 0; i < count && r == 0; i++)
    r = gr_update (s->coder, index + i, &delta[i], parity, 1, len);

  CHECK (r == 0, "update: %d", r);
  return r == 0 ? 0 : -1;
}

/* Several steps at once (a request's run of GPU steps). */
static uint64_t sim_many_runs;      /* calls of several operations */
static uint64_t sim_not_rebuilt;    /* erased chunks a read left alone */
static uint64_t sim_rb_not_rebuilt; /* and a rebuild */
static uint64_t sim_wr_not_rebuilt; /* and a degraded write */

static int
sim_many (void *arg, bool gpu, const struct gr_code_op *ops, size_t nops)
{
  struct sim *s = arg;
  int r = gr_code_many (s->coder, ops, nops);

  CHECK (gpu && nops >= 1, "many: %zu operations, gpu %d", nops, gpu);
  CHECK (r == 0, "many: %d", r);
  sim_many_runs += nops > 1;
  return r == 0 ? 0 : -1;
}

static uint64_t sim_routes_checked;
static uint64_t sim_gpu_copies;         /* made by sim_host_copy */
static uint64_t sim_write_copies;       /* full-stripe writes' data
                                         * copied for the GPU */

/* The route: at random, so that both block placements are planned.
 * With the simulation as arg, a reconstruct's route is asked with the
 * members lost (each stripe has a chunk on every member), not with the
 * chunks it rebuilds: accel=auto's router takes an array's degraded
 * stripes for one kind of operation (router.h). */
static bool
sim_gpu (void *arg, enum gr_op op, size_t bytes, int nerased)
{
  const struct sim *s = arg;

  if (s != NULL && op == GR_OP_RECONSTRUCT) {
    int nfailed = 0;

    for (int i = 0; i < s->n; i++)
      nfailed += s->failed[i];
    CHECK (nerased == nfailed, "a reconstruct of %zu bytes routed as %d "
           "lost, with %d members lost", bytes, nerased, nfailed);
    sim_routes_checked++;
  }
  return test_rand () & 1;
}

/* --- what a plan may read ------------------------------------------------- */

static uint64_t
io_bytes (const struct gr_io *v, size_t n)
{
  uint64_t t = 0;
  size_t i;

  for (i = 0; i < n; i++)
    t += v[i].len;
  return t;
}

/* The reads a plan of this kind needs, by an independent count. */
static void
check_reads (struct sim *s, const struct gr_plan *p)
{
  int k = s->g.k, m = s->g.m, n = s->n, i, nlost = 0, lost_parity = 0;
  uint32_t C = s->g.chunk;
  uint64_t so = p->offset % ((uint64_t) k * C);
  int i0 = (int) (so / C), i1 = (int) ((so + p->len - 1) / C);
  int covered = 0, touched = i1 - i0 + 1;
  uint32_t lo = 0, hi = C, L;

  switch (p->kind) {
  case GR_PLAN_READ: {
    /* Exactly the bytes asked for; with checksums each chunk's part
     * widened to whole 4 KiB blocks. */
    uint64_t want = p->len, pos, end = p->offset + p->len;

    if (s->blocks)
      for (want = 0, pos = p->offset; pos < end; ) {
        const uint64_t co = pos % C, piece = C - co < end - pos ? C - co
          : end - pos;

        want += (co + piece + 4095) / 4096 * 4096 - co / 4096 * 4096;
        pos += piece;
      }
    CHECK (io_bytes (p->read, p->nread) == want,
           "healthy read of %" PRIu64 " bytes reads %" PRIu64 " (want %"
           PRIu64 ")", p->len, io_bytes (p->read, p->nread), want);
    return;
  }
  case GR_PLAN_RESYNC:
    CHECK (p->nread == (size_t) n && io_bytes (p->read, p->nread) ==
           n * p->nstripes * C, "resync reads %zu", p->nread);
    return;
  case GR_PLAN_READ_DEGRADED: {
    /* Each stripe (up to 8, each touching a lost chunk): k reads of its
     * coding range, the union of its touched ranges (the whole chunk as
     * soon as two chunks are touched) widened to the length multiple. */
    const uint64_t W = (uint64_t) k * C, end = p->offset + p->len;
    uint64_t want = 0, pos = p->offset;
    int bad = 0;

    CHECK (p->nstripes >= 1 && p->nstripes <= 8 &&
           (p->offset + p->len - 1) / W - p->offset / W + 1 == p->nstripes,
           "read-degraded over %" PRIu64 " stripes", p->nstripes);
    while (pos < end) {
      const uint64_t st = pos / W, e = end < (st + 1) * W ? end : (st + 1) * W;
      const int a0 = (int) (pos % W / C), a1 = (int) ((e - 1) % W / C);

      lo = 0;
      hi = C;
      if (a0 == a1) {
        lo = (uint32_t) (pos % C) / s->lm * s->lm;
        hi = ((uint32_t) ((e - 1) % C) + s->lm) / s->lm * s->lm;
        if (hi > C)
          hi = C;
      }
      want += (uint64_t) k * (hi - lo);
      for (i = a0, bad++; i <= a1; i++)
        if (s->failed[gr_map_member (&s->g, st, i)]) {
          bad--;
          break;
        }
      pos = e;
    }
    CHECK (bad == 0, "read-degraded over %d stripes with no chunk lost",
           bad);
    CHECK (p->nread == (size_t) k * p->nstripes &&
           io_bytes (p->read, p->nread) == want, "read-degraded: %zu reads "
           "of %" PRIu64 " bytes, want %" PRIu64 " of %" PRIu64,
           p->nread, io_bytes (p->read, p->nread), k * p->nstripes, want);
    /* Each stripe's reconstruct rebuilds the lost chunks the request
     * touches and no other: an erased chunk it does not touch (lost
     * before the k-th survivor) is a block that is not there (gf.h). */
    for (size_t j = 0; j < p->nstep; j++) {
      const struct gr_step *sp = &p->step[j];
      const uint64_t st = p->offset / W + sp->blk0 / (size_t) n;
      const uint64_t a = p->offset > st * W ? p->offset : st * W;
      const uint64_t b = end < (st + 1) * W ? end : (st + 1) * W;

      if (sp->kind != GR_STEP_RECONSTRUCT)
        continue;
      for (int e = 0; e < sp->ner; e++) {
        const int x = p->er[sp->er0 + (size_t) e];
        const bool tch = x < k && (uint64_t) x >= a % W / C &&
          (uint64_t) x <= (b - 1) % W / C;
        const bool none = p->blk[sp->blk0 + (size_t) x].space ==
          GR_SPACE_NONE;

        CHECK (none == !tch, "read-degraded: lost chunk %d of stripe %"
               PRIu64 " %s", x, st, tch ? "touched but not rebuilt"
               : "rebuilt but not touched");
        sim_not_rebuilt += none;
      }
    }
    return;
  }
  case GR_PLAN_WRITE_FULL:
  case GR_PLAN_WRITE_JOINED:
  case GR_PLAN_FALLOCATE:
  case GR_PLAN_SKIP:
  case GR_PLAN_REFUSE:
    CHECK (p->nread == 0, "%s: %zu reads", kind_names[p->kind], p->nread);
    return;
  default:
    break;
  }
  /* One stripe, partly: the coding range is the union of the touched
   * ranges (the whole chunk as soon as two chunks are touched), widened
   * to the coder's length multiple. */
  CHECK (p->nstripes == 1 && so + p->len <= (uint64_t) k * C,
         "%s over %" PRIu64 " stripes", kind_names[p->kind], p->nstripes);
  if (i0 == i1) {
    lo = (uint32_t) (so % C) / s->lm * s->lm;
    hi = ((uint32_t) ((so + p->len - 1) % C) + s->lm) / s->lm * s->lm;
    if (hi > C)
      hi = C;
  }
  L = hi - lo;
  for (i = 0; i < n; i++)
    if (s->failed[gr_map_member (&s->g, p->s0, i)]) {
      nlost++;
      lost_parity += i >= k;
    }
  for (i = i0; i <= i1; i++) {
    uint64_t a = i == i0 ? so % C : 0;
    uint64_t b = i == i1 ? (so + p->len - 1) % C + 1 : C;

    covered += a <= lo && b >= hi;
  }
  switch (p->kind) {
  case GR_PLAN_WRITE_DEGRADED:
    CHECK (p->nread == (size_t) k && io_bytes (p->read, p->nread) ==
           (uint64_t) k * L, "%s: %zu reads of %" PRIu64 " bytes, want %d"
           " of %u", kind_names[p->kind], p->nread,
           io_bytes (p->read, p->nread), k, L);
    CHECK (nlost > lost_parity, "degraded write with no data chunk lost");
    /* Its reconstruct rebuilds the lost data and no lost parity (which
     * the encode recomputes): an erased parity chunk is no block. */
    for (size_t j = 0; j < p->nstep; j++) {
      const struct gr_step *sp = &p->step[j];

      for (int e = 0; sp->kind == GR_STEP_RECONSTRUCT && e < sp->ner; e++) {
        const int x = p->er[sp->er0 + (size_t) e];
        const bool none = p->blk[sp->blk0 + (size_t) x].space ==
          GR_SPACE_NONE;

        CHECK (none == (x >= k), "write-degraded: lost chunk %d %s", x,
               none ? "not rebuilt" : "rebuilt");
        sim_wr_not_rebuilt += none;
      }
    }
    break;
  case GR_PLAN_WRITE_RCW:
  case GR_PLAN_WRITE_RMW: {
    int rcw = k - covered, rmw = touched + (m - lost_parity);
    int want;

    /* With checksums a write of part of a block is a reconstruct-write
     * (it must write whole blocks). */
    for (i = i0; s->blocks && i <= i1; i++) {
      uint64_t a = i == i0 ? so % C : 0;
      uint64_t b = i == i1 ? (so + p->len - 1) % C + 1 : C;

      if (a % 4096 || b % 4096)
        rmw = rcw + 1;
    }
    want = rcw <= rmw ? rcw : rmw;

    CHECK (p->kind == (rmw < rcw ? GR_PLAN_WRITE_RMW : GR_PLAN_WRITE_RCW),
           "write chose %s with rmw=%d rcw=%d", kind_names[p->kind], rmw,
           rcw);
    CHECK (p->nread == (size_t) want, "%s: %zu reads, want %d",
           kind_names[p->kind], p->nread, want);
    CHECK (nlost == lost_parity, "%s with a data chunk lost",
           kind_names[p->kind]);
    /* A read-modify-write's parity update: one operation for all the
     * chunks it changes (on the GPU one encode of their deltas). */
    if (p->kind == GR_PLAN_WRITE_RMW) {
      size_t nupd = 0;

      for (size_t j = 0; j < p->nstep; j++)
        if (p->step[j].kind == GR_STEP_UPDATE) {
          nupd++;
          CHECK (p->step[j].index == i0 && p->step[j].count == i1 - i0 + 1,
                 "write-rmw: update of chunks %d..+%d, the write's are "
                 "%d..%d", p->step[j].index, p->step[j].count, i0, i1);
        }
      CHECK (nupd == 1, "write-rmw: %zu update steps", nupd);
    }
    break;
  }
  default:
    break;
  }
}

/* --- the simulated executor ----------------------------------------------- */

static void
sim_io (struct sim *s, const struct gr_plan *p, const struct gr_io *io,
        const struct gr_bufs *b, bool is_read)
{
  uint8_t *mp;

  CHECK (io->member >= 0 && io->member < s->n, "member %d", io->member);
  CHECK (!s->failed[io->member] || s->live_failed[io->member],
         "%s: %s of failed member %d", kind_names[p->kind],
         is_read ? "read" : "write", io->member);
  CHECK (io->off >= DATA_OFFSET && io->off + io->len <= s->mem_size,
         "member access [%" PRIu64 ", +%" PRIu64 ") outside the data area",
         io->off, io->len);
  if (s->failed[io->member] && !s->live_failed[io->member])
    return;
  mp = s->mem[io->member] + io->off;
  switch (io->kind) {
  case GR_IO_READ:
    memcpy (gr_steps_at (b, io->buf), mp, io->len);
    break;
  case GR_IO_WRITE:
  case GR_IO_WRITE_LOCATED:     /* resolved by the caller */
  case GR_IO_WRITE_UNLOCATED:   /* likewise */
    memcpy (mp, gr_steps_at (b, io->buf), io->len);
    s->written[io->member] = true;
    break;
  case GR_IO_WRITE_CHANGED:
    if (memcmp (gr_steps_at (b, io->buf), gr_steps_at (b, io->cmp), io->len)
        != 0)
      memcpy (mp, gr_steps_at (b, io->buf), io->len);
    break;
  case GR_IO_PUNCH:
  case GR_IO_ZERO_RANGE:
    memset (mp, 0, io->len);
    break;
  case GR_IO_WRITE_SHADOW:
    memcpy (s->shadow + io->off, gr_steps_at (b, io->buf), io->len);
    break;
  }
}

/* A plan's copies marked for the GPU (steps.h host_copy): made, and
 * counted. */
static bool
sim_host_copy (void *arg, const struct gr_copy_row *rows, size_t n)
{
  for (size_t i = 0; i < n; i++)
    memcpy (rows[i].dst, rows[i].src, rows[i].len);
  sim_gpu_copies += n;
  return true;
}

/* Does p encode on the GPU? */
static bool
gpu_encodes (const struct gr_plan *p)
{
  for (size_t t = 0; t < p->nstep; t++)
    if (p->step[t].kind == GR_STEP_ENCODE && p->step[t].gpu)
      return true;
  return false;
}

/* A write of part of a stripe that overlays the new bytes on its
 * chunks' blocks (reconstruct-write, degraded write) writes a chunk
 * touched in part from its block, not from the request (a second copy
 * of those bytes, through an O_DIRECT member's bounce buffer). */
static void
check_part_writes (const struct gr_plan *p)
{
  for (size_t j = 0; (p->kind == GR_PLAN_WRITE_RCW ||
                      p->kind == GR_PLAN_WRITE_DEGRADED) && j < p->nwrite; j++)
    CHECK (p->write[j].buf.space != GR_SPACE_REQ ||
           p->write[j].len == p->hi - p->lo,
           "plan %s: write of member %d of %" PRIu64 " bytes from the "
           "request, not a chunk's whole [%u, %u)", kind_names[p->kind],
           p->write[j].member, p->write[j].len, p->lo, p->hi);
}

/* With O_DIRECT's copies on the GPU (plan.h gpu_copies): no survivor of
 * a degraded read's GPU reconstruct is read into the request where the
 * member's alignment would bounce it, no full-stripe write encoded on
 * the GPU writes from the request there, and only such plans mark
 * copies for the GPU (not a write of part of a stripe: measured slower,
 * docs/performance.md). */
static void
check_gpu_copies (const struct gr_plan_ctx *c, const struct gr_plan *p)
{
  for (size_t j = 0; c->gpu_copies && p->kind == GR_PLAN_WRITE_FULL &&
       gpu_encodes (p) && j < p->nwrite; j++) {
    const struct gr_loc d = p->write[j].buf;

    CHECK (d.space != GR_SPACE_REQ ||
           (c->req_addr + d.off) % c->dio_align == 0,
           "plan %s: write of member %d for a GPU encode from the request "
           "at %zu, not aligned to %u", kind_names[p->kind],
           p->write[j].member, d.off, c->dio_align);
  }
  for (size_t j = 0; j < p->nread; j++) {
    const struct gr_loc d = p->read[j].buf;
    bool on_gpu = false;

    if (!c->gpu_copies || p->kind != GR_PLAN_READ_DEGRADED ||
        d.space != GR_SPACE_REQ || (c->req_addr + d.off) % c->dio_align == 0)
      continue;
    for (size_t t = 0; t < p->nstep; t++) {
      const struct gr_step *st = &p->step[t];

      for (size_t b = 0; st->kind == GR_STEP_RECONSTRUCT && st->gpu &&
           b < st->nstripes * (size_t) (c->g->k + c->g->m); b++)
        on_gpu |= p->blk[st->blk0 + b].space == GR_SPACE_REQ &&
          p->blk[st->blk0 + b].off == d.off;
    }
    CHECK (!on_gpu, "plan %s: read of member %d for a GPU reconstruct "
           "into the request at %zu, not aligned to %u",
           kind_names[p->kind], p->read[j].member, d.off, c->dio_align);
  }
  for (size_t j = 0; j < p->nstep; j++)
    CHECK (!p->step[j].gpu || p->step[j].kind != GR_STEP_COPY ||
           (c->gpu_copies && (p->kind == GR_PLAN_READ_DEGRADED ||
                              p->kind == GR_PLAN_WRITE_FULL)),
           "plan %s: a copy for the GPU without gpu_copies",
           kind_names[p->kind]);
}

/* Run one request through plans on the simulated members.  Returns 0,
 * or -EIO if a plan refused. */
static int
sim_request (struct sim *s, enum gr_req req, uint64_t offset, uint64_t len,
             uint8_t *buf, unsigned falloc)
{
  struct gr_plan_coder cd = { .encode = sim_encode,
                              .reconstruct = sim_reconstruct,
                              .update = sim_update, .many = sim_many,
                              .host_copy = sim_host_copy,
                              .arg = s, .pool = NULL };
  struct gr_plan_ctx c = { .g = &s->g, .lm = s->lm, .failed = s->failed,
                           .falloc = falloc, .gpu = sim_gpu, .gpu_arg = s,
                           .rb_front = NULL, .cksum = s->cksum,
                           .blocks = s->blocks, .peer = s->peer };
  uint64_t pos = offset, end = offset + len;
  int nfailed = 0, i;

  /* In whole blocks (as for O_DIRECT members), a read's or a write's
   * request buffer page-locked at random, and the members' alignment
   * 512: a degraded read's survivors for a GPU reconstruct land in
   * scratch and the GPU copies them in where the request's address is
   * not aligned (malloc's 16 bytes, any offset); a full-stripe write's
   * data is copied into scratch by the GPU before its GPU encode. */
  if (s->blocks && (req == GR_REQ_READ || req == GR_REQ_WRITE) && buf &&
      test_rand () % 3) {
    c.req_pinned = test_rand () & 1;
    c.gpu_copies = c.req_pinned;
    c.dio_align = 512;
  }

  for (i = 0; i < s->n; i++)
    nfailed += s->failed[i];
  while (pos < end) {
    struct gr_plan *p = s->plan;
    struct gr_bufs b;
    uint8_t *scratch;
    size_t j;

    c.req_addr = (uintptr_t) (buf ? buf + (pos - offset) : NULL);
    gr_plan_next (&c, req, pos, end - pos, p);
    s->nplans[p->kind]++;
    check_gpu_copies (&c, p);
    check_part_writes (p);
    for (j = 0; p->kind == GR_PLAN_WRITE_FULL && j < p->nstep; j++)
      sim_write_copies += p->step[j].kind == GR_STEP_COPY && p->step[j].gpu;
    CHECK ((p->kind == GR_PLAN_REFUSE) ==
           (nfailed > s->g.m || (req == GR_REQ_RESYNC && nfailed > 0)),
           "%d of %d+%d failed: plan %s", nfailed, s->g.k, s->g.m,
           kind_names[p->kind]);
    if (p->kind == GR_PLAN_REFUSE)
      return -EIO;
    CHECK (p->offset == pos && p->len >= 1 && p->len <= end - pos,
           "plan covers [%" PRIu64 ", +%" PRIu64 ") of [%" PRIu64 ", %"
           PRIu64 ")", p->offset, p->len, pos, end);
    CHECK (p->nread <= p->cap_io && p->nwrite <= p->cap_io &&
           p->nblk <= p->cap_blk && p->nstep <= p->cap_step,
           "plan over capacity");
    check_reads (s, p);
    /* In whole blocks every access of the data area is whole blocks. */
    for (j = 0; s->blocks && j < p->nread + p->nwrite; j++) {
      const struct gr_io *io = j < p->nread ? &p->read[j]
        : &p->write[j - p->nread];

      CHECK (io->off % 4096 == 0 && io->len % 4096 == 0, "plan %s: %s of "
             "member %d at %" PRIu64 " (%" PRIu64 " bytes) not in whole "
             "4 KiB blocks", kind_names[p->kind], j < p->nread ? "read"
             : "write", io->member, io->off, io->len);
    }
    scratch = malloc (p->scratch_len + 1);
    memset (scratch, 0xa5, p->scratch_len + 1);
    b = (struct gr_bufs) { .req = buf ? buf + (p->offset - offset) : NULL,
                           .scratch = scratch, .zero = s->zero,
                           .peer = s->peer_buf };
    for (j = 0; j < p->nread; j++)
      sim_io (s, p, &p->read[j], &b, true);
    CHECK (gr_steps_run (p, &s->g, &b, &cd) == 0, "steps");
    for (j = 0; j < p->nwrite; j++)
      sim_io (s, p, &p->write[j], &b, false);
    CHECK (scratch[p->scratch_len] == 0xa5, "scratch overrun");
    free (scratch);
    if (p->len == 0)
      break;
    pos += p->len;
  }
  return 0;
}

/* --- checks --------------------------------------------------------------- */

/* Every stripe's live members hold one codeword whose data is the
 * reference image. */
static void
check_consistent (struct sim *s, const char *what)
{
  int k = s->g.k, m = s->g.m, n = s->n, i, ne;
  uint32_t C = s->g.chunk;
  uint8_t *blk = malloc ((size_t) (n + m) * C);
  uint8_t *bp[2 * GR_MAX_MEMBERS];
  int erased[GR_MAX_MEMBERS];
  uint64_t st;

  for (i = 0; i < n + m; i++)
    bp[i] = blk + (size_t) i * C;
  for (st = 0; st < s->g.stripes; st++) {
    ne = 0;
    for (i = 0; i < n; i++) {
      int mem = gr_map_member (&s->g, st, i);

      memcpy (bp[i], s->mem[mem] + gr_map_member_offset (&s->g, st, 0), C);
      if (s->failed[mem])
        erased[ne++] = i;
    }
    if (ne > m)
      break;
    if (ne > 0)
      CHECK (gr_reconstruct (s->coder, erased, ne, bp, 1, C) == 0,
             "reconstruct");
    for (i = 0; i < k; i++)
      CHECK (memcmp (bp[i], s->ref + (st * k + i) * C, C) == 0,
             "%s: stripe %" PRIu64 " data chunk %d differs from the "
             "reference", what, st, i);
    /* Parity recomputed from the data must equal what is on the live
     * members (rebuilt ones equal it by construction). */
    {
      uint8_t *enc[GR_MAX_MEMBERS];

      for (i = 0; i < k; i++)
        enc[i] = bp[i];
      for (i = 0; i < m; i++)
        enc[k + i] = blk + (size_t) (n + i) * C;
      CHECK (gr_encode (s->coder, enc, 1, C) == 0, "encode");
      for (i = 0; i < m; i++)
        CHECK (memcmp (enc[k + i], bp[k + i], C) == 0,
               "%s: stripe %" PRIu64 " parity %d inconsistent", what, st, i);
    }
    if (test_failures > 0)
      break;
  }
  free (blk);
}

/* Joined writes (join.h): a write whose range ends (or starts) inside a
 * stripe, on a chunk bound, given the rest of that stripe by another
 * write's part (its head, or its tail), plans that stripe whole from
 * both buffers, reading nothing; both writes' bytes land and the stripe
 * is a codeword (live members; degraded too, with at most m lost). */
static void check_read_all (struct sim *s, const char *what);

static void
check_joined (struct sim *s, const char *what)
{
  const uint64_t W = gr_map_stripe_width (&s->g), C = s->g.chunk;
  const int k = s->g.k;

  for (int round = 0; round < 4 && k > 1 && test_failures == 0; round++) {
    const uint64_t st = test_rand () % s->g.stripes, w0 = st * W;
    const uint64_t cut = w0 + (1 + test_rand () % (uint64_t) (k - 1)) * C;
    const bool tail = test_rand () & 1;  /* the write's part: the
                                          * stripe's start */
    uint64_t off, len, more, joined = s->nplans[GR_PLAN_WRITE_JOINED];
    struct gr_plan_peer peer;
    uint8_t *buf, *pbuf;

    if (tail) {                 /* it ends at cut; the rest from cut */
      more = test_rand () % (w0 < 2 * W ? w0 + 1 : 2 * W + 1);
      off = w0 - more;
      len = cut - off;
      peer = (struct gr_plan_peer) { cut, w0 + W - cut };
    }
    else {                      /* it starts at cut; the rest before */
      more = test_rand () % (s->size - (w0 + W) < 2 * W
                             ? s->size - (w0 + W) + 1 : 2 * W + 1);
      off = cut;
      len = w0 + W + more - cut;
      peer = (struct gr_plan_peer) { w0, cut - w0 };
    }
    buf = malloc (len);
    pbuf = malloc (peer.len);
    test_fill (buf, len);
    test_fill (pbuf, peer.len);
    s->peer = &peer;
    s->peer_buf = pbuf;
    CHECK (sim_request (s, GR_REQ_WRITE, off, len, buf, 0) == 0,
           "%s: joined write", what);
    s->peer = NULL;
    s->peer_buf = NULL;
    CHECK (s->nplans[GR_PLAN_WRITE_JOINED] == joined + 1, "%s: write of [%"
           PRIu64 ", +%" PRIu64 ") given [%" PRIu64 ", +%" PRIu64 "): %"
           PRIu64 " joined plans", what, off, len, peer.offset, peer.len,
           s->nplans[GR_PLAN_WRITE_JOINED] - joined);
    memcpy (s->ref + off, buf, len);
    memcpy (s->ref + peer.offset, pbuf, peer.len);
    free (buf);
    free (pbuf);
  }
  check_read_all (s, what);
  check_consistent (s, what);
}

/* Read everything through plans and compare with the reference. */
static void
check_read_all (struct sim *s, const char *what)
{
  uint8_t *buf = malloc (s->size);

  memset (buf, 0x5a, s->size);
  CHECK (sim_request (s, GR_REQ_READ, 0, s->size, buf, 0) == 0, "read");
  CHECK (memcmp (buf, s->ref, s->size) == 0, "%s: whole read differs",
         what);
  free (buf);
}

/* A range: aligned to stripes, to chunks, or to nothing, sometimes across
 * stripes. */
static void
pick_range (struct sim *s, uint64_t *off, uint64_t *len)
{
  uint64_t width = gr_map_stripe_width (&s->g), C = s->g.chunk;

  switch (test_rand () % 4) {
  case 0:                       /* whole stripes */
    *off = test_rand () % s->g.stripes * width;
    *len = (1 + test_rand () % 3) * width;
    break;
  case 1:                       /* whole chunks */
    *off = test_rand () % (s->size / C) * C;
    *len = (1 + test_rand () % (2 * s->g.k)) * C;
    break;
  case 2:                       /* small, unaligned */
    *off = test_rand () % s->size;
    *len = 1 + test_rand () % (C + C / 2);
    break;
  default:                      /* anything */
    *off = test_rand () % s->size;
    *len = 1 + test_rand () % (3 * width);
  }
  if (*off + *len > s->size)
    *len = s->size - *off;
}

/* Members being rebuilt (plan.h, rb_front): every failed member of
 * s->failed, each live below its own random front (0 for some: lost
 * everywhere).  Random requests: a plan that starts below a front ends
 * at the nearest one above it, and journals its writes (a crash would
 * leave the member missing); one never touches a member whose front is
 * at or below its start.  (The data such plans compute is that of the
 * failed sets below, with the members live or lost.) */
static void
check_rebuild_front (struct sim *s, const char *what)
{
  const uint64_t width = gr_map_stripe_width (&s->g);
  static const enum gr_req reqs[] = { GR_REQ_READ, GR_REQ_WRITE,
                                      GR_REQ_ZERO, GR_REQ_TRIM };
  uint64_t front[GR_MAX_MEMBERS] = { 0 };
  struct gr_plan_ctx c = { .g = &s->g, .lm = s->lm, .failed = s->failed,
                           .gpu = sim_gpu, .rb_front = front,
                           .falloc = GR_FALLOC_PUNCH };

  for (int i = 0; i < s->n; i++)
    if (s->failed[i])
      front[i] = test_rand () % 4 ? test_rand () % (s->g.stripes + 1) : 0;
  for (int t = 0; t < 200 && test_failures == 0; t++) {
    const enum gr_req req = reqs[test_rand () % 4];
    struct gr_plan *p = s->plan;
    uint64_t off, len, end = UINT64_MAX;
    bool uses[GR_MAX_MEMBERS] = { false };

    pick_range (s, &off, &len);
    c.req_zero_write = test_rand () % 2;
    gr_plan_next (&c, req, off, len, p);
    if (p->kind == GR_PLAN_REFUSE || p->kind == GR_PLAN_SKIP)
      continue;
    for (size_t j = 0; j < p->nwrite; j++)
      CHECK (!c.req_zero_write || (p->write[j].kind != GR_IO_PUNCH &&
                                   p->write[j].kind != GR_IO_ZERO_RANGE),
             "%s: a %s degraded with a journal fallocates", what,
             req == GR_REQ_TRIM ? "trim" : "zero");
    for (size_t j = 0; j < p->nread; j++)
      uses[p->read[j].member] = true;
    for (size_t j = 0; j < p->nwrite; j++)
      uses[p->write[j].member] = true;
    for (int i = 0; i < s->n; i++) {
      if (!s->failed[i])
        continue;
      if (off < front[i] * width) {
        if (front[i] * width < end)
          end = front[i] * width;
        CHECK (p->nwrite == 0 || p->kind == GR_PLAN_FALLOCATE || p->journal,
               "%s: a write below member %d's rebuild front is not "
               "journaled", what, i);
      }
      else
        CHECK (!uses[i], "%s: a plan from %" PRIu64 " uses member %d, "
               "rebuilt only below stripe %" PRIu64, what, off, i,
               front[i]);
    }
    CHECK (end == UINT64_MAX || p->offset + p->len <= end, "%s: a plan "
           "from %" PRIu64 " crosses a rebuild front (byte %" PRIu64 ")",
           what, off, end);
  }
}


/* Random requests under the current failed set; the reference follows
 * the writes.  Each request is checked against the reference or its
 * refusal. */
static void
random_ops (struct sim *s, int nops, bool expect_refuse, const char *what)
{
  int op;

  for (op = 0; op < nops && test_failures == 0; op++) {
    uint64_t off, len;
    uint8_t *buf;
    int r, kind = (int) (test_rand () % 6);
    unsigned falloc = (unsigned) (test_rand () % 4);

    pick_range (s, &off, &len);
    buf = malloc (len);
    switch (kind) {
    case 0:
    case 1:                     /* read */
      memset (buf, 0x5a, len);
      r = sim_request (s, GR_REQ_READ, off, len, buf, 0);
      if (r == 0)
        CHECK (memcmp (buf, s->ref + off, len) == 0,
               "%s: read [%" PRIu64 ", +%" PRIu64 ") differs", what, off,
               len);
      break;
    case 2:
    case 3:                     /* write */
      test_fill (buf, len);
      r = sim_request (s, GR_REQ_WRITE, off, len, buf, 0);
      if (r == 0)
        memcpy (s->ref + off, buf, len);
      break;
    case 4:                     /* zero, with or without fallocate */
      r = sim_request (s, test_rand () & 1 ? GR_REQ_ZERO
                       : GR_REQ_ZERO_MAY_TRIM, off, len, NULL, falloc);
      if (r == 0)
        memset (s->ref + off, 0, len);
      break;
    default: {                  /* trim: whole stripes become zero */
      struct gr_walk w;
      struct gr_span sp;

      r = sim_request (s, GR_REQ_TRIM, off, len, NULL, falloc);
      if (r == 0 && (falloc & GR_FALLOC_PUNCH)) {
        gr_map_walk_init (&w, &s->g, off, len);
        while (gr_map_walk_next (&w, &sp))
          if (gr_map_span_whole (&s->g, &sp))
            memset (s->ref + sp.logical, 0, sp.len);
      }
    }
    }
    CHECK ((r == -EIO) == expect_refuse, "%s: op %d returned %d", what,
           kind, r);
    free (buf);
  }
}

static void
copy_members (struct sim *dst, const struct sim *src)
{
  int i;

  for (i = 0; i < src->n; i++)
    memcpy (dst->mem[i], src->mem[i], src->mem_size);
  memcpy (dst->ref, src->ref, src->size);
}

/* --- the jobs' batches ------------------------------------------------------ */

/* Pools of 0 to 3 threads (the first: none, the caller alone). */
#define NPOOLS 4
static struct gr_pool *pools[NPOOLS];

/* Run a job's batch plan p on the simulated members as the executor
 * does: reads, steps (CPU coding split over threads), writes (a check's repair to the located chunk's
 * member, a rebuild's only to members whose front it moves). */
static void
sim_batch (struct sim *s, struct gr_plan *p, uint8_t *req)
{
  /* Split over 1 to 4 threads, as the executor's lanes do on every
   * core. */
  struct gr_plan_coder cd = { .encode = sim_encode,
                              .reconstruct = sim_reconstruct,
                              .update = sim_update, .many = sim_many,
                              .arg = s,
                              .pool = pools[test_rand () % NPOOLS] };
  struct gr_bufs b;
  uint8_t *scratch = malloc (p->scratch_len + 1);
  size_t j;

  CHECK (p->nread <= p->cap_io && p->nwrite <= p->cap_io &&
         p->nblk <= p->cap_blk && p->nstep <= p->cap_step &&
         p->ner <= p->cap_er, "%s: plan over capacity",
         kind_names[p->kind]);
  memset (scratch, 0xa5, p->scratch_len + 1);
  b = (struct gr_bufs) { .req = req, .scratch = scratch, .zero = s->zero };
  for (j = 0; j < p->nread; j++)
    sim_io (s, p, &p->read[j], &b, true);
  CHECK (gr_steps_run (p, &s->g, &b, &cd) == 0, "steps");
  for (j = 0; j < p->nwrite; j++) {
    struct gr_io io = p->write[j];

    if (io.kind == GR_IO_WRITE_LOCATED) {
      const struct gr_verdict *v = &p->verdict[io.slot];

      CHECK (io.slot < p->nstripes, "located write of slot %u", io.slot);
      if (v->kind != GR_VERDICT_LOCATED)
        continue;
      io.member = gr_map_member (&s->g, p->s0 + io.slot, v->index);
    }
    if (io.kind == GR_IO_WRITE_UNLOCATED) {
      const struct gr_verdict *v = &p->verdict[io.slot];

      CHECK (io.slot < p->nstripes, "unlocated write of slot %u", io.slot);
      if ((v->kind != GR_VERDICT_UNLOCATED &&
           v->kind != GR_VERDICT_UNDECIDABLE) ||
          memcmp (gr_steps_at (&b, io.buf), gr_steps_at (&b, io.cmp),
                  io.len) == 0)
        continue;
    }
    if (p->kind == GR_PLAN_REBUILD)
      CHECK (p->rb_adv[io.member], "rebuild writes member %d, whose front "
             "it does not move", io.member);
    sim_io (s, p, &io, &b, false);
  }
  CHECK (scratch[p->scratch_len] == 0xa5, "scratch overrun");
  free (scratch);
}

/* The chunk of member mem at stripe st as the reference image makes it
 * (data, or parity encoded from it by the ref coder) into out. */
static void
ref_chunk (struct sim *s, uint64_t st, int mem, uint8_t *out)
{
  const int k = s->g.k, n = s->n, i = gr_map_index (&s->g, st, mem);
  const uint32_t C = s->g.chunk;
  uint8_t *blk = malloc ((size_t) n * C), *bp[GR_MAX_MEMBERS];

  for (int c = 0; c < n; c++) {
    bp[c] = blk + (size_t) c * C;
    if (c < k)
      memcpy (bp[c], s->ref + (st * k + c) * C, C);
  }
  CHECK (gr_encode (s->coder, bp, 1, C) == 0, "encode");
  memcpy (out, bp[i], C);
  free (blk);
}

/* Repair: in a random stripe and 4 KiB row, some live chunks spoiled
 * (their blocks "failed their checksums"): with at least k good chunks
 * left the repair plan reads every chunk not lost, writes the bad ones
 * only, and they hold the reference's bytes again; with fewer it is
 * refused, with none bad skipped. */
static void
check_repair (struct sim *s, const char *what)
{
  const int k = s->g.k, m = s->g.m, n = s->n;
  const uint32_t C = s->g.chunk;
  struct gr_plan_ctx c = { .g = &s->g, .lm = s->lm, .failed = s->failed,
                           .gpu = sim_gpu, .cksum = true, .blocks = true };
  const uint64_t st = test_rand () % s->g.stripes;
  const uint32_t lo = (uint32_t) (test_rand () % (C / 4096)) * 4096;
  bool bad[GR_MAX_MEMBERS] = { false };
  int nlive = 0, nbad = 0, want, i;
  uint8_t *chunk = malloc (C);
  struct gr_plan *p = s->batch;

  for (i = 0; i < n; i++)
    nlive += !s->failed[gr_map_member (&s->g, st, i)];
  want = (int) (test_rand () % (unsigned) (m + 2));
  for (int tries = 0; nbad < want && tries < 100; tries++) {
    i = (int) (test_rand () % (unsigned) n);
    if (bad[i] || s->failed[gr_map_member (&s->g, st, i)])
      continue;
    bad[i] = true;
    nbad++;
    s->mem[gr_map_member (&s->g, st, i)]
      [gr_map_member_offset (&s->g, st, lo) + test_rand () % 4096] ^=
      (uint8_t) (1 + test_rand () % 255);
  }
  gr_plan_repair (&c, st, lo, lo + 4096, bad, p);
  s->nplans[p->kind]++;
  if (nbad == 0)
    CHECK (p->kind == GR_PLAN_SKIP, "%s: repair of nothing is %s", what,
           kind_names[p->kind]);
  else if (nlive - nbad < k)
    CHECK (p->kind == GR_PLAN_REFUSE, "%s: repair of %d bad with %d live "
           "is %s", what, nbad, nlive, kind_names[p->kind]);
  else {
    CHECK (p->kind == GR_PLAN_REPAIR && p->nread == (size_t) nlive,
           "%s: repair of %d bad: %s, %zu reads", what, nbad,
           kind_names[p->kind], p->nread);
    memset (s->written, 0, sizeof s->written);
    sim_batch (s, p, NULL);
    for (i = 0; i < n; i++)
      CHECK (s->written[gr_map_member (&s->g, st, i)] == bad[i],
             "%s: repair %s chunk %d", what, bad[i] ? "did not write bad"
             : "wrote good", i);
    check_consistent (s, what);
  }
  /* Put back what the repair did not (refused). */
  for (i = 0; i < n; i++)
    if (bad[i]) {
      const int mem = gr_map_member (&s->g, st, i);

      ref_chunk (s, st, mem, chunk);
      memcpy (s->mem[mem] + gr_map_member_offset (&s->g, st, 0), chunk, C);
    }
  free (chunk);
}

/* Cut [0, stripes) into random batches; run gen on each. */
#define EACH_BATCH(s, s0, ns)                                           \
  for (uint64_t s0 = 0, ns = 1; s0 < (s)->g.stripes; s0 += ns)         \
    if ((ns = 1 + test_rand () % 5) > (s)->g.stripes - s0 ? (ns = (s)->g.stripes - s0) : ns)

/* The locating resync (no checksums, m >= 2): one data chunk spoiled in
 * a stripe is located and rewritten from the others (not laundered into
 * the parity); every parity chunk of another stripe spoiled is
 * recomputed from the data; afterwards every stripe is one codeword and
 * the array reads as the reference. */
static void
check_resync_check (struct sim *s, const char *what)
{
  struct gr_plan_ctx c = { .g = &s->g, .lm = s->lm, .failed = s->failed,
                           .gpu = sim_gpu };
  const uint32_t C = s->g.chunk;
  const uint64_t a = test_rand () % s->g.stripes;
  const uint64_t b = (a + 1 + test_rand () % (s->g.stripes - 1)) %
    s->g.stripes;

  s->mem[gr_map_member (&s->g, a, (int) (test_rand () % s->g.k))]
    [gr_map_member_offset (&s->g, a, 0) + test_rand () % C] ^= 0x5a;
  for (int i = s->g.k; i < s->n; i++)
    s->mem[gr_map_member (&s->g, b, i)]
      [gr_map_member_offset (&s->g, b, 0) + test_rand () % C] ^= 0x21;
  EACH_BATCH (s, s0, ns) {
    gr_plan_resync_check (&c, s0, ns, s->batch);
    s->nplans[s->batch->kind]++;
    CHECK (s->batch->kind == GR_PLAN_RESYNC, "%s: locating resync is %s",
           what, kind_names[s->batch->kind]);
    sim_batch (s, s->batch, NULL);
  }
  check_consistent (s, what);
  check_read_all (s, what);
}

/* Rebuild: the failed members in want (each with a random front, below
 * which its replacement holds what it holds) rebuilt in random batches,
 * each batch with a random action for each of them (decoded, zeroed with
 * or without fallocate, kept): afterwards each holds, at every stripe
 * from its front on, the reference chunk where its batch decoded, zeros
 * where it zeroed and what it held where it kept, and nothing below its
 * front changed; no plan touches a live member but to read, k of them
 * for each stripe that a member decodes, or a failed member not
 * wanted. */
static void
check_rebuild (struct sim *s, const bool *want, const char *what)
{
  const int n = s->n, k = s->g.k;
  const uint32_t C = s->g.chunk;
  uint64_t front[GR_MAX_MEMBERS] = { 0 };
  struct gr_plan_ctx c = { .g = &s->g, .lm = s->lm, .failed = s->failed,
                           .gpu = sim_gpu, .gpu_arg = s, .rb_front = front };
  uint8_t *before[GR_MAX_MEMBERS] = { NULL }, *chunk = malloc (C);
  enum gr_rb_action *done = calloc (s->g.stripes * (size_t) n,
                                    sizeof *done);
  int i;

  for (i = 0; i < n; i++) {
    if (!want[i])
      continue;
    front[i] = test_rand () % 3 ? test_rand () % (s->g.stripes + 1) : 0;
    test_fill (s->mem[i], s->mem_size);
    before[i] = malloc (s->mem_size);
    memcpy (before[i], s->mem[i], s->mem_size);
    s->live_failed[i] = true;
  }
  EACH_BATCH (s, s0, ns) {
    struct gr_plan *p = s->batch;
    uint64_t reads = 0;
    bool adv[GR_MAX_MEMBERS] = { false };
    enum gr_rb_action act[GR_MAX_MEMBERS] = { GR_RB_NONE };

    /* Mostly decoded, as most regions are written. */
    for (i = 0; i < n; i++)
      if (want[i])
        act[i] = test_rand () % 2 ? GR_RB_DECODE
          : test_rand () % 2 ? GR_RB_ZERO : GR_RB_KEEP;
    c.falloc = (unsigned) (test_rand () % 4);
    /* Degraded with a journal: requests zero by writing, the rebuild's
     * zeroing (not journaled) still fallocates (checked below). */
    c.req_zero_write = test_rand () % 2;
    for (uint64_t st = s0; st < s0 + ns; st++)
      for (i = 0; i < n; i++)
        if (want[i] && front[i] <= st && act[i] == GR_RB_DECODE) {
          reads += k;
          break;
        }
    for (i = 0; i < n; i++)
      if (want[i] && front[i] < s0 + ns)
        adv[i] = true;
    memset (s->written, 0, sizeof s->written);
    gr_plan_rebuild (&c, act, s0, ns, p);
    s->nplans[p->kind]++;
    for (i = 0; i < n; i++)
      if (adv[i])
        break;
    if (i == n) {
      CHECK (p->kind == GR_PLAN_SKIP, "%s: batch %" PRIu64 "+%" PRIu64
             " below every front is %s", what, s0, ns, kind_names[p->kind]);
      continue;
    }
    CHECK (p->kind == GR_PLAN_REBUILD, "%s: rebuild plan %s", what,
           kind_names[p->kind]);
    if (p->kind != GR_PLAN_REBUILD)
      break;
    CHECK (p->nread == reads, "%s: rebuild of %" PRIu64 "+%" PRIu64
           " reads %zu chunks, want %" PRIu64, what, s0, ns, p->nread,
           reads);
    CHECK (p->rb_end == gr_map_member_offset (&s->g, s0 + ns, 0),
           "%s: rebuild front end", what);
    for (i = 0; i < n; i++)
      CHECK (p->rb_adv[i] == adv[i], "%s: member %d's front %s", what, i,
             adv[i] ? "not moved" : "moved");
    for (size_t w = 0; w < p->nwrite; w++)
      CHECK (act[p->write[w].member] != GR_RB_KEEP &&
             ((p->write[w].kind == GR_IO_PUNCH) ==
              (act[p->write[w].member] == GR_RB_ZERO &&
               (c.falloc & GR_FALLOC_PUNCH) != 0)),
             "%s: member %d (action %d, fallocate %u) written by a %d",
             what, p->write[w].member, act[p->write[w].member], c.falloc,
             p->write[w].kind);
    /* Its reconstructs rebuild only chunks it writes: any other erased
     * chunk is a block that is not there (gf.h). */
    for (size_t j = 0; j < p->nstep; j++) {
      const struct gr_step *sp = &p->step[j];

      if (sp->kind != GR_STEP_RECONSTRUCT)
        continue;
      for (size_t t = 0; t < sp->nstripes; t++)
        for (int e = 0; e < sp->ner; e++) {
          const struct gr_loc l = p->blk[sp->blk0 + t * (size_t) n +
                                         (size_t) p->er[sp->er0 + (size_t) e]];
          size_t w = 0;

          if (l.space == GR_SPACE_NONE) {
            sim_rb_not_rebuilt++;
            continue;
          }
          while (w < p->nwrite && (p->write[w].buf.space != l.space ||
                                   p->write[w].buf.off != l.off))
            w++;
          CHECK (w < p->nwrite, "%s: a rebuild's reconstruct rebuilds "
                 "chunk %d, which it does not write", what,
                 p->er[sp->er0 + (size_t) e]);
        }
    }
    sim_batch (s, p, NULL);
    for (i = 0; i < n; i++)
      CHECK (!s->written[i] || want[i], "%s: rebuild wrote member %d",
             what, i);
    for (uint64_t st = s0; st < s0 + ns; st++)
      for (i = 0; i < n; i++)
        if (want[i] && front[i] <= st)
          done[st * n + i] = act[i];
  }
  for (i = 0; i < n && test_failures == 0; i++) {
    if (!want[i])
      continue;
    for (uint64_t st = 0; st < s->g.stripes; st++) {
      const uint64_t off = gr_map_member_offset (&s->g, st, 0);

      if (st < front[i] || done[st * n + i] == GR_RB_KEEP)
        CHECK (memcmp (s->mem[i] + off, before[i] + off, C) == 0,
               "%s: member %d written below its front or where kept at "
               "stripe %" PRIu64, what, i, st);
      else if (done[st * n + i] == GR_RB_ZERO) {
        memset (chunk, 0, C);
        CHECK (memcmp (s->mem[i] + off, chunk, C) == 0, "%s: member %d's "
               "chunk of stripe %" PRIu64 " not zeroed", what, i, st);
      }
      else {
        ref_chunk (s, st, i, chunk);
        CHECK (memcmp (s->mem[i] + off, chunk, C) == 0, "%s: member %d's "
               "chunk of stripe %" PRIu64 " not rebuilt", what, i, st);
      }
    }
  }
  for (i = 0; i < n; i++) {
    s->live_failed[i] = false;
    free (before[i]);
  }
  free (done);
  free (chunk);
}

/* A live replacement's copy: member i copied in random batches, each one
 * read of member i and one write to its replacement of the same range;
 * afterwards the replacement holds the member's data area exactly, no
 * member was written, and a copy of a failed member is refused. */
static void
check_copy (struct sim *s, const char *what)
{
  const int i = (int) (test_rand () % (uint64_t) s->n);
  struct gr_plan_ctx c = { .g = &s->g, .lm = s->lm, .failed = s->failed,
                           .gpu = sim_gpu };
  const uint64_t d0 = s->g.data_offset,
    dlen = s->g.stripes * (uint64_t) s->g.chunk;

  if (s->failed[i]) {
    gr_plan_copy (&c, i, 0, 1, s->batch);
    CHECK (s->batch->kind == GR_PLAN_REFUSE, "%s: copy of failed member %d "
           "planned", what, i);
    return;
  }
  s->shadow = malloc (s->mem_size);
  test_fill (s->shadow, s->mem_size);
  EACH_BATCH (s, s0, ns) {
    struct gr_plan *p = s->batch;

    memset (s->written, 0, sizeof s->written);
    gr_plan_copy (&c, i, s0, ns, p);
    CHECK (p->kind == GR_PLAN_REBUILD && p->nread == 1 && p->nwrite == 1 &&
           p->read[0].member == i && p->write[0].member == i &&
           p->write[0].kind == GR_IO_WRITE_SHADOW &&
           p->read[0].off == p->write[0].off &&
           p->read[0].len == ns * s->g.chunk && p->rb_adv[i] &&
           p->rb_end == gr_map_member_offset (&s->g, s0 + ns, 0),
           "%s: copy plan of member %d, %" PRIu64 "+%" PRIu64, what, i, s0,
           ns);
    sim_batch (s, p, NULL);
    for (int j = 0; j < s->n; j++)
      CHECK (!s->written[j], "%s: the copy wrote member %d", what, j);
  }
  CHECK (memcmp (s->shadow + d0, s->mem[i] + d0, dlen) == 0,
         "%s: the copy of member %d differs", what, i);
  free (s->shadow);
  s->shadow = NULL;
}

/* Check (scrub): in random batches, with 0, 1 or 2 chunks of a random
 * stripe corrupted on live members: every other stripe consistent, the
 * corrupted one located (one chunk, two live chunks of redundancy or
 * more), undecidable (one), or not located (two chunks); with repair
 * only a located chunk is written, and then it is right again. */
static void
check_check (struct sim *s, const char *what)
{
  const int n = s->n, m = s->g.m;
  const uint32_t C = s->g.chunk;
  struct gr_plan_ctx c = { .g = &s->g, .lm = s->lm, .failed = s->failed,
                           .gpu = sim_gpu };
  int nfailed = 0, live[GR_MAX_MEMBERS], nlive = 0, i;
  uint8_t *chunk = malloc (C);

  for (i = 0; i < n; i++) {
    nfailed += s->failed[i];
    if (!s->failed[i])
      live[nlive++] = i;
  }
  for (int round = 0; round <= 2 && test_failures == 0; round++) {
    int ncorrupt = round;
    const bool repair = test_rand () & 1;
    const uint64_t bad = test_rand () % s->g.stripes;
    int badm[2] = { -1, -1 };

    for (int x = 0; x < ncorrupt && x < nlive; x++) {
      do
        badm[x] = live[test_rand () % nlive];
      while (x == 1 && badm[1] == badm[0] && nlive > 1);
      s->mem[badm[x]][gr_map_member_offset (&s->g, bad, 0) +
                      test_rand () % C] ^= (uint8_t) (1 + test_rand () % 255);
    }
    if (ncorrupt == 2 && (badm[1] < 0 || badm[0] == badm[1]))
      ncorrupt = 1;             /* one member (one live, or twice) */
    if (nlive == 0)
      ncorrupt = 0;
    EACH_BATCH (s, s0, ns) {
      struct gr_plan *p = s->batch;

      memset (s->written, 0, sizeof s->written);
      gr_plan_check (&c, repair, s0, ns, p);
      s->nplans[p->kind]++;
      CHECK ((p->kind == GR_PLAN_REFUSE) == (nfailed >= m), "%s: check "
             "with %d of %d lost is %s", what, nfailed, m,
             kind_names[p->kind]);
      if (p->kind != GR_PLAN_CHECK)
        break;
      CHECK (p->lock == (repair ? GR_LOCK_EXCL : GR_LOCK_SHARED),
             "%s: check's lock", what);
      CHECK (io_bytes (p->read, p->nread) == (uint64_t) nlive * ns * C,
             "%s: check reads %" PRIu64 " bytes", what,
             io_bytes (p->read, p->nread));
      sim_batch (s, p, NULL);
      for (uint64_t t = 0; t < ns; t++) {
        const struct gr_verdict *v = &p->verdict[t];
        enum gr_verdict_kind want = GR_VERDICT_CONSISTENT;

        if (s0 + t == bad && ncorrupt > 0)
          want = m - nfailed < 2 ? GR_VERDICT_UNDECIDABLE
            : ncorrupt == 1 ? GR_VERDICT_LOCATED : GR_VERDICT_UNLOCATED;
        CHECK (v->kind == want, "%s: stripe %" PRIu64 " (%d corrupt): "
               "verdict %d, want %d", what, s0 + t,
               s0 + t == bad ? ncorrupt : 0, v->kind, want);
        if (want == GR_VERDICT_LOCATED)
          CHECK (v->index == gr_map_index (&s->g, bad, badm[0]), "%s: "
                 "located chunk %d, corrupt %d", what, v->index,
                 gr_map_index (&s->g, bad, badm[0]));
      }
      for (i = 0; i < n; i++)
        CHECK (!s->written[i] || (repair && ncorrupt == 1 &&
                                  m - nfailed >= 2 && i == badm[0] &&
                                  bad >= s0 && bad < s0 + ns),
               "%s: check wrote member %d", what, i);
    }
    /* Put the stripe right for the next round (repaired, or not). */
    for (int x = 0; x < ncorrupt; x++) {
      const uint64_t off = gr_map_member_offset (&s->g, bad, 0);

      ref_chunk (s, bad, badm[x], chunk);
      if (repair && ncorrupt == 1 && m - nfailed >= 2)
        CHECK (memcmp (s->mem[badm[x]] + off, chunk, C) == 0,
               "%s: chunk not repaired", what);
      memcpy (s->mem[badm[x]] + off, chunk, C);
    }
  }
  free (chunk);
}

/* Journal replay: a write of new data into [lo, hi) of a random stripe,
 * torn (each live data chunk written or not, parity stale), its lost
 * data chunks journaled; the replay makes the stripe the new data's
 * codeword on every live member, and a lost chunk whose member is live
 * again (below a front) is written.  Refused when a lost data chunk was
 * not journaled. */
static void
check_replay (struct sim *s, const char *what)
{
  const int k = s->g.k, n = s->n;
  const uint32_t C = s->g.chunk;
  uint64_t front[GR_MAX_MEMBERS] = { 0 };
  struct gr_plan_ctx c = { .g = &s->g, .lm = s->lm, .failed = s->failed,
                           .gpu = sim_gpu, .rb_front = front };
  struct gr_replay_entry e;
  const uint64_t st = test_rand () % s->g.stripes;
  uint32_t lo = (uint32_t) (test_rand () % C), hi;
  uint8_t *payload = malloc ((size_t) k * C), *chunk = malloc (C);
  int i, dropped = -1;

  lo -= lo % s->lm;
  hi = lo + s->lm * (uint32_t) (1 + test_rand () % ((C - lo) / s->lm));
  e = (struct gr_replay_entry) { .stripe = st, .lo = lo, .hi = hi };
  /* Some failed members are live again at st (rebuilt below a front),
   * holding the stripe's old chunk. */
  for (i = 0; i < n; i++)
    if (s->failed[i] && test_rand () % 2) {
      front[i] = st + 1;
      s->live_failed[i] = true;
      ref_chunk (s, st, i, chunk);
      memcpy (s->mem[i] + gr_map_member_offset (&s->g, st, 0), chunk, C);
    }
  for (i = 0; i < k; i++) {
    const int mem = gr_map_member (&s->g, st, i);
    uint8_t *d = s->ref + (st * k + i) * C + lo;

    /* New data where it is journaled (a failed member: lost when it was
     * written, and perhaps written to its replacement too) or reached a
     * live member. */
    if (s->failed[mem]) {
      test_fill (d, hi - lo);
      memcpy (payload + (size_t) e.nlost * (hi - lo), d, hi - lo);
      e.index[e.nlost++] = i;
      if (s->live_failed[mem] && test_rand () & 1)
        memcpy (s->mem[mem] + gr_map_member_offset (&s->g, st, lo), d,
                hi - lo);
    }
    else if (test_rand () & 1) {
      test_fill (d, hi - lo);
      memcpy (s->mem[mem] + gr_map_member_offset (&s->g, st, lo), d,
              hi - lo);
    }
  }
  /* Sometimes the journal lacks the last lost chunk: the plan must
   * refuse unless that member is live again. */
  if (e.nlost > 0 && test_rand () % 4 == 0 &&
      !s->live_failed[gr_map_member (&s->g, st, e.index[e.nlost - 1])])
    dropped = e.index[--e.nlost];
  gr_plan_replay (&c, &e, s->batch);
  s->nplans[s->batch->kind]++;
  CHECK ((s->batch->kind == GR_PLAN_REFUSE) == (dropped >= 0),
         "%s: replay with chunk %d not journaled is %s", what, dropped,
         kind_names[s->batch->kind]);
  if (s->batch->kind == GR_PLAN_REPLAY) {
    sim_batch (s, s->batch, payload);
    for (i = 0; i < n; i++) {
      const uint64_t off = gr_map_member_offset (&s->g, st, lo);

      if (s->failed[i] && !s->live_failed[i])
        continue;
      ref_chunk (s, st, i, chunk);
      CHECK (memcmp (s->mem[i] + off, chunk + lo, hi - lo) == 0,
             "%s: replay of stripe %" PRIu64 " [%u, %u): member %d wrong",
             what, st, lo, hi, i);
    }
  }
  /* The members as the reference says, for what follows. */
  for (i = 0; i < n; i++) {
    const uint64_t off = gr_map_member_offset (&s->g, st, 0);

    if (s->failed[i])
      memset (s->mem[i] + off, 0xee, C);
    else {
      ref_chunk (s, st, i, chunk);
      memcpy (s->mem[i] + off, chunk, C);
    }
    s->live_failed[i] = false;
  }
  free (payload);
  free (chunk);
}

/* One geometry: fill it healthy, then every failed set. */
static void
test_geometry (int k, int m, enum gr_code code, uint32_t chunk, bool cksum,
               bool direct)
{
  struct sim s = { .n = k + m, .code = code, .cksum = cksum,
                   .blocks = cksum || direct }, base;
  const char *mode = cksum ? " cksum" : direct ? " direct" : "";
  unsigned set, nsets;
  int i, ops = test_quick () ? 6 : 16;
  char what[128];

  s.g = (struct gr_geom) { .k = k, .m = m, .chunk = chunk,
                           .data_offset = DATA_OFFSET,
                           .stripes = 2 * (uint64_t) (k + m) + 1 };
  CHECK (gr_map_check (&s.g) == 0, "geometry");
  /* ref for RS; its CRS is slow, and every backend is checked against it
   * by gf/test-coder, so CRS runs on the best one. */
  CHECK (gr_coder_new (&s.coder, k, m, code, code == GR_CODE_RS
                       ? gr_backend_find ("ref") : gr_backend_best ()) == 0,
         "coder");
  s.lm = (uint32_t) gr_coder_len_multiple (s.coder);
  if (s.blocks && s.lm < 4096)
    s.lm = 4096;                /* as the executor makes it (exec.c) */
  s.size = gr_map_size (&s.g);
  s.mem_size = DATA_OFFSET + s.g.stripes * chunk;
  s.ref = calloc (1, s.size);
  s.zero = calloc (1, chunk);
  s.plan = gr_plan_new (&s.g);
  s.batch = gr_plan_new_batch (&s.g, 5);
  base = s;
  base.ref = calloc (1, s.size);
  for (i = 0; i < s.n; i++) {
    s.mem[i] = calloc (1, s.mem_size);
    base.mem[i] = calloc (1, s.mem_size);
  }

  /* Healthy: random writes over the zeroed array, then a resync repairs
   * parity chunks spoiled on purpose. */
  snprintf (what, sizeof what, "%d+%d %s%s healthy", k, m,
            code == GR_CODE_RS ? "rs" : "crs", mode);
  random_ops (&s, 4 * ops, false, what);
  check_read_all (&s, what);
  check_consistent (&s, what);
  for (i = 0; i < 3; i++) {
    uint64_t st = test_rand () % s.g.stripes;
    int mem = gr_map_member (&s.g, st, k + (int) (test_rand () % m));

    s.mem[mem][gr_map_member_offset (&s.g, st, 0) + test_rand () % chunk]
      ^= 0x40;
  }
  CHECK (sim_request (&s, GR_REQ_RESYNC, 0, s.size, NULL, 0) == 0,
         "resync");
  check_consistent (&s, "after resync");
  check_check (&s, what);
  check_replay (&s, what);
  check_joined (&s, what);
  for (i = 0; i < 4 && cksum; i++)
    check_repair (&s, what);
  if (m >= 2 && s.g.stripes > 1)
    check_resync_check (&s, what);
  copy_members (&base, &s);

  /* Every failed set of at most m + 1 members. */
  nsets = 1u << s.n;
  for (set = 1; set < nsets && test_failures == 0; set++) {
    int nf = __builtin_popcount (set);

    if (nf > m + 1)
      continue;
    copy_members (&s, &base);
    for (i = 0; i < s.n; i++) {
      s.failed[i] = (set >> i) & 1;
      if (s.failed[i])
        memset (s.mem[i], 0xee, s.mem_size);  /* never to be read */
    }
    snprintf (what, sizeof what, "%d+%d %s%s chunk %u, failed set 0x%x",
              k, m, code == GR_CODE_RS ? "rs" : "crs", mode,
              chunk, set);
    if (nf > m) {
      enum gr_rb_action act[GR_MAX_MEMBERS];

      for (i = 0; i < s.n; i++)
        act[i] = s.failed[i] ? GR_RB_DECODE : GR_RB_NONE;
      gr_plan_rebuild (&(struct gr_plan_ctx) { .g = &s.g, .lm = s.lm,
                         .failed = s.failed, .gpu = sim_gpu }, act, 0,
                       1, s.batch);
      CHECK (s.batch->kind == GR_PLAN_REFUSE, "%s: rebuild not refused",
             what);
      random_ops (&s, ops / 2, true, what);
      CHECK (sim_request (&s, GR_REQ_RESYNC, 0, s.size, NULL, 0) == -EIO,
             "%s: resync not refused", what);
      continue;
    }
    CHECK (sim_request (&s, GR_REQ_RESYNC, 0, s.size, NULL, 0) == -EIO,
           "%s: degraded resync not refused", what);
    check_rebuild_front (&s, what);
    check_copy (&s, what);
    check_check (&s, what);
    check_replay (&s, what);
    check_joined (&s, what);
    for (i = 0; i < 4 && cksum; i++)
      check_repair (&s, what);
    {
      /* Every non-empty subset of the failed set rebuilt (beyond 5
       * members, each member alone and all together). */
      for (unsigned sub = set; sub; sub = (sub - 1) & set) {
        bool want[GR_MAX_MEMBERS];
        char w2[160];

        if (s.n > 5 && sub != set && __builtin_popcount (sub) > 1)
          continue;

        for (i = 0; i < s.n; i++)
          want[i] = (sub >> i) & 1;
        snprintf (w2, sizeof w2, "%s, rebuilding 0x%x", what, sub);
        check_rebuild (&s, want, w2);
        for (i = 0; i < s.n; i++)
          if (want[i])
            memset (s.mem[i], 0xee, s.mem_size);
      }
    }
    check_read_all (&s, what);
    random_ops (&s, ops, false, what);
    check_read_all (&s, what);
    check_consistent (&s, what);
  }
  for (i = 0; i < s.n; i++) {
    s.failed[i] = false;
    free (s.mem[i]);
    free (base.mem[i]);
  }
  free (s.ref);
  free (base.ref);
  free (s.zero);
  gr_plan_free (s.plan);
  gr_plan_free (s.batch);
  gr_coder_free (s.coder);
}

/* --- coding steps run together on a pool ------------------------------------ */

/* k = 2, m = 1: parity = d0 ^ d1, slowly (a 20 ms sleep before the
 * parity is written), recording the thread of each step by its first
 * data block's first byte. */
static pthread_t xor_thread[256];

static int
xor_encode (void *arg, bool gpu, uint8_t *const *blocks, size_t nstripes,
            size_t len)
{
  for (size_t t = 0; t < nstripes; t++) {
    uint8_t *const *b = blocks + t * 3;

    xor_thread[b[0][0]] = pthread_self ();
    usleep (20000);
    for (size_t i = 0; i < len; i++)
      b[2][i] = b[0][i] ^ b[1][i];
  }
  return 0;
}

/* Two ENCODE steps of one stripe each in scratch, 3 blocks of 4 KiB each
 * from block 0 (step 0) and from block `second` (step 1), run on a pool
 * of 3 threads: the scratch as gr_steps_run left it. */
static uint8_t *
two_steps (struct gr_plan *p, const struct gr_geom *g, size_t second,
           const uint8_t *init, size_t nblocks)
{
  struct gr_plan_coder cd = { .encode = xor_encode, .pool = pools[3] };
  uint8_t *scratch = malloc (nblocks * 4096);
  struct gr_bufs b = { .scratch = scratch };

  memcpy (scratch, init, nblocks * 4096);
  p->nblk = 6;
  p->nstep = 2;
  for (size_t i = 0; i < 3; i++) {
    p->blk[i] = (struct gr_loc) { GR_SPACE_SCRATCH, i * 4096 };
    p->blk[3 + i] = (struct gr_loc) { GR_SPACE_SCRATCH, (second + i) * 4096 };
  }
  for (size_t j = 0; j < 2; j++)
    p->step[j] = (struct gr_step) { .kind = GR_STEP_ENCODE, .len = 4096,
                                    .blk0 = 3 * j, .nstripes = 1 };
  CHECK (gr_steps_run (p, g, &b, &cd) == 0, "two steps");
  return scratch;
}

/* Independent steps are split together (each on a thread of its own);
 * a step that reads what the one before writes runs after it. */
static void
test_coding_runs (void)
{
  const struct gr_geom g = { .k = 2, .m = 1, .chunk = 4096, .stripes = 8 };
  struct gr_plan *p = gr_plan_new (&g);
  uint8_t init[6 * 4096], *out;

  CHECK (p != NULL && p->cap_blk >= 6 && p->cap_step >= 2);
  test_fill (init, sizeof init);
  init[0] = 1;
  init[2 * 4096] = 2;                   /* the dependent step's d0 */
  init[3 * 4096] = 3;
  /* Independent: blocks 0-2 and 3-5. */
  out = two_steps (p, &g, 3, init, 6);
  for (size_t i = 0; i < 4096; i++) {
    CHECK (out[2 * 4096 + i] == (init[i] ^ init[4096 + i]), "step 0");
    CHECK (out[5 * 4096 + i] == (init[3 * 4096 + i] ^ init[4 * 4096 + i]),
           "step 1");
  }
  CHECK (!pthread_equal (xor_thread[1], xor_thread[3]),
         "two independent steps ran on one thread");
  free (out);
  /* Dependent: step 1's d0 is step 0's parity (blocks 2-4). */
  out = two_steps (p, &g, 2, init, 5);
  for (size_t i = 0; i < 4096; i++) {
    const uint8_t p0 = init[i] ^ init[4096 + i];

    CHECK (out[2 * 4096 + i] == p0, "step 0");
    CHECK (out[4 * 4096 + i] == (p0 ^ init[3 * 4096 + i]),
           "step 1 ran before the step it depends on");
  }
  free (out);
  gr_plan_free (p);
}

/* A degraded read's stripes each leave a lost block alone (a parity
 * chunk the read does not want: GR_SPACE_NONE, no memory): their GPU
 * reconstructs touch no block in common and reach the coder as one call
 * (gathered as one across requests: coding.h), not one call a stripe. */
static size_t none_calls, none_ops;

static int
none_many (void *arg, bool gpu, const struct gr_code_op *ops, size_t nops)
{
  (void) arg;
  CHECK (gpu, "many: not on the GPU");
  for (size_t j = 0; j < nops; j++)
    CHECK (ops[j].nerased == 2 && ops[j].blocks[3] == NULL &&
           ops[j].blocks[0] != NULL, "many: operation %zu's blocks", j);
  none_calls++;
  none_ops += nops;
  return 0;
}

static void
test_coding_runs_unused_blocks (void)
{
  const struct gr_geom g = { .k = 2, .m = 2, .chunk = 4096, .stripes = 8 };
  struct gr_plan *p = gr_plan_new (&g);
  struct gr_plan_coder cd = { .many = none_many };
  uint8_t *scratch = calloc (6, 4096);
  struct gr_bufs b = { .scratch = scratch };

  CHECK (p != NULL && scratch != NULL && p->cap_blk >= 8 &&
         p->cap_step >= 2 && p->cap_er >= 4);
  p->nblk = 8;
  p->nstep = 2;
  for (size_t j = 0; j < 2; j++) {
    /* Data chunk 0 lost and rebuilt, 1 and parity 2 survive, parity 3
     * lost and left alone. */
    for (size_t i = 0; i < 3; i++)
      p->blk[4 * j + i] = (struct gr_loc) { GR_SPACE_SCRATCH,
                                            (3 * j + i) * 4096 };
    p->blk[4 * j + 3] = (struct gr_loc) { GR_SPACE_NONE, 0 };
    p->er[2 * j] = 0;
    p->er[2 * j + 1] = 3;
    p->step[j] = (struct gr_step) { .kind = GR_STEP_RECONSTRUCT,
                                    .len = 4096, .blk0 = 4 * j,
                                    .nstripes = 1, .er0 = 2 * j, .ner = 2,
                                    .gpu = true };
  }
  CHECK (gr_steps_run (p, &g, &b, &cd) == 0, "two reconstructs");
  CHECK (none_calls == 1 && none_ops == 2,
         "two independent reconstructs, each with a block left alone, "
         "reached the coder in %zu calls (%zu operations), not one",
         none_calls, none_ops);
  free (scratch);
  gr_plan_free (p);
}

int
main (void)
{
  int k, m;

  test_seed ("test-plan");
  for (k = 1; k < NPOOLS; k++)
    CHECK ((pools[k] = gr_pool_new (k)) != NULL &&
           gr_pool_width (pools[k]) == k + 1, "a pool of %d threads", k);
  test_coding_runs ();
  test_coding_runs_unused_blocks ();
  for (k = 1; k <= 6; k++)
    for (m = 1; k + m <= 7; m++) {
      test_geometry (k, m, GR_CODE_RS, 4096, false, false);
      test_geometry (k, m, GR_CODE_CRS, 8192, false, false);
      /* With checksums: blocks of 4 KiB in chunks of 16 KiB, so that
       * requests touch blocks in part. */
      if (k + m <= 5)
        test_geometry (k, m, GR_CODE_RS, 16384, true, false);
      /* O_DIRECT members without checksums: whole blocks too. */
      if (k + m <= 4)
        test_geometry (k, m, GR_CODE_CRS, 16384, false, true);
    }
  for (k = 1; k < NPOOLS; k++)
    gr_pool_free (pools[k]);
  /* Degraded reads of several stripes routed to the GPU submit them
   * together. */
  CHECK (sim_not_rebuilt > 0, "no degraded read left a lost chunk it "
         "does not touch alone");
  CHECK (sim_rb_not_rebuilt > 0, "no rebuild left a lost chunk it does "
         "not write alone");
  CHECK (sim_wr_not_rebuilt > 0, "no degraded write left a lost parity "
         "chunk alone");
  CHECK (sim_many_runs > 0, "no run of GPU steps went to the coder at "
         "once");
  CHECK (sim_routes_checked > 0, "no reconstruct's route was checked");
  CHECK (sim_gpu_copies > 0, "no copy was made for the GPU");
  CHECK (sim_write_copies > 0, "no full-stripe write's data was copied "
         "for the GPU");
  printf ("runs of GPU coding steps submitted together: %" PRIu64 "\n",
          sim_many_runs);
  return test_done ("test-plan");
}
