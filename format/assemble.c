/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the assembly decision.  See format.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "format.h"

static void
refuse (struct gr_assembly *a, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));

static void
refuse (struct gr_assembly *a, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (a->error, sizeof a->error, fmt, ap);
  va_end (ap);
  a->outcome = GR_ASSEMBLY_REFUSED;
}

/* Append to a bounded line. */
static void
append (char *buf, size_t size, const char *fmt, ...)
  __attribute__ ((format (printf, 3, 4)));

static void
append (char *buf, size_t size, const char *fmt, ...)
{
  size_t len = strlen (buf);
  va_list ap;

  if (len + 1 >= size)
    return;
  va_start (ap, fmt);
  vsnprintf (buf + len, size - len, fmt, ap);
  va_end (ap);
}

static const char *
code_name (uint32_t code)
{
  return code == GR_CODE_CRS ? "crs" : "rs";
}

/* Why probe p could not be opened or read. */
static const char *
open_reason (const struct gr_probe *p)
{
  return p->open_why[0] ? p->open_why : strerror (p->open_errno);
}

static void
init (struct gr_assembly *a)
{
  int i;

  memset (a, 0, sizeof *a);
  a->outcome = GR_ASSEMBLY_OK;
  for (i = 0; i < GR_MAX_MEMBERS; i++)
    a->slot[i] = -1;
}

static void
geom_from_sb (struct gr_assembly *a)
{
  a->geom.k = (int) a->sb.k;
  a->geom.m = (int) a->sb.m;
  a->geom.chunk = a->sb.chunk;
  a->geom.data_offset = a->sb.data_offset;
  a->geom.stripes = a->sb.data_size / a->sb.chunk;
  a->n = a->geom.k + a->geom.m;
}

void
gr_assemble_create (const struct gr_probe *p, int np,
                    const struct gr_assemble_args *args,
                    struct gr_assembly *a)
{
  int n = np, m = args->m, i;
  uint32_t chunk = args->chunk ? args->chunk : 65536;
  uint64_t data_offset = chunk > GR_MIN_DATA_OFFSET ? chunk
    : GR_MIN_DATA_OFFSET;
  uint64_t size;
  char uuid[37];

  /* Room for GR_JOURNAL_MIN_SLOTS journal slots before the data (before
   * the checksums where they are kept). */
  if (m > 0 && m < n) {
    const uint64_t jend = GR_JOURNAL_OFFSET + GR_JOURNAL_MIN_SLOTS *
      (uint64_t) gr_journal_slot_size ((uint32_t) (n - m), (uint32_t) m,
                                       chunk);

    if (data_offset < jend)
      data_offset = (jend + chunk - 1) / chunk * chunk;
  }
  init (a);
  if (n > GR_MAX_MEMBERS) {
    refuse (a, "k+m = %d: at most %d members", n, GR_MAX_MEMBERS);
    return;
  }
  for (i = 0; i < n; i++) {
    if (p[i].open_errno) {
      refuse (a, "member %d (%s): cannot open: %s", i, p[i].path,
              open_reason (&p[i]));
      return;
    }
    if (p[i].sb_status != -ENOENT && !args->force) {
      if (p[i].sb_status == 0) {
        gr_sb_uuid_str (p[i].sb.uuid, uuid);
        refuse (a, "member %d (%s) already holds a gpuraid superblock "
                "(array %s, member %" PRIu32 "); use force=true to "
                "overwrite it", i, p[i].path, uuid, p[i].sb.index);
      }
      else
        refuse (a, "member %d (%s) holds a gpuraid superblock (%s); use "
                "force=true to overwrite it", i, p[i].path,
                gr_sb_strerror (p[i].sb_status));
      return;
    }
  }
  size = p[0].size;
  for (i = 1; i < n; i++)
    if (p[i].size != size) {
      refuse (a, "member %d (%s) is %" PRIu64 " bytes but member 0 (%s) is %"
              PRIu64 ": members must be the same size", i, p[i].path,
              p[i].size, p[0].path, size);
      return;
    }
  if (size < data_offset + chunk) {
    refuse (a, "members are too small (%" PRIu64 " bytes): at least %" PRIu64
            " bytes needed for chunk=%" PRIu32, size, data_offset + chunk,
            chunk);
    return;
  }
  a->sb.version = GR_SB_VERSION;
  a->sb.k = (uint32_t) (n - m);
  a->sb.m = (uint32_t) m;
  a->sb.code = args->code ? (uint32_t) args->code : GR_CODE_RS;
  a->sb.chunk = chunk;
  if (args->integrity != GR_INTEGRITY_OFF) {
    /* The checksum area where the data used to start, the data after it
     * (sized for the most data there could be: the rest is unused). */
    a->sb.cksum_offset = data_offset;
    data_offset += gr_cksum_layout_bytes (size - data_offset);
    data_offset = (data_offset + chunk - 1) / chunk * chunk;
    if (size < data_offset + chunk) {
      refuse (a, "members are too small (%" PRIu64 " bytes): at least %"
              PRIu64 " bytes needed for chunk=%" PRIu32 " with checksums "
              "(integrity=on)", size, data_offset + chunk, chunk);
      return;
    }
  }
  a->sb.data_offset = data_offset;
  a->sb.data_size = (size - data_offset) / chunk * chunk;
  a->sb.bitmap_region = gr_sb_bitmap_region (chunk, a->sb.data_size / chunk,
                                             args->bitmap_chunk);
  geom_from_sb (a);
  if (gr_map_check (&a->geom) != 0) {
    refuse (a, "invalid geometry k=%d m=%d chunk=%" PRIu32, n - m, m, chunk);
    return;
  }
  for (i = 0; i < n; i++) {
    a->slot[i] = i;
    a->path[i] = p[i].path;
    a->state[i] = GR_SLOT_ACTIVE;
  }
}


static bool
same_geometry (const struct gr_sb *x, const struct gr_sb *y)
{
  return x->k == y->k && x->m == y->m && x->code == y->code &&
    x->chunk == y->chunk && x->data_offset == y->data_offset &&
    x->data_size == y->data_size;
}

/* Does probe j belong to the array of probe i, with its geometry? */
static bool
same_array (const struct gr_probe *p, int i, int j)
{
  return memcmp (p[i].sb.uuid, p[j].sb.uuid, 16) == 0 &&
    same_geometry (&p[i].sb, &p[j].sb);
}

/* The opened member whose array (UUID and geometry) most others share:
 * the odd ones out are then the ones blamed. */
static int
majority (const struct gr_probe *p, int np)
{
  int i, j, best = -1, best_n = 0;

  for (i = 0; i < np; i++) {
    int count = 0;

    if (p[i].open_errno)
      continue;
    for (j = 0; j < np; j++)
      count += !p[j].open_errno && same_array (p, i, j);
    if (count > best_n) {
      best = i;
      best_n = count;
    }
  }
  return best;
}

/* Every opened member must hold a valid superblock of one array with one
 * geometry, as the command line says.  One of the majority, or -1. */
static int
check_superblocks (const struct gr_probe *p, int np,
                   const struct gr_assemble_args *args, struct gr_assembly *a)
{
  char uuid[37], uuid2[37];
  int i, ref, nsb = 0;

  for (i = 0; i < np; i++)
    nsb += !p[i].open_errno && p[i].sb_status == 0;
  for (i = 0; i < np; i++) {
    if (p[i].open_errno)
      continue;
    if (p[i].sb_status == -ENOENT && nsb == 0) {
      refuse (a, "member %d (%s): no gpuraid superblock (on no member); "
              "create=true creates a new array", i, p[i].path);
      return -1;
    }
    if (p[i].sb_status == -ENOENT) {
      /* Not create=true's hint: that would overwrite the array. */
      refuse (a, "member %d (%s): no gpuraid superblock, so not a member of "
              "this array: leave it out to start degraded, then add it "
              "with gpuraidctl replace", i, p[i].path);
      return -1;
    }
    if (p[i].sb_status != 0) {
      refuse (a, "member %d (%s): %s; refusing to use it (remove it to start "
              "degraded)", i, p[i].path, gr_sb_strerror (p[i].sb_status));
      return -1;
    }
  }
  ref = majority (p, np);
  for (i = 0; ref >= 0 && i < np; i++)
    if (!p[i].open_errno && (p[i].sb.flags & GR_SB_FLAG_SPARE) &&
        same_array (p, i, ref)) {
      refuse (a, "member=%s is a hot spare of this array, not a member: "
              "give it as spare=", p[i].path);
      return -1;
    }
  for (i = 0; ref >= 0 && i < np; i++) {
    if (p[i].open_errno)
      continue;
    if (memcmp (p[i].sb.uuid, p[ref].sb.uuid, 16) != 0) {
      gr_sb_uuid_str (p[i].sb.uuid, uuid);
      gr_sb_uuid_str (p[ref].sb.uuid, uuid2);
      refuse (a, "member %d (%s) belongs to another array (%s, not %s)", i,
              p[i].path, uuid, uuid2);
      return -1;
    }
    if (!same_geometry (&p[i].sb, &p[ref].sb)) {
      refuse (a, "member %d (%s): geometry differs from member %d (%s)", i,
              p[i].path, ref, p[ref].path);
      return -1;
    }
  }
  if (ref == -1) {
    refuse (a, "no member could be opened:");
    for (i = 0; i < np; i++)
      append (a->error, sizeof a->error, "%s member %d (%s): %s",
              i ? ";" : "", i, p[i].path, open_reason (&p[i]));
    return -1;
  }
  if (args->m >= 0 && (uint32_t) args->m != p[ref].sb.m) {
    refuse (a, "m=%d does not match the array (m=%" PRIu32 ")", args->m,
            p[ref].sb.m);
    return -1;
  }
  if (args->chunk && args->chunk != p[ref].sb.chunk) {
    refuse (a, "chunk=%" PRIu32 " does not match the array (chunk=%" PRIu32
            ")", args->chunk, p[ref].sb.chunk);
    return -1;
  }
  if (args->integrity != GR_INTEGRITY_DEFAULT &&
      (args->integrity == GR_INTEGRITY_ON) != (p[ref].sb.cksum_offset != 0)) {
    refuse (a, "integrity=%s does not match the array (integrity=%s)",
            args->integrity == GR_INTEGRITY_ON ? "on" : "off",
            p[ref].sb.cksum_offset ? "on" : "off");
    return -1;
  }
  if (args->code && (uint32_t) args->code != p[ref].sb.code) {
    refuse (a, "code=%s does not match the array (code=%s)",
            code_name ((uint32_t) args->code), code_name (p[ref].sb.code));
    return -1;
  }
  return ref;
}

bool
gr_readd_covered (const struct gr_sb *array, const struct gr_sb *member)
{
  return array->degraded_since != 0 &&
    !(member->flags & (GR_SB_FLAG_REBUILDING | GR_SB_FLAG_SPARE)) &&
    member->index < array->k + array->m &&
    member->event + 1 >= array->degraded_since &&
    member->event <= array->event;
}

/* How good a claim probe q (of the array whose superblock is auth) makes
 * to its index: the higher, the better. */
enum claim {
  CLAIM_OTHER,                  /* stale, failed, an abandoned rebuild's */
  CLAIM_READD,                  /* failed, but the degraded map covers it */
  CLAIM_REBUILDING,             /* the replacement of the recorded rebuild */
  CLAIM_CURRENT,                /* a current member */
};

static enum claim
claim_of (const struct gr_probe *q, const struct gr_sb *auth)
{
  const int i = (int) q->sb.index;

  if (q->sb.flags & GR_SB_FLAG_REBUILDING)
    return auth->rebuild_id == q->sb.rebuild_id &&
      gr_sb_rebuild_test (auth, i) ? CLAIM_REBUILDING : CLAIM_OTHER;
  if (!gr_sb_failed_test (auth, i) && q->sb.event + 1 >= auth->event)
    return CLAIM_CURRENT;
  return gr_readd_covered (auth, &q->sb) ? CLAIM_READD : CLAIM_OTHER;
}

/* Place the opened members by index, the best claim to each (another
 * copy of a member, as a replaced member's old file, is left out and
 * said); the authoritative one (highest event) or -1. */
static int
place (const struct gr_probe *p, int np, int n, struct gr_assembly *a)
{
  int i, auth = -1;

  for (i = 0; i < np; i++) {
    if (p[i].open_errno)
      continue;
    if (p[i].size < p[i].sb.data_offset + p[i].sb.data_size) {
      refuse (a, "member %d (%s) is too small (%" PRIu64 " bytes) for its "
              "superblock's data area (%" PRIu64 " bytes)", i, p[i].path,
              p[i].size, p[i].sb.data_offset + p[i].sb.data_size);
      return -1;
    }
    /* A replacement's superblock is never the array's. */
    if (!(p[i].sb.flags & GR_SB_FLAG_REBUILDING) &&
        (auth == -1 || p[i].sb.event > p[auth].sb.event))
      auth = i;
  }
  if (auth == -1) {
    refuse (a, "only replacements being rebuilt were found, no member of "
            "the array: give its members");
    return -1;
  }
  for (i = 0; i < np; i++) {
    const int idx = (int) p[i].sb.index;
    const int o = a->slot[idx];
    enum claim ci, co;
    int out;

    if (p[i].open_errno)
      continue;
    if (o < 0) {
      a->slot[idx] = i;
      continue;
    }
    ci = claim_of (&p[i], &p[auth].sb);
    co = claim_of (&p[o], &p[auth].sb);
    if (ci == co && p[i].sb.event == p[o].sb.event &&
        (ci == CLAIM_CURRENT || ci == CLAIM_REBUILDING)) {
      refuse (a, "member %d (%s) and member %d (%s) both claim member index "
              "%d at event %" PRIu64 " (copies of one member?): give one",
              o, p[o].path, i, p[i].path, idx, p[i].sb.event);
      return -1;
    }
    if (ci > co || (ci == co && p[i].sb.event > p[o].sb.event))
      a->slot[idx] = i;
    out = a->slot[idx] == i ? o : i;
    append (a->copies, sizeof a->copies, "%s%s holds an older copy of "
            "member %d (event %" PRIu64 "): not used", a->copies[0] ? "; "
            : "", p[out].path, idx, p[out].sb.event);
  }
  for (i = 0; i < n; i++)
    if (a->slot[i] >= 0) {
      a->path[i] = p[a->slot[i]].path;
      if (a->slot[i] != i)
        a->reordered = true;
    }
  return auth;
}

/* Slot i holds a replacement being rebuilt (its own superblock says
 * REBUILDING): one of the rebuild the array records resumes from the
 * checkpoint while the array has it failed; one the array has live was
 * cut off in the update that made it live; any other is what an
 * abandoned rebuild left. */
static void
judge_replacement (const struct gr_probe *q, int i, struct gr_assembly *a)
{
  const uint64_t stripes = a->sb.data_size / a->sb.chunk;
  const bool recorded = a->sb.rebuild_id == q->sb.rebuild_id &&
    gr_sb_rebuild_test (&a->sb, i);

  if (recorded && gr_sb_failed_test (&a->sb, i) &&
      a->sb.rebuild_at < stripes) {
    a->state[i] = GR_SLOT_REBUILDING;
    snprintf (a->why[i], sizeof a->why[i], "being rebuilt: resumes at "
              "stripe %" PRIu64 " of %" PRIu64, a->sb.rebuild_at, stripes);
  }
  else if (recorded && !gr_sb_failed_test (&a->sb, i))
    a->state[i] = GR_SLOT_ACTIVE;
  else {
    a->state[i] = GR_SLOT_STALE;
    snprintf (a->why[i], sizeof a->why[i], "the replacement of a rebuild "
              "that was abandoned (not the one the array records)");
  }
}

/* The state of every slot against the authoritative superblock. */
static void
judge_slots (const struct gr_probe *p, int np, struct gr_assembly *a,
             bool salvage)
{
  bool attributed[GR_MAX_MEMBERS] = { false };
  int i;

  for (i = 0; i < a->n; i++) {
    int q = a->slot[i];

    a->state[i] = GR_SLOT_ACTIVE;
    if (q < 0) {
      /* At creation the command-line order is the index, so while the
       * members that opened are all in that order, an unopenable path at
       * position i is probably member i; otherwise nothing is guessed. */
      a->state[i] = GR_SLOT_MISSING;
      if (i < np && p[i].open_errno && !a->reordered) {
        attributed[i] = true;
        a->path[i] = p[i].path;
        snprintf (a->why[i], sizeof a->why[i], "missing; probably member=%s,"
                  " which cannot be opened: %s", p[i].path,
                  open_reason (&p[i]));
      }
      else
        snprintf (a->why[i], sizeof a->why[i], "missing");
    }
    else if (p[q].sb.flags & GR_SB_FLAG_REBUILDING)
      judge_replacement (&p[q], i, a);
    else if (gr_sb_failed_test (&a->sb, i) &&
             gr_readd_covered (&a->sb, &p[q].sb)) {
      /* It left while the degraded map was kept: re-added, only the
       * regions written since rebuilt, unless the operator failed it. */
      a->state[i] = gr_sb_removed_test (&a->sb, i) ? GR_SLOT_FAILED
        : GR_SLOT_READD;
      snprintf (a->why[i], sizeof a->why[i], "%s at event %" PRIu64
                " (the array's is %" PRIu64 ")%s",
                gr_sb_removed_test (&a->sb, i) ? "failed by the operator"
                : "failed", p[q].sb.event, a->sb.event,
                gr_sb_removed_test (&a->sb, i) ? "; gpuraidctl re-add brings "
                "it back" : ": re-added, the regions written since then "
                "rebuilt");
    }
    else if (gr_sb_failed_test (&a->sb, i)) {
      a->state[i] = GR_SLOT_FAILED;
      snprintf (a->why[i], sizeof a->why[i], "marked failed in the array "
                "(event %" PRIu64 ")", a->sb.event);
    }
    else if (p[q].sb.event + 1 < a->sb.event) {
      /* An update interrupted half way leaves members one event behind
       * with current data; two or more behind, a member missed an update
       * that completed, which only an old copy of it can have done. */
      a->state[i] = GR_SLOT_STALE;
      snprintf (a->why[i], sizeof a->why[i], "stale (event %" PRIu64 ", the "
                "array's is %" PRIu64 ": an old copy)", p[q].sb.event,
                a->sb.event);
    }
    a->nfailed += a->state[i] != GR_SLOT_ACTIVE;
  }
  /* Nothing is rebuilt on an array that has failed or is salvaged. */
  for (i = 0; i < a->n; i++)
    if (a->state[i] == GR_SLOT_READD && (salvage || a->nfailed > a->geom.m)) {
      a->state[i] = GR_SLOT_FAILED;
      snprintf (a->why[i], sizeof a->why[i], "marked failed in the array "
                "(event %" PRIu64 ")", a->sb.event);
    }
  for (i = 0, a->nfailed = 0; i < a->n; i++) {
    const int q = a->slot[i];

    if (a->state[i] != GR_SLOT_ACTIVE) {
      a->nfailed++;
      if (a->state[i] == GR_SLOT_MISSING)
        append (a->warning, sizeof a->warning, "%smember %d is %s",
                a->nfailed > 1 ? "; " : "", i, a->why[i]);
      else
        append (a->warning, sizeof a->warning, "%smember %d (%s) is %s%s",
                a->nfailed > 1 ? "; " : "", i, p[q].path, a->why[i],
                a->state[i] == GR_SLOT_REBUILDING ||
                a->state[i] == GR_SLOT_READD ? "" : ": not used");
    }
  }
  for (i = 0; i < np; i++)
    if (p[i].open_errno && !attributed[i])
      append (a->warning, sizeof a->warning, "%smember=%s cannot be opened "
              "(%s); treating it as missing", a->warning[0] ? "; " : "",
              p[i].path, open_reason (&p[i]));
}

/* Would bringing back the members marked failed or stale that are
 * present leave at most m missing? */
/* Could slot i be brought back: present, not active, and no replacement
 * (whose chunks above its checkpoint were never written)? */
static bool
bringable (const struct gr_probe *p, const struct gr_assembly *a, int i)
{
  return a->slot[i] >= 0 && a->state[i] != GR_SLOT_ACTIVE &&
    a->state[i] != GR_SLOT_SALVAGED &&
    !(p[a->slot[i]].sb.flags & GR_SB_FLAG_REBUILDING);
}

static bool
salvageable (const struct gr_probe *p, const struct gr_assembly *a)
{
  int i, missing = 0;

  for (i = 0; i < a->n; i++)
    missing += a->state[i] != GR_SLOT_ACTIVE && !bringable (p, a, i);
  return missing <= a->geom.m;
}

/* The array has failed: bring back, read-only, as few of the members
 * marked failed or stale that are present as make it readable, the most
 * recently updated first (like mdadm's forced assembly: they miss the
 * fewest writes), and say what may be wrong. */
static void
salvage (const struct gr_probe *p, struct gr_assembly *a)
{
  char list[sizeof a->warning] = "";
  int i;

  if (!salvageable (p, a))
    return;
  while (a->nfailed > a->geom.m) {
    int best = -1;

    for (i = 0; i < a->n; i++)
      if (bringable (p, a, i) &&
          (best < 0 || p[a->slot[i]].sb.event > p[a->slot[best]].sb.event))
        best = i;
    a->state[best] = GR_SLOT_SALVAGED;
    a->nfailed--;
    append (list, sizeof list, "%smember %d (%s, last updated at event %"
            PRIu64 ")", list[0] ? ", " : "", best, p[a->slot[best]].path,
            p[a->slot[best]].sb.event);
  }
  a->salvaged = true;
  snprintf (a->warning, sizeof a->warning, "salvage: the array had "
            "failed; serving it read-only with ");
  append (a->warning, sizeof a->warning, "%s brought back, marked failed "
          "(the array is at event %" PRIu64 "): their chunks miss the "
          "writes made after they failed, so where such writes were made "
          "(the failed writes included), reads of those chunks and reads "
          "rebuilt through them may be wrong; nothing is written to the "
          "members", list, a->sb.event);
  for (i = 0; i < a->n; i++)
    if (a->state[i] != GR_SLOT_ACTIVE && a->state[i] != GR_SLOT_SALVAGED)
      append (a->warning, sizeof a->warning, "; member %d is %s%s", i,
              a->why[i], a->slot[i] >= 0 ? ": not used" : "");
}

/* The flags of the newest dirty superblock, the array's or an active
 * member's (all of one dirty update carry the same), or 0. */
static uint32_t
dirty_flags (const struct gr_probe *p, const struct gr_assembly *a)
{
  int i;

  if (a->sb.flags & GR_SB_FLAG_DIRTY)
    return a->sb.flags;
  for (i = 0; i < a->n; i++)
    if (a->state[i] == GR_SLOT_ACTIVE && (p[a->slot[i]].sb.flags &
                                          GR_SB_FLAG_DIRTY) &&
        !(p[a->slot[i]].sb.flags & GR_SB_FLAG_REBUILDING))
      return p[a->slot[i]].sb.flags;
  return 0;
}

void
gr_assemble (const struct gr_probe *p, int np,
             const struct gr_assemble_args *args, struct gr_assembly *a)
{
  char list[sizeof a->warning];
  int ref, auth;

  init (a);
  ref = check_superblocks (p, np, args, a);
  if (ref < 0)
    return;
  a->sb = p[ref].sb;
  geom_from_sb (a);
  auth = place (p, np, a->n, a);
  if (auth < 0)
    return;
  a->sb = p[auth].sb;
  /* Written by a plugin before the bitmap: the default, recorded with the
   * next superblock update. */
  if (a->sb.bitmap_region == 0)
    a->sb.bitmap_region = gr_sb_bitmap_region (a->sb.chunk, a->sb.data_size /
                                               a->sb.chunk, 0);
  geom_from_sb (a);
  if (gr_map_check (&a->geom) != 0) {
    refuse (a, "member %d (%s): invalid geometry", auth, p[auth].path);
    return;
  }
  judge_slots (p, np, a, args->salvage);
  if (args->salvage) {
    a->read_only = true;
    if (a->nfailed > a->geom.m)
      salvage (p, a);
  }
  if (a->nfailed > a->geom.m) {
    refuse (a, "the array has failed: too many members missing or failed: "
            "%d of %d, the array tolerates %d: %s%s", a->nfailed, a->n,
            a->geom.m, a->warning, args->salvage || !salvageable (p, a) ? ""
            : "; salvage=true brings it up read-only with the members "
            "marked failed that are present, to copy the data off");
    return;
  }
  if (a->nfailed > 0 && !a->salvaged) {
    snprintf (list, sizeof list, "%s", a->warning);
    a->warning[0] = '\0';
    append (a->warning, sizeof a->warning, "starting degraded with %d of %d "
            "members, %d more failures tolerated: %s", a->n - a->nfailed,
            a->n, a->geom.m - a->nfailed, list);
  }
  if (a->copies[0])
    append (a->warning, sizeof a->warning, "%s%s", a->warning[0] ? "; " : "",
            a->copies);
  if (a->read_only)
    return;                     /* nothing is written: no resync */
  /* Not shut down cleanly: parity of the stripes being written at the
   * crash may not match their data.  A member still dirty while the
   * newest superblock is clean was cut off in the clean update, which
   * starts once every member is synced: consistent, but resynced anyway
   * where that is possible. */
  if (a->sb.flags & GR_SB_FLAG_DIRTY)
    a->resync = a->nfailed == 0 ? GR_RESYNC_FULL : GR_RESYNC_DEGRADED;
  else if (dirty_flags (p, a) && a->nfailed == 0)
    a->resync = GR_RESYNC_FULL; /* cut off while going clean: harmless */
  a->bitmap_kept = (dirty_flags (p, a) & GR_SB_FLAG_BITMAP) != 0;
}
