/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the C test kit, for every unit test (header only).
 *
 *   test_seed (prog)     the seed from TEST_SEED, else the clock; printed,
 *                        so that a failure can be replayed
 *   test_rand ()         splitmix64 from that seed; test_fill (p, len)
 *   CHECK (cond [, fmt, ...])  count and print a failure with file:line
 *                        and the message; stop after 20
 *   test_quick ()        QUICK=1 asks for a short run
 *   test_skip (prog, why)  print "prog: SKIP: why" and exit 77
 *   return test_done (prog)  print "prog: N checks, N failed" and give
 *                        the exit status
 * Like ISA-L's tests: each test is a main () that says pass or fail. */
#ifndef GPURAID_TESTKIT_H
#define GPURAID_TESTKIT_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/splitmix.h"

#define T_EXIT_PASS 0
#define T_EXIT_FAIL 1
#define T_EXIT_SKIP 77

static unsigned long test_checks __attribute__ ((unused));
static int test_failures __attribute__ ((unused));

#define CHECK(cond, ...)                                                \
  do {                                                                  \
    test_checks++;                                                      \
    if (!(cond)) {                                                      \
      fprintf (stderr, "%s:%d: FAILED: %s:", __FILE__, __LINE__, #cond); \
      fprintf (stderr, " " __VA_ARGS__);                                \
      fprintf (stderr, "\n");                                           \
      if (++test_failures >= 20) {                                      \
        fprintf (stderr, "too many failures\n");                        \
        exit (T_EXIT_FAIL);                                             \
      }                                                                 \
    }                                                                   \
  } while (0)

static uint64_t test_rng_state __attribute__ ((unused));

static void __attribute__ ((unused))
test_seed (const char *prog)
{
  const char *s = getenv ("TEST_SEED");
  uint64_t seed;

  if (s && *s)
    seed = strtoull (s, NULL, 0);
  else
    seed = (uint64_t) time (NULL) ^ ((uint64_t) getpid () << 32);
  printf ("%s: TEST_SEED=%" PRIu64 "\n", prog, seed);
  fflush (stdout);
  test_rng_state = seed * 0x9E3779B97F4A7C15ull + 1;
}

static uint64_t __attribute__ ((unused))
test_rand (void)
{
  return gr_splitmix64 (&test_rng_state);
}

static void __attribute__ ((unused))
test_fill (uint8_t *p, size_t len)
{
  size_t i;

  for (i = 0; i < len; i++)
    p[i] = (uint8_t) test_rand ();
}

static int __attribute__ ((unused))
test_quick (void)
{
  const char *q = getenv ("QUICK");

  return q && *q && strcmp (q, "0") != 0;
}

static void __attribute__ ((unused, noreturn))
test_skip (const char *prog, const char *why)
{
  printf ("%s: SKIP: %s\n", prog, why);
  exit (T_EXIT_SKIP);
}

static int __attribute__ ((unused))
test_done (const char *prog)
{
  printf ("%s: %lu checks, %d failed\n", prog, test_checks, test_failures);
  return test_failures ? T_EXIT_FAIL : T_EXIT_PASS;
}

/* A unit test that links plugin objects (which log through nbdkit)
 * defines TESTKIT_NBDKIT_LOG before including this: errors to stderr,
 * debug messages dropped. */
#ifdef TESTKIT_NBDKIT_LOG
#include <stdarg.h>

void
nbdkit_error (const char *fs, ...)
{
  va_list ap;

  va_start (ap, fs);
  vfprintf (stderr, fs, ap);
  va_end (ap);
  fputc ('\n', stderr);
}

void
nbdkit_debug (const char *fs, ...)
{
  (void) fs;
}
#endif

#endif /* GPURAID_TESTKIT_H */
