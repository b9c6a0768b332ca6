/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - nbdkit's request buffers page-locked in place.  See
 * reqpin.h. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/now.h"
#include "log.h"
#include "reqpin.h"

/* A thread's state.  base and len (the registered range, base NULL for
 * none) change under the registry's lock, by the thread itself or, once
 * the range is stale, by another thread; the thread reads them without
 * the lock (atomically) on the fast path. */
struct tls {
  struct gr_reqpin *rp;
  void *base;
  size_t len;
  void *used;                   /* the range in use by this request */
  void *bad;                    /* a buffer refused with EEXIST: not */
  size_t bad_len;               /* tried again unless it moves or grows */
  unsigned regs;                /* registrations made by this thread */
  struct tls *next, *prev;      /* the registry's list, under lock */
};

struct gr_reqpin {
  struct gr_reqpin_ops ops;
  size_t cap;
  pthread_key_t key;
  pthread_mutex_t lock;         /* everything below, and tls lists */
  struct tls *head;
  size_t bytes, ranges;
  uint64_t registered, moved, stale, failed, over_cap;
  double wait_s, wait_max_s, reg_s, reg_max_s, end_s;
  bool off, warned, said_exist, said_cap, said_moves;
};

/* Unregister t's range (under lock); the bytes are given back even if
 * it fails (then registering stops: the engine keeps the range listed
 * and stages what lies there). */
static void
drop (struct gr_reqpin *rp, struct tls *t)
{
  void *base = __atomic_load_n (&t->base, __ATOMIC_RELAXED);
  int r;

  if (base == NULL)
    return;
  r = rp->ops.unreg (base);
  if (r < 0 && !rp->off) {
    const char *why = rp->ops.why ? rp->ops.why () : NULL;

    rp->off = true;
    gr_warn ("cannot unregister a request buffer's page-locked range "
             "(%s%s%s); request buffers are no longer page-locked, and are "
             "copied through the GPU engine's staging memory",
             strerror (-r), why && why[0] ? ": " : "", why ? why : "");
  }
  rp->bytes -= t->len;
  rp->ranges--;
  __atomic_store_n (&t->base, NULL, __ATOMIC_RELEASE);
  __atomic_store_n (&t->len, 0, __ATOMIC_RELEASE);
}

/* A thread ends (nbdkit has freed its buffer, or is about to). */
static void
tls_end (void *v)
{
  struct tls *t = v;
  struct gr_reqpin *rp;
  double t0;

  if (t == NULL)
    return;
  rp = t->rp;
  pthread_mutex_lock (&rp->lock);
  t0 = gr_now ();
  drop (rp, t);
  rp->end_s += gr_now () - t0;
  if (t->prev)
    t->prev->next = t->next;
  else
    rp->head = t->next;
  if (t->next)
    t->next->prev = t->prev;
  pthread_mutex_unlock (&rp->lock);
  free (t);
}

struct gr_reqpin *
gr_reqpin_new (const struct gr_reqpin_ops *ops, size_t cap)
{
  struct gr_reqpin *rp = calloc (1, sizeof *rp);

  if (rp == NULL || pthread_key_create (&rp->key, tls_end) != 0) {
    nbdkit_error ("reqpin: %m");
    free (rp);
    return NULL;
  }
  rp->ops = *ops;
  rp->cap = cap;
  pthread_mutex_init (&rp->lock, NULL);
  return rp;
}

void
gr_reqpin_free (struct gr_reqpin *rp)
{
  struct tls *t, *next;

  if (rp == NULL)
    return;
  /* No destructor runs after this; the threads that are left (the
   * calling one, at least) have their ranges unregistered here. */
  pthread_key_delete (rp->key);
  pthread_mutex_lock (&rp->lock);
  for (t = rp->head; t; t = next) {
    next = t->next;
    drop (rp, t);
    free (t);
  }
  rp->head = NULL;
  pthread_mutex_unlock (&rp->lock);
  pthread_mutex_destroy (&rp->lock);
  free (rp);
}

static struct tls *
get_tls (struct gr_reqpin *rp)
{
  struct tls *t = pthread_getspecific (rp->key);

  if (t)
    return t;
  t = calloc (1, sizeof *t);
  if (t == NULL)
    return NULL;
  if (pthread_setspecific (rp->key, t) != 0) {
    free (t);
    return NULL;
  }
  t->rp = rp;
  pthread_mutex_lock (&rp->lock);
  t->next = rp->head;
  if (rp->head)
    rp->head->prev = t;
  rp->head = t;
  pthread_mutex_unlock (&rp->lock);
  return t;
}

/* A failure, said once: EEXIST (pages shared with a neighbouring
 * buffer that is registered: only this buffer is staged) in the debug
 * log, any other as a warning (from now on every buffer is staged). */
static void
say_failed (struct gr_reqpin *rp, int r, size_t len)
{
  const char *why = rp->ops.why ? rp->ops.why () : NULL;

  if (r == -EEXIST) {
    if (!rp->said_exist)
      gr_debug ("a request buffer of %zu bytes shares pages with one "
                "page-locked already (%s): it is staged until it moves",
                len, why ? why : "");
    rp->said_exist = true;
    return;
  }
  if (rp->warned)
    return;
  rp->warned = true;
  gr_warn ("cannot page-lock a request buffer of %zu bytes (%s%s%s): "
           "request buffers are copied through the GPU engine's staging "
           "memory from now on", len, strerror (-r), why && why[0] ? ": " : "",
           why ? why : "");
}

/* Register [p, p + len) for thread t, under lock: its old range and any
 * stale range it overlaps unregistered first.  true if registered. */
static bool
replace (struct gr_reqpin *rp, struct tls *t, void *p, size_t len)
{
  const uintptr_t a = (uintptr_t) p;
  struct tls *o;
  double t0;
  int r;

  if (rp->off || (t->bad == p && len <= t->bad_len))
    return false;
  if (t->regs >= GR_REQPIN_MOVES) {
    if (!rp->said_moves)
      gr_debug ("a thread's request buffer moved or grew %d times: it is "
                "staged from now on", GR_REQPIN_MOVES);
    rp->said_moves = true;
    return false;
  }
  if (t->base) {
    drop (rp, t);
    rp->moved++;
  }
  /* Live buffers never overlap: a range that this one overlaps was
   * freed by its thread (which moved on, or is ending). */
  for (o = rp->head; o; o = o->next) {
    uintptr_t b = (uintptr_t) o->base;

    if (o != t && o->base && a < b + o->len && b < a + len) {
      drop (rp, o);
      rp->stale++;
    }
  }
  if (rp->bytes + len > rp->cap) {
    rp->over_cap++;
    if (!rp->said_cap)
      gr_debug ("request buffers page-locked: %zu bytes, the bound is %zu: "
                "a buffer of %zu bytes is staged", rp->bytes, rp->cap, len);
    rp->said_cap = true;
    return false;
  }
  t0 = gr_now ();
  r = rp->ops.reg (p, len);
  t0 = gr_now () - t0;
  rp->reg_s += t0;
  if (t0 > rp->reg_max_s)
    rp->reg_max_s = t0;
  if (r < 0) {
    rp->failed++;
    say_failed (rp, r, len);
    if (r == -EEXIST) {
      t->bad = p;
      t->bad_len = len;
    }
    else
      rp->off = true;
    return false;
  }
  t->regs++;
  rp->registered++;
  rp->bytes += len;
  rp->ranges++;
  __atomic_store_n (&t->len, len, __ATOMIC_RELEASE);
  __atomic_store_n (&t->base, p, __ATOMIC_RELEASE);
  gr_debug ("request buffer of a thread page-locked: %zu bytes (%zu bytes "
            "in %zu ranges)", len, rp->bytes, rp->ranges);
  return true;
}

bool
gr_reqpin_begin (struct gr_reqpin *rp, void *p, size_t len)
{
  struct tls *t;
  bool ok;

  if (len < GR_REQPIN_MIN || (t = get_tls (rp)) == NULL)
    return false;
  /* Only another thread finding the range stale changes it meanwhile,
   * and it cannot be stale while this thread's live buffer is in it. */
  ok = __atomic_load_n (&t->base, __ATOMIC_ACQUIRE) == p &&
    len <= __atomic_load_n (&t->len, __ATOMIC_ACQUIRE);
  if (!ok) {
    const double t0 = gr_now ();
    double w;

    pthread_mutex_lock (&rp->lock);
    ok = replace (rp, t, p, len);
    w = gr_now () - t0;
    rp->wait_s += w;
    if (w > rp->wait_max_s)
      rp->wait_max_s = w;
    pthread_mutex_unlock (&rp->lock);
  }
  if (ok) {
    rp->ops.in_use (p, true);
    t->used = p;
  }
  return ok;
}

void
gr_reqpin_end (struct gr_reqpin *rp)
{
  struct tls *t = pthread_getspecific (rp->key);

  if (t && t->used) {
    rp->ops.in_use (t->used, false);
    t->used = NULL;
  }
}

void
gr_reqpin_stats (struct gr_reqpin *rp, struct gr_reqpin_stats *s)
{
  pthread_mutex_lock (&rp->lock);
  *s = (struct gr_reqpin_stats) {
    .bytes = rp->bytes, .ranges = rp->ranges, .registered = rp->registered,
    .moved = rp->moved, .stale = rp->stale, .failed = rp->failed,
    .over_cap = rp->over_cap, .off = rp->off, .wait_s = rp->wait_s,
    .wait_max_s = rp->wait_max_s, .reg_s = rp->reg_s,
    .reg_max_s = rp->reg_max_s, .end_s = rp->end_s,
  };
  pthread_mutex_unlock (&rp->lock);
}
