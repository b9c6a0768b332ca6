/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the plugin's options: parsed, checked, described.
 *
 * struct gr_config is filled by gr_config_parse, one key=value at a time
 * (nbdkit's .config), and checked as a whole by gr_config_check
 * (.config_complete).  Errors name the key: one line via nbdkit_error,
 * and -1. */
#ifndef GPURAID_CONFIG_H
#define GPURAID_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "gf/gf.h"
#include "format/format.h"
#include "storage/storage.h"
#include "pace.h"

#define GR_VERSION "0.1"
#define GR_DEFAULT_CHUNK 65536
#define GR_MAX_CHUNK (UINT32_C (64) << 20)    /* 64 MiB */

enum gr_accel { GR_ACCEL_AUTO, GR_ACCEL_CPU, GR_ACCEL_GPU };
#define GR_CONFIG_MAX_SPARES 16
#define GR_CONFIG_MAX_SCANS 16

struct gr_config {
  char *paths[GR_MAX_MEMBERS];  /* absolute paths or NBD URIs, in
                                 * command-line order */
  int npaths;
  char *scans[GR_CONFIG_MAX_SCANS];     /* scan=: shell patterns */
  int nscans;
  bool have_uuid;               /* uuid= given */
  uint8_t uuid[16];             /* the array (scan=; checked with member=) */
  int m;                        /* -1 = not given */
  uint32_t chunk;               /* 0 = not given */
  int code;                     /* 0 = not given, else enum gr_code */
  bool create, force;
  bool salvage;                 /* a failed array, read-only */
  enum gr_integrity_arg integrity;      /* checksums (format.h) */
  char *backend;                /* NULL = best available */
  enum gr_accel accel;
  int gpu_device;
  uint64_t scratch_max;         /* bytes of large plan buffers at once */
  uint64_t resync_rate;         /* bytes a second, 0: no limit,
                                 * GR_PACE_AUTO: yield to requests */
  uint64_t bitmap_chunk;        /* create: bytes a bitmap bit covers */
  char *control;                /* control socket path, or NULL */
  char *event_hook;             /* event-hook=: a program, or NULL */
  int remote_timeout;           /* seconds: a remote member's access */
  int remote_retries;           /* new connections to a remote member */
  int max_read_errors;          /* a member's read errors repaired before
                                 * it fails */
  enum gr_disk_direct direct;   /* local members below the page cache */
  /* spare= (member -1) and replace=INDEX:PATH, as paths above */
  struct { char *path; int member; } spares[GR_CONFIG_MAX_SPARES];
  int nspares;
  unsigned seen;                /* keys given (each at most once) */
};

#define GR_CONFIG_INIT { .m = -1, .accel = GR_ACCEL_AUTO, \
                        .scratch_max = (uint64_t) 256 << 20, \
                        .resync_rate = GR_PACE_AUTO, \
                        .remote_timeout = 30, .remote_retries = 3, \
                        .max_read_errors = 20, .direct = GR_DIRECT_AUTO }

/* One key=value.  0, or -1 after nbdkit_error. */
int gr_config_parse (struct gr_config *cfg, const char *key,
                     const char *value);
/* The keys together, before anything is opened.  0 or -1. */
int gr_config_check (const struct gr_config *cfg);
void gr_config_free (struct gr_config *cfg);

#define gr_config_help \
  "member=PATH|URI        (repeat) A member file or device, or an NBD export\n" \
  "                       on another host (nbd://HOST/EXPORT...).\n" \
  "scan=GLOB              (repeat, with uuid=) The members and spares of\n" \
  "                       array UUID among the files and devices GLOB names.\n" \
  "uuid=UUID              The array to assemble (scan=), or to check.\n" \
  "m=N                    Number of parity members (required to create).\n" \
  "chunk=SIZE             Chunk size, power of two >= 4096 (default 64K).\n" \
  "code=rs|crs            Reed-Solomon or Cauchy Reed-Solomon (default rs).\n" \
  "create=true|false      Create a new array on the members.\n" \
  "force=true|false       Let create overwrite an existing array.\n" \
  "salvage=true|false     Bring up a failed array read-only.\n" \
  "integrity=on|off       A checksum of every 4K block, verified on every\n" \
  "                       read (set at create; default on).\n" \
  "backend=ref|isal|gfc|cuda  Coding backend (default: best available).\n" \
  "accel=auto|cpu|gpu     Use the GPU (default auto).\n" \
  "gpu-device=N           CUDA device number (default 0).\n" \
  "scratch-max=SIZE       Memory for large requests at once (default 256M).\n" \
  "bitmap-chunk=SIZE      With create=true: member bytes a write-intent bitmap\n" \
  "                       bit covers (default 64M).\n" \
  "resync-rate=auto|SIZE  Resync, rebuild and scrub at most SIZE bytes a\n" \
  "                       second (0: no limit; default auto: full speed\n" \
  "                       while idle, a fifth of the time under requests).\n" \
  "control=PATH           Control socket for gpuraidctl (owner only).\n" \
  "event-hook=PROGRAM     Run PROGRAM once per event (a member failed, a\n" \
  "                       rebuild finished...), the event in GPURAID_*.\n" \
  "spare=PATH             (repeat) A hot spare: rebuilt onto when a member\n" \
  "                       fails or is missing.\n" \
  "replace=INDEX:PATH     (repeat) Rebuild missing member INDEX onto PATH.\n" \
  "remote-timeout=SECONDS An NBD member that has not answered an access in\n" \
  "                       this time fails (default 30).\n" \
  "remote-retries=N       New connections to an NBD member that dropped one,\n" \
  "                       within the timeout (default 3).\n" \
  "max-read-errors=N      Read errors (EIO) a member's chunks are rebuilt and\n" \
  "                       rewritten for before it fails (default 20).\n" \
  "direct=on|off|auto     Local members with O_DIRECT, below the page cache\n" \
  "                       (default auto: on for block devices)."

#endif /* GPURAID_CONFIG_H */
