/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the control socket.  See control.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "control.h"
#include "control-internal.h"
#include "events.h"
#include "common/size.h"
#include "log.h"
#include "members.h"
#include "status.h"
#include "format/format.h"
#include "common/thread.h"

/* Seconds a client has to send its whole command line, and to take its
 * answer once it is ready. */
#define DEADLINE_S 5
#define STR_(x) #x
#define STR(x) STR_ (x)

struct gr_control *
gr_control_open (const char *path)
{
  struct gr_control *c = calloc (1, sizeof *c);
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  struct stat st;
  mode_t old;

  if (c == NULL || (c->path = strdup (path)) == NULL) {
    nbdkit_error ("control=%s: %m", path);
    free (c);
    return NULL;
  }
  c->stop_pipe[0] = c->stop_pipe[1] = -1;
  pthread_mutex_init (&c->lock, NULL);
  pthread_mutex_init (&c->answer_lock, NULL);
  snprintf (sa.sun_path, sizeof sa.sun_path, "%s", path);
  c->fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c->fd == -1) {
    nbdkit_error ("control=%s: socket: %m", path);
    goto err;
  }
  if (lstat (path, &st) == 0) {
    int probe;

    if (!S_ISSOCK (st.st_mode)) {
      nbdkit_error ("control=%s: exists and is not a socket (not removed)",
                    path);
      goto err;
    }
    probe = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe >= 0 && connect (probe, (struct sockaddr *) &sa, sizeof sa)
        == 0) {
      close (probe);
      nbdkit_error ("control=%s: another server answers on this socket",
                    path);
      goto err;
    }
    if (probe >= 0)
      close (probe);
    unlink (path);              /* stale: left by a server that died */
  }
  /* Owner-only from its creation (single-threaded here). */
  old = umask (0177);
  if (bind (c->fd, (struct sockaddr *) &sa, sizeof sa) == -1) {
    umask (old);
    nbdkit_error ("control=%s: bind: %m", path);
    goto err;
  }
  umask (old);
  if (listen (c->fd, MAX_CLIENTS) == -1 || pipe2 (c->stop_pipe, O_CLOEXEC) == -1) {
    nbdkit_error ("control=%s: %m", path);
    unlink (path);
    goto err;
  }
  gr_debug ("control socket %s", path);
  return c;

 err:
  if (c->fd >= 0)
    close (c->fd);
  free (c->path);
  pthread_mutex_destroy (&c->answer_lock);
  pthread_mutex_destroy (&c->lock);
  free (c);
  return NULL;
}

/* --- clients ------------------------------------------------------------- */

/* Milliseconds from now to deadline (CLOCK_MONOTONIC); 0 once past. */
static int
ms_left (const struct timespec *deadline)
{
  struct timespec now;
  int64_t ms;

  clock_gettime (CLOCK_MONOTONIC, &now);
  ms = (int64_t) (deadline->tv_sec - now.tv_sec) * 1000 +
    (deadline->tv_nsec - now.tv_nsec) / 1000000;
  return ms <= 0 ? 0 : ms > INT_MAX ? INT_MAX : (int) ms;
}

/* DEADLINE_S from now. */
static void
deadline_from_now (struct timespec *deadline)
{
  clock_gettime (CLOCK_MONOTONIC, deadline);
  deadline->tv_sec += DEADLINE_S;
}

enum wait_outcome { WAIT_READY, WAIT_DEADLINE, WAIT_STOP, WAIT_ERROR };

/* Until fd has events (or a hang-up or error, which the next recv or
 * send tells), the deadline passes or the server stops. */
static enum wait_outcome
wait_for (struct gr_control *c, int fd, short events,
          const struct timespec *deadline)
{
  for (;;) {
    struct pollfd pf[2] = { { .fd = fd, .events = events },
                            { .fd = c->stop_pipe[0], .events = POLLIN } };
    const int ms = ms_left (deadline);
    int r;

    if (ms == 0)
      return WAIT_DEADLINE;
    r = poll (pf, 2, ms);
    if (r == -1 && errno == EINTR)
      continue;
    if (r == -1)
      return WAIT_ERROR;
    if (pf[1].revents)
      return WAIT_STOP;
    if (pf[0].revents)
      return WAIT_READY;
  }
}

enum client_outcome {
  CLIENT_DONE,                  /* the line read, or the answer sent */
  CLIENT_BAD_LINE,              /* no newline in 255 bytes, or the end of
                                 * the connection before one */
  CLIENT_DEADLINE,              /* DEADLINE_S passed */
  CLIENT_GONE,                  /* the connection failed */
  CLIENT_STOP,                  /* the server stops */
};

static enum client_outcome
client_outcome (enum wait_outcome w)
{
  switch (w) {
  case WAIT_READY: return CLIENT_DONE;
  case WAIT_DEADLINE: return CLIENT_DEADLINE;
  case WAIT_STOP: return CLIENT_STOP;
  case WAIT_ERROR: break;
  }
  return CLIENT_GONE;
}

/* Read one command line into line[size] (the newline dropped), all of
 * it within DEADLINE_S of the call. */
static enum client_outcome
read_line (struct gr_control *c, int fd, char *line, size_t size)
{
  struct timespec deadline;
  size_t got = 0;

  deadline_from_now (&deadline);
  while (got < size - 1) {
    const enum wait_outcome w = wait_for (c, fd, POLLIN, &deadline);
    ssize_t r;
    char *nl;

    if (w != WAIT_READY)
      return client_outcome (w);
    r = recv (fd, line + got, size - 1 - got, MSG_DONTWAIT);
    if (r == -1 && (errno == EAGAIN || errno == EWOULDBLOCK ||
                    errno == EINTR))
      continue;
    if (r == -1)
      return CLIENT_GONE;
    if (r == 0)
      break;
    got += (size_t) r;
    line[got] = '\0';
    nl = memchr (line, '\n', got);
    if (nl) {
      *nl = '\0';
      return CLIENT_DONE;
    }
  }
  return CLIENT_BAD_LINE;
}

/* Send buf[len] whole, within DEADLINE_S of the call. */
static enum client_outcome
send_all (struct gr_control *c, int fd, const char *buf, size_t len)
{
  struct timespec deadline;
  size_t off = 0;

  deadline_from_now (&deadline);
  while (off < len) {
    const ssize_t r = send (fd, buf + off, len - off,
                            MSG_NOSIGNAL | MSG_DONTWAIT);
    enum wait_outcome w;

    if (r >= 0) {
      off += (size_t) r;
      continue;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return CLIENT_GONE;
    w = wait_for (c, fd, POLLOUT, &deadline);
    if (w != WAIT_READY)
      return client_outcome (w);
  }
  return CLIENT_DONE;
}

/* One line to a client that is closed next, if it takes it now. */
static void
say (int fd, const char *line)
{
  (void) send (fd, line, strlen (line), MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* "monitor [json]": the events from now on, each as one line as it is
 * posted (events.h), until the client goes, the server stops, or the
 * client takes no line for DEADLINE_S. */
static void
monitor (struct gr_control *c, int fd, bool json)
{
  uint64_t seq = gr_events_next_seq (), lost;
  struct gr_event_msg e;
  char line[2048];

  if (send_all (c, fd, "ok\n", 3) != CLIENT_DONE)
    return;
  for (;;) {
    struct pollfd pf[2] = { { .fd = fd, .events = POLLIN },
                            { .fd = c->stop_pipe[0], .events = POLLIN } };
    enum client_outcome o;

    /* The client sends nothing more: readable means it has gone. */
    if (poll (pf, 2, 0) > 0)
      return;
    if (gr_events_next (&seq, &lost, &e, 200) != GR_EVENTS_GOT)
      continue;
    if (lost) {
      if (json)
        snprintf (line, sizeof line, "{\"event\": \"lost\", \"count\": %"
                  PRIu64 "}\n", lost);
      else
        snprintf (line, sizeof line, "lost %" PRIu64 " events (this "
                  "monitor fell behind)\n", lost);
      if (send_all (c, fd, line, strlen (line)) != CLIENT_DONE)
        return;
    }
    seq++;
    gr_event_format (&e, json, line, sizeof line);
    o = send_all (c, fd, line, strlen (line));
    if (o == CLIENT_DEADLINE)
      gr_debug ("control: a monitor did not take an event in %d s: "
                "disconnected", DEADLINE_S);
    if (o != CLIENT_DONE)
      return;
  }
}

/* Serve one connection: its line, the answer (one command answered at
 * a time), nothing waiting for the client longer than DEADLINE_S. */
static void
serve (struct gr_control *c, int fd)
{
  char line[256];
  char *body = NULL;
  size_t len = 0;
  FILE *f;

  switch (read_line (c, fd, line, sizeof line)) {
  case CLIENT_DONE:
    break;
  case CLIENT_BAD_LINE:
    say (fd, "error: one command line, ending in a newline, of at most 255 "
         "bytes\n");
    return;
  case CLIENT_DEADLINE:
    /* Not a warning: nothing for the operator to do. */
    gr_debug ("control: a client sent no command line in %d s: "
              "disconnected", DEADLINE_S);
    say (fd, "error: no whole command line in " STR (DEADLINE_S) " s\n");
    return;
  case CLIENT_GONE:
  case CLIENT_STOP:
    return;
  }
  if (strcmp (line, "monitor") == 0 || strcmp (line, "monitor json") == 0) {
    gr_debug ("control: %s", line);
    monitor (c, fd, line[7] != '\0');
    return;
  }
  f = open_memstream (&body, &len);
  if (f == NULL) {
    say (fd, "error: out of memory\n");
    return;
  }
  gr_debug ("control: %s", line);
  pthread_mutex_lock (&c->answer_lock);
  gr_control_answer (c, line, f);
  pthread_mutex_unlock (&c->answer_lock);
  if (fclose (f) == 0 &&
      send_all (c, fd, body, len) == CLIENT_DEADLINE)
    gr_debug ("control: a client did not take its answer in %d s: "
              "disconnected", DEADLINE_S);
  free (body);
}

static void *
client_thread (void *arg)
{
  struct client *cl = arg;
  struct gr_control *c = cl->c;

  serve (c, cl->fd);
  close (cl->fd);
  pthread_mutex_lock (&c->lock);
  cl->state = SLOT_ENDED;
  pthread_mutex_unlock (&c->lock);
  return NULL;
}

/* A slot for a new client (the threads of clients served are joined
 * first), or NULL: MAX_CLIENTS are being served. */
static struct client *
take_slot (struct gr_control *c)
{
  struct client *slot = NULL;

  pthread_mutex_lock (&c->lock);
  for (int i = 0; i < MAX_CLIENTS; i++) {
    struct client *cl = &c->clients[i];

    if (cl->state == SLOT_ENDED) {
      pthread_join (cl->thread, NULL);
      cl->state = SLOT_FREE;
    }
    if (cl->state == SLOT_FREE && slot == NULL)
      slot = cl;
  }
  if (slot)
    slot->state = SLOT_SERVING;
  pthread_mutex_unlock (&c->lock);
  return slot;
}

/* A thread of its own for the client on fd; or one error line and the
 * connection closed. */
static void
take_client (struct gr_control *c, int fd)
{
  struct client *cl = take_slot (c);
  int e;

  if (cl == NULL) {
    gr_debug ("control: %d clients at once: one more refused", MAX_CLIENTS);
    say (fd, "error: too many control clients at once (" STR (MAX_CLIENTS)
         "): try again in a few seconds\n");
    close (fd);
    return;
  }
  cl->c = c;
  cl->fd = fd;
  e = gr_thread_create (&cl->thread, NULL, client_thread, cl);
  if (e != 0) {
    gr_debug ("control: pthread_create: %s: a client refused", strerror (e));
    say (fd, "error: the server cannot serve a client now (no thread)\n");
    close (fd);
    pthread_mutex_lock (&c->lock);
    cl->state = SLOT_FREE;
    pthread_mutex_unlock (&c->lock);
  }
}

/* Accepts clients until the server stops. */
static void *
control_thread (void *arg)
{
  struct gr_control *c = arg;
  struct pollfd pf[2] = { { .fd = c->fd, .events = POLLIN },
                          { .fd = c->stop_pipe[0], .events = POLLIN } };

  for (;;) {
    int fd;

    if (poll (pf, 2, -1) == -1) {
      if (errno == EINTR)
        continue;
      nbdkit_error ("control=%s: poll: %m; the control socket stops",
                    c->path);
      return NULL;
    }
    if (pf[1].revents)
      return NULL;
    fd = accept4 (c->fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0)
      take_client (c, fd);
    else if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
             errno == ENOMEM)
      /* Not a busy loop while descriptors run out: a tenth of a second
       * (a stop ends it). */
      (void) poll (&pf[1], 1, 100);
  }
}

int
gr_control_start (struct gr_control *c, struct gr_array *a,
                  struct gr_coding *coding)
{
  int e;

  c->a = a;
  c->coding = coding;
  e = gr_thread_create (&c->thread, NULL, control_thread, c);
  if (e != 0) {
    errno = e;
    nbdkit_error ("control=%s: pthread_create: %m", c->path);
    return -1;
  }
  c->started = true;
  return 0;
}

void
gr_control_close (struct gr_control *c)
{
  if (c == NULL)
    return;
  if (c->started) {
    /* The byte stays in the pipe: every thread's poll sees it. */
    (void) !write (c->stop_pipe[1], "x", 1);
    pthread_join (c->thread, NULL);
    for (int i = 0; i < MAX_CLIENTS; i++) {
      enum slot_state st;

      pthread_mutex_lock (&c->lock);
      st = c->clients[i].state;
      pthread_mutex_unlock (&c->lock);
      if (st != SLOT_FREE)
        pthread_join (c->clients[i].thread, NULL);
    }
  }
  close (c->stop_pipe[0]);
  close (c->stop_pipe[1]);
  close (c->fd);
  unlink (c->path);
  free (c->path);
  pthread_mutex_destroy (&c->answer_lock);
  pthread_mutex_destroy (&c->lock);
  free (c);
}
