/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - what the two files of the array module share (array.c:
 * opening and closing; array-probe.c: the member= paths probed and the
 * scan= patterns searched).  Nothing else includes it; include array.h
 * first. */
#ifndef GPURAID_ARRAY_INTERNAL_H
#define GPURAID_ARRAY_INTERNAL_H

#include "config.h"
#include "format/format.h"
#include "storage/storage.h"

/* The member= paths while opening: what assembly decides from, and the
 * members' storage (NULL: not opened). */
#define MAX_PROBES (2 * GR_MAX_MEMBERS)
struct probes {
  int n;
  struct gr_probe p[MAX_PROBES];
  struct gr_disk *disk[MAX_PROBES];
  char **scanned;               /* scan=: the paths found (theirs) */
  int nscanned;
  const char *spares[GR_MAX_MEMBERS];   /* scan=: spares of the array */
  int nspares;
};

/* Open probe i's path and read its superblock.  -1 only for errors
 * that stop nbdkit (not a file or device); a path that cannot be opened
 * or read is recorded as missing. */
int gr_array_probe_member (struct probes *ps, int i);
void gr_array_close_probes (struct probes *ps);
/* scan=: the files and devices the patterns name that hold a superblock
 * of the array uuid=: its members (but those member= gives) after the
 * member= paths, its spares into ps->spares.  0, or -1 after
 * nbdkit_error. */
int gr_array_scan_members (const struct gr_config *cfg, struct probes *ps);

#endif /* GPURAID_ARRAY_INTERNAL_H */
