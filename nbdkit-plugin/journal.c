/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the write journal of a degraded array.  See journal.h.
 *
 * The slots and entries are laid out as format/format.h says ("the
 * metadata area"); here they are written, read and replayed. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "journal.h"
#include "log.h"
#include "format/format.h"
#include "members.h"

struct gr_journal {
  struct gr_geom g;
  int n;
  struct gr_members *ms;
  uint8_t uuid[16];
  size_t slot_size;
  unsigned nslots;
  pthread_mutex_t lock[GR_JOURNAL_MAX_SLOTS];
  uint64_t seq;                         /* atomic */
};

struct gr_journal *
gr_journal_new (const struct gr_geom *g, struct gr_members *ms)
{
  struct gr_journal *j = calloc (1, sizeof *j);
  struct gr_sb sb;
  unsigned i;

  if (j == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  j->g = *g;
  j->n = g->k + g->m;
  j->ms = ms;
  gr_members_sb (ms, &sb);
  memcpy (j->uuid, sb.uuid, 16);
  j->slot_size = gr_journal_slot_size (g->k, g->m, g->chunk);
  j->nslots = gr_journal_slot_count (g->data_offset, j->slot_size);
  for (i = 0; i < GR_JOURNAL_MAX_SLOTS; i++)
    pthread_mutex_init (&j->lock[i], NULL);
  return j;
}

void
gr_journal_free (struct gr_journal *j)
{
  unsigned i;

  if (j == NULL)
    return;
  for (i = 0; i < GR_JOURNAL_MAX_SLOTS; i++)
    pthread_mutex_destroy (&j->lock[i]);
  free (j);
}

unsigned
gr_journal_slots (const struct gr_journal *j)
{
  return j->nslots;
}

static uint64_t
slot_off (const struct gr_journal *j, unsigned q)
{
  return gr_journal_slot_offset (j->slot_size, q);
}

/* Write buffer e (len bytes) to slot q of the first `copies` live
 * members, durably (RWF_DSYNC: not the rest of their data, as fdatasync
 * would).  The number of copies made. */
static int
write_copies (struct gr_journal *j, unsigned q, uint8_t *e, size_t len,
              int copies)
{
  struct gr_mio v[GR_MAX_MEMBERS];
  int i, nv = 0, done = 0;

  for (i = 0; i < j->n && nv < copies; i++)
    if (!gr_members_failed (j->ms, i))
      v[nv++] = (struct gr_mio) { .kind = GR_MIO_WRITE_DSYNC, .member = i,
                                  .off = slot_off (j, q), .len = len,
                                  .buf = e };
  gr_members_io (j->ms, v, nv, GR_MIO_FAIL_MEMBER);
  for (i = 0; i < nv; i++)
    if (v[i].result == GR_MIO_DONE)
      done++;
  return done;
}

int
gr_journal_begin (struct gr_journal *j, const struct gr_plan *p,
                  const bool *failed, const struct gr_bufs *b)
{
  const struct gr_geom *g = &j->g;
  unsigned q = (unsigned) (p->s0 % j->nslots);
  size_t L = p->hi - p->lo, len;
  struct gr_journal_entry h = { .stripe = p->s0, .lo = p->lo,
                                .hi = p->hi };
  int lost[GR_MAX_MEMBERS], nlost = 0, nfailed = 0, copies, i;
  uint8_t *e;

  for (i = 0; i < j->n; i++)
    nfailed += failed[i];
  for (i = 0; i < g->k; i++)
    if (failed[gr_map_member (g, p->s0, i)])
      lost[nlost++] = i;
  len = GR_JOURNAL_HDR + (size_t) nlost * L;
  e = calloc (1, len);
  if (e == NULL) {
    nbdkit_error ("journal: out of memory");
    errno = ENOMEM;
    return -1;
  }
  memcpy (h.uuid, j->uuid, 16);
  h.seq = __atomic_add_fetch (&j->seq, 1, __ATOMIC_RELAXED);
  h.nlost = (uint32_t) nlost;
  for (i = 0; i < nlost; i++) {
    h.lost[i] = (uint16_t) lost[i];
    memcpy (e + GR_JOURNAL_HDR + (size_t) i * L,
            gr_steps_at (b, p->blk[lost[i]]), L);
  }
  gr_journal_entry_encode (&h, e);

  /* As many copies as the array tolerates more failures, plus one. */
  copies = g->m - nfailed + 1;
  pthread_mutex_lock (&j->lock[q]);
  if (write_copies (j, q, e, len, copies < 1 ? 1 : copies) == 0) {
    pthread_mutex_unlock (&j->lock[q]);
    free (e);
    nbdkit_error ("journal: no copy of the entry for stripe %" PRIu64
                  " could be written", p->s0);
    errno = EIO;
    return -1;
  }
  free (e);
  return 0;
}

void
gr_journal_end (struct gr_journal *j, const struct gr_plan *p)
{
  pthread_mutex_unlock (&j->lock[p->s0 % j->nslots]);
}

/* --- replay -------------------------------------------------------------- */

/* Read and check the entry of slot q on member i: its buffer (header and
 * payload, to free) or NULL; its header in *h. */
static uint8_t *
read_entry (struct gr_journal *j, unsigned q, int i,
            struct gr_journal_entry *h)
{
  const struct gr_geom *g = &j->g;
  struct gr_mio v = { .kind = GR_MIO_READ, .member = i,
                      .off = slot_off (j, q), .len = j->slot_size };
  uint8_t *e = malloc (j->slot_size);

  if (e == NULL)
    return NULL;
  v.buf = e;
  gr_members_io (j->ms, &v, 1, GR_MIO_REPORT);
  if (v.result != GR_MIO_DONE ||
      gr_journal_entry_decode (e, j->slot_size, h) != 0 ||
      memcmp (h->uuid, j->uuid, 16) != 0)
    goto bad;
  if (h->stripe >= g->stripes || h->stripe % j->nslots != q ||
      h->hi > g->chunk || h->nlost > (uint32_t) g->k)
    goto bad;
  return e;
 bad:
  free (e);
  return NULL;
}

/* Recompute the parity of the entry's stripe over [lo, hi) from the live
 * data chunks and the journaled lost ones.  -1 on an I/O error, 1 if a
 * data chunk is lost that the entry does not hold, else 0. */
static int
replay_entry (struct gr_journal *j, struct gr_coding *coding,
              const struct gr_journal_entry *h, const uint8_t *e)
{
  const struct gr_geom *g = &j->g;
  uint64_t s = h->stripe;
  uint32_t lo = h->lo, hi = h->hi, nlost = h->nlost;
  size_t L = hi - lo, x;
  const uint64_t moff = gr_map_member_offset (g, s, lo);
  uint8_t *buf, *blk[GR_MAX_MEMBERS];
  struct gr_mio v[GR_MAX_MEMBERS], w[GR_MAX_MEMBERS];
  int i, nv = 0, nw = 0, r = 0;

  buf = malloc ((size_t) j->n * L);
  if (buf == NULL)
    return -1;
  for (i = 0; i < j->n; i++)
    blk[i] = buf + (size_t) i * L;
  for (i = 0; i < g->k; i++) {
    int mem = gr_map_member (g, s, i);
    bool have = false;

    for (x = 0; x < nlost; x++)
      if (h->lost[x] == i) {
        memcpy (blk[i], e + GR_JOURNAL_HDR + x * L, L);
        have = true;
      }
    /* A lost chunk on the rebuilt part of a replacement (a rebuild
     * resumed from its checkpoint) is written there as journaled. */
    if (have && gr_members_failed (j->ms, mem) &&
        gr_members_in_use (j->ms, mem, moff, L))
      w[nw++] = (struct gr_mio) { .kind = GR_MIO_WRITE, .member = mem,
                                  .off = moff, .len = L, .buf = blk[i] };
    if (have)
      continue;
    if (!gr_members_in_use (j->ms, mem, moff, L)) {
      r = 1;
      goto out;
    }
    v[nv++] = (struct gr_mio) { .kind = GR_MIO_READ, .member = mem,
                                .off = moff, .len = L, .buf = blk[i] };
  }
  gr_members_io (j->ms, v, nv, GR_MIO_REPORT);
  for (i = 0; i < nv; i++)
    if (v[i].result != GR_MIO_DONE) {
      r = -1;
      goto out;
    }
  if (gr_coding_encode (coding, false, blk, 1, L) == -1) {
    r = -1;
    goto out;
  }
  nv = 0;
  for (i = g->k; i < j->n; i++) {
    int mem = gr_map_member (g, s, i);

    if (gr_members_in_use (j->ms, mem, moff, L))
      v[nv++] = (struct gr_mio) { .kind = GR_MIO_WRITE, .member = mem,
                                  .off = moff, .len = L, .buf = blk[i] };
  }
  for (x = 0; x < (size_t) nw; x++)
    v[nv++] = w[x];
  gr_members_io (j->ms, v, nv, GR_MIO_REPORT);
  for (i = 0; i < nv; i++)
    if (v[i].result != GR_MIO_DONE)
      r = -1;
 out:
  free (buf);
  return r;
}

enum gr_replay_outcome
gr_journal_replay (struct gr_journal *j, struct gr_coding *coding,
                   unsigned *nreplayed)
{
  enum gr_replay_outcome out = GR_REPLAY_DONE;
  unsigned q;
  int i, r;

  *nreplayed = 0;
  for (q = 0; q < j->nslots; q++) {
    uint8_t *best = NULL;
    struct gr_journal_entry h, bh;

    /* The copies of the latest entry of the slot, on any live member. */
    for (i = 0; i < j->n; i++) {
      uint8_t *e;

      if (gr_members_failed (j->ms, i) ||
          (e = read_entry (j, q, i, &h)) == NULL)
        continue;
      if (best == NULL || h.seq > bh.seq) {
        free (best);
        best = e;
        bh = h;
      }
      else
        free (e);
    }
    if (best == NULL)
      continue;
    r = replay_entry (j, coding, &bh, best);
    if (r == -1) {
      nbdkit_error ("journal: replaying stripe %" PRIu64 " failed",
                    bh.stripe);
      free (best);
      return GR_REPLAY_FAILED;
    }
    if (r == 1) {
      gr_warn ("journal: stripe %" PRIu64 " cannot be replayed: a data "
               "chunk it did not journal is lost too", bh.stripe);
      out = GR_REPLAY_PARTLY;
    }
    else
      (*nreplayed)++;
    free (best);
  }
  for (i = 0; i < j->n; i++)
    if (gr_members_sync (j->ms, i) == -1)
      return GR_REPLAY_FAILED;
  return out;
}

int
gr_journal_clear (struct gr_journal *j)
{
  static const uint8_t zero[GR_JOURNAL_HDR];
  struct gr_mio v[GR_JOURNAL_MAX_SLOTS];
  unsigned q;
  int i;

  for (i = 0; i < j->n; i++) {
    if (gr_members_failed (j->ms, i))
      continue;
    for (q = 0; q < j->nslots; q++)
      v[q] = (struct gr_mio) { .kind = GR_MIO_WRITE, .member = i,
                               .off = slot_off (j, q), .len = GR_JOURNAL_HDR,
                               .buf = (void *) zero };
    /* Under the superblock lock (gr_members_on_dirty): report errors,
     * do not fail members here; the superblock update after it will. */
    gr_members_io (j->ms, v, j->nslots, GR_MIO_REPORT);
    for (q = 0; q < j->nslots; q++)
      if (v[q].result != GR_MIO_DONE)
        return -1;
  }
  return 0;
}
