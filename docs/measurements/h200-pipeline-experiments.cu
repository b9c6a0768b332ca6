// Experiment (not part of the tree): the direct path's pipeline, raw CUDA.
// 8+8 / 16+16 / 10+4 host to host, 64 MiB batches of 1 MiB blocks:
// chunk sizes, a doubling head, the halving tail, kernel or none.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include <time.h>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf (stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString (e_)); exit (1); } } while (0)
static const size_t MiB = 1 << 20;
static double now () { struct timespec t; clock_gettime (CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

__global__ void kern (const unsigned *in, unsigned *out, int k, int m, size_t rowwords, size_t ns)
{
  size_t tot = rowwords * ns;
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < tot; i += (size_t) gridDim.x * blockDim.x) {
    size_t s = i / rowwords, o = i % rowwords;
    unsigned acc = 0;
    for (int c = 0; c < k; c++) acc ^= in[(s * k + c) * rowwords + o] * (c + 1);
    for (int r = 0; r < m; r++) out[(s * m + r) * rowwords + o] = acc + r;
  }
}

__global__ void kcopy2d (const unsigned char *src, size_t spitch, unsigned char *dst, size_t dpitch, size_t w, size_t rows)
{
  const size_t per = w / 16, tot = per * rows;
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < tot; i += (size_t) gridDim.x * blockDim.x) {
    size_t r = i / per, o = (i % per) * 16;
    *(uint4 *) (dst + r * dpitch + o) = *(const uint4 *) (src + r * spitch + o);
  }
}
static int g_up_k, g_down_k, g_grid = 32;
struct pl { size_t s0, ns, o0, w; };

// Plan chunks like run_direct: chunk of data bytes; head: the first chunk's
// worth in pieces chunk/8, chunk/8, chunk/4, chunk/2; tail: halving.
static std::vector<pl> plan (int k, size_t len, size_t nstripes, size_t chunk, int head, int tail)
{
  std::vector<pl> v;
  size_t cs, w;
  if ((size_t) k * len <= chunk) { cs = chunk / (k * len); w = len; }
  else { cs = 1; size_t wmax = chunk / k; size_t pieces = (len + wmax - 1) / wmax; w = (len + pieces - 1) / pieces; w = (w + 31) / 32 * 32; }
  size_t s0 = 0, o0 = 0, done = 0, data = nstripes * k * len;
  int taper = tail && data >= 4 * chunk;
  while (s0 < nstripes) {
    size_t left = data - done;
    size_t ns = nstripes - s0 < cs ? nstripes - s0 : cs;
    size_t cw = len - o0 < w ? len - o0 : w;
    size_t want = 0;
    if (o0) ns = 1;
    if (taper && left <= chunk) want = left / 2 > chunk / 8 ? left / 2 : chunk / 8;
    if (head && done < chunk) {
      size_t h = chunk / 8;
      while (h * 2 <= done && h < chunk / 2) h *= 2;   // 1/8,1/8,1/4,1/2
      want = h;
    }
    if (want) {
      size_t per = k * len;
      if (ns > 1) { size_t q = (want + per - 1) / per; ns = ns < q ? ns : q > 0 ? q : 1; }
      if (ns == 1 && cw > 32) {
        size_t q = ((want + k - 1) / k + 31) / 32 * 32;
        cw = cw < q ? cw : q;
        if (o0 + cw > len) cw = len - o0;
      }
    }
    v.push_back ({ s0, ns, o0, cw });
    done += ns * k * cw;
    if (o0 + cw < len && ns == 1) o0 += cw; else { o0 = 0; s0 += ns; }
  }
  return v;
}

struct ctx {
  int k, m; size_t len, nstripes;
  unsigned char *h; unsigned char *d;
  cudaStream_t su, sk, sd, su2, sd2; int nst; size_t slot;
  cudaEvent_t ev[16][3];
  cudaEvent_t tev[4096][3]; cudaEvent_t t0;
};

static void up_copy (ctx &c, const pl &p, unsigned char *db, cudaStream_t s)
{
  int n = c.k + c.m;
  for (size_t i = 0; i < p.ns; i++) {
    unsigned char *src = c.h + ((p.s0 + i) * n) * c.len + p.o0;
    unsigned char *dst = db + i * c.k * p.w;
    if (g_up_k) { kcopy2d<<<g_grid, 512, 0, s>>> (src, c.len, dst, p.w, p.w, c.k); CK (cudaGetLastError ()); }
    else if (p.w == c.len) CK (cudaMemcpyAsync (dst, src, c.k * c.len, cudaMemcpyHostToDevice, s));
    else CK (cudaMemcpy2DAsync (dst, p.w, src, c.len, p.w, c.k, cudaMemcpyHostToDevice, s));
  }
}
static void down_copy (ctx &c, const pl &p, unsigned char *db, cudaStream_t s)
{
  int n = c.k + c.m;
  for (size_t i = 0; i < p.ns; i++) {
    unsigned char *dst = c.h + ((p.s0 + i) * n + c.k) * c.len + p.o0;
    unsigned char *src = db + p.ns * c.k * p.w + i * c.m * p.w;
    if (g_down_k) { kcopy2d<<<g_grid, 512, 0, s>>> (src, p.w, dst, c.len, p.w, c.m); CK (cudaGetLastError ()); }
    else if (p.w == c.len) CK (cudaMemcpyAsync (dst, src, c.m * c.len, cudaMemcpyDeviceToHost, s));
    else CK (cudaMemcpy2DAsync (dst, c.len, src, p.w, p.w, c.m, cudaMemcpyDeviceToHost, s));
  }
}

static double run (ctx &c, const std::vector<pl> &v, size_t chunk_dev, int kernel, int timeline)
{
  size_t nb = c.slot / chunk_dev; if (nb > 16) nb = 16; if (nb < 1) nb = 1;
  double t = now ();
  if (timeline) CK (cudaEventRecord (c.t0, c.su));
  for (size_t ci = 0; ci < v.size (); ci++) {
    size_t b = ci % nb; const pl &p = v[ci];
    cudaStream_t su = (c.nst == 2 && ci % 2) ? c.su2 : c.su;
    cudaStream_t sd = (c.nst == 2 && ci % 2) ? c.sd2 : c.sd;
    unsigned char *db = c.d + b * chunk_dev;
    if (ci >= nb) CK (cudaStreamWaitEvent (su, c.ev[b][2], 0));
    up_copy (c, p, db, su);
    CK (cudaEventRecord (timeline ? c.tev[ci][0] : c.ev[b][0], su));
    CK (cudaStreamWaitEvent (c.sk, timeline ? c.tev[ci][0] : c.ev[b][0], 0));
    if (kernel) {
      size_t rw = p.w / 4;
      kern<<<264, 256, 0, c.sk>>> ((const unsigned *) db, (unsigned *) (db + p.ns * c.k * p.w), c.k, c.m, rw, p.ns);
      CK (cudaGetLastError ());
    }
    CK (cudaEventRecord (timeline ? c.tev[ci][1] : c.ev[b][1], c.sk));
    CK (cudaStreamWaitEvent (sd, timeline ? c.tev[ci][1] : c.ev[b][1], 0));
    down_copy (c, p, db, sd);
    CK (cudaEventRecord (c.ev[b][2], sd));
    if (timeline) CK (cudaEventRecord (c.tev[ci][2], sd));
  }
  double tq = now () - t;
  CK (cudaDeviceSynchronize ());
  double el = now () - t;
  if (timeline) {
    printf ("  timeline (ms from first upload's start; enqueue took %.3f ms host, total %.3f ms)\n", tq * 1e3, el * 1e3);
    for (size_t ci = 0; ci < v.size (); ci++) {
      float a, b2, d;
      CK (cudaEventElapsedTime (&a, c.t0, c.tev[ci][0]));
      CK (cudaEventElapsedTime (&b2, c.t0, c.tev[ci][1]));
      CK (cudaEventElapsedTime (&d, c.t0, c.tev[ci][2]));
      printf ("   chunk %2zu data %6.2f MiB: up end %.3f  kern end %.3f  down end %.3f\n", ci,
              (double) v[ci].ns * c.k * v[ci].w / MiB, a, b2, d);
    }
  }
  return el;
}

int main (int argc, char **argv)
{
  int geos[3][2] = { { 8, 8 }, { 16, 16 }, { 10, 4 } };
  size_t batch = (argc > 1 ? atoi (argv[1]) : 64) * MiB;
  const size_t len = MiB;
  CK (cudaSetDevice (0));
  for (int g = 0; g < 3; g++) {
    ctx c; c.k = geos[g][0]; c.m = geos[g][1]; c.len = len;
    int n = c.k + c.m;
    c.nstripes = batch / (c.k * len);
    const size_t batch0 = batch;
    batch = c.nstripes * c.k * len;
    size_t hb = c.nstripes * n * len;
    CK (cudaHostAlloc ((void **) &c.h, hb, 0)); memset (c.h, 3, hb);
    CK (cudaMalloc ((void **) &c.d, 128 * MiB + 16 * MiB));
    CK (cudaStreamCreateWithFlags (&c.su, cudaStreamNonBlocking));
    CK (cudaStreamCreateWithFlags (&c.sk, cudaStreamNonBlocking));
    CK (cudaStreamCreateWithFlags (&c.sd, cudaStreamNonBlocking));
    CK (cudaStreamCreateWithFlags (&c.su2, cudaStreamNonBlocking));
    CK (cudaStreamCreateWithFlags (&c.sd2, cudaStreamNonBlocking));
    for (int i = 0; i < 16; i++) for (int j = 0; j < 3; j++) CK (cudaEventCreateWithFlags (&c.ev[i][j], cudaEventDisableTiming));
    for (int i = 0; i < 4096; i++) for (int j = 0; j < 3; j++) CK (cudaEventCreate (&c.tev[i][j]));
    CK (cudaEventCreate (&c.t0));
    // Ceilings: duplex of the batch size itself, one copy each way.
    unsigned char *dd; CK (cudaMalloc ((void **) &dd, batch + batch / c.k * c.m));
    unsigned char *hh; CK (cudaHostAlloc ((void **) &hh, batch + batch / c.k * c.m, 0));
    double best = 0, h2d = 0;
    for (int rep = 0; rep < 6; rep++) {
      double t = now ();
      CK (cudaMemcpyAsync (dd, hh, batch, cudaMemcpyHostToDevice, c.su));
      CK (cudaMemcpyAsync (hh + batch, dd + batch, batch / c.k * c.m, cudaMemcpyDeviceToHost, c.sd));
      CK (cudaStreamSynchronize (c.su)); CK (cudaStreamSynchronize (c.sd));
      t = now () - t; if (rep && batch / t > best) best = batch / t;
      t = now ();
      CK (cudaMemcpyAsync (dd, hh, batch, cudaMemcpyHostToDevice, c.su));
      CK (cudaStreamSynchronize (c.su));
      t = now () - t; if (rep && batch / t > h2d) h2d = batch / t;
    }
    printf ("%d+%d, batch %zu MiB: H2D %.1f GB/s, duplex (one copy each way) %.1f GB/s of data\n",
            c.k, c.m, batch / MiB, h2d / 1e9, best / 1e9);
    // Copy kernels on mapped host memory: alone and both ways.
    for (int G : { 8, 16, 32, 64, 132 }) {
      double tu = 1e9, td = 1e9, tb = 1e9;
      size_t down = batch / c.k * c.m;
      for (int rep = 0; rep < 8; rep++) {
        double t = now ();
        kcopy2d<<<G, 512, 0, c.su>>> (hh, batch, dd, batch, batch, 1);
        CK (cudaDeviceSynchronize ()); tu = std::min (tu, now () - t);
        t = now ();
        kcopy2d<<<G, 512, 0, c.sd>>> (dd + batch, down, hh + batch, down, down, 1);
        CK (cudaDeviceSynchronize ()); td = std::min (td, now () - t);
        t = now ();
        kcopy2d<<<G, 512, 0, c.su>>> (hh, batch, dd, batch, batch, 1);
        kcopy2d<<<G, 512, 0, c.sd>>> (dd + batch, down, hh + batch, down, down, 1);
        CK (cudaDeviceSynchronize ()); tb = std::min (tb, now () - t);
      }
      printf ("  copy kernel, %3d blocks of 512: up alone %.1f, down alone %.1f GB/s; both %.1f GB/s of data = %.3f of duplex\n",
              G, batch / tu / 1e9, down / td / 1e9, batch / tb / 1e9, batch / tb / best);
    }
    for (int G : { 16, 32, 64 })
    for (int mode = 0; mode < 4; mode++)
    for (size_t chunk : { 1 * MiB, 2 * MiB, 4 * MiB, 8 * MiB }) {
      g_grid = G; g_up_k = mode & 1; g_down_k = mode >> 1;
      if (mode == 0 && G != 32) continue;
      c.nst = 1; c.slot = 64 * MiB;
      std::vector<pl> v = plan (c.k, len, c.nstripes, chunk, 0, 1);
      size_t cs = (size_t) c.k * len <= chunk ? chunk / (c.k * len) : 1;
      size_t w = 0; for (auto &p : v) w = std::max (w, p.w);
      std::vector<double> ts;
      for (int rep = 0; rep < 12; rep++) ts.push_back (run (c, v, cs * n * w, 1, 0));
      std::sort (ts.begin (), ts.end ());
      double r = batch / ts[6];
      printf ("  grid %2d up %s down %s chunk %zu MiB: %3zu chunks, %.1f GB/s = %.3f of duplex, best %.3f\n", G,
              g_up_k ? "kernel" : "dma   ", g_down_k ? "kernel" : "dma   ", chunk / MiB, v.size (), r / 1e9, r / best, batch / ts[0] / best);
    }
    g_up_k = g_down_k = 0;
    CK (cudaFreeHost (c.h)); CK (cudaFree (c.d)); CK (cudaFree (dd)); CK (cudaFreeHost (hh));
    batch = batch0;
  }
  return 0;
}
