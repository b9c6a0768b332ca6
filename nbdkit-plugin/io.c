/* gpuraid - the data paths: reads, writes, zero, trim, flush.
 *
 * A request is cut into stripes and processed one stripe at a time.
 * Writes hold that stripe's lock exclusively; reads that reconstruct hold
 * it shared; healthy reads take no lock (they read data chunks only, and
 * data chunks are written in place).  Each stripe operation does all its
 * reads before any write: a read error marks the member failed and the
 * stripe is redone degraded; a write error marks the member failed and the
 * other writes go on, so the live members still hold one consistent
 * codeword in which the failed member's chunk is simply erased. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "gpuraid-internal.h"
#include "plan.h"
#include "uring.h"

#define PARITY_BATCH_BYTES (32 * 1024 * 1024)   /* full-stripe batches */
#define ZERO_BUF_MAX (4 * 1024 * 1024)
#define PUNCH_BATCH 64                          /* stripes per fallocate */

static pthread_key_t scratch_key;
static size_t zero_len;

struct scratch {
  size_t size;
  void *p;
  bool pinned;                  /* from gr_host_alloc */
};

static void
scratch_release (struct scratch *s)
{
  if (s->pinned)
    gr_host_free (s->p, s->size);
  else
    free (s->p);
  s->p = NULL;
  s->size = 0;
}

static void
scratch_free (void *v)
{
  struct scratch *s = v;

  if (s) {
    scratch_release (s);
    free (s);
  }
}

/* A per-thread buffer of at least size bytes, 4096-aligned, reused.
 * Only one user at a time in a thread.  When the GPU is in use it is
 * page-locked memory if the bounded pool allows (accel.c), so that GPU
 * operations on it skip the engine's staging copies. */
static uint8_t *
get_scratch (size_t size)
{
  struct scratch *s = pthread_getspecific (scratch_key);

  if (s == NULL) {
    s = calloc (1, sizeof *s);
    if (s == NULL || pthread_setspecific (scratch_key, s) != 0) {
      free (s);
      nbdkit_error ("scratch: %m");
      return NULL;
    }
  }
  if (s->size < size || (!s->pinned && gr_host_alloc_wanted (size))) {
    void *p = gr_host_alloc (size);
    bool pinned = p != NULL;

    if (p == NULL && posix_memalign (&p, 4096, size) != 0) {
      nbdkit_error ("posix_memalign: %zu bytes: %m", size);
      errno = ENOMEM;
      return NULL;
    }
    scratch_release (s);
    s->p = p;
    s->size = size;
    s->pinned = pinned;
  }
  return s->p;
}

int
gr_io_init (void)
{
  uint64_t width = gr_map_stripe_width (&gr_a.geom);
  int i;

  if (pthread_key_create (&scratch_key, scratch_free) != 0) {
    nbdkit_error ("pthread_key_create: %m");
    return -1;
  }
  for (i = 0; i < GR_NLOCKS; i++)
    pthread_rwlock_init (&gr_a.locks[i], NULL);
  /* A run of whole stripes when the stripe fits, else one piece. */
  if (width <= ZERO_BUF_MAX)
    zero_len = (ZERO_BUF_MAX / width) * width;
  else
    zero_len = ZERO_BUF_MAX;
  gr_a.zero_buf = calloc (1, zero_len);
  if (gr_a.zero_buf == NULL) {
    nbdkit_error ("calloc: %m");
    return -1;
  }
  return 0;
}

void
gr_io_fini (void)
{
  free (gr_a.zero_buf);
  gr_a.zero_buf = NULL;
}

static pthread_rwlock_t *
stripe_lock (uint64_t s)
{
  return &gr_a.locks[s % GR_NLOCKS];
}

/* --- coding, with the GPU -> CPU fallback ------------------------------ */

/* The route (GPU or CPU) of each operation is chosen by the caller with
 * gr_accel_gpu (accel.c); a GPU failure redoes the operation, and all
 * later ones, on the CPU coder. */

static int
coding_error (const char *op, int r)
{
  nbdkit_error ("%s: %s", op, strerror (-r));
  errno = EIO;
  return -1;
}

/* Group commit of GPU encodes.  The full-stripe encodes of concurrent
 * write requests are gathered into one GPU batch by flat combining: the
 * first thread to queue becomes the leader, waits (at most
 * BATCH_WAIT_US, and only while other write requests are in flight and
 * not yet queued) for more stripes, up to BATCH_MAX_BYTES of data, then
 * encodes everything queued in one gr_encode call and wakes the others
 * with the result.  The queue is bounded: a writer whose stripes do not
 * fit waits for the current batch to go (backpressure), so memory does
 * not grow.  Each request is answered only after its own stripes are
 * encoded and written, as before, so flush and FUA are unchanged. */
#define BATCH_MAX_BYTES (64 * 1024 * 1024)
#define BATCH_WAIT_US 200

struct enc_req {
  uint8_t *const *blocks;
  size_t nstripes;
  int rc;
  bool done;
  struct enc_req *next;
};

static pthread_mutex_t comb_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t comb_cond = PTHREAD_COND_INITIALIZER;
static struct enc_req *comb_head, **comb_tail = &comb_head;
static size_t comb_stripes, comb_reqs;
static bool comb_leading;
static int writers;                     /* requests inside gr_io_pwrite */

static int
gpu_encode_combined (uint8_t *const *blocks, size_t nstripes, size_t len)
{
  size_t max = BATCH_MAX_BYTES / ((size_t) gr_a.geom.k * len);
  struct enc_req me = { .blocks = blocks, .nstripes = nstripes };
  struct enc_req *list, *q;
  uint8_t **all;
  size_t total, at, n = gr_a.n;
  struct timespec deadline;
  int r;

  if (max < 1)
    max = 1;
  pthread_mutex_lock (&comb_lock);
  while (comb_stripes > 0 && comb_stripes + nstripes > max)
    pthread_cond_wait (&comb_cond, &comb_lock);
  *comb_tail = &me;
  comb_tail = &me.next;
  comb_stripes += nstripes;
  comb_reqs++;
  pthread_cond_broadcast (&comb_cond);
  if (comb_leading) {                   /* follower: wait for the result */
    while (!me.done)
      pthread_cond_wait (&comb_cond, &comb_lock);
    pthread_mutex_unlock (&comb_lock);
    return me.rc;
  }
  comb_leading = true;
  clock_gettime (CLOCK_REALTIME, &deadline);
  deadline.tv_nsec += BATCH_WAIT_US * 1000;
  if (deadline.tv_nsec >= 1000000000) {
    deadline.tv_sec++;
    deadline.tv_nsec -= 1000000000;
  }
  while (comb_stripes < max &&
         comb_reqs < (size_t) __atomic_load_n (&writers, __ATOMIC_RELAXED) &&
         pthread_cond_timedwait (&comb_cond, &comb_lock, &deadline) == 0)
    ;
  list = comb_head;
  total = comb_stripes;
  comb_head = NULL;
  comb_tail = &comb_head;
  comb_stripes = comb_reqs = 0;
  comb_leading = false;
  pthread_cond_broadcast (&comb_cond);  /* writers held back may queue */
  pthread_mutex_unlock (&comb_lock);

  all = malloc (total * n * sizeof *all);
  if (all == NULL)
    r = -ENOMEM;
  else {
    for (at = 0, q = list; q; q = q->next) {
      memcpy (all + at * n, q->blocks, q->nstripes * n * sizeof *all);
      at += q->nstripes;
    }
    r = gr_encode (gr_a.coder, all, total, len);
    free (all);
  }
  if (total > nstripes)
    gr_verbose ("group commit: %zu stripes from several requests in one "
                "GPU batch", total);
  pthread_mutex_lock (&comb_lock);
  for (q = list; q; q = q->next) {
    q->rc = r;
    q->done = true;
  }
  pthread_cond_broadcast (&comb_cond);
  pthread_mutex_unlock (&comb_lock);
  return r;
}

/* Encodes of whole chunks (len == chunk) on the GPU go through the group
 * commit above, others on their own.  Under accel=auto an operation that
 * finds the GPU busy (gr_accel_claim) runs on the CPU instead, so at
 * most GPU_MAX_INFLIGHT writers are in the group commit at once; under
 * accel=gpu every writer joins it. */
int
gr_code_encode (bool gpu, uint8_t *const *blocks, size_t nstripes,
                size_t len)
{
  int r;

  if (gpu && gr_accel_claim ()) {
    if (len == gr_a.geom.chunk)
      r = gpu_encode_combined (blocks, nstripes, len);
    else
      r = gr_encode (gr_a.coder, blocks, nstripes, len);
    gr_accel_release ();
    if (r == 0)
      return 0;
    gr_accel_failed ("encode", r);
  }
  r = gr_encode (gr_a.cpu_coder, blocks, nstripes, len);
  return r == 0 ? 0 : coding_error ("encode", r);
}

int
gr_code_reconstruct (bool gpu, const int *erased, int nerased,
                     uint8_t *const *blocks, size_t len)
{
  int r;

  if (gpu && gr_accel_claim ()) {
    r = gr_reconstruct (gr_a.coder, erased, nerased, blocks, 1, len);
    gr_accel_release ();
    if (r == 0)
      return 0;
    gr_accel_failed ("reconstruct", r);
  }
  r = gr_reconstruct (gr_a.cpu_coder, erased, nerased, blocks, 1, len);
  return r == 0 ? 0 : coding_error ("reconstruct", r);
}

/* parity[j] ^= G[j][i] * delta.  On the GPU the update goes into the
 * zeroed pdelta buffers first and is XORed in here, so that a GPU failure
 * half-way cannot leave parity half-updated before the CPU redo. */
int
gr_code_update (bool gpu, int index, const uint8_t *delta,
                uint8_t *const *parity, uint8_t *const *pdelta, size_t len)
{
  int m = gr_a.geom.m, j, r;
  size_t x;

  if (gpu && gr_accel_claim ()) {
    for (j = 0; j < m; j++)
      memset (pdelta[j], 0, len);
    r = gr_update (gr_a.coder, index, &delta, pdelta, 1, len);
    gr_accel_release ();
    if (r == 0) {
      for (j = 0; j < m; j++) {
        uint64_t *d = (uint64_t *) parity[j];
        const uint64_t *s = (const uint64_t *) pdelta[j];
        for (x = 0; x < len / 8; x++)
          d[x] ^= s[x];
        for (x = len & ~(size_t) 7; x < len; x++)
          parity[j][x] ^= pdelta[j][x];
      }
      return 0;
    }
    gr_accel_failed ("update", r);
  }
  r = gr_update (gr_a.cpu_coder, index, &delta, parity, 1, len);
  return r == 0 ? 0 : coding_error ("update", r);
}

/* --- member I/O ---------------------------------------------------------- */

static int
mem_pread (int member, void *buf, size_t len, uint64_t off)
{
  return gr_pread_full (gr_a.mem[member].fd, buf, len, off);
}

static int
mem_pwrite (int member, const void *buf, size_t len, uint64_t off)
{
  return gr_pwrite_full (gr_a.mem[member].fd, buf, len, off);
}

/* Read from a live member; on error mark it failed.  0 or -1. */
static int
read_member (int member, void *buf, size_t len, uint64_t off)
{
  int r = mem_pread (member, buf, len, off);

  if (r == 0)
    return 0;
  gr_array_mark_failed (member, "read of %zu bytes at offset %" PRIu64
                        ": %s", len, off,
                        r == -ENODATA ? "short read" : strerror (-r));
  return -1;
}

/* Write to a member unless failed; on error mark it failed and go on. */
static void
write_member (int member, const void *buf, size_t len, uint64_t off,
              bool *touched)
{
  int r;

  if (gr_member_failed (member))
    return;
  r = mem_pwrite (member, buf, len, off);
  if (r == 0) {
    touched[member] = true;
    return;
  }
  gr_array_mark_failed (member, "write of %zu bytes at offset %" PRIu64
                        ": %s", len, off, strerror (-r));
}

/* A request that cannot be served: EIO.  Logged for the first few and
 * then every 1024th, so that a failed array does not flood the log. */
static int
fail_eio (const char *op, uint64_t offset)
{
  static uint64_t count;
  uint64_t c = __atomic_add_fetch (&count, 1, __ATOMIC_RELAXED);

  if (c <= 5 || c % 1024 == 0)
    nbdkit_error ("%s at offset %" PRIu64 ": too many failed members "
                  "(%d of %d, the array tolerates %d); %" PRIu64
                  " requests failed so far", op, offset,
                  __atomic_load_n (&gr_a.nfailed, __ATOMIC_ACQUIRE), gr_a.n,
                  gr_a.geom.m, c);
  errno = EIO;
  return -1;
}

static uint64_t
moff (uint64_t s, uint32_t chunk_off)
{
  return gr_map_member_offset (&gr_a.geom, s, chunk_off);
}

/* --- reads --------------------------------------------------------------- */

/* Read the first k surviving chunks of stripe s over [lo, hi) into blk
 * and rebuild the failed data chunks (and any failed parity chunk below
 * the k-th survivor, which must be listed as erased so that it is not
 * taken for a survivor; failed parity beyond it is neither read nor
 * rebuilt), on the GPU if gpu.  Stripe lock held (shared or exclusive).  Returns 0, 1 if a
 * member failed (redo), or -1. */
static int
read_and_reconstruct (uint64_t s, uint32_t lo, uint32_t hi,
                      uint8_t *const *blk, const bool *failed, bool gpu)
{
  int k = gr_a.geom.k, n = gr_a.n, i, got = 0, nerased = 0;
  int erased[GR_MAX_MEMBERS];
  uint32_t L = hi - lo;

  for (i = 0; i < n; i++) {
    if (failed[i]) {
      if (got < k)
        erased[nerased++] = i;
    }
    else if (got < k) {
      if (read_member (gr_map_member (&gr_a.geom, s, i), blk[i], L,
                       moff (s, lo)) == -1)
        return 1;
      got++;
    }
  }
  if (nerased > gr_a.geom.m)
    return 1;
  if (nerased == 0)
    return 0;
  return gr_code_reconstruct (gpu, erased, nerased, blk, L);
}

/* Snapshot which code indices of stripe s sit on failed members. */
static int
snapshot_failed (uint64_t s, bool *failed)
{
  int i, nf = 0;

  for (i = 0; i < gr_a.n; i++) {
    failed[i] = gr_member_failed (gr_map_member (&gr_a.geom, s, i));
    nf += failed[i];
  }
  return nf;
}

static int
read_piece (uint8_t *buf, const struct gr_piece *pc)
{
  const struct gr_geom *g = &gr_a.geom;
  bool failed[GR_MAX_MEMBERS];
  uint8_t *blk[GR_MAX_MEMBERS];
  uint8_t *scratch;
  int i, r;
  uint32_t L;
  bool gpu;

 again:
  if (gr_array_too_degraded ())
    return fail_eio ("read", pc->s * gr_map_stripe_width (g) + pc->so);
  snapshot_failed (pc->s, failed);
  for (i = pc->i0; i <= pc->i1; i++)
    if (failed[i])
      break;
  if (i > pc->i1) {
    /* Healthy: read straight into the request buffer. */
    for (i = pc->i0; i <= pc->i1; i++) {
      uint32_t a = gr_piece_a (pc, i), b = gr_piece_b (pc, i);

      if (read_member (gr_map_member (g, pc->s, i),
                       buf + gr_piece_bufoff (pc, i, a), b - a,
                       moff (pc->s, a)) == -1)
        goto again;
    }
    return 0;
  }

  /* Degraded: rebuild under the shared stripe lock.  On the CPU, data
   * chunks the request covers over [lo, hi) are read, or rebuilt,
   * straight into the request buffer, and the others go through scratch.
   * On the GPU every chunk goes through scratch, which is then
   * page-locked memory the GPU copies from and to directly, and the
   * request's part is copied out. */
  L = pc->hi - pc->lo;
  gpu = gr_accel_gpu (GR_OP_RECONSTRUCT, (size_t) g->k * L,
                      snapshot_failed (pc->s, failed));
  scratch = get_scratch ((size_t) gr_a.n * L);
  if (scratch == NULL)
    return -1;
  for (i = 0; i < gr_a.n; i++)
    blk[i] = !gpu && gr_piece_covers (pc, i)
      ? buf + gr_piece_bufoff (pc, i, pc->lo) : scratch + (size_t) i * L;
  pthread_rwlock_rdlock (stripe_lock (pc->s));
  snapshot_failed (pc->s, failed);
  r = read_and_reconstruct (pc->s, pc->lo, pc->hi, blk, failed, gpu);
  if (r == 0)
    for (i = pc->i0; i <= pc->i1; i++) {
      uint32_t a = gr_piece_a (pc, i), b = gr_piece_b (pc, i);

      if (gpu || !gr_piece_covers (pc, i))
        memcpy (buf + gr_piece_bufoff (pc, i, a), blk[i] + (a - pc->lo),
                b - a);
    }
  pthread_rwlock_unlock (stripe_lock (pc->s));
  if (r == 1)
    goto again;
  if (r == 0)
    gr_verbose ("read: stripe %" PRIu64 " [%" PRIu32 ",+%" PRIu32
                ") reconstructed", pc->s, pc->so, pc->len);
  return r;
}

/* A read of several chunks: submit every healthy chunk read of the
 * request at once through io_uring; stripes with a failed member, and
 * reads that failed, are then done by read_piece (which rebuilds, marks
 * members failed and retries).  Returns 0, -1 on error, or -2 if
 * io_uring cannot be used. */
static int
pread_batched (uint8_t *buf, uint32_t count, uint64_t offset)
{
  const struct gr_geom *g = &gr_a.geom;
  uint64_t width = gr_map_stripe_width (g);
  uint64_t s0 = offset / width;
  uint64_t nst = (offset + count - 1) / width - s0 + 1, st;
  size_t maxio = (size_t) count / g->chunk + 2 * nst, nio = 0, i;
  bool failed[GR_MAX_MEMBERS];
  struct gr_rio *v;
  bool *slow;
  struct gr_piece pc;
  uint64_t off;
  uint8_t *p;
  int r = 0;

  v = malloc (maxio * sizeof *v);
  slow = calloc (nst, sizeof *slow);
  if (v == NULL || slow == NULL) {
    free (v);
    free (slow);
    return -2;
  }
  for (st = 0, off = offset, p = buf; st < nst; st++) {
    uint32_t so = (uint32_t) (off % width);
    uint32_t len = (uint64_t) (offset + count - off) < width - so
      ? (uint32_t) (offset + count - off) : (uint32_t) (width - so);
    int c;

    gr_piece_init (&pc, g->chunk, gr_a.lm, s0 + st, so, len);
    snapshot_failed (pc.s, failed);
    for (c = pc.i0; c <= pc.i1; c++)
      if (failed[c])
        slow[st] = true;
    for (c = pc.i0; !slow[st] && c <= pc.i1; c++) {
      uint32_t a = gr_piece_a (&pc, c), b = gr_piece_b (&pc, c);

      assert (nio < maxio);
      v[nio].fd = gr_a.mem[gr_map_member (g, pc.s, c)].fd;
      v[nio].buf = p + gr_piece_bufoff (&pc, c, a);
      v[nio].len = b - a;
      v[nio].off = moff (pc.s, a);
      v[nio].tag = st;
      nio++;
    }
    p += len;
    off += len;
  }
  if (gr_uring_read_batch (v, nio) == -1) {
    r = -2;
    goto out;
  }
  for (i = 0; i < nio; i++)
    if (v[i].res != 0)
      slow[v[i].tag] = true;
  /* The slow way for the rest: rebuilds, and redoes failed reads with
   * pread, marking members failed on a real error. */
  for (st = 0, off = offset, p = buf; st < nst; st++) {
    uint32_t so = (uint32_t) (off % width);
    uint32_t len = (uint64_t) (offset + count - off) < width - so
      ? (uint32_t) (offset + count - off) : (uint32_t) (width - so);

    if (slow[st]) {
      gr_piece_init (&pc, g->chunk, gr_a.lm, s0 + st, so, len);
      if (read_piece (p, &pc) == -1) {
        r = -1;
        goto out;
      }
    }
    p += len;
    off += len;
  }
 out:
  free (v);
  free (slow);
  return r;
}

int
gr_io_pread (void *buf, uint32_t count, uint64_t offset)
{
  uint64_t width = gr_map_stripe_width (&gr_a.geom);
  uint8_t *p = buf;
  struct gr_piece pc;
  int r;

  gr_verbose ("pread count=%" PRIu32 " offset=%" PRIu64, count, offset);
  if (count > gr_a.geom.chunk && !gpuraid_debug_no_uring &&
      !gr_array_too_degraded () && gr_uring_available ()) {
    r = pread_batched (buf, count, offset);
    if (r != -2)
      return r;
  }
  while (count > 0) {
    uint64_t s = offset / width;
    uint32_t so = (uint32_t) (offset % width);
    uint32_t len = count < width - so ? count : (uint32_t) (width - so);

    gr_piece_init (&pc, gr_a.geom.chunk, gr_a.lm, s, so, len);
    if (read_piece (p, &pc) == -1)
      return -1;
    p += len;
    offset += len;
    count -= len;
  }
  return 0;
}

/* --- writes -------------------------------------------------------------- */

/* Whole stripes s0 .. s0+ns-1 from buf: parity is encoded straight from
 * the request buffer in batches, then each stripe is written under its
 * lock.  No reads are needed, so failed members are simply skipped. */
static int
write_full_stripes (uint64_t s0, uint64_t ns, const uint8_t *buf,
                    bool *touched)
{
  int k = gr_a.geom.k, m = gr_a.geom.m, n = gr_a.n, i, j;
  uint32_t C = gr_a.geom.chunk;
  uint64_t width = gr_map_stripe_width (&gr_a.geom);
  uint64_t batch = PARITY_BATCH_BYTES / ((uint64_t) m * C), st;
  uint8_t **blocks;
  uint8_t *parity;

  if (batch < 1)
    batch = 1;
  if (batch > ns)
    batch = ns;
  blocks = malloc (batch * n * sizeof *blocks);
  parity = get_scratch ((size_t) batch * m * C);
  if (blocks == NULL || parity == NULL) {
    free (blocks);
    nbdkit_error ("write: out of memory");
    errno = ENOMEM;
    return -1;
  }
  while (ns > 0) {
    uint64_t nb = ns < batch ? ns : batch;

    for (st = 0; st < nb; st++) {
      for (i = 0; i < k; i++)
        blocks[st * n + i] = (uint8_t *) buf + st * width + (size_t) i * C;
      for (j = 0; j < m; j++)
        blocks[st * n + k + j] = parity + (st * m + j) * C;
    }
    if (gr_code_encode (gr_accel_gpu (GR_OP_ENCODE, nb * C * k, 0),
                        blocks, nb, C) == -1) {
      free (blocks);
      return -1;
    }
    for (st = 0; st < nb; st++) {
      uint64_t s = s0 + st;

      pthread_rwlock_wrlock (stripe_lock (s));
      for (i = 0; i < n; i++)
        write_member (gr_map_member (&gr_a.geom, s, i), blocks[st * n + i],
                      C, moff (s, 0), touched);
      pthread_rwlock_unlock (stripe_lock (s));
      if (gr_array_too_degraded ()) {
        free (blocks);
        return fail_eio ("write", s * width);
      }
    }
    s0 += nb;
    ns -= nb;
    buf += nb * width;
  }
  free (blocks);
  return 0;
}

/* Part of one stripe.  Returns 0, 1 to redo (a read failed), or -1. */
static int
write_piece_locked (const uint8_t *buf, const struct gr_piece *pc,
                    bool *touched)
{
  const struct gr_geom *g = &gr_a.geom;
  int k = g->k, m = g->m, n = gr_a.n, i, j, r;
  uint32_t lo = pc->lo, hi = pc->hi, L = hi - lo;
  bool failed[GR_MAX_MEMBERS];
  uint8_t *blk[GR_MAX_MEMBERS], *pdelta[GR_MAX_MEMBERS];
  uint8_t *scratch;
  enum gr_write_plan plan;
  int reads, nf;
  uint64_t s = pc->s;

  scratch = get_scratch ((size_t) (n + m) * L);
  if (scratch == NULL)
    return -1;
  for (i = 0; i < n; i++)
    blk[i] = scratch + (size_t) i * L;
  for (j = 0; j < m; j++)
    pdelta[j] = scratch + (size_t) (n + j) * L;

  nf = snapshot_failed (s, failed);
  plan = gr_plan_write (pc, k, m, failed, &reads);
  if (plan == GR_WRITE_TOO_MANY)
    return 1;

  if (plan == GR_WRITE_DEGRADED) {
    /* Degraded: rebuild the old stripe over [lo, hi), overlay the new
     * data, re-encode every parity, write the live members. */
    r = read_and_reconstruct (s, lo, hi, blk, failed,
                              gr_accel_gpu (GR_OP_RECONSTRUCT,
                                            (size_t) k * L, nf));
    if (r != 0)
      return r;
    for (i = pc->i0; i <= pc->i1; i++) {
      uint32_t a = gr_piece_a (pc, i), b = gr_piece_b (pc, i);
      memcpy (blk[i] + (a - lo), buf + gr_piece_bufoff (pc, i, a), b - a);
    }
    if (gr_code_encode (gr_accel_gpu (GR_OP_ENCODE, (size_t) k * L, 0),
                        blk, 1, L) == -1)
      return -1;
    goto write_out;
  }

  if (plan == GR_WRITE_RMW) {
    /* Read-modify-write: delta = old ^ new over the touched bytes only
     * (zero elsewhere in [lo, hi)), parity ^= G * delta. */
    for (j = k; j < n; j++)
      if (!failed[j]) {
        if (read_member (gr_map_member (g, s, j), blk[j], L,
                         moff (s, lo)) == -1)
          return 1;
      }
      else
        memset (blk[j], 0, L);
    for (i = pc->i0; i <= pc->i1; i++) {
      uint32_t a = gr_piece_a (pc, i), b = gr_piece_b (pc, i), x;
      const uint8_t *nw = buf + gr_piece_bufoff (pc, i, a);
      uint8_t *d = blk[i];

      memset (d, 0, a - lo);
      memset (d + (b - lo), 0, hi - b);
      if (read_member (gr_map_member (g, s, i), d + (a - lo), b - a,
                       moff (s, a)) == -1)
        return 1;
      for (x = 0; x < b - a; x++)
        d[a - lo + x] ^= nw[x];
    }
    for (i = pc->i0; i <= pc->i1; i++)
      if (gr_code_update (gr_accel_gpu (GR_OP_UPDATE, L, 0), i, blk[i],
                          &blk[k], pdelta, L) == -1)
        return -1;
    gr_verbose ("write: stripe %" PRIu64 " rmw [%" PRIu32 ",%" PRIu32
                "), %d reads", s, lo, hi, reads);
  }
  else {
    /* Reconstruct-write: read the data not overwritten, encode. */
    for (i = 0; i < k; i++) {
      uint32_t a, b;

      if (gr_piece_covers (pc, i)) {
        blk[i] = (uint8_t *) buf + gr_piece_bufoff (pc, i, lo);
        continue;
      }
      if (read_member (gr_map_member (g, s, i), blk[i], L,
                       moff (s, lo)) == -1)
        return 1;
      if (i >= pc->i0 && i <= pc->i1) {
        a = gr_piece_a (pc, i);
        b = gr_piece_b (pc, i);
        memcpy (blk[i] + (a - lo), buf + gr_piece_bufoff (pc, i, a), b - a);
      }
    }
    if (gr_code_encode (gr_accel_gpu (GR_OP_ENCODE, (size_t) k * L, 0),
                        blk, 1, L) == -1)
      return -1;
    gr_verbose ("write: stripe %" PRIu64 " rcw [%" PRIu32 ",%" PRIu32
                "), %d reads", s, lo, hi, reads);
  }

 write_out:
  for (i = pc->i0; i <= pc->i1; i++) {
    uint32_t a = gr_piece_a (pc, i), b = gr_piece_b (pc, i);
    write_member (gr_map_member (g, s, i), buf + gr_piece_bufoff (pc, i, a),
                  b - a, moff (s, a), touched);
  }
  for (j = k; j < n; j++)
    write_member (gr_map_member (g, s, j), blk[j], L, moff (s, lo), touched);
  return 0;
}

static int
write_piece (const uint8_t *buf, const struct gr_piece *pc, bool *touched)
{
  int r;

  for (;;) {
    if (gr_array_too_degraded ())
      return fail_eio ("write",
                       pc->s * gr_map_stripe_width (&gr_a.geom) + pc->so);
    pthread_rwlock_wrlock (stripe_lock (pc->s));
    r = write_piece_locked (buf, pc, touched);
    pthread_rwlock_unlock (stripe_lock (pc->s));
    if (r != 1)
      break;
  }
  if (r == 0 && gr_array_too_degraded ())
    return fail_eio ("write",
                     pc->s * gr_map_stripe_width (&gr_a.geom) + pc->so);
  return r;
}

/* fdatasync the members in touched (FUA). */
static int
sync_touched (const bool *touched)
{
  int i;

  for (i = 0; i < gr_a.n; i++)
    if (touched[i] && gr_array_sync_member (i) == -1)
      return -1;
  return 0;
}

static int
write_range (const uint8_t *p, uint32_t count, uint64_t offset,
             bool *touched)
{
  uint64_t width = gr_map_stripe_width (&gr_a.geom);
  struct gr_piece pc;

  while (count > 0) {
    uint64_t s = offset / width;
    uint32_t so = (uint32_t) (offset % width);
    uint32_t len = count < width - so ? count : (uint32_t) (width - so);

    if (so == 0 && count >= width) {
      uint64_t ns = count / width;
      if (write_full_stripes (s, ns, p, touched) == -1)
        return -1;
      len = (uint32_t) (ns * width);
    }
    else {
      gr_piece_init (&pc, gr_a.geom.chunk, gr_a.lm, s, so, len);
      if (write_piece (p, &pc, touched) == -1)
        return -1;
    }
    p += len;
    offset += len;
    count -= len;
  }
  return 0;
}

int
gr_io_pwrite (const void *buf, uint32_t count, uint64_t offset, bool fua)
{
  bool touched[GR_MAX_MEMBERS] = { false };

  gr_verbose ("pwrite count=%" PRIu32 " offset=%" PRIu64 "%s", count,
              offset, fua ? " fua" : "");
  int r;

  if (gr_array_begin_write () == -1)
    return -1;
  __atomic_add_fetch (&writers, 1, __ATOMIC_RELAXED);
  r = write_range (buf, count, offset, touched);
  __atomic_sub_fetch (&writers, 1, __ATOMIC_RELAXED);
  if (r == -1)
    return -1;
  return fua ? sync_touched (touched) : 0;
}

/* --- zero, trim, flush --------------------------------------------------- */

/* Write zeros through the normal write path. */
static int
write_zeros (uint64_t count, uint64_t offset, bool *touched)
{
  while (count > 0) {
    uint32_t n = count < zero_len ? (uint32_t) count : (uint32_t) zero_len;
    if (write_range (gr_a.zero_buf, n, offset, touched) == -1)
      return -1;
    count -= n;
    offset += n;
  }
  return 0;
}

static int
cmp_int (const void *a, const void *b)
{
  return *(const int *) a - *(const int *) b;
}

/* fallocate modes that a member refused (EOPNOTSUPP): bit 0 punch,
 * bit 1 zero-range.  Atomic. */
static int falloc_unsupported;
#define FA_PUNCH 1
#define FA_ZERO 2

static int
fa_mode (int which)
{
  return which == FA_PUNCH ? FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
    : FALLOC_FL_ZERO_RANGE;
}

/* Deallocate (punch) or zero whole stripes [s0, s0+ns) on every live
 * member with fallocate.  The chunk of stripe s is at the same offset on
 * every member, so zeroing the same range everywhere leaves data and
 * parity zero and consistent.  Returns 0, -1 on error, or -2 if a member
 * does not support this mode: then stripes [s0, s0+*done) are done and
 * the others may be partly zeroed, so the caller must zero them again
 * another way. */
static int
fallocate_stripes (uint64_t s0, uint64_t ns, int which, bool *touched,
                   uint64_t *done)
{
  uint64_t width = gr_map_stripe_width (&gr_a.geom);
  uint32_t C = gr_a.geom.chunk;
  int lk[PUNCH_BATCH], nl, i, unsupported = 0;

  *done = 0;
  if (__atomic_load_n (&falloc_unsupported, __ATOMIC_ACQUIRE) & which)
    return -2;
  while (ns > 0) {
    uint64_t nb = ns < PUNCH_BATCH ? ns : PUNCH_BATCH, st;

    /* Lock the batch in lock-table order: other paths hold one stripe
     * lock at a time, so this cannot deadlock. */
    for (st = 0, nl = 0; st < nb; st++)
      lk[nl++] = (int) ((s0 + st) % GR_NLOCKS);
    qsort (lk, nl, sizeof lk[0], cmp_int);
    for (i = 0; i < nl; i++)
      pthread_rwlock_wrlock (&gr_a.locks[lk[i]]);
    for (i = 0; i < gr_a.n && !unsupported; i++) {
      if (gr_member_failed (i))
        continue;
      if (fallocate (gr_a.mem[i].fd, fa_mode (which), (off_t) moff (s0, 0),
                     (off_t) (nb * C)) == 0) {
        touched[i] = true;
        continue;
      }
      if (errno == EOPNOTSUPP || errno == ENOSYS || errno == EINVAL ||
          errno == ENODEV)
        unsupported = 1;
      else
        gr_array_mark_failed (i, "fallocate at offset %" PRIu64 ": %m",
                              moff (s0, 0));
    }
    for (i = nl - 1; i >= 0; i--)
      pthread_rwlock_unlock (&gr_a.locks[lk[i]]);
    if (unsupported) {
      __atomic_or_fetch (&falloc_unsupported, which, __ATOMIC_ACQ_REL);
      nbdkit_debug ("gpuraid: fallocate %s not supported on a member",
                    which == FA_PUNCH ? "punch-hole" : "zero-range");
      return -2;
    }
    if (gr_array_too_degraded ())
      return fail_eio ("zero", s0 * width);
    s0 += nb;
    ns -= nb;
    *done += nb;
  }
  return 0;
}

/* Zero whole stripes: fallocate in the preferred mode, then the other,
 * then by writing zeros. */
static int
zero_stripes (uint64_t s0, uint64_t ns, bool may_trim, bool *touched)
{
  uint64_t width = gr_map_stripe_width (&gr_a.geom), done;
  int first = may_trim ? FA_PUNCH : FA_ZERO;
  int second = may_trim ? FA_ZERO : FA_PUNCH;
  int r;

  r = fallocate_stripes (s0, ns, first, touched, &done);
  if (r == -2) {
    s0 += done;
    ns -= done;
    r = fallocate_stripes (s0, ns, second, touched, &done);
  }
  if (r == -2) {
    s0 += done;
    ns -= done;
    return write_zeros (ns * width, s0 * width, touched);
  }
  return r;
}

/* Split [offset, offset+count) into a partial head, whole stripes and a
 * partial tail. */
static void
split_stripes (uint32_t count, uint64_t offset, uint32_t *head,
               uint64_t *s0, uint64_t *ns, uint32_t *tail)
{
  uint64_t width = gr_map_stripe_width (&gr_a.geom);
  uint64_t end = offset + count;
  uint64_t first = (offset + width - 1) / width, last = end / width;

  if (first >= last) {
    *head = count; *s0 = 0; *ns = 0; *tail = 0;
    return;
  }
  *head = (uint32_t) (first * width - offset);
  *s0 = first;
  *ns = last - first;
  *tail = (uint32_t) (end - last * width);
}

int
gr_io_zero (uint32_t count, uint64_t offset, bool may_trim, bool fast,
            bool fua)
{
  bool touched[GR_MAX_MEMBERS] = { false };
  uint32_t head, tail;
  uint64_t s0, ns;

  gr_verbose ("zero count=%" PRIu32 " offset=%" PRIu64 "%s%s%s", count,
              offset, may_trim ? " may_trim" : "", fast ? " fast" : "",
              fua ? " fua" : "");
  split_stripes (count, offset, &head, &s0, &ns, &tail);
  /* Only whole stripes can be zeroed faster than by writing; refuse a
   * fast zero before changing anything. */
  if (fast && (head || tail || ns == 0 ||
               __atomic_load_n (&falloc_unsupported, __ATOMIC_ACQUIRE)
               == (FA_PUNCH | FA_ZERO))) {
    errno = ENOTSUP;
    return -1;
  }
  if (gr_array_begin_write () == -1)
    return -1;
  if (head && write_zeros (head, offset, touched) == -1)
    return -1;
  if (ns && zero_stripes (s0, ns, may_trim, touched) == -1)
    return -1;
  if (tail && write_zeros (tail, offset + count - tail, touched) == -1)
    return -1;
  return fua ? sync_touched (touched) : 0;
}

int
gr_io_trim (uint32_t count, uint64_t offset, bool fua)
{
  bool touched[GR_MAX_MEMBERS] = { false };
  uint32_t head, tail;
  uint64_t s0, ns, done;
  int r;

  gr_verbose ("trim count=%" PRIu32 " offset=%" PRIu64 "%s", count, offset,
              fua ? " fua" : "");
  /* Partial stripes: trim is advisory, nothing is done. */
  split_stripes (count, offset, &head, &s0, &ns, &tail);
  if (ns == 0 ||
      __atomic_load_n (&falloc_unsupported, __ATOMIC_ACQUIRE) & FA_PUNCH)
    return 0;
  if (gr_array_begin_write () == -1)
    return -1;
  r = fallocate_stripes (s0, ns, FA_PUNCH, touched, &done);
  if (r == -1)
    return -1;
  if (r == -2) {
    /* The stripes after the done ones may be partly punched: zero them
     * properly so that parity stays consistent. */
    if (zero_stripes (s0 + done, ns - done, true, touched) == -1)
      return -1;
  }
  return fua ? sync_touched (touched) : 0;
}

int
gr_io_flush (void)
{
  int i;

  gr_verbose ("flush");
  for (i = 0; i < gr_a.n; i++)
    if (gr_array_sync_member (i) == -1)
      return -1;
  if (gr_array_too_degraded ())
    return fail_eio ("flush", 0);
  return 0;
}

/* --- resync after an unclean shutdown ------------------------------------ */

/* Recompute the parity of every stripe from its data and rewrite the
 * parity chunks that differ (md's resync).  Run at start-up, before any
 * request, on an array that was not shut down cleanly and has every
 * member: stripes being written at the crash may have new data with old
 * parity (the write hole), and a later degraded read would rebuild wrong
 * data from them.  Works member-major: for a batch of stripes each
 * member's chunks are contiguous, so one read per member per batch.
 * Uses the CPU coder.  Logs progress every 10%.  Returns 0, or -1 after
 * nbdkit_error (an I/O error: the caller refuses to start). */
int
gr_io_resync (void)
{
  int k = gr_a.geom.k, m = gr_a.geom.m, n = gr_a.n, i, j, r;
  uint32_t C = gr_a.geom.chunk;
  uint64_t stripes = gr_a.geom.stripes, batch, s0, st, fixed = 0;
  uint8_t *mbuf = NULL, *par = NULL, **blocks = NULL;
  int last_pct = 0, ret = -1;

  batch = (64u << 20) / ((uint64_t) n * C);
  if (batch < 1)
    batch = 1;
  if (batch > stripes)
    batch = stripes;
  mbuf = malloc ((size_t) (batch * n * C));
  par = malloc ((size_t) (batch * m * C));
  blocks = malloc ((size_t) (batch * n) * sizeof *blocks);
  if (mbuf == NULL || par == NULL || blocks == NULL) {
    nbdkit_error ("resync: out of memory");
    goto out;
  }
  for (s0 = 0; s0 < stripes; s0 += batch) {
    uint64_t nb = stripes - s0 < batch ? stripes - s0 : batch;

    /* mbuf holds member j's chunks of stripes s0..s0+nb-1 at j*batch*C. */
    for (j = 0; j < n; j++) {
      r = mem_pread (j, mbuf + (size_t) j * batch * C, (size_t) (nb * C),
                     moff (s0, 0));
      if (r < 0) {
        nbdkit_error ("resync: member %d (%s): read at offset %" PRIu64
                      ": %s", j, gr_a.mem[j].path ? gr_a.mem[j].path : "?",
                      moff (s0, 0), strerror (-r));
        goto out;
      }
    }
    for (st = 0; st < nb; st++) {
      for (i = 0; i < k; i++)
        blocks[st * n + i] = mbuf + ((size_t) gr_map_member (&gr_a.geom,
                                                              s0 + st, i)
                                     * batch + st) * C;
      for (j = 0; j < m; j++)
        blocks[st * n + k + j] = par + (st * m + j) * C;
    }
    r = gr_encode (gr_a.cpu_coder, blocks, nb, C);
    if (r < 0) {
      nbdkit_error ("resync: encode: %s", strerror (-r));
      goto out;
    }
    for (st = 0; st < nb; st++)
      for (j = 0; j < m; j++) {
        int mem = gr_map_member (&gr_a.geom, s0 + st, k + j);
        const uint8_t *ondisk = mbuf + ((size_t) mem * batch + st) * C;
        const uint8_t *want = blocks[st * n + k + j];

        if (memcmp (ondisk, want, C) == 0)
          continue;
        r = mem_pwrite (mem, want, C, moff (s0 + st, 0));
        if (r < 0) {
          nbdkit_error ("resync: member %d (%s): write at offset %" PRIu64
                        ": %s", mem, gr_a.mem[mem].path, moff (s0 + st, 0),
                        strerror (-r));
          goto out;
        }
        fixed++;
        gr_verbose ("resync: stripe %" PRIu64 ": parity %d on member %d "
                  "rewritten", s0 + st, j, mem);
      }
    if ((s0 + nb) * 10 / stripes > (uint64_t) last_pct) {
      last_pct = (int) ((s0 + nb) * 10 / stripes);
      nbdkit_error ("warning: resync: %d0%% (%" PRIu64 " of %" PRIu64
                    " stripes, %" PRIu64 " parity chunks rewritten)",
                    last_pct, s0 + nb, stripes, fixed);
    }
  }
  for (j = 0; j < n; j++)
    if (fdatasync (gr_a.mem[j].fd) == -1) {
      nbdkit_error ("resync: member %d (%s): fdatasync: %m", j,
                    gr_a.mem[j].path);
      goto out;
    }
  nbdkit_error ("warning: resync done: %" PRIu64 " stripes checked, %"
                PRIu64 " parity chunks were inconsistent and rewritten",
                stripes, fixed);
  ret = 0;
 out:
  free (mbuf);
  free (par);
  free (blocks);
  return ret;
}
