/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - running a plan's steps in memory.  See steps.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "steps.h"
#include "pool.h"

void
gr_steps_xor (uint8_t *d, const uint8_t *s, size_t len)
{
  size_t x;

  for (x = 0; x + 8 <= len; x += 8) {
    uint64_t a, b;

    memcpy (&a, d + x, 8);
    memcpy (&b, s + x, 8);
    a ^= b;
    memcpy (d + x, &a, 8);
  }
  for (; x < len; x++)
    d[x] ^= s[x];
}

/* --- VERIFY --------------------------------------------------------------- */

/* Is stripe rd (n chunks as read, NULL where lost; excl >= 0: taken as
 * erased too) one codeword?  Its chunks beyond the first k available are
 * rebuilt from those into tmp and compared, so the excluded chunk's
 * rebuilt bytes are left in tmp[excl].  -1 when it cannot be checked (a
 * coding error: errno set, or no redundancy: errno 0), else 0 or 1. */
static int
codeword (const struct gr_geom *g, const struct gr_step *st,
          uint8_t *const *rd, uint8_t *const *tmp, int excl,
          const struct gr_plan_coder *cd)
{
  const int k = g->k, n = k + g->m;
  bool gone[GR_MAX_MEMBERS], surv[GR_MAX_MEMBERS] = { false };
  int er[GR_MAX_MEMBERS], sv[GR_MAX_MEMBERS], ner = 0, ncheck = 0, c;
  uint8_t *t[GR_MAX_MEMBERS];

  for (c = 0; c < n; c++)
    gone[c] = rd[c] == NULL || c == excl;
  if (gr_reconstruct_choose (k, g->m, gone, NULL, er, sv) < 0) {
    errno = 0;
    return -1;
  }
  for (c = 0; c < k; c++)
    surv[sv[c]] = true;
  for (c = 0; c < n; c++) {
    t[c] = surv[c] ? rd[c] : tmp[c];
    if (!surv[c])
      er[ner++] = c;
    if (!surv[c] && !gone[c])
      ncheck++;
  }
  if (ncheck == 0) {
    errno = 0;
    return -1;
  }
  if (cd->reconstruct (cd->arg, st->gpu, er, ner, t, 1, st->len) == -1)
    return -1;
  for (c = 0; c < n; c++)
    if (!surv[c] && !gone[c] && memcmp (t[c], rd[c], st->len) != 0)
      return 0;
  return 1;
}

/* The verdicts of VERIFY step st (plan.h). */
static int
verify (struct gr_plan *p, const struct gr_step *st, const struct gr_geom *g,
        const struct gr_plan_coder *cd)
{
  const int n = g->k + g->m;
  uint8_t *const *tmp = p->ptr + st->tmp0;

  for (size_t t = 0; t < st->nstripes; t++) {
    uint8_t *const *rd = p->ptr + st->blk0 + t * n;
    uint8_t *const *cp = p->ptr + st->cmp0 + t * n;
    struct gr_verdict *v = &p->verdict[t];
    int nlost = 0, c, q;

    *v = (struct gr_verdict) { .kind = GR_VERDICT_CONSISTENT, .index = -1 };
    for (c = 0; c < n; c++) {
      nlost += rd[c] == NULL;
      if (rd[c] && cp[c] && memcmp (rd[c], cp[c], st->len) != 0)
        v->kind = GR_VERDICT_UNLOCATED;
    }
    if (v->kind == GR_VERDICT_CONSISTENT)
      continue;
    /* Each live chunk in turn taken as erased: exactly one choice that
     * makes the rest consistent names the corrupt chunk.  Two live
     * chunks of redundancy are needed for that. */
    if (g->m - nlost < 2) {
      v->kind = GR_VERDICT_UNDECIDABLE;
      continue;
    }
    for (c = 0; c < n; c++) {
      if (rd[c] == NULL)
        continue;
      q = codeword (g, st, rd, tmp, c, cd);
      if (q == -1 && errno != 0)
        return -1;
      if (q != 1)
        continue;
      if (v->kind == GR_VERDICT_LOCATED) {
        v->kind = GR_VERDICT_UNLOCATED;
        break;
      }
      v->kind = GR_VERDICT_LOCATED;
      v->index = c;
      memcpy (p->ptr[st->fix0 + t], tmp[c], st->len);
    }
    if (v->kind != GR_VERDICT_LOCATED)
      v->index = -1;
  }
  return 0;
}

/* --- coding on every core -------------------------------------------------- */

/* Items of a coding step for each thread of the pool: several, so that
 * a thread held up by the scheduler delays a small part of the step. */
#define ITEMS_PER_THREAD 4

/* A coding step split into items of `per` stripes. */
struct split {
  const struct gr_plan_coder *cd;
  const struct gr_step *st;
  const int *er;
  uint8_t **bp;                 /* the step's first stripe's blocks */
  size_t n;                     /* blocks a stripe */
  size_t per;
  int err;                      /* the first failure's errno; 0: none */
};

static void
split_item (void *arg, size_t item)
{
  struct split *sp = arg;
  const struct gr_step *st = sp->st;
  const size_t s0 = item * sp->per;
  const size_t ns = st->nstripes - s0 < sp->per ? st->nstripes - s0 : sp->per;
  uint8_t **bp = sp->bp + s0 * sp->n;
  int r;

  r = st->kind == GR_STEP_ENCODE
    ? sp->cd->encode (sp->cd->arg, false, bp, ns, st->len)
    : sp->cd->reconstruct (sp->cd->arg, false, sp->er, st->ner, bp, ns,
                           st->len);
  if (r == -1) {
    int zero = 0;

    (void) __atomic_compare_exchange_n (&sp->err, &zero, errno ? errno : EIO,
                                        false, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED);
  }
}

/* Coding step st (ENCODE or RECONSTRUCT, on the CPU) split by stripes
 * over cd->pool's threads and the calling one.  0, or -1 with errno
 * set. */
static int
coding_split (struct gr_plan *p, const struct gr_step *st,
              const struct gr_geom *g, const struct gr_plan_coder *cd)
{
  const size_t items = (size_t) gr_pool_width (cd->pool) * ITEMS_PER_THREAD;
  struct split sp = { .cd = cd, .st = st, .er = p->er + st->er0,
                      .bp = p->ptr + st->blk0, .n = (size_t) g->k + g->m,
                      .per = (st->nstripes + items - 1) / items };

  gr_pool_run (cd->pool, (st->nstripes + sp.per - 1) / sp.per, split_item,
               &sp);
  if (sp.err) {
    errno = sp.err;
    return -1;
  }
  return 0;
}

int
gr_steps_run (struct gr_plan *p, const struct gr_geom *g,
              const struct gr_bufs *b, const struct gr_plan_coder *cd)
{
  int k = g->k, n = k + g->m;
  size_t i;

  for (i = 0; i < p->nblk; i++)
    p->ptr[i] = gr_steps_at (b, p->blk[i]);
  for (i = 0; i < p->nstep; i++) {
    const struct gr_step *st = &p->step[i];
    uint8_t **bp = p->ptr + st->blk0;
    int r = 0;

    switch (st->kind) {
    case GR_STEP_ZERO:
      memset (gr_steps_at (b, st->dst), 0, st->len);
      break;
    case GR_STEP_COPY:
      memcpy (gr_steps_at (b, st->dst), gr_steps_at (b, st->src), st->len);
      break;
    case GR_STEP_XOR:
      gr_steps_xor (gr_steps_at (b, st->dst), gr_steps_at (b, st->src), st->len);
      break;
    case GR_STEP_ENCODE:
      if (!st->gpu && gr_pool_width (cd->pool) > 1 && st->nstripes > 1)
        r = coding_split (p, st, g, cd);
      else
        r = cd->encode (cd->arg, st->gpu, bp, st->nstripes, st->len);
      break;
    case GR_STEP_RECONSTRUCT:
      if (!st->gpu && gr_pool_width (cd->pool) > 1 && st->nstripes > 1)
        r = coding_split (p, st, g, cd);
      else
        r = cd->reconstruct (cd->arg, st->gpu, p->er + st->er0, st->ner,
                             bp, st->nstripes, st->len);
      break;
    case GR_STEP_VERIFY:
      r = verify (p, st, g, cd);
      break;
    case GR_STEP_UPDATE:
      r = cd->update (cd->arg, st->gpu, st->index, bp[st->index], bp + k,
                      bp + n, st->len);
      break;
    }
    if (r == -1)
      return -1;
  }
  return 0;
}

/* --- the plan's arrays --------------------------------------------------- */

static struct gr_plan *
plan_alloc (const struct gr_geom *g, uint64_t max_stripes)
{
  struct gr_plan *p = calloc (1, sizeof *p);
  const size_t n = (size_t) g->k + g->m, ns = max_stripes;

  if (p == NULL)
    return NULL;
  /* Per thread, and nbdkit may run hundreds: a 32 MiB read of 64K chunks
   * fits one plan, larger counts take several.  A job's batch plan has
   * room for its whole batch (plan-jobs.c: gr_plan_fits). */
  p->cap_io = 512 + 2 * n;
  p->cap_blk = 512 + 2 * n;
  p->cap_step = 4 * n + 8;
  p->cap_er = GR_MAX_MEMBERS;
  p->cap_stripes = ns;
  if (ns > 0) {
    if (p->cap_io < ns * n + n)
      p->cap_io = ns * n + n;
    if (p->cap_blk < ns * (3 * n + 1) + n)
      p->cap_blk = ns * (3 * n + 1) + n;
    if (p->cap_step < ns + 4)
      p->cap_step = ns + 4;
    if (p->cap_er < ns * g->m)
      p->cap_er = ns * g->m;
    p->verdict = malloc (ns * sizeof *p->verdict);
    p->wer = malloc (ns * g->m * sizeof *p->wer);
    p->wner = malloc (ns * sizeof *p->wner);
    if (p->verdict == NULL || p->wer == NULL || p->wner == NULL)
      goto nomem;
  }
  p->read = malloc (p->cap_io * sizeof *p->read);
  p->write = malloc (p->cap_io * sizeof *p->write);
  p->blk = malloc (p->cap_blk * sizeof *p->blk);
  p->step = malloc (p->cap_step * sizeof *p->step);
  p->ptr = malloc (p->cap_blk * sizeof *p->ptr);
  p->er = malloc (p->cap_er * sizeof *p->er);
  if (p->read && p->write && p->blk && p->step && p->ptr && p->er)
    return p;
 nomem:
  gr_plan_free (p);
  return NULL;
}

struct gr_plan *
gr_plan_new (const struct gr_geom *g)
{
  return plan_alloc (g, 0);
}

struct gr_plan *
gr_plan_new_batch (const struct gr_geom *g, uint64_t max_stripes)
{
  return plan_alloc (g, max_stripes < 1 ? 1 : max_stripes);
}

void
gr_plan_free (struct gr_plan *p)
{
  if (p) {
    free (p->read);
    free (p->write);
    free (p->blk);
    free (p->step);
    free (p->ptr);
    free (p->er);
    free (p->verdict);
    free (p->wer);
    free (p->wner);
    free (p);
  }
}
