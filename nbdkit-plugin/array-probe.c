/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the member= paths probed, the scan= patterns searched (part
 * of the array module).  See array.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "array.h"
#include "array-internal.h"
#include "log.h"

/* Open one member= path and read its superblock.  -1 only for errors
 * that stop nbdkit (not a file or device); a path that cannot be opened
 * or read is recorded as missing. */
int
gr_array_probe_member (struct probes *ps, int i)
{
  struct gr_probe *p = &ps->p[i];
  gr_sb_buf buf;
  char why[256];
  int err, r;

  switch (gr_disk_open (p->path, false, &ps->disk[i], &err, why,
                        sizeof why)) {
  case GR_DISK_OPENED:
    if (gr_disk_direct (ps->disk[i]))
      gr_debug ("member %d (%s): O_DIRECT", i, p->path);
    break;
  case GR_DISK_OPENED_BUFFERED:
    gr_warn ("member %d (%s): %s; buffered (direct=auto), through the page "
             "cache", i, p->path, why);
    break;
  case GR_DISK_NO_DIRECT:
    nbdkit_error ("member %d (%s): %s (direct=on; direct=auto or off takes "
                  "it buffered)", i, p->path, why);
    return -1;
  case GR_DISK_CANNOT_OPEN:
    gr_debug ("member %d (%s): cannot open: %s", i, p->path, why);
    p->open_errno = err ? err : EIO;
    snprintf (p->open_why, sizeof p->open_why, "%.*s",
              (int) sizeof p->open_why - 1, why);
    return 0;
  case GR_DISK_NOT_STORAGE:
  case GR_DISK_NO_NBD:
  case GR_DISK_READ_ONLY_EXPORT:
    nbdkit_error ("member %d (%s): %s", i, p->path, why);
    return -1;
  }
  p->size = gr_disk_size (ps->disk[i]);
  if (p->size < GR_SB_SIZE) {
    p->sb_status = -ENOENT;
    return 0;
  }
  r = gr_disk_pread (ps->disk[i], buf, GR_SB_SIZE, 0);
  if (r < 0) {
    /* An unreadable member is treated like a missing one. */
    p->open_errno = -r;
    gr_disk_close (ps->disk[i]);
    ps->disk[i] = NULL;
    return 0;
  }
  p->sb_status = gr_sb_decode (buf, &p->sb);
  return 0;
}

void
gr_array_close_probes (struct probes *ps)
{
  int i;

  for (i = 0; i < ps->n; i++) {
    gr_disk_close (ps->disk[i]);
    ps->disk[i] = NULL;
  }
}

/* Does path hold a superblock of the array uuid (read-only, closed
 * again)?  Its superblock into sb if so. */
static bool
holds_array (const char *path, const uint8_t *uuid, struct gr_sb *sb)
{
  gr_sb_buf buf;
  struct gr_disk *d;
  char why[256];
  int err;
  bool r;

  switch (gr_disk_open (path, true, &d, &err, why, sizeof why)) {
  case GR_DISK_OPENED:
  case GR_DISK_OPENED_BUFFERED:
    break;
  default:
    return false;
  }
  r = gr_disk_size (d) >= GR_SB_SIZE &&
    gr_disk_pread (d, buf, GR_SB_SIZE, 0) == 0 &&
    gr_sb_decode (buf, sb) == 0 && memcmp (sb->uuid, uuid, 16) == 0;
  gr_disk_close (d);
  return r;
}

/* scan=: the files and devices the patterns name that hold a superblock
 * of the array uuid=: its members (but those member= gives) after the
 * member= paths, its spares into ps->spares.  0, or -1 after
 * nbdkit_error. */
int
gr_array_scan_members (const struct gr_config *cfg, struct probes *ps)
{
  const int n = gr_disk_scan ((const char *const *) cfg->scans, cfg->nscans,
                              &ps->scanned);
  char uuid[37];
  int found = 0;

  gr_sb_uuid_str (cfg->uuid, uuid);
  if (n < 0) {
    nbdkit_error ("scan=%s: %s", cfg->scans[0], strerror (-n));
    return -1;
  }
  ps->nscanned = n;
  for (int i = 0; i < n; i++) {
    const char *path = ps->scanned[i];
    struct gr_sb sb;
    bool given = false;

    if (!holds_array (path, cfg->uuid, &sb)) {
      gr_debug ("scan: %s: no superblock of array %s", path, uuid);
      continue;
    }
    for (int j = 0; j < cfg->npaths && !given; j++) {
      struct stat a, b;

      given = strcmp (path, cfg->paths[j]) == 0 ||
        (stat (path, &a) == 0 && stat (cfg->paths[j], &b) == 0 &&
         a.st_dev == b.st_dev && a.st_ino == b.st_ino);
    }
    found++;
    if (given)
      continue;
    if (sb.flags & GR_SB_FLAG_SPARE) {
      gr_debug ("scan: %s: a hot spare of array %s", path, uuid);
      if (ps->nspares < GR_MAX_MEMBERS)
        ps->spares[ps->nspares++] = path;
      continue;
    }
    gr_debug ("scan: %s: member %" PRIu32 " of array %s (event %" PRIu64
              ")", path, sb.index, uuid, sb.event);
    if (ps->n == MAX_PROBES) {
      nbdkit_error ("scan=%s: more than %d superblocks of array %s found",
                    cfg->scans[0], MAX_PROBES, uuid);
      return -1;
    }
    ps->p[ps->n++].path = path;
  }
  if (found == 0) {
    nbdkit_error ("scan=%s%s: no member of array %s among the %d files and "
                  "devices found", cfg->scans[0], cfg->nscans > 1 ?
                  " (and the other patterns)" : "", uuid, n);
    return -1;
  }
  return 0;
}

