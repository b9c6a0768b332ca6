/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - events: what happens to the array, for the operator's tools.
 *
 * Every change an operator acts on or waits for is posted once, where it
 * happens (gr_event: member-failed, degraded, rebuild-finished, ...),
 * into a ring of the last GR_EVENTS_RING events, each with a sequence
 * number.  Two kinds of readers take them from there, neither able to
 * hold the array:
 *   - gpuraidctl monitor (control.h: "monitor"): a client's thread waits
 *     for the next event (gr_events_next) and sends it, as text or JSON;
 *   - event-hook=PROGRAM: a thread of this module runs PROGRAM once per
 *     event (posix_spawn, argv PROGRAM EVENT, the event in GPURAID_*
 *     variables of its environment: gr_events_hook), one at a time, at
 *     most GR_EVENTS_HOOK_S seconds each, then killed.
 * A reader that falls behind the ring loses the oldest events: it is
 * told how many (the monitor prints it; the hook's are said once).
 * A hook that fails, hangs or cannot start is said once (a warning:
 * the operator's program is broken), later ones in the debug log.
 *
 * An event: a kind, a member (-1: the array), its path, a reason (why)
 * and details, each "key=value" (value without spaces) of a printf
 * format: "checked=%" PRIu64 " mismatched=%" PRIu64.  As text, one line:
 *   TIME EVENT uuid=UUID [member=I path=PATH] [KEY=VALUE ...] [why=...]
 * as JSON, one object a line: {"seq":N,"time":T,"event":"...","uuid":
 * "...","member":I,"path":"...","why":"...","KEY":VALUE,...} (VALUE a
 * number where it is one).  In the hook's environment: GPURAID_EVENT,
 * GPURAID_UUID, GPURAID_SEQ, GPURAID_TIME, GPURAID_MEMBER, GPURAID_PATH,
 * GPURAID_WHY, and GPURAID_KEY for each detail (upper case, '-' as '_').
 *
 * One owner: this module's one state (the ring, the hook's thread), for
 * the one array the plugin serves.  gr_event takes only its own leaf
 * lock: it may be called under any other. */
#ifndef GPURAID_EVENTS_H
#define GPURAID_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GR_EVENTS_RING 256
#define GR_EVENTS_HOOK_S 10

enum gr_event_kind {
  GR_EV_MEMBER_FAILED,          /* a member failed (why) */
  GR_EV_DEGRADED,               /* the array lost its first member (at
                                 * start: members missing) */
  GR_EV_ARRAY_FAILED,           /* more than m members lost */
  GR_EV_REBUILD_STARTED,        /* members being rebuilt (one each) */
  GR_EV_REBUILD_FINISHED,       /* result=done|failed|paused */
  GR_EV_SPARE_ACTIVATED,        /* a spare took a member's place */
  GR_EV_RE_ADDED,               /* a member that came back is in use
                                 * again (resynced=BYTES) */
  GR_EV_REPLACED,               /* a live replacement took a member's
                                 * place (gpuraidctl replace --live) */
  GR_EV_SCRUB_FINISHED,         /* with its counts */
  GR_EV_RESYNC_FINISHED,        /* the resync after a crash */
  GR_EV_READ_ERROR_REPAIRED,    /* a read error rewritten (offset) */
  GR_EV_CKSUM_ERROR_REPAIRED,   /* a block that failed its checksum
                                 * rebuilt and rewritten (offset) */
};

/* "member-failed", ... */
const char *gr_event_name (enum gr_event_kind kind);

/* Set once at start-up: the array's UUID (as text), and the hook
 * (an absolute path, or NULL for none). */
void gr_events_setup (const char *uuid, const char *hook);
/* In the server process: the hook's thread (if there is a hook).  0,
 * or -1 after nbdkit_error. */
int gr_events_start (void);
/* Stop the hook's thread (an event past the ring's last is not run). */
void gr_events_stop (void);

/* Post an event now. */
void gr_event (enum gr_event_kind kind, int member, const char *path,
               const char *why, const char *fmt, ...)
  __attribute__ ((format (printf, 5, 6)));

/* The sequence number of the next event to be posted (a monitor starts
 * there). */
uint64_t gr_events_next_seq (void);

/* One event as a reader gets it. */
struct gr_event_msg {
  uint64_t seq;
  double time;                  /* seconds since the epoch */
  enum gr_event_kind kind;
  int member;
  char path[256];
  char why[256];
  char details[512];            /* "key=value ..." */
};

enum gr_events_wait {
  GR_EVENTS_GOT,                /* *out is event *seq (then *seq + 1 is
                                 * the next to ask for) */
  GR_EVENTS_NONE,               /* none by the time limit */
};
/* The event numbered *seq, or the oldest kept after it if the ring has
 * lost it (*lost: how many were lost), waiting up to ms milliseconds for
 * it to be posted. */
enum gr_events_wait gr_events_next (uint64_t *seq, uint64_t *lost,
                                    struct gr_event_msg *out, int ms);

/* The event as one line (ending in a newline) into buf[len]: text, or
 * JSON. */
void gr_event_format (const struct gr_event_msg *e, bool json, char *buf,
                      size_t len);

#endif /* GPURAID_EVENTS_H */
