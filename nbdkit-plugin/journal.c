/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the write journal of a degraded array.  See journal.h.
 *
 * Slot q of the journal area of a member is at GR_JOURNAL_OFFSET +
 * q * slot_size; an entry is a 4096-byte header and its payload:
 *
 *   off  size  field
 *     0     8  magic "GRJOURNL"
 *     8    16  array UUID
 *    24     8  sequence number (grows within a session)
 *    32     8  stripe
 *    40     4  lo, 44 4 hi (coding range inside the chunk)
 *    48     4  number of lost data chunks journaled (nlost)
 *    52     4  payload length (nlost * (hi - lo))
 *    56  2*nlost  their code indices
 *  4092     4  crc32c of bytes 0..4091 and of the payload
 *   then the payload: each lost chunk's bytes [lo, hi), in that order. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "journal.h"
#include "log.h"
#include "format/format.h"
#include "replacing.h"

#define HDR 4096
#define MAGIC "GRJOURNL"
#define MAX_SLOTS 64

struct gr_journal {
  struct gr_geom g;
  int n;
  struct gr_members *ms;
  uint8_t uuid[16];
  size_t slot_size;
  unsigned nslots;
  pthread_mutex_t lock[MAX_SLOTS];
  uint64_t seq;                         /* atomic */
};

static void
put32 (uint8_t *p, uint32_t v)
{
  p[0] = v; p[1] = v >> 8; p[2] = v >> 16; p[3] = v >> 24;
}

static void
put64 (uint8_t *p, uint64_t v)
{
  put32 (p, (uint32_t) v);
  put32 (p + 4, (uint32_t) (v >> 32));
}

static uint32_t
get32 (const uint8_t *p)
{
  return p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16
    | (uint32_t) p[3] << 24;
}

static uint64_t
get64 (const uint8_t *p)
{
  return get32 (p) | (uint64_t) get32 (p + 4) << 32;
}

struct gr_journal *
gr_journal_new (const struct gr_geom *g, struct gr_members *ms)
{
  struct gr_journal *j = calloc (1, sizeof *j);
  struct gr_sb sb;
  uint64_t area;
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
  /* Room for the lost data chunks of a stripe: at most min (m, k). */
  j->slot_size = HDR + (size_t) (g->m < g->k ? g->m : g->k) * g->chunk;
  area = g->data_offset > GR_JOURNAL_OFFSET
    ? g->data_offset - GR_JOURNAL_OFFSET : 0;
  j->nslots = area / j->slot_size > MAX_SLOTS ? MAX_SLOTS
    : (unsigned) (area / j->slot_size);
  for (i = 0; i < MAX_SLOTS; i++)
    pthread_mutex_init (&j->lock[i], NULL);
  return j;
}

void
gr_journal_free (struct gr_journal *j)
{
  unsigned i;

  if (j == NULL)
    return;
  for (i = 0; i < MAX_SLOTS; i++)
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
  return GR_JOURNAL_OFFSET + (uint64_t) q * j->slot_size;
}

static uint32_t
entry_crc (const uint8_t *e, size_t payload)
{
  return gr_crc32c (gr_crc32c (0, e, HDR - 4), e + HDR, payload);
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
  int lost[GR_MAX_MEMBERS], nlost = 0, nfailed = 0, copies, i;
  uint8_t *e;

  for (i = 0; i < j->n; i++)
    nfailed += failed[i];
  for (i = 0; i < g->k; i++)
    if (failed[gr_map_member (g, p->s0, i)])
      lost[nlost++] = i;
  len = HDR + (size_t) nlost * L;
  e = calloc (1, len);
  if (e == NULL) {
    nbdkit_error ("journal: out of memory");
    errno = ENOMEM;
    return -1;
  }
  memcpy (e, MAGIC, 8);
  memcpy (e + 8, j->uuid, 16);
  put64 (e + 24, __atomic_add_fetch (&j->seq, 1, __ATOMIC_RELAXED));
  put64 (e + 32, p->s0);
  put32 (e + 40, p->lo);
  put32 (e + 44, p->hi);
  put32 (e + 48, (uint32_t) nlost);
  put32 (e + 52, (uint32_t) (nlost * L));
  for (i = 0; i < nlost; i++) {
    e[56 + 2 * i] = (uint8_t) lost[i];
    e[57 + 2 * i] = (uint8_t) (lost[i] >> 8);
    memcpy (e + HDR + (size_t) i * L, gr_steps_at (b, p->blk[lost[i]]), L);
  }
  put32 (e + HDR - 4, entry_crc (e, nlost * L));

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
 * payload, to free) or NULL. */
static uint8_t *
read_entry (struct gr_journal *j, unsigned q, int i)
{
  const struct gr_geom *g = &j->g;
  struct gr_mio v = { .kind = GR_MIO_READ, .member = i,
                      .off = slot_off (j, q), .len = j->slot_size };
  uint8_t *e = malloc (j->slot_size);
  uint32_t lo, hi, nlost, plen;

  if (e == NULL)
    return NULL;
  v.buf = e;
  gr_members_io (j->ms, &v, 1, GR_MIO_REPORT);
  if (v.result != GR_MIO_DONE || memcmp (e, MAGIC, 8) != 0 ||
      memcmp (e + 8, j->uuid, 16) != 0)
    goto bad;
  lo = get32 (e + 40);
  hi = get32 (e + 44);
  nlost = get32 (e + 48);
  plen = get32 (e + 52);
  if (get64 (e + 32) >= g->stripes || get64 (e + 32) % j->nslots != q ||
      lo >= hi || hi > g->chunk || nlost > (uint32_t) g->k ||
      plen != nlost * (hi - lo) || HDR + (size_t) plen > j->slot_size ||
      get32 (e + HDR - 4) != entry_crc (e, plen))
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
              const uint8_t *e)
{
  const struct gr_geom *g = &j->g;
  uint64_t s = get64 (e + 32);
  uint32_t lo = get32 (e + 40), hi = get32 (e + 44), nlost = get32 (e + 48);
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
      if (e[56 + 2 * x] + (e[57 + 2 * x] << 8) == i) {
        memcpy (blk[i], e + HDR + x * L, L);
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

    /* The copies of the latest entry of the slot, on any live member. */
    for (i = 0; i < j->n; i++) {
      uint8_t *e;

      if (gr_members_failed (j->ms, i) || (e = read_entry (j, q, i)) == NULL)
        continue;
      if (best == NULL || get64 (e + 24) > get64 (best + 24)) {
        free (best);
        best = e;
      }
      else
        free (e);
    }
    if (best == NULL)
      continue;
    r = replay_entry (j, coding, best);
    if (r == -1) {
      nbdkit_error ("journal: replaying stripe %" PRIu64 " failed",
                    get64 (best + 32));
      free (best);
      return GR_REPLAY_FAILED;
    }
    if (r == 1) {
      gr_warn ("journal: stripe %" PRIu64 " cannot be replayed: a data "
               "chunk it did not journal is lost too", get64 (best + 32));
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
  static const uint8_t zero[HDR];
  struct gr_mio v[MAX_SLOTS];
  unsigned q;
  int i;

  for (i = 0; i < j->n; i++) {
    if (gr_members_failed (j->ms, i))
      continue;
    for (q = 0; q < j->nslots; q++)
      v[q] = (struct gr_mio) { .kind = GR_MIO_WRITE, .member = i,
                               .off = slot_off (j, q), .len = HDR,
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
