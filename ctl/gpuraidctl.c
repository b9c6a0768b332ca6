/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraidctl - look at and steer a gpuraid array.
 *
 *   gpuraidctl examine MEMBER...          offline: each member's superblock
 *                                         and what an assembly would do
 *   gpuraidctl scan GLOB... [--json]      offline: the arrays whose
 *                                         superblocks the files and devices
 *                                         GLOB names hold, their members,
 *                                         states, events and spares
 *   gpuraidctl map OFFSET MEMBER...       offline: where the array's byte
 *                                         OFFSET lives (member, offset), and
 *                                         its stripe's parity
 *   gpuraidctl -c PATH status [--json]    the running array (control=PATH)
 *   gpuraidctl -c PATH fail INDEX         fail a member now
 *   gpuraidctl -c PATH replace INDEX NEWPATH  rebuild a failed member
 *                                         onto NEWPATH, online
 *   gpuraidctl -c PATH replace --live INDEX NEWPATH  copy an active
 *                                         member onto NEWPATH while it
 *                                         stays in service, then swap
 *   gpuraidctl -c PATH re-add INDEX [PATH]  a member back: only what
 *                                         was written since it left is
 *                                         rebuilt (else all of it)
 *   gpuraidctl -c PATH spare add PATH     a hot spare, used when a member
 *                                         fails
 *   gpuraidctl -c PATH scrub [--repair]   check every stripe's parity
 *                                         (and repair what it can name)
 *   gpuraidctl -c PATH scrub --stop       stop it (the next goes on)
 *   gpuraidctl -c PATH rate BYTES_PER_S|auto  the resync's, rebuild's
 *                                         and scrub's rate limit (a
 *                                         size: 50M, 1G, 4096; 0: none)
 *   gpuraidctl -c PATH wait               until the running operation ends
 *   gpuraidctl -c PATH monitor [--json] [--count N]  the events as they
 *                                         happen (a member failed, a
 *                                         rebuild finished, ...), one a
 *                                         line, until the server stops
 *                                         (or N events)
 *
 * The control protocol is in nbdkit-plugin/control.h.  examine opens the
 * members read-only and decides with the assembly code the plugin uses
 * (format/format.h).  Every refusal is one line on stderr and
 * exit 1; a usage error exits 2. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "ctl/ctl.h"
#include "format/format.h"
#include "storage/storage.h"

static void
usage (FILE *f)
{
  static const char *const lines[] = {
    "examine MEMBER...",
    "scan GLOB... [--json]",
    "map OFFSET MEMBER...",
    "-c CONTROL_SOCKET status [--json]",
    "-c CONTROL_SOCKET fail INDEX",
    "-c CONTROL_SOCKET replace [--live] INDEX NEWPATH",
    "-c CONTROL_SOCKET re-add INDEX [PATH]",
    "-c CONTROL_SOCKET spare add PATH",
    "-c CONTROL_SOCKET scrub [--repair | --stop]",
    "-c CONTROL_SOCKET rate BYTES_PER_S|auto",
    "-c CONTROL_SOCKET wait",
    "-c CONTROL_SOCKET monitor [--json] [--count N]",
  };

  for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
    fprintf (f, "%s %s %s\n", i ? "      " : "usage:", ctl_prog, lines[i]);
}

/* --- the control socket -------------------------------------------------- */

/* A connection to the control socket (dies if there is none). */
static int
connect_to (const char *sock)
{
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  int fd;

  if (strlen (sock) >= sizeof sa.sun_path)
    ctl_die ("-c %s: path too long for a socket", sock);
  strcpy (sa.sun_path, sock);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd == -1)
    ctl_die ("socket: %s", strerror (errno));
  if (connect (fd, (struct sockaddr *) &sa, sizeof sa) == -1)
    ctl_die ("cannot reach the array's control socket %s: %s (is nbdkit "
         "running with control=%s?)", sock, strerror (errno), sock);
  return fd;
}

/* Send cmd, return the body of an "ok" answer (malloc'd); an "error:"
 * answer dies with its line. */
static char *
request (const char *sock, const char *cmd)
{
  char *buf = NULL;
  size_t len = 0, cap = 0;
  const int fd = connect_to (sock);

  /* A server that refuses at once (too many clients) has said why and
   * closed: the send fails (EPIPE), and the answer is read all the same;
   * after it a recv says ECONNRESET (our line was not read), not 0. */
  if ((send (fd, cmd, strlen (cmd), MSG_NOSIGNAL) != (ssize_t) strlen (cmd)
       || send (fd, "\n", 1, MSG_NOSIGNAL) != 1) && errno != EPIPE)
    ctl_die ("%s: send: %s", sock, strerror (errno));
  for (;;) {
    ssize_t r;

    if (len + 4096 > cap) {
      cap = cap ? 2 * cap : 65536;
      buf = realloc (buf, cap + 1);
      if (buf == NULL)
        ctl_die ("out of memory");
    }
    r = recv (fd, buf + len, cap - len, 0);
    if (r == -1 && errno == EINTR)
      continue;
    if (r == -1 && errno == ECONNRESET && len > 0)
      break;
    if (r == -1)
      ctl_die ("%s: recv: %s", sock, strerror (errno));
    if (r == 0)
      break;
    len += (size_t) r;
  }
  close (fd);
  if (buf == NULL)
    ctl_die ("%s: the server closed the connection without an answer", sock);
  buf[len] = '\0';
  if (strncmp (buf, "ok\n", 3) == 0) {
    memmove (buf, buf + 3, len - 2);
    return buf;
  }
  if (strncmp (buf, "error: ", 7) == 0) {
    buf[strcspn (buf, "\n")] = '\0';
    ctl_die ("%s", buf + 7);
  }
  ctl_die ("%s: not a gpuraid control socket (unexpected answer)", sock);
}

/* gpuraidctl monitor: the events, each line as it comes, until the
 * server closes (0) or count lines were printed (count 0: no limit). */
static int
monitor (const char *sock, bool json, unsigned long count)
{
  const int fd = connect_to (sock);
  const char *cmd = json ? "monitor json\n" : "monitor\n";
  FILE *in;
  char *line = NULL;
  size_t cap = 0;
  bool first = true;
  unsigned long got = 0;

  if (send (fd, cmd, strlen (cmd), MSG_NOSIGNAL) != (ssize_t) strlen (cmd))
    ctl_die ("%s: send: %s", sock, strerror (errno));
  in = fdopen (fd, "r");
  if (in == NULL)
    ctl_die ("fdopen: %s", strerror (errno));
  while (getline (&line, &cap, in) > 0) {
    if (first) {
      first = false;
      if (strncmp (line, "error: ", 7) == 0) {
        line[strcspn (line, "\n")] = '\0';
        ctl_die ("%s", line + 7);
      }
      if (strcmp (line, "ok\n") != 0)
        ctl_die ("%s: not a gpuraid control socket (unexpected answer)", sock);
      continue;
    }
    fputs (line, stdout);
    fflush (stdout);
    if (count && ++got == count)
      break;
  }
  free (line);
  fclose (in);
  if (first)
    ctl_die ("%s: the server closed the connection without an answer", sock);
  return 0;
}

/* gpuraidctl wait: poll "progress" until the operation ends. */
static int
wait_op (const char *sock)
{
  const bool tty = isatty (STDOUT_FILENO);
  int last_pct = -1;
  time_t last_line = 0;

  for (;;) {
    char *p = request (sock, "progress"), op[16], state[32];
    uint64_t done, total, limit;
    double secs;

    if (strncmp (p, "none", 4) == 0) {
      free (p);
      printf ("no operation is running\n");
      return 0;
    }
    if (sscanf (p, "%15s %31s %" SCNu64 " %" SCNu64 " %lf %" SCNu64, op,
                state, &done, &total, &secs, &limit) != 6)
      ctl_die ("%s: cannot read the progress line: %s", sock, p);
    free (p);
    {
      const double pct = total ? 100.0 * done / total : 100.0;
      const double rate = secs > 0 ? done / secs : 0;
      const double left = rate > 0 ? (total - done) / rate : 0;

      if (strcmp (state, "running") != 0) {
        if (tty)
          printf ("\n");
        printf ("%s %s: %.1f%% (%" PRIu64 " of %" PRIu64 " MiB) in "
                "%.2f s\n", op, state, pct, done >> 20, total >> 20, secs);
        return strcmp (state, "done") == 0 ? 0 : 1;
      }
      if (tty) {
        const int w = 40, fill = (int) (pct * w / 100);

        printf ("\r%s [%.*s%*s] %5.1f%% %8.1f MiB/s %6.0f s left", op,
                fill, "========================================",
                w - fill, "", pct, rate / 1048576, left);
        fflush (stdout);
      }
      else if ((int) pct / 10 != last_pct / 10 || time (NULL) - last_line >= 10) {
        printf ("%s running: %.1f%% (%" PRIu64 " of %" PRIu64 " MiB), "
                "%.1f MiB/s, %.0f s left\n", op, pct, done >> 20, total >> 20,
                rate / 1048576, left);
        fflush (stdout);
        last_pct = (int) pct;
        last_line = time (NULL);
      }
    }
    usleep (200000);
  }
}

int
main (int argc, char **argv)
{
  const char *sock = NULL;
  int i = 1;

  if (argc > 1 && (strcmp (argv[1], "--help") == 0 ||
                   strcmp (argv[1], "-h") == 0)) {
    usage (stdout);
    return 0;
  }
  if (i + 1 < argc && strcmp (argv[i], "-c") == 0) {
    sock = argv[i + 1];
    i += 2;
  }
  if (i >= argc) {
    usage (stderr);
    return 2;
  }
  /* Block devices read below the page cache, as the plugin's default
   * (direct=auto) writes them: no page of a superblock cached here that
   * the server's next O_DIRECT write would leave stale. */
  gr_disk_set_direct (GR_DIRECT_AUTO);
  if (strcmp (argv[i], "examine") == 0) {
    if (sock)
      ctl_die ("examine reads the members themselves: no -c");
    return ctl_examine (argc - i - 1, argv + i + 1);
  }
  if (strcmp (argv[i], "scan") == 0) {
    if (sock)
      ctl_die ("scan reads the files and devices themselves: no -c");
    return ctl_scan (argc - i - 1, argv + i + 1);
  }
  if (strcmp (argv[i], "map") == 0) {
    if (sock)
      ctl_die ("map reads the members themselves: no -c");
    return ctl_map (argc - i - 1, argv + i + 1);
  }
  if (sock == NULL) {
    fprintf (stderr, "%s: %s needs -c CONTROL_SOCKET (the plugin's "
             "control=PATH)\n", ctl_prog, argv[i]);
    return 2;
  }
  if (strcmp (argv[i], "status") == 0 && argc - i <= 2) {
    const bool json = argc - i == 2;
    char *body;

    if (json && strcmp (argv[i + 1], "--json") != 0) {
      fprintf (stderr, "%s: status %s: the only option is --json\n", ctl_prog,
               argv[i + 1]);
      return 2;
    }
    body = request (sock, json ? "status json" : "status");
    fputs (body, stdout);
    free (body);
    return 0;
  }
  if ((strcmp (argv[i], "fail") == 0 || strcmp (argv[i], "rate") == 0)
      && argc - i == 2) {
    char cmd[256], *body;

    snprintf (cmd, sizeof cmd, "%s %s", argv[i], argv[i + 1]);
    if (strchr (argv[i + 1], '\n'))
      ctl_die ("%s: a newline in the argument", argv[i]);
    body = request (sock, cmd);
    fputs (body, stdout);
    free (body);
    return 0;
  }
  if (strcmp (argv[i], "replace") == 0 &&
      (argc - i == 3 || (argc - i == 4 && strcmp (argv[i + 1], "--live")
                         == 0))) {
    const bool live = argc - i == 4;
    char cmd[PATH_MAX + 64], *body, *abs;

    if (live)
      i++;
    abs = ctl_member_path (argv[i + 2]);
    if (abs == NULL)
      ctl_die ("replace %s %s: %s", argv[i + 1], argv[i + 2], strerror (errno));
    if (strchr (abs, '\n') || strchr (argv[i + 1], ' '))
      ctl_die ("replace: a newline or space where it cannot be");
    snprintf (cmd, sizeof cmd, "%s %s %s", live ? "replace-live" : "replace",
              argv[i + 1], abs);
    free (abs);
    body = request (sock, cmd);
    fputs (body, stdout);
    free (body);
    return 0;
  }
  if (strcmp (argv[i], "re-add") == 0 && (argc - i == 2 || argc - i == 3)) {
    char cmd[PATH_MAX + 64], *body, *abs = NULL;

    if (argc - i == 3 && (abs = ctl_member_path (argv[i + 2])) == NULL)
      ctl_die ("re-add %s %s: %s", argv[i + 1], argv[i + 2], strerror (errno));
    if ((abs && strchr (abs, '\n')) || strchr (argv[i + 1], ' ') ||
        strchr (argv[i + 1], '\n'))
      ctl_die ("re-add: a newline or space where it cannot be");
    snprintf (cmd, sizeof cmd, "re-add %s%s%s", argv[i + 1], abs ? " " : "",
              abs ? abs : "");
    free (abs);
    body = request (sock, cmd);
    fputs (body, stdout);
    free (body);
    return 0;
  }
  if (strcmp (argv[i], "spare") == 0 && argc - i == 3 &&
      strcmp (argv[i + 1], "add") == 0) {
    char cmd[PATH_MAX + 64], *body, *abs = ctl_member_path (argv[i + 2]);

    if (abs == NULL)
      ctl_die ("spare add %s: %s", argv[i + 2], strerror (errno));
    if (strchr (abs, '\n'))
      ctl_die ("spare add: a newline in the path");
    snprintf (cmd, sizeof cmd, "spare add %s", abs);
    free (abs);
    body = request (sock, cmd);
    fputs (body, stdout);
    free (body);
    return 0;
  }
  if (strcmp (argv[i], "scrub") == 0 && argc - i <= 2) {
    const char *cmd = "scrub";
    char *body;

    if (argc - i == 2) {
      if (strcmp (argv[i + 1], "--repair") == 0)
        cmd = "scrub repair";
      else if (strcmp (argv[i + 1], "--stop") == 0)
        cmd = "scrub stop";
      else {
        fprintf (stderr, "%s: scrub %s: the options are --repair and "
                 "--stop\n", ctl_prog, argv[i + 1]);
        return 2;
      }
    }
    body = request (sock, cmd);
    fputs (body, stdout);
    free (body);
    return 0;
  }
  if (strcmp (argv[i], "wait") == 0 && argc - i == 1)
    return wait_op (sock);
  if (strcmp (argv[i], "monitor") == 0) {
    bool json = false;
    unsigned long count = 0;
    char *end;

    for (int j = i + 1; j < argc; j++)
      if (strcmp (argv[j], "--json") == 0)
        json = true;
      else if (strcmp (argv[j], "--count") == 0 && j + 1 < argc) {
        errno = 0;
        count = strtoul (argv[++j], &end, 10);
        if (errno || *end || count == 0 || argv[j][0] == '-') {
          fprintf (stderr, "%s: monitor --count %s: give a number of "
                   "events, at least 1\n", ctl_prog, argv[j]);
          return 2;
        }
      }
      else {
        fprintf (stderr, "%s: monitor %s: the options are --json and "
                 "--count N\n", ctl_prog, argv[j]);
        return 2;
      }
    return monitor (sock, json, count);
  }
  fprintf (stderr, "%s: unknown command or wrong arguments: %s (%s --help "
           "lists the commands)\n", ctl_prog, argv[i], ctl_prog);
  return 2;
}
