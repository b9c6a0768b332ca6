/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - a pool of threads that share out a job's CPU work.  See
 * pool.h. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "pool.h"
#include "common/thread.h"

/* One gr_pool_run call: its items, handed out in order. */
struct task {
  void (*fn) (void *arg, size_t i);
  void *arg;
  size_t n;
  size_t next;                  /* the next item to hand out */
  size_t done;                  /* items returned */
  struct task *link;            /* the next call's, in call order */
};

struct gr_pool {
  pthread_mutex_t lock;
  pthread_cond_t work;          /* an item to take, or stop */
  pthread_cond_t finished;      /* a task's last item returned */
  struct task *head, **tail;    /* tasks with items not handed out */
  bool stop;
  int nthreads;
  pthread_t *threads;
};

/* Under pool->lock: item i of t taken; t unlinked when it was its last. */
static size_t
take (struct gr_pool *pool, struct task *t)
{
  const size_t i = t->next++;

  if (t->next == t->n) {
    struct task **pp = &pool->head;

    while (*pp != t)
      pp = &(*pp)->link;
    *pp = t->link;
    if (pool->tail == &t->link)
      pool->tail = pp;
    t->link = NULL;
  }
  return i;
}

/* Run item i of t, the lock released meanwhile; under pool->lock. */
static void
run_item (struct gr_pool *pool, struct task *t, size_t i)
{
  pthread_mutex_unlock (&pool->lock);
  t->fn (t->arg, i);
  pthread_mutex_lock (&pool->lock);
  if (++t->done == t->n)
    pthread_cond_broadcast (&pool->finished);
}

static void *
worker (void *arg)
{
  struct gr_pool *pool = arg;

  pthread_mutex_lock (&pool->lock);
  for (;;) {
    /* The first call with an item to hand out (a call is unlinked once
     * every item of it is handed out). */
    struct task *t = pool->head;

    if (t)
      run_item (pool, t, take (pool, t));
    else if (pool->stop)
      break;
    else
      pthread_cond_wait (&pool->work, &pool->lock);
  }
  pthread_mutex_unlock (&pool->lock);
  return NULL;
}

struct gr_pool *
gr_pool_new (int threads)
{
  struct gr_pool *pool = calloc (1, sizeof *pool);

  if (pool == NULL)
    return NULL;
  pthread_mutex_init (&pool->lock, NULL);
  pthread_cond_init (&pool->work, NULL);
  pthread_cond_init (&pool->finished, NULL);
  pool->tail = &pool->head;
  if (threads > 0 &&
      (pool->threads = calloc ((size_t) threads, sizeof *pool->threads))) {
    for (int i = 0; i < threads; i++)
      if (gr_thread_create (&pool->threads[pool->nthreads], NULL, worker,
                          pool) == 0)
        pool->nthreads++;
  }
  return pool;
}

void
gr_pool_free (struct gr_pool *pool)
{
  if (pool == NULL)
    return;
  pthread_mutex_lock (&pool->lock);
  pool->stop = true;
  pthread_cond_broadcast (&pool->work);
  pthread_mutex_unlock (&pool->lock);
  for (int i = 0; i < pool->nthreads; i++)
    pthread_join (pool->threads[i], NULL);
  free (pool->threads);
  pthread_cond_destroy (&pool->finished);
  pthread_cond_destroy (&pool->work);
  pthread_mutex_destroy (&pool->lock);
  free (pool);
}

int
gr_pool_width (const struct gr_pool *pool)
{
  return pool ? pool->nthreads + 1 : 1;
}

void
gr_pool_run (struct gr_pool *pool, size_t n,
             void (*fn) (void *arg, size_t i), void *arg)
{
  struct task t = { .fn = fn, .arg = arg, .n = n };

  if (n == 0)
    return;
  if (pool == NULL || pool->nthreads == 0 || n == 1) {
    for (size_t i = 0; i < n; i++)
      fn (arg, i);
    return;
  }
  pthread_mutex_lock (&pool->lock);
  *pool->tail = &t;
  pool->tail = &t.link;
  pthread_cond_broadcast (&pool->work);
  /* The caller takes its own call's items too, then waits for the rest
   * (taken by the pool's threads) to return. */
  while (t.next < t.n)
    run_item (pool, &t, take (pool, &t));
  while (t.done < t.n)
    pthread_cond_wait (&pool->finished, &pool->lock);
  pthread_mutex_unlock (&pool->lock);
}
