/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the assembly decision (pure).
 *
 * From what was read off each member= path (struct gr_probe: opened or
 * not, size, superblock), decide what the array is: for create=true the
 * new superblock and geometry, or that the members are refused; to
 * assemble, which superblock is authoritative, which member goes in
 * which slot, which slots are missing, stale or marked failed (and why),
 * whether the array can start, and whether it needs a resync
 * (docs/format.md, "Assembling an array").  No I/O, no logging: array.c
 * does the I/O and says what this decided; test-assemble checks it. */
#ifndef GPURAID_ASSEMBLE_H
#define GPURAID_ASSEMBLE_H

#include <stdbool.h>
#include <stdint.h>

#include "gf/gf.h"
#include "raidmap/raidmap.h"
#include "superblock.h"

#define GR_MIN_DATA_OFFSET (1024 * 1024)

/* One member= path, as read. */
struct gr_probe {
  const char *path;
  int open_errno;               /* 0: opened; else missing, with the reason
                                 * it could not be opened or read */
  char open_why[160];           /* that reason in words, if not just
                                 * strerror (a remote member's: libnbd's) */
  uint64_t size;
  int sb_status;                /* gr_sb_decode's result; -ENOENT: none */
  struct gr_sb sb;
};

/* What the command line says of the geometry (0 or -1: not given). */
struct gr_assemble_args {
  int m;                        /* -1: not given */
  uint32_t chunk;               /* 0: not given */
  int code;                     /* 0: not given */
  bool force;                   /* create over existing superblocks */
  bool salvage;                 /* bring a failed array up read-only */
  uint64_t bitmap_chunk;        /* create: member bytes a bitmap bit
                                 * covers at least; 0: the default */
};

enum gr_slot_state {
  GR_SLOT_ACTIVE,
  GR_SLOT_MISSING,              /* no member with this index */
  GR_SLOT_STALE,                /* its event is 2 or more behind the
                                 * array's: an old copy of the member */
  GR_SLOT_FAILED,               /* marked failed in the array */
  GR_SLOT_SALVAGED,             /* marked failed or stale, but present and
                                 * used, read-only (salvage) */
  GR_SLOT_REBUILDING,           /* the replacement of the rebuild the
                                 * array records: its rebuild resumes from
                                 * the checkpoint (sb.rebuild_at) */
};

enum gr_resync_need {
  GR_RESYNC_NONE,               /* shut down cleanly */
  GR_RESYNC_FULL,               /* dirty, every member: resync (of the
                                 * regions in the bitmap, if kept) */
  GR_RESYNC_DEGRADED,           /* dirty and degraded: replay the journal;
                                 * consistent if it was journaled
                                 * (GR_SB_FLAG_JOURNALED), else warn and
                                 * keep the dirty flag */
};

enum gr_assembly_outcome { GR_ASSEMBLY_OK, GR_ASSEMBLY_REFUSED };

struct gr_assembly {
  enum gr_assembly_outcome outcome;
  char error[1024];             /* when refused: one line */
  struct gr_sb sb;              /* the array's superblock (create: without
                                 * UUID and time, event 0) */
  struct gr_geom geom;
  int n;
  int nfailed;                  /* slots not active */
  int slot[GR_MAX_MEMBERS];     /* the probe in each slot, or -1 */
  enum gr_slot_state state[GR_MAX_MEMBERS];
  const char *path[GR_MAX_MEMBERS];     /* a path for the slot, or NULL */
  char why[GR_MAX_MEMBERS][512];        /* why a slot is not active */
  bool reordered;               /* members not in index order */
  enum gr_resync_need resync;
  bool bitmap_kept;             /* resync: the newest dirty superblock
                                 * says the write-intent bitmap was kept
                                 * (GR_SB_FLAG_BITMAP) */
  bool read_only;               /* salvage: nothing may be written */
  bool salvaged;                /* members marked failed brought back */
  char warning[2048];           /* "" or one line for the operator: the
                                 * slots not active, paths not used */
};

/* create=true over probes p[0..np-1]: member i of the new array is p[i];
 * m parity members. */
void gr_assemble_create (const struct gr_probe *p, int np,
                         const struct gr_assemble_args *args,
                         struct gr_assembly *a);

/* Assemble an existing array from probes p[0..np-1].  More than m
 * members missing, stale or failed: refused ("the array has failed"),
 * unless args->salvage, which brings the present members marked failed
 * or stale back, read-only, if that leaves at most m missing. */
void gr_assemble (const struct gr_probe *p, int np,
                  const struct gr_assemble_args *args, struct gr_assembly *a);

#endif /* GPURAID_ASSEMBLE_H */
