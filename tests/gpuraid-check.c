/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid-check - offline parity checker for a gpuraid array.
 *
 *   gpuraid-check -k K -m M [-c CHUNK] [-t rs|crs] [-o DATA_OFFSET]
 *                 [-s STRIPES] [-b BACKEND] [-x INDEX]... [-d DUMPFILE]
 *                 [-q] MEMBER0 MEMBER1 ... MEMBER(K+M-1)
 *
 * Members are given in member-index order (the index in their
 * superblock).  A member given as "-", or whose index is named by -x, is
 * missing.  Every stripe's data is read through the layout of
 * raidmap/raidmap.h; missing blocks (at most m per stripe) are rebuilt
 * with gr_reconstruct, then the parity is recomputed with gr_encode from
 * the data and compared with every parity block that is present on disk.
 * With exactly m members missing nothing is left to compare; the stripes
 * are still decoded (and dumped with -d).
 *
 * -d FILE writes the logical image (all data chunks in logical order,
 * missing ones reconstructed) to FILE, for comparison with a reference.
 *
 * Defaults: chunk 65536, code rs, data offset max (1 MiB, chunk),
 * stripes from the smallest present member, backend "ref" (independent
 * of the backend the plugin used).
 *
 * Exit status: 0 parity consistent, 1 mismatches found (each printed),
 * 2 usage or I/O error.
 */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../gf/gf.h"
#include "../raidmap/raidmap.h"

static void
usage (void)
{
  fprintf (stderr,
           "usage: gpuraid-check -k K -m M [-c CHUNK] [-t rs|crs] "
           "[-o DATA_OFFSET]\n"
           "         [-s STRIPES] [-b BACKEND] [-x INDEX]... [-d DUMPFILE] "
           "[-q]\n"
           "         MEMBER0 ... MEMBER(K+M-1)   (\"-\" = missing)\n");
  exit (2);
}

static uint64_t
parse_u64 (const char *what, const char *s)
{
  char *end;
  unsigned long long v;
  uint64_t mul = 1;

  errno = 0;
  v = strtoull (s, &end, 0);
  if (errno || end == s)
    goto bad;
  if (*end == 'k' || *end == 'K')
    mul = 1024, end++;
  else if (*end == 'M')
    mul = 1024 * 1024, end++;
  if (*end != '\0')
    goto bad;
  return (uint64_t) v * mul;
 bad:
  fprintf (stderr, "gpuraid-check: bad %s: %s\n", what, s);
  exit (2);
}

/* Read exactly len bytes at off; 0 or -1 (message printed). */
static int
read_full (int fd, const char *name, uint8_t *buf, size_t len, uint64_t off)
{
  while (len > 0) {
    ssize_t r = pread (fd, buf, len, off);
    if (r < 0) {
      fprintf (stderr, "gpuraid-check: %s: pread at %" PRIu64 ": %m\n",
               name, off);
      return -1;
    }
    if (r == 0) {
      fprintf (stderr, "gpuraid-check: %s: short read at %" PRIu64
               " (file too small)\n", name, off);
      return -1;
    }
    buf += r;
    len -= r;
    off += r;
  }
  return 0;
}

int
main (int argc, char *argv[])
{
  int k = 0, m = 0, n, opt, i, r;
  uint64_t chunk = 65536, data_offset = 0, stripes = 0;
  bool have_offset = false, have_stripes = false, quiet = false;
  enum gr_code code = GR_CODE_RS;
  const char *backend = "ref", *dump = NULL;
  bool missing[GR_MAX_MEMBERS] = { false };
  int missing_idx[GR_MAX_MEMBERS];
  int nmissing_opt = 0;
  int fds[GR_MAX_MEMBERS];
  const char *names[GR_MAX_MEMBERS];
  struct gr_coder *coder = NULL;
  const struct gr_backend *be;
  struct gr_geom g;
  uint8_t *buf = NULL, *parity = NULL;
  uint8_t **blocks = NULL, **pblocks = NULL;
  int erased[GR_MAX_MEMBERS], nerased;
  uint64_t s, mismatched_stripes = 0, mismatched_blocks = 0, rebuilt = 0;
  int dumpfd = -1;
  int status = 2;

  while ((opt = getopt (argc, argv, "k:m:c:t:o:s:b:x:d:qh")) != -1) {
    switch (opt) {
    case 'k': k = parse_u64 ("k", optarg); break;
    case 'm': m = parse_u64 ("m", optarg); break;
    case 'c': chunk = parse_u64 ("chunk", optarg); break;
    case 't':
      if (strcmp (optarg, "rs") == 0)
        code = GR_CODE_RS;
      else if (strcmp (optarg, "crs") == 0)
        code = GR_CODE_CRS;
      else
        usage ();
      break;
    case 'o':
      data_offset = parse_u64 ("data offset", optarg);
      have_offset = true;
      break;
    case 's':
      stripes = parse_u64 ("stripes", optarg);
      have_stripes = true;
      break;
    case 'b': backend = optarg; break;
    case 'x':
      if (nmissing_opt >= GR_MAX_MEMBERS)
        usage ();
      missing_idx[nmissing_opt++] = parse_u64 ("missing index", optarg);
      break;
    case 'd': dump = optarg; break;
    case 'q': quiet = true; break;
    default: usage ();
    }
  }
  n = k + m;
  if (k < 1 || m < 1 || n > GR_MAX_MEMBERS || argc - optind != n) {
    fprintf (stderr, "gpuraid-check: need -k, -m and exactly k+m members "
             "(got %d)\n", argc - optind);
    usage ();
  }
  if (chunk < 4096 || (chunk & (chunk - 1)) != 0 || chunk > UINT32_MAX) {
    fprintf (stderr, "gpuraid-check: chunk must be a power of two >= 4096\n");
    exit (2);
  }
  for (i = 0; i < GR_MAX_MEMBERS; i++)
    fds[i] = -1;
  if (!have_offset)
    data_offset = chunk > 1048576 ? chunk : 1048576;
  for (i = 0; i < nmissing_opt; i++) {
    if (missing_idx[i] < 0 || missing_idx[i] >= n) {
      fprintf (stderr, "gpuraid-check: -x %d out of range\n", missing_idx[i]);
      exit (2);
    }
    missing[missing_idx[i]] = true;
  }

  /* Open members; find the number of stripes. */
  for (i = 0; i < n; i++) {
    struct stat st;
    uint64_t st_stripes;

    names[i] = argv[optind + i];
    fds[i] = -1;
    if (strcmp (names[i], "-") == 0)
      missing[i] = true;
    if (missing[i])
      continue;
    fds[i] = open (names[i], O_RDONLY | O_CLOEXEC);
    if (fds[i] < 0 || fstat (fds[i], &st) < 0) {
      fprintf (stderr, "gpuraid-check: %s: %m\n", names[i]);
      goto out;
    }
    if ((uint64_t) st.st_size < data_offset + chunk) {
      fprintf (stderr, "gpuraid-check: %s: %" PRIu64 " bytes, too small "
               "for data offset %" PRIu64 " + one chunk\n",
               names[i], (uint64_t) st.st_size, data_offset);
      goto out;
    }
    st_stripes = ((uint64_t) st.st_size - data_offset) / chunk;
    if (!have_stripes && (stripes == 0 || st_stripes < stripes))
      stripes = st_stripes;
  }
  nerased = 0;
  for (i = 0; i < n; i++)
    nerased += missing[i];
  if (nerased > m) {
    fprintf (stderr, "gpuraid-check: %d members missing, more than m = %d\n",
             nerased, m);
    goto out;
  }
  if (nerased == n) {
    fprintf (stderr, "gpuraid-check: no members\n");
    goto out;
  }

  g.k = k;
  g.m = m;
  g.chunk = chunk;
  g.data_offset = data_offset;
  g.stripes = stripes;
  if ((r = gr_map_check (&g)) < 0) {
    fprintf (stderr, "gpuraid-check: bad geometry: %s\n", strerror (-r));
    goto out;
  }

  be = gr_backend_find (backend);
  if (be == NULL) {
    fprintf (stderr, "gpuraid-check: unknown backend %s\n", backend);
    goto out;
  }
  if ((r = gr_coder_new (&coder, k, m, code, be)) < 0) {
    fprintf (stderr, "gpuraid-check: gr_coder_new (k=%d, m=%d, %s, %s): %s\n",
             k, m, code == GR_CODE_RS ? "rs" : "crs", backend, strerror (-r));
    goto out;
  }

  buf = malloc ((size_t) n * chunk);
  parity = malloc ((size_t) m * chunk);
  blocks = calloc (n, sizeof *blocks);
  pblocks = calloc (n, sizeof *pblocks);
  if (!buf || !parity || !blocks || !pblocks) {
    fprintf (stderr, "gpuraid-check: out of memory\n");
    goto out;
  }
  if (dump) {
    dumpfd = open (dump, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (dumpfd < 0) {
      fprintf (stderr, "gpuraid-check: %s: %m\n", dump);
      goto out;
    }
  }

  for (s = 0; s < stripes; s++) {
    uint64_t off = gr_map_member_offset (&g, s, 0);
    bool bad = false;

    /* blocks[i] = code index i of this stripe. */
    nerased = 0;
    for (i = 0; i < n; i++) {
      int member = gr_map_member (&g, s, i);

      blocks[i] = buf + (size_t) i * chunk;
      if (missing[member]) {
        erased[nerased++] = i;
        memset (blocks[i], 0, chunk);
      }
      else if (read_full (fds[member], names[member], blocks[i], chunk,
                          off) < 0)
        goto out;
    }
    if (nerased > 0) {
      r = gr_reconstruct (coder, erased, nerased, blocks, 1, chunk);
      if (r < 0) {
        fprintf (stderr, "gpuraid-check: stripe %" PRIu64
                 ": gr_reconstruct: %s\n", s, strerror (-r));
        goto out;
      }
      rebuilt++;
    }

    /* Recompute parity from the data into a scratch area. */
    for (i = 0; i < k; i++)
      pblocks[i] = blocks[i];
    for (i = 0; i < m; i++)
      pblocks[k + i] = parity + (size_t) i * chunk;
    if ((r = gr_encode (coder, pblocks, 1, chunk)) < 0) {
      fprintf (stderr, "gpuraid-check: stripe %" PRIu64 ": gr_encode: %s\n",
               s, strerror (-r));
      goto out;
    }
    for (i = k; i < n; i++) {
      int member = gr_map_member (&g, s, i);
      size_t b;

      if (missing[member])
        continue;
      if (memcmp (blocks[i], pblocks[i], chunk) == 0)
        continue;
      for (b = 0; b < chunk && blocks[i][b] == pblocks[i][b]; b++)
        ;
      bad = true;
      mismatched_blocks++;
      if (mismatched_blocks <= 50)
        printf ("stripe %" PRIu64 ": parity index %d (member %d, %s) differs"
                " from recomputed parity at chunk offset %zu (member offset"
                " %" PRIu64 "): on disk 0x%02x, computed 0x%02x\n",
                s, i, member, names[member], b, off + b, blocks[i][b],
                pblocks[i][b]);
    }
    mismatched_stripes += bad;

    if (dumpfd >= 0) {
      for (i = 0; i < k; i++) {
        uint64_t loff = (s * k + i) * chunk;
        size_t done = 0;

        while (done < chunk) {
          ssize_t w = pwrite (dumpfd, blocks[i] + done, chunk - done,
                              loff + done);
          if (w <= 0) {
            fprintf (stderr, "gpuraid-check: %s: write: %m\n", dump);
            goto out;
          }
          done += w;
        }
      }
    }
  }

  if (!quiet || mismatched_stripes)
    printf ("gpuraid-check: k=%d m=%d chunk=%" PRIu64 " code=%s "
            "data_offset=%" PRIu64 ": %" PRIu64 " stripes checked, %"
            PRIu64 " with missing blocks rebuilt, %" PRIu64
            " stripes with parity mismatches\n",
            k, m, chunk, code == GR_CODE_RS ? "rs" : "crs", data_offset,
            stripes, rebuilt, mismatched_stripes);
  status = mismatched_stripes ? 1 : 0;

 out:
  if (dumpfd >= 0 && close (dumpfd) < 0) {
    fprintf (stderr, "gpuraid-check: %s: close: %m\n", dump);
    status = 2;
  }
  for (i = 0; i < n; i++)
    if (fds[i] >= 0)
      close (fds[i]);
  if (coder)
    gr_coder_free (coder);
  free (buf);
  free (parity);
  free (blocks);
  free (pblocks);
  return status;
}
