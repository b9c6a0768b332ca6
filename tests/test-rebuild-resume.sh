#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A rebuild across restarts, 6+2, 16K chunks (a 4K write into one chunk
# is a read-modify-write):
#   1. small writes below the rebuild's front, then kill -9: the journal
#      replayed at the restart must hold the replacement's chunks as they
#      are (not the plan's deltas), so with the replacement left out
#      every byte still reads back;
#   2. a shutdown during a rebuild: the restart with the replacement in
#      member='s place resumes it where it stopped (the checkpoint in the
#      superblocks), and the array ends healthy, every byte and stripe
#      verified;
#   3. kill -9 during a rebuild with small writes below and above its
#      front: the restart resumes it from the last checkpoint (not from
#      stripe 0) and the array ends healthy, every byte and stripe
#      verified;
#   4. what is not resumed: the replacement of an abandoned rebuild
#      (another replace since) is not used;
#   5. nor one left out of a start at which the array was written: its
#      rebuilt part missed those writes, so the next start with it given
#      must not take it (the record is forgotten at the first write).

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_cmd nbdcopy nbdsh python3 cmp
requires_ctl

k=6 m=2 n=8 chunk=16384
width=$(( k * chunk ))
# begin_rebuild: from the snapshot (member 1 failed), serve and rebuild
# member 1 onto a blank new1.img at 2 MB/s.
begin_rebuild ()
{
  restore_members "$tmpdir/snap"
  cp "$tmpdir/expect0" "$tmpdir/expect"
  ctl_serve
  rm -f "$tmpdir/new1.img"; truncate -s 8M "$tmpdir/new1.img"
  "$CTL" -c "$ctl" rate 2000000 >/dev/null || fail "rate"
  "$CTL" -c "$ctl" replace 1 "$tmpdir/new1.img" >/dev/null || fail "replace 1"
}

make_members $n 8M
set_args
ctl_serve m=$m chunk=$chunk create=true
size=$(nbdinfo --size "$uri")
stripes=$(( size / width ))
head -c "$size" /dev/urandom >"$tmpdir/expect"
nbdcopy "$tmpdir/expect" "$uri" || fail "fill"
"$CTL" -c "$ctl" fail 1 || fail "fail 1"
stop_nbdkit "$pid"
snapshot_members "$tmpdir/snap"
cp "$tmpdir/expect" "$tmpdir/expect0"

echo "=== 1. small writes below the front, kill -9, restart without the replacement"
ctl_serve
truncate -s 8M "$tmpdir/new1.img"
"$CTL" -c "$ctl" rate 1000000 >/dev/null || fail "rate"
"$CTL" -c "$ctl" replace 1 "$tmpdir/new1.img" >/dev/null || fail "replace 1"
wait_front 12
small_writes 1 12
[ "$(ctl_json 's["rebuild"]["state"]')" = running ] || fail "the rebuild ended"
crash_nbdkit "$pid"; rm -f "$ctl"
ctl_serve
[ "$(ctl_json 's["members"][1]["state"]')" != active ] || fail "member 1 active"
verify "the replacement left out after a crash"
stop_nbdkit "$pid"
echo "journal below the front: OK"

echo "=== 2. a shutdown during a rebuild; the restart with the replacement resumes it"
begin_rebuild
wait_front 20
stop_nbdkit "$pid"
at=$(sed -n 's/.*rebuild of member 1 paused at shutdown after \([0-9]*\) of.*/\1/p' "$nbdkit_log")
[ -n "$at" ] && [ "$at" -gt 20 ] || fail "not paused: $(grep -i rebuild "$nbdkit_log")"
"$CTL" examine "${members[0]}" | grep -q "rebuild .*of member 1 .*checkpoint at stripe $at of $stripes" ||
  fail "checkpoint not recorded: $("$CTL" examine "${members[0]}" | grep -i rebuild)"
saved=("${members[@]}")
members[1]=$tmpdir/new1.img
set_args
ctl_serve resync-rate=2000000
grep -q "member 1 (.*new1.img) is being rebuilt: resumes at stripe $at of $stripes" "$nbdkit_log" ||
  fail "start: $(grep -i 'rebuil\|degraded' "$nbdkit_log")"
wait_log "resuming the rebuild of member 1 (.*new1.img) at stripe $at" ||
  fail "not resumed: $(grep -i rebuil "$nbdkit_log")"
[ "$(ctl_json 's["members"][1]["state"]')" = rebuilding ] || fail "member 1 not rebuilding"
verify "resumed, while rebuilding"
"$CTL" -c "$ctl" rate 0 >/dev/null
timeout 60 "$CTL" -c "$ctl" wait | grep -q '^rebuild done: 100.0%' || fail "wait"
grep -q "rebuild of member 1 (.*) done" "$nbdkit_log" || fail "not done"
[ "$(ctl_json 's["state"]')" = healthy ] || fail "not healthy: $(ctl_json 's["state"]')"
verify "rebuild resumed after a shutdown"
stop_nbdkit "$pid"
check_parity $k $m $chunk rs "${members[@]}"
"$CTL" examine "${members[1]}" | grep -q 'rebuilding' && fail "still a replacement"
echo "resumed after a shutdown: OK"

echo "=== 3. kill -9 during a rebuild with writes below and above its front"
members=("${saved[@]}")
set_args
begin_rebuild
wait_front 30
sleep 1.2                               # a checkpoint past stripe 0
small_writes 0 60                       # below and above the front
# Hold the front still before reading it: the batches in flight end and
# at 1 byte/s no other is given out (nor a checkpoint taken), so the
# checkpoint at the kill is at or below front0.
"$CTL" -c "$ctl" rate 1 >/dev/null || fail "rate 1"
front0=$(rebuild_front)
for (( i = 0; i < 50; i++ )); do
  sleep 0.2
  now=$(rebuild_front)
  [ "$now" = "$front0" ] && break
  front0=$now
done
crash_nbdkit "$pid"; rm -f "$ctl"
members[1]=$tmpdir/new1.img
set_args
ctl_serve
wait_log 'resuming the rebuild of member 1 ' || true
at=$(sed -n 's/.*resuming the rebuild of member 1 (.*) at stripe \([0-9]*\).*/\1/p' "$nbdkit_log")
[ -n "$at" ] || fail "not resumed: $(grep -i 'rebuil\|journal\|degraded' "$nbdkit_log")"
[ "$at" -gt 0 ] && [ "$at" -le "$front0" ] || fail "resumed at stripe $at (front was $front0)"
verify "resumed after kill -9, while rebuilding"
"$CTL" -c "$ctl" rate 0 >/dev/null
timeout 60 "$CTL" -c "$ctl" wait | grep -q '^rebuild done: 100.0%' || fail "wait"
[ "$(ctl_json 's["state"]')" = healthy ] || fail "not healthy"
verify "rebuild resumed after kill -9"
stop_nbdkit "$pid"
check_parity $k $m $chunk rs "${members[@]}"
echo "  resumed at stripe $at of $stripes (the front was at $front0)"
echo "resumed after kill -9: OK"

echo "=== 4. the replacement of an abandoned rebuild is not used"
members=("${saved[@]}")
set_args
restore_members "$tmpdir/snap"
cp "$tmpdir/expect0" "$tmpdir/expect"
ctl_serve
rm -f "$tmpdir/new1.img" "$tmpdir/other1.img"
truncate -s 8M "$tmpdir/new1.img" "$tmpdir/other1.img"
"$CTL" -c "$ctl" rate 2000000 >/dev/null || fail "rate"
"$CTL" -c "$ctl" replace 1 "$tmpdir/new1.img" >/dev/null || fail "replace 1"
wait_front 5
stop_nbdkit "$pid"
ctl_serve                               # without it: member 1 failed
"$CTL" -c "$ctl" rate 2000000 >/dev/null || fail "rate"
"$CTL" -c "$ctl" replace 1 "$tmpdir/other1.img" >/dev/null || fail "replace 1 again"
wait_front 5
stop_nbdkit "$pid"
members[1]=$tmpdir/new1.img             # the first one, abandoned
set_args
ctl_serve
grep -q "member 1 (.*new1.img) is the replacement of a rebuild that was abandoned" "$nbdkit_log" ||
  fail "$(grep -i 'member 1' "$nbdkit_log")"
grep -q 'resuming the rebuild' "$nbdkit_log" && fail "an abandoned rebuild resumed"
[ "$(ctl_json 's["members"][1]["state"]')" != active ] || fail "member 1 active"
verify "the abandoned replacement not used"
stop_nbdkit "$pid"
members[1]=$tmpdir/other1.img
set_args
ctl_serve
wait_log "resuming the rebuild of member 1 (.*other1.img)" || fail "the recorded rebuild did not resume"
"$CTL" -c "$ctl" rate 0 >/dev/null
timeout 60 "$CTL" -c "$ctl" wait >/dev/null || fail "wait"
verify "the recorded rebuild finished"
stop_nbdkit "$pid"
check_parity $k $m $chunk rs "${members[@]}"
echo "abandoned replacement: OK"

echo "=== 5. a replacement left out while the array is written is not resumed"
members=("${saved[@]}")
set_args
begin_rebuild
wait_front 20
stop_nbdkit "$pid"
grep -q 'rebuild of member 1 paused at shutdown' "$nbdkit_log" || fail "not paused"
ctl_serve                               # without it: member 1 failed
head -c "$size" /dev/urandom >"$tmpdir/expect"
nbdcopy "$tmpdir/expect" "$uri" || fail "rewrite"
stop_nbdkit "$pid"
members[1]=$tmpdir/new1.img
set_args
ctl_serve
grep -q 'resuming the rebuild' "$nbdkit_log" && fail "a replacement that missed writes resumed"
[ "$(ctl_json 's["members"][1]["state"]')" != active ] || fail "member 1 active"
verify "the left-out replacement not used"
stop_nbdkit "$pid"
echo "left-out replacement: OK"
echo "$0: PASS"
