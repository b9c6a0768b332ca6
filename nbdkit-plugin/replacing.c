/* gpuraid - a replacement being rebuilt: its state among the members.
 * See replacing.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "members.h"
#include "members-state.h"
#include "replacing.h"

/* Under ms->lock: member i is being rebuilt onto fd, rebuilt up to
 * stripe `at`. */
static void
rebuild_set_locked (struct gr_members *ms, int i, const char *path, int fd,
                    uint64_t at)
{
  struct member *mb = &ms->mem[i];
  char *p = path ? strdup (path) : NULL;
  const uint64_t front = ms->sb.data_offset + at * ms->sb.chunk;

  if (mb->fd >= 0 && mb->fd != fd)
    close (mb->fd);
  if (p) {
    free (mb->path);
    mb->path = p;
  }
  mb->fd = fd;
  snprintf (mb->why, sizeof mb->why, "being rebuilt");
  __atomic_store_n (&mb->front, front, __ATOMIC_RELEASE);
  __atomic_store_n (&mb->wfront, front, __ATOMIC_RELEASE);
  __atomic_store_n (&mb->rebuilding, 1, __ATOMIC_RELEASE);
  __atomic_add_fetch (&ms->gen, 1, __ATOMIC_ACQ_REL);
}

enum gr_members_outcome
gr_members_rebuild_begin (struct gr_members *ms, int i, const char *path,
                          int fd)
{
  enum gr_members_outcome r = GR_MEMBERS_OK;
  uint8_t buf[GR_SB_SIZE];
  struct gr_sb own;
  int e;

  pthread_mutex_lock (&ms->lock);
  /* Its own superblock first: REBUILDING, named by the event of the
   * update that records the rebuild on the members (docs/format.md). */
  own = ms->sb;
  own.index = (uint32_t) i;
  own.flags |= GR_SB_FLAG_REBUILDING;
  own.rebuild_id = ms->sb.event + 1;
  own.rebuild_member = (uint32_t) i;
  own.rebuild_at = 0;
  gr_sb_encode (&own, buf);
  e = gr_pwrite_full (fd, buf, GR_SB_SIZE, 0);
  if (e == 0 && fdatasync (fd) == -1)
    e = -errno;
  if (e < 0) {
    nbdkit_error ("replacement member %d (%s): superblock write: %s", i,
                  path, strerror (-e));
    close (fd);
    pthread_mutex_unlock (&ms->lock);
    errno = -e;
    return GR_MEMBERS_IO_ERROR;
  }
  ms->sb.rebuild_id = own.rebuild_id;
  ms->sb.rebuild_member = (uint32_t) i;
  ms->sb.rebuild_at = 0;
  r = gr_members_write_sbs_locked (ms);
  rebuild_set_locked (ms, i, path, fd, 0);
  pthread_mutex_unlock (&ms->lock);
  return r;
}

void
gr_members_rebuild_resume (struct gr_members *ms, int i, const char *path,
                           int fd, uint64_t at)
{
  pthread_mutex_lock (&ms->lock);
  rebuild_set_locked (ms, i, path, fd, at);
  pthread_mutex_unlock (&ms->lock);
}

void
gr_members_rebuild_forget (struct gr_members *ms)
{
  pthread_mutex_lock (&ms->lock);
  ms->sb.rebuild_id = 0;
  ms->sb.rebuild_member = 0;
  ms->sb.rebuild_at = 0;
  pthread_mutex_unlock (&ms->lock);
}

bool
gr_members_rebuild_checkpoint (struct gr_members *ms, int i, uint64_t at)
{
  struct member *mb = &ms->mem[i];
  bool ok = false;

  pthread_mutex_lock (&ms->lock);
  if (__atomic_load_n (&mb->rebuilding, __ATOMIC_ACQUIRE) &&
      ms->sb.rebuild_member == (uint32_t) i && ms->sb.rebuild_id) {
    if (fdatasync (mb->fd) == -1) {
      __atomic_add_fetch (&mb->errors, 1, __ATOMIC_RELAXED);
      __atomic_store_n (&mb->rebuilding, 0, __ATOMIC_RELEASE);
      __atomic_add_fetch (&ms->gen, 1, __ATOMIC_ACQ_REL);
      nbdkit_error ("replacement member %d (%s) failed: fdatasync: %m; the "
                    "rebuild stops and the member stays failed", i, mb->path);
    }
    else {
      ms->sb.rebuild_at = at;
      ok = gr_members_write_sbs_locked (ms) == GR_MEMBERS_OK;
    }
  }
  pthread_mutex_unlock (&ms->lock);
  return ok;
}

bool
gr_members_in_use (const struct gr_members *ms, int i, uint64_t off,
                   uint64_t len)
{
  const struct gr_mio v = { .kind = GR_MIO_READ, .member = i, .off = off,
                            .len = len };

  return gr_members_usable (ms, &v);
}

bool
gr_members_rebuild_advance (struct gr_members *ms, int i, uint64_t front,
                            bool written)
{
  struct member *mb = &ms->mem[i];

  if (!__atomic_load_n (&mb->rebuilding, __ATOMIC_ACQUIRE))
    return false;
  if (!written) {
    __atomic_store_n (&mb->wfront, front, __ATOMIC_RELEASE);
    return true;
  }
  __atomic_store_n (&mb->front, front, __ATOMIC_RELEASE);
  __atomic_add_fetch (&ms->gen, 1, __ATOMIC_ACQ_REL);
  return true;
}

int
gr_members_rebuilding (const struct gr_members *ms, uint64_t *front)
{
  for (int i = 0; i < ms->n; i++)
    if (__atomic_load_n (&ms->mem[i].rebuilding, __ATOMIC_ACQUIRE)) {
      *front = __atomic_load_n (&ms->mem[i].front, __ATOMIC_ACQUIRE);
      return i;
    }
  return -1;
}

bool
gr_members_rebuild_end (struct gr_members *ms, int i,
                        enum gr_rebuild_end how)
{
  struct member *mb = &ms->mem[i];
  bool live = false, ours;

  pthread_mutex_lock (&ms->lock);
  ours = ms->sb.rebuild_id && ms->sb.rebuild_member == (uint32_t) i;
  if (how == GR_REBUILD_DONE &&
      __atomic_load_n (&mb->rebuilding, __ATOMIC_ACQUIRE) &&
      fdatasync (mb->fd) == -1) {
    __atomic_add_fetch (&mb->errors, 1, __ATOMIC_RELAXED);
    nbdkit_error ("replacement member %d (%s) failed: fdatasync: %m; the "
                  "member stays failed", i, mb->path);
    how = GR_REBUILD_ABANDONED;
  }
  if (how == GR_REBUILD_DONE &&
      __atomic_load_n (&mb->rebuilding, __ATOMIC_ACQUIRE)) {
    /* Trusted from the superblock update on: its bit cleared on every
     * live member, the rebuild recorded as done (so that its own
     * superblock, still REBUILDING if a crash cuts this update off, is
     * known as finished) and its own superblock written
     * (docs/format.md). */
    mb->why[0] = '\0';
    ms->sb.failed[i / 8] &= (uint8_t) ~(1u << (i % 8));
    if (ours)
      ms->sb.rebuild_at = ms->sb.data_size / ms->sb.chunk;
    __atomic_store_n (&mb->failed, 0, __ATOMIC_RELEASE);
    __atomic_sub_fetch (&ms->nfailed, 1, __ATOMIC_ACQ_REL);
    live = gr_members_write_sbs_locked (ms) == GR_MEMBERS_OK && !mb->failed;
  }
  else {
    if (mb->why[0] == '\0' || strcmp (mb->why, "being rebuilt") == 0)
      snprintf (mb->why, sizeof mb->why, how == GR_REBUILD_PAUSED
                ? "rebuild paused (resumes at the next start)"
                : "rebuild not finished");
    /* Paused: the record and its checkpoint stay, so that the next start
     * with the replacement resumes it; abandoned: forgotten. */
    if (how != GR_REBUILD_PAUSED && ours && !ms->read_only) {
      ms->sb.rebuild_id = 0;
      ms->sb.rebuild_member = 0;
      ms->sb.rebuild_at = 0;
      gr_members_write_sbs_locked (ms);
    }
  }
  __atomic_store_n (&mb->rebuilding, 0, __ATOMIC_RELEASE);
  __atomic_add_fetch (&ms->gen, 1, __ATOMIC_ACQ_REL);
  pthread_mutex_unlock (&ms->lock);
  return live;
}

