/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - events.  See events.h. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#include "events.h"
#include "log.h"
#include "common/json.h"
#include "common/thread.h"

extern char **environ;

/* -D gpuraid.hook_ms=N: a hook's time limit (tests). */
NBDKIT_DLL_PUBLIC int gpuraid_debug_hook_ms = GR_EVENTS_HOOK_S * 1000;

/* The hook's environment: at most this many GPURAID_ variables. */
#define HOOK_VARS 24

static struct {
  pthread_mutex_t lock;         /* everything below; a leaf */
  pthread_cond_t cond;          /* an event posted, or stop */
  struct gr_event_msg ring[GR_EVENTS_RING];
  uint64_t next;                /* the next event's number (from 1) */
  char uuid[40];
  char *hook;
  bool started, stop;
  pthread_t thread;
} ev = {
  .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER,
  .next = 1,
};

static const char *const names[] = {
  [GR_EV_MEMBER_FAILED] = "member-failed",
  [GR_EV_DEGRADED] = "degraded",
  [GR_EV_ARRAY_FAILED] = "array-failed",
  [GR_EV_REBUILD_STARTED] = "rebuild-started",
  [GR_EV_REBUILD_FINISHED] = "rebuild-finished",
  [GR_EV_SPARE_ACTIVATED] = "spare-activated",
  [GR_EV_RE_ADDED] = "re-added",
  [GR_EV_REPLACED] = "replaced",
  [GR_EV_SCRUB_FINISHED] = "scrub-finished",
  [GR_EV_RESYNC_FINISHED] = "resync-finished",
  [GR_EV_READ_ERROR_REPAIRED] = "read-error-repaired",
  [GR_EV_CKSUM_ERROR_REPAIRED] = "cksum-error-repaired",
};

const char *
gr_event_name (enum gr_event_kind kind)
{
  return (size_t) kind < sizeof names / sizeof names[0] && names[kind]
    ? names[kind] : "?";
}

void
gr_events_setup (const char *uuid, const char *hook)
{
  pthread_mutex_lock (&ev.lock);
  snprintf (ev.uuid, sizeof ev.uuid, "%s", uuid);
  free (ev.hook);
  ev.hook = hook ? strdup (hook) : NULL;
  pthread_mutex_unlock (&ev.lock);
}

void
gr_event (enum gr_event_kind kind, int member, const char *path,
          const char *why, const char *fmt, ...)
{
  struct gr_event_msg *e;
  struct timespec t;
  va_list ap;

  clock_gettime (CLOCK_REALTIME, &t);
  pthread_mutex_lock (&ev.lock);
  e = &ev.ring[ev.next % GR_EVENTS_RING];
  memset (e, 0, sizeof *e);
  e->seq = ev.next++;
  e->time = (double) t.tv_sec + t.tv_nsec / 1e9;
  e->kind = kind;
  e->member = member;
  snprintf (e->path, sizeof e->path, "%s", path && member >= 0 ? path : "");
  snprintf (e->why, sizeof e->why, "%s", why ? why : "");
  if (fmt) {
    va_start (ap, fmt);
    vsnprintf (e->details, sizeof e->details, fmt, ap);
    va_end (ap);
  }
  gr_debug ("event %" PRIu64 ": %s member %d %s", e->seq,
            gr_event_name (kind), member, e->details);
  pthread_cond_broadcast (&ev.cond);
  pthread_mutex_unlock (&ev.lock);
}

uint64_t
gr_events_next_seq (void)
{
  uint64_t s;

  pthread_mutex_lock (&ev.lock);
  s = ev.next;
  pthread_mutex_unlock (&ev.lock);
  return s;
}

enum gr_events_wait
gr_events_next (uint64_t *seq, uint64_t *lost, struct gr_event_msg *out,
                int ms)
{
  enum gr_events_wait r = GR_EVENTS_NONE;
  struct timespec deadline;

  clock_gettime (CLOCK_REALTIME, &deadline);
  deadline.tv_sec += ms / 1000;
  deadline.tv_nsec += (long) (ms % 1000) * 1000000;
  if (deadline.tv_nsec >= 1000000000) {
    deadline.tv_sec++;
    deadline.tv_nsec -= 1000000000;
  }
  *lost = 0;
  pthread_mutex_lock (&ev.lock);
  while (*seq >= ev.next && !ev.stop &&
         pthread_cond_timedwait (&ev.cond, &ev.lock, &deadline) == 0)
    ;
  if (*seq < ev.next) {
    const uint64_t oldest = ev.next > GR_EVENTS_RING
      ? ev.next - GR_EVENTS_RING : 1;

    if (*seq < oldest) {
      *lost = oldest - *seq;
      *seq = oldest;
    }
    *out = ev.ring[*seq % GR_EVENTS_RING];
    r = GR_EVENTS_GOT;
  }
  pthread_mutex_unlock (&ev.lock);
  return r;
}

/* The details' "key=value" tokens, one at a time: *s moves past it;
 * false at the end. */
static bool
next_detail (const char **s, char *key, size_t klen, char *val, size_t vlen)
{
  const char *p = *s, *eq, *end;

  while (*p == ' ')
    p++;
  if (*p == '\0')
    return false;
  end = p + strcspn (p, " ");
  eq = memchr (p, '=', (size_t) (end - p));
  if (eq == NULL)
    eq = end;
  snprintf (key, klen, "%.*s", (int) (eq - p), p);
  snprintf (val, vlen, "%.*s", eq < end ? (int) (end - eq - 1) : 0,
            eq < end ? eq + 1 : "");
  *s = end;
  return true;
}

/* A JSON number: digits, at most one '.' between digits. */
static bool
is_number (const char *s)
{
  bool dot = false;

  if (!isdigit ((unsigned char) *s))
    return false;
  for (; *s; s++)
    if (*s == '.' && !dot && isdigit ((unsigned char) s[1]))
      dot = true;
    else if (!isdigit ((unsigned char) *s))
      return false;
  return true;
}

void
gr_event_format (const struct gr_event_msg *e, bool json, char *buf,
                 size_t len)
{
  FILE *f = fmemopen (buf, len, "w");
  const char *d = e->details;
  char key[64], val[256], uuid[40];

  if (f == NULL) {
    snprintf (buf, len, "%s\n", gr_event_name (e->kind));
    return;
  }
  pthread_mutex_lock (&ev.lock);
  memcpy (uuid, ev.uuid, sizeof uuid);
  pthread_mutex_unlock (&ev.lock);
  if (json) {
    fprintf (f, "{\"seq\": %" PRIu64 ", \"time\": %.3f, \"event\": \"%s\", "
             "\"uuid\": ", e->seq, e->time, gr_event_name (e->kind));
    gr_json_str (f, uuid);
    if (e->member >= 0) {
      fprintf (f, ", \"member\": %d, \"path\": ", e->member);
      gr_json_str (f, e->path[0] ? e->path : NULL);
    }
    else
      fputs (", \"member\": null", f);
    while (next_detail (&d, key, sizeof key, val, sizeof val)) {
      fputs (", ", f);
      gr_json_str (f, key);
      fputs (": ", f);
      if (is_number (val))
        fputs (val, f);
      else
        gr_json_str (f, val);
    }
    if (e->why[0]) {
      fputs (", \"why\": ", f);
      gr_json_str (f, e->why);
    }
    fputs ("}\n", f);
  }
  else {
    const time_t t = (time_t) e->time;
    struct tm tm;
    char when[32] = "?";

    if (gmtime_r (&t, &tm))
      strftime (when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    fprintf (f, "%s %s uuid=%s", when, gr_event_name (e->kind), uuid);
    if (e->member >= 0)
      fprintf (f, " member=%d path=%s", e->member,
               e->path[0] ? e->path : "-");
    if (e->details[0])
      fprintf (f, " %s", e->details);
    if (e->why[0])
      fprintf (f, " why=%s", e->why);
    fputc ('\n', f);
  }
  if (fclose (f) != 0 || strchr (buf, '\n') == NULL)
    /* Cut: still one line. */
    snprintf (buf + (len > 2 ? len - 2 : 0), 2, "\n");
}

/* --- the hook ------------------------------------------------------------ */

/* The variable GPURAID_<name>=value into vars[*n] (name upper case, '-'
 * as '_'). */
static void
add_var (char vars[][320], int *n, const char *name, const char *value)
{
  int o, i;

  if (*n >= HOOK_VARS)
    return;
  o = snprintf (vars[*n], 320, "GPURAID_");
  for (i = 0; name[i] && o < 300; i++)
    vars[*n][o++] = name[i] == '-' ? '_'
      : (char) toupper ((unsigned char) name[i]);
  snprintf (vars[*n] + o, (size_t) (320 - o), "=%s", value);
  (*n)++;
}

enum hook_outcome { HOOK_OK, HOOK_FAILED, HOOK_KILLED, HOOK_NOT_STARTED };

/* Run the hook for e, waiting for it at most GR_EVENTS_HOOK_S seconds
 * (less once the module stops). */
static enum hook_outcome
run_hook (const char *hook, const struct gr_event_msg *e, int *status)
{
  static char vars[HOOK_VARS][320];
  char num[32], key[64], val[256];
  const char *d = e->details;
  char **envp;
  char *argv[3];
  size_t nenv = 0, i;
  int nv = 0, err;
  pid_t pid;
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t sa;
  sigset_t none, dfl;
  struct timespec t0, now;

  add_var (vars, &nv, "event", gr_event_name (e->kind));
  add_var (vars, &nv, "uuid", ev.uuid);
  snprintf (num, sizeof num, "%" PRIu64, e->seq);
  add_var (vars, &nv, "seq", num);
  snprintf (num, sizeof num, "%.3f", e->time);
  add_var (vars, &nv, "time", num);
  if (e->member >= 0) {
    snprintf (num, sizeof num, "%d", e->member);
    add_var (vars, &nv, "member", num);
    add_var (vars, &nv, "path", e->path);
  }
  if (e->why[0])
    add_var (vars, &nv, "why", e->why);
  while (next_detail (&d, key, sizeof key, val, sizeof val))
    add_var (vars, &nv, key, val);
  while (environ[nenv])
    nenv++;
  envp = calloc (nenv + (size_t) nv + 1, sizeof *envp);
  if (envp == NULL) {
    *status = ENOMEM;
    return HOOK_NOT_STARTED;
  }
  for (i = 0; i < nenv; i++)
    envp[i] = environ[i];
  for (int v = 0; v < nv; v++)
    envp[nenv + (size_t) v] = vars[v];
  argv[0] = (char *) hook;
  argv[1] = (char *) gr_event_name (e->kind);
  argv[2] = NULL;
  posix_spawn_file_actions_init (&fa);
  posix_spawn_file_actions_addopen (&fa, 0, "/dev/null", O_RDONLY, 0);
  /* The hook starts with no signal blocked (this thread blocks them all:
   * common/thread.h) and SIGPIPE at its default (nbdkit ignores it). */
  sigemptyset (&none);
  sigemptyset (&dfl);
  sigaddset (&dfl, SIGPIPE);
  posix_spawnattr_init (&sa);
  posix_spawnattr_setsigmask (&sa, &none);
  posix_spawnattr_setsigdefault (&sa, &dfl);
  posix_spawnattr_setflags (&sa, POSIX_SPAWN_SETSIGMASK |
                            POSIX_SPAWN_SETSIGDEF);
  err = posix_spawn (&pid, hook, &fa, &sa, argv, envp);
  posix_spawnattr_destroy (&sa);
  posix_spawn_file_actions_destroy (&fa);
  free (envp);
  if (err != 0) {
    *status = err;
    return HOOK_NOT_STARTED;
  }
  clock_gettime (CLOCK_MONOTONIC, &t0);
  for (;;) {
    const pid_t r = waitpid (pid, status, WNOHANG);
    double limit = gpuraid_debug_hook_ms > 0
      ? gpuraid_debug_hook_ms / 1000.0 : GR_EVENTS_HOOK_S;

    if (r == pid)
      return WIFEXITED (*status) && WEXITSTATUS (*status) == 0 ? HOOK_OK
        : HOOK_FAILED;
    if (r == -1 && errno != EINTR) {
      *status = errno;
      return HOOK_FAILED;
    }
    pthread_mutex_lock (&ev.lock);
    if (ev.stop && limit > 2)
      limit = 2;
    pthread_mutex_unlock (&ev.lock);
    clock_gettime (CLOCK_MONOTONIC, &now);
    if ((double) (now.tv_sec - t0.tv_sec) +
        (now.tv_nsec - t0.tv_nsec) / 1e9 >= limit) {
      kill (pid, SIGKILL);
      (void) waitpid (pid, status, 0);
      return HOOK_KILLED;
    }
    usleep (10000);
  }
}

static void *
hook_thread (void *arg)
{
  const char *hook = arg;
  uint64_t seq = 1, lost;
  bool said = false, said_lost = false;
  struct gr_event_msg e;

  for (;;) {
    enum hook_outcome o;
    int status = 0;
    char how[128];

    pthread_mutex_lock (&ev.lock);
    if (ev.stop) {
      pthread_mutex_unlock (&ev.lock);
      break;
    }
    pthread_mutex_unlock (&ev.lock);
    if (gr_events_next (&seq, &lost, &e, 500) != GR_EVENTS_GOT)
      continue;
    if (lost && !said_lost) {
      gr_warn ("event-hook=%s: %" PRIu64 " events were dropped before it "
               "could run for them (it runs for one event at a time; the "
               "last %d are kept)", hook, lost, GR_EVENTS_RING);
      said_lost = true;
    }
    seq++;
    o = run_hook (hook, &e, &status);
    switch (o) {
    case HOOK_OK:
      gr_debug ("event-hook ran for event %" PRIu64 " (%s)", e.seq,
                gr_event_name (e.kind));
      continue;
    case HOOK_FAILED:
      if (WIFEXITED (status))
        snprintf (how, sizeof how, "exited with status %d",
                  WEXITSTATUS (status));
      else if (WIFSIGNALED (status))
        snprintf (how, sizeof how, "was killed by signal %d",
                  WTERMSIG (status));
      else
        snprintf (how, sizeof how, "failed");
      break;
    case HOOK_KILLED:
      snprintf (how, sizeof how, "ran past %.1f s and was killed",
                gpuraid_debug_hook_ms > 0 ? gpuraid_debug_hook_ms / 1000.0
                : GR_EVENTS_HOOK_S);
      break;
    case HOOK_NOT_STARTED:
      snprintf (how, sizeof how, "could not be started: %s",
                strerror (status));
      break;
    }
    if (!said)
      gr_warn ("event-hook=%s %s for event %s (later failures of the hook "
               "are in the debug log)", hook, how, gr_event_name (e.kind));
    else
      gr_debug ("event-hook %s for event %" PRIu64 " (%s)", how, e.seq,
                gr_event_name (e.kind));
    said = true;
  }
  return NULL;
}

int
gr_events_start (void)
{
  int e;

  pthread_mutex_lock (&ev.lock);
  ev.stop = false;
  if (ev.hook == NULL || ev.started) {
    pthread_mutex_unlock (&ev.lock);
    return 0;
  }
  e = gr_thread_create (&ev.thread, NULL, hook_thread, ev.hook);
  if (e == 0)
    ev.started = true;
  pthread_mutex_unlock (&ev.lock);
  if (e != 0) {
    errno = e;
    nbdkit_error ("event-hook: pthread_create: %m");
    return -1;
  }
  return 0;
}

void
gr_events_stop (void)
{
  bool joined;

  pthread_mutex_lock (&ev.lock);
  ev.stop = true;
  joined = ev.started;
  ev.started = false;
  pthread_cond_broadcast (&ev.cond);
  pthread_mutex_unlock (&ev.lock);
  if (joined)
    pthread_join (ev.thread, NULL);
}
