/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the threads we start, header only, so that every folder may
 * include it (the plugin, storage/, gpu/):
 *
 *   gr_thread_create (t, attr, fn, arg)   pthread_create, with every
 *                    signal blocked in the new thread; the error number
 *
 * A signal sent to the server (SIGTERM, SIGINT, SIGHUP) is for nbdkit:
 * its handler asks the server to quit, and the kernel runs it in any
 * thread that does not block the signal.  Landing in one of ours, it
 * would interrupt what that thread was doing (a system call answering
 * EINTR, a library's call).  Ours take none; a program one of them
 * starts must set its own mask (posix_spawnattr_setsigmask), or it
 * inherits this one. */
#ifndef GPURAID_COMMON_THREAD_H
#define GPURAID_COMMON_THREAD_H

#include <pthread.h>
#include <signal.h>

static inline int
gr_thread_create (pthread_t *t, const pthread_attr_t *attr,
                  void *(*fn) (void *), void *arg)
{
  sigset_t all, old;
  int e;

  sigfillset (&all);
  pthread_sigmask (SIG_SETMASK, &all, &old);
  e = pthread_create (t, attr, fn, arg);
  pthread_sigmask (SIG_SETMASK, &old, NULL);
  return e;
}

#endif
