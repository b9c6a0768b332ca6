/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - coding: the GPU work of concurrent requests gathered, the
 * group commit of encodes of whole chunks and the gathering of small
 * operations.  See coding.h and coding-internal.h. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/now.h"
#include "coding.h"
#include "coding-internal.h"
#include "log.h"

/* Nanoseconds from `since` (gr_now) until now. */
static uint64_t
ns_since (double since)
{
  return (uint64_t) ((gr_now () - since) * 1e9);
}

/* Wait for s to be posted. */
static void
wait_posted (sem_t *s)
{
  while (sem_wait (s) == -1 && errno == EINTR)
    ;
}

/* --- group commit -------------------------------------------------------- */

/* A batch whose requests want their block checksums (some of them):
 * each request an operation of one gr_code_many, which the GPU merges
 * into one job and sums where the blocks are. */
static int
batch_summed (struct gr_coding *c, const struct gr_coding_enc *list,
              size_t len)
{
  struct gr_code_op ops[64] = { { 0 } }, *v = ops;
  const struct gr_coding_enc *q;
  size_t nq = 0, i = 0;
  int r;

  for (q = list; q; q = q->next)
    nq++;
  if (nq > sizeof ops / sizeof ops[0] &&
      (v = malloc (nq * sizeof *v)) == NULL)
    return -ENOMEM;
  for (q = list; q; q = q->next)
    v[i++] = (struct gr_code_op) { .blocks = q->blocks,
                                   .nstripes = q->nstripes, .len = len,
                                   .cksums = q->cksums };
  r = gr_code_many (c->gpu, v, nq);
  if (v != ops)
    free (v);
  return r;
}

/* The full-stripe encodes of concurrent write requests are gathered into
 * one GPU batch by flat combining: the first thread to wait for an
 * encode queued becomes the leader, waits (at most BATCH_WAIT_US, and
 * only while other write requests are in flight and not yet queued) for
 * more stripes, up to BATCH_MAX_BYTES of data, then encodes everything
 * queued in one call and wakes the others with the result.  The next
 * writer to queue leads the next batch meanwhile.  At most COMB_INFLIGHT
 * batches are on the GPU at once: a leader whose window has ended while
 * they are waits for one of them to end, and the writers that queue
 * meanwhile join its batch (cut after the window, it would wait for an
 * engine slot instead, with only the window's writers in it).  The
 * leader sleeps on its own condition, woken by each writer that joins
 * and each batch that ends; a follower on its own semaphore, posted with
 * its result after the lock is let go, so that a batch's followers wake
 * at once, not one after the other for the lock.  The queue is bounded:
 * a writer whose stripes do not fit waits for the current batch to go
 * (if it has a leader; else it leads it).
 *
 * An encode may also be queued without waiting (gr_coding_comb_begin: a
 * request's plans that read nothing, begun together) and waited for
 * later (gr_coding_comb_end): by then a batch may have taken it, or its
 * thread leads one. */

/* The most stripes of len bytes in a batch. */
static size_t
comb_max (const struct gr_coding *c, size_t len)
{
  const size_t max = BATCH_MAX_BYTES / ((size_t) c->k * len);

  return max < 1 ? 1 : max;
}

static void
enc_init (struct gr_coding_enc *e, uint8_t *const *blocks, size_t nstripes,
          size_t len, uint32_t *cksums)
{
  *e = (struct gr_coding_enc) { .blocks = blocks, .nstripes = nstripes,
                                .len = len, .cksums = cksums };
  pthread_cond_init (&e->cv, NULL);
  sem_init (&e->done, 0, 0);
}

static void
enc_destroy (struct gr_coding_enc *e)
{
  pthread_cond_destroy (&e->cv);
  sem_destroy (&e->done);
}

/* Queue e.  comb_lock held. */
static void
comb_queue (struct gr_coding *c, struct gr_coding_enc *e)
{
  e->t_in = gr_now ();
  e->queued = true;
  *c->comb_tail = e;
  c->comb_tail = &e->next;
  c->comb_stripes += e->nstripes;
  c->comb_reqs++;
  if (c->comb_leader)
    pthread_cond_signal (&c->comb_leader->cv);  /* one more queued */
}

/* Wait for me's batch: lead it if me is still queued and no one leads,
 * else wait for its result.  comb_lock held; let go. */
static int
comb_wait (struct gr_coding *c, struct gr_coding_enc *me)
{
  const size_t max = comb_max (c, me->len), n = (size_t) c->k + c->m;
  struct gr_coding_enc *list, *q, *next;
  struct timespec deadline;
  size_t total, at;
  uint8_t **all;
  uint64_t nq;
  double t_go;
  int r;

  if (!me->queued || c->comb_leader) {  /* follower: wait for the result */
    pthread_mutex_unlock (&c->comb_lock);
    if (sem_trywait (&me->done) == 0)   /* begun, and done meanwhile */
      return me->rc;
    wait_posted (&me->done);
    __atomic_add_fetch (&c->comb_wake_ns, ns_since (me->t_done),
                        __ATOMIC_RELAXED);
    return me->rc;
  }
  c->comb_leader = me;
  clock_gettime (CLOCK_REALTIME, &deadline);
  deadline.tv_nsec += BATCH_WAIT_US * 1000;
  if (deadline.tv_nsec >= 1000000000) {
    deadline.tv_sec++;
    deadline.tv_nsec -= 1000000000;
  }
  for (bool window = true;;) {
    const bool more = c->comb_stripes < max &&
      c->comb_reqs < (size_t) __atomic_load_n (&c->writers,
                                               __ATOMIC_RELAXED);

    if (!(window && more) && c->comb_inflight < COMB_INFLIGHT)
      break;
    if (!window) {
      /* Only the GPU keeps this batch: woken when one ends. */
      pthread_cond_wait (&me->cv, &c->comb_lock);
      continue;
    }
    if (pthread_cond_timedwait (&me->cv, &c->comb_lock, &deadline) != 0) {
      window = false;
      if (more)
        c->comb_timeouts++;
      if (c->comb_inflight >= COMB_INFLIGHT)
        c->comb_gpu_waits++;
    }
  }
  c->comb_inflight++;
  list = c->comb_head;
  t_go = gr_now ();
  for (q = list, nq = 0; q; q = q->next, nq++) {
    c->comb_go_ns += (uint64_t) ((t_go - q->t_in) * 1e9);
    q->queued = false;
  }
  total = c->comb_stripes;
  c->comb_batches++;
  c->comb_reqs_done += c->comb_reqs;
  c->comb_head = NULL;
  c->comb_tail = &c->comb_head;
  c->comb_stripes = c->comb_reqs = 0;
  c->comb_leader = NULL;
  if (c->comb_held > 0)
    pthread_cond_broadcast (&c->comb_room);     /* held-back writers */
  pthread_mutex_unlock (&c->comb_lock);

  for (q = list; q && q->cksums == NULL; q = q->next)
    ;
  if (q)
    r = batch_summed (c, list, me->len);
  else if ((all = malloc (total * n * sizeof *all)) == NULL)
    r = -ENOMEM;
  else {
    for (at = 0, q = list; q; q = q->next) {
      memcpy (all + at * n, q->blocks, q->nstripes * n * sizeof *all);
      at += q->nstripes;
    }
    r = gr_encode (c->gpu, all, total, me->len);
    free (all);
  }
  if (total > me->nstripes)
    gr_verbose ("group commit: %zu stripes from several requests in one "
                "GPU batch", total);
  pthread_mutex_lock (&c->comb_lock);
  me->t_done = gr_now ();
  c->comb_gpu_ns += (uint64_t) ((me->t_done - t_go) * 1e9) * nq;
  c->comb_inflight--;
  if (c->comb_leader)
    pthread_cond_signal (&c->comb_leader->cv);  /* room on the GPU */
  pthread_mutex_unlock (&c->comb_lock);
  /* The followers, woken all at once, none taking the lock again. */
  for (q = list; q; q = next) {
    next = q->next;             /* q may return (and go) once woken */
    if (q == me)
      continue;
    q->rc = r;
    q->t_done = me->t_done;
    sem_post (&q->done);
  }
  return r;
}

int
gr_coding_encode_combined (struct gr_coding *c, uint8_t *const *blocks,
                           size_t nstripes, size_t len, uint32_t *cksums)
{
  const size_t max = comb_max (c, len);
  struct gr_coding_enc me;
  int r;

  enc_init (&me, blocks, nstripes, len, cksums);
  pthread_mutex_lock (&c->comb_lock);
  if (c->comb_leader && c->comb_stripes + nstripes > max) {
    c->comb_held++;
    while (c->comb_leader && c->comb_stripes + nstripes > max)
      pthread_cond_wait (&c->comb_room, &c->comb_lock);
    c->comb_held--;
  }
  comb_queue (c, &me);
  r = comb_wait (c, &me);
  enc_destroy (&me);
  return r;
}

struct gr_coding_enc *
gr_coding_comb_begin (struct gr_coding *c, uint8_t *const *blocks,
                      size_t nstripes, size_t len, uint32_t *cksums)
{
  struct gr_coding_enc *e = malloc (sizeof *e);

  if (e == NULL)
    return NULL;
  enc_init (e, blocks, nstripes, len, cksums);
  pthread_mutex_lock (&c->comb_lock);
  if (c->comb_stripes > 0 && c->comb_stripes + nstripes > comb_max (c, len)) {
    pthread_mutex_unlock (&c->comb_lock);
    enc_destroy (e);
    free (e);
    return NULL;
  }
  comb_queue (c, e);
  pthread_mutex_unlock (&c->comb_lock);
  return e;
}

int
gr_coding_comb_end (struct gr_coding *c, struct gr_coding_enc *e)
{
  int r;

  pthread_mutex_lock (&c->comb_lock);
  r = comb_wait (c, e);
  enc_destroy (e);
  free (e);
  return r;
}

struct gr_coding_enc *
gr_coding_encode_begin (struct gr_coding *c, bool gpu,
                        uint8_t *const *blocks, size_t nstripes, size_t len,
                        uint32_t *cksums)
{
  struct gr_coding_enc *e;

  if (!gpu || len != c->chunk || !gpuraid_debug_group_commit ||
      !gr_coding_claim (c))
    return NULL;
  e = gr_coding_comb_begin (c, blocks, nstripes, len, cksums);
  if (e == NULL)
    gr_coding_release (c);
  return e;
}

int
gr_coding_encode_end (struct gr_coding *c, struct gr_coding_enc *e)
{
  uint8_t *const *blocks = e->blocks;
  const size_t nstripes = e->nstripes, len = e->len;
  uint32_t *cksums = e->cksums;
  int r = gr_coding_comb_end (c, e);

  gr_coding_release (c);
  if (r == 0)
    return 0;
  gr_coding_gpu_failed (c, "encode", r);
  return gr_coding_encode_cpu (c, blocks, nstripes, len, cksums);
}

void
gr_coding_batch_log (const struct gr_coding *c)
{
  const double n = (double) c->comb_reqs_done;

  if (c->gpu)
    gr_debug ("coding operations on the GPU: %" PRIu64 "; sent to the CPU "
              "because %d were already on the GPU: %" PRIu64 "; small "
              "operations gathered: %" PRIu64 " of %" PRIu64 " plans "
              "in %" PRIu64 " submissions (%" PRIu64 " of them encodes)",
              __atomic_load_n (&c->ops_gpu, __ATOMIC_RELAXED),
              GPU_MAX_INFLIGHT,
              __atomic_load_n (&c->ops_spilled, __ATOMIC_RELAXED),
              c->gathered_ops, c->gathered_plans, c->gathered_batches,
              c->gathered_encodes);
  if (c->comb_batches > 0)
    gr_debug ("encodes in the group commit (batches, requests, windows "
              "run out): %" PRIu64 ", %" PRIu64 ", %" PRIu64 "; batches "
              "that then waited for one on the GPU: %" PRIu64 "; mean us a "
              "request waited for its batch to go, on the GPU, then to be "
              "woken: %.0f, %.0f, %.0f", c->comb_batches, c->comb_reqs_done,
              c->comb_timeouts, c->comb_gpu_waits, c->comb_go_ns / n / 1e3,
              c->comb_gpu_ns / n / 1e3, c->comb_wake_ns / n / 1e3);
  if (c->gathered_plans > 0 && c->gathered_batches > 0)
    gr_debug ("gathered operations, mean per plan: %.0f us queued, %.0f "
              "us in its submission, %.0f us from its end until the plan's "
              "thread ran; mean submission %.1f plans, %.2f MiB, %.0f us "
              "(longest %.0f us)",
              c->gather_queued_ns / 1e3 / c->gathered_plans,
              c->gather_run_ns / 1e3 / c->gathered_plans,
              __atomic_load_n (&c->gather_woken_ns, __ATOMIC_RELAXED) / 1e3 /
              c->gathered_plans,
              (double) c->gathered_plans / c->gathered_batches,
              c->gather_bytes_done / (double) MiB / c->gathered_batches,
              c->gather_sub_ns / 1e3 / c->gathered_batches,
              c->gather_sub_max_ns / 1e3);
}

void
gr_coding_writer_enter (struct gr_coding *c)
{
  __atomic_add_fetch (&c->writers, 1, __ATOMIC_RELAXED);
}

void
gr_coding_writer_leave (struct gr_coding *c)
{
  __atomic_sub_fetch (&c->writers, 1, __ATOMIC_RELAXED);
}

/* --- gathered small operations ------------------------------------------ */

/* Small operations from concurrent requests go to the GPU together: a
 * degraded read's reconstructs (hundreds of KiB), a small write's encode
 * of part of a chunk's height (a reconstruct-write of 4 KiB encodes k
 * times that).  With nbdkit's threads per connection, a hundred requests
 * may be inside the plugin at once, and as many GPU submissions each
 * paying a slot, a wait and a wake-up cost more than the coding.  So at
 * most GATHER_LEADERS submissions are in flight; an operation arriving
 * meanwhile queues, and a submission that ends hands the queue (up to
 * BATCH_MAX_BYTES of data) to its first waiter, which submits it as one
 * gr_code_many.  No one waits for more to come: batches grow only while
 * the GPU is busy.  Each waiter sleeps on its own semaphore, posted
 * alone (to lead, or with its result) after the lock is let go. */

/* Detach the queue's head batch (at least one item, at most
 * BATCH_MAX_BYTES of data), its first item to lead it.  gather_lock
 * held, queue not empty. */
static struct gather_item *
gather_take (struct gr_coding *c)
{
  struct gather_item *first = c->gather_head, *q = first;
  size_t bytes = q->bytes;

  while (q->next && bytes + q->next->bytes <= BATCH_MAX_BYTES) {
    q = q->next;
    bytes += q->bytes;
  }
  c->gather_head = q->next;
  if (c->gather_head == NULL)
    c->gather_tail = &c->gather_head;
  q->next = NULL;
  c->gather_bytes -= bytes;
  first->batch = first;
  return first;
}

/* accel=auto: is there room for `bytes` more (a submission free, or the
 * queue short of a batch)?  Else the CPU codes it (spilled). */
static bool
gather_room (struct gr_coding *c, size_t bytes)
{
  bool room;

  pthread_mutex_lock (&c->gather_lock);
  room = c->gather_leaders < gpuraid_debug_gather ||
    c->gather_bytes + bytes <= BATCH_MAX_BYTES;
  pthread_mutex_unlock (&c->gather_lock);
  if (!room)
    __atomic_add_fetch (&c->ops_spilled, 1, __ATOMIC_RELAXED);
  return room;
}

/* Does a small GPU operation of `bytes` of data go to be gathered? */
bool
gr_coding_gather_this (struct gr_coding *c, size_t bytes)
{
  return gr_coding_gpu_usable (c) && gpuraid_debug_gather > 0 &&
    bytes < GATHER_MAX_BYTES && (c->gpu_all || !c->spill ||
                                 gather_room (c, bytes));
}

/* What the operations v[0..n) are, for a message. */
static const char *
ops_name (const struct gr_code_op *v, size_t n)
{
  size_t i, enc = 0;

  for (i = 0; i < n; i++)
    enc += v[i].nerased == 0;
  return enc == 0 ? "reconstruct" : enc == n ? "encode" : "coding";
}

/* Run a batch (list from `first`) on the GPU, or on the CPU after a GPU
 * failure; 0 or a negative errno. */
static int
gather_run (struct gr_coding *c, struct gather_item *first)
{
  struct gr_code_op ops[64], *v = ops;
  size_t n = 0, i, nplans = 0;
  struct gather_item *q;
  int r;

  for (q = first; q; q = q->next) {
    n += q->nops;
    nplans++;
  }
  if (n > sizeof ops / sizeof ops[0]) {
    v = malloc (n * sizeof *v);
    if (v == NULL)
      return -ENOMEM;
  }
  for (i = 0, q = first; q; q = q->next) {
    memcpy (v + i, q->ops, q->nops * sizeof *v);
    i += q->nops;
  }
  if (nplans > 1)
    gr_verbose ("gathered: %zu coding operations of %zu plans in one GPU "
                "submission", n, nplans);
  r = -EIO;
  if (gr_coding_gpu_usable (c)) {
    __atomic_add_fetch (&c->inflight, 1, __ATOMIC_ACQ_REL);
    __atomic_add_fetch (&c->ops_gpu, n, __ATOMIC_RELAXED);
    r = gr_code_many (c->gpu, v, n);
    gr_coding_release (c);
    if (r < 0)
      gr_coding_gpu_failed (c, ops_name (v, n), r);
  }
  if (r < 0)
    r = gr_code_many (c->cpu, v, n);
  if (v != ops)
    free (v);
  return r;
}

int
gr_coding_gathered (struct gr_coding *c, const struct gr_code_op *ops,
                    size_t nops, size_t bytes)
{
  struct gather_item me = {
    .ops = ops, .nops = nops, .bytes = bytes, .state = GATHER_WAIT,
    .queued_at = gr_now (),
  };
  struct gather_item *q, *next, *lead;
  bool queued;
  double t0, t1;
  uint64_t sub_ns;
  size_t i;
  int r;

  sem_init (&me.woken, 0, 0);
  pthread_mutex_lock (&c->gather_lock);
  *c->gather_tail = &me;
  c->gather_tail = &me.next;
  c->gather_bytes += me.bytes;
  if (c->gather_leaders < gpuraid_debug_gather) {       /* queue empty */
    c->gather_leaders++;
    gather_take (c);
    me.state = GATHER_LEAD;
  }
  queued = me.state == GATHER_WAIT;
  pthread_mutex_unlock (&c->gather_lock);
  if (queued)
    wait_posted (&me.woken);
  if (me.state == GATHER_DONE) {
    sem_destroy (&me.woken);
    __atomic_add_fetch (&c->gather_woken_ns, ns_since (me.done_at),
                        __ATOMIC_RELAXED);
    return me.rc;
  }
  __atomic_add_fetch (&c->gathered_batches, 1, __ATOMIC_RELAXED);

  t0 = gr_now ();
  r = gather_run (c, me.batch);
  t1 = gr_now ();
  if (r < 0) {
    nbdkit_error ("%s: %s", ops_name (me.ops, me.nops), strerror (-r));
    r = -EIO;
  }

  sub_ns = (uint64_t) ((t1 - t0) * 1e9);
  pthread_mutex_lock (&c->gather_lock);
  c->gather_sub_ns += sub_ns;
  if (sub_ns > c->gather_sub_max_ns)
    c->gather_sub_max_ns = sub_ns;
  for (q = me.batch; q; q = q->next) {
    c->gathered_ops += q->nops;
    for (i = 0; i < q->nops; i++)
      c->gathered_encodes += q->ops[i].nerased == 0;
    c->gathered_plans++;
    c->gather_queued_ns += (uint64_t) ((t0 - q->queued_at) * 1e9);
    c->gather_run_ns += sub_ns;
    c->gather_bytes_done += q->bytes;
    q->rc = r;
    q->done_at = t1;
  }
  lead = NULL;
  if (c->gather_head) {         /* the next batch, to its first waiter */
    lead = gather_take (c);
    lead->state = GATHER_LEAD;
  }
  else
    c->gather_leaders--;
  pthread_mutex_unlock (&c->gather_lock);
  for (q = me.batch; q; q = next) {
    next = q->next;             /* q may return (and go) once woken */
    if (q != &me) {
      q->state = GATHER_DONE;
      sem_post (&q->woken);
    }
  }
  if (lead)
    sem_post (&lead->woken);
  sem_destroy (&me.woken);
  return r;
}
