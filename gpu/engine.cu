/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the "cuda" coding backend: host engine.
 *
 * A batch (blocks[s * n + i]) is cut into chunks of whole stripes, or of
 * byte ranges of one stripe when a stripe is larger than a chunk (columns
 * are independent in RS and CRS alike).  Each chunk goes through a slot:
 * a CUDA stream with a page-locked staging buffer and a device buffer of
 * SLOT_BYTES each.  Per chunk: gather the caller's input blocks into the
 * staging buffer (CPU memcpy), copy it up, run the kernel, copy the
 * outputs down, and, when the slot is next needed or at the end, scatter
 * them into the caller's output blocks.  A call uses up to NSLOTS slots
 * round-robin, so the gather of one chunk, the upload of the next, the
 * kernel and the download of another overlap (both copy engines).
 *
 * When every block of the call is itself page-locked (gr_gpu_host_alloc,
 * a range registered with gr_gpu_host_register and in use, or memory
 * CUDA says is page-locked: a sample is asked) and at least DIRECT_MIN bytes
 * long, the staging copy is skipped: run_direct copies blocks straight
 * between the caller's memory and the device, in small chunks through one
 * slot, uploads, kernels and downloads on three streams chained by
 * events.
 *
 * The slots are a fixed pool (NSLOTS x SLOT_BYTES pinned + the same on the
 * device, allocated on first use and kept): concurrent callers wait on a
 * condition variable for a free slot rather than grow it.  Coding tables
 * are uploaded once per coder (coder_init) and per decode plan
 * (plan_init), so a call uploads only data.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/now.h"
#include "../gf/gf-backend.h"
#include "gpu.h"
#include "gpu-internal.h"

#define NSLOTS 4
#define SLOT_BYTES ((size_t) 64 << 20)
#define CHUNK_MIN ((size_t) 4 << 20)
#define DIRECT_MIN ((size_t) 64 << 10)
#define SLOT_BUFS 16            /* chunk buffers per slot (direct path) */
/* Block checksums a slot holds for one submission (gr_code_many's
 * direct encodes): those of 1 GiB of blocks; beyond, on the CPU. */
#define SLOT_CKSUMS ((size_t) 1 << 18)
#define PIN_SAMPLES 16          /* blocks checked for page-locking */

/* Direct path: data bytes per chunk; 0 = automatic (test hook
 * gr_gpu_set_chunk): an eighth of the batch, a sixteenth where the
 * outputs are at least as large as the inputs, between CHUNK_LO and
 * CHUNK_HI (measured best on the H200, bench-gpu (bx); the sixteenth:
 * docs/performance.md, "The direct path's bound"); a quarter, up to
 * CHUNK_SHARED_HI, for a batch that starts while another holds a slot. */
static size_t direct_chunk = 0;
#define CHUNK_LO ((size_t) 2 << 20)
#define CHUNK_HI ((size_t) 8 << 20)
/* A batch that starts while another holds a slot: a quarter of the batch,
 * at most CHUNK_SHARED_HI (bench-gpu (bc): its first upload overlaps the
 * other batch's downloads, so only the copies' count matters). */
#define CHUNK_SHARED_HI ((size_t) 16 << 20)

/* Test hooks (gpu/test-gpu, bench-gpu): each sets one knob for what
 * comes afterwards and returns its previous value.
 * - JIT: output blocks per pass, compiles in the background (0: before
 *   use), batches of at least this many data bytes compile the kernel
 *   (SIZE_MAX: never);
 * - direct path: data bytes per chunk (0: automatic). */
GR_GPU_TEST_HOOK (int, gr_gpu_set_jit_passrows, gr_gpu_jit_passrows)
GR_GPU_TEST_HOOK (int, gr_gpu_set_jit_async, gr_gpu_jit_async)
GR_GPU_TEST_HOOK (size_t, gr_gpu_set_jit_min, gr_gpu_jit_min)
GR_GPU_TEST_HOOK (size_t, gr_gpu_set_chunk, direct_chunk)

/* Direct batches that took the shared chunk (for gpu/test-gpu). */
static unsigned long direct_shared_n;

extern "C" unsigned long
gr_gpu_direct_shared (void)
{
  return __atomic_load_n (&direct_shared_n, __ATOMIC_RELAXED);
}

/* ---- errors ------------------------------------------------------------ */

static pthread_mutex_t err_lock = PTHREAD_MUTEX_INITIALIZER;
static char err_msg[512];
static __thread char err_copy[512];

void
gr_gpu_set_error (const char *fmt, ...)
{
  va_list ap;

  pthread_mutex_lock (&err_lock);
  va_start (ap, fmt);
  vsnprintf (err_msg, sizeof err_msg, fmt, ap);
  va_end (ap);
  pthread_mutex_unlock (&err_lock);
}

int
gr_gpu_fail (cudaError_t e, const char *what)
{
  gr_gpu_set_error ("%s: %s (%s)", what, cudaGetErrorString (e),
                    cudaGetErrorName (e));
  /* Reported: not left as the thread's last error, where the next
   * launch's check (cudaGetLastError) would take it for its own. */
  (void) cudaGetLastError ();
  switch (e) {
  case cudaErrorMemoryAllocation:
    return -ENOMEM;
  case cudaErrorNoDevice:
  case cudaErrorInsufficientDriver:
  case cudaErrorInvalidDevice:
  case cudaErrorNoKernelImageForDevice:
  case cudaErrorDevicesUnavailable:
  case cudaErrorSystemDriverMismatch:
    return -ENODEV;
  default:
    return -EIO;
  }
}

const char *
gr_gpu_last_error (void)
{
  pthread_mutex_lock (&err_lock);
  memcpy (err_copy, err_msg, sizeof err_copy);
  pthread_mutex_unlock (&err_lock);
  return err_copy;
}

/* ---- device ------------------------------------------------------------ */

static pthread_mutex_t eng_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t eng_cond = PTHREAD_COND_INITIALIZER;
static int gpu_dev;
static int probed_dev = -1, probed_result;

/* st carries the staged path's chunks, and the direct path's uploads;
 * st_k and st_d the direct path's kernels and downloads; ev[b] the
 * direct path's events for chunk buffer b: uploaded, coded, free. */
struct slot {
  cudaStream_t st, st_k, st_d;
  cudaEvent_t ev[SLOT_BUFS][3];
  uint8_t *h, *d;
  uint32_t *h_ck, *d_ck;        /* SLOT_CKSUMS block checksums */
  int busy, ready;
  unsigned long long ncopies;   /* copies the direct path queued (busy
                                 * holder only) */
};
static struct slot slots[NSLOTS];

/* gr_gpu_host_copy's streams: taken in turn, each with an event whose
 * wait sleeps (the copies are short; a spinning wait would cost the
 * host what the copy saves). */
#define NCOPIERS 8
static struct {
  cudaStream_t st;
  cudaEvent_t ev;
  bool ready, busy;
} copiers[NCOPIERS];
static pthread_cond_t copier_cond = PTHREAD_COND_INITIALIZER;
static struct gr_gpu_host_copy_stats hc_st;     /* atomic */

int
gr_gpu_probe_device (int device, char *name, size_t namelen)
{
  struct cudaDeviceProp p;
  cudaError_t e;
  char why[400];
  int n = 0;

  e = cudaGetDeviceCount (&n);
  if (e != cudaSuccess) {
    snprintf (why, sizeof why, "cudaGetDeviceCount: %s",
              cudaGetErrorString (e));
    goto nodev;
  }
  if (device < 0 || device >= n) {
    snprintf (why, sizeof why, "no CUDA device %d (%d found)", device, n);
    goto nodev;
  }
  e = cudaGetDeviceProperties (&p, device);
  if (e != cudaSuccess) {
    snprintf (why, sizeof why, "cudaGetDeviceProperties: %s",
              cudaGetErrorString (e));
    goto nodev;
  }
  if (p.major < 9) {
    snprintf (why, sizeof why,
              "%s has compute capability %d.%d; kernels are built for 9.0+",
              p.name, p.major, p.minor);
    goto nodev;
  }
  e = cudaSetDevice (device);
  if (e == cudaSuccess)
    e = cudaFree (0);
  if (e == cudaSuccess)
    e = gr_gpu_kernels_loadable ();
  if (e != cudaSuccess) {
    snprintf (why, sizeof why, "%s: %s", p.name, cudaGetErrorString (e));
    goto nodev;
  }
  if (name && namelen)
    snprintf (name, namelen, "%s", p.name);
  return 0;

 nodev:
  gr_gpu_set_error ("%s", why);
  if (name && namelen)
    snprintf (name, namelen, "%s", why);
  return -ENODEV;
}

int
gr_gpu_select (int device)
{
  int r, i;

  r = gr_gpu_probe_device (device, NULL, 0);
  if (r < 0)
    return r;
  pthread_mutex_lock (&eng_lock);
  for (i = 0; i < NSLOTS; i++)
    if (slots[i].ready && device != gpu_dev) {
      pthread_mutex_unlock (&eng_lock);
      gr_gpu_set_error ("gr_gpu_select: engine already running on device %d",
                        gpu_dev);
      return -EBUSY;
    }
  gpu_dev = device;
  probed_dev = device;
  probed_result = 0;
  pthread_mutex_unlock (&eng_lock);
  return 0;
}

static int
set_device (void)
{
  cudaError_t e = cudaSetDevice (gpu_dev);

  return e == cudaSuccess ? 0 : gr_gpu_fail (e, "cudaSetDevice");
}

static int
cuda_probe (void)
{
  int r, dev;

  pthread_mutex_lock (&eng_lock);
  dev = gpu_dev;
  if (probed_dev == dev) {
    r = probed_result;
    pthread_mutex_unlock (&eng_lock);
    return r;
  }
  pthread_mutex_unlock (&eng_lock);
  r = gr_gpu_probe_device (dev, NULL, 0) == 0 ? 0 : -ENOTSUP;
  pthread_mutex_lock (&eng_lock);
  probed_dev = dev;
  probed_result = r;
  pthread_mutex_unlock (&eng_lock);
  return r;
}

/* The page-locked memory the engine knows of: its allocations
 * (gr_gpu_host_alloc) and the ranges registered through
 * gr_gpu_host_register.  A strided (2D) copy goes only over a span of
 * host memory inside one of them: CUDA refuses (cudaErrorInvalidValue) a
 * 2D copy whose span crosses memory that is not page-locked, such as the
 * gap between two allocations whose blocks happen to be equally spaced.
 * Allocations beyond NHOSTREG are simply not listed (their copies go one
 * block run at a time); registrations beyond it are refused.
 *
 * A registered range is trusted (copied to and from directly) only while
 * its owner says it is in use: between uses the caller may have freed the
 * memory and the address may hold other memory, while CUDA still maps
 * the registration's old pages there.  Memory inside a registered range
 * not in use is therefore staged, and never handed to a CUDA copy.
 *
 * The list changes (entries added and removed) under the write lock; its
 * lookups, and the marks of a range in use or not (each request's, at its
 * start and end), take the read lock, the marks storing the state
 * atomically: with one mutex, a GPU submission's hundreds of lookups
 * and the requests' marks kept waking each other (docs/performance.md,
 * "The page-locked ranges' list").  Its entries never overlap and are
 * kept in the order of their addresses, so that a lookup is a binary
 * search, not a scan of the 150 to 200 ranges of a server with 16
 * connections. */
#define NHOSTREG 1024
enum { REG_ALLOC, REG_IDLE, REG_IN_USE };
static pthread_rwlock_t hostreg_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct { uintptr_t base; size_t size; int state; } hostreg[NHOSTREG];
static int nhostreg;

/* The last entry whose range starts at or below a, or -1 (read or write
 * lock held). */
static int
host_reg_at (uintptr_t a)
{
  int lo = 0, hi = nhostreg;    /* entries below lo start at or below a */

  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;

    if (hostreg[mid].base <= a)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo - 1;
}

enum host_reg_added { REG_ADDED, REG_LIST_FULL, REG_OVERLAPS };

/* List [p, p + size) in state; refused if it overlaps a listed range
 * (CUDA would refuse to register it too) or the list is full. */
static enum host_reg_added
host_reg_add (void *p, size_t size, int state)
{
  const uintptr_t a = (uintptr_t) p;
  enum host_reg_added r = REG_LIST_FULL;

  pthread_rwlock_wrlock (&hostreg_lock);
  if (nhostreg < NHOSTREG) {
    const int i = host_reg_at (a);      /* the new entry goes at i + 1 */

    if ((i >= 0 && a - hostreg[i].base < hostreg[i].size) ||
        (i + 1 < nhostreg && hostreg[i + 1].base - a < size))
      r = REG_OVERLAPS;
    else {
      memmove (&hostreg[i + 2], &hostreg[i + 1],
               (size_t) (nhostreg - i - 1) * sizeof hostreg[0]);
      hostreg[i + 1].base = a;
      hostreg[i + 1].size = size;
      hostreg[i + 1].state = state;
      nhostreg++;
      r = REG_ADDED;
    }
  }
  pthread_rwlock_unlock (&hostreg_lock);
  return r;
}

/* The entry at p, or -1 (lock held). */
static int
host_reg_find (void *p)
{
  const int i = host_reg_at ((uintptr_t) p);

  return i >= 0 && hostreg[i].base == (uintptr_t) p ? i : -1;
}

/* Remove the entry at p; false if there was none. */
static bool
host_reg_del (void *p)
{
  int i;

  pthread_rwlock_wrlock (&hostreg_lock);
  i = host_reg_find (p);
  if (i >= 0) {
    memmove (&hostreg[i], &hostreg[i + 1],
             (size_t) (nhostreg - i - 1) * sizeof hostreg[0]);
    nhostreg--;
  }
  pthread_rwlock_unlock (&hostreg_lock);
  return i >= 0;
}

/* What the engine knows of a span of host memory. */
enum host_span {
  SPAN_UNKNOWN,         /* touches no listed range */
  SPAN_PINNED,          /* inside one allocation or registered range in
                         * use: copied directly */
  SPAN_STAGE,           /* touches a registered range not in use */
};

static enum host_span
host_span_state_locked (const uint8_t *p, size_t len)
{
  const uintptr_t a = (uintptr_t) p;
  int i = host_reg_at (a);
  enum host_span st = SPAN_UNKNOWN;

  /* The entry at or below a, then those that start inside the span. */
  if (i < 0)
    i = 0;
  for (; i < nhostreg && hostreg[i].base < a + len + (len == 0); i++) {
    const uintptr_t b = hostreg[i].base;
    const size_t sz = hostreg[i].size;
    const int state = __atomic_load_n (&hostreg[i].state, __ATOMIC_ACQUIRE);

    if (a >= b && len <= sz && a - b <= sz - len)
      return state != REG_IDLE ? SPAN_PINNED : SPAN_STAGE;
    if (state != REG_ALLOC && a < b + sz && b < a + len)
      st = SPAN_STAGE;
  }
  return st;
}

static enum host_span
host_span_state (const uint8_t *p, size_t len)
{
  enum host_span st;

  pthread_rwlock_rdlock (&hostreg_lock);
  st = host_span_state_locked (p, len);
  pthread_rwlock_unlock (&hostreg_lock);
  return st;
}

/* Does [p, p + len) lie inside one allocation or registered range in
 * use? */
static bool
host_span_ok (const uint8_t *p, size_t len)
{
  return host_span_state (p, len) == SPAN_PINNED;
}

int
gr_gpu_host_register (void *p, size_t size)
{
  cudaError_t e;
  int r;

  r = set_device ();
  if (r < 0)
    return r;
  /* Listed first, so that the engine never meets a registration of its
   * caller's that it does not know of. */
  switch (host_reg_add (p, size, REG_IDLE)) {
  case REG_LIST_FULL:
    gr_gpu_set_error ("cudaHostRegister: more than %d page-locked ranges",
                      NHOSTREG);
    return -ENOSPC;
  case REG_OVERLAPS:
    gr_gpu_set_error ("cudaHostRegister: %p (%zu bytes) overlaps page-locked"
                      " memory", p, size);
    return -EEXIST;
  case REG_ADDED:
    break;
  }
  e = cudaHostRegister (p, size,
                        cudaHostRegisterPortable | cudaHostRegisterMapped);
  if (e != cudaSuccess) {
    host_reg_del (p);
    if (e == cudaErrorHostMemoryAlreadyRegistered) {
      (void) cudaGetLastError ();
      gr_gpu_set_error ("cudaHostRegister: %s (%s)", cudaGetErrorString (e),
                        cudaGetErrorName (e));
      return -EEXIST;
    }
    return gr_gpu_fail (e, "cudaHostRegister");
  }
  return 0;
}

int
gr_gpu_host_unregister (void *p)
{
  cudaError_t e;
  int r;

  r = set_device ();
  if (r < 0)
    return r;
  /* Unlisted only once CUDA has let go of it: a range that fails stays
   * listed (not in use), so that what lies there is always staged. */
  gr_gpu_host_in_use (p, 0);
  e = cudaHostUnregister (p);
  if (e != cudaSuccess)
    return gr_gpu_fail (e, "cudaHostUnregister");
  if (!host_reg_del (p)) {
    gr_gpu_set_error ("cudaHostUnregister: %p was not registered", p);
    return -EINVAL;
  }
  return 0;
}

void
gr_gpu_host_in_use (void *p, int on)
{
  int i;

  pthread_rwlock_rdlock (&hostreg_lock);
  i = host_reg_find (p);
  if (i >= 0 &&
      __atomic_load_n (&hostreg[i].state, __ATOMIC_RELAXED) != REG_ALLOC)
    __atomic_store_n (&hostreg[i].state, on ? REG_IN_USE : REG_IDLE,
                      __ATOMIC_RELEASE);
  pthread_rwlock_unlock (&hostreg_lock);
}

void *
gr_gpu_host_alloc (size_t size)
{
  void *p = NULL;
  cudaError_t e;

  if (set_device () < 0)
    return NULL;
  e = cudaHostAlloc (&p, size, cudaHostAllocPortable | cudaHostAllocMapped);
  if (e != cudaSuccess) {
    gr_gpu_fail (e, "cudaHostAlloc");
    return NULL;
  }
  (void) host_reg_add (p, size, REG_ALLOC);     /* unlisted: staged */
  return p;
}

void
gr_gpu_host_free (void *p)
{
  if (p != NULL) {
    host_reg_del (p);
    cudaFreeHost (p);
  }
}

/* ---- slots ------------------------------------------------------------- */

static void
release_slots (struct slot **got, int n)
{
  pthread_mutex_lock (&eng_lock);
  for (int i = 0; i < n; i++)
    got[i]->busy = 0;
  pthread_cond_broadcast (&eng_cond);
  pthread_mutex_unlock (&eng_lock);
}

static void
slot_destroy (struct slot *s)
{
  for (int b = 0; b < SLOT_BUFS; b++)
    for (int i = 0; i < 3; i++)
      if (s->ev[b][i]) {
        cudaEventDestroy (s->ev[b][i]);
        s->ev[b][i] = NULL;
      }
  if (s->st)
    cudaStreamDestroy (s->st);
  if (s->st_k)
    cudaStreamDestroy (s->st_k);
  if (s->st_d)
    cudaStreamDestroy (s->st_d);
  s->st = s->st_k = s->st_d = NULL;
  if (s->h)
    cudaFreeHost (s->h);
  if (s->d)
    cudaFree (s->d);
  s->h = s->d = NULL;
  if (s->h_ck)
    cudaFreeHost (s->h_ck);
  if (s->d_ck)
    cudaFree (s->d_ck);
  s->h_ck = s->d_ck = NULL;
  s->ready = 0;
}

static int
slot_setup (struct slot *s)
{
  cudaError_t e;

  if (s->ready)
    return 0;
  e = cudaStreamCreateWithFlags (&s->st, cudaStreamNonBlocking);
  if (e == cudaSuccess)
    e = cudaStreamCreateWithFlags (&s->st_k, cudaStreamNonBlocking);
  if (e == cudaSuccess)
    e = cudaStreamCreateWithFlags (&s->st_d, cudaStreamNonBlocking);
  for (int b = 0; b < SLOT_BUFS && e == cudaSuccess; b++)
    for (int i = 0; i < 3 && e == cudaSuccess; i++)
      e = cudaEventCreateWithFlags (&s->ev[b][i], cudaEventDisableTiming);
  if (e != cudaSuccess) {
    slot_destroy (s);
    return gr_gpu_fail (e, "cudaStreamCreate/cudaEventCreate");
  }
  e = cudaHostAlloc ((void **) &s->h, SLOT_BYTES, cudaHostAllocDefault);
  if (e != cudaSuccess) {
    slot_destroy (s);
    return gr_gpu_fail (e, "cudaHostAlloc (staging)");
  }
  e = cudaMalloc ((void **) &s->d, SLOT_BYTES);
  if (e == cudaSuccess)
    e = cudaHostAlloc ((void **) &s->h_ck, SLOT_CKSUMS * 4,
                       cudaHostAllocDefault);
  if (e == cudaSuccess)
    e = cudaMalloc ((void **) &s->d_ck, SLOT_CKSUMS * 4);
  if (e != cudaSuccess) {
    slot_destroy (s);
    return gr_gpu_fail (e, "cudaMalloc (staging)");
  }
  s->ready = 1;
  return 0;
}

void
gr_gpu_release (void)
{
  gr_gpu_jit_drain ();
  pthread_mutex_lock (&eng_lock);
  if (cudaSetDevice (gpu_dev) == cudaSuccess)
    for (int i = 0; i < NSLOTS; i++) {
      struct slot *s = &slots[i];

      if (!s->ready || s->busy)
        continue;
      slot_destroy (s);
    }
  if (cudaSetDevice (gpu_dev) == cudaSuccess)
    for (int i = 0; i < NCOPIERS; i++)
      if (copiers[i].ready && !copiers[i].busy) {
        (void) cudaEventDestroy (copiers[i].ev);
        (void) cudaStreamDestroy (copiers[i].st);
        copiers[i].ready = false;
      }
  pthread_mutex_unlock (&eng_lock);
}

/* Take between 1 and want free slots, waiting for the first.  Slots are
 * set up (allocated) on first use, or before serving
 * (gr_gpu_coder_prepare).  Returns the number taken or a
 * negative errno; *others (if not NULL): whether other callers held
 * slots when these were taken. */
static int
acquire_slots (struct slot **got, int want, bool *others)
{
  int n = 0, r;

  pthread_mutex_lock (&eng_lock);
  for (;;) {
    for (int i = 0; i < NSLOTS && n < want; i++)
      if (!slots[i].busy) {
        slots[i].busy = 1;
        got[n++] = &slots[i];
      }
    if (n > 0)
      break;
    pthread_cond_wait (&eng_cond, &eng_lock);
  }
  if (others) {
    int busy = 0;

    for (int i = 0; i < NSLOTS; i++)
      busy += slots[i].busy;
    *others = busy > n;
  }
  pthread_mutex_unlock (&eng_lock);
  for (int i = 0; i < n; i++) {
    r = slot_setup (got[i]);
    if (r < 0) {
      release_slots (got, n);
      return r;
    }
  }
  return n;
}

/* Test hook: how many slots are set up. */
extern "C" int
gr_gpu_slots_ready (void)
{
  int n = 0;

  pthread_mutex_lock (&eng_lock);
  for (int i = 0; i < NSLOTS; i++)
    n += slots[i].ready;
  pthread_mutex_unlock (&eng_lock);
  return n;
}

/* See gpu.h.  Before serving no slot is in use, so all are taken and set
 * up at once (any in use would be set up already, or on first use). */
int
gr_gpu_coder_prepare (struct gr_coder *c, int *compiled)
{
  struct slot *got[NSLOTS];
  int n, r;

  *compiled = 0;
  if (gr_coder_backend (c) != gr_gpu_backend ())
    return -EINVAL;
  r = set_device ();
  if (r < 0)
    return r;
  n = acquire_slots (got, NSLOTS, NULL);
  if (n < 0)
    return n;
  release_slots (got, n);
  *compiled = gr_gpu_tab_jit ((struct gr_gpu_tab *) gr_coder_priv (c)) == 0;
  return 0;
}

/* ---- jobs -------------------------------------------------------------- */

/* Copies of the direct path: rows (one block's byte range each) that
 * follow each other in both memories merge into one run; runs of equal
 * length at equal distances in both memories merge into one
 * cudaMemcpy2DAsync (a stripe split into byte ranges, or whole stripes
 * whose data or parity blocks are back to back). */
#define PITCH_MAX ((size_t) 1 << 30)

/* The 1D copies of a chunk (one direction) are queued together and
 * enqueued at its end: of a small operation's job (gr_code_many) whose
 * blocks all lie in page-locked memory the engine knows of and make
 * short runs on the host (scattered blocks, as a degraded read's), in one
 * launch of the GPU's own copy kernel that reads and writes host memory
 * through the device's mapping of it (mapped_rows); otherwise one
 * cudaMemcpyAsync each, or a 2D copy.  A CUDA copy costs the host several
 * microseconds; a launch of up to GR_GPU_ROWS_MAX rows about one.  Long
 * runs (a rebuild's stripes, whose blocks lie back to back) go faster by
 * the copy engines (docs/performance.md, "A rebuild's batch by the copy
 * engines").  Test hook gr_gpu_set_mapped: enum gr_gpu_mapped_use; short
 * runs average under MAPPED_RUN bytes. */
#define MAPPED_RUN ((size_t) 128 << 10)
static int mapped_copies = GR_GPU_MAPPED_SHORT_RUNS;
GR_GPU_TEST_HOOK (int, gr_gpu_set_mapped, mapped_copies)

/* Does the device map page-locked host memory at the host's addresses
 * (asked once)? */
static bool
device_maps_host (void)
{
  static int can = -1;          /* not asked yet */
  int v = __atomic_load_n (&can, __ATOMIC_RELAXED);

  if (v < 0) {
    int a = 0, b = 0;

    if (cudaDeviceGetAttribute (&a, cudaDevAttrUnifiedAddressing,
                                gpu_dev) != cudaSuccess ||
        cudaDeviceGetAttribute (&b,
                                cudaDevAttrCanUseHostPointerForRegisteredMem,
                                gpu_dev) != cudaSuccess) {
      (void) cudaGetLastError ();
      a = 0;
    }
    v = a && b;
    __atomic_store_n (&can, v, __ATOMIC_RELAXED);
  }
  return v;
}

/* May the copy kernel use host pointers as they are? */
static bool
mapped_rows (void)
{
  return device_maps_host () &&
    __atomic_load_n (&mapped_copies, __ATOMIC_RELAXED);
}

/* Direct jobs coded where their blocks are (run_gathered): where every
 * block of every direct job of a submission lies in page-locked memory
 * the engine knows of, the device maps it, the blocks suit the generic
 * kernel as they are and its table has at most half as many output rows
 * as inputs (gather_ok), and they are GATHER_BYTES_MAX bytes or fewer in
 * all.  Test hook gr_gpu_set_gather: enum gr_gpu_gather_use. */
static int gather_use = GR_GPU_GATHER_RULE;
GR_GPU_TEST_HOOK (int, gr_gpu_set_gather, gather_use)
#define GATHER_BYTES_MAX SLOT_BYTES  /* of a submission's direct jobs'
                                     * blocks */

/* Do the rows of a job (na inputs, nb outputs, len bytes each) make runs
 * shorter than MAPPED_RUN on average, blocks that follow each other on
 * the host merging into one run (copier_row)? */
static bool
short_runs (const uint8_t *const *a, size_t na, const uint8_t *const *b,
            size_t nb, size_t len)
{
  size_t runs = (na > 0) + (nb > 0);

  for (size_t i = 1; i < na; i++)
    runs += a[i] != a[i - 1] + len;
  for (size_t i = 1; i < nb; i++)
    runs += b[i] != b[i - 1] + len;
  return runs > 0 && (na + nb) * len < runs * MAPPED_RUN;
}

/* Test hooks (test-gpu): what the engine makes of a span of host memory
 * (enum host_span), and whether the copy kernel would run. */
extern "C" int
gr_gpu_span_state (const void *p, size_t len)
{
  return (int) host_span_state ((const uint8_t *) p, len);
}

extern "C" int
gr_gpu_mapped_ok (void)
{
  return set_device () == 0 && mapped_rows ();
}

struct copier {
  enum cudaMemcpyKind kind;
  cudaStream_t st;
  cudaError_t e;
  bool mapped;                  /* by the copy kernel (mapped_rows) */
  struct gr_gpu_rows q;         /* queued 1D copies, not yet enqueued */
  uint8_t *d1;                  /* current run */
  const uint8_t *s1;
  size_t l1;
  uint8_t *d2;                  /* current 2D copy: h2 runs of w2 bytes */
  const uint8_t *s2;
  size_t w2, h2, dp2, sp2;
  unsigned long long *count;    /* NULL, or copies queued */
};

/* Enqueue the queued 1D copies. */
static void
copier_flush1 (struct copier *c)
{
  cudaError_t e = cudaSuccess;

  if (c->q.n == 0 || c->e != cudaSuccess) {
    c->q.n = 0;
    return;
  }
  if (c->mapped)
    e = gr_gpu_copy_rows (&c->q, c->st);
  else
    for (unsigned i = 0; i < c->q.n && e == cudaSuccess; i++)
      e = cudaMemcpyAsync (c->q.dst[i], c->q.src[i], c->q.len[i], c->kind,
                           c->st);
  c->e = e;
  c->q.n = 0;
}

static void
copier_add1 (struct copier *c, uint8_t *d, const uint8_t *s, size_t l)
{
  if (c->count)
    ++*c->count;
  if (l > UINT_MAX) {           /* never from a chunk; correct anyway */
    copier_flush1 (c);
    if (c->e == cudaSuccess)
      c->e = cudaMemcpyAsync (d, s, l, c->kind, c->st);
    return;
  }
  if (c->q.n == GR_GPU_ROWS_MAX)
    copier_flush1 (c);
  c->q.dst[c->q.n] = d;
  c->q.src[c->q.n] = s;
  c->q.len[c->q.n++] = (unsigned) l;
}

static void
copier_flush2 (struct copier *c)
{
  const bool up = c->kind == cudaMemcpyHostToDevice;
  cudaError_t e = cudaErrorInvalidValue;

  if (c->h2 == 0 || c->e != cudaSuccess) {
    c->h2 = 0;
    return;
  }
  if (c->h2 >= 2 &&
      host_span_ok (up ? c->s2 : c->d2,
                    (c->h2 - 1) * (up ? c->sp2 : c->dp2) + c->w2)) {
    e = cudaMemcpy2DAsync (c->d2, c->dp2, c->s2, c->sp2, c->w2, c->h2,
                           c->kind, c->st);
    if (e == cudaSuccess && c->count)
      ++*c->count;
    if (e == cudaErrorInvalidPitchValue || e == cudaErrorInvalidValue)
      (void) cudaGetLastError ();
  }
  if (e == cudaErrorInvalidPitchValue || e == cudaErrorInvalidValue) {
    e = cudaSuccess;            /* one copy per run (batched) instead */
    for (size_t i = 0; i < c->h2; i++)
      copier_add1 (c, c->d2 + i * c->dp2, c->s2 + i * c->sp2, c->w2);
  }
  if (c->e == cudaSuccess)
    c->e = e;
  c->h2 = 0;
}

static void
copier_run (struct copier *c, uint8_t *d, const uint8_t *s, size_t l)
{
  const uintptr_t ud = (uintptr_t) d, us = (uintptr_t) s;
  const uintptr_t ud2 = (uintptr_t) c->d2, us2 = (uintptr_t) c->s2;

  if (c->mapped) {              /* no strided copies: rows, one launch */
    copier_add1 (c, d, s, l);
    return;
  }
  if (c->h2 == 1 && l == c->w2 && ud > ud2 && us > us2 &&
      ud - ud2 >= l && us - us2 >= l && ud - ud2 <= PITCH_MAX &&
      us - us2 <= PITCH_MAX) {
    c->dp2 = ud - ud2;
    c->sp2 = us - us2;
    c->h2 = 2;
    return;
  }
  if (c->h2 >= 2 && l == c->w2 && ud == ud2 + c->h2 * c->dp2 &&
      us == us2 + c->h2 * c->sp2) {
    c->h2++;
    return;
  }
  copier_flush2 (c);
  c->d2 = d;
  c->s2 = s;
  c->w2 = l;
  c->h2 = 1;
}

static void
copier_row (struct copier *c, uint8_t *d, const uint8_t *s, size_t l)
{
  /* Rows back to back in both memories merge, unless the merged run
   * would leave one page-locked allocation on the host side (two
   * allocations can lie back to back: one CUDA copy over both is
   * refused; the copy kernel, which reaches every row through the
   * device's mapping, does not mind). */
  if (c->l1 && d == c->d1 + c->l1 && s == c->s1 + c->l1 &&
      (c->mapped ||
       host_span_ok (c->kind == cudaMemcpyHostToDevice ? c->s1 : c->d1,
                     c->l1 + l))) {
    c->l1 += l;
    return;
  }
  if (c->l1)
    copier_run (c, c->d1, c->s1, c->l1);
  c->d1 = d;
  c->s1 = s;
  c->l1 = l;
}

static cudaError_t
copier_end (struct copier *c)
{
  if (c->l1)
    copier_run (c, c->d1, c->s1, c->l1);
  c->l1 = 0;
  copier_flush2 (c);
  copier_flush1 (c);
  return c->e;
}

static void
copier_init (struct copier *c, enum cudaMemcpyKind kind, cudaStream_t st)
{
  memset (c, 0, sizeof *c);
  c->kind = kind;
  c->st = st;
  c->e = cudaSuccess;
}

struct job {
  const struct gr_gpu_tab *tab;
  int col0, ncols, nrows, acc, direct;
  int mapped;                   /* direct, and its rows copied by the copy
                                 * kernel (copier_flush1) */
  int gather;                   /* direct, and may be coded where its
                                 * blocks are (gather_ok) */
  int out_pinned;               /* staged path: outputs page-locked, so
                                 * downloaded straight into them */
  const uint8_t *const *in;     /* nstripes * ncols */
  uint8_t *const *out;          /* nstripes * nrows */
  size_t nstripes, len;
  /* An operation in gr_code_many's direct submission whose block
   * checksums the GPU computes: each stripe's place in the operation's
   * cksums (NULL: an operation without), or NULL; the block of each
   * input and output row (NULL: an encode's, in order). */
  uint32_t *const *ck;
  const int *ck_in, *ck_out;
};

struct chunk {
  size_t s0, ns, o0, w, wp;
};

/* The chunk of job j from stripe s0, byte o0: at most cs stripes, w
 * bytes of each block. */
static struct chunk
chunk_at (const struct job *j, size_t s0, size_t o0, size_t cs, size_t w)
{
  struct chunk ch;

  ch.s0 = s0;
  ch.ns = j->nstripes - s0 < cs ? j->nstripes - s0 : cs;
  ch.o0 = o0;
  ch.w = j->len - o0 < w ? j->len - o0 : w;
  ch.wp = gr_gpu_padlen (j->tab->code, ch.w);
  return ch;
}

/* A chunk's rows of blocks (nb a stripe: the job's inputs or outputs):
 * bytes [o0, o0 + w) of each block of stripes s0 .. s0 + ns - 1, in a
 * packed buffer as ns * nb rows wp bytes apart. */

/* Gather them into the packed host buffer p, each zero-padded to wp. */
static void
rows_pack (uint8_t *p, const uint8_t *const *blocks, int nb,
           const struct chunk *ch)
{
  const size_t pad = ch->wp - ch->w;

  for (size_t s = 0; s < ch->ns; s++)
    for (int c = 0; c < nb; c++) {
      uint8_t *dst = p + (s * nb + c) * ch->wp;

      memcpy (dst, blocks[(ch->s0 + s) * nb + c] + ch->o0, ch->w);
      if (pad)
        memset (dst + ch->w, 0, pad);
    }
}

/* Scatter them from the packed host buffer p into the blocks. */
static void
rows_unpack (uint8_t *const *blocks, int nb, const uint8_t *p,
             const struct chunk *ch)
{
  for (size_t s = 0; s < ch->ns; s++)
    for (int c = 0; c < nb; c++)
      memcpy (blocks[(ch->s0 + s) * nb + c] + ch->o0,
              p + (s * nb + c) * ch->wp, ch->w);
}

/* Queue their copies on cp, to the packed device buffer dev from the
 * blocks, or back into the blocks (outputs), as cp's kind says. */
static void
rows_copy (struct copier *cp, uint8_t *dev, const uint8_t *const *blocks,
           int nb, const struct chunk *ch)
{
  const bool up = cp->kind == cudaMemcpyHostToDevice;

  for (size_t s = 0; s < ch->ns; s++)
    for (int c = 0; c < nb; c++) {
      uint8_t *h = (uint8_t *) blocks[(ch->s0 + s) * nb + c] + ch->o0;
      uint8_t *d = dev + (s * nb + c) * ch->wp;

      if (up)
        copier_row (cp, d, h, ch->w);
      else
        copier_row (cp, h, d, ch->w);
    }
}

/* Is p (memory the engine does not know of) page-locked, as CUDA says
 * (by someone else, such as a test)? */
static int
is_pinned (const void *p)
{
  struct cudaPointerAttributes a;

  if (cudaPointerGetAttributes (&a, p) != cudaSuccess) {
    (void) cudaGetLastError ();
    return 0;
  }
  return a.type == cudaMemoryTypeHost;
}

static int
chunk_start (const struct job *j, struct slot *sl, const struct chunk *ch)
{
  const size_t in_bytes = ch->ns * j->ncols * ch->wp;
  const size_t out_bytes = ch->ns * j->nrows * ch->wp;
  uint8_t *h_in = sl->h, *h_out = sl->h + in_bytes;
  uint8_t *d_in = sl->d, *d_out = sl->d + in_bytes;
  cudaError_t e = cudaSuccess;

  rows_pack (h_in, j->in, j->ncols, ch);
  if (j->acc)
    rows_pack (h_out, (const uint8_t *const *) j->out, j->nrows, ch);
  e = cudaMemcpyAsync (d_in, h_in, in_bytes + (j->acc ? out_bytes : 0),
                       cudaMemcpyHostToDevice, sl->st);
  if (e != cudaSuccess)
    return gr_gpu_fail (e, "cudaMemcpyAsync (upload)");

  e = gr_gpu_launch (j->tab, j->col0, j->ncols, j->acc, d_in, d_out,
                     ch->ns, ch->wp, sl->st);
  if (e != cudaSuccess)
    return gr_gpu_fail (e, "kernel launch");

  if (j->out_pinned) {
    struct copier cp;

    copier_init (&cp, cudaMemcpyDeviceToHost, sl->st);
    rows_copy (&cp, d_out, (const uint8_t *const *) j->out, j->nrows, ch);
    e = copier_end (&cp);
  }
  else
    e = cudaMemcpyAsync (h_out, d_out, out_bytes, cudaMemcpyDeviceToHost,
                         sl->st);
  if (e != cudaSuccess)
    return gr_gpu_fail (e, "cudaMemcpyAsync (download)");
  return 0;
}

static int
chunk_finish (const struct job *j, struct slot *sl, const struct chunk *ch)
{
  const size_t in_bytes = ch->ns * j->ncols * ch->wp;
  const uint8_t *h_out = sl->h + in_bytes;
  cudaError_t e;

  e = cudaStreamSynchronize (sl->st);
  if (e != cudaSuccess)
    return gr_gpu_fail (e, "cudaStreamSynchronize (copy or kernel)");
  if (j->out_pinned)
    return 0;                   /* downloaded in place */
  rows_unpack (j->out, j->nrows, h_out, ch);
  return 0;
}

/* May the batch's blocks (len bytes each) be copied directly?  Every
 * block is looked up in the engine's list (host_span_state): its own
 * allocations and registered ranges in use are page-locked, a block
 * touching a registered range not in use never is (CUDA would copy the
 * registration's old pages).  Of the others a sample is asked of CUDA
 * (the first, the last and some between): a wrong guess there only costs
 * speed, as CUDA copies ordinary memory correctly too, through its own
 * staging. */
static int
all_pinned (const uint8_t *const *p, size_t n, size_t len, int *known)
{
  size_t ask[PIN_SAMPLES], nask = 0;
  bool unknown = false;

  pthread_rwlock_rdlock (&hostreg_lock);
  for (size_t i = 0; i < n; i++)
    switch (host_span_state_locked (p[i], len)) {
    case SPAN_STAGE:
      pthread_rwlock_unlock (&hostreg_lock);
      return 0;
    case SPAN_UNKNOWN:
      unknown = true;
      if (nask < PIN_SAMPLES)
        ask[nask++] = i;
      else
        ask[PIN_SAMPLES - 1] = i;       /* the last unknown one */
      break;
    case SPAN_PINNED:
      break;
    }
  pthread_rwlock_unlock (&hostreg_lock);
  for (size_t i = 0; i < nask; i++)
    if (!is_pinned (p[ask[i]]))
      return 0;
  if (known)
    *known = !unknown;
  return 1;
}

/* Does job j, coded where its blocks are, keep them in the slot's device
 * memory as they pass: for its checksums, or for its passes after the
 * first to read their inputs there (each input crosses the link once)? */
static bool
gather_keeps (const struct job *j)
{
  return j->ck || j->tab->npad > gr_gpu_gather_mb (j->tab);
}

/* May job j (direct; known: every block in memory the engine knows is
 * page-locked) be coded where its blocks are (run_gathered)?  Its table
 * of at most half as many output rows as inputs (as 10+4's encodes and
 * 16+16's reconstructs of up to 8, faster so in an array; 8+8's encodes
 * and reconstructs of 8 slower, 16+16's encodes no faster:
 * docs/performance.md, "8+8 and 16+16 coded where their blocks are"),
 * its block length a multiple of the kernel's unit (nothing padded),
 * every block 16-byte aligned, and a stripe's blocks within the slot's
 * device memory where they are kept (gather_keeps). */
static bool
gather_ok (const struct job *j, bool known)
{
  const size_t unit = j->tab->code == GR_CODE_RS ? 32 : GR_CRS_GROUP;
  const size_t nin = j->nstripes * j->ncols, nout = j->nstripes * j->nrows;
  const int use = __atomic_load_n (&gather_use, __ATOMIC_RELAXED);
  uintptr_t bits = 0;

  if (!known || use == GR_GPU_GATHER_NEVER || !device_maps_host () ||
      (use == GR_GPU_GATHER_RULE && 2 * j->tab->nrows > j->tab->ncols) ||
      j->len % unit ||
      (size_t) (j->ncols + j->nrows) > GR_GPU_GATHER_MAX ||
      (size_t) (j->ncols + j->nrows) * j->len > SLOT_BYTES)
    return false;
  for (size_t i = 0; i < nin; i++)
    bits |= (uintptr_t) j->in[i];
  for (size_t i = 0; i < nout; i++)
    bits |= (uintptr_t) j->out[i];
  return (bits & 15) == 0;
}

/* One chunk of the direct path through device buffer b of slot sl (at
 * d_in; the outputs follow the inputs): uploads on sl->st (after the
 * buffer's previous download when reuse), the kernel on sl->st_k, the
 * downloads on sl->st_d, chained by the buffer's events. */
static int
chunk_direct (const struct job *j, struct slot *sl, size_t b, uint8_t *d_in,
              bool reuse, const struct chunk *ch, uint32_t *d_ck)
{
  uint8_t *d_out = d_in + ch->ns * j->ncols * ch->wp;
  struct copier cp;
  cudaError_t e = cudaSuccess;

  if (reuse)
    e = cudaStreamWaitEvent (sl->st, sl->ev[b][2], 0);
  if (e != cudaSuccess)
    return gr_gpu_fail (e, "cudaStreamWaitEvent");
  copier_init (&cp, cudaMemcpyHostToDevice, sl->st);
  cp.count = &sl->ncopies;
  cp.mapped = j->mapped;
  rows_copy (&cp, d_in, j->in, j->ncols, ch);
  if (j->acc)
    rows_copy (&cp, d_out, (const uint8_t *const *) j->out, j->nrows, ch);
  e = copier_end (&cp);
  if (e == cudaSuccess)
    e = cudaEventRecord (sl->ev[b][0], sl->st);
  if (e == cudaSuccess)
    e = cudaStreamWaitEvent (sl->st_k, sl->ev[b][0], 0);
  if (e != cudaSuccess)
    return gr_gpu_fail (e, "cudaMemcpyAsync (upload)");
  e = gr_gpu_launch (j->tab, j->col0, j->ncols, j->acc, d_in, d_out,
                     ch->ns, ch->wp, sl->st_k);
  if (e != cudaSuccess)
    return gr_gpu_fail (e, "kernel launch");
  if (d_ck) {
    /* The chunk's blocks' checksums, at their places in the job's: the
     * inputs' then the outputs' of each stripe. */
    const size_t nblk = j->len / GR_SUM_BLOCK;
    const size_t per_s = (size_t) (j->ncols + j->nrows) * nblk;
    uint32_t *at = d_ck + ch->s0 * per_s + ch->o0 / GR_SUM_BLOCK;

    e = gr_gpu_cksum_stripes (d_in, ch->wp, (unsigned) ch->ns,
                              (unsigned) j->ncols, (unsigned) j->nrows,
                              (unsigned) (ch->w / GR_SUM_BLOCK), per_s, nblk,
                              at, sl->st_k);
    if (e != cudaSuccess)
      return gr_gpu_fail (e, "checksum kernel launch");
  }
  e = cudaEventRecord (sl->ev[b][1], sl->st_k);
  if (e == cudaSuccess)
    e = cudaStreamWaitEvent (sl->st_d, sl->ev[b][1], 0);
  if (e == cudaSuccess) {
    copier_init (&cp, cudaMemcpyDeviceToHost, sl->st_d);
    cp.count = &sl->ncopies;
    cp.mapped = j->mapped;
    rows_copy (&cp, d_out, (const uint8_t *const *) j->out, j->nrows, ch);
    e = copier_end (&cp);
  }
  if (e == cudaSuccess)
    e = cudaEventRecord (sl->ev[b][2], sl->st_d);
  if (e != cudaSuccess)
    return gr_gpu_fail (e, "cudaMemcpyAsync (download)");
  return 0;
}

/* The direct path's end: wait for the slot's three streams, release it;
 * r, or the failure of a stream. */
static int
direct_end (struct slot *sl, int r)
{
  cudaError_t e1 = cudaStreamSynchronize (sl->st);
  cudaError_t e2 = cudaStreamSynchronize (sl->st_k);
  cudaError_t e3 = cudaStreamSynchronize (sl->st_d);

  if (r == 0 && (e1 != cudaSuccess || e2 != cudaSuccess ||
                 e3 != cudaSuccess))
    r = gr_gpu_fail (e1 != cudaSuccess ? e1 : e2 != cudaSuccess ? e2 : e3,
                     "cudaStreamSynchronize (copy or kernel)");
  release_slots (&sl, 1);
  return r;
}

/* The direct path: every block is page-locked.  One slot; its device
 * memory holds up to SLOT_BUFS chunks of about `chunk` bytes of data
 * (small, so that the first upload and the last download, which nothing
 * overlaps, are short; in batches of 4 chunks or more the last chunk's
 * worth goes in chunks of half of what is left each, down to an eighth of
 * a chunk, shortening the last download further without many more
 * copies).  Uploads run in order
 * on one stream, kernels on a second, downloads on a third, chained by
 * events per chunk buffer, so the link's two directions and the kernels
 * overlap and the host enqueues the whole batch without waiting. */
static int
run_direct (struct job *j)
{
  const enum gr_code code = j->tab->code;
  const size_t unit = code == GR_CODE_RS ? 32 : GR_CRS_GROUP;
  const size_t n = (size_t) (j->ncols + j->nrows);
  const size_t cap = SLOT_BYTES / 4;    /* device bytes per chunk, most */
  const size_t data = j->nstripes * j->ncols * j->len;
  size_t chunk = direct_chunk;
  size_t cs, w, wp, pieces, chunk_dev, nb, ci = 0, s0 = 0, o0 = 0;
  struct slot *sl;
  bool shared;
  int r = 0, taper;

  r = acquire_slots (&sl, 1, &shared);
  if (r < 0)
    return r;
  r = 0;
  if (chunk == 0 && shared) {
    /* Another batch on the link: this one's first upload overlaps its
     * downloads, so fewer, larger copies. */
    chunk = data / 4;
    chunk = chunk < CHUNK_LO ? CHUNK_LO
      : chunk > CHUNK_SHARED_HI ? CHUNK_SHARED_HI : chunk;
    __atomic_add_fetch (&direct_shared_n, 1, __ATOMIC_RELAXED);
  }
  else if (chunk == 0) {
    /* Outputs at least as large as the inputs: the downloads bound the
     * batch, and they start only once the first chunk is up, so a
     * smaller first chunk pays more than the copies it adds. */
    chunk = data / (j->nrows >= j->ncols ? 16 : 8);
    chunk = chunk < CHUNK_LO ? CHUNK_LO : chunk > CHUNK_HI ? CHUNK_HI : chunk;
  }
  /* The tail: from the last chunk's worth on, each chunk half of what is
   * left (at least an eighth of a chunk).  Measured on the H200 (bench-gpu
   * (b), three runs each): 10+4 at 64 MiB 51.1-51.2 GB/s, against
   * 50.2-50.4 with the last two chunks' worth in quarter-size chunks and
   * 50.2-50.3 with no finer tail (pinned H2D 55.5); 32 MiB 49.0-49.3
   * against 48.1-48.4; 8+8 even.  Only batches of several chunks get it:
   * a small batch cut into finer chunks pays more launches and copies
   * than it saves (measured with quarter chunks: 1-4 MiB batches up to 2x
   * slower, one 64 KiB-block stripe 54 us against 44). */
  taper = data >= 4 * chunk;
  if ((size_t) j->ncols * j->len <= chunk) {
    cs = chunk / ((size_t) j->ncols * j->len);
    w = j->len;
  }
  else {
    size_t wmax = chunk / j->ncols;

    if (wmax < DIRECT_MIN)
      wmax = DIRECT_MIN;
    cs = 1;
    pieces = (j->len + wmax - 1) / wmax;
    w = (j->len + pieces - 1) / pieces;
    w = (w + unit - 1) / unit * unit;
  }
  if (cs > j->nstripes)
    cs = j->nstripes;
  wp = gr_gpu_padlen (code, w);
  while (cs > 1 && cs * n * wp > cap)
    cs /= 2;
  if (n * wp > cap) {           /* very many blocks: narrower pieces */
    w = cap / n / unit * unit;
    if (w == 0)
      w = unit;
    wp = gr_gpu_padlen (code, w);
  }
  chunk_dev = cs * n * wp;
  nb = SLOT_BYTES / chunk_dev;
  if (nb > SLOT_BUFS)
    nb = SLOT_BUFS;

  while (s0 < j->nstripes && r == 0) {
    const size_t b = ci++ % nb;
    const size_t left = ((j->nstripes - s0) * j->len - o0) * j->ncols;
    size_t ns = j->nstripes - s0 < cs ? j->nstripes - s0 : cs;
    size_t cw = j->len - o0 < w ? j->len - o0 : w;
    struct chunk ch;

    if (taper && left <= chunk) {       /* halving */
      const size_t want = left / 2 > chunk / 8 ? left / 2 : chunk / 8;
      const size_t per = (size_t) j->ncols * j->len;

      if (ns > 1) {
        const size_t q = (want + per - 1) / per;
        ns = ns < q ? ns : q > 0 ? q : 1;
      }
      else if (cw > unit) {
        const size_t q = ((want + j->ncols - 1) / j->ncols + unit - 1)
          / unit * unit;
        cw = cw < q ? cw : q;
      }
    }
    ch.s0 = s0;
    ch.ns = ns;
    ch.o0 = o0;
    ch.w = cw;
    ch.wp = gr_gpu_padlen (code, cw);
    r = chunk_direct (j, sl, b, sl->d + b * chunk_dev, ci > nb, &ch, NULL);
    if (r < 0)
      break;
    /* Next chunk: the rest of this stripe, or the next stripes (a chunk
     * narrower than the block is always one stripe). */
    if (o0 + cw < j->len)
      o0 += cw;
    else {
      o0 = 0;
      s0 += ns;
    }
  }
  return direct_end (sl, r);
}

static int
run_job (struct job *j)
{
  const enum gr_code code = j->tab->code;
  const size_t unit = code == GR_CODE_RS ? 32 : GR_CRS_GROUP;
  const size_t lp = gr_gpu_padlen (code, j->len);
  const size_t per_stripe = (size_t) (j->ncols + j->nrows) * lp;
  struct slot *got[NSLOTS];
  struct chunk pend[NSLOTS];
  int has[NSLOTS] = { 0 };
  size_t target, cs, w, nchunks, ci = 0;
  int nslots, r = 0;

  if (j->nstripes == 0 || j->len == 0)
    return 0;
  r = set_device ();
  if (r < 0)
    return r;

  /* Large batches: have the matrix's XOR-network kernel compiled once,
   * in the background (the generic kernel runs until it is ready, and
   * stays in use if it cannot be built). */
  if (!j->acc && j->ncols == j->tab->ncols &&
      j->nstripes * j->ncols * j->len >= gr_gpu_jit_min)
    gr_gpu_tab_jit_start ((struct gr_gpu_tab *) j->tab);

  /* Page-locked blocks of at least DIRECT_MIN bytes go straight to the
   * device. */
  if (j->len >= DIRECT_MIN &&
      all_pinned (j->in, j->nstripes * j->ncols, j->len, NULL) &&
      all_pinned ((const uint8_t *const *) j->out, j->nstripes * j->nrows,
                  j->len, NULL)) {
    j->direct = 1;
    return run_direct (j);
  }

  /* Staged path: at least four chunks when the batch is large enough,
   * for overlap. */
  target = j->nstripes * per_stripe / NSLOTS;
  if (target < CHUNK_MIN)
    target = CHUNK_MIN;
  if (target > SLOT_BYTES)
    target = SLOT_BYTES;
  if (per_stripe <= target) {
    cs = target / per_stripe;
    w = j->len;
  }
  else {
    cs = 1;
    w = target / ((size_t) (j->ncols + j->nrows) * unit) * unit;
    if (w == 0)
      w = unit;
  }
  nchunks = (j->nstripes + cs - 1) / cs * ((j->len + w - 1) / w);
  j->direct = 0;
  /* Outputs in page-locked memory (a write's parity in the plugin's
   * scratch, its data in the request) come down straight into place:
   * only the inputs pay the CPU copy. */
  j->out_pinned = !j->acc && j->len >= DIRECT_MIN &&
    all_pinned ((const uint8_t *const *) j->out, j->nstripes * j->nrows,
                j->len, NULL);

  nslots = acquire_slots (got, nchunks < NSLOTS ? (int) nchunks : NSLOTS,
                           NULL);
  if (nslots < 0)
    return nslots;

  for (size_t s0 = 0; s0 < j->nstripes && r == 0; s0 += cs)
    for (size_t o0 = 0; o0 < j->len && r == 0; o0 += w) {
      const int k = (int) (ci++ % nslots);
      const struct chunk ch = chunk_at (j, s0, o0, cs, w);

      if (has[k]) {
        has[k] = 0;
        r = chunk_finish (j, got[k], &pend[k]);
        if (r < 0)
          break;
      }
      r = chunk_start (j, got[k], &ch);
      pend[k] = ch;
      has[k] = 1;
    }
  for (int k = 0; k < nslots; k++)
    if (has[k]) {
      if (r == 0)
        r = chunk_finish (j, got[k], &pend[k]);
      else
        (void) cudaStreamSynchronize (got[k]->st);
    }
  release_slots (got, nslots);
  return r;
}

/* The block checksums of a direct submission's encodes (ck_at of them
 * in sl's device area, job after job): down after the last chunk's
 * kernels, then into their operations.  0 or the failure. */
static int
cksums_back (const struct job *js, size_t nj, struct slot *sl, size_t ck_at)
{
  cudaError_t e = cudaMemcpyAsync (sl->h_ck, sl->d_ck, ck_at * 4,
                                   cudaMemcpyDeviceToHost, sl->st_d);
  size_t at = 0;

  if (e == cudaSuccess)
    e = cudaStreamSynchronize (sl->st_d);
  if (e != cudaSuccess)
    return gr_gpu_fail (e, "cudaMemcpyAsync (checksums)");
  for (size_t x = 0; x < nj; x++) {
    const struct job *j = &js[x];
    const size_t per_s = (size_t) (j->ncols + j->nrows) *
      (j->len / GR_SUM_BLOCK);

    const size_t nblk = j->len / GR_SUM_BLOCK;

    if (j->ck == NULL)
      continue;
    for (size_t s = 0; s < j->nstripes; s++, at += per_s) {
      if (j->ck[s] == NULL)
        continue;
      if (j->ck_in == NULL) {
        memcpy (j->ck[s], sl->h_ck + at, per_s * sizeof *sl->h_ck);
        continue;
      }
      /* A reconstruct's: its survivors' then its erased blocks'. */
      for (int i = 0; i < j->ncols + j->nrows; i++)
        memcpy (j->ck[s] + (size_t) (i < j->ncols ? j->ck_in[i]
                                     : j->ck_out[i - j->ncols]) * nblk,
                sl->h_ck + at + (size_t) i * nblk, nblk * sizeof *sl->h_ck);
    }
  }
  return 0;
}

/* gr_code_many's account (gr_gpu_many_account), atomic. */
static struct gr_gpu_many_stats many_st;

/* Add to a counter of the account; with `since` (gr_now), the
 * nanoseconds from then until now. */
static void
many_add (unsigned long long *v, unsigned long long x)
{
  __atomic_add_fetch (v, x, __ATOMIC_RELAXED);
}

static void
many_add_since (unsigned long long *v, double since)
{
  many_add (v, (unsigned long long) ((gr_now () - since) * 1e9));
}

void
gr_gpu_many_account (struct gr_gpu_many_stats *st)
{
  st->calls = __atomic_load_n (&many_st.calls, __ATOMIC_RELAXED);
  st->direct_jobs = __atomic_load_n (&many_st.direct_jobs, __ATOMIC_RELAXED);
  st->staged_jobs = __atomic_load_n (&many_st.staged_jobs, __ATOMIC_RELAXED);
  st->summed_jobs = __atomic_load_n (&many_st.summed_jobs, __ATOMIC_RELAXED);
  st->mapped_jobs = __atomic_load_n (&many_st.mapped_jobs, __ATOMIC_RELAXED);
  st->gathered_jobs = __atomic_load_n (&many_st.gathered_jobs,
                                       __ATOMIC_RELAXED);
  st->slot_ns = __atomic_load_n (&many_st.slot_ns, __ATOMIC_RELAXED);
  st->enqueue_ns = __atomic_load_n (&many_st.enqueue_ns, __ATOMIC_RELAXED);
  st->launch_ns = __atomic_load_n (&many_st.launch_ns, __ATOMIC_RELAXED);
  st->wait_ns = __atomic_load_n (&many_st.wait_ns, __ATOMIC_RELAXED);
  st->staged_ns = __atomic_load_n (&many_st.staged_ns, __ATOMIC_RELAXED);
  st->cksums_ns = __atomic_load_n (&many_st.cksums_ns, __ATOMIC_RELAXED);
  st->prep_ns = __atomic_load_n (&many_st.prep_ns, __ATOMIC_RELAXED);
  st->total_ns = __atomic_load_n (&many_st.total_ns, __ATOMIC_RELAXED);
  st->copies = __atomic_load_n (&many_st.copies, __ATOMIC_RELAXED);
  st->chunks = __atomic_load_n (&many_st.chunks, __ATOMIC_RELAXED);
}

/* The end of a direct submission begun at t0 on slot sl (taken at t1,
 * everything enqueued now; r its outcome so far): the block checksums
 * brought back (ck_at of them), the slot's streams waited for and the
 * slot given back, the account; r, or the first failure. */
static int
many_end (const struct job *js, size_t nj, struct slot *sl, int r,
          size_t ck_at, double t0, double t1)
{
  const double tq = gr_now ();
  double t2;

  if (r == 0 && ck_at > 0)
    r = cksums_back (js, nj, sl, ck_at);
  t2 = gr_now ();
  r = direct_end (sl, r);
  many_add (&many_st.slot_ns, (unsigned long long) ((t1 - t0) * 1e9));
  many_add (&many_st.enqueue_ns, (unsigned long long) ((tq - t1) * 1e9));
  many_add (&many_st.cksums_ns, (unsigned long long) ((t2 - tq) * 1e9));
  many_add_since (&many_st.wait_ns, t2);
  many_add (&many_st.direct_jobs, nj);
  return r;
}

/* Several jobs in one submission (gr_code_many), every block
 * page-locked: one slot, its SLOT_BUFS device buffers taken in turn by
 * the jobs' chunks (as many whole stripes as fit a buffer, or byte
 * ranges of one stripe), on its three streams as in run_direct, and one
 * wait at the end for all.  Small jobs (a degraded read's stripe) then
 * cost their copies and a launch, not a slot, a wait and a wake-up
 * each. */
static int
run_many (const struct job *js, size_t nj)
{
  const size_t bufsz = SLOT_BYTES / SLOT_BUFS;
  struct slot *sl;
  size_t ci = 0, ck_at = 0;
  double t0 = gr_now (), t1;
  int r;

  r = acquire_slots (&sl, 1, NULL);
  if (r < 0)
    return r;
  t1 = gr_now ();
  sl->ncopies = 0;
  r = 0;
  for (size_t x = 0; x < nj && r == 0; x++) {
    const struct job *j = &js[x];
    const enum gr_code code = j->tab->code;
    const size_t unit = code == GR_CODE_RS ? 32 : GR_CRS_GROUP;
    const size_t n = (size_t) (j->ncols + j->nrows);
    size_t cs = 1, w = j->len, s0 = 0, o0 = 0;

    if (n * gr_gpu_padlen (code, j->len) <= bufsz) {
      cs = bufsz / (n * gr_gpu_padlen (code, j->len));
      if (cs > j->nstripes)
        cs = j->nstripes;
    }
    else {
      w = bufsz / n / unit * unit;
      while (w > unit && n * gr_gpu_padlen (code, w) > bufsz)
        w -= unit;
      if (j->ck)                /* whole checksum blocks a chunk */
        w = w / GR_SUM_BLOCK * GR_SUM_BLOCK;
    }
    while (s0 < j->nstripes && r == 0) {
      const size_t b = ci++ % SLOT_BUFS;
      const struct chunk ch = chunk_at (j, s0, o0, cs, w);

      r = chunk_direct (j, sl, b, sl->d + b * bufsz, ci > SLOT_BUFS, &ch,
                        j->ck ? sl->d_ck + ck_at : NULL);
      if (o0 + ch.w < j->len)
        o0 += ch.w;
      else {
        o0 = 0;
        s0 += ch.ns;
      }
    }
    if (j->ck)
      ck_at += j->nstripes * n * (j->len / GR_SUM_BLOCK);
  }
  many_add (&many_st.copies, sl->ncopies);
  many_add (&many_st.chunks, ci);
  {
    unsigned long long mapped = 0;

    for (size_t x = 0; x < nj; x++)
      mapped += js[x].mapped != 0;
    many_add (&many_st.mapped_jobs, mapped);
  }
  return many_end (js, nj, sl, r, ck_at, t0, t1);
}

/* Several jobs in one submission, every block in page-locked memory the
 * device maps (gather_ok): no copies at all.  The generic kernel reads
 * each stripe's inputs and writes its outputs where they are, through
 * the mapping, their addresses in the launch's table; a job whose block
 * checksums the GPU computes, or whose table takes more than one pass,
 * has its blocks also kept in the slot's device memory as they pass,
 * where the checksum kernel and the later passes read them.  All
 * on one stream: a launch (and one for the checksums) for each group of
 * stripes that fits the table (and the device memory), one wait at the
 * end.  The host's part is a few launches, where run_many's is copies,
 * launches and events for each chunk of every job. */
static int
run_gathered (const struct job *js, size_t nj)
{
  struct gr_gpu_gather g;
  struct slot *sl;
  size_t ck_at = 0, launches = 0;
  double t0 = gr_now (), t1, in_launch = 0;
  int r;

  r = acquire_slots (&sl, 1, NULL);
  if (r < 0)
    return r;
  r = 0;
  t1 = gr_now ();
  for (size_t x = 0; x < nj && r == 0; x++) {
    const struct job *j = &js[x];
    const size_t n = (size_t) (j->ncols + j->nrows);
    const size_t nblk = j->len / GR_SUM_BLOCK, per_s = n * nblk;
    const bool keep = gather_keeps (j);
    size_t cs = GR_GPU_GATHER_MAX / n;
    cudaError_t e = cudaSuccess;

    if (keep && cs > SLOT_BYTES / (n * j->len))
      cs = SLOT_BYTES / (n * j->len);
    for (size_t s0 = 0; s0 < j->nstripes && e == cudaSuccess; s0 += cs) {
      const size_t ns = j->nstripes - s0 < cs ? j->nstripes - s0 : cs;
      double tl;

      for (size_t s = 0; s < ns; s++) {
        for (int i = 0; i < j->ncols; i++)
          g.p[s * j->ncols + i] = j->in[(s0 + s) * j->ncols + i];
        for (int i = 0; i < j->nrows; i++)
          g.p[ns * j->ncols + s * j->nrows + i] =
            j->out[(s0 + s) * j->nrows + i];
      }
      tl = gr_now ();
      e = gr_gpu_launch_gather (j->tab, j->col0, j->ncols, j->acc, &g,
                                keep ? sl->d : NULL, ns, j->len, sl->st_d);
      in_launch += gr_now () - tl;
      launches++;
      if (e != cudaSuccess) {
        r = gr_gpu_fail (e, "kernel launch (blocks where they are)");
        break;
      }
      if (j->ck) {
        e = gr_gpu_cksum_stripes (sl->d, j->len, (unsigned) ns,
                                  (unsigned) j->ncols, (unsigned) j->nrows,
                                  (unsigned) nblk, per_s, nblk,
                                  sl->d_ck + ck_at + s0 * per_s, sl->st_d);
        if (e != cudaSuccess)
          r = gr_gpu_fail (e, "checksum kernel launch");
      }
    }
    if (j->ck)
      ck_at += j->nstripes * per_s;
  }
  many_add (&many_st.chunks, launches);
  many_add (&many_st.launch_ns, (unsigned long long) (in_launch * 1e9));
  many_add (&many_st.gathered_jobs, nj);
  return many_end (js, nj, sl, r, ck_at, t0, t1);
}

/* ---- host-to-host copies ------------------------------------------------ */

/* A free copier (set up on first use), waiting for one; -1 (message
 * kept) if one cannot be set up. */
static int
copier_take (void)
{
  int i;

  pthread_mutex_lock (&eng_lock);
  for (;;) {
    for (i = 0; i < NCOPIERS && copiers[i].busy; i++)
      ;
    if (i < NCOPIERS)
      break;
    pthread_cond_wait (&copier_cond, &eng_lock);
  }
  copiers[i].busy = true;
  pthread_mutex_unlock (&eng_lock);
  if (!copiers[i].ready) {
    cudaError_t e = cudaStreamCreateWithFlags (&copiers[i].st,
                                               cudaStreamNonBlocking);

    if (e == cudaSuccess) {
      e = cudaEventCreateWithFlags (&copiers[i].ev, cudaEventBlockingSync |
                                    cudaEventDisableTiming);
      if (e != cudaSuccess)
        (void) cudaStreamDestroy (copiers[i].st);
    }
    if (e != cudaSuccess) {
      gr_gpu_fail (e, "a host copy's stream");
      pthread_mutex_lock (&eng_lock);
      copiers[i].busy = false;
      pthread_cond_signal (&copier_cond);
      pthread_mutex_unlock (&eng_lock);
      return -1;
    }
    copiers[i].ready = true;
  }
  return i;
}

static void
copier_give (int i)
{
  pthread_mutex_lock (&eng_lock);
  copiers[i].busy = false;
  pthread_cond_signal (&copier_cond);
  pthread_mutex_unlock (&eng_lock);
}

/* Copies between page-locked ranges by the copy kernel, which reads and
 * writes host memory through the device's mapping of it: the host's
 * part is a launch and a wait asleep, whatever the bytes. */
extern "C" int
gr_gpu_host_copy (const struct gr_gpu_host_row *rows, size_t n)
{
  struct gr_gpu_rows q;
  cudaError_t e = cudaSuccess;
  size_t bytes = 0, i;
  int c, r;

  for (i = 0; i < n; i++)
    if (rows[i].len > UINT_MAX)
      return -EINVAL;
  r = set_device ();
  if (r < 0)
    return r;
  if (!mapped_rows ())
    return -EAGAIN;
  for (i = 0; i < n; i++)
    if (!host_span_ok ((const uint8_t *) rows[i].dst, rows[i].len) ||
        !host_span_ok ((const uint8_t *) rows[i].src, rows[i].len))
      return -EAGAIN;
  if ((c = copier_take ()) < 0)
    return -EIO;
  q.n = 0;
  for (i = 0; i < n && e == cudaSuccess; i++) {
    q.dst[q.n] = rows[i].dst;
    q.src[q.n] = rows[i].src;
    q.len[q.n++] = (unsigned) rows[i].len;
    bytes += rows[i].len;
    if (q.n == GR_GPU_ROWS_MAX || i + 1 == n) {
      e = gr_gpu_copy_rows (&q, copiers[c].st);
      q.n = 0;
    }
  }
  if (e == cudaSuccess)
    e = cudaEventRecord (copiers[c].ev, copiers[c].st);
  if (e == cudaSuccess)
    e = cudaEventSynchronize (copiers[c].ev);
  if (e != cudaSuccess) {
    /* the stream may hold a failed launch: set it up anew */
    (void) cudaStreamSynchronize (copiers[c].st);
    (void) cudaEventDestroy (copiers[c].ev);
    (void) cudaStreamDestroy (copiers[c].st);
    copiers[c].ready = false;
    copier_give (c);
    return gr_gpu_fail (e, "a host copy");
  }
  copier_give (c);
  __atomic_add_fetch (&hc_st.calls, 1, __ATOMIC_RELAXED);
  __atomic_add_fetch (&hc_st.rows, n, __ATOMIC_RELAXED);
  __atomic_add_fetch (&hc_st.bytes, bytes, __ATOMIC_RELAXED);
  return 0;
}

extern "C" void
gr_gpu_host_copy_account (struct gr_gpu_host_copy_stats *st)
{
  st->calls = __atomic_load_n (&hc_st.calls, __ATOMIC_RELAXED);
  st->rows = __atomic_load_n (&hc_st.rows, __ATOMIC_RELAXED);
  st->bytes = __atomic_load_n (&hc_st.bytes, __ATOMIC_RELAXED);
}

/* ---- backend ----------------------------------------------------------- */

/* A coder's priv and a decode plan's priv are their table on the device
 * (of the parity matrix; of the decode matrix).  tab_new: a new table for
 * matrix (nrows x the coder's k) in *priv; 0 or a negative errno. */
static int
tab_new (struct gr_coder *c, const uint8_t *matrix, int nrows, void **priv)
{
  struct gr_gpu_tab *t;
  int r;

  r = set_device ();
  if (r < 0)
    return r;
  t = (struct gr_gpu_tab *) calloc (1, sizeof *t);
  if (t == NULL)
    return -ENOMEM;
  r = gr_gpu_tab_make (gr_coder_code (c), matrix, nrows, gr_coder_k (c), t);
  if (r < 0) {
    free (t);
    return r;
  }
  *priv = t;
  return 0;
}

static void
tab_delete (struct gr_gpu_tab *t)
{
  if (t == NULL)
    return;
  if (set_device () == 0)
    gr_gpu_tab_free (t);
  free (t);
}

static int
cuda_coder_init (struct gr_coder *c, void **priv)
{
  return tab_new (c, gr_coder_parity_matrix (c), gr_coder_m (c), priv);
}

static void
cuda_coder_fini (struct gr_coder *c, void *priv)
{
  (void) c;
  tab_delete ((struct gr_gpu_tab *) priv);
}

static int
cuda_plan_init (struct gr_coder *c, struct gr_decode *d)
{
  d->priv = NULL;
  return tab_new (c, d->matrix, d->nerased, &d->priv);
}

static void
cuda_plan_fini (struct gr_coder *c, struct gr_decode *d)
{
  (void) c;
  tab_delete ((struct gr_gpu_tab *) d->priv);
  d->priv = NULL;
}

/* Encode and reconstruct: of each stripe of n blocks, the k blocks at
 * in_at (NULL: 0 .. k-1) are the inputs and the nout blocks at out_at
 * (NULL: k .. k+nout-1) the outputs of tab's matrix (nout x k). */
static int
code_stripes (struct gr_coder *c, const struct gr_gpu_tab *tab,
              const int *in_at, const int *out_at, int nout,
              uint8_t *const *blocks, size_t nstripes, size_t len)
{
  const int k = gr_coder_k (c), n = k + gr_coder_m (c);
  const uint8_t **in;
  uint8_t **out;
  struct job j;
  int r;

  in = (const uint8_t **) malloc (nstripes * (k + nout) * sizeof *in);
  if (in == NULL)
    return -ENOMEM;
  out = (uint8_t **) (in + nstripes * k);
  for (size_t s = 0; s < nstripes; s++) {
    for (int i = 0; i < k; i++)
      in[s * k + i] = blocks[s * n + (in_at ? in_at[i] : i)];
    for (int i = 0; i < nout; i++)
      out[s * nout + i] = blocks[s * n + (out_at ? out_at[i] : k + i)];
  }
  memset (&j, 0, sizeof j);
  j.tab = tab;
  j.ncols = k;
  j.nrows = nout;
  j.in = in;
  j.out = out;
  j.nstripes = nstripes;
  j.len = len;
  r = run_job (&j);
  free (in);
  return r;
}

static int
cuda_encode (struct gr_coder *c, uint8_t *const *blocks,
             size_t nstripes, size_t len)
{
  const struct gr_gpu_tab *enc =
    (const struct gr_gpu_tab *) gr_coder_priv (c);

  if (enc == NULL)
    return -EINVAL;
  return code_stripes (c, enc, NULL, NULL, gr_coder_m (c), blocks,
                       nstripes, len);
}

static int
cuda_reconstruct (struct gr_coder *c, const struct gr_decode *d,
                  uint8_t *const *blocks, size_t nstripes, size_t len)
{
  const struct gr_gpu_tab *dec = (const struct gr_gpu_tab *) d->priv;
  struct gr_gpu_tab tmp;
  int r;

  if (dec == NULL) {            /* no plan_init: build the table now */
    r = set_device ();
    if (r < 0)
      return r;
    r = gr_gpu_tab_make (gr_coder_code (c), d->matrix, d->nerased,
                         gr_coder_k (c), &tmp);
    if (r < 0)
      return r;
  }
  r = code_stripes (c, dec ? dec : &tmp, d->survivors, d->erased,
                    d->nerased, blocks, nstripes, len);
  if (dec == NULL)
    gr_gpu_tab_free (&tmp);
  return r;
}

static int
cuda_update (struct gr_coder *c, int data_index,
             const uint8_t *const *delta, uint8_t *const *parity,
             size_t nstripes, size_t len)
{
  const struct gr_gpu_tab *enc =
    (const struct gr_gpu_tab *) gr_coder_priv (c);
  struct job j;

  if (enc == NULL)
    return -EINVAL;
  memset (&j, 0, sizeof j);
  j.tab = enc;
  j.col0 = data_index;
  j.ncols = 1;
  j.nrows = gr_coder_m (c);
  j.acc = 1;
  j.in = delta;
  j.out = parity;
  j.nstripes = nstripes;
  j.len = len;
  return run_job (&j);
}

/* gr_code_many: the operations of one table (the coder's, or one
 * decode plan's) and length merged into one job, whatever request each
 * came from; the jobs whose blocks are all page-locked go in one
 * submission (run_many), the others each through run_job. */
static int
cuda_code_many (struct gr_coder *c, const struct gr_decode *const *d,
                const struct gr_code_op *ops, size_t nops, bool *summed)
{
  const int k = gr_coder_k (c), n = k + gr_coder_m (c);
  const struct gr_gpu_tab *enc =
    (const struct gr_gpu_tab *) gr_coder_priv (c);
  size_t total = 0, x, nj = 0, nd = 0, at = 0, nst = 0, ck_n = 0;
  size_t ck_vals = 0;
  struct job *js;
  const uint8_t **ptrs;
  uint32_t **ckv;
  size_t *job_of;
  char *taken;
  const double t_in = gr_now ();
  int r;

  if (enc == NULL)
    return -EINVAL;
  for (x = 0; x < nops; x++) {
    if (d[x] && d[x]->priv == NULL)     /* no table: on its own */
      return -EINVAL;
    total += ops[x].nstripes * (size_t) ((ops[x].count ? ops[x].count : k)
                                         + (d[x] ? d[x]->nerased : n - k));
    nst += ops[x].nstripes;
  }
  r = set_device ();
  if (r < 0)
    return r;
  js = (struct job *) calloc (nops ? nops : 1, sizeof *js);
  ptrs = (const uint8_t **) malloc ((total ? total : 1) * sizeof *ptrs);
  ckv = (uint32_t **) calloc (nst ? nst : 1, sizeof *ckv);
  job_of = (size_t *) calloc (nops ? nops : 1, sizeof *job_of);
  taken = (char *) calloc (nops ? nops : 1, 1);
  if (js == NULL || ptrs == NULL || ckv == NULL || job_of == NULL ||
      taken == NULL) {
    free (js);
    free (ptrs);
    free (ckv);
    free (job_of);
    free (taken);
    return -ENOMEM;
  }
  for (x = 0; x < nops; x++) {
    const struct gr_decode *dx = d[x];
    const int nout = dx ? dx->nerased : n - k;
    /* An encode of part of the data: its columns of the matrix. */
    const int col0 = ops[x].count ? ops[x].first : 0;
    const int ncols = ops[x].count ? ops[x].count : k;
    const size_t nblk = ops[x].len / GR_SUM_BLOCK;
    struct job *j = &js[nj];
    size_t ns = 0, y, s;
    int known_in, known_out;
    bool sums = false;

    if (taken[x] || ops[x].nstripes == 0 || ops[x].len == 0)
      continue;
#define SAME_JOB(y) (d[y] == dx && ops[y].len == ops[x].len && \
                     ops[y].count == ops[x].count && \
                     (ops[y].count == 0 || ops[y].first == ops[x].first))
    for (y = x; y < nops; y++)
      if (!taken[y] && SAME_JOB (y))
        ns += ops[y].nstripes;
    j->tab = dx ? (const struct gr_gpu_tab *) dx->priv : enc;
    j->col0 = col0;
    j->ncols = ncols;
    j->nrows = nout;
    j->in = ptrs + at;
    j->out = (uint8_t *const *) (ptrs + at + ns * ncols);
    j->nstripes = ns;
    j->len = ops[x].len;
    {
      const uint8_t **in = ptrs + at, **out = ptrs + at + ns * ncols;

      for (y = x, s = 0; y < nops; y++) {
        if (taken[y] || !SAME_JOB (y))
          continue;
        taken[y] = 1;
        job_of[y] = nj;
        sums |= ops[y].cksums != NULL;
        for (size_t t = 0; t < ops[y].nstripes; t++, s++) {
          uint8_t *const *b = ops[y].blocks + t * n;

          if (ops[y].cksums)
            ckv[ck_n + s] = ops[y].cksums + t * (size_t) n * nblk;
          for (int i = 0; i < ncols; i++)
            in[s * ncols + i] = b[dx ? dx->survivors[i] : col0 + i];
          for (int i = 0; i < nout; i++)
            out[s * nout + i] = b[dx ? dx->erased[i] : k + i];
        }
      }
    }
#undef SAME_JOB
    at += ns * (ncols + nout);
    /* (No compiled kernel started here, as run_job does for large
     * batches: these are many small operations, bound by the link and
     * their copies, and each decode pattern would cost a compile.) */
    known_in = known_out = 0;
    j->direct = j->len >= DIRECT_MIN &&
      all_pinned (j->in, ns * ncols, j->len, &known_in) &&
      all_pinned ((const uint8_t *const *) j->out, ns * nout, j->len,
                  &known_out);
    j->gather = j->direct && gather_ok (j, known_in && known_out);
    j->mapped = j->direct && known_in && known_out && mapped_rows () &&
      (__atomic_load_n (&mapped_copies, __ATOMIC_RELAXED) ==
       GR_GPU_MAPPED_ALWAYS ||
       short_runs (j->in, ns * ncols, (const uint8_t *const *) j->out,
                   ns * nout, j->len));
    /* The block checksums of a direct operation, while the slot's area
     * holds them (the rest: on the CPU, after, gr_code_many). */
    if (sums && j->direct && nblk > 0 && j->len % GR_SUM_BLOCK == 0 &&
        ck_vals + ns * (size_t) (ncols + nout) * nblk <= SLOT_CKSUMS) {
      j->ck = ckv + ck_n;
      j->ck_in = dx ? dx->survivors : NULL;
      j->ck_out = dx ? dx->erased : NULL;
      ck_n += ns;
      ck_vals += ns * (size_t) (ncols + nout) * nblk;
    }
    else
      memset (ckv + ck_n, 0, ns * sizeof *ckv);
    nj++;
  }
  /* The direct ones first, together, in the order they came. */
  {
    struct job *dj = (struct job *) malloc ((nj ? nj : 1) * sizeof *dj);

    if (dj == NULL)
      r = -ENOMEM;
    bool gather = true;
    size_t bytes = 0;

    for (x = 0; x < nj && dj; x++)
      if (js[x].direct) {
        dj[nd++] = js[x];
        gather &= js[x].gather != 0;
        bytes += js[x].nstripes * (size_t) (js[x].ncols + js[x].nrows) *
          js[x].len;
      }
    /* Larger submissions (a rebuild's batch) go faster copied: the
     * copies of a chunk overlap the kernels and checksums of the one
     * before (docs/performance.md, "A write batch coded where its blocks
     * are"). */
    gather &= bytes <= GATHER_BYTES_MAX;
    many_add_since (&many_st.prep_ns, t_in);
    if (r == 0 && nd > 0)
      r = gather ? run_gathered (dj, nd) : run_many (dj, nd);
    free (dj);
  }
  {
    const double t0 = gr_now ();

    for (x = 0; x < nj && r == 0; x++)
      if (!js[x].direct) {
        r = run_job (&js[x]);
        many_add (&many_st.staged_jobs, 1);
      }
    if (nd < nj)
      many_add_since (&many_st.staged_ns, t0);
    many_add (&many_st.calls, 1);
  }
  for (x = 0; x < nops && r == 0; x++)
    summed[x] = ops[x].cksums && ops[x].nstripes && ops[x].len &&
      js[job_of[x]].ck != NULL;
  for (x = 0; x < nj && r == 0; x++)
    if (js[x].ck)
      many_add (&many_st.summed_jobs, 1);
  free (js);
  free (ptrs);
  free (ckv);
  free (job_of);
  free (taken);
  many_add_since (&many_st.total_ns, t_in);
  return r;
}

/* Below the isal backend (and gfc), above ref: gr_backend_best() prefers
 * the CPU; the plugin asks for "cuda" by name when it wants the GPU. */
static const struct gr_backend cuda_backend = {
  "cuda",
  15,
  cuda_probe,
  cuda_coder_init,
  cuda_coder_fini,
  cuda_plan_init,
  cuda_plan_fini,
  cuda_encode,
  cuda_reconstruct,
  cuda_update,
  cuda_code_many,
};

const struct gr_backend *
gr_gpu_backend (void)
{
  return &cuda_backend;
}
