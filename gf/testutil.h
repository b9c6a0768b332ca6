/* gpuraid - helpers shared by the gf/ unit tests (not part of the library). */
#ifndef GPURAID_GF_TESTUTIL_H
#define GPURAID_GF_TESTUTIL_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int test_failures;

#define CHECK(cond, ...)                                              \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf (stderr, "%s:%d: FAILED: %s: ", __FILE__, __LINE__, #cond); \
      fprintf (stderr, __VA_ARGS__);                                  \
      fprintf (stderr, "\n");                                         \
      test_failures++;                                                \
      if (test_failures > 20) {                                       \
        fprintf (stderr, "too many failures\n");                      \
        exit (1);                                                     \
      }                                                               \
    }                                                                 \
  } while (0)

static uint64_t test_rng_state;

/* The seed comes from TEST_SEED if set, else the clock; it is printed so
 * a failure can be replayed. */
static void
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

static uint64_t
test_rand (void)
{
  /* splitmix64 */
  uint64_t z = (test_rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static void
test_fill (uint8_t *p, size_t len)
{
  size_t i;
  for (i = 0; i < len; i++)
    p[i] = test_rand ();
}

static int
test_quick (void)
{
  const char *q = getenv ("QUICK");
  return q && *q && strcmp (q, "0") != 0;
}

#endif
