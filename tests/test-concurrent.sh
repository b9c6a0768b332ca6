#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Concurrent writers: tests/test-concurrent opens several NBD connections
# and writes interleaved, non-overlapping, unaligned byte ranges inside
# the same stripes in parallel (several requests in flight per
# connection).  The final image is deterministic: it is verified, parity
# is checked offline, and the array is restarted with m members removed
# and verified again.  For m >= 2 the same runs on a degraded array
# (one member gone), checked with the remaining parity and verified with
# a second member gone.

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
prog=$top/tests/test-concurrent
if [ ! -x "$prog" ]; then
  echo "$0: SKIP: $prog not built"
  exit 77
fi

seed=$TEST_SEED

for g in 4:2:16384:rs:3M:6 3:1:4096:crs:3M:4 2:2:8192:rs:2M:4; do
  IFS=: read -r k m chunk code size threads <<<"$g"
  n=$(( k + m ))
  echo "=== k=$k m=$m chunk=$chunk code=$code threads=$threads"
  make_members "$n" "$size"
  start_array chunk=$chunk code=$code create=true || exit 1
  seed=$(( seed + 1 ))
  "$prog" write "$uri" $seed "$threads" ||
    { echo "$0: FAIL: concurrent writes (seed $seed)"; exit 1; }
  stop_nbdkit "$pid"
  check_parity $k $m $chunk $code "${members[@]}"

  # Restart with the last m members removed (every stripe then has
  # data to reconstruct, since parity rotates).
  set_args
  for (( i = k; i < n; i++ )); do mv "${members[$i]}" "${members[$i]}.gone"; done
  start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" m=$m ||
    { echo "$0: FAIL: degraded restart"; exit 1; }
  "$prog" verify "$uri" $seed "$threads" ||
    { echo "$0: FAIL: degraded verify after concurrent writes (seed $seed)"; exit 1; }
  stop_nbdkit "$pid"
  for (( i = k; i < n; i++ )); do mv "${members[$i]}.gone" "${members[$i]}"; done

  if [ "$m" -ge 2 ]; then
    # Concurrent writes while degraded (member 1 gone: one parity left
    # to check), then verify with a different member set missing.
    snapshot_members "$tmpdir/snap"
    mv "${members[1]}" "$tmpdir/gone1"
    start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" m=$m ||
      { echo "$0: FAIL: degraded start"; exit 1; }
    seed=$(( seed + 1 ))
    "$prog" write "$uri" $seed "$threads" ||
      { echo "$0: FAIL: degraded concurrent writes (seed $seed)"; exit 1; }
    stop_nbdkit "$pid"
    check_members=("${members[@]}")
    check_members[1]=-
    check_parity $k $m $chunk $code "${check_members[@]}"
    mv "${members[0]}" "$tmpdir/gone0"
    start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" m=$m ||
      { echo "$0: FAIL: restart with members 0 and 1 missing"; exit 1; }
    "$prog" verify "$uri" $seed "$threads" ||
      { echo "$0: FAIL: verify with members 0,1 missing after degraded concurrent writes"; exit 1; }
    stop_nbdkit "$pid"
    mv "$tmpdir/gone0" "${members[0]}"
  fi
done

# Large requests from several connections under the smallest scratch
# cap (scratch-max=1M): each 4 MiB request needs its own buffer, so they
# run one at a time, and must neither deadlock nor mix their data.
# Healthy writes (full stripes, unaligned ends), then degraded reads
# (every stripe reconstructed).
echo "=== 4+2 with scratch-max=1M, 4 connections x 4 MiB requests"
k=4 m=2 chunk=65536 code=rs
make_members 6 12M
head -c $(( 40 * 1024 * 1024 + 12345 )) /dev/urandom >"$tmpdir/big.src"
start_array chunk=$chunk code=$code create=true scratch-max=1M || exit 1
timeout 120 nbdcopy --connections=4 --request-size=4194304 --requests=4 \
  "$tmpdir/big.src" "$uri" || fail "nbdcopy of 40 MiB with scratch-max=1M"
stop_nbdkit "$pid"
check_parity $k $m $chunk $code "${members[@]}"
set_args
mv "${members[1]}" "${members[1]}.gone"
mv "${members[4]}" "${members[4]}.gone"
start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" m=$m scratch-max=1M ||
  fail "degraded start with scratch-max=1M"
timeout 120 nbdcopy --connections=4 --request-size=4194304 --requests=4 \
  "$uri" "$tmpdir/big.back" || fail "degraded nbdcopy back"
stop_nbdkit "$pid"
cmp -n $(( 40 * 1024 * 1024 + 12345 )) "$tmpdir/big.src" "$tmpdir/big.back" ||
  fail "data read back (2 members missing, scratch-max=1M) differs"
rm -f "$tmpdir/big.src" "$tmpdir/big.back"

# A slow member (nbdfuse over `nbdkit --filter=delay memory`) keeps
# requests in flight longer, so overlapping read-modify-writes of one
# stripe are more likely to meet.
if command -v nbdfuse >/dev/null && [ -c /dev/fuse ] && [ -w /dev/fuse ]; then
  echo "=== 3+1 with a slow member (delay filter, 1 ms per read and write)"
  fmnt=$tmpdir/fuse
  mkdir "$fmnt"
  dsock=$tmpdir/dsock
  nbdkit -f -P "$tmpdir/delay.pid" -U "$dsock" --filter=delay memory 3M \
    rdelay=1ms wdelay=1ms </dev/null >"$tmpdir/delay.log" 2>&1 &
  cleanup_fn _kill_pid $!
  for (( i = 0; i < 100; i++ )); do [ -s "$tmpdir/delay.pid" ] && break; sleep 0.1; done
  nbdfuse "$fmnt/slow" "$(sock_uri "$dsock")" >"$tmpdir/nbdfuse.log" 2>&1 &
  cleanup_fn _kill_pid $!
  for (( i = 0; i < 100; i++ )); do [ -f "$fmnt/slow" ] && break; sleep 0.1; done
  cleanup_fn fusermount3 -u "$fmnt"
  if [ -f "$fmnt/slow" ]; then
    k=3 m=1 chunk=4096 code=rs
    make_members 3 3M
    members=("${members[0]}" "$fmnt/slow" "${members[1]}" "${members[2]}")
    start_array chunk=$chunk code=$code create=true || exit 1
    seed=$(( seed + 1 ))
    "$prog" write "$uri" $seed 4 $(( 2 * 1024 * 1024 )) 8 ||
      { echo "$0: FAIL: concurrent writes with a slow member (seed $seed)"; exit 1; }
    stop_nbdkit "$pid"
    check_parity $k $m $chunk $code "${members[@]}"
    # Verify without the slow member (everything it held reconstructed).
    args=("member=${members[0]}" "member=$tmpdir/nonexistent" "member=${members[2]}" "member=${members[3]}")
    start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" m=$m ||
      { echo "$0: FAIL: start without the slow member"; exit 1; }
    "$prog" verify "$uri" $seed 4 $(( 2 * 1024 * 1024 )) 8 ||
      { echo "$0: FAIL: verify without the slow member (seed $seed)"; exit 1; }
    stop_nbdkit "$pid"
  else
    echo "$0: note: nbdfuse did not start, slow-member part not run"
  fi
else
  echo "$0: note: no nbdfuse or /dev/fuse, slow-member part not run"
fi
echo "$0: PASS"
