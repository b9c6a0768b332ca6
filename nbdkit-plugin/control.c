/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the control socket.  See control.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>

#include "control.h"
#include "log.h"
#include "members.h"
#include "status.h"
#include "format/format.h"

struct gr_control {
  char *path;
  int fd;                       /* listening */
  int stop_pipe[2];             /* a byte written: stop */
  bool started;
  pthread_t thread;
  struct gr_array *a;
  struct gr_coding *coding;
};

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
  if (listen (c->fd, 8) == -1 || pipe2 (c->stop_pipe, O_CLOEXEC) == -1) {
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
  free (c);
  return NULL;
}

/* --- answers ------------------------------------------------------------- */

/* Parse a whole non-negative decimal number. */
static bool
parse_u64 (const char *s, uint64_t *out)
{
  char *end;

  if (*s < '0' || *s > '9')
    return false;
  errno = 0;
  *out = strtoull (s, &end, 10);
  return errno == 0 && *end == '\0';
}

static const char *
fail_refusal (enum gr_array_fail_outcome o)
{
  switch (o) {
  case GR_ARRAY_FAIL_DONE: return NULL;
  case GR_ARRAY_FAIL_NO_SUCH_MEMBER: return "no such member";
  case GR_ARRAY_FAIL_ALREADY: return "it has failed or is missing already";
  case GR_ARRAY_FAIL_NO_REDUNDANCY:
    return "m members have failed already: failing another would fail "
      "the array";
  case GR_ARRAY_FAIL_RESYNCING:
    return "a resync is running: the stripes it has not checked could not "
      "be rebuilt (gpuraidctl wait, then fail)";
  case GR_ARRAY_FAIL_READ_ONLY:
    return "the array is read-only (salvage=true)";
  case GR_ARRAY_FAIL_ARRAY_FAILED:
    return "the member was failed, but recording it failed other members: "
      "the array has failed";
  }
  return "?";
}

/* Answer one command line into f: "ok\n" + body, or "error: ...\n". */
static void
answer (struct gr_control *c, char *line, FILE *f)
{
  struct gr_members *ms = gr_array_members (c->a);
  struct gr_heal *h = gr_array_heal (c->a);
  char *arg = strchr (line, ' ');
  uint64_t v;
  int v_err;

  if (arg)
    *arg++ = '\0';
  if (strcmp (line, "status") == 0 && (arg == NULL || strcmp (arg, "json")
                                       == 0)) {
    fputs ("ok\n", f);
    gr_status_write (c->a, c->coding, f, arg != NULL);
  }
  else if (strcmp (line, "progress") == 0 && arg == NULL) {
    fputs ("ok\n", f);
    gr_status_progress_write (c->a, f);
  }
  else if (strcmp (line, "fail") == 0 && arg) {
    const char *why;

    if (!parse_u64 (arg, &v) || v >= (uint64_t) gr_members_n (ms)) {
      fprintf (f, "error: fail %s: no such member (indexes 0 to %d)\n", arg,
               gr_members_n (ms) - 1);
      return;
    }
    why = fail_refusal (gr_array_fail (c->a, (int) v,
                                       "failed by the operator "
                                       "(gpuraidctl fail)"));
    if (why)
      fprintf (f, "error: fail %" PRIu64 " (%s): %s\n", v,
               gr_members_path (ms, (int) v) ? gr_members_path (ms, (int) v)
               : "missing", why);
    else
      fprintf (f, "ok\nmember %" PRIu64 " failed; %d of %d members left\n",
               v, gr_members_n (ms) - gr_members_nfailed (ms),
               gr_members_n (ms));
  }
  else if (strcmp (line, "replace") == 0 && arg && strchr (arg, ' ')) {
    char *path = strchr (arg, ' ');
    enum gr_heal_outcome o;
    char why[256];
    int err;

    *path++ = '\0';
    if (!parse_u64 (arg, &v) || v >= (uint64_t) gr_members_n (ms)) {
      fprintf (f, "error: replace %s: no such member (indexes 0 to %d)\n",
               arg, gr_members_n (ms) - 1);
      return;
    }
    o = gr_heal_replace (h, (int) v, path, &err);
    if (o == GR_HEAL_STARTED) {
      fprintf (f, "ok\nrebuilding member %" PRIu64 " onto %s\n", v, path);
      return;
    }
    gr_heal_explain (o, err, why, sizeof why);
    fprintf (f, "error: replace %" PRIu64 ": %s: %s\n", v, path, why);
  }
  else if (strcmp (line, "spare") == 0 && arg &&
           strncmp (arg, "add ", 4) == 0) {
    enum gr_heal_outcome o = gr_heal_spare_add (h, arg + 4, -1, &v_err);
    char why[256];

    if (o == GR_HEAL_STARTED) {
      fprintf (f, "ok\nspare %s added\n", arg + 4);
      return;
    }
    gr_heal_explain (o, v_err, why, sizeof why);
    fprintf (f, "error: spare add %s: %s\n", arg + 4, why);
  }
  else if (strcmp (line, "scrub") == 0 && arg && strcmp (arg, "stop") == 0) {
    if (gr_heal_scrub_stop (h))
      fputs ("ok\nscrub stopped: the next gpuraidctl scrub goes on from "
             "there\n", f);
    else
      fputs ("error: scrub stop: no scrub is running\n", f);
  }
  else if (strcmp (line, "scrub") == 0 &&
           (arg == NULL || strcmp (arg, "repair") == 0)) {
    const bool repair = arg != NULL;
    const uint64_t width = gr_map_stripe_width (gr_exec_geom
                                                (gr_array_exec (c->a)));
    const enum gr_heal_outcome o = gr_heal_scrub (h, repair, &v);
    char why[256];

    if (o == GR_HEAL_STARTED) {
      fprintf (f, "ok\nscrub%s started", repair ? " --repair" : "");
      if (v)
        fprintf (f, ", going on from array byte %" PRIu64 " (stripe %"
                 PRIu64 ") where the last one stopped", v * width, v);
      fputc ('\n', f);
      return;
    }
    gr_heal_explain (o, gr_members_nfailed (ms), why, sizeof why);
    if (o == GR_HEAL_READ_ONLY)
      fprintf (f, "error: scrub --repair: %s; scrub without --repair only "
               "checks\n", why);
    else
      fprintf (f, "error: scrub: %s\n", why);
  }
  else if (strcmp (line, "rate") == 0 && arg) {
    if (strcmp (arg, "auto") == 0)
      v = GR_PACE_AUTO;
    else if (!parse_u64 (arg, &v) || v == GR_PACE_AUTO) {
      fprintf (f, "error: rate %s: give bytes a second as a whole number "
               "(0: no limit), or auto\n", arg);
      return;
    }
    gr_array_set_rate (c->a, v);
    if (v == GR_PACE_AUTO)
      fprintf (f, "ok\nrate limit auto (full speed while idle, a fifth of "
               "the time while clients do I/O)\n");
    else
      fprintf (f, "ok\nresync rate limit %" PRIu64 " bytes/s%s\n", v,
               v ? "" : " (none)");
  }
  else
    fprintf (f, "error: unknown command '%s%s%s' (status [json], progress, "
             "fail INDEX, replace INDEX PATH, spare add PATH, scrub [repair|stop], "
             "rate BYTES_PER_S|auto)\n", line,
             arg ? " " : "",
             arg ? arg : "");
}

/* Serve one connection. */
static void
serve (struct gr_control *c, int fd)
{
  const struct timeval tv = { .tv_sec = 2 };
  char line[256];
  size_t got = 0;
  char *body = NULL;
  size_t len = 0;
  FILE *f;

  (void) setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  (void) setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  while (got < sizeof line - 1) {
    ssize_t r = recv (fd, line + got, sizeof line - 1 - got, 0);

    if (r <= 0)
      break;
    got += (size_t) r;
    if (memchr (line, '\n', got))
      break;
  }
  line[got] = '\0';
  if (strchr (line, '\n') == NULL) {
    const char *e = "error: one command line, ending in a newline, of at "
      "most 255 bytes\n";
    (void) send (fd, e, strlen (e), MSG_NOSIGNAL);
    return;
  }
  *strchr (line, '\n') = '\0';
  f = open_memstream (&body, &len);
  if (f == NULL)
    return;
  gr_debug ("control: %s", line);
  answer (c, line, f);
  fclose (f);
  for (size_t off = 0; off < len;) {
    ssize_t r = send (fd, body + off, len - off, MSG_NOSIGNAL);

    if (r <= 0)
      break;
    off += (size_t) r;
  }
  free (body);
}

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
    if (fd == -1)
      continue;
    serve (c, fd);
    close (fd);
  }
}

int
gr_control_start (struct gr_control *c, struct gr_array *a,
                  struct gr_coding *coding)
{
  int e;

  c->a = a;
  c->coding = coding;
  e = pthread_create (&c->thread, NULL, control_thread, c);
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
    (void) !write (c->stop_pipe[1], "x", 1);
    pthread_join (c->thread, NULL);
  }
  close (c->stop_pipe[0]);
  close (c->stop_pipe[1]);
  close (c->fd);
  unlink (c->path);
  free (c->path);
  free (c);
}
