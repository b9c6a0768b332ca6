/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - GF(2^8) arithmetic and matrices, polynomial 0x11d.
 *
 * The log/exp tables are computed at start-up from the polynomial (never
 * typed in); test-field checks them against a carry-less multiply. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gf-internal.h"

#define GR_GF_POLY 0x11d

uint8_t gr_gf_log_tbl[256];
uint8_t gr_gf_exp_tbl[512];

static void
gf_tables_init (void)
{
  unsigned x = 1;
  int i;

  for (i = 0; i < 255; i++) {
    gr_gf_exp_tbl[i] = x;
    gr_gf_log_tbl[x] = i;
    x <<= 1;
    if (x & 0x100)
      x ^= GR_GF_POLY;
  }
  for (i = 255; i < 512; i++)
    gr_gf_exp_tbl[i] = gr_gf_exp_tbl[i - 255];
  gr_gf_log_tbl[0] = 0;
}

/* Run before main() (and before any constructor of default priority), so
 * the tables are ready by the time any gr_* function can be called. */
static void gf_tables_ctor (void) __attribute__ ((constructor (101)));
static void
gf_tables_ctor (void)
{
  gf_tables_init ();
}

uint8_t
gr_gf_mul (uint8_t a, uint8_t b)
{
  return gr_gf_mul_fast (a, b);
}

uint8_t
gr_gf_inv (uint8_t a)
{
  if (a == 0)
    return 0;                   /* undefined; callers never pass 0 */
  return gr_gf_exp_tbl[255 - gr_gf_log_tbl[a]];
}

/* ISA-L's gf_gen_cauchy1_matrix convention: rows k..n-1 are
 * a[i][j] = 1 / (i ^ j), so parity is byte-identical to ISA-L's. */
int
gr_gf_gen_matrix (int k, int m, uint8_t *out)
{
  int i, j;

  if (k < 1 || m < 1 || k + m > GR_MAX_MEMBERS || out == NULL)
    return -EINVAL;
  memset (out, 0, (size_t) k * k);
  for (i = 0; i < k; i++)
    out[i * k + i] = 1;
  for (i = k; i < k + m; i++)
    for (j = 0; j < k; j++)
      out[i * k + j] = gr_gf_inv (i ^ j);
  return 0;
}

int
gr_gf_invert_matrix (const uint8_t *in, uint8_t *out, int n)
{
  uint8_t *a;
  int i, j, r;
  int ret = 0;

  if (n < 1 || in == NULL || out == NULL)
    return -EINVAL;
  a = malloc ((size_t) n * n);
  if (a == NULL)
    return -ENOMEM;
  memcpy (a, in, (size_t) n * n);
  memset (out, 0, (size_t) n * n);
  for (i = 0; i < n; i++)
    out[i * n + i] = 1;

  for (i = 0; i < n; i++) {
    uint8_t *ai = a + (size_t) i * n, *oi = out + (size_t) i * n;
    uint8_t p;

    /* Pivot: first row at or below i with a non-zero in column i. */
    for (r = i; r < n; r++)
      if (a[(size_t) r * n + i] != 0)
        break;
    if (r == n) {
      ret = -EDOM;
      goto out;
    }
    if (r != i) {
      uint8_t *ar = a + (size_t) r * n, *or = out + (size_t) r * n;
      for (j = 0; j < n; j++) {
        uint8_t t = ai[j]; ai[j] = ar[j]; ar[j] = t;
        t = oi[j]; oi[j] = or[j]; or[j] = t;
      }
    }
    /* Scale row i so the pivot is 1. */
    p = gr_gf_inv (ai[i]);
    for (j = 0; j < n; j++) {
      ai[j] = gr_gf_mul_fast (ai[j], p);
      oi[j] = gr_gf_mul_fast (oi[j], p);
    }
    /* Clear column i from every other row. */
    for (r = 0; r < n; r++) {
      uint8_t *ar = a + (size_t) r * n, *or = out + (size_t) r * n;
      uint8_t f = ar[i];

      if (r == i || f == 0)
        continue;
      for (j = 0; j < n; j++) {
        ar[j] ^= gr_gf_mul_fast (f, ai[j]);
        or[j] ^= gr_gf_mul_fast (f, oi[j]);
      }
    }
  }

 out:
  free (a);
  return ret;
}

void
gr_gf_bitmatrix (const uint8_t *mat, int rows, int cols, uint8_t *out)
{
  size_t bcols = (size_t) cols * 8;
  int i, j, r, c;

  for (i = 0; i < rows; i++)
    for (j = 0; j < cols; j++) {
      uint8_t e = mat[(size_t) i * cols + j];

      for (c = 0; c < 8; c++) {
        uint8_t col = gr_gf_mul_fast (e, 1u << c);

        for (r = 0; r < 8; r++)
          out[((size_t) i * 8 + r) * bcols + (size_t) j * 8 + c] =
            (col >> r) & 1;
      }
    }
}
