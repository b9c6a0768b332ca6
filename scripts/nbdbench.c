/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdbench: a small NBD load generator built on libnbd's asynchronous API.
 *
 *   nbdbench [-m read|write|randread|randwrite] [-b BLOCK] [-q DEPTH]
 *            [-c CONNS] [-t SECS] [-S BYTES] [-r BYTES] [-s SEED] [-F] URI
 *
 * Sequential modes transfer -S bytes (default: the whole export) starting at
 * offset 0, handing out consecutive blocks to CONNS connections, each keeping
 * DEPTH requests in flight.  Random modes issue block-aligned requests at
 * uniformly random offsets in the first -r bytes of the export (default: all
 * of it) for -t seconds.  Written data is pseudo-random (incompressible,
 * never zero).  -F sends a flush at the end and times it separately.
 *
 * Prints one line:
 *   RESULT mode=... bs=... qd=... conns=... bytes=... secs=... MBps=... IOPS=...
 *          ready_s=... first_s=... last_s=... quarters_MBps=a,b,c,d
 * where MB is 10^6 bytes; secs runs from the start (before the
 * connections are made) until every connection is shut down, ready_s is
 * when the last connection was connected with its buffers filled,
 * first_s and last_s when the first and the last request completed (all
 * from the start), and quarters_MBps the MB/s in each quarter of the time
 * from the first completion to the last (to 10 ms; runs of up to 10
 * minutes).  Exit status 0 on success, 1 on any I/O error.
 */

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libnbd.h>

#include "../common/now.h"
#include "../common/splitmix.h"

enum mode { MODE_READ, MODE_WRITE, MODE_RANDREAD, MODE_RANDWRITE };

static enum mode mode = MODE_READ;
static const char *mode_name = "read";
static uint64_t block = 0;
static unsigned depth = 16;
static unsigned conns = 1;
static double duration = 10.0;
static uint64_t seq_bytes = 0;
static uint64_t rand_range = 0;
static uint64_t seed = 1;
static bool do_flush = false;
static const char *uri;

static uint64_t export_size;
static uint64_t nblocks;                 /* blocks addressable by this run */
static atomic_uint_fast64_t next_block;  /* sequential dispenser */
static atomic_uint_fast64_t done_ops;
static atomic_uint_fast64_t done_bytes;
static atomic_int failed;
static double t_end;                     /* random modes: stop issuing */
static double t_start;
/* Phases, in ns from t_start: the last connection ready, the first and
 * the last completion. */
static atomic_uint_fast64_t ready_ns, last_ns;
static atomic_uint_fast64_t first_ns = UINT64_MAX;
/* Bytes completed in each 10 ms from t_start. */
#define TICK_NS 10000000ull
#define NTICKS 60000
static atomic_uint_fast64_t tick_bytes[NTICKS];

static uint64_t
ns_now (void)
{
  return (uint64_t) ((gr_now () - t_start) * 1e9);
}

/* *v = max (*v, x) (lower: min). */
static void
atomic_extreme (atomic_uint_fast64_t *v, uint64_t x, bool lower)
{
  uint_fast64_t cur = atomic_load (v);

  while ((lower ? x < cur : x > cur) &&
         !atomic_compare_exchange_weak (v, &cur, x))
    ;
}

struct slot
{
  void *buf;
  bool busy;
};

static int
parse_size (const char *s, uint64_t *out)
{
  char *end;
  unsigned long long v;

  errno = 0;
  v = strtoull (s, &end, 0);
  if (errno || end == s)
    return -1;
  switch (*end) {
  case 'k': case 'K': v <<= 10; end++; break;
  case 'm': case 'M': v <<= 20; end++; break;
  case 'g': case 'G': v <<= 30; end++; break;
  case 't': case 'T': v <<= 40; end++; break;
  default: break;
  }
  if (*end == 'i' && end[1] == 'B')
    end += 2;
  else if (*end == 'B')
    end++;
  if (*end != '\0')
    return -1;
  *out = v;
  return 0;
}

static void
usage (FILE *fp)
{
  fprintf (fp,
           "usage: nbdbench [-m read|write|randread|randwrite] [-b BLOCK] "
           "[-q DEPTH]\n"
           "                [-c CONNS] [-t SECS] [-S BYTES] [-r BYTES] "
           "[-s SEED] [-F] URI\n");
}

static int
complete_cb (void *user_data, int *error)
{
  struct slot *slot = user_data;

  if (*error != 0) {
    fprintf (stderr, "nbdbench: %s failed: %s\n", mode_name, strerror (*error));
    atomic_store (&failed, 1);
  }
  else {
    const uint64_t t = ns_now ();

    atomic_fetch_add (&done_ops, 1);
    atomic_fetch_add (&done_bytes, block);
    atomic_extreme (&first_ns, t, true);
    atomic_extreme (&last_ns, t, false);
    if (t / TICK_NS < NTICKS)
      atomic_fetch_add (&tick_bytes[t / TICK_NS], block);
  }
  slot->busy = false;
  return 1;                     /* retire the command */
}

/* Pick the offset of the next request; false when this connection is done. */
static bool
next_offset (uint64_t *rng, uint64_t *offset)
{
  uint64_t b;

  if (atomic_load (&failed))
    return false;
  if (mode == MODE_READ || mode == MODE_WRITE) {
    b = atomic_fetch_add (&next_block, 1);
    if (b >= nblocks)
      return false;
  }
  else {
    if (gr_now () >= t_end)
      return false;
    b = gr_splitmix64 (rng) % nblocks;
  }
  *offset = b * block;
  return true;
}

static void *
worker (void *arg)
{
  unsigned id = (uintptr_t) arg;
  struct nbd_handle *h;
  struct slot *slots;
  uint64_t rng = seed * 1000003 + id;
  unsigned i;
  bool more = true;
  bool writing = mode == MODE_WRITE || mode == MODE_RANDWRITE;

  h = nbd_create ();
  /* libnbd zeroes every read buffer first by default: client CPU that is
   * not part of what we measure (the buffers are initialised below). */
  if (h == NULL || nbd_set_pread_initialize (h, false) == -1
      || nbd_connect_uri (h, uri) == -1) {
    fprintf (stderr, "nbdbench: %s\n", nbd_get_error ());
    atomic_store (&failed, 1);
    return NULL;
  }
  slots = calloc (depth, sizeof *slots);
  if (slots == NULL) {
    perror ("calloc");
    exit (1);
  }
  for (i = 0; i < depth; i++) {
    if (posix_memalign (&slots[i].buf, 4096, block) != 0) {
      perror ("posix_memalign");
      exit (1);
    }
    if (writing) {
      uint64_t *p = slots[i].buf;
      size_t j;

      for (j = 0; j < block / 8; j++)
        p[j] = gr_splitmix64 (&rng) | 1;
    }
    else
      memset (slots[i].buf, 0, block);
  }
  atomic_extreme (&ready_ns, ns_now (), false);

  for (;;) {
    /* Top up the queue. */
    for (i = 0; more && i < depth; i++) {
      nbd_completion_callback cb = { .callback = complete_cb,
                                     .user_data = &slots[i] };
      uint64_t offset;
      int64_t r;

      if (slots[i].busy)
        continue;
      if (!next_offset (&rng, &offset)) {
        more = false;
        break;
      }
      slots[i].busy = true;
      if (writing)
        r = nbd_aio_pwrite (h, slots[i].buf, block, offset, cb, 0);
      else
        r = nbd_aio_pread (h, slots[i].buf, block, offset, cb, 0);
      if (r == -1) {
        fprintf (stderr, "nbdbench: %s\n", nbd_get_error ());
        slots[i].busy = false;
        atomic_store (&failed, 1);
        more = false;
      }
    }
    if (nbd_aio_in_flight (h) <= 0 && !more)
      break;
    if (nbd_poll (h, -1) == -1) {
      fprintf (stderr, "nbdbench: poll: %s\n", nbd_get_error ());
      atomic_store (&failed, 1);
      break;
    }
  }

  nbd_shutdown (h, 0);
  nbd_close (h);
  for (i = 0; i < depth; i++)
    free (slots[i].buf);
  free (slots);
  return NULL;
}

int
main (int argc, char *argv[])
{
  struct nbd_handle *h;
  pthread_t *threads;
  double t0, secs, tf = 0;
  uint64_t bytes, ops, limit;
  unsigned i;
  int c;

  if (argc == 2 && strcmp (argv[1], "--help") == 0) {
    usage (stdout);
    return 0;
  }
  while ((c = getopt (argc, argv, "m:b:q:c:t:S:r:s:Fh")) != -1) {
    switch (c) {
    case 'm':
      mode_name = optarg;
      if (strcmp (optarg, "read") == 0) mode = MODE_READ;
      else if (strcmp (optarg, "write") == 0) mode = MODE_WRITE;
      else if (strcmp (optarg, "randread") == 0) mode = MODE_RANDREAD;
      else if (strcmp (optarg, "randwrite") == 0) mode = MODE_RANDWRITE;
      else {
        fprintf (stderr, "nbdbench: unknown mode %s\n", optarg);
        return 1;
      }
      break;
    case 'b':
      if (parse_size (optarg, &block) == -1 || block == 0
          || block > (64u << 20)) {
        fprintf (stderr, "nbdbench: bad block size %s\n", optarg);
        return 1;
      }
      break;
    case 'q':
      depth = atoi (optarg);
      break;
    case 'c':
      conns = atoi (optarg);
      break;
    case 't':
      duration = atof (optarg);
      break;
    case 'S':
      if (parse_size (optarg, &seq_bytes) == -1) {
        fprintf (stderr, "nbdbench: bad size %s\n", optarg);
        return 1;
      }
      break;
    case 'r':
      if (parse_size (optarg, &rand_range) == -1) {
        fprintf (stderr, "nbdbench: bad size %s\n", optarg);
        return 1;
      }
      break;
    case 's':
      seed = strtoull (optarg, NULL, 0);
      break;
    case 'F':
      do_flush = true;
      break;
    case 'h':
      usage (stdout);
      return 0;
    default:
      usage (stderr);
      return 1;
    }
  }
  if (optind != argc - 1 || depth < 1 || depth > 1024 || conns < 1
      || conns > 64 || duration <= 0) {
    usage (stderr);
    return 1;
  }
  uri = argv[optind];
  if (block == 0)
    block = (mode == MODE_READ || mode == MODE_WRITE) ? 1 << 20 : 4096;

  /* One control connection: size, and the final flush. */
  h = nbd_create ();
  if (h == NULL || nbd_connect_uri (h, uri) == -1) {
    fprintf (stderr, "nbdbench: %s\n", nbd_get_error ());
    return 1;
  }
  export_size = nbd_get_size (h);
  if ((int64_t) export_size < 0) {
    fprintf (stderr, "nbdbench: %s\n", nbd_get_error ());
    return 1;
  }
  if (mode == MODE_READ || mode == MODE_WRITE)
    limit = seq_bytes ? seq_bytes : export_size;
  else
    limit = rand_range ? rand_range : export_size;
  if (limit > export_size)
    limit = export_size;
  nblocks = limit / block;
  if (nblocks == 0) {
    fprintf (stderr, "nbdbench: export (%" PRIu64 " bytes) smaller than "
             "one block\n", export_size);
    return 1;
  }

  threads = calloc (conns, sizeof *threads);
  if (threads == NULL) {
    perror ("calloc");
    return 1;
  }
  t0 = t_start = gr_now ();
  t_end = t0 + duration;
  for (i = 0; i < conns; i++) {
    int err = pthread_create (&threads[i], NULL, worker, (void *) (uintptr_t) i);

    if (err) {
      errno = err;
      perror ("pthread_create");
      return 1;
    }
  }
  for (i = 0; i < conns; i++)
    pthread_join (threads[i], NULL);
  secs = gr_now () - t0;
  free (threads);

  if (do_flush && nbd_can_flush (h) != 1) {
    fprintf (stderr, "nbdbench: the server does not support flush; "
             "not flushing\n");
    do_flush = false;
  }
  if (do_flush && !atomic_load (&failed)) {
    double t1 = gr_now ();

    if (nbd_flush (h, 0) == -1) {
      fprintf (stderr, "nbdbench: flush: %s\n", nbd_get_error ());
      atomic_store (&failed, 1);
    }
    tf = gr_now () - t1;
  }
  nbd_shutdown (h, 0);
  nbd_close (h);

  bytes = atomic_load (&done_bytes);
  ops = atomic_load (&done_ops);
  printf ("RESULT mode=%s bs=%" PRIu64 " qd=%u conns=%u bytes=%" PRIu64
          " secs=%.3f MBps=%.1f IOPS=%.0f",
          mode_name, block, depth, conns, bytes, secs,
          bytes / secs / 1e6, ops / secs);
  printf (" ready_s=%.3f first_s=%.3f last_s=%.3f",
          atomic_load (&ready_ns) / 1e9,
          ops ? atomic_load (&first_ns) / 1e9 : 0.0,
          atomic_load (&last_ns) / 1e9);
  if (ops) {
    /* The ticks from the first completion's to the last's, in quarters. */
    const uint64_t a = atomic_load (&first_ns) / TICK_NS;
    const uint64_t e = atomic_load (&last_ns) / TICK_NS + 1;

    printf (" quarters_MBps=");
    for (int q = 0; q < 4; q++) {
      const uint64_t from = a + (e - a) * q / 4, to = a + (e - a) * (q + 1) / 4;
      uint64_t sum = 0;

      for (uint64_t k = from; k < to && k < NTICKS; k++)
        sum += atomic_load (&tick_bytes[k]);
      printf ("%s%.0f", q ? "," : "",
              to > from ? sum / ((to - from) * TICK_NS / 1e9) / 1e6 : 0.0);
    }
  }
  if (do_flush)
    printf (" flush_secs=%.3f", tf);
  printf ("\n");
  return atomic_load (&failed) ? 1 : 0;
}
