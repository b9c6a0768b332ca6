/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraidctl - the parts shared by its two files: gpuraidctl.c (the
 * commands, the control socket) and offline.c (examine, map, scan: the
 * members read offline, decided with the format library). */
#ifndef GPURAID_CTL_H
#define GPURAID_CTL_H

extern const char *const ctl_prog;

/* One line "gpuraidctl: ..." on stderr, exit 1. */
void ctl_die (const char *fmt, ...)
  __attribute__ ((noreturn, format (printf, 1, 2)));
/* A member's path for the server: an NBD URI as it is, a file's made
 * absolute (the server runs elsewhere).  NULL with errno set. */
char *ctl_member_path (const char *arg);

/* The offline commands, given their arguments; the exit status. */
int ctl_examine (int argc, char **argv);
int ctl_map (int argc, char **argv);
int ctl_scan (int argc, char **argv);

#endif /* GPURAID_CTL_H */
