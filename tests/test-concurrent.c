/* SPDX-License-Identifier: BSD-3-Clause */
/* test-concurrent - concurrent writers on one gpuraid export (libnbd).
 *
 *   test-concurrent write  URI SEED [THREADS [REGION [DEPTH]]]
 *   test-concurrent verify URI SEED [THREADS [REGION [DEPTH]]]
 *
 * The first REGION bytes of the export (default 8 MiB, clipped to the
 * export) are cut into segments of pseudo-random length (1 byte to 6000
 * bytes, so unaligned, and many segments of different writers share a
 * chunk and a stripe).  Segment j belongs to thread j % THREADS.  Every
 * thread has its own NBD connection and keeps up to DEPTH writes in
 * flight: first it writes all its segments with generation-1 bytes, then,
 * after those completed, again with generation-2 bytes, each pass in its
 * own random order.  Writers never overlap, so the final image is
 * deterministic: generation 2 over the whole region, the rest of the
 * export unchanged (the test starts from a fresh, all-zero array).
 * Read-modify-write of shared stripes without proper stripe locking
 * loses other writers' updates or leaves parity stale; "verify" (run
 * after "write", possibly on a degraded restart) reads the whole export
 * back and checks it.  Exit 0 on success, 1 on mismatch or error.
 */

#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libnbd.h>

#include "../common/splitmix.h"

struct seg {
  uint64_t off;
  uint32_t len;
};

static const char *uri;
static uint64_t seed;
static int nthreads = 4, depth = 8;
static uint64_t region = 8 * 1024 * 1024;
static struct seg *segs;
static size_t nsegs;
static uint8_t *gen1, *gen2;     /* expected bytes of each generation */

static void
make_expected (void)
{
  uint64_t x = seed, off = 0, i;
  size_t cap = 1024;

  gen1 = malloc (region);
  gen2 = malloc (region);
  segs = malloc (cap * sizeof *segs);
  if (!gen1 || !gen2 || !segs) {
    perror ("malloc");
    exit (1);
  }
  for (i = 0; i < region; i += 8) {
    uint64_t a = gr_splitmix64 (&x), b = gr_splitmix64 (&x);
    size_t n = region - i < 8 ? region - i : 8;

    memcpy (gen1 + i, &a, n);
    memcpy (gen2 + i, &b, n);
  }
  while (off < region) {
    uint64_t r = gr_splitmix64 (&x);
    uint32_t len;

    /* Mostly small pieces, some tiny, some above a 4K chunk. */
    switch (r % 4) {
    case 0: len = 1 + (r >> 8) % 16; break;
    case 1: len = 1 + (r >> 8) % 600; break;
    default: len = 1 + (r >> 8) % 6000; break;
    }
    if (len > region - off)
      len = region - off;
    if (nsegs == cap) {
      cap *= 2;
      segs = realloc (segs, cap * sizeof *segs);
      if (!segs) {
        perror ("realloc");
        exit (1);
      }
    }
    segs[nsegs].off = off;
    segs[nsegs].len = len;
    nsegs++;
    off += len;
  }
}

static struct nbd_handle *
connect_one (void)
{
  struct nbd_handle *h = nbd_create ();

  if (h == NULL || nbd_connect_uri (h, uri) == -1) {
    fprintf (stderr, "test-concurrent: connect %s: %s\n", uri,
             nbd_get_error ());
    exit (1);
  }
  return h;
}

/* Write this thread's segments of one generation, DEPTH in flight. */
static int
write_pass (struct nbd_handle *h, int t, const uint8_t *data, uint64_t x)
{
  size_t *mine, nmine = 0, next = 0, j;
  int64_t cookie;

  mine = malloc ((nsegs / nthreads + 1) * sizeof *mine);
  if (!mine)
    return -1;
  for (j = t; j < nsegs; j += nthreads)
    mine[nmine++] = j;
  /* Shuffle (Fisher-Yates). */
  for (j = nmine; j > 1; j--) {
    size_t r = gr_splitmix64 (&x) % j, tmp = mine[j - 1];

    mine[j - 1] = mine[r];
    mine[r] = tmp;
  }
  while (next < nmine || nbd_aio_in_flight (h) > 0) {
    while (next < nmine && nbd_aio_in_flight (h) < depth) {
      const struct seg *s = &segs[mine[next++]];

      if (nbd_aio_pwrite (h, data + s->off, s->len, s->off,
                          NBD_NULL_COMPLETION, 0) == -1) {
        fprintf (stderr, "test-concurrent: thread %d: aio_pwrite: %s\n",
                 t, nbd_get_error ());
        goto err;
      }
    }
    if (nbd_poll (h, -1) == -1) {
      fprintf (stderr, "test-concurrent: thread %d: poll: %s\n", t,
               nbd_get_error ());
      goto err;
    }
    while ((cookie = nbd_aio_peek_command_completed (h)) > 0) {
      if (nbd_aio_command_completed (h, cookie) == -1) {
        fprintf (stderr, "test-concurrent: thread %d: write failed: %s\n",
                 t, nbd_get_error ());
        goto err;
      }
    }
  }
  free (mine);
  return 0;
 err:
  free (mine);
  return -1;
}

static void *
writer (void *arg)
{
  int t = (int) (intptr_t) arg;
  struct nbd_handle *h = connect_one ();
  intptr_t ret = 0;

  if (write_pass (h, t, gen1, seed ^ (0x1000 + t)) == -1 ||
      write_pass (h, t, gen2, seed ^ (0x2000 + t)) == -1)
    ret = 1;
  else if (nbd_can_flush (h) == 1 && nbd_flush (h, 0) == -1) {
    fprintf (stderr, "test-concurrent: flush: %s\n", nbd_get_error ());
    ret = 1;
  }
  nbd_shutdown (h, 0);
  nbd_close (h);
  return (void *) ret;
}

static int
verify (void)
{
  struct nbd_handle *h = connect_one ();
  int64_t size = nbd_get_size (h);
  const size_t bs = 1024 * 1024;
  uint8_t *buf = malloc (bs), *zero = calloc (1, bs);
  uint64_t off, bad = 0;

  if (size < 0 || !buf || !zero) {
    fprintf (stderr, "test-concurrent: get_size: %s\n", nbd_get_error ());
    return 1;
  }
  for (off = 0; off < (uint64_t) size; off += bs) {
    size_t n = (uint64_t) size - off < bs ? (uint64_t) size - off : bs, i;

    if (nbd_pread (h, buf, n, off, 0) == -1) {
      fprintf (stderr, "test-concurrent: pread at %" PRIu64 ": %s\n",
               off, nbd_get_error ());
      return 1;
    }
    for (i = 0; i < n; i++) {
      uint64_t o = off + i;
      uint8_t exp = o < region ? gen2[o] : 0;

      if (buf[i] != exp) {
        if (bad < 10)
          fprintf (stderr, "test-concurrent: MISMATCH at offset %" PRIu64
                   ": read 0x%02x, expected 0x%02x%s\n", o, buf[i], exp,
                   o < region && buf[i] == gen1[o] ?
                   " (generation 1: lost update)" : "");
        bad++;
      }
    }
  }
  nbd_shutdown (h, 0);
  nbd_close (h);
  free (buf);
  free (zero);
  if (bad) {
    fprintf (stderr, "test-concurrent: %" PRIu64 " bytes differ\n", bad);
    return 1;
  }
  printf ("test-concurrent: verify: %" PRId64 " bytes OK (%zu segments in "
          "the first %" PRIu64 " bytes)\n", size, nsegs, region);
  return 0;
}

int
main (int argc, char *argv[])
{
  pthread_t th[64];
  int t, err, fail = 0;
  struct nbd_handle *h;
  int64_t size;

  if (argc < 4 || (strcmp (argv[1], "write") && strcmp (argv[1], "verify"))) {
    fprintf (stderr, "usage: test-concurrent write|verify URI SEED "
             "[THREADS [REGION [DEPTH]]]\n");
    return 1;
  }
  uri = argv[2];
  seed = strtoull (argv[3], NULL, 0);
  if (argc > 4)
    nthreads = atoi (argv[4]);
  if (argc > 5)
    region = strtoull (argv[5], NULL, 0);
  if (argc > 6)
    depth = atoi (argv[6]);
  if (nthreads < 1 || nthreads > 64 || depth < 1 || region < 1) {
    fprintf (stderr, "test-concurrent: bad THREADS, REGION or DEPTH\n");
    return 1;
  }
  h = connect_one ();
  size = nbd_get_size (h);
  nbd_shutdown (h, 0);
  nbd_close (h);
  if (size <= 0) {
    fprintf (stderr, "test-concurrent: export size %" PRId64 "\n", size);
    return 1;
  }
  if (region > (uint64_t) size)
    region = size;
  make_expected ();
  printf ("test-concurrent: %s seed=%" PRIu64 " threads=%d depth=%d "
          "region=%" PRIu64 " segments=%zu\n", argv[1], seed, nthreads,
          depth, region, nsegs);

  if (strcmp (argv[1], "write") == 0) {
    for (t = 0; t < nthreads; t++) {
      err = pthread_create (&th[t], NULL, writer, (void *) (intptr_t) t);
      if (err) {
        fprintf (stderr, "test-concurrent: pthread_create: %s\n",
                 strerror (err));
        return 1;
      }
    }
    for (t = 0; t < nthreads; t++) {
      void *ret;

      pthread_join (th[t], &ret);
      if (ret != NULL)
        fail = 1;
    }
    if (fail)
      return 1;
  }
  return verify ();
}
