/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the members' state, shared by the three files of the
 * members module (members.c: state, superblocks; members-io.c: member
 * I/O; members-rebuild.c: a replacement being rebuilt).  Nothing else
 * includes it; include members.h first. */
#ifndef GPURAID_MEMBERS_INTERNAL_H
#define GPURAID_MEMBERS_INTERNAL_H

#include <pthread.h>

#include "format/format.h"
#include "storage/storage.h"

struct member {
  char *path;                   /* NULL if no path filled this slot */
  struct gr_disk *disk;         /* NULL if missing */
  int failed;                   /* atomic; never cleared */
  char why[256];                /* why it failed */
  /* atomic: accesses done, bytes moved, errors met (gr_members_counts) */
  uint64_t reads, writes, read_bytes, written_bytes, errors;
  uint64_t cksum_errors;        /* atomic: blocks that failed their
                                 * checksum (gr_members_count_cksum) */
  uint64_t read_errors;         /* atomic: reads of the data area that
                                 * failed with EIO (GR_MIO_READ_ERROR) */
  uint32_t attach;              /* atomic: + 1 each time a replacement
                                 * takes the slot */
  /* A replacement being rebuilt (failed stays set until it is done):
   * atomic; I/O below front (a member byte offset) is allowed, and the
   * rebuild's own writes below wfront (>= front). */
  int rebuilding;
  uint64_t front, wfront;
  bool readd;                   /* the rebuild is a re-add: the member
                                 * itself, back (GR_SB_FLAG_READD) */
  /* A live replacement (members.h: gr_members_live_begin): shadow takes
   * the member's writes below sfront (member bytes) and in its metadata
   * area past the superblock.  shadow is used under ms->shadow_lock read
   * and changed under it written. */
  struct gr_disk *shadow;
  char *shadow_path;
  int live;                     /* atomic */
  int shadow_failed;            /* atomic: a write or sync of it failed */
  uint64_t sfront;              /* atomic */
};

struct gr_members {
  int n, m;
  struct member *mem;
  int nfailed;                  /* atomic */
  uint64_t gen;                 /* atomic: + 1 on every failure */
  pthread_mutex_t lock;         /* sb and failure transitions; leaf */
  struct gr_sb sb;
  int dirty_on_disk;            /* atomic: DIRTY flag persisted */
  bool keep_dirty;
  bool keeps_journal;           /* the dirty session journals its
                                 * degraded writes (GR_KEEPS_JOURNAL) */
  uint64_t runtime_failures;    /* under lock: members failed at run
                                 * time (each clears JOURNALED) */
  bool read_only;               /* salvage: nothing is written */
  unsigned (*on_dirty) (void *arg);
  void *on_dirty_arg;
  int falloc_refused;           /* atomic: bits 1 << GR_MIO_PUNCH/ZERO */
  int direct;                   /* atomic: a member was opened with
                                 * O_DIRECT (storage.h); never cleared */
  uint32_t dio_align;           /* atomic: the largest memory alignment
                                 * of those (gr_disk_mem_align); never
                                 * lowered */
  unsigned max_read_errors;     /* set before I/O (max-read-errors=) */
  bool maps_kept;               /* the degraded map is kept while a member
                                 * is failed (sb.degraded_since) */
  pthread_rwlock_t shadow_lock; /* the members' shadows (above) */
  int nlive;                    /* atomic: live replacements */
};

/* Under ms->lock: write the superblock, event + 1, to every live
 * member (members.h: gr_members_write_sbs). */
enum gr_members_outcome gr_members_write_sbs_locked (struct gr_members *ms);
/* Under ms->lock: drop member i from the recorded rebuild (the whole
 * record when no member is left in progress); written with the next
 * superblock update.  false if it was not in it. */
bool gr_members_rebuild_drop_locked (struct gr_members *ms, int i);
/* Under ms->lock: does the recorded rebuild hold a member still in
 * progress (failed)? */
bool gr_members_rebuild_in_progress_locked (const struct gr_members *ms);
/* May v be done: a live member, or the part of a replacement rebuilt. */
bool gr_members_usable (const struct gr_members *ms, const struct gr_mio *v);

/* Disk d (or NULL) now serves a slot or a replacement: note whether it
 * was opened with O_DIRECT, and its alignment (direct, dio_align). */
void gr_members_note_disk (struct gr_members *ms, const struct gr_disk *d);

#endif /* GPURAID_MEMBERS_INTERNAL_H */
