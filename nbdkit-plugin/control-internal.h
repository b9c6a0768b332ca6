/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the control socket's state, shared by its two files
 * (control.c: the socket, the clients' threads, their deadlines, the
 * monitors; control-answer.c: the commands answered).  Nothing else
 * includes it; include control.h first. */
#ifndef GPURAID_CONTROL_INTERNAL_H
#define GPURAID_CONTROL_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>

/* Clients served at once, each by a thread of its own: one more is told
 * so in one line and closed. */
#define MAX_CLIENTS 16

enum slot_state {
  SLOT_FREE,
  SLOT_SERVING,                 /* its thread runs */
  SLOT_ENDED,                   /* its thread has ended: to be joined */
};

struct client {
  struct gr_control *c;
  pthread_t thread;
  int fd;
  enum slot_state state;        /* under c->lock */
};

struct gr_control {
  char *path;
  int fd;                       /* listening */
  int stop_pipe[2];             /* a byte written: stop (every thread) */
  bool started;
  pthread_t thread;             /* accepts */
  struct gr_array *a;
  struct gr_coding *coding;
  pthread_mutex_t lock;         /* the slots' states */
  pthread_mutex_t answer_lock;  /* one command answered at a time */
  struct client clients[MAX_CLIENTS];
};

/* Answer one command line into f: "ok\n" + body, or "error: ...\n"
 * (one command at a time: under answer_lock). */
void gr_control_answer (struct gr_control *c, char *line, FILE *f);

#endif /* GPURAID_CONTROL_INTERNAL_H */
