/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the block checksums on the GPU (gf.h's gr_code_op cksums):
 * the CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of every
 * GR_SUM_BLOCK bytes, without the inversions (ISA-L's crc32_iscsi (p,
 * 4096, 0)), of rows of a device-resident batch.
 *
 * One warp a block: lane l takes the 128 bytes at 128 l, with tables for
 * four bytes at a time (slicing by 4) in shared memory, built by each
 * thread block on entry.  Without the inversions the CRC is linear, so
 * the block's is the XOR over the lanes of lane l's CRC times x^(8 * 128
 * * (31 - l)) modulo the polynomial (what follows lane l's bytes shifts
 * it): one carry-less multiply a lane, by a constant of the lane. */
#include "gpu-internal.h"

#define POLY 0x82f63b78u
#define THREADS 256
#define LANE_BYTES (GR_SUM_BLOCK / 32)

/* a * b modulo the polynomial, both reflected (bit 31: x^0); zlib's
 * multmodp. */
__host__ __device__ static inline uint32_t
multmodp (uint32_t a, uint32_t b)
{
  uint32_t m = (uint32_t) 1 << 31, p = 0;

  for (;;) {
    if (a & m) {
      p ^= b;
      if ((a & (m - 1)) == 0)
        break;
    }
    m >>= 1;
    b = b & 1 ? (b >> 1) ^ POLY : b >> 1;
  }
  return p;
}

/* x^(8 n) modulo the polynomial: n zero bytes' shift. */
static uint32_t
shift_bytes (size_t n)
{
  uint32_t p = (uint32_t) 1 << 31, x = (uint32_t) 1 << 30;   /* 1, x */
  size_t e = 8 * n;

  while (e) {
    if (e & 1)
      p = multmodp (x, p);
    x = multmodp (x, x);
    e >>= 1;
  }
  return p;
}

struct lane_shifts {
  uint32_t k[32];
};

static struct lane_shifts
make_lane_shifts (void)
{
  struct lane_shifts s;

  for (int l = 0; l < 32; l++)
    s.k[l] = shift_bytes ((size_t) (31 - l) * LANE_BYTES);
  return s;
}

/* gr_gpu_cksum_stripes: rows r < nin + nout at base + r * pitch, blocks
 * t < nblk of each; the first nin the inputs, ncols a stripe, the rest
 * the outputs, nrows a stripe. */
static __global__ void __launch_bounds__ (THREADS)
cksum_kernel (const uint8_t *base, size_t pitch, unsigned nin,
              unsigned nout, unsigned ncols, unsigned nrows, unsigned nblk,
              size_t stride_s, size_t stride_r, uint32_t *out,
              struct lane_shifts ls)
{
  __shared__ uint32_t t[4][256];
  const unsigned lane = threadIdx.x % 32;
  const size_t warp = ((size_t) blockIdx.x * THREADS + threadIdx.x) / 32;
  uint32_t c;

  /* The tables: t[0] a byte's CRC, t[j] that byte followed by j zero
   * bytes. */
  c = threadIdx.x;
  for (int b = 0; b < 8; b++)
    c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
  t[0][threadIdx.x] = c;
  __syncthreads ();
  for (int j = 1; j < 4; j++) {
    c = t[j - 1][threadIdx.x];
    t[j][threadIdx.x] = (c >> 8) ^ t[0][c & 0xff];
    __syncthreads ();
  }
  if (warp >= (size_t) (nin + nout) * nblk)
    return;

  {
    const unsigned r = (unsigned) (warp / nblk), b = (unsigned) (warp % nblk);
    const uint4 *p = (const uint4 *) (base + r * pitch +
                                      (size_t) b * GR_SUM_BLOCK +
                                      lane * LANE_BYTES);

    c = 0;
#pragma unroll
    for (int i = 0; i < LANE_BYTES / 16; i++) {
      const uint4 v = p[i];
      const uint32_t w[4] = { v.x, v.y, v.z, v.w };

#pragma unroll
      for (int q = 0; q < 4; q++) {
        c ^= w[q];
        c = t[3][c & 0xff] ^ t[2][(c >> 8) & 0xff] ^ t[1][(c >> 16) & 0xff]
          ^ t[0][c >> 24];
      }
    }
    c = multmodp (ls.k[lane], c);
#pragma unroll
    for (int o = 16; o > 0; o /= 2)
      c ^= __shfl_xor_sync (0xffffffffu, c, o);
    if (lane == 0) {
      const size_t at = r < nin
        ? (r / ncols) * stride_s + (r % ncols) * stride_r
        : ((r - nin) / nrows) * stride_s +
          (ncols + (r - nin) % nrows) * stride_r;

      out[at + b] = c;
    }
  }
}

cudaError_t
gr_gpu_cksum_stripes (const void *base, size_t pitch, unsigned ns,
                      unsigned ncols, unsigned nrows, unsigned nblk,
                      size_t stride_s, size_t stride_r, uint32_t *out,
                      cudaStream_t st)
{
  static const struct lane_shifts ls = make_lane_shifts ();
  const size_t nin = (size_t) ns * ncols, nout = (size_t) ns * nrows;
  const size_t warps = (nin + nout) * nblk;
  const size_t blocks = (warps * 32 + THREADS - 1) / THREADS;

  if (warps == 0)
    return cudaSuccess;
  if (blocks > 0x7fffffff || nin + nout > 0xffffffffu ||
      (uintptr_t) base % 16 || pitch % 16)
    return cudaErrorInvalidValue;
  cksum_kernel<<<(unsigned) blocks, THREADS, 0, st>>>
    ((const uint8_t *) base, pitch, (unsigned) nin, (unsigned) nout, ncols,
     nrows, nblk, stride_s, stride_r, out, ls);
  return cudaGetLastError ();
}
