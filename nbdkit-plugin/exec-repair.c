/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the executor: repairing a block that failed its checksum.
 * See exec.h and exec-internal.h.
 *
 * The block's row (the same 4 KiB of every chunk of its stripe) is read
 * again with the stripe held exclusively, every block verified; the
 * blocks that fail (bad) are rebuilt from the first k that pass, and the
 * other good ones computed from them too: where they all agree with what
 * was read the good blocks are one codeword and the bad ones are
 * rewritten with what it says.  Where they do not, or fewer than k
 * pass: outside a region that a crash left to resync that is corruption
 * past redundancy (EIO, never a guess); inside one it is a write torn by
 * the crash (a block landed, its checksum or its parity not): the
 * largest set of more than k blocks that is one codeword is taken as
 * written (their checksums set from them) and the other blocks are
 * rewritten from it; with no such set every block is taken as written,
 * and the resync recomputes the parity (bitmap.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "events.h"
#include "exec-internal.h"
#include "bitmap.h"
#include "cksum.h"
#include "log.h"

/* What the verification of the row's reads found. */
enum row_state { ROW_SAME, ROW_CHANGED, ROW_MEMBER_FAILED };

/* Verify the row's reads (mio[0..p->nread), chunk code index of each in
 * idx[]): bad[] updated (a read error is bad; without checksums the rest
 * is taken as good: read_error, the repair of one; those of forced[]
 * stay bad), and whether it changed. */
static enum row_state
verify_row (struct gr_exec *x, const struct gr_plan *p,
            const struct gr_mio *mio, const int *idx, bool read_error,
            const bool *forced, bool *bad)
{
  enum row_state st = ROW_SAME;
  uint64_t off;

  for (size_t i = 0; i < p->nread; i++) {
    if (mio[i].result == GR_MIO_READ_ERROR) {
      if (!bad[idx[i]]) {
        bad[idx[i]] = true;
        st = ROW_CHANGED;
      }
      continue;
    }
    if (mio[i].result != GR_MIO_DONE)
      return ROW_MEMBER_FAILED;
    if (x->cksum == NULL) {
      /* Read again without an error: readable now, and nothing else
       * can tell it bad. */
      if (read_error && bad[idx[i]]) {
        bad[idx[i]] = false;
        st = ROW_CHANGED;
      }
      continue;
    }
    switch (gr_cksum_verify (x->cksum, mio[i].member, mio[i].off,
                             mio[i].buf, mio[i].len, &off)) {
    case GR_CKSUM_MATCH:
      if (bad[idx[i]] && !forced[idx[i]]) {
        bad[idx[i]] = false;    /* written meanwhile: it passes now */
        st = ROW_CHANGED;
      }
      break;
    case GR_CKSUM_MISMATCH:
      if (!bad[idx[i]]) {
        bad[idx[i]] = true;
        st = ROW_CHANGED;
      }
      break;
    case GR_CKSUM_UNREADABLE:
      return ROW_MEMBER_FAILED;
    }
  }
  return st;
}

/* Do the good chunks computed agree with those read? */
static bool
good_agree (const struct gr_plan *p, int n, const bool *lostbad,
            const uint8_t *scratch)
{
  const size_t L = p->hi - p->lo;

  for (int i = 0; i < n; i++)
    if (!lostbad[i] &&
        memcmp (scratch + (size_t) i * L, scratch + (size_t) (n + i) * L,
                L) != 0)
      return false;
  return true;
}

/* Decodes tried in the search for a torn row's codeword, at most (every
 * k of the blocks up to 8+4). */
#define TORN_TRIES 512

/* What the search for a torn row's codeword found. */
enum row_search { ROW_CODEWORD, ROW_UNDECIDED, ROW_SEARCH_ERROR };

/* The set the last search of this thread found: the rows of one torn
 * write are torn alike, so it is tried first. */
static __thread bool torn_hint[GR_MAX_MEMBERS];

/* The blocks of the row as read (avail[]; block i at scratch + (n + i) *
 * L) that agree with the codeword of the k blocks of in[], into in[]; how
 * many, or -1 if it could not be decoded.  tmp: m blocks. */
static int
agreement (struct gr_exec *x, const bool *avail, const uint8_t *scratch,
           size_t L, uint8_t *tmp, bool *in)
{
  const int k = x->g.k, n = k + x->g.m;
  uint8_t *blk[GR_MAX_MEMBERS];
  int er[GR_MAX_MEMBERS], ner = 0, agree = k, i;

  for (i = 0; i < n; i++)
    if (in[i])
      blk[i] = (uint8_t *) scratch + (size_t) (n + i) * L;
    else {
      blk[i] = tmp + (size_t) ner * L;
      er[ner++] = i;
    }
  if (gr_coding_reconstruct_n (x->coding, false, er, ner, blk, 1, L) != 0)
    return -1;
  for (i = 0; i < ner; i++)
    if (avail[er[i]] &&
        memcmp (blk[er[i]], scratch + (size_t) (n + er[i]) * L, L) == 0) {
      in[er[i]] = true;
      agree++;
    }
  return agree;
}

/* The largest set of the row's blocks as read (those of avail[]), more
 * than k of them, that is one codeword, into cw[].  Only such a set can
 * be a write torn by the crash: each block holds the old data or the
 * new, and of each its checksum landed or not, so the blocks that agree
 * with the old codeword or with the new one are one (the whole row where
 * all or none of the write landed); corruption makes none.  The codeword
 * of every k of the blocks is tried (this thread's last set first, then
 * those that pass their checksums; TORN_TRIES decodes at most), until
 * one agrees with more than half of the blocks and k (no other can be
 * as large); below that two different ones as large decide nothing, and
 * a search cut short decides nothing either (ROW_UNDECIDED).  With no
 * block beyond k to check against, it cannot be told: all of them (the
 * journal covers a degraded array's writes). */
static enum row_search
row_codeword (struct gr_exec *x, const bool *avail, const bool *bad,
              const uint8_t *scratch, size_t L, bool *cw)
{
  const int k = x->g.k, n = k + x->g.m;
  uint8_t *tmp;
  int ord[GR_MAX_MEMBERS], c[GR_MAX_MEMBERS];
  int na = 0, best = 0, tries = 0, agree, i, j;
  bool in[GR_MAX_MEMBERS], tie = false, all = true, same, hint = true;
  bool more = true;

  for (j = 0; j < 2; j++)                 /* good blocks first */
    for (i = 0; i < n; i++)
      if (avail[i] && bad[i] == (j == 1))
        ord[na++] = i;
  if (na <= k) {
    memcpy (cw, avail, (size_t) n * sizeof *cw);
    return ROW_CODEWORD;
  }
  if ((tmp = malloc ((size_t) x->g.m * L)) == NULL) {
    nbdkit_error ("checksum repair: out of memory");
    return ROW_SEARCH_ERROR;
  }
  for (i = 0; i < k; i++)
    c[i] = i;
  while (2 * best < na + k) {
    memset (in, 0, sizeof in);
    if (hint) {
      /* k blocks of the last set found, if it has them. */
      hint = false;
      for (i = 0, j = 0; i < na && j < k; i++)
        if (torn_hint[ord[i]]) {
          in[ord[i]] = true;
          j++;
        }
      if (j < k)
        continue;
    }
    else {
      if (!more)
        break;                  /* every k tried */
      same = best > 0;          /* inside the best set: its codeword */
      for (i = 0; i < k; i++) {
        in[ord[c[i]]] = true;
        same = same && cw[ord[c[i]]];
      }
      for (i = k - 1; i >= 0 && c[i] == na - k + i; i--)
        ;                       /* the next k of the na */
      if (i < 0)
        more = false;
      else {
        c[i]++;
        for (j = i + 1; j < k; j++)
          c[j] = c[j - 1] + 1;
      }
      if (same)
        continue;
    }
    if (tries++ == TORN_TRIES) {
      all = false;
      break;
    }
    agree = agreement (x, avail, scratch, L, tmp, in);
    if (agree > k && agree > best) {
      best = agree;
      tie = false;
      memcpy (cw, in, (size_t) n * sizeof *cw);
    }
    else if (agree > k && agree == best &&
             memcmp (cw, in, (size_t) n * sizeof *cw) != 0)
      tie = true;               /* another codeword as large */
  }
  free (tmp);
  if (best > k)
    memcpy (torn_hint, cw, (size_t) n * sizeof *cw);
  /* Any other codeword agrees with at most na + k - 1 - best blocks. */
  return best > k && !tie && (all || 2 * best >= na + k) ? ROW_CODEWORD
    : ROW_UNDECIDED;
}

/* Repair the block of member at member byte off (its row), bad for its
 * checksum, or for a read error (read_error). */
static enum gr_exec_outcome
repair_row (struct gr_exec *x, int member, uint64_t off, bool held,
            bool torn, bool read_error, struct gr_exec_result *res)
{
  const int n = x->g.k + x->g.m;
  struct gr_plan *p = gr_plan_new (&x->g);
  struct gr_mio *mio = NULL;
  uint8_t *scratch = NULL;
  bool bad[GR_MAX_MEMBERS] = { false }, lostbad[GR_MAX_MEMBERS];
  bool forced[GR_MAX_MEMBERS] = { false }, locked = false, rewrite = false;
  int idx[GR_MAX_MEMBERS], ci, tries, i;
  uint64_t s, logical;
  uint32_t co;
  enum gr_exec_outcome r = GR_EXEC_ERROR;

  if (p == NULL ||
      (mio = calloc (p->cap_io, sizeof *mio)) == NULL ||
      (scratch = aligned_alloc (4096, (size_t) 2 * n * GR_CKSUM_BLOCK))
      == NULL) {
    nbdkit_error ("checksum repair: out of memory");
    errno = ENOMEM;
    goto out;
  }
  if (gr_map_inverse (&x->g, member, off, &s, &ci, &co, &logical) != 0) {
    nbdkit_error ("checksum repair: member %d at %" PRIu64 ": not in the "
                  "data area", member, off);
    errno = EIO;
    goto out;
  }
  bad[ci] = true;
  for (tries = 0; tries <= 2 * n; tries++) {
    struct gr_exec_snap sn;
    struct gr_plan_ctx c;
    struct gr_bufs b = { .scratch = scratch, .zero = x->zero };
    const uint32_t lo = co / GR_CKSUM_BLOCK * GR_CKSUM_BLOCK;
    enum gr_plan_kind kind;
    bool pending;
    int nbad = 0;

    /* A member whose rewrite failed has failed: nothing to repair on it
     * (the caller reads without it). */
    if (read_error && gr_members_state (x->ms, member) != GR_MEMBER_ACTIVE) {
      r = GR_EXEC_DONE;
      goto out;
    }
    gr_exec_plan_ctx (x, &sn, &c);
    kind = gr_plan_repair (&c, s, lo, lo + GR_CKSUM_BLOCK, bad, p);
    if (kind == GR_PLAN_SKIP) {
      r = GR_EXEC_DONE;         /* nothing fails now */
      goto out;
    }
    if (!held && !locked) {
      gr_exec_lock_plan (x, p);
      locked = true;
    }
    /* A write torn by the crash may explain checksums that disagree; a
     * read error it does not. */
    pending = !read_error &&
      (torn || (x->bitmap && (gr_bitmap_pending (x->bitmap, s, 1) ||
                              gr_bitmap_suspect (x->bitmap, s, 1))));
    for (i = 0; i < (int) p->nread; i++) {
      const struct gr_io *io = &p->read[i];
      uint64_t s2, l2;
      uint32_t c2;

      mio[i] = (struct gr_mio) { .kind = GR_MIO_READ, .member = io->member,
                                 .off = io->off, .len = io->len,
                                 .buf = gr_steps_at (&b, io->buf) };
      (void) gr_map_inverse (&x->g, io->member, io->off, &s2, &idx[i], &c2,
                             &l2);
    }
    if (gr_members_generation (x->ms) != p->gen)
      goto again;
    /* A read error met again here is the one being repaired. */
    gr_members_io (x->ms, mio, p->nread,
                   read_error ? GR_MIO_REPAIR : GR_MIO_FAIL_MEMBER);
    switch (verify_row (x, p, mio, idx, read_error, forced, bad)) {
    case ROW_MEMBER_FAILED:
    case ROW_CHANGED:
      goto again;               /* planned again with what it found */
    case ROW_SAME:
      break;
    }
    for (i = 0; i < n; i++) {
      lostbad[i] = bad[i] || c.failed[gr_map_member (&x->g, s, i)];
      nbad += bad[i];
    }
    if (kind == GR_PLAN_REFUSE ||
        gr_exec_code_stage (x, p, &b, NULL) != GR_EXEC_DONE ||
        !good_agree (p, n, lostbad, scratch)) {
      bool avail[GR_MAX_MEMBERS] = { false }, cw[GR_MAX_MEMBERS] = { false };
      enum row_search search = ROW_UNDECIDED;

      for (i = 0; i < (int) p->nread; i++)
        avail[idx[i]] = true;             /* read: all of them done */
      if (pending &&
          (search = row_codeword (x, avail, bad, scratch, p->hi - p->lo, cw))
          != ROW_SEARCH_ERROR) {
        /* A write torn by the crash: the codeword's blocks taken as
         * written, the others (parity that did not land, or data whose
         * parity did not) rewritten from them, still holding the row.
         * Where no k + 1 blocks are one codeword (a write of more chunks
         * than the redundancy, torn: old and new each too few), every
         * block is taken as the crash left it, as md's resync does: here
         * corruption past redundancy cannot be told from such a write. */
        int nout = 0, ncw = 0;

        if (search == ROW_UNDECIDED)
          memcpy (cw, avail, sizeof cw);
        for (i = 0; i < (int) p->nread; i++)
          if (bad[idx[i]] && cw[idx[i]])
            (void) gr_cksum_update (x->cksum, mio[i].member, mio[i].off,
                                    mio[i].buf, mio[i].len);
        for (i = 0; i < n; i++) {
          forced[i] = avail[i] && !cw[i];
          bad[i] = forced[i];
          nout += forced[i];
          ncw += avail[i] && cw[i];
        }
        if (search == ROW_UNDECIDED)
          gr_verbose ("stripe %" PRIu64 ", bytes %" PRIu32 "+4096 of its "
                      "chunks (a region the crash left to resync): %d "
                      "blocks disagree with their checksums and no %d of "
                      "the row's blocks are one codeword: taken as the "
                      "crash left them (a torn write, or corruption that "
                      "cannot be told from one), their checksums set",
                      s, lo, nbad, x->g.k + 1);
        else
          gr_verbose ("stripe %" PRIu64 ", bytes %" PRIu32 "+4096 of its "
                      "chunks (a region the crash left to resync): %d "
                      "blocks disagree with their checksums, the others do "
                      "not decide and %d of the row's blocks as read are "
                      "one codeword: taken as a torn write, their checksums "
                      "set%s", s, lo, nbad, ncw,
                      nout ? ", the others rewritten from them" : "");
        if (nout > 0) {
          rewrite = true;
          continue;             /* planned again: forced[] rewritten */
        }
        r = GR_EXEC_DONE;
      }
      else if (pending)
        errno = ENOMEM;
      else {
        for (i = 0; i < n; i++)
          if (bad[i] && !read_error)
            gr_members_count_cksum (x->ms, gr_map_member (&x->g, s, i));
        if (res->nrows < GR_EXEC_ROWS)
          res->rows[res->nrows++] = (struct gr_exec_row) { .stripe = s,
                                                           .lo = lo };
        nbdkit_error ("stripe %" PRIu64 ", bytes %" PRIu32 "+4096 of its "
                      "chunks: %d blocks failed their %s and the others "
                      "cannot rebuild them (%s): EIO", s, lo, nbad,
                      read_error ? "reads or checksums" : "checksums",
                      kind == GR_PLAN_REFUSE ? "too few good chunks left"
                      : "the good ones disagree");
        errno = EIO;
      }
      goto out;
    }
    r = gr_exec_write_stage (x, p, &b, mio, GR_MIO_FAIL_MEMBER, NULL, res);
    if (locked)
      gr_exec_unlock_plan (x, p);
    locked = false;
    if (r != GR_EXEC_DONE || read_error || rewrite)
      goto out;                 /* a read error: said by the caller */
    for (i = 0; i < n; i++)
      if (bad[i]) {
        const int mb = gr_map_member (&x->g, s, i);

        gr_members_count_cksum (x->ms, mb);
        res->repaired++;
        nbdkit_error ("member %d: checksum error at byte %" PRIu64 " (stripe %"
                      PRIu64 ", %s %d): rebuilt from the other chunks and "
                      "rewritten", mb, gr_map_member_offset (&x->g, s, lo),
                      s, i < x->g.k ? "data chunk" : "parity chunk",
                      i < x->g.k ? i : i - x->g.k);
        gr_event (GR_EV_CKSUM_ERROR_REPAIRED, mb, gr_members_path (x->ms, mb),
                  NULL, "offset=%" PRIu64 " stripe=%" PRIu64 " bytes=4096",
                  gr_map_member_offset (&x->g, s, lo), s);
      }
    goto out;
  again:
    if (locked)
      gr_exec_unlock_plan (x, p);
    locked = false;
  }
  nbdkit_error ("stripe %" PRIu64 ": %s repair did not settle: EIO", s,
                read_error ? "read error" : "checksum");
  errno = EIO;
  r = GR_EXEC_ERROR;
 out:
  if (locked)
    gr_exec_unlock_plan (x, p);
  free (scratch);
  free (mio);
  gr_plan_free (p);
  return r;
}

enum gr_exec_outcome
gr_exec_repair_bad (struct gr_exec *x, const struct gr_exec_bad *bad,
                    bool held, bool torn, struct gr_exec_result *res)
{
  struct gr_member_counts mc;
  uint64_t at, s, logical;
  uint32_t co;
  int ci;

  if (bad->len == 0)
    return repair_row (x, bad->member, bad->off, held, torn, false, res);
  /* A read error: every block of the read, row by row. */
  for (at = bad->off / GR_CKSUM_BLOCK * GR_CKSUM_BLOCK;
       at < bad->off + bad->len &&
         gr_members_state (x->ms, bad->member) == GR_MEMBER_ACTIVE;
       at += GR_CKSUM_BLOCK)
    if (repair_row (x, bad->member, at, held, torn, true, res) !=
        GR_EXEC_DONE)
      return GR_EXEC_ERROR;
  if (gr_members_state (x->ms, bad->member) == GR_MEMBER_ACTIVE) {
    gr_members_counts (x->ms, bad->member, &mc);
    (void) gr_map_inverse (&x->g, bad->member, bad->off, &s, &ci, &co,
                           &logical);
    nbdkit_error ("member %d: read error at byte %" PRIu64 " (%" PRIu64
                  " bytes; stripe %" PRIu64 ", %s %d): rebuilt from the "
                  "other chunks and rewritten (read error %" PRIu64 ")",
                  bad->member, bad->off, bad->len, s,
                  ci < x->g.k ? "data chunk" : "parity chunk",
                  ci < x->g.k ? ci : ci - x->g.k, mc.read_errors);
    gr_event (GR_EV_READ_ERROR_REPAIRED, bad->member,
              gr_members_path (x->ms, bad->member), NULL,
              "offset=%" PRIu64 " bytes=%" PRIu64 " stripe=%" PRIu64
              " read_errors=%" PRIu64, bad->off, bad->len, s,
              mc.read_errors);
  }
  return GR_EXEC_DONE;
}

enum gr_exec_outcome
gr_exec_verify_stripes (struct gr_exec *x, uint64_t s0, uint64_t ns)
{
  const size_t n = (size_t) x->g.k + x->g.m;
  uint64_t per = ((uint64_t) 64 << 20) / (n * x->g.chunk), s = s0;
  struct gr_plan *p;
  enum gr_exec_outcome r = GR_EXEC_DONE;

  if (per < 1)
    per = 1;
  if (per > ns)
    per = ns;
  p = gr_plan_new_batch (&x->g, per);
  if (p == NULL) {
    nbdkit_error ("verify: out of memory");
    return GR_EXEC_ERROR;
  }
  while (s < s0 + ns && r == GR_EXEC_DONE) {
    const uint64_t k = s0 + ns - s < per ? s0 + ns - s : per;
    struct gr_exec_result res = { .rewritten = 0 };
    struct gr_exec_snap sn;
    struct gr_plan_ctx c;

    gr_exec_plan_ctx (x, &sn, &c);
    if (gr_plan_check (&c, false, s, k, p) == GR_PLAN_REFUSE) {
      r = GR_EXEC_UNSUPPORTED;  /* nothing left to check against */
      break;
    }
    r = gr_exec_run (x, p, NULL, NULL, GR_MIO_FAIL_MEMBER, &res);
    if (r == GR_EXEC_REPLAN)
      r = GR_EXEC_DONE;         /* again from s */
    else if (r == GR_EXEC_DONE)
      s += k;
  }
  gr_plan_free (p);
  return r;
}

void
gr_exec_poison_rows (struct gr_exec *x, const struct gr_plan *p,
                     const struct gr_exec_result *res)
{
  uint8_t *blk = aligned_alloc (4096, GR_CKSUM_BLOCK);

  if (blk == NULL)
    return;
  for (size_t r = 0; r < res->nrows; r++) {
    const uint64_t s = res->rows[r].stripe;
    const uint64_t at = gr_map_member_offset (&x->g, s, res->rows[r].lo);

    for (size_t i = 0; i < p->nwrite; i++) {
      const struct gr_io *io = &p->write[i];
      struct gr_mio v = { .kind = GR_MIO_READ, .member = io->member,
                          .off = at, .len = GR_CKSUM_BLOCK, .buf = blk };

      /* A rebuild's writes (whole chunks) to a replacement it moved. */
      if (io->kind != GR_IO_WRITE || io->member < 0 || io->off > at ||
          io->off + io->len < at + GR_CKSUM_BLOCK ||
          (p->kind == GR_PLAN_REBUILD && !p->rb_adv[io->member]))
        continue;
      gr_members_io (x->ms, &v, 1, GR_MIO_FAIL_MEMBER);
      if (v.result != GR_MIO_DONE)
        continue;
      (void) gr_cksum_poison (x->cksum, io->member, at, blk);
      nbdkit_error ("member %d: byte %" PRIu64 " (stripe %" PRIu64 "): "
                    "written from a block that failed its checksum with no "
                    "good copy left: marked unreadable (reads of it answer "
                    "EIO)", io->member, at, s);
    }
  }
  free (blk);
}
