/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the "ref" backend: slow and plainly correct.
 *
 * RS: every output byte is the GF(2^8) dot product of a matrix row with
 * the input bytes at that offset, one log/exp multiply at a time.
 * CRS: every bit of every output packet byte is computed on its own from
 * the bitmatrix (see crs.c for the layout).  Nothing is cached but the
 * decode bitmatrix of each plan. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gf-internal.h"

/* out[o][p] (^)= sum_c mat[o*mstride + c] * in[c][p]. */
static void
ref_rs_apply (const uint8_t *mat, size_t mstride, int rows, int cols,
              const uint8_t *const *in, uint8_t *const *out,
              size_t len, int accumulate)
{
  int o, c;
  size_t p;

  for (o = 0; o < rows; o++) {
    const uint8_t *row = mat + (size_t) o * mstride;
    uint8_t *dst = out[o];

    for (p = 0; p < len; p++) {
      uint8_t acc = accumulate ? dst[p] : 0;

      for (c = 0; c < cols; c++)
        acc ^= gr_gf_mul_fast (row[c], in[c][p]);
      dst[p] = acc;
    }
  }
}

/* The bitmatrix has rows*8 rows; row (o*8 + r) is read at
 * bits + (o*8 + r) * bstride, its entry for input c, packet b at
 * c*8 + b.  Output packet r of out[o] (^)= XOR of the input packets
 * whose entry is 1, computed bit by bit. */
static void
ref_crs_apply (const uint8_t *bits, size_t bstride, int rows, int cols,
               const uint8_t *const *in, uint8_t *const *out,
               size_t len, int accumulate)
{
  size_t g, p;
  int o, r, t, c, b;

  for (g = 0; g < len; g += GR_CRS_GROUP)
    for (o = 0; o < rows; o++)
      for (r = 0; r < 8; r++) {
        const uint8_t *brow = bits + ((size_t) o * 8 + r) * bstride;
        uint8_t *dst = out[o] + g + (size_t) r * GR_CRS_PACKET;

        for (p = 0; p < GR_CRS_PACKET; p++) {
          uint8_t byte = 0;

          for (t = 0; t < 8; t++) {
            unsigned bit = accumulate ? (dst[p] >> t) & 1 : 0;

            for (c = 0; c < cols; c++)
              for (b = 0; b < 8; b++)
                if (brow[c * 8 + b])
                  bit ^= (in[c][g + (size_t) b * GR_CRS_PACKET + p] >> t) & 1;
            byte |= bit << t;
          }
          dst[p] = byte;
        }
      }
}

static int
ref_plan_init (struct gr_coder *c, struct gr_decode *d)
{
  uint8_t *bits;

  d->priv = NULL;
  if (c->code != GR_CODE_CRS)
    return 0;
  bits = malloc ((size_t) d->nerased * 8 * c->k * 8);
  if (bits == NULL)
    return -ENOMEM;
  gr_gf_bitmatrix (d->matrix, d->nerased, c->k, bits);
  d->priv = bits;
  return 0;
}

static void
ref_plan_fini (struct gr_coder *c, struct gr_decode *d)
{
  (void) c;
  free (d->priv);
  d->priv = NULL;
}

static int
ref_encode (struct gr_coder *c, uint8_t *const *blocks,
            size_t nstripes, size_t len)
{
  size_t s;

  for (s = 0; s < nstripes; s++) {
    uint8_t *const *b = blocks + s * c->n;

    if (c->code == GR_CODE_CRS)
      ref_crs_apply (c->pbits, (size_t) c->k * 8, c->m, c->k,
                     (const uint8_t *const *) b, b + c->k, len, 0);
    else
      ref_rs_apply (gr_coder_parity_matrix (c), c->k, c->m, c->k,
                    (const uint8_t *const *) b, b + c->k, len, 0);
  }
  return 0;
}

static int
ref_reconstruct (struct gr_coder *c, const struct gr_decode *d,
                 uint8_t *const *blocks, size_t nstripes, size_t len)
{
  const uint8_t *in[GR_MAX_MEMBERS];
  uint8_t *out[GR_MAX_MEMBERS];
  size_t s;

  for (s = 0; s < nstripes; s++) {
    uint8_t *const *b = blocks + s * c->n;

    gr_decode_gather (c, d, b, in, out);
    if (c->code == GR_CODE_CRS)
      ref_crs_apply (d->priv, (size_t) c->k * 8, d->nerased, c->k,
                     in, out, len, 0);
    else
      ref_rs_apply (d->matrix, c->k, d->nerased, c->k, in, out, len, 0);
  }
  return 0;
}

static int
ref_update (struct gr_coder *c, int data_index,
            const uint8_t *const *delta, uint8_t *const *parity,
            size_t nstripes, size_t len)
{
  size_t s;

  for (s = 0; s < nstripes; s++) {
    const uint8_t *in[1] = { delta[s] };
    uint8_t *const *out = parity + s * c->m;

    if (c->code == GR_CODE_CRS)
      ref_crs_apply (c->pbits + data_index * 8, (size_t) c->k * 8, c->m, 1,
                     in, out, len, 1);
    else
      ref_rs_apply (gr_coder_parity_matrix (c) + data_index, c->k, c->m, 1,
                    in, out, len, 1);
  }
  return 0;
}

static int
ref_probe (void)
{
  return 0;
}

const struct gr_backend gr_backend_ref = {
  .name = "ref",
  .prefer = 10,
  .probe = ref_probe,
  .plan_init = ref_plan_init,
  .plan_fini = ref_plan_fini,
  .encode = ref_encode,
  .reconstruct = ref_reconstruct,
  .update = ref_update,
};
