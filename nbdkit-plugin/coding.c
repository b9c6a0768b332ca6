/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - coding: where each operation runs, and running it.  See
 * coding.h. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coding.h"
#include "coding-internal.h"
#include "fakegpu.h"
#include "gf/gf-backend.h"
#include "gpudev.h"
#include "log.h"
#include "reqpin.h"

/* The debug knobs (coding-internal.h says what each does). */
NBDKIT_DLL_PUBLIC int gpuraid_debug_group_commit = 1;
NBDKIT_DLL_PUBLIC int gpuraid_debug_pin_requests = 1;
NBDKIT_DLL_PUBLIC int gpuraid_debug_gather = GATHER_LEADERS;
NBDKIT_DLL_PUBLIC int gpuraid_debug_adaptive = 1;

/* --- set-up -------------------------------------------------------------- */

/* Decide CPU or GPU and check the backend, before touching any member. */
static int
choose (struct gr_coding *c, const struct gr_config *cfg)
{
  const char *be = cfg->backend;
  bool want_cuda = be && strcmp (be, "cuda") == 0;

  if (!gr_gpudev_built ()) {
    if (cfg->accel == GR_ACCEL_GPU || want_cuda) {
      nbdkit_error ("%s: this gpuraid plugin was built without CUDA "
                    "support", want_cuda ? "backend=cuda" : "accel=gpu");
      return -1;
    }
  }
  if (want_cuda && cfg->accel == GR_ACCEL_CPU) {
    nbdkit_error ("backend=cuda conflicts with accel=cpu");
    return -1;
  }
  if (be && !want_cuda && cfg->accel == GR_ACCEL_GPU) {
    nbdkit_error ("backend=%s is a CPU backend; it conflicts with accel=gpu",
                  be);
    return -1;
  }
  if (be && !want_cuda) {
    c->cpu_be = gr_backend_find (be);
    if (c->cpu_be == NULL) {
      nbdkit_error ("backend=%s: this backend is not built in", be);
      return -1;
    }
    if (gr_backend_probe (c->cpu_be) != 0) {
      nbdkit_error ("backend=%s: this backend cannot run on this machine",
                    be);
      return -1;
    }
  }
  if (c->cpu_be == NULL) {
    nbdkit_error ("no usable CPU coding backend");
    return -1;
  }

  c->forced = cfg->accel == GR_ACCEL_GPU || want_cuda;
  c->device = cfg->gpu_device;
  if (gr_gpudev_built () &&
      (want_cuda || (be == NULL && cfg->accel != GR_ACCEL_CPU))) {
    char name[256] = "";

    if (gr_gpudev_probe_in_child (c->device, name, sizeof name) == 0) {
      c->use_gpu = true;
      snprintf (c->gpu_name, sizeof c->gpu_name, "%s", name);
    }
    else if (c->forced) {
      nbdkit_error ("%s: GPU %d is not usable: %s",
                    want_cuda ? "backend=cuda" : "accel=gpu", c->device,
                    name);
      return -1;
    }
    else
      gr_debug ("accel=auto: no usable GPU (%s), using CPU backend %s",
                name, gr_backend_name (c->cpu_be));
  }
  return 0;
}

struct gr_coding *
gr_coding_new (const struct gr_config *cfg)
{
  struct gr_coding *c = calloc (1, sizeof *c);

  if (c == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  c->spill = true;              /* until the router is set adaptive */
  /* The best CPU backend, before the GPU's registers (it ranks below
   * the fast CPU backends, but above ref). */
  c->cpu_be = gr_backend_best ();
  gr_gpudev_register ();
  pthread_mutex_init (&c->comb_lock, NULL);
  pthread_cond_init (&c->comb_room, NULL);
  c->comb_tail = &c->comb_head;
  pthread_mutex_init (&c->gather_lock, NULL);
  c->gather_tail = &c->gather_head;
  if (choose (c, cfg) == -1) {
    gr_coding_free (c);
    return NULL;
  }
  return c;
}

int
gr_coding_setup (struct gr_coding *c, int k, int m, enum gr_code code,
                 uint32_t chunk)
{
  int r;

  if (c->cpu)
    return 0;
  /* The router first: a set-up that returns early above has both. */
  if (c->router == NULL && (c->router = gr_router_new (m, NULL)) == NULL) {
    nbdkit_error ("calloc: %m");
    return -1;
  }
  r = gr_coder_new (&c->cpu, k, m, code, c->cpu_be);
  if (r < 0) {
    nbdkit_error ("cannot create a %s coder for k=%d m=%d: %s",
                  gr_backend_name (c->cpu_be), k, m, strerror (-r));
    return -1;
  }
  c->k = k;
  c->m = m;
  c->code = code;
  c->chunk = chunk;
  c->lm = (uint32_t) gr_coder_len_multiple (c->cpu);
  return 0;
}

/* The registry of page-locked request buffers, where a GPU (or a
 * stand-in with "page-locked" memory) codes. */
static int
start_reqpin (struct gr_coding *c)
{
  static const struct gr_reqpin_ops gpudev_ops = {
    .reg = gr_gpudev_host_register, .unreg = gr_gpudev_host_unregister,
    .in_use = gr_gpudev_host_in_use, .why = gr_gpudev_last_error,
  };
  static const struct gr_reqpin_ops fake_ops = {
    .reg = gr_fakegpu_host_register, .unreg = gr_fakegpu_host_unregister,
    .in_use = gr_fakegpu_host_in_use, .why = gr_fakegpu_pin_error,
  };

  if (c->gpu == NULL || c->host_alloc == NULL)
    return 0;
  if (!gpuraid_debug_pin_requests) {
    gr_debug ("request buffers are not page-locked (pin_requests=0): "
              "staged");
    return 0;
  }
  c->reqpin = gr_reqpin_new (c->use_gpu ? &gpudev_ops : &fake_ops,
                             GR_REQPIN_CAP_DEFAULT);
  if (c->reqpin == NULL)
    return -1;
  gr_debug ("request buffers of %zu bytes and more page-locked in place, "
            "up to %zu bytes in all", GR_REQPIN_MIN, GR_REQPIN_CAP_DEFAULT);
  return 0;
}

int
gr_coding_start_gpu (struct gr_coding *c)
{
  char why[512] = "";
  int r;

  if (c->use_gpu) {
    r = gr_gpudev_coder (&c->gpu, c->device, c->k, c->m, c->code, why,
                         sizeof why);
    if (r < 0) {
      c->gpu = NULL;
      c->use_gpu = false;
      if (c->forced) {
        nbdkit_error ("cannot use GPU %d: %s", c->device, why);
        return -1;
      }
      gr_debug ("accel=auto: no usable GPU (%s), using CPU backend %s", why,
                gr_backend_name (c->cpu_be));
    }
    else {
      c->gpu_all = c->forced;
      c->host_alloc = gr_gpudev_host_alloc;
      c->host_free = gr_gpudev_host_free;
      c->gpu_error = gr_gpudev_last_error;
    }
  }
  if (!c->use_gpu && gr_fakegpu_mode () != GR_FAKE_NONE) {
    r = gr_fakegpu_coder (&c->gpu, c->k, c->m, c->code, c->cpu_be);
    if (r < 0) {
      nbdkit_error ("fake_gpu: %s", strerror (-r));
      return -1;
    }
    c->gpu_all = gr_fakegpu_auto () == GR_FAKE_AUTO_OFF;
    if (!c->gpu_all) {
      c->host_alloc = gr_fakegpu_host_alloc;
      c->host_free = gr_fakegpu_host_free;
    }
    gr_debug ("testing: fake %s GPU coder in front of CPU backend %s%s",
              gr_fakegpu_name (), gr_backend_name (c->cpu_be),
              c->gpu_all ? "" : ", routed as accel=auto");
  }
  else if (c->use_gpu)
    gr_debug ("using GPU %d (%s), backend cuda%s; CPU backend %s", c->device,
              c->gpu_name, c->gpu_all ? " for every operation"
              : " for operations large enough to pay (measured next)",
              gr_backend_name (c->cpu_be));
  else
    gr_debug ("using CPU backend %s", gr_backend_name (c->cpu_be));
  if (c->gpu && gr_coder_len_multiple (c->gpu) > c->lm)
    c->lm = (uint32_t) gr_coder_len_multiple (c->gpu);
  return start_reqpin (c);
}

void
gr_coding_free (struct gr_coding *c)
{
  if (c == NULL)
    return;
  gr_coding_batch_log (c);
  if (c->gpu) {
    char acct[600];

    gr_gpudev_many_account (acct, sizeof acct);
    if (acct[0])
      gr_debug ("GPU engine: %s", acct);
  }
  if (c->copies_gpu + c->copies_cpu > 0) {
    char acct[200] = "";

    if (c->use_gpu)
      gr_gpudev_host_copy_account (acct, sizeof acct);
    gr_debug ("copies for direct members' alignment: %" PRIu64 " calls by "
              "the GPU%s%s%s, %" PRIu64 " by memcpy", c->copies_gpu,
              acct[0] ? " (" : "", acct, acct[0] ? ")" : "", c->copies_cpu);
  }
  if (c->reqpin) {
    struct gr_reqpin_stats st;

    gr_reqpin_stats (c->reqpin, &st);
    gr_debug ("request buffers page-locked: %" PRIu64 " registrations (%"
              PRIu64 " moved or grown, %" PRIu64 " stale ranges of ended "
              "threads), %" PRIu64 " refused, %" PRIu64 " staged for the "
              "bound; requests waited %.1f ms in all to page-lock their "
              "thread's buffer (the longest %.1f ms; %.1f ms of it in the "
              "registrations themselves, the longest %.1f ms), ending "
              "threads %.1f ms to let theirs go; %zu ranges (%zu bytes) at "
              "exit, unregistered now%s",
              st.registered, st.moved, st.stale, st.failed, st.over_cap,
              st.wait_s * 1e3, st.wait_max_s * 1e3, st.reg_s * 1e3,
              st.reg_max_s * 1e3, st.end_s * 1e3,
              st.ranges, st.bytes, st.off ? "; stopped after a failure" : "");
    gr_reqpin_free (c->reqpin);
  }
  if (c->gpu && !c->use_gpu)
    gr_fakegpu_report ();
  gr_router_free (c->router);
  gr_coder_free (c->gpu);
  gr_coder_free (c->cpu);
  if (c->use_gpu)
    gr_gpudev_release ();
  pthread_mutex_destroy (&c->comb_lock);
  pthread_cond_destroy (&c->comb_room);
  pthread_mutex_destroy (&c->gather_lock);
  free (c);
}

int
gr_coding_k (const struct gr_coding *c)
{
  return c->k;
}

int
gr_coding_m (const struct gr_coding *c)
{
  return c->m;
}

uint32_t
gr_coding_len_multiple (const struct gr_coding *c)
{
  return c->lm;
}

const char *
gr_coding_cpu_name (const struct gr_coding *c)
{
  return gr_backend_name (c->cpu_be);
}

void
gr_coding_info (const struct gr_coding *c, struct gr_coding_info *out)
{
  out->cpu_backend = gr_backend_name (c->cpu_be);
  out->gpu = c->gpu != NULL;
  out->gpu_name = c->use_gpu ? c->gpu_name
    : c->gpu ? gr_fakegpu_name () : NULL;
  out->device = c->use_gpu ? c->device : -1;
  out->gpu_all = c->gpu_all;
  out->fallen_back = __atomic_load_n (&c->fallen_back, __ATOMIC_RELAXED);
  out->ops_gpu = __atomic_load_n (&c->ops_gpu, __ATOMIC_RELAXED);
  out->ops_spilled = __atomic_load_n (&c->ops_spilled, __ATOMIC_RELAXED);
}

/* --- routing ------------------------------------------------------------- */

size_t
gr_coding_routes (struct gr_coding *c, struct gr_route_state *out,
                  size_t max)
{
  if (c->router == NULL || c->gpu_all || !gr_coding_gpu_usable (c))
    return 0;
  return gr_router_states (c->router, out, max);
}

bool
gr_coding_gpu_usable (const struct gr_coding *c)
{
  return c->gpu != NULL && !__atomic_load_n (&c->fallen_back,
                                             __ATOMIC_ACQUIRE);
}

bool
gr_coding_gpu_all (const struct gr_coding *c)
{
  return c->gpu_all;
}

void
gr_coding_gpu_off (struct gr_coding *c)
{
  __atomic_store_n (&c->fallen_back, 1, __ATOMIC_RELEASE);
}

void
gr_coding_set_gpu_from (struct gr_coding *c,
                        const size_t from[GR_ROUTE_NKINDS], bool adaptive)
{
  adaptive = adaptive && gpuraid_debug_adaptive;
  gr_router_set_prior (c->router, from, adaptive);
  c->spill = !adaptive;
  gr_debug ("accel=auto: %s", adaptive
            ? "each kind of operation tried on both sides while it runs, "
            "from the start-up measurement's choice"
            : "routed by the start-up measurement alone");
  /* Count the data paths' operations only. */
  __atomic_store_n (&c->ops_gpu, 0, __ATOMIC_RELAXED);
  __atomic_store_n (&c->ops_spilled, 0, __ATOMIC_RELAXED);
}

bool
gr_coding_route (void *arg, enum gr_op op, size_t bytes, int nerased)
{
  struct gr_coding *c = arg;

  if (!gr_coding_gpu_usable (c))
    return false;
  if (c->gpu_all)
    return true;
  return gr_router_route (c->router, op, bytes, nerased) == GR_SIDE_GPU;
}

bool
gr_coding_claim (struct gr_coding *c)
{
  if (!gr_coding_gpu_usable (c))
    return false;
  if (__atomic_add_fetch (&c->inflight, 1, __ATOMIC_ACQ_REL) >
      GPU_MAX_INFLIGHT && !c->gpu_all && c->spill) {
    __atomic_sub_fetch (&c->inflight, 1, __ATOMIC_ACQ_REL);
    __atomic_add_fetch (&c->ops_spilled, 1, __ATOMIC_RELAXED);
    return false;
  }
  __atomic_add_fetch (&c->ops_gpu, 1, __ATOMIC_RELAXED);
  return true;
}

void
gr_coding_release (struct gr_coding *c)
{
  __atomic_sub_fetch (&c->inflight, 1, __ATOMIC_ACQ_REL);
}

/* The GPU failed: this operation and all later ones on the CPU. */
void
gr_coding_gpu_failed (struct gr_coding *c, const char *op, int r)
{
  const char *why = c->gpu_error ? c->gpu_error () : "";

  if (!__atomic_exchange_n (&c->fallen_back, 1, __ATOMIC_ACQ_REL))
    nbdkit_error ("GPU %s failed: %s%s%s%s; redoing it and all later coding "
                  "on the CPU backend %s", op, strerror (-r),
                  why[0] ? " (" : "", why, why[0] ? ")" : "",
                  gr_backend_name (c->cpu_be));
}

static int
coding_error (const char *op, int r)
{
  nbdkit_error ("%s: %s", op, strerror (-r));
  errno = EIO;
  return -1;
}

/* --- the operations ------------------------------------------------------ */

/* With a stand-in GPU, tests may slow the CPU coder (fakegpu.h). */
static void
cpu_latency (const struct gr_coding *c)
{
  if (c->gpu && !c->use_gpu)
    gr_fakegpu_cpu_latency ();
}

/* An encode with its block checksums, on coder cd. */
static int
encode_summed (struct gr_coder *cd, uint8_t *const *blocks, size_t nstripes,
               size_t len, uint32_t *cksums)
{
  const struct gr_code_op op = { .blocks = blocks, .nstripes = nstripes,
                                 .len = len, .cksums = cksums };

  return cksums ? gr_code_many (cd, &op, 1)
    : gr_encode (cd, blocks, nstripes, len);
}

/* Encodes of whole chunks on the GPU go through the group commit, others
 * on their own. */
int
gr_coding_encode (struct gr_coding *c, bool gpu, uint8_t *const *blocks,
                  size_t nstripes, size_t len, uint32_t *cksums)
{
  int r;

  if (gpu && gr_coding_claim (c)) {
    if (len == c->chunk && gpuraid_debug_group_commit)
      r = gr_coding_encode_combined (c, blocks, nstripes, len, cksums);
    else
      r = encode_summed (c->gpu, blocks, nstripes, len, cksums);
    gr_coding_release (c);
    if (r == 0)
      return 0;
    gr_coding_gpu_failed (c, "encode", r);
  }
  return gr_coding_encode_cpu (c, blocks, nstripes, len, cksums);
}

int
gr_coding_encode_cpu (struct gr_coding *c, uint8_t *const *blocks,
                      size_t nstripes, size_t len, uint32_t *cksums)
{
  int r;

  cpu_latency (c);
  r = encode_summed (c->cpu, blocks, nstripes, len, cksums);
  return r == 0 ? 0 : coding_error ("encode", r);
}

int
gr_coding_reconstruct (struct gr_coding *c, bool gpu, const int *erased,
                       int nerased, uint8_t *const *blocks, size_t len)
{
  return gr_coding_reconstruct_n (c, gpu, erased, nerased, blocks, 1, len);
}

int
gr_coding_reconstruct_n (struct gr_coding *c, bool gpu, const int *erased,
                         int nerased, uint8_t *const *blocks,
                         size_t nstripes, size_t len)
{
  int r;

  if (gpu && gr_coding_claim (c)) {
    r = gr_reconstruct (c->gpu, erased, nerased, blocks, nstripes, len);
    gr_coding_release (c);
    if (r == 0)
      return 0;
    gr_coding_gpu_failed (c, "reconstruct", r);
  }
  cpu_latency (c);
  r = gr_reconstruct (c->cpu, erased, nerased, blocks, nstripes, len);
  return r == 0 ? 0 : coding_error ("reconstruct", r);
}

int
gr_coding_update (struct gr_coding *c, bool gpu, int index, int count,
                  const uint8_t *const *delta, uint8_t *const *parity,
                  uint8_t *const *pdelta, size_t len)
{
  /* On the GPU: one encode of the deltas alone (the other data taken as
   * zeros) into pdelta, gathered with other requests' operations where
   * small (the CPU redoes a gathered batch the GPU failed); then xored
   * into parity, once for all the chunks. */
  const size_t bytes = (size_t) count * len;
  uint8_t *blocks[GR_MAX_MEMBERS] = { NULL };
  const struct gr_code_op op = { .blocks = blocks, .nstripes = 1,
                                 .len = len, .first = index,
                                 .count = count };
  int i, j, r = 0;

  for (i = 0; i < count; i++)
    blocks[index + i] = (uint8_t *) delta[i];
  for (j = 0; j < c->m; j++)
    blocks[c->k + j] = pdelta[j];
  if (gpu && gr_coding_gather_this (c, bytes))
    r = gr_coding_gathered (c, &op, 1, bytes);
  else if (gpu && gr_coding_claim (c)) {
    r = gr_code_many (c->gpu, &op, 1);
    gr_coding_release (c);
    if (r != 0) {
      gr_coding_gpu_failed (c, "update", r);
      gpu = false;
    }
  }
  else
    gpu = false;
  if (gpu) {
    if (r != 0) {
      errno = EIO;
      return -1;
    }
    for (j = 0; j < c->m; j++)
      gr_steps_xor (parity[j], pdelta[j], len);
    return 0;
  }
  cpu_latency (c);
  for (i = 0, r = 0; i < count && r == 0; i++)
    r = gr_update (c->cpu, index + i, &delta[i], parity, 1, len);
  return r == 0 ? 0 : coding_error ("update", r);
}

static int
plan_encode (void *arg, bool gpu, uint8_t *const *blocks, size_t nstripes,
             size_t len)
{
  return gr_coding_encode (arg, gpu, blocks, nstripes, len, NULL);
}

static void *
plan_encode_begin (void *arg, uint8_t *const *blocks, size_t nstripes,
                   size_t len, uint32_t *cksums)
{
  return gr_coding_encode_begin (arg, true, blocks, nstripes, len, cksums);
}

static int
plan_encode_end (void *arg, void *e)
{
  return gr_coding_encode_end (arg, e);
}

static int
plan_reconstruct (void *arg, bool gpu, const int *erased, int nerased,
                  uint8_t *const *blocks, size_t nstripes, size_t len)
{
  return gr_coding_reconstruct_n (arg, gpu, erased, nerased, blocks,
                                  nstripes, len);
}

/* Reconstructs of gr_code_many's in one call, with their block
 * checksums where they ask for them (gr_code_op's cksums). */
static int
reconstruct_ops (struct gr_coding *c, bool gpu, const struct gr_code_op *ops,
                 size_t nops)
{
  int r;

  if (nops == 1 && ops[0].cksums == NULL)
    return gr_coding_reconstruct_n (c, gpu, ops[0].erased, ops[0].nerased,
                                    ops[0].blocks, ops[0].nstripes,
                                    ops[0].len);
  if (gpu && gr_coding_claim (c)) {
    r = gr_code_many (c->gpu, ops, nops);
    gr_coding_release (c);
    if (r == 0)
      return 0;
    gr_coding_gpu_failed (c, "reconstruct", r);
  }
  cpu_latency (c);
  r = gr_code_many (c->cpu, ops, nops);
  return r == 0 ? 0 : coding_error ("reconstruct", r);
}

/* A run of independent GPU coding steps: a request's small operations
 * gathered with other requests' (a degraded read's stripes, a write's
 * encode of part of a chunk's height), a large batch's in one
 * submission (a rebuild's erasure patterns), encodes of whole chunks
 * through the group commit, else each on its own. */
static int
plan_many (void *arg, bool gpu, const struct gr_code_op *ops, size_t nops)
{
  struct gr_coding *c = arg;
  size_t bytes = 0, i;
  bool recon = true, gather = true;

  for (i = 0; i < nops; i++) {
    bytes += ops[i].nstripes * (size_t) c->k * ops[i].len;
    recon &= ops[i].nerased > 0;
    gather &= ops[i].nerased > 0 || ops[i].len != c->chunk;
  }
  if (gpu && gather && gr_coding_gather_this (c, bytes)) {
    if (gr_coding_gathered (c, ops, nops, bytes) == 0)
      return 0;
    errno = EIO;
    return -1;
  }
  if (recon)
    return reconstruct_ops (c, gpu, ops, nops);
  for (i = 0; i < nops; i++)
    if ((ops[i].nerased > 0
         ? reconstruct_ops (c, gpu, &ops[i], 1)
         : gr_coding_encode (c, gpu, ops[i].blocks, ops[i].nstripes,
                             ops[i].len, ops[i].cksums)) == -1)
      return -1;
  return 0;
}

static int
plan_update (void *arg, bool gpu, int index, int count,
             const uint8_t *const *delta,
             uint8_t *const *parity, uint8_t *const *pdelta, size_t len)
{
  return gr_coding_update (arg, gpu, index, count, delta, parity, pdelta,
                           len);
}

/* A plan's copies marked for the GPU (steps.h): by the GPU, or the
 * stand-in, where both ends are page-locked; false for memcpy. */
static bool
plan_host_copy (void *arg, const struct gr_copy_row *rows, size_t n)
{
  struct gr_coding *c = arg;
  int r = -ENOTSUP;

  if (gr_coding_gpu_usable (c))
    r = c->use_gpu ? gr_gpudev_host_copy (rows, n)
      : c->host_alloc ? gr_fakegpu_host_copy (rows, n) : -ENOTSUP;
  if (r == 0) {
    __atomic_add_fetch (&c->copies_gpu, 1, __ATOMIC_RELAXED);
    return true;
  }
  if (r == -EIO)
    gr_coding_gpu_failed (c, "host copy", r);
  __atomic_add_fetch (&c->copies_cpu, 1, __ATOMIC_RELAXED);
  return false;
}

struct gr_plan_coder
gr_coding_plan_coder (struct gr_coding *c)
{
  return (struct gr_plan_coder) { .encode = plan_encode,
                                  .reconstruct = plan_reconstruct,
                                  .update = plan_update, .many = plan_many,
                                  .host_copy = plan_host_copy,
                                  .encode_begin = plan_encode_begin,
                                  .encode_end = plan_encode_end, .arg = c };
}

bool
gr_coding_request_begin (struct gr_coding *c, void *buf, size_t len)
{
  if (c->reqpin == NULL || !gr_coding_gpu_usable (c))
    return false;
  /* Under accel=auto, only where the GPU may code something. */
  if (!c->gpu_all && !gr_router_may_gpu (c->router))
    return false;
  return gr_reqpin_begin (c->reqpin, buf, len);
}

void
gr_coding_request_end (struct gr_coding *c)
{
  gr_reqpin_end (c->reqpin);
}

void *
gr_coding_host_alloc (struct gr_coding *c, size_t size)
{
  return c->host_alloc ? c->host_alloc (size) : NULL;
}

void
gr_coding_host_free (struct gr_coding *c, void *p)
{
  if (p)
    c->host_free (p);
}
