#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Online replace and rebuild (gpuraidctl replace, rebuild.h), 4+2, 16K
# chunks:
#   1. a failed member rebuilt onto a blank file while a client writes:
#      wait returns 0, every byte reads back, every stripe's parity is
#      consistent with the new member in place, the status is healthy;
#   2. the rebuilt member carries the data: a restart is healthy, and with
#      two other members gone every byte still reads back;
#   3. another member failing during a rebuild: the rebuild goes on
#      without it and ends with the array degraded by that one only;
#   3b. the replacement failing (chattr +i): the rebuild stops, wait
#      exits 1, the member stays failed;
#   4. a shutdown and a kill -9 during a rebuild, restarted with the old
#      member list (the replacement not given): the member stays failed,
#      the replacement's superblock says it is one being rebuilt (never
#      taken for a member), the data reads back, and a new replace
#      finishes (resuming with the replacement: test-rebuild-resume.sh);
#   5. refusals, each one line with nothing written: an active member, a
#      member's own file, too small, no such file, another array's member,
#      a member being rebuilt;
#   6. a crash (strace, SIGKILL) at each step of the superblock update
#      that ends a rebuild: every restart with the replacement starts,
#      every byte reads back, and the member is live (at once, or after
#      the rebuild resumed from its checkpoint), every stripe's parity
#      consistent;
#   7. two members rebuilt in one pass: the second replaced while the
#      first's rebuild runs joins it (the pass goes back to stripe 0), a
#      shutdown pauses both, the restart with both replacements resumes
#      both, and under writes the pass ends with the array healthy, every
#      byte and stripe verified.

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_cmd nbdcopy python3 cmp
requires_ctl

k=4 m=2 n=6 chunk=16384
put ()          # put FILE REQSIZE: write FILE at offset 0, and expect it
{
  nbdcopy --request-size="$2" "$1" "$uri" || fail "write $1"
  dd if="$1" of="$tmpdir/expect" conv=notrunc status=none
}
# fresh_array SIZE PREFIX: create a k+m array of SIZE members, serve it
# and fill it with random data (kept in expect).
fresh_array ()
{
  make_members $n "$1" "$2"
  set_args
  ctl_serve m=$m chunk=$chunk create=true
  size=$(nbdinfo --size "$uri")
  head -c "$size" /dev/urandom >"$tmpdir/expect"
  nbdcopy "$tmpdir/expect" "$uri" || fail "fill"
}

fresh_array 24M disk

echo "=== 1. replace and rebuild under writes"
"$CTL" -c "$ctl" fail 2 || fail "fail 2"
head -c 8M /dev/urandom >"$tmpdir/w1"
put "$tmpdir/w1" 65536                  # degraded: member 2 misses these
truncate -s 24M "$tmpdir/new2.img"
"$CTL" -c "$ctl" rate 30000000 || fail "rate"
"$CTL" -c "$ctl" replace 2 "$tmpdir/new2.img" | tee "$tmpdir/out" || fail "replace"
grep -q 'rebuilding member 2 onto' "$tmpdir/out" || fail "replace's answer"
[ "$(ctl_json 's["state"]')" = rebuilding ] || fail "state $(ctl_json 's["state"]')"
[ "$(ctl_json 's["members"][2]["state"]')" = rebuilding ] || fail "member 2 not rebuilding"
verify "while rebuilding"
head -c 16M /dev/urandom >"$tmpdir/w2"
put "$tmpdir/w2" 4096                   # RMW writes across the front
[ "$(ctl_json 's["rebuild"]["state"]')" = running ] ||
  fail "the rebuild ended before the writes did (not concurrent)"
timeout 120 "$CTL" -c "$ctl" wait | tee "$tmpdir/wait" || fail "wait: exit status"
grep -q '^rebuild done: 100.0%' "$tmpdir/wait" || fail "wait: $(cat "$tmpdir/wait")"
[ "$(ctl_json 's["state"]')" = healthy ] || fail "not healthy after the rebuild"
[ "$(ctl_json 's["members"][2]["path"]')" = "$tmpdir/new2.img" ] || fail "member 2's path"
grep -q 'rebuild of member 2: 50%' "$nbdkit_log" || fail "no progress logged"
verify "after the rebuild"
stop_nbdkit "$pid"
members[2]=$tmpdir/new2.img
set_args
check_parity $k $m $chunk rs "${members[@]}"
[ -z "$(sb_failed_bits "${members[0]}")" ] || fail "still recorded failed"
echo "rebuild: OK"

echo "=== 2. the rebuilt member carries the data"
ctl_serve
grep -qi 'degraded\|missing' "$nbdkit_log" && fail "restart not healthy: $(grep -i 'degraded\|missing' "$nbdkit_log")"
verify "restarted"
stop_nbdkit "$pid"
mv "${members[0]}" "$tmpdir/gone0"; mv "${members[3]}" "$tmpdir/gone3"
ctl_serve
verify "members 0 and 3 gone: rebuilt through member 2"
stop_nbdkit "$pid"
mv "$tmpdir/gone0" "${members[0]}"; mv "$tmpdir/gone3" "${members[3]}"
echo "rebuilt member: OK"

echo "=== 3. another member fails during a rebuild"
ctl_serve
"$CTL" -c "$ctl" fail 1 || fail "fail 1"
truncate -s 24M "$tmpdir/new1.img"
"$CTL" -c "$ctl" rate 20000000 || fail "rate"
"$CTL" -c "$ctl" replace 1 "$tmpdir/new1.img" || fail "replace 1"
sleep 0.5
"$CTL" -c "$ctl" fail 4 || fail "fail 4 during the rebuild"
head -c 4M /dev/urandom >"$tmpdir/w3"
put "$tmpdir/w3" 65536
"$CTL" -c "$ctl" rate 0
timeout 120 "$CTL" -c "$ctl" wait || fail "wait"
[ "$(ctl_json 's["state"]')" = degraded ] || fail "state $(ctl_json 's["state"]')"
[ "$(ctl_json '[mb["state"] for mb in s["members"]]')" = "['active', 'active', 'active', 'active', 'failed', 'active']" ] ||
  fail "member states $(ctl_json '[mb["state"] for mb in s["members"]]')"
verify "member 1 rebuilt with member 4 failed"
stop_nbdkit "$pid"
members[1]=$tmpdir/new1.img
set_args
echo "failure during the rebuild: OK"

echo "=== 3b. the replacement fails during its rebuild"
ctl_serve
truncate -s 24M "$tmpdir/bad4.img"
if chattr +i "$tmpdir/bad4.img" 2>/dev/null && chattr -i "$tmpdir/bad4.img"; then
  cleanup_fn chattr -i "$tmpdir/bad4.img"
  "$CTL" -c "$ctl" rate 2000000 || fail "rate"
  "$CTL" -c "$ctl" replace 4 "$tmpdir/bad4.img" || fail "replace 4"
  sleep 0.5
  chattr +i "$tmpdir/bad4.img"          # its next write fails (EPERM)
  timeout 60 "$CTL" -c "$ctl" wait >"$tmpdir/wait" 2>&1 && fail "wait: 0 for a failed rebuild"
  grep -q '^rebuild failed' "$tmpdir/wait" || fail "wait: $(cat "$tmpdir/wait")"
  chattr -i "$tmpdir/bad4.img"
  grep -q 'replacement member 4 .* failed: write' "$nbdkit_log" || fail "not logged: $(grep -i rebuild "$nbdkit_log")"
  [ "$(ctl_json 's["members"][4]["state"]')" = failed ] || fail "member 4: $(ctl_json 's["members"][4]')"
  [ "$(ctl_json 's["state"]')" = degraded ] || fail "state $(ctl_json 's["state"]')"
  verify "after the replacement failed"
  echo "replacement failing: OK"
else
  echo "replacement failing: SKIPPED (chattr +i not supported in $tmpdir)"
fi
stop_nbdkit "$pid"

echo "=== 4. shutdown and kill -9 during a rebuild"
ctl_serve
truncate -s 24M "$tmpdir/new4.img"
"$CTL" -c "$ctl" rate 4000000 || fail "rate"
"$CTL" -c "$ctl" replace 4 "$tmpdir/new4.img" || fail "replace 4"
sleep 1
stop_nbdkit "$pid"
grep -q 'rebuild of member 4 paused at shutdown' "$nbdkit_log" || fail "$(grep -i rebuild "$nbdkit_log")"
"$CTL" examine "$tmpdir/new4.img" | grep -q 'this member is a replacement being rebuilt' ||
  fail "the replacement's superblock: $("$CTL" examine "$tmpdir/new4.img")"
[ "$(sb_failed_bits "${members[0]}")" = "4 " ] || fail "failed set $(sb_failed_bits "${members[0]}")"
ctl_serve
[ "$(ctl_json 's["members"][4]["state"]')" = missing ] || fail "member 4: $(ctl_json 's["members"][4]')"
verify "after a rebuild stopped at shutdown"
"$CTL" -c "$ctl" rate 4000000 || fail "rate"   # the kill lands mid-rebuild
"$CTL" -c "$ctl" replace 4 "$tmpdir/new4.img" || fail "replace 4 again"
sleep 1
[ "$(ctl_json 's["members"][4]["state"]')" = rebuilding ] ||
  fail "member 4 before the kill: $(ctl_json 's["members"][4]')"
crash_nbdkit "$pid"
ctl_serve
grep -q 'member 4' "$nbdkit_log" || fail "member 4 not named missing after the crash"
verify "after a crash during the rebuild"
"$CTL" -c "$ctl" rate 0
"$CTL" -c "$ctl" replace 4 "$tmpdir/new4.img" || fail "replace 4 a third time"
timeout 120 "$CTL" -c "$ctl" wait || fail "wait"
[ "$(ctl_json 's["state"]')" = healthy ] || fail "not healthy"
verify "rebuilt after the crash"
stop_nbdkit "$pid"
members[4]=$tmpdir/new4.img
set_args
check_parity $k $m $chunk rs "${members[@]}"
echo "stopped and crashed rebuilds: OK"

echo "=== 5. refusals"
make_members 3 24M other
start_nbdkit -P "$tmpdir/o.pid" -U "$tmpdir/o.sock" "$PLUGIN" \
  $(member_args "${members[@]}") m=1 create=true || fail "other array"
stop_nbdkit "$tmpdir/o.pid"
other=${members[0]}
members=("${args[@]#member=}")
ctl_serve
truncate -s 8M "$tmpdir/small.img"
truncate -s 24M "$tmpdir/blank.img"
ctl_refused "active member" 'member is active' "$CTL" -c "$ctl" replace 3 "$tmpdir/blank.img"
"$CTL" -c "$ctl" fail 3 || fail "fail 3"
sha256sum "$other" "$tmpdir/blank.img" "${members[@]}" >"$tmpdir/sums"
ctl_refused "a member's file" 'is member 5 of this array' "$CTL" -c "$ctl" replace 3 "${members[5]}"
ctl_refused "too small" 'smaller than a member' "$CTL" -c "$ctl" replace 3 "$tmpdir/small.img"
ctl_refused "no such file" 'No such file' "$CTL" -c "$ctl" replace 3 "$tmpdir/nosuch.img"
ctl_refused "another array" 'another gpuraid array' "$CTL" -c "$ctl" replace 3 "$other"
ctl_refused "no such member" 'no such member' "$CTL" -c "$ctl" replace 9 "$tmpdir/blank.img"
sha256sum -c --quiet "$tmpdir/sums" 2>/dev/null ||
  { sha256sum -c "$tmpdir/sums" | grep -v ': OK'; fail "a refusal changed a file"; }
"$CTL" -c "$ctl" rate 1000000
"$CTL" -c "$ctl" replace 3 "$tmpdir/blank.img" || fail "replace 3"
truncate -s 24M "$tmpdir/blank0.img"
ctl_refused "being rebuilt" 'member is being rebuilt' "$CTL" -c "$ctl" replace 3 "$tmpdir/blank0.img"
"$CTL" -c "$ctl" rate 0
timeout 120 "$CTL" -c "$ctl" wait || fail "wait"
verify "after the refusals"
stop_nbdkit "$pid"
echo "refusals: OK"

echo "=== 6. a crash at each step of the rebuild's last superblock update"
# A rebuild begun and paused at once (shutdown), then resumed under
# strace, which kills the server at the rebuild thread's N-th fdatasync:
# N = 1 syncs the replacement, N = 2 to 7 the superblocks of members 0-5
# in turn (the update that makes member 2 live).  Every restart with the
# replacement given must end with member 2 live: at once when the update
# reached the array's newest superblock, else by resuming the rebuild.
if command -v strace >/dev/null; then
  fresh_array 8M c
  "$CTL" -c "$ctl" fail 2 || fail "fail 2"
  truncate -s 8M "$tmpdir/r2.img"
  "$CTL" -c "$ctl" rate 1 >/dev/null || fail "rate"
  "$CTL" -c "$ctl" replace 2 "$tmpdir/r2.img" >/dev/null || fail "replace 2"
  stop_nbdkit "$pid"
  grep -q 'rebuild of member 2 paused at shutdown' "$nbdkit_log" || fail "not paused"
  members[2]=$tmpdir/r2.img
  set_args
  snapshot_members "$tmpdir/csnap"
  live=0 resumed=0
  for at in 1 2 3 4 5 6 7; do
    restore_members "$tmpdir/csnap"
    rm -f "$tmpdir/strace.log"
    NBDKIT_WRAPPER="strace -f -qq -o $tmpdir/strace.log -e trace=fdatasync
      -e inject=fdatasync:signal=SIGKILL:when=$at" ctl_serve
    for (( i = 0; i < 100; i++ )); do
      kill -0 "$(cat "$pid" 2>/dev/null)" 2>/dev/null || break
      sleep 0.1
    done
    grep -q 'killed by SIGKILL' "$tmpdir/strace.log" ||
      { kill -9 "$(cat "$pid")"; fail "no crash at fdatasync $at"; }
    rm -f "$pid" "$ctl"
    ctl_serve
    # The start decides (member 2 rebuilding, or live at once); the
    # rebuild resumes, and says so, in the background once the start is
    # done: a grep right after the start could run first (under TSan it
    # did, counting resumptions as none).
    state=$(ctl_json 's["members"][2]["state"]')
    if [ "$state" = rebuilding ] ||
       grep -q 'resuming the rebuild of member 2' "$nbdkit_log"; then
      wait_log 'resuming the rebuild of member 2' ||
        fail "member 2 $state after a crash at fdatasync $at, no rebuild resumed"
      resumed=$(( resumed + 1 ))
      timeout 60 "$CTL" -c "$ctl" wait >/dev/null || fail "wait ($at)"
    fi
    verify "crash at the rebuild thread's fdatasync $at"
    state=$(ctl_json 's["members"][2]["state"]')
    stop_nbdkit "$pid"
    [ "$state" = active ] || fail "member 2 $state after a crash at fdatasync $at"
    check_parity $k $m $chunk rs "${members[@]}" >/dev/null
    live=$(( live + 1 ))
    echo "  crash at fdatasync $at: restarted, data verified, member 2 active ($resumed resumed so far)"
  done
  [ $resumed -gt 0 ] && [ $resumed -lt 7 ] || fail "want both: live at once and resumed ($resumed resumed)"
  echo "crash at the end of a rebuild: $live restarts with member 2 live ($resumed after resuming the rebuild): OK"
else
  echo "crash at the end of a rebuild: SKIPPED (no strace)"
fi

echo "=== 7. two members rebuilt in one pass"
fresh_array 8M p
"$CTL" -c "$ctl" fail 1 || fail "fail 1"
"$CTL" -c "$ctl" fail 4 || fail "fail 4"
head -c 2M /dev/urandom >"$tmpdir/w7"
put "$tmpdir/w7" 65536                  # degraded: 1 and 4 miss these
rm -f "$tmpdir/p1.img" "$tmpdir/p4.img"
truncate -s 8M "$tmpdir/p1.img" "$tmpdir/p4.img"
"$CTL" -c "$ctl" rate 2000000 >/dev/null || fail "rate"
"$CTL" -c "$ctl" replace 1 "$tmpdir/p1.img" >/dev/null || fail "replace 1"
for (( i = 0; i < 100; i++ )); do
  [ "$(ctl_json 's["rebuild"]["done_bytes"]')" -gt 0 ] && break
  sleep 0.1
done
"$CTL" -c "$ctl" replace 4 "$tmpdir/p4.img" >/dev/null || fail "replace 4 while 1 is rebuilt"
for (( i = 0; i < 50; i++ )); do
  grep -q 'rebuild of members 1, 4 goes on from stripe 0' "$nbdkit_log" && break
  sleep 0.1
done
grep -q 'rebuild of members 1, 4 goes on from stripe 0' "$nbdkit_log" ||
  fail "member 4 did not join: $(grep -i rebuil "$nbdkit_log")"
[ "$(ctl_json 's["rebuild"]["members"]')" = "[1, 4]" ] ||
  fail "status: $(ctl_json 's["rebuild"]')"
[ "$(ctl_json 's["members"][4]["state"]')" = rebuilding ] || fail "member 4 not rebuilding"
verify "two members being rebuilt"
stop_nbdkit "$pid"
grep -q 'rebuild of members 1, 4 paused at shutdown' "$nbdkit_log" ||
  fail "not paused: $(grep -i rebuil "$nbdkit_log")"
"$CTL" examine "${members[0]}" | grep -q 'rebuild .*of member 1,4 ' ||
  fail "record: $("$CTL" examine "${members[0]}" | grep -i rebuild)"
members[1]=$tmpdir/p1.img members[4]=$tmpdir/p4.img
set_args
ctl_serve resync-rate=2000000
wait_log 'resuming the rebuild of member 1 (.*p1.img)' &&
  wait_log 'resuming the rebuild of member 4 (.*p4.img)' ||
  fail "not both resumed: $(grep -i rebuil "$nbdkit_log")"
[ "$(ctl_json 's["rebuild"]["members"]')" = "[1, 4]" ] ||
  fail "status after the restart: $(ctl_json 's["rebuild"]')"
head -c 4M /dev/urandom >"$tmpdir/w8"
put "$tmpdir/w8" 4096                   # across both fronts
"$CTL" -c "$ctl" rate 0 >/dev/null
timeout 60 "$CTL" -c "$ctl" wait | grep -q '^rebuild done: 100.0%' || fail "wait"
[ "$(ctl_json 's["state"]')" = healthy ] || fail "not healthy: $(ctl_json 's["state"]')"
verify "after the rebuild of two members"
stop_nbdkit "$pid"
check_parity $k $m $chunk rs "${members[@]}"
[ -z "$(sb_failed_bits "${members[0]}")" ] || fail "still recorded failed"
"$CTL" examine "${members[1]}" "${members[4]}" | grep -q 'rebuilding' && fail "still replacements"
echo "two members in one pass: OK"
echo "$0: PASS"
