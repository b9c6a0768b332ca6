/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - stand-in GPUs for tests.  See fakegpu.h. */
#include <errno.h>
#include <stdlib.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "fakegpu.h"
#include "gf/gf-backend.h"

NBDKIT_DLL_PUBLIC int gpuraid_debug_fake_gpu = 0;
NBDKIT_DLL_PUBLIC int gpuraid_debug_fake_auto = 0;

enum gr_fake_gpu
gr_fakegpu_mode (void)
{
  int v = gpuraid_debug_fake_gpu;

  return v >= GR_FAKE_FAILING && v <= GR_FAKE_WRONG ? (enum gr_fake_gpu) v
    : GR_FAKE_NONE;
}

enum gr_fake_auto
gr_fakegpu_auto (void)
{
  int v = gpuraid_debug_fake_auto;

  return v == 1 ? GR_FAKE_AUTO_MEASURED : v == 2 ? GR_FAKE_AUTO_ALL
    : GR_FAKE_AUTO_OFF;
}

const char *
gr_fakegpu_name (void)
{
  switch (gr_fakegpu_mode ()) {
  case GR_FAKE_WORKING: return "working";
  case GR_FAKE_WRONG: return "wrong";
  default: return "failing";
  }
}

static int
any_probe (void)
{
  return 0;
}

/* --- the failing stand-in ------------------------------------------------ */

static int
failing_encode (struct gr_coder *c, uint8_t *const *blocks, size_t nstripes,
                size_t len)
{
  return -EIO;
}

static int
failing_reconstruct (struct gr_coder *c, const struct gr_decode *d,
                     uint8_t *const *blocks, size_t nstripes, size_t len)
{
  return -EIO;
}

static int
failing_update (struct gr_coder *c, int data_index,
                const uint8_t *const *delta, uint8_t *const *parity,
                size_t nstripes, size_t len)
{
  /* Scribble on the output first, as a half-done GPU operation might. */
  if (nstripes > 0 && len > 0)
    parity[0][0] ^= 0x5a;
  return -EIO;
}

static const struct gr_backend failing_backend = {
  .name = "fake-gpu",
  .prefer = -1000,
  .probe = any_probe,
  .encode = failing_encode,
  .reconstruct = failing_reconstruct,
  .update = failing_update,
};

/* --- the wrong stand-in: right parity, wrong rebuilt bytes --------------- */

/* Its per-coder state is a CPU coder of the same geometry. */
static int
wrong_init (struct gr_coder *c, void **priv)
{
  struct gr_coder *inner;
  int r = gr_coder_new (&inner, gr_coder_k (c), gr_coder_m (c),
                        gr_coder_code (c), gr_backend_best ());

  if (r == 0)
    *priv = inner;
  return r;
}

static void
wrong_fini (struct gr_coder *c, void *priv)
{
  gr_coder_free (priv);
}

static int
wrong_encode (struct gr_coder *c, uint8_t *const *blocks, size_t nstripes,
              size_t len)
{
  return gr_encode (gr_coder_priv (c), blocks, nstripes, len);
}

static int
wrong_reconstruct (struct gr_coder *c, const struct gr_decode *d,
                   uint8_t *const *blocks, size_t nstripes, size_t len)
{
  int r = gr_reconstruct (gr_coder_priv (c), d->erased, d->nerased, blocks,
                          nstripes, len);

  if (r == 0 && d->nerased > 0 && len > 0)
    blocks[d->erased[0]][len / 2] ^= 0x01;
  return r;
}

static int
wrong_update (struct gr_coder *c, int data_index, const uint8_t *const *delta,
              uint8_t *const *parity, size_t nstripes, size_t len)
{
  return gr_update (gr_coder_priv (c), data_index, delta, parity, nstripes,
                    len);
}

static const struct gr_backend wrong_backend = {
  .name = "wrong-gpu",
  .prefer = -1000,
  .probe = any_probe,
  .coder_init = wrong_init,
  .coder_fini = wrong_fini,
  .encode = wrong_encode,
  .reconstruct = wrong_reconstruct,
  .update = wrong_update,
};

int
gr_fakegpu_coder (struct gr_coder **out, int k, int m, enum gr_code code,
                  const struct gr_backend *cpu)
{
  switch (gr_fakegpu_mode ()) {
  case GR_FAKE_WORKING:
    return gr_coder_new (out, k, m, code, cpu);
  case GR_FAKE_WRONG:
    return gr_coder_new (out, k, m, code, &wrong_backend);
  case GR_FAKE_FAILING:
    return gr_coder_new (out, k, m, code, &failing_backend);
  default:
    return -ENODEV;
  }
}

void *
gr_fakegpu_host_alloc (size_t size)
{
  void *p;

  return posix_memalign (&p, 4096, size) == 0 ? p : NULL;
}

void
gr_fakegpu_host_free (void *p)
{
  free (p);
}
