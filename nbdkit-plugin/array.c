/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - opening and closing the array.  See array.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "array.h"
#include "array-internal.h"
#include "heal.h"
#include "events.h"
#include "format/format.h"
#include "bitmap.h"
#include "journal.h"
#include "replay.h"
#include "log.h"
#include "members.h"
#include "resync.h"
#include "cksum.h"
#include "common/now.h"
#include "scratch.h"
#include "join.h"

struct gr_array {
  struct gr_members *ms;
  struct gr_journal *journal;
  struct gr_bitmap *bitmap;
  struct gr_cksum *cksum;       /* NULL: no integrity */
  struct gr_scratch *scratch;
  struct gr_join *join;
  struct gr_exec *x;
  bool resync_wanted;           /* pending regions, every member */
  uint64_t resync_rate;
  struct gr_resync *resync;     /* running (after gr_array_start) */
  struct gr_heal *heal;         /* replacements, spares, scrubs */
};

static void
log_geometry (struct gr_members *ms, const struct gr_geom *g,
              const char *what)
{
  struct gr_sb sb;
  char uuid[37];

  gr_members_sb (ms, &sb);
  gr_sb_uuid_str (sb.uuid, uuid);
  gr_debug ("%s array %s: k=%d m=%d code=%s chunk=%" PRIu32 " stripes=%"
            PRIu64 " data_offset=%" PRIu64 " size=%" PRIu64 " event=%"
            PRIu64, what, uuid, g->k, g->m,
            sb.code == GR_CODE_CRS ? "crs" : "rs", g->chunk, g->stripes,
            g->data_offset, gr_map_size (g), sb.event);
}

/* create=true, as decided: zero the metadata and data areas so that data
 * and parity start consistent (all zero), then write the superblocks
 * last. */
static struct gr_members *
create (struct probes *ps, struct gr_assembly *a)
{
  struct gr_members *ms;
  struct gr_maps_layout maps;
  int i;

  if (getrandom (a->sb.uuid, sizeof a->sb.uuid, 0) != sizeof a->sb.uuid) {
    nbdkit_error ("getrandom: %m");
    return NULL;
  }
  a->sb.ctime = (uint64_t) time (NULL);
  /* Zeroed: nothing is written yet, as the written map says. */
  gr_maps_layout (a->geom.stripes, a->sb.bitmap_region, a->geom.chunk,
                  a->sb.data_offset, &maps);
  if (maps.kept)
    a->sb.flags |= GR_SB_FLAG_WRITTEN;
  for (i = 0; i < a->n; i++) {
    int r = gr_disk_zero (ps->disk[i], 0, a->sb.data_offset + a->sb.data_size);

    if (r == 0)
      r = gr_disk_sync (ps->disk[i]);
    if (r < 0) {
      nbdkit_error ("member %d (%s): zeroing it: %s", i, ps->p[i].path,
                    strerror (-r));
      return NULL;
    }
  }
  ms = gr_members_new (&a->sb);
  if (ms == NULL)
    return NULL;
  for (i = 0; i < a->n; i++) {
    gr_members_attach (ms, i, ps->p[i].path, ps->disk[i]);
    ps->disk[i] = NULL;
  }
  if (gr_members_write_sbs (ms) != GR_MEMBERS_OK ||
      gr_members_nfailed (ms) > 0) {
    nbdkit_error ("cannot write the new superblocks");
    gr_members_close (ms);
    return NULL;
  }
  return ms;
}

/* Assemble, as decided: fill the slots, say once what is missing. */
static struct gr_members *
assemble (struct probes *ps, const struct gr_assembly *a)
{
  struct gr_members *ms = gr_members_new (&a->sb);
  int i;

  if (ms == NULL)
    return NULL;
  if (a->reordered)
    gr_debug ("members placed by their superblock index, not by "
              "command-line order");
  for (i = 0; i < a->n; i++) {
    int q = a->slot[i];

    if (a->state[i] == GR_SLOT_ACTIVE || a->state[i] == GR_SLOT_SALVAGED) {
      gr_members_attach (ms, i, ps->p[q].path, ps->disk[q]);
      ps->disk[q] = NULL;
    }
    else if (a->state[i] == GR_SLOT_REBUILDING && !a->read_only) {
      /* Failed, but in use below its checkpoint (the journal's replay
       * writes it there too); heal.h resumes the rebuild. */
      gr_members_set_failed (ms, i, a->path[i], a->why[i]);
      gr_members_rebuild_resume (ms, i, ps->p[q].path, ps->disk[q],
                                 a->sb.rebuild_at,
                                 ps->p[q].sb.flags & GR_SB_FLAG_READD);
      ps->disk[q] = NULL;
    }
    else
      /* Persisted before the first write (gr_members_begin_write), so
       * that a member missing while the array was written is stale
       * when it comes back. */
      gr_members_set_failed (ms, i, a->path[i], a->why[i]);
  }
  /* A member of the recorded rebuild that is not resumed is dropped
   * from it: its replacement misses the writes of this start. */
  if (a->sb.rebuild_id && !a->read_only)
    for (i = 0; i < a->n; i++)
      if (gr_sb_rebuild_test (&a->sb, i) && gr_sb_failed_test (&a->sb, i) &&
          a->state[i] != GR_SLOT_REBUILDING) {
        gr_debug ("the rebuild of member %d is not resumed (its "
                  "replacement not given): dropped from the record", i);
        gr_members_rebuild_forget (ms, i);
      }
  if (a->read_only)
    gr_members_read_only (ms);
  if (a->warning[0])
    gr_warn ("%s", a->warning);
  else if (a->read_only)
    gr_warn ("salvage: the array has not failed; serving it read-only as it "
             "is");
  return ms;
}

/* Before the first write of a session: a fresh journal, and the bitmap
 * as it is now (the regions still pending) on every member. */
static unsigned
dirty_hook (void *arg)
{
  struct gr_array *arr = arg;
  unsigned keeps = GR_KEEPS_NOTHING;

  if (gr_journal_slots (arr->journal) > 0 &&
      gr_journal_clear (arr->journal) == 0)
    keeps |= GR_KEEPS_JOURNAL;
  if (gr_bitmap_write_for_dirty (arr->bitmap))
    keeps |= GR_KEEPS_BITMAP;
  if (gr_bitmap_maps_kept (arr->bitmap))
    keeps |= GR_KEEPS_WRITTEN;
  return keeps;
}

/* The bytes of array data in n regions (the last may be short). */
static uint64_t
regions_bytes (const struct gr_array *arr, const struct gr_geom *g,
               uint64_t n)
{
  uint64_t s = n * gr_bitmap_region_size (arr->bitmap);

  return (s < g->stripes ? s : g->stripes) * gr_map_stripe_width (g);
}

/* Dirty with every member: the regions to resync, in the background once
 * serving (gr_array_start); none left (the bitmap was cleared since the
 * last writes) makes the array clean now. */
static int
plan_resync (struct gr_array *arr, const struct gr_assembly *a)
{
  uint64_t n = gr_bitmap_load (arr->bitmap, !a->bitmap_kept);
  uint64_t total = gr_bitmap_regions (arr->bitmap);

  if (n == 0) {
    gr_warn ("the array was not shut down cleanly; the write-intent bitmap "
             "shows no region written since its last sync: nothing to "
             "resync");
    return gr_members_mark_clean (arr->ms) == GR_MEMBERS_OK ? 0 : -1;
  }
  arr->resync_wanted = true;
  gr_warn ("the array was not shut down cleanly; resyncing the parity of "
           "%" PRIu64 " of %" PRIu64 " regions (%" PRIu64 " MiB%s) in the "
           "background while serving", n, total,
           regions_bytes (arr, &a->geom, n) >> 20,
           a->bitmap_kept ? ", from the write-intent bitmap"
           : ", every region written: no write-intent bitmap was kept");
  return 0;
}

/* A dirty degraded array with block checksums, after the journal's
 * replay: where writes were made at the crash a block and its checksum
 * may disagree (the write landed, the checksum not: decided by the row
 * as docs/format.md's "Checksums" says), and no resync can run: those
 * regions are read and verified now.  Where it cannot be done (no chunk
 * of redundancy left), or a row is past repair (unreadable: its reads
 * answer EIO), the array stays dirty.  0, or -1. */
static int
verify_suspect (struct gr_array *arr, const struct gr_assembly *a)
{
  const uint64_t ns = gr_bitmap_load_suspect (arr->bitmap, !a->bitmap_kept);
  const uint64_t region = gr_bitmap_region_size (arr->bitmap);
  const double t0 = gr_now ();
  uint64_t r, left = 0, lost = 0;

  if (ns == 0)
    return 0;
  for (r = gr_bitmap_next_suspect (arr->bitmap, 0);
       r < gr_bitmap_regions (arr->bitmap);
       r = gr_bitmap_next_suspect (arr->bitmap, r + 1)) {
    const uint64_t s0 = r * region;
    const uint64_t n = a->geom.stripes - s0 < region ? a->geom.stripes - s0
      : region;

    switch (gr_exec_verify_stripes (arr->x, s0, n)) {
    case GR_EXEC_DONE:
      gr_bitmap_unsuspect (arr->bitmap, r);
      break;
    case GR_EXEC_UNSUPPORTED:
      left++;
      break;
    default:
      if (errno != EIO) {
        nbdkit_error ("verifying the block checksums of region %" PRIu64
                      " failed", r);
        return -1;
      }
      /* A row past repair (said above): its reads answer EIO; the rest
       * of the region is verified as it is read. */
      lost++;
      break;
    }
  }
  if (lost)
    gr_warn ("%" PRIu64 " regions written at the crash hold blocks that "
             "cannot be read or rebuilt (too few good chunks left): reads of "
             "them answer EIO",
             lost);
  gr_warn ("the array was not shut down cleanly while degraded: the block "
           "checksums of the %" PRIu64 " regions written at the crash were "
           "verified (%.1f s)%s", ns, gr_now () - t0, left
           ? "; some could not be (no redundancy left): blocks there that "
           "disagree with their checksums are taken as written when read, "
           "and the array stays dirty" : "");
  if (left || lost)
    gr_members_keep_dirty (arr->ms);
  return 0;
}

/* A dirty degraded array: replay the journal.  If every write of the
 * session that crashed was journaled, the array is consistent again;
 * else warn, and keep the dirty flag so that every start warns. */
static int
repair_degraded (struct gr_array *arr, const struct gr_assembly *a,
                 struct gr_coding *coding)
{
  enum gr_replay_outcome r = GR_REPLAY_DONE;
  unsigned n = 0;

  if (gr_journal_slots (arr->journal))
    r = gr_replay_journal (arr->x, arr->journal, &n);
  if (r == GR_REPLAY_FAILED)
    return -1;
  if (arr->cksum && verify_suspect (arr, a) == -1)
    return -1;
  if (r == GR_REPLAY_DONE && (a->sb.flags & GR_SB_FLAG_JOURNALED)) {
    gr_warn ("the array was not shut down cleanly while degraded: stripes "
             "being written (%u) were repaired from the journal; it is "
             "consistent", n);
    return gr_members_mark_clean (arr->ms) == GR_MEMBERS_OK ? 0 : -1;
  }
  gr_members_keep_dirty (arr->ms);
  if (a->bitmap_kept) {
    uint64_t np = gr_bitmap_load (arr->bitmap, false);

    gr_warn ("the array was not shut down cleanly and is degraded: stripes "
             "repaired from the journal: %u; but writes were made that it "
             "does not hold (made while healthy, or when a member failed), "
             "so parity in %" PRIu64 " regions (%" PRIu64 " MiB) written "
             "at the crash may be inconsistent and cannot be resynced: "
             "reads and writes there that must rebuild a lost chunk fail "
             "with EIO; the dirty flag stays set", n, np,
             regions_bytes (arr, &a->geom, np) >> 20);
    return 0;
  }
  gr_warn ("the array was not shut down cleanly and is degraded: stripes "
           "repaired from the journal: %u; but writes were made that it "
           "does not hold (made while healthy, or when a member failed), "
           "so parity of stripes being written at the crash may be "
           "inconsistent and cannot be resynced (reads rebuilt from it could "
           "be wrong: no write-intent bitmap was kept); the dirty flag "
           "stays set", n);
  return 0;
}

/* spare= and replace= into the healing's list, each checked (nothing is
 * written to them until one is used).  0, or -1 after nbdkit_error. */
static int
add_spares (struct gr_array *arr, const struct gr_config *cfg)
{
  for (int i = 0; i < cfg->nspares; i++) {
    const int member = cfg->spares[i].member;
    char why[256];
    int err;
    const enum gr_heal_outcome o =
      gr_heal_spare_add (arr->heal, cfg->spares[i].path, member, &err);

    if (o == GR_HEAL_STARTED)
      continue;
    gr_heal_explain (o, err, why, sizeof why);
    if (member < 0)
      nbdkit_error ("spare=%s: %s", cfg->spares[i].path, why);
    else
      nbdkit_error ("replace=%d:%s: %s", member, cfg->spares[i].path,
                    o == GR_HEAL_ACTIVE ? "member is active: there is "
                    "nothing to replace (leave replace= out)" : why);
    return -1;
  }
  return 0;
}

struct gr_array *
gr_array_open (const struct gr_config *cfg, struct gr_coding *coding)
{
  struct gr_assemble_args args = { .m = cfg->m, .chunk = cfg->chunk,
                                   .code = cfg->code, .force = cfg->force,
                                   .salvage = cfg->salvage,
                                   .bitmap_chunk = cfg->bitmap_chunk,
                                   .integrity = cfg->integrity };
  struct probes *ps = calloc (1, sizeof *ps);
  struct gr_assembly *a = calloc (1, sizeof *a);
  struct gr_array *arr = calloc (1, sizeof *arr);
  int i, j;

  if (ps == NULL || a == NULL || arr == NULL) {
    nbdkit_error ("calloc: %m");
    goto err;
  }
  ps->n = cfg->npaths;
  for (i = 0; i < ps->n; i++) {
    ps->p[i].path = cfg->paths[i];
    ps->disk[i] = NULL;
  }
  if (cfg->nscans > 0 && gr_array_scan_members (cfg, ps) == -1)
    goto err;
  for (i = 0; i < ps->n; i++)
    if (gr_array_probe_member (ps, i) == -1)
      goto err;
  for (i = 0; i < ps->n; i++)
    for (j = 0; j < i; j++)
      if (ps->disk[i] && ps->disk[j] &&
          gr_disk_same (ps->disk[i], ps->disk[j])) {
        nbdkit_error ("member %d (%s) and member %d (%s) are the same file",
                      j, ps->p[j].path, i, ps->p[i].path);
        goto err;
      }

  if (cfg->create)
    gr_assemble_create (ps->p, ps->n, &args, a);
  else
    gr_assemble (ps->p, ps->n, &args, a);
  if (a->outcome == GR_ASSEMBLY_REFUSED) {
    nbdkit_error ("%s", a->error);
    goto err;
  }
  if (cfg->have_uuid && memcmp (a->sb.uuid, cfg->uuid, 16) != 0) {
    char want[37], got[37];

    gr_sb_uuid_str (cfg->uuid, want);
    gr_sb_uuid_str (a->sb.uuid, got);
    nbdkit_error ("uuid=%s: the members given are of array %s", want, got);
    goto err;
  }
  /* Everything that can be refused is checked before the first write. */
  if (gr_coding_setup (coding, a->geom.k, a->geom.m, (enum gr_code) a->sb.code,
                       a->geom.chunk) == -1)
    goto err;
  arr->ms = cfg->create ? create (ps, a) : assemble (ps, a);
  if (arr->ms == NULL)
    goto err;
  gr_members_set_max_read_errors (arr->ms, (unsigned) cfg->max_read_errors);
  arr->journal = gr_journal_new (&a->geom, arr->ms);
  if (a->sb.cksum_offset &&
      (arr->cksum = gr_cksum_new (arr->ms, a->sb.cksum_offset,
                                  a->sb.data_offset)) == NULL)
    goto err;
  arr->bitmap = gr_bitmap_new (&a->geom, arr->ms, a->sb.bitmap_region,
                               arr->cksum);
  if (arr->journal == NULL || arr->bitmap == NULL ||
      gr_bitmap_load_maps (arr->bitmap, a->resync != GR_RESYNC_NONE) == -1)
    goto err;
  if (gr_bitmap_maps_kept (arr->bitmap))
    gr_members_keep_maps (arr->ms);
  if (!a->read_only)
    gr_members_on_dirty (arr->ms, dirty_hook, arr);
  arr->scratch = gr_scratch_new (coding, cfg->scratch_max);
  if (arr->scratch == NULL)
    goto err;
  arr->join = gr_join_new (&a->geom);
  if (arr->join == NULL)
    goto err;
  arr->x = gr_exec_new (&a->geom, arr->ms, &(struct gr_exec_parts) {
      .coding = coding, .journal = arr->journal, .scratch = arr->scratch,
      .bitmap = arr->bitmap, .cksum = arr->cksum, .join = arr->join });
  if (arr->x == NULL)
    goto err;
  arr->heal = gr_heal_new (arr->x, arr->bitmap, cfg->resync_rate);
  if (arr->heal == NULL || add_spares (arr, cfg) == -1)
    goto err;
  /* The spares a scan found (their superblocks say so). */
  for (i = 0; i < ps->nspares; i++) {
    char why[256];
    int err;
    const enum gr_heal_outcome o =
      gr_heal_spare_add (arr->heal, ps->spares[i], -1, &err);

    if (o != GR_HEAL_STARTED) {
      gr_heal_explain (o, err, why, sizeof why);
      gr_warn ("scan: the spare %s is not used: %s", ps->spares[i], why);
    }
  }
  /* Members back that the degraded map covers: re-added once serving. */
  for (i = 0; i < a->n && !cfg->create; i++)
    if (a->state[i] == GR_SLOT_READD) {
      gr_heal_readd_at_start (arr->heal, i, ps->p[a->slot[i]].path,
                              ps->disk[a->slot[i]]);
      ps->disk[a->slot[i]] = NULL;
    }
  arr->resync_rate = cfg->resync_rate;
  if (a->resync == GR_RESYNC_DEGRADED && repair_degraded (arr, a, coding)
      == -1) {
    nbdkit_error ("journal replay failed: not serving an array whose parity "
                  "may be inconsistent");
    goto err;
  }
  if (a->resync == GR_RESYNC_FULL && plan_resync (arr, a) == -1)
    goto err;
  log_geometry (arr->ms, &a->geom, cfg->create ? "created" : "assembled");
  if (cfg->nscans)
    gr_debug ("scan: assembled from %d superblocks of the array, %d spares, "
              "among %d files and devices", ps->n - cfg->npaths,
              ps->nspares, ps->nscanned);
  {
    char uuid[37];

    gr_sb_uuid_str (a->sb.uuid, uuid);
    gr_events_setup (uuid, cfg->event_hook);
    if (gr_members_nfailed (arr->ms) > 0)
      gr_event (GR_EV_DEGRADED, -1, NULL, a->warning[0] ? a->warning : NULL,
                "failed=%d left=%d", gr_members_nfailed (arr->ms),
                a->n - gr_members_nfailed (arr->ms));
  }
  gr_array_close_probes (ps);
  gr_disk_scan_free (ps->scanned, ps->nscanned);
  free (ps);
  free (a);
  return arr;

 err:
  if (ps) {
    gr_array_close_probes (ps);
    gr_disk_scan_free (ps->scanned, ps->nscanned);
  }
  if (arr) {
    gr_heal_free (arr->heal);
    gr_exec_free (arr->x);
    gr_join_free (arr->join);
    gr_scratch_free (arr->scratch);
    gr_bitmap_free (arr->bitmap);
    gr_cksum_free (arr->cksum);
    gr_journal_free (arr->journal);
    /* Not a clean shutdown of a served array: nothing was written to
     * the members but what assembly itself did. */
    gr_members_close (arr->ms);
  }
  free (ps);
  free (a);
  free (arr);
  return NULL;
}

int
gr_array_start (struct gr_array *a)
{
  if (gr_bitmap_start (a->bitmap) == -1 || gr_events_start () == -1)
    return -1;
  if (a->resync_wanted) {
    a->resync = gr_resync_start (a->x, a->bitmap, a->resync_rate);
    if (a->resync == NULL)
      return -1;
  }
  return gr_heal_start (a->heal, a->resync);
}

void
gr_array_close (struct gr_array *a)
{
  if (a == NULL)
    return;
  /* A resync not finished goes on at the next start: the array stays
   * dirty, its pending regions set in the bitmap. */
  gr_heal_free (a->heal);
  if ((a->resync && !gr_resync_stop (a->resync)) ||
      (a->resync_wanted && a->resync == NULL))
    gr_members_keep_dirty (a->ms);
  gr_bitmap_close (a->bitmap);
  gr_bitmap_free (a->bitmap);
  gr_exec_free (a->x);
  gr_join_free (a->join);
  gr_scratch_free (a->scratch);
  /* The checksums before the members are synced and marked clean. */
  if (a->cksum && !gr_members_read_only_p (a->ms) &&
      gr_cksum_flush (a->cksum) == -1)
    gr_members_keep_dirty (a->ms);
  gr_cksum_free (a->cksum);
  gr_members_close (a->ms);
  gr_journal_free (a->journal);
  gr_events_stop ();
  free (a);
}

struct gr_exec *
gr_array_exec (const struct gr_array *a)
{
  return a->x;
}

struct gr_members *
gr_array_members (const struct gr_array *a)
{
  return a->ms;
}

bool
gr_array_resync_progress (const struct gr_array *a,
                          struct gr_progress *p)
{
  if (a->resync == NULL)
    return false;
  gr_resync_progress (a->resync, p);
  return true;
}

enum gr_array_fail_outcome
gr_array_fail (struct gr_array *a, int i, const char *why)
{
  struct gr_progress p;

  if (i < 0 || i >= gr_members_n (a->ms))
    return GR_ARRAY_FAIL_NO_SUCH_MEMBER;
  if (gr_array_resync_progress (a, &p) && p.state == GR_JOB_RUNNING)
    return GR_ARRAY_FAIL_RESYNCING;
  switch (gr_members_fail_keeping (a->ms, i, why)) {
  case GR_FAIL_DONE:
    gr_heal_member_failed (a->heal);
    return GR_ARRAY_FAIL_DONE;
  case GR_FAIL_ALREADY: return GR_ARRAY_FAIL_ALREADY;
  case GR_FAIL_NO_REDUNDANCY: return GR_ARRAY_FAIL_NO_REDUNDANCY;
  case GR_FAIL_READ_ONLY: return GR_ARRAY_FAIL_READ_ONLY;
  case GR_FAIL_ARRAY_FAILED: break;
  }
  return GR_ARRAY_FAIL_ARRAY_FAILED;
}

void
gr_array_set_rate (struct gr_array *a, uint64_t rate)
{
  a->resync_rate = rate;
  if (a->resync)
    gr_resync_set_rate (a->resync, rate);
  gr_heal_set_rate (a->heal, rate);
}

struct gr_heal *
gr_array_heal (const struct gr_array *a)
{
  return a->heal;
}
