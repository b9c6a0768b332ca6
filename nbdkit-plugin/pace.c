/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - pacing a background job.  See pace.h. */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "pace.h"
#include "common/now.h"

struct gr_pace {
  pthread_mutex_t lock;
  pthread_cond_t cond;          /* stop, or a new rate */
  bool stop;
  uint64_t rate;                /* under lock, as the two below */
  double rate_t0;               /* when the rate was set */
  uint64_t rate_done0;          /* and the bytes done then */
  unsigned rate_gen;            /* + 1 at every gr_pace_set_rate */
  double t0;
  double t_end;                 /* under lock: 0, or when it finished */
  const uint64_t *activity;     /* GR_PACE_AUTO: the clients' requests */
  uint64_t seen;                /* the job's own: the count last seen */
  double back;                  /* and when gr_pace_wait last returned */
};

struct gr_pace *
gr_pace_new (uint64_t rate, const uint64_t *activity)
{
  struct gr_pace *p = calloc (1, sizeof *p);

  if (p == NULL)
    return NULL;
  pthread_mutex_init (&p->lock, NULL);
  pthread_cond_init (&p->cond, NULL);
  p->rate = rate;
  p->t0 = p->rate_t0 = p->back = gr_now ();
  p->activity = activity;
  if (activity)
    p->seen = __atomic_load_n (activity, __ATOMIC_RELAXED);
  return p;
}

void
gr_pace_free (struct gr_pace *p)
{
  if (p == NULL)
    return;
  pthread_mutex_destroy (&p->lock);
  pthread_cond_destroy (&p->cond);
  free (p);
}

/* Under p->lock: until stop, a new rate or the monotonic time until. */
static void
sleep_until (struct gr_pace *p, double until)
{
  const unsigned gen = p->rate_gen;

  while (!p->stop && p->rate_gen == gen) {
    double left = until - gr_now ();
    struct timespec ts;

    if (left <= 0)
      break;
    clock_gettime (CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t) left;
    ts.tv_nsec += (long) ((left - (double) (time_t) left) * 1e9);
    if (ts.tv_nsec >= 1000000000) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait (&p->cond, &p->lock, &ts);
  }
}

bool
gr_pace_wait (struct gr_pace *p, uint64_t done)
{
  bool stop;

  pthread_mutex_lock (&p->lock);
  if (p->rate == GR_PACE_AUTO && p->activity) {
    const double t = gr_now ();
    double step = t - p->back;

    if (__atomic_load_n (p->activity, __ATOMIC_RELAXED) != p->seen) {
      if (step > 2.0 / GR_PACE_YIELD)
        step = 2.0 / GR_PACE_YIELD;   /* at most 2 s at once */
      sleep_until (p, t + GR_PACE_YIELD * step);
    }
    p->seen = __atomic_load_n (p->activity, __ATOMIC_RELAXED);
  }
  while (!p->stop && p->rate > 0 && p->rate != GR_PACE_AUTO) {
    double left = p->rate_t0 + (double) (done - p->rate_done0) / p->rate
      - gr_now ();

    if (left <= 0)
      break;
    sleep_until (p, gr_now () + left);
  }
  p->back = gr_now ();
  stop = p->stop;
  pthread_mutex_unlock (&p->lock);
  return stop;
}


void
gr_pace_set_rate (struct gr_pace *p, uint64_t rate, uint64_t done)
{
  pthread_mutex_lock (&p->lock);
  p->rate = rate;
  p->rate_t0 = gr_now ();
  p->rate_done0 = done;
  p->rate_gen++;
  pthread_cond_broadcast (&p->cond);
  pthread_mutex_unlock (&p->lock);
}

uint64_t
gr_pace_batch (struct gr_pace *p, uint64_t unit, uint64_t max)
{
  const uint64_t rate = gr_pace_rate (p);
  uint64_t n;

  if (rate == 0 || rate == GR_PACE_AUTO)
    return max;
  n = rate / 10 / unit;
  return n < 1 ? 1 : n < max ? n : max;
}

uint64_t
gr_pace_rate (struct gr_pace *p)
{
  uint64_t r;

  pthread_mutex_lock (&p->lock);
  r = p->rate;
  pthread_mutex_unlock (&p->lock);
  return r;
}

void
gr_pace_stop (struct gr_pace *p)
{
  pthread_mutex_lock (&p->lock);
  p->stop = true;
  pthread_cond_broadcast (&p->cond);
  pthread_mutex_unlock (&p->lock);
}

void
gr_pace_finish (struct gr_pace *p)
{
  pthread_mutex_lock (&p->lock);
  p->t_end = gr_now ();
  pthread_mutex_unlock (&p->lock);
}

double
gr_pace_seconds (struct gr_pace *p)
{
  double t;

  pthread_mutex_lock (&p->lock);
  t = (p->t_end > 0 ? p->t_end : gr_now ()) - p->t0;
  pthread_mutex_unlock (&p->lock);
  return t;
}
