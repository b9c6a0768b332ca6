#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Re-add (issue 23, 3): a member that comes back after an outage is
# resynced from the degraded map (bitmap.h), not rebuilt whole.  4+2, 16K
# chunks, 32M members, bitmap-chunk=512K (map regions of 32 stripes, 2
# MiB of array data), block checksums, the array filled first:
#   1. a member missing at start, 1 % of the array written meanwhile
#      (contiguous), the member given again at the next start: re-added
#      at once (log, events rebuild-started and re-added), the member I/O
#      of the re-add at most 5 % of a full rebuild's (measured on the same
#      array: replace onto a blank file), every byte reads back, the
#      offline checker finds every stripe consistent, the scrub finds
#      nothing, the superblocks record no failure and no degraded map;
#   2. gpuraidctl fail (the operator), writes, a restart: the member is
#      not re-added (removed by the operator: said so), gpuraidctl re-add
#      brings it back by the map;
#   3. a remote member (an NBD export on a Unix socket) whose server is
#      killed mid-writes and started again: gpuraidctl re-add INDEX (its
#      path as it was) resyncs it by the map;
#   4. a kill -9 during a re-add: the restart resumes it (still by the
#      map: the member's superblock says READD) and it ends right;
#   5. an old copy of the member (from before the degraded map began):
#      gpuraidctl re-add does a full rebuild onto it and says so;
#   6. refusals, one line, nothing written: re-add of an active member, of
#      a file with no superblock, of another array's member, of another
#      member's file, of a member being rebuilt.
source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_ctl
requires_cmd nbdcopy nbdinfo python3 cmp

k=4 m=2 n=6 chunk=16384
width=$(( k * chunk ))

# io_total: the members' bytes read and written since the start (JSON).
io_total () { ctl_json 's["io"]["read_bytes"] + s["io"]["written_bytes"]'; }

# sb_since FILE: the superblock's degraded-since event (offset 144).
sb_since () { od -An -v -tu8 -j 144 -N 8 "$1" | tr -d ' '; }

make_members $n 32M
set_args
ctl_serve m=$m chunk=$chunk create=true bitmap-chunk=512K
size=$(nbdinfo --size "$uri")
head -c "$size" /dev/urandom >"$tmpdir/expect"
nbdcopy "$tmpdir/expect" "$uri" || fail "fill"
one=$(( size / 100 / width * width ))
stop_nbdkit "$pid"

echo "=== 1. a member missing at start comes back: re-added by the map"
saved=${members[3]}
members[3]=$tmpdir/nowhere.img
set_args
ctl_serve
write_ref $(( size / 3 / width * width )) "$one"
[ "$(sb_since "${members[0]}")" != 0 ] || fail "no degraded map recorded"
stop_nbdkit "$pid"
members[3]=$saved
set_args
"$CTL" examine "${members[@]}" | grep -q "slot 3: re-add" ||
  fail "examine does not say member 3 is re-added: $("$CTL" examine "${members[@]}")"
nbdkit_opts= ctl_serve
wait_healthy
readd_io=$(io_total)
grep -q "member 3 .* is back: re-adding it" "$nbdkit_log" || fail "no re-add said: $(cat "$nbdkit_log")"
grep -q "re-add of member 3 .* done" "$nbdkit_log" || fail "re-add not done"
verify "after the re-add"
"$CTL" -c "$ctl" scrub >/dev/null && "$CTL" -c "$ctl" wait >/dev/null ||
  fail "scrub after the re-add"
[ "$(ctl_json 's["scrub"]["mismatched_stripes"]')" = 0 ] || fail "the scrub found a mismatch"
[ "$(ctl_json 'sum(mb["cksum_errors"] for mb in s["members"] if mb["index"] is not None)')" = 0 ] ||
  fail "checksum errors after the re-add"
# The re-add may end before a monitor connects: the event as logged.
grep -q "event [0-9]*: re-added member 3 " "$nbdkit_log" ||
  fail "no re-added event: $(grep 'event [0-9]*:' "$nbdkit_log")"
# A full rebuild of the same member, for the measure.
truncate -s 32M "$tmpdir/blank.img"
"$CTL" -c "$ctl" fail 3 >/dev/null || fail "fail 3"
before=$(io_total)
"$CTL" -c "$ctl" replace 3 "$tmpdir/blank.img" >/dev/null || fail "replace"
"$CTL" -c "$ctl" wait >/dev/null || fail "wait"
full_io=$(( $(io_total) - before ))
echo "re-add moved $readd_io bytes, a full rebuild $full_io"
python3 -c "import sys; sys.exit(0 if $readd_io <= 0.05 * $full_io else 1)" ||
  fail "the re-add moved $readd_io bytes, more than 5 % of a full rebuild's $full_io"
stop_nbdkit "$pid"
members[3]=$tmpdir/blank.img
set_args
check_parity $k $m $chunk rs "${members[@]}"
for f in "${members[@]}"; do
  [ "$(sb_failed_bits "$f")$(sb_since "$f")" = 0 ] ||
    fail "$f: failed [$(sb_failed_bits "$f")] degraded since $(sb_since "$f")"
done
echo "OK"

echo "=== 2. failed by the operator: not re-added at a start; gpuraidctl re-add"
ctl_serve
"$CTL" -c "$ctl" fail 2 >/dev/null || fail "fail 2"
write_ref $(( size / 2 / width * width )) "$one"
stop_nbdkit "$pid"
ctl_serve
grep -q "member 2 (.*) is failed by the operator at event [0-9]* (the array's is [0-9]*); gpuraidctl re-add brings it back" \
  "$nbdkit_log" || fail "not said: $(grep warning "$nbdkit_log")"
sleep 0.5
[ "$(ctl_json 's["members"][2]["state"]')" = missing ] ||
  fail "member 2 is $(ctl_json 's["members"][2]["state"]')"
"$CTL" -c "$ctl" re-add 2 >"$tmpdir/out" || fail "re-add 2"
grep -q "re-adding member 2 (${members[2]}): [0-9]* MiB written since it left rebuilt" "$tmpdir/out" ||
  fail "re-add 2 said: $(cat "$tmpdir/out")"
"$CTL" -c "$ctl" wait >/dev/null || fail "wait"
wait_healthy
verify "after gpuraidctl re-add"
stop_nbdkit "$pid"
check_parity $k $m $chunk rs "${members[@]}"
echo "OK"

echo "=== 3. a remote member's server goes away and comes back"
if run_nbdkit "$PLUGIN" --dump-plugin | grep -q '^gpuraid_nbd_members=yes$'; then
  f5=${members[5]}
  serve5 () { rm -f "$tmpdir/m5.sock"; nbdkit -P "$tmpdir/m5.pid" -U "$tmpdir/m5.sock" file "$f5" || fail "member 5 server"; }
  stop5 () { [ ! -f "$tmpdir/m5.pid" ] || _kill_pid "$(cat "$tmpdir/m5.pid")"; }
  serve5
  cleanup_fn stop5
  members[5]="nbd+unix:///?socket=$tmpdir/m5.sock"
  set_args
  ctl_serve remote-timeout=2 remote-retries=0
  kill -9 "$(cat "$tmpdir/m5.pid")"
  write_ref $(( size / 5 / width * width )) "$one"
  [ "$(ctl_json 's["members"][5]["state"]')" = failed ] ||
    fail "member 5 is $(ctl_json 's["members"][5]["state"]')"
  serve5
  "$CTL" -c "$ctl" re-add 5 >"$tmpdir/out" || fail "re-add 5"
  grep -q "re-adding member 5" "$tmpdir/out" || fail "re-add 5 said: $(cat "$tmpdir/out")"
  "$CTL" -c "$ctl" wait >/dev/null || fail "wait"
  wait_healthy
  verify "after the remote member's re-add"
  stop_nbdkit "$pid"
  _kill_pid "$(cat "$tmpdir/m5.pid")"
  members[5]=$f5
  set_args
  check_parity $k $m $chunk rs "${members[@]}"
  echo "OK"
else
  echo "SKIP: no NBD members in this build"
fi

echo "=== 4. kill -9 during a re-add: resumed by the map"
saved=${members[1]}
members[1]=$tmpdir/nowhere.img
set_args
ctl_serve
# Most of the array written while it is away: a re-add long enough to
# be killed in.
write_ref 0 $(( size / 2 / width * width ))
stop_nbdkit "$pid"
members[1]=$saved
set_args
ctl_serve resync-rate=8M
for (( i = 0; i < 100; i++ )); do
  [ "$(ctl_json 's["rebuild"] and s["rebuild"]["done_bytes"] or 0')" -gt 0 ] && break
  sleep 0.1
done
sleep 1
crash_nbdkit "$pid"
od -An -tu4 -j 52 -N 4 "${members[1]}" | grep -q . || fail "no superblock on member 1"
[ $(( $(od -An -tu4 -j 52 -N 4 "${members[1]}") & 0x48 )) = $(( 0x48 )) ] ||
  fail "member 1's own superblock does not say REBUILDING+READD"
ctl_serve
wait_log "resuming the rebuild of member 1" || fail "not resumed: $(grep warning "$nbdkit_log")"
"$CTL" -c "$ctl" wait >/dev/null || fail "wait"
wait_healthy
grep -q "re-add of member 1 .* done" "$nbdkit_log" || fail "the resumed rebuild was no re-add"
verify "after the resumed re-add"
stop_nbdkit "$pid"
check_parity $k $m $chunk rs "${members[@]}"
echo "OK"

echo "=== 5. an old copy: a full rebuild, said"
cp --sparse=always "${members[4]}" "$tmpdir/old4.img"
ctl_serve
write_ref 0 "$one"                        # the copy misses updates
stop_nbdkit "$pid"
ctl_serve
write_ref "$width" "$one"
"$CTL" -c "$ctl" fail 4 >/dev/null || fail "fail 4"
write_ref $(( 2 * width )) "$one"
"$CTL" -c "$ctl" re-add 4 "$tmpdir/old4.img" >"$tmpdir/out" || fail "re-add 4"
grep -q "member 4 (.*old4.img): its superblock is older than the degraded map .*: a full rebuild onto it" \
  "$tmpdir/out" || fail "re-add 4 said: $(cat "$tmpdir/out")"
"$CTL" -c "$ctl" wait >/dev/null || fail "wait"
wait_healthy
verify "after the full rebuild onto the old copy"
stop_nbdkit "$pid"
members[4]=$tmpdir/old4.img
set_args
check_parity $k $m $chunk rs "${members[@]}"
echo "OK"

echo "=== 6. refusals"
ctl_serve
ctl_refused "active member" "re-add 0: the member is active" "$CTL" -c "$ctl" re-add 0
"$CTL" -c "$ctl" fail 0 >/dev/null || fail "fail 0"
truncate -s 32M "$tmpdir/empty.img"
ctl_refused "no superblock" "re-add 0 .*empty.img: it holds no superblock of member 0" \
  "$CTL" -c "$ctl" re-add 0 "$tmpdir/empty.img"
ctl_refused "another member's file" "re-add 0 .*: it is member 2 of this array" \
  "$CTL" -c "$ctl" re-add 0 "${members[2]}"
truncate -s 32M "$tmpdir/other0.img" "$tmpdir/other1.img" "$tmpdir/other2.img"
run_nbdkit -U - "$PLUGIN" "member=$tmpdir/other0.img" "member=$tmpdir/other1.img" \
  "member=$tmpdir/other2.img" m=1 create=true --run true || fail "other array"
ctl_refused "another array" "re-add 0 .*other0.img: it holds a superblock of another gpuraid array" \
  "$CTL" -c "$ctl" re-add 0 "$tmpdir/other0.img"
"$CTL" -c "$ctl" rate 1M >/dev/null
"$CTL" -c "$ctl" re-add 0 >/dev/null || fail "re-add 0"
ctl_refused "being re-added" "re-add 0: the member is being rebuilt" "$CTL" -c "$ctl" re-add 0
cmp <(head -c 4096 "$tmpdir/empty.img") <(head -c 4096 /dev/zero) || fail "empty.img written"
"$CTL" -c "$ctl" rate 0 >/dev/null
"$CTL" -c "$ctl" wait >/dev/null || fail "wait"
verify "after the refusals"
stop_nbdkit "$pid"
echo "OK"
