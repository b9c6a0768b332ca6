/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the backend registry (like the kernel's raid6_algos[]).
 * Built in, in this order: ref, gfc, isal.  Others (cuda) are added with
 * gr_backend_register.  Not thread-safe against concurrent registration;
 * register before creating coders. */
#include <errno.h>
#include <string.h>

#include "gf-internal.h"

#define GR_MAX_BACKENDS 16

static const struct gr_backend *backends[GR_MAX_BACKENDS] = {
  &gr_backend_ref,
  &gr_backend_gfc,
  &gr_backend_isal,
};
static int nbackends = 3;

const struct gr_backend *
gr_backend_find (const char *name)
{
  int i;

  if (name == NULL)
    return NULL;
  for (i = 0; i < nbackends; i++)
    if (strcmp (backends[i]->name, name) == 0)
      return backends[i];
  return NULL;
}

const struct gr_backend *
gr_backend_at (int i)
{
  if (i < 0 || i >= nbackends)
    return NULL;
  return backends[i];
}

const struct gr_backend *
gr_backend_best (void)
{
  const struct gr_backend *best = NULL;
  int i;

  for (i = 0; i < nbackends; i++)
    if (gr_backend_probe (backends[i]) == 0 &&
        (best == NULL || backends[i]->prefer > best->prefer))
      best = backends[i];
  return best;
}

const char *
gr_backend_name (const struct gr_backend *be)
{
  return be ? be->name : NULL;
}

int
gr_backend_probe (const struct gr_backend *be)
{
  if (be == NULL)
    return -ENOTSUP;
  if (be->probe == NULL)
    return 0;
  return be->probe () == 0 ? 0 : -ENOTSUP;
}

/* Returns 0, -EINVAL (missing name or operation), -EEXIST (name taken) or
 * -ENOSPC (table full). */
int
gr_backend_register (const struct gr_backend *be)
{
  if (be == NULL || be->name == NULL || be->encode == NULL ||
      be->reconstruct == NULL || be->update == NULL)
    return -EINVAL;
  if (gr_backend_find (be->name) != NULL)
    return -EEXIST;
  if (nbackends >= GR_MAX_BACKENDS)
    return -ENOSPC;
  backends[nbackends++] = be;
  return 0;
}
