/* gpuraid - pacing a background job.  See pace.h. */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "pace.h"

struct gr_pace {
  pthread_mutex_t lock;
  pthread_cond_t cond;          /* stop, or a new rate */
  bool stop;
  uint64_t rate;                /* under lock, as the two below */
  double rate_t0;               /* when the rate was set */
  uint64_t rate_done0;          /* and the bytes done then */
  double t0;
  double t_end;                 /* under lock: 0, or when it finished */
};

static double
now (void)
{
  struct timespec t;

  clock_gettime (CLOCK_MONOTONIC, &t);
  return (double) t.tv_sec + t.tv_nsec / 1e9;
}

struct gr_pace *
gr_pace_new (uint64_t rate)
{
  struct gr_pace *p = calloc (1, sizeof *p);

  if (p == NULL)
    return NULL;
  pthread_mutex_init (&p->lock, NULL);
  pthread_cond_init (&p->cond, NULL);
  p->rate = rate;
  p->t0 = p->rate_t0 = now ();
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

bool
gr_pace_wait (struct gr_pace *p, uint64_t done)
{
  bool stop;

  pthread_mutex_lock (&p->lock);
  while (!p->stop && p->rate > 0) {
    double left = p->rate_t0 + (double) (done - p->rate_done0) / p->rate
      - now ();
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
  stop = p->stop;
  pthread_mutex_unlock (&p->lock);
  return stop;
}

void
gr_pace_set_rate (struct gr_pace *p, uint64_t rate, uint64_t done)
{
  pthread_mutex_lock (&p->lock);
  p->rate = rate;
  p->rate_t0 = now ();
  p->rate_done0 = done;
  pthread_cond_broadcast (&p->cond);
  pthread_mutex_unlock (&p->lock);
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
  p->t_end = now ();
  pthread_mutex_unlock (&p->lock);
}

double
gr_pace_seconds (struct gr_pace *p)
{
  double t;

  pthread_mutex_lock (&p->lock);
  t = (p->t_end > 0 ? p->t_end : now ()) - p->t0;
  pthread_mutex_unlock (&p->lock);
  return t;
}
