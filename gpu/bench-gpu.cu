/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - bench-gpu: GPU coding throughput, with the references that
 * bound it measured in the same run.
 *
 *  (a) kernel throughput, data resident on the device (>= 1 GiB of data,
 *      far beyond the 60 MB L2), encode and decode with m blocks lost, in
 *      data bytes/s, against roofline = copy_bw * k/(k+m), copy_bw being a
 *      device-to-device cudaMemcpy (bytes read + written);
 *  (b) host-to-host through the "cuda" backend (gr_encode) from
 *      page-locked buffers, batch 1..256 MiB, against pinned host-to-device
 *      bandwidth; and from ordinary (pageable) buffers; latency of one
 *      full-stripe batch;
 *  (c) ISA-L ec_encode_data on all host cores (one thread per core, each
 *      on its own stripes);
 *  (d) a performance model (G-CRS section 4 style): kernel time =
 *      max(bytes moved / copy_bw, instruction lanes / issue rate),
 *      predicted vs measured.
 *
 * Every configuration reported is checked in the same run: the outputs
 * of its last timed launch (first and last stripe) against a plain CPU
 * computation of the same matrix ((a), (a2), (a3), (a6)), and the parity
 * of gr_encode against ISA-L's ((b), (bx)).  A row that differs is
 * marked WRONG, and the program exits 1 at the end.
 *
 * QUICK=1: fewer geometries and repetitions.  BENCH_ONLY=a,a2,a3,b,c
 * runs only the sections named (a6, only when named: JIT forms, inputs
 * staged in shared memory, IMAD.HI shifts; bx, only when named: the
 * direct path's chunk size, sizes in MiB in BENCH_CHUNKS, default
 * 1,2,4,8,16; bp, only when named: the bound of a pipeline of chunks
 * at 64 MiB, from copies alone, against the engine; bc: 64 MiB batches
 * from 1 to 3 callers at once; r, only when named:
 * kernel launches while another thread page-locks memory (in the
 * primary context or one of its own) and another waits for the GPU,
 * page-locking's cost by size and from several threads; e: small
 * decodes from many threads, as degraded reads make them; s: a write
 * batch's block checksums with its encode; g: a write batch coded where
 * its blocks are against copied; rb: a rebuild's batch; ag, only when named: the JIT
 * kernels of the geometries in BENCH_GEOMS, "k:m:rs:dec ...", rs 1 for
 * RS and 0 for CRS, dec 1 for the decode of the first m data blocks
 * (m <= k), in the default form, to compare two builds).
 * BENCH_SYNC=spin|yield|block: the host's wait for the GPU.
 * BENCH_GATHER=0: gr_code_many's batches never coded where their blocks
 * are (the engine's run_gathered), always copied; 2: so wherever the
 * blocks allow, whatever the table's shape (enum gr_gpu_gather_use).
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cuda.h>
#include <isa-l/crc.h>
#include <isa-l/erasure_code.h>

#include "../gf/gf.h"
#include "gpu.h"
#include "gpu-internal.h"
#include "../common/now.h"

#define MiB ((size_t) 1 << 20)
#define GiB ((size_t) 1 << 30)

#define CK(x)                                                           \
  do {                                                                  \
    cudaError_t e_ = (x);                                               \
    if (e_ != cudaSuccess) {                                            \
      fprintf (stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,       \
               cudaGetErrorString (e_));                                \
      exit (1);                                                         \
    }                                                                   \
  } while (0)

static int quick;
static const char *only;

/* Is section name in BENCH_ONLY (or BENCH_ONLY unset)? */
static int
want (const char *name)
{
  const char *p = only;
  const size_t n = strlen (name);

  if (p == NULL || *p == 0)
    return strcmp (name, "bx") != 0 && strcmp (name, "a6") != 0 &&
      strcmp (name, "ag") != 0 &&
      strcmp (name, "bp") != 0 && strcmp (name, "r") != 0;
  while (*p) {
    const char *e = strchr (p, ',');
    const size_t l = e ? (size_t) (e - p) : strlen (p);
    if (l == n && strncmp (p, name, n) == 0)
      return 1;
    p += l + (e != NULL);
  }
  return 0;
}
static double copy_bw, h2d_bw, d2h_bw;
static int nsm, clock_khz;

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

static __global__ void
fill_kernel (uint64_t *p, size_t n, uint64_t seed)
{
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n;
       i += (size_t) gridDim.x * blockDim.x) {
    uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    p[i] = x;
  }
}

/* Median of reps timings (seconds) of fn on the device, by events. */
template <typename F> static double
time_dev (int reps, F fn)
{
  cudaEvent_t a, b;
  double t[32];
  float ms;

  CK (cudaEventCreate (&a));
  CK (cudaEventCreate (&b));
  fn ();                        /* warm-up */
  CK (cudaDeviceSynchronize ());
  for (int i = 0; i < reps; i++) {
    CK (cudaEventRecord (a));
    fn ();
    CK (cudaEventRecord (b));
    CK (cudaEventSynchronize (b));
    CK (cudaEventElapsedTime (&ms, a, b));
    t[i] = ms * 1e-3;
  }
  qsort (t, reps, sizeof t[0], cmp_double);
  CK (cudaEventDestroy (a));
  CK (cudaEventDestroy (b));
  return t[reps / 2];
}

/* Rows checked against the CPU, and those found wrong. */
static int nchecked, nwrong;

/* out (m blocks of len) = mat (m x k) times in (k blocks of len), as the
 * kernels define it: RS bytewise over GF(2^8) (ISA-L with the matrix's
 * tables), CRS over the bit planes of each 4096-byte group (gf/crs.c's
 * layout: packet r of output j = XOR of the packets b of input c whose
 * bit of the bitmatrix is set). */
static void
cpu_mul (enum gr_code code, const uint8_t *mat, int k, int m,
         uint8_t *const *in, uint8_t *const *out, size_t len)
{
  if (code == GR_CODE_RS) {
    uint8_t *tbls = (uint8_t *) malloc ((size_t) 32 * k * m);

    ec_init_tables (k, m, (unsigned char *) mat, tbls);
    ec_encode_data ((int) len, k, m, tbls, (unsigned char **) in,
                    (unsigned char **) out);
    free (tbls);
    return;
  }
  uint8_t *bits = (uint8_t *) malloc ((size_t) 64 * k * m);
  const size_t pw = GR_CRS_PACKET / 8;  /* 64-bit words per packet */

  gr_gf_bitmatrix (mat, m, k, bits);
  for (int j = 0; j < m; j++)
    memset (out[j], 0, len);
  for (size_t g = 0; g < len; g += GR_CRS_GROUP)
    for (int r = 0; r < 8 * m; r++) {
      uint64_t *o = (uint64_t *) (out[r / 8] + g + (r % 8) * GR_CRS_PACKET);
      for (int cb = 0; cb < 8 * k; cb++)
        if (bits[(size_t) r * 8 * k + cb]) {
          const uint64_t *x = (const uint64_t *)
            (in[cb / 8] + g + (cb % 8) * GR_CRS_PACKET);
          for (size_t w = 0; w < pw; w++)
            o[w] ^= x[w];
        }
    }
  free (bits);
}

/* Check the last launch of mat's kernel over a device batch (the layout
 * of gpu-internal.h, nothing accumulated): the first and last of ns
 * stripes against cpu_mul.  Returns " verified" or " WRONG" for the row
 * and counts it. */
static const char *
check_launch (enum gr_code code, const uint8_t *mat, int k, int m,
              const void *din, const void *dout, size_t ns, size_t len)
{
  uint8_t *h = (uint8_t *) malloc ((size_t) (k + 2 * m) * len);
  uint8_t *in[GR_MAX_MEMBERS], *got[GR_MAX_MEMBERS], *want_[GR_MAX_MEMBERS];
  int bad = 0;

  if (h == NULL) {
    fprintf (stderr, "out of memory\n");
    exit (1);
  }
  for (int i = 0; i < k; i++)
    in[i] = h + (size_t) i * len;
  for (int j = 0; j < m; j++) {
    got[j] = h + (size_t) (k + j) * len;
    want_[j] = h + (size_t) (k + m + j) * len;
  }
  CK (cudaDeviceSynchronize ());
  for (size_t s = 0; s < ns; s += ns > 1 ? ns - 1 : 1) {
    CK (cudaMemcpy (h, (const uint8_t *) din + s * k * len, k * len,
                    cudaMemcpyDeviceToHost));
    CK (cudaMemcpy (got[0], (const uint8_t *) dout + s * m * len, m * len,
                    cudaMemcpyDeviceToHost));
    cpu_mul (code, mat, k, m, in, want_, len);
    if (memcmp (got[0], want_[0], m * len) != 0)
      bad = 1;
  }
  free (h);
  nchecked++;
  nwrong += bad;
  return bad ? " WRONG" : " verified";
}

/* The parity of blocks (stripes 0 and ns - 1) against ISA-L's encode of
 * the same data. */
static const char *
check_encode (int k, int m, enum gr_code code, uint8_t *const *blk,
              size_t ns, size_t len)
{
  struct gr_coder *c;
  const int n = k + m;
  uint8_t *buf = (uint8_t *) malloc ((size_t) n * len);
  uint8_t *b[GR_MAX_MEMBERS];
  int bad = 0;

  if (gr_coder_new (&c, k, m, code, gr_backend_find ("isal")) < 0) {
    fprintf (stderr, "no ISA-L coder for %d+%d\n", k, m);
    exit (1);
  }
  if (buf == NULL) {
    fprintf (stderr, "out of memory\n");
    exit (1);
  }
  for (size_t s = 0; s < ns; s += ns > 1 ? ns - 1 : 1) {
    for (int i = 0; i < n; i++) {
      b[i] = buf + (size_t) i * len;
      if (i < k)
        memcpy (b[i], blk[s * n + i], len);
    }
    if (gr_encode (c, b, 1, len) < 0) {
      fprintf (stderr, "ISA-L encode failed\n");
      exit (1);
    }
    for (int j = k; j < n; j++)
      if (memcmp (b[j], blk[s * n + j], len) != 0)
        bad = 1;
  }
  gr_coder_free (c);
  free (buf);
  nchecked++;
  nwrong += bad;
  return bad ? " WRONG" : " verified";
}

/* Random bytes (xorshift), so that a kernel that skips its inputs shows. */
static void
fill_random (uint8_t *p, size_t n, uint64_t seed)
{
  uint64_t x = seed * 0x9e3779b97f4a7c15ull | 1;
  size_t i;

  for (i = 0; i + 8 <= n; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    memcpy (p + i, &x, 8);
  }
  for (; i < n; i++)
    p[i] = (uint8_t) (x >> (8 * (i % 8)));
}

static void
references (void)
{
  const size_t sz = GiB, hsz = 256 * MiB;
  void *d0, *d1, *h;
  double t;

  CK (cudaMalloc (&d0, sz));
  CK (cudaMalloc (&d1, sz));
  fill_kernel<<<1024, 256>>> ((uint64_t *) d0, sz / 8, 1);
  CK (cudaGetLastError ());
  t = time_dev (7, [&] { CK (cudaMemcpy (d1, d0, sz, cudaMemcpyDeviceToDevice)); });
  copy_bw = 2.0 * sz / t;
  printf ("copy_bw (device-to-device cudaMemcpy of 1 GiB, read + written): "
          "%.0f GB/s\n", copy_bw / 1e9);
  CK (cudaHostAlloc (&h, hsz, cudaHostAllocDefault));
  memset (h, 1, hsz);
  t = time_dev (5, [&] { CK (cudaMemcpy (d0, h, hsz, cudaMemcpyHostToDevice)); });
  h2d_bw = hsz / t;
  t = time_dev (5, [&] { CK (cudaMemcpy (h, d0, hsz, cudaMemcpyDeviceToHost)); });
  d2h_bw = hsz / t;
  printf ("pinned host-to-device (256 MiB): %.1f GB/s; device-to-host: "
          "%.1f GB/s\n", h2d_bw / 1e9, d2h_bw / 1e9);
  CK (cudaFreeHost (h));
  CK (cudaFree (d0));
  CK (cudaFree (d1));
}

/* ---- (a) + (d) --------------------------------------------------------- */

/* The generic kernel of a code, as the output names it. */
static const char *
generic_name (enum gr_code code)
{
  return code == GR_CODE_RS ? "rs-imad" : "crs-mask";
}

/* Instruction lanes per data byte of a code's generic kernel (ALU pipe,
 * FMA pipe), counted from the kernel's inner loops; npasses re-reads
 * ignored. */
static void
ops_per_byte (enum gr_code code, int m, double *alu, double *fma)
{
  if (code == GR_CODE_RS) {     /* per 4-byte word and input: 15 ALU for
                                 * the 8 bit planes; per output: 8 IMAD
                                 * and 4 three-input XORs (LOP3) */
    *alu = (15.0 + 4.0 * m) / 4;
    *fma = 8.0 * m / 4;
  }
  else {                        /* per 4-byte word of an input packet and
                                 * output row: 1 LOP3 (acc ^= p & mask);
                                 * 8m rows per 8 words (32 bytes) */
    *alu = 8.0 * m * 8 / 32;
    *fma = 0;
  }
}

static double
model_ops (double alu, double fma, int k, int m, size_t data)
{
  const double lanes_per_s = (double) nsm * clock_khz * 1e3;
  /* Per SM and clock: 64 ALU lanes, 64 IMAD lanes, 128 issued lanes. */
  const double t_ops = fmax (fmax (alu / 64, fma / 64), (alu + fma) / 128)
    * data / lanes_per_s;
  const double t_mem = (double) data * (k + m) / k / copy_bw;

  return fmax (t_ops, t_mem);
}

static double
model_time (enum gr_code code, int k, int m, size_t data)
{
  double alu, fma;

  ops_per_byte (code, m, &alu, &fma);
  return model_ops (alu, fma, k, m, data);
}

/* JIT XOR network, per item (32 bytes of each block): the LOP3s of the
 * generated network, plus for RS 12 swap-moves of ~5 ALU ops per 8x8
 * transpose, one per input and output block.  Also returns the bitmatrix
 * density. */
static double
model_jit (const struct gr_gpu_tab *t, size_t data, double *density)
{
  const int k = t->ncols, m = t->nrows;
  double lop = 0, ones = 0;

  /* As jit.cu generates it: per input, one XOR per needed subset XOR of
   * planes 0-3 / 4-7 (beyond single planes), then one LOP3 per row that
   * uses the input. */
  for (int i = 0; i < k; i++) {
    int need[2][16] = { { 0 } };

    for (int r = 0; r < 8 * m; r++) {
      int sub[2] = { 0, 0 };
      for (int b = 0; b < 8; b++)
        if (t->bits[(size_t) r * 8 * k + i * 8 + b]) {
          sub[b / 4] |= 1 << (b % 4);
          ones++;
        }
      for (int h = 0; h < 2; h++)
        for (int x = sub[h]; x; x &= x - 1)
          need[h][x] = 1;
      if (sub[0] || sub[1])
        lop++;
    }
    for (int h = 0; h < 2; h++)
      for (int x = 1; x < 16; x++)
        if (need[h][x] && (x & (x - 1)))
          lop++;
  }
  *density = ones / (64.0 * k * m);
  if (t->code == GR_CODE_RS)
    lop += 60.0 * (k + m);
  return model_ops (lop / (32.0 * k), 0, k, m, data);
}

/* One JIT kernel timed: data GB/s, % of roofline, compile + load ms,
 * registers per thread, local bytes (spills), resident blocks per SM. */
struct jit_run {
  double gbs, roof, ms;
  int regs, per_sm;
  size_t local;
  const char *check;    /* check_launch's verdict */
};

/* Build the JIT kernel of mat (m x k, code) with the code generation
 * options set now and time 5 launches over ns stripes of len bytes.
 * 0, or -1 if it could not be built (gr_gpu_last_error says why). */
static int
time_jit (enum gr_code code, const uint8_t *mat, int k, int m, void *din,
          void *dout, size_t ns, size_t len, struct jit_run *r)
{
  struct gr_gpu_tab t;
  struct cudaFuncAttributes fa;
  double secs, t0;
  int ret = -1;

  if (gr_gpu_tab_make (code, mat, m, k, &t) < 0)
    exit (1);
  t0 = gr_now ();
  if (gr_gpu_tab_jit (&t) == 0) {
    r->ms = (gr_now () - t0) * 1e3;
    memset (&fa, 0, sizeof fa);
    r->per_sm = 0;
    (void) cudaFuncGetAttributes (&fa, (const void *) t.jit);
    (void) cudaOccupancyMaxActiveBlocksPerMultiprocessor
      (&r->per_sm, (const void *) t.jit, 128, t.jit_smem);
    (void) cudaGetLastError ();
    r->regs = fa.numRegs;
    r->local = (size_t) fa.localSizeBytes;
    secs = time_dev (5, [&] {
        CK (gr_gpu_launch (&t, 0, k, 0, din, dout, ns, len, 0));
      });
    r->gbs = ns * k * len / secs / 1e9;
    r->roof = 100 * ns * k * len / secs / (copy_bw * k / (k + m));
    r->check = check_launch (code, mat, k, m, din, dout, ns, len);
    ret = 0;
  }
  gr_gpu_tab_free (&t);
  return ret;
}

/* Decode matrix (m x k) for the loss of data blocks 0..m-1 (m <= k). */
static void
decode_matrix (const uint8_t *gen, int k, int m, uint8_t *dm)
{
  uint8_t *s = (uint8_t *) malloc ((size_t) k * k);
  uint8_t *inv = (uint8_t *) malloc ((size_t) k * k);
  int row = 0;

  for (int i = m; i < k + m && row < k; i++, row++)
    memcpy (s + (size_t) row * k, gen + (size_t) i * k, k);
  if (gr_gf_invert_matrix (s, inv, k) < 0) {
    fprintf (stderr, "singular survivor matrix\n");
    exit (1);
  }
  memcpy (dm, inv, (size_t) m * k);     /* rows 0..m-1: the lost data */
  free (s);
  free (inv);
}

/* time_jit of k+m's encode matrix, or (dec, m <= k) of the decode of
 * its first m data blocks, on as many stripes of 1 MiB blocks as fit
 * 1 GiB of the larger side. */
static int
time_jit_geom (enum gr_code code, int k, int m, int dec, void *din,
               void *dout, struct jit_run *r)
{
  const size_t ns = GiB / ((size_t) (k > m ? k : m) * MiB);
  uint8_t *gen = (uint8_t *) malloc ((size_t) (k + m) * k);
  uint8_t *dm = (uint8_t *) malloc ((size_t) m * k);
  int ret;

  if (gen == NULL || dm == NULL) {
    fprintf (stderr, "out of memory\n");
    exit (1);
  }
  gr_gf_gen_matrix (k, m, gen);
  if (dec)
    decode_matrix (gen, k, m, dm);
  ret = time_jit (code, dec ? dm : gen + (size_t) k * k, k, m, din, dout,
                  ns, MiB, r);
  free (gen);
  free (dm);
  return ret;
}

/* A form of JIT kernel: inputs staged in shared memory
 * (gr_gpu_jit_stage), RS right shifts as IMAD.HI (gr_gpu_jit_shr),
 * network rows as explicit LOP3s (gr_gpu_jit_lop3); codes: 1 RS, 2 CRS,
 * 3 both. */
struct jit_form {
  int stage, shr, lop3, codes;
};

/* Encode (and decode for 16+16) of each geometry with each form: GB/s,
 * registers per thread, local memory (spills), resident blocks per SM. */
static void
bench_jit_forms (void *din, void *dout, const char *title,
                 const struct jit_form *forms, int nforms)
{
  static const int geo[][3] = {     /* k, m, RS? */
    { 16, 16, 1 }, { 16, 16, 0 }, { 12, 12, 1 }, { 8, 8, 1 }, { 8, 8, 0 },
    { 10, 4, 1 }, { 10, 4, 0 },
  };
  const int save[3] = { gr_gpu_jit_stage, gr_gpu_jit_shr, gr_gpu_jit_lop3 };

  printf ("\n%s, GB/s of data (median of 5)\n", title);
  for (size_t gi = 0; gi < sizeof geo / sizeof geo[0]; gi++) {
    const int k = geo[gi][0], m = geo[gi][1];
    const enum gr_code code = geo[gi][2] ? GR_CODE_RS : GR_CODE_CRS;

    for (int op = 0; op < (k == 16 && m == 16 ? 2 : 1); op++)
      for (int fi = 0; fi < nforms; fi++) {
        const struct jit_form *f = &forms[fi];
        struct jit_run r;

        if (!(f->codes & (code == GR_CODE_RS ? 1 : 2)))
          continue;
        gr_gpu_jit_stage = f->stage;
        gr_gpu_jit_shr = f->shr;
        gr_gpu_jit_lop3 = f->lop3;
        if (time_jit_geom (code, k, m, op, din, dout, &r) == 0)
          printf ("%d+%d %-3s %s stage=%d shr=%d lop3=%d: "
                  "%7.1f GB/s (%.1f%% of roofline; %d regs, %zu B local, "
                  "%d blocks/SM; compile %.0f ms)%s\n",
                  k, m, code == GR_CODE_RS ? "RS" : "CRS",
                  op == 0 ? "enc" : "dec", f->stage, f->shr,
                  f->lop3, r.gbs, r.roof, r.regs, r.local,
                  r.per_sm, r.ms, r.check);
        else
          printf ("%d+%d jit failed: %s\n", k, m, gr_gpu_last_error ());
      }
  }
  gr_gpu_jit_stage = save[0];
  gr_gpu_jit_shr = save[1];
  gr_gpu_jit_lop3 = save[2];
}

/* (ag): one geometry "k:m:rs:dec" in the default form. */
static void
bench_jit_geom (void *din, void *dout, const char *geom)
{
  int k, m, rs, dec;
  struct jit_run r;

  if (sscanf (geom, "%d:%d:%d:%d", &k, &m, &rs, &dec) != 4 || k < 1 ||
      m < 1 || k + m > GR_MAX_MEMBERS || (dec && m > k)) {
    printf ("ag %s: not k:m:rs:dec with dec only where m <= k\n", geom);
    return;
  }
  if (time_jit_geom (rs ? GR_CODE_RS : GR_CODE_CRS, k, m, dec, din, dout,
                     &r) == 0)
    printf ("ag %d+%d %s %s: %7.1f GB/s (%.1f%% of roofline; %d regs, "
            "%zu B local, %d blocks/SM)%s\n", k, m, rs ? "RS" : "CRS",
            dec ? "dec" : "enc", r.gbs, r.roof, r.regs, r.local, r.per_sm,
            r.check);
  else
    printf ("ag %d+%d jit failed: %s\n", k, m, gr_gpu_last_error ());
  fflush (stdout);
}

static void
bench_kernels (void)
{
  static const int pairs[][2] = {
    { 4, 2 }, { 6, 3 }, { 8, 2 }, { 10, 4 }, { 12, 4 }, { 16, 4 },
    { 8, 8 }, { 16, 16 },
  };
  const size_t len = MiB;
  const int npairs = quick ? 4 : 8;
  void *din, *dout;
  double err_sum = 0;
  int err_n = 0;

  CK (cudaMalloc (&din, GiB + 16 * MiB));
  CK (cudaMalloc (&dout, GiB + 16 * MiB));
  fill_kernel<<<1024, 256>>> ((uint64_t *) din, (GiB + 16 * MiB) / 8, 7);
  CK (cudaGetLastError ());
  CK (cudaDeviceSynchronize ());

  if (want ("a")) {
  printf ("\n(a) kernel throughput, device-resident, blocks of 1 MiB, "
          ">= 1 GiB of data per launch (median of %d)\n", quick ? 3 : 7);
  printf ("%-6s %-4s %-10s %-6s %9s %9s %7s %9s %7s\n", "k+m", "code",
          "variant", "op", "GB/s", "roofline", "%roof", "model", "err");
  }
  for (int pi = 0; pi < (quick ? 4 : npairs) && want ("a"); pi++) {
    const int k = pairs[pi][0], m = pairs[pi][1];
    const size_t ns = GiB / ((size_t) k * len) + (GiB % ((size_t) k * len) != 0);
    const size_t data = ns * k * len;
    uint8_t *gen = (uint8_t *) malloc ((size_t) (k + m) * k);
    uint8_t *dm = (uint8_t *) malloc ((size_t) m * k);
    char km[16];

    if ((ns * m * len) > GiB + 16 * MiB || data > GiB + 16 * MiB) {
      fprintf (stderr, "buffer too small\n");
      exit (1);
    }
    gr_gf_gen_matrix (k, m, gen);
    decode_matrix (gen, k, m, dm);
    snprintf (km, sizeof km, "%d+%d", k, m);
    /* The generic kernels, then the JIT XOR networks (RS, CRS). */
    for (int v = 0; v < 4; v++) {
      const int jit = v >= 2;
      const enum gr_code code = v % 2 == 0 ? GR_CODE_RS : GR_CODE_CRS;

      for (int op = 0; op < 2; op++) {
        struct gr_gpu_tab t;
        double secs, bw, roof, pred, dens = 0;
        char vname[32];
        int r;

        r = gr_gpu_tab_make (code, op == 0 ? gen + (size_t) k * k : dm, m,
                             k, &t);
        if (r < 0) {
          fprintf (stderr, "tab_make: %d %s\n", r, gr_gpu_last_error ());
          exit (1);
        }
        if (jit) {
          double t0 = gr_now ();
          if (gr_gpu_tab_jit (&t) < 0) {
            printf ("%-6s jit unavailable: %s\n", km, gr_gpu_last_error ());
            gr_gpu_tab_free (&t);
            continue;
          }
          if (op == 0)
            printf ("%-6s %-4s jit compile + load: %.0f ms\n", km,
                    code == GR_CODE_RS ? "RS" : "CRS", (gr_now () - t0) * 1e3);
        }
        secs = time_dev (quick ? 3 : 7, [&] {
            CK (gr_gpu_launch (&t, 0, k, 0, din, dout, ns, len, 0));
          });
        if (jit && t.jit_state != 1)
          printf ("%-6s jit launch failed, generic kernel measured: %s\n",
                  km, gr_gpu_last_error ());
        pred = jit ? model_jit (&t, data, &dens)
          : model_time (code, k, m, data);
        gr_gpu_tab_free (&t);
        const char *verdict = check_launch (code, op == 0 ? gen + (size_t) k * k
                                            : dm, k, m, din, dout, ns, len);
        bw = data / secs;
        roof = copy_bw * k / (k + m);
        snprintf (vname, sizeof vname, "%s", !jit ? generic_name (code)
                  : code == GR_CODE_RS ? "rs-jit" : "crs-jit");
        printf ("%-6s %-4s %-10s %-6s %9.1f %9.1f %6.1f%% %9.1f %+6.0f%%",
                km, code == GR_CODE_RS ? "RS" : "CRS", vname,
                op == 0 ? "encode" : "decode",
                bw / 1e9, roof / 1e9, 100 * bw / roof, data / pred / 1e9,
                100 * (pred - secs) / secs);
        if (jit)
          printf ("  density %.2f", dens);
        printf ("%s\n", verdict);
        fflush (stdout);
        err_sum += fabs (pred - secs) / secs;
        err_n++;
      }
    }
    free (gen);
    free (dm);
  }
  /* Rows per pass: more rows share each input load, fewer keep
   * registers (and occupancy) free. */
  if (!quick && want ("a2")) {
    printf ("\n(a2) rows-per-pass sweep, encode (GB/s of data)\n");
    for (int pi = 3; pi < npairs; pi += 3) {   /* 10+4, 8+8 */
      const int k = pairs[pi][0], m = pairs[pi][1];
      const size_t ns = GiB / ((size_t) k * len);
      uint8_t *gen = (uint8_t *) malloc ((size_t) (k + m) * k);

      gr_gf_gen_matrix (k, m, gen);
      for (int ci = 0; ci < 2; ci++) {
        const enum gr_code code = ci == 0 ? GR_CODE_RS : GR_CODE_CRS;

        printf ("%d+%d %-10s", k, m, generic_name (code));
        for (int mb = 1; mb <= 8; mb *= 2) {
          struct gr_gpu_tab t;
          double secs;

          gr_gpu_mbmax[code] = mb;
          if (gr_gpu_tab_make (code, gen + (size_t) k * k, m, k, &t) < 0)
            exit (1);
          if (t.mb == mb || mb == 1) {
            secs = time_dev (5, [&] {
                CK (gr_gpu_launch (&t, 0, k, 0, din, dout, ns, len, 0));
              });
            printf ("  mb=%d: %7.1f%s", t.mb, ns * k * len / secs / 1e9,
                    check_launch (code, gen + (size_t) k * k, k, m, din,
                                  dout, ns, len));
          }
          gr_gpu_tab_free (&t);
        }
        gr_gpu_mbmax[code] = 0;
        printf ("\n");
      }
      free (gen);
    }
  }
  /* JIT kernels: output blocks per pass (fewer accumulators, higher
   * occupancy, inputs re-read). */
  if (!quick && want ("a3")) {
    const int saved = gr_gpu_jit_passrows;

    printf ("\n(a3) JIT output blocks per pass, encode (GB/s of data; "
            "compile ms)\n");
    for (int pi = 6; pi < npairs; pi++) {      /* 8+8, 16+16 */
      const int k = pairs[pi][0], m = pairs[pi][1];
      const size_t ns = GiB / ((size_t) k * len);
      uint8_t *gen = (uint8_t *) malloc ((size_t) (k + m) * k);

      gr_gf_gen_matrix (k, m, gen);
      for (int ci = 0; ci < 2; ci++) {
        const enum gr_code code = ci == 0 ? GR_CODE_RS : GR_CODE_CRS;

        printf ("%d+%d %-4s", k, m, ci == 0 ? "RS" : "CRS");
        /* The matrix's kernel with pr output blocks per pass. */
        for (int pr = m; pr >= 2; pr /= 2) {
          struct jit_run r;

          gr_gpu_jit_passrows = pr;
          if (time_jit (code, gen + (size_t) k * k, k, m, din, dout, ns, len,
                        &r) == 0)
            printf ("  %d/pass: %7.1f (%4.0f ms)%s", pr, r.gbs, r.ms,
                    r.check);
        }
        printf ("\n");
      }
      free (gen);
    }
    gr_gpu_jit_passrows = saved;
  }
  if (want ("ag")) {
    const char *env = getenv ("BENCH_GEOMS");
    char buf[512], *save = NULL;

    snprintf (buf, sizeof buf, "%s", env ? env : "16:16:1:0 16:16:1:1");
    printf ("\n(ag) JIT kernels of BENCH_GEOMS, default form, blocks of "
            "1 MiB, GB/s of data (median of 5)\n");
    for (char *tok = strtok_r (buf, " ", &save); tok;
         tok = strtok_r (NULL, " ", &save))
      bench_jit_geom (din, dout, tok);
  }
  if (want ("a6")) {
    static const struct jit_form f[] = {
      { 0, 0, 0, 3 }, { 0, 0, 1, 3 }, { 0, 1, 1, 1 }, { 1, 1, 1, 1 },
      { 1, 0, 1, 3 },
    };
    bench_jit_forms (din, dout, "(a6) JIT forms: stage = inputs staged in "
                     "shared memory by cp.async (per item); shr = RS right "
                     "shifts as IMAD.HI; lop3 = network rows as explicit "
                     "LOP3s", f, (int) (sizeof f / sizeof f[0]));
  }
  if (want ("a"))
    printf ("(d) model: predicted GB/s = data / max(data*(k+m)/k / copy_bw, "
            "instruction lanes / (SMs x %d MHz x pipe width)); mean |error| "
            "%.0f%%\n", clock_khz / 1000, 100 * err_sum / err_n);
  CK (cudaFree (din));
  CK (cudaFree (dout));
}

/* ---- (r) --------------------------------------------------------------- */

/* What registering memory costs the other threads: one thread page-locks
 * and unlocks fresh 1 MiB buffers from malloc, written first (as a
 * request buffer that nbdkit starts with each connection's threads),
 * while this thread times its kernel launches; in the primary context,
 * or (own_ctx) in a context of its own made for it, the range portable
 * (page-locked for every context). */
static volatile int reg_stop;
static double reg_us, unreg_us;
static int reg_n;

typedef CUresult (*ctx_create_fn) (CUcontext *, unsigned, CUdevice);
typedef CUresult (*ctx_destroy_fn) (CUcontext);

/* The driver's function name (of the version given), or exit. */
static void *
driver_fn (const char *name, unsigned version)
{
  enum cudaDriverEntryPointQueryResult q;
  void *fn = NULL;

  CK (cudaGetDriverEntryPointByVersion (name, &fn, version,
                                        cudaEnableDefault, &q));
  if (q != cudaDriverEntryPointSuccess || fn == NULL) {
    fprintf (stderr, "driver entry point %s: not found\n", name);
    exit (1);
  }
  return fn;
}

/* A context of the calling thread's own on device 0, made current. */
static CUcontext
own_context (void)
{
  CUcontext ctx;
  CUresult r = ((ctx_create_fn) driver_fn ("cuCtxCreate", 3020)) (&ctx, 0,
                                                                   0);

  if (r != CUDA_SUCCESS) {
    fprintf (stderr, "cuCtxCreate: %d\n", (int) r);
    exit (1);
  }
  return ctx;
}

static void *
reg_thread (void *arg)
{
  const bool own_ctx = *(const bool *) arg;
  CUcontext ctx = NULL;

  if (own_ctx)
    ctx = own_context ();
  else
    CK (cudaSetDevice (0));
  while (!reg_stop) {
    uint8_t *p = (uint8_t *) malloc (MiB);
    double t0, t1, t2;

    memset (p, 1, MiB);
    t0 = gr_now ();
    CK (cudaHostRegister (p, MiB, cudaHostRegisterPortable |
                          cudaHostRegisterMapped));
    t1 = gr_now ();
    CK (cudaHostUnregister (p));
    t2 = gr_now ();
    free (p);
    reg_us += (t1 - t0) * 1e6;
    unreg_us += (t2 - t1) * 1e6;
    reg_n++;
  }
  if (ctx)
    ((ctx_destroy_fn) driver_fn ("cuCtxDestroy", 4000)) (ctx);
  return NULL;
}

static __global__ void
tiny_kernel (uint32_t *p)
{
  p[threadIdx.x] += 1;
}

/* The same with a gathered launch's parameters (3.5 KiB of addresses). */
static __global__ void
tiny_big_kernel (const __grid_constant__ struct gr_gpu_gather g, uint32_t *p)
{
  p[threadIdx.x] += (uint32_t) ((uintptr_t) g.p[threadIdx.x] & 1);
}

/* Another thread waiting for the GPU as the engine does (the default
 * schedule: a spin), on kernels of about a millisecond, until wait_stop. */
static volatile int wait_stop;

static __global__ void
busy_kernel (long long cycles)
{
  const long long t0 = clock64 ();

  while (clock64 () - t0 < cycles)
    ;
}

static void *
wait_thread (void *arg)
{
  cudaStream_t st;

  (void) arg;
  CK (cudaSetDevice (0));
  CK (cudaStreamCreateWithFlags (&st, cudaStreamNonBlocking));
  while (!wait_stop) {
    busy_kernel<<<1, 32, 0, st>>> (2000000);   /* ~1 ms at 2 GHz */
    CK (cudaGetLastError ());
    CK (cudaStreamSynchronize (st));
  }
  CK (cudaStreamDestroy (st));
  return NULL;
}

/* Median, 99th percentile and mean (us) of n launches (big: with a
 * gathered launch's parameters), each timed on the host from the call
 * to its return. */
static void
time_launches (const char *what, uint32_t *d, cudaStream_t st, int n,
               bool big)
{
  double *t = (double *) malloc (n * sizeof *t), sum = 0;
  static struct gr_gpu_gather g;

  for (int i = 0; i < n; i++) {
    const double t0 = gr_now ();

    if (big)
      tiny_big_kernel<<<1, 32, 0, st>>> (g, d);
    else
      tiny_kernel<<<1, 32, 0, st>>> (d);
    CK (cudaGetLastError ());
    t[i] = (gr_now () - t0) * 1e6;
    sum += t[i];
    if (i % 64 == 63)
      CK (cudaStreamSynchronize (st));
  }
  CK (cudaStreamSynchronize (st));
  qsort (t, n, sizeof *t, cmp_double);
  printf ("  %s launches %s: median %.1f us, 99th percentile %.1f us, "
          "mean %.1f us, longest %.0f us\n", big ? "3.5 KiB" : "small",
          what, t[n / 2], t[n * 99 / 100], sum / n, t[n - 1]);
  free (t);
}

/* Sum of n words at p (mapped host memory, or device memory). */
static __global__ void
sum_kernel (const uint32_t *p, size_t n, unsigned long long *out)
{
  unsigned long long v = 0;

  for (size_t i = threadIdx.x; i < n; i += blockDim.x)
    v += p[i];
  atomicAdd (out, v);
}

/* A range page-locked in a context of another thread's own (portable,
 * mapped), read by a kernel of the primary context through its host
 * address while that context lives: is the sum right?  Then
 * unregistered in it. */
static volatile int other_step;

static void *
reg_other (void *arg)
{
  CUcontext ctx = own_context ();

  CK (cudaHostRegister (arg, MiB, cudaHostRegisterPortable |
                        cudaHostRegisterMapped));
  __atomic_store_n (&other_step, 1, __ATOMIC_RELEASE);
  while (__atomic_load_n (&other_step, __ATOMIC_ACQUIRE) != 2)
    usleep (100);
  CK (cudaHostUnregister (arg));
  ((ctx_destroy_fn) driver_fn ("cuCtxDestroy", 4000)) (ctx);
  return NULL;
}

static void
other_context_usable (void)
{
  uint32_t *p = (uint32_t *) malloc (MiB);
  unsigned long long *d, got = 0, want = 0;
  void *dp = NULL;
  pthread_t th;
  cudaError_t e;

  for (size_t i = 0; i < MiB / 4; i++)
    want += p[i] = (uint32_t) (i * 2654435761u);
  CK (cudaMalloc (&d, sizeof *d));
  CK (cudaMemset (d, 0, sizeof *d));
  other_step = 0;
  pthread_create (&th, NULL, reg_other, p);
  while (__atomic_load_n (&other_step, __ATOMIC_ACQUIRE) != 1)
    usleep (100);
  {
    struct cudaPointerAttributes at;

    if (cudaPointerGetAttributes (&at, p) == cudaSuccess)
      printf ("  1 MiB page-locked in another context: the primary "
              "context takes it for %s memory\n",
              at.type == cudaMemoryTypeHost ? "page-locked host"
              : "NOT page-locked");
    (void) cudaGetLastError ();
  }
  e = cudaHostGetDevicePointer (&dp, p, 0);
  if (e == cudaSuccess) {
    sum_kernel<<<1, 256>>> (p, MiB / 4, d);
    e = cudaGetLastError ();
    if (e == cudaSuccess)
      e = cudaDeviceSynchronize ();
    if (e == cudaSuccess)
      e = cudaMemcpy (&got, d, sizeof got, cudaMemcpyDeviceToHost);
  }
  __atomic_store_n (&other_step, 2, __ATOMIC_RELEASE);
  pthread_join (th, NULL);
  printf ("  1 MiB page-locked in another thread's own context: the "
          "primary context's device pointer %s the host's, its kernel's "
          "sum %s (%s)\n", dp == (void *) p ? "is" : "is NOT",
          e == cudaSuccess && got == want ? "right" : "WRONG",
          cudaGetErrorString (e));
  nchecked++;
  if (e != cudaSuccess || got != want)
    nwrong++;
  (void) cudaGetLastError ();
  CK (cudaFree (d));
  free (p);
}

/* cudaHostRegister and cudaHostUnregister of fresh buffers by size, the
 * GPU idle and busy (another thread's ~1 ms kernels). */
static void
register_by_size (void)
{
  static const size_t sz[] = { 64 << 10, 256 << 10, MiB, 4 * MiB };

  for (int busy = 0; busy < 2; busy++) {
    pthread_t tw;

    wait_stop = 0;
    if (busy)
      pthread_create (&tw, NULL, wait_thread, NULL);
    printf ("  register / unregister, us (median of 50), the GPU %s:",
            busy ? "busy" : "idle");
    for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++) {
      double tr[50], tu[50];

      for (int n = 0; n < 50; n++) {
        uint8_t *p = (uint8_t *) malloc (sz[i]);
        double t0, t1;

        memset (p, 1, sz[i]);
        t0 = gr_now ();
        CK (cudaHostRegister (p, sz[i], cudaHostRegisterPortable |
                              cudaHostRegisterMapped));
        t1 = gr_now ();
        CK (cudaHostUnregister (p));
        tu[n] = (gr_now () - t1) * 1e6;
        tr[n] = (t1 - t0) * 1e6;
        free (p);
      }
      qsort (tr, 50, sizeof tr[0], cmp_double);
      qsort (tu, 50, sizeof tu[0], cmp_double);
      printf ("  %zu KiB %.0f / %.0f", sz[i] >> 10, tr[25], tu[25]);
    }
    printf ("\n");
    wait_stop = 1;
    if (busy)
      pthread_join (tw, NULL);
  }
}

/* Registrations from several threads at once: in the primary context,
 * or each pushing one context (made for them) or one of its own. */
enum par_ctx { PAR_PRIMARY, PAR_SHARED, PAR_OWN };
static CUcontext par_shared;
static enum par_ctx par_where;
static double par_us[64];

static void *
par_thread (void *arg)
{
  const int id = (int) (intptr_t) arg;
  typedef CUresult (*push_fn) (CUcontext);
  typedef CUresult (*pop_fn) (CUcontext *);
  CUcontext ctx = NULL, c;
  double sum = 0;

  if (par_where == PAR_OWN)
    ctx = own_context ();
  else if (par_where == PAR_SHARED)
    ((push_fn) driver_fn ("cuCtxPushCurrent", 4000)) (par_shared);
  else
    CK (cudaSetDevice (0));
  for (int n = 0; n < 20; n++) {
    uint8_t *p = (uint8_t *) malloc (MiB);
    double t0;

    memset (p, 1, MiB);
    t0 = gr_now ();
    CK (cudaHostRegister (p, MiB, cudaHostRegisterPortable |
                          cudaHostRegisterMapped));
    sum += (gr_now () - t0) * 1e6;
    CK (cudaHostUnregister (p));
    free (p);
  }
  par_us[id] = sum / 20;
  if (par_where == PAR_SHARED)
    ((pop_fn) driver_fn ("cuCtxPopCurrent", 4000)) (&c);
  if (ctx)
    ((ctx_destroy_fn) driver_fn ("cuCtxDestroy", 4000)) (ctx);
  return NULL;
}

static void
register_parallel (void)
{
  static const char *where[] = { "the primary context",
                                 "one other context", "a context each" };
  pthread_t th[64];

  par_shared = own_context ();
  {
    CUcontext c;

    ((CUresult (*) (CUcontext *)) driver_fn ("cuCtxPopCurrent", 4000)) (&c);
  }
  for (int w = 0; w < 3; w++) {
    printf ("  1 MiB registered by threads at once, in %s, mean us a "
            "registration (a round: malloc, write, register, "
            "unregister):", where[w]);
    for (int nt = 1; nt <= 16; nt *= 4) {
      const double t0 = gr_now ();
      double sum = 0;

      par_where = (enum par_ctx) w;
      for (int i = 0; i < nt; i++)
        pthread_create (&th[i], NULL, par_thread, (void *) (intptr_t) i);
      for (int i = 0; i < nt; i++) {
        pthread_join (th[i], NULL);
        sum += par_us[i];
      }
      printf ("  %d threads %.0f (%.0f rounds a second)", nt,
              sum / nt, nt * 20 / (gr_now () - t0));
    }
    printf ("\n");
  }
  ((ctx_destroy_fn) driver_fn ("cuCtxDestroy", 4000)) (par_shared);
}

static void
bench_register (void)
{
  const int n = quick ? 20000 : 50000;
  /* Launches alone, then beside a thread that registers (in the primary
   * context or its own), one that waits for the GPU, and both. */
  static const struct {
    const char *what;
    bool wait, reg, own_ctx;
  } cond[] = {
    { "alone", false, false, false },
    { "while another thread registers", false, true, false },
    { "while another thread waits", true, false, false },
    { "while one waits and another registers", true, true, false },
    { "while another registers in its own context", false, true, true },
    { "while one waits and another registers in its own context", true,
      true, true },
  };
  pthread_t th, tw;
  cudaStream_t st;
  uint32_t *d;

  printf ("\n(r) page-locking memory against other threads' launches "
          "(fresh 1 MiB buffers from malloc, written, registered and "
          "unregistered in a loop by one thread, in the primary context or "
          "in one of its own), and another thread waiting for the GPU "
          "(spinning, on kernels of about 1 ms)\n");
  other_context_usable ();
  register_by_size ();
  register_parallel ();
  CK (cudaStreamCreateWithFlags (&st, cudaStreamNonBlocking));
  CK (cudaMalloc (&d, 128));
  for (int big = 0; big < 2; big++)
    for (size_t c = 0; c < sizeof cond / sizeof cond[0]; c++) {
      wait_stop = reg_stop = 0;
      reg_us = unreg_us = 0;
      reg_n = 0;
      if (cond[c].wait)
        pthread_create (&tw, NULL, wait_thread, NULL);
      if (cond[c].reg)
        pthread_create (&th, NULL, reg_thread, (void *) &cond[c].own_ctx);
      time_launches (cond[c].what, d, st, n, big);
      wait_stop = reg_stop = 1;
      if (cond[c].reg)
        pthread_join (th, NULL);
      if (cond[c].wait)
        pthread_join (tw, NULL);
      if (reg_n > 0)
        printf ("    (1 MiB registered in %.0f us, unregistered in %.0f us, "
                "mean of %d)\n", reg_us / reg_n, unreg_us / reg_n, reg_n);
    }
  CK (cudaFree (d));
  CK (cudaStreamDestroy (st));
}

/* ---- (b) --------------------------------------------------------------- */

static void
set_blocks (uint8_t **blk, uint8_t *base, int n, size_t ns, size_t len)
{
  for (size_t s = 0; s < ns; s++)
    for (int i = 0; i < n; i++)
      blk[s * n + i] = base + (s * n + i) * len;
}

/* Seconds per gr_encode of ns stripes x len (median). */
static double
time_encode (struct gr_coder *c, uint8_t **blk, size_t ns, size_t len,
             int reps)
{
  double t[64];
  int r;

  r = gr_encode (c, blk, ns, len);     /* warm-up */
  if (r < 0) {
    fprintf (stderr, "gr_encode: %d %s\n", r, gr_gpu_last_error ());
    exit (1);
  }
  for (int i = 0; i < reps; i++) {
    double t0 = gr_now ();
    r = gr_encode (c, blk, ns, len);
    t[i] = gr_now () - t0;
    if (r < 0) {
      fprintf (stderr, "gr_encode: %d %s\n", r, gr_gpu_last_error ());
      exit (1);
    }
  }
  qsort (t, reps, sizeof t[0], cmp_double);
  return t[reps / 2];
}

/* The copy-only ceiling of host-to-host coding: data up while parity
 * (m/k of it) comes down at the same time, on two streams, from pinned
 * memory; in data bytes/s.  *h2d: the best of 4 uploads of the same 256
 * MiB alone, measured here too (next to the figures set against it: the
 * link's rate at program start differed by up to 8 % in some runs). */
static double
duplex_bw (int k, int m, double *h2d)
{
  const size_t up = 256 * MiB, down = up / k * m;
  void *h, *d;
  cudaStream_t s1, s2;
  double t0, best = 0;

  CK (cudaHostAlloc (&h, up + down, cudaHostAllocDefault));
  CK (cudaMalloc (&d, up + down));
  CK (cudaStreamCreateWithFlags (&s1, cudaStreamNonBlocking));
  CK (cudaStreamCreateWithFlags (&s2, cudaStreamNonBlocking));
  memset (h, 1, up + down);
  *h2d = 0;
  for (int rep = 0; rep < 5; rep++) {
    t0 = gr_now ();
    CK (cudaMemcpyAsync (d, h, up, cudaMemcpyHostToDevice, s1));
    CK (cudaStreamSynchronize (s1));
    if (rep > 0 && up / (gr_now () - t0) > *h2d)
      *h2d = up / (gr_now () - t0);
  }
  for (int rep = 0; rep < 4; rep++) {
    t0 = gr_now ();
    CK (cudaMemcpyAsync (d, h, up, cudaMemcpyHostToDevice, s1));
    CK (cudaMemcpyAsync ((char *) h + up, (char *) d + up, down,
                         cudaMemcpyDeviceToHost, s2));
    CK (cudaStreamSynchronize (s1));
    CK (cudaStreamSynchronize (s2));
    if (rep > 0 && up / (gr_now () - t0) > best)
      best = up / (gr_now () - t0);
  }
  CK (cudaStreamDestroy (s1));
  CK (cudaStreamDestroy (s2));
  CK (cudaFree (d));
  CK (cudaFreeHost (h));
  return best;
}

static void
bench_host (enum gr_code code, int k, int m)
{
  const int n = k + m;
  const size_t maxdata = 256 * MiB;
  const size_t unit = code == GR_CODE_RS ? 16 : GR_CRS_GROUP;
  const char *cn = code == GR_CODE_RS ? "RS" : "CRS";
  struct gr_coder *c;
  uint8_t *pin, *pg, **blk;
  double at50 = 0, at90 = 0;
  int r;

  r = gr_coder_new (&c, k, m, code, gr_backend_find ("cuda"));
  if (r < 0) {
    fprintf (stderr, "coder: %d %s\n", r, gr_gpu_last_error ());
    exit (1);
  }
  pin = (uint8_t *) gr_gpu_host_alloc (maxdata / k * n + MiB);
  pg = (uint8_t *) malloc (maxdata / k * n + MiB);
  blk = (uint8_t **) malloc (sizeof *blk * n * (maxdata / (k * unit) + 1));
  if (pin == NULL || pg == NULL || blk == NULL) {
    fprintf (stderr, "out of memory: %s\n", gr_gpu_last_error ());
    exit (1);
  }
  fill_random (pin, maxdata / k * n + MiB, 3);
  memcpy (pg, pin, maxdata / k * n + MiB);
  /* Steady state: the first batch of at least gr_gpu_jit_min bytes starts
   * compiling the coder's JIT kernel in the background (tens to hundreds
   * of ms of NVRTC and a module load); measured while it ran, the 64 MiB
   * figure varied from 79 % to 91 % of H2D between runs.  So one such
   * batch first, and wait for the compile. */
  {
    const size_t wlen = MiB;
    const size_t wns = (gr_gpu_jit_min + k * wlen - 1) / (k * wlen);

    set_blocks (blk, pin, n, wns, wlen);
    r = gr_encode (c, blk, wns, wlen);
    if (r < 0) {
      fprintf (stderr, "gr_encode: %d %s\n", r, gr_gpu_last_error ());
      exit (1);
    }
    gr_gpu_jit_drain ();
  }

  {
    const double duplex = duplex_bw (k, m, &h2d_bw);

    printf ("\n(b) host-to-host gr_encode, %d+%d %s, \"cuda\" backend; "
            "pinned H2D (best of 4, now) = %.1f GB/s; copy-only ceiling "
            "(data up while parity comes down) = %.1f GB/s of data\n", k, m,
            cn, h2d_bw / 1e9, duplex / 1e9);
  }
  printf ("%10s %8s %10s %10s %8s %12s\n", "batch", "stripes", "block",
          "pinned", "%H2D", "pageable");
  const char *vp, *vq = "";
  for (size_t b = MiB; b <= maxdata; b *= 2) {
    size_t len = b / k < MiB ? b / k : MiB;
    size_t ns, data;
    double tp, tq = 0, bwp;

    len = len / unit * unit;
    ns = b / (k * len);
    data = ns * k * len;
    set_blocks (blk, pin, n, ns, len);
    tp = time_encode (c, blk, ns, len, quick ? 3 : 9);
    bwp = data / tp;
    vp = check_encode (k, m, code, blk, ns, len);
    if (b == 64 * MiB || b == maxdata) {
      set_blocks (blk, pg, n, ns, len);
      tq = time_encode (c, blk, ns, len, 3);
      vq = check_encode (k, m, code, blk, ns, len);
    }
    printf ("%7zu MiB %8zu %7zu KiB %6.1f GB/s %6.0f%%%s ", b / MiB, ns,
            len >> 10, bwp / 1e9, 100 * bwp / h2d_bw, vp);
    if (tq > 0)
      printf ("%6.1f GB/s%s", data / tq / 1e9, vq);
    printf ("\n");
    fflush (stdout);
    if (at50 == 0 && bwp >= 0.5 * h2d_bw)
      at50 = b;
    if (at90 == 0 && bwp >= 0.9 * h2d_bw)
      at90 = b;
  }
  if (at50 > 0)
    printf ("50%% of pinned H2D reached at %.0f MiB; ", at50 / MiB);
  else
    printf ("50%% of pinned H2D not reached; ");
  if (at90 > 0)
    printf ("90%% at %.0f MiB\n", at90 / MiB);
  else
    printf ("90%% not reached\n");

  /* Latency of one full stripe. */
  for (size_t len = 64 << 10; len <= MiB; len *= 4) {
    double t;
    set_blocks (blk, pin, n, 1, len);
    t = time_encode (c, blk, 1, len, 21);
    printf ("latency, one %d+%d stripe of %zu KiB blocks (%zu KiB data), "
            "pinned: %.0f us (median of 21)%s\n", k, m, len >> 10,
            k * len >> 10, t * 1e6, check_encode (k, m, code, blk, 1, len));
  }
  gr_coder_free (c);
  gr_gpu_host_free (pin);
  free (pg);
  free (blk);
}

extern "C" size_t gr_gpu_set_chunk (size_t bytes);

/* (bx) The direct path's chunk size: %% of pinned H2D by batch. */
static void
bench_chunks (void)
{
  static const int geo[][3] = { { 10, 4, 1 }, { 10, 4, 0 }, { 8, 8, 1 },
                                { 16, 16, 1 } };
  const char *e = getenv ("BENCH_CHUNKS");
  char list[256];
  const size_t maxdata = 256 * MiB;
  const size_t old = gr_gpu_set_chunk (0);

  snprintf (list, sizeof list, "%s", e && *e ? e : "1,2,4,8,16");
  printf ("\n(bx) direct path chunk size (MiB of data per chunk): %% of "
          "pinned H2D (%.1f GB/s), median of 7\n", h2d_bw / 1e9);
  for (size_t gi = 0; gi < sizeof geo / sizeof geo[0]; gi++) {
    const int k = geo[gi][0], m = geo[gi][1], n = k + m;
    const enum gr_code code = geo[gi][2] ? GR_CODE_RS : GR_CODE_CRS;
    struct gr_coder *c;
    uint8_t *pin, **blk;

    if (gr_coder_new (&c, k, m, code, gr_backend_find ("cuda")) < 0)
      exit (1);
    pin = (uint8_t *) gr_gpu_host_alloc (maxdata / k * n + MiB);
    blk = (uint8_t **) malloc (sizeof *blk * n * (maxdata / (k * MiB) + 1));
    if (pin == NULL || blk == NULL)
      exit (1);
    fill_random (pin, maxdata / k * n + MiB, 5);
    printf ("%d+%d %-3s", k, m, code == GR_CODE_RS ? "RS" : "CRS");
    for (size_t b = 16 * MiB; b <= maxdata; b *= 2)
      printf (" %7zu MiB", b / MiB);
    printf ("\n");
    for (char *p = list; *p;) {
      const size_t ch = strtoul (p, &p, 10) * MiB;

      if (*p == ',')
        p++;
      if (ch == 0)
        break;
      gr_gpu_set_chunk (ch);
      printf ("  chunk %2zu", ch / MiB);
      for (size_t b = 16 * MiB; b <= maxdata; b *= 2) {
        const size_t len = MiB, ns = b / (k * len);

        set_blocks (blk, pin, n, ns, len);
        const double pct = 100 * ns * k * len /
          time_encode (c, blk, ns, len, 7) / h2d_bw;
        printf (" %6.1f%%%s", pct, check_encode (k, m, code, blk, ns, len));
      }
      printf ("\n");
    }
    gr_coder_free (c);
    gr_gpu_host_free (pin);
    free (blk);
  }
  gr_gpu_set_chunk (old);
}

/* (bp) What a pipeline of chunks can reach host to host at 64 MiB.  Its
 * downloads cannot start before the first chunk is up and coded, nor its
 * last chunk's end before the uploads end; in between the link carries
 * both directions in pieces of the chunk's size, each copy costing a few
 * microseconds more than its bytes.  Measured here: the data going up
 * in c-byte copies while its parity comes down in copies of c m / k on
 * another stream, no kernel and no dependencies (t_both); the bound of a
 * pipeline of c-byte chunks is data / (t_both + the shorter of a
 * chunk's upload and its parity's download, at pinned H2D), set against
 * the copy-only ceiling of (b) and the engine's own figure, at its
 * chunk size and at each c, in the same run. */
static void
bench_bound (int k, int m)
{
  const size_t data = 64 * MiB, par = data / k * m, len = MiB;
  const size_t ns = data / (k * len), n = (size_t) (k + m);
  const size_t old = gr_gpu_set_chunk (0);
  struct gr_coder *c;
  uint8_t *h, *d, *pin, **blk;
  cudaStream_t s1, s2;
  double h2d, ceil, best = 0, eng;

  ceil = duplex_bw (k, m, &h2d);
  if (gr_coder_new (&c, k, m, GR_CODE_RS, gr_backend_find ("cuda")) < 0)
    exit (1);
  CK (cudaHostAlloc ((void **) &h, data + par, cudaHostAllocDefault));
  CK (cudaMalloc ((void **) &d, data + par));
  CK (cudaStreamCreateWithFlags (&s1, cudaStreamNonBlocking));
  CK (cudaStreamCreateWithFlags (&s2, cudaStreamNonBlocking));
  pin = (uint8_t *) gr_gpu_host_alloc (ns * n * len);
  blk = (uint8_t **) malloc (sizeof *blk * n * ns);
  if (pin == NULL || blk == NULL)
    exit (1);
  memset (h, 1, data + par);
  fill_random (pin, ns * n * len, 9);
  set_blocks (blk, pin, (int) n, ns, len);
  eng = ns * k * len / time_encode (c, blk, ns, len, 7);
  printf ("%d+%d RS, 64 MiB (data %zu MiB): copy-only ceiling %.1f GB/s, "
          "pinned H2D %.1f; engine (its chunk) %.1f GB/s = %.3f of the "
          "ceiling%s\n", k, m, ns * k * len / MiB, ceil / 1e9, h2d / 1e9,
          eng / 1e9, eng / ceil, check_encode (k, m, GR_CODE_RS, blk, ns,
                                               len));
  for (size_t ch = 2 * MiB; ch <= 16 * MiB; ch *= 2) {
    const size_t dch = ch / k * m;
    double tb = 1e9, bound;

    for (int rep = 0; rep < 6; rep++) {
      const double t0 = gr_now ();

      for (size_t o = 0; o < data; o += ch)
        CK (cudaMemcpyAsync (d + o, h + o, ch < data - o ? ch : data - o,
                             cudaMemcpyHostToDevice, s1));
      for (size_t o = 0; o < par; o += dch)
        CK (cudaMemcpyAsync (h + data + o, d + data + o,
                             dch < par - o ? dch : par - o,
                             cudaMemcpyDeviceToHost, s2));
      CK (cudaStreamSynchronize (s1));
      CK (cudaStreamSynchronize (s2));
      if (gr_now () - t0 < tb)
        tb = gr_now () - t0;
    }
    bound = data / (tb + (ch < dch ? ch : dch) / h2d);
    if (bound > best)
      best = bound;
    gr_gpu_set_chunk (ch);
    eng = ns * k * len / time_encode (c, blk, ns, len, 7);
    printf ("  chunks of %2zu MiB: both ways in such copies %.1f GB/s of "
            "data (%.3f of the ceiling); bound %.1f GB/s (%.3f); engine "
            "%.1f GB/s (%.3f of the ceiling, %.3f of the bound)%s\n",
            ch / MiB, data / tb / 1e9, data / tb / ceil, bound / 1e9,
            bound / ceil, eng / 1e9, eng / ceil, eng / bound,
            check_encode (k, m, GR_CODE_RS, blk, ns, len));
    gr_gpu_set_chunk (0);
  }
  printf ("  best bound over the chunk sizes: %.3f of the ceiling\n",
          best / ceil);
  gr_gpu_set_chunk (old);
  CK (cudaStreamDestroy (s1));
  CK (cudaStreamDestroy (s2));
  CK (cudaFree (d));
  CK (cudaFreeHost (h));
  gr_gpu_host_free (pin);
  free (blk);
  gr_coder_free (c);
}

/* (bc) Several callers' 64 MiB batches at once, as the array's group
 * commit makes them (its next leader submits while the batch before is
 * still on the GPU, each in a slot of its own).  One batch alone pays
 * its first chunk's upload before any parity can come down ((bp)); with
 * a second caller, that upload overlaps the other batch's downloads.
 * Each caller encodes its own page-locked 64 MiB batch (1 MiB blocks)
 * BC_REPS times from a barrier; the figure is all callers' data over the
 * wall time (median of 5), against the copy-only ceiling measured in
 * the same run.  BENCH_CHUNKS set: each caller count with each chunk
 * size listed (MiB; the first is one caller's reference). */
#define BC_REPS 6

struct caller_arg {
  struct gr_coder *c;
  uint8_t **blk;
  int k;
  size_t ns, len;
  pthread_barrier_t *bar;
  int rc;
};

static void *
caller_thread (void *p)
{
  struct caller_arg *a = (struct caller_arg *) p;

  pthread_barrier_wait (a->bar);
  for (int i = 0; i < BC_REPS && a->rc >= 0; i++)
    a->rc = gr_encode (a->c, a->blk, a->ns, a->len);
  pthread_barrier_wait (a->bar);
  return NULL;
}

/* nc callers' batches at once: data bytes/s (median of 5). */
static double
callers_run (struct caller_arg *a, int nc)
{
  pthread_t th[8];
  pthread_barrier_t bar;
  double t[5];

  pthread_barrier_init (&bar, NULL, (unsigned) nc + 1);
  for (int rep = 0; rep < 5; rep++) {
    double t0;

    for (int i = 0; i < nc; i++) {
      a[i].bar = &bar;
      a[i].rc = 0;
      if (pthread_create (&th[i], NULL, caller_thread, &a[i]) != 0)
        exit (1);
    }
    pthread_barrier_wait (&bar);
    t0 = gr_now ();
    pthread_barrier_wait (&bar);
    t[rep] = gr_now () - t0;
    for (int i = 0; i < nc; i++) {
      pthread_join (th[i], NULL);
      if (a[i].rc < 0) {
        fprintf (stderr, "gr_encode: %d %s\n", a[i].rc,
                 gr_gpu_last_error ());
        exit (1);
      }
    }
  }
  pthread_barrier_destroy (&bar);
  qsort (t, 5, sizeof t[0], cmp_double);
  return (double) nc * BC_REPS * a[0].ns * a[0].k * a[0].len / t[2];
}

static void
bench_callers (int k, int m)
{
  enum { MAXC = 3 };
  const size_t len = MiB, ns = 64 * MiB / (k * len), n = (size_t) (k + m);
  const char *chunks = getenv ("BENCH_CHUNKS");
  const size_t old = gr_gpu_set_chunk (0);
  struct caller_arg a[MAXC];
  uint8_t *pin[MAXC];
  struct gr_coder *c;
  double h2d, ceil, one = 0;

  ceil = duplex_bw (k, m, &h2d);
  if (gr_coder_new (&c, k, m, GR_CODE_RS, gr_backend_find ("cuda")) < 0)
    exit (1);
  for (int i = 0; i < MAXC; i++) {
    pin[i] = (uint8_t *) gr_gpu_host_alloc (ns * n * len);
    a[i].blk = (uint8_t **) malloc (sizeof *a[i].blk * n * ns);
    if (pin[i] == NULL || a[i].blk == NULL) {
      fprintf (stderr, "out of memory: %s\n", gr_gpu_last_error ());
      exit (1);
    }
    fill_random (pin[i], ns * n * len, 11 + i);
    set_blocks (a[i].blk, pin[i], (int) n, ns, len);
    a[i].c = c;
    a[i].k = k;
    a[i].ns = ns;
    a[i].len = len;
  }
  if (gr_encode (c, a[0].blk, ns, len) < 0)     /* warm-up, JIT compile */
    exit (1);
  gr_gpu_jit_drain ();
  printf ("%d+%d RS, batches of %zu MiB of data: copy-only ceiling %.1f "
          "GB/s, pinned H2D %.1f\n", k, m, ns * k * len / MiB, ceil / 1e9,
          h2d / 1e9);
  for (int nc = 1; nc <= MAXC; nc++) {
    const char *p = chunks && *chunks ? chunks : NULL;

    do {
      const size_t ch = p ? strtoul (p, (char **) &p, 10) * MiB : 0;
      const char *v = " verified";
      double bw;

      if (p && *p == ',')
        p++;
      gr_gpu_set_chunk (ch);
      bw = callers_run (a, nc);
      if (one == 0)
        one = bw;
      for (int i = 0; i < nc; i++)
        if (strcmp (check_encode (k, m, GR_CODE_RS, a[i].blk, ns, len),
                    " verified") != 0)
          v = " WRONG";
      if (ch)
        printf ("  chunks of %2zu MiB,", ch / MiB);
      printf ("  %d caller%s: %.1f GB/s of data, %.3f of the ceiling, %.2f "
              "x one caller's%s\n", nc, nc > 1 ? "s" : " ", bw / 1e9,
              bw / ceil, bw / one, v);
    } while (p && *p);
  }
  gr_gpu_set_chunk (old);
  for (int i = 0; i < MAXC; i++) {
    gr_gpu_host_free (pin[i]);
    free (a[i].blk);
  }
  gr_coder_free (c);
}

/* ---- (rb) -------------------------------------------------------------- */

/* (rb) A rebuild's batch as the array's lanes give it to the GPU: the
 * stripes of 128 MiB of members (rebuild.c's batch) of an array whose
 * first `lost` members are being rebuilt, 64 KiB chunks, page-locked
 * scratch, one operation per erasure pattern (parity rotates, so stripe
 * t has the pattern of t mod n: an operation holds the batch's stripes
 * of one pattern), every lost block rebuilt, the block checksums of
 * what is read and rebuilt asked for; one gr_code_many a batch (median
 * of 9).  Against the copy-only ceiling of the same bytes (k blocks up,
 * `lost` down, at once) in the same run; checked: every block of the
 * batch against a codeword ISA-L encoded, and every checksum asked for
 * against crc32_iscsi. */
static double time_many (struct gr_coder *c, struct gr_code_op *ops,
                         size_t nops);

static void
bench_rebuild_batch (int k, int m, int lost, size_t len)
{
  const int n = k + m;
  const size_t ns = 128 * MiB / ((size_t) n * len), nb = len / GR_SUM_BLOCK;
  const size_t bytes = ns * n * len;
  struct gr_coder *gc, *cc;
  uint8_t *pin = (uint8_t *) gr_gpu_host_alloc (bytes);
  uint8_t *ref = (uint8_t *) malloc (bytes);
  uint8_t **rblk = (uint8_t **) malloc (sizeof *rblk * ns * n);
  uint8_t **oblk = (uint8_t **) malloc (sizeof *oblk * ns * n);
  uint32_t *ck = (uint32_t *) calloc (ns * n * nb, sizeof *ck);
  size_t *at = (size_t *) malloc (sizeof *at * ns);  /* op slot -> stripe */
  int er[GR_MAX_MEMBERS][GR_MAX_MEMBERS], ne[GR_MAX_MEMBERS];
  int sv[GR_MAX_MEMBERS][GR_MAX_MEMBERS];
  struct gr_code_op ops[GR_MAX_MEMBERS];
  size_t nops = 0, slot = 0, wrong = 0, sums = 0;
  double ceil, h2d, plain, summed;

  if (gr_coder_new (&gc, k, m, GR_CODE_RS, gr_backend_find ("cuda")) < 0 ||
      gr_coder_new (&cc, k, m, GR_CODE_RS, gr_backend_find ("isal")) < 0 ||
      pin == NULL || ref == NULL || rblk == NULL || oblk == NULL ||
      ck == NULL || at == NULL) {
    fprintf (stderr, "bench_rebuild_batch: %s\n", gr_gpu_last_error ());
    exit (1);
  }
  set_blocks (rblk, ref, n, ns, len);
  for (size_t t = 0; t < ns; t++)
    fill_random (rblk[t * n], (size_t) k * len, 31 + t);
  if (gr_encode (cc, rblk, ns, len) < 0)
    exit (1);
  memcpy (pin, ref, bytes);
  ceil = duplex_bw (k, lost, &h2d);
  printf ("%d+%d RS, %d lost, %zu stripes of %zu KiB chunks, copy-only "
          "ceiling %.1f GB/s:\n", k, m, lost, ns, len >> 10, ceil / 1e9);
  /* One operation per pattern p: the stripes t = p, p + n, ... (code
   * index i of stripe t is on member (i - t) mod n). */
  for (int p = 0; p < n && (size_t) p < ns; p++) {
    bool lst[GR_MAX_MEMBERS];
    const size_t first = slot;

    for (int i = 0; i < n; i++)
      lst[i] = (i + n - p % n) % n < lost;
    ne[nops] = gr_reconstruct_choose (k, m, lst, lst, er[nops], sv[nops]);
    for (size_t t = (size_t) p; t < ns; t += (size_t) n) {
      at[slot] = t;
      for (int i = 0; i < n; i++)
        oblk[slot * n + i] = pin + (t * n + i) * len;
      slot++;
    }
    ops[nops] = (struct gr_code_op) { .erased = er[nops],
                                      .nerased = ne[nops],
                                      .blocks = oblk + first * n,
                                      .nstripes = slot - first, .len = len,
                                      .cksums = NULL, .first = 0,
                                      .count = 0 };
    nops++;
  }
  printf ("  %zu operations (one an erasure pattern)\n", nops);
  /* Copies by the engine's copy kernel on mapped memory, by the copy
   * engines, and as the engine chooses (by the jobs' runs: the copy
   * engines here); with the engine's account of a call (its wait for the
   * GPU: for the stream, or for the checksums it brings back). */
  static const struct {
    const char *what;
    int use;
  } how[] = { { "copy kernel   ", GR_GPU_MAPPED_ALWAYS },
              { "copy engines  ", GR_GPU_MAPPED_NEVER },
              { "engine's rule ", GR_GPU_MAPPED_SHORT_RUNS } };
  for (size_t h = 0; h < sizeof how / sizeof how[0]; h++) {
    const int old = gr_gpu_set_mapped (how[h].use);
    struct gr_gpu_many_stats a0, a1;

    for (size_t o = 0; o < nops; o++)
      ops[o].cksums = NULL;
    plain = time_many (gc, ops, nops);
    for (size_t o = 0, s0 = 0; o < nops; s0 += ops[o].nstripes, o++)
      ops[o].cksums = ck + s0 * n * nb;
    gr_gpu_many_account (&a0);
    summed = time_many (gc, ops, nops);
    gr_gpu_many_account (&a1);
    gr_gpu_set_mapped (old);
    printf ("  %s: %.2f ms a batch, %.1f GB/s of survivors' data (%.3f of "
            "the ceiling); with the checksums %.2f ms (%.3f); a call: %.0f "
            "chunks, %.0f copies, %.0f us enqueueing, %.0f us waiting\n",
            how[h].what, plain * 1e3,
            ns * k * len / plain / 1e9, ns * k * len / plain / ceil,
            summed * 1e3, ns * k * len / summed / ceil,
            (a1.chunks - a0.chunks) / 10.0, (a1.copies - a0.copies) / 10.0,
            (a1.enqueue_ns - a0.enqueue_ns) / 10e3,
            (a1.wait_ns + a1.cksums_ns - a0.wait_ns - a0.cksums_ns) / 10e3);
  }
  /* Checked: the lost blocks spoiled, rebuilt once more. */
  for (size_t o = 0; o < nops; o++)
    for (size_t j = 0; j < ops[o].nstripes; j++)
      for (int e = 0; e < ne[o]; e++)
        memset (ops[o].blocks[j * n + er[o][e]], 0xa5, len);
  if (gr_code_many (gc, ops, nops) < 0)
    exit (1);
  wrong += memcmp (pin, ref, bytes) != 0;
  for (size_t o = 0, s0 = 0; o < nops; s0 += ops[o].nstripes, o++)
    for (size_t j = 0; j < ops[o].nstripes; j++) {
      const size_t t = at[s0 + j];
      bool used[GR_MAX_MEMBERS] = { false };

      for (int i = 0; i < k; i++)
        used[sv[o][i]] = true;
      for (int e = 0; e < ne[o]; e++)
        used[er[o][e]] = true;
      for (int i = 0; i < n; i++)
        for (size_t b = 0; used[i] && b < nb; b++, sums++)
          wrong += ck[((s0 + j) * n + i) * nb + b] !=
            crc32_iscsi (ref + (t * n + i) * len + b * GR_SUM_BLOCK,
                         GR_SUM_BLOCK, 0);
    }
  nchecked++;
  nwrong += wrong > 0;
  printf ("  %zu checksums and every block%s\n", sums,
          wrong ? ": WRONG" : " verified");
  gr_coder_free (gc);
  gr_coder_free (cc);
  gr_gpu_host_free (pin);
  free (ref);
  free (rblk);
  free (oblk);
  free (ck);
  free (at);
}

/* ---- (c) --------------------------------------------------------------- */

struct isal_arg {
  int k, m;
  size_t len, ns;
  uint8_t *tbls;
  pthread_barrier_t *bar;
  double secs;
  size_t bytes;
};

static void *
isal_thread (void *p)
{
  struct isal_arg *a = (struct isal_arg *) p;
  const int n = a->k + a->m;
  uint8_t *buf = (uint8_t *) aligned_alloc (64, a->ns * n * a->len);
  uint8_t **blk = (uint8_t **) malloc (sizeof *blk * n * a->ns);
  double t0;
  size_t iters = 0;

  memset (buf, 5, a->ns * n * a->len);
  for (size_t i = 0; i < a->ns * n; i++)
    blk[i] = buf + i * a->len;
  pthread_barrier_wait (a->bar);
  t0 = gr_now ();
  do {
    for (size_t s = 0; s < a->ns; s++)
      ec_encode_data ((int) a->len, a->k, a->m, a->tbls, blk + s * n,
                      blk + s * n + a->k);
    iters++;
  } while (gr_now () - t0 < (quick ? 0.3 : 1.0));
  a->secs = gr_now () - t0;
  a->bytes = iters * a->ns * a->k * a->len;
  free (blk);
  free (buf);
  return NULL;
}

static void
bench_isal (int k, int m)
{
  const int nthr = (int) sysconf (_SC_NPROCESSORS_ONLN);
  uint8_t *gen = (uint8_t *) malloc ((size_t) (k + m) * k);
  uint8_t *tbls = (uint8_t *) malloc ((size_t) 32 * k * m);
  pthread_t th[256];
  struct isal_arg a[256];
  pthread_barrier_t bar;
  double bw = 0;
  int nt = nthr < 256 ? nthr : 256;

  gr_gf_gen_matrix (k, m, gen);
  ec_init_tables (k, m, gen + (size_t) k * k, tbls);
  pthread_barrier_init (&bar, NULL, nt);
  for (int i = 0; i < nt; i++) {
    a[i].k = k;
    a[i].m = m;
    a[i].len = MiB;
    a[i].ns = 4;
    a[i].tbls = tbls;
    a[i].bar = &bar;
    pthread_create (&th[i], NULL, isal_thread, &a[i]);
  }
  for (int i = 0; i < nt; i++) {
    pthread_join (th[i], NULL);
    bw += a[i].bytes / a[i].secs;
  }
  pthread_barrier_destroy (&bar);
  printf ("(c) ISA-L ec_encode_data %d+%d RS, %d threads (all cores), "
          "1 MiB blocks: %.1f GB/s of data\n", k, m, nt, bw / 1e9);
  free (gen);
  free (tbls);
}

/* ---- (e) --------------------------------------------------------------- */

/* (s) A write batch's block checksums with its encode (gr_code_op's
 * cksums), as the plugin's group commit submits it: 64 MiB of data in
 * operations of 2 stripes, page-locked, one gr_code_many, with and
 * without the checksums (median of 9 each, GB/s of data); against the
 * CPU's cost of the same checksums, ISA-L's crc32_iscsi of the batch's
 * data and parity on one core, measured here.  Checked: every checksum
 * of the first and last stripe against crc32_iscsi. */
static double
time_many (struct gr_coder *c, struct gr_code_op *ops, size_t nops)
{
  double t[9];

  for (int i = -1; i < 9; i++) {
    const double t0 = gr_now ();
    const int r = gr_code_many (c, ops, nops);

    if (r < 0) {
      fprintf (stderr, "gr_code_many: %d %s\n", r, gr_gpu_last_error ());
      exit (1);
    }
    if (i >= 0)
      t[i] = gr_now () - t0;
  }
  qsort (t, 9, sizeof t[0], cmp_double);
  return t[4];
}

static void
bench_sums (enum gr_code code, int k, int m, size_t len)
{
  const int n = k + m;
  const size_t ns = 64 * MiB / ((size_t) k * len), nops = (ns + 1) / 2;
  const size_t nb = len / GR_SUM_BLOCK, bytes = ns * n * len;
  struct gr_coder *c;
  struct gr_code_op *ops = (struct gr_code_op *) calloc (nops, sizeof *ops);
  uint8_t *pin = (uint8_t *) gr_gpu_host_alloc (bytes);
  uint8_t **blk = (uint8_t **) malloc (sizeof *blk * ns * n);
  uint32_t *ck = (uint32_t *) malloc (sizeof *ck * ns * n * nb);
  double plain, summed, t0, cpu;
  volatile uint32_t sink = 0;
  int bad = 0;

  if (gr_coder_new (&c, k, m, code, gr_backend_find ("cuda")) < 0 ||
      ops == NULL || pin == NULL || blk == NULL || ck == NULL) {
    fprintf (stderr, "bench_sums: %s\n", gr_gpu_last_error ());
    exit (1);
  }
  fill_random (pin, bytes, 5);
  set_blocks (blk, pin, n, ns, len);
  for (size_t o = 0; o < nops; o++)
    ops[o] = (struct gr_code_op) { .erased = NULL, .nerased = 0,
                                   .blocks = blk + 2 * o * n,
                                   .nstripes = (size_t) (2 * o + 2 <= ns
                                                         ? 2 : 1),
                                   .len = len, .cksums = NULL,
                                   .first = 0, .count = 0 };
  plain = time_many (c, ops, nops);
  for (size_t o = 0; o < nops; o++)
    ops[o].cksums = ck + 2 * o * n * nb;
  summed = time_many (c, ops, nops);
  t0 = gr_now ();
  for (size_t b = 0; b < ns * n * nb; b++)
    sink ^= crc32_iscsi (pin + b * GR_SUM_BLOCK, GR_SUM_BLOCK, 0);
  cpu = gr_now () - t0;
  for (size_t s = 0; s < ns; s += ns - 1 > 0 ? ns - 1 : 1)
    for (int i = 0; i < n; i++)
      for (size_t b = 0; b < nb; b++)
        bad |= ck[(s * n + i) * nb + b] !=
          crc32_iscsi (blk[s * n + i] + b * GR_SUM_BLOCK, GR_SUM_BLOCK, 0);
  nchecked++;
  nwrong += bad;
  printf ("%d+%d %s, %zu KiB blocks, %zu stripes in %zu operations: encode "
          "%.1f GB/s of data, with the block checksums %.1f (%.2fx); "
          "ISA-L crc32_iscsi of the same blocks on one core %.1f GB/s of "
          "blocks = %.3f CPU-s per GB of data%s\n", k, m,
          code == GR_CODE_RS ? "RS" : "CRS", len >> 10, ns, nops,
          ns * k * len / plain / 1e9, ns * k * len / summed / 1e9,
          plain / summed, bytes / cpu / 1e9, cpu / (ns * k * len / 1e9),
          bad ? "  WRONG" : "");
  gr_coder_free (c);
  gr_gpu_host_free (pin);
  free (ops);
  free (blk);
  free (ck);
}

/* (g) A write batch coded where its blocks are (the engine's
 * run_gathered) against copied (run_many's chunks), as the plugin's group
 * commit submits one: `mib` MiB of data in operations of 2 stripes, one
 * page-locked region, with the block checksums; median of 9 calls each,
 * the host's CPU time per call (this thread's), and the parity checked
 * against ISA-L (stripes 0 and the last).  Then 4 threads at once, each
 * its own batch, as the group commit's two batches in flight and more:
 * GB/s of data of them all. */
struct gather_arg {
  struct gr_coder *c;
  struct gr_code_op *ops;
  size_t nops;
  pthread_barrier_t *bar;
  int calls;
};

static void *
gather_thread (void *p)
{
  struct gather_arg *a = (struct gather_arg *) p;

  pthread_barrier_wait (a->bar);
  for (int i = 0; i < a->calls; i++)
    if (gr_code_many (a->c, a->ops, a->nops) < 0) {
      fprintf (stderr, "gr_code_many: %s\n", gr_gpu_last_error ());
      exit (1);
    }
  return NULL;
}

static double
thread_cpu (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
bench_gather (enum gr_code code, int k, int m, size_t len, size_t mib)
{
  enum { NT = 4 };
  const int n = k + m;
  const size_t ns = (mib * MiB + k * len - 1) / ((size_t) k * len);
  const size_t nops = (ns + 1) / 2, nb = len / GR_SUM_BLOCK;
  const size_t bytes = ns * n * len;
  struct gr_coder *c;
  struct gr_code_op *ops[NT];
  uint8_t *pin[NT], **blk[NT];
  uint32_t *ck[NT];
  double lat[2], cpu[2], thr[2];
  const char *chk[2];
  struct gr_gpu_many_stats st0, st1;

  if (gr_coder_new (&c, k, m, code, gr_backend_find ("cuda")) < 0) {
    fprintf (stderr, "bench_gather: %s\n", gr_gpu_last_error ());
    exit (1);
  }
  for (int t = 0; t < NT; t++) {
    ops[t] = (struct gr_code_op *) calloc (nops, sizeof *ops[t]);
    pin[t] = (uint8_t *) gr_gpu_host_alloc (bytes);
    blk[t] = (uint8_t **) malloc (sizeof *blk[t] * ns * n);
    ck[t] = (uint32_t *) malloc (sizeof *ck[t] * ns * n * nb);
    if (ops[t] == NULL || pin[t] == NULL || blk[t] == NULL ||
        ck[t] == NULL) {
      fprintf (stderr, "bench_gather: out of memory: %s\n",
               gr_gpu_last_error ());
      exit (1);
    }
    fill_random (pin[t], bytes, 11 + t);
    set_blocks (blk[t], pin[t], n, ns, len);
    for (size_t o = 0; o < nops; o++)
      ops[t][o] = (struct gr_code_op) {
        .erased = NULL, .nerased = 0, .blocks = blk[t] + 2 * o * n,
        .nstripes = (size_t) (2 * o + 2 <= ns ? 2 : 1), .len = len,
        .cksums = ck[t] + 2 * o * n * nb, .first = 0, .count = 0 };
  }
  for (int g = 0; g < 2; g++) {
    const int old = gr_gpu_set_gather (g ? GR_GPU_GATHER_ANY_TABLE
                                       : GR_GPU_GATHER_NEVER);
    pthread_barrier_t bar;
    pthread_t th[NT];
    struct gather_arg ga[NT];
    double c0, t0;
    const int calls = quick ? 10 : 40;

    for (size_t b = 0; b < ns * n; b++)
      if (b % n >= (size_t) k)
        memset (blk[0][b], 0xa5, len);
    c0 = thread_cpu ();
    if (g)
      gr_gpu_many_account (&st0);
    lat[g] = time_many (c, ops[0], nops);
    if (g)
      gr_gpu_many_account (&st1);
    cpu[g] = (thread_cpu () - c0) / 10;
    chk[g] = check_encode (k, m, code, blk[0], ns, len);
    pthread_barrier_init (&bar, NULL, NT + 1);
    for (int t = 0; t < NT; t++) {
      ga[t] = (struct gather_arg) { c, ops[t], nops, &bar, calls };
      pthread_create (&th[t], NULL, gather_thread, &ga[t]);
    }
    pthread_barrier_wait (&bar);
    t0 = gr_now ();
    for (int t = 0; t < NT; t++)
      pthread_join (th[t], NULL);
    thr[g] = (double) NT * calls * ns * k * len / (gr_now () - t0) / 1e9;
    pthread_barrier_destroy (&bar);
    gr_gpu_set_gather (old);
  }
  printf ("%d+%d %s, %zu KiB blocks, %zu MiB of data in %zu operations, "
          "with checksums: copied %.0f us a call (%.1f GB/s; %.0f us of "
          "CPU), 4 at once %.1f GB/s%s; %s %.0f us (%.1f GB/s; "
          "%.0f us of CPU), 4 at once %.1f GB/s%s; %.2fx the latency, "
          "%.2fx the throughput\n", k, m, code == GR_CODE_RS ? "RS" : "CRS",
          len >> 10, mib, nops, lat[0] * 1e6, ns * k * len / lat[0] / 1e9,
          cpu[0] * 1e6, thr[0], chk[0], st1.gathered_jobs > st0.gathered_jobs
          ? "where they are" : "copied by the engine's rule (not where they "
          "are)", lat[1] * 1e6,
          ns * k * len / lat[1] / 1e9, cpu[1] * 1e6, thr[1], chk[1],
          lat[1] / lat[0], thr[1] / thr[0]);
  gr_coder_free (c);
  for (int t = 0; t < NT; t++) {
    gr_gpu_host_free (pin[t]);
    free (ops[t]);
    free (blk[t]);
    free (ck[t]);
  }
}

/* Small decodes from many threads, as an array's degraded reads make
 * them: each thread rebuilds one stripe at a time (k + m blocks of len,
 * page-locked), the erasure pattern of stripe t of an array whose first
 * `lost` members are gone (parity rotates, so the pattern turns with the
 * stripe: n patterns, those with no data block lost skipped), data
 * blocks wanted.  Against the same on ISA-L's coder in the same
 * threads, and against calls of `gather` stripes of successive patterns
 * in one gr_code_many (what the plugin's gathering of requests
 * submits). */
struct small_arg {
  struct gr_coder *c;
  int k, m, lost, tid;
  size_t len, gather;
  bool scatter;                 /* blocks at uneven distances */
  const uint8_t *tmpl;          /* one codeword, n blocks of len */
  pthread_barrier_t *bar;
  double secs;
  size_t stripes;
  int bad;
};

/* The erasure list of stripe t (code index i is on member (i - t) mod n). */
static int
small_pattern (int k, int m, int lost, size_t t, int *er)
{
  const int n = k + m;
  bool lst[GR_MAX_MEMBERS], want[GR_MAX_MEMBERS];
  int surv[GR_MAX_MEMBERS];

  for (int i = 0; i < n; i++) {
    lst[i] = (int) (((size_t) i + n - t % n) % n) < lost;
    want[i] = i < k;
  }
  return gr_reconstruct_choose (k, m, lst, want, er, surv);
}

/* One call: `gather` stripes, each with the pattern of the next stripe
 * number from *t on (those with no data lost skipped), in one
 * gr_code_many; spoil: their erased blocks overwritten first.  The
 * stripes rebuilt, or a negative errno. */
static int
small_call (struct small_arg *a, uint8_t **blk, size_t *t, bool spoil)
{
  const int n = a->k + a->m;
  int er[64][GR_MAX_MEMBERS];
  struct gr_code_op ops[64];
  size_t s;
  int r;

  for (s = 0; s < a->gather && s < 64; s++) {
    int ne;

    while ((ne = small_pattern (a->k, a->m, a->lost, (*t)++, er[s])) == 0)
      ;
    ops[s] = (struct gr_code_op) { .erased = er[s], .nerased = ne,
                                   .blocks = blk + s * n, .nstripes = 1,
                                   .len = a->len, .cksums = NULL,
                                   .first = 0, .count = 0 };
    for (int e = 0; spoil && e < ne; e++)
      memset (blk[s * n + er[s][e]], 0xa5, a->len);
  }
  r = gr_code_many (a->c, ops, s);
  return r < 0 ? r : (int) s;
}

/* Where block x of the buffer lies: back to back, or (scatter) at
 * uneven distances, as an array's blocks lie in request buffers and
 * scratch, so that their copies do not merge. */
static size_t
small_at (const struct small_arg *a, size_t x)
{
  return a->scatter ? x * (a->len + 8192) + x * 7919 % 13 * 512
    : x * a->len;
}

static void *
small_thread (void *p)
{
  struct small_arg *a = (struct small_arg *) p;
  const int n = a->k + a->m;
  const size_t nblk = a->gather * n;
  uint8_t *buf = (uint8_t *) gr_gpu_host_alloc (small_at (a, nblk));
  uint8_t **blk = (uint8_t **) malloc (sizeof *blk * nblk);
  size_t t = (size_t) a->tid;
  double t0;
  int r;

  if (buf == NULL || blk == NULL) {
    fprintf (stderr, "out of memory: %s\n", gr_gpu_last_error ());
    exit (1);
  }
  for (size_t x = 0; x < nblk; x++) {
    blk[x] = buf + small_at (a, x);
    memcpy (blk[x], a->tmpl + x % n * a->len, a->len);
  }
  a->stripes = 0;
  pthread_barrier_wait (a->bar);
  t0 = gr_now ();
  do {
    r = small_call (a, blk, &t, false);
    if (r < 0) {
      fprintf (stderr, "gr_code_many: %d %s\n", r, gr_gpu_last_error ());
      exit (1);
    }
    a->stripes += (size_t) r;
  } while (gr_now () - t0 < (quick ? 0.3 : 1.0));
  a->secs = gr_now () - t0;
  /* Checked: the erased blocks spoiled, rebuilt, compared. */
  a->bad = small_call (a, blk, &t, true) < 0;
  for (size_t x = 0; x < nblk && !a->bad; x++)
    a->bad = memcmp (blk[x], a->tmpl + x % n * a->len, a->len) != 0;
  gr_gpu_host_free (buf);
  free (blk);
  return NULL;
}

static double
cpu_secs (void)
{
  struct rusage ru;

  getrusage (RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
    (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* One row: nt threads on coder c; prints stripes/s, GB/s of the
 * stripes' data, CPU-s/GB. */
static void
small_row (const char *what, struct gr_coder *c, int k, int m, int lost,
           size_t len, size_t gather, bool scatter, const uint8_t *tmpl,
           int nt)
{
  pthread_t th[256];
  struct small_arg a[256];
  pthread_barrier_t bar;
  double rate = 0, c0;
  size_t stripes = 0;
  int bad = 0;

  pthread_barrier_init (&bar, NULL, nt);
  c0 = cpu_secs ();
  for (int i = 0; i < nt; i++) {
    a[i] = (struct small_arg) { .c = c, .k = k, .m = m, .lost = lost,
                                .tid = i, .len = len, .gather = gather,
                                .scatter = scatter, .tmpl = tmpl, .bar = &bar, .secs = 0,
                                .stripes = 0, .bad = 0 };
    pthread_create (&th[i], NULL, small_thread, &a[i]);
  }
  for (int i = 0; i < nt; i++) {
    pthread_join (th[i], NULL);
    rate += a[i].stripes / a[i].secs;
    stripes += a[i].stripes;
    bad |= a[i].bad;
  }
  pthread_barrier_destroy (&bar);
  nchecked++;
  nwrong += bad;
  printf ("  %-40s %3d threads: %8.0f stripes/s %6.2f GB/s %5.2f CPU-s/GB"
          "%s\n", what, nt, rate, rate * k * len / 1e9,
          (cpu_secs () - c0) / (stripes * (double) k * len / 1e9),
          bad ? " WRONG" : " verified");
}

static void
bench_small (int k, int m, int lost, size_t len)
{
  const int n = k + m, cores = (int) sysconf (_SC_NPROCESSORS_ONLN);
  const int threads[] = { 1, 4, cores < 256 ? cores : 256 };
  static const struct {
    const char *what;
    bool gpu;
    size_t gather;
    bool scatter;
    int mapped;
  } rows[] = {
    { "ISA-L, a stripe a call", false, 1, false,
      GR_GPU_MAPPED_SHORT_RUNS },
    { "GPU, a stripe a call", true, 1, false,
      GR_GPU_MAPPED_SHORT_RUNS },
    { "GPU, 16 stripes a call", true, 16, false,
      GR_GPU_MAPPED_SHORT_RUNS },
    { "GPU, 16 stripes a call, copy kernel", true, 16, false,
      GR_GPU_MAPPED_ALWAYS },
    { "GPU, 16 stripes a call, copy engines", true, 16, false,
      GR_GPU_MAPPED_NEVER },
    { "GPU, 16 a call, scattered", true, 16, true,
      GR_GPU_MAPPED_SHORT_RUNS },
    { "GPU, 16 a call, scattered, copy kernel", true, 16, true,
      GR_GPU_MAPPED_ALWAYS },
    { "GPU, 16 a call, scattered, copy engines", true, 16, true,
      GR_GPU_MAPPED_NEVER },
    { "ISA-L, 16 stripes a call", false, 16, false,
      GR_GPU_MAPPED_SHORT_RUNS },
    { "ISA-L, 16 a call, scattered", false, 16, true,
      GR_GPU_MAPPED_SHORT_RUNS },
  };
  struct gr_coder *gc, *cc;
  uint8_t *tmpl = (uint8_t *) malloc ((size_t) n * len);
  uint8_t *b[GR_MAX_MEMBERS];

  if (gr_coder_new (&gc, k, m, GR_CODE_RS, gr_backend_find ("cuda")) < 0 ||
      gr_coder_new (&cc, k, m, GR_CODE_RS, gr_backend_find ("isal")) < 0 ||
      tmpl == NULL) {
    fprintf (stderr, "bench_small: no coder for %d+%d\n", k, m);
    exit (1);
  }
  fill_random (tmpl, (size_t) k * len, 11);
  for (int i = 0; i < n; i++)
    b[i] = tmpl + (size_t) i * len;
  if (gr_encode (cc, b, 1, len) < 0)
    exit (1);
  printf ("\n(e) small decodes from many threads: %d+%d RS, %d members "
          "lost (%d patterns), %zu KiB blocks, page-locked; pinned H2D "
          "%.1f GB/s\n", k, m, lost, n, len >> 10, h2d_bw / 1e9);
  /* Scattered blocks: each copy its own.  Copies as the engine chooses
   * them (the copy kernel for short runs), by the copy kernel only, and
   * by the copy engines only, one CUDA copy each (gr_gpu_set_mapped). */
  for (size_t row = 0; row < sizeof rows / sizeof rows[0]; row++)
    for (size_t i = 0; i < sizeof threads / sizeof threads[0]; i++) {
      const int old = gr_gpu_set_mapped (rows[row].mapped);

      small_row (rows[row].what, rows[row].gpu ? gc : cc, k, m, lost, len,
                 rows[row].gather, rows[row].scatter, tmpl, threads[i]);
      gr_gpu_set_mapped (old);
    }
  gr_coder_free (gc);
  gr_coder_free (cc);
  free (tmpl);
}

int
main (void)
{
  struct cudaDeviceProp p;
  const char *e = getenv ("QUICK");
  char name[256];
  int r;

  setvbuf (stdout, NULL, _IOLBF, 0);
  quick = e && *e && strcmp (e, "0") != 0;
  only = getenv ("BENCH_ONLY");
  if (getenv ("BENCH_GATHER"))        /* 0: batches always copied */
    gr_gpu_set_gather (atoi (getenv ("BENCH_GATHER")));
  /* BENCH_SYNC=spin|yield|block: how the host waits for the GPU (set
   * before the first CUDA call makes the context). */
  e = getenv ("BENCH_SYNC");
  if (e && *e) {
    unsigned fl = strcmp (e, "spin") == 0 ? cudaDeviceScheduleSpin
      : strcmp (e, "yield") == 0 ? cudaDeviceScheduleYield
      : strcmp (e, "block") == 0 ? cudaDeviceScheduleBlockingSync
      : cudaDeviceScheduleAuto;
    CK (cudaSetDeviceFlags (fl));
    printf ("BENCH_SYNC=%s\n", e);
  }
  if (gr_gpu_probe_device (0, name, sizeof name) < 0) {
    printf ("SKIP: no usable CUDA device (%s)\n", name);
    return 77;
  }
  CK (cudaGetDeviceProperties (&p, 0));
  CK (cudaDeviceGetAttribute (&clock_khz, cudaDevAttrClockRate, 0));
  nsm = p.multiProcessorCount;
  printf ("device: %s, %d SMs, %d MHz, L2 %d MiB, %.0f GiB; host: %ld cores\n",
          p.name, nsm, clock_khz / 1000, p.l2CacheSize >> 20,
          p.totalGlobalMem / (double) GiB, sysconf (_SC_NPROCESSORS_ONLN));
  r = gr_backend_register (gr_gpu_backend ());
  if (r < 0 && r != -EEXIST) {
    fprintf (stderr, "register: %d\n", r);
    return 1;
  }
  printf ("engine kernels: RS %s, CRS %s; JIT XOR network for batches "
          ">= %zu MiB of data\n", generic_name (GR_CODE_RS),
          generic_name (GR_CODE_CRS), gr_gpu_jit_min >> 20);
  gr_gpu_jit_async = 0;         /* (b): JIT kernel ready before timing */
  references ();
  if (want ("a") || want ("a2") || want ("a3") || want ("a6") ||
      want ("ag"))
    bench_kernels ();
  if (want ("r"))
    bench_register ();
  if (want ("bx"))
    bench_chunks ();
  if (want ("bp")) {
    printf ("\n(bp) the bound of a pipeline of chunks, host to host at 64 "
            "MiB (page-locked, 1 MiB blocks; best of 6 / median of 7)\n");
    bench_bound (10, 4);
    bench_bound (8, 8);
    bench_bound (16, 16);
  }
  if (want ("bc")) {
    printf ("\n(bc) host to host, 64 MiB batches from 1 to 3 callers at "
            "once (page-locked, 1 MiB blocks; median of 5)\n");
    bench_callers (10, 4);
    bench_callers (8, 8);
    bench_callers (16, 16);
  }
  if (want ("b")) {
    bench_host (GR_CODE_RS, 10, 4);
    bench_host (GR_CODE_CRS, 10, 4);
    if (!quick) {
      bench_host (GR_CODE_RS, 8, 8);
      bench_host (GR_CODE_RS, 16, 16);
    }
  }
  if (want ("s")) {
    printf ("\n(s) block checksums with a write batch's encode\n");
    bench_sums (GR_CODE_RS, 8, 8, 64 << 10);
    bench_sums (GR_CODE_CRS, 10, 4, 64 << 10);
    bench_sums (GR_CODE_RS, 16, 16, 1 << 20);
  }
  if (want ("g")) {
    printf ("\n(g) a write batch coded where its blocks are (whatever "
            "the table's shape), against copied (page-locked, with "
            "checksums)\n");
    for (size_t mib = 2; mib <= 64; mib *= 4) {
      bench_gather (GR_CODE_RS, 10, 4, 64 << 10, mib);
      bench_gather (GR_CODE_CRS, 10, 4, 64 << 10, mib);
      bench_gather (GR_CODE_RS, 8, 8, 64 << 10, mib);
      bench_gather (GR_CODE_RS, 16, 16, 64 << 10, mib);
    }
  }
  if (want ("rb")) {
    printf ("\n(rb) a rebuild's batch of 128 MiB of members, one operation "
            "an erasure pattern, page-locked (median of 9)\n");
    bench_rebuild_batch (8, 8, 8, 64 << 10);
    bench_rebuild_batch (16, 16, 16, 64 << 10);
    bench_rebuild_batch (16, 16, 1, 64 << 10);
  }
  if (want ("e")) {
    bench_small (8, 8, 8, 64 << 10);
    bench_small (16, 16, 8, 64 << 10);
  }
  if (want ("c")) {
    printf ("\n");
    bench_isal (10, 4);
    bench_isal (8, 8);
    if (!quick)
      bench_isal (16, 16);
  }
  printf ("\n%d configurations reported, each checked against the CPU in "
          "this run: %d wrong\n", nchecked, nwrong);
  return nwrong ? 1 : 0;
}
