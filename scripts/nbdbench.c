/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdbench: a small NBD load generator built on libnbd's asynchronous API.
 *
 *   nbdbench [-m read|write|randread|randwrite] [-b BLOCK] [-q DEPTH]
 *            [-c CONNS] [-t SECS] [-S BYTES] [-r BYTES] [-s SEED] [-F]
 *            [-P PID] URI
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
 * minutes).  With -P, the server's process PID is sampled every 10 ms
 * (utime + stime of its threads, /proc/PID/stat) and the line adds
 *   srv_cpu_s=... srv_quarters_cpu_GB=a,b,c,d
 * its CPU-seconds from the first completion to the last, and in each of
 * the same quarters its CPU-seconds per GB moved then (0 where nothing
 * moved).  Exit status 0 on success, 1 on any I/O error (or a PID whose
 * CPU cannot be read).
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
#include <time.h>
#include <fcntl.h>
#include <sys/types.h>
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
/* -P: the server's CPU-seconds at the start of each tick (-1: not
 * sampled), written by the sampler alone, read after it is joined;
 * sampled: the ticks it has sampled so far. */
static pid_t srv_pid;
static double *tick_cpu;
static atomic_bool sampling;
static atomic_uint_fast64_t sampled;

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

/* The server's CPU-seconds so far (utime + stime of all its threads), or
 * -1 if /proc cannot tell. */
static double
srv_cpu (void)
{
  char path[64], buf[1024];
  unsigned long long ut, st;
  const char *p;
  ssize_t n;
  int fd;

  snprintf (path, sizeof path, "/proc/%ld/stat", (long) srv_pid);
  fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd == -1)
    return -1;
  n = read (fd, buf, sizeof buf - 1);
  close (fd);
  if (n <= 0)
    return -1;
  buf[n] = '\0';
  /* After the command's closing parenthesis: state, then fields 4 to 13,
   * then utime (14) and stime (15). */
  p = strrchr (buf, ')');
  if (p == NULL ||
      sscanf (p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
              &ut, &st) != 2)
    return -1;
  return (double) (ut + st) / (double) sysconf (_SC_CLK_TCK);
}

/* -P: the server's CPU at the start of every tick of the run. */
static void *
sampler (void *arg)
{
  (void) arg;
  for (uint64_t k = 0; k < NTICKS && atomic_load (&sampling); k++) {
    const double at = t_start + (double) (k * TICK_NS) / 1e9;
    struct timespec ts = { .tv_sec = (time_t) at,
                           .tv_nsec = (long) ((at - (double) (time_t) at)
                                              * 1e9) };

    while (clock_nanosleep (CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
           EINTR)
      ;
    tick_cpu[k] = srv_cpu ();
    atomic_store (&sampled, k + 1);
  }
  return NULL;
}

/* Quarter q of the ticks [a, e): its ticks [*from, *to), and the bytes
 * completed in them. */
static uint64_t
quarter (uint64_t a, uint64_t e, int q, uint64_t *from, uint64_t *to)
{
  uint64_t sum = 0;

  *from = a + (e - a) * q / 4;
  *to = a + (e - a) * (q + 1) / 4;
  for (uint64_t k = *from; k < *to && k < NTICKS; k++)
    sum += atomic_load (&tick_bytes[k]);
  return sum;
}

/* The server's CPU at the start of tick k: that sample, or the nearest
 * earlier one taken (-1 if none). */
static double
cpu_at (uint64_t k)
{
  if (k >= NTICKS)
    k = NTICKS - 1;
  for (;; k--) {
    if (tick_cpu[k] >= 0)
      return tick_cpu[k];
    if (k == 0)
      return -1;
  }
}

static void
usage (FILE *fp)
{
  fprintf (fp,
           "usage: nbdbench [-m read|write|randread|randwrite] [-b BLOCK] "
           "[-q DEPTH]\n"
           "                [-c CONNS] [-t SECS] [-S BYTES] [-r BYTES] "
           "[-s SEED] [-F]\n"
           "                [-P PID] URI\n");
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
  pthread_t *threads, sampler_thread;
  double t0, secs, tf = 0;
  uint64_t bytes, ops, limit;
  unsigned i;
  int c;

  if (argc == 2 && strcmp (argv[1], "--help") == 0) {
    usage (stdout);
    return 0;
  }
  while ((c = getopt (argc, argv, "m:b:q:c:t:S:r:s:FP:h")) != -1) {
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
    case 'P':
      srv_pid = (pid_t) atol (optarg);
      if (srv_pid <= 0 || srv_cpu () < 0) {
        fprintf (stderr, "nbdbench: -P %s: no process whose CPU time "
                 "/proc tells\n", optarg);
        return 1;
      }
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
  if (srv_pid > 0) {
    tick_cpu = malloc (NTICKS * sizeof *tick_cpu);
    if (tick_cpu == NULL) {
      perror ("malloc");
      return 1;
    }
    for (i = 0; i < NTICKS; i++)
      tick_cpu[i] = -1;
  }
  t0 = t_start = gr_now ();
  t_end = t0 + duration;
  if (srv_pid > 0) {
    int err;

    atomic_store (&sampling, true);
    err = pthread_create (&sampler_thread, NULL, sampler, NULL);
    if (err) {
      errno = err;
      perror ("pthread_create");
      return 1;
    }
  }
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
  if (srv_pid > 0) {
    /* Until the start of the tick after the last completion's is
     * sampled. */
    const uint64_t want = atomic_load (&last_ns) / TICK_NS + 1;

    while (atomic_load (&sampled) <= want && want < NTICKS)
      usleep (2000);
    atomic_store (&sampling, false);
    pthread_join (sampler_thread, NULL);
  }
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
      uint64_t from, to;
      const uint64_t sum = quarter (a, e, q, &from, &to);

      printf ("%s%.0f", q ? "," : "",
              to > from ? sum / ((to - from) * TICK_NS / 1e9) / 1e6 : 0.0);
    }
    /* The server's CPU over the same ticks: from the start of the first
     * to the start of the one after the last. */
    if (srv_pid > 0) {
      printf (" srv_cpu_s=%.2f srv_quarters_cpu_GB=",
              cpu_at (e) - cpu_at (a));
      for (int q = 0; q < 4; q++) {
        uint64_t from, to;
        const uint64_t sum = quarter (a, e, q, &from, &to);

        printf ("%s%.2f", q ? "," : "",
                sum ? (cpu_at (to) - cpu_at (from)) / (sum / 1e9) : 0.0);
      }
    }
  }
  if (do_flush)
    printf (" flush_secs=%.3f", tf);
  printf ("\n");
  return atomic_load (&failed) ? 1 : 0;
}
