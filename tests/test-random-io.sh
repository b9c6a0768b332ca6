#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Random unaligned writes and reads (spanning chunk and stripe boundaries)
# checked against a reference image, over several geometries, codes and
# chunk sizes; a fresh array must read as zeros; the server is restarted
# and the data re-verified; parity is checked offline with gpuraid-check,
# whose reconstructed logical image must also equal the reference.
#
# Environment (used by test-backends.sh):
#   GR_GEOMS        geometries, "K:M:CHUNK:CODE:MEMBER_SIZE ..."
#   GR_PLUGIN_ARGS  extra plugin arguments, e.g. "backend=ref"
#   GR_OPS          random writes per phase (default 120)

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_py

geoms=${GR_GEOMS:-"1:1:65536:rs:3M 2:1:4096:crs:2M 4:2:65536:rs:3M
                   4:2:4096:crs:2M 6:3:65536:crs:2M 6:3:4096:rs:2M
                   3:2:16384:rs:2M"}
extra=${GR_PLUGIN_ARGS:-}
ops=${GR_OPS:-120}
ref=$tmpdir/ref.img
seed=$TEST_SEED

for g in $geoms; do
  IFS=: read -r k m chunk code size <<<"$g"
  n=$(( k + m ))
  echo "=== k=$k m=$m chunk=$chunk code=$code member size=$size $extra"
  make_members "$n" "$size"
  # shellcheck disable=SC2086
  start_array chunk="$chunk" code="$code" create=true $extra || exit 1

  randio zeroref "$uri" "$ref"
  # The logical size must follow the contract.
  stripes=$(( ($(stat -c %s "${members[0]}") - $(data_offset "$chunk")) / chunk ))
  if [ "$(stat -c %s "$ref")" != $(( stripes * k * chunk )) ]; then
    echo "$0: FAIL: export size $(stat -c %s "$ref"), expected $stripes stripes * $k * $chunk"
    exit 1
  fi
  expect_verify "$uri" "$ref" "fresh array must read as zeros"
  seed=$(( seed + 1 ))
  randio write "$uri" "$ref" --seed "$seed" --ops "$ops" --chunk "$chunk" --k "$k" ||
    { echo "$0: FAIL: random I/O (seed $seed)"; exit 1; }
  stop_nbdkit "$pid"
  check_parity "$k" "$m" "$chunk" "$code" "${members[@]}"

  # Restart (no create): same data; write some more.
  # shellcheck disable=SC2086
  start_array chunk="$chunk" code="$code" $extra || exit 1
  expect_verify "$uri" "$ref" "after restart"
  seed=$(( seed + 1 ))
  randio write "$uri" "$ref" --seed "$seed" --ops $(( ops / 2 )) --chunk "$chunk" --k "$k" ||
    { echo "$0: FAIL: random I/O after restart (seed $seed)"; exit 1; }
  stop_nbdkit "$pid"
  check_decode "$k" "$m" "$chunk" "$code" "$ref" "of the healthy array"
done
echo "$0: PASS"
