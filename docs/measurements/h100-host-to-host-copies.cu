// A one-off experiment (session 51, 2026-11-27, H100 machine), built by hand:
//   nvcc -O2 -arch=sm_90 -o h2h h100-host-to-host-copies.cu
//   ./h2h 0; ./h2h 1   (0: the default spinning wait, 1: blocking sync)
// Output: h100-host-to-host-copies-s51.log.  Not part of the build.
// Host-to-host copies of page-locked memory by the GPU: the host's CPU per
// call against memcpy, by a copy kernel through the device's mapping and by
// cudaMemcpyAsync HostToHost (which the CPU makes).
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#define CK(x) do { cudaError_t e_ = (x); if (e_) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1);} } while (0)
static double cpu_s(void){ struct rusage r; getrusage(RUSAGE_THREAD,&r); return r.ru_utime.tv_sec+r.ru_stime.tv_sec+(r.ru_utime.tv_usec+r.ru_stime.tv_usec)/1e6; }
static double now(void){ struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec+t.tv_nsec/1e9; }
__global__ void cp(uint4 *d, const uint4 *s, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) d[i] = s[i];
}
int main(int argc, char **argv) {
  int blocking = argc > 1 && atoi(argv[1]);
  if (blocking) CK(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync|cudaDeviceMapHost));
  else CK(cudaSetDeviceFlags(cudaDeviceMapHost));
  size_t NB = 64, B = (size_t)1 << 20;
  char *src, *dst;
  CK(cudaHostAlloc((void**)&src, NB*B, cudaHostAllocMapped|cudaHostAllocPortable));
  // destination: malloc + register, 16 bytes past a page (as nbdkit's buffers)
  char *raw = (char*)aligned_alloc(4096, NB*B + 8192); char *dst0 = raw;
  CK(cudaHostRegister(dst0, NB*B + 8192, cudaHostRegisterMapped|cudaHostRegisterPortable));
  dst = dst0 + 16;
  memset(src, 7, NB*B); memset(dst0, 0, NB*B + 8192);
  cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  size_t sizes[] = {64<<10, 256<<10, 512<<10, 1<<20};
  printf("wait: %s\n", blocking ? "blocking sync" : "spin (default)");
  for (int si = 0; si < 4; si++) {
    size_t L = sizes[si]; int N = 2000;
    // memcpy reference (cold: rotate 64 MiB)
    double c0 = cpu_s(), t0 = now();
    for (int i = 0; i < N; i++) memcpy(dst + (i % NB) * B, src + ((i * 7) % NB) * B, L);
    double c1 = cpu_s(), t1 = now();
    // copy kernel, misaligned dst: copy in bytes via uint4 needs alignment; use offset-aligned variant: dst+16 is 16-aligned
    for (int i = 0; i < N; i++) {
      cp<<<64, 256, 0, st>>>((uint4*)(dst + (i % NB) * B), (const uint4*)(src + ((i*7) % NB) * B), L / 16);
      CK(cudaGetLastError());
      CK(cudaStreamSynchronize(st));
    }
    double c2 = cpu_s(), t2 = now();
    for (int i = 0; i < N; i++) {
      CK(cudaMemcpyAsync(dst + (i % NB) * B, src + ((i*7) % NB) * B, L, cudaMemcpyHostToHost, st));
      CK(cudaStreamSynchronize(st));
    }
    double c3 = cpu_s(), t3 = now();
    printf("%5zu KiB: memcpy %.1f us CPU (%.1f wall); copy kernel %.1f us CPU (%.1f wall); cudaMemcpyAsync H2H %.1f us CPU (%.1f wall)\n",
      L >> 10, (c1-c0)/N*1e6, (t1-t0)/N*1e6, (c2-c1)/N*1e6, (t2-t1)/N*1e6, (c3-c2)/N*1e6, (t3-t2)/N*1e6);
  }
  for (size_t i = 0; i < 1<<20; i++) if (dst[i] != 7) { printf("bad byte at %zu\n", i); return 1; }
  return 0;
}
