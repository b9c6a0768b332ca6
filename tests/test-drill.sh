#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The degraded-mode drill (scripts/gpuraid-drill) in a short form: 4+2 on
# 16M files, a second of verifying workload a step: m members failed one
# after another, replaced and rebuilt, a spare's takeover and the array
# assembled again by scan=, a member re-added, one replaced live, a
# scrub, the events a monitor saw; it must pass (exit 0, every step
# PASS).  Negative control: with a stand-in GPU coder whose
# rebuilt blocks are wrong (-D gpuraid.fake_gpu=3, every operation on
# it), the drill must fail (exit 1) at the first degraded read-back.

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_ctl
requires_cmd nbdcopy nbdinfo python3 cmp

drill=$top/scripts/gpuraid-drill
# nbdkit as the tests run it (the sanitizer runtimes preloaded for a
# sanitizer build).
export DRILL_NBDKIT="${NBDKIT_CMD[*]}"
out=$tmpdir/drill.out
TMPDIR=$tmpdir "$drill" --geometry 4+2 --size 16M --duration 1 >"$out" 2>&1
rc=$?
cat "$out"
[ $rc = 0 ] || fail "the drill failed (exit $rc)"
grep -q '^drill: PASS' "$out" || fail "no PASS line"
[ "$(grep -c '^  PASS ' "$out")" = 19 ] || fail "not 19 steps passed"
grep -q '^  FAIL' "$out" && fail "a step failed"

echo "=== negative control: a coder that rebuilds wrong bytes"
TMPDIR=$tmpdir DRILL_NBDKIT_OPTS="-D gpuraid.fake_gpu=3" "$drill" --geometry 4+2 \
  --size 16M --duration 1 --accel auto >"$out" 2>&1
rc=$?
tail -4 "$out"
[ $rc = 1 ] || fail "the drill did not fail with a wrong coder (exit $rc)"
grep -q '^  FAIL .*degraded by 1: data differs from the reference' "$out" ||
  fail "the drill failed elsewhere: $(grep FAIL "$out")"
echo "$0: PASS"
