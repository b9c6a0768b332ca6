// A one-off experiment (session 51, 2026-11-27, H100 machine), built by hand:
//   nvcc -O2 -o pinw pinned-writes.cu
//   ./pinw /dev/shm/pinw
// Output: in h100-pinned-writes-s51.log.  Not part of the build.
// The CPU cost of writing into page-locked memory (pread from a tmpfs file,
// memcpy) against ordinary memory: malloc, registered, cudaHostAlloc, mmap.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/resource.h>
#define CK(x) do { cudaError_t e_ = (x); if (e_) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1);} } while (0)
static double cpu_s(void){ struct rusage r; getrusage(RUSAGE_SELF,&r); return r.ru_utime.tv_sec+r.ru_stime.tv_sec+(r.ru_utime.tv_usec+r.ru_stime.tv_usec)/1e6; }
static double now(void){ struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec+t.tv_nsec/1e9; }
int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : "/dev/shm/pinw";
  size_t fsz = (size_t)4 << 30, B = 1 << 20, N = 4096;
  int fd = open(path, O_RDWR|O_CREAT, 0600);
  if (fd < 0) { perror(path); return 1; }
  if (ftruncate(fd, fsz)) return 1;
  char *w = (char*)malloc(64<<20); memset(w, 0x5a, 64<<20);
  for (size_t o = 0; o < fsz; o += 64<<20) if (pwrite(fd, w, 64<<20, o) != 64<<20) return 1;
  const char *names[] = {"malloc", "malloc+register", "cudaHostAlloc default", "cudaHostAlloc portable|mapped", "mmap anon", "mmap anon+register"};
  for (int rep = 0; rep < 2; rep++)
  for (int kind = 0; kind < 6; kind++) {
    size_t nb = 8;   // 8 buffers of 1 MiB rotated, like threads' scratch
    char *b;
    if (kind == 2) CK(cudaHostAlloc((void**)&b, nb*B, cudaHostAllocDefault));
    else if (kind == 3) CK(cudaHostAlloc((void**)&b, nb*B, cudaHostAllocPortable|cudaHostAllocMapped));
    else if (kind >= 4) { b = (char*)mmap(0, nb*B, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0); }
    else { if (posix_memalign((void**)&b, 4096, nb*B)) return 1; }
    memset(b, 1, nb*B);
    if (kind == 1 || kind == 5) CK(cudaHostRegister(b, nb*B, cudaHostRegisterPortable|cudaHostRegisterMapped));
    double c0 = cpu_s(), t0 = now();
    unsigned s = 12345;
    for (size_t i = 0; i < N; i++) {
      s = s*1103515245u + 12345u;
      off_t o = (off_t)((s >> 4) % (fsz / B)) * B;
      if (pread(fd, b + (i % nb) * B, B, o) != (ssize_t)B) { perror("pread"); return 1; }
    }
    double c1 = cpu_s(), t1 = now();
    for (size_t i = 0; i < N; i++) memcpy(b + (i % nb) * B, w + (i % 64) * B, B);
    double c2 = cpu_s(), t2 = now();
    printf("%-30s pread from tmpfs %.2f GB/s (%.3f CPU-s/GB); memcpy in %.2f GB/s (%.3f CPU-s/GB)\n", names[kind],
      N*B/1e9/(t1-t0), (c1-c0)/(N*B/1e9), N*B/1e9/(t2-t1), (c2-c1)/(N*B/1e9));
    if (kind == 1 || kind == 5) CK(cudaHostUnregister(b));
    if (kind == 2 || kind == 3) CK(cudaFreeHost(b)); else if (kind >= 4) munmap(b, nb*B); else free(b);
  }
  unlink(path);
  return 0;
}
