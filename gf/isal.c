/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the "isal" backend: RS through ISA-L's ec_encode_data /
 * ec_encode_data_update, with the expanded tables (ec_init_tables) cached
 * per coder and per decode plan; CRS through the XOR code in crs.c.
 *
 * ISA-L takes int lengths, so longer blocks go in pieces of GR_ISAL_PIECE.
 * Its dispatchers fall back to the base (table) code for short lengths
 * (below 16 to 64 bytes depending on the CPU), so any len works; the tests
 * sweep odd lengths from 1 byte. */
#include <errno.h>
#include <stdlib.h>

#include <isa-l/erasure_code.h>

#include "gf-internal.h"

#define GR_ISAL_PIECE ((size_t) 1 << 30)

static int
isal_probe (void)
{
  return 0;                     /* linked in; ISA-L dispatches per CPU */
}

/* ISA-L's expanded tables of matrix (rows x k) in *tbls; 0 or -ENOMEM. */
static int
isal_tables (int k, int rows, const uint8_t *matrix, void **tbls)
{
  uint8_t *t = malloc (32 * (size_t) k * rows);

  if (t == NULL)
    return -ENOMEM;
  ec_init_tables (k, rows, (unsigned char *) matrix, t);
  *tbls = t;
  return 0;
}

static int
isal_coder_init (struct gr_coder *c, void **priv)
{
  if (c->code == GR_CODE_CRS)
    return gr_crs_fast_coder_init (c, priv);
  return isal_tables (c->k, c->m, gr_coder_parity_matrix (c), priv);
}

static void
isal_coder_fini (struct gr_coder *c, void *priv)
{
  if (c->code == GR_CODE_CRS)
    gr_crs_fast_coder_fini (priv);
  else
    free (priv);
}

static int
isal_plan_init (struct gr_coder *c, struct gr_decode *d)
{
  if (c->code == GR_CODE_CRS)
    return gr_crs_fast_plan_init (c, d);
  return isal_tables (c->k, d->nerased, d->matrix, &d->priv);
}

static void
isal_plan_fini (struct gr_coder *c, struct gr_decode *d)
{
  if (c->code == GR_CODE_CRS)
    gr_crs_fast_plan_fini (d);
  else
    free (d->priv);
  d->priv = NULL;
}

/* out[0..rows-1] = matrix (as tbls) x in[0..k-1], in pieces. */
static void
isal_apply (int k, int rows, uint8_t *tbls, uint8_t *const *in,
            uint8_t *const *out, size_t len)
{
  uint8_t *i2[GR_MAX_MEMBERS], *o2[GR_MAX_MEMBERS];
  size_t off, n;
  int j;

  for (off = 0; off < len; off += n) {
    n = len - off < GR_ISAL_PIECE ? len - off : GR_ISAL_PIECE;
    for (j = 0; j < k; j++)
      i2[j] = in[j] + off;
    for (j = 0; j < rows; j++)
      o2[j] = out[j] + off;
    ec_encode_data ((int) n, k, rows, tbls, i2, o2);
  }
}

static int
isal_encode (struct gr_coder *c, uint8_t *const *blocks,
             size_t nstripes, size_t len)
{
  size_t s;

  if (c->code == GR_CODE_CRS)
    return gr_crs_fast_encode (c, c->priv, blocks, nstripes, len);
  for (s = 0; s < nstripes; s++) {
    uint8_t *const *b = blocks + s * c->n;
    isal_apply (c->k, c->m, c->priv, b, b + c->k, len);
  }
  return 0;
}

static int
isal_reconstruct (struct gr_coder *c, const struct gr_decode *d,
                  uint8_t *const *blocks, size_t nstripes, size_t len)
{
  uint8_t *in[GR_MAX_MEMBERS], *out[GR_MAX_MEMBERS];
  size_t s;

  if (c->code == GR_CODE_CRS)
    return gr_crs_fast_reconstruct (c, d, blocks, nstripes, len);
  for (s = 0; s < nstripes; s++) {
    uint8_t *const *b = blocks + s * c->n;

    gr_decode_gather (c, d, b, (const uint8_t **) in, out);
    isal_apply (c->k, d->nerased, d->priv, in, out, len);
  }
  return 0;
}

static int
isal_update (struct gr_coder *c, int data_index,
             const uint8_t *const *delta, uint8_t *const *parity,
             size_t nstripes, size_t len)
{
  uint8_t *o2[GR_MAX_MEMBERS];
  size_t s, off, n;
  int j;

  if (c->code == GR_CODE_CRS)
    return gr_crs_fast_update (c, c->priv, data_index, delta, parity,
                               nstripes, len);
  for (s = 0; s < nstripes; s++)
    for (off = 0; off < len; off += n) {
      n = len - off < GR_ISAL_PIECE ? len - off : GR_ISAL_PIECE;
      for (j = 0; j < c->m; j++)
        o2[j] = parity[s * c->m + j] + off;
      /* parity[j] ^= P[j][data_index] * delta; ISA-L does not write
       * through its data pointer. */
      ec_encode_data_update ((int) n, c->k, c->m, data_index, c->priv,
                             (unsigned char *) delta[s] + off, o2);
    }
  return 0;
}

const struct gr_backend gr_backend_isal = {
  .name = "isal",
  .prefer = 100,
  .probe = isal_probe,
  .coder_init = isal_coder_init,
  .coder_fini = isal_coder_fini,
  .plan_init = isal_plan_init,
  .plan_fini = isal_plan_fini,
  .encode = isal_encode,
  .reconstruct = isal_reconstruct,
  .update = isal_update,
};
