#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Hot-replace (issue 23, 4): gpuraidctl replace --live INDEX PATH copies
# an active member onto PATH while it stays in service, then PATH takes
# its place in one superblock update.  4+2, 16K chunks, block checksums:
#   1. under writes and reads, rate-limited so that they overlap the
#      copy: a status poller never sees a member other than active nor the
#      array other than healthy; gpuraidctl wait follows it; the replaced
#      event; every byte reads back; PATH is member 2 in the status and
#      in its superblock, parity checks offline with it, a scrub finds
#      nothing (its block checksums right); the old file is stale (two
#      events behind): a start with the old member list leaves it out
#      (degraded, said), scan= assembles the current set;
#   2. a shutdown during the copy: abandoned, said, the member stays; the
#      replacement is never taken (its superblock says so); it starts over
#      and ends;
#   3. kill -9 during the copy: the restart with the old member list is
#      healthy, every byte right;
#   4. the replacement failing (an NBD export behind nbdkit's error filter,
#      its writes failing from a moment on): the copy ends, said once,
#      the member stays active, the array healthy;
#   5. the member failing during the copy (gpuraidctl fail): the copy ends
#      and says so; gpuraidctl replace rebuilds the member onto the same
#      file;
#   6. refusals, one line, nothing written: a member not in service,
#      another member's file, a file too small, another array's member,
#      while a scrub runs, an index out of range.
source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_ctl
requires_cmd nbdcopy nbdinfo python3 cmp

k=4 m=2 n=6 chunk=16384
width=$(( k * chunk ))

# poll_states: until $tmpdir/stop-poll exists, the array's and members'
# states, one line each time, into $tmpdir/states.
poll_states ()
{
  rm -f "$tmpdir/stop-poll"
  : >"$tmpdir/states"
  while [ ! -e "$tmpdir/stop-poll" ]; do
    ctl_json 's["state"], sorted(set(mb["state"] for mb in s["members"] if mb["index"] is not None))' \
      >>"$tmpdir/states" 2>/dev/null
    sleep 0.05
  done
}

make_members $n 32M
set_args
ctl_serve m=$m chunk=$chunk create=true
size=$(nbdinfo --size "$uri")
head -c "$size" /dev/urandom >"$tmpdir/expect"
nbdcopy "$tmpdir/expect" "$uri" || fail "fill"

echo "=== 1. replace --live under I/O"
truncate -s 32M "$tmpdir/new2.img"
"$CTL" -c "$ctl" monitor --json >"$tmpdir/events" 2>&1 &
mon=$!
cleanup_fn _kill_pid "$mon"
poll_states &
poller=$!
"$CTL" -c "$ctl" rate 40M >/dev/null
"$CTL" -c "$ctl" replace --live 2 "$tmpdir/new2.img" >"$tmpdir/out" ||
  fail "replace --live: $(cat "$tmpdir/out")"
grep -q "copying member 2 onto $tmpdir/new2.img while it stays in service" "$tmpdir/out" ||
  fail "said: $(cat "$tmpdir/out")"
write_ref $(( 5 * width )) $(( 64 * width ))
write_ref $(( size - 80 * width )) $(( 40 * width ))
nbdcopy "$uri" "$tmpdir/back1" || fail "read during the copy"
"$CTL" -c "$ctl" status | grep -q "^replace    member 2 onto $tmpdir/new2.img (live)" ||
  fail "status: $("$CTL" -c "$ctl" status)"
"$CTL" -c "$ctl" wait >"$tmpdir/wait" || fail "wait: $(cat "$tmpdir/wait")"
grep -q "^replace done: 100.0%" "$tmpdir/wait" || fail "wait: $(cat "$tmpdir/wait")"
touch "$tmpdir/stop-poll"; wait "$poller"
[ "$(sort -u "$tmpdir/states")" = "healthy ['active']" ] ||
  fail "a state other than healthy/active seen: $(sort -u "$tmpdir/states")"
echo "  $(wc -l <"$tmpdir/states") status polls, all healthy with every member active"
[ "$(ctl_json 's["members"][2]["path"]')" = "$tmpdir/new2.img" ] ||
  fail "member 2 is $(ctl_json 's["members"][2]["path"]')"
sleep 0.3
kill "$mon"
grep -q "\"event\": \"replaced\", .*\"member\": 2, \"path\": \"$tmpdir/new2.img\", \"old\": \"${members[2]}\"" \
  "$tmpdir/events" || fail "no replaced event: $(cat "$tmpdir/events")"
verify "after the live replacement"
"$CTL" -c "$ctl" rate 0 >/dev/null
"$CTL" -c "$ctl" scrub >/dev/null && "$CTL" -c "$ctl" wait >/dev/null || fail "scrub"
[ "$(ctl_json 's["scrub"]["mismatched_stripes"], s["scrub"]["cksum_repaired"]')" = "0 0" ] ||
  fail "scrub: $(ctl_json 's["scrub"]')"
stop_nbdkit "$pid"
old2=${members[2]}
members[2]=$tmpdir/new2.img
check_parity $k $m $chunk rs "${members[@]}"
"$CTL" examine "$tmpdir/new2.img" | grep -q "^  index          2$" || fail "new2's superblock"
# The old file: stale.
members[2]=$old2
set_args
ctl_serve
grep -q "member 2 ($old2) is stale" "$nbdkit_log" || fail "the old file not stale: $(grep warning "$nbdkit_log")"
[ "$(ctl_json 's["state"]')" = degraded ] || fail "not degraded without the new file"
stop_nbdkit "$pid"
mkdir -p "$tmpdir/pool"
members[2]=$tmpdir/new2.img
for f in "${members[@]}" "$old2"; do ln -s "$f" "$tmpdir/pool/"; done
uuid=$(array_uuid "${members[0]}")
args=()
ctl_serve scan="$tmpdir/pool/*" uuid="$uuid"
wait_healthy
[ "$(ctl_json 's["members"][2]["path"]')" = "$tmpdir/pool/new2.img" ] ||
  fail "scan took $(ctl_json 's["members"][2]["path"]')"
verify "assembled by scan after the live replacement"
stop_nbdkit "$pid"
set_args
echo "OK"

echo "=== 2. a shutdown during the copy"
ctl_serve resync-rate=8M
truncate -s 32M "$tmpdir/new4.img"
"$CTL" -c "$ctl" replace --live 4 "$tmpdir/new4.img" >/dev/null || fail "replace --live 4"
sleep 1
stop_nbdkit "$pid"
grep -q "live replacement of member 4 onto $tmpdir/new4.img stopped (shutdown) after" "$nbdkit_log" ||
  fail "not said: $(grep warning "$nbdkit_log")"
"$CTL" examine "$tmpdir/new4.img" | grep -q "a replacement being rebuilt" ||
  fail "new4's superblock does not keep it out"
ctl_serve
wait_healthy
[ "$(ctl_json 's["members"][4]["path"]')" = "${members[4]}" ] || fail "member 4 moved"
"$CTL" -c "$ctl" replace --live 4 "$tmpdir/new4.img" >/dev/null || fail "replace --live 4 again"
"$CTL" -c "$ctl" wait >/dev/null || fail "wait"
wait_healthy
verify "after the second live replacement"
members[4]=$tmpdir/new4.img
stop_nbdkit "$pid"
set_args
echo "OK"

echo "=== 3. kill -9 during the copy"
ctl_serve resync-rate=8M
truncate -s 32M "$tmpdir/new0.img"
"$CTL" -c "$ctl" replace --live 0 "$tmpdir/new0.img" >/dev/null || fail "replace --live 0"
write_ref $(( 3 * width )) $(( 16 * width ))
sleep 0.5
crash_nbdkit "$pid"
ctl_serve
wait_healthy
"$CTL" -c "$ctl" wait >/dev/null || fail "the resync after kill -9"
verify "after kill -9 during the copy"
stop_nbdkit "$pid"
check_parity $k $m $chunk rs "${members[@]}"
echo "OK"

echo "=== 4. the replacement fails"
if run_nbdkit "$PLUGIN" --dump-plugin | grep -q '^gpuraid_nbd_members=yes$' &&
   [ -f "$(nbdkit --dump-config | sed -n 's/^filterdir=//p')/nbdkit-error-filter.so" ]; then
  truncate -s 32M "$tmpdir/bad.img"
  nbdkit -P "$tmpdir/bad.pid" -U "$tmpdir/bad.sock" --filter=error file "$tmpdir/bad.img" \
    error-pwrite=EIO error-pwrite-rate=100% error-pwrite-file="$tmpdir/trigger" ||
    fail "the failing replacement's server"
  stopbad () { [ ! -f "$tmpdir/bad.pid" ] || _kill_pid "$(cat "$tmpdir/bad.pid")"; }
  cleanup_fn stopbad
  ctl_serve resync-rate=8M
  "$CTL" -c "$ctl" replace --live 1 "nbd+unix:///?socket=$tmpdir/bad.sock" >/dev/null ||
    fail "replace --live 1"
  sleep 0.5
  touch "$tmpdir/trigger"
  "$CTL" -c "$ctl" wait >/dev/null && fail "wait says the failed copy completed"
  grep -q "live replacement of member 1 (nbd+unix.*) failed: write: " "$nbdkit_log" ||
    fail "the failure not said: $(grep -i error "$nbdkit_log" | tail -n 3)"
  [ "$(grep -c 'live replacement of member 1 (nbd+unix.*) failed' "$nbdkit_log")" = 1 ] ||
    fail "said more than once"
  wait_healthy
  [ "$(ctl_json 's["members"][1]["path"]')" = "${members[1]}" ] || fail "member 1 moved"
  verify "after the replacement failed"
  stop_nbdkit "$pid"
  echo "OK"
else
  echo "SKIP: no NBD members or no error filter"
fi

echo "=== 5. the member fails during the copy"
ctl_serve resync-rate=8M
truncate -s 32M "$tmpdir/new3.img"
"$CTL" -c "$ctl" replace --live 3 "$tmpdir/new3.img" >/dev/null || fail "replace --live 3"
sleep 0.5
"$CTL" -c "$ctl" fail 3 >/dev/null || fail "fail 3"
"$CTL" -c "$ctl" wait >/dev/null && fail "wait says the copy completed"
grep -q "live replacement of member 3 onto $tmpdir/new3.img failed .*member 3 stays on .*, which has failed (gpuraidctl replace rebuilds it)" \
  "$nbdkit_log" || fail "not said: $(grep warning "$nbdkit_log" | tail -n 2)"
"$CTL" -c "$ctl" rate 0 >/dev/null
"$CTL" -c "$ctl" replace 3 "$tmpdir/new3.img" >/dev/null || fail "replace 3"
"$CTL" -c "$ctl" wait >/dev/null || fail "wait"
wait_healthy
verify "after the member failed during its live replacement"
members[3]=$tmpdir/new3.img
stop_nbdkit "$pid"
set_args
echo "OK"

echo "=== 6. refusals"
ctl_serve
"$CTL" -c "$ctl" fail 5 >/dev/null || fail "fail 5"
truncate -s 32M "$tmpdir/r.img"
truncate -s 1M "$tmpdir/small.img"
ctl_refused "not in service" "replace --live 5: .*: the member is not in service" \
  "$CTL" -c "$ctl" replace --live 5 "$tmpdir/r.img"
ctl_refused "another member's file" "replace --live 0: .*: it is member 1 of this array" \
  "$CTL" -c "$ctl" replace --live 0 "${members[1]}"
ctl_refused "too small" "replace --live 0: .*small.img: smaller than a member" \
  "$CTL" -c "$ctl" replace --live 0 "$tmpdir/small.img"
ctl_refused "no such member" "replace --live 9: no such member" \
  "$CTL" -c "$ctl" replace --live 9 "$tmpdir/r.img"
"$CTL" -c "$ctl" re-add 5 >/dev/null || fail "re-add 5"
"$CTL" -c "$ctl" wait >/dev/null
"$CTL" -c "$ctl" rate 1M >/dev/null
"$CTL" -c "$ctl" scrub >/dev/null || fail "scrub"
ctl_refused "while a scrub runs" "replace --live 0: .*: a resync, rebuild, scrub or live replacement is running" \
  "$CTL" -c "$ctl" replace --live 0 "$tmpdir/r.img"
"$CTL" -c "$ctl" scrub --stop >/dev/null
cmp <(head -c 4096 "$tmpdir/r.img") <(head -c 4096 /dev/zero) || fail "r.img written"
stop_nbdkit "$pid"
echo "OK"
