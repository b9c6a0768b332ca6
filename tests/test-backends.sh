#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Every CPU backend: the random-I/O test runs once per backend (ref, isal,
# gfc; forced with backend=), and an array written with one backend reads
# back, healthy and degraded (so decoding too), with every other one.

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_py

backends=$(run_nbdkit "$PLUGIN" --dump-plugin | sed -n 's/^gpuraid_backends=//p' | tr ',;' '  ')
echo "backends listed by --dump-plugin: $backends"
for b in ref isal gfc; do
  if ! echo " $backends " | grep -q " $b "; then
    echo "$0: FAIL: built-in backend $b not listed in gpuraid_backends"
    exit 1
  fi
done

for b in ref isal gfc; do
  echo "=== random I/O with backend=$b"
  GR_GEOMS="4:2:16384:rs:2M 3:2:4096:crs:2M" GR_PLUGIN_ARGS="backend=$b" \
    GR_OPS=60 "$top/tests/test-random-io.sh" ||
    { echo "$0: FAIL: random I/O with backend=$b"; exit 1; }
done

ref=$tmpdir/ref.img
k=4 m=2 chunk=4096
n=$(( k + m ))
seed=$TEST_SEED
for code in rs crs; do
  for writer in ref isal gfc; do
    echo "=== code=$code written with backend=$writer"
    make_members $n 1536K
    start_array chunk=$chunk code=$code create=true backend=$writer || exit 1
    randio zeroref "$uri" "$ref"
    seed=$(( seed + 1 ))
    randio write "$uri" "$ref" --seed $seed --ops 60 --chunk $chunk --k $k ||
      { echo "$0: FAIL: random I/O with backend=$writer"; exit 1; }
    stop_nbdkit "$pid"
    check_parity $k $m $chunk $code "${members[@]}"
    set_args
    snapshot_members "$tmpdir/snap"
    for reader in ref isal gfc; do
      [ "$reader" = "$writer" ] && continue
      restore_members "$tmpdir/snap"
      echo "--- read back with backend=$reader, healthy and members 1,4 missing"
      start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" m=$m backend=$reader || exit 1
      expect_verify "$uri" "$ref" "written by $writer, read by $reader"
      stop_nbdkit "$pid"
      mv "${members[1]}" "$tmpdir/gone1"; mv "${members[4]}" "$tmpdir/gone4"
      start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" m=$m backend=$reader || exit 1
      expect_verify "$uri" "$ref" "written by $writer, degraded read by $reader"
      stop_nbdkit "$pid"
      mv "$tmpdir/gone1" "${members[1]}"; mv "$tmpdir/gone4" "${members[4]}"
    done
  done
done
echo "$0: PASS"
