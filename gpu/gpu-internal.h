/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - gpu/ internals shared by the engine, the kernels and the
 * benchmark.  CUDA C++ only: nothing outside gpu/ includes this.
 *
 * Device layout of a batch (the kernels' only layout): nstripes stripes,
 * each of ncols input blocks then (in a separate buffer) nrows output
 * blocks, every block lp bytes long and contiguous:
 *   in  + (s * ncols + c) * lp        input c of stripe s
 *   out + (s * nrows + r) * lp        output r of stripe s
 * RS needs lp % 32 == 0 (the engine pads), CRS lp % GR_CRS_GROUP == 0.
 *
 * A "table" is one coding matrix (nrows x ncols over GF(2^8)) expanded
 * for its code's generic kernel and uploaded to the device.  Its rows are
 * padded to npad (a multiple of the kernel's rows-per-pass mb) with
 * zeros, and laid out input-major so that the table of input column c
 * alone (for a parity update) starts at d + c * npad * per_row words.
 */
#ifndef GPURAID_GPU_INTERNAL_H
#define GPURAID_GPU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime.h>

#include "../gf/gf.h"

struct gr_gpu_tab {
  enum gr_code code;
  int nrows, ncols;
  int mb;               /* output rows per pass */
  int npad;             /* nrows rounded up to a multiple of mb */
  size_t per_row;       /* 32-bit words per (input, row) */
  uint32_t *d;          /* device memory */
  uint8_t *bits;        /* host: (nrows*8) x (ncols*8) GF(2) bitmatrix */
  /* Run-time compiled XOR network (jit.cu): jit_state 0 untried, 2 being
   * compiled, 1 ready, -1 unavailable; changed under a lock, read with
   * acquire. */
  int jit_state;
  void *jit;            /* cudaKernel_t */
  void *jit_lib;        /* cudaLibrary_t */
  size_t jit_smem;      /* its dynamic shared memory per block */
};

/* Most output rows per pass of the generic kernels, indexed by code (0 =
 * the default); tables made afterwards use it.  For bench-gpu's sweep. */
extern int gr_gpu_mbmax[GR_CODE_CRS + 1];

/* Build the table of mat (nrows x ncols, row-major) for code and upload
 * it.  0 or negative errno (message kept). */
int gr_gpu_tab_make (enum gr_code code, const uint8_t *mat, int nrows,
                     int ncols, struct gr_gpu_tab *t);
void gr_gpu_tab_free (struct gr_gpu_tab *t);

/* Launch the kernel of t on stream st over a device-resident batch:
 * out[s][r] (^= if acc) sum_c t[r][col0 + c] * in[s][c], c < ncols.
 * ncols is t->ncols for a full matrix or 1 for an update (col0 = the data
 * index).  Returns the launch's cudaError_t (cudaGetLastError). */
cudaError_t gr_gpu_launch (const struct gr_gpu_tab *t, int col0, int ncols,
                           int acc, const void *din, void *dout,
                           size_t nstripes, size_t lp, cudaStream_t st);

/* The same over blocks anywhere the device reaches (page-locked host
 * memory through its mapping, host pointer = device pointer): p[s * ncols
 * + i] is input i of stripe s, p[nstripes * ncols + s * nrows + r] output
 * r, every block lp bytes and 16-byte aligned; nstripes * (ncols + nrows)
 * <= GR_GPU_GATHER_MAX.  The generic kernel (PCIe, not the kernel, bounds
 * it), gr_gpu_gather_mb (t) output rows a pass.  keep: NULL, or device
 * memory that receives the blocks as read and written in the dense
 * layout above (inputs at keep, outputs after them), for the checksum
 * kernel; passes after the first then read their inputs there, not
 * across the link. */
#define GR_GPU_GATHER_MAX 448
struct gr_gpu_gather {
  const void *p[GR_GPU_GATHER_MAX];
};
int gr_gpu_gather_mb (const struct gr_gpu_tab *t);
cudaError_t gr_gpu_launch_gather (const struct gr_gpu_tab *t, int col0,
                                  int ncols, int acc,
                                  const struct gr_gpu_gather *g, void *keep,
                                  size_t nstripes, size_t lp,
                                  cudaStream_t st);

/* The block checksums (gf.h's gr_code_op cksums; cksum.cu) of ns stripes'
 * rows in device memory, row r at base + r * pitch: each stripe's ncols
 * inputs (row s * ncols + i), then each stripe's nrows outputs (row ns *
 * ncols + s * nrows + i).  Blocks t < nblk of GR_SUM_BLOCK bytes of a
 * row: input i's of stripe s to out[s * stride_s + i * stride_r + t],
 * output i's to out[s * stride_s + (ncols + i) * stride_r + t] (device
 * memory).  base and pitch multiples of 16.  One launch on st; returns
 * its cudaError_t. */
cudaError_t gr_gpu_cksum_stripes (const void *base, size_t pitch,
                                  unsigned ns, unsigned ncols,
                                  unsigned nrows, unsigned nblk,
                                  size_t stride_s, size_t stride_r,
                                  uint32_t *out, cudaStream_t st);

/* Copies run by the GPU's cores instead of its copy engines: row i of
 * len[i] bytes from src[i] to dst[i], each pointer in device memory or in
 * page-locked host memory mapped into the device's address space (host
 * pointer = device pointer).  One launch for them all on stream st;
 * returns the launch's cudaError_t. */
#define GR_GPU_ROWS_MAX 64
struct gr_gpu_rows {
  void *dst[GR_GPU_ROWS_MAX];
  const void *src[GR_GPU_ROWS_MAX];
  unsigned len[GR_GPU_ROWS_MAX];
  unsigned n;
};
cudaError_t gr_gpu_copy_rows (const struct gr_gpu_rows *r, cudaStream_t st);

/* Compile t's XOR-network kernel if not tried yet (thread-safe).  0 when
 * ready, -ENOTSUP when unavailable (no NVRTC, matrix too large, ...):
 * then gr_gpu_launch keeps using the generic kernel. */
int gr_gpu_tab_jit (struct gr_gpu_tab *t);
/* The same in a background thread (the engine's way: no stall; the
 * generic kernel runs meanwhile); synchronous if gr_gpu_jit_async is 0. */
void gr_gpu_tab_jit_start (struct gr_gpu_tab *t);
extern int gr_gpu_jit_async;
/* Wait for background compiles to end. */
void gr_gpu_jit_drain (void);
/* Waits for a compile of t in progress, then unloads its kernel. */
void gr_gpu_tab_jit_free (struct gr_gpu_tab *t);
cudaError_t gr_gpu_launch_jit (const struct gr_gpu_tab *t, const void *din,
                               void *dout, size_t nstripes, size_t lp,
                               cudaStream_t st);
/* The engine compiles a table's kernel when a batch of at least this
 * many data bytes first uses it. */
extern size_t gr_gpu_jit_min;
/* Output blocks per pass of a JIT kernel (tables compiled afterwards). */
extern int gr_gpu_jit_passrows;
/* Code generation options for tables compiled afterwards (jit.cu):
 * inputs staged in shared memory by cp.async (0 off, 1 on, -1 auto) and
 * RS right shifts as IMAD.HI (1). */
extern int gr_gpu_jit_stage;
extern int gr_gpu_jit_shr;
/* Network rows as explicit LOP3s (1), as C XORs (0), or auto (-1). */
extern int gr_gpu_jit_lop3;

/* A test hook: extern "C" type name (type v) sets var to v and returns
 * its previous value. */
#define GR_GPU_TEST_HOOK(type, name, var)       \
  extern "C" type                               \
  name (type v)                                 \
  {                                             \
    const type old_ = (var);                    \
    (var) = v;                                  \
    return old_;                                \
  }

/* Which direct jobs of gr_code_many the copy kernel copies (engine.cu;
 * test hook gr_gpu_set_mapped, which returns the previous value; test-gpu.c
 * mirrors the values). */
enum gr_gpu_mapped_use {
  GR_GPU_MAPPED_NEVER = 0,
  GR_GPU_MAPPED_SHORT_RUNS = 1, /* the default: jobs of short runs */
  GR_GPU_MAPPED_ALWAYS = 2,
};
extern "C" int gr_gpu_set_mapped (int use);
/* Which submissions of gr_code_many are coded where their blocks are,
 * copying nothing (engine.cu's run_gathered; test hook gr_gpu_set_gather,
 * which returns the previous value; test-gpu.c and bench-gpu.cu mirror
 * the values). */
enum gr_gpu_gather_use {
  GR_GPU_GATHER_NEVER = 0,
  GR_GPU_GATHER_RULE = 1,       /* the default: gather_ok's rules */
  GR_GPU_GATHER_ANY_TABLE = 2,  /* the rules but the table's shape */
};
extern "C" int gr_gpu_set_gather (int use);

/* cudaSuccess if the kernels' machine code loads on the current device. */
cudaError_t gr_gpu_kernels_loadable (void);

/* Padded block length the kernels need for len bytes of code. */
static inline size_t
gr_gpu_padlen (enum gr_code code, size_t len)
{
  return code == GR_CODE_RS ? (len + 31) & ~(size_t) 31 : len;
}

/* Record a failure: "what: CUDA message", and clear it as the thread's
 * last CUDA error; returns the errno to hand back (-ENOMEM, -ENODEV or
 * -EIO). */
int gr_gpu_fail (cudaError_t e, const char *what);
void gr_gpu_set_error (const char *fmt, ...)
  __attribute__ ((format (printf, 1, 2)));

#endif /* GPURAID_GPU_INTERNAL_H */
