/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - GF(2^8) Reed-Solomon and Cauchy Reed-Solomon coding.
 *
 * Pure math: no I/O, no printing, no exit().  Functions return 0 or a
 * negative errno.  Nothing here includes ISA-L, gf-complete or CUDA
 * headers; those live behind the backend table (gf-backend.h).
 *
 * Code indices: a stripe has n = k + m blocks.  Index 0..k-1 are data,
 * k..n-1 are parity.  Operations take a flat array of block pointers,
 * blocks[s * n + i] for stripe s of a batch, each block len bytes long.
 */
#ifndef GPURAID_GF_H
#define GPURAID_GF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GR_MAX_MEMBERS 256      /* k + m <= 256 */
#define GR_CRS_W 8              /* CRS word size (bits per GF element) */
#define GR_CRS_PACKET 512       /* bytes per CRS packet */
#define GR_CRS_GROUP (GR_CRS_W * GR_CRS_PACKET) /* CRS lengths are multiples */

enum gr_code { GR_CODE_RS = 1, GR_CODE_CRS = 2 };

/* Field arithmetic over GF(2^8), polynomial 0x11d. */
uint8_t gr_gf_mul (uint8_t a, uint8_t b);
uint8_t gr_gf_inv (uint8_t a);          /* a != 0 */

/* Systematic (k+m) x k generator, row-major: identity on top, an
 * m x k Cauchy matrix below (every k x k submatrix is invertible).
 * Same matrix for RS and CRS.  k >= 1, m >= 1, k + m <= 256. */
int gr_gf_gen_matrix (int k, int m, uint8_t *out);

/* Invert the n x n matrix in (row-major) into out.  in is not changed.
 * Returns 0, or -EDOM if in is singular. */
int gr_gf_invert_matrix (const uint8_t *in, uint8_t *out, int n);

/* Expand a rows x cols GF(2^8) matrix into its (rows*8) x (cols*8)
 * GF(2) bitmatrix, one byte (0 or 1) per bit, row-major.  Bit b of an
 * element e maps input bit c to output bit r where (e * 2^c) has bit r. */
void gr_gf_bitmatrix (const uint8_t *mat, int rows, int cols, uint8_t *out);

struct gr_coder;
struct gr_backend;

/* Create a coder for (k, m, code) on backend be (NULL = best available).
 * Returns 0, -EINVAL for bad parameters, -ENOTSUP if the backend cannot
 * run here, -ENOMEM. */
int gr_coder_new (struct gr_coder **out, int k, int m, enum gr_code code,
                  const struct gr_backend *be);
void gr_coder_free (struct gr_coder *c);

int gr_coder_k (const struct gr_coder *c);
int gr_coder_m (const struct gr_coder *c);
enum gr_code gr_coder_code (const struct gr_coder *c);
const struct gr_backend *gr_coder_backend (const struct gr_coder *c);
/* The m x k parity part of the generator (rows k..n-1). */
const uint8_t *gr_coder_parity_matrix (const struct gr_coder *c);
/* Every len passed to an operation must be a multiple of this:
 * 1 for RS, GR_CRS_GROUP for CRS. */
size_t gr_coder_len_multiple (const struct gr_coder *c);

/* Full encode: for each stripe s, compute parity blocks k..n-1 from
 * data blocks 0..k-1.  Thread-safe. */
int gr_encode (struct gr_coder *c, uint8_t *const *blocks,
               size_t nstripes, size_t len);

/* Reconstruct: erased[0..nerased-1] (distinct code indices, any order,
 * 1 <= nerased <= m) are rebuilt, data and parity alike, in one pass from
 * the first k surviving blocks.  Other blocks are only read.  An erased
 * block whose pointer is NULL (in every stripe alike) is not rebuilt: it
 * is only unavailable, so that a lost block nobody wants but that lies
 * before the k-th survivor costs no coding (gr_reconstruct_choose); at
 * least one erased block must be rebuilt.  The decode matrix for each
 * erasure pattern (and set rebuilt) is computed once and cached in c.
 * Thread-safe.  -EINVAL for a bad erasure list or NULL pattern. */
int gr_reconstruct (struct gr_coder *c, const int *erased, int nerased,
                    uint8_t *const *blocks, size_t nstripes, size_t len);

/* One operation of gr_code_many: an encode (nerased == 0) or a
 * reconstruct of erased[0..nerased-1], of its own blocks, nstripes and
 * len, as gr_encode and gr_reconstruct take them.  cksums, if not NULL:
 * after the coding, the CRC-32C of every GR_SUM_BLOCK bytes of the
 * blocks it read or wrote (len a multiple of GR_SUM_BLOCK): an encode's
 * k + m blocks, a reconstruct's k survivors (gr_reconstruct_choose's,
 * as they were read) and the erased blocks it rebuilt; block i of
 * stripe s at cksums[(s * (k + m) + i) * (len / GR_SUM_BLOCK) + b] for
 * its bytes [b * GR_SUM_BLOCK, (b + 1) * GR_SUM_BLOCK), the other
 * blocks' values left as they were.  The CRC without its inversions,
 * ISA-L's crc32_iscsi (p, GR_SUM_BLOCK, 0), which is linear (0 for
 * zeros): the array's block checksum (format.h).  The GPU computes those
 * of the operations it copies directly where the blocks are; the rest
 * are computed on the CPU. */
#define GR_SUM_BLOCK 4096
struct gr_code_op {
  const int *erased;
  int nerased;
  uint8_t *const *blocks;
  size_t nstripes, len;
  uint32_t *cksums;
  /* count > 0: an encode (nerased 0, no cksums) of data blocks first ..
   * first + count - 1 only, the others taken as zeros and not read
   * (their pointers may be NULL): the parity those blocks contribute, as
   * a read-modify-write's parity update from their deltas (gr_update,
   * into zeroed parity).  0: an encode of all k. */
  int first, count;
};

/* Several operations in one call: the same as calling them one by one,
 * except that a backend able to (the GPU's) submits them together and
 * waits once for all.  0, or the first error (every operation's outputs
 * undefined then).  Thread-safe; -EINVAL for a bad operation (before any
 * is done). */
int gr_code_many (struct gr_coder *c, const struct gr_code_op *ops,
                  size_t nops);

/* Which blocks a reconstruction reads and which it rebuilds; the one
 * place that decides (gr_reconstruct's plans use it too).  lost[i]
 * (i < k + m): block i is unavailable; want[i]: block i is needed.  On
 * return survivors[0..k-1] are the blocks read, the first k available
 * ones, ascending, and erased[0..ret-1] (ascending) the erasure list to
 * pass to gr_reconstruct: every lost block that is wanted or lies before
 * the k-th survivor (so that gr_reconstruct reads exactly survivors;
 * those not wanted may be passed as NULL blocks, not to be rebuilt).
 * Returns the number erased (0: every wanted block is available), or
 * -EIO if fewer than k blocks are available.  want may be NULL (nothing
 * wanted beyond what the survivors require). */
int gr_reconstruct_choose (int k, int m, const bool *lost, const bool *want,
                           int *erased, int *survivors);

/* Parity update for read-modify-write: for each stripe s,
 * parity[s*m + j] ^= G[j][data_index] * delta[s], where delta is
 * old data XOR new data of that data block.  Thread-safe. */
int gr_update (struct gr_coder *c, int data_index,
               const uint8_t *const *delta, uint8_t *const *parity,
               size_t nstripes, size_t len);

/* Backends.  Built in: "ref" (slow, plainly correct), "isal", "gfc"
 * (gf-complete).  Others (the GPU's "cuda") are added by
 * gr_backend_register.  Not thread-safe against concurrent register. */
const struct gr_backend *gr_backend_find (const char *name); /* or NULL */
const struct gr_backend *gr_backend_at (int i);   /* NULL past the end */
const struct gr_backend *gr_backend_best (void);  /* usable, highest prefer */
const char *gr_backend_name (const struct gr_backend *be);
int gr_backend_probe (const struct gr_backend *be); /* 0 or -ENOTSUP */
int gr_backend_register (const struct gr_backend *be);

#ifdef __cplusplus
}
#endif

#endif /* GPURAID_GF_H */
