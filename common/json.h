/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - JSON strings, header only, for every writer of JSON (the
 * plugin's status and events):
 *
 *   gr_json_str (f, s)   s as a JSON string ("..." with " \ and control
 *                        characters escaped), or null for NULL */
#ifndef GPURAID_COMMON_JSON_H
#define GPURAID_COMMON_JSON_H

#include <stdio.h>

static inline void
gr_json_str (FILE *f, const char *s)
{
  if (s == NULL) {
    fputs ("null", f);
    return;
  }
  fputc ('"', f);
  for (; *s; s++) {
    const unsigned char ch = (unsigned char) *s;

    if (ch == '"' || ch == '\\')
      fprintf (f, "\\%c", ch);
    else if (ch < 0x20)
      fprintf (f, "\\u%04x", ch);
    else
      fputc (ch, f);
  }
  fputc ('"', f);
}

#endif /* GPURAID_COMMON_JSON_H */
