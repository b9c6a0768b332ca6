/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the control socket (control=PATH): gpuraidctl's way in.
 *
 * gr_control_open binds and listens on a Unix socket, owner-only (mode
 * 0600), in nbdkit's foreground so that a bad path stops the start with
 * one line; gr_control_start, in the server process, starts the thread
 * that accepts clients; gr_control_close stops it and the clients'
 * threads (joined) and removes the socket.
 *
 * Clients are served at once, each by a thread of its own, so that none
 * waits for another: at most 16 at a time (one more gets "error: too
 * many control clients at once" and is closed).  A client has 5 s for
 * its whole command line, and 5 s to take its answer once it is ready;
 * past that it is disconnected, with one debug line (nbdkit -v: nothing
 * for the operator to do).  Commands are answered one at a time (the
 * commands below were written for that; each is the server's own work,
 * never a wait for a client).
 *
 * Protocol: a client connects, sends one command line (at most 255
 * bytes, ending in a newline) and reads the answer until the server
 * closes: "ok\n" then the body, or "error: <one line>\n".  Commands:
 *   status         the array as text (like mdadm --detail)
 *   status json    the same as one JSON object (the plugin's man page,
 *                  "CONTROL SOCKET AND gpuraidctl")
 *   progress       one line: "none", or "OP STATE DONE TOTAL SECONDS
 *                  LIMIT" (OP resync, rebuild or scrub; STATE running,
 *                  done, stopped or failed; bytes of array data; seconds
 *                  since it started; bytes a second, 0 for none or auto:
 *                  status.h, gr_status_progress_write)
 *   fail INDEX     fail member INDEX (refused where the array cannot
 *                  spare it: array.h, gr_array_fail)
 *   replace INDEX PATH  rebuild failed member INDEX onto PATH (absolute),
 *                  online (heal.h, gr_heal_replace)
 *   replace-live INDEX PATH  active member INDEX copied onto PATH while
 *                  it stays in service, PATH taking its place at the end
 *                  (heal.h, gr_heal_replace_live)
 *   re-add INDEX [PATH]  member INDEX back from PATH (default: the path
 *                  it had): the regions written since it left rebuilt, or
 *                  all of it where the degraded map does not cover it
 *                  (heal.h, gr_heal_readd)
 *   spare add PATH  a hot spare (heal.h, gr_heal_spare_add)
 *   scrub [repair] check every stripe (and repair what is located),
 *                  online, going on from where the last one stopped
 *                  (heal.h, gr_heal_scrub; scrub.h)
 *   scrub stop     stop it there (heal.h, gr_heal_scrub_stop)
 *   rate BYTES|auto  the resync's, rebuild's and scrub's limit in bytes
 *                  a second (0: none; auto: full speed while idle, a
 *                  fifth of the time under client I/O;
 *                  array.h, gr_array_set_rate)
 *   monitor [json] "ok\n", then the events from now on, one line each as
 *                  it is posted (events.h: text or JSON), until the
 *                  client closes or the server stops; a monitor that
 *                  does not take a line within 5 s is disconnected.  Not
 *                  one of the commands answered one at a time: it holds
 *                  a client's place (of the 16) as long as it runs.
 * Every command is logged (nbdkit -v); a refusal is one line.
 *
 * One owner: struct gr_control holds the socket and the threads. */
#ifndef GPURAID_CONTROL_H
#define GPURAID_CONTROL_H

#include "array.h"
#include "coding.h"

struct gr_control;

/* Bind path (a stale socket there is replaced; anything else there, or
 * a server answering on it, is refused).  NULL after nbdkit_error. */
struct gr_control *gr_control_open (const char *path);
/* Serve it (in the server process).  0, or -1 after nbdkit_error. */
int gr_control_start (struct gr_control *c, struct gr_array *a,
                      struct gr_coding *coding);
/* Stop serving, close and remove the socket.  NULL is fine. */
void gr_control_close (struct gr_control *c);

#endif /* GPURAID_CONTROL_H */
