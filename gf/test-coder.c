/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - test the coder: every backend x code (rs, crs) against an
 * independent model, encode / reconstruct / update, erasure sets, lengths,
 * alignments, batches, the plan cache under threads, invalid arguments,
 * and byte compatibility with ISA-L's own Cauchy encoding.
 *
 * The model computes parity element by element with gr_gf_mul (checked
 * against a carry-less multiply by test-field).  For CRS it gathers each
 * GF(2^8) element from the 8 bit-plane packets of a group, multiplies, and
 * scatters the result, so it does not use the bitmatrix at all: it checks
 * the CRS layout described in crs.c independently of every backend.
 * Every backend (ref included) must match the model byte for byte, hence
 * also match ref.
 *
 *   TEST_SEED=n   replay a run
 *   QUICK=1       shorter lists
 */
#include <errno.h>
#include <pthread.h>

#include <isa-l/crc.h>
#include <isa-l/erasure_code.h>

#include "gf-backend.h"
#include "tests/testkit.h"
#include "common/now.h"

static int quick;

/* ---- model ---- */

static uint8_t mt[256][256];    /* gr_gf_mul, checked by test-field */

static void
model_init (void)
{
  int a, b;
  for (a = 0; a < 256; a++)
    for (b = 0; b < 256; b++)
      mt[a][b] = gr_gf_mul (a, b);
}

static void
model_rs (const uint8_t *mat, int rows, int cols,
          uint8_t *const *in, uint8_t *const *out, size_t len)
{
  size_t p;
  int o, c;

  for (o = 0; o < rows; o++)
    for (p = 0; p < len; p++) {
      uint8_t acc = 0;
      for (c = 0; c < cols; c++)
        acc ^= mt[mat[o * cols + c]][in[c][p]];
      out[o][p] = acc;
    }
}

static uint8_t
crs_get (const uint8_t *blk, size_t g, int p, int t)
{
  uint8_t x = 0;
  int b;
  for (b = 0; b < 8; b++)
    x |= ((blk[g + b * GR_CRS_PACKET + p] >> t) & 1) << b;
  return x;
}

static void
model_crs (const uint8_t *mat, int rows, int cols,
           uint8_t *const *in, uint8_t *const *out, size_t len)
{
  uint8_t x[GR_MAX_MEMBERS];
  size_t g;
  int p, t, o, c, r;

  for (o = 0; o < rows; o++)
    memset (out[o], 0, len);
  for (g = 0; g < len; g += GR_CRS_GROUP)
    for (p = 0; p < GR_CRS_PACKET; p++)
      for (t = 0; t < 8; t++) {
        for (c = 0; c < cols; c++)
          x[c] = crs_get (in[c], g, p, t);
        for (o = 0; o < rows; o++) {
          uint8_t y = 0;
          for (c = 0; c < cols; c++)
            y ^= mt[mat[o * cols + c]][x[c]];
          for (r = 0; r < 8; r++)
            out[o][g + r * GR_CRS_PACKET + p] |= ((y >> r) & 1) << t;
        }
      }
}

static void
model_encode (enum gr_code code, int k, int m, uint8_t *const *blk, size_t len)
{
  uint8_t g[GR_MAX_MEMBERS * GR_MAX_MEMBERS];

  gr_gf_gen_matrix (k, m, g);
  if (code == GR_CODE_CRS)
    model_crs (g + k * k, m, k, blk, blk + k, len);
  else
    model_rs (g + k * k, m, k, blk, blk + k, len);
}

/* ---- buffers: each block ends exactly at the end of its allocation ---- */

struct stripes {
  int n;
  size_t ns, len;
  uint8_t **base;               /* malloc results */
  uint8_t **blk;                /* ns * n block pointers */
};

static void
stripes_alloc (struct stripes *s, int n, size_t ns, size_t len, int align)
{
  size_t i;

  s->n = n;
  s->ns = ns;
  s->len = len;
  s->base = calloc (ns * n, sizeof *s->base);
  s->blk = calloc (ns * n, sizeof *s->blk);
  if (!s->base || !s->blk)
    abort ();
  for (i = 0; i < ns * n; i++) {
    /* Even align: every block at that offset mod 16; odd: offsets differ
     * from block to block (source and destination misaligned). */
    size_t off = (align & 1) ? (size_t) (align + i) % 8 : (size_t) align;
    s->base[i] = malloc (len + off);
    if (!s->base[i])
      abort ();
    s->blk[i] = s->base[i] + off;
  }
}

static void
stripes_free (struct stripes *s)
{
  size_t i;
  for (i = 0; i < s->ns * s->n; i++)
    free (s->base[i]);
  free (s->base);
  free (s->blk);
}

/* ---- the test of one coder on one buffer set ---- */

static const char *
code_name (enum gr_code code)
{
  return code == GR_CODE_CRS ? "crs" : "rs";
}

/* Erase e[0..ne-1] in every stripe (fill with junk), reconstruct, compare
 * to want (the model's stripes). */
static int
check_reconstruct (struct gr_coder *c, struct stripes *s, struct stripes *want,
                   const int *e, int ne, const char *what)
{
  size_t st;
  int i, r, bad = 0;

  for (st = 0; st < s->ns; st++)
    for (i = 0; i < ne; i++)
      memset (s->blk[st * s->n + e[i]], 0xa5 ^ i, s->len);
  r = gr_reconstruct (c, e, ne, s->blk, s->ns, s->len);
  CHECK (r == 0, "%s: reconstruct returned %d", what, r);
  for (st = 0; st < s->ns; st++)
    for (i = 0; i < s->n; i++)
      if (memcmp (s->blk[st * s->n + i], want->blk[st * s->n + i], s->len)) {
        bad = 1;
        CHECK (0, "%s: block %d of stripe %zu wrong after erasing "
               "%d blocks (first %d)", what, i, st, ne, e[0]);
      }
  return bad;
}

/* As check_reconstruct, with the erased blocks e[i] of skip's bits passed
 * as NULL (unavailable, not to be rebuilt: gf.h), by gr_reconstruct and
 * by gr_code_many in turn: the others rebuilt as want, the skipped ones
 * and every other block untouched. */
static int
check_partial (struct gr_coder *c, struct stripes *s, struct stripes *want,
               const int *e, int ne, unsigned skip, const char *what)
{
  const size_t nb = s->ns * (size_t) s->n;
  uint8_t **b = malloc (nb * sizeof *b);
  int bad = 0;

  for (int via = 0; via < 2 && !bad; via++) {
    const struct gr_code_op op = { .erased = e, .nerased = ne, .blocks = b,
                                   .nstripes = s->ns, .len = s->len };
    int r;

    memcpy (b, s->blk, nb * sizeof *b);
    for (size_t st = 0; st < s->ns; st++)
      for (int i = 0; i < ne; i++) {
        memset (s->blk[st * s->n + e[i]], 0xa5 ^ i, s->len);
        if (i < 32 && (skip >> i & 1))
          b[st * s->n + e[i]] = NULL;
      }
    r = via ? gr_code_many (c, &op, 1)
      : gr_reconstruct (c, e, ne, b, s->ns, s->len);
    CHECK (r == 0, "%s: %s with %d of %d erased not rebuilt returned %d",
           what, via ? "gr_code_many" : "gr_reconstruct",
           __builtin_popcount (skip), ne, r);
    for (size_t st = 0; st < s->ns; st++)
      for (int i = 0; i < s->n; i++) {
        int j = 0;
        bool skipped;

        while (j < ne && e[j] != i)
          j++;
        skipped = j < ne && j < 32 && (skip >> j & 1);
        if (skipped) {
          for (size_t x = 0; x < s->len && !bad; x++)
            if (s->blk[st * s->n + i][x] != (uint8_t) (0xa5 ^ j)) {
              bad = 1;
              CHECK (0, "%s: block %d of stripe %zu, not to be rebuilt, "
                     "written", what, i, st);
            }
          memcpy (s->blk[st * s->n + i], want->blk[st * s->n + i], s->len);
        }
        else if (memcmp (s->blk[st * s->n + i], want->blk[st * s->n + i],
                         s->len)) {
          bad = 1;
          CHECK (0, "%s: block %d of stripe %zu wrong after erasing %d "
                 "blocks, %d of them not rebuilt (%s)", what, i, st, ne,
                 __builtin_popcount (skip),
                 via ? "gr_code_many" : "gr_reconstruct");
        }
      }
  }
  free (b);
  return bad;
}

static void
random_erasures (int n, int m, int *e, int *ne)
{
  int i, j, x;

  *ne = 1 + test_rand () % m;
  for (i = 0; i < *ne; i++) {
    do {
      x = test_rand () % n;
      for (j = 0; j < i && e[j] != x; j++)
        ;
    } while (j < i);
    e[i] = x;
  }
}

/* One test vector set: data, the model's parity, and an update (new data
 * for block d, its delta, and the model's parity after it).  Shared by
 * every backend so the model runs once. */
struct vec {
  enum gr_code code;
  int k, m, n, align, d;
  size_t len, ns;
  struct stripes want;          /* data + model parity */
  struct stripes want2;         /* after the update of block d */
  struct stripes delta;         /* ns x 1 blocks */
};

static void
vec_new (struct vec *v, enum gr_code code, int k, int m, size_t len,
         size_t ns, int align)
{
  int n = k + m, i;
  size_t st, p;

  v->code = code;
  v->k = k;
  v->m = m;
  v->n = n;
  v->len = len;
  v->ns = ns;
  v->align = align;
  v->d = test_rand () % k;
  stripes_alloc (&v->want, n, ns, len, 0);
  stripes_alloc (&v->want2, n, ns, len, 0);
  stripes_alloc (&v->delta, 1, ns, len, (align + 5) % 8);
  for (st = 0; st < ns; st++) {
    for (i = 0; i < k; i++) {
      test_fill (v->want.blk[st * n + i], len);
      memcpy (v->want2.blk[st * n + i], v->want.blk[st * n + i], len);
    }
    model_encode (code, k, m, v->want.blk + st * n, len);
    test_fill (v->delta.blk[st], len);
    for (p = 0; p < len; p++)
      v->want2.blk[st * n + v->d][p] ^= v->delta.blk[st][p];
    model_encode (code, k, m, v->want2.blk + st * n, len);
  }
}

static void
vec_free (struct vec *v)
{
  stripes_free (&v->want);
  stripes_free (&v->want2);
  stripes_free (&v->delta);
}

/* Check backend be on v: encode, reconstruct (every erasure set of size
 * <= m if exhaustive, plus nrandom random ones, plus two fixed ones),
 * update vs the model's re-encode. */
static void
check_backend (struct vec *v, const struct gr_backend *be,
               int exhaustive, int nrandom)
{
  int k = v->k, m = v->m, n = v->n;
  size_t ns = v->ns, len = v->len, st;
  struct gr_coder *c;
  struct stripes s;
  char what[160];
  int r, i, e[GR_MAX_MEMBERS], ne;

  snprintf (what, sizeof what, "%s %s %d+%d len=%zu ns=%zu align=%d",
            gr_backend_name (be), code_name (v->code), k, m, len, ns,
            v->align);
  r = gr_coder_new (&c, k, m, v->code, be);
  CHECK (r == 0, "%s: gr_coder_new returned %d", what, r);
  if (r)
    return;
  CHECK (gr_coder_k (c) == k && gr_coder_m (c) == m &&
         gr_coder_code (c) == v->code && gr_coder_backend (c) == be,
         "%s: accessors", what);

  stripes_alloc (&s, n, ns, len, v->align);
  for (st = 0; st < ns; st++) {
    for (i = 0; i < k; i++)
      memcpy (s.blk[st * n + i], v->want.blk[st * n + i], len);
    for (i = k; i < n; i++)
      memset (s.blk[st * n + i], 0x5a, len);
  }

  /* Encode. */
  r = gr_encode (c, s.blk, ns, len);
  CHECK (r == 0, "%s: encode returned %d", what, r);
  for (st = 0; st < ns; st++)
    for (i = k; i < n; i++)
      CHECK (memcmp (s.blk[st * n + i], v->want.blk[st * n + i], len) == 0,
             "%s: parity %d of stripe %zu differs from the model",
             what, i, st);

  /* Reconstruct. */
  if (exhaustive) {
    /* Every subset of size 1..m, by bitmask. */
    unsigned mask;
    for (mask = 1; mask < (1u << n); mask++) {
      ne = 0;
      for (i = 0; i < n; i++)
        if (mask & (1u << i))
          e[ne++] = i;
      if (ne > m)
        continue;
      if (check_reconstruct (c, &s, &v->want, e, ne, what))
        goto out;
    }
  }
  for (i = 0; i < nrandom; i++) {
    random_erasures (n, m, e, &ne);
    if (check_reconstruct (c, &s, &v->want, e, ne, what))
      goto out;
  }
  /* Some of the erased blocks only unavailable (NULL), not rebuilt. */
  for (i = 0; i < (exhaustive ? 8 : nrandom) && m >= 2; i++) {
    unsigned skip;

    do
      random_erasures (n, m, e, &ne);
    while (ne < 2);
    skip = 1 + test_rand () % ((1u << (ne < 31 ? ne : 31)) - 2);
    if (check_partial (c, &s, &v->want, e, ne, skip, what))
      goto out;
  }
  /* Always include "all of the parity" and "the first m blocks". */
  for (i = 0; i < m; i++)
    e[i] = k + i;
  if (check_reconstruct (c, &s, &v->want, e, m, what))
    goto out;
  for (i = 0; i < m; i++)
    e[i] = m - 1 - i;           /* any order */
  if (check_reconstruct (c, &s, &v->want, e, m, what))
    goto out;

  /* Update: new data for block d, parity ^= G * delta. */
  {
    uint8_t **par = calloc (ns * m, sizeof *par);

    for (st = 0; st < ns; st++) {
      memcpy (s.blk[st * n + v->d], v->want2.blk[st * n + v->d], len);
      for (i = 0; i < m; i++)
        par[st * m + i] = s.blk[st * n + k + i];
    }
    r = gr_update (c, v->d, (const uint8_t *const *) v->delta.blk, par,
                   ns, len);
    CHECK (r == 0, "%s: update returned %d", what, r);
    for (st = 0; st < ns; st++)
      for (i = k; i < n; i++)
        CHECK (memcmp (s.blk[st * n + i], v->want2.blk[st * n + i], len) == 0,
               "%s: parity %d of stripe %zu wrong after update of %d",
               what, i, st, v->d);
    free (par);
  }

 out:
  stripes_free (&s);
  gr_coder_free (c);
}

/* Cost of the ref backend, roughly, in inner-loop steps, to keep it fast
 * enough under AddressSanitizer. */
static double
ref_cost (enum gr_code code, int k, int m, size_t len)
{
  return code == GR_CODE_CRS ? (double) k * m * 64 * len : (double) k * m * len;
}

static const struct gr_backend *backends[16];
static int nbe, nbe_has_ref;

static int
is_ref (const struct gr_backend *be)
{
  return strcmp (gr_backend_name (be), "ref") == 0;
}

/* The (k, m) list, both codes, every backend.  The ref backend gets a
 * shorter vector of its own where the shared one would be too slow for
 * it; ref CRS is skipped for 200+55 (about 3e9 bit steps per group), where
 * the model (which does not use the bitmatrix) stands in for it. */
static void
test_km_list (void)
{
  static const int km[][2] = {
    { 1, 1 }, { 2, 1 }, { 4, 2 }, { 6, 3 }, { 10, 4 }, { 16, 4 },
    { 8, 8 }, { 20, 12 }, { 200, 55 },
  };
  unsigned t;
  int b, code;

  for (t = 0; t < sizeof km / sizeof km[0]; t++) {
    int k = km[t][0], m = km[t][1], n = k + m;

    if (quick && n > 40)
      continue;
    for (code = GR_CODE_RS; code <= GR_CODE_CRS; code++) {
      int big = n > 100;
      size_t len = code == GR_CODE_CRS ? (big ? 1 : 2) * GR_CRS_GROUP : 4096 + 7;
      size_t ns = big ? 1 : 2;
      int exh = n <= 12;
      int nrand = exh ? 0 : (big ? 4 : 20);
      struct vec v;

      vec_new (&v, code, k, m, len, ns, t % 8);
      for (b = 0; b < nbe; b++)
        if (!is_ref (backends[b]) || ref_cost (code, k, m, len) * ns < 3e7)
          check_backend (&v, backends[b], exh, nrand);
      vec_free (&v);

      /* ref on a smaller vector when the shared one is too long for it. */
      if (nbe_has_ref && ref_cost (code, k, m, len) * ns >= 3e7 &&
          !(code == GR_CODE_CRS && big)) {
        len = code == GR_CODE_CRS ? GR_CRS_GROUP : 1031;
        vec_new (&v, code, k, m, len, 1, t % 8);
        check_backend (&v, gr_backend_find ("ref"), exh,
                       code == GR_CODE_CRS ? 2 : nrand);
        vec_free (&v);
      }
    }
  }
}

/* Every (k, m) with k + m <= 12, both codes, every erasure set of size
 * <= m, every backend; ref CRS over thousands of erasure sets would be
 * too slow, so it gets random sets here (and every set on the (k, m)
 * list). */
static void
test_exhaustive_small (void)
{
  int k, m, b, code;

  for (k = 1; k < 12; k++)
    for (m = 1; k + m <= 12; m++)
      for (code = GR_CODE_RS; code <= GR_CODE_CRS; code++) {
        size_t len = code == GR_CODE_CRS ? GR_CRS_GROUP : 33;
        struct vec v;

        if (quick && k + m > 8)
          continue;
        vec_new (&v, code, k, m, len, 1, (k + m) % 8);
        for (b = 0; b < nbe; b++) {
          if (is_ref (backends[b]) && code == GR_CODE_CRS)
            check_backend (&v, backends[b], 0, 2);
          else
            check_backend (&v, backends[b], 1, 0);
        }
        vec_free (&v);
      }
}

/* Lengths and alignments: RS odd lengths around the SIMD widths, CRS
 * multiples of 4096; alignment 0..7 (odd: every block differently). */
static void
test_lengths (void)
{
  static const size_t rs_lens[] = { 1, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65,
                                    4095, 4096, 65536 + 13 };
  static const size_t crs_lens[] = { GR_CRS_GROUP, 2 * GR_CRS_GROUP,
                                     3 * GR_CRS_GROUP, 16 * GR_CRS_GROUP };
  static const int km[][2] = { { 4, 2 }, { 10, 4 } };
  unsigned t, l;
  int b, align;

  for (t = 0; t < 2; t++) {
    int k = km[t][0], m = km[t][1];

    for (l = 0; l < sizeof rs_lens / sizeof rs_lens[0]; l++)
      for (align = 0; align < 8; align++) {
        struct vec v;

        if (quick && align % 3 != 0 && rs_lens[l] > 64)
          continue;
        vec_new (&v, GR_CODE_RS, k, m, rs_lens[l], 1 + (align & 1), align);
        for (b = 0; b < nbe; b++)
          if (!is_ref (backends[b]) || align % 3 == 0 || rs_lens[l] <= 64)
            check_backend (&v, backends[b], 0, 2);
        vec_free (&v);
      }
    for (l = 0; l < sizeof crs_lens / sizeof crs_lens[0]; l++)
      for (align = 0; align < 8; align++) {
        struct vec v;

        if (quick && align % 3 != 0)
          continue;
        vec_new (&v, GR_CODE_CRS, k, m, crs_lens[l], 1 + (align & 1), align);
        for (b = 0; b < nbe; b++)
          if (!is_ref (backends[b]) ||
              (align % 3 == 0 && ref_cost (GR_CODE_CRS, k, m, crs_lens[l])
               * v.ns < 3e7))
            check_backend (&v, backends[b], 0, 2);
        vec_free (&v);
      }
  }
}

/* ISA-L known answer: gf_gen_cauchy1_matrix + ec_encode_data give the
 * same bytes as our "isal" and "ref" RS encoders. */
static void
test_isal_known_answer (void)
{
  static const int km[][2] = { { 1, 1 }, { 4, 2 }, { 10, 4 }, { 8, 8 },
                               { 20, 12 }, { 200, 55 } };
  unsigned t;

  for (t = 0; t < sizeof km / sizeof km[0]; t++) {
    int k = km[t][0], m = km[t][1], n = k + m, i, b;
    size_t len = 1000 + t;
    uint8_t *a = malloc ((size_t) n * k), *tbls = malloc (32 * (size_t) k * m);
    uint8_t *ours = malloc ((size_t) n * k);
    struct stripes s, isal;

    gf_gen_cauchy1_matrix (a, n, k);
    gr_gf_gen_matrix (k, m, ours);
    CHECK (memcmp (a, ours, (size_t) n * k) == 0,
           "generator %d+%d differs from gf_gen_cauchy1_matrix", k, m);
    ec_init_tables (k, m, a + k * k, tbls);
    stripes_alloc (&isal, n, 1, len, 0);
    for (i = 0; i < k; i++)
      test_fill (isal.blk[i], len);
    ec_encode_data (len, k, m, tbls, isal.blk, isal.blk + k);
    for (b = 0; b < nbe; b++) {
      struct gr_coder *c;
      if (gr_coder_new (&c, k, m, GR_CODE_RS, backends[b]) != 0) {
        CHECK (0, "coder %d+%d", k, m);
        continue;
      }
      stripes_alloc (&s, n, 1, len, 0);
      for (i = 0; i < k; i++)
        memcpy (s.blk[i], isal.blk[i], len);
      CHECK (gr_encode (c, s.blk, 1, len) == 0, "encode");
      for (i = k; i < n; i++)
        CHECK (memcmp (s.blk[i], isal.blk[i], len) == 0,
               "%s RS %d+%d parity %d differs from ISA-L ec_encode_data",
               gr_backend_name (backends[b]), k, m, i);
      stripes_free (&s);
      gr_coder_free (c);
    }
    stripes_free (&isal);
    free (a);
    free (tbls);
    free (ours);
  }
}

/* ---- the plan cache under threads, with eviction ---- */

struct thr {
  struct gr_coder *c;
  struct stripes *want;
  uint64_t seed;
  int iters;
  int fails;
};

static void *
thr_run (void *arg)
{
  struct thr *t = arg;
  int n = gr_coder_k (t->c) + gr_coder_m (t->c), m = gr_coder_m (t->c);
  size_t len = t->want->len;
  uint8_t **blk = calloc (n, sizeof *blk);
  uint64_t x = t->seed;
  int it, i, j, e[GR_MAX_MEMBERS], ne;

  for (i = 0; i < n; i++) {
    blk[i] = malloc (len);
    memcpy (blk[i], t->want->blk[i], len);
  }
  for (it = 0; it < t->iters; it++) {
    /* Private xorshift: test_rand is not thread-safe. */
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    ne = 1 + x % m;
    for (i = 0; i < ne; i++) {
      int v;
      do {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        v = x % n;
        for (j = 0; j < i && e[j] != v; j++)
          ;
      } while (j < i);
      e[i] = v;
      memset (blk[v], 0, len);
    }
    if (gr_reconstruct (t->c, e, ne, blk, 1, len) != 0)
      t->fails++;
    for (i = 0; i < n; i++)
      if (memcmp (blk[i], t->want->blk[i], len) != 0) {
        t->fails++;
        memcpy (blk[i], t->want->blk[i], len);
      }
  }
  for (i = 0; i < n; i++)
    free (blk[i]);
  free (blk);
  return NULL;
}

static void
test_threads (void)
{
  int b, code, i;

  for (code = GR_CODE_RS; code <= GR_CODE_CRS; code++)
    for (b = 0; b < nbe; b++) {
      const char *name = gr_backend_name (backends[b]);
      int isref = strcmp (name, "ref") == 0;
      int k = 20, m = 12, n = k + m;
      size_t len = code == GR_CODE_CRS ? GR_CRS_GROUP : 64;
      struct gr_coder *c;
      struct stripes want;
      struct thr t[4];
      pthread_t tid[4];

      if (isref && code == GR_CODE_CRS)
        continue;
      if (gr_coder_new (&c, k, m, code, backends[b]) != 0) {
        CHECK (0, "coder");
        continue;
      }
      stripes_alloc (&want, n, 1, len, 0);
      for (i = 0; i < k; i++)
        test_fill (want.blk[i], len);
      model_encode (code, k, m, want.blk, len);
      for (i = 0; i < 4; i++) {
        t[i].c = c;
        t[i].want = &want;
        t[i].seed = test_rand () | 1;
        /* > GR_PLAN_CACHE_MAX (1024) patterns in all: forces eviction. */
        t[i].iters = quick ? 100 : (code == GR_CODE_CRS ? 200 : 400);
        t[i].fails = 0;
        pthread_create (&tid[i], NULL, thr_run, &t[i]);
      }
      for (i = 0; i < 4; i++) {
        pthread_join (tid[i], NULL);
        CHECK (t[i].fails == 0, "%s %s threads: %d failures", name,
               code_name (code), t[i].fails);
      }
      stripes_free (&want);
      gr_coder_free (c);
    }
}

/* ---- invalid arguments ---- */

static void
test_invalid (void)
{
  struct gr_coder *c;
  uint8_t buf[2 * GR_CRS_GROUP];
  uint8_t *blk[6] = { buf, buf, buf, buf, buf, buf };
  const uint8_t *delta[1] = { buf };
  int e[4];
  int b;

  CHECK (gr_coder_new (&c, 0, 1, GR_CODE_RS, NULL) == -EINVAL, "k=0");
  CHECK (gr_coder_new (&c, 1, 0, GR_CODE_RS, NULL) == -EINVAL, "m=0");
  CHECK (gr_coder_new (&c, 200, 57, GR_CODE_RS, NULL) == -EINVAL, "n=257");
  CHECK (gr_coder_new (&c, 4, 2, 0, NULL) == -EINVAL, "code=0");
  CHECK (gr_coder_new (&c, 4, 2, 3, NULL) == -EINVAL, "code=3");
  CHECK (gr_coder_new (NULL, 4, 2, GR_CODE_RS, NULL) == -EINVAL, "out NULL");
  CHECK (gr_coder_new (&c, 255, 1, GR_CODE_RS, NULL) == 0, "n=256");
  gr_coder_free (c);

  for (b = 0; b < nbe; b++) {
    int code;
    for (code = GR_CODE_RS; code <= GR_CODE_CRS; code++) {
      size_t len = code == GR_CODE_CRS ? GR_CRS_GROUP : 16;

      if (gr_coder_new (&c, 4, 2, code, backends[b]) != 0) {
        CHECK (0, "coder");
        continue;
      }
      CHECK (gr_coder_len_multiple (c) == (code == GR_CODE_CRS ? 4096u : 1u),
             "len multiple");
      if (code == GR_CODE_CRS) {
        CHECK (gr_encode (c, blk, 1, 100) == -EINVAL, "crs len 100");
        CHECK (gr_encode (c, blk, 1, 512) == -EINVAL, "crs len 512");
        e[0] = 0;
        CHECK (gr_reconstruct (c, e, 1, blk, 1, 4097) == -EINVAL, "crs len");
        CHECK (gr_update (c, 0, delta, blk, 1, 8191) == -EINVAL, "crs len");
      }
      CHECK (gr_encode (c, NULL, 1, len) == -EINVAL, "blocks NULL");
      CHECK (gr_reconstruct (c, e, 0, blk, 1, len) == -EINVAL, "nerased 0");
      e[0] = 0; e[1] = 1; e[2] = 2;
      CHECK (gr_reconstruct (c, e, 3, blk, 1, len) == -EINVAL, "nerased m+1");
      CHECK (gr_reconstruct (c, NULL, 1, blk, 1, len) == -EINVAL, "erased NULL");
      e[0] = 3; e[1] = 3;
      CHECK (gr_reconstruct (c, e, 2, blk, 1, len) == -EINVAL, "duplicate");
      e[0] = -1;
      CHECK (gr_reconstruct (c, e, 1, blk, 1, len) == -EINVAL, "index -1");
      e[0] = 6;
      CHECK (gr_reconstruct (c, e, 1, blk, 1, len) == -EINVAL, "index n");
      e[0] = 1; e[1] = 6;
      CHECK (gr_reconstruct (c, e, 2, blk, 1, len) == -EINVAL, "index n");
      /* Erased blocks passed NULL: not all of them, alike in every
       * stripe. */
      {
        uint8_t *nb[12] = { buf, buf, buf, buf, buf, buf,
                            buf, buf, buf, buf, buf, buf };
        const struct gr_code_op op = { .erased = e, .nerased = 2,
                                       .blocks = nb, .nstripes = 2,
                                       .len = len };

        e[0] = 1; e[1] = 4;
        nb[1] = nb[4] = nb[7] = nb[10] = NULL;
        CHECK (gr_reconstruct (c, e, 2, nb, 2, len) == -EINVAL,
               "every erased block NULL");
        CHECK (gr_code_many (c, &op, 1) == -EINVAL,
               "every erased block NULL (many)");
        nb[1] = buf;
        CHECK (gr_reconstruct (c, e, 2, nb, 2, len) == -EINVAL,
               "NULL in one stripe only");
        CHECK (gr_code_many (c, &op, 1) == -EINVAL,
               "NULL in one stripe only (many)");
        /* A bad operation after a good reconstruct: refused, nothing
         * coded, the good one's plan given back (ASan: no leak). */
        {
          const int e2[1] = { 0 };
          uint8_t *ob[6] = { buf, buf, buf, buf, buf, buf };
          struct gr_code_op two[2] = {
            { .erased = e2, .nerased = 1, .blocks = ob, .nstripes = 1,
              .len = len },
            op,
          };

          memset (buf, 0x3c, len);
          CHECK (gr_code_many (c, two, 2) == -EINVAL,
                 "a bad operation after a good one (many)");
          CHECK (buf[0] == 0x3c, "nothing coded before the bad one");
          two[1] = two[0];
          CHECK (gr_code_many (c, two, 2) == 0, "two good ones after");
        }
      }
      CHECK (gr_update (c, -1, delta, blk, 1, len) == -EINVAL, "data -1");
      CHECK (gr_update (c, 4, delta, blk, 1, len) == -EINVAL, "data k");
      CHECK (gr_update (c, 0, NULL, blk, 1, len) == -EINVAL, "delta NULL");
      /* Nothing to do is fine. */
      CHECK (gr_encode (c, blk, 0, len) == 0, "0 stripes");
      gr_coder_free (c);
    }
  }
}

static void
test_registry (void)
{
  const struct gr_backend *best = gr_backend_best ();
  int i;

  CHECK (gr_backend_find ("ref") != NULL, "ref");
  CHECK (gr_backend_find ("nope") == NULL, "nope");
  CHECK (best != NULL, "best");
  for (i = 0; gr_backend_at (i); i++)
    CHECK (gr_backend_probe (gr_backend_at (i)) == 0, "probe %d", i);
  CHECK (gr_backend_register (gr_backend_find ("ref")) == -EEXIST,
         "register twice");
  if (gr_backend_find ("isal"))
    CHECK (best == gr_backend_find ("isal"), "best is %s, not isal",
           gr_backend_name (best));
  {
    struct gr_coder *c;
    CHECK (gr_coder_new (&c, 3, 2, GR_CODE_RS, NULL) == 0, "NULL backend");
    CHECK (gr_coder_backend (c) == best, "NULL backend is best");
    gr_coder_free (c);
  }
}

/* ---- the plan cache: a counting backend wrapped around ref ---- */

static const struct gr_backend *cnt_inner;
static int cnt_coder_init, cnt_coder_fini, cnt_plan_init, cnt_plan_fini;

static int
cnt_c_init (struct gr_coder *c, void **priv)
{
  cnt_coder_init++;
  return cnt_inner->coder_init ? cnt_inner->coder_init (c, priv) : 0;
}

static void
cnt_c_fini (struct gr_coder *c, void *priv)
{
  cnt_coder_fini++;
  if (cnt_inner->coder_fini)
    cnt_inner->coder_fini (c, priv);
}

static int
cnt_p_init (struct gr_coder *c, struct gr_decode *d)
{
  int i, j;

  cnt_plan_init++;
  /* The plan is what the coder promises: sorted erasures, those rebuilt
   * among them, the first k other indices as survivors. */
  for (i = 1; i < d->nlost; i++)
    CHECK (d->lost[i - 1] < d->lost[i], "plan erasures not sorted");
  for (i = 1; i < d->nerased; i++)
    CHECK (d->erased[i - 1] < d->erased[i], "plan rebuilt not sorted");
  for (i = 0, j = 0; i < d->nerased; i++) {
    while (j < d->nlost && d->lost[j] != d->erased[i])
      j++;
    CHECK (j < d->nlost, "rebuilt block %d not erased", d->erased[i]);
  }
  for (i = 0, j = 0; i < gr_coder_k (c) + gr_coder_m (c) && j < gr_coder_k (c);
       i++) {
    int e, erased = 0;
    for (e = 0; e < d->nlost; e++)
      erased |= d->lost[e] == i;
    if (erased)
      continue;
    CHECK (d->survivors[j] == i, "survivor %d is %d, want %d", j,
           d->survivors[j], i);
    j++;
  }
  return cnt_inner->plan_init ? cnt_inner->plan_init (c, d) : 0;
}

static void
cnt_p_fini (struct gr_coder *c, struct gr_decode *d)
{
  cnt_plan_fini++;
  if (cnt_inner->plan_fini)
    cnt_inner->plan_fini (c, d);
}

static int
cnt_encode (struct gr_coder *c, uint8_t *const *blocks, size_t ns, size_t len)
{
  return cnt_inner->encode (c, blocks, ns, len);
}

static int
cnt_reconstruct (struct gr_coder *c, const struct gr_decode *d,
                 uint8_t *const *blocks, size_t ns, size_t len)
{
  return cnt_inner->reconstruct (c, d, blocks, ns, len);
}

static int
cnt_update (struct gr_coder *c, int di, const uint8_t *const *delta,
            uint8_t *const *parity, size_t ns, size_t len)
{
  return cnt_inner->update (c, di, delta, parity, ns, len);
}

static struct gr_backend cnt_backend = {
  .name = "test-count",
  .prefer = -1,
  .coder_init = cnt_c_init,
  .coder_fini = cnt_c_fini,
  .plan_init = cnt_p_init,
  .plan_fini = cnt_p_fini,
  .encode = cnt_encode,
  .reconstruct = cnt_reconstruct,
  .update = cnt_update,
};

static void
test_plan_cache (void)
{
  const int k = 10, m = 6, n = k + m;
  const size_t len = 16;
  struct gr_coder *c;
  struct stripes want, s;
  int e[6], i, a, b, x, r, patterns = 0;

  cnt_inner = gr_backend_find ("isal");
  if (cnt_inner == NULL)
    cnt_inner = gr_backend_find ("ref");
  r = gr_backend_register (&cnt_backend);
  CHECK (r == 0, "register test backend: %d", r);
  CHECK (gr_backend_find ("test-count") == &cnt_backend, "find registered");
  CHECK (gr_backend_register (&cnt_backend) == -EEXIST, "register twice");
  CHECK (gr_backend_best () != &cnt_backend, "prefer -1 is not best");

  r = gr_coder_new (&c, k, m, GR_CODE_RS, &cnt_backend);
  CHECK (r == 0, "coder: %d", r);
  if (r)
    return;
  CHECK (cnt_coder_init == 1, "coder_init called %d times", cnt_coder_init);
  stripes_alloc (&want, n, 1, len, 0);
  for (i = 0; i < k; i++)
    test_fill (want.blk[i], len);
  model_encode (GR_CODE_RS, k, m, want.blk, len);
  stripes_alloc (&s, n, 1, len, 0);
  for (i = 0; i < n; i++)
    memcpy (s.blk[i], want.blk[i], len);

  /* Same set, different orders: one plan. */
  e[0] = 3; e[1] = 12; e[2] = 0;
  check_reconstruct (c, &s, &want, e, 3, "cache");
  e[0] = 12; e[1] = 0; e[2] = 3;
  check_reconstruct (c, &s, &want, e, 3, "cache");
  e[0] = 0; e[1] = 3; e[2] = 12;
  check_reconstruct (c, &s, &want, e, 3, "cache");
  CHECK (cnt_plan_init == 1, "one pattern, %d plans built", cnt_plan_init);
  patterns = 1;

  /* Every 4-subset of 16 (1820 > the 1024 cache): eviction. */
  for (a = 0; a < (1 << n); a++) {
    if (__builtin_popcount (a) != 4)
      continue;
    for (i = 0, x = 0; x < n; x++)
      if (a & (1 << x))
        e[i++] = x;
    if (check_reconstruct (c, &s, &want, e, 4, "cache eviction"))
      break;
    patterns++;
  }
  CHECK (cnt_plan_init == patterns, "%d plans for %d patterns",
         cnt_plan_init, patterns);
  CHECK (cnt_plan_fini == patterns - 1024, "%d plans freed, want %d",
         cnt_plan_fini, patterns - 1024);
  /* The most recent pattern is still cached, the very first is not. */
  b = cnt_plan_init;
  check_reconstruct (c, &s, &want, e, 4, "cache hit");
  CHECK (cnt_plan_init == b, "recent pattern rebuilt");
  e[0] = 0; e[1] = 3; e[2] = 12;
  check_reconstruct (c, &s, &want, e, 3, "cache miss");
  CHECK (cnt_plan_init == b + 1, "evicted pattern not rebuilt");
  /* The same erasures with part of them not rebuilt: a plan of its own,
   * once for each part. */
  check_partial (c, &s, &want, e, 3, 2, "cache, 3 not rebuilt");
  CHECK (cnt_plan_init == b + 2, "a part rebuilt: %d plans, want %d",
         cnt_plan_init, b + 2);
  check_partial (c, &s, &want, e, 3, 2, "cache, 3 not rebuilt");
  check_partial (c, &s, &want, e, 3, 5, "cache, 0 and 12 not rebuilt");
  CHECK (cnt_plan_init == b + 3, "two parts: %d plans, want %d",
         cnt_plan_init, b + 3);

  gr_coder_free (c);
  CHECK (cnt_coder_fini == 1, "coder_fini called %d times", cnt_coder_fini);
  CHECK (cnt_plan_fini == cnt_plan_init, "%d plans built, %d freed",
         cnt_plan_init, cnt_plan_fini);
  stripes_free (&want);
  stripes_free (&s);
}

/* gr_reconstruct_choose over every lost and wanted set of small codes,
 * against its definition: the survivors are the first k available
 * blocks, the erased ones every lost block that is wanted or lies before
 * the k-th survivor, -EIO with fewer than k available. */
static void
test_choose (void)
{
  for (int k = 1; k <= 5; k++)
    for (int m = 1; k + m <= 8; m++) {
      int n = k + m;

      for (unsigned lm = 0; lm < 1u << n; lm++)
        for (unsigned wm = 0; wm < 1u << n; wm += 1 + (wm & 3)) {
          bool lost[GR_MAX_MEMBERS], want[GR_MAX_MEMBERS];
          int er[GR_MAX_MEMBERS], sv[GR_MAX_MEMBERS], r, i, s = 0, e = 0;
          int avail = 0, kth = n;

          for (i = 0; i < n; i++) {
            lost[i] = (lm >> i) & 1;
            want[i] = (wm >> i) & 1;
            if (!lost[i] && ++avail == k)
              kth = i;
          }
          r = gr_reconstruct_choose (k, m, lost, want, er, sv);
          if (avail < k) {
            CHECK (r == -EIO, "k=%d m=%d lost=%x: %d", k, m, lm, r);
            continue;
          }
          for (i = 0; i < n; i++) {
            if (!lost[i] && i <= kth)
              CHECK (sv[s++] == i, "k=%d m=%d lost=%x: survivor %d", k, m,
                     lm, i);
            if (lost[i] && (want[i] || i < kth))
              CHECK (e < r && er[e++] == i, "k=%d m=%d lost=%x want=%x: "
                     "erased %d", k, m, lm, wm, i);
          }
          CHECK (s == k && e == r, "k=%d m=%d lost=%x want=%x: %d survivors,"
                 " %d erased of %d", k, m, lm, wm, s, e, r);
        }
    }
}

/* gr_code_many on every backend (and on the counting backend with and
 * without its own code_many): encodes and reconstructs of several
 * erasure sets and lengths in one call give the model's blocks; a bad
 * operation anywhere refuses the call before any is done. */
static int cnt_many_calls;

static int
cnt_code_many (struct gr_coder *c, const struct gr_decode *const *d,
               const struct gr_code_op *ops, size_t nops, bool *summed)
{
  size_t i;
  int r = 0;

  cnt_many_calls++;
  for (i = 0; i < nops; i++)
    CHECK (!summed[i], "code_many: op %zu summed on entry", i);
  for (i = 0; i < nops && r == 0; i++) {
    if (ops[i].nerased)
      CHECK (d[i] && d[i]->nerased == ops[i].nerased, "code_many: op %zu "
             "without its plan", i);
    else
      CHECK (d[i] == NULL, "code_many: encode %zu with a plan", i);
    r = d[i] ? cnt_inner->reconstruct (c, d[i], ops[i].blocks,
                                       ops[i].nstripes, ops[i].len)
      : cnt_inner->encode (c, ops[i].blocks, ops[i].nstripes, ops[i].len);
  }
  return r;
}

static void
many_on (const struct gr_backend *be, enum gr_code code)
{
  enum { NOPS = 6 };
  const int k = 6, m = 3, n = k + m;
  const size_t lens[NOPS] = { 64, 128, 64, 256, 64, 128 };
  const size_t nss[NOPS] = { 3, 1, 2, 4, 1, 2 };
  struct stripes want[NOPS], got[NOPS];
  struct gr_code_op ops[NOPS];
  uint32_t *ck[NOPS];
  int er[NOPS][GR_MAX_MEMBERS], i, j, r;
  struct gr_coder *c;
  size_t o, st;

  if (gr_coder_new (&c, k, m, code, be) < 0) {
    CHECK (0, "%s: no %s coder", gr_backend_name (be), code_name (code));
    return;
  }
  for (o = 0; o < NOPS; o++) {
    /* Every other operation with its block checksums, of whole 4 KiB
     * blocks (the others without, in the same call). */
    const size_t len = o % 2 == 0 ? GR_SUM_BLOCK * (1 + o % 3)
      : lens[o] * gr_coder_len_multiple (c) / (code == GR_CODE_CRS ? 64 : 1);

    stripes_alloc (&want[o], n, nss[o], len, 0);
    stripes_alloc (&got[o], n, nss[o], len, (int) o);
    for (st = 0; st < nss[o]; st++) {
      for (i = 0; i < k; i++)
        test_fill (want[o].blk[st * n + i], len);
      model_encode (code, k, m, want[o].blk + st * n, len);
      for (i = 0; i < n; i++)
        memcpy (got[o].blk[st * n + i], want[o].blk[st * n + i], len);
    }
    ops[o].blocks = got[o].blk;
    ops[o].nstripes = nss[o];
    ops[o].len = len;
    ops[o].erased = er[o];
    ops[o].first = ops[o].count = 0;
    ck[o] = NULL;
    if (o % 2 == 0) {
      const size_t nck = nss[o] * n * (len / GR_SUM_BLOCK);

      if ((ck[o] = malloc (nck * sizeof *ck[o])) == NULL)
        exit (T_EXIT_FAIL);
      for (size_t v = 0; v < nck; v++)
        ck[o][v] = 0xdeadbeefu;   /* a block not used keeps it */
    }
    ops[o].cksums = ck[o];
    if (o % 3 == 0)             /* an encode */
      ops[o].nerased = 0;
    else                        /* a reconstruct: 1 to m erased */
      random_erasures (n, m, er[o], &ops[o].nerased);
    for (st = 0; st < nss[o]; st++)
      for (i = o % 3 == 0 ? k : 0; i < n; i++) {
        int out = o % 3 == 0;

        for (j = 0; j < ops[o].nerased; j++)
          out |= er[o][j] == i;
        if (out)
          memset (got[o].blk[st * n + i], 0x5a, len);
      }
  }
  /* A bad operation last: nothing done. */
  er[NOPS - 1][0] = n;
  r = gr_code_many (c, ops, NOPS);
  CHECK (r == -EINVAL, "%s: a bad erasure list gave %d", gr_backend_name (be),
         r);
  CHECK (memcmp (got[0].blk[k], want[0].blk[k], lens[0]) != 0,
         "%s: an operation was done before the bad one was refused",
         gr_backend_name (be));
  random_erasures (n, m, er[NOPS - 1], &ops[NOPS - 1].nerased);
  for (st = 0; st < nss[NOPS - 1]; st++)
    for (i = 0; i < n; i++)
      memcpy (got[NOPS - 1].blk[st * n + i], want[NOPS - 1].blk[st * n + i],
              ops[NOPS - 1].len);
  for (st = 0; st < nss[NOPS - 1]; st++)
    for (j = 0; j < ops[NOPS - 1].nerased; j++)
      memset (got[NOPS - 1].blk[st * n + er[NOPS - 1][j]], 0x5a,
              ops[NOPS - 1].len);
  r = gr_code_many (c, ops, NOPS);
  CHECK (r == 0, "%s: gr_code_many gave %d", gr_backend_name (be), r);
  for (o = 0; o < NOPS; o++)
    for (st = 0; st < nss[o]; st++)
      for (i = 0; i < n; i++)
        CHECK (memcmp (got[o].blk[st * n + i], want[o].blk[st * n + i],
                       ops[o].len) == 0, "%s %s: operation %zu (%s), "
               "stripe %zu, block %d wrong", gr_backend_name (be),
               code_name (code), o, ops[o].nerased ? "reconstruct"
               : "encode", st, i);
  /* The checksums: ISA-L's CRC of each 4 KiB of every block an encode
   * coded, of a reconstruct's survivors and erased blocks; the other
   * blocks' values left as they were. */
  for (o = 0; o < NOPS; o++) {
    bool lost[GR_MAX_MEMBERS] = { false }, want_b[GR_MAX_MEMBERS];
    bool used[GR_MAX_MEMBERS];
    int surv[GR_MAX_MEMBERS], erl[GR_MAX_MEMBERS], ne;

    for (i = 0; i < n; i++)
      used[i] = ops[o].nerased == 0;
    for (j = 0; j < ops[o].nerased; j++)
      lost[er[o][j]] = want_b[er[o][j]] = true;
    for (i = 0; i < n && ops[o].nerased; i++)
      want_b[i] = lost[i];
    if (ops[o].nerased) {
      ne = gr_reconstruct_choose (k, m, lost, want_b, erl, surv);
      for (i = 0; i < k; i++)
        used[surv[i]] = true;
      for (j = 0; j < ne; j++)
        used[erl[j]] = true;
    }
    for (st = 0; ck[o] && st < nss[o]; st++)
      for (i = 0; i < n; i++)
        for (size_t b = 0; b < ops[o].len / GR_SUM_BLOCK; b++)
          CHECK (ck[o][(st * n + i) * (ops[o].len / GR_SUM_BLOCK) + b] ==
                 (used[i] ? crc32_iscsi (want[o].blk[st * n + i] +
                                         b * GR_SUM_BLOCK, GR_SUM_BLOCK, 0)
                  : 0xdeadbeefu), "%s %s: operation %zu, "
                 "stripe %zu, block %d (%s), checksum %zu wrong",
                 gr_backend_name (be), code_name (code), o, st, i,
                 used[i] ? "coded" : "not used", b);
  }
  /* Checksums of a length not in whole blocks: refused. */
  ops[1].cksums = ck[0];
  CHECK (ops[1].len % GR_SUM_BLOCK == 0 ||
         gr_code_many (c, ops + 1, 1) == -EINVAL,
         "checksums of %zu-byte blocks accepted", ops[1].len);
  CHECK (gr_code_many (c, NULL, 0) == 0, "no operations");
  for (o = 0; o < NOPS; o++) {
    stripes_free (&want[o]);
    stripes_free (&got[o]);
    free (ck[o]);
  }
  gr_coder_free (c);
}

/* gr_code_many's encodes of part of the data (first, count): each
 * part of a 6+3 stripe, with the other data blocks NULL (not read), gives
 * the parity of the stripe whose other data are zeros, in the same call
 * as a whole encode; a part out of range, with erasures or with
 * checksums is refused. */
static void
part_on (const struct gr_backend *be, enum gr_code code)
{
  const int k = 6, m = 3, n = k + m;
  const size_t len = 2 * GR_SUM_BLOCK;       /* a CRS length too */
  struct stripes want, got, whole, model;
  struct gr_code_op op[2];
  uint8_t *blk[GR_MAX_MEMBERS];
  struct gr_coder *c;
  uint32_t ck[GR_MAX_MEMBERS];
  int e = 0, first, count, i, r;

  if (gr_coder_new (&c, k, m, code, be) < 0) {
    CHECK (0, "%s: no %s coder", gr_backend_name (be), code_name (code));
    return;
  }
  stripes_alloc (&want, n, 1, len, 0);
  stripes_alloc (&got, n, 1, len, 3);
  stripes_alloc (&whole, n, 1, len, 0);
  stripes_alloc (&model, n, 1, len, 0);
  for (i = 0; i < k; i++) {
    test_fill (whole.blk[i], len);
    memcpy (model.blk[i], whole.blk[i], len);
  }
  model_encode (code, k, m, model.blk, len);
  for (first = 0; first < k; first++)
    for (count = 1; first + count <= k; count++) {
      for (i = 0; i < k; i++) {
        if (i >= first && i < first + count)
          memcpy (want.blk[i], whole.blk[i], len);
        else
          memset (want.blk[i], 0, len);
        memcpy (got.blk[i], want.blk[i], len);
        blk[i] = i >= first && i < first + count ? got.blk[i] : NULL;
      }
      model_encode (code, k, m, want.blk, len);
      for (i = k; i < n; i++) {
        memset (got.blk[i], 0x5a, len);
        blk[i] = got.blk[i];
      }
      for (i = k; i < n; i++)
        memset (whole.blk[i], 0xa5, len);
      op[0] = (struct gr_code_op) { .blocks = blk, .nstripes = 1, .len = len,
                                    .first = first, .count = count };
      op[1] = (struct gr_code_op) { .blocks = whole.blk, .nstripes = 1,
                                    .len = len };
      r = gr_code_many (c, op, 2);
      CHECK (r == 0, "%s %s: part %d+%d gave %d", gr_backend_name (be),
             code_name (code), first, count, r);
      for (i = k; i < n && r == 0; i++) {
        CHECK (memcmp (got.blk[i], want.blk[i], len) == 0, "%s %s: part "
               "%d+%d: parity block %d wrong", gr_backend_name (be),
               code_name (code), first, count, i);
        CHECK (memcmp (whole.blk[i], model.blk[i], len) == 0, "%s %s: the "
               "whole encode beside part %d+%d: parity block %d wrong",
               gr_backend_name (be), code_name (code), first, count, i);
      }
    }
  op[0] = (struct gr_code_op) { .blocks = whole.blk, .nstripes = 1,
                                .len = len, .first = 4, .count = 3 };
  CHECK (gr_code_many (c, op, 1) == -EINVAL, "a part beyond k accepted");
  op[0].first = -1;
  op[0].count = 2;
  CHECK (gr_code_many (c, op, 1) == -EINVAL, "a part before 0 accepted");
  op[0].first = 0;
  op[0].erased = &e;
  op[0].nerased = 1;
  CHECK (gr_code_many (c, op, 1) == -EINVAL, "a part with erasures accepted");
  op[0].nerased = 0;
  op[0].cksums = ck;
  CHECK (len % GR_SUM_BLOCK != 0 || gr_code_many (c, op, 1) == -EINVAL,
         "a part with checksums accepted");
  stripes_free (&want);
  stripes_free (&got);
  stripes_free (&whole);
  stripes_free (&model);
  gr_coder_free (c);
}

static void
test_code_many (void)
{
  for (int b = 0; b < nbe; b++) {
    many_on (backends[b], GR_CODE_RS);
    many_on (backends[b], GR_CODE_CRS);
    part_on (backends[b], GR_CODE_RS);
    part_on (backends[b], GR_CODE_CRS);
  }
  /* A backend's own code_many gets each operation's plan. */
  cnt_inner = gr_backend_find ("ref");
  cnt_backend.code_many = cnt_code_many;
  cnt_many_calls = 0;
  many_on (&cnt_backend, GR_CODE_RS);
  CHECK (cnt_many_calls == 1, "the backend's code_many ran %d times",
         cnt_many_calls);
  cnt_backend.code_many = NULL;
}

static void
phase (const char *name, void (*fn) (void))
{
  const double t0 = gr_now ();
  int before = test_failures;

  fn ();
  printf ("%-36s %s  %.2fs\n", name, test_failures == before ? "ok" : "FAILED",
          gr_now () - t0);
  fflush (stdout);
}

int
main (void)
{
  const char *only = getenv ("GF_BACKEND");

  test_seed ("test-coder");
  quick = test_quick ();
  model_init ();
  for (nbe = 0; gr_backend_at (nbe) && nbe < 16; nbe++)
    backends[nbe] = gr_backend_at (nbe);
  if (only && *only) {
    backends[0] = gr_backend_find (only);
    if (backends[0] == NULL) {
      fprintf (stderr, "GF_BACKEND=%s: no such backend\n", only);
      return 1;
    }
    nbe = 1;
  }
  for (int b = 0; b < nbe; b++)
    nbe_has_ref |= is_ref (backends[b]);
  printf ("backends:");
  for (int b = 0; b < nbe; b++)
    printf (" %s", gr_backend_name (backends[b]));
  printf ("%s\n", quick ? " (QUICK)" : "");

  phase ("registry", test_registry);
  phase ("survivors and erasures chosen", test_choose);
  phase ("invalid arguments", test_invalid);
  phase ("ISA-L known answer", test_isal_known_answer);
  phase ("(k,m) list", test_km_list);
  phase ("every erasure set, k+m <= 12", test_exhaustive_small);
  phase ("lengths and alignments", test_lengths);
  phase ("threads and plan cache eviction", test_threads);
  phase ("plan cache counts (registered backend)", test_plan_cache);
  phase ("several operations in one call", test_code_many);

  return test_done ("test-coder");
}
