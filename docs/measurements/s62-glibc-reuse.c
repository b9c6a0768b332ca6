/* Session 62: do nbdkit-like thread buffers (128 threads a run, 1 MiB
 * each, freed at thread exit) land on an earlier run's addresses, and do
 * the freed pages keep their bytes (not discarded by glibc)?  Argument:
 * set mallopt first.  gcc -O2 -pthread s62-glibc-reuse.c; output in
 * cpu-glibc-reuse-s62.log. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <malloc.h>
#define N 128
#define RUNS 6
#define SZ (1 << 20)
static void *prevaddr[N * RUNS]; static int nprev;
static int run, kept, zeroed, fresh;
static pthread_mutex_t lk = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t bar;
static void *th (void *a) {
  (void) a;
  unsigned char *p = malloc (SZ);
  /* before nbdkit's memset: did the pages keep the last owner's bytes? */
  int seen = 0;
  pthread_mutex_lock (&lk);
  for (int j = 0; j < nprev; j++) if (prevaddr[j] == p) { seen = 1; break; }
  if (seen) { if (p[SZ / 2] == 0xA5 && p[SZ - 1] == 0xA5) kept++; else zeroed++; } else fresh++;
  pthread_mutex_unlock (&lk);
  memset (p, 0xA5, SZ);
  pthread_barrier_wait (&bar);
  pthread_mutex_lock (&lk); prevaddr[nprev++] = p; pthread_mutex_unlock (&lk);
  free (p);
  return NULL;
}
int main (int argc, char **argv) {
  if (argc > 1) { mallopt (M_MMAP_THRESHOLD, 32 << 20); mallopt (M_TRIM_THRESHOLD, 1 << 30); }
  for (run = 0; run < RUNS; run++) {
    pthread_t t[N];
    kept = zeroed = fresh = 0;
    pthread_barrier_init (&bar, NULL, N);
    for (int i = 0; i < N; i++) pthread_create (&t[i], NULL, th, NULL);
    for (int i = 0; i < N; i++) pthread_join (t[i], NULL);
    pthread_barrier_destroy (&bar);
    printf ("run %d: reused with bytes kept %d, reused but zeroed (pages discarded) %d, new %d\n", run, kept, zeroed, fresh);
  }
  return 0;
}
