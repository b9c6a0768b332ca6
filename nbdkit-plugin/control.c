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
#include "superblock.h"

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

static const char *
member_state_name (enum gr_member_state s)
{
  switch (s) {
  case GR_MEMBER_ACTIVE: return "active";
  case GR_MEMBER_FAILED: return "failed";
  case GR_MEMBER_MISSING: return "missing";
  case GR_MEMBER_REBUILDING: return "rebuilding";
  }
  return "?";
}

static const char *
resync_state_name (enum gr_resync_state s)
{
  switch (s) {
  case GR_RESYNC_RUNNING: return "running";
  case GR_RESYNC_DONE: return "done";
  case GR_RESYNC_STOPPED: return "stopped";
  case GR_RESYNC_FAILED: return "failed";
  }
  return "?";
}

static const char *
array_state (struct gr_control *c, struct gr_members *ms, int m)
{
  const int nf = gr_members_nfailed (ms);
  struct gr_resync_progress p;

  if (nf > m)
    return "failed";
  if (gr_array_rebuild_progress (c->a, &p) >= 0 &&
      p.state == GR_RESYNC_RUNNING)
    return "rebuilding";
  return nf == 0 ? "healthy" : "degraded";
}

/* The operation gpuraidctl wait follows: a running rebuild, else a
 * running resync, else the last rebuild, else the resync; its name, or
 * NULL for none. */
static const char *
operation (struct gr_control *c, struct gr_resync_progress *p)
{
  struct gr_resync_progress q;
  const bool rb = gr_array_rebuild_progress (c->a, p) >= 0;

  if (rb && p->state == GR_RESYNC_RUNNING)
    return "rebuild";
  if (gr_array_resync_progress (c->a, &q) &&
      (q.state == GR_RESYNC_RUNNING || !rb)) {
    *p = q;
    return "resync";
  }
  return rb ? "rebuild" : NULL;
}

/* A JSON string (or null). */
static void
json_str (FILE *f, const char *s)
{
  if (s == NULL) {
    fputs ("null", f);
    return;
  }
  fputc ('"', f);
  for (; *s; s++) {
    const unsigned char ch = (unsigned char) *s;

    if (ch == '"' || ch == '\\')
      fprintf (f, "\\%c", ch);
    else if (ch < 0x20)
      fprintf (f, "\\u%04x", ch);
    else
      fputc (ch, f);
  }
  fputc ('"', f);
}

static double
rate_of (const struct gr_resync_progress *p)
{
  return p->seconds > 0 ? (double) p->done_bytes / p->seconds : 0;
}

static void
status (struct gr_control *c, FILE *f, bool json)
{
  struct gr_members *ms = gr_array_members (c->a);
  const uint64_t size = gr_map_size (gr_exec_geom (gr_array_exec (c->a)));
  struct gr_member_counts t = { 0 }, mc;
  struct gr_resync_progress p;
  const bool rs = gr_array_resync_progress (c->a, &p);
  struct gr_coding_info ci;
  struct gr_sb sb;
  char uuid[37];
  const int n = gr_members_n (ms);
  int i;

  gr_members_sb (ms, &sb);
  gr_sb_uuid_str (sb.uuid, uuid);
  gr_coding_info (c->coding, &ci);
  for (i = 0; i < n; i++) {
    gr_members_counts (ms, i, &mc);
    t.reads += mc.reads;
    t.writes += mc.writes;
    t.read_bytes += mc.read_bytes;
    t.written_bytes += mc.written_bytes;
    t.errors += mc.errors;
  }
  if (json) {
    fprintf (f, "{\"uuid\": \"%s\", \"k\": %" PRIu32 ", \"m\": %" PRIu32
             ", \"chunk\": %" PRIu32 ", \"code\": \"%s\", \"size\": %"
             PRIu64 ", \"state\": \"%s\", \"read_only\": %s, \"event\": %"
             PRIu64 ", \"dirty\": %s,\n", uuid, sb.k, sb.m, sb.chunk,
             sb.code == GR_CODE_RS ? "rs" : "crs", size,
             array_state (c, ms, (int) sb.m),
             gr_members_read_only_p (ms) ? "true" : "false", sb.event,
             sb.flags & GR_SB_FLAG_DIRTY ? "true" : "false");
    fputs (" \"coder\": {\"cpu_backend\": ", f);
    json_str (f, ci.cpu_backend);
    fputs (", \"gpu\": ", f);
    json_str (f, ci.gpu ? ci.gpu_name : NULL);
    fprintf (f, ", \"gpu_device\": %d, \"gpu_all\": %s, \"gpu_fallen_back\": "
             "%s, \"gpu_operations\": %" PRIu64 "},\n", ci.device,
             ci.gpu_all ? "true" : "false",
             ci.fallen_back ? "true" : "false", ci.ops_gpu);
    fputs (" \"members\": [\n", f);
    for (i = 0; i < n; i++) {
      const enum gr_member_state s = gr_members_state (ms, i);

      gr_members_counts (ms, i, &mc);
      fprintf (f, "  {\"index\": %d, \"path\": ", i);
      json_str (f, gr_members_path (ms, i));
      fprintf (f, ", \"state\": \"%s\", \"errors\": %" PRIu64 ", \"reads\": %"
               PRIu64 ", \"writes\": %" PRIu64 ", \"read_bytes\": %" PRIu64
               ", \"written_bytes\": %" PRIu64 ", \"why\": ",
               member_state_name (s), mc.errors, mc.reads, mc.writes,
               mc.read_bytes, mc.written_bytes);
      json_str (f, s == GR_MEMBER_ACTIVE ? NULL : gr_members_why (ms, i));
      fprintf (f, "}%s\n", i + 1 < n ? "," : "");
    }
    fputs (" ],\n \"resync\": ", f);
    if (rs)
      fprintf (f, "{\"state\": \"%s\", \"done_bytes\": %" PRIu64
               ", \"total_bytes\": %" PRIu64 ", \"rate_bytes_per_s\": %.0f"
               ", \"rate_limit\": %" PRIu64 "}", resync_state_name (p.state),
               p.done_bytes, p.total_bytes, rate_of (&p), p.rate_limit);
    else
      fputs ("null", f);
    fputs (",\n \"rebuild\": ", f);
    {
      struct gr_resync_progress q;
      const int mb = gr_array_rebuild_progress (c->a, &q);

      if (mb >= 0)
        fprintf (f, "{\"member\": %d, \"state\": \"%s\", \"done_bytes\": %"
                 PRIu64 ", \"total_bytes\": %" PRIu64 ", \"rate_bytes_per_s\": "
                 "%.0f, \"rate_limit\": %" PRIu64 "}", mb,
                 resync_state_name (q.state), q.done_bytes, q.total_bytes,
                 rate_of (&q), q.rate_limit);
      else
        fputs ("null", f);
    }
    fprintf (f, ",\n \"io\": {\"reads\": %" PRIu64 ", \"writes\": %" PRIu64
             ", \"read_bytes\": %" PRIu64 ", \"written_bytes\": %" PRIu64
             ", \"errors\": %" PRIu64 "}}\n", t.reads, t.writes,
             t.read_bytes, t.written_bytes, t.errors);
    return;
  }

  fprintf (f, "uuid       %s\n", uuid);
  fprintf (f, "geometry   %" PRIu32 "+%" PRIu32 " %s, chunk %" PRIu32
           " KiB, %d members\n", sb.k, sb.m,
           sb.code == GR_CODE_RS ? "rs" : "crs", sb.chunk >> 10, n);
  fprintf (f, "size       %" PRIu64 " bytes (%" PRIu64 " MiB)\n", size,
           size >> 20);
  {
    const int nf = gr_members_nfailed (ms);

    fprintf (f, "state      %s", array_state (c, ms, (int) sb.m));
    if (nf > 0 && nf <= (int) sb.m)
      fprintf (f, ": %d of %d members failed or missing, %d more failures "
               "tolerated", nf, n, (int) sb.m - nf);
    fprintf (f, "%s%s\n", gr_members_read_only_p (ms) ? ", read-only" : "",
             sb.flags & GR_SB_FLAG_DIRTY ? ", dirty (writes since start)"
             : "");
  }
  if (ci.gpu)
    fprintf (f, "coder      GPU %s%s%s; CPU backend %s; %" PRIu64
             " operations on the GPU\n", ci.gpu_name,
             ci.gpu_all ? ", every operation" : ", large operations",
             ci.fallen_back ? " (failed: everything on the CPU now)" : "",
             ci.cpu_backend, ci.ops_gpu);
  else
    fprintf (f, "coder      CPU backend %s\n", ci.cpu_backend);
  if (rs) {
    const double rate = rate_of (&p);

    fprintf (f, "resync     %s: %.1f%% (%" PRIu64 " of %" PRIu64 " MiB), "
             "%.1f MiB/s", resync_state_name (p.state),
             p.total_bytes ? 100.0 * p.done_bytes / p.total_bytes : 100.0,
             p.done_bytes >> 20, p.total_bytes >> 20, rate / 1048576);
    if (p.state == GR_RESYNC_RUNNING && rate > 0)
      fprintf (f, ", %.0f s left",
               (double) (p.total_bytes - p.done_bytes) / rate);
    if (p.rate_limit)
      fprintf (f, ", limit %" PRIu64 " bytes/s", p.rate_limit);
    fputc ('\n', f);
  }
  else
    fputs ("resync     none\n", f);
  {
    struct gr_resync_progress q;
    const int mb = gr_array_rebuild_progress (c->a, &q);

    if (mb >= 0)
      fprintf (f, "rebuild    member %d %s: %.1f%% (%" PRIu64 " of %" PRIu64
               " MiB), %.1f MiB/s\n", mb, resync_state_name (q.state),
               q.total_bytes ? 100.0 * q.done_bytes / q.total_bytes : 100.0,
               q.done_bytes >> 20, q.total_bytes >> 20,
               rate_of (&q) / 1048576);
  }
  fprintf (f, "io         %" PRIu64 " reads (%" PRIu64 " MiB), %" PRIu64
           " writes (%" PRIu64 " MiB), %" PRIu64 " errors\n", t.reads,
           t.read_bytes >> 20, t.writes, t.written_bytes >> 20, t.errors);
  fprintf (f, "members\n  %5s  %-8s %7s %10s %10s %10s %10s  %s\n", "index",
           "state", "errors", "reads", "writes", "read MiB", "wrote MiB",
           "path");
  for (i = 0; i < n; i++) {
    const enum gr_member_state s = gr_members_state (ms, i);
    const char *path = gr_members_path (ms, i);

    gr_members_counts (ms, i, &mc);
    fprintf (f, "  %5d  %-8s %7" PRIu64 " %10" PRIu64 " %10" PRIu64
             " %10" PRIu64 " %10" PRIu64 "  %s", i, member_state_name (s),
             mc.errors, mc.reads, mc.writes, mc.read_bytes >> 20,
             mc.written_bytes >> 20, path ? path : "-");
    if (s != GR_MEMBER_ACTIVE)
      fprintf (f, " (%s)", gr_members_why (ms, i));
    fputc ('\n', f);
  }
}

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
  char *arg = strchr (line, ' ');
  uint64_t v;

  if (arg)
    *arg++ = '\0';
  if (strcmp (line, "status") == 0 && (arg == NULL || strcmp (arg, "json")
                                       == 0)) {
    fputs ("ok\n", f);
    status (c, f, arg != NULL);
  }
  else if (strcmp (line, "progress") == 0 && arg == NULL) {
    struct gr_resync_progress p;
    const char *op = operation (c, &p);

    fputs ("ok\n", f);
    if (op)
      fprintf (f, "%s %s %" PRIu64 " %" PRIu64 " %.3f %" PRIu64 "\n", op,
               resync_state_name (p.state), p.done_bytes, p.total_bytes,
               p.seconds, p.rate_limit);
    else
      fputs ("none\n", f);
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
    int err;

    *path++ = '\0';
    if (!parse_u64 (arg, &v) || v >= (uint64_t) gr_members_n (ms)) {
      fprintf (f, "error: replace %s: no such member (indexes 0 to %d)\n",
               arg, gr_members_n (ms) - 1);
      return;
    }
    switch (gr_array_replace (c->a, (int) v, path, &err)) {
    case GR_ARRAY_REPLACE_STARTED:
      fprintf (f, "ok\nrebuilding member %" PRIu64 " onto %s\n", v, path);
      return;
    case GR_ARRAY_REPLACE_NO_SUCH_MEMBER:
      fprintf (f, "error: replace %" PRIu64 ": no such member\n", v);
      return;
    case GR_ARRAY_REPLACE_ACTIVE:
      fprintf (f, "error: replace %" PRIu64 ": the member is active (fail "
               "it first)\n", v);
      return;
    case GR_ARRAY_REPLACE_BUSY:
      fprintf (f, "error: replace %" PRIu64 ": a resync or rebuild is "
               "running (gpuraidctl wait)\n", v);
      return;
    case GR_ARRAY_REPLACE_READ_ONLY:
      fprintf (f, "error: replace %" PRIu64 ": the array is read-only "
               "(salvage=true)\n", v);
      return;
    case GR_ARRAY_REPLACE_CANNOT_OPEN:
      fprintf (f, "error: replace %" PRIu64 ": %s: %s\n", v, path,
               strerror (err));
      return;
    case GR_ARRAY_REPLACE_NOT_FILE:
      fprintf (f, "error: replace %" PRIu64 ": %s: not a regular file or "
               "block device\n", v, path);
      return;
    case GR_ARRAY_REPLACE_IS_MEMBER:
      fprintf (f, "error: replace %" PRIu64 ": %s is member %d of this "
               "array\n", v, path, err);
      return;
    case GR_ARRAY_REPLACE_TOO_SMALL:
      fprintf (f, "error: replace %" PRIu64 ": %s is smaller than a member "
               "(data offset + data size)\n", v, path);
      return;
    case GR_ARRAY_REPLACE_OTHER_ARRAY:
      fprintf (f, "error: replace %" PRIu64 ": %s holds a superblock of "
               "another gpuraid array (not overwritten)\n", v, path);
      return;
    case GR_ARRAY_REPLACE_IO_ERROR:
      fprintf (f, "error: replace %" PRIu64 ": %s: %s\n", v, path,
               err ? strerror (err) : "the rebuild could not start");
      return;
    }
  }
  else if (strcmp (line, "rate") == 0 && arg) {
    if (!parse_u64 (arg, &v)) {
      fprintf (f, "error: rate %s: give bytes a second as a whole number "
               "(0: no limit)\n", arg);
      return;
    }
    gr_array_set_rate (c->a, v);
    fprintf (f, "ok\nresync rate limit %" PRIu64 " bytes/s%s\n", v,
             v ? "" : " (none)");
  }
  else
    fprintf (f, "error: unknown command '%s%s%s' (status [json], progress, "
             "fail INDEX, replace INDEX PATH, rate BYTES_PER_S)\n", line,
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
