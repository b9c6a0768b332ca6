/* gpuraid - nbdkit plugin internals shared by gpuraid.c, array.c, io.c.
 * Plugin code: errors go through nbdkit_error and return -1. */
#ifndef GPURAID_INTERNAL_H
#define GPURAID_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "gf/gf.h"
#include "raidmap/raidmap.h"
#include "superblock.h"

#define GR_VERSION "0.1"
#define GR_DEFAULT_CHUNK 65536
#define GR_MIN_DATA_OFFSET (1024 * 1024)
#define GR_NLOCKS 1024                  /* stripe lock table size */
#define GR_MAX_CHUNK (UINT32_C (64) << 20)    /* 64 MiB */

extern int gpuraid_debug_verbose;
extern int gpuraid_debug_no_uring;
extern int gpuraid_debug_fake_auto;

#define gr_verbose(fs, ...)                                     \
  do {                                                          \
    if (gpuraid_debug_verbose)                                  \
      nbdkit_debug ("gpuraid: " fs, ##__VA_ARGS__);             \
  } while (0)

/* Command-line configuration (gpuraid.c). */
struct gr_config {
  char *paths[GR_MAX_MEMBERS];  /* absolute paths, command-line order */
  int npaths;
  int m;                        /* -1 = not given */
  uint32_t chunk;               /* 0 = not given */
  int code;                     /* 0 = not given, else enum gr_code */
  bool create, force;
  const char *backend;          /* NULL = best available */
  enum { GR_ACCEL_AUTO, GR_ACCEL_CPU, GR_ACCEL_GPU } accel;
  int gpu_device;
};
extern struct gr_config gr_cfg;

/* One member slot of the assembled array, indexed by member index. */
struct gr_member {
  const char *path;             /* NULL if no path filled this slot */
  int fd;                       /* -1 if missing */
  int index;
  /* Set (atomically) when the member is missing, stale or failed.  A
   * failed member is never read and never written again. */
  int failed;
  char why[256];                /* why it failed, for logs */
};

/* The one array this plugin serves. */
struct gr_array {
  struct gr_geom geom;
  int n;                        /* k + m */
  uint32_t lm;                  /* gr_coder_len_multiple */
  enum gr_code code;
  struct gr_member *mem;        /* n slots */
  int nfailed;                  /* atomic */

  /* In-memory authoritative superblock (index field unused); protected
   * by sb_lock.  Written to every live member by gr_array_write_sbs. */
  pthread_mutex_t sb_lock;
  struct gr_sb sb;
  int dirty_on_disk;            /* atomic: DIRTY flag persisted */
  int unsynced;                 /* started dirty and degraded: keep DIRTY */

  struct gr_coder *coder;       /* the chosen backend (maybe "cuda") */
  struct gr_coder *cpu_coder;   /* CPU coder; == coder when no GPU */
  int gpu_fallen_back;          /* atomic: coder failed, use cpu_coder */
  bool gpu_all;                 /* accel=gpu/backend=cuda: every op on GPU */
  char gpu_name[256];
  /* Page-locked memory for GPU operations (NULL: none). */
  void *(*host_alloc) (size_t size);
  void (*host_free) (void *p);

  pthread_rwlock_t locks[GR_NLOCKS];
  uint8_t *zero_buf;            /* k * chunk zero bytes */
};
extern struct gr_array gr_a;

/* gpuraid.c: create the coders once the geometry is known. */
int gr_setup_coders (int k, int m, enum gr_code code);

/* array.c */
int gr_pread_full (int fd, void *buf, size_t len, uint64_t off);
int gr_pwrite_full (int fd, const void *buf, size_t len, uint64_t off);
int gr_array_open (void);       /* assemble or create; get_ready */
void gr_array_close (void);     /* clean shutdown; cleanup */
int gr_array_mark_failed (int member, const char *fmt, ...)
  __attribute__((format (printf, 2, 3)));
int gr_array_begin_write (void);
int gr_array_too_degraded (void);
int gr_array_sync_member (int member);
static inline bool
gr_member_failed (int member)
{
  return __atomic_load_n (&gr_a.mem[member].failed, __ATOMIC_ACQUIRE);
}

/* accel.c: which coder runs an operation of `bytes` data bytes (for a
 * reconstruct, with nerased blocks lost); GPU failures; the start-up
 * measurement that sets accel=auto's thresholds (logged); page-locked
 * scratch memory from a bounded pool. */
enum gr_op { GR_OP_ENCODE, GR_OP_RECONSTRUCT, GR_OP_UPDATE };
bool gr_accel_gpu_usable (void);
bool gr_accel_gpu (enum gr_op op, size_t bytes, int nerased);
void gr_accel_failed (const char *op, int r);
/* Take one of the GPU's places for an operation about to run there
 * (false: GPU unusable, or busy under accel=auto: run it on the CPU);
 * gr_accel_release when it is done.  gr_accel_stats logs the counts. */
bool gr_accel_claim (void);
void gr_accel_release (void);
void gr_accel_stats (void);
int gr_accel_calibrate (void);
bool gr_host_alloc_wanted (size_t size);
void *gr_host_alloc (size_t size);
void gr_host_free (void *p, size_t size);

/* io.c: one coding operation on the GPU coder if gpu (and it is still
 * usable; a failure there is redone on the CPU coder), else on the CPU
 * coder.  0, or -1 with errno EIO.  gr_code_update's GPU path computes
 * into pdelta (m blocks of scratch) and XORs that into parity. */
int gr_code_encode (bool gpu, uint8_t *const *blocks, size_t nstripes,
                    size_t len);
int gr_code_reconstruct (bool gpu, const int *erased, int nerased,
                         uint8_t *const *blocks, size_t len);
int gr_code_update (bool gpu, int index, const uint8_t *delta,
                    uint8_t *const *parity, uint8_t *const *pdelta,
                    size_t len);

/* io.c */
int gr_io_init (void);
void gr_io_fini (void);
int gr_io_pread (void *buf, uint32_t count, uint64_t offset);
int gr_io_pwrite (const void *buf, uint32_t count, uint64_t offset, bool fua);
int gr_io_zero (uint32_t count, uint64_t offset, bool may_trim, bool fast,
                bool fua);
int gr_io_trim (uint32_t count, uint64_t offset, bool fua);
int gr_io_flush (void);
int gr_io_resync (void);        /* recompute all parity (start-up) */

#endif /* GPURAID_INTERNAL_H */
