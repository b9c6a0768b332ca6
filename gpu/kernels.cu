/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - GF(2^8) coding kernels and their tables.
 *
 * All kernels compute out[s][r] (^)= sum_c M[r][c] * in[s][c] over a
 * device-resident batch (layout in gpu-internal.h), the generic ones also
 * over blocks anywhere the device reaches (io_gather).  Each thread owns one
 * column (RS: 16 bytes of every block; CRS: 8 bytes of every packet of one
 * group) and reads each input once per pass, producing up to mb output
 * rows per pass; more rows take more passes (inputs re-read, mostly from
 * L2).  The coefficients come from a small device table read with
 * warp-uniform addresses (one L1 broadcast per load).
 *
 * RS: for a 32-bit word x of four data bytes, bit plane q_b =
 * (x >> b) & 0x01010101 holds bit b of each byte as 0 or 1, so
 * c * x = XOR_b q_b * (c * 2^b): one integer multiply per plane and
 * coefficient (no carries: each byte of q_b is 0 or 1), XORed with LOP3.
 * The planes are shared by all outputs of the pass.
 *
 * CRS: group g of a block is 8 packets of 512 bytes; output packet r of
 * row j = XOR of input packets (c, b) whose bitmatrix bit (j*8+r, c*8+b) is
 * set (gf/ref.c).  Masks are 0 or ~0 words (x & mask), LOP3 only.
 *
 * Other forms, measured slower on an H200, were removed (RS with log/exp
 * tables in shared memory, CRS with 6 of 8 terms as x * bit by IMAD; see
 * docs/performance.md, section "Kernels").
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpu-internal.h"

#define THREADS 256

/* ---- where a stripe's blocks are -------------------------------------- */

/* The kernels reach block i of stripe s through an addressing policy:
 * io_dense, the batch laid out in device memory as gpu-internal.h says;
 * io_gather, every block where the caller has it (page-locked host
 * memory read and written through the device's mapping), its address in
 * the launch's table, and (keep) the blocks as read and written also
 * stored in the dense layout at kin / kout in device memory, for the
 * checksum kernel to read there; io_gather_t<true> (KEPT) also reads a
 * thread's inputs there in its passes after the first. */
struct io_dense {
  const uint4 *in;
  uint4 *out;
  int ncols, nrows;
  size_t vlen;

  /* Stripe s's blocks. */
  struct view {
    const uint4 *ip;
    uint4 *op;
    size_t vlen;

    __device__ const uint4 *src (int i) const
    { return ip + (size_t) i * vlen; }
    __device__ uint4 ld (int i, size_t x, int) const
    { return __ldg (src (i) + x); }
    __device__ uint4 *dst (int j) const
    { return op + (size_t) j * vlen; }
    __device__ void keep_in (int, size_t, uint4) const {}
    __device__ void keep_out (int, size_t, uint4) const {}
  };
  __device__ view at (size_t s) const
  { return { in + s * ncols * vlen, out + s * nrows * vlen, vlen }; }
};

template <bool KEPT>
struct io_gather_t {
  struct gr_gpu_gather g;
  int ncols, nrows;
  size_t vlen, nstripes;
  uint4 *kin, *kout;            /* NULL: nothing kept */

  struct view {
    const io_gather_t *io;
    size_t s;

    __device__ const uint4 *src (int i) const
    { return (const uint4 *) io->g.p[s * io->ncols + i]; }
    /* Word x of input i in the pass from output row j0: KEPT, after the
     * first pass of a thread that makes them all (the launch's grid has
     * one z), from the copy it kept in device memory (its own stores: a
     * plain load), not across the link again. */
    __device__ uint4 ld (int i, size_t x, int j0) const
    {
      if (KEPT && j0 > 0)
        return io->kin[(s * io->ncols + i) * io->vlen + x];
      return __ldg (src (i) + x);
    }
    __device__ uint4 *dst (int j) const
    { return (uint4 *) io->g.p[io->nstripes * io->ncols + s * io->nrows + j]; }
    __device__ void keep_in (int i, size_t x, uint4 v) const
    {
      if (io->kin)
        io->kin[(s * io->ncols + i) * io->vlen + x] = v;
    }
    __device__ void keep_out (int j, size_t x, uint4 v) const
    {
      if (io->kout)
        io->kout[(s * io->nrows + j) * io->vlen + x] = v;
    }
  };
  __device__ view at (size_t s) const { return { this, s }; }
};

typedef io_gather_t<false> io_gather;

/* A kernel's parameters within the classic 4 KiB. */
static_assert (sizeof (io_gather) + 64 <= 4096, "io_gather too large");

/* ---- RS ---------------------------------------------------------------- */

/* Grid: x over the columns of a stripe, y over stripes (no divisions), z
 * over the passes of MB output rows (more than one only in a launch too
 * small to fill the device: gr_gpu_launch).
 * Each thread owns C uint4 columns (THREADS apart, so every load is
 * coalesced) and keeps the pass's coefficients (8 per output row) in
 * registers for all of them: one coefficient load per C columns. */
#define RS_IMAD_MBMAX 8

template <int MB, int C, bool ACC, class IO>
static __device__ __forceinline__ void
rs_imad_body (const IO &io, const uint32_t *__restrict__ tab, int ncols,
              int nrows, int npad, size_t vlen, size_t nstripes)
{
  for (size_t s = blockIdx.y; s < nstripes; s += gridDim.y) {
    const typename IO::view sv = io.at (s);

    for (size_t base = (size_t) blockIdx.x * THREADS * C + threadIdx.x;
         base < vlen; base += (size_t) gridDim.x * THREADS * C) {
      bool ok[C];

#pragma unroll
      for (int c = 0; c < C; c++)
        ok[c] = base + (size_t) c * THREADS < vlen;
      for (int j0 = blockIdx.z * MB; j0 < nrows; j0 += gridDim.z * MB) {
        uint32_t acc[C][MB][4];
        uint4 x[C];

#pragma unroll
        for (int c = 0; c < C; c++) {
#pragma unroll
          for (int j = 0; j < MB; j++)
#pragma unroll
            for (int v = 0; v < 4; v++)
              acc[c][j][v] = 0;
          x[c] = ok[c] ? sv.ld (0, base + c * THREADS, j0)
            : make_uint4 (0, 0, 0, 0);
        }
        for (int i = 0; i < ncols; i++) {
          const uint32_t *t = tab + ((size_t) i * npad + j0) * 8;
          uint32_t kk[MB][8];
          uint4 xn[C];

          /* Next input's loads in flight while this one is computed. */
#pragma unroll
          for (int c = 0; c < C; c++)
            xn[c] = ok[c] && i + 1 < ncols
              ? sv.ld (i + 1, base + c * THREADS, j0)
              : make_uint4 (0, 0, 0, 0);
#pragma unroll
          for (int j = 0; j < MB; j++) {
            const uint4 ka = __ldg ((const uint4 *) (t + j * 8));
            const uint4 kb = __ldg ((const uint4 *) (t + j * 8 + 4));
            kk[j][0] = ka.x; kk[j][1] = ka.y; kk[j][2] = ka.z; kk[j][3] = ka.w;
            kk[j][4] = kb.x; kk[j][5] = kb.y; kk[j][6] = kb.z; kk[j][7] = kb.w;
          }
#pragma unroll
          for (int c = 0; c < C; c++) {
            const uint32_t w[4] = { x[c].x, x[c].y, x[c].z, x[c].w };

            if (j0 == 0 && ok[c])
              sv.keep_in (i, base + c * THREADS, x[c]);
#pragma unroll
            for (int v = 0; v < 4; v++) {
#pragma unroll
              for (int b = 0; b < 8; b += 2) {
                const uint32_t q0 = (w[v] >> b) & 0x01010101u;
                const uint32_t q1 = (w[v] >> (b + 1)) & 0x01010101u;
#pragma unroll
                for (int j = 0; j < MB; j++)
                  acc[c][j][v] ^= (q0 * kk[j][b]) ^ (q1 * kk[j][b + 1]);
              }
            }
            x[c] = xn[c];
          }
        }
#pragma unroll
        for (int c = 0; c < C; c++) {
          if (!ok[c])
            continue;
#pragma unroll
          for (int j = 0; j < MB; j++) {
            if (j0 + j < nrows) {
              uint4 *p = sv.dst (j0 + j) + base + c * THREADS;
              uint4 o = make_uint4 (acc[c][j][0], acc[c][j][1],
                                    acc[c][j][2], acc[c][j][3]);
              if (ACC) {
                const uint4 old = *p;
                o.x ^= old.x; o.y ^= old.y; o.z ^= old.z; o.w ^= old.w;
              }
              *p = o;
              sv.keep_out (j0 + j, base + c * THREADS, o);
            }
          }
        }
      }
    }
  }
}

/* The kernel over a batch in device memory, and over blocks where they
 * are (its pointers' restrict qualifiers kept apart: the dense form
 * compiled as before, in as many registers). */
template <int MB, int C, bool ACC>
static __global__ void __launch_bounds__ (THREADS)
rs_imad_kernel (const uint4 *__restrict__ in, uint4 *__restrict__ out,
                const uint32_t *__restrict__ tab, int ncols, int nrows,
                int npad, size_t vlen, size_t nstripes)
{
  const io_dense io = { in, out, ncols, nrows, vlen };

  rs_imad_body<MB, C, ACC> (io, tab, ncols, nrows, npad, vlen, nstripes);
}

template <int MB, int C, bool ACC, bool KEPT>
static __global__ void __launch_bounds__ (THREADS)
rs_imad_gather_kernel (const __grid_constant__ io_gather_t<KEPT> io,
                       const uint32_t *__restrict__ tab, int ncols,
                       int nrows, int npad, size_t vlen, size_t nstripes)
{
  rs_imad_body<MB, C, ACC> (io, tab, ncols, nrows, npad, vlen, nstripes);
}

/* Columns per thread for a pass of mb rows. */
static constexpr int
rs_cols (int mb)
{
  return mb <= 4 ? 4 : 2;
}

/* ---- CRS --------------------------------------------------------------- */

/* Grid: x over (group, 16-byte offset in a packet) of a stripe, y over
 * stripes, z over the passes of MB output rows (as RS).  A thread owns 16
 * bytes of each of the 8 packets of one group: 32 threads per group. */
#define CRS_MBMAX 2
#define PKT4 (GR_CRS_PACKET / 16)       /* uint4 per packet: 32 */

template <int MB, bool ACC, class IO>
static __device__ __forceinline__ void
crs_body (const IO &io, const uint32_t *__restrict__ tab, int ncols,
          int nrows, int npad, size_t vlen, size_t nstripes)
{
  const size_t items = vlen / 8;        /* 32 per 4 KiB group */

  for (size_t s = blockIdx.y; s < nstripes; s += gridDim.y)
    for (size_t t = (size_t) blockIdx.x * THREADS + threadIdx.x; t < items;
         t += (size_t) gridDim.x * THREADS) {
      const size_t base = (t / PKT4) * (8 * PKT4) + t % PKT4;
      const typename IO::view sv = io.at (s);

      for (int j0 = blockIdx.z * MB; j0 < nrows; j0 += gridDim.z * MB) {
        uint32_t acc[MB][8][4];

#pragma unroll
        for (int j = 0; j < MB; j++)
#pragma unroll
          for (int r = 0; r < 8; r++)
#pragma unroll
            for (int v = 0; v < 4; v++)
              acc[j][r][v] = 0;
        for (int i = 0; i < ncols; i++) {
          const uint32_t *tp = tab + ((size_t) i * npad + j0) * 64;
          uint32_t p[8][4];

#pragma unroll
          for (int c = 0; c < 8; c++) {
            const uint4 x = sv.ld (i, base + c * PKT4, j0);
            p[c][0] = x.x; p[c][1] = x.y; p[c][2] = x.z; p[c][3] = x.w;
            if (j0 == 0)
              sv.keep_in (i, base + c * PKT4, x);
          }
#pragma unroll
          for (int j = 0; j < MB; j++) {
#pragma unroll
            for (int r = 0; r < 8; r++) {
              const uint4 ma = __ldg ((const uint4 *) (tp + (j * 8 + r) * 8));
              const uint4 mb = __ldg ((const uint4 *) (tp + (j * 8 + r) * 8 + 4));
#pragma unroll
              for (int v = 0; v < 4; v++)
                acc[j][r][v] ^= (p[0][v] & ma.x) ^ (p[1][v] & ma.y)
                  ^ (p[2][v] & ma.z) ^ (p[3][v] & ma.w)
                  ^ (p[4][v] & mb.x) ^ (p[5][v] & mb.y)
                  ^ (p[6][v] & mb.z) ^ (p[7][v] & mb.w);
            }
          }
        }
#pragma unroll
        for (int j = 0; j < MB; j++) {
          if (j0 + j < nrows) {
#pragma unroll
            for (int r = 0; r < 8; r++) {
              uint4 *q = sv.dst (j0 + j) + base + r * PKT4;
              uint4 o = make_uint4 (acc[j][r][0], acc[j][r][1],
                                    acc[j][r][2], acc[j][r][3]);
              if (ACC) {
                const uint4 old = *q;
                o.x ^= old.x; o.y ^= old.y; o.z ^= old.z; o.w ^= old.w;
              }
              *q = o;
              sv.keep_out (j0 + j, base + r * PKT4, o);
            }
          }
        }
      }
    }
}

template <int MB, bool ACC>
static __global__ void __launch_bounds__ (THREADS)
crs_kernel (const uint4 *__restrict__ in, uint4 *__restrict__ out,
            const uint32_t *__restrict__ tab, int ncols, int nrows,
            int npad, size_t vlen, size_t nstripes)
{
  const io_dense io = { in, out, ncols, nrows, vlen };

  crs_body<MB, ACC> (io, tab, ncols, nrows, npad, vlen, nstripes);
}

template <int MB, bool ACC, bool KEPT>
static __global__ void __launch_bounds__ (THREADS)
crs_gather_kernel (const __grid_constant__ io_gather_t<KEPT> io,
                   const uint32_t *__restrict__ tab, int ncols, int nrows,
                   int npad, size_t vlen, size_t nstripes)
{
  crs_body<MB, ACC> (io, tab, ncols, nrows, npad, vlen, nstripes);
}

/* A launch of either form, by the blocks' policy. */
template <int MB, int C, bool ACC>
static void
rs_go (const io_dense &io, dim3 grid, cudaStream_t st,
       const uint32_t *tab, int ncols, int nrows, int npad, size_t vlen,
       size_t nstripes)
{
  rs_imad_kernel<MB, C, ACC><<<grid, THREADS, 0, st>>>
    (io.in, io.out, tab, ncols, nrows, npad, vlen, nstripes);
}

template <int MB, int C, bool ACC, bool KEPT>
static void
rs_go (const io_gather_t<KEPT> &io, dim3 grid, cudaStream_t st,
       const uint32_t *tab, int ncols, int nrows, int npad, size_t vlen,
       size_t nstripes)
{
  rs_imad_gather_kernel<MB, C, ACC, KEPT><<<grid, THREADS, 0, st>>>
    (io, tab, ncols, nrows, npad, vlen, nstripes);
}

template <int MB, bool ACC>
static void
crs_go (const io_dense &io, dim3 grid, cudaStream_t st,
        const uint32_t *tab, int ncols, int nrows, int npad, size_t vlen,
        size_t nstripes)
{
  crs_kernel<MB, ACC><<<grid, THREADS, 0, st>>>
    (io.in, io.out, tab, ncols, nrows, npad, vlen, nstripes);
}

template <int MB, bool ACC, bool KEPT>
static void
crs_go (const io_gather_t<KEPT> &io, dim3 grid, cudaStream_t st,
        const uint32_t *tab, int ncols, int nrows, int npad, size_t vlen,
        size_t nstripes)
{
  crs_gather_kernel<MB, ACC, KEPT><<<grid, THREADS, 0, st>>>
    (io, tab, ncols, nrows, npad, vlen, nstripes);
}

/* ---- tables ------------------------------------------------------------ */

/* Output rows per pass, at most, per code (bench-gpu sweeps it; 0 = the
 * default). */
int gr_gpu_mbmax[GR_CODE_CRS + 1];

static int
mbmax_of (enum gr_code code)
{
  const int lim = code == GR_CODE_RS ? RS_IMAD_MBMAX : CRS_MBMAX;
  /* Measured on an H200 (bench-gpu (a2)): 4 rows per pass beat 8 for
   * RS (8+8: 716 vs 566 GB/s; registers), 2 beat 1 for CRS. */
  const int dflt = code == GR_CODE_RS ? 4 : lim;
  const int v = gr_gpu_mbmax[code] > 0 ? gr_gpu_mbmax[code] : dflt;

  return v < lim ? v : lim;
}

int
gr_gpu_tab_make (enum gr_code code, const uint8_t *mat, int nrows,
                 int ncols, struct gr_gpu_tab *t)
{
  uint32_t *h = NULL;
  uint8_t *bits = NULL;
  size_t nwords;
  cudaError_t e;
  int npasses, r = 0;

  memset (t, 0, sizeof *t);
  if (nrows < 1 || ncols < 1 ||
      (code != GR_CODE_RS && code != GR_CODE_CRS))
    return -EINVAL;
  t->code = code;
  t->nrows = nrows;
  t->ncols = ncols;
  npasses = (nrows + mbmax_of (code) - 1) / mbmax_of (code);
  t->mb = (nrows + npasses - 1) / npasses;
  t->npad = npasses * t->mb;
  t->per_row = code == GR_CODE_RS ? 8 : 64;
  nwords = (size_t) ncols * t->npad * t->per_row;
  h = (uint32_t *) calloc (nwords, sizeof *h);
  if (h == NULL)
    return -ENOMEM;
  bits = (uint8_t *) malloc ((size_t) nrows * 8 * ncols * 8);
  if (bits == NULL) {
    r = -ENOMEM;
    goto out;
  }
  gr_gf_bitmatrix (mat, nrows, ncols, bits);
  for (int c = 0; c < ncols; c++)
    for (int j = 0; j < nrows; j++) {
      uint32_t *w = h + ((size_t) c * t->npad + j) * t->per_row;
      const uint8_t coef = mat[(size_t) j * ncols + c];

      if (code == GR_CODE_RS)
        for (int b = 0; b < 8; b++)
          w[b] = gr_gf_mul (coef, (uint8_t) (1u << b));
      else
        for (int rr = 0; rr < 8; rr++)
          for (int b = 0; b < 8; b++)
            w[rr * 8 + b] = bits[((size_t) j * 8 + rr) * ncols * 8
                                 + (size_t) c * 8 + b] ? 0xffffffffu : 0;
    }
  e = cudaMalloc ((void **) &t->d, nwords * sizeof *h);
  if (e != cudaSuccess) {
    t->d = NULL;
    r = gr_gpu_fail (e, "cudaMalloc (coding table)");
    goto out;
  }
  /* A copy from pageable memory returns once its bytes are staged, not
   * once they are on the device, and the engine's streams do not wait
   * for the default stream (non-blocking): without the wait a kernel
   * could read the table before it arrived (test-gpu's fresh tables). */
  e = cudaMemcpy (t->d, h, nwords * sizeof *h, cudaMemcpyHostToDevice);
  if (e == cudaSuccess)
    e = cudaStreamSynchronize (0);
  if (e != cudaSuccess) {
    r = gr_gpu_fail (e, "cudaMemcpy (coding table)");
    cudaFree (t->d);
    t->d = NULL;
  }
 out:
  if (r == 0)
    t->bits = bits;             /* kept for the JIT kernel */
  else
    free (bits);
  free (h);
  return r;
}

void
gr_gpu_tab_free (struct gr_gpu_tab *t)
{
  gr_gpu_tab_jit_free (t);
  if (t->d != NULL)
    cudaFree (t->d);
  t->d = NULL;
  free (t->bits);
  t->bits = NULL;
}

cudaError_t
gr_gpu_kernels_loadable (void)
{
  struct cudaFuncAttributes a;

  return cudaFuncGetAttributes (&a, rs_imad_kernel<1, 4, false>);
}

/* ---- copies ------------------------------------------------------------ */

/* Grid: x over the pieces of a row, y over the rows.  Rows whose
 * addresses and length are multiples of 16 move in uint4, four loads in
 * flight per thread before their stores (reads of host memory cross the
 * link: latency, not bandwidth, bounds a thread); others byte by byte. */
#define COPY_BLOCKS 8

static __global__ void __launch_bounds__ (THREADS)
copy_rows_kernel (const struct gr_gpu_rows r)
{
  const unsigned i = blockIdx.y;
  const size_t len = r.len[i];
  const size_t t0 = (size_t) blockIdx.x * THREADS + threadIdx.x;
  const size_t step = (size_t) gridDim.x * THREADS;

  if ((((uintptr_t) r.dst[i] | (uintptr_t) r.src[i] | len) & 15) == 0) {
    const uint4 *s = (const uint4 *) r.src[i];
    uint4 *d = (uint4 *) r.dst[i];
    const size_t n = len / 16;
    size_t x = t0;

    for (; x + 3 * step < n; x += 4 * step) {
      const uint4 a = s[x], b = s[x + step], c = s[x + 2 * step],
        e = s[x + 3 * step];

      d[x] = a;
      d[x + step] = b;
      d[x + 2 * step] = c;
      d[x + 3 * step] = e;
    }
    for (; x < n; x += step)
      d[x] = s[x];
  }
  else {
    const uint8_t *s = (const uint8_t *) r.src[i];
    uint8_t *d = (uint8_t *) r.dst[i];

    for (size_t x = t0; x < len; x += step)
      d[x] = s[x];
  }
}

cudaError_t
gr_gpu_copy_rows (const struct gr_gpu_rows *r, cudaStream_t st)
{
  if (r->n == 0)
    return cudaSuccess;
  copy_rows_kernel<<<dim3 (COPY_BLOCKS, r->n), THREADS, 0, st>>> (*r);
  return cudaGetLastError ();
}

/* ---- launch ------------------------------------------------------------ */

static unsigned
grid_x (size_t n)
{
  return n == 0 ? 1 : n > 65535 ? 65535 : (unsigned) n;
}

/* A launch of fewer blocks than this (two a multiprocessor of the
 * current device) leaves most of the GPU idle: a rebuild's or a degraded
 * read's chunk of one or two stripes of 64 KiB chunks is 4 to 8 blocks
 * of columns.  Such a launch takes one column a thread (RS) and spreads
 * its passes of output rows over blocks too. */
static unsigned
small_blocks (void)
{
  static int n;
  int v = __atomic_load_n (&n, __ATOMIC_RELAXED), dev;

  if (v == 0) {
    if (cudaGetDevice (&dev) != cudaSuccess ||
        cudaDeviceGetAttribute (&v, cudaDevAttrMultiProcessorCount, dev)
        != cudaSuccess || v < 1)
      v = 64;
    v *= 2;
    __atomic_store_n (&n, v, __ATOMIC_RELAXED);
  }
  return (unsigned) v;
}

/* Passes to spread over grid.z: enough for `want` blocks, at most
 * npasses. */
static unsigned
grid_z (unsigned blocks, unsigned want, int npasses)
{
  unsigned z = (want + blocks - 1) / blocks;

  return z > (unsigned) npasses ? (unsigned) npasses : z < 1 ? 1 : z;
}

#define CASE_MB(N, CALL) case N: CALL (N); break;
#define SWITCH_MB16(mb, CALL)                                           \
  switch (mb) {                                                         \
    CASE_MB (1, CALL) CASE_MB (2, CALL) CASE_MB (3, CALL)               \
    CASE_MB (4, CALL) CASE_MB (5, CALL) CASE_MB (6, CALL)               \
    CASE_MB (7, CALL) CASE_MB (8, CALL) CASE_MB (9, CALL)               \
    CASE_MB (10, CALL) CASE_MB (11, CALL) CASE_MB (12, CALL)            \
    CASE_MB (13, CALL) CASE_MB (14, CALL) CASE_MB (15, CALL)            \
    CASE_MB (16, CALL)                                                  \
  default: return cudaErrorInvalidValue;                                \
  }
#define SWITCH_MB8(mb, CALL)                                            \
  switch (mb) {                                                         \
    CASE_MB (1, CALL) CASE_MB (2, CALL) CASE_MB (3, CALL)               \
    CASE_MB (4, CALL) CASE_MB (5, CALL) CASE_MB (6, CALL)               \
    CASE_MB (7, CALL) CASE_MB (8, CALL)                                 \
  default: return cudaErrorInvalidValue;                                \
  }
#define SWITCH_MB2(mb, CALL)                                            \
  switch (mb) {                                                         \
    CASE_MB (1, CALL) CASE_MB (2, CALL)                                 \
  default: return cudaErrorInvalidValue;                                \
  }

/* The generic kernel of t over nstripes stripes reached through io. */
template <class IO>
static cudaError_t
launch_io (const struct gr_gpu_tab *t, int mb, bool one_z, int col0,
           int ncols, int acc, const IO &io, size_t nstripes, size_t lp,
           cudaStream_t st)
{
  const uint32_t *tab = t->d + (size_t) col0 * t->npad * t->per_row;
  const int nrows = t->nrows, npad = t->npad;
  const unsigned want = small_blocks ();
  size_t vlen;
  bool small;
  dim3 grid;

  if (t->code == GR_CODE_RS) {
    if (lp % 16)
      return cudaErrorInvalidValue;
    vlen = lp / 16;
    /* Small: one column a thread, passes over blocks. */
    small = (size_t) grid_x ((vlen + THREADS * rs_cols (mb) - 1)
                             / (THREADS * rs_cols (mb)))
      * grid_x (nstripes) * (size_t) (one_z ? 1 : npad / mb) < want;
#define L_RS_GRID(C)                                                    \
    grid = dim3 (grid_x ((vlen + THREADS * (C) - 1) / (THREADS * (C))), \
                 grid_x (nstripes));                                    \
    grid.z = small && !one_z ? grid_z (grid.x * grid.y, want, npad / mb) : 1
#define L_RS_LAUNCH(N, C)                                               \
    L_RS_GRID (C);                                                      \
    if (acc)                                                            \
      rs_go<N, C, true> (io, grid, st, tab, ncols, nrows, npad, vlen,   \
                         nstripes);                                     \
    else                                                                \
      rs_go<N, C, false> (io, grid, st, tab, ncols, nrows, npad, vlen,  \
                          nstripes)
#define L_RS_IMAD(N)                                                    \
    if (small) {                                                        \
      L_RS_LAUNCH (N, 1);                                               \
    }                                                                   \
    else {                                                              \
      L_RS_LAUNCH (N, rs_cols (N));                                     \
    }
    SWITCH_MB8 (mb, L_RS_IMAD);
  }
  else {
    if (lp % GR_CRS_GROUP)
      return cudaErrorInvalidValue;
    vlen = lp / 16;
    grid = dim3 (grid_x ((vlen / 8 + THREADS - 1) / THREADS),
                 grid_x (nstripes));
    if (!one_z && grid.x * grid.y * (size_t) (npad / mb) < want)
      grid.z = grid_z (grid.x * grid.y, want, npad / mb);
#define L_CRS(N)                                                        \
    if (acc)                                                            \
      crs_go<N, true> (io, grid, st, tab, ncols, nrows, npad, vlen,     \
                       nstripes);                                       \
    else                                                                \
      crs_go<N, false> (io, grid, st, tab, ncols, nrows, npad, vlen,    \
                        nstripes)
    SWITCH_MB2 (mb, L_CRS);
  }
  return cudaGetLastError ();
}

cudaError_t
gr_gpu_launch (const struct gr_gpu_tab *t, int col0, int ncols, int acc,
               const void *din, void *dout, size_t nstripes, size_t lp,
               cudaStream_t st)
{
  io_dense io;

  if (nstripes == 0 || lp == 0)
    return cudaSuccess;
  if (!acc && col0 == 0 && ncols == t->ncols &&
      __atomic_load_n (&t->jit_state, __ATOMIC_ACQUIRE) == 1) {
    cudaError_t e = gr_gpu_launch_jit (t, din, dout, nstripes, lp, st);

    if (e == cudaSuccess)
      return e;
    /* A launch error is not sticky: keep the message, drop the JIT kernel
     * of this table for good and use the generic one. */
    gr_gpu_fail (e, "JIT kernel launch (falling back)");
    __atomic_store_n (&((struct gr_gpu_tab *) t)->jit_state, -1,
                      __ATOMIC_RELEASE);
  }
  io.in = (const uint4 *) din;
  io.out = (uint4 *) dout;
  io.ncols = ncols;
  io.nrows = t->nrows;
  io.vlen = lp / 16;
  return launch_io (t, t->mb, false, col0, ncols, acc, io, nstripes, lp,
                    st);
}

/* Output rows a pass of the gathered kernel: each pass reads its inputs
 * again, across the link unless kept, so RS takes as many rows a pass
 * as its kernel holds (a divisor of npad: the table has npad rows a
 * column); CRS the table's. */
int
gr_gpu_gather_mb (const struct gr_gpu_tab *t)
{
  int mb = t->npad < RS_IMAD_MBMAX ? t->npad : RS_IMAD_MBMAX;

  if (t->code != GR_CODE_RS)
    return t->mb;
  while (t->npad % mb)
    mb--;
  return mb;
}

/* A launch over blocks where they are: KEPT, the inputs also kept (and
 * more than one pass): one block makes all passes of its columns and
 * reads them across the link once. */
template <bool KEPT>
static cudaError_t
launch_gather (const struct gr_gpu_tab *t, int col0, int ncols, int acc,
               const struct gr_gpu_gather *g, void *keep, size_t nstripes,
               size_t lp, cudaStream_t st)
{
  io_gather_t<KEPT> io;

  io.g = *g;
  io.ncols = ncols;
  io.nrows = t->nrows;
  io.vlen = lp / 16;
  io.nstripes = nstripes;
  io.kin = (uint4 *) keep;
  io.kout = keep ? (uint4 *) keep + nstripes * ncols * io.vlen : NULL;
  return launch_io (t, gr_gpu_gather_mb (t), KEPT, col0, ncols, acc, io,
                    nstripes, lp, st);
}

cudaError_t
gr_gpu_launch_gather (const struct gr_gpu_tab *t, int col0, int ncols,
                      int acc, const struct gr_gpu_gather *g, void *keep,
                      size_t nstripes, size_t lp, cudaStream_t st)
{
  if (nstripes == 0 || lp == 0)
    return cudaSuccess;
  if (nstripes * (size_t) (ncols + t->nrows) > GR_GPU_GATHER_MAX)
    return cudaErrorInvalidValue;
  if (keep != NULL && t->npad > gr_gpu_gather_mb (t))
    return launch_gather<true> (t, col0, ncols, acc, g, keep, nstripes,
                                lp, st);
  return launch_gather<false> (t, col0, ncols, acc, g, keep, nstripes, lp,
                               st);
}
