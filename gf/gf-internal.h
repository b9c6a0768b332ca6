/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - gf/ internals shared between the files of this folder only.
 * Nothing outside gf/ includes this; users see gf.h, backend writers see
 * gf-backend.h. */
#ifndef GPURAID_GF_INTERNAL_H
#define GPURAID_GF_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "gf.h"
#include "gf-backend.h"

/* Log/exp tables of GF(2^8) mod 0x11d with generator 2, computed once at
 * start-up (field.c).  gr_gf_exp_tbl has 512 entries so that
 * exp[log a + log b] needs no reduction; gr_gf_log_tbl[0] is unused. */
extern uint8_t gr_gf_log_tbl[256];
extern uint8_t gr_gf_exp_tbl[512];

static inline uint8_t
gr_gf_mul_fast (uint8_t a, uint8_t b)
{
  if (a == 0 || b == 0)
    return 0;
  return gr_gf_exp_tbl[gr_gf_log_tbl[a] + gr_gf_log_tbl[b]];
}

/* Decode-plan cache entry (coder.c). */
struct gr_plan;

/* Plans cached per coder.  GR_PLAN_CACHE_MAX bounds the number of erasure
 * patterns kept; the least recently used plan is evicted beyond it (a plan
 * in use by another thread is freed when that thread is done with it). */
#define GR_PLAN_CACHE_MAX 1024
#define GR_PLAN_BUCKETS 256

struct gr_coder {
  int k, m, n;
  enum gr_code code;
  const struct gr_backend *be;
  uint8_t *gen;                 /* n x k generator */
  uint8_t *pbits;               /* CRS: (m*8) x (k*8) bitmatrix of parity */
  void *priv;                   /* backend's coder state */

  pthread_mutex_t lock;         /* protects the plan cache */
  struct gr_plan *buckets[GR_PLAN_BUCKETS];
  struct gr_plan *lru_head, *lru_tail; /* most recently used first */
  int nplans;
};

/* Bitmatrix of the parity matrix, CRS coders only (else NULL). */
static inline const uint8_t *
gr_coder_pbits (const struct gr_coder *c)
{
  return c->pbits;
}

/* Fast CRS (crs.c): XOR schedules, shared by the isal and gfc backends.
 * coder_init/plan_init style helpers; the state is opaque. */
int gr_crs_fast_coder_init (struct gr_coder *c, void **state);
void gr_crs_fast_coder_fini (void *state);
int gr_crs_fast_plan_init (struct gr_coder *c, struct gr_decode *d);
void gr_crs_fast_plan_fini (struct gr_decode *d);
int gr_crs_fast_encode (struct gr_coder *c, void *state,
                        uint8_t *const *blocks, size_t nstripes, size_t len);
int gr_crs_fast_reconstruct (struct gr_coder *c, const struct gr_decode *d,
                             uint8_t *const *blocks,
                             size_t nstripes, size_t len);
int gr_crs_fast_update (struct gr_coder *c, void *state, int data_index,
                        const uint8_t *const *delta, uint8_t *const *parity,
                        size_t nstripes, size_t len);

/* For one stripe's block pointers b: the k survivors a decode plan reads
 * (in) and the blocks it rebuilds (out), in the decode matrix's order. */
static inline void
gr_decode_gather (const struct gr_coder *c, const struct gr_decode *d,
                  uint8_t *const *b, const uint8_t **in, uint8_t **out)
{
  int i;

  for (i = 0; i < c->k; i++)
    in[i] = b[d->survivors[i]];
  for (i = 0; i < d->nerased; i++)
    out[i] = b[d->erased[i]];
}

/* The built-in backends. */
extern const struct gr_backend gr_backend_ref;
extern const struct gr_backend gr_backend_isal;
extern const struct gr_backend gr_backend_gfc;

#endif /* GPURAID_GF_INTERNAL_H */
