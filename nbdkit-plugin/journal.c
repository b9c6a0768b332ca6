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
  j->nslots = gr_journal_slot_count (gr_sb_journal_end (&sb), j->slot_size);
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

/* len bytes of zeros, 4096-aligned: entries go to O_DIRECT members
 * without a bounce (storage.h).  NULL if out of memory. */
static uint8_t *
block_alloc (size_t len)
{
  void *p;

  if (posix_memalign (&p, 4096, len) != 0)
    return NULL;
  return memset (p, 0, len);
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
  e = block_alloc (len);
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

/* Are the entry's journaled chunks distinct data chunks (below k)? */
static bool
indices_ok (const struct gr_journal_entry *h, int k)
{
  bool seen[GR_MAX_MEMBERS] = { false };

  for (uint32_t x = 0; x < h->nlost; x++) {
    if (h->lost[x] >= k || seen[h->lost[x]])
      return false;
    seen[h->lost[x]] = true;
  }
  return true;
}

/* Read and check the entry of slot q on member i: its buffer (header and
 * payload, to free) or NULL; its header in *h. */
static uint8_t *
read_entry (struct gr_journal *j, unsigned q, int i,
            struct gr_journal_entry *h)
{
  const struct gr_geom *g = &j->g;
  struct gr_mio v = { .kind = GR_MIO_READ, .member = i,
                      .off = slot_off (j, q), .len = j->slot_size };
  uint8_t *e = block_alloc (j->slot_size);

  if (e == NULL)
    return NULL;
  v.buf = e;
  gr_members_io (j->ms, &v, 1, GR_MIO_REPORT);
  if (v.result != GR_MIO_DONE ||
      gr_journal_entry_decode (e, j->slot_size, h) != 0 ||
      memcmp (h->uuid, j->uuid, 16) != 0)
    goto bad;
  if (h->stripe >= g->stripes || h->stripe % j->nslots != q ||
      h->hi > g->chunk || h->nlost > (uint32_t) g->k ||
      !indices_ok (h, g->k))
    goto bad;
  return e;
 bad:
  free (e);
  return NULL;
}

bool
gr_journal_entry (struct gr_journal *j, unsigned q,
                  struct gr_replay_entry *e, uint8_t **payload)
{
  struct gr_journal_entry h, best_h = { .seq = 0 };
  uint8_t *best = NULL;
  int i;

  /* The copies of the latest entry of the slot, on any live member. */
  for (i = 0; i < j->n; i++) {
    uint8_t *c;

    if (gr_members_failed (j->ms, i) ||
        (c = read_entry (j, q, i, &h)) == NULL)
      continue;
    if (best == NULL || h.seq > best_h.seq) {
      free (best);
      best = c;
      best_h = h;
    }
    else
      free (c);
  }
  if (best == NULL)
    return false;
  e->stripe = best_h.stripe;
  e->lo = best_h.lo;
  e->hi = best_h.hi;
  e->nlost = (int) best_h.nlost;
  for (uint32_t x = 0; x < best_h.nlost; x++)
    e->index[x] = best_h.lost[x];
  /* The payload from the buffer's start (its header dropped). */
  memmove (best, best + GR_JOURNAL_HDR,
           (size_t) e->nlost * (e->hi - e->lo));
  *payload = best;
  return true;
}

int
gr_journal_clear (struct gr_journal *j)
{
  static const uint8_t zero[GR_JOURNAL_HDR] __attribute__ ((aligned (4096)));
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
