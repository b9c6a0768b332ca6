/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraidctl - what it does offline, reading the members themselves
 * (read-only): examine, map, scan.  See ctl.h. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl/ctl.h"
#include "common/json.h"
#include "common/size.h"
#include "format/format.h"
#include "storage/storage.h"

const char *const ctl_prog = "gpuraidctl";

void
ctl_die (const char *fmt, ...)
{
  va_list ap;

  fprintf (stderr, "%s: ", ctl_prog);
  va_start (ap, fmt);
  vfprintf (stderr, fmt, ap);
  va_end (ap);
  fputc ('\n', stderr);
  exit (1);
}

char *
ctl_member_path (const char *arg)
{
  return gr_disk_is_uri (arg) ? strdup (arg) : realpath (arg, NULL);
}

/* --- examine ------------------------------------------------------------- */

/* Read path's superblock into p (read-only; a file, a device or an NBD
 * URI).  false if it could not be read at all (p->open_errno says
 * why). */
static bool
probe (const char *path, struct gr_probe *p)
{
  gr_sb_buf buf;
  struct gr_disk *d;
  char why[256];
  int err, r;

  memset (p, 0, sizeof *p);
  p->path = path;
  p->sb_status = -ENOENT;
  switch (gr_disk_open (path, true, &d, &err, why, sizeof why)) {
  case GR_DISK_OPENED:
  case GR_DISK_OPENED_BUFFERED:
    break;
  case GR_DISK_NOT_STORAGE:
    p->open_errno = EINVAL;     /* not a file or a block device */
    return false;
  default:
    p->open_errno = err ? err : EIO;
    return false;
  }
  p->size = gr_disk_size (d);
  if (p->size >= GR_SB_SIZE) {
    r = gr_disk_pread (d, buf, GR_SB_SIZE, 0);
    if (r == 0)
      p->sb_status = gr_sb_decode (buf, &p->sb);
    else
      p->open_errno = -r;
  }
  gr_disk_close (d);
  return p->open_errno == 0;
}

static void
print_sb (const struct gr_probe *p)
{
  const struct gr_sb *sb = &p->sb;
  char uuid[37], when[64];
  const time_t t = (time_t) sb->ctime;
  struct tm tm;
  bool any = false;

  gr_sb_uuid_str (sb->uuid, uuid);
  strftime (when, sizeof when, "%Y-%m-%d %H:%M:%S UTC",
            gmtime_r (&t, &tm));
  printf ("  array uuid     %s\n", uuid);
  printf ("  geometry       %" PRIu32 "+%" PRIu32 " %s, chunk %" PRIu32
          " KiB\n", sb->k, sb->m, sb->code == 1 ? "rs" : "crs",
          sb->chunk >> 10);
  if (sb->flags & GR_SB_FLAG_SPARE)
    printf ("  role           hot spare of this array (no member; its index "
            "and event say nothing)\n");
  else
    printf ("  index          %" PRIu32 "\n", sb->index);
  printf ("  event          %" PRIu64 "\n", sb->event);
  printf ("  state          %s%s%s\n",
          sb->flags & GR_SB_FLAG_DIRTY ? "dirty (not shut down cleanly, or "
          "serving)" : "clean",
          sb->flags & GR_SB_FLAG_JOURNALED ? ", journaled" : "",
          sb->flags & GR_SB_FLAG_BITMAP ? ", write-intent bitmap kept" : "");
  printf ("  maps           %s%s\n", sb->flags & GR_SB_FLAG_WRITTEN
          ? "the written map (regions ever written)" : "no written map",
          sb->degraded_since ? "; the degraded map (regions written since "
          "a member failed)" : "");
  if (sb->degraded_since)
    printf ("  degraded since event %" PRIu64 " (a member that left after "
            "it is re-added by the map)\n", sb->degraded_since);
  printf ("  failed members");
  for (uint32_t i = 0; i < sb->k + sb->m; i++)
    if (gr_sb_failed_test (sb, (int) i)) {
      printf (" %" PRIu32, i);
      any = true;
    }
  printf ("%s\n", any ? "" : " none");
  any = false;
  for (uint32_t i = 0; i < sb->k + sb->m; i++)
    if (gr_sb_removed_test (sb, (int) i)) {
      printf ("%s%" PRIu32, any ? " " : "  failed by the operator (not "
              "re-added at a start): ", i);
      any = true;
    }
  if (any)
    printf ("\n");
  if (sb->flags & GR_SB_FLAG_REBUILDING)
    printf ("  rebuilding     this member is %s (rebuild %" PRIu64 ")\n",
            sb->flags & GR_SB_FLAG_READD ? "being re-added (itself, back)"
            : "a replacement being rebuilt", sb->rebuild_id);
  else if (sb->rebuild_id && sb->rebuild_at < sb->data_size / sb->chunk) {
    printf ("  rebuild        of member");
    for (uint32_t i = 0, c = 0; i < sb->k + sb->m; i++)
      if (gr_sb_rebuild_test (sb, (int) i) && gr_sb_failed_test (sb, (int) i))
        printf ("%s%" PRIu32, c++ ? "," : " ", i);
    printf (" (rebuild %" PRIu64 "), checkpoint at stripe %" PRIu64 " of %"
            PRIu64 "\n", sb->rebuild_id, sb->rebuild_at,
            sb->data_size / sb->chunk);
  }
  printf ("  data           %" PRIu64 " bytes per member from offset %"
          PRIu64 "\n", sb->data_size, sb->data_offset);
  if (sb->bitmap_region)
    printf ("  bitmap region  %" PRIu64 " stripes\n", sb->bitmap_region);
  if (sb->cksum_offset)
    printf ("  integrity      a CRC-32C of every 4 KiB block, from offset %"
            PRIu64 "\n", sb->cksum_offset);
  else
    printf ("  integrity      off (no block checksums)\n");
  if (sb->last_scrub.end) {
    const time_t st = (time_t) sb->last_scrub.end;
    struct tm stm;
    char at[64] = "?";

    if (gmtime_r (&st, &stm))
      strftime (at, sizeof at, "%Y-%m-%d %H:%M:%S UTC", &stm);
    printf ("  last scrub     done %s in %" PRIu32 " s%s: %" PRIu64 " stripes "
            "checked, %" PRIu64 " did not match, %" PRIu64 " repaired, %"
            PRIu64 " blocks rebuilt for their checksums, %" PRIu64
            " past repair\n", at, sb->last_scrub.secs,
            sb->last_scrub.repair ? " (--repair)" : "",
            sb->last_scrub.checked, sb->last_scrub.mismatched,
            sb->last_scrub.repaired, sb->last_scrub.cksum_repaired,
            sb->last_scrub.cksum_unrecoverable);
  }
  else
    printf ("  last scrub     none\n");
  printf ("  created        %s\n", when);
}

static const char *
slot_state_name (enum gr_slot_state s)
{
  switch (s) {
  case GR_SLOT_ACTIVE: return "active";
  case GR_SLOT_MISSING: return "missing";
  case GR_SLOT_STALE: return "stale";
  case GR_SLOT_FAILED: return "failed";
  case GR_SLOT_SALVAGED: return "salvaged";
  case GR_SLOT_REBUILDING: return "rebuilding";
  case GR_SLOT_READD: return "re-add";
  }
  return "?";
}

int
ctl_examine (int argc, char **argv)
{
  static struct gr_probe p[GR_MAX_MEMBERS];
  static struct gr_assembly a;
  const struct gr_assemble_args args = { .m = -1 };
  int np = argc, bad = 0;

  if (np == 0) {
    fprintf (stderr, "%s: examine needs the members\n", ctl_prog);
    return 2;
  }
  if (np > GR_MAX_MEMBERS)
    ctl_die ("examine: at most %d members", GR_MAX_MEMBERS);
  for (int i = 0; i < np; i++) {
    printf ("%s\n", argv[i]);
    if (!probe (argv[i], &p[i])) {
      printf ("  cannot be read: %s\n", p[i].open_errno == EINVAL
              ? "not a regular file or block device"
              : strerror (p[i].open_errno));
      bad++;
    }
    else if (p[i].sb_status != 0) {
      printf ("  %s\n", p[i].size < GR_SB_SIZE ? "too small to hold a "
              "gpuraid superblock" : gr_sb_strerror (p[i].sb_status));
      bad++;
    }
    else
      print_sb (&p[i]);
  }
  gr_assemble (p, np, &args, &a);
  if (a.outcome == GR_ASSEMBLY_REFUSED)
    printf ("assembly: refused: %s\n", a.error);
  else {
    int active = 0;

    for (int i = 0; i < a.n; i++)
      active += a.state[i] == GR_SLOT_ACTIVE;
    printf ("assembly: would start %s%s with %d of %d members%s\n",
            a.nfailed == 0 ? "healthy" : "degraded",
            a.read_only ? ", read-only" : "", active, a.n,
            a.resync == GR_RESYNC_FULL ? (a.bitmap_kept
                                          ? "; resync of the regions in the "
                                          "write-intent bitmap"
                                          : "; full resync")
            : a.resync == GR_RESYNC_DEGRADED ? "; journal replay (dirty and "
            "degraded)" : "");
    for (int i = 0; i < a.n; i++) {
      printf ("  slot %d: %-8s %s", i, slot_state_name (a.state[i]),
              a.path[i] ? a.path[i] : "-");
      if (a.state[i] != GR_SLOT_ACTIVE && a.why[i][0])
        printf (" (%s)", a.why[i]);
      printf ("\n");
    }
    if (a.warning[0])
      printf ("  warning: %s\n", a.warning);
  }
  if (bad)
    fprintf (stderr, "%s: examine: %d of %d paths hold no usable gpuraid "
             "superblock\n", ctl_prog, bad, np);
  return bad ? 1 : 0;
}

/* gpuraidctl map OFFSET MEMBER...: the geometry from the members'
 * superblocks (as an assembly decides it), then raidmap's answer. */
int
ctl_map (int argc, char **argv)
{
  static struct gr_probe p[GR_MAX_MEMBERS];
  static struct gr_assembly a;
  const struct gr_assemble_args args = { .m = -1 };
  struct gr_extent e;
  uint64_t off, size;
  char *end;

  if (argc < 2) {
    fprintf (stderr, "%s: map needs OFFSET and the members\n", ctl_prog);
    return 2;
  }
  errno = 0;
  if (strncmp (argv[0], "0x", 2) == 0 || strncmp (argv[0], "0X", 2) == 0) {
    off = strtoull (argv[0] + 2, &end, 16);
    if (errno || *end || !isxdigit ((unsigned char) argv[0][2]))
      ctl_die ("map %s: not a byte offset (a size: 1G, 4096; or 0x hex)",
           argv[0]);
  }
  else if (!gr_size_parse (argv[0], &off))
    ctl_die ("map %s: not a byte offset (a size: 1G, 4096; or 0x hex)",
         argv[0]);
  if (argc - 1 > GR_MAX_MEMBERS)
    ctl_die ("map: at most %d members", GR_MAX_MEMBERS);
  for (int i = 1; i < argc; i++)
    (void) probe (argv[i], &p[i - 1]);
  gr_assemble (p, argc - 1, &args, &a);
  if (a.outcome == GR_ASSEMBLY_REFUSED)
    ctl_die ("map: the members do not make an array: %s", a.error);
  size = gr_map_size (&a.geom);
  if (off >= size)
    ctl_die ("map %" PRIu64 ": beyond the array's %" PRIu64 " bytes", off, size);
  gr_map_extent (&a.geom, off, 1, &e);
  printf ("offset %" PRIu64 ": stripe %" PRIu64 ", data chunk %d, byte %"
          PRIu32 " of the chunk\n", off, e.stripe, e.index, e.chunk_off);
  for (int i = 0; i < a.geom.k + a.geom.m; i++) {
    const int mb = gr_map_member (&a.geom, e.stripe, i);

    if (i != e.index && i < a.geom.k)
      continue;
    printf ("  %-8s member %d (%s) at byte %" PRIu64 " (chunk at %" PRIu64
            ")%s\n", i == e.index ? "data" : "parity", mb,
            a.path[mb] ? a.path[mb] : "-",
            gr_map_member_offset (&a.geom, e.stripe, e.chunk_off),
            gr_map_member_offset (&a.geom, e.stripe, 0),
            a.state[mb] == GR_SLOT_ACTIVE ? "" : " (not active)");
  }
  return 0;
}


/* --- scan ---------------------------------------------------------------- */

/* The arrays' superblocks among probes p[0 .. np): the first probe of
 * each UUID not seen before, into first[]; how many. */
static int
arrays_of (const struct gr_probe *p, int np, int *first)
{
  int na = 0;

  for (int i = 0; i < np; i++) {
    int j;

    if (p[i].sb_status != 0)
      continue;
    for (j = 0; j < na; j++)
      if (memcmp (p[first[j]].sb.uuid, p[i].sb.uuid, 16) == 0)
        break;
    if (j == na)
      first[na++] = i;
  }
  return na;
}

/* One array of the scan: its members (as one assembly of all of them
 * decides), spares and copies left out, as text or JSON. */
static void
scan_array (const struct gr_probe *p, int np, const uint8_t *uuid,
            bool json, bool first_array)
{
  static struct gr_probe mp[2 * GR_MAX_MEMBERS];
  static struct gr_assembly a;
  const struct gr_assemble_args args = { .m = -1 };
  int idx[2 * GR_MAX_MEMBERS], nm = 0, i, j;
  bool used[2 * GR_MAX_MEMBERS] = { false };
  char u[37];
  const char *state;

  for (i = 0; i < np && nm < 2 * GR_MAX_MEMBERS; i++)
    if (p[i].sb_status == 0 && memcmp (p[i].sb.uuid, uuid, 16) == 0 &&
        !(p[i].sb.flags & GR_SB_FLAG_SPARE)) {
      idx[nm] = i;
      mp[nm++] = p[i];
    }
  gr_sb_uuid_str (uuid, u);
  if (nm > 0)
    gr_assemble (mp, nm, &args, &a);
  else {
    memset (&a, 0, sizeof a);
    a.outcome = GR_ASSEMBLY_REFUSED;
    snprintf (a.error, sizeof a.error, "only hot spares of it were found");
  }
  for (i = 0; a.outcome == GR_ASSEMBLY_OK && i < a.n; i++)
    if (a.slot[i] >= 0)
      used[a.slot[i]] = true;
  state = a.outcome != GR_ASSEMBLY_OK ? "failed"
    : a.nfailed ? "degraded" : "healthy";
  if (json) {
    printf ("%s\n  {\"uuid\": \"%s\", \"state\": \"%s\"", first_array ? ""
            : ",", u, state);
    if (a.outcome == GR_ASSEMBLY_OK)
      printf (", \"k\": %d, \"m\": %d, \"code\": \"%s\", \"chunk\": %" PRIu32
              ", \"event\": %" PRIu64 ", \"dirty\": %s, \"error\": null",
              a.geom.k, a.geom.m, a.sb.code == GR_CODE_CRS ? "crs" : "rs",
              a.geom.chunk, a.sb.event,
              a.sb.flags & GR_SB_FLAG_DIRTY ? "true" : "false");
    else {
      printf (", \"error\": ");
      gr_json_str (stdout, a.error);
    }
    printf (",\n   \"members\": [");
    for (i = 0; a.outcome == GR_ASSEMBLY_OK && i < a.n; i++) {
      const int q = a.slot[i];

      printf ("%s\n    {\"index\": %d, \"state\": \"%s\", \"path\": ",
              i ? "," : "", i, slot_state_name (a.state[i]));
      gr_json_str (stdout, q >= 0 ? mp[q].path : NULL);
      if (q >= 0)
        printf (", \"event\": %" PRIu64, mp[q].sb.event);
      else
        printf (", \"event\": null");
      printf (", \"why\": ");
      gr_json_str (stdout, a.state[i] == GR_SLOT_ACTIVE || !a.why[i][0]
                   ? NULL : a.why[i]);
      printf ("}");
    }
    printf ("],\n   \"spares\": [");
    for (i = 0, j = 0; i < np; i++)
      if (p[i].sb_status == 0 && memcmp (p[i].sb.uuid, uuid, 16) == 0 &&
          (p[i].sb.flags & GR_SB_FLAG_SPARE)) {
        printf ("%s{\"path\": ", j++ ? ", " : "");
        gr_json_str (stdout, p[i].path);
        printf (", \"event\": %" PRIu64 "}", p[i].sb.event);
      }
    printf ("],\n   \"unused\": [");
    for (i = 0, j = 0; i < nm; i++)
      if (!used[i]) {
        printf ("%s{\"path\": ", j++ ? ", " : "");
        gr_json_str (stdout, mp[i].path);
        printf (", \"index\": %" PRIu32 ", \"event\": %" PRIu64 "}",
                mp[i].sb.index, mp[i].sb.event);
      }
    printf ("]}");
    return;
  }
  if (a.outcome == GR_ASSEMBLY_OK) {
    int active = 0;

    for (i = 0; i < a.n; i++)
      active += a.state[i] == GR_SLOT_ACTIVE;
    printf ("array %s: %d+%d %s, chunk %" PRIu32 " KiB: %s, %d of %d members "
            "(event %" PRIu64 ", %s)\n", u, a.geom.k, a.geom.m,
            a.sb.code == GR_CODE_CRS ? "crs" : "rs", a.geom.chunk >> 10,
            state, active, a.n, a.sb.event,
            a.sb.flags & GR_SB_FLAG_DIRTY ? "dirty" : "clean");
    for (i = 0; i < a.n; i++) {
      const int q = a.slot[i];

      printf ("  member %-3d %-10s", i, slot_state_name (a.state[i]));
      if (q >= 0)
        printf (" event %-6" PRIu64 " %s", mp[q].sb.event, mp[q].path);
      if (a.state[i] != GR_SLOT_ACTIVE && a.why[i][0])
        printf (" (%s)", a.why[i]);
      printf ("\n");
    }
  }
  else {
    printf ("array %s: cannot be assembled: %s\n", u, a.error);
    for (i = 0; i < nm; i++) {
      printf ("  member %-3" PRIu32 " event %-6" PRIu64 " %s\n",
              mp[i].sb.index, mp[i].sb.event, mp[i].path);
      used[i] = true;
    }
  }
  for (i = 0; i < np; i++)
    if (p[i].sb_status == 0 && memcmp (p[i].sb.uuid, uuid, 16) == 0 &&
        (p[i].sb.flags & GR_SB_FLAG_SPARE))
      printf ("  spare                 event %-6" PRIu64 " %s\n",
              p[i].sb.event, p[i].path);
  for (i = 0; i < nm; i++)
    if (!used[i])
      printf ("  not used              event %-6" PRIu64 " %s (an older copy "
              "of member %" PRIu32 ")\n", mp[i].sb.event, mp[i].path,
              mp[i].sb.index);
  (void) idx;
}

int
ctl_scan (int argc, char **argv)
{
  const char **globs = calloc ((size_t) argc + 1, sizeof *globs);
  struct gr_probe *p;
  int *first, ng = 0, np, na, other = 0;
  bool json = false;
  char **paths;

  if (globs == NULL)
    ctl_die ("out of memory");
  for (int i = 0; i < argc; i++)
    if (strcmp (argv[i], "--json") == 0)
      json = true;
    else
      globs[ng++] = argv[i];
  if (ng == 0) {
    fprintf (stderr, "%s: scan needs patterns: scan GLOB... [--json]\n",
             ctl_prog);
    return 2;
  }
  np = gr_disk_scan (globs, ng, &paths);
  if (np < 0)
    ctl_die ("scan: %s", strerror (-np));
  p = calloc ((size_t) np + 1, sizeof *p);
  first = calloc ((size_t) np + 1, sizeof *first);
  if (p == NULL || first == NULL)
    ctl_die ("out of memory");
  for (int i = 0; i < np; i++) {
    (void) probe (paths[i], &p[i]);
    other += p[i].sb_status != 0;
  }
  na = arrays_of (p, np, first);
  if (json)
    printf ("{\"arrays\": [");
  for (int a = 0; a < na; a++)
    scan_array (p, np, p[first[a]].sb.uuid, json, a == 0);
  if (json) {
    printf ("],\n \"other\": [");
    for (int i = 0, c = 0; i < np; i++)
      if (p[i].sb_status != 0) {
        printf ("%s", c++ ? ", " : "");
        gr_json_str (stdout, p[i].path);
      }
    printf ("]}\n");
  }
  else if (other)
    printf ("%d of %d files and devices hold no gpuraid superblock\n",
            other, np);
  gr_disk_scan_free (paths, np);
  free (p);
  free (first);
  free (globs);
  if (na == 0) {
    fprintf (stderr, "%s: scan: no gpuraid superblock in the %d files and "
             "devices the patterns name\n", ctl_prog, np);
    return 1;
  }
  return 0;
}
