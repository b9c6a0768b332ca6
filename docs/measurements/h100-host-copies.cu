// A one-off experiment (session of 2026-11-26, H100 machine), built by hand:
//   nvcc -O2 -gencode arch=compute_90,code=sm_90 -o host-copies h100-host-copies.cu -lpthread
//   ./host-copies 0; ./host-copies 8   (8: with eight threads copying memory on the CPU meanwhile)
// Output: h100-host-copies.log.  Not part of the build.
// H2D/D2H bandwidth: cudaHostAlloc vs malloc+cudaHostRegister; 64 KiB scattered copies; with CPU memcpy load
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <pthread.h>
#include <atomic>
#include <chrono>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf ("%s: %s\n", #x, cudaGetErrorString (e_)); exit (1); } } while (0)
static double now () { return std::chrono::duration<double> (std::chrono::steady_clock::now ().time_since_epoch ()).count (); }
static std::atomic<int> stop_load;
static void *load (void *) { size_t n = 256 << 20; char *a = (char *) malloc (n), *b = (char *) malloc (n); memset (a, 1, n); memset (b, 2, n); while (!stop_load) memcpy (b, a, n); free (a); free (b); return NULL; }
__global__ void copyk (const uint4 *s, uint4 *d, size_t n) { for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n; i += (size_t) gridDim.x * blockDim.x) d[i] = s[i]; }
static void run (const char *name, uint8_t *h, uint8_t *dv, size_t total, size_t piece, bool up, bool kernel, cudaStream_t st) {
  double best = 0;
  for (int rep = 0; rep < 5; rep++) {
    CK (cudaStreamSynchronize (st));
    double t0 = now ();
    for (size_t o = 0; o < total; o += piece) {
      if (kernel) { uint8_t *hp; CK (cudaHostGetDevicePointer ((void **) &hp, h + o, 0));
        if (up) copyk<<<256, 256, 0, st>>> ((const uint4 *) hp, (uint4 *) (dv + o), piece / 16); else copyk<<<256, 256, 0, st>>> ((const uint4 *) (dv + o), (uint4 *) hp, piece / 16); }
      else CK (cudaMemcpyAsync (up ? (void *) (dv + o) : (void *) (h + o), up ? (const void *) (h + o) : (const void *) (dv + o), piece, up ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, st));
    }
    CK (cudaStreamSynchronize (st));
    double g = total / (now () - t0) / 1e9; if (g > best) best = g;
  }
  printf ("%-40s %s piece %7zu KiB: %6.1f GB/s\n", name, up ? "up  " : "down", piece >> 10, best);
}
int main (int argc, char **argv) {
  size_t total = 64 << 20; cudaStream_t st; uint8_t *dv, *ha, *hr;
  int nload = argc > 1 ? atoi (argv[1]) : 0;
  CK (cudaSetDevice (0)); CK (cudaStreamCreate (&st)); CK (cudaMalloc (&dv, total));
  CK (cudaHostAlloc ((void **) &ha, total, cudaHostAllocMapped)); memset (ha, 3, total);
  hr = (uint8_t *) aligned_alloc (4096, total); memset (hr, 4, total);
  CK (cudaHostRegister (hr, total, cudaHostRegisterMapped));
  // 1 MiB buffers registered one by one, like nbdkit's request buffers
  const int nb = 64; uint8_t *bufs[nb]; uint8_t *hb = (uint8_t *) aligned_alloc (4096, (size_t) nb * (1 << 20));
  memset (hb, 5, (size_t) nb << 20);
  for (int i = 0; i < nb; i++) { bufs[i] = hb + ((size_t) i << 20); CK (cudaHostRegister (bufs[i], 1 << 20, cudaHostRegisterMapped)); }
  pthread_t th[32]; stop_load = 0;
  for (int i = 0; i < nload; i++) pthread_create (&th[i], NULL, load, NULL);
  printf ("CPU memcpy load threads: %d\n", nload);
  size_t pieces[] = { 64 << 10, 1 << 20, 4 << 20 };
  for (size_t p : pieces) {
    run ("cudaHostAlloc, copy engine", ha, dv, total, p, true, false, st);
    run ("malloc+cudaHostRegister, copy engine", hr, dv, total, p, true, false, st);
    if (p <= (1 << 20)) run ("1 MiB registered buffers, copy engine", hb, dv, total, p, true, false, st);
    run ("cudaHostAlloc, mapped kernel", ha, dv, total, p, true, true, st);
    run ("malloc+cudaHostRegister, mapped kernel", hr, dv, total, p, true, true, st);
    run ("cudaHostAlloc, copy engine", ha, dv, total, p, false, false, st);
    run ("malloc+cudaHostRegister, copy engine", hr, dv, total, p, false, false, st);
    run ("malloc+cudaHostRegister, mapped kernel", hr, dv, total, p, false, true, st);
  }
  stop_load = 1; for (int i = 0; i < nload; i++) pthread_join (th[i], NULL);
  return 0;
}
