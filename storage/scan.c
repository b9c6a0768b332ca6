/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the storage that shell patterns name (scan=, gpuraidctl scan).
 * See storage.h. */
#include <errno.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "storage-internal.h"

int
gr_disk_scan (const char *const *globs, int n, char ***paths)
{
  struct stat *seen = NULL;
  char **out = NULL;
  int count = 0, cap = 0, r = 0;

  for (int g = 0; g < n && r == 0; g++) {
    glob_t gl;
    const int e = glob (globs[g], 0, NULL, &gl);

    if (e == GLOB_NOMATCH)
      continue;
    if (e != 0) {
      r = e == GLOB_NOSPACE ? -ENOMEM : -EIO;
      break;
    }
    for (size_t i = 0; i < gl.gl_pathc && r == 0; i++) {
      struct stat st;
      int j;

      if (stat (gl.gl_pathv[i], &st) == -1 ||
          !(S_ISREG (st.st_mode) || S_ISBLK (st.st_mode)))
        continue;
      for (j = 0; j < count; j++)
        if (seen[j].st_dev == st.st_dev && seen[j].st_ino == st.st_ino)
          break;
      if (j < count)
        continue;               /* another name of one already found */
      if (count == cap) {
        char **o2 = realloc (out, (size_t) (cap ? 2 * cap : 16)
                             * sizeof *out);
        struct stat *s2 = o2 ? realloc (seen, (size_t) (cap ? 2 * cap : 16)
                                        * sizeof *seen) : NULL;

        if (o2)
          out = o2;
        if (s2 == NULL) {
          r = -ENOMEM;
          break;
        }
        seen = s2;
        cap = cap ? 2 * cap : 16;
      }
      if ((out[count] = strdup (gl.gl_pathv[i])) == NULL) {
        r = -ENOMEM;
        break;
      }
      seen[count++] = st;
    }
    globfree (&gl);
  }
  free (seen);
  if (r < 0) {
    gr_disk_scan_free (out, count);
    return r;
  }
  *paths = out;
  return count;
}

void
gr_disk_scan_free (char **paths, int count)
{
  for (int i = 0; i < count; i++)
    free (paths[i]);
  free (paths);
}
