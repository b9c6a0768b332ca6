#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Assembly by superblock (issue 23, 1): scan=GLOB with uuid=UUID, spares
# that carry a superblock, gpuraidctl scan.  A 4+2 array A (16K chunks)
# and a 2+1 array B in one directory, with files that are no members:
#   1. gpuraidctl scan lists both arrays (text and --json): members with
#      their index, state and event, and the other files;
#   2. scan= with uuid=A assembles A from the files in any order, names
#      unrelated; every byte reads back;
#   3. gpuraidctl spare add: the spare gets a superblock (examine says
#      hot spare), scan lists it as A's spare;
#   4. a member failed, the spare takes over; the same scan= arguments
#      assemble the current set (the spare as that member, the old file
#      said to be an older copy and left out), healthy;
#   5. gpuraidctl replace onto a new file in the directory: the same
#      arguments assemble it;
#   6. a member away while written, back in the directory: the next start
#      with the same arguments re-adds it;
#   7. member= and scan= together (a member outside the patterns);
#   8. refusals, one line, nothing written: scan= without uuid=, scan=
#      that finds no member of the array, uuid= not a UUID, uuid= that
#      the member= paths are not of, scan= with create=true, a spare given
#      as member=.
source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_ctl
requires_cmd nbdcopy nbdinfo python3 cmp

k=4 m=2 n=6 chunk=16384
dir=$tmpdir/pool
mkdir -p "$dir"

# array_uuid FILE: the array UUID of FILE's superblock.
# serve_scan [more options]: array A from the directory, by scan=.
serve_scan ()
{
  args=()
  ctl_serve scan="$dir/*" uuid="$A" "$@"
}

# Array A on files named out of order, array B, and junk.
members=()
for i in 0 1 2 3 4 5; do
  f=$dir/disk-$(( (i * 7 + 3) % 10 ))-$i.img
  truncate -s 16M "$f"
  members+=("$f")
done
set_args
ctl_create_filled
A=$(array_uuid "${members[0]}")
truncate -s 8M "$dir/b0.img" "$dir/b1.img" "$dir/b2.img"
run_nbdkit -U - "$PLUGIN" member="$dir/b0.img" member="$dir/b1.img" \
  member="$dir/b2.img" m=1 create=true --run true || fail "array B"
B=$(array_uuid "$dir/b0.img")
head -c 1M /dev/urandom >"$dir/junk.img"
mkdir -p "$dir/subdir"
echo "A $A, B $B"

echo "=== 1. gpuraidctl scan"
"$CTL" scan "$dir/*" >"$tmpdir/scan" || fail "scan: $(cat "$tmpdir/scan")"
cat "$tmpdir/scan"
grep -q "^array $A: 4+2 rs, chunk 16 KiB: healthy, 6 of 6 members (event [0-9]*, clean)" "$tmpdir/scan" ||
  fail "array A not listed"
grep -q "^array $B: 2+1 rs, chunk 64 KiB: healthy, 3 of 3 members" "$tmpdir/scan" ||
  fail "array B not listed"
for i in 0 1 2 3 4 5; do
  grep -q "^  member $i  *active  *event [0-9]* *${members[i]}$" "$tmpdir/scan" ||
    fail "member $i of A not listed"
done
grep -q "^1 of 10 files and devices hold no gpuraid superblock" "$tmpdir/scan" ||
  fail "the junk file not counted"
"$CTL" scan "$dir/*" --json >"$tmpdir/scan.json" || fail "scan --json"
python3 - "$tmpdir/scan.json" "$A" "$B" "$dir/junk.img" <<'EOF' || fail "scan --json"
import json, sys
s = json.load(open(sys.argv[1]))
a = {x["uuid"]: x for x in s["arrays"]}
A, B = a[sys.argv[2]], a[sys.argv[3]]
assert A["state"] == "healthy" and A["k"] == 4 and A["m"] == 2, A
assert [mb["index"] for mb in A["members"]] == list(range(6)), A
assert all(mb["state"] == "active" and mb["event"] > 0 for mb in A["members"]), A
assert A["spares"] == [] and A["unused"] == [], A
assert len(B["members"]) == 3, B
assert s["other"] == [sys.argv[4]], s["other"]
EOF
echo "OK"

echo "=== 2. scan= uuid= assembles A"
serve_scan
[ "$(ctl_json 's["uuid"]')" = "$A" ] || fail "not array A"
[ "$(ctl_json 's["state"]')" = healthy ] || fail "not healthy"
verify "assembled by scan"
echo "OK"

echo "=== 3. a spare carries a superblock"
truncate -s 16M "$dir/spare.img"
"$CTL" -c "$ctl" spare add "$dir/spare.img" >/dev/null || fail "spare add"
"$CTL" examine "$dir/spare.img" | grep -q "hot spare of this array" || fail "no spare superblock"
[ "$(array_uuid "$dir/spare.img")" = "$A" ] || fail "the spare's UUID"
"$CTL" scan "$dir/*" --json | python3 -c "
import json, sys
s = json.load(sys.stdin)
A = [x for x in s['arrays'] if x['uuid'] == '$A'][0]
assert [x['path'] for x in A['spares']] == ['$dir/spare.img'], A['spares']
" || fail "scan does not list the spare"
echo "OK"

echo "=== 4. a takeover, then the same scan= arguments"
"$CTL" -c "$ctl" fail 2 >/dev/null || fail "fail 2"
"$CTL" -c "$ctl" wait >/dev/null || fail "wait"
wait_healthy
[ "$(ctl_json 's["members"][2]["path"]')" = "$dir/spare.img" ] || fail "spare not member 2"
stop_nbdkit "$pid"
serve_scan
wait_healthy
[ "$(ctl_json 's["members"][2]["path"]')" = "$dir/spare.img" ] ||
  fail "the scan took $(ctl_json 's["members"][2]["path"]') as member 2"
grep -q "${members[2]} holds an older copy of member 2 (event [0-9]*): not used" "$nbdkit_log" ||
  fail "the old member 2 not said: $(grep warning "$nbdkit_log")"
verify "after the takeover, by scan"
"$CTL" scan "$dir/*" | grep -q "^  not used .* ${members[2]} (an older copy of member 2)" ||
  fail "gpuraidctl scan does not say the old file is left out: $("$CTL" scan "$dir/*")"
old2=${members[2]}
members[2]=$dir/spare.img
echo "OK"

echo "=== 5. gpuraidctl replace, then the same arguments"
"$CTL" -c "$ctl" fail 1 >/dev/null || fail "fail 1"
truncate -s 16M "$dir/new1.img"
"$CTL" -c "$ctl" replace 1 "$dir/new1.img" >/dev/null || fail "replace 1"
"$CTL" -c "$ctl" wait >/dev/null || fail "wait"
stop_nbdkit "$pid"
serve_scan
wait_healthy
[ "$(ctl_json 's["members"][1]["path"]')" = "$dir/new1.img" ] || fail "new1 not member 1"
verify "after a replace, by scan"
members[1]=$dir/new1.img
stop_nbdkit "$pid"
echo "OK"

echo "=== 6. a member away, back: re-added"
mv "${members[3]}" "$tmpdir/away.img"
serve_scan
[ "$(ctl_json 's["state"]')" = degraded ] || fail "not degraded"
head -c 1M /dev/urandom >"$tmpdir/w"
nbdcopy "$tmpdir/w" "$uri" || fail "write"
dd if="$tmpdir/w" of="$tmpdir/expect" conv=notrunc status=none
stop_nbdkit "$pid"
mv "$tmpdir/away.img" "${members[3]}"
serve_scan
grep -q "member 3 (${members[3]}) is back: re-adding it" "$nbdkit_log" || fail "not re-added"
wait_healthy
verify "after the re-add, by scan"
stop_nbdkit "$pid"
check_parity $k $m $chunk rs "${members[@]}"
echo "OK"

echo "=== 7. member= and scan= together"
mkdir -p "$tmpdir/elsewhere"
mv "${members[5]}" "$tmpdir/elsewhere/m5.img"
args=(member="$tmpdir/elsewhere/m5.img")
ctl_serve scan="$dir/*" uuid="$A"
wait_healthy
verify "member= and scan="
stop_nbdkit "$pid"
mv "$tmpdir/elsewhere/m5.img" "${members[5]}"
echo "OK"

echo "=== 8. refusals"
sums "$dir"/*.img >"$tmpdir/before"
expect_refusal "$tmpdir/r.log" "scan=.* needs uuid=UUID" nbdkit "$PLUGIN" scan="$dir/*"
expect_refusal "$tmpdir/r.log" "no member of array $A among the 1 files" \
  nbdkit "$PLUGIN" scan="$dir/junk*" uuid="$A"
expect_refusal "$tmpdir/r.log" "uuid=nonsense: not a UUID" \
  nbdkit "$PLUGIN" scan="$dir/*" uuid=nonsense
expect_refusal "$tmpdir/r.log" "uuid=$A: the members given are of array $B" \
  nbdkit "$PLUGIN" member="$dir/b0.img" member="$dir/b1.img" member="$dir/b2.img" uuid="$A"
expect_refusal "$tmpdir/r.log" "uuid= names an existing array; create=true makes a new one" \
  nbdkit "$PLUGIN" scan="$dir/*" uuid="$A" create=true m=2
truncate -s 16M "$dir/spare2.img"
ctl_serve scan="$dir/*" uuid="$A" spare="$dir/spare2.img"
stop_nbdkit "$pid"
sums "$dir"/*.img >"$tmpdir/before"
expect_refusal "$tmpdir/r.log" "member=$dir/spare2.img is a hot spare of this array, not a member: give it as spare=" \
  nbdkit "$PLUGIN" $(member_args "${members[@]:0:5}") member="$dir/spare2.img"
sums "$dir"/*.img | cmp -s - "$tmpdir/before" || fail "a refused start changed a file"
echo "OK"
