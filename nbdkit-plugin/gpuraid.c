/* gpuraid - nbdkit plugin: configuration, backend choice and callbacks.
 * Assembly and superblock I/O are in array.c, the data paths in io.c. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "gpuraid-internal.h"
#include "gf/gf-backend.h"
#ifdef GR_HAVE_CUDA
#include "gpu/gpu.h"
#endif

/* -D gpuraid.verbose=1: per-request debug messages. */
NBDKIT_DLL_PUBLIC int gpuraid_debug_verbose = 0;

/* -D gpuraid.fake_gpu=1 (for tests): when no GPU is used, put a "GPU"
 * coder in front of the CPU one whose every operation fails, so that the
 * runtime GPU -> CPU fallback can be tested on machines without a GPU.
 * -D gpuraid.fake_gpu=2: a working stand-in instead (a second coder on
 * the CPU backend), so that every GPU-only path of the plugin, such as
 * the group commit of full-stripe encodes, runs on machines without one.
 * -D gpuraid.fake_gpu=3: a stand-in whose rebuilt blocks are wrong (one
 * byte flipped), which accel=auto's start-up check must catch. */
NBDKIT_DLL_PUBLIC int gpuraid_debug_fake_gpu = 0;

/* -D gpuraid.fake_auto=1 (for tests, with fake_gpu): route operations
 * between the fake GPU and the CPU as accel=auto does with a real GPU
 * (measured at start-up) instead of sending them all to the fake GPU;
 * the fake GPU's "page-locked" scratch is ordinary memory.
 * -D gpuraid.fake_auto=2: the same, but after the measurement every
 * operation goes to the fake GPU (so that its paths run whatever was
 * measured). */
NBDKIT_DLL_PUBLIC int gpuraid_debug_fake_auto = 0;

/* -D gpuraid.no_uring=1: read chunks one by one with pread (for
 * comparison), even when built with liburing. */
NBDKIT_DLL_PUBLIC int gpuraid_debug_no_uring = 0;

struct gr_config gr_cfg = { .m = -1, .gpu_device = 0 };
struct gr_array gr_a;

static char *backend_arg;
static const struct gr_backend *cpu_best;       /* before cuda registers */
static bool use_gpu;                            /* decided at config */

static bool
have_cuda (void)
{
#ifdef GR_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

/* Register the cuda backend once (CUDA builds only). */
static void
register_gpu_backend (void)
{
  static bool done;

  if (done)
    return;
  done = true;
  cpu_best = gr_backend_best ();
#ifdef GR_HAVE_CUDA
  gr_backend_register (gr_gpu_backend ());
#endif
}

static void
gpuraid_load (void)
{
  pthread_mutex_init (&gr_a.sb_lock, NULL);
}

static void
gpuraid_unload (void)
{
  int i;

  for (i = 0; i < gr_cfg.npaths; i++)
    free (gr_cfg.paths[i]);
  free (backend_arg);
}

static int
parse_nonneg_int (const char *key, const char *value, int *out)
{
  if (nbdkit_parse_int (key, value, out) == -1)
    return -1;
  if (*out < 0) {
    nbdkit_error ("%s=%s: must not be negative", key, value);
    return -1;
  }
  return 0;
}

/* Check the syntax first, so that the error names the key: digits and
 * an optional unit letter (as nbdkit_parse_size takes). */
static bool
size_syntax_ok (const char *v)
{
  size_t i = 0;

  while (v[i] >= '0' && v[i] <= '9')
    i++;
  if (i == 0)
    return false;
  if (v[i] == '\0')
    return true;
  if (strchr ("bBkKmMgGtTpPeE", v[i]) == NULL)
    return false;
  return v[i + 1] == '\0';
}

static int
gpuraid_config (const char *key, const char *value)
{
  static bool seen_m, seen_chunk, seen_code, seen_create, seen_force,
    seen_backend, seen_accel, seen_dev;
  int r;

#define ONCE(flag)                                                      \
  do {                                                                  \
    if (flag) {                                                         \
      nbdkit_error ("%s= given more than once", key);                   \
      return -1;                                                        \
    }                                                                   \
    flag = true;                                                        \
  } while (0)

  if (strcmp (key, "member") == 0) {
    if (gr_cfg.npaths >= GR_MAX_MEMBERS) {
      nbdkit_error ("member=%s: too many members (at most %d)",
                    value, GR_MAX_MEMBERS);
      return -1;
    }
    if (value[0] == '\0') {
      nbdkit_error ("member=: empty path");
      return -1;
    }
    gr_cfg.paths[gr_cfg.npaths] = nbdkit_absolute_path (value);
    if (gr_cfg.paths[gr_cfg.npaths] == NULL)
      return -1;
    gr_cfg.npaths++;
  }
  else if (strcmp (key, "m") == 0) {
    ONCE (seen_m);
    if (parse_nonneg_int (key, value, &gr_cfg.m) == -1)
      return -1;
    if (gr_cfg.m < 1) {
      nbdkit_error ("m=%s: the parity count must be at least 1", value);
      return -1;
    }
  }
  else if (strcmp (key, "chunk") == 0) {
    int64_t c;

    ONCE (seen_chunk);
    if (!size_syntax_ok (value)) {
      nbdkit_error ("chunk=%s: not a size (a number with an optional "
                    "k, M or G suffix)", value);
      return -1;
    }
    c = nbdkit_parse_size (value);
    if (c == -1)
      return -1;
    if (c < 4096 || c > GR_MAX_CHUNK || (c & (c - 1)) != 0) {
      nbdkit_error ("chunk=%s: must be a power of two between 4096 and %"
                    PRIu32, value, GR_MAX_CHUNK);
      return -1;
    }
    gr_cfg.chunk = (uint32_t) c;
  }
  else if (strcmp (key, "code") == 0) {
    ONCE (seen_code);
    if (strcmp (value, "rs") == 0)
      gr_cfg.code = GR_CODE_RS;
    else if (strcmp (value, "crs") == 0)
      gr_cfg.code = GR_CODE_CRS;
    else {
      nbdkit_error ("code=%s: must be rs or crs", value);
      return -1;
    }
  }
  else if (strcmp (key, "create") == 0) {
    ONCE (seen_create);
    r = nbdkit_parse_bool (value);
    if (r == -1)
      return -1;
    gr_cfg.create = r;
  }
  else if (strcmp (key, "force") == 0) {
    ONCE (seen_force);
    r = nbdkit_parse_bool (value);
    if (r == -1)
      return -1;
    gr_cfg.force = r;
  }
  else if (strcmp (key, "backend") == 0) {
    ONCE (seen_backend);
    if (strcmp (value, "ref") != 0 && strcmp (value, "isal") != 0 &&
        strcmp (value, "gfc") != 0 && strcmp (value, "cuda") != 0) {
      nbdkit_error ("backend=%s: must be ref, isal, gfc or cuda", value);
      return -1;
    }
    backend_arg = strdup (value);
    if (backend_arg == NULL) {
      nbdkit_error ("strdup: %m");
      return -1;
    }
    gr_cfg.backend = backend_arg;
  }
  else if (strcmp (key, "accel") == 0) {
    ONCE (seen_accel);
    if (strcmp (value, "auto") == 0)
      gr_cfg.accel = GR_ACCEL_AUTO;
    else if (strcmp (value, "cpu") == 0)
      gr_cfg.accel = GR_ACCEL_CPU;
    else if (strcmp (value, "gpu") == 0)
      gr_cfg.accel = GR_ACCEL_GPU;
    else {
      nbdkit_error ("accel=%s: must be auto, cpu or gpu", value);
      return -1;
    }
  }
  else if (strcmp (key, "gpu-device") == 0) {
    ONCE (seen_dev);
    if (parse_nonneg_int (key, value, &gr_cfg.gpu_device) == -1)
      return -1;
  }
  else {
    nbdkit_error ("unknown parameter '%s'", key);
    return -1;
  }
  return 0;
#undef ONCE
}

#ifdef GR_HAVE_CUDA
/* Probe the GPU in a child process.  CUDA does not survive fork(), and
 * nbdkit forks into the background after get_ready, so the server
 * process must not initialise CUDA before after_fork.  Returns 0 with
 * the device name, or -ENODEV with the reason, in name. */
static int
probe_gpu_in_child (int device, char *name, size_t namelen)
{
  int fds[2], status, r;
  pid_t pid;
  ssize_t got;
  size_t have = 0;

  if (pipe (fds) == -1) {
    snprintf (name, namelen, "pipe: %s", strerror (errno));
    return -ENODEV;
  }
  pid = fork ();
  if (pid == -1) {
    snprintf (name, namelen, "fork: %s", strerror (errno));
    close (fds[0]);
    close (fds[1]);
    return -ENODEV;
  }
  if (pid == 0) {
    char buf[257];

    close (fds[0]);
    r = gr_gpu_probe_device (device, buf + 1, sizeof buf - 1);
    if (r == 0 && gr_gpu_select (device) != 0) {
      r = -ENODEV;
      snprintf (buf + 1, sizeof buf - 1, "cannot select device %d: %s",
                device, gr_gpu_last_error ());
    }
    if (r == 0 && gr_backend_probe (gr_gpu_backend ()) != 0) {
      r = -ENODEV;
      snprintf (buf + 1, sizeof buf - 1, "the cuda backend is not usable: "
                "%s", gr_gpu_last_error ());
    }
    buf[0] = r == 0 ? 'y' : 'n';
    if (write (fds[1], buf, strlen (buf + 1) + 1) == -1)
      _exit (1);
    _exit (0);
  }
  close (fds[1]);
  name[0] = '\0';
  r = -ENODEV;
  {
    char buf[257];
    while (have < sizeof buf - 1 &&
           (got = read (fds[0], buf + have, sizeof buf - 1 - have)) > 0)
      have += got;
    buf[have] = '\0';
    if (have > 0) {
      r = buf[0] == 'y' ? 0 : -ENODEV;
      snprintf (name, namelen, "%s", buf + 1);
    }
    else
      snprintf (name, namelen, "the GPU probe process failed");
  }
  close (fds[0]);
  while (waitpid (pid, &status, 0) == -1 && errno == EINTR)
    ;
  return r;
}
#endif

/* Decide CPU or GPU and check the backend, before touching any member. */
static int
choose_backend (void)
{
  const char *be = gr_cfg.backend;
  bool want_cuda = be && strcmp (be, "cuda") == 0;

  if (!have_cuda ()) {
    if (gr_cfg.accel == GR_ACCEL_GPU) {
      nbdkit_error ("accel=gpu: this gpuraid plugin was built without "
                    "CUDA support");
      return -1;
    }
    if (want_cuda) {
      nbdkit_error ("backend=cuda: this gpuraid plugin was built without "
                    "CUDA support");
      return -1;
    }
  }
  if (want_cuda && gr_cfg.accel == GR_ACCEL_CPU) {
    nbdkit_error ("backend=cuda conflicts with accel=cpu");
    return -1;
  }
  if (be && !want_cuda && gr_cfg.accel == GR_ACCEL_GPU) {
    nbdkit_error ("backend=%s is a CPU backend; it conflicts with accel=gpu",
                  be);
    return -1;
  }

  /* The CPU backend: the one asked for, or the best usable. */
  if (be && !want_cuda) {
    const struct gr_backend *b = gr_backend_find (be);

    if (b == NULL) {
      nbdkit_error ("backend=%s: this backend is not built in", be);
      return -1;
    }
    if (gr_backend_probe (b) != 0) {
      nbdkit_error ("backend=%s: this backend cannot run on this machine",
                    be);
      return -1;
    }
    cpu_best = b;
  }
  if (cpu_best == NULL) {
    nbdkit_error ("no usable CPU coding backend");
    return -1;
  }

  use_gpu = false;
#ifdef GR_HAVE_CUDA
  if (want_cuda || (be == NULL && gr_cfg.accel != GR_ACCEL_CPU)) {
    char name[256] = "";
    int r = probe_gpu_in_child (gr_cfg.gpu_device, name, sizeof name);

    if (r != 0) {
      if (want_cuda || gr_cfg.accel == GR_ACCEL_GPU) {
        nbdkit_error ("%s: GPU %d is not usable: %s",
                      want_cuda ? "backend=cuda" : "accel=gpu",
                      gr_cfg.gpu_device, name);
        return -1;
      }
      nbdkit_debug ("gpuraid: accel=auto: no usable GPU (%s), "
                    "using CPU backend %s", name, gr_backend_name (cpu_best));
    }
    else {
      use_gpu = true;
      snprintf (gr_a.gpu_name, sizeof gr_a.gpu_name, "%s", name);
    }
  }
#endif
  return 0;
}

static int
gpuraid_config_complete (void)
{
  int i, j;

  register_gpu_backend ();

  if (gr_cfg.npaths == 0) {
    nbdkit_error ("no members: give member=PATH once per member");
    return -1;
  }
  for (i = 0; i < gr_cfg.npaths; i++)
    for (j = 0; j < i; j++)
      if (strcmp (gr_cfg.paths[i], gr_cfg.paths[j]) == 0) {
        nbdkit_error ("member=%s is given twice", gr_cfg.paths[i]);
        return -1;
      }
  if (gr_cfg.create) {
    if (gr_cfg.m < 0) {
      nbdkit_error ("create=true needs m=N (the number of parity members)");
      return -1;
    }
    if (gr_cfg.m >= gr_cfg.npaths) {
      nbdkit_error ("m=%d: must be less than the number of members (%d)",
                    gr_cfg.m, gr_cfg.npaths);
      return -1;
    }
  }
  else if (gr_cfg.force)
    nbdkit_debug ("gpuraid: force=true without create=true has no effect");
  return choose_backend ();
}

/* Called by array.c once k, m and code are known. */
int
gr_setup_coders (int k, int m, enum gr_code code)
{
  int r;

  r = gr_coder_new (&gr_a.cpu_coder, k, m, code, cpu_best);
  if (r < 0) {
    nbdkit_error ("cannot create a %s coder for k=%d m=%d: %s",
                  gr_backend_name (cpu_best), k, m, strerror (-r));
    return -1;
  }
  gr_a.coder = gr_a.cpu_coder;
  gr_a.lm = gr_coder_len_multiple (gr_a.cpu_coder);
  gr_a.code = code;
  return 0;
}

static void *
fake_host_alloc (size_t size)
{
  void *p;

  return posix_memalign (&p, 4096, size) == 0 ? p : NULL;
}

/* The failing backend behind -D gpuraid.fake_gpu=1. */
static int
fake_gpu_probe (void)
{
  return 0;
}

static int
fake_gpu_encode (struct gr_coder *c, uint8_t *const *blocks,
                 size_t nstripes, size_t len)
{
  return -EIO;
}

static int
fake_gpu_reconstruct (struct gr_coder *c, const struct gr_decode *d,
                      uint8_t *const *blocks, size_t nstripes, size_t len)
{
  return -EIO;
}

static int
fake_gpu_update (struct gr_coder *c, int data_index,
                 const uint8_t *const *delta, uint8_t *const *parity,
                 size_t nstripes, size_t len)
{
  /* Scribble on the output first, as a half-done GPU operation might. */
  if (nstripes > 0 && len > 0)
    parity[0][0] ^= 0x5a;
  return -EIO;
}

static const struct gr_backend fake_gpu_backend = {
  .name = "fake-gpu",
  .prefer = -1000,
  .probe = fake_gpu_probe,
  .encode = fake_gpu_encode,
  .reconstruct = fake_gpu_reconstruct,
  .update = fake_gpu_update,
};

/* -D gpuraid.fake_gpu=3: right parity, wrong rebuilt bytes. */
static int
wrong_gpu_encode (struct gr_coder *c, uint8_t *const *blocks,
                  size_t nstripes, size_t len)
{
  return gr_encode (gr_a.cpu_coder, blocks, nstripes, len);
}

static int
wrong_gpu_reconstruct (struct gr_coder *c, const struct gr_decode *d,
                       uint8_t *const *blocks, size_t nstripes, size_t len)
{
  int r = gr_reconstruct (gr_a.cpu_coder, d->erased, d->nerased, blocks,
                          nstripes, len);

  if (r == 0 && d->nerased > 0 && len > 0)
    blocks[d->erased[0]][len / 2] ^= 0x01;
  return r;
}

static int
wrong_gpu_update (struct gr_coder *c, int data_index,
                  const uint8_t *const *delta, uint8_t *const *parity,
                  size_t nstripes, size_t len)
{
  return gr_update (gr_a.cpu_coder, data_index, delta, parity, nstripes,
                    len);
}

static const struct gr_backend wrong_gpu_backend = {
  .name = "wrong-gpu",
  .prefer = -1000,
  .probe = fake_gpu_probe,
  .encode = wrong_gpu_encode,
  .reconstruct = wrong_gpu_reconstruct,
  .update = wrong_gpu_update,
};

/* In the server process (after nbdkit's fork): the GPU coder, if the
 * GPU was chosen at config time. */
static int
setup_gpu_coder (void)
{
#ifdef GR_HAVE_CUDA
  bool forced = gr_cfg.accel == GR_ACCEL_GPU ||
    (gr_cfg.backend && strcmp (gr_cfg.backend, "cuda") == 0);
  char name[256] = "", why[512] = "";
  int r;

  if (use_gpu) {
    r = gr_gpu_probe_device (gr_cfg.gpu_device, name, sizeof name);
    if (r < 0)
      snprintf (why, sizeof why, "%s", name);
    if (r == 0 && (r = gr_gpu_select (gr_cfg.gpu_device)) < 0)
      snprintf (why, sizeof why, "select: %s", gr_gpu_last_error ());
    if (r == 0 &&
        (r = gr_coder_new (&gr_a.coder, gr_a.geom.k, gr_a.geom.m, gr_a.code,
                           gr_gpu_backend ())) < 0)
      snprintf (why, sizeof why, "coder: %s: %s", strerror (-r),
                gr_gpu_last_error ());
    if (r < 0) {
      gr_a.coder = gr_a.cpu_coder;
      use_gpu = false;
      if (forced) {
        nbdkit_error ("cannot use GPU %d: %s", gr_cfg.gpu_device, why);
        return -1;
      }
      nbdkit_debug ("gpuraid: accel=auto: no usable GPU (%s), "
                    "using CPU backend %s", why, gr_backend_name (cpu_best));
    }
    else {
      gr_a.gpu_all = forced;
      gr_a.host_alloc = gr_gpu_host_alloc;
      gr_a.host_free = gr_gpu_host_free;
      if (gr_coder_len_multiple (gr_a.coder) > gr_a.lm)
        gr_a.lm = gr_coder_len_multiple (gr_a.coder);
    }
  }
#endif
  if (!use_gpu && gpuraid_debug_fake_gpu) {
    bool works = gpuraid_debug_fake_gpu == 2;
    int fr = gr_coder_new (&gr_a.coder, gr_a.geom.k, gr_a.geom.m,
                           gr_a.code, works ? cpu_best
                           : gpuraid_debug_fake_gpu == 3 ? &wrong_gpu_backend
                           : &fake_gpu_backend);
    if (fr < 0) {
      nbdkit_error ("fake_gpu: %s", strerror (-fr));
      return -1;
    }
    gr_a.gpu_all = !gpuraid_debug_fake_auto;
    if (gpuraid_debug_fake_auto) {
      gr_a.host_alloc = fake_host_alloc;
      gr_a.host_free = free;
    }
    nbdkit_debug ("gpuraid: testing: fake %s GPU coder in front of "
                  "CPU backend %s%s", works ? "working"
                  : gpuraid_debug_fake_gpu == 3 ? "wrong" : "failing",
                  gr_backend_name (cpu_best),
                  gpuraid_debug_fake_auto ? ", routed as accel=auto" : "");
    return 0;
  }
  if (use_gpu)
    nbdkit_debug ("gpuraid: using GPU %d (%s), backend cuda%s; "
                  "CPU backend %s", gr_cfg.gpu_device, gr_a.gpu_name,
                  gr_a.gpu_all ? " for every operation"
                  : " for operations large enough to pay (measured next)",
                  gr_backend_name (cpu_best));
  else
    nbdkit_debug ("gpuraid: using CPU backend %s",
                  gr_backend_name (cpu_best));
  return 0;
}

static int
gpuraid_get_ready (void)
{
  if (gr_array_open () == -1)
    return -1;
  return gr_io_init ();
}

static int
gpuraid_after_fork (void)
{
  if (setup_gpu_coder () == -1)
    return -1;
  /* accel=auto: where the GPU starts to pay (failures are logged and
   * leave the coding on the CPU; they do not stop the server). */
  (void) gr_accel_calibrate ();
  return 0;
}

static void
gpuraid_cleanup (void)
{
  gr_accel_stats ();
  gr_io_fini ();
  gr_array_close ();
#ifdef GR_HAVE_CUDA
  if (use_gpu)
    gr_gpu_release ();
#endif
}

static void
gpuraid_dump_plugin (void)
{
  const struct gr_backend *b;
  const char *sep = "";
  int i;

  register_gpu_backend ();
  printf ("gpuraid_version=%s\n", GR_VERSION);
  printf ("gpuraid_backends=");
  for (i = 0; (b = gr_backend_at (i)) != NULL; i++) {
    if (gr_backend_probe (b) == 0) {
      printf ("%s%s", sep, gr_backend_name (b));
      sep = ",";
    }
  }
  printf ("\n");
  printf ("gpuraid_cuda=%s\n", have_cuda () ? "yes" : "no");
}

#define gpuraid_config_help \
  "member=PATH            (required, repeat) A member file or device.\n" \
  "m=N                    Number of parity members (required to create).\n" \
  "chunk=SIZE             Chunk size, power of two >= 4096 (default 64K).\n" \
  "code=rs|crs            Reed-Solomon or Cauchy Reed-Solomon (default rs).\n" \
  "create=true|false      Create a new array on the members.\n" \
  "force=true|false       Let create overwrite an existing array.\n" \
  "backend=ref|isal|gfc|cuda  Coding backend (default: best available).\n" \
  "accel=auto|cpu|gpu     Use the GPU (default auto).\n" \
  "gpu-device=N           CUDA device number (default 0)."

static void *
gpuraid_open (int readonly)
{
  return &gr_a;
}

static int64_t
gpuraid_get_size (void *handle)
{
  return (int64_t) gr_map_size (&gr_a.geom);
}

static int
gpuraid_block_size (void *handle, uint32_t *minimum, uint32_t *preferred,
                    uint32_t *maximum)
{
  uint64_t width = gr_map_stripe_width (&gr_a.geom);
  uint64_t pref = 4096;

  while (pref < width && pref < 32 * 1024 * 1024)
    pref *= 2;
  *minimum = 1;
  *preferred = (uint32_t) pref;
  *maximum = 32 * 1024 * 1024;
  return 0;
}

static int
gpuraid_can_write (void *handle)
{
  return 1;
}

static int
gpuraid_can_flush (void *handle)
{
  return 1;
}

static int
gpuraid_can_fua (void *handle)
{
  return NBDKIT_FUA_NATIVE;
}

static int
gpuraid_can_trim (void *handle)
{
  return 1;
}

static int
gpuraid_can_zero (void *handle)
{
  return 1;
}

static int
gpuraid_can_fast_zero (void *handle)
{
  return 1;
}

/* flush syncs every member, so a flush on one connection covers writes
 * completed on all others. */
static int
gpuraid_can_multi_conn (void *handle)
{
  return 1;
}

static int
gpuraid_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
               uint32_t flags)
{
  return gr_io_pread (buf, count, offset);
}

static int
gpuraid_pwrite (void *handle, const void *buf, uint32_t count,
                uint64_t offset, uint32_t flags)
{
  return gr_io_pwrite (buf, count, offset, flags & NBDKIT_FLAG_FUA);
}

static int
gpuraid_flush (void *handle, uint32_t flags)
{
  return gr_io_flush ();
}

static int
gpuraid_trim (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  return gr_io_trim (count, offset, flags & NBDKIT_FLAG_FUA);
}

static int
gpuraid_zero (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  return gr_io_zero (count, offset, flags & NBDKIT_FLAG_MAY_TRIM,
                     flags & NBDKIT_FLAG_FAST_ZERO, flags & NBDKIT_FLAG_FUA);
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name               = "gpuraid",
  .version            = GR_VERSION,
  .longname           = "gpuraid: RAID over k+m members with RS/CRS parity",
  .load               = gpuraid_load,
  .unload             = gpuraid_unload,
  .config             = gpuraid_config,
  .config_complete    = gpuraid_config_complete,
  .config_help        = gpuraid_config_help,
  .magic_config_key   = "member",
  .dump_plugin        = gpuraid_dump_plugin,
  .get_ready          = gpuraid_get_ready,
  .after_fork         = gpuraid_after_fork,
  .cleanup            = gpuraid_cleanup,
  .open               = gpuraid_open,
  .get_size           = gpuraid_get_size,
  .block_size         = gpuraid_block_size,
  .can_write          = gpuraid_can_write,
  .can_flush          = gpuraid_can_flush,
  .can_fua            = gpuraid_can_fua,
  .can_trim           = gpuraid_can_trim,
  .can_zero           = gpuraid_can_zero,
  .can_fast_zero      = gpuraid_can_fast_zero,
  .can_multi_conn     = gpuraid_can_multi_conn,
  .pread              = gpuraid_pread,
  .pwrite             = gpuraid_pwrite,
  .flush              = gpuraid_flush,
  .trim               = gpuraid_trim,
  .zero               = gpuraid_zero,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
