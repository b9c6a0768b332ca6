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

/* Items for each thread of the pool: several, so that a thread held up
 * by the scheduler delays a small part of the work. */
#define ITEMS_PER_THREAD 4
/* Coding steps split together in one call of the pool at most (a batch
 * has a step per erasure pattern: with parity rotating, one to n). */
#define MAX_RUN 64

static bool
coding (const struct gr_step *st)
{
  return st->kind == GR_STEP_ENCODE || st->kind == GR_STEP_RECONSTRUCT;
}

/* A run of coding steps, each split into items of `per` stripes (on the
 * GPU: an item a step): item i is in step j where first[j] <= i <
 * first[j + 1]. */
struct split {
  const struct gr_plan *p;
  const struct gr_plan_coder *cd;
  const struct gr_step *st;     /* the run's first step */
  size_t n;                     /* blocks a stripe */
  size_t per;
  size_t nsteps;
  size_t first[MAX_RUN + 1];
  int err;                      /* the first failure's errno; 0: none */
};

static void
split_item (void *arg, size_t item)
{
  struct split *sp = arg;
  size_t j = 0;
  const struct gr_step *st;
  size_t s0, ns;
  uint8_t **bp;
  int r;

  while (sp->first[j + 1] <= item)
    j++;
  st = sp->st + j;
  s0 = (item - sp->first[j]) * sp->per;
  ns = st->gpu ? st->nstripes
    : st->nstripes - s0 < sp->per ? st->nstripes - s0 : sp->per;
  bp = sp->p->ptr + st->blk0 + s0 * sp->n;
  r = st->kind == GR_STEP_ENCODE
    ? sp->cd->encode (sp->cd->arg, st->gpu, bp, ns, st->len)
    : sp->cd->reconstruct (sp->cd->arg, st->gpu, sp->p->er + st->er0,
                           st->ner, bp, ns, st->len);
  if (r == -1) {
    int zero = 0;

    (void) __atomic_compare_exchange_n (&sp->err, &zero, errno ? errno : EIO,
                                        false, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED);
  }
}

/* A block's bytes, and the step of the run it is in. */
struct span {
  uintptr_t at, end;
  size_t step;
};

static int
span_cmp (const void *a, const void *b)
{
  const struct span *x = a, *y = b;

  return x->at < y->at ? -1 : x->at > y->at;
}

/* Do the coding steps st[0..nsteps-1] touch no block in common (each may
 * then run at the same time as the others)?  A block that is not there
 * (GR_SPACE_NONE: a lost block the coding leaves alone, gf.h) has no
 * memory and is no block in common.  false too if out of memory (they
 * then run one after the other). */
static bool
independent (const struct gr_plan *p, const struct gr_step *st,
             size_t nsteps, size_t n)
{
  size_t nb = 0, i, j, b, c = 0;
  struct span *sp;
  uintptr_t end = 0;
  size_t end_step = 0;

  for (j = 0; j < nsteps; j++)
    nb += st[j].nstripes * n;
  if ((sp = malloc (nb * sizeof *sp)) == NULL)
    return false;
  for (j = 0; j < nsteps; j++)
    for (b = 0; b < st[j].nstripes * n; b++) {
      const uintptr_t at = (uintptr_t) p->ptr[st[j].blk0 + b];

      if (at == 0)
        continue;
      sp[c++] = (struct span) { .at = at, .end = at + st[j].len, .step = j };
    }
  nb = c;
  qsort (sp, nb, sizeof *sp, span_cmp);
  /* Sorted by start.  Up to the first block that overlaps one of another
   * step before it, the blocks before it that reach past its start all
   * hold that point, so all are of one step, the furthest-reaching one's:
   * a block overlaps another step's iff it starts before the furthest
   * end so far and that end is another step's. */
  for (i = 0; i < nb; i++) {
    if (sp[i].at < end && sp[i].step != end_step)
      break;
    if (sp[i].end > end) {
      end = sp[i].end;
      end_step = sp[i].step;
    }
  }
  free (sp);
  return i == nb;
}

/* The coding steps st[0..nsteps-1] (one, or several independent), split
 * over cd->pool's threads and the calling one: by stripes on the CPU, a
 * step an item on the GPU (the engine codes several at once, each in a
 * slot of its own: gpu.h).  0, or -1 with errno set. */
static int
coding_split (struct gr_plan *p, const struct gr_step *st, size_t nsteps,
              const struct gr_geom *g, const struct gr_plan_coder *cd)
{
  const size_t items = (size_t) gr_pool_width (cd->pool) * ITEMS_PER_THREAD;
  struct split sp = { .p = p, .cd = cd, .st = st, .n = (size_t) g->k + g->m,
                      .nsteps = nsteps };
  size_t total = 0, j;

  for (j = 0; j < nsteps; j++)
    total += st[j].nstripes;
  sp.per = (total + items - 1) / items;
  for (j = 0; j < nsteps; j++)
    sp.first[j + 1] = sp.first[j] +
      (st[j].gpu ? 1 : (st[j].nstripes + sp.per - 1) / sp.per);
  gr_pool_run (cd->pool, sp.first[nsteps], split_item, &sp);
  if (sp.err) {
    errno = sp.err;
    return -1;
  }
  return 0;
}

/* How many coding steps from step i on run together: the coding steps
 * that follow it on the same route (MAX_RUN at most) if no two touch the
 * same block, else step i alone. */
static size_t
coding_run (const struct gr_plan *p, size_t i, const struct gr_geom *g)
{
  size_t e = i + 1;

  while (e < p->nstep && e - i < MAX_RUN && coding (&p->step[e]) &&
         p->step[e].gpu == p->step[i].gpu)
    e++;
  if (e - i > 1 &&
      !independent (p, &p->step[i], e - i, (size_t) g->k + g->m))
    return 1;
  return e - i;
}

/* Independent coding steps st[0..nsteps-1] on the GPU as one call of the
 * coder's many (a request's: no pool). */
static int
coding_many (struct gr_plan *p, const struct gr_step *st, size_t nsteps,
             const struct gr_plan_coder *cd)
{
  struct gr_code_op ops[MAX_RUN];
  size_t j;

  for (j = 0; j < nsteps; j++) {
    const bool rec = st[j].kind == GR_STEP_RECONSTRUCT;

    ops[j] = (struct gr_code_op) {
      .erased = rec ? p->er + st[j].er0 : NULL, .nerased = rec ? st[j].ner
      : 0, .blocks = p->ptr + st[j].blk0, .nstripes = st[j].nstripes,
      .len = st[j].len,
      .cksums = p->sum_len ? p->bsum[st[j].blk0] : NULL };
  }
  return cd->many (cd->arg, true, ops, nsteps);
}

/* The first coding step of p (p->nstep if none). */
static size_t
first_coding (const struct gr_plan *p)
{
  size_t i = 0;

  while (i < p->nstep && !coding (&p->step[i]))
    i++;
  return i;
}

/* Does p's coding sum its blocks: coding steps all on the GPU, of one
 * length in whole checksum blocks (a full-stripe write, a degraded
 * read), and no move that could change a block once summed: before the
 * first coding step any (they make the blocks it sums: a write's data
 * copied into scratch for O_DIRECT members), none between coding steps,
 * and after the last only copies into the request where no block lies
 * (a degraded read's rebuilt part copied out of scratch, or its
 * survivors read into scratch for the GPU's copies)? */
static bool
summable (const struct gr_plan *p)
{
  size_t first = first_coding (p), last = p->nstep, i;

  for (i = 0; i < p->nstep; i++)
    if (coding (&p->step[i]))
      last = i;
  if (last == p->nstep || p->step[last].len % GR_SUM_BLOCK)
    return false;
  for (i = first; i <= last; i++) {
    const struct gr_step *st = &p->step[i];

    if (!coding (st) || !st->gpu || st->len != p->step[last].len)
      return false;
  }
  for (i = last + 1; i < p->nstep; i++) {
    const struct gr_step *st = &p->step[i];

    if (st->kind != GR_STEP_COPY || st->dst.space != GR_SPACE_REQ)
      return false;
    for (size_t j = 0; j < p->nblk; j++)
      if (p->blk[j].space == GR_SPACE_REQ &&
          p->blk[j].off < st->dst.off + st->len &&
          st->dst.off < p->blk[j].off + p->step[last].len)
        return false;
  }
  return true;
}

/* The checksums of the blocks read are those of the bytes read only
 * where nothing moved before the coding. */
bool
gr_steps_sums_reads (const struct gr_plan *p)
{
  if (!summable (p) || first_coding (p) != 0)
    return false;
  for (size_t i = 0; i < p->nstep; i++)
    if (p->step[i].kind == GR_STEP_RECONSTRUCT)
      return true;
  return false;
}

/* A summable plan: room for its blocks' checksums, bsum pointing into
 * it for the blocks its coding sums (an encode's all, a reconstruct's
 * survivors and erased blocks: gr_code_op's cksums), and sum_len set;
 * else sum_len 0. */
static void
plan_sums (struct gr_plan *p, const struct gr_geom *g)
{
  const size_t n = (size_t) g->k + g->m;
  size_t need = 0, at = 0, nb, i, j;
  uint32_t *s;

  p->sum_len = 0;
  if (!summable (p))
    return;
  const size_t len = p->step[first_coding (p)].len;  /* the codings' */

  for (i = 0; i < p->nstep; i++)
    if (coding (&p->step[i]))
      need += p->step[i].nstripes * n;
  nb = len / GR_SUM_BLOCK;
  need *= nb;
  if (need > p->cap_sums) {
    if ((s = realloc (p->sums, need * sizeof *s)) == NULL)
      return;                   /* set by the executor, as without */
    p->sums = s;
    p->cap_sums = need;
  }
  memset (p->bsum, 0, p->nblk * sizeof *p->bsum);
  for (i = 0; i < p->nstep; i++) {
    const struct gr_step *st = &p->step[i];
    bool used[GR_MAX_MEMBERS];
    int nsurv = 0;

    if (!coding (st))
      continue;                 /* the copies out, after */

    /* A reconstruct reads the first k blocks not erased (gf.h). */
    for (j = 0; j < n; j++) {
      bool erased = false;

      for (int e = 0; st->kind == GR_STEP_RECONSTRUCT && e < st->ner; e++)
        erased |= p->er[st->er0 + (size_t) e] == (int) j;
      used[j] = st->kind == GR_STEP_ENCODE || erased || nsurv < g->k;
      nsurv += !erased && st->kind == GR_STEP_RECONSTRUCT;
    }
    for (j = 0; j < st->nstripes * n; j++)
      if (used[j % n])
        p->bsum[st->blk0 + j] = p->sums + at + j * nb;
    at += st->nstripes * n * nb;
  }
  p->sum_len = len;
}

/* The COPY steps marked gpu from step i on, at most 32. */
static size_t
copy_run (const struct gr_plan *p, size_t i)
{
  size_t j = i + 1;

  while (j < p->nstep && j - i < 32 && p->step[j].kind == GR_STEP_COPY &&
         p->step[j].gpu)
    j++;
  return j - i;
}

/* Steps i .. i + run - 1 (COPY): by the GPU where it can, else memcpy. */
static void
gpu_copies (const struct gr_plan *p, size_t i, size_t run,
            const struct gr_bufs *b, const struct gr_plan_coder *cd)
{
  struct gr_copy_row rows[32] = { { 0 } };
  size_t j;

  for (j = 0; j < run; j++) {
    const struct gr_step *st = &p->step[i + j];

    rows[j] = (struct gr_copy_row) { .dst = gr_steps_at (b, st->dst),
                                     .src = gr_steps_at (b, st->src),
                                     .len = st->len };
  }
  if (!cd->host_copy (cd->arg, rows, run))
    for (j = 0; j < run; j++)
      memcpy (rows[j].dst, rows[j].src, rows[j].len);
}

/* p's blocks on the buffers b, and where its coding sums them the
 * checksums' places: a request's, and a job's batch whose reads they
 * verify after the coding (a rebuild's: exec.h), its writes' checksums
 * set from them. */
static void
set_blocks (struct gr_plan *p, const struct gr_geom *g,
            const struct gr_bufs *b, const struct gr_plan_coder *cd)
{
  for (size_t i = 0; i < p->nblk; i++)
    p->ptr[i] = gr_steps_at (b, p->blk[i]);
  p->sum_len = 0;
  if (cd->sums && cd->many &&
      (gr_pool_width (cd->pool) <= 1 || gr_steps_sums_reads (p)))
    plan_sums (p, g);
}

int
gr_steps_run (struct gr_plan *p, const struct gr_geom *g,
              const struct gr_bufs *b, const struct gr_plan_coder *cd)
{
  int k = g->k, n = k + g->m;
  size_t i;

  set_blocks (p, g, b, cd);
  for (i = 0; i < p->nstep; i++) {
    const struct gr_step *st = &p->step[i];
    uint8_t **bp = p->ptr + st->blk0;
    int r = 0;

    /* A request's GPU coding step, with those that follow it and are
     * independent (a degraded read's stripes; a rebuild's erasure
     * patterns, with their checksums): one call of the coder's many
     * (which gathers reconstructs across requests: coding.h). */
    if (coding (st) && st->gpu && cd->many &&
        (gr_pool_width (cd->pool) <= 1 || p->sum_len > 0)) {
      const size_t run = coding_run (p, i, g);

      if (coding_many (p, st, run, cd) == -1)
        return -1;
      i += run - 1;
      continue;
    }
    /* On a pool, the coding steps that follow one another and are
     * independent (a batch's erasure patterns) are split together. */
    if (coding (st) && gr_pool_width (cd->pool) > 1) {
      const size_t run = coding_run (p, i, g);

      if (run > 1 || (!st->gpu && st->nstripes > 1)) {
        if (coding_split (p, st, run, g, cd) == -1)
          return -1;
        i += run - 1;
        continue;
      }
    }
    /* Copies marked for the GPU (a direct member's blocks read into
     * scratch for the request: plan.h), those that follow one another
     * in one call. */
    if (st->kind == GR_STEP_COPY && st->gpu && cd->host_copy) {
      const size_t run = copy_run (p, i);

      gpu_copies (p, i, run, b, cd);
      i += run - 1;
      continue;
    }
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
      r = cd->encode (cd->arg, st->gpu, bp, st->nstripes, st->len);
      break;
    case GR_STEP_RECONSTRUCT:
      r = cd->reconstruct (cd->arg, st->gpu, p->er + st->er0, st->ner,
                           bp, st->nstripes, st->len);
      break;
    case GR_STEP_VERIFY:
      r = verify (p, st, g, cd);
      break;
    case GR_STEP_UPDATE:
      r = cd->update (cd->arg, st->gpu, st->index, st->count,
                      (const uint8_t *const *) bp + st->index, bp + k,
                      bp + n, st->len);
      break;
    }
    if (r == -1)
      return -1;
  }
  return 0;
}

void *
gr_steps_begin (struct gr_plan *p, const struct gr_geom *g,
                const struct gr_bufs *b, const struct gr_plan_coder *cd)
{
  const struct gr_step *st = &p->step[0];

  if (cd->encode_begin == NULL || p->nstep != 1 ||
      st->kind != GR_STEP_ENCODE || !st->gpu ||
      gr_pool_width (cd->pool) > 1)
    return NULL;
  set_blocks (p, g, b, cd);
  return cd->encode_begin (cd->arg, p->ptr + st->blk0, st->nstripes, st->len,
                           p->sum_len ? p->bsum[st->blk0] : NULL);
}

int
gr_steps_end (const struct gr_plan_coder *cd, void *e)
{
  return cd->encode_end (cd->arg, e);
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
  p->bsum = malloc (p->cap_blk * sizeof *p->bsum);
  p->er = malloc (p->cap_er * sizeof *p->er);
  if (p->read && p->write && p->blk && p->step && p->ptr && p->bsum &&
      p->er)
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
    free (p->bsum);
    free (p->sums);
    free (p->er);
    free (p->verdict);
    free (p->wer);
    free (p->wner);
    free (p);
  }
}
