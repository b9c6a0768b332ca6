/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the coder: argument checks, decode plans and their cache,
 * dispatch to the backend.
 *
 * Decode plan for an erasure set E (sorted): the survivors are the first
 * k indices not in E, ascending; S is the k x k submatrix of the generator
 * G made of the survivors' rows; the plan's matrix row for erased index e
 * is G[e] x inv(S).  Since every block b satisfies b = G[b] x data and
 * data = inv(S) x survivors, this rebuilds lost data and lost parity alike
 * in one pass from the k survivors.
 *
 * A plan may rebuild only part of E (the blocks passed as NULL are only
 * unavailable: gf.h); its matrix has rows for the rebuilt ones alone.
 *
 * Plans are cached per coder in a hash table keyed by the sorted erased
 * set and the part of it rebuilt, under the coder's mutex, at most
 * GR_PLAN_CACHE_MAX of them with least-recently-used eviction.  A plan is
 * reference counted so that eviction never frees a plan another thread is
 * still decoding with.  The backend's plan_init runs once when a plan is
 * built (before it is inserted), plan_fini when it is freed. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <isa-l/crc.h>

#include "gf-internal.h"

struct gr_plan {
  struct gr_decode d;
  unsigned hash;
  int refs;                     /* the cache's own reference counts too */
  int cached;
  struct gr_plan *hnext;        /* hash chain */
  struct gr_plan *prev, *next;  /* LRU list */
};

int
gr_coder_new (struct gr_coder **out, int k, int m, enum gr_code code,
              const struct gr_backend *be)
{
  struct gr_coder *c;
  int r;

  if (out == NULL)
    return -EINVAL;
  *out = NULL;
  if (k < 1 || m < 1 || k + m > GR_MAX_MEMBERS)
    return -EINVAL;
  if (code != GR_CODE_RS && code != GR_CODE_CRS)
    return -EINVAL;
  if (be == NULL)
    be = gr_backend_best ();
  if (be == NULL)
    return -ENOTSUP;
  if (gr_backend_probe (be) != 0)
    return -ENOTSUP;

  c = calloc (1, sizeof *c);
  if (c == NULL)
    return -ENOMEM;
  c->k = k;
  c->m = m;
  c->n = k + m;
  c->code = code;
  c->be = be;
  pthread_mutex_init (&c->lock, NULL);
  c->gen = malloc ((size_t) c->n * k);
  if (c->gen == NULL) {
    r = -ENOMEM;
    goto err;
  }
  r = gr_gf_gen_matrix (k, m, c->gen);
  if (r < 0)
    goto err;
  if (code == GR_CODE_CRS) {
    c->pbits = malloc ((size_t) m * 8 * k * 8);
    if (c->pbits == NULL) {
      r = -ENOMEM;
      goto err;
    }
    gr_gf_bitmatrix (c->gen + (size_t) k * k, m, k, c->pbits);
  }
  if (be->coder_init) {
    r = be->coder_init (c, &c->priv);
    if (r < 0) {
      c->priv = NULL;
      goto err;
    }
  }
  *out = c;
  return 0;

 err:
  pthread_mutex_destroy (&c->lock);
  free (c->pbits);
  free (c->gen);
  free (c);
  return r;
}

static void
plan_free (struct gr_coder *c, struct gr_plan *p)
{
  if (c->be->plan_fini)
    c->be->plan_fini (c, &p->d);
  free (p->d.matrix);
  free (p);
}

void
gr_coder_free (struct gr_coder *c)
{
  struct gr_plan *p, *next;

  if (c == NULL)
    return;
  for (p = c->lru_head; p != NULL; p = next) {
    next = p->next;
    plan_free (c, p);
  }
  if (c->be->coder_fini)
    c->be->coder_fini (c, c->priv);
  pthread_mutex_destroy (&c->lock);
  free (c->pbits);
  free (c->gen);
  free (c);
}

int
gr_coder_k (const struct gr_coder *c)
{
  return c->k;
}

int
gr_coder_m (const struct gr_coder *c)
{
  return c->m;
}

enum gr_code
gr_coder_code (const struct gr_coder *c)
{
  return c->code;
}

const struct gr_backend *
gr_coder_backend (const struct gr_coder *c)
{
  return c->be;
}

const uint8_t *
gr_coder_parity_matrix (const struct gr_coder *c)
{
  return c->gen + (size_t) c->k * c->k;
}

size_t
gr_coder_len_multiple (const struct gr_coder *c)
{
  return c->code == GR_CODE_CRS ? GR_CRS_GROUP : 1;
}

void *
gr_coder_priv (const struct gr_coder *c)
{
  return c->priv;
}

static int
check_len (const struct gr_coder *c, size_t len)
{
  return len % gr_coder_len_multiple (c) == 0 ? 0 : -EINVAL;
}

int
gr_encode (struct gr_coder *c, uint8_t *const *blocks,
           size_t nstripes, size_t len)
{
  if (c == NULL || check_len (c, len) < 0)
    return -EINVAL;
  if (nstripes == 0 || len == 0)
    return 0;
  if (blocks == NULL)
    return -EINVAL;
  return c->be->encode (c, blocks, nstripes, len);
}

int
gr_update (struct gr_coder *c, int data_index,
           const uint8_t *const *delta, uint8_t *const *parity,
           size_t nstripes, size_t len)
{
  if (c == NULL || check_len (c, len) < 0)
    return -EINVAL;
  if (data_index < 0 || data_index >= c->k)
    return -EINVAL;
  if (nstripes == 0 || len == 0)
    return 0;
  if (delta == NULL || parity == NULL)
    return -EINVAL;
  return c->be->update (c, data_index, delta, parity, nstripes, len);
}

static unsigned
hash_erased (const int *e, int n, const int *r, int nr)
{
  unsigned h = 2166136261u;
  int i;

  for (i = 0; i < n; i++) {
    h ^= (unsigned) e[i];
    h *= 16777619u;
  }
  h ^= 0x100u;                  /* then the rebuilt ones */
  h *= 16777619u;
  for (i = 0; i < nr; i++) {
    h ^= (unsigned) r[i];
    h *= 16777619u;
  }
  return h;
}

/* Which blocks of the sorted erasure list e[0..ne-1] an operation on
 * blocks (nstripes of them; none: NULL or 0) rebuilds: those not passed
 * as NULL, alike in every stripe (gf.h), into r[] ascending.  Their
 * count (at least 1), or -EINVAL. */
static int
rebuilt_of (const struct gr_coder *c, const int *e, int ne,
            uint8_t *const *blocks, size_t nstripes, int *r)
{
  int nr = 0;

  for (int i = 0; i < ne; i++) {
    const bool none = blocks != NULL && nstripes > 0 && blocks[e[i]] == NULL;

    for (size_t s = 1; blocks != NULL && s < nstripes; s++)
      if ((blocks[s * (size_t) c->n + (size_t) e[i]] == NULL) != none)
        return -EINVAL;
    if (!none)
      r[nr++] = e[i];
  }
  return nr > 0 ? nr : -EINVAL;
}

/* Build a plan for the sorted erasure set e[0..ne-1] of which it rebuilds
 * r[0..nr-1]; not yet cached. */
static int
plan_build (struct gr_coder *c, const int *e, int ne, const int *r_,
            int nr, unsigned hash, struct gr_plan **out)
{
  int k = c->k, n = c->n;
  struct gr_plan *p;
  uint8_t *sub = NULL, *inv = NULL;
  bool lost[GR_MAX_MEMBERS];
  int erased[GR_MAX_MEMBERS];
  int i, j, l, r;

  p = calloc (1, sizeof *p);
  if (p == NULL)
    return -ENOMEM;
  p->hash = hash;
  p->d.nlost = ne;
  memcpy (p->d.lost, e, ne * sizeof *e);
  p->d.nerased = nr;
  memcpy (p->d.erased, r_, nr * sizeof *r_);
  /* The survivors: the first k blocks not erased (ne <= m leaves k). */
  for (i = 0; i < n; i++)
    lost[i] = false;
  for (i = 0; i < ne; i++)
    lost[e[i]] = true;
  if (gr_reconstruct_choose (k, n - k, lost, lost, erased, p->d.survivors)
      != ne) {
    free (p);
    return -EINVAL;
  }

  sub = malloc ((size_t) k * k);
  inv = malloc ((size_t) k * k);
  p->d.matrix = malloc ((size_t) nr * k);
  if (sub == NULL || inv == NULL || p->d.matrix == NULL) {
    r = -ENOMEM;
    goto err;
  }
  for (i = 0; i < k; i++)
    memcpy (sub + (size_t) i * k, c->gen + (size_t) p->d.survivors[i] * k, k);
  r = gr_gf_invert_matrix (sub, inv, k);
  if (r < 0)
    goto err;                   /* cannot happen for an MDS generator */
  for (i = 0; i < nr; i++) {
    const uint8_t *g = c->gen + (size_t) r_[i] * k;
    uint8_t *row = p->d.matrix + (size_t) i * k;

    for (j = 0; j < k; j++) {
      uint8_t acc = 0;
      for (l = 0; l < k; l++)
        acc ^= gr_gf_mul_fast (g[l], inv[(size_t) l * k + j]);
      row[j] = acc;
    }
  }
  if (c->be->plan_init) {
    r = c->be->plan_init (c, &p->d);
    if (r < 0)
      goto err;
  }
  free (sub);
  free (inv);
  *out = p;
  return 0;

 err:
  free (sub);
  free (inv);
  free (p->d.matrix);
  free (p);
  return r;
}

static struct gr_plan *
cache_find (struct gr_coder *c, const int *e, int ne, const int *r, int nr,
            unsigned hash)
{
  struct gr_plan *p;

  for (p = c->buckets[hash % GR_PLAN_BUCKETS]; p != NULL; p = p->hnext)
    if (p->hash == hash && p->d.nlost == ne && p->d.nerased == nr &&
        memcmp (p->d.lost, e, ne * sizeof *e) == 0 &&
        memcmp (p->d.erased, r, nr * sizeof *r) == 0)
      return p;
  return NULL;
}

static void
lru_unlink (struct gr_coder *c, struct gr_plan *p)
{
  if (p->prev)
    p->prev->next = p->next;
  else
    c->lru_head = p->next;
  if (p->next)
    p->next->prev = p->prev;
  else
    c->lru_tail = p->prev;
  p->prev = p->next = NULL;
}

static void
lru_push_front (struct gr_coder *c, struct gr_plan *p)
{
  p->prev = NULL;
  p->next = c->lru_head;
  if (c->lru_head)
    c->lru_head->prev = p;
  c->lru_head = p;
  if (c->lru_tail == NULL)
    c->lru_tail = p;
}

/* Remove p from the cache; the caller frees it if no one holds it.  Called
 * with the lock held.  Returns p if its last reference went. */
static struct gr_plan *
cache_remove (struct gr_coder *c, struct gr_plan *p)
{
  struct gr_plan **pp = &c->buckets[p->hash % GR_PLAN_BUCKETS];

  while (*pp != p)
    pp = &(*pp)->hnext;
  *pp = p->hnext;
  p->hnext = NULL;
  lru_unlink (c, p);
  p->cached = 0;
  c->nplans--;
  return --p->refs == 0 ? p : NULL;
}

/* A cache hit: take a reference and move the plan to the LRU front.
 * c->lock held. */
static void
plan_touch (struct gr_coder *c, struct gr_plan *p)
{
  p->refs++;
  lru_unlink (c, p);
  lru_push_front (c, p);
}

/* Get a referenced plan for the sorted set e[0..ne-1], rebuilding
 * r[0..nr-1] of it. */
static int
plan_get (struct gr_coder *c, const int *e, int ne, const int *r_, int nr,
          struct gr_plan **out)
{
  unsigned hash = hash_erased (e, ne, r_, nr);
  struct gr_plan *p, *built = NULL, *evicted = NULL;
  int r;

  pthread_mutex_lock (&c->lock);
  p = cache_find (c, e, ne, r_, nr, hash);
  if (p) {
    plan_touch (c, p);
    pthread_mutex_unlock (&c->lock);
    *out = p;
    return 0;
  }
  pthread_mutex_unlock (&c->lock);

  /* Build outside the lock; another thread may race us to it. */
  r = plan_build (c, e, ne, r_, nr, hash, &built);
  if (r < 0)
    return r;

  pthread_mutex_lock (&c->lock);
  p = cache_find (c, e, ne, r_, nr, hash);
  if (p) {
    plan_touch (c, p);
  }
  else {
    p = built;
    built = NULL;
    p->refs = 2;                /* the cache's and ours */
    p->cached = 1;
    p->hnext = c->buckets[hash % GR_PLAN_BUCKETS];
    c->buckets[hash % GR_PLAN_BUCKETS] = p;
    lru_push_front (c, p);
    c->nplans++;
    if (c->nplans > GR_PLAN_CACHE_MAX)
      evicted = cache_remove (c, c->lru_tail);
  }
  pthread_mutex_unlock (&c->lock);

  if (built)
    plan_free (c, built);
  if (evicted)
    plan_free (c, evicted);
  *out = p;
  return 0;
}

static void
plan_put (struct gr_coder *c, struct gr_plan *p)
{
  int last;

  pthread_mutex_lock (&c->lock);
  last = --p->refs == 0;
  pthread_mutex_unlock (&c->lock);
  if (last)
    plan_free (c, p);
}

/* The erasure list erased[0..nerased-1] checked (in range, distinct, 1
 * to m of them) and sorted into e; 0 or -EINVAL. */
static int
sort_erased (const struct gr_coder *c, const int *erased, int nerased,
             int *e)
{
  int i, j;

  if (erased == NULL || nerased < 1 || nerased > c->m)
    return -EINVAL;
  /* Insertion sort, checking range and distinctness. */
  for (i = 0; i < nerased; i++) {
    int x = erased[i];

    if (x < 0 || x >= c->n)
      return -EINVAL;
    for (j = i; j > 0 && e[j - 1] > x; j--)
      e[j] = e[j - 1];
    if (j > 0 && e[j - 1] == x)
      return -EINVAL;
    e[j] = x;
  }
  return 0;
}

int
gr_reconstruct (struct gr_coder *c, const int *erased, int nerased,
                uint8_t *const *blocks, size_t nstripes, size_t len)
{
  int e[GR_MAX_MEMBERS], rb[GR_MAX_MEMBERS];
  struct gr_plan *p;
  int r, nr;

  if (c == NULL || check_len (c, len) < 0)
    return -EINVAL;
  if (sort_erased (c, erased, nerased, e) < 0)
    return -EINVAL;
  if (nstripes == 0 || len == 0)
    return 0;
  if (blocks == NULL)
    return -EINVAL;
  nr = rebuilt_of (c, e, nerased, blocks, nstripes, rb);
  if (nr < 0)
    return nr;

  r = plan_get (c, e, nerased, rb, nr, &p);
  if (r < 0)
    return r;
  r = c->be->reconstruct (c, &p->d, blocks, nstripes, len);
  plan_put (c, p);
  return r;
}

/* The block checksums of op (gr_code_op's cksums), on the CPU: every
 * block of an encode, a reconstruct's survivors and erased blocks (d). */
static void
sum_blocks (const struct gr_coder *c, const struct gr_code_op *op,
            const struct gr_decode *d)
{
  const size_t n = (size_t) (c->k + c->m), nb = op->len / GR_SUM_BLOCK;
  const size_t nused = d ? (size_t) (c->k + d->nerased) : n;

  for (size_t s = 0; s < op->nstripes; s++)
    for (size_t u = 0; u < nused; u++) {
      const size_t i = d == NULL ? u : u < (size_t) c->k
        ? (size_t) d->survivors[u] : (size_t) d->erased[u - c->k];

      for (size_t b = 0; b < nb; b++)
        op->cksums[(s * n + i) * nb + b] =
          crc32_iscsi (op->blocks[s * n + i] + b * GR_SUM_BLOCK,
                       GR_SUM_BLOCK, 0);
    }
}

/* The stripes of op whose blocks say what it rebuilds (rebuilt_of):
 * none where it codes nothing. */
static size_t
op_stripes (const struct gr_code_op *op)
{
  return op->len == 0 || op->blocks == NULL ? 0 : op->nstripes;
}

/* Is op's part (gr_code_op's first, count) well formed? */
static bool
part_ok (const struct gr_coder *c, const struct gr_code_op *op)
{
  return op->count == 0 ||
    (op->count > 0 && op->nerased == 0 && op->cksums == NULL &&
     op->first >= 0 && op->first + op->count <= c->k);
}

/* An encode of part of the data (count > 0) through the backend's
 * update: the parity zeroed, then each block's contribution added. */
static int
encode_part (struct gr_coder *c, const struct gr_code_op *op)
{
  const size_t n = (size_t) (c->k + c->m);
  int r = 0;

  for (size_t s = 0; s < op->nstripes && r == 0; s++) {
    uint8_t *const *b = op->blocks + s * n;

    for (int j = 0; j < c->m; j++)
      memset (b[c->k + j], 0, op->len);
    for (int i = op->first; i < op->first + op->count && r == 0; i++)
      r = c->be->update (c, i, (const uint8_t *const *) &b[i], &b[c->k], 1,
                         op->len);
  }
  return r;
}

int
gr_code_many (struct gr_coder *c, const struct gr_code_op *ops, size_t nops)
{
  int e[GR_MAX_MEMBERS], rb[GR_MAX_MEMBERS];
  struct gr_plan **p;
  const struct gr_decode **d;
  bool *summed;
  size_t i;
  int r = 0;

  if (c == NULL || (ops == NULL && nops > 0))
    return -EINVAL;
  if (nops == 0)
    return 0;
  p = calloc (nops, sizeof *p + sizeof *d + sizeof *summed);
  if (p == NULL)
    return -ENOMEM;
  d = (const struct gr_decode **) (p + nops);
  summed = (bool *) (d + nops);
  /* Each operation checked, and a reconstruct's plan taken, in one pass;
   * a bad one returns the plans taken before it. */
  for (i = 0; i < nops && r == 0; i++) {
    int nr = 0;

    if (check_len (c, ops[i].len) < 0 || !part_ok (c, &ops[i]) ||
        (ops[i].blocks == NULL && ops[i].nstripes > 0 && ops[i].len > 0) ||
        (ops[i].cksums && ops[i].len % GR_SUM_BLOCK) ||
        (ops[i].nerased != 0 &&
         (sort_erased (c, ops[i].erased, ops[i].nerased, e) < 0 ||
          (nr = rebuilt_of (c, e, ops[i].nerased, ops[i].blocks,
                            op_stripes (&ops[i]), rb)) < 0)))
      r = -EINVAL;
    else if (ops[i].nerased != 0) {
      r = plan_get (c, e, ops[i].nerased, rb, nr, &p[i]);
      if (r == 0)
        d[i] = &p[i]->d;
    }
  }
  if (r == 0 && c->be->code_many)
    r = c->be->code_many (c, d, ops, nops, summed);
  else
    for (i = 0; i < nops && r == 0; i++) {
      if (ops[i].nstripes == 0 || ops[i].len == 0)
        continue;
      r = d[i] ? c->be->reconstruct (c, d[i], ops[i].blocks,
                                     ops[i].nstripes, ops[i].len)
        : ops[i].count > 0 ? encode_part (c, &ops[i])
        : c->be->encode (c, ops[i].blocks, ops[i].nstripes, ops[i].len);
    }
  for (i = 0; i < nops && r == 0; i++)
    if (ops[i].cksums && !summed[i])
      sum_blocks (c, &ops[i], d[i]);
  for (i = 0; i < nops; i++)
    if (p[i])
      plan_put (c, p[i]);
  free (p);
  return r;
}

int
gr_reconstruct_choose (int k, int m, const bool *lost, const bool *want,
                       int *erased, int *survivors)
{
  int n = k + m, i, s = 0, ne = 0;

  for (i = 0; i < n; i++) {
    if (!lost[i]) {
      if (s < k)
        survivors[s++] = i;
    }
    else if (s < k || (want && want[i]))
      erased[ne++] = i;
  }
  return s < k ? -EIO : ne;
}
