/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - sizes as the operator types them, header only, one syntax for
 * the plugin's options, its control commands and gpuraidctl:
 *
 *   gr_size_parse (s, &v)   s is decimal digits and at most one unit
 *                           letter, as nbdkit_parse_size takes them: b
 *                           (bytes), k, M, G, T, P or E (powers of 1024,
 *                           either case): "64K", "50M", "4096".  false if
 *                           s is anything else or above INT64_MAX bytes
 *                           (nbdkit's bound). */
#ifndef GPURAID_COMMON_SIZE_H
#define GPURAID_COMMON_SIZE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

static inline bool
gr_size_parse (const char *s, uint64_t *out)
{
  static const char units[] = "bkmgtpe";
  uint64_t n = 0, max = INT64_MAX;
  const char *u;
  size_t i = 0;

  if (s[0] < '0' || s[0] > '9')
    return false;
  for (; s[i] >= '0' && s[i] <= '9'; i++) {
    if (n > (max - (uint64_t) (s[i] - '0')) / 10)
      return false;
    n = n * 10 + (uint64_t) (s[i] - '0');
  }
  if (s[i] != '\0') {
    const char c = s[i] >= 'A' && s[i] <= 'Z' ? (char) (s[i] + 32) : s[i];

    if (s[i + 1] != '\0' || (u = strchr (units, c)) == NULL || c == '\0')
      return false;
    for (; u > units; u--) {
      if (n > max / 1024)
        return false;
      n *= 1024;
    }
  }
  *out = n;
  return true;
}

#endif /* GPURAID_COMMON_SIZE_H */
