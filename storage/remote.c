/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - remote members through libnbd.  See storage-internal.h. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>

#include "storage-internal.h"

bool
gr_remote_built (void)
{
#ifdef GR_HAVE_LIBNBD
  return true;
#else
  return false;
#endif
}

#ifdef GR_HAVE_LIBNBD
#include <libnbd.h>

#define REMOTE_CONNS 4                  /* per member, with multi-conn */
#define MAX_PIECE ((uint64_t) 32 << 20) /* a read or write command */
#define MAX_ZERO ((uint64_t) 1 << 30)   /* a zero command */

struct conn {
  struct nbd_handle *h;         /* NULL: not connected */
  bool busy;                    /* held by a batch */
};

struct gr_remote {
  char *uri;
  unsigned timeout_ms, retries;
  bool can_flush, can_fua, can_zero;
  bool can_status;              /* answers base:allocation */
  uint64_t max_piece;
  pthread_mutex_t lock;         /* conn[].busy; leaf */
  pthread_cond_t freed;
  int nconn;
  struct conn conn[REMOTE_CONNS];
  int unresponsive;             /* atomic: an access timed out */
};

static uint64_t
now_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

/* A new connection to r->uri, ready, by deadline; NULL with *err and
 * why set. */
static struct nbd_handle *
connect_uri (const char *uri, uint64_t deadline, int *err, char *why,
             size_t whylen)
{
  struct nbd_handle *h = nbd_create ();

  if (h == NULL)
    goto fail;
  /* The operator wrote the URI on the command line: its tls-psk-file and
   * socket= parameters are to be used. */
  nbd_set_uri_allow_local_file (h, true);
  /* Holes (GR_DIO_HOLE) where the server tells them. */
  if (nbd_add_meta_context (h, LIBNBD_CONTEXT_BASE_ALLOCATION) == -1)
    goto fail;
  if (nbd_aio_connect_uri (h, uri) == -1)
    goto fail;
  while (nbd_aio_is_connecting (h) || nbd_aio_is_created (h)) {
    const uint64_t t = now_ms ();

    if (t >= deadline)
      break;
    if (nbd_poll (h, (int) (deadline - t < 1000 ? deadline - t : 1000))
        == -1)
      goto fail;
  }
  if (nbd_aio_is_ready (h))
    return h;
  if (nbd_aio_is_connecting (h) || nbd_aio_is_created (h)) {
    *err = ETIMEDOUT;
    snprintf (why, whylen, "no answer before the timeout");
    nbd_close (h);
    return NULL;
  }
 fail:
  *err = nbd_get_errno () ? nbd_get_errno () : ECONNREFUSED;
  snprintf (why, whylen, "%s", nbd_get_error () ? nbd_get_error ()
            : strerror (*err));
  if (h)
    nbd_close (h);
  return NULL;
}

enum gr_remote_open_outcome
gr_remote_open (const char *uri, bool read_only, unsigned timeout_ms,
                unsigned retries, struct gr_remote **out, uint64_t *size,
                int *err, char *why, size_t whylen)
{
  struct gr_remote *r = NULL;
  struct nbd_handle *h;
  int64_t sz, max;

  *out = NULL;
  h = connect_uri (uri, now_ms () + timeout_ms, err, why, whylen);
  if (h == NULL)
    return GR_REMOTE_CANNOT_OPEN;
  if ((sz = nbd_get_size (h)) < 0) {
    *err = nbd_get_errno () ? nbd_get_errno () : EIO;
    snprintf (why, whylen, "%s", nbd_get_error ());
  }
  else if (!read_only && nbd_is_read_only (h) == 1) {
    *err = EROFS;
    snprintf (why, whylen, "the export is read-only");
    nbd_close (h);
    return GR_REMOTE_READ_ONLY;
  }
  else if ((r = calloc (1, sizeof *r)) == NULL ||
           (r->uri = strdup (uri)) == NULL) {
    *err = errno;
    snprintf (why, whylen, "%s", strerror (errno));
    free (r);
    r = NULL;
  }
  if (r == NULL) {
    nbd_close (h);
    return GR_REMOTE_CANNOT_OPEN;
  }
  r->timeout_ms = timeout_ms;
  r->retries = retries;
  r->can_flush = nbd_can_flush (h) == 1;
  r->can_fua = nbd_can_fua (h) == 1;
  r->can_zero = nbd_can_zero (h) == 1;
  r->can_status = nbd_can_meta_context (h, LIBNBD_CONTEXT_BASE_ALLOCATION)
    == 1;
  max = nbd_get_block_size (h, LIBNBD_SIZE_MAXIMUM);
  r->max_piece = max > 0 && (uint64_t) max < MAX_PIECE ? (uint64_t) max
    : MAX_PIECE;
  r->nconn = nbd_can_multi_conn (h) == 1 ? REMOTE_CONNS : 1;
  r->conn[0].h = h;
  pthread_mutex_init (&r->lock, NULL);
  pthread_cond_init (&r->freed, NULL);
  *size = (uint64_t) sz;
  *out = r;
  return GR_REMOTE_OPENED;
}

void
gr_remote_close (struct gr_remote *r)
{
  if (r == NULL)
    return;
  for (int i = 0; i < r->nconn; i++)
    if (r->conn[i].h) {
      if (!r->unresponsive && nbd_aio_is_ready (r->conn[i].h))
        nbd_shutdown (r->conn[i].h, 0);
      nbd_close (r->conn[i].h);
    }
  pthread_mutex_destroy (&r->lock);
  pthread_cond_destroy (&r->freed);
  free (r->uri);
  free (r);
}

/* --- batches ------------------------------------------------------------- */

/* A remote member's part of the batch, on one connection. */
struct slot {
  struct gr_remote *r;
  int c;                        /* conn index held; -1: none */
  uint64_t deadline;            /* from when its commands went out */
  size_t pending;               /* commands sent, not yet answered */
  bool closing;                 /* failed: late callbacks ignored */
  bool timed_out;               /* no more tries */
  int conn_err;                 /* the connection could not be made */
};

/* One command: a whole access, or a piece of a large one. */
struct piece {
  struct gr_dio *v;
  struct slot *s;
  uint64_t off, len;
  char *buf;
  bool then_flush;              /* a DSYNC write on a server without FUA */
  bool data;                    /* GR_DIO_HOLE: not all of it a hole */
  bool done;
  int err;
};

struct gr_remote_batch {
  struct slot *s;
  size_t ns;
  struct piece *p;
  size_t np;
};

static struct nbd_handle *
slot_h (struct slot *s)
{
  return s->c >= 0 ? s->r->conn[s->c].h : NULL;
}

/* Close s's connection.  A TCP connection is reset, its unsent data
 * dropped: a write that timed out must not reach the server later from
 * our send buffer (say, when a network partition heals), where it could
 * land over what a rebuild wrote since. */
static void
slot_drop_conn (struct slot *s)
{
  struct conn *c;

  if (s->c < 0)
    return;
  c = &s->r->conn[s->c];
  if (c->h) {
    const int fd = nbd_aio_get_fd (c->h);

    if (fd >= 0)
      (void) setsockopt (fd, SOL_SOCKET, SO_LINGER,
                         &(struct linger) { .l_onoff = 1, .l_linger = 0 },
                         sizeof (struct linger));
    nbd_close (c->h);
    c->h = NULL;
  }
}

/* The member did not answer in time: every later access fails at once
 * (the members module fails it; a replacement is a new connection). */
static void
slot_timed_out (struct slot *s)
{
  s->timed_out = true;
  __atomic_store_n (&s->r->unresponsive, 1, __ATOMIC_RELEASE);
}

static int
piece_done (void *user_data, int *error)
{
  struct piece *p = user_data;

  if (!p->s->closing) {
    p->err = *error;
    p->done = true;
    p->s->pending--;
  }
  return 1;
}

/* Block status of a GR_DIO_HOLE piece: a hole only where the server
 * says unallocated and reading as zeros for all of it. */
static int
piece_extents (void *user_data, const char *context, uint64_t offset,
               uint32_t *entries, size_t nr_entries, int *error)
{
  const uint32_t hole = LIBNBD_STATE_HOLE | LIBNBD_STATE_ZERO;
  struct piece *p = user_data;
  uint64_t o = offset;

  if (p->s->closing || strcmp (context, LIBNBD_CONTEXT_BASE_ALLOCATION))
    return 0;
  for (size_t i = 0; i + 1 < nr_entries && o < p->off + p->len; i += 2) {
    p->data |= (entries[i + 1] & hole) != hole;
    o += entries[i];
  }
  if (offset > p->off || o < p->off + p->len)
    p->data = true;             /* not all of it described */
  return 0;
}

/* Send piece p on its slot's connection. */
static void
send_piece (struct piece *p)
{
  struct nbd_handle *h = slot_h (p->s);
  const struct gr_remote *r = p->s->r;
  nbd_completion_callback cb = { .callback = piece_done, .user_data = p };
  int64_t cookie = 0;

  p->done = false;
  p->err = 0;
  p->data = false;
  if (p->len == 0 && p->v->kind != GR_DIO_SYNC)
    goto done;
  if (h == NULL) {
    p->err = p->s->conn_err ? p->s->conn_err : ENOTCONN;
    goto done;
  }
  switch (p->v->kind) {
  case GR_DIO_READ:
    cookie = nbd_aio_pread (h, p->buf, p->len, p->off, cb, 0);
    break;
  case GR_DIO_WRITE:
  case GR_DIO_WRITE_DSYNC:
    cookie = nbd_aio_pwrite (h, p->buf, p->len, p->off, cb,
                             p->v->kind == GR_DIO_WRITE_DSYNC && r->can_fua
                             ? LIBNBD_CMD_FLAG_FUA : 0);
    p->then_flush = p->v->kind == GR_DIO_WRITE_DSYNC && !r->can_fua &&
      r->can_flush;
    break;
  case GR_DIO_PUNCH:
  case GR_DIO_ZERO:
    if (!r->can_zero) {
      p->err = EOPNOTSUPP;
      goto done;
    }
    cookie = nbd_aio_zero (h, p->len, p->off, cb,
                           p->v->kind == GR_DIO_ZERO
                           ? LIBNBD_CMD_FLAG_NO_HOLE : 0);
    break;
  case GR_DIO_SYNC:
    if (!r->can_flush)
      goto done;                /* nothing a flush could add */
    cookie = nbd_aio_flush (h, cb, 0);
    break;
  case GR_DIO_HOLE:
    p->data = !r->can_status;   /* not told: data */
    if (p->data)
      goto done;
    cookie = nbd_aio_block_status (h, p->len, p->off,
                                   (nbd_extent_callback) {
                                     .callback = piece_extents,
                                     .user_data = p }, cb, 0);
    break;
  }
  if (cookie != -1) {
    p->s->pending++;
    return;
  }
  p->err = nbd_get_errno () ? nbd_get_errno () : EIO;
 done:
  p->done = true;
}

/* The commands of s still out fail with err; their callbacks, if libnbd
 * still calls them, are ignored. */
static void
fail_pending (struct gr_remote_batch *b, struct slot *s, int err)
{
  s->closing = true;
  s->pending = 0;
  for (size_t i = 0; i < b->np; i++)
    if (b->p[i].s == s && !b->p[i].done) {
      b->p[i].err = err;
      b->p[i].done = true;
    }
}

/* Poll every slot with commands out until all are answered, or until
 * one has sent nothing for the timeout (that connection is then
 * closed).  extra: a piece outside b->p (a flush), failed like the
 * others. */
static void
run (struct gr_remote_batch *b, struct piece *extra)
{
  struct pollfd *pfd = calloc (b->ns, sizeof *pfd);
  size_t *which = calloc (b->ns, sizeof *which);

  for (;;) {
    uint64_t t = now_ms (), wait = 1000;
    size_t nfd = 0, i;
    int r;

    for (i = 0; i < b->ns; i++) {
      struct slot *s = &b->s[i];
      struct nbd_handle *h = slot_h (s);
      unsigned dir;

      if (s->pending == 0 || h == NULL)
        continue;
      if (nbd_aio_is_dead (h) || nbd_aio_is_closed (h)) {
        /* Its commands were failed by their callbacks; any left over
         * fail the same way. */
        fail_pending (b, s, ENOTCONN);
        continue;
      }
      if (pfd == NULL || which == NULL) {
        fail_pending (b, s, ENOMEM);
        slot_drop_conn (s);
        continue;
      }
      wait = s->deadline <= t ? 0 : s->deadline - t < wait
        ? s->deadline - t : wait;
      dir = nbd_aio_get_direction (h);
      pfd[nfd] = (struct pollfd) {
        .fd = nbd_aio_get_fd (h),
        .events = (dir & LIBNBD_AIO_DIRECTION_READ ? POLLIN : 0) |
                  (dir & LIBNBD_AIO_DIRECTION_WRITE ? POLLOUT : 0) };
      which[nfd++] = i;
    }
    if (nfd == 0)
      break;
    r = poll (pfd, nfd, (int) wait);
    t = now_ms ();
    for (i = 0; i < nfd; i++) {
      struct slot *s = &b->s[which[i]];
      struct nbd_handle *h = slot_h (s);

      if (r > 0 && pfd[i].revents) {
        /* Progress (or a dead connection, which fails its commands
         * through their callbacks): its clock starts again. */
        s->deadline = t + s->r->timeout_ms;
        if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR))
          nbd_aio_notify_read (h);
        if ((pfd[i].revents & POLLOUT) && !nbd_aio_is_dead (h))
          nbd_aio_notify_write (h);
      }
      else if (t >= s->deadline) {
        /* Closed with commands out: they can never complete into the
         * caller's buffers after this. */
        slot_timed_out (s);
        fail_pending (b, s, ETIMEDOUT);
        slot_drop_conn (s);
      }
    }
  }
  if (extra && !extra->done) {
    extra->err = ETIMEDOUT;
    extra->done = true;
  }
  free (pfd);
  free (which);
}

/* Take a free connection of s->r (waiting for one), connected, and
 * start s's clock. */
static void
slot_take (struct slot *s)
{
  struct gr_remote *r = s->r;
  char why[256];
  int i;

  if (__atomic_load_n (&r->unresponsive, __ATOMIC_ACQUIRE)) {
    s->conn_err = ETIMEDOUT;
    s->timed_out = true;
    return;
  }
  pthread_mutex_lock (&r->lock);
  for (;;) {
    int pick = -1;

    for (i = 0; i < r->nconn; i++)
      if (!r->conn[i].busy && (pick < 0 || r->conn[i].h))
        pick = i;
    if (pick >= 0) {
      r->conn[pick].busy = true;
      s->c = pick;
      break;
    }
    pthread_cond_wait (&r->freed, &r->lock);
  }
  pthread_mutex_unlock (&r->lock);
  s->deadline = now_ms () + r->timeout_ms;
  if (__atomic_load_n (&r->unresponsive, __ATOMIC_ACQUIRE)) {
    /* It timed out while we waited. */
    s->conn_err = ETIMEDOUT;
    s->timed_out = true;
    slot_drop_conn (s);
    return;
  }
  if (slot_h (s) && !nbd_aio_is_ready (slot_h (s)))
    slot_drop_conn (s);
  if (slot_h (s) == NULL) {
    r->conn[s->c].h = connect_uri (r->uri, s->deadline, &s->conn_err, why,
                                   sizeof why);
    if (s->conn_err == ETIMEDOUT)
      slot_timed_out (s);
  }
}

static void
slot_give (struct slot *s)
{
  if (s->c < 0)
    return;
  pthread_mutex_lock (&s->r->lock);
  s->r->conn[s->c].busy = false;
  pthread_cond_broadcast (&s->r->freed);
  pthread_mutex_unlock (&s->r->lock);
}

/* A command's largest piece: reads and writes as the server says, the
 * others up to MAX_ZERO (a flush is never cut). */
static uint64_t
piece_max (const struct gr_dio *v)
{
  return v->kind == GR_DIO_SYNC ? UINT64_MAX : v->kind == GR_DIO_READ ||
    v->kind == GR_DIO_WRITE || v->kind == GR_DIO_WRITE_DSYNC
    ? v->disk->r->max_piece : MAX_ZERO;
}

struct gr_remote_batch *
gr_remote_start (struct gr_dio **v, size_t n)
{
  struct gr_remote_batch *b = calloc (1, sizeof *b);
  size_t i, j, np = 0;

  for (i = 0; i < n; i++) {
    v[i]->res = 0;
    v[i]->hole = v[i]->kind == GR_DIO_HOLE;
    np += v[i]->len == 0 || v[i]->kind == GR_DIO_SYNC ? 1
      : (v[i]->len + piece_max (v[i]) - 1) / piece_max (v[i]);
  }
  if (b == NULL || (b->s = calloc (n, sizeof *b->s)) == NULL ||
      (b->p = calloc (np, sizeof *b->p)) == NULL) {
    for (i = 0; i < n; i++)
      v[i]->res = -ENOMEM;
    if (b)
      free (b->s);
    free (b);
    return NULL;
  }
  /* The slots: one per remote member, in address order. */
  for (i = 0; i < n; i++) {
    const uintptr_t r = (uintptr_t) v[i]->disk->r;

    for (j = 0; j < b->ns && (uintptr_t) b->s[j].r < r; j++)
      ;
    if (j == b->ns || (uintptr_t) b->s[j].r != r) {
      memmove (&b->s[j + 1], &b->s[j], (b->ns++ - j) * sizeof *b->s);
      b->s[j] = (struct slot) { .r = v[i]->disk->r, .c = -1 };
    }
  }
  /* The pieces. */
  for (i = 0; i < n; i++) {
    const uint64_t max = piece_max (v[i]);
    struct slot *s = b->s;
    uint64_t off = 0;

    while (s->r != v[i]->disk->r)
      s++;
    do {
      const uint64_t len = v[i]->len - off < max ? v[i]->len - off : max;

      b->p[b->np++] = (struct piece) {
        .v = v[i], .s = s, .off = v[i]->off + off, .len = len,
        .buf = v[i]->buf ? (char *) v[i]->buf + off : NULL };
      off += len;
    } while (off < v[i]->len && v[i]->kind != GR_DIO_SYNC);
  }
  /* Each member's connection taken and its pieces sent, member after
   * member, so that the first are in flight while the next wait. */
  for (j = 0; j < b->ns; j++) {
    slot_take (&b->s[j]);
    for (i = 0; i < b->np; i++)
      if (b->p[i].s == &b->s[j])
        send_piece (&b->p[i]);
  }
  return b;
}

/* Is err what a lost connection gives (worth a new connection)? */
static bool
connection_error (int err)
{
  return err == ENOTCONN || err == ECONNRESET || err == EPIPE ||
    err == ESHUTDOWN || err == ECONNREFUSED || err == ECONNABORTED ||
    err == EHOSTUNREACH || err == ENETUNREACH || err == ENOENT;
}

/* DSYNC writes on a server without FUA: a flush after them. */
static void
flush_after (struct gr_remote_batch *b)
{
  for (size_t j = 0; j < b->ns; j++) {
    struct gr_dio sync = { .kind = GR_DIO_SYNC };
    struct piece fl = { .v = &sync, .s = &b->s[j] };
    bool need = false;
    size_t i;

    for (i = 0; i < b->np; i++)
      if (b->p[i].s == &b->s[j] && b->p[i].then_flush && !b->p[i].err)
        need = true;
    if (!need)
      continue;
    send_piece (&fl);
    run (b, &fl);
    for (i = 0; i < b->np; i++)
      if (b->p[i].s == &b->s[j] && b->p[i].then_flush) {
        b->p[i].then_flush = false;
        if (!b->p[i].err)
          b->p[i].err = fl.err;
      }
  }
}

/* Make lost connections again and send their failed commands again
 * (after a pause that doubles with each attempt).  false if none. */
static bool
retry (struct gr_remote_batch *b, unsigned attempt)
{
  bool again = false;
  size_t i, j;

  for (j = 0; j < b->ns; j++) {
    struct slot *s = &b->s[j];
    struct nbd_handle *h = slot_h (s);
    uint64_t t = now_ms (), pause = (uint64_t) 100 << attempt;
    char why[256];

    if (s->timed_out || attempt >= s->r->retries || t >= s->deadline ||
        (h && !nbd_aio_is_dead (h) && !nbd_aio_is_closed (h)))
      continue;
    for (i = 0; i < b->np; i++)
      if (b->p[i].s == s && b->p[i].err && connection_error (b->p[i].err))
        break;
    if (i == b->np)
      continue;
    if (pause > s->deadline - t)
      pause = s->deadline - t;
    nanosleep (&(struct timespec) { .tv_sec = (time_t) (pause / 1000),
                 .tv_nsec = (long) (pause % 1000) * 1000000 }, NULL);
    slot_drop_conn (s);
    s->closing = false;
    if (s->c < 0)
      continue;
    s->r->conn[s->c].h = connect_uri (s->r->uri, s->deadline, &s->conn_err,
                                      why, sizeof why);
    if (s->conn_err == ETIMEDOUT)
      slot_timed_out (s);
    for (i = 0; i < b->np; i++)
      if (b->p[i].s == s && b->p[i].err && connection_error (b->p[i].err))
        send_piece (&b->p[i]);
    again = true;
  }
  return again;
}

void
gr_remote_finish (struct gr_remote_batch *b)
{
  size_t i, j;

  if (b == NULL)
    return;
  for (unsigned attempt = 0;; attempt++) {
    run (b, NULL);
    flush_after (b);
    if (!retry (b, attempt))
      break;
  }
  for (i = 0; i < b->np; i++) {
    if (b->p[i].err && b->p[i].v->res == 0)
      b->p[i].v->res = -b->p[i].err;
    if (b->p[i].data)
      b->p[i].v->hole = false;
  }
  /* A connection left broken is made again by the next batch. */
  for (j = 0; j < b->ns; j++)
    slot_give (&b->s[j]);
  free (b->s);
  free (b->p);
  free (b);
}

#else /* !GR_HAVE_LIBNBD */

enum gr_remote_open_outcome
gr_remote_open (const char *uri, bool read_only, unsigned timeout_ms,
                unsigned retries, struct gr_remote **out, uint64_t *size,
                int *err, char *why, size_t whylen)
{
  *out = NULL;
  *err = ENOTSUP;
  snprintf (why, whylen, "this gpuraid was built without libnbd");
  return GR_REMOTE_NO_NBD;
}

void
gr_remote_close (struct gr_remote *r)
{
}

struct gr_remote_batch *
gr_remote_start (struct gr_dio **v, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    v[i]->res = -ENOTSUP;
    v[i]->hole = false;
  }
  return NULL;
}

void
gr_remote_finish (struct gr_remote_batch *b)
{
}

#endif /* !GR_HAVE_LIBNBD */
