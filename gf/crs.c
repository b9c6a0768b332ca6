/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - Cauchy Reed-Solomon (CRS): block layout and the fast XOR
 * implementation shared by the "isal" and "gfc" backends.
 *
 * CRS BLOCK LAYOUT (w = 8, GR_CRS_PACKET = 512, GR_CRS_GROUP = 4096)
 *
 * A block of len bytes (len a multiple of 4096) is a sequence of groups
 * of 4096 bytes.  Group g covers bytes g*4096 .. g*4096+4095 of the block
 * and is cut into 8 packets of 512 bytes; packet b (b = 0..7) is bytes
 * g*4096 + b*512 .. g*4096 + b*512 + 511.  Packet b holds bit-plane b of
 * 4096 GF(2^8) elements: the element at position (p, t), p = 0..511,
 * t = 0..7, is
 *
 *     x = sum over b of ((block[g*4096 + b*512 + p] >> t) & 1) << b
 *
 * so bit t of byte p of packet b is bit b of that element.  Parity is the
 * same Cauchy matrix as RS (gr_gf_gen_matrix rows k..n-1), applied to
 * those elements:  y_j = sum_c P[j][c] * x_c  over GF(2^8) mod 0x11d,
 * and y_j is stored in parity block j the same way.
 *
 * Computed as XORs: B = gr_gf_bitmatrix (P, m, k) is (m*8) x (k*8); then
 *
 *     packet r of parity block j, in group g
 *       = XOR over (c, b) with B[(j*8 + r) * (k*8) + c*8 + b] == 1
 *             of packet b of data block c, in group g
 *
 * Groups are independent, and the same matrix applies to every group.
 * Reconstruction uses the bitmatrix of the decode matrix (rows = erased
 * blocks, columns = the k survivors, see coder.c) the same way, and an
 * update of data block d does, for every parity block j,
 *     packet r of parity j ^= XOR over b with B[(j*8 + r)*(k*8) + d*8 + b]
 *                                  of packet b of the delta.
 *
 * Fast implementation: for each matrix, precompute a list of source
 * packets for every output packet (an XOR schedule), then XOR 512-byte
 * packets 32 bytes at a time (an AVX2 build of the loop when the CPU
 * has it).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gf-internal.h"

/* An XOR schedule: output packet R (R = 0 .. rows-1, computed in that
 * order) is the XOR of the packets listed in src[start[R] .. start[R+1]-1].
 * An index C < cols is input packet C (block C / 8, packet C % 8); an
 * index C >= cols is output packet C - cols, computed earlier.  Using an
 * earlier output (when the two rows of the bitmatrix share most of their
 * ones) saves XORs, as Jerasure's "smart" schedules do; it is not used
 * when accumulating into the outputs (update). */
struct xsched {
  int rows;                     /* output packets */
  int cols;                     /* input packets */
  uint32_t *start;              /* rows + 1 offsets into src */
  uint16_t *src;
};

struct crs_state {
  int k;
  struct xsched *enc;           /* parity from data */
  struct xsched **upd;          /* k schedules: parity from one delta */
};

static void
xsched_free (struct xsched *x)
{
  if (x) {
    free (x->start);
    free (x->src);
    free (x);
  }
}

/* Schedule for a bitmatrix of rows*8 rows, cols*8 columns, row stride
 * bstride bytes.  smart: outputs may be built from earlier outputs. */
static struct xsched *
xsched_new (const uint8_t *bits, size_t bstride, int rows, int cols,
            int smart)
{
  struct xsched *x = calloc (1, sizeof *x);
  int R8 = rows * 8, C8 = cols * 8, W = (C8 + 63) / 64;
  uint64_t *rb = NULL;
  int *cnt = NULL;
  size_t i;
  int R, P, C, w;

  if (x == NULL)
    return NULL;
  x->rows = R8;
  x->cols = C8;
  rb = calloc ((size_t) R8 * W, sizeof *rb);
  cnt = calloc (R8, sizeof *cnt);
  x->start = malloc ((R8 + 1) * sizeof *x->start);
  /* A row never costs more than its own ones, so this is enough. */
  x->src = malloc (((size_t) R8 * C8 + 1) * sizeof *x->src);
  if (rb == NULL || cnt == NULL || x->start == NULL || x->src == NULL)
    goto nomem;
  for (R = 0; R < R8; R++)
    for (C = 0; C < C8; C++)
      if (bits[R * bstride + C]) {
        rb[(size_t) R * W + C / 64] |= (uint64_t) 1 << (C % 64);
        cnt[R]++;
      }

  i = 0;
  for (R = 0; R < R8; R++) {
    const uint64_t *r = rb + (size_t) R * W, *base = NULL;
    int best = cnt[R], bestp = -1;

    for (P = 0; smart && P < R; P++) {
      const uint64_t *p = rb + (size_t) P * W;
      int d = 1;
      for (w = 0; w < W && d < best; w++)
        d += __builtin_popcountll (r[w] ^ p[w]);
      if (d < best) {
        best = d;
        bestp = P;
      }
    }
    x->start[R] = i;
    if (bestp >= 0) {
      x->src[i++] = C8 + bestp;
      base = rb + (size_t) bestp * W;
    }
    for (C = 0; C < C8; C++) {
      uint64_t bit = (uint64_t) 1 << (C % 64);
      if ((r[C / 64] ^ (base ? base[C / 64] : 0)) & bit)
        x->src[i++] = C;
    }
  }
  x->start[R8] = i;
  free (rb);
  free (cnt);
  return x;

 nomem:
  free (rb);
  free (cnt);
  xsched_free (x);
  return NULL;
}

typedef uint64_t v4 __attribute__ ((vector_size (32)));

/* Unaligned 32-byte load and store (macros: a function returning a
 * 32-byte vector would change ABI between the clones). */
#define ld(p) ({ v4 v_; memcpy (&v_, (p), sizeof v_); v_; })
#define st(p, v) do { v4 w_ = (v); memcpy ((p), &w_, sizeof w_); } while (0)

/* dst (^)= XOR of src[0..n-1], all GR_CRS_PACKET bytes, any alignment.
 * Compiled twice, for AVX2 and for the baseline; xsched_run picks one.
 * (Not target_clones: its ifunc resolver runs before ThreadSanitizer is
 * initialised and crashes TSan builds.) */
static inline __attribute__ ((always_inline)) void
xor_packets_body (uint8_t *dst, const uint8_t *const *src, int n,
                  int accumulate)
{
  int off, i;

  if (n == 0) {
    if (!accumulate)
      memset (dst, 0, GR_CRS_PACKET);
    return;
  }
  for (off = 0; off < GR_CRS_PACKET; off += 128) {
    v4 a0, a1, a2, a3;

    if (accumulate) {
      a0 = ld (dst + off);
      a1 = ld (dst + off + 32);
      a2 = ld (dst + off + 64);
      a3 = ld (dst + off + 96);
      i = 0;
    }
    else {
      a0 = ld (src[0] + off);
      a1 = ld (src[0] + off + 32);
      a2 = ld (src[0] + off + 64);
      a3 = ld (src[0] + off + 96);
      i = 1;
    }
    for (; i < n; i++) {
      const uint8_t *s = src[i] + off;
      a0 ^= ld (s);
      a1 ^= ld (s + 32);
      a2 ^= ld (s + 64);
      a3 ^= ld (s + 96);
    }
    st (dst + off, a0);
    st (dst + off + 32, a1);
    st (dst + off + 64, a2);
    st (dst + off + 96, a3);
  }
}

__attribute__ ((target ("avx2"))) static void
xor_packets_avx2 (uint8_t *dst, const uint8_t *const *src, int n,
                  int accumulate)
{
  xor_packets_body (dst, src, n, accumulate);
}

static void
xor_packets_base (uint8_t *dst, const uint8_t *const *src, int n,
                  int accumulate)
{
  xor_packets_body (dst, src, n, accumulate);
}

/* Apply schedule x to in[] (its columns' blocks) into out[] (its rows'
 * blocks), every group of len bytes. */
static void
xsched_run (const struct xsched *x, const uint8_t *const *in,
            uint8_t *const *out, size_t len, int accumulate)
{
  const uint8_t *src[GR_MAX_MEMBERS * 8];
  void (*xor_packets) (uint8_t *, const uint8_t *const *, int, int) =
    __builtin_cpu_supports ("avx2") ? xor_packets_avx2 : xor_packets_base;
  size_t g;
  int R;
  uint32_t i;

  for (g = 0; g < len; g += GR_CRS_GROUP)
    for (R = 0; R < x->rows; R++) {
      uint32_t a = x->start[R], b = x->start[R + 1];

      for (i = a; i < b; i++) {
        unsigned C = x->src[i];
        if (C < (unsigned) x->cols)
          src[i - a] = in[C / 8] + g + (size_t) (C % 8) * GR_CRS_PACKET;
        else {
          C -= x->cols;
          src[i - a] = out[C / 8] + g + (size_t) (C % 8) * GR_CRS_PACKET;
        }
      }
      xor_packets (out[R / 8] + g + (size_t) (R % 8) * GR_CRS_PACKET,
                   src, b - a, accumulate);
    }
}

void
gr_crs_fast_coder_fini (void *state)
{
  struct crs_state *s = state;
  int d;

  if (s == NULL)
    return;
  xsched_free (s->enc);
  if (s->upd)
    for (d = 0; d < s->k; d++)
      xsched_free (s->upd[d]);
  free (s->upd);
  free (s);
}

int
gr_crs_fast_coder_init (struct gr_coder *c, void **state)
{
  struct crs_state *s = calloc (1, sizeof *s);
  size_t bstride = (size_t) c->k * 8;
  int d;

  if (s == NULL)
    return -ENOMEM;
  s->k = c->k;
  s->enc = xsched_new (c->pbits, bstride, c->m, c->k, 1);
  s->upd = calloc (c->k, sizeof *s->upd);
  if (s->enc == NULL || s->upd == NULL)
    goto nomem;
  for (d = 0; d < c->k; d++) {
    s->upd[d] = xsched_new (c->pbits + d * 8, bstride, c->m, 1, 0);
    if (s->upd[d] == NULL)
      goto nomem;
  }
  *state = s;
  return 0;

 nomem:
  gr_crs_fast_coder_fini (s);
  return -ENOMEM;
}

int
gr_crs_fast_plan_init (struct gr_coder *c, struct gr_decode *d)
{
  uint8_t *bits = malloc ((size_t) d->nerased * 8 * c->k * 8);

  d->priv = NULL;
  if (bits == NULL)
    return -ENOMEM;
  gr_gf_bitmatrix (d->matrix, d->nerased, c->k, bits);
  d->priv = xsched_new (bits, (size_t) c->k * 8, d->nerased, c->k, 1);
  free (bits);
  return d->priv ? 0 : -ENOMEM;
}

void
gr_crs_fast_plan_fini (struct gr_decode *d)
{
  xsched_free (d->priv);
  d->priv = NULL;
}

int
gr_crs_fast_encode (struct gr_coder *c, void *state,
                    uint8_t *const *blocks, size_t nstripes, size_t len)
{
  struct crs_state *s = state;
  size_t st;

  for (st = 0; st < nstripes; st++) {
    uint8_t *const *b = blocks + st * c->n;
    xsched_run (s->enc, (const uint8_t *const *) b, b + c->k, len, 0);
  }
  return 0;
}

int
gr_crs_fast_reconstruct (struct gr_coder *c, const struct gr_decode *d,
                         uint8_t *const *blocks, size_t nstripes, size_t len)
{
  const uint8_t *in[GR_MAX_MEMBERS];
  uint8_t *out[GR_MAX_MEMBERS];
  size_t st;

  for (st = 0; st < nstripes; st++) {
    uint8_t *const *b = blocks + st * c->n;

    gr_decode_gather (c, d, b, in, out);
    xsched_run (d->priv, in, out, len, 0);
  }
  return 0;
}

int
gr_crs_fast_update (struct gr_coder *c, void *state, int data_index,
                    const uint8_t *const *delta, uint8_t *const *parity,
                    size_t nstripes, size_t len)
{
  struct crs_state *s = state;
  size_t st;

  for (st = 0; st < nstripes; st++)
    xsched_run (s->upd[data_index], delta + st, parity + st * c->m, len, 1);
  return 0;
}
