/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - test of the assembly decision (assemble.c), without I/O:
 * creation checks, placement by index whatever the command-line order,
 * the authoritative superblock, missing / stale / failed members and what
 * is said about them, refusals with the member named, and the resync
 * decision. */
#undef NDEBUG
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/format.h"
#include "tests/testkit.h"

#define MiB (UINT64_C (1) << 20)
#define SIZE (16 * MiB)

static const char *const paths[] = { "/m0", "/m1", "/m2", "/m3", "/m4",
                                     "/m5" };

/* Fresh probes of n members with no superblock. */
static void
fresh (struct gr_probe *p, int n)
{
  int i;

  memset (p, 0, n * sizeof *p);
  for (i = 0; i < n; i++) {
    p[i].path = paths[i];
    p[i].size = SIZE;
    p[i].sb_status = -ENOENT;
  }
}

/* Probes of an array of n = k + m members as created, member i at
 * position i, all at event ev. */
static void
array (struct gr_probe *p, int n, int m, uint64_t ev)
{
  struct gr_assemble_args args = { .m = m, .chunk = 0, .code = 0 };
  struct gr_assembly *a = malloc (sizeof *a);
  int i;

  fresh (p, n);
  gr_assemble_create (p, n, &args, a);
  CHECK (a->outcome == GR_ASSEMBLY_OK, "create: %s", a->error);
  memset (a->sb.uuid, 0x42, 16);
  a->sb.event = ev;
  for (i = 0; i < n; i++) {
    p[i].sb = a->sb;
    p[i].sb.index = i;
    p[i].sb_status = 0;
  }
  free (a);
}

static struct gr_assembly *
assemble_args (const struct gr_probe *p, int np,
               const struct gr_assemble_args *args)
{
  struct gr_assembly *a = malloc (sizeof *a);

  gr_assemble (p, np, args, a);
  return a;
}

static struct gr_assembly *
assemble (const struct gr_probe *p, int np, int m)
{
  struct gr_assemble_args args = { .m = m, .chunk = 0, .code = 0 };
  struct gr_assembly *a = malloc (sizeof *a);

  gr_assemble (p, np, &args, a);
  return a;
}

static void
expect_refusal (const struct gr_probe *p, int np, int m, const char *want)
{
  struct gr_assembly *a = assemble (p, np, m);

  CHECK (a->outcome == GR_ASSEMBLY_REFUSED && strstr (a->error, want),
         "want a refusal with '%s', got %s: '%s'", want,
         a->outcome == GR_ASSEMBLY_OK ? "ok" : "refused", a->error);
  CHECK (strchr (a->error, '\n') == NULL, "error of more than one line");
  free (a);
}

static void
test_create (void)
{
  struct gr_assemble_args args = { .m = 2, .chunk = 0, .code = 0,
                                   .integrity = GR_INTEGRITY_OFF };
  struct gr_assembly *a = malloc (sizeof *a);
  struct gr_probe p[6];
  int i;

  fresh (p, 6);
  /* With checksums (the default): their area where the data started (1
   * MiB), 4 bytes a 4 KiB block of the most data there could be (15 MiB:
   * 16 KiB), the data at the next chunk. */
  args.integrity = GR_INTEGRITY_DEFAULT;
  gr_assemble_create (p, 6, &args, a);
  CHECK (a->outcome == GR_ASSEMBLY_OK && a->sb.cksum_offset == MiB &&
         a->sb.data_offset == MiB + 65536 &&
         a->sb.data_size == SIZE - MiB - 65536 && a->geom.stripes == 239,
         "integrity: cksum %" PRIu64 " data %" PRIu64, a->sb.cksum_offset,
         a->sb.data_offset);
  CHECK (gr_sb_validate (&a->sb) == 0, "created superblock invalid");
  /* 4 MiB chunks: room for 4 journal slots of 4 KiB + 2 chunks first
   * (36 MiB), the checksums there, the data at the next chunk. */
  args.chunk = 4 * MiB;
  for (i = 0; i < 6; i++)
    p[i].size = 64 * MiB;
  gr_assemble_create (p, 6, &args, a);
  CHECK (a->outcome == GR_ASSEMBLY_OK && a->sb.cksum_offset == 36 * MiB &&
         a->sb.data_offset == 40 * MiB && a->sb.data_size == 24 * MiB,
         "integrity, chunk 4M: cksum %" PRIu64 " data %" PRIu64,
         a->sb.cksum_offset, a->sb.data_offset);
  for (i = 0; i < 6; i++)
    p[i].size = 42 * MiB;
  gr_assemble_create (p, 6, &args, a);
  CHECK (a->outcome == GR_ASSEMBLY_REFUSED &&
         strstr (a->error, "with checksums (integrity=on)"), "%s", a->error);
  fresh (p, 6);
  args.chunk = 0;
  args.integrity = GR_INTEGRITY_OFF;
  gr_assemble_create (p, 6, &args, a);
  CHECK (a->outcome == GR_ASSEMBLY_OK, "create 4+2: %s", a->error);
  CHECK (a->sb.k == 4 && a->sb.m == 2 && a->sb.code == GR_CODE_RS &&
         a->sb.chunk == 65536 && a->sb.data_offset == MiB &&
         a->sb.data_size == SIZE - MiB && a->geom.stripes == 240 &&
         a->n == 6 && a->nfailed == 0,
         "created geometry k=%u m=%u chunk=%u offset=%" PRIu64, a->sb.k,
         a->sb.m, a->sb.chunk, a->sb.data_offset);
  for (i = 0; i < 6; i++)
    CHECK (a->slot[i] == i && a->state[i] == GR_SLOT_ACTIVE, "slot %d", i);

  args.chunk = 4 * MiB;
  for (i = 0; i < 6; i++)
    p[i].size = 64 * MiB;
  gr_assemble_create (p, 6, &args, a);
  CHECK (a->outcome == GR_ASSEMBLY_OK && a->sb.data_offset == 36 * MiB &&
         a->sb.data_size == 28 * MiB, "chunk 4M: offset %" PRIu64,
         a->sb.data_offset);
  fresh (p, 6);
  gr_assemble_create (p, 6, &args, a);
  CHECK (a->outcome == GR_ASSEMBLY_REFUSED &&
         strstr (a->error, "members are too small") &&
         strstr (a->error, "at least 41943040 bytes"), "%s", a->error);
  args.chunk = 0;

  p[3].size = SIZE + 4096;
  gr_assemble_create (p, 6, &args, a);
  CHECK (a->outcome == GR_ASSEMBLY_REFUSED &&
         strstr (a->error, "member 3 (/m3) is"), "%s", a->error);
  p[3].size = SIZE;
  p[2].open_errno = ENOENT;
  gr_assemble_create (p, 6, &args, a);
  CHECK (a->outcome == GR_ASSEMBLY_REFUSED &&
         strstr (a->error, "member 2 (/m2): cannot open"), "%s", a->error);
  p[2].open_errno = 0;
  p[4].sb_status = 0;
  gr_assemble_create (p, 6, &args, a);
  CHECK (a->outcome == GR_ASSEMBLY_REFUSED &&
         strstr (a->error, "member 4 (/m4) already holds") &&
         strstr (a->error, "force=true"), "%s", a->error);
  p[4].sb_status = -EBADMSG;
  gr_assemble_create (p, 6, &args, a);
  CHECK (a->outcome == GR_ASSEMBLY_REFUSED &&
         strstr (a->error, "member 4 (/m4) holds a gpuraid superblock"),
         "%s", a->error);
  args.force = true;
  gr_assemble_create (p, 6, &args, a);
  CHECK (a->outcome == GR_ASSEMBLY_OK, "force: %s", a->error);
  free (a);
}

/* Every array is created with room for GR_JOURNAL_MIN_SLOTS journal
 * slots (its degraded writes journaled), with or without checksums; the
 * default 4+2 with 64 KiB chunks (7 slots in 1 MiB) is laid out as
 * before.  Before, 8+8 had one slot and 16+16, or 4+2 with 512 KiB
 * chunks, none. */
static void
test_journal_room (void)
{
  static const struct { int k, m; uint32_t chunk; } geo[] = {
    { 4, 2, 65536 }, { 2, 1, 4096 }, { 8, 8, 65536 }, { 16, 16, 65536 },
    { 4, 2, 512 * 1024 }, { 10, 4, 1024 * 1024 }, { 1, 1, 4 * 1024 * 1024 },
    { 3, 5, 65536 },
  };
  struct gr_probe p[32];
  struct gr_assembly *a = malloc (sizeof *a);

  for (size_t g = 0; g < sizeof geo / sizeof geo[0]; g++)
    for (int integ = 0; integ < 2; integ++) {
      const int n = geo[g].k + geo[g].m;
      struct gr_assemble_args args = {
        .m = geo[g].m, .chunk = geo[g].chunk,
        .integrity = integ ? GR_INTEGRITY_DEFAULT : GR_INTEGRITY_OFF,
      };
      const size_t slot = gr_journal_slot_size ((uint32_t) geo[g].k,
                                                (uint32_t) geo[g].m,
                                                geo[g].chunk);
      unsigned slots;

      memset (p, 0, sizeof p);
      for (int i = 0; i < n; i++) {
        p[i].path = "/m";
        p[i].size = 1024 * MiB;
        p[i].sb_status = -ENOENT;
      }
      gr_assemble_create (p, n, &args, a);
      CHECK (a->outcome == GR_ASSEMBLY_OK, "%d+%d: %s", geo[g].k, geo[g].m,
             a->error);
      slots = gr_journal_slot_count (gr_sb_journal_end (&a->sb), slot);
      CHECK (slots >= GR_JOURNAL_MIN_SLOTS, "%d+%d chunk %" PRIu32
             " integrity %d: %u journal slots", geo[g].k, geo[g].m,
             geo[g].chunk, integ, slots);
      CHECK (a->sb.data_offset % geo[g].chunk == 0 &&
             a->sb.data_offset % 4096 == 0, "data offset %" PRIu64,
             a->sb.data_offset);
      if (g == 0)
        CHECK (gr_sb_journal_end (&a->sb) == MiB && slots == 7,
               "4+2 64K: journal to %" PRIu64 ", %u slots",
               gr_sb_journal_end (&a->sb), slots);
    }
  free (a);
}

/* integrity= at assembly must match the array, or be left out. */
static void
test_integrity_arg (void)
{
  struct gr_assemble_args args = { .m = -1 };
  struct gr_assembly *a;
  struct gr_probe p[6];

  array (p, 6, 2, 5);                   /* created with checksums */
  a = assemble_args (p, 6, &args);
  CHECK (a->outcome == GR_ASSEMBLY_OK && a->sb.cksum_offset == MiB,
         "integrity not given: %s", a->error);
  free (a);
  args.integrity = GR_INTEGRITY_ON;
  a = assemble_args (p, 6, &args);
  CHECK (a->outcome == GR_ASSEMBLY_OK, "integrity=on: %s", a->error);
  free (a);
  args.integrity = GR_INTEGRITY_OFF;
  a = assemble_args (p, 6, &args);
  CHECK (a->outcome == GR_ASSEMBLY_REFUSED &&
         strstr (a->error, "integrity=off does not match the array "
                 "(integrity=on)"), "%s", a->error);
  free (a);
}

static void
test_assemble (void)
{
  struct gr_probe p[6], q[6];
  struct gr_assembly *a;
  int i;

  /* Healthy, in order. */
  array (p, 6, 2, 5);
  a = assemble (p, 6, -1);
  CHECK (a->outcome == GR_ASSEMBLY_OK && a->nfailed == 0 &&
         !a->reordered && a->warning[0] == '\0' &&
         a->resync == GR_RESYNC_NONE, "healthy: %s / %s", a->error,
         a->warning);
  free (a);

  /* Any order: placed by index, and nothing to warn about. */
  for (i = 0; i < 6; i++)
    q[i] = p[(i * 5 + 3) % 6];
  a = assemble (q, 6, -1);
  CHECK (a->outcome == GR_ASSEMBLY_OK && a->nfailed == 0 && a->reordered,
         "shuffled: %s", a->error);
  CHECK (a->warning[0] == '\0', "shuffled: warns '%s'", a->warning);
  for (i = 0; i < 6; i++)
    CHECK (a->slot[i] >= 0 && q[a->slot[i]].sb.index == (uint32_t) i,
           "slot %d holds index %u", i, q[a->slot[i]].sb.index);
  free (a);

  /* A missing member in place: guessed, said once. */
  array (p, 6, 2, 5);
  p[1].open_errno = ENOENT;
  a = assemble (p, 6, -1);
  CHECK (a->outcome == GR_ASSEMBLY_OK && a->nfailed == 1 &&
         a->state[1] == GR_SLOT_MISSING && a->slot[1] == -1,
         "one missing: %s", a->error);
  CHECK (strstr (a->warning, "starting degraded with 5 of 6 members, 1 more "
                 "failures tolerated") &&
         strstr (a->warning, "member 1 is missing; probably member=/m1"),
         "one missing: '%s'", a->warning);
  CHECK (strstr (a->warning, "member=/m1 cannot be opened") == NULL,
         "the missing member said twice: '%s'", a->warning);
  free (a);

  /* Out of order and shifted by a missing member: no false statements
   * about members that opened, no guess. */
  array (p, 6, 2, 5);
  q[0] = p[2];
  q[1] = p[0];
  q[1].open_errno = EACCES;
  q[2] = p[1];
  q[3] = p[5];
  q[4] = p[3];
  q[5] = p[4];
  a = assemble (q, 6, -1);
  CHECK (a->outcome == GR_ASSEMBLY_OK && a->nfailed == 1 &&
         a->state[0] == GR_SLOT_MISSING, "shifted: %s", a->error);
  CHECK (strstr (a->warning, "probably") == NULL, "shifted: a guess: '%s'",
         a->warning);
  CHECK (strstr (a->warning, "member 0 is missing") &&
         strstr (a->warning, "member=/m0 cannot be opened (Permission "
                 "denied)"), "shifted: '%s'", a->warning);
  for (i = 0; i < 6; i++)
    if (i != 1)
      CHECK (strstr (a->warning, q[i].path) == NULL, "shifted: member %s "
             "that opened is named: '%s'", q[i].path, a->warning);
  free (a);

  /* The missing member left off the command line: the others shift. */
  array (p, 6, 2, 5);
  for (i = 1; i < 6; i++)
    q[i - 1] = p[i == 1 ? 0 : i];
  a = assemble (q, 5, -1);
  CHECK (a->outcome == GR_ASSEMBLY_OK && a->nfailed == 1 &&
         a->state[1] == GR_SLOT_MISSING, "left off: %s", a->error);
  CHECK (strstr (a->warning, "member 1 is missing") &&
         strstr (a->warning, "probably") == NULL &&
         strstr (a->warning, "cannot be opened") == NULL,
         "left off: '%s'", a->warning);
  free (a);

  /* An update cut off half way: members one event behind hold current
   * data and are trusted; one still dirty while the newest superblock is
   * clean (the clean update was cut off) makes the array dirty. */
  array (p, 6, 2, 7);
  for (i = 2; i < 6; i++) {
    p[i].sb.event = 6;
    p[i].sb.flags |= GR_SB_FLAG_DIRTY;
  }
  a = assemble (p, 6, -1);
  CHECK (a->outcome == GR_ASSEMBLY_OK && a->nfailed == 0 &&
         a->warning[0] == '\0' && a->resync == GR_RESYNC_FULL,
         "cut-off update: %d failed, resync %d, '%s'", a->nfailed, a->resync,
         a->warning);
  free (a);
  /* The same, with the bitmap kept by the session cut off: the dirty
   * members' flag is what counts (the newest superblock is clean). */
  for (i = 2; i < 6; i++)
    p[i].sb.flags |= GR_SB_FLAG_BITMAP;
  a = assemble (p, 6, -1);
  CHECK (a->resync == GR_RESYNC_FULL && a->bitmap_kept,
         "cut-off update, bitmap: resync %d, bitmap %d", a->resync,
         a->bitmap_kept);
  free (a);

  /* Stale (two or more events behind: an old copy) and marked failed. */
  array (p, 6, 2, 7);
  p[3].sb.event = 5;
  gr_sb_failed_set (&p[0].sb, 5);
  a = assemble (p, 6, -1);
  CHECK (a->outcome == GR_ASSEMBLY_OK && a->nfailed == 2 &&
         a->state[3] == GR_SLOT_STALE && a->state[5] == GR_SLOT_FAILED &&
         a->sb.event == 7, "stale+failed: %s", a->error);
  CHECK (strstr (a->warning, "member 3 (/m3) is stale (event 5, the "
                 "array's is 7") &&
         strstr (a->warning, "member 5 (/m5) is marked failed"),
         "stale+failed: '%s'", a->warning);
  free (a);

  /* Too many. */
  p[1].open_errno = ENOENT;
  expect_refusal (p, 6, -1, "too many members missing or failed: 3 of 6, "
                  "the array tolerates 2");

  /* Dirty: resync with every member, impossible without. */
  array (p, 6, 2, 5);
  for (i = 0; i < 6; i++)
    p[i].sb.flags |= GR_SB_FLAG_DIRTY;
  a = assemble (p, 6, -1);
  CHECK (a->resync == GR_RESYNC_FULL && !a->bitmap_kept,
         "dirty: resync %d, bitmap %d", a->resync, a->bitmap_kept);
  free (a);
  /* The bitmap is used when the newest (dirty) superblock says it was
   * kept, whatever older ones say. */
  for (i = 0; i < 6; i++) {
    p[i].sb.flags |= GR_SB_FLAG_BITMAP;
    p[i].sb.event = 6;
  }
  p[0].sb.flags &= ~GR_SB_FLAG_BITMAP;
  p[0].sb.event = 5;
  a = assemble (p, 6, -1);
  CHECK (a->resync == GR_RESYNC_FULL && a->bitmap_kept,
         "dirty, bitmap kept: resync %d, bitmap %d", a->resync,
         a->bitmap_kept);
  free (a);
  p[4].open_errno = EIO;
  a = assemble (p, 6, -1);
  CHECK (a->outcome == GR_ASSEMBLY_OK && a->resync == GR_RESYNC_DEGRADED,
         "dirty degraded: resync %d", a->resync);
  free (a);
}

/* A failed array: refused with the hint; salvage brings back the most
 * recently updated member marked failed, read-only, and says so. */
static void
test_salvage (void)
{
  struct gr_assemble_args salv = { .m = -1, .salvage = true };
  struct gr_probe p[6];
  struct gr_assembly *a;
  int i;

  array (p, 6, 2, 9);
  gr_sb_failed_set (&p[0].sb, 1);       /* 1 failed at event 5, 3 at 7, */
  gr_sb_failed_set (&p[0].sb, 3);       /* 4 at 8: three failed, m = 2 */
  gr_sb_failed_set (&p[0].sb, 4);
  p[1].sb.event = 5;
  p[3].sb.event = 7;
  p[4].sb.event = 8;
  expect_refusal (p, 6, -1, "the array has failed: too many members missing "
                  "or failed: 3 of 6");
  a = assemble (p, 6, -1);
  CHECK (strstr (a->error, "salvage=true brings it up read-only"), "hint: "
         "'%s'", a->error);
  free (a);

  a = assemble_args (p, 6, &salv);
  CHECK (a->outcome == GR_ASSEMBLY_OK && a->read_only && a->salvaged &&
         a->nfailed == 2 && a->state[4] == GR_SLOT_SALVAGED &&
         a->state[1] == GR_SLOT_FAILED && a->state[3] == GR_SLOT_FAILED &&
         a->resync == GR_RESYNC_NONE, "salvage: %s", a->error);
  CHECK (strstr (a->warning, "salvage: the array had failed; serving it "
                 "read-only with member 4 (/m4, last updated at event 8) "
                 "brought back") &&
         strstr (a->warning, "member 1 is marked failed") &&
         strstr (a->warning, "member 3 is marked failed"),
         "salvage: '%s'", a->warning);
  free (a);

  /* Not enough present to salvage. */
  p[4].open_errno = ENOENT;
  p[3].open_errno = ENOENT;
  p[1].open_errno = ENOENT;
  a = assemble_args (p, 6, &salv);
  CHECK (a->outcome == GR_ASSEMBLY_REFUSED &&
         strstr (a->error, "the array has failed"), "salvage of too few: %s",
         a->error);
  free (a);

  /* A healthy array salvaged: read-only as it is. */
  array (p, 6, 2, 9);
  for (i = 0; i < 6; i++)
    p[i].sb.flags |= GR_SB_FLAG_DIRTY;
  a = assemble_args (p, 6, &salv);
  CHECK (a->outcome == GR_ASSEMBLY_OK && a->read_only && !a->salvaged &&
         a->nfailed == 0 && a->resync == GR_RESYNC_NONE,
         "salvage of a healthy array: %s", a->error);
  free (a);
}

static void
test_refusals (void)
{
  struct gr_probe p[6];
  int i;

  array (p, 6, 2, 5);
  p[2].sb.uuid[0] ^= 1;
  expect_refusal (p, 6, -1, "member 2 (/m2) belongs to another array");
  array (p, 6, 2, 5);
  p[0].sb.uuid[0] ^= 1;                 /* the odd one first: still it */
  expect_refusal (p, 6, -1, "member 0 (/m0) belongs to another array");
  array (p, 6, 2, 5);
  p[0].sb.chunk = 4096;
  expect_refusal (p, 6, -1, "member 0 (/m0): geometry differs");
  array (p, 6, 2, 5);
  p[4].sb.chunk = 4096;
  expect_refusal (p, 6, -1, "member 4 (/m4): geometry differs");
  array (p, 6, 2, 5);
  p[5].sb.index = 1;
  expect_refusal (p, 6, -1, "member 1 (/m1) and member 5 (/m5) both claim "
                  "member index 1");
  array (p, 6, 2, 5);
  p[3].size = MiB;
  expect_refusal (p, 6, -1, "member 3 (/m3) is too small");
  array (p, 6, 2, 5);
  expect_refusal (p, 6, 3, "m=3 does not match the array (m=2)");
  array (p, 6, 2, 5);
  p[1].sb_status = -ENOENT;
  expect_refusal (p, 6, -1, "member 1 (/m1): no gpuraid superblock");
  array (p, 6, 2, 5);
  p[0].sb_status = -EBADMSG;
  expect_refusal (p, 6, -1, "member 0 (/m0): ");
  array (p, 6, 2, 5);
  for (i = 0; i < 6; i++)
    p[i].open_errno = ENOENT;
  expect_refusal (p, 6, -1, "no member could be opened: member 0 (/m0): No "
                  "such file or directory; member 1");
}

/* A rebuild of member 2 recorded (id 9, checkpoint 40) on members
 * 0,1,3,4,5 at event ev; member 2's probe is the replacement (its own
 * superblock REBUILDING, id rid, event 8). */
static void
rebuilding_array (struct gr_probe *p, uint64_t ev, uint64_t rid)
{
  int i;

  array (p, 6, 2, ev);
  for (i = 0; i < 6; i++) {
    gr_sb_failed_set (&p[i].sb, 2);
    p[i].sb.rebuild_id = 9;
    gr_sb_rebuild_put (&p[i].sb, 2, true);
    p[i].sb.rebuild_at = 40;
  }
  p[2].sb.flags |= GR_SB_FLAG_REBUILDING;
  p[2].sb.event = 8;
  p[2].sb.rebuild_id = rid;
  p[2].sb.rebuild_at = 0;
}

static void
test_rebuilding (void)
{
  struct gr_probe p[6];
  struct gr_assembly *a;

  /* The recorded rebuild's replacement: resumed at the checkpoint. */
  rebuilding_array (p, 12, 9);
  a = assemble (p, 6, -1);
  CHECK (a->outcome == GR_ASSEMBLY_OK, "%s", a->error);
  CHECK (a->state[2] == GR_SLOT_REBUILDING, "state %d", a->state[2]);
  CHECK (a->nfailed == 1 && a->sb.rebuild_at == 40 && a->slot[2] == 2,
         "nfailed %d", a->nfailed);
  CHECK (strstr (a->warning, "member 2 (/m2) is being rebuilt: resumes at "
                 "stripe 40 of") != NULL, "warning '%s'", a->warning);
  free (a);
  /* Never the array's superblock, even when it is the newest. */
  rebuilding_array (p, 12, 9);
  p[2].sb.event = 50;
  a = assemble (p, 6, -1);
  CHECK (a->outcome == GR_ASSEMBLY_OK && a->sb.event == 12 &&
         !(a->sb.flags & GR_SB_FLAG_REBUILDING), "event %" PRIu64,
         a->sb.event);
  free (a);
  /* Another rebuild's replacement (abandoned): stale, not used. */
  rebuilding_array (p, 12, 7);
  a = assemble (p, 6, -1);
  CHECK (a->outcome == GR_ASSEMBLY_OK && a->state[2] == GR_SLOT_STALE &&
         strstr (a->why[2], "abandoned"), "state %d", a->state[2]);
  free (a);
  /* The update that ended the rebuild reached the others, not it: the
   * array records the rebuild as done and the member live: active. */
  rebuilding_array (p, 12, 9);
  for (int i = 0; i < 6; i++) {
    p[i].sb.failed[0] = 0;
    p[i].sb.rebuild_at = p[i].sb.data_size / p[i].sb.chunk;
  }
  p[2].sb.rebuild_at = 0;
  a = assemble (p, 6, -1);
  CHECK (a->outcome == GR_ASSEMBLY_OK && a->state[2] == GR_SLOT_ACTIVE &&
         a->nfailed == 0, "state %d nfailed %d", a->state[2], a->nfailed);
  free (a);
  /* Salvage never brings a replacement back: 4 lost of 6 with m = 2,
   * the replacement among them, stays refused. */
  rebuilding_array (p, 12, 9);
  gr_sb_failed_set (&p[0].sb, 0); gr_sb_failed_set (&p[0].sb, 1);
  gr_sb_failed_set (&p[0].sb, 3);
  p[0].sb.event = 13;
  {
    struct gr_assemble_args args = { .m = -1, .salvage = true };

    a = assemble_args (p, 6, &args);
    CHECK (a->outcome == GR_ASSEMBLY_OK && a->state[2] != GR_SLOT_SALVAGED,
           "%s", a->error);
    free (a);
  }
  /* Only replacements: refused. */
  rebuilding_array (p, 12, 9);
  expect_refusal (p + 2, 1, -1, "only replacements being rebuilt");
  /* Two members rebuilt in one pass (2 and 4): both resume at the
   * checkpoint. */
  rebuilding_array (p, 12, 9);
  for (int i = 0; i < 6; i++) {
    gr_sb_failed_set (&p[i].sb, 4);
    gr_sb_rebuild_put (&p[i].sb, 4, true);
  }
  p[4].sb = p[2].sb;
  p[4].sb.index = 4;
  a = assemble (p, 6, -1);
  CHECK (a->outcome == GR_ASSEMBLY_OK && a->state[2] == GR_SLOT_REBUILDING
         && a->state[4] == GR_SLOT_REBUILDING && a->nfailed == 2,
         "states %d %d", a->state[2], a->state[4]);
  free (a);
  /* Member 4 given the replacement of an earlier record (another id):
   * stale, while member 2 resumes. */
  p[4].sb.rebuild_id = 5;
  a = assemble (p, 6, -1);
  CHECK (a->outcome == GR_ASSEMBLY_OK && a->state[2] == GR_SLOT_REBUILDING
         && a->state[4] == GR_SLOT_STALE, "states %d %d", a->state[2],
         a->state[4]);
  free (a);
  /* Member 2 done (live in the record, cut off before its own update),
   * member 4 still in progress: active and resumed. */
  p[4].sb.rebuild_id = 9;
  for (int i = 0; i < 6; i++)
    if (i != 2 && i != 4)
      p[i].sb.failed[0] &= (uint8_t) ~(1u << 2);
  a = assemble (p, 6, -1);
  CHECK (a->outcome == GR_ASSEMBLY_OK && a->state[2] == GR_SLOT_ACTIVE
         && a->state[4] == GR_SLOT_REBUILDING && a->nfailed == 1,
         "states %d %d", a->state[2], a->state[4]);
  free (a);
}

/* Member 3 of a 4+2 array at event 10 marked failed, the degraded map
 * kept since event 8; its own superblock at event ev. */
static void
failed3 (struct gr_probe *p, uint64_t ev)
{
  array (p, 6, 2, 10);
  for (int i = 0; i < 6; i++) {
    gr_sb_failed_set (&p[i].sb, 3);
    p[i].sb.degraded_since = 8;
  }
  p[3].sb.event = ev;
  memset (p[3].sb.failed, 0, sizeof p[3].sb.failed);
  p[3].sb.degraded_since = 0;
}

/* Other copies of a member (a replaced member's old file, found by a
 * scan), re-adding a member the degraded map covers, spares. */
static void
test_copies_readd (void)
{
  struct gr_assemble_args args = { .m = -1, .salvage = true };
  struct gr_probe p[8];
  struct gr_assembly *a;

  /* An old copy of member 2 (event 3) beside the current one: left out,
   * said, whichever comes first. */
  array (p, 6, 2, 10);
  p[6] = p[2];
  p[6].path = "/old2";
  p[6].sb.event = 3;
  a = assemble (p, 7, 2);
  CHECK (a->outcome == GR_ASSEMBLY_OK && a->slot[2] == 2 &&
         a->nfailed == 0 && strstr (a->warning, "/old2 holds an older copy "
                                    "of member 2 (event 3): not used"),
         "copy: %s %s", a->error, a->warning);
  free (a);
  p[6] = p[2];
  p[2].path = "/old2";
  p[2].sb.event = 3;
  a = assemble (p, 7, 2);
  CHECK (a->outcome == GR_ASSEMBLY_OK && a->slot[2] == 6 &&
         a->state[2] == GR_SLOT_ACTIVE && strstr (a->warning, "/old2"),
         "copy first: %s %s", a->error, a->warning);
  free (a);

  /* Member 3 failed at event 9 (its own at 9: it left when the map began
   * at 8... or after): re-added. */
  failed3 (p, 9);
  a = assemble (p, 6, 2);
  CHECK (a->outcome == GR_ASSEMBLY_OK && a->state[3] == GR_SLOT_READD &&
         a->nfailed == 1 && strstr (a->why[3], "re-added") &&
         strstr (a->warning, "member 3 (/m3) is failed at event 9"),
         "re-add: %s %s", a->error, a->warning);
  CHECK (gr_readd_covered (&a->sb, &p[3].sb), "covered");
  free (a);
  failed3 (p, 7);                       /* 7 + 1 >= 8: covered */
  a = assemble (p, 6, 2);
  CHECK (a->state[3] == GR_SLOT_READD, "event 7: %d", a->state[3]);
  free (a);
  failed3 (p, 6);                       /* left before the map began */
  a = assemble (p, 6, 2);
  CHECK (a->state[3] == GR_SLOT_FAILED && !gr_readd_covered (&a->sb,
                                                             &p[3].sb),
         "event 6: %d", a->state[3]);
  free (a);
  /* Failed by the operator: not re-added at a start. */
  failed3 (p, 9);
  for (int i = 0; i < 6; i++)
    if (i != 3)
      gr_sb_removed_put (&p[i].sb, 3, true);
  a = assemble (p, 6, 2);
  CHECK (a->state[3] == GR_SLOT_FAILED &&
         strstr (a->why[3], "failed by the operator") &&
         strstr (a->why[3], "gpuraidctl re-add"), "removed: %s", a->why[3]);
  free (a);
  /* No degraded map kept: a full rebuild. */
  failed3 (p, 9);
  for (int i = 0; i < 6; i++)
    p[i].sb.degraded_since = 0;
  a = assemble (p, 6, 2);
  CHECK (a->state[3] == GR_SLOT_FAILED, "no map: %d", a->state[3]);
  free (a);
  /* Salvage brings nothing back by re-adding. */
  failed3 (p, 9);
  a = assemble_args (p, 6, &args);
  CHECK (a->outcome == GR_ASSEMBLY_OK && a->read_only &&
         a->state[3] == GR_SLOT_FAILED, "salvage: %d", a->state[3]);
  free (a);
  /* The replacement of the recorded rebuild beats the old member that
   * could be re-added. */
  failed3 (p, 9);
  p[6] = p[0];
  p[6].path = "/r3";
  p[6].sb.index = 3;
  p[6].sb.flags |= GR_SB_FLAG_REBUILDING;
  p[6].sb.rebuild_id = 10;
  gr_sb_rebuild_put (&p[6].sb, 3, true);
  for (int i = 0; i < 6; i++)
    if (i != 3) {
      p[i].sb.rebuild_id = 10;
      gr_sb_rebuild_put (&p[i].sb, 3, true);
    }
  a = assemble (p, 7, 2);
  CHECK (a->outcome == GR_ASSEMBLY_OK && a->slot[3] == 6 &&
         a->state[3] == GR_SLOT_REBUILDING && strstr (a->warning, "/m3 holds "
                                                      "an older copy"),
         "rebuilding over re-add: %s %s", a->error, a->warning);
  free (a);

  /* A hot spare given as a member. */
  array (p, 6, 2, 10);
  p[5].sb.flags |= GR_SB_FLAG_SPARE;
  p[5].sb.index = 0;
  expect_refusal (p, 6, 2, "member=/m5 is a hot spare of this array, not a "
                  "member: give it as spare=");
}

int
main (void)
{
  test_seed ("test-assemble");
  test_create ();
  test_journal_room ();
  test_integrity_arg ();
  test_assemble ();
  test_refusals ();
  test_salvage ();
  test_rebuilding ();
  test_copies_readd ();
  return test_done ("test-assemble");
}
