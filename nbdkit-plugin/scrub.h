/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - scrub: read every stripe, check its parity, name the corrupt
 * member and, when asked, repair it; online.
 *
 * A job (job.h) whose batches are check plans (plan.h: gr_plan_check)
 * run by the executor's lanes, their stripes held against writes
 * (exclusively when repairing).  On a healthy array a batch's parity is
 * computed again in one coding operation (the GPU's when one is in use)
 * and compared; on a degraded one each stripe's live chunks beyond the
 * first k survivors are rebuilt from those and compared.  A stripe that
 * does not match is examined alone: each live chunk in turn is taken as
 * erased, and if exactly one choice makes the rest consistent, that
 * chunk is the corrupt one (this needs two live chunks of redundancy:
 * with one it is only detected), rebuilt from the others and, with
 * repair, written back.  Otherwise it is reported and nothing is
 * written: the scrub never guesses.  Stripes whose parity waits for a
 * resync (bitmap.h) are skipped and counted.
 *
 * Each mismatch is logged (the first 100) with its array bytes, member
 * and member offset; the first GR_SCRUB_REPORTS are kept for the status.
 * At most rate bytes of array data a second (pace.h); progress logged
 * every 10 % (nbdkit -v).  Where the next scrub goes on from is kept in
 * the superblocks (members.h: gr_members_set_scrub_at) every 10 % and
 * when it stops (shutdown, gpuraidctl scrub stop, a failure); 0 once it
 * has reached the end.
 *
 * One owner: struct gr_scrub holds its job, counts and reports. */
#ifndef GPURAID_SCRUB_H
#define GPURAID_SCRUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bitmap.h"
#include "exec.h"
#include "resync.h"

#define GR_SCRUB_REPORTS 32

struct gr_scrub;

/* A stripe whose parity did not match. */
struct gr_scrub_report {
  uint64_t stripe;
  uint64_t offset, length;      /* array bytes: the corrupt data chunk's,
                                 * else the stripe's */
  int member;                   /* the corrupt member, -1: not told */
  int index;                    /* its code index (>= k: parity), or -1 */
  uint64_t member_offset;       /* of the chunk on every member */
  bool repaired;
};

struct gr_scrub_counts {
  uint64_t bytes;               /* array bytes checked by this run */
  uint64_t checked;             /* stripes checked */
  uint64_t mismatched;          /* of those, not consistent */
  uint64_t located;             /* of those, one corrupt chunk named */
  uint64_t repaired;            /* of those, written back */
  uint64_t skipped;             /* stripes not checked (resync pending) */
  uint64_t cksum_repaired;      /* blocks that failed their checksums,
                                 * rebuilt and rewritten (with or
                                 * without repair, as any read does) */
  uint64_t cksum_unrecoverable; /* such blocks too few good chunks were
                                 * left to rebuild: reads of them answer
                                 * EIO (their stripes reported) */
};

/* Scrub stripes [from, end); repair: write back what is located.  NULL
 * after nbdkit_error. */
struct gr_scrub *gr_scrub_start (struct gr_exec *x, struct gr_bitmap *b,
                                 bool repair, uint64_t rate, uint64_t from);
/* Progress in the resync's terms (bytes of array data; done counts the
 * stripes before from). */
void gr_scrub_progress (struct gr_scrub *sc, struct gr_progress *out);
bool gr_scrub_repairing (const struct gr_scrub *sc);
void gr_scrub_counts (struct gr_scrub *sc, struct gr_scrub_counts *out);
/* The first reports (up to max); how many were copied. */
size_t gr_scrub_reports (struct gr_scrub *sc, struct gr_scrub_report *out,
                         size_t max);
void gr_scrub_set_rate (struct gr_scrub *sc, uint64_t rate);
/* Stop it and wait (a finished one just returns). */
void gr_scrub_stop (struct gr_scrub *sc);
void gr_scrub_free (struct gr_scrub *sc);

#endif /* GPURAID_SCRUB_H */
