/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the healing's state, shared by its two files (heal.c: the
 * thread, the jobs and what runs; heal-replace.c: replacements, spares
 * and re-adds).  Nothing else includes it; include heal.h first. */
#ifndef GPURAID_HEAL_INTERNAL_H
#define GPURAID_HEAL_INTERNAL_H

#include <pthread.h>

#include "copy.h"
#include "members.h"
#include "storage/storage.h"

#define MAX_SPARES 32

struct spare {
  char *path;
  int member;                   /* replace=: for this member; -1: any */
};

struct gr_heal {
  struct gr_exec *x;
  struct gr_members *ms;
  struct gr_bitmap *b;
  struct gr_resync *rs;
  uint64_t rate;
  pthread_mutex_t lock;
  pthread_cond_t cond;          /* wakes the thread: a spare, a stop */
  pthread_t thread;
  bool started, stopping;
  struct gr_rebuild *rebuild;   /* the last one started, running or ended */
  struct gr_scrub *scrub;       /* the same */
  struct gr_copy *copy;         /* the live replacement started last */
  enum gr_heal_job last_job;
  struct spare spares[MAX_SPARES];
  int nspares;
  bool auto_m[GR_MAX_MEMBERS];  /* being rebuilt onto a spare */
  bool resume;                  /* rebuilds to resume (at assembly) */
  bool no_auto[GR_MAX_MEMBERS]; /* its rebuild onto a spare failed */
  /* Members back at assembly, to re-add once nothing stops it. */
  struct { char *path; struct gr_disk *d; } back[GR_MAX_MEMBERS];
};

/* Under h->lock: does a resync or a scrub run (what a rebuild waits
 * for)? */
bool gr_heal_blocks_rebuild_locked (struct gr_heal *h);
/* Under h->lock: rebuild the members being rebuilt in one pass: member
 * i (just begun; -1: none) joins the running pass, or a new pass starts
 * for all of them from the least front.  false after nbdkit_error. */
bool gr_heal_rebuild_locked (struct gr_heal *h, int i);
/* The thread's step, under h->lock: the members back at assembly
 * re-added, rebuilds resumed, a spare put in for a member that needs
 * one, if nothing stops it (heal-replace.c). */
void gr_heal_use_spare_locked (struct gr_heal *h);

/* Under h->lock: does a live replacement's copy run? */
bool gr_heal_copying_locked (struct gr_heal *h);
/* Under h->lock: can path take a member's place (not member i: -1 for
 * any)?  STARTED with *d open (read-write) if so; nothing is written.
 * taking: it is taken now (a device that refused O_DIRECT under
 * direct=auto is said then, once, not each time a spare is checked). */
enum gr_heal_outcome gr_heal_check_path_locked (struct gr_heal *h, int i,
                                                const char *path,
                                                struct gr_disk **d, int *err,
                                                bool taking);

#endif /* GPURAID_HEAL_INTERNAL_H */
