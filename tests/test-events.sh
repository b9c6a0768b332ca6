#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Events (events.h): gpuraidctl monitor and event-hook=PROGRAM, on a 4+2
# array of 16K chunks with block checksums and a spare:
#   1. gpuraidctl fail: member-failed (member, path, why) and degraded
#      reach a running monitor (text and --json) and the hook, each
#      within 1 s of the command; the hook gets them in its environment
#      (GPURAID_EVENT, GPURAID_MEMBER, GPURAID_UUID = the array's,
#      GPURAID_PATH, GPURAID_WHY) and argv[1];
#   2. the spare's takeover: spare-activated, rebuild-started and
#      rebuild-finished (result=done), in that order;
#   3. a scrub: scrub-finished with its counts (checked = the stripes);
#   4. a corrupt block read back: cksum-error-repaired (member, offset);
#   5. array-failed: two members failed, a third truncated under the
#      server;
#   6. a hook that hangs: the array answers status and I/O within 2 s
#      meanwhile, the hook is killed at its limit (-D gpuraid.hook_ms),
#      said once in a warning; a hook that fails: said once, the next
#      failures only in the debug log; a monitor that connects late sees
#      only events from then on; monitors end when the server stops;
#   7. event-hook= not executable, a directory, missing: refused at start
#      with one line, members untouched.
# (read-error-repaired: tests/test-read-errors.sh; re-added:
# tests/test-readd.sh.)
source "$(dirname "$0")/functions.sh"
requires_plugin
requires_ctl
requires_cmd nbdcopy python3 cmp

k=4 m=2 n=6 chunk=16384
width=$(( k * chunk ))
hooklog=$tmpdir/hook.log
hook=$tmpdir/hook.sh
cat >"$hook" <<EOF
#!/bin/sh
# One line per event: argv[1], the GPURAID_ variables, sorted, then its
# blocked and ignored signals (hex masks).
{ printf 'ARG=%s ' "\$1"; env | grep '^GPURAID_' | sort | tr '\n' ' '
  sed -n 's/^SigBlk:[[:space:]]*/SIGBLK=/p; s/^SigIgn:[[:space:]]*/SIGIGN=/p' /proc/\$\$/status | tr '\n' ' '; echo; } >>"$hooklog"
EOF
chmod +x "$hook"

# wait_for FILE REGEX [SECONDS]: until a line of FILE matches (default 5 s).
wait_for ()
{
  local i
  for (( i = 0; i < ${3:-5} * 20; i++ )); do
    grep -Eq -- "$2" "$1" 2>/dev/null && return 0
    sleep 0.05
  done
  fail "no line /$2/ in $1 within ${3:-5} s: $(cat "$1" 2>/dev/null)"
}

# start_monitor NAME [--json]: gpuraidctl monitor into $tmpdir/NAME.
start_monitor ()
{
  local out=$tmpdir/$1
  shift
  : >"$out"
  "$CTL" -c "$ctl" monitor "$@" >"$out" 2>&1 &
  mon_pid=$!
  cleanup_fn _kill_pid "$mon_pid"
  sleep 0.3                     # connected
}

make_members $n 8M
set_args
truncate -s 8M "$tmpdir/spare.img"
ctl_serve m=$m chunk=$chunk create=true event-hook="$hook" \
  spare="$tmpdir/spare.img"
size=$(nbdinfo --size "$uri")
head -c "$size" /dev/urandom >"$tmpdir/expect"
nbdcopy "$tmpdir/expect" "$uri" || fail "fill"
uuid=$(od -An -tx1 -j 16 -N 16 "${members[0]}" | tr -d ' \n' |
       sed 's/\(.\{8\}\)\(.\{4\}\)\(.\{4\}\)\(.\{4\}\)/\1-\2-\3-\4-/')
echo "array $uuid"

echo "=== 1. member-failed and degraded: monitor (text and JSON) and hook"
start_monitor mon.txt
mon_txt=$mon_pid
start_monitor mon.json --json
mon_json=$mon_pid
t0=$(date +%s.%N)
"$CTL" -c "$ctl" fail 1 >/dev/null || fail "fail 1"
wait_for "$tmpdir/mon.json" '"event": "member-failed"' 1
t1=$(date +%s.%N)
wait_for "$tmpdir/mon.txt" " member-failed uuid=$uuid member=1 path=${members[1]} " 1
wait_for "$tmpdir/mon.txt" " degraded uuid=$uuid .*failed=1" 1
wait_for "$hooklog" "ARG=member-failed .*GPURAID_EVENT=member-failed " 1
python3 - "$tmpdir/mon.json" "$uuid" "${members[1]}" "$t0" "$t1" <<'EOF' || fail "monitor --json"
import json, sys
evs = [json.loads(l) for l in open(sys.argv[1])]
f = [e for e in evs if e["event"] == "member-failed"][0]
assert f["member"] == 1 and f["path"] == sys.argv[3], f
assert f["uuid"] == sys.argv[2], f
assert "operator" in f["why"], f
# Posted within 1 s of the command (the clocks are the same machine's).
assert float(sys.argv[4]) - 0.01 <= f["time"] <= float(sys.argv[4]) + 1.0, f
assert float(sys.argv[5]) - float(sys.argv[4]) < 1.0, "seen after 1 s"
d = [e for e in evs if e["event"] == "degraded"][0]
assert d["member"] is None and d["failed"] == 1 and d["seq"] > f["seq"], d
print("monitor json:", f)
EOF
line=$(grep 'ARG=member-failed' "$hooklog" | head -n 1)
for want in "GPURAID_MEMBER=1 " "GPURAID_UUID=$uuid " "GPURAID_PATH=${members[1]} " \
            "GPURAID_WHY=failed by the operator" "GPURAID_SEQ=[0-9]" "GPURAID_LEFT=5 "; do
  echo "$line" | grep -q -- "$want" || fail "hook environment lacks $want: $line"
done
# The hook runs with no signal blocked (the plugin's threads block them
# all: common/thread.h) and SIGPIPE (13) not ignored (nbdkit ignores it).
echo "$line" | grep -q "SIGBLK=0000000000000000 " || fail "the hook runs with signals blocked: $line"
sigign=$(sed -n 's/.*SIGIGN=\([0-9a-f]*\) .*/\1/p' <<<"$line")
[ -n "$sigign" ] && (( (16#$sigign & 0x1000) == 0 )) || fail "the hook runs with SIGPIPE ignored: $line"
echo "OK: $line"

echo "=== 2. the spare's takeover: spare-activated, rebuild-started, rebuild-finished"
wait_for "$tmpdir/mon.txt" " rebuild-finished uuid=$uuid member=1 path=$tmpdir/spare.img .*result=done" 30
grep -Eo ' (spare-activated|rebuild-started|rebuild-finished) ' "$tmpdir/mon.txt" | tr -d ' ' |
  tr '\n' ' ' | grep -q '^spare-activated rebuild-started rebuild-finished $' ||
  fail "takeover events out of order: $(cat "$tmpdir/mon.txt")"
wait_for "$hooklog" "ARG=rebuild-finished .*GPURAID_RESULT=done "
verify "after the takeover"

echo "=== 3. scrub-finished with its counts"
"$CTL" -c "$ctl" scrub >/dev/null || fail "scrub"
"$CTL" -c "$ctl" wait >/dev/null || fail "wait"
stripes=$(( (8 * 1048576 - $(data_offset $chunk)) / chunk ))
wait_for "$tmpdir/mon.json" '"event": "scrub-finished"'
python3 - "$tmpdir/mon.json" "$stripes" <<'EOF' || fail "scrub-finished"
import json, sys
e = [json.loads(l) for l in open(sys.argv[1]) if "scrub-finished" in l][0]
assert e["result"] == "done" and e["checked"] == int(sys.argv[2]), e
assert e["mismatched"] == 0 and e["cksum_repaired"] == 0, e
assert isinstance(e["seconds"], float), e
print("scrub-finished:", e)
EOF

echo "=== 4. cksum-error-repaired"
doff=$(data_offset $chunk)
# Stripe 3's data chunk 0: corrupt 4 KiB of it on its member.
off=$(( 3 * width ))
where=$("$CTL" map $off "${members[0]}" "$tmpdir/spare.img" "${members[@]:2}" |
        sed -n 's/^  data *member \([0-9]*\) (\(.*\)) at byte \([0-9]*\) .*/\1 \2 \3/p')
read -r mb mpath mbyte <<<"$where"
[ -n "$mbyte" ] || fail "map: $where"
head -c 4096 /dev/urandom | dd of="$mpath" bs=4096 seek=$(( mbyte / 4096 )) conv=notrunc status=none
nbdcopy "$uri" "$tmpdir/back" || fail "read back"
cmp "$tmpdir/back" "$tmpdir/expect" || fail "corrupt block served"
wait_for "$tmpdir/mon.txt" " cksum-error-repaired uuid=$uuid member=$mb .*offset=$mbyte "
echo "OK"

echo "=== 5. a monitor that connects late sees only new events; array-failed"
kill "$mon_json"; wait "$mon_json" 2>/dev/null
start_monitor mon2.txt --json
seen=$(grep -c . "$tmpdir/mon2.txt")
[ "$seen" = 0 ] || fail "a late monitor got old events: $(cat "$tmpdir/mon2.txt")"
"$CTL" -c "$ctl" fail 2 >/dev/null || fail "fail 2"
"$CTL" -c "$ctl" fail 3 >/dev/null || fail "fail 3"
"$CTL" -c "$ctl" fail 5 >/dev/null 2>&1 && fail "fail past m accepted"
# A third member lost under the server: past m.
truncate -s 0 "${members[4]}"
# One request in flight: nbdkit before 1.33.10 (Debian 12's 1.32.5)
# aborts when a client hangs up at its first error reply while another
# reply of the same connection is still to be sent (nbdkit 9d82aa4f), as
# nbdcopy with its default 64 requests in flight did here.
nbdcopy --connections=1 --requests=1 "$uri" "$tmpdir/back" 2>/dev/null &&
  fail "read past m succeeded"
wait_for "$tmpdir/mon2.txt" '"event": "array-failed"' 2
grep -q '"event": "member-failed".*"member": 4' "$tmpdir/mon2.txt" || fail "member 4: $(cat "$tmpdir/mon2.txt")"
wait_for "$hooklog" 'ARG=array-failed '
stop_nbdkit "$pid"
# Both monitors end when the server does.
wait "$mon_txt" || fail "monitor exit status"
echo "OK"

echo "=== 6. a hook that hangs, a hook that fails"
make_members $n 8M
set_args
cat >"$tmpdir/hang.sh" <<EOF
#!/bin/sh
echo "\$1" >>"$tmpdir/hang.log"
sleep 60
EOF
chmod +x "$tmpdir/hang.sh"
nbdkit_opts="-D gpuraid.hook_ms=1500" ctl_serve m=$m chunk=$chunk create=true \
  event-hook="$tmpdir/hang.sh"
"$CTL" -c "$ctl" fail 0 >/dev/null || fail "fail 0"
wait_for "$tmpdir/hang.log" member-failed
t0=$(date +%s.%N)
"$CTL" -c "$ctl" status >/dev/null || fail "status while a hook hangs"
head -c 1M /dev/urandom | nbdcopy - "$uri" || fail "write while a hook hangs"
t1=$(date +%s.%N)
python3 -c "import sys; sys.exit(0 if $t1 - $t0 < 2 else 1)" ||
  fail "the array waited for the hook ($t0 .. $t1)"
wait_for "$tmpdir/hang.log" degraded 5
wait_for "$nbdkit_log" "warning: event-hook=$tmpdir/hang.sh ran past 1.5 s and was killed for event member-failed" 5
sleep 2
[ "$(grep -c 'event-hook=.*was killed' "$nbdkit_log")" = 1 ] ||
  fail "a hook's hang said more than once: $(grep 'event-hook' "$nbdkit_log")"
stop_nbdkit "$pid"
cat >"$tmpdir/fail.sh" <<'EOF'
#!/bin/sh
exit 3
EOF
chmod +x "$tmpdir/fail.sh"
make_members $n 8M
set_args
ctl_serve m=$m chunk=$chunk create=true event-hook="$tmpdir/fail.sh"
"$CTL" -c "$ctl" fail 0 >/dev/null || fail "fail 0"
"$CTL" -c "$ctl" fail 1 >/dev/null || fail "fail 1"
wait_for "$nbdkit_log" "warning: event-hook=$tmpdir/fail.sh exited with status 3 for event member-failed"
wait_for "$nbdkit_log" "event-hook exited with status 3 for event [0-9]+ \(member-failed\)"
[ "$(grep -c 'warning: event-hook' "$nbdkit_log")" = 1 ] || fail "said more than once"
stop_nbdkit "$pid"
echo "OK"

echo "=== 7. bad event-hook="
make_members $n 8M
snapshot_members "$tmpdir/before"
mkdir -p "$tmpdir/adir"
: >"$tmpdir/notexec"
for h in "$tmpdir/notexec" "$tmpdir/adir" "$tmpdir/nonexistent"; do
  expect_refusal "$tmpdir/refusal.log" "event-hook=$h: " nbdkit "$PLUGIN" \
    $(member_args "${members[@]}") m=$m create=true event-hook="$h"
  [ "$(grep -ci error "$tmpdir/refusal.log")" = 1 ] || fail "not one line: $(cat "$tmpdir/refusal.log")"
done
for f in "${members[@]}"; do
  cmp "$f" "$tmpdir/before/$(basename "$f")" || fail "$f changed"
done
echo "OK"
