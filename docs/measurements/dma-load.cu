// A one-off experiment (session 51, 2026-11-27, H100 machine), built by hand:
//   nvcc -O2 -o dmaload dma-load.cu
//   ./dmaload GBPS_EACH_WAY SECONDS
// Used by s51-dma-load.sh (h100-dma-load-s51.log).  Not part of the build.
// Background PCIe traffic to and from host memory (H2D and D2H at a paced
// rate, 512 MiB page-locked buffers), to see whether the GPU's DMA slows
// the host's own memory copies.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#define CK(x) do { cudaError_t e_ = (x); if (e_) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1);} } while (0)
static double now(void){ struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec+t.tv_nsec/1e9; }
int main(int argc, char **argv) {
  double rate = atof(argv[1]) * 1e9, secs = atof(argv[2]);
  CK(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync));
  size_t H = (size_t)512 << 20, C = (size_t)8 << 20;
  char *hu, *hd, *d1, *d2;
  CK(cudaHostAlloc((void**)&hu, H, cudaHostAllocDefault));
  CK(cudaHostAlloc((void**)&hd, H, cudaHostAllocDefault));
  CK(cudaMalloc(&d1, C)); CK(cudaMalloc(&d2, C));
  cudaStream_t s1, s2; CK(cudaStreamCreate(&s1)); CK(cudaStreamCreate(&s2));
  double t0 = now(), sent = 0; size_t at = 0;
  while (now() - t0 < secs) {
    double due = t0 + sent / rate;
    double w = due - now();
    if (w > 0) usleep((useconds_t)(w * 1e6));
    CK(cudaMemcpyAsync(d1, hu + at, C, cudaMemcpyHostToDevice, s1));
    CK(cudaMemcpyAsync(hd + at, d2, C, cudaMemcpyDeviceToHost, s2));
    CK(cudaStreamSynchronize(s1)); CK(cudaStreamSynchronize(s2));
    sent += C; at = (at + C) % H;
  }
  double t = now() - t0;
  printf("dmaload: %.1f GB/s each way for %.1f s (asked %.1f)\n", sent / t / 1e9, t, rate / 1e9);
  return 0;
}
