/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the "gfc" backend: RS through gf-complete's region multiply
 * (gf_init_easy (&gf, 8), whose default polynomial is 0x11d; test-field
 * checks every product against ours), CRS through the XOR code in crs.c.
 *
 * gf-complete needs source and destination of a region multiply to have
 * the same address mod 16 (it asserts otherwise), and overruns short
 * unaligned regions; see gfc_mul_region for how both are avoided. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <gf_complete.h>

#include "gf-internal.h"

#define GR_GFC_PIECE ((size_t) 1 << 30)
#define GR_GFC_BOUNCE 4096

struct gfc_priv {
  gf_t gf;
  void *crs;                    /* CRS: crs.c state */
};

static int
gfc_probe (void)
{
  return 0;
}

static int
gfc_coder_init (struct gr_coder *c, void **priv)
{
  struct gfc_priv *p = calloc (1, sizeof *p);
  int r;

  if (p == NULL)
    return -ENOMEM;
  if (c->code == GR_CODE_CRS) {
    r = gr_crs_fast_coder_init (c, &p->crs);
    if (r < 0) {
      free (p);
      return r;
    }
  }
  else if (!gf_init_easy (&p->gf, 8)) {
    free (p);
    return -ENOMEM;
  }
  *priv = p;
  return 0;
}

static void
gfc_coder_fini (struct gr_coder *c, void *priv)
{
  struct gfc_priv *p = priv;

  if (c->code == GR_CODE_CRS)
    gr_crs_fast_coder_fini (p->crs);
  else
    gf_free (&p->gf, 0);
  free (p);
}

static int
gfc_plan_init (struct gr_coder *c, struct gr_decode *d)
{
  if (c->code == GR_CODE_CRS)
    return gr_crs_fast_plan_init (c, d);
  d->priv = NULL;
  return 0;
}

static void
gfc_plan_fini (struct gr_coder *c, struct gr_decode *d)
{
  if (c->code == GR_CODE_CRS)
    gr_crs_fast_plan_fini (d);
}

/* dst (^)= coef * src over len bytes.  gf-complete mishandles a region
 * that starts off a 16-byte boundary and ends before the next one (it
 * runs past the end), so the bytes up to dst's first 16-byte boundary are
 * done here with our tables; gf-complete then always gets a 16-aligned
 * destination, and a source of the same alignment (directly, or through
 * the bounce buffer). */
static void
gfc_mul_region (gf_t *gf, const uint8_t *src, uint8_t *dst, uint8_t coef,
                size_t len, int accumulate)
{
  size_t head = (16 - ((uintptr_t) dst & 15)) & 15, off, n;

  if (head > len)
    head = len;
  for (off = 0; off < head; off++) {
    uint8_t v = gr_gf_mul_fast (coef, src[off]);
    dst[off] = accumulate ? dst[off] ^ v : v;
  }
  src += head;
  dst += head;
  len -= head;
  if (len == 0)
    return;

  if (((uintptr_t) src & 15) == 0) {
    for (off = 0; off < len; off += n) {
      n = len - off < GR_GFC_PIECE ? len - off : GR_GFC_PIECE;
      gf->multiply_region.w32 (gf, (void *) (src + off), dst + off, coef,
                               (int) n, accumulate);
    }
    return;
  }
  {
    uint8_t bounce[GR_GFC_BOUNCE] __attribute__ ((aligned (16)));

    for (off = 0; off < len; off += n) {
      n = len - off < GR_GFC_BOUNCE ? len - off : GR_GFC_BOUNCE;
      memcpy (bounce, src + off, n);
      gf->multiply_region.w32 (gf, bounce, dst + off, coef, (int) n,
                               accumulate);
    }
  }
}

/* out[o] = sum_c mat[o*mstride + c] * in[c]. */
static void
gfc_apply (gf_t *gf, const uint8_t *mat, size_t mstride, int rows, int cols,
           const uint8_t *const *in, uint8_t *const *out, size_t len)
{
  int o, c;

  for (o = 0; o < rows; o++)
    for (c = 0; c < cols; c++)
      gfc_mul_region (gf, in[c], out[o], mat[o * mstride + c], len, c > 0);
}

static int
gfc_encode (struct gr_coder *c, uint8_t *const *blocks,
            size_t nstripes, size_t len)
{
  struct gfc_priv *p = c->priv;
  size_t s;

  if (c->code == GR_CODE_CRS)
    return gr_crs_fast_encode (c, p->crs, blocks, nstripes, len);
  for (s = 0; s < nstripes; s++) {
    uint8_t *const *b = blocks + s * c->n;
    gfc_apply (&p->gf, gr_coder_parity_matrix (c), c->k, c->m, c->k,
               (const uint8_t *const *) b, b + c->k, len);
  }
  return 0;
}

static int
gfc_reconstruct (struct gr_coder *c, const struct gr_decode *d,
                 uint8_t *const *blocks, size_t nstripes, size_t len)
{
  struct gfc_priv *p = c->priv;
  const uint8_t *in[GR_MAX_MEMBERS];
  uint8_t *out[GR_MAX_MEMBERS];
  size_t s;

  if (c->code == GR_CODE_CRS)
    return gr_crs_fast_reconstruct (c, d, blocks, nstripes, len);
  for (s = 0; s < nstripes; s++) {
    uint8_t *const *b = blocks + s * c->n;

    gr_decode_gather (c, d, b, in, out);
    gfc_apply (&p->gf, d->matrix, c->k, d->nerased, c->k, in, out, len);
  }
  return 0;
}

static int
gfc_update (struct gr_coder *c, int data_index,
            const uint8_t *const *delta, uint8_t *const *parity,
            size_t nstripes, size_t len)
{
  struct gfc_priv *p = c->priv;
  const uint8_t *pm = gr_coder_parity_matrix (c);
  size_t s;
  int j;

  if (c->code == GR_CODE_CRS)
    return gr_crs_fast_update (c, p->crs, data_index, delta, parity,
                               nstripes, len);
  for (s = 0; s < nstripes; s++)
    for (j = 0; j < c->m; j++)
      gfc_mul_region (&p->gf, delta[s], parity[s * c->m + j],
                      pm[j * c->k + data_index], len, 1);
  return 0;
}

const struct gr_backend gr_backend_gfc = {
  .name = "gfc",
  .prefer = 50,
  .probe = gfc_probe,
  .coder_init = gfc_coder_init,
  .coder_fini = gfc_coder_fini,
  .plan_init = gfc_plan_init,
  .plan_fini = gfc_plan_fini,
  .encode = gfc_encode,
  .reconstruct = gfc_reconstruct,
  .update = gfc_update,
};
