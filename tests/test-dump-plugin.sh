#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# nbdkit PLUGIN --dump-plugin prints gpuraid_version=, gpuraid_backends=
# (listing isal), gpuraid_cuda=yes|no and gpuraid_nbd_members=yes|no.

source "$(dirname "$0")/functions.sh"
requires_plugin

out=$tmpdir/dump.out
run_nbdkit "$PLUGIN" --dump-plugin > "$out" ||
  { cat "$out"; echo "$0: FAIL: --dump-plugin failed"; exit 1; }
cat "$out"
fail=0
grep -Eq '^gpuraid_version=[0-9A-Za-z.+~-]+$' "$out" ||
  { echo "$0: FAIL: no gpuraid_version=VERSION line"; fail=1; }
grep -Eq '^gpuraid_backends=.*\bisal\b' "$out" ||
  { echo "$0: FAIL: no gpuraid_backends= line listing isal"; fail=1; }
grep -Eq '^gpuraid_cuda=(yes|no)$' "$out" ||
  { echo "$0: FAIL: no gpuraid_cuda=yes|no line"; fail=1; }
grep -Eq '^gpuraid_nbd_members=(yes|no)$' "$out" ||
  { echo "$0: FAIL: no gpuraid_nbd_members=yes|no line"; fail=1; }
grep -Eq '^name=gpuraid$' "$out" ||
  { echo "$0: FAIL: plugin name is not gpuraid"; fail=1; }
[ "$fail" = 0 ] || exit 1
echo "$0: PASS"
