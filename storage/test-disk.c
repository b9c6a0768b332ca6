/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - test of the local files' write turns (disk.c): a batch's
 * buffered writes into a file whose turn another thread holds are left
 * for later while the batch's other files are written; a file's own
 * accesses keep their order; with turns off the batch goes in its order;
 * many threads writing many files in turns leave every byte where it
 * was written; and reads of files in memory (tmpfs) are done in the
 * calling thread, not handed to io_uring's workers. */
#undef NDEBUG
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/magic.h>
#include <sys/vfs.h>

#include "storage/storage-internal.h"
#include "tests/testkit.h"

#define PROG "test-disk"
#define FILE_SIZE (4u << 20)
#define BLK 65536u
#define NFILES 6

static char dir[] = "/tmp/gpuraid-test-disk.XXXXXX";
static char paths[NFILES][64];
static struct gr_disk *disk[NFILES];

static void
open_all (void)
{
  for (int i = 0; i < NFILES; i++) {
    char why[256];
    int err, fd;

    snprintf (paths[i], sizeof paths[i], "%s/m%d", dir, i);
    fd = open (paths[i], O_CREAT | O_RDWR | O_TRUNC, 0600);
    CHECK (fd >= 0 && ftruncate (fd, FILE_SIZE) == 0, "%s", paths[i]);
    close (fd);
    CHECK (gr_disk_open (paths[i], false, &disk[i], &err, why,
                         sizeof why) == GR_DISK_OPENED, "%s: %s",
           paths[i], why);
    if (disk[i] == NULL)
      exit (T_EXIT_FAIL);
  }
}

/* The first byte of file i at off, read on its own descriptor. */
static int
byte_at (int i, uint64_t off)
{
  unsigned char c;
  int fd = open (paths[i], O_RDONLY);
  ssize_t r = fd >= 0 ? pread (fd, &c, 1, (off_t) off) : -1;

  if (fd >= 0)
    close (fd);
  return r == 1 ? c : -1;
}

struct batch {
  struct gr_dio *v;
  size_t n;
  bool done;                    /* atomic */
};

static void *
run_batch (void *arg)
{
  struct batch *b = arg;

  gr_disk_io (b->v, b->n);
  __atomic_store_n (&b->done, true, __ATOMIC_RELEASE);
  return NULL;
}

static struct gr_dio
wr (int i, uint64_t off, void *buf)
{
  return (struct gr_dio) { .disk = disk[i], .kind = GR_DIO_WRITE,
                           .buf = buf, .off = off, .len = BLK };
}

/* Waits up to 10 s for file i's byte at off to be c. */
static bool
wait_byte (int i, uint64_t off, int c)
{
  for (int t = 0; t < 10000; t++) {
    if (byte_at (i, off) == c)
      return true;
    usleep (1000);
  }
  return false;
}

static uint8_t *
filled (int c)
{
  uint8_t *p = malloc (BLK);

  if (p == NULL)
    exit (T_EXIT_FAIL);
  memset (p, c, BLK);
  return p;
}

/* File 0's turn held by the test: the batch writes file 1, and file 0
 * only once the turn is given back. */
static void
goes_on_while_busy (void)
{
  uint8_t *a = filled ('A'), *b = filled ('B');
  struct gr_dio v[2] = { wr (0, 0, a), wr (1, 0, b) };
  struct batch bt = { .v = v, .n = 2 };
  pthread_t t;

  pthread_mutex_lock (&disk[0]->turn);
  CHECK (pthread_create (&t, NULL, run_batch, &bt) == 0);
  CHECK (wait_byte (1, 0, 'B'), "file 1 not written while file 0 was busy");
  usleep (20000);
  CHECK (byte_at (0, 0) == 0, "file 0 written while its turn was held");
  CHECK (!__atomic_load_n (&bt.done, __ATOMIC_ACQUIRE),
         "the batch ended without file 0's turn");
  pthread_mutex_unlock (&disk[0]->turn);
  pthread_join (t, NULL);
  CHECK (byte_at (0, 0) == 'A' && v[0].res == 0 && v[1].res == 0,
         "after the turn: file 0 %d, results %d %d", byte_at (0, 0),
         v[0].res, v[1].res);
  free (a);
  free (b);
}

/* File 0's accesses (write x, write y, read) stay in order behind its
 * busy turn, while file 1's are done. */
static void
keeps_a_files_order (void)
{
  uint8_t *x = filled ('x'), *y = filled ('y'), *b = filled ('b'),
    *r = filled (0);
  struct gr_dio v[4] = { wr (0, BLK, x), wr (1, BLK, b), wr (0, BLK, y),
                         { .disk = disk[0], .kind = GR_DIO_READ, .buf = r,
                           .off = BLK, .len = BLK } };
  struct batch bt = { .v = v, .n = 4 };
  pthread_t t;

  pthread_mutex_lock (&disk[0]->turn);
  CHECK (pthread_create (&t, NULL, run_batch, &bt) == 0);
  CHECK (wait_byte (1, BLK, 'b'), "file 1 not written while file 0 was busy");
  usleep (20000);
  CHECK (byte_at (0, BLK) == 0, "file 0 written while its turn was held");
  pthread_mutex_unlock (&disk[0]->turn);
  pthread_join (t, NULL);
  CHECK (byte_at (0, BLK) == 'y' && r[0] == 'y' && r[BLK - 1] == 'y',
         "file 0's accesses out of order: file %c, read %c",
         byte_at (0, BLK), r[0]);
  for (int i = 0; i < 4; i++)
    CHECK (v[i].res == 0, "access %d: %d", i, v[i].res);
  free (x);
  free (y);
  free (b);
  free (r);
}

/* Turns off: the batch goes in its order, the busy turn not looked at. */
static void
turns_off (void)
{
  uint8_t *a = filled ('C'), *b = filled ('D');
  struct gr_dio v[2] = { wr (0, 2 * BLK, a), wr (1, 2 * BLK, b) };
  struct batch bt = { .v = v, .n = 2 };
  pthread_t t;

  gr_disk_set_turns (false);
  pthread_mutex_lock (&disk[0]->turn);
  CHECK (pthread_create (&t, NULL, run_batch, &bt) == 0);
  for (int i = 0; i < 10000 && !__atomic_load_n (&bt.done, __ATOMIC_ACQUIRE);
       i++)
    usleep (1000);
  CHECK (__atomic_load_n (&bt.done, __ATOMIC_ACQUIRE),
         "turns off: the batch waited for file 0's turn");
  pthread_mutex_unlock (&disk[0]->turn);
  pthread_join (t, NULL);
  CHECK (byte_at (0, 2 * BLK) == 'C' && byte_at (1, 2 * BLK) == 'D',
         "turns off: the batch did not go through");
  gr_disk_set_turns (true);
  free (a);
  free (b);
}

/* Many threads, each a batch of one block in every file (its own
 * blocks), the files in a shuffled order, many rounds: every block holds
 * what its thread wrote last. */
#define NTHREADS 8
#define ROUNDS 200

struct writer {
  int id;
  uint64_t seed;
  uint8_t *buf[NFILES];
  int bad;                      /* accesses that failed (CHECKed by main:
                                 * the kit's counters are not atomic) */
};

static void *
writer (void *arg)
{
  struct writer *w = arg;
  struct gr_dio v[NFILES];

  for (int r = 0; r < ROUNDS; r++) {
    for (int i = 0; i < NFILES; i++) {
      memset (w->buf[i], (w->id * 16 + i + r) & 0xff, BLK);
      v[i] = wr (i, (uint64_t) (8 + w->id) * BLK, w->buf[i]);
    }
    for (int i = NFILES - 1; i > 0; i--) {
      int j = (int) (gr_splitmix64 (&w->seed) % (uint64_t) (i + 1));
      struct gr_dio s = v[i];

      v[i] = v[j];
      v[j] = s;
    }
    gr_disk_io (v, NFILES);
    for (int i = 0; i < NFILES; i++)
      w->bad += v[i].res != 0;
  }
  return NULL;
}

static void
many_writers (void)
{
  struct writer w[NTHREADS];
  pthread_t t[NTHREADS];

  for (int k = 0; k < NTHREADS; k++) {
    w[k] = (struct writer) { .id = k, .seed = test_rand () };
    for (int i = 0; i < NFILES; i++)
      w[k].buf[i] = filled (0);
    CHECK (pthread_create (&t[k], NULL, writer, &w[k]) == 0);
  }
  for (int k = 0; k < NTHREADS; k++)
    pthread_join (t[k], NULL);
  for (int k = 0; k < NTHREADS; k++)
    CHECK (w[k].bad == 0, "writer %d: %d accesses failed", k, w[k].bad);
  for (int k = 0; k < NTHREADS; k++)
    for (int i = 0; i < NFILES; i++) {
      const int want = (k * 16 + i + ROUNDS - 1) & 0xff;
      const uint64_t off = (uint64_t) (8 + k) * BLK;

      CHECK (byte_at (i, off) == want && byte_at (i, off + BLK - 1) == want,
             "file %d, writer %d: %d, not %d", i, k, byte_at (i, off), want);
      free (w[k].buf[i]);
    }
}

/* How many of this process's threads are io_uring's workers (iou-wrk-*),
 * which take the ring's accesses that the kernel cannot do at once. */
static int
ring_workers (void)
{
  DIR *dp = opendir ("/proc/self/task");
  struct dirent *e;
  int n = 0;

  if (dp == NULL)
    return 0;
  while ((e = readdir (dp)) != NULL) {
    char path[300], comm[64] = "";
    FILE *f;

    if (e->d_name[0] == '.')
      continue;
    snprintf (path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    if ((f = fopen (path, "r")) != NULL) {
      if (fgets (comm, sizeof comm, f) && strncmp (comm, "iou-wrk", 7) == 0)
        n++;
      fclose (f);
    }
  }
  closedir (dp);
  return n;
}

/* Members in a memory file system (tmpfs): their reads are copies that
 * never wait for a device, and io_uring cannot do them at once (tmpfs
 * takes no RWF_NOWAIT), so through the ring each would go to one of its
 * worker threads and back.  A batch of reads of them is done in the
 * calling thread: right bytes, and no ring worker started. */
static void
memory_reads_inline (void)
{
  char mdir[] = "/dev/shm/gpuraid-test-disk.XXXXXX", mpath[4][64];
  struct gr_disk *md[4];
  struct gr_dio v[8];
  uint8_t *buf[8];
  struct statfs sf;

  if (statfs ("/dev/shm", &sf) != 0 || sf.f_type != TMPFS_MAGIC ||
      mkdtemp (mdir) == NULL) {
    printf ("%s: memory_reads_inline: no tmpfs at /dev/shm, not run\n",
            PROG);
    return;
  }
  for (int i = 0; i < 4; i++) {
    char why[256];
    int err, fd;
    uint8_t *p = filled ('a' + i);

    snprintf (mpath[i], sizeof mpath[i], "%s/m%d", mdir, i);
    fd = open (mpath[i], O_CREAT | O_RDWR | O_TRUNC, 0600);
    CHECK (fd >= 0 && pwrite (fd, p, BLK, 0) == BLK &&
           pwrite (fd, p, BLK, BLK) == BLK, "%s", mpath[i]);
    close (fd);
    free (p);
    CHECK (gr_disk_open (mpath[i], false, &md[i], &err, why, sizeof why)
           == GR_DISK_OPENED, "%s: %s", mpath[i], why);
    if (md[i] == NULL)
      exit (T_EXIT_FAIL);
  }
  for (int j = 0; j < 8; j++)
    if ((buf[j] = malloc (BLK)) == NULL)
      exit (T_EXIT_FAIL);
  for (int round = 0; round < 20; round++) {
    for (int j = 0; j < 8; j++) {
      memset (buf[j], 0, BLK);
      v[j] = (struct gr_dio) { .disk = md[j % 4], .kind = GR_DIO_READ,
                               .buf = buf[j], .off = (uint64_t) (j / 4) * BLK,
                               .len = BLK };
    }
    gr_disk_io (v, 8);
    for (int j = 0; j < 8; j++)
      CHECK (v[j].res == 0 && buf[j][0] == 'a' + j % 4 &&
             buf[j][BLK - 1] == 'a' + j % 4, "read %d: res %d, byte %d",
             j, v[j].res, buf[j][0]);
  }
  CHECK (ring_workers () == 0, "%d io_uring workers after reads of tmpfs "
         "members", ring_workers ());
  /* The control: the same reads put through the ring itself start its
   * workers here (else the check above could not have failed). */
  if (gr_uring_available ()) {
    struct gr_dio *pv[8];

    for (int j = 0; j < 8; j++) {
      memset (buf[j], 0, BLK);
      pv[j] = &v[j];
    }
    gr_uring_batch (pv, 8);
    for (int j = 0; j < 8; j++)
      CHECK (v[j].res == 0 && buf[j][0] == 'a' + j % 4, "ring read %d: %d",
             j, v[j].res);
    if (ring_workers () == 0)
      printf ("%s: memory_reads_inline: this kernel's io_uring reads tmpfs "
              "without workers: the check proves nothing here\n", PROG);
  }
  else
    printf ("%s: memory_reads_inline: no io_uring here: the check proves "
            "nothing here\n", PROG);
  for (int j = 0; j < 8; j++)
    free (buf[j]);
  for (int i = 0; i < 4; i++) {
    gr_disk_close (md[i]);
    unlink (mpath[i]);
  }
  rmdir (mdir);
}

int
main (void)
{
  test_seed (PROG);
  if (mkdtemp (dir) == NULL) {
    perror ("mkdtemp");
    return T_EXIT_FAIL;
  }
  open_all ();
  goes_on_while_busy ();
  keeps_a_files_order ();
  turns_off ();
  many_writers ();
  memory_reads_inline ();
  for (int i = 0; i < NFILES; i++) {
    gr_disk_close (disk[i]);
    unlink (paths[i]);
  }
  rmdir (dir);
  return test_done (PROG);
}
