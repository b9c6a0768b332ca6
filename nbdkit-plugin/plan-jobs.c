/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the planner: the background jobs' batches (rebuild, check,
 * journal replay).  See plan.h. */
#include <string.h>

#include "plan.h"
#include "plan-internal.h"

bool
gr_plan_fits (const struct gr_plan *p, const struct gr_geom *g,
              uint64_t nstripes)
{
  const size_t n = (size_t) g->k + g->m;

  return nstripes >= 1 && nstripes <= p->cap_stripes &&
    nstripes * n + n <= p->cap_io &&
    nstripes * (3 * n + 1) + n <= p->cap_blk &&
    nstripes + 4 <= p->cap_step && nstripes * g->m <= p->cap_er;
}

/* A batch plan of whole stripes [s0, s0 + ns). */
static void
batch_start (const struct gr_plan_ctx *c, struct gr_plan *p,
             enum gr_plan_kind kind, enum gr_lock_mode lock, uint64_t s0,
             uint64_t ns)
{
  const uint64_t width = gr_map_stripe_width (c->g);

  p->kind = kind;
  p->lock = lock;
  p->offset = s0 * width;
  p->len = ns * width;
  p->s0 = s0;
  p->nstripes = ns;
  p->gen = c->gen;
  p->journal = false;
  p->lo = 0;
  p->hi = c->g->chunk;
  p->scratch_len = 0;
  plan_reset (p);
}

enum gr_plan_kind
gr_plan_skip (const struct gr_plan_ctx *c, uint64_t s0, uint64_t ns,
              struct gr_plan *p)
{
  batch_start (c, p, GR_PLAN_SKIP, GR_LOCK_NONE, s0, ns);
  return p->kind;
}

/* --- grouping stripes by erasure pattern ---------------------------------- */

/* A batch plan's work arrays (steps.h): stripe s's erasure set at ER (s)
 * (m entries; an erased chunk that is not to be rebuilt, only lost, as
 * ~index: gf.h), its size wner[s], DONE once it has a coding step. */
#define ER(s) (p->wer + (s) * (size_t) m)
#define DONE (-2)

/* Has stripe t the erasure set of stripe s (ne entries)? */
static bool
same_pattern (const struct gr_plan *p, int m, uint64_t t, uint64_t s, int ne)
{
  return p->wner[t] == ne &&
    memcmp (ER (t), ER (s), (size_t) ne * sizeof *p->wer) == 0;
}

/* Stripe t's n blocks of a rebuild batch's reconstruct step: all in
 * scratch, stripe after stripe, but for the erased chunks it does not
 * rebuild (no block). */
static void
rebuild_blocks (const struct gr_plan_ctx *c, struct gr_plan *p, uint64_t t,
                uint64_t ns)
{
  const int m = c->g->m;
  const size_t n = (size_t) c->g->k + m, b0 = p->nblk;

  for (size_t i = 0; i < n; i++)
    p->blk[p->nblk++] = loc (GR_SPACE_SCRATCH, (t * n + i) * c->g->chunk);
  for (int e = 0; e < p->wner[t]; e++)
    if (ER (t)[e] < 0)
      p->blk[b0 + (size_t) ~ER (t)[e]] = loc (GR_SPACE_NONE, 0);
}

/* One RECONSTRUCT step per erasure pattern of the batch's ns stripes
 * (their sets at ER (t), sizes in wner; DONE: none), the stripes that
 * lose the same chunks side by side (parity rotates: few patterns),
 * each stripe's blocks listed by blocks (). */
static void
by_pattern (const struct gr_plan_ctx *c, struct gr_plan *p, uint64_t ns,
            void (*blocks) (const struct gr_plan_ctx *c, struct gr_plan *p,
                            uint64_t t, uint64_t ns))
{
  const int k = c->g->k, m = c->g->m;
  int *ner = p->wner;

  for (uint64_t s = 0; s < ns; s++) {
    size_t blk0 = p->nblk, grp = 0;
    const int ne = ner[s];
    int er[GR_MAX_MEMBERS];

    if (ne == DONE)
      continue;
    for (int e = 0; e < ne; e++)
      er[e] = ER (s)[e] < 0 ? ~ER (s)[e] : ER (s)[e];
    for (uint64_t t = s; t < ns; t++) {
      if (!same_pattern (p, m, t, s, ne))
        continue;
      blocks (c, p, t, ns);
      if (t != s)
        ner[t] = DONE;
      grp++;
    }
    add_reconstruct (p, blk0, grp, c->g->chunk, er, ne,
                     c->gpu (c->gpu_arg, GR_OP_RECONSTRUCT,
                             grp * k * c->g->chunk, members_lost (c)));
    ner[s] = DONE;
  }
}

/* --- rebuild ------------------------------------------------------------- */

/* Member i's chunks of stripes [from, s0 + ns) (from >= s0) zeroed:
 * punched or zeroed in one fallocate where the members allow it, else
 * written from zeros a chunk at a time. */
static void
zero_chunks (const struct gr_plan_ctx *c, struct gr_plan *p, int i,
             uint64_t from, uint64_t end)
{
  const size_t C = c->g->chunk;

  if (from >= end)
    return;
  if (c->falloc & (GR_FALLOC_PUNCH | GR_FALLOC_ZERO)) {
    add_io (p->write, &p->nwrite, (c->falloc & GR_FALLOC_PUNCH)
            ? GR_IO_PUNCH : GR_IO_ZERO_RANGE, i, moff (c, from, 0),
            (end - from) * C, loc (GR_SPACE_ZERO, 0));
    return;
  }
  for (uint64_t s = from; s < end; s++)
    add_write (p, i, moff (c, s, 0), C, loc (GR_SPACE_ZERO, 0));
}

enum gr_plan_kind
gr_plan_rebuild (const struct gr_plan_ctx *c, const enum gr_rb_action *act,
                 uint64_t s0, uint64_t ns, struct gr_plan *p)
{
  const struct gr_geom *g = c->g;
  const int k = g->k, m = g->m, n = k + m;
  const size_t C = g->chunk;
  int *ner = p->wner, i;
  uint64_t s;

  batch_start (c, p, GR_PLAN_REBUILD, GR_LOCK_EXCL, s0, ns);
  if (!gr_plan_fits (p, g, ns))
    return p->kind = GR_PLAN_REFUSE;
  p->rb_end = gr_map_member_offset (g, s0 + ns, 0);
  p->scratch_len = ns * (size_t) n * C;
  /* Each stripe: the members decoded where their front is not past it,
   * rebuilt from its first k live chunks. */
  for (s = 0; s < ns; s++) {
    bool lst[GR_MAX_MEMBERS], wnt[GR_MAX_MEMBERS] = { false };
    int surv[GR_MAX_MEMBERS], nw = 0;

    for (i = 0; i < n; i++)
      lst[i] = lost (c, s0 + s, i);
    for (i = 0; i < n; i++)
      if (act[i] != GR_RB_NONE && c->failed[i] &&
          (c->rb_front == NULL || c->rb_front[i] <= s0 + s)) {
        p->rb_adv[i] = true;
        if (act[i] == GR_RB_DECODE) {
          wnt[gr_map_index (g, s0 + s, i)] = true;
          nw++;
        }
      }
    ner[s] = nw > 0 ? gr_reconstruct_choose (k, m, lst, wnt, ER (s), surv)
      : DONE;
    if (ner[s] == DONE)
      continue;
    if (ner[s] < 0)
      return p->kind = GR_PLAN_REFUSE;
    /* A lost chunk this batch does not write (its member not rebuilt
     * here, or its front past the stripe) only lost, not rebuilt. */
    for (i = 0; i < ner[s]; i++)
      if (!wnt[ER (s)[i]])
        ER (s)[i] = ~ER (s)[i];
    for (i = 0; i < k; i++)
      add_read (p, gr_map_member (g, s0 + s, surv[i]),
                moff (c, s0 + s, 0), C,
                loc (GR_SPACE_SCRATCH, (s * n + (size_t) surv[i]) * C));
  }
  /* One coding step per erasure pattern. */
  by_pattern (c, p, ns, rebuild_blocks);
  /* The writes: each member from its front on (kept: none). */
  for (i = 0; i < n; i++) {
    const uint64_t from = c->rb_front && c->rb_front[i] > s0
      ? c->rb_front[i] : s0;

    if (!p->rb_adv[i])
      continue;
    if (act[i] == GR_RB_ZERO)
      zero_chunks (c, p, i, from, s0 + ns);
    else if (act[i] == GR_RB_DECODE)
      for (s = from - s0; s < ns; s++)
        add_write (p, i, moff (c, s0 + s, 0), C,
                   loc (GR_SPACE_SCRATCH,
                        (s * n + (size_t) gr_map_index (g, s0 + s, i)) * C));
  }
  for (i = 0; i < n && !p->rb_adv[i]; i++)
    ;
  if (i == n)
    p->kind = GR_PLAN_SKIP;     /* below every front: rebuilt already */
  return p->kind;
}

/* --- a live replacement's copy ------------------------------------------ */

enum gr_plan_kind
gr_plan_copy (const struct gr_plan_ctx *c, int i, uint64_t s0, uint64_t ns,
              struct gr_plan *p)
{
  const size_t len = ns * (size_t) c->g->chunk;

  batch_start (c, p, GR_PLAN_REBUILD, GR_LOCK_EXCL, s0, ns);
  if (!gr_plan_fits (p, c->g, ns) || c->failed[i])
    return p->kind = GR_PLAN_REFUSE;
  p->rb_end = gr_map_member_offset (c->g, s0 + ns, 0);
  p->rb_adv[i] = true;
  p->scratch_len = len;
  add_read (p, i, moff (c, s0, 0), len, loc (GR_SPACE_SCRATCH, 0));
  add_io (p->write, &p->nwrite, GR_IO_WRITE_SHADOW, i, moff (c, s0, 0), len,
          loc (GR_SPACE_SCRATCH, 0));
  return p->kind;
}

/* --- check (scrub) --------------------------------------------------------- */

/* Scratch of a check plan of nb stripes: what was read, member-major
 * (member j's chunks of the batch from j * nb chunks on), then m chunks a
 * stripe computed again, then a chunk a stripe for VERIFY's fixes, then
 * n chunks VERIFY works in. */
static size_t
check_read_at (const struct gr_geom *g, uint64_t nb, int member, uint64_t t)
{
  return ((size_t) member * nb + t) * g->chunk;
}

static size_t
check_cmp_at (const struct gr_geom *g, uint64_t nb, uint64_t t, int j)
{
  const size_t n = (size_t) g->k + g->m;

  return (n * nb + t * g->m + (size_t) j) * g->chunk;
}

/* Stripe t's n blocks of a degraded check's reconstruct step: a
 * survivor as read, an erased chunk (the j-th) into its computed place,
 * the lost ones too (VERIFY passes over them). */
static void
check_blocks (const struct gr_plan_ctx *c, struct gr_plan *p, uint64_t t,
              uint64_t ns)
{
  const int m = c->g->m, n = c->g->k + m;
  int j = 0;

  for (int i = 0; i < n; i++)
    if (j < p->wner[t] && ER (t)[j] == i) {
      p->blk[p->nblk++] = loc (GR_SPACE_SCRATCH,
                               check_cmp_at (c->g, ns, t, j));
      j++;
    }
    else
      p->blk[p->nblk++] = p->blk[t * n + i];    /* as read (R = 0) */
}

enum gr_plan_kind
gr_plan_check (const struct gr_plan_ctx *c, bool repair, uint64_t s0,
               uint64_t ns, struct gr_plan *p)
{
  const struct gr_geom *g = c->g;
  const int k = g->k, m = g->m, n = k + m;
  const size_t C = g->chunk;
  const size_t R = 0, CMP = ns * (size_t) n, LISTS = 2 * ns * (size_t) n;
  const size_t fix_at = (n + (size_t) m) * ns * C;
  size_t FIX, TMP;
  int nfailed = 0, i;
  struct gr_step *st;
  uint64_t t;

  batch_start (c, p, GR_PLAN_CHECK, repair ? GR_LOCK_EXCL : GR_LOCK_SHARED,
               s0, ns);
  if (!gr_plan_fits (p, g, ns))
    return p->kind = GR_PLAN_REFUSE;
  for (i = 0; i < n; i++)
    nfailed += c->failed[i];
  if (nfailed >= m)
    return p->kind = GR_PLAN_REFUSE;    /* nothing to check against */
  p->scratch_len = fix_at + (ns + (size_t) n) * C;
  for (i = 0; i < n; i++)
    if (!c->failed[i])
      add_read (p, i, moff (c, s0, 0), ns * C,
                loc (GR_SPACE_SCRATCH, check_read_at (g, ns, i, 0)));
  /* As read (R), and computed again (CMP): NONE where there is none. */
  p->nblk = LISTS;
  for (t = 0; t < ns; t++)
    for (i = 0; i < n; i++) {
      const int mb = gr_map_member (g, s0 + t, i);

      p->blk[R + t * n + i] = c->failed[mb] ? loc (GR_SPACE_NONE, 0)
        : loc (GR_SPACE_SCRATCH, check_read_at (g, ns, mb, t));
      p->blk[CMP + t * n + i] = loc (GR_SPACE_NONE, 0);
    }
  if (nfailed == 0) {
    /* The batch's parity again, in one operation, beside what was read:
     * its list is data as read, parity computed. */
    for (t = 0; t < ns; t++)
      for (i = k; i < n; i++)
        p->blk[CMP + t * n + i] = loc (GR_SPACE_SCRATCH,
                                       check_cmp_at (g, ns, t, i - k));
    for (t = 0; t < ns; t++)
      for (i = 0; i < n; i++)
        p->blk[p->nblk++] = i < k ? p->blk[R + t * n + i]
          : p->blk[CMP + t * n + i];
    st = add_coding (p, GR_STEP_ENCODE, ns, C, 0,
                     c->gpu (c->gpu_arg, GR_OP_ENCODE, ns * k * C, 0));
    st->blk0 = LISTS;
  }
  else {
    /* Degraded: each stripe's live chunks beyond its first k live ones,
     * rebuilt from those; one operation per erasure pattern. */
    int *ner = p->wner;

    for (t = 0; t < ns; t++) {
      bool lst[GR_MAX_MEMBERS], surv[GR_MAX_MEMBERS] = { false };
      int sv[GR_MAX_MEMBERS], e[GR_MAX_MEMBERS], j = 0;

      for (i = 0; i < n; i++)
        lst[i] = lost (c, s0 + t, i);
      (void) gr_reconstruct_choose (k, m, lst, NULL, e, sv);
      for (i = 0; i < k; i++)
        surv[sv[i]] = true;
      ner[t] = 0;
      for (i = 0; i < n; i++)
        if (!surv[i]) {
          ER (t)[ner[t]++] = i;
          if (!lst[i])
            p->blk[CMP + t * n + i] = loc (GR_SPACE_SCRATCH,
                                           check_cmp_at (g, ns, t, j));
          j++;
        }
    }
    by_pattern (c, p, ns, check_blocks);
  }
  /* VERIFY, and the fixes it leaves where repair writes them. */
  FIX = p->nblk;
  for (t = 0; t < ns; t++)
    p->blk[p->nblk++] = loc (GR_SPACE_SCRATCH, fix_at + t * C);
  TMP = p->nblk;
  for (i = 0; i < n; i++)
    p->blk[p->nblk++] = loc (GR_SPACE_SCRATCH, fix_at + (ns + i) * C);
  st = add_coding (p, GR_STEP_VERIFY, ns, C, 0,
                   c->gpu (c->gpu_arg, GR_OP_RECONSTRUCT, (size_t) k * C,
                           m));
  st->blk0 = R;
  st->cmp0 = CMP;
  st->fix0 = FIX;
  st->tmp0 = TMP;
  for (t = 0; repair && t < ns; t++) {
    add_io (p->write, &p->nwrite, GR_IO_WRITE_LOCATED, -1,
            moff (c, s0 + t, 0), C, loc (GR_SPACE_SCRATCH, fix_at + t * C));
    p->write[p->nwrite - 1].slot = (uint32_t) t;
  }
  return p->kind;
}

enum gr_plan_kind
gr_plan_resync_check (const struct gr_plan_ctx *c, uint64_t s0, uint64_t ns,
                      struct gr_plan *p)
{
  const struct gr_geom *g = c->g;
  const int k = g->k, n = k + g->m;

  for (int i = 0; i < n; i++)
    if (c->failed[i])
      return p->kind = GR_PLAN_REFUSE;  /* a resync needs every member */
  if (gr_plan_check (c, true, s0, ns, p) != GR_PLAN_CHECK)
    return p->kind;
  for (uint64_t t = 0; t < ns; t++)
    for (int i = k; i < n; i++) {
      const int mb = gr_map_member (g, s0 + t, i);

      add_io (p->write, &p->nwrite, GR_IO_WRITE_UNLOCATED, mb,
              moff (c, s0 + t, 0), g->chunk,
              loc (GR_SPACE_SCRATCH, check_cmp_at (g, ns, t, i - k)));
      p->write[p->nwrite - 1].cmp =
        loc (GR_SPACE_SCRATCH, check_read_at (g, ns, mb, t));
      p->write[p->nwrite - 1].slot = (uint32_t) t;
    }
  return p->kind = GR_PLAN_RESYNC;
}

/* --- journal replay ------------------------------------------------------ */

/* Is member `mem` live at stripe s: not failed, or rebuilt there? */
static bool
live (const struct gr_plan_ctx *c, uint64_t s, int mem)
{
  return !c->failed[mem] || (c->rb_front && s < c->rb_front[mem]);
}

enum gr_plan_kind
gr_plan_replay (const struct gr_plan_ctx *c, const struct gr_replay_entry *e,
                struct gr_plan *p)
{
  const struct gr_geom *g = c->g;
  const int k = g->k, n = k + g->m;
  const uint64_t s = e->stripe;
  const size_t L = e->hi - e->lo;
  const uint64_t mo = moff (c, s, e->lo);
  int i, x;

  batch_start (c, p, GR_PLAN_REPLAY, GR_LOCK_EXCL, s, 1);
  p->lo = e->lo;
  p->hi = e->hi;
  p->scratch_len = (size_t) n * L;
  p->nblk = n;
  for (i = 0; i < n; i++)
    p->blk[i] = loc (GR_SPACE_SCRATCH, (size_t) i * L);
  for (i = 0; i < k; i++) {
    const int mem = gr_map_member (g, s, i);

    for (x = 0; x < e->nlost && e->index[x] != i; x++)
      ;
    if (x < e->nlost) {
      /* Journaled: from the entry, and written where it is live again
       * (the rebuilt part of a replacement). */
      p->blk[i] = loc (GR_SPACE_REQ, (size_t) x * L);
      if (live (c, s, mem))
        add_write (p, mem, mo, L, p->blk[i]);
    }
    else if (live (c, s, mem))
      add_read (p, mem, mo, L, p->blk[i]);
    else
      return p->kind = GR_PLAN_REFUSE;  /* a data chunk lost unjournaled */
  }
  add_coding (p, GR_STEP_ENCODE, 1, L, 0,
              c->gpu (c->gpu_arg, GR_OP_ENCODE, (size_t) k * L, 0));
  for (i = k; i < n; i++) {
    const int mem = gr_map_member (g, s, i);

    if (live (c, s, mem))
      add_write (p, mem, mo, L, p->blk[i]);
  }
  return p->kind;
}

/* --- repair of blocks that failed their checksums ------------------------ */

enum gr_plan_kind
gr_plan_repair (const struct gr_plan_ctx *c, uint64_t s, uint32_t lo,
                uint32_t hi, const bool *bad, struct gr_plan *p)
{
  const int k = c->g->k, m = c->g->m, n = k + m;
  const size_t L = hi - lo;
  bool lst[GR_MAX_MEMBERS], want[GR_MAX_MEMBERS];
  int er[GR_MAX_MEMBERS], surv[GR_MAX_MEMBERS], nbad = 0, ngood = 0, ne;
  int i, j;

  batch_start (c, p, GR_PLAN_REPAIR, GR_LOCK_EXCL, s, 1);
  p->lo = lo;
  p->hi = hi;
  for (i = 0; i < n; i++) {
    nbad += bad[i];
    ngood += !bad[i] && !lost (c, s, i);
  }
  if (nbad == 0)
    return p->kind = GR_PLAN_SKIP;
  for (i = 0; i < 2 * n; i++)
    p->blk[i] = loc (GR_SPACE_SCRATCH, (size_t) i * L);
  p->nblk = (size_t) 2 * n;
  p->scratch_len = (size_t) 2 * n * L;
  /* Every chunk not lost, as it is, into blk[n + i]. */
  for (i = 0; i < n; i++)
    if (bad[i] || !lost (c, s, i))
      add_read (p, gr_map_member (c->g, s, i), moff (c, s, lo), L,
                p->blk[n + i]);
  if (ngood < k)
    return p->kind = GR_PLAN_REFUSE;    /* the reads stay: see plan.h */
  /* The first k good ones are the survivors; every other chunk is
   * computed from them into blk[i]: the bad ones to be written, the
   * other good ones to compare with what was read. */
  for (i = 0, j = 0; i < n; i++) {
    lst[i] = true;
    want[i] = true;
    if (j < k && !bad[i] && !lost (c, s, i)) {
      lst[i] = false;
      j++;
    }
  }
  ne = gr_reconstruct_choose (k, m, lst, want, er, surv);
  for (i = 0; i < k; i++)
    add_move (p, GR_STEP_COPY, p->blk[surv[i]], p->blk[n + surv[i]], L);
  add_reconstruct (p, 0, 1, L, er, ne, false);
  for (i = 0; i < n; i++)
    if (bad[i])
      add_write (p, gr_map_member (c->g, s, i), moff (c, s, lo), L,
                 p->blk[i]);
  return p->kind;
}
