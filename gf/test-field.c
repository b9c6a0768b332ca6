/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - test GF(2^8) field tables, generator, inversion, bitmatrix. */
#include <errno.h>

#include <gf_complete.h>
#include <isa-l/erasure_code.h>

#include "gf.h"
#include "tests/testkit.h"

/* Bitwise carry-less multiply mod 0x11d: the definition, independent of
 * the tables. */
static uint8_t
clmul (uint8_t a, uint8_t b)
{
  unsigned r = 0, x = a;
  int i;

  for (i = 0; i < 8; i++) {
    if (b & (1u << i))
      r ^= x;
    x <<= 1;
    if (x & 0x100)
      x ^= 0x11d;
  }
  return r;
}

static void
matmul (const uint8_t *a, const uint8_t *b, uint8_t *out, int n)
{
  int i, j, l;

  for (i = 0; i < n; i++)
    for (j = 0; j < n; j++) {
      uint8_t acc = 0;
      for (l = 0; l < n; l++)
        acc ^= clmul (a[i * n + l], b[l * n + j]);
      out[i * n + j] = acc;
    }
}

static void
test_mul_inv (void)
{
  int a, b;

  for (a = 0; a < 256; a++)
    for (b = 0; b < 256; b++)
      CHECK (gr_gf_mul (a, b) == clmul (a, b), "mul %d %d", a, b);
  for (a = 1; a < 256; a++)
    CHECK (clmul (a, gr_gf_inv (a)) == 1, "inv %d", a);
  /* 2 generates the multiplicative group: its powers hit all 255. */
  {
    int seen[256] = { 0 }, x = 1, i;
    for (i = 0; i < 255; i++) {
      seen[x]++;
      x = clmul (x, 2);
    }
    for (i = 1; i < 256; i++)
      CHECK (seen[i] == 1, "2 not primitive at %d", i);
  }
}

/* The libraries behind the gfc and isal backends use the same field:
 * gf-complete's default w=8 polynomial and ISA-L's gf_mul. */
static void
test_libraries_agree (void)
{
  gf_t gf;
  int a, b;

  CHECK (gf_init_easy (&gf, 8) == 1, "gf_init_easy (8)");
  for (a = 0; a < 256; a++)
    for (b = 0; b < 256; b++) {
      CHECK (gf.multiply.w32 (&gf, a, b) == clmul (a, b),
             "gf-complete %d*%d", a, b);
      CHECK (gf_mul (a, b) == clmul (a, b), "ISA-L gf_mul %d*%d", a, b);
    }
  gf_free (&gf, 0);
}

static void
test_gen (void)
{
  static uint8_t g[256 * 255];
  int k, m, i, j;

  CHECK (gr_gf_gen_matrix (0, 1, g) == -EINVAL, "k=0");
  CHECK (gr_gf_gen_matrix (1, 0, g) == -EINVAL, "m=0");
  CHECK (gr_gf_gen_matrix (200, 57, g) == -EINVAL, "k+m=257");
  for (k = 1; k <= 255; k += (k < 12 ? 1 : 37)) {
    m = 256 - k < 4 ? 256 - k : 4;
    CHECK (gr_gf_gen_matrix (k, m, g) == 0, "gen %d %d", k, m);
    for (i = 0; i < k; i++)
      for (j = 0; j < k; j++)
        CHECK (g[i * k + j] == (i == j), "identity %d,%d", i, j);
    for (i = k; i < k + m; i++)
      for (j = 0; j < k; j++)
        CHECK (clmul (g[i * k + j], i ^ j) == 1, "cauchy %d %d", i, j);
  }
}

static void
test_invert (void)
{
  static uint8_t a[256 * 256], inv[256 * 256], prod[256 * 256];
  static const int sizes[] = { 1, 2, 3, 5, 8, 16, 33, 100, 256 };
  unsigned t;
  int n, i, j, tries;

  for (t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
    n = sizes[t];
    if (test_quick () && n > 100)
      continue;
    /* A random matrix is singular with small probability; retry. */
    for (tries = 0; tries < 20; tries++) {
      test_fill (a, (size_t) n * n);
      if (gr_gf_invert_matrix (a, inv, n) == 0)
        break;
    }
    CHECK (tries < 20, "no invertible random %dx%d", n, n);
    matmul (a, inv, prod, n);
    for (i = 0; i < n; i++)
      for (j = 0; j < n; j++)
        CHECK (prod[i * n + j] == (i == j), "A*inv(A) n=%d at %d,%d", n, i, j);
    matmul (inv, a, prod, n);
    for (i = 0; i < n; i++)
      for (j = 0; j < n; j++)
        CHECK (prod[i * n + j] == (i == j), "inv(A)*A n=%d at %d,%d", n, i, j);

    /* Make it singular: one row is a multiple of another, plus a zero
     * column case. */
    if (n >= 2) {
      uint8_t f = 1 + test_rand () % 255;
      int r1 = test_rand () % n, r2 = (r1 + 1 + test_rand () % (n - 1)) % n;
      for (j = 0; j < n; j++)
        a[r2 * n + j] = clmul (a[r1 * n + j], f);
      memcpy (prod, a, (size_t) n * n);
      CHECK (gr_gf_invert_matrix (a, inv, n) == -EDOM, "singular n=%d", n);
      CHECK (memcmp (prod, a, (size_t) n * n) == 0, "input changed n=%d", n);
    }
    for (i = 0; i < n; i++)
      a[i * n + (n - 1)] = 0;
    CHECK (gr_gf_invert_matrix (a, inv, n) == -EDOM, "zero column n=%d", n);
  }
}

static void
test_bitmatrix (void)
{
  uint8_t mat[3 * 2], bits[24 * 16];
  int i, j, x;

  test_fill (mat, sizeof mat);
  mat[0] = 0;
  mat[1] = 1;
  gr_gf_bitmatrix (mat, 3, 2, bits);
  /* Multiplying x by element e == applying e's 8x8 block to x's bits. */
  for (i = 0; i < 3; i++)
    for (j = 0; j < 2; j++)
      for (x = 0; x < 256; x++) {
        uint8_t want = clmul (mat[i * 2 + j], x), got = 0;
        int r, c;
        for (r = 0; r < 8; r++) {
          unsigned bit = 0;
          for (c = 0; c < 8; c++)
            bit ^= bits[(i * 8 + r) * 16 + j * 8 + c] & ((x >> c) & 1);
          got |= bit << r;
        }
        CHECK (got == want, "bitmatrix e=%d x=%d", mat[i * 2 + j], x);
      }
  for (i = 0; i < (int) sizeof bits; i++)
    CHECK (bits[i] == 0 || bits[i] == 1, "bitmatrix entry %d is %d", i, bits[i]);
}

int
main (void)
{
  test_seed ("test-field");
  test_mul_inv ();
  test_libraries_agree ();
  test_gen ();
  test_invert ();
  test_bitmatrix ();
  return test_done ("test-field");
}
