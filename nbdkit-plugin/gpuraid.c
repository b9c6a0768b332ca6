/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the nbdkit callbacks.
 *
 * Thin: options go to config.h, the coding set-up to coding.h and
 * calibrate.h, opening and closing the array to array.h, the control
 * socket to control.h, requests to the
 * data paths in io.h.  A request goes gpuraid_pwrite -> gr_io_pwrite
 * (io.c) -> gr_plan_next (plan.c: what to read, compute and write) ->
 * gr_exec_run (exec.c: locks, member I/O in members.c, coding in
 * coding.c). */
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "array.h"
#include "calibrate.h"
#include "coding.h"
#include "config.h"
#include "control.h"
#include "extents.h"
#include "gf/gf-backend.h"
#include "gpudev.h"
#include "io.h"
#include "storage/storage.h"

static struct gr_config cfg = GR_CONFIG_INIT;
static struct gr_coding *coding;
static struct gr_array *array;
static struct gr_exec *x;               /* array's, while it is open */
static struct gr_control *control;      /* control=, or NULL */

/* -D gpuraid.no_uring=1: member reads one by one with pread (for
 * comparison), even when built with liburing. */
NBDKIT_DLL_PUBLIC int gpuraid_debug_no_uring = 0;
/* -D gpuraid.write_turns=0: a batch's buffered writes in its order, not
 * each in its member file's turn (storage.h; for comparison). */
NBDKIT_DLL_PUBLIC int gpuraid_debug_write_turns = 1;

static void
gpuraid_unload (void)
{
  gr_config_free (&cfg);
}

static int
gpuraid_config (const char *key, const char *value)
{
  return gr_config_parse (&cfg, key, value);
}

/* Was nbdkit started read-only (-r, --readonly, --read-only)?  No API
 * says so before .open, so read nbdkit's own command line as its getopt
 * does, up to the plugin (the first argument that is not an option). */
static bool
nbdkit_read_only (void)
{
  static const char *const with_arg[] = {
    "debug", "export", "export-name", "exportname", "filter", "group",
    "ip-addr", "ipaddr", "log", "mask-handshake", "pid-file", "pidfile",
    "port", "run", "selinux-label", "threads", "tls", "tls-certificates",
    "tls-psk", "unix", "user",
  };
  char buf[65536];
  size_t len = 0, i, j;
  bool ro = false, skip_next = false;
  ssize_t r;
  int fd = open ("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);

  if (fd == -1)
    return false;
  while (len < sizeof buf - 1 &&
         (r = read (fd, buf + len, sizeof buf - 1 - len)) > 0)
    len += r;
  close (fd);
  buf[len] = '\0';
  for (i = strlen (buf) + 1; i < len; i += strlen (buf + i) + 1) {
    const char *a = buf + i;

    if (skip_next) {
      skip_next = false;
      continue;
    }
    if (a[0] != '-' || strcmp (a, "-") == 0)
      break;                    /* the plugin: options end */
    if (a[1] == '-') {
      size_t n = strcspn (a + 2, "=");

      if (strcmp (a, "--readonly") == 0 || strcmp (a, "--read-only") == 0)
        ro = true;
      for (j = 0; j < sizeof with_arg / sizeof with_arg[0]; j++)
        if (strlen (with_arg[j]) == n && strncmp (a + 2, with_arg[j], n) == 0)
          skip_next = a[2 + n] != '=';
      continue;
    }
    /* A cluster of short options; one that takes an argument ends it. */
    for (j = 1; a[j]; j++) {
      if (a[j] == 'r')
        ro = true;
      if (strchr ("DegipPtuU", a[j])) {
        skip_next = a[j + 1] == '\0';
        break;
      }
    }
  }
  return ro;
}

/* Check the options and choose the backend before touching any member. */
static int
gpuraid_config_complete (void)
{
  if (gr_config_check (&cfg) == -1)
    return -1;
  if (cfg.create && nbdkit_read_only ()) {
    nbdkit_error ("create=true with nbdkit -r (read-only): creating an array "
                  "writes every member; drop -r or create=true");
    return -1;
  }
  gr_disk_set_remote ((unsigned) cfg.remote_timeout * 1000,
                      (unsigned) cfg.remote_retries);
  gr_disk_set_uring (!gpuraid_debug_no_uring);
  gr_disk_set_turns (gpuraid_debug_write_turns != 0);
  gr_disk_set_direct (cfg.direct);
  coding = gr_coding_new (&cfg);
  return coding ? 0 : -1;
}

static int
gpuraid_get_ready (void)
{
  /* The socket first: a bad path refuses before a member is touched. */
  if (cfg.control && (control = gr_control_open (cfg.control)) == NULL)
    return -1;
  array = gr_array_open (&cfg, coding);
  if (array == NULL)
    return -1;
  x = gr_array_exec (array);
  return 0;
}

/* In the server process (after nbdkit's fork): the GPU coder, and
 * accel=auto's measurement (whose failures are logged and leave the
 * coding on the CPU; they do not stop the server). */
static int
gpuraid_after_fork (void)
{
  if (gr_coding_start_gpu (coding) == -1)
    return -1;
  (void) gr_calibrate (coding, gr_exec_geom (x)->chunk);
  /* After the measurement, which wants the machine to itself. */
  if (gr_array_start (array) == -1)
    return -1;
  return control ? gr_control_start (control, array, coding) : 0;
}

static void
gpuraid_cleanup (void)
{
  gr_control_close (control);
  control = NULL;
  gr_array_close (array);
  array = NULL;
  x = NULL;
  gr_coding_free (coding);
  coding = NULL;
}

static void
gpuraid_dump_plugin (void)
{
  const struct gr_backend *b;
  const char *sep = "";
  int i;

  gr_gpudev_register ();
  printf ("gpuraid_version=%s\n", GR_VERSION);
  printf ("gpuraid_backends=");
  for (i = 0; (b = gr_backend_at (i)) != NULL; i++)
    if (gr_backend_probe (b) == 0) {
      printf ("%s%s", sep, gr_backend_name (b));
      sep = ",";
    }
  printf ("\n");
  printf ("gpuraid_cuda=%s\n", gr_gpudev_built () ? "yes" : "no");
  printf ("gpuraid_nbd_members=%s\n", gr_disk_remote_built () ? "yes" : "no");
}

static void *
gpuraid_open (int readonly)
{
  return x;
}

static int64_t
gpuraid_get_size (void *handle)
{
  return (int64_t) gr_map_size (gr_exec_geom (handle));
}

/* Preferred: the stripe width rounded up to a power of two (at most
 * 32 MiB), so that aligned writes are full-stripe writes. */
static int
gpuraid_block_size (void *handle, uint32_t *minimum, uint32_t *preferred,
                    uint32_t *maximum)
{
  uint64_t width = gr_map_stripe_width (gr_exec_geom (handle));
  uint64_t pref = 4096;

  while (pref < width && pref < 32 * 1024 * 1024)
    pref *= 2;
  *minimum = 1;
  *preferred = (uint32_t) pref;
  *maximum = 32 * 1024 * 1024;
  return 0;
}

static int
gpuraid_can_do (void *handle)
{
  return 1;
}

/* Writable unless a failed array was salvaged (read-only). */
static int
gpuraid_can_write (void *handle)
{
  return !cfg.salvage;
}

static int
gpuraid_can_fua (void *handle)
{
  return NBDKIT_FUA_NATIVE;
}

static int
gpuraid_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
               uint32_t flags)
{
  return gr_io_pread (handle, buf, count, offset);
}

static int
gpuraid_pwrite (void *handle, const void *buf, uint32_t count,
                uint64_t offset, uint32_t flags)
{
  return gr_io_pwrite (handle, buf, count, offset, flags & NBDKIT_FLAG_FUA);
}

/* flush syncs every member, so a flush on one connection covers writes
 * completed on all others (hence can_multi_conn). */
static int
gpuraid_flush (void *handle, uint32_t flags)
{
  return gr_io_flush (handle);
}

static int
gpuraid_trim (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  return gr_io_trim (handle, count, offset, flags & NBDKIT_FLAG_FUA);
}

static int
gpuraid_zero (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  return gr_io_zero (handle, count, offset, flags & NBDKIT_FLAG_MAY_TRIM,
                     flags & NBDKIT_FLAG_FAST_ZERO, flags & NBDKIT_FLAG_FUA);
}

static int
gpuraid_extents (void *handle, uint32_t count, uint64_t offset,
                 uint32_t flags, struct nbdkit_extents *extents)
{
  return gr_extents (handle, count, offset, flags & NBDKIT_FLAG_REQ_ONE,
                     extents);
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name               = "gpuraid",
  .version            = GR_VERSION,
  .longname           = "gpuraid: RAID over k+m members with RS/CRS parity",
  .unload             = gpuraid_unload,
  .config             = gpuraid_config,
  .config_complete    = gpuraid_config_complete,
  .config_help        = gr_config_help,
  .magic_config_key   = "member",
  .dump_plugin        = gpuraid_dump_plugin,
  .get_ready          = gpuraid_get_ready,
  .after_fork         = gpuraid_after_fork,
  .cleanup            = gpuraid_cleanup,
  .open               = gpuraid_open,
  .get_size           = gpuraid_get_size,
  .block_size         = gpuraid_block_size,
  .can_write          = gpuraid_can_write,
  .can_flush          = gpuraid_can_do,
  .can_fua            = gpuraid_can_fua,
  .can_trim           = gpuraid_can_do,
  .can_zero           = gpuraid_can_do,
  .can_fast_zero      = gpuraid_can_do,
  .can_multi_conn     = gpuraid_can_do,
  .pread              = gpuraid_pread,
  .pwrite             = gpuraid_pwrite,
  .flush              = gpuraid_flush,
  .trim               = gpuraid_trim,
  .zero               = gpuraid_zero,
  .can_extents        = gpuraid_can_do,
  .extents            = gpuraid_extents,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
