/* gpuraid - array assembly, creation, superblock I/O and failure marking.
 *
 * Locking: sb_lock protects gr_a.sb and the failed/nfailed state of the
 * members.  It is a leaf lock: nothing else is taken while it is held.
 * I/O threads read mem[i].failed and nfailed atomically without it. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "gpuraid-internal.h"

/* What we learnt about one member= path before assembly. */
struct probe {
  const char *path;
  int pos;                      /* command-line position */
  int fd;                       /* -1: could not be opened */
  int open_errno;
  struct stat st;
  uint64_t size;
  int sb_status;                /* gr_sb_decode result */
  struct gr_sb sb;
};

static struct probe probes[GR_MAX_MEMBERS];
static int nprobes;

/* Read or write exactly len bytes at off, retrying short transfers and
 * EINTR.  0, or -errno (-ENODATA: read past the end; -ENOSPC: a write
 * that made no progress). */
int
gr_pread_full (int fd, void *buf, size_t len, uint64_t off)
{
  uint8_t *p = buf;

  while (len > 0) {
    ssize_t r = pread (fd, p, len, (off_t) off);
    if (r == -1) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    if (r == 0)
      return -ENODATA;          /* short read: past the end */
    p += r; len -= r; off += r;
  }
  return 0;
}

int
gr_pwrite_full (int fd, const void *buf, size_t len, uint64_t off)
{
  const uint8_t *p = buf;

  while (len > 0) {
    ssize_t r = pwrite (fd, p, len, (off_t) off);
    if (r == -1) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    if (r == 0)
      return -ENOSPC;
    p += r; len -= r; off += r;
  }
  return 0;
}

/* Open one member= path and read its superblock.  Returns -1 only for
 * errors that stop nbdkit (not a file or device); a missing or
 * unopenable path is recorded in p->fd = -1. */
static int
probe_member (struct probe *p)
{
  uint8_t *buf;
  int r;

  p->fd = open (p->path, O_RDWR | O_CLOEXEC);
  if (p->fd == -1) {
    p->open_errno = errno;
    return 0;
  }
  if (fstat (p->fd, &p->st) == -1) {
    nbdkit_error ("member %d (%s): fstat: %m", p->pos, p->path);
    return -1;
  }
  if (S_ISBLK (p->st.st_mode)) {
    if (ioctl (p->fd, BLKGETSIZE64, &p->size) == -1) {
      nbdkit_error ("member %d (%s): BLKGETSIZE64: %m", p->pos, p->path);
      return -1;
    }
  }
  else if (S_ISREG (p->st.st_mode))
    p->size = (uint64_t) p->st.st_size;
  else {
    nbdkit_error ("member %d (%s): not a regular file or block device",
                  p->pos, p->path);
    return -1;
  }

  buf = malloc (GR_SB_SIZE);
  if (buf == NULL) {
    nbdkit_error ("malloc: %m");
    return -1;
  }
  if (p->size < GR_SB_SIZE)
    p->sb_status = -ENOENT;
  else {
    r = gr_pread_full (p->fd, buf, GR_SB_SIZE, 0);
    if (r < 0) {
      free (buf);
      /* An unreadable member is treated like a missing one. */
      p->open_errno = -r;
      close (p->fd);
      p->fd = -1;
      return 0;
    }
    p->sb_status = gr_sb_decode (buf, &p->sb);
  }
  free (buf);
  return 0;
}

/* Zero [off, off+len) of a member: punch a hole, or BLKZEROOUT on a
 * block device, or write zeros. */
static int
zero_area (struct probe *p, uint64_t off, uint64_t len)
{
  static uint8_t zeros[1024 * 1024];
  int r;

  if (len == 0)
    return 0;
  if (fallocate (p->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                 (off_t) off, (off_t) len) == 0)
    return 0;
  if (S_ISBLK (p->st.st_mode)) {
    uint64_t range[2] = { off, len };
    if (ioctl (p->fd, BLKZEROOUT, range) == 0)
      return 0;
  }
  nbdkit_debug ("gpuraid: member %d (%s): cannot punch a hole (%m), "
                "writing zeros", p->pos, p->path);
  while (len > 0) {
    size_t n = len < sizeof zeros ? len : sizeof zeros;
    r = gr_pwrite_full (p->fd, zeros, n, off);
    if (r < 0) {
      nbdkit_error ("member %d (%s): zeroing at offset %" PRIu64 ": %s",
                    p->pos, p->path, off, strerror (-r));
      return -1;
    }
    off += n;
    len -= n;
  }
  return 0;
}

/* Log a member going from healthy to failed and count it.  sb_lock held
 * (or still single-threaded). */
static void
fail_locked (int i, const char *why, bool at_runtime)
{
  struct gr_member *mb = &gr_a.mem[i];
  int left, tolerated;

  if (mb->failed)
    return;
  snprintf (mb->why, sizeof mb->why, "%s", why);
  __atomic_store_n (&mb->failed, 1, __ATOMIC_RELEASE);
  __atomic_add_fetch (&gr_a.nfailed, 1, __ATOMIC_ACQ_REL);
  gr_sb_failed_set (&gr_a.sb, i);
  if (!at_runtime)
    return;
  left = gr_a.n - gr_a.nfailed;
  tolerated = gr_a.geom.m - gr_a.nfailed;
  if (tolerated >= 0)
    nbdkit_error ("member %d (%s) failed: %s; continuing degraded with "
                  "%d of %d members, %d more failures tolerated",
                  i, mb->path ? mb->path : "missing", why, left, gr_a.n,
                  tolerated);
  else
    nbdkit_error ("member %d (%s) failed: %s; only %d of %d members left, "
                  "%d needed: the array has failed, requests now fail "
                  "with EIO", i, mb->path ? mb->path : "missing", why, left,
                  gr_a.n, gr_a.geom.k);
}

/* Write the in-memory superblock, event + 1, to every live member and
 * fdatasync it.  A member that cannot be written fails, and the write is
 * redone with a new event so that it is stale.  sb_lock held.  Returns
 * 0, or -1 if the array has failed (more than m members). */
static int
write_sbs_locked (void)
{
  uint8_t *buf;
  bool redo;
  int i, r;

  buf = malloc (GR_SB_SIZE);
  if (buf == NULL) {
    nbdkit_error ("malloc: %m");
    return -1;
  }
  do {
    redo = false;
    gr_a.sb.event++;
    for (i = 0; i < gr_a.n; i++) {
      struct gr_sb sb = gr_a.sb;
      char why[128];

      if (gr_a.mem[i].failed)
        continue;
      sb.index = i;
      gr_sb_encode (&sb, buf);
      r = gr_pwrite_full (gr_a.mem[i].fd, buf, GR_SB_SIZE, 0);
      if (r == 0 && fdatasync (gr_a.mem[i].fd) == -1)
        r = -errno;
      if (r < 0) {
        snprintf (why, sizeof why, "superblock write: %s", strerror (-r));
        fail_locked (i, why, true);
        redo = true;
        break;
      }
    }
  } while (redo && gr_a.nfailed <= gr_a.geom.m);
  free (buf);
  gr_verbose ("superblocks written: event %" PRIu64 " flags 0x%x",
              gr_a.sb.event, gr_a.sb.flags);
  return gr_a.nfailed > gr_a.geom.m ? -1 : 0;
}

int
gr_array_too_degraded (void)
{
  return __atomic_load_n (&gr_a.nfailed, __ATOMIC_ACQUIRE) > gr_a.geom.m;
}

int
gr_array_mark_failed (int member, const char *fmt, ...)
{
  char why[128];
  va_list ap;
  int r = 0;

  va_start (ap, fmt);
  vsnprintf (why, sizeof why, fmt, ap);
  va_end (ap);

  pthread_mutex_lock (&gr_a.sb_lock);
  if (!gr_a.mem[member].failed) {
    fail_locked (member, why, true);
    if (gr_a.nfailed <= gr_a.geom.m)
      r = write_sbs_locked ();
  }
  if (gr_a.nfailed > gr_a.geom.m)
    r = -1;
  pthread_mutex_unlock (&gr_a.sb_lock);
  return r;
}

/* Before the first write: persist the dirty flag and the failed bitmap
 * (which also records members missing at start), so that a stale member
 * coming back later is never trusted. */
int
gr_array_begin_write (void)
{
  int r = 0;

  if (__atomic_load_n (&gr_a.dirty_on_disk, __ATOMIC_ACQUIRE))
    return 0;
  pthread_mutex_lock (&gr_a.sb_lock);
  if (!gr_a.dirty_on_disk) {
    gr_a.sb.flags |= GR_SB_FLAG_DIRTY;
    r = write_sbs_locked ();
    if (r == 0)
      __atomic_store_n (&gr_a.dirty_on_disk, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock (&gr_a.sb_lock);
  if (r == -1) {
    nbdkit_error ("cannot mark the array dirty: too many failed members");
    errno = EIO;
  }
  return r;
}

int
gr_array_sync_member (int i)
{
  if (gr_member_failed (i))
    return 0;
  if (fdatasync (gr_a.mem[i].fd) == -1) {
    int e = errno;
    if (gr_array_mark_failed (i, "fdatasync: %s", strerror (e)) == -1) {
      errno = EIO;
      return -1;
    }
  }
  return 0;
}

static bool
same_geometry (const struct gr_sb *a, const struct gr_sb *b)
{
  return a->k == b->k && a->m == b->m && a->code == b->code &&
    a->chunk == b->chunk && a->data_offset == b->data_offset &&
    a->data_size == b->data_size;
}

static int
alloc_slots (unsigned n)
{
  unsigned i;

  gr_a.n = n;
  if (n == 0 || n > GR_MAX_MEMBERS) {
    nbdkit_error ("bad member count %u", n);
    return -1;
  }
  gr_a.mem = calloc (n, sizeof *gr_a.mem);
  if (gr_a.mem == NULL) {
    nbdkit_error ("calloc: %m");
    return -1;
  }
  for (i = 0; i < n; i++) {
    gr_a.mem[i].fd = -1;
    gr_a.mem[i].index = i;
  }
  return 0;
}

static void
log_geometry (const char *what)
{
  char uuid[37];

  gr_sb_uuid_str (gr_a.sb.uuid, uuid);
  nbdkit_debug ("gpuraid: %s array %s: k=%d m=%d code=%s chunk=%" PRIu32
                " stripes=%" PRIu64 " data_offset=%" PRIu64
                " size=%" PRIu64 " event=%" PRIu64,
                what, uuid, gr_a.geom.k, gr_a.geom.m,
                gr_a.sb.code == GR_CODE_CRS ? "crs" : "rs", gr_a.geom.chunk,
                gr_a.geom.stripes, gr_a.geom.data_offset,
                gr_map_size (&gr_a.geom), gr_a.sb.event);
}

static int
create_array (void)
{
  int n = nprobes, m = gr_cfg.m, k = n - m, i;
  uint32_t chunk = gr_cfg.chunk ? gr_cfg.chunk : GR_DEFAULT_CHUNK;
  uint64_t data_offset = chunk > GR_MIN_DATA_OFFSET ? chunk
    : GR_MIN_DATA_OFFSET;
  uint64_t size, stripes;
  struct gr_sb *sb = &gr_a.sb;
  char uuid[37];

  if (n > GR_MAX_MEMBERS) {
    nbdkit_error ("k+m = %d: at most %d members", n, GR_MAX_MEMBERS);
    return -1;
  }
  for (i = 0; i < n; i++) {
    struct probe *p = &probes[i];
    if (p->fd == -1) {
      nbdkit_error ("member %d (%s): cannot open: %s", i, p->path,
                    strerror (p->open_errno));
      return -1;
    }
    if (p->sb_status != -ENOENT && !gr_cfg.force) {
      if (p->sb_status == 0) {
        gr_sb_uuid_str (p->sb.uuid, uuid);
        nbdkit_error ("member %d (%s) already holds a gpuraid superblock "
                      "(array %s, member %" PRIu32 "); use force=true to "
                      "overwrite it", i, p->path, uuid, p->sb.index);
      }
      else
        nbdkit_error ("member %d (%s) holds a gpuraid superblock (%s); use "
                      "force=true to overwrite it", i, p->path,
                      gr_sb_strerror (p->sb_status));
      return -1;
    }
  }
  size = probes[0].size;
  for (i = 1; i < n; i++)
    if (probes[i].size != size) {
      nbdkit_error ("member %d (%s) is %" PRIu64 " bytes but member 0 (%s) "
                    "is %" PRIu64 ": members must be the same size", i,
                    probes[i].path, probes[i].size, probes[0].path, size);
      return -1;
    }
  if (size < data_offset + chunk) {
    nbdkit_error ("members are too small (%" PRIu64 " bytes): at least %"
                  PRIu64 " bytes needed for chunk=%" PRIu32, size,
                  data_offset + chunk, chunk);
    return -1;
  }
  stripes = (size - data_offset) / chunk;

  memset (sb, 0, sizeof *sb);
  sb->version = GR_SB_VERSION;
  sb->k = k;
  sb->m = m;
  sb->code = gr_cfg.code ? gr_cfg.code : GR_CODE_RS;
  sb->chunk = chunk;
  sb->data_offset = data_offset;
  sb->data_size = stripes * chunk;
  sb->event = 0;
  sb->ctime = (uint64_t) time (NULL);
  gr_a.geom.k = k;
  gr_a.geom.m = m;
  gr_a.geom.chunk = chunk;
  gr_a.geom.data_offset = data_offset;
  gr_a.geom.stripes = stripes;
  if (gr_map_check (&gr_a.geom) != 0) {
    nbdkit_error ("invalid geometry k=%d m=%d chunk=%" PRIu32, k, m, chunk);
    return -1;
  }
  /* Everything that can be refused is checked before the first write. */
  if (gr_setup_coders (k, m, sb->code) == -1)
    return -1;
  if (getrandom (sb->uuid, sizeof sb->uuid, 0) != sizeof sb->uuid) {
    nbdkit_error ("getrandom: %m");
    return -1;
  }
  /* Zero the metadata and data areas so that data and parity start
   * consistent (all zero), then write the superblocks last. */
  for (i = 0; i < n; i++) {
    if (zero_area (&probes[i], 0, data_offset + sb->data_size) == -1)
      return -1;
    if (fdatasync (probes[i].fd) == -1) {
      nbdkit_error ("member %d (%s): fdatasync: %m", i, probes[i].path);
      return -1;
    }
  }
  if (alloc_slots (n) == -1)
    return -1;
  for (i = 0; i < n; i++) {
    gr_a.mem[i].path = probes[i].path;
    gr_a.mem[i].fd = probes[i].fd;
    probes[i].fd = -1;
  }
  if (write_sbs_locked () == -1 || gr_a.nfailed > 0) {
    nbdkit_error ("cannot write the new superblocks");
    return -1;
  }
  log_geometry ("created");
  return 0;
}

static int
assemble_array (void)
{
  struct probe *ref = NULL, *auth = NULL;
  struct probe *slot[GR_MAX_MEMBERS] = { NULL };
  char uuid[37], uuid2[37];
  bool reordered = false, resync;
  int i, n;

  for (i = 0; i < nprobes; i++) {
    struct probe *p = &probes[i];

    if (p->fd == -1)
      continue;
    if (p->sb_status == -ENOENT) {
      nbdkit_error ("member %d (%s): no gpuraid superblock; use create=true "
                    "to create a new array", i, p->path);
      return -1;
    }
    if (p->sb_status != 0) {
      nbdkit_error ("member %d (%s): %s; refusing to use it (remove it to "
                    "start degraded)", i, p->path,
                    gr_sb_strerror (p->sb_status));
      return -1;
    }
    if (ref == NULL) {
      ref = p;
      continue;
    }
    if (memcmp (p->sb.uuid, ref->sb.uuid, 16) != 0) {
      gr_sb_uuid_str (p->sb.uuid, uuid);
      gr_sb_uuid_str (ref->sb.uuid, uuid2);
      nbdkit_error ("member %d (%s) belongs to another array (%s, not %s)",
                    i, p->path, uuid, uuid2);
      return -1;
    }
    if (!same_geometry (&p->sb, &ref->sb)) {
      nbdkit_error ("member %d (%s): geometry differs from member %d (%s)",
                    i, p->path, ref->pos, ref->path);
      return -1;
    }
  }
  if (ref == NULL) {
    for (i = 0; i < nprobes; i++)
      nbdkit_error ("member %d (%s): cannot open: %s", i, probes[i].path,
                    strerror (probes[i].open_errno));
    nbdkit_error ("no member could be opened");
    return -1;
  }

  /* Command-line geometry must match the superblocks. */
  if (gr_cfg.m >= 0 && (uint32_t) gr_cfg.m != ref->sb.m) {
    nbdkit_error ("m=%d does not match the array (m=%" PRIu32 ")",
                  gr_cfg.m, ref->sb.m);
    return -1;
  }
  if (gr_cfg.chunk && gr_cfg.chunk != ref->sb.chunk) {
    nbdkit_error ("chunk=%" PRIu32 " does not match the array (chunk=%"
                  PRIu32 ")", gr_cfg.chunk, ref->sb.chunk);
    return -1;
  }
  if (gr_cfg.code && (uint32_t) gr_cfg.code != ref->sb.code) {
    nbdkit_error ("code=%s does not match the array (code=%s)",
                  gr_cfg.code == GR_CODE_CRS ? "crs" : "rs",
                  ref->sb.code == GR_CODE_CRS ? "crs" : "rs");
    return -1;
  }

  n = ref->sb.k + ref->sb.m;
  for (i = 0; i < nprobes; i++) {
    struct probe *p = &probes[i];

    if (p->fd == -1)
      continue;
    if (slot[p->sb.index]) {
      nbdkit_error ("member %d (%s) and member %d (%s) both claim member "
                    "index %" PRIu32, slot[p->sb.index]->pos,
                    slot[p->sb.index]->path, i, p->path, p->sb.index);
      return -1;
    }
    if (p->size < p->sb.data_offset + p->sb.data_size) {
      nbdkit_error ("member %d (%s) is too small (%" PRIu64 " bytes) for "
                    "its superblock's data area (%" PRIu64 " bytes)", i,
                    p->path, p->size, p->sb.data_offset + p->sb.data_size);
      return -1;
    }
    slot[p->sb.index] = p;
    if (p->sb.index != (uint32_t) i)
      reordered = true;
    if (auth == NULL || p->sb.event > auth->sb.event)
      auth = p;
  }

  gr_a.sb = auth->sb;
  gr_a.geom.k = auth->sb.k;
  gr_a.geom.m = auth->sb.m;
  gr_a.geom.chunk = auth->sb.chunk;
  gr_a.geom.data_offset = auth->sb.data_offset;
  gr_a.geom.stripes = auth->sb.data_size / auth->sb.chunk;
  if (gr_map_check (&gr_a.geom) != 0) {
    nbdkit_error ("member %d (%s): invalid geometry", auth->pos, auth->path);
    return -1;
  }
  if (alloc_slots (n) == -1)
    return -1;
  if (reordered)
    nbdkit_debug ("gpuraid: members placed by their superblock index, not "
                  "by command-line order");

  for (i = 0; i < n; i++) {
    struct probe *p = slot[i];
    struct gr_member *mb = &gr_a.mem[i];
    char why[256];

    if (p == NULL) {
      /* Mark it failed in the in-memory superblock; persisted before the
       * first write (gr_array_begin_write).  At creation the command-line
       * order is the index, so an unopenable path at position i is
       * probably member i. */
      if (i < nprobes && probes[i].fd == -1) {
        snprintf (why, sizeof why, "missing; probably member=%s, which "
                  "cannot be opened: %s", probes[i].path,
                  strerror (probes[i].open_errno));
        mb->path = probes[i].path;
      }
      else
        snprintf (why, sizeof why, "missing");
      fail_locked (i, why, false);
      nbdkit_error ("warning: member %d is %s", i, why);
      continue;
    }
    mb->path = p->path;
    if (p->sb.event < auth->sb.event || gr_sb_failed_test (&auth->sb, i)) {
      if (gr_sb_failed_test (&auth->sb, i))
        snprintf (why, sizeof why, "marked failed in the array "
                  "(event %" PRIu64 ")", auth->sb.event);
      else
        snprintf (why, sizeof why, "stale (event %" PRIu64 " < %" PRIu64
                  ")", p->sb.event, auth->sb.event);
      fail_locked (i, why, false);
      nbdkit_error ("warning: member %d (%s) is %s: not used", i, p->path,
                    why);
      close (p->fd);
      p->fd = -1;
      continue;
    }
    mb->fd = p->fd;
    p->fd = -1;
  }
  for (i = 0; i < nprobes; i++)
    if (probes[i].fd == -1 && (i >= n || gr_a.mem[i].path != probes[i].path))
      nbdkit_error ("warning: member=%s cannot be opened (%s); treating it "
                    "as missing", probes[i].path,
                    strerror (probes[i].open_errno));
  if (gr_a.nfailed > gr_a.geom.m) {
    nbdkit_error ("too many members missing or failed: %d of %d, the array "
                  "tolerates %d", gr_a.nfailed, n, gr_a.geom.m);
    return -1;
  }
  if (gr_a.nfailed > 0) {
    char list[1024] = "";
    size_t len = 0;

    for (i = 0; i < n && len < sizeof list - 64; i++)
      if (gr_a.mem[i].failed) {
        const struct gr_member *f = &gr_a.mem[i];
        bool show = f->path && strstr (f->why, f->path) == NULL;

        len += snprintf (list + len, sizeof list - len, "%s%d (%s%s%s)",
                         len ? ", " : "", i, show ? f->path : "",
                         show ? ": " : "", f->why);
      }
    nbdkit_error ("warning: starting degraded with %d of %d members, "
                  "%d more failures tolerated; missing: %s",
                  n - gr_a.nfailed, n, gr_a.geom.m - gr_a.nfailed, list);
  }
  /* Not shut down cleanly: parity of the stripes being written at the
   * crash may not match their data.  With every member present, resync
   * (recompute all parity) before serving, then mark the array clean.
   * Degraded, it cannot be resynced: warn, and keep the dirty flag set
   * on disk (gr_a.unsynced) so that no clean shutdown hides it. */
  resync = false;
  if (gr_a.sb.flags & GR_SB_FLAG_DIRTY) {
    if (gr_a.nfailed == 0) {
      nbdkit_error ("warning: the array was not shut down cleanly; "
                    "resyncing the parity of all %" PRIu64 " stripes "
                    "before serving", gr_a.geom.stripes);
      resync = true;
    }
    else {
      gr_a.unsynced = 1;
      nbdkit_error ("warning: the array was not shut down cleanly and is "
                    "degraded: parity of stripes being written at the "
                    "crash may be inconsistent and cannot be resynced "
                    "(reads rebuilt from it could be wrong); the dirty "
                    "flag stays set");
    }
  }
  gr_a.dirty_on_disk = 0;
  if (gr_setup_coders (gr_a.geom.k, gr_a.geom.m, gr_a.sb.code) == -1)
    return -1;
  if (resync) {
    int r;

    if (gr_io_resync () == -1) {
      nbdkit_error ("resync failed: not serving an array whose parity "
                    "may be inconsistent");
      return -1;
    }
    pthread_mutex_lock (&gr_a.sb_lock);
    gr_a.sb.flags &= ~GR_SB_FLAG_DIRTY;
    r = write_sbs_locked ();
    pthread_mutex_unlock (&gr_a.sb_lock);
    if (r == -1)
      return -1;
  }
  log_geometry ("assembled");
  return 0;
}

int
gr_array_open (void)
{
  int i, j, r;

  nprobes = gr_cfg.npaths;
  for (i = 0; i < nprobes; i++) {
    probes[i].path = gr_cfg.paths[i];
    probes[i].pos = i;
    probes[i].fd = -1;
    if (probe_member (&probes[i]) == -1)
      goto err;
  }
  for (i = 0; i < nprobes; i++)
    for (j = 0; j < i; j++)
      if (probes[i].fd >= 0 && probes[j].fd >= 0 &&
          probes[i].st.st_dev == probes[j].st.st_dev &&
          probes[i].st.st_ino == probes[j].st.st_ino) {
        nbdkit_error ("member %d (%s) and member %d (%s) are the same file",
                      j, probes[j].path, i, probes[i].path);
        goto err;
      }

  r = gr_cfg.create ? create_array () : assemble_array ();
  if (r == -1)
    goto err;
  for (i = 0; i < nprobes; i++)
    if (probes[i].fd >= 0) {
      close (probes[i].fd);
      probes[i].fd = -1;
    }
  return 0;

 err:
  for (i = 0; i < nprobes; i++)
    if (probes[i].fd >= 0) {
      close (probes[i].fd);
      probes[i].fd = -1;
    }
  return -1;
}

/* Clean shutdown: sync the members and clear the dirty flag. */
void
gr_array_close (void)
{
  int i;

  if (gr_a.mem == NULL)
    return;
  pthread_mutex_lock (&gr_a.sb_lock);
  if (gr_a.dirty_on_disk && gr_a.nfailed <= gr_a.geom.m) {
    bool ok = true;

    for (i = 0; i < gr_a.n; i++)
      if (!gr_a.mem[i].failed && fdatasync (gr_a.mem[i].fd) == -1) {
        char why[128];

        snprintf (why, sizeof why, "fdatasync: %s", strerror (errno));
        fail_locked (i, why, true);
      }
    if (gr_a.nfailed > gr_a.geom.m)
      ok = false;
    if (ok && !gr_a.unsynced) {
      gr_a.sb.flags &= ~GR_SB_FLAG_DIRTY;
      if (write_sbs_locked () == 0)
        gr_a.dirty_on_disk = 0;
    }
  }
  pthread_mutex_unlock (&gr_a.sb_lock);
  for (i = 0; i < gr_a.n; i++)
    if (gr_a.mem[i].fd >= 0)
      close (gr_a.mem[i].fd);
  free (gr_a.mem);
  gr_a.mem = NULL;
  if (gr_a.coder && gr_a.coder != gr_a.cpu_coder)
    gr_coder_free (gr_a.coder);
  if (gr_a.cpu_coder)
    gr_coder_free (gr_a.cpu_coder);
  gr_a.coder = gr_a.cpu_coder = NULL;
}
