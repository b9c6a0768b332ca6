#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A member whose writes start failing with EIO mid-run.  Member 2 of a
# 2+1 array is a FUSE file (nbdfuse) over `nbdkit --filter=error memory`;
# creating error-pwrite-file makes every write to it fail while reads keep
# working (so a plugin that went on reading it would return stale data).
# Writes to the array must go on succeeding, the data must read back, the
# log must say once that member 2 failed, and after a restart with the
# member working again it must still be treated as failed (its contents
# are stale): data correct, offline decode without it equals the
# reference, and including it gives parity mismatches (the test's own
# negative control).

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_py
requires_cmd nbdfuse fusermount3
if [ ! -c /dev/fuse ] || [ ! -w /dev/fuse ]; then
  echo "$0: SKIP: /dev/fuse missing or not writable"
  exit 77
fi
if [ ! -f "$(nbdkit --dump-config | sed -n 's/^filterdir=//p')/nbdkit-error-filter.so" ]; then
  echo "$0: SKIP: nbdkit error filter not installed"
  exit 77
fi

k=2 m=1 chunk=4096 code=rs
ref=$tmpdir/ref.img
inject=$tmpdir/inject
fmnt=$tmpdir/fuse
mkdir "$fmnt"

# The faulty member: memory + error filter, exposed as $fmnt/m2.  (Not
# through start_nbdkit: no sanitizer preload needed for nbdkit's own
# plugins, and its log is separate.)
esock=$tmpdir/esock
epid=$tmpdir/error.pid
nbdkit -f -P "$epid" -U "$esock" --filter=error memory 2M \
  error-pwrite=EIO error-pwrite-rate=100% error-pwrite-file="$inject" \
  error-zero=EIO error-zero-rate=100% error-zero-file="$inject" \
  error-trim=EIO error-trim-rate=100% error-trim-file="$inject" \
  </dev/null >"$tmpdir/error.log" 2>&1 &
cleanup_fn _kill_pid $!
for (( i = 0; i < 100; i++ )); do [ -s "$epid" ] && break; sleep 0.1; done
[ -s "$epid" ] || { cat "$tmpdir/error.log"; echo "$0: FAIL: error-filter server did not start"; exit 1; }
nbdfuse -P "$tmpdir/nbdfuse.pid" "$fmnt/m2" "$(sock_uri "$esock")" \
  >"$tmpdir/nbdfuse.log" 2>&1 &
cleanup_fn _kill_pid $!
for (( i = 0; i < 100; i++ )); do [ -f "$fmnt/m2" ] && break; sleep 0.1; done
if [ ! -f "$fmnt/m2" ]; then
  cat "$tmpdir/nbdfuse.log"
  echo "$0: SKIP: nbdfuse could not expose a file here"
  exit 77
fi
# Unmount before the servers are killed (cleanups run last-first).
cleanup_fn fusermount3 -u "$fmnt"

truncate -s 2M "$tmpdir/disk0.img" "$tmpdir/disk1.img"
members=("$tmpdir/disk0.img" "$tmpdir/disk1.img" "$fmnt/m2")

start_array chunk=$chunk code=$code create=true || exit 1
randio zeroref "$uri" "$ref"
randio write "$uri" "$ref" --seed "$TEST_SEED" --ops 80 --chunk $chunk --k $k ||
  { echo "$0: FAIL: healthy random I/O"; exit 1; }
stop_nbdkit "$pid"
check_parity $k $m $chunk $code "${members[@]}"

nbdkit_log=$tmpdir/run1.log
start_array || exit 1
expect_verify "$uri" "$ref" "healthy"
echo "=== member 2 starts failing writes"
touch "$inject"
randio write "$uri" "$ref" --seed $(( TEST_SEED + 1 )) --ops 80 --chunk $chunk --k $k ||
  { echo "$0: FAIL: writes failed after one member started failing"; exit 1; }
expect_verify "$uri" "$ref" "after member 2 failed"
stop_nbdkit "$pid"
rm -f "$inject"
echo "--- server log:"; cat "$nbdkit_log"; echo "---"
lines=$(grep -E 'member[ #\[]*2\b|m2\b' "$nbdkit_log" | grep -Ei 'fail' || true)
nfail=$(echo "$lines" | grep -Eic 'marked|marking|now failed|has failed|member.*failed|continuing|degraded' || true)
if [ "$nfail" != 1 ]; then
  echo "$0: FAIL: expected exactly one 'member 2 failed' message, found $nfail"
  exit 1
fi
if ! grep -q 'injecting EIO error into pwrite' "$tmpdir/error.log"; then
  echo "$0: FAIL: no write reached the faulty member (test did not inject)"
  exit 1
fi

# Negative control: member 2 really is stale.
expect_check_fails "member 2 is not stale: the test injected nothing" \
  -k $k -m $m -c $chunk -t $code -q "${members[@]}"
# Member 2 works again but is stale: it must not be trusted.
nbdkit_log=$tmpdir/run2.log
start_array || { echo "$0: FAIL: restart after the failure"; exit 1; }
expect_verify "$uri" "$ref" "restart with member 2 working again (stale)"
stop_nbdkit "$pid"
cat "$nbdkit_log"
check_decode $k $m $chunk $code "$ref" "without member 2" 2

# Again under concurrent load: a fresh array over the same members, the
# member starts failing before test-concurrent's writers (4 connections,
# 8 requests in flight each) begin, so the failure is met by many
# requests at once.  All writes succeed, the data verifies (also after a
# restart), and the failure is logged once.
prog=$top/tests/test-concurrent
if [ -x "$prog" ]; then
  echo "=== concurrent writers meet the failing member"
  start_array chunk=$chunk code=$code create=true force=true || exit 1
  stop_nbdkit "$pid"
  nbdkit_log=$tmpdir/run3.log
  start_array || exit 1
  # One write first, so that the array is already marked dirty and the
  # failure is met by data writes, not by the superblock update.
  nbdsh -u "$uri" -c 'h.pwrite(b"x" * 4096, 0); h.flush()' ||
    { echo "$0: FAIL: first write"; exit 1; }
  touch "$inject"
  "$prog" write "$uri" $(( TEST_SEED + 2 )) 4 ||
    { echo "$0: FAIL: concurrent writes with a failing member"; exit 1; }
  stop_nbdkit "$pid"
  rm -f "$inject"
  cat "$nbdkit_log"
  nfail=$(grep -E 'member[ #\[]*2\b|m2\b' "$nbdkit_log" | grep -Ei 'fail' |
          grep -Eic 'marked|marking|now failed|has failed|member.*failed|continuing|degraded' || true)
  if [ "$nfail" != 1 ]; then
    echo "$0: FAIL: expected exactly one 'member 2 failed' message under load, found $nfail"
    exit 1
  fi
  start_array || { echo "$0: FAIL: restart after the failure under load"; exit 1; }
  "$prog" verify "$uri" $(( TEST_SEED + 2 )) 4 ||
    { echo "$0: FAIL: data after the failure under load"; exit 1; }
  stop_nbdkit "$pid"
  check_parity $k $m $chunk $code "${members[0]}" "${members[1]}" -
else
  echo "$0: note: $prog not built, concurrent part not run"
fi
echo "$0: PASS"
