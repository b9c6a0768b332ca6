/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the control socket's commands (part of the control module).
 * See control.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"
#include "control-internal.h"
#include "common/size.h"
#include "log.h"
#include "members.h"
#include "status.h"
#include "format/format.h"

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

void
gr_control_answer (struct gr_control *c, char *line, FILE *f)
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
  else if (strcmp (line, "replace-live") == 0 && arg && strchr (arg, ' ')) {
    char *path = strchr (arg, ' ');
    char why[256];
    int err;
    enum gr_heal_outcome o;

    *path++ = '\0';
    if (!parse_u64 (arg, &v) || v >= (uint64_t) gr_members_n (ms)) {
      fprintf (f, "error: replace --live %s: no such member (indexes 0 to "
               "%d)\n", arg, gr_members_n (ms) - 1);
      return;
    }
    o = gr_heal_replace_live (h, (int) v, path, &err);
    if (o == GR_HEAL_STARTED) {
      fprintf (f, "ok\ncopying member %" PRIu64 " onto %s while it stays in "
               "service; %s takes its place at the end\n", v, path, path);
      return;
    }
    gr_heal_explain (o, err, why, sizeof why);
    fprintf (f, "error: replace --live %" PRIu64 ": %s: %s\n", v, path, why);
  }
  else if (strcmp (line, "re-add") == 0 && arg) {
    char *path = strchr (arg, ' ');
    enum gr_heal_outcome o;
    char why[256];
    bool full;
    int err;

    if (path)
      *path++ = '\0';
    if (!parse_u64 (arg, &v) || v >= (uint64_t) gr_members_n (ms)) {
      fprintf (f, "error: re-add %s: no such member (indexes 0 to %d)\n",
               arg, gr_members_n (ms) - 1);
      return;
    }
    o = gr_heal_readd (h, (int) v, path, &full, &err);
    if (o == GR_HEAL_STARTED) {
      if (full)
        fprintf (f, "ok\nmember %" PRIu64 " (%s): its superblock is older "
                 "than the degraded map (or none is kept): a full rebuild "
                 "onto it\n", v, gr_members_path (ms, (int) v));
      else
        fprintf (f, "ok\nre-adding member %" PRIu64 " (%s): %" PRIu64
                 " MiB written since it left rebuilt, the rest kept\n", v,
                 gr_members_path (ms, (int) v),
                 gr_heal_readd_bytes (h) >> 20);
      return;
    }
    gr_heal_explain (o, err, why, sizeof why);
    fprintf (f, "error: re-add %" PRIu64 "%s%s: %s\n", v, path ? " " : "",
             path ? path : "", why);
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
    else if (!gr_size_parse (arg, &v) || v == GR_PACE_AUTO) {
      fprintf (f, "error: rate %s: give bytes a second as a size (50M, "
               "1G, 4096; 0: no limit), or auto\n", arg);
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
             "fail INDEX, replace INDEX PATH, replace-live INDEX PATH, "
             "re-add INDEX [PATH], spare add PATH, "
             "scrub [repair|stop], rate BYTES_PER_S|auto, monitor [json])\n", line,
             arg ? " " : "",
             arg ? arg : "");
}

