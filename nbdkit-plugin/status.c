/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the array's status.  See status.h. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "members.h"
#include "pace.h"
#include "scrub.h"
#include "status.h"
#include "common/json.h"
#include "format/format.h"

/* A job's limit in the JSON: "rate_limit" in bytes a second (0: none or
 * auto) and "rate_auto" (pace.h: GR_PACE_AUTO). */
static uint64_t
limit_of (uint64_t rate)
{
  return rate == GR_PACE_AUTO ? 0 : rate;
}

static const char *
auto_of (uint64_t rate)
{
  return rate == GR_PACE_AUTO ? "true" : "false";
}

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
state_name (enum gr_job_state s)
{
  switch (s) {
  case GR_JOB_RUNNING: return "running";
  case GR_JOB_DONE: return "done";
  case GR_JOB_STOPPED: return "stopped";
  case GR_JOB_FAILED: return "failed";
  }
  return "?";
}

static const char *
array_state (struct gr_array *a, struct gr_members *ms, int m)
{
  const int nf = gr_members_nfailed (ms);
  struct gr_progress p;
  bool which[GR_MAX_MEMBERS];
  uint64_t rb, sk;

  if (nf > m)
    return "failed";
  if (gr_heal_rebuild_progress (gr_array_heal (a), &p, which, &rb,
                                &sk) >= 0 &&
      p.state == GR_JOB_RUNNING)
    return "rebuilding";
  return nf == 0 ? "healthy" : "degraded";
}

/* The operation gpuraidctl wait follows (heal.h decides): its name and
 * progress, or NULL for none. */
static const char *
operation (struct gr_array *a, struct gr_progress *p)
{
  switch (gr_heal_operation (gr_array_heal (a), p)) {
  case GR_HEAL_JOB_REBUILD: return "rebuild";
  case GR_HEAL_JOB_SCRUB: return "scrub";
  case GR_HEAL_JOB_RESYNC: return "resync";
  case GR_HEAL_JOB_REPLACE: return "replace";
  case GR_HEAL_JOB_NONE: break;
  }
  return NULL;
}

static double
rate_of (const struct gr_progress *p)
{
  return p->seconds > 0 ? (double) (p->done_bytes - p->from_bytes)
    / p->seconds : 0;
}

/* The scrub's object (JSON) or lines (text). */
/* The last scrub that ran to its end, kept in the superblock. */
static void
last_scrub (FILE *f, bool json, const struct gr_sb_scrub *r)
{
  char when[64] = "";
  const time_t t = (time_t) r->end;
  struct tm tm;

  if (r->end && gmtime_r (&t, &tm))
    strftime (when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
  if (json) {
    if (r->end == 0) {
      fputs ("null", f);
      return;
    }
    fprintf (f, "{\"end\": %" PRIu64 ", \"end_utc\": \"%s\", \"seconds\": %"
             PRIu32 ", \"repair\": %s, \"checked_stripes\": %" PRIu64
             ", \"mismatched_stripes\": %" PRIu64 ", \"repaired\": %" PRIu64
             ", \"cksum_repaired\": %" PRIu64 ", \"cksum_unrecoverable\": %"
             PRIu64 "}", r->end, when, r->secs, r->repair ? "true" : "false",
             r->checked, r->mismatched, r->repaired, r->cksum_repaired,
             r->cksum_unrecoverable);
    return;
  }
  if (r->end == 0) {
    fputs ("last scrub none\n", f);
    return;
  }
  fprintf (f, "last scrub done %s in %" PRIu32 " s%s: %" PRIu64 " stripes "
           "checked, %" PRIu64 " did not match, %" PRIu64 " repaired; %" PRIu64
           " blocks failed their checksums and were rebuilt, %" PRIu64
           " past repair\n", when, r->secs, r->repair ? " (--repair)" : "",
           r->checked, r->mismatched, r->repaired, r->cksum_repaired,
           r->cksum_unrecoverable);
}

static void
scrub_status (struct gr_array *a, FILE *f, bool json, uint64_t resume_at,
              uint64_t width)
{
  struct gr_scrub *sc = gr_heal_scrub_last (gr_array_heal (a));
  struct gr_scrub_report rep[GR_SCRUB_REPORTS];
  struct gr_progress p;
  struct gr_scrub_counts ct;
  size_t nrep, i;
  double rate;

  if (sc == NULL) {
    if (json)
      fprintf (f, "null");
    else if (resume_at)
      fprintf (f, "scrub      stopped at array byte %" PRIu64 ": "
               "gpuraidctl scrub goes on from there\n", resume_at * width);
    else
      fputs ("scrub      none\n", f);
    return;
  }
  gr_scrub_progress (sc, &p);
  gr_scrub_counts (sc, &ct);
  nrep = gr_scrub_reports (sc, rep, GR_SCRUB_REPORTS);
  rate = p.seconds > 0 ? (double) ct.bytes / p.seconds : 0;
  if (json) {
    fprintf (f, "{\"state\": \"%s\", \"repair\": %s, \"done_bytes\": %"
             PRIu64 ", \"total_bytes\": %" PRIu64 ", \"rate_bytes_per_s\": "
             "%.0f, \"rate_limit\": %" PRIu64 ", \"rate_auto\": %s, "
             "\"checked_stripes\": %"
             PRIu64 ", \"mismatched_stripes\": %" PRIu64 ", \"located\": %"
             PRIu64 ", \"repaired\": %" PRIu64 ", \"skipped_stripes\": %"
             PRIu64 ", \"cksum_repaired\": %" PRIu64
             ", \"cksum_unrecoverable\": %" PRIu64 ", \"reports\": [",
             state_name (p.state),
             gr_scrub_repairing (sc) ? "true" : "false", p.done_bytes,
             p.total_bytes, rate, limit_of (p.rate_limit),
             auto_of (p.rate_limit), ct.checked, ct.mismatched,
             ct.located, ct.repaired, ct.skipped, ct.cksum_repaired,
             ct.cksum_unrecoverable);
    for (i = 0; i < nrep; i++)
      fprintf (f, "%s\n   {\"stripe\": %" PRIu64 ", \"offset\": %" PRIu64
               ", \"length\": %" PRIu64 ", \"member\": %d, \"index\": %d"
               ", \"member_offset\": %" PRIu64 ", \"repaired\": %s}",
               i ? "," : "", rep[i].stripe, rep[i].offset, rep[i].length,
               rep[i].member, rep[i].index, rep[i].member_offset,
               rep[i].repaired ? "true" : "false");
    fputs ("]}", f);
    return;
  }
  fprintf (f, "scrub      %s%s: %.1f%% (%" PRIu64 " of %" PRIu64 " MiB), "
           "%.1f MiB/s", state_name (p.state),
           gr_scrub_repairing (sc) ? " --repair" : "",
           p.total_bytes ? 100.0 * p.done_bytes / p.total_bytes : 100.0,
           p.done_bytes >> 20, p.total_bytes >> 20, rate / 1048576);
  if (p.state == GR_JOB_RUNNING && rate > 0)
    fprintf (f, ", %.0f s left",
             (double) (p.total_bytes - p.done_bytes) / rate);
  fprintf (f, "; %" PRIu64 " stripes checked, %" PRIu64 " did not match, %"
           PRIu64 " located, %" PRIu64 " repaired", ct.checked,
           ct.mismatched, ct.located, ct.repaired);
  if (ct.skipped)
    fprintf (f, ", %" PRIu64 " skipped (parity waiting for a resync)",
             ct.skipped);
  if (ct.cksum_repaired)
    fprintf (f, "; %" PRIu64 " blocks failed their checksums, rebuilt and "
             "rewritten", ct.cksum_repaired);
  if (ct.cksum_unrecoverable)
    fprintf (f, "; %" PRIu64 " blocks failed their checksums with too few "
             "good chunks left to rebuild them (reads of them answer EIO)",
             ct.cksum_unrecoverable);
  fputc ('\n', f);
  for (i = 0; i < nrep; i++) {
    fprintf (f, "  stripe %" PRIu64 ", array bytes %" PRIu64 "-%" PRIu64
             ": ", rep[i].stripe, rep[i].offset,
             rep[i].offset + rep[i].length - 1);
    if (rep[i].member >= 0)
      fprintf (f, "member %d (%s chunk) corrupt, %s\n", rep[i].member,
               rep[i].index < gr_exec_geom (gr_array_exec (a))->k ? "data"
               : "parity", rep[i].repaired ? "repaired" : "not repaired");
    else
      fputs ("parity does not match, corrupt chunk not known\n", f);
  }
}

/* accel=auto's kinds that have run: where each goes and why. */
static void
routes_write (struct gr_coding *coding, FILE *f, bool json)
{
  struct gr_route_state st[64];
  const size_t n = gr_coding_routes (coding, st, 64);
  const size_t shown = n < 64 ? n : 64;

  if (json)
    fputs (", \"routes\": [", f);
  for (size_t i = 0; i < shown; i++) {
    const char *side = !st[i].decided ? "start-up"
      : st[i].side == GR_SIDE_GPU ? "gpu" : "cpu";

    if (json) {
      fprintf (f, "%s{\"kind\": ", i ? ", " : "");
      gr_json_str (f, st[i].kind);
      fprintf (f, ", \"side\": \"%s\", \"trying\": %s, \"trials\": %u, "
               "\"to_gpu\": %u, \"cpu_mbs\": %.0f, \"cpu_s_per_gb\": %.3f, "
               "\"gpu_mbs\": %.0f, \"gpu_cpu_s_per_gb\": %.3f}", side,
               st[i].trying ? "true" : "false", st[i].trials, st[i].to_gpu,
               st[i].mbs[GR_SIDE_CPU], st[i].cpu_s_gb[GR_SIDE_CPU],
               st[i].mbs[GR_SIDE_GPU], st[i].cpu_s_gb[GR_SIDE_GPU]);
      continue;
    }
    fprintf (f, "route      %s: %s%s", st[i].kind,
             !st[i].decided ? "as measured at start-up"
             : st[i].side == GR_SIDE_GPU ? "GPU" : "CPU",
             st[i].trying ? ", being tried now" : "");
    if (st[i].trials > 0)
      fprintf (f, " (%u trials, %u to the GPU; the last: CPU %.0f MB/s "
               "%.2f CPU-s/GB, GPU %.0f MB/s %.2f CPU-s/GB)", st[i].trials,
               st[i].to_gpu, st[i].mbs[GR_SIDE_CPU],
               st[i].cpu_s_gb[GR_SIDE_CPU], st[i].mbs[GR_SIDE_GPU],
               st[i].cpu_s_gb[GR_SIDE_GPU]);
    fputc ('\n', f);
  }
  if (json)
    fputc (']', f);
  else if (n > shown)
    fprintf (f, "route      and %zu more kinds\n", n - shown);
}

void
gr_status_write (struct gr_array *a, struct gr_coding *coding, FILE *f,
                 bool json)
{
  struct gr_members *ms = gr_array_members (a);
  const struct gr_geom *g = gr_exec_geom (gr_array_exec (a));
  const uint64_t size = gr_map_size (g);
  struct gr_member_counts t = { 0 }, mc;
  struct gr_progress p;
  const bool rs = gr_array_resync_progress (a, &p);
  struct gr_coding_info ci;
  struct gr_sb sb;
  char uuid[37];
  const int n = gr_members_n (ms);
  char spare[4096];
  int i;

  gr_members_sb (ms, &sb);
  gr_sb_uuid_str (sb.uuid, uuid);
  gr_coding_info (coding, &ci);
  for (i = 0; i < n; i++) {
    gr_members_counts (ms, i, &mc);
    t.reads += mc.reads;
    t.writes += mc.writes;
    t.read_bytes += mc.read_bytes;
    t.written_bytes += mc.written_bytes;
    t.errors += mc.errors;
    t.cksum_errors += mc.cksum_errors;
  }
  if (json) {
    fprintf (f, "{\"uuid\": \"%s\", \"k\": %" PRIu32 ", \"m\": %" PRIu32
             ", \"chunk\": %" PRIu32 ", \"code\": \"%s\", \"size\": %"
             PRIu64 ", \"state\": \"%s\", \"read_only\": %s, \"event\": %"
             PRIu64 ", \"dirty\": %s, \"integrity\": %s,\n", uuid, sb.k,
             sb.m, sb.chunk, sb.code == GR_CODE_RS ? "rs" : "crs", size,
             array_state (a, ms, (int) sb.m),
             gr_members_read_only_p (ms) ? "true" : "false", sb.event,
             sb.flags & GR_SB_FLAG_DIRTY ? "true" : "false",
             sb.cksum_offset ? "true" : "false");
    fputs (" \"coder\": {\"cpu_backend\": ", f);
    gr_json_str (f, ci.cpu_backend);
    fputs (", \"gpu\": ", f);
    gr_json_str (f, ci.gpu ? ci.gpu_name : NULL);
    fprintf (f, ", \"gpu_device\": %d, \"gpu_all\": %s, \"gpu_fallen_back\": "
             "%s, \"gpu_operations\": %" PRIu64, ci.device,
             ci.gpu_all ? "true" : "false",
             ci.fallen_back ? "true" : "false", ci.ops_gpu);
    routes_write (coding, f, true);
    fputs ("},\n", f);
    fputs (" \"members\": [", f);
    for (i = 0; i < n; i++) {
      const enum gr_member_state s = gr_members_state (ms, i);

      gr_members_counts (ms, i, &mc);
      fprintf (f, "%s\n  {\"index\": %d, \"path\": ", i ? "," : "", i);
      gr_json_str (f, gr_members_path (ms, i));
      fprintf (f, ", \"state\": \"%s\", \"errors\": %" PRIu64
               ", \"cksum_errors\": %" PRIu64 ", \"read_errors\": %"
               PRIu64 ", \"reads\": %"
               PRIu64 ", \"writes\": %" PRIu64 ", \"read_bytes\": %" PRIu64
               ", \"written_bytes\": %" PRIu64 ", \"why\": ",
               member_state_name (s), mc.errors, mc.cksum_errors,
               mc.read_errors, mc.reads,
               mc.writes, mc.read_bytes, mc.written_bytes);
      gr_json_str (f, s == GR_MEMBER_ACTIVE ? NULL : gr_members_why (ms, i));
      fputc ('}', f);
    }
    for (i = 0; gr_heal_spare (gr_array_heal (a), i, spare, sizeof spare);
         i++) {
      fputs (",\n  {\"index\": null, \"path\": ", f);
      gr_json_str (f, spare);
      fputs (", \"state\": \"spare\"}", f);
    }
    fputs ("\n ],\n \"resync\": ", f);
    if (rs)
      fprintf (f, "{\"state\": \"%s\", \"done_bytes\": %" PRIu64
               ", \"total_bytes\": %" PRIu64 ", \"rate_bytes_per_s\": %.0f"
               ", \"rate_limit\": %" PRIu64 ", \"rate_auto\": %s}",
               state_name (p.state), p.done_bytes, p.total_bytes,
               rate_of (&p), limit_of (p.rate_limit), auto_of (p.rate_limit));
    else
      fputs ("null", f);
    fputs (",\n \"rebuild\": ", f);
    {
      struct gr_progress q;
      bool which[GR_MAX_MEMBERS];
      uint64_t rb, sk;
      const int nm = gr_heal_rebuild_progress (gr_array_heal (a), &q, which,
                                               &rb, &sk);

      if (nm >= 0) {
        fputs ("{\"members\": [", f);
        for (int j = 0, c = 0; j < n; j++)
          if (which[j])
            fprintf (f, "%s%d", c++ ? ", " : "", j);
        fprintf (f, "], \"state\": \"%s\", \"done_bytes\": %" PRIu64
                 ", \"total_bytes\": %" PRIu64 ", \"rate_bytes_per_s\": "
                 "%.0f, \"rate_limit\": %" PRIu64 ", \"rate_auto\": %s, "
                 "\"rebuilt_bytes\": %" PRIu64 ", \"skipped_bytes\": %"
                 PRIu64 "}", state_name (q.state), q.done_bytes,
                 q.total_bytes, rate_of (&q), limit_of (q.rate_limit),
                 auto_of (q.rate_limit), rb * gr_map_stripe_width (g),
                 sk * gr_map_stripe_width (g));
      }
      else
        fputs ("null", f);
    }
    fputs (",\n \"replace\": ", f);
    {
      struct gr_progress q;
      char path[1024];
      const int mi = gr_heal_replace_progress (gr_array_heal (a), &q, path,
                                               sizeof path);

      if (mi >= 0) {
        fprintf (f, "{\"member\": %d, \"path\": ", mi);
        gr_json_str (f, strcmp (path, "-") ? path : NULL);
        fprintf (f, ", \"state\": \"%s\", \"done_bytes\": %" PRIu64
                 ", \"total_bytes\": %" PRIu64 ", \"rate_bytes_per_s\": "
                 "%.0f}", state_name (q.state), q.done_bytes, q.total_bytes,
                 rate_of (&q));
      }
      else
        fputs ("null", f);
    }
    fputs (",\n \"scrub\": ", f);
    scrub_status (a, f, true, sb.scrub_at, gr_map_stripe_width (g));
    fputs (",\n \"last_scrub\": ", f);
    last_scrub (f, true, &sb.last_scrub);
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

    fprintf (f, "state      %s", array_state (a, ms, (int) sb.m));
    if (nf > 0 && nf <= (int) sb.m)
      fprintf (f, ": %d of %d members failed or missing, %d more failures "
               "tolerated", nf, n, (int) sb.m - nf);
    fprintf (f, "%s%s\n", gr_members_read_only_p (ms) ? ", read-only" : "",
             sb.flags & GR_SB_FLAG_DIRTY ? ", dirty (writes since start)"
             : "");
  }
  if (ci.gpu) {
    fprintf (f, "coder      GPU %s%s%s; CPU backend %s; %" PRIu64
             " operations on the GPU\n", ci.gpu_name,
             ci.gpu_all ? ", every operation"
             : ", each kind of operation where it does better",
             ci.fallen_back ? " (failed: everything on the CPU now)" : "",
             ci.cpu_backend, ci.ops_gpu);
    routes_write (coding, f, false);
  }
  else
    fprintf (f, "coder      CPU backend %s\n", ci.cpu_backend);
  if (rs) {
    const double rate = rate_of (&p);

    fprintf (f, "resync     %s: %.1f%% (%" PRIu64 " of %" PRIu64 " MiB), "
             "%.1f MiB/s", state_name (p.state),
             p.total_bytes ? 100.0 * p.done_bytes / p.total_bytes : 100.0,
             p.done_bytes >> 20, p.total_bytes >> 20, rate / 1048576);
    if (p.state == GR_JOB_RUNNING && rate > 0)
      fprintf (f, ", %.0f s left",
               (double) (p.total_bytes - p.done_bytes) / rate);
    if (p.rate_limit == GR_PACE_AUTO)
      fprintf (f, ", limit auto");
    else if (p.rate_limit)
      fprintf (f, ", limit %" PRIu64 " bytes/s", p.rate_limit);
    fputc ('\n', f);
  }
  else
    fputs ("resync     none\n", f);
  {
    struct gr_progress q;
    bool which[GR_MAX_MEMBERS];
    uint64_t rb, sk;
    const int nm = gr_heal_rebuild_progress (gr_array_heal (a), &q, which,
                                             &rb, &sk);

    if (nm >= 0) {
      fprintf (f, "rebuild    member%s", nm == 1 ? "" : "s");
      for (int j = 0, c = 0; j < n; j++)
        if (which[j])
          fprintf (f, "%s%d", c++ ? "," : " ", j);
      fprintf (f, " %s: %.1f%% (%" PRIu64 " of %" PRIu64
               " MiB), %.1f MiB/s; %" PRIu64 " MiB rebuilt, %" PRIu64
               " MiB skipped (not written)\n", state_name (q.state),
               q.total_bytes ? 100.0 * q.done_bytes / q.total_bytes : 100.0,
               q.done_bytes >> 20, q.total_bytes >> 20,
               rate_of (&q) / 1048576, rb * gr_map_stripe_width (g) >> 20,
               sk * gr_map_stripe_width (g) >> 20);
    }
  }
  {
    struct gr_progress q;
    char path[1024];
    const int mi = gr_heal_replace_progress (gr_array_heal (a), &q, path,
                                             sizeof path);

    if (mi >= 0)
      fprintf (f, "replace    member %d onto %s (live) %s: %.1f%% (%" PRIu64
               " of %" PRIu64 " MiB), %.1f MiB/s\n", mi, path,
               state_name (q.state), q.total_bytes ? 100.0 * q.done_bytes
               / q.total_bytes : 100.0, q.done_bytes >> 20,
               q.total_bytes >> 20, rate_of (&q) / 1048576);
  }
  scrub_status (a, f, false, sb.scrub_at, gr_map_stripe_width (g));
  last_scrub (f, false, &sb.last_scrub);
  fprintf (f, "io         %" PRIu64 " reads (%" PRIu64 " MiB), %" PRIu64
           " writes (%" PRIu64 " MiB), %" PRIu64 " errors\n", t.reads,
           t.read_bytes >> 20, t.writes, t.written_bytes >> 20, t.errors);
  fprintf (f, "integrity  %s\n", sb.cksum_offset
           ? "on: a checksum of every 4 KiB block, verified on every read"
           : "off");
  fprintf (f, "members\n  %5s  %-8s %7s %7s %7s %10s %10s %10s %10s  %s\n",
           "index", "state", "errors", "cksum", "rd-err", "reads", "writes",
           "read MiB", "wrote MiB", "path");
  for (i = 0; i < n; i++) {
    const enum gr_member_state s = gr_members_state (ms, i);
    const char *path = gr_members_path (ms, i);

    gr_members_counts (ms, i, &mc);
    fprintf (f, "  %5d  %-8s %7" PRIu64 " %7" PRIu64 " %7" PRIu64 " %10"
             PRIu64 " %10" PRIu64 " %10" PRIu64 " %10" PRIu64 "  %s", i,
             member_state_name (s), mc.errors, mc.cksum_errors,
             mc.read_errors, mc.reads,
             mc.writes, mc.read_bytes >> 20, mc.written_bytes >> 20,
             path ? path : "-");
    if (s != GR_MEMBER_ACTIVE)
      fprintf (f, " (%s)", gr_members_why (ms, i));
    fputc ('\n', f);
  }
  for (i = 0; gr_heal_spare (gr_array_heal (a), i, spare, sizeof spare); i++)
    fprintf (f, "  %5s  %-8s %7s %7s %7s %10s %10s %10s %10s  %s\n", "-",
             "spare", "-", "-", "-", "-", "-", "-", "-", spare);
}

void
gr_status_progress_write (struct gr_array *a, FILE *f)
{
  struct gr_progress p;
  const char *op = operation (a, &p);

  if (op)
    fprintf (f, "%s %s %" PRIu64 " %" PRIu64 " %.3f %" PRIu64 "\n", op,
             state_name (p.state), p.done_bytes, p.total_bytes, p.seconds,
             limit_of (p.rate_limit));
  else
    fputs ("none\n", f);
}
