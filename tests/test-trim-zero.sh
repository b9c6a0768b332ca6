#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Zero and trim requests, whole stripes and partial: zeroed ranges read
# back as zeros, trimmed ranges as either the old data or zeros (both are
# allowed by NBD) and stay settled; parity stays consistent
# (gpuraid-check) and degraded reads equal healthy reads.  Zero and trim
# are also done on a degraded array, checked the same way.

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_py

ref=$tmpdir/ref.img
seed=$TEST_SEED

for g in 4:2:16384:rs:2M 3:1:4096:crs:2M; do
  IFS=: read -r k m chunk code size <<<"$g"
  n=$(( k + m ))
  echo "=== k=$k m=$m chunk=$chunk code=$code"
  make_members "$n" "$size"
  start_array chunk=$chunk code=$code create=true || exit 1
  randio zeroref "$uri" "$ref"
  # Fill everything with random data first.
  head -c "$(stat -c %s "$ref")" /dev/urandom > "$ref"
  nbdcopy "$ref" "$uri" || { echo "$0: FAIL: nbdcopy fill"; exit 1; }
  expect_verify "$uri" "$ref" "after fill"
  seed=$(( seed + 1 ))
  randio trimzero "$uri" "$ref" --seed $seed --ops 60 --chunk $chunk --k $k ||
    { echo "$0: FAIL: trim/zero (seed $seed)"; exit 1; }
  stop_nbdkit "$pid"
  check_parity $k $m $chunk $code "${members[@]}"

  # Healthy restart, then degraded with each of two member sets missing.
  set_args
  start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" m=$m || exit 1
  expect_verify "$uri" "$ref" "healthy restart after trim/zero"
  stop_nbdkit "$pid"
  snapshot_members "$tmpdir/snap"
  for gone in 0 $(( n - 1 )); do
    restore_members "$tmpdir/snap"
    last=$(( gone + m - 1 ))
    for (( i = gone; i <= last && i < n; i++ )); do mv "${members[$i]}" "$tmpdir/gone$i"; done
    start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" m=$m ||
      { echo "$0: FAIL: degraded start"; exit 1; }
    expect_verify "$uri" "$ref" "degraded (from member $gone) after trim/zero"
    stop_nbdkit "$pid"
    for (( i = gone; i <= last && i < n; i++ )); do mv "$tmpdir/gone$i" "${members[$i]}"; done
  done

  # Zero and trim while degraded (member 1 gone): the reconstructing
  # read-modify-write paths.  Parity of what is left must be consistent
  # and, for m >= 2, reads with another member gone must agree.
  restore_members "$tmpdir/snap"
  mv "${members[1]}" "$tmpdir/gone1"
  start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" m=$m ||
    { echo "$0: FAIL: degraded start (member 1 gone)"; exit 1; }
  seed=$(( seed + 1 ))
  randio trimzero "$uri" "$ref" --seed $seed --ops 40 --chunk $chunk --k $k ||
    { echo "$0: FAIL: degraded trim/zero (seed $seed)"; exit 1; }
  stop_nbdkit "$pid"
  check_decode $k $m $chunk $code "$ref" "after degraded trim/zero" 1
  if [ "$m" -ge 2 ]; then
    mv "${members[0]}" "$tmpdir/gone0"
    start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" m=$m ||
      { echo "$0: FAIL: start with members 0, 1 gone"; exit 1; }
    expect_verify "$uri" "$ref" "members 0, 1 gone after degraded trim/zero"
    stop_nbdkit "$pid"
    mv "$tmpdir/gone0" "${members[0]}"
  fi
  mv "$tmpdir/gone1" "${members[1]}"
done
echo "$0: PASS"
