/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the GPU as the plugin sees it.  See gpudev.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpudev.h"

#ifdef GR_HAVE_CUDA
#include "common/now.h"
#include "gf/gf-backend.h"
#include "gpu/gpu.h"
#include "log.h"

bool
gr_gpudev_built (void)
{
  return true;
}

void
gr_gpudev_register (void)
{
  static bool done;

  if (!done) {
    done = true;
    gr_backend_register (gr_gpu_backend ());
  }
}

/* The child: probe, select, check the backend; "y" or "n" and a text. */
static void
probe_child (int device, int fd)
{
  char buf[257];
  int r;

  r = gr_gpu_probe_device (device, buf + 1, sizeof buf - 1);
  if (r == 0 && gr_gpu_select (device) != 0) {
    r = -ENODEV;
    snprintf (buf + 1, sizeof buf - 1, "cannot select device %d: %s",
              device, gr_gpu_last_error ());
  }
  if (r == 0 && gr_backend_probe (gr_gpu_backend ()) != 0) {
    r = -ENODEV;
    snprintf (buf + 1, sizeof buf - 1, "the cuda backend is not usable: %s",
              gr_gpu_last_error ());
  }
  buf[0] = r == 0 ? 'y' : 'n';
  if (write (fd, buf, strlen (buf + 1) + 1) == -1)
    _exit (1);
  _exit (0);
}

/* A CUDA error that means there is no usable driver: say so, and what
 * to do. */
static void
explain (char *name, size_t namelen)
{
  char what[256];

  if (strstr (name, "driver") == NULL &&
      strstr (name, "no CUDA-capable device") == NULL)
    return;
  snprintf (what, sizeof what, "%s", name);
  snprintf (name, namelen, "no usable NVIDIA GPU driver was found (CUDA "
            "says: %s); install the NVIDIA driver for this GPU (one at least "
            "as new as CUDA 13 needs), or use accel=cpu", what);
}

int
gr_gpudev_probe_in_child (int device, char *name, size_t namelen)
{
  char buf[257];
  int fds[2], status, r = -ENODEV;
  size_t have = 0;
  ssize_t got;
  pid_t pid;

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
    close (fds[0]);
    probe_child (device, fds[1]);
  }
  close (fds[1]);
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
  if (r != 0)
    explain (name, namelen);
  close (fds[0]);
  while (waitpid (pid, &status, 0) == -1 && errno == EINTR)
    ;
  return r;
}

int
gr_gpudev_coder (struct gr_coder **out, int device, int k, int m,
                 enum gr_code code, char *why, size_t whylen)
{
  char name[256] = "";
  double t0;
  int r, compiled;

  r = gr_gpu_probe_device (device, name, sizeof name);
  if (r < 0) {
    snprintf (why, whylen, "%s", name);
    return r;
  }
  r = gr_gpu_select (device);
  if (r < 0) {
    snprintf (why, whylen, "select: %s", gr_gpu_last_error ());
    return r;
  }
  r = gr_coder_new (out, k, m, code, gr_gpu_backend ());
  if (r < 0) {
    snprintf (why, whylen, "coder: %s: %s", strerror (-r),
              gr_gpu_last_error ());
    return r;
  }
  /* Now, before serving, not in the first batches (docs/performance.md,
   * "A fresh server's first run", session 63). */
  t0 = gr_now ();
  r = gr_gpu_coder_prepare (*out, &compiled);
  if (r < 0) {
    snprintf (why, whylen, "setting up the engine: %s: %s", strerror (-r),
              gr_gpu_last_error ());
    gr_coder_free (*out);
    *out = NULL;
    return r;
  }
  gr_debug ("GPU engine set up in %.0f ms, encode kernel %s%s",
            (gr_now () - t0) * 1e3,
            compiled ? "compiled for the array's matrix" : "generic: ",
            compiled ? "" : gr_gpu_last_error ());
  return 0;
}

void *
gr_gpudev_host_alloc (size_t size)
{
  return gr_gpu_host_alloc (size);
}

void
gr_gpudev_host_free (void *p)
{
  gr_gpu_host_free (p);
}

int
gr_gpudev_host_register (void *p, size_t size)
{
  return gr_gpu_host_register (p, size);
}

int
gr_gpudev_host_unregister (void *p)
{
  return gr_gpu_host_unregister (p);
}

void
gr_gpudev_host_in_use (void *p, bool on)
{
  gr_gpu_host_in_use (p, on);
}

const char *
gr_gpudev_last_error (void)
{
  return gr_gpu_last_error ();
}

void
gr_gpudev_many_account (char *buf, size_t len)
{
  struct gr_gpu_many_stats st;

  gr_gpu_many_account (&st);
  if (st.calls == 0) {
    snprintf (buf, len, "%s", "");
    return;
  }
  snprintf (buf, len, "%llu submissions of several operations: %llu jobs "
            "direct (%llu of them coded where their blocks are, %llu by the "
            "copy kernel; %llu chunks or launches, %llu copies), %llu "
            "staged; mean per "
            "submission %.0f us waiting for a slot, %.0f us enqueueing "
            "(%.0f us of it in the launches of jobs coded where their "
            "blocks are), %.0f us waiting for the GPU (%.0f us of it for the checksums), "
            "%.0f us in staged jobs, %.0f us building the jobs; %.0f us in "
            "all", st.calls,
            st.direct_jobs, st.gathered_jobs, st.mapped_jobs, st.chunks,
            st.copies,
            st.staged_jobs,
            st.slot_ns / 1e3 / st.calls, st.enqueue_ns / 1e3 / st.calls,
            st.launch_ns / 1e3 / st.calls,
            (st.wait_ns + st.cksums_ns) / 1e3 / st.calls,
            st.cksums_ns / 1e3 / st.calls, st.staged_ns / 1e3 / st.calls,
            st.prep_ns / 1e3 / st.calls, st.total_ns / 1e3 / st.calls);
}

int
gr_gpudev_host_copy (const struct gr_copy_row *rows, size_t n)
{
  struct gr_gpu_host_row v[32];
  int r = 0;

  for (size_t at = 0; at < n && r == 0; ) {
    size_t i;

    for (i = 0; i < 32 && at + i < n; i++)
      v[i] = (struct gr_gpu_host_row) { .dst = rows[at + i].dst,
                                        .src = rows[at + i].src,
                                        .len = rows[at + i].len };
    r = gr_gpu_host_copy (v, i);
    at += i;
  }
  return r;
}

void
gr_gpudev_host_copy_account (char *buf, size_t len)
{
  struct gr_gpu_host_copy_stats st;

  gr_gpu_host_copy_account (&st);
  if (st.calls == 0)
    snprintf (buf, len, "%s", "");
  else
    snprintf (buf, len, "%llu calls, %llu rows, %.1f MiB; mean %.0f KiB a "
              "call", st.calls, st.rows, st.bytes / 1048576.0,
              st.bytes / 1024.0 / st.calls);
}

void
gr_gpudev_release (void)
{
  gr_gpu_release ();
}

#else /* !GR_HAVE_CUDA */

bool
gr_gpudev_built (void)
{
  return false;
}

void
gr_gpudev_register (void)
{
}

int
gr_gpudev_probe_in_child (int device, char *name, size_t namelen)
{
  snprintf (name, namelen, "this gpuraid plugin was built without CUDA "
            "support");
  return -ENODEV;
}

int
gr_gpudev_coder (struct gr_coder **out, int device, int k, int m,
                 enum gr_code code, char *why, size_t whylen)
{
  snprintf (why, whylen, "this gpuraid plugin was built without CUDA "
            "support");
  return -ENODEV;
}

void *
gr_gpudev_host_alloc (size_t size)
{
  return NULL;
}

void
gr_gpudev_host_free (void *p)
{
}

int
gr_gpudev_host_register (void *p, size_t size)
{
  return -ENOTSUP;
}

int
gr_gpudev_host_unregister (void *p)
{
  return -ENOTSUP;
}

void
gr_gpudev_host_in_use (void *p, bool on)
{
}

const char *
gr_gpudev_last_error (void)
{
  return "";
}

void
gr_gpudev_many_account (char *buf, size_t len)
{
  snprintf (buf, len, "%s", "");
}

int
gr_gpudev_host_copy (const struct gr_copy_row *rows, size_t n)
{
  return -ENOTSUP;
}

void
gr_gpudev_host_copy_account (char *buf, size_t len)
{
  snprintf (buf, len, "%s", "");
}

void
gr_gpudev_release (void)
{
}

#endif
