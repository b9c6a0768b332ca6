/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraidctl - look at and steer a gpuraid array.
 *
 *   gpuraidctl examine MEMBER...          offline: each member's superblock
 *                                         and what an assembly would do
 *   gpuraidctl map OFFSET MEMBER...       offline: where the array's byte
 *                                         OFFSET lives (member, offset), and
 *                                         its stripe's parity
 *   gpuraidctl -c PATH status [--json]    the running array (control=PATH)
 *   gpuraidctl -c PATH fail INDEX         fail a member now
 *   gpuraidctl -c PATH replace INDEX NEWPATH  rebuild a failed member
 *                                         onto NEWPATH, online
 *   gpuraidctl -c PATH spare add PATH     a hot spare, used when a member
 *                                         fails
 *   gpuraidctl -c PATH scrub [--repair]   check every stripe's parity
 *                                         (and repair what it can name)
 *   gpuraidctl -c PATH scrub --stop       stop it (the next goes on)
 *   gpuraidctl -c PATH rate BYTES_PER_S|auto  the resync's, rebuild's
 *                                         and scrub's rate limit (a
 *                                         size: 50M, 1G, 4096; 0: none)
 *   gpuraidctl -c PATH wait               until the running operation ends
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

#include "common/size.h"
#include "format/format.h"
#include "storage/storage.h"

static const char *prog = "gpuraidctl";

static void
usage (FILE *f)
{
  fprintf (f,
           "usage: %s examine MEMBER...\n"
           "       %s map OFFSET MEMBER...\n"
           "       %s -c CONTROL_SOCKET status [--json]\n"
           "       %s -c CONTROL_SOCKET fail INDEX\n"
           "       %s -c CONTROL_SOCKET replace INDEX NEWPATH\n"
           "       %s -c CONTROL_SOCKET spare add PATH\n"
           "       %s -c CONTROL_SOCKET scrub [--repair | --stop]\n"
           "       %s -c CONTROL_SOCKET rate BYTES_PER_S|auto\n"
           "       %s -c CONTROL_SOCKET wait\n", prog, prog, prog, prog,
           prog, prog, prog, prog, prog);
}

static void __attribute__ ((noreturn, format (printf, 1, 2)))
die (const char *fmt, ...)
{
  va_list ap;

  fprintf (stderr, "%s: ", prog);
  va_start (ap, fmt);
  vfprintf (stderr, fmt, ap);
  va_end (ap);
  fputc ('\n', stderr);
  exit (1);
}

/* A member's path for the server: an NBD URI as it is, a file's made
 * absolute (the server runs elsewhere).  NULL with errno set. */
static char *
member_path (const char *arg)
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
  uint8_t buf[GR_SB_SIZE];
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
  printf ("  index          %" PRIu32 "\n", sb->index);
  printf ("  event          %" PRIu64 "\n", sb->event);
  printf ("  state          %s%s%s\n",
          sb->flags & GR_SB_FLAG_DIRTY ? "dirty (not shut down cleanly, or "
          "serving)" : "clean",
          sb->flags & GR_SB_FLAG_JOURNALED ? ", journaled" : "",
          sb->flags & GR_SB_FLAG_BITMAP ? ", write-intent bitmap kept" : "");
  printf ("  failed members");
  for (uint32_t i = 0; i < sb->k + sb->m; i++)
    if (gr_sb_failed_test (sb, (int) i)) {
      printf (" %" PRIu32, i);
      any = true;
    }
  printf ("%s\n", any ? "" : " none");
  if (sb->flags & GR_SB_FLAG_REBUILDING)
    printf ("  rebuilding     this member is a replacement being rebuilt "
            "(rebuild %" PRIu64 ")\n", sb->rebuild_id);
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
  }
  return "?";
}

static int
examine (int argc, char **argv)
{
  static struct gr_probe p[GR_MAX_MEMBERS];
  static struct gr_assembly a;
  const struct gr_assemble_args args = { .m = -1 };
  int np = argc, bad = 0;

  if (np == 0) {
    usage (stderr);
    return 2;
  }
  if (np > GR_MAX_MEMBERS)
    die ("examine: at most %d members", GR_MAX_MEMBERS);
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
             "superblock\n", prog, bad, np);
  return bad ? 1 : 0;
}

/* gpuraidctl map OFFSET MEMBER...: the geometry from the members'
 * superblocks (as an assembly decides it), then raidmap's answer. */
static int
map (int argc, char **argv)
{
  static struct gr_probe p[GR_MAX_MEMBERS];
  static struct gr_assembly a;
  const struct gr_assemble_args args = { .m = -1 };
  struct gr_extent e;
  uint64_t off, size;
  char *end;

  if (argc < 2) {
    fprintf (stderr, "%s: map needs OFFSET and the members\n", prog);
    return 2;
  }
  errno = 0;
  if (strncmp (argv[0], "0x", 2) == 0 || strncmp (argv[0], "0X", 2) == 0) {
    off = strtoull (argv[0] + 2, &end, 16);
    if (errno || *end || !isxdigit ((unsigned char) argv[0][2]))
      die ("map %s: not a byte offset (a size: 1G, 4096; or 0x hex)",
           argv[0]);
  }
  else if (!gr_size_parse (argv[0], &off))
    die ("map %s: not a byte offset (a size: 1G, 4096; or 0x hex)",
         argv[0]);
  if (argc - 1 > GR_MAX_MEMBERS)
    die ("map: at most %d members", GR_MAX_MEMBERS);
  for (int i = 1; i < argc; i++)
    (void) probe (argv[i], &p[i - 1]);
  gr_assemble (p, argc - 1, &args, &a);
  if (a.outcome == GR_ASSEMBLY_REFUSED)
    die ("map: the members do not make an array: %s", a.error);
  size = gr_map_size (&a.geom);
  if (off >= size)
    die ("map %" PRIu64 ": beyond the array's %" PRIu64 " bytes", off, size);
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

/* --- the control socket -------------------------------------------------- */

/* Send cmd, return the body of an "ok" answer (malloc'd); an "error:"
 * answer dies with its line. */
static char *
request (const char *sock, const char *cmd)
{
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  char *buf = NULL;
  size_t len = 0, cap = 0;
  int fd;

  if (strlen (sock) >= sizeof sa.sun_path)
    die ("-c %s: path too long for a socket", sock);
  strcpy (sa.sun_path, sock);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd == -1)
    die ("socket: %s", strerror (errno));
  if (connect (fd, (struct sockaddr *) &sa, sizeof sa) == -1)
    die ("cannot reach the array's control socket %s: %s (is nbdkit "
         "running with control=%s?)", sock, strerror (errno), sock);
  /* A server that refuses at once (too many clients) has said why and
   * closed: the send fails (EPIPE), and the answer is read all the same;
   * after it a recv says ECONNRESET (our line was not read), not 0. */
  if ((send (fd, cmd, strlen (cmd), MSG_NOSIGNAL) != (ssize_t) strlen (cmd)
       || send (fd, "\n", 1, MSG_NOSIGNAL) != 1) && errno != EPIPE)
    die ("%s: send: %s", sock, strerror (errno));
  for (;;) {
    ssize_t r;

    if (len + 4096 > cap) {
      cap = cap ? 2 * cap : 65536;
      buf = realloc (buf, cap + 1);
      if (buf == NULL)
        die ("out of memory");
    }
    r = recv (fd, buf + len, cap - len, 0);
    if (r == -1 && errno == EINTR)
      continue;
    if (r == -1 && errno == ECONNRESET && len > 0)
      break;
    if (r == -1)
      die ("%s: recv: %s", sock, strerror (errno));
    if (r == 0)
      break;
    len += (size_t) r;
  }
  close (fd);
  if (buf == NULL)
    die ("%s: the server closed the connection without an answer", sock);
  buf[len] = '\0';
  if (strncmp (buf, "ok\n", 3) == 0) {
    memmove (buf, buf + 3, len - 2);
    return buf;
  }
  if (strncmp (buf, "error: ", 7) == 0) {
    buf[strcspn (buf, "\n")] = '\0';
    die ("%s", buf + 7);
  }
  die ("%s: not a gpuraid control socket (unexpected answer)", sock);
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
      die ("%s: cannot read the progress line: %s", sock, p);
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
      die ("examine reads the members themselves: no -c");
    return examine (argc - i - 1, argv + i + 1);
  }
  if (strcmp (argv[i], "map") == 0) {
    if (sock)
      die ("map reads the members themselves: no -c");
    return map (argc - i - 1, argv + i + 1);
  }
  if (sock == NULL) {
    fprintf (stderr, "%s: %s needs -c CONTROL_SOCKET (the plugin's "
             "control=PATH)\n", prog, argv[i]);
    return 2;
  }
  if (strcmp (argv[i], "status") == 0 && argc - i <= 2) {
    const bool json = argc - i == 2;
    char *body;

    if (json && strcmp (argv[i + 1], "--json") != 0) {
      fprintf (stderr, "%s: status %s: the only option is --json\n", prog,
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
      die ("%s: a newline in the argument", argv[i]);
    body = request (sock, cmd);
    fputs (body, stdout);
    free (body);
    return 0;
  }
  if (strcmp (argv[i], "replace") == 0 && argc - i == 3) {
    char cmd[PATH_MAX + 64], *body, *abs = member_path (argv[i + 2]);

    if (abs == NULL)
      die ("replace %s %s: %s", argv[i + 1], argv[i + 2], strerror (errno));
    if (strchr (abs, '\n') || strchr (argv[i + 1], ' '))
      die ("replace: a newline or space where it cannot be");
    snprintf (cmd, sizeof cmd, "replace %s %s", argv[i + 1], abs);
    free (abs);
    body = request (sock, cmd);
    fputs (body, stdout);
    free (body);
    return 0;
  }
  if (strcmp (argv[i], "spare") == 0 && argc - i == 3 &&
      strcmp (argv[i + 1], "add") == 0) {
    char cmd[PATH_MAX + 64], *body, *abs = member_path (argv[i + 2]);

    if (abs == NULL)
      die ("spare add %s: %s", argv[i + 2], strerror (errno));
    if (strchr (abs, '\n'))
      die ("spare add: a newline in the path");
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
                 "--stop\n", prog, argv[i + 1]);
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
  fprintf (stderr, "%s: unknown command or wrong arguments: %s (%s --help "
           "lists the commands)\n", prog, argv[i], prog);
  return 2;
}
