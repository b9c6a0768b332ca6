/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - XOR-network kernels compiled at run time (NVRTC) for one
 * coding matrix, in the manner of G-CRS.
 *
 * The generic kernels (kernels.cu) read the matrix from memory and pay
 * for every bit of it, zero or not.  Here the GF(2) bitmatrix of the
 * matrix (gr_gf_bitmatrix) is compiled into straight-line code: output
 * bit-plane R is the XOR of exactly the input planes whose bit is set, so
 * the work follows the matrix's density, there are no coefficient loads,
 * and the XORs are three-input LOP3s (written out as such for RS).
 *
 * CRS: a thread owns 4 bytes of each of the 8 packets of one group of
 * every block; packets are the planes.
 * RS: a thread owns 32 bytes of every block (16 at 16 l and 16 at
 * 512 + 16 l of its warp's kilobyte, lane l, see ITEM); an 8x8 bit
 * transpose per byte lane turns its 8 words into 8 planes (word t = bit t
 * of each of the 32 bytes), the same network runs, and the outputs are
 * transposed back.  So RS over GF(2^8) costs the same XORs as CRS plus two
 * transposes.
 *
 * Kernels with many output blocks stage their inputs in shared memory
 * with cp.async (gr_gpu_jit_stage), so that later inputs arrive while the
 * network runs on earlier ones without holding registers; the large RS
 * ones then store their outputs through those slots by a loop, so that
 * their machine code stays small enough to be fetched in time.
 *
 * NVRTC is loaded with dlopen, so nothing needs it to start; without it
 * (or on any failure) the generic kernels are used.  Compiling takes
 * tens to hundreds of milliseconds, so the engine compiles a table's
 * kernel only when a large batch first uses it (gr_gpu_jit_min), or, for
 * a server's encode table, before it serves (gr_gpu_coder_prepare).  The
 * compiler runs in a child process (fork, no exec; rtc_compile): run in
 * the server's process, a SIGTERM that came while it compiled ended the
 * server with status 4 before the plugin's unload, leaving the array
 * dirty (test-gpu-request-pin part 3); what a compiler does to its
 * process (signal handlers, exit handlers, memory) now stays there.
 * The fork leaves page-locked memory to the server: ordinary pages that
 * cudaHostRegister locked (nbdkit's request buffers) are pinned, so the
 * kernel copies them for the child at the fork instead of sharing them
 * copy-on-write (which would leave the GPU on pages the server no longer
 * sees once it writes them): checked on the H200 machine (kernel 6.18,
 * NVIDIA open module 580; docs/reliability.md).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nvrtc.h>

#include "gpu-internal.h"
#include "../common/thread.h"

#define JIT_THREADS 128
#define JIT_MAXROWS 32          /* output blocks, in passes */
#define JIT_MAXCOLS 64

size_t gr_gpu_jit_min = (size_t) 4 << 20;
/* Measured on an H200 (bench-gpu (a3)): one pass beats 8 or 4 output
 * blocks per pass for 8+8 and 16+16, so passes start beyond 16. */
int gr_gpu_jit_passrows = 16;
/* Inputs staged in shared memory by asynchronous copies (cp.async):
 * 0 off; 1 every input of a thread's item requested before its network,
 * waited for one by one; -1 (auto) 1 for kernels of at least
 * JIT_STAGE_MINROWS output blocks, else 0.  Only single-pass kernels of
 * at most JIT_STAGE_MAXCOLS inputs are staged.
 * Measured on an H200 (bench-gpu (a6), commit a63a726): staging pays
 * where the network is heavy: 16+16 RS 1660 GB/s (78 % of roofline)
 * against 1468 unstaged, 12+12 RS 1936 against 1800, 16+16 CRS 1840
 * against 1796; 8+8 and 10+4 RS are even (2063 and 3080 against 2059
 * and 3085); the memory-bound CRS kernels lose (8+8 CRS 1956 against
 * 2061, 10+4 CRS 2906 against 3068). */
int gr_gpu_jit_stage = -1;
#define JIT_STAGE_MINROWS 12
/* Staged RS kernels of at least JIT_OUTLOOP_MIN input-output block pairs
 * (k x m) store their outputs by a loop (emit_stage_out), compiled for 3
 * resident blocks of JIT_THREADS a SM (at most 168 registers; without
 * the bound ptxas takes more and only 2 fit).  The loop makes the large
 * kernels faster and the smaller, memory-bound ones a little slower
 * (docs/performance.md, "The output stage as a loop"). */
#define JIT_OUTLOOP_MIN 192
#define JIT_STAGE_MINBLOCKS 3
/* RS transposes' right shifts as IMAD.HI products (1) or SHF (0): moves
 * 384 instructions per 16+16 item from the integer ALU pipe to the
 * multiply pipe; even or slightly better everywhere. */
int gr_gpu_jit_shr = 1;
/* Network rows as explicit three-input LOP3s (1), as C XORs (0), or -1
 * (auto): RS always, CRS when staged.  Written as C, NVVM shares g0 ^ g1
 * between rows that take the same pair and ptxas cannot fuse the rest:
 * 16+16 RS took 4049 LOP3s and 230 registers per item, 3534 and 167 with
 * LOP3s.  Unstaged 16+16 CRS measured slower with them (1633 GB/s against
 * 1796), staged faster (1840). */
int gr_gpu_jit_lop3 = -1;
static int jit_built;

/* Test hook: how many JIT kernels were built in this process. */
extern "C" int
gr_gpu_jit_built (void)
{
  return __atomic_load_n (&jit_built, __ATOMIC_RELAXED);
}

/* ---- NVRTC, by dlopen -------------------------------------------------- */

static struct {
  nvrtcResult (*create) (nvrtcProgram *, const char *, const char *, int,
                         const char *const *, const char *const *);
  nvrtcResult (*compile) (nvrtcProgram, int, const char *const *);
  nvrtcResult (*cubin_size) (nvrtcProgram, size_t *);
  nvrtcResult (*cubin) (nvrtcProgram, char *);
  nvrtcResult (*log_size) (nvrtcProgram, size_t *);
  nvrtcResult (*log) (nvrtcProgram, char *);
  nvrtcResult (*destroy) (nvrtcProgram *);
  const char *(*errstr) (nvrtcResult);
  int ok;
  char why[256];
} rtc;
static pthread_once_t rtc_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t jit_lock = PTHREAD_MUTEX_INITIALIZER;

static void
rtc_load (void)
{
  static const char *const names[] = {
    "libnvrtc.so.13", "libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so.13",
    "/usr/local/cuda/lib64/libnvrtc.so", NULL,
  };
  void *h = NULL;

  for (int i = 0; names[i] && h == NULL; i++)
    h = dlopen (names[i], RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    snprintf (rtc.why, sizeof rtc.why, "NVRTC not found: %s", dlerror ());
    return;
  }
#define SYM(field, name)                                        \
  *(void **) &rtc.field = dlsym (h, name);                      \
  if (rtc.field == NULL) {                                      \
    snprintf (rtc.why, sizeof rtc.why, "NVRTC lacks %s", name); \
    return;                                                     \
  }
  SYM (create, "nvrtcCreateProgram");
  SYM (compile, "nvrtcCompileProgram");
  SYM (cubin_size, "nvrtcGetCUBINSize");
  SYM (cubin, "nvrtcGetCUBIN");
  SYM (log_size, "nvrtcGetProgramLogSize");
  SYM (log, "nvrtcGetProgramLog");
  SYM (destroy, "nvrtcDestroyProgram");
  SYM (errstr, "nvrtcGetErrorString");
#undef SYM
  rtc.ok = 1;
}

/* ---- source generation ------------------------------------------------- */

struct sbuf {
  char *p;
  size_t len, cap;
  int oom;
};

static void __attribute__ ((format (printf, 2, 3)))
emit (struct sbuf *b, const char *fmt, ...)
{
  va_list ap;
  int n;

  if (b->oom)
    return;
  for (;;) {
    va_start (ap, fmt);
    n = vsnprintf (b->p + b->len, b->cap - b->len, fmt, ap);
    va_end (ap);
    if (n >= 0 && (size_t) n < b->cap - b->len) {
      b->len += n;
      return;
    }
    size_t cap = b->cap * 2 + (size_t) (n > 0 ? n : 0) + 4096;
    char *q = (char *) realloc (b->p, cap);
    if (q == NULL) {
      b->oom = 1;
      return;
    }
    b->p = q;
    b->cap = cap;
  }
}

static const char prologue[] =
  "typedef unsigned int u32;\n"
  "typedef unsigned long long u64;\n"
  "struct alignas(16) v4 { u32 x, y, z, w; };\n"
  "__device__ __forceinline__ u32 X3 (u32 a, u32 b, u32 c)\n"
  "{ u32 d; asm (\"lop3.b32 %0, %1, %2, %3, 0x96;\" : \"=r\" (d) : \"r\" (a), \"r\" (b), \"r\" (c)); return d; }\n"
  "#if GR_SHR_HI\n"
  /* Right shifts as the high word of a product by 2^(32-s) (IMAD.HI, the
   * multiply pipe) instead of SHF (the integer ALU pipe, the bound).  The
   * factors sit in writable constant memory so that the compiler cannot
   * turn the products back into shifts. */
  "__constant__ u32 gr_shk[8] = { 0u, 1u << 31, 1u << 30, 1u << 29, 1u << 28,"
  " 1u << 27, 1u << 26, 1u << 25 };\n"
  "#define SHR(a, s) __umulhi (a, gr_shk[s])\n"
  "#else\n"
  "#define SHR(a, s) ((a) >> (s))\n"
  "#endif\n"
  /* Swap of the bits m of b with the bits m << s of a as two selects, b
   * taking a's bits m << s and a taking b's bits m, each one LOP3 (0xd8:
   * (x & ~z) | (y & z)): two LOP3s and two shifts a swap where a delta
   * swap takes three LOP3s, on the integer ALU pipe that bounds 16+16
   * (docs/performance.md, "What limits each figure"). */
  "__device__ __forceinline__ u32 SEL (u32 x, u32 y, u32 z)\n"
  "{ u32 d; asm (\"lop3.b32 %0, %1, %2, %3, 0xd8;\" : \"=r\" (d) : \"r\" (x), \"r\" (y), \"r\" (z)); return d; }\n"
  "#define SWP(a, b, s, m) { const u32 a_ = a;"
  " a = SEL (a_, b << s, (u32) (m) << s); b = SEL (b, SHR (a_, s), m); }\n"
  /* Staging of inputs in shared memory (gr_gpu_jit_stage): asynchronous
   * copies, waited for per input. */
  "#define CPA16(sa, gp) asm volatile (\"cp.async.cg.shared.global [%0], [%1], 16;\""
  " :: \"r\" (sa), \"l\" (gp) : \"memory\")\n"
  "#define CPA4(sa, gp) asm volatile (\"cp.async.ca.shared.global [%0], [%1], 4;\""
  " :: \"r\" (sa), \"l\" (gp) : \"memory\")\n"
  "#define CPCOMMIT() asm volatile (\"cp.async.commit_group;\" ::: \"memory\")\n"
  "#define CPWAIT(n) asm volatile (\"cp.async.wait_group %0;\" :: \"n\" (n) : \"memory\")\n"
  "#define LDS16(a, b, c, d, sa) asm volatile (\"ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\""
  " : \"=r\" (a), \"=r\" (b), \"=r\" (c), \"=r\" (d) : \"r\" (sa) : \"memory\")\n"
  /* 16-byte stores in PTX: with the coalesced RS layout NVVM splits a
   * vector store into four 4-byte ones. */
  "#define STG16(p, a, b, c, d) asm volatile (\"st.global.v4.u32 [%0], {%1, %2, %3, %4};\""
  " :: \"l\" (p), \"r\" (a), \"r\" (b), \"r\" (c), \"r\" (d) : \"memory\")\n"
  "#define STS16(sa, a, b, c, d) asm volatile (\"st.shared.v4.u32 [%0], {%1, %2, %3, %4};\""
  " :: \"r\" (sa), \"r\" (a), \"r\" (b), \"r\" (c), \"r\" (d) : \"memory\")\n"
  "#define LDS4(a, sa) asm volatile (\"ld.shared.u32 %0, [%1];\""
  " : \"=r\" (a) : \"r\" (sa) : \"memory\")\n"
  "#define TR8(a) \\\n"
  "  SWP(a[0], a[1], 1, 0x55555555u) SWP(a[2], a[3], 1, 0x55555555u) \\\n"
  "  SWP(a[4], a[5], 1, 0x55555555u) SWP(a[6], a[7], 1, 0x55555555u) \\\n"
  "  SWP(a[0], a[2], 2, 0x33333333u) SWP(a[1], a[3], 2, 0x33333333u) \\\n"
  "  SWP(a[4], a[6], 2, 0x33333333u) SWP(a[5], a[7], 2, 0x33333333u) \\\n"
  "  SWP(a[0], a[4], 4, 0x0f0f0f0fu) SWP(a[1], a[5], 4, 0x0f0f0f0fu) \\\n"
  "  SWP(a[2], a[6], 4, 0x0f0f0f0fu) SWP(a[3], a[7], 4, 0x0f0f0f0fu)\n";

/* Load one input of an item from pointer ptr (its first word) into the
 * 8 words dst##_0 .. dst##_7 (declared by the caller); RS: the second 16
 * bytes are half words after the first (an expression). */
static void
emit_load (struct sbuf *b, enum gr_code code, const char *dst,
           const char *ptr, const char *half)
{
  if (code == GR_CODE_RS)
    emit (b,
          "      { const v4 a_ = *(const v4 *) (%s);\n"
          "        const v4 b_ = *(const v4 *) (%s + %s);\n"
          "        %s_0 = a_.x; %s_1 = a_.y; %s_2 = a_.z; %s_3 = a_.w;\n"
          "        %s_4 = b_.x; %s_5 = b_.y; %s_6 = b_.z; %s_7 = b_.w; }\n",
          ptr, ptr, half, dst, dst, dst, dst, dst, dst, dst, dst);
  else {
    emit (b, "      {");
    for (int c = 0; c < 8; c++)
      emit (b, " %s_%d = %s[%d];", dst, c, ptr, c * 128);
    emit (b, " }\n");
  }
}

/* Staged inputs (gr_gpu_jit_stage): input slot i of a thread lies at
 * shared address sb + i * JIT_STAGE_BYTES (sb: the block's buffer plus 16
 * bytes per thread for RS, 4 for CRS): RS as two 16-byte halves
 * JIT_THREADS * 16 apart, CRS as 8 words JIT_THREADS * 4 apart, so that a
 * warp's copies and shared loads touch consecutive bytes.  emit_stage_copy
 * starts the asynchronous copy of an input from ptr (its first word) into
 * slot i; emit_stage_read loads slot i into dst##_0 .. dst##_7. */
#define JIT_STAGE_BYTES (JIT_THREADS * 32)
#define JIT_STAGE_MAXCOLS 24

static void
emit_stage_copy (struct sbuf *b, enum gr_code code, int i, const char *ptr,
                 const char *half)
{
  if (code == GR_CODE_RS)
    emit (b, "      CPA16 (sb + %d, %s); CPA16 (sb + %d, %s + %s);\n",
          i * JIT_STAGE_BYTES, ptr, i * JIT_STAGE_BYTES + JIT_THREADS * 16,
          ptr, half);
  else {
    emit (b, "     ");
    for (int c = 0; c < 8; c++)
      emit (b, " CPA4 (sb + %d, %s + %d);", i * JIT_STAGE_BYTES
            + c * JIT_THREADS * 4, ptr, c * 128);
    emit (b, "\n");
  }
}

static void
emit_stage_read (struct sbuf *b, enum gr_code code, int i, const char *dst)
{
  if (code == GR_CODE_RS)
    emit (b, "      LDS16 (%s_0, %s_1, %s_2, %s_3, sb + %d);\n"
          "      LDS16 (%s_4, %s_5, %s_6, %s_7, sb + %d);\n",
          dst, dst, dst, dst, i * JIT_STAGE_BYTES, dst, dst, dst, dst,
          i * JIT_STAGE_BYTES + JIT_THREADS * 16);
  else {
    emit (b, "     ");
    for (int c = 0; c < 8; c++)
      emit (b, " LDS4 (%s_%d, sb + %d);", dst, c, i * JIT_STAGE_BYTES
            + c * JIT_THREADS * 4);
    emit (b, "\n");
  }
}

/* The nrows output blocks of a pass of a staged RS item, from block
 * jpass (accumulators o[0 .. 8 nrows)), transposed back and stored by a
 * loop (JIT_OUTLOOP_MIN): each round puts up to ncols blocks'
 * accumulators in the thread's input slots (every input has been read by
 * then), then one loop body loads a block's 8 words, transposes and
 * stores them.  Unrolled, these transposes and
 * stores made a sixth of the 16+16 kernel's straight-line code, whose
 * warps waited on instruction fetch more than on anything else
 * (docs/performance.md, "The output stage as a loop"). */
static void
emit_stage_out (struct sbuf *b, int jpass, int nrows, int ncols)
{
  for (int j0 = 0; j0 < nrows; j0 += ncols) {
    const int n = nrows - j0 < ncols ? nrows - j0 : ncols;

    for (int j = 0; j < n; j++) {
      const int r = (j0 + j) * 8;
      emit (b, "    STS16 (sb + %d, o[%d], o[%d], o[%d], o[%d]);\n"
            "    STS16 (sb + %d, o[%d], o[%d], o[%d], o[%d]);\n",
            j * JIT_STAGE_BYTES, r, r + 1, r + 2, r + 3,
            j * JIT_STAGE_BYTES + JIT_THREADS * 16, r + 4, r + 5, r + 6,
            r + 7);
    }
    emit (b, "    #pragma unroll 1\n"
          "    for (int j_ = 0; j_ < %d; j_++) {\n"
          "      const u32 sa_ = sb + j_ * %d;\n"
          "      u32 *const q_ = op + (u64) (j_ + %d) * vlen + base;\n"
          "      u32 q[8];\n"
          "      LDS16 (q[0], q[1], q[2], q[3], sa_);\n"
          "      LDS16 (q[4], q[5], q[6], q[7], sa_ + %d);\n"
          "      TR8(q)\n"
          "      STG16 (q_, q[0], q[1], q[2], q[3]);\n"
          "      STG16 (q_ + h2, q[4], q[5], q[6], q[7]);\n"
          "    }\n", n, JIT_STAGE_BYTES, jpass + j0, JIT_THREADS * 16);
  }
}

/* Code generation options of gen_source (see the globals above). */
struct gen_opts {
  int stage;            /* staged inputs: 0 or 1 (gr_gpu_jit_stage) */
  int shr;              /* RS right shifts as IMAD.HI */
  int lop3;             /* network rows as explicit LOP3s */
  int outloop;          /* outputs stored by a loop (JIT_OUTLOOP_MIN) */
};

/* The network for input i (its planes in p[0..7]) into the accumulators
 * of rows [r0, r1): row r is o[r - ra]. */
static void
emit_net (struct sbuf *b, const uint8_t *bits, int nc, int i, int r0, int r1,
          int ra, int lop3)
{
  /* Common subexpressions: the XOR of every subset of planes 0-3 (g0)
   * and of planes 4-7 (g1) that some row needs, each one XOR from a
   * smaller one; then each row takes at most two of them. */
  {
    int need[2][16] = { { 0 } };

    for (int r = r0; r < r1; r++) {
      const uint8_t *row = bits + (size_t) r * nc + (size_t) i * 8;
      for (int h = 0; h < 2; h++) {
        int sub = 0;
        for (int c = 0; c < 4; c++)
          sub |= row[h * 4 + c] ? 1 << c : 0;
        for (; sub; sub &= sub - 1)  /* the chain of prefixes */
          need[h][sub] = 1;
      }
    }
    for (int h = 0; h < 2; h++)
      for (int sub = 1; sub < 16; sub++) {
        if (!need[h][sub])
          continue;
        const int low = __builtin_ctz (sub), rest = sub & (sub - 1);
        if (rest == 0)
          emit (b, "      const u32 g%d_%d = p[%d];\n", h, sub,
                h * 4 + low);
        else
          emit (b, "      const u32 g%d_%d = g%d_%d ^ p[%d];\n", h,
                sub, h, rest, h * 4 + low);
      }
  }
  for (int r = r0; r < r1; r++) {
    const uint8_t *row = bits + (size_t) r * nc + (size_t) i * 8;
    int sub[2] = { 0, 0 };

    for (int c = 0; c < 8; c++)
      sub[c / 4] |= row[c] ? 1 << (c % 4) : 0;
    if (sub[0] && sub[1] && lop3)
      /* One explicit LOP3: written as C, NVVM shares g0 ^ g1 between
       * rows that take the same pair, and ptxas then cannot fuse each
       * row's two XORs (about 3100 LOP3s for 16+16 instead of 2400). */
      emit (b, "      o[%d] = X3 (o[%d], g0_%d, g1_%d);\n", r - ra, r - ra,
            sub[0], sub[1]);
    else if (sub[0] && sub[1])
      emit (b, "      o[%d] ^= g0_%d ^ g1_%d;\n", r - ra, sub[0],
            sub[1]);
    else if (sub[0] || sub[1])
      emit (b, "      o[%d] ^= g%d_%d;\n", r - ra, sub[0] ? 0 : 1,
            sub[0] ? sub[0] : sub[1]);
  }
}

/* Emit the code for the nrows output blocks of one item in passes of
 * passrows (staged kernels: one pass). */
static void
emit_rows (struct sbuf *b, enum gr_code code, const uint8_t *bits,
           int nrows, int ncols, int passrows,
           const struct gen_opts *o)
{
  const int stage = o->stage;
  const int nc = ncols * 8;

  /* Passes of at most passrows output blocks: fewer live accumulators
   * (occupancy) for re-reading the inputs, mostly from L2. */
  for (int j0 = 0; j0 < nrows; j0 += passrows) {
    const int j1 = j0 + passrows < nrows ? j0 + passrows : nrows;
    const int r0 = j0 * 8, r1 = j1 * 8;
    const int first = j0 == 0;

    /* Each pass reads the inputs through a pointer the compiler cannot
     * see through, so that it loads them again instead of keeping the
     * previous pass's values live (which spills registers). */
    if (first)
      emit (b, "    {\n    const u32 *ipp = ip;\n");
    else
      emit (b, "    {\n    const u32 *ipp;\n"
            "    asm volatile (\"mov.b64 %%0, %%1;\" : \"=l\" (ipp) : \"l\" (ip));\n");
    /* The running pointer to the input being loaded (xp). */
    if (stage)
      emit (b, "    (void) ipp;\n");
    else
      emit (b, "    const u32 *xp = ipp + base;\n");
    emit (b, "    u32 o[%d];\n", r1 - r0);
    for (int r = r0; r < r1; r++)
      emit (b, "    o[%d] = 0;\n", r - r0);
    for (int i = 0; i < ncols; i++) {
      emit (b, "    {\n      u32 p[8];\n");
      if (stage) {
        /* Every input of this item was requested before the network,
         * one copy group each: wait for input i's. */
        emit (b, "      u32 X_0, X_1, X_2, X_3, X_4, X_5, X_6, X_7;\n"
              "      CPWAIT (%d);\n", ncols - 1 - i);
        /* The shared loads of input i wait (in the compiler's eyes, at no
         * cost) for the last accumulator of input i - 1: else NVVM puts
         * every input's loads ahead of the network and registers spill. */
        if (i > 0)
          emit (b, "      asm volatile (\"\" : \"+r\" (sb) : \"r\" (o[%d]));\n",
                r1 - r0 - 1);
        emit_stage_read (b, code, i, "X");
        for (int c = 0; c < 8; c++)
          emit (b, "      p[%d] = X_%d;\n", c, c);
      }
      else {
        emit (b, "      u32 X_0, X_1, X_2, X_3, X_4, X_5, X_6, X_7;\n");
        emit_load (b, code, "X", "xp", "h2");
        emit (b, "      xp += vlen;\n");
        for (int c = 0; c < 8; c++)
          emit (b, "      p[%d] = X_%d;\n", c, c);
      }
      if (code == GR_CODE_RS)
        emit (b, "      TR8(p)\n");
      emit_net (b, bits, nc, i, r0, r1, r0, o->lop3);
      emit (b, "    }\n");
    }
    if (o->outloop)
      emit_stage_out (b, j0, j1 - j0, ncols);
    else
      for (int j = j0; j < j1; j++) {
        if (code == GR_CODE_RS)
          emit (b,
                "    {\n      u32 q[8];\n"
                "      for (int r = 0; r < 8; r++) q[r] = o[%d + r];\n"
                "      TR8(q)\n"
                "      STG16 (op + %d * vlen + base, q[0], q[1], q[2], q[3]);\n"
                "      STG16 (op + %d * vlen + base + h2, q[4], q[5], q[6], q[7]);\n"
                "    }\n", (j - j0) * 8, j, j);
        else
          for (int r = 0; r < 8; r++)
            emit (b, "    op[%d * vlen + base + %d] = o[%d];\n", j, r * 128,
                  (j - j0) * 8 + r);
      }
    emit (b, "    }\n");
  }
}

/* bits: (nrows*8) x (ncols*8), row-major, 0/1 bytes.
 *
 * Items: 32 bytes of every block of a stripe for RS, 4 bytes of each of
 * the 8 packets of a group for CRS.  One item per thread: the launch
 * (gr_gpu_launch_jit) spreads x over the items of a stripe and y over
 * the stripes (a thread loops only beyond 65535 blocks either way). */
static char *
gen_source (enum gr_code code, const uint8_t *bits, int nrows, int ncols,
            struct gen_opts *o)
{
  int stage = o->stage;
  struct sbuf b = { NULL, 0, 0, 0 };
  const int passrows = gr_gpu_jit_passrows > 0 ? gr_gpu_jit_passrows : nrows;
  char bounds[32];

  /* Staging: one pass of every output block (the shared buffer is per
   * thread), at most JIT_STAGE_MAXCOLS inputs. */
  if (passrows < nrows || ncols > JIT_STAGE_MAXCOLS)
    stage = 0;
  o->stage = stage;
  if (o->lop3 < 0)
    o->lop3 = code == GR_CODE_RS || stage;
  o->outloop = stage && code == GR_CODE_RS
    && nrows * ncols >= JIT_OUTLOOP_MIN;
  if (o->outloop)
    snprintf (bounds, sizeof bounds, "%d, %d", JIT_THREADS,
              JIT_STAGE_MINBLOCKS);
  else
    snprintf (bounds, sizeof bounds, "%d", JIT_THREADS);
  emit (&b, "#define GR_SHR_HI %d\n%s", o->shr ? 1 : 0, prologue);
  /* ITEM (t, base, h2) declares where item t of a stripe starts (base,
   * in words) and, RS, where its second 16 bytes are (h2 words further).
   * CRS: 4 bytes of each packet of group t / 128.  RS: the items of a
   * full group of 32 (a warp's kilobyte) take 16 bytes at 16 l and
   * 512 + 16 l of it (l = t % 32), so that each 16-byte access of a warp
   * covers 512 consecutive bytes; the items of a last partial group take
   * 32 consecutive bytes.  (32 consecutive bytes for every item measured
   * slower on an H200: 16+16 RS 1337 GB/s against 1468, and 1258 against
   * 1660 staged, where the copies bypass L1 and each 32-byte item's
   * sectors came twice from L2.) */
  if (code == GR_CODE_RS)
    emit (&b, "#define ITEM(t, base, h2) u64 base; u32 h2; {"
          " const u64 g_ = (t) >> 5;"
          " if (((g_ + 1) << 5) <= items) {"
          " base = g_ * 256 + ((t) & 31) * 4; h2 = 128; }"
          " else { base = (t) * 8; h2 = 4; } }\n");
  else
    emit (&b, "#define ITEM(t, base, h2) const u64 base = ((t) >> 7) * 1024"
          " + ((t) & 127); const u32 h2 = 0; (void) h2;\n");
  emit (&b,
        "extern \"C\" __global__ void __launch_bounds__(%s)\n"
        "gr_jit(const u32 *__restrict__ in, u32 *__restrict__ out,"
        " u64 vlen, u64 nstripes)\n{\n"
        "  const u64 items = vlen / 8, total = items * nstripes;\n"
        "  const unsigned w = threadIdx.x >> 5;\n", bounds);
  if (stage)
    emit (&b, "  extern __shared__ v4 gr_stage[];\n"
          "  u32 sb = (u32) __cvta_generic_to_shared (gr_stage)"
          " + threadIdx.x * %d;\n", code == GR_CODE_RS ? 16 : 4);
  /* One item per thread: x over the items of a stripe, y over the
   * stripes. */
  emit (&b,
        "  (void) total;\n"
        "  for (u64 s = blockIdx.y; s < nstripes; s += gridDim.y)\n"
        "  for (u64 t = (u64) blockIdx.x * %d + w * 32"
        " + (threadIdx.x & 31); t < items; t += (u64) gridDim.x * %d) {\n"
        "    const u32 *ip = in + s * %d * vlen;\n"
        "    u32 *op = out + s * %d * vlen;\n"
        "    ITEM (t, base, h2)\n",
        JIT_THREADS, JIT_THREADS, ncols, nrows);
  if (stage) {
    emit (&b, "    {\n      const u32 *cp = ip + base;\n");
    for (int i = 0; i < ncols; i++) {
      emit_stage_copy (&b, code, i, "cp", "h2");
      emit (&b, "      CPCOMMIT ();\n      cp += vlen;\n");
    }
    emit (&b, "    }\n");
  }
  emit_rows (&b, code, bits, nrows, ncols, passrows, o);
  emit (&b, "  }\n}\n");
  if (b.oom) {
    free (b.p);
    return NULL;
  }
  return b.p;
}

/* ---- compile + load ---------------------------------------------------- */

/* Test hook: the form of kernels compiled afterwards, f = { stage, shr,
 * lop3 } (gr_gpu_jit_stage, _shr, _lop3; -1 where they take auto); the
 * previous values are stored in old (if not NULL). */
extern "C" void
gr_gpu_set_jit_form (const int f[3], int old[3])
{
  if (old) {
    old[0] = gr_gpu_jit_stage;
    old[1] = gr_gpu_jit_shr;
    old[2] = gr_gpu_jit_lop3;
  }
  gr_gpu_jit_stage = f[0];
  gr_gpu_jit_shr = f[1];
  gr_gpu_jit_lop3 = f[2];
}

/* write(2) all of buf, or false. */
static bool
write_all (int fd, const char *buf, size_t len)
{
  while (len > 0) {
    ssize_t w = write (fd, buf, len);

    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return false;
    buf += w;
    len -= (size_t) w;
  }
  return true;
}

/* The child: compile src for arch and write 'C' and the cubin, or 'E'
 * and why not, to fd; then _exit (no exit handlers: they are the
 * server's). */
static void __attribute__ ((noreturn))
rtc_child (int fd, const char *src, const char *arch)
{
  static const int sigs[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE };
  const char *opts[] = { arch, "-std=c++17", "--use_fast_math" };
  struct sigaction dfl;
  sigset_t none;
  nvrtcProgram prog = NULL;
  nvrtcResult nr;
  char msg[400];
  char *cubin = NULL;
  size_t len = 0;

  /* Killed with its thread (the server ended), by a signal to the
   * process group, or by a closed pipe. */
  (void) prctl (PR_SET_PDEATHSIG, SIGKILL);
  memset (&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    (void) sigaction (sigs[i], &dfl, NULL);
  sigemptyset (&none);
  (void) pthread_sigmask (SIG_SETMASK, &none, NULL);

  nr = rtc.create (&prog, src, "gr_jit.cu", 0, NULL, NULL);
  if (nr != NVRTC_SUCCESS) {
    snprintf (msg, sizeof msg, "EnvrtcCreateProgram: %s", rtc.errstr (nr));
    goto fail;
  }
  nr = rtc.compile (prog, 3, opts);
  if (nr != NVRTC_SUCCESS) {
    size_t ll = 0;
    char logbuf[300] = "";

    if (rtc.log_size (prog, &ll) == NVRTC_SUCCESS && ll > 0) {
      char *lg = (char *) malloc (ll);
      if (lg && rtc.log (prog, lg) == NVRTC_SUCCESS)
        snprintf (logbuf, sizeof logbuf, "%s", lg);
      free (lg);
    }
    snprintf (msg, sizeof msg, "EnvrtcCompileProgram: %s: %s",
              rtc.errstr (nr), logbuf);
    goto fail;
  }
  if (rtc.cubin_size (prog, &len) != NVRTC_SUCCESS || len == 0 ||
      (cubin = (char *) malloc (len)) == NULL ||
      rtc.cubin (prog, cubin) != NVRTC_SUCCESS) {
    snprintf (msg, sizeof msg, "EnvrtcGetCUBIN failed");
    goto fail;
  }
  _exit (write_all (fd, "C", 1) && write_all (fd, cubin, len) ? 0 : 1);
 fail:
  _exit (write_all (fd, msg, strlen (msg)) ? 0 : 1);
}

/* Compile src for arch in a child process: the cubin (malloc'd) into
 * *cubin and *len; 0, or -1 with the error set. */
static int
rtc_compile (const char *src, const char *arch, char **cubin, size_t *len)
{
  char *buf = NULL, *nb;
  size_t n = 0, cap = 0;
  int fd[2], st = 0, r = -1;
  ssize_t got;
  pid_t pid;

  if (pipe2 (fd, O_CLOEXEC) != 0) {
    gr_gpu_set_error ("JIT compile: pipe: %s", strerror (errno));
    return -1;
  }
  pid = fork ();
  if (pid == 0) {
    close (fd[0]);
    rtc_child (fd[1], src, arch);
  }
  close (fd[1]);
  if (pid < 0) {
    gr_gpu_set_error ("JIT compile: fork: %s", strerror (errno));
    close (fd[0]);
    return -1;
  }
  for (;;) {
    if (n == cap) {
      cap = cap ? 2 * cap : (size_t) 64 << 10;
      if ((nb = (char *) realloc (buf, cap)) == NULL)
        break;
      buf = nb;
    }
    got = read (fd[0], buf + n, cap - n);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      break;
    n += (size_t) got;
  }
  close (fd[0]);
  while (waitpid (pid, &st, 0) < 0 && errno == EINTR)
    ;
  if (n > 1 && buf[0] == 'C' && WIFEXITED (st) && WEXITSTATUS (st) == 0) {
    memmove (buf, buf + 1, n - 1);
    *cubin = buf;
    *len = n - 1;
    return 0;
  }
  if (n > 1 && buf[0] == 'E')
    gr_gpu_set_error ("%.*s", (int) (n - 1), buf + 1);
  else if (WIFSIGNALED (st))
    gr_gpu_set_error ("JIT compile: the compiler's process was killed by "
                      "signal %d", WTERMSIG (st));
  else
    gr_gpu_set_error ("JIT compile: the compiler's process ended with "
                      "status %d and no result", WEXITSTATUS (st));
  free (buf);
  return r;
}

static int
jit_build (struct gr_gpu_tab *t)
{
  cudaLibrary_t lib = NULL;
  cudaKernel_t kern = NULL;
  cudaError_t e;
  char *src = NULL, *cubin = NULL, arch[64];
  size_t cubin_len = 0;
  int dev = 0, major = 0, minor = 0, r = -EIO;
  struct gen_opts o;

  pthread_once (&rtc_once, rtc_load);
  if (!rtc.ok) {
    gr_gpu_set_error ("%s", rtc.why);
    return -ENOTSUP;
  }
  if (t->nrows > JIT_MAXROWS || t->ncols > JIT_MAXCOLS || t->bits == NULL) {
    gr_gpu_set_error ("no run-time compiled kernel for a %d x %d matrix "
                      "(at most %d x %d)", t->nrows, t->ncols, JIT_MAXROWS,
                      JIT_MAXCOLS);
    return -ENOTSUP;
  }
  if (cudaGetDevice (&dev) != cudaSuccess ||
      cudaDeviceGetAttribute (&major, cudaDevAttrComputeCapabilityMajor, dev)
      != cudaSuccess ||
      cudaDeviceGetAttribute (&minor, cudaDevAttrComputeCapabilityMinor, dev)
      != cudaSuccess)
    return -EIO;
  snprintf (arch, sizeof arch, "--gpu-architecture=sm_%d%d", major, minor);

  o.stage = gr_gpu_jit_stage == 1
    || (gr_gpu_jit_stage < 0 && t->nrows >= JIT_STAGE_MINROWS);
  o.shr = gr_gpu_jit_shr;
  o.lop3 = gr_gpu_jit_lop3;
  src = gen_source (t->code, t->bits, t->nrows, t->ncols, &o);
  if (src == NULL)
    return -ENOMEM;
  if (rtc_compile (src, arch, &cubin, &cubin_len) != 0)
    goto out;
  e = cudaLibraryLoadData (&lib, cubin, NULL, NULL, 0, NULL, NULL, 0);
  if (e != cudaSuccess) {
    r = gr_gpu_fail (e, "cudaLibraryLoadData (JIT kernel)");
    goto out;
  }
  e = cudaLibraryGetKernel (&kern, lib, "gr_jit");
  if (e != cudaSuccess) {
    r = gr_gpu_fail (e, "cudaLibraryGetKernel (JIT kernel)");
    cudaLibraryUnload (lib);
    goto out;
  }
  /* Staged inputs: the shared buffer is dynamic (beyond the 48 KiB a
   * kernel gets without asking), with the SM's largest carveout. */
  t->jit_smem = 0;
  if (o.stage) {
    t->jit_smem = (size_t) t->ncols * JIT_STAGE_BYTES;
    e = cudaFuncSetAttribute ((const void *) kern,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              (int) t->jit_smem);
    if (e == cudaSuccess)
      e = cudaFuncSetAttribute ((const void *) kern,
                                cudaFuncAttributePreferredSharedMemoryCarveout,
                                100);
    if (e != cudaSuccess) {
      r = gr_gpu_fail (e, "cudaFuncSetAttribute (JIT kernel's shared memory)");
      cudaLibraryUnload (lib);
      goto out;
    }
  }
  (void) cudaGetLastError ();
  t->jit_lib = lib;
  t->jit = kern;
  __atomic_add_fetch (&jit_built, 1, __ATOMIC_RELAXED);
  r = 0;
 out:
  free (cubin);
  free (src);
  return r;
}

/* jit_state: 0 untried, 2 being compiled (by a background thread),
 * 1 ready, -1 unavailable.  Changes happen under jit_lock; jit_cond is
 * signalled when a compile ends. */
static pthread_cond_t jit_cond = PTHREAD_COND_INITIALIZER;
static int jit_running;         /* background compiles in flight */
int gr_gpu_jit_async = 1;

int
gr_gpu_tab_jit (struct gr_gpu_tab *t)
{
  int r, st;

  st = __atomic_load_n (&t->jit_state, __ATOMIC_ACQUIRE);
  if (st == 1 || st == -1)
    return st > 0 ? 0 : -ENOTSUP;
  pthread_mutex_lock (&jit_lock);
  while (t->jit_state == 2)
    pthread_cond_wait (&jit_cond, &jit_lock);
  if (t->jit_state == 0) {
    r = jit_build (t);
    __atomic_store_n (&t->jit_state, r == 0 ? 1 : -1, __ATOMIC_RELEASE);
  }
  st = t->jit_state;
  pthread_mutex_unlock (&jit_lock);
  return st > 0 ? 0 : -ENOTSUP;
}

struct jit_job {
  struct gr_gpu_tab *t;
  int dev;
};

static void *
jit_thread (void *arg)
{
  struct jit_job *jj = (struct jit_job *) arg;
  int r = -EIO;

  /* Compiling happens outside the lock; only this thread touches the
   * table's JIT fields while jit_state == 2. */
  if (cudaSetDevice (jj->dev) == cudaSuccess)
    r = jit_build (jj->t);
  pthread_mutex_lock (&jit_lock);
  __atomic_store_n (&jj->t->jit_state, r == 0 ? 1 : -1, __ATOMIC_RELEASE);
  jit_running--;
  pthread_cond_broadcast (&jit_cond);
  pthread_mutex_unlock (&jit_lock);
  free (jj);
  return NULL;
}

/* Start compiling t's kernel in a background thread if not tried yet;
 * launches use the generic kernel until it is ready.  Synchronous when
 * gr_gpu_jit_async is 0. */
void
gr_gpu_tab_jit_start (struct gr_gpu_tab *t)
{
  struct jit_job *jj;
  pthread_attr_t attr;
  pthread_t th;
  int dev = 0;

  if (__atomic_load_n (&t->jit_state, __ATOMIC_ACQUIRE) != 0)
    return;
  if (!gr_gpu_jit_async) {
    (void) gr_gpu_tab_jit (t);
    return;
  }
  if (cudaGetDevice (&dev) != cudaSuccess)
    return;
  jj = (struct jit_job *) malloc (sizeof *jj);
  if (jj == NULL)
    return;
  jj->t = t;
  jj->dev = dev;
  pthread_mutex_lock (&jit_lock);
  if (t->jit_state != 0) {
    pthread_mutex_unlock (&jit_lock);
    free (jj);
    return;
  }
  t->jit_state = 2;
  jit_running++;
  pthread_attr_init (&attr);
  pthread_attr_setdetachstate (&attr, PTHREAD_CREATE_DETACHED);
  if (gr_thread_create (&th, &attr, jit_thread, jj) != 0) {
    t->jit_state = 0;
    jit_running--;
    free (jj);
  }
  pthread_attr_destroy (&attr);
  pthread_mutex_unlock (&jit_lock);
}

/* Wait for every background compile to end (gr_gpu_release). */
void
gr_gpu_jit_drain (void)
{
  pthread_mutex_lock (&jit_lock);
  while (jit_running > 0)
    pthread_cond_wait (&jit_cond, &jit_lock);
  pthread_mutex_unlock (&jit_lock);
}

void
gr_gpu_tab_jit_free (struct gr_gpu_tab *t)
{
  pthread_mutex_lock (&jit_lock);
  while (t->jit_state == 2)
    pthread_cond_wait (&jit_cond, &jit_lock);
  pthread_mutex_unlock (&jit_lock);
  if (t->jit_lib != NULL)
    cudaLibraryUnload ((cudaLibrary_t) t->jit_lib);
  t->jit_lib = NULL;
  t->jit = NULL;
  t->jit_state = 0;
}

cudaError_t
gr_gpu_launch_jit (const struct gr_gpu_tab *t, const void *din, void *dout,
                   size_t nstripes, size_t lp, cudaStream_t st)
{
  unsigned long long vlen = lp / 4, ns = nstripes;
  const size_t items = vlen / 8;
  void *args[] = { (void *) &din, (void *) &dout, &vlen, &ns };

  if (lp % (t->code == GR_CODE_RS ? 32 : GR_CRS_GROUP))
    return cudaErrorInvalidValue;
  if (items == 0 || nstripes == 0)
    return cudaSuccess;
  /* One item per thread: x over the items of a stripe, y over the
   * stripes. */
  const size_t gx = (items + JIT_THREADS - 1) / JIT_THREADS;
  const dim3 grid ((unsigned) (gx > 65535 ? 65535 : gx),
                   (unsigned) (nstripes > 65535 ? 65535 : nstripes));

  cudaLaunchKernel ((const void *) t->jit, grid, dim3 (JIT_THREADS), args,
                    t->jit_smem, st);
  return cudaGetLastError ();
}
