/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - CPU coding throughput, one thread: for each backend and code,
 * encode and reconstruct (m data blocks lost) of k+m stripes with 1 MiB
 * chunks, for 10+4 and 8+8.  Prints GB/s of data (k * chunk per stripe).
 *   BENCH_SECONDS  minimum time per measurement (default 0.5)
 *   BENCH_CHUNK    chunk size in bytes (default 1048576)
 *   BENCH_BACKEND  only this backend */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gf.h"
#include "../common/now.h"

int
main (void)
{
  static const int km[][2] = { { 10, 4 }, { 8, 8 } };
  const char *s = getenv ("BENCH_SECONDS");
  double minsec = s ? atof (s) : 0.5;
  size_t chunk = getenv ("BENCH_CHUNK") ? strtoull (getenv ("BENCH_CHUNK"),
                                                     NULL, 0) : 1 << 20;
  unsigned t;
  int b, code, i;

  chunk -= chunk % GR_CRS_GROUP;
  if (chunk == 0)
    chunk = GR_CRS_GROUP;
  printf ("%-6s %-4s %-6s %13s %13s\n", "backend", "code", "k+m",
          "encode", "decode");
  for (t = 0; t < sizeof km / sizeof km[0]; t++) {
    int k = km[t][0], m = km[t][1], n = k + m;
    uint8_t **blk = calloc (n, sizeof *blk);
    int erased[GR_MAX_MEMBERS];

    for (i = 0; i < n; i++) {
      if (posix_memalign ((void **) &blk[i], 64, chunk) != 0)
        return 1;
      memset (blk[i], i * 37 + 1, chunk);
    }
    for (i = 0; i < m; i++)
      erased[i] = i;
    for (b = 0; gr_backend_at (b); b++)
      for (code = GR_CODE_RS; code <= GR_CODE_CRS; code++) {
        const struct gr_backend *be = gr_backend_at (b);
        struct gr_coder *c;
        double gbs[2];
        int op;

        if (getenv ("BENCH_BACKEND") &&
            strcmp (getenv ("BENCH_BACKEND"), gr_backend_name (be)) != 0)
          continue;
        if (gr_backend_probe (be) != 0 ||
            gr_coder_new (&c, k, m, code, be) != 0)
          continue;
        for (op = 0; op < 2; op++) {
          double t0 = gr_now (), el;
          long iters = 0;
          int r;

          do {
            r = op == 0 ? gr_encode (c, blk, 1, chunk)
              : gr_reconstruct (c, erased, m, blk, 1, chunk);
            iters++;
            el = gr_now () - t0;
          } while (r == 0 && el < minsec);
          gbs[op] = r == 0 ? (double) k * chunk * iters / el / 1e9 : -1;
        }
        printf ("%-6s %-4s %2d+%-3d %8.3f GB/s %8.3f GB/s\n",
                gr_backend_name (be), code == GR_CODE_CRS ? "crs" : "rs",
                k, m, gbs[0], gbs[1]);
        fflush (stdout);
        gr_coder_free (c);
      }
    for (i = 0; i < n; i++)
      free (blk[i]);
    free (blk);
  }
  return 0;
}
