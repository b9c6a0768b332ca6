#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Hot spares and replacements named at start (heal.h), 4+2, 16K chunks:
#   1. spare= at start: a member failed by the operator is rebuilt onto
#      the spare without a command (the log says so; gpuraidctl wait
#      right after the fail follows that rebuild), the array ends
#      healthy with the spare in the member's slot, every byte reads back
#      and the offline checker finds every stripe consistent; the status
#      lists a waiting spare (JSON state "spare", index null);
#   2. gpuraidctl spare add: a spare added while running takes the place
#      of the next member that fails, during writes;
#   3. a member missing at start, with a spare: rebuilt onto it at once;
#   4. replace=INDEX:PATH at start: missing member INDEX rebuilt onto PATH;
#   5. a member failing during a scrub: the scrub stops (to go on later)
#      and the spare is rebuilt first;
#   6. refusals, one line each and nothing written to the path: spare add
#      of a member's file, a file too small, a missing file, a spare twice,
#      a file of another array; at start: spare= too small, spare= also a
#      member=, spare= a current member not in the member list (after a
#      takeover: untouched), the same as replace= and to gpuraidctl
#      replace, replace= of an active member, replace= with create=true.

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_ctl
requires_cmd nbdcopy python3 cmp

k=4 m=2 n=6 chunk=16384
# healed INDEX PATH: wait until member INDEX is active on PATH, healthy.
healed ()
{
  local i
  for (( i = 0; i < 300; i++ )); do
    [ "$(ctl_json "s[\"members\"][$1][\"path\"]")" = "$2" ] &&
      [ "$(ctl_json 's["state"]')" = healthy ] && return 0
    sleep 0.1
  done
  fail "member $1 not rebuilt onto $2: $("$CTL" -c "$ctl" status)"
}

make_members $n 8M
set_args
truncate -s 8M "$tmpdir/spare1.img" "$tmpdir/spare2.img" "$tmpdir/spare3.img" "$tmpdir/r1.img"
ctl_serve m=$m chunk=$chunk create=true spare="$tmpdir/spare1.img"
size=$(nbdinfo --size "$uri")
head -c "$size" /dev/urandom >"$tmpdir/expect"
nbdcopy "$tmpdir/expect" "$uri" || fail "fill"

echo "=== 1. spare= takes a failed member's place"
[ "$(ctl_json '[(mb["index"], mb["state"], mb["path"]) for mb in s["members"] if mb["state"] == "spare"]')" = \
  "[(None, 'spare', '$tmpdir/spare1.img')]" ] || fail "spare not listed: $(ctl_json 's["members"]')"
"$CTL" -c "$ctl" status | grep -q "spare .*$tmpdir/spare1.img" || fail "status text lists no spare"
# gpuraidctl wait right after fail follows the takeover that fail starts
# (not "no operation is running" before it begins).
"$CTL" -c "$ctl" fail 2 >/dev/null || fail "fail 2"
"$CTL" -c "$ctl" wait >"$tmpdir/wait" 2>&1 || fail "wait: $(cat "$tmpdir/wait")"
grep -q '^rebuild done: 100.0%' "$tmpdir/wait" ||
  fail "wait right after fail did not follow the takeover: $(cat "$tmpdir/wait")"
healed 2 "$tmpdir/spare1.img"
grep -q "member 2 is failed: rebuilding it onto spare $tmpdir/spare1.img" "$nbdkit_log" || fail "no log line"
[ "$(ctl_json '[mb for mb in s["members"] if mb["state"] == "spare"]')" = "[]" ] || fail "the spare is still listed"
verify "rebuilt onto spare1"
stop_nbdkit "$pid"
members[2]=$tmpdir/spare1.img
set_args
check_parity $k $m $chunk rs "${members[@]}"
echo "spare=: OK"

echo "=== 2. gpuraidctl spare add, then a failure during writes"
ctl_serve
"$CTL" -c "$ctl" spare add "$tmpdir/spare2.img" | grep -q "spare $tmpdir/spare2.img added" || fail "spare add"
head -c 6M /dev/urandom >"$tmpdir/w2"
"$CTL" -c "$ctl" rate 4000000 >/dev/null   # the rebuild overlaps the writes
( sleep 0.3; "$CTL" -c "$ctl" fail 4 >/dev/null ) &
failer=$!
nbdcopy --request-size=4096 "$tmpdir/w2" "$uri" || fail "write"
wait $failer || fail "fail 4"
"$CTL" -c "$ctl" rate 0 >/dev/null
dd if="$tmpdir/w2" of="$tmpdir/expect" conv=notrunc status=none
healed 4 "$tmpdir/spare2.img"
verify "rebuilt onto spare2 during writes"
stop_nbdkit "$pid"
members[4]=$tmpdir/spare2.img
set_args
check_parity $k $m $chunk rs "${members[@]}"
echo "spare add: OK"

echo "=== 3. a member missing at start, a spare given"
mv "${members[0]}" "$tmpdir/gone0"
ctl_serve spare="$tmpdir/spare3.img"
healed 0 "$tmpdir/spare3.img"
grep -q "member 0 is missing: rebuilding it onto spare" "$nbdkit_log" || fail "no log line"
verify "missing member 0 rebuilt onto spare3"
stop_nbdkit "$pid"
members[0]=$tmpdir/spare3.img
set_args
echo "missing at start: OK"

echo "=== 4. replace=INDEX:PATH at start"
mv "${members[1]}" "$tmpdir/gone1"
ctl_serve replace=1:"$tmpdir/r1.img"
healed 1 "$tmpdir/r1.img"
grep -q "rebuilding it onto its replacement (replace=) $tmpdir/r1.img" "$nbdkit_log" || fail "no log line"
verify "member 1 rebuilt onto r1 (replace=)"
stop_nbdkit "$pid"
members[1]=$tmpdir/r1.img
set_args
check_parity $k $m $chunk rs "${members[@]}"
echo "replace=: OK"

echo "=== 5. a failure during a scrub: the rebuild comes first"
truncate -s 8M "$tmpdir/spare4.img"
ctl_serve
"$CTL" -c "$ctl" rate 1000000 >/dev/null
"$CTL" -c "$ctl" scrub >/dev/null || fail "scrub"
"$CTL" -c "$ctl" spare add "$tmpdir/spare4.img" >/dev/null || fail "spare add"
sleep 0.5
"$CTL" -c "$ctl" fail 3 >/dev/null || fail "fail 3"
sleep 0.5
"$CTL" -c "$ctl" rate 0 >/dev/null
healed 3 "$tmpdir/spare4.img"
grep -q "scrub stopped to rebuild member 3 onto a spare" "$nbdkit_log" || fail "the scrub was not stopped"
[ "$(ctl_json 's["scrub"]["state"]')" = stopped ] || fail "scrub state $(ctl_json 's["scrub"]["state"]')"
"$CTL" -c "$ctl" scrub | grep -q "going on from" || fail "the scrub did not go on"
timeout 60 "$CTL" -c "$ctl" wait | grep -q '^scrub done' || fail "scrub wait"
[ "$(ctl_json 's["scrub"]["mismatched_stripes"]')" = 0 ] || fail "mismatches"
verify "after the scrub"
members[3]=$tmpdir/spare4.img
set_args
echo "scrub and spare: OK"

echo "=== 6. refusals"
truncate -s 1M "$tmpdir/small.img"
truncate -s 8M "$tmpdir/other0.img" "$tmpdir/other1.img" "$tmpdir/ok.img"
ctl_refused "a member's file" "is member 2 of this array" "$CTL" -c "$ctl" spare add "${members[2]}"
ctl_refused "too small" "smaller than a member" "$CTL" -c "$ctl" spare add "$tmpdir/small.img"
ctl_refused "no such file" "No such file" "$CTL" -c "$ctl" spare add "$tmpdir/nosuch.img"
"$CTL" -c "$ctl" spare add "$tmpdir/ok.img" >/dev/null || fail "spare add ok.img"
ctl_refused "a spare twice" "a spare already" "$CTL" -c "$ctl" spare add "$tmpdir/ok.img"
stop_nbdkit "$pid"
# Another array's member (its superblock must stay).
start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" member="$tmpdir/other0.img" member="$tmpdir/other1.img" m=1 create=true ||
  fail "the other array"
stop_nbdkit "$pid"
sum_other=$(sha256sum <"$tmpdir/other0.img")
ctl_serve
ctl_refused "another array's member" "superblock of another gpuraid array" "$CTL" -c "$ctl" spare add "$tmpdir/other0.img"
[ "$(sha256sum <"$tmpdir/other0.img")" = "$sum_other" ] || fail "the other array's member was written"
stop_nbdkit "$pid"
expect_refusal "$tmpdir/r.log" "spare=$tmpdir/small.img: smaller than a member" \
  nbdkit "$PLUGIN" "${args[@]}" spare="$tmpdir/small.img"
expect_refusal "$tmpdir/r.log" "spare=${members[0]} is also given as member=" \
  nbdkit "$PLUGIN" "${args[@]}" spare="${members[0]}"
# Yesterday's member list after a takeover (disk2.img, failed, where
# spare1.img now is member 2) with spare1.img as a spare: refused, one
# line, spare1.img untouched (it was formatted as a spare, and the array
# left degraded).
old=("${members[@]}")
old[2]=$tmpdir/disk2.img
sum_cur=$(sha256sum <"$tmpdir/spare1.img")
expect_refusal "$tmpdir/r.log" "spare=$tmpdir/spare1.img: it is member 2 of this array, current" \
  nbdkit "$PLUGIN" $(member_args "${old[@]}") spare="$tmpdir/spare1.img"
[ "$(sha256sum <"$tmpdir/spare1.img")" = "$sum_cur" ] || fail "the current member given as a spare was written"
# The same current member named as the replacement, at start (replace=)
# and while running (gpuraidctl replace): refused, one line, untouched.
expect_refusal "$tmpdir/r.log" "replace=2:$tmpdir/spare1.img: it is member 2 of this array, current" \
  nbdkit "$PLUGIN" $(member_args "${old[@]}") replace=2:"$tmpdir/spare1.img"
[ "$(sha256sum <"$tmpdir/spare1.img")" = "$sum_cur" ] || fail "the current member given as replace= was written"
expect_refusal "$tmpdir/r.log" "replace=2:$tmpdir/ok.img: member is active" \
  nbdkit "$PLUGIN" "${args[@]}" replace=2:"$tmpdir/ok.img"
expect_refusal "$tmpdir/r.log" "replace=0:.*create=true makes a new array" \
  nbdkit "$PLUGIN" "${args[@]}" m=2 create=true force=true replace=0:"$tmpdir/ok.img"
expect_refusal "$tmpdir/r.log" "replace=x: give INDEX:PATH" \
  nbdkit "$PLUGIN" "${args[@]}" replace=x
members=("${old[@]}")
set_args
ctl_serve
[ "$(ctl_json 's["members"][2]["state"]')" = missing ] || fail "member 2 with yesterday's list: $(ctl_json 's["members"][2]')"
ctl_refused "a current member as the replacement" "it is member 2 of this array, current" \
  "$CTL" -c "$ctl" replace 2 "$tmpdir/spare1.img"
[ "$(ctl_json 's["members"][2]["state"]')" = missing ] || fail "member 2 after the refusal: $(ctl_json 's["members"][2]')"
stop_nbdkit "$pid"
[ "$(sha256sum <"$tmpdir/spare1.img")" = "$sum_cur" ] || fail "the current member given to gpuraidctl replace was written"
echo "refusals: OK"
echo "$0: PASS"
