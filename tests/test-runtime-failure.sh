#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A member fails while the server runs: its file is truncated to 0 bytes,
# so every read of it comes back short.  Reads must still return correct
# data, writes must go on working (degraded), the log must say once which
# member failed, and after a restart with the member's old contents put
# back (an intact-looking but stale member) it must still be treated as
# failed: the data written after the failure reads back correctly and the
# offline decode without that member matches.

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_py

k=3 m=1 chunk=4096 code=rs
n=$(( k + m ))
fail=2                          # the member that fails
ref=$tmpdir/ref.img

make_members "$n" 1536K
start_array chunk=$chunk code=$code create=true || exit 1
randio zeroref "$uri" "$ref"
randio write "$uri" "$ref" --seed "$TEST_SEED" --ops 100 --chunk $chunk --k $k ||
  { echo "$0: FAIL: healthy random I/O"; exit 1; }
stop_nbdkit "$pid"
check_parity $k $m $chunk $code "${members[@]}"
cp --sparse=always "${members[$fail]}" "$tmpdir/before-failure.img"

nbdkit_log=$tmpdir/run1.log
start_array || exit 1
expect_verify "$uri" "$ref" "healthy"
echo "=== truncating member $fail (${members[$fail]}) under the running server"
truncate -s 0 "${members[$fail]}"
expect_verify "$uri" "$ref" "after member $fail failed"
randio write "$uri" "$ref" --seed $(( TEST_SEED + 1 )) --ops 100 --chunk $chunk --k $k ||
  { echo "$0: FAIL: random I/O after member $fail failed"; exit 1; }
expect_verify "$uri" "$ref" "again, after member $fail failed"
stop_nbdkit "$pid"
echo "--- server log:"
cat "$nbdkit_log"
echo "---"

# The log names the failed member (by path or index), in one failure
# message, not once per I/O.
name=$(basename "${members[$fail]}")
pat="($name|member[ #\[]*$fail\b)"
lines=$(grep -Ei "$pat" "$nbdkit_log" | grep -Ei 'fail|faulty|error' | grep -vi 'debug' || true)
if [ -z "$lines" ]; then
  echo "$0: FAIL: the log does not say that member $fail ($name) failed"
  exit 1
fi
transition=$(echo "$lines" | grep -Eic 'marked|marking|now failed|has failed|member.*failed|continuing|degraded' || true)
if [ "$transition" != 1 ]; then
  echo "$0: FAIL: expected exactly one 'member $fail failed' message, found $transition:"
  echo "$lines"
  exit 1
fi

# The surviving superblocks record the failure (docs/format.md: failed
# bitmap, event counter above the failed member's last one).
for (( i = 0; i < n; i++ )); do
  [ "$i" = "$fail" ] && continue
  bits=$(sb_failed_bits "${members[$i]}")
  echo "member $i superblock: event $(sb_event "${members[$i]}"), failed: ${bits:-none}"
  if [ "$bits" != "$fail " ]; then
    echo "$0: FAIL: member $i's superblock does not mark (only) member $fail failed"
    exit 1
  fi
  if [ "$(sb_event "${members[$i]}")" -le "$(sb_event "$tmpdir/before-failure.img")" ]; then
    echo "$0: FAIL: member $i's event counter did not advance past the failed member's"
    exit 1
  fi
done

# Put the old, intact-looking contents back: it must not be trusted.
cp --sparse=always "$tmpdir/before-failure.img" "${members[$fail]}"
# Negative control: the restored copy really is stale.
expect_check_fails "member $fail's old copy is not stale: the test proves nothing" \
  -k $k -m $m -c $chunk -t $code -q "${members[@]}"
nbdkit_log=$tmpdir/run2.log
start_array || { echo "$0: FAIL: restart after the failure"; exit 1; }
expect_verify "$uri" "$ref" "restart with the failed member's stale copy back"
stop_nbdkit "$pid"
cat "$nbdkit_log"
check_decode $k $m $chunk $code "$ref" "without member $fail" "$fail"
echo "$0: PASS"
