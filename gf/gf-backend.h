/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the coding-backend table, for those who implement a backend
 * (gf/ itself, and gpu/).  Users of the coder only need gf.h.
 *
 * Like the kernel's struct raid6_calls: every backend fills the same
 * table; gr_backend_best() picks the usable one with the highest prefer.
 * gr_encode/gr_reconstruct/gr_update in gf.c validate arguments, resolve
 * and cache the decode plan, then call these operations.
 */
#ifndef GPURAID_GF_BACKEND_H
#define GPURAID_GF_BACKEND_H

#include "gf.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A decode plan for one erasure pattern, owned and cached by the coder. */
struct gr_decode {
  int nerased;
  int erased[GR_MAX_MEMBERS];     /* rebuilt, sorted ascending */
  int survivors[GR_MAX_MEMBERS];  /* the first k surviving indices, ascending */
  /* The erasure list as passed, sorted: erased[] and the blocks passed
   * NULL, not rebuilt (gf.h); the survivors are the first k not in it. */
  int nlost;
  int lost[GR_MAX_MEMBERS];
  /* nerased x k, row-major: erased[r] = sum_c matrix[r*k+c] * survivors[c] */
  uint8_t *matrix;
  void *priv;                     /* backend's cached tables, or NULL */
};

struct gr_backend {
  const char *name;
  int prefer;                     /* higher wins in gr_backend_best() */
  int (*probe) (void);            /* 0 if usable here, else -ENOTSUP */

  /* Optional: per-coder state (e.g. expanded tables).  *priv starts NULL. */
  int (*coder_init) (struct gr_coder *c, void **priv);
  void (*coder_fini) (struct gr_coder *c, void *priv);
  /* Optional: per-plan state, called once when a plan is cached. */
  int (*plan_init) (struct gr_coder *c, struct gr_decode *d);
  void (*plan_fini) (struct gr_coder *c, struct gr_decode *d);

  /* The three operations; arguments are already validated.  Return 0 or
   * a negative errno.  Must be thread-safe for one coder. */
  int (*encode) (struct gr_coder *c, uint8_t *const *blocks,
                 size_t nstripes, size_t len);
  int (*reconstruct) (struct gr_coder *c, const struct gr_decode *d,
                      uint8_t *const *blocks, size_t nstripes, size_t len);
  int (*update) (struct gr_coder *c, int data_index,
                 const uint8_t *const *delta, uint8_t *const *parity,
                 size_t nstripes, size_t len);
  /* Optional: gr_code_many's operations in one submission, validated;
   * d[i] is operation i's plan, NULL for an encode (of part of the data
   * where its count is not 0: gr_code_op).  Without it, each
   * operation is run on its own.  summed[i] (false on entry): set where
   * the backend wrote operation i's cksums itself (the others are
   * computed after it, on the CPU). */
  int (*code_many) (struct gr_coder *c, const struct gr_decode *const *d,
                    const struct gr_code_op *ops, size_t nops,
                    bool *summed);
};

/* The backend's per-coder state from coder_init. */
void *gr_coder_priv (const struct gr_coder *c);

#ifdef __cplusplus
}
#endif

#endif /* GPURAID_GF_BACKEND_H */
