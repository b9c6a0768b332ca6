#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The control socket (control=PATH) and gpuraidctl:
#   1. the socket is owner-only; status and status --json describe a
#      healthy 4+2 array (every field the JSON promises);
#   2. gpuraidctl fail while a client writes: the write completes, every
#      byte reads back, the status says degraded with the member failed
#      by the operator, and the failure is on disk (examine, restart);
#   3. refusals (a member failed already, no such member, the last
#      redundancy, bad rate, unknown command, no -c, no server): one line
#      on stderr, a non-zero exit, and no superblock changed;
#   4. examine: offline, read-only, each superblock and what assembly
#      would do; exit 1 naming paths without a superblock; map: the member
#      and offset of logical bytes (checked against the bytes there);
#   5. resync progress: status and wait during a rate-limited resync
#      after a crash, rate changed on the fly, wait returns 0 at the end;
#   6. control= refused before any member is touched: a path that is not
#      a socket, a socket another server answers on;
#   7. misbehaving clients hold nothing: with 8 idle clients and one
#      sending a byte every 1.5 s connected, status answers within 2 s;
#      each of them is cut off at its deadline (5 s for the whole line),
#      with one debug line each (no warning); past 16 clients at once a
#      new one gets one error line at once, and once the deadline has
#      cut the others off status answers again; a stop with clients
#      connected ends at once.

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_cmd nbdcopy python3 cmp stat
requires_ctl

k=4 m=2 n=6
# refused WHY REGEX CMD...: CMD must exit non-zero with one stderr line
# matching REGEX, and leave every superblock as it was.
refused ()
{
  local why=$1 re=$2 rc
  shift 2
  sbsums >"$tmpdir/sb.before"
  "$@" >"$tmpdir/out" 2>"$tmpdir/err"; rc=$?
  [ $rc -ne 0 ] || fail "$why: exit status 0"
  [ "$(wc -l <"$tmpdir/err")" = 1 ] || fail "$why: not one line: $(cat "$tmpdir/err")"
  grep -Eq -- "$re" "$tmpdir/err" || fail "$why: $(cat "$tmpdir/err")"
  sbsums | cmp -s - "$tmpdir/sb.before" || fail "$why: a superblock changed"
  echo "  refused ($why, exit $rc): $(cat "$tmpdir/err")"
}
sbsums () { for f in "${members[@]}"; do head -c 4096 "$f" | sha256sum; done; }

make_members $n 32M
set_args

echo "=== 1. status of a healthy array"
ctl_serve m=$m create=true
[ "$(stat -c %a "$ctl")" = 600 ] || fail "socket mode $(stat -c %a "$ctl"), want 600"
"$CTL" -c "$ctl" status | tee "$tmpdir/status"
grep -q '^state *healthy' "$tmpdir/status" || fail "text status: not healthy"
grep -q '^geometry *4+2 rs, chunk 64 KiB, 6 members' "$tmpdir/status" || fail "text status: geometry"
"$CTL" -c "$ctl" status --json | python3 -c '
import json, sys
s = json.load(sys.stdin)
for key in ("uuid", "k", "m", "chunk", "code", "state", "members", "resync",
            "coder", "io", "size"):
    assert key in s, key
assert (s["k"], s["m"], s["chunk"], s["code"], s["state"]) == (4, 2, 65536, "rs", "healthy"), s
assert len(s["members"]) == 6
for i, mb in enumerate(s["members"]):
    assert mb["index"] == i and mb["state"] == "active" and mb["errors"] == 0, mb
    assert mb["path"].endswith("disk%d.img" % i), mb
assert s["resync"] is None
assert s["coder"]["cpu_backend"], s["coder"]
' || fail "status --json"
uuid=$(ctl_json 's["uuid"]')
od -An -tx1 -j 16 -N 16 "${members[0]}" | tr -d ' \n' | grep -q "^$(echo "$uuid" | tr -d -)$" ||
  fail "status uuid $uuid is not the superblock's"
echo "status: OK"

echo "=== 2. fail a member while a client writes"
head -c 96M /dev/urandom >"$tmpdir/data"
# The client streams the first half, pauses a second, then the rest: it
# is still writing when the fail comes, on a fast machine too.
{ head -c 48M "$tmpdir/data"; sleep 1; tail -c +50331649 "$tmpdir/data"; } |
  nbdcopy --request-size=65536 - "$uri" &
copy=$!
sleep 0.5
"$CTL" -c "$ctl" fail 1 | tee "$tmpdir/out" || fail "gpuraidctl fail 1"
kill -0 $copy 2>/dev/null || fail "the write had ended before the fail (not concurrent)"
grep -q 'member 1 failed; 5 of 6 members left' "$tmpdir/out" || fail "fail's answer"
wait $copy || fail "the write failed"
rm -f "$tmpdir/back"
nbdcopy "$uri" "$tmpdir/back" || fail "read back"
cmp -n 100663296 "$tmpdir/data" "$tmpdir/back" || fail "data differs after fail"
[ "$(ctl_json 's["state"]')" = degraded ] || fail "state $(ctl_json 's["state"]')"
[ "$(ctl_json 's["members"][1]["state"]')" = failed ] || fail "member 1 not failed"
ctl_json 's["members"][1]["why"]' | grep -q 'operator' || fail "why: $(ctl_json 's["members"][1]["why"]')"
[ "$(ctl_json 's["members"][0]["writes"] > 0 and s["io"]["written_bytes"] >= 96 << 20')" = True ] ||
  fail "I/O counters: $(ctl_json 's["io"]')"
grep -q 'member 1 .* failed: failed by the operator' "$nbdkit_log" || fail "not logged"
[ "$(sb_failed_bits "${members[0]}")" = "1 " ] || fail "failure not on disk: $(sb_failed_bits "${members[0]}")"
echo "fail: OK"

echo "=== 3. refusals"
refused "failed already" 'fail 1 .*failed or is missing already' "$CTL" -c "$ctl" fail 1
refused "no such member" 'fail 6: no such member' "$CTL" -c "$ctl" fail 6
refused "not a number" 'fail x: no such member' "$CTL" -c "$ctl" fail x
"$CTL" -c "$ctl" fail 4 || fail "fail 4 (the second)"
refused "last redundancy" 'fail 5 .*m members have failed already' "$CTL" -c "$ctl" fail 5
refused "bad rate" 'rate 1x: give bytes a second as a size .*or auto' "$CTL" -c "$ctl" rate 1x
refused "rate of two units" 'rate 1MK: give bytes a second' "$CTL" -c "$ctl" rate 1MK
refused "rate past the bound" 'rate 9E: give bytes a second' "$CTL" -c "$ctl" rate 9E
refused "unknown command" 'unknown command' "$CTL" -c "$ctl" frobnicate
refused "no -c" 'needs -c' "$CTL" status
refused "no server" "cannot reach .*$tmpdir/nosuch" "$CTL" -c "$tmpdir/nosuch" status
refused "examine with -c" 'no -c' "$CTL" -c "$ctl" examine "${members[0]}"
[ "$(ctl_json 's["state"]')" = degraded ] || fail "state after the refusals"
cmp <(nbdcopy "$uri" - | head -c 100663296) "$tmpdir/data" || fail "data after the refusals"
stop_nbdkit "$pid"
[ ! -e "$ctl" ] || fail "the control socket was left behind"
echo "refusals: OK"

echo "=== 4. examine"
sha256sum "${members[@]}" >"$tmpdir/sums"
"$CTL" examine "${members[@]}" | tee "$tmpdir/ex" || fail "examine exit status"
[ "$(grep -c "array uuid *$uuid" "$tmpdir/ex")" = 6 ] || fail "examine: uuid"
[ "$(grep -c 'failed members 1 4$' "$tmpdir/ex")" = 4 ] || fail "examine: failed set"
grep -q 'assembly: would start degraded with 4 of 6 members' "$tmpdir/ex" || fail "examine: decision"
grep -q 'slot 1: failed' "$tmpdir/ex" || fail "examine: slot 1"
truncate -s 8M "$tmpdir/blank"
"$CTL" examine "${members[0]}" "$tmpdir/blank" >"$tmpdir/ex" 2>"$tmpdir/err" &&
  fail "examine of a blank file: exit 0"
grep -q 'no gpuraid superblock' "$tmpdir/ex" || fail "examine: blank not named"
grep -q '1 of 2 paths hold no usable gpuraid superblock' "$tmpdir/err" || fail "$(cat "$tmpdir/err")"
sha256sum -c --quiet "$tmpdir/sums" || fail "examine changed a member"
echo "examine: OK"

echo "=== 4b. map: where a logical byte lives"
# Members given out of order: map places them by their superblocks.
for off in 0 300000 $(( 5 * 262144 + 3 * 65536 + 17 )) $(( 100663296 - 1 )); do
  "$CTL" map $off "${members[5]}" "${members[@]:0:5}" | tee "$tmpdir/map" ||
    fail "map $off"
  read -r mpath moff < <(sed -n 's/^  data *member [0-9]* (\(.*\)) at byte \([0-9]*\).*/\1 \2/p' "$tmpdir/map")
  [ -n "$moff" ] || fail "map $off: no data line"
  cmp <(dd if="$mpath" bs=1 skip="$moff" count=1 status=none) \
      <(dd if="$tmpdir/data" bs=1 skip="$off" count=1 status=none) ||
    fail "map $off: byte $moff of $mpath is not the array's byte $off"
  [ "$(grep -c '^  parity' "$tmpdir/map")" = 2 ] || fail "map $off: parity lines"
done
refused "map past the end" 'beyond the array' "$CTL" map $(( 4 * (32 * 1048576 - 1048576) )) "${members[@]}"
refused "map of a bad offset" 'not a byte offset' "$CTL" map 12x "${members[@]}"
# An offset as a size (64M) or in hex says the same as in decimal.
for o in 64M 0x4000000; do
  "$CTL" map $o "${members[@]}" | sed 1d >"$tmpdir/map-$o" || fail "map $o"
done
"$CTL" map 67108864 "${members[@]}" | sed 1d >"$tmpdir/map-dec"
cmp -s "$tmpdir/map-64M" "$tmpdir/map-dec" && cmp -s "$tmpdir/map-0x4000000" "$tmpdir/map-dec" ||
  fail "map 64M, 0x4000000 and 67108864 differ"
echo "map: OK"

echo "=== 5. resync progress, rate, wait"
make_members 3 8M r
set_args
ctl_serve m=1 chunk=4096 create=true bitmap-chunk=64K
head -c 8M /dev/urandom >"$tmpdir/data"
nbdcopy "$tmpdir/data" "$uri" || fail "write"
crash_nbdkit "$pid"
ctl_serve resync-rate=1M
sleep 0.5
ctl_json 's["resync"]' | tee "$tmpdir/rs"
[ "$(ctl_json 's["resync"]["state"]')" = running ] || fail "no resync running"
[ "$(ctl_json '0 < s["resync"]["done_bytes"] < s["resync"]["total_bytes"]')" = True ] ||
  fail "progress: $(cat "$tmpdir/rs")"
"$CTL" -c "$ctl" status | grep -q '^resync *running: ' || fail "text status: resync"
refused "fail during a resync" 'a resync is running' "$CTL" -c "$ctl" fail 0
[ "$(ctl_json '(s["resync"]["rate_limit"], s["resync"]["rate_auto"])')" = "(1048576, False)" ] ||
  fail "limit: $(ctl_json 's["resync"]')"
# Sizes as the operator types them: 50M is 50 MiB a second.
"$CTL" -c "$ctl" rate 50M | grep -q 'rate limit 52428800 bytes/s' || fail "rate 50M"
[ "$(ctl_json 's["resync"]["rate_limit"]')" = 52428800 ] || fail "rate 50M: $(ctl_json 's["resync"]')"
"$CTL" -c "$ctl" rate 1m >/dev/null || fail "rate 1m"
"$CTL" -c "$ctl" rate auto | grep -q 'rate limit auto' || fail "rate auto"
[ "$(ctl_json '(s["resync"]["rate_limit"], s["resync"]["rate_auto"])')" = "(0, True)" ] ||
  fail "auto: $(ctl_json 's["resync"]')"
"$CTL" -c "$ctl" status | grep -q '^resync .*limit auto' || fail "text status: limit auto"
"$CTL" -c "$ctl" rate 0 || fail "rate 0"
timeout 60 "$CTL" -c "$ctl" wait | tee "$tmpdir/wait" || fail "wait: exit status"
grep -q '^resync done: 100.0%' "$tmpdir/wait" || fail "wait: $(cat "$tmpdir/wait")"
[ "$(ctl_json 's["resync"]["done_bytes"] == s["resync"]["total_bytes"] > 0')" = True ] ||
  fail "done bytes"
r1=$(ctl_json 's["resync"]["rate_bytes_per_s"]'); sleep 0.5
[ "$(ctl_json 's["resync"]["rate_bytes_per_s"]')" = "$r1" ] ||
  fail "the rate of a finished resync still changes (its clock runs on)"
grep -q 'control: rate 0' "$nbdkit_log" || fail "commands are not logged"
stop_nbdkit "$pid"
check_parity 2 1 4096 rs "${members[@]}"
echo "resync and wait: OK"

echo "=== 6. a bad control= refuses before the members are touched"
make_members $n 32M b
set_args
: >"$tmpdir/notsock"
sha256sum "${members[@]}" "$tmpdir/notsock" >"$tmpdir/sums"
expect_refusal "$tmpdir/r.log" 'control=.*notsock: exists and is not a socket' \
  nbdkit "$PLUGIN" "${args[@]}" m=$m create=true control="$tmpdir/notsock"
sha256sum -c --quiet "$tmpdir/sums" || fail "a member or the file was changed"
ctl_serve m=$m create=true
make_members $n 32M c
expect_refusal "$tmpdir/r.log" 'another server answers' \
  nbdkit "$PLUGIN" $(member_args "${members[@]}") m=$m create=true control="$ctl"
[ "$(od -An -c -N 7 "${members[0]}" | tr -d ' ')" = '\0\0\0\0\0\0\0' ] ||
  fail "create went on after the control socket was refused"
"$CTL" -c "$ctl" status >/dev/null || fail "the first server's socket was taken"
stop_nbdkit "$pid"
echo "bad control=: OK"

echo "=== 7. idle and slow clients hold nothing"
# clients N SLOW: N idle clients and, with SLOW=1, one more that sends
# "status" a byte every 1.5 s, never the newline.  Prints "connected" on
# stderr once all are, then a line for each: "idle|slow SECONDS FIRST"
# when the server closed it (seconds since all connected; FIRST: the
# first line it said), or "idle|slow open" if it had not after 15 s.
clients ()
{
  python3 - "$ctl" "$1" "$2" <<'PY'
import select, socket, sys, time
path, nidle, slow = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
socks = {}
for kind in ["idle"] * nidle + ["slow"] * slow:
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    socks[s] = [kind, b""]
slow_sock = [s for s, v in socks.items() if v[0] == "slow"]
sent, t0 = 0, time.monotonic()
next_byte = t0
print("connected", file=sys.stderr, flush=True)
done = []
while socks and time.monotonic() - t0 < 15:
    if slow_sock and slow_sock[0] in socks and time.monotonic() >= next_byte:
        try:
            slow_sock[0].send(b"status"[sent % 6:sent % 6 + 1])
        except OSError:
            pass
        sent += 1
        next_byte += 1.5
    ready, _, _ = select.select(list(socks), [], [], 0.05)
    for s in ready:
        try:
            b = s.recv(4096)
        except OSError:
            b = b""
        if b:
            socks[s][1] += b
            continue
        kind, got = socks.pop(s)
        first = got.decode(errors="replace").split("\n")[0]
        done.append("%s %.2f %s" % (kind, time.monotonic() - t0, first))
        s.close()
done += ["%s open" % v[0] for v in socks.values()]
print("\n".join(done))
PY
}
# start_clients N SLOW: clients in the background (pid in $cpid).  The
# files are emptied here, before the fork: emptied by the child's own
# redirection, a "connected" left by the clients before could still be
# read by wait_connected.
start_clients ()
{
  : >"$tmpdir/clients"
  : >"$tmpdir/clients.err"
  clients "$1" "$2" >>"$tmpdir/clients" 2>>"$tmpdir/clients.err" &
  cpid=$!
}
# wait_connected: until the clients started last say they are connected.
wait_connected ()
{
  local i
  for (( i = 0; i < 50; i++ )); do
    grep -q connected "$tmpdir/clients.err" && return 0
    sleep 0.1
  done
  fail "the clients did not connect: $(cat "$tmpdir/clients.err")"
}
make_members 3 8M q
set_args
ctl_serve m=1 create=true
start_clients 8 1
wait_connected
sleep 0.5
t0=$(date +%s%N)
timeout 20 "$CTL" -c "$ctl" status >"$tmpdir/status" 2>&1 ||
  fail "status with idle and slow clients connected: $(cat "$tmpdir/status")"
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "  status answered in $ms ms with 8 idle clients and a slow one connected"
[ $ms -lt 2000 ] || fail "status took $ms ms with idle and slow clients connected"
grep -q '^state *healthy' "$tmpdir/status" || fail "status: $(cat "$tmpdir/status")"
wait $cpid || fail "clients: $(cat "$tmpdir/clients.err")"
cat "$tmpdir/clients"
grep -q ' open' "$tmpdir/clients" &&
  fail "a client was not cut off in 15 s: $(grep ' open' "$tmpdir/clients")"
[ "$(grep -c '^idle ' "$tmpdir/clients")" = 8 ] && grep -q '^slow ' "$tmpdir/clients" ||
  fail "clients: $(cat "$tmpdir/clients")"
# The deadline is for the whole line (5 s), not for each byte.
awk '$2 < 4 || $2 > 8 { exit 1 }' "$tmpdir/clients" ||
  fail "a client was not cut off at its deadline (5 s): $(cat "$tmpdir/clients")"
n=$(grep -c 'debug: gpuraid: control: a client sent no command line in 5 s: disconnected' "$nbdkit_log")
[ "$n" = 9 ] || fail "$n debug lines for 9 clients cut off"
grep 'control' "$nbdkit_log" | grep -qi 'warning\|error' &&
  fail "a client cut off is warned of: $(grep control "$nbdkit_log" | grep -i 'warning\|error')"
# The bound: 16 clients at once; the 17th and 18th are refused at once,
# and so is a status then.
start_clients 18 0
wait_connected
sleep 0.5
"$CTL" -c "$ctl" status >"$tmpdir/out" 2>"$tmpdir/err" && fail "status with 18 clients connected: exit 0"
[ "$(wc -l <"$tmpdir/err")" = 1 ] && grep -q 'too many control clients' "$tmpdir/err" ||
  fail "status past the bound: $(cat "$tmpdir/err")"
echo "  refused past the bound: $(cat "$tmpdir/err")"
wait $cpid || fail "clients: $(cat "$tmpdir/clients.err")"
[ "$(awk '$1 == "idle" && $2 < 1 && /too many control clients/' "$tmpdir/clients" | wc -l)" = 2 ] ||
  fail "not 2 of 18 clients refused at once: $(cat "$tmpdir/clients")"
"$CTL" -c "$ctl" status >/dev/null || fail "status once the clients were cut off"
# A stop while clients are connected ends their threads at once.
start_clients 4 0
wait_connected
t0=$(date +%s%N)
stop_nbdkit "$pid"
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
wait $cpid || fail "clients: $(cat "$tmpdir/clients.err")"
[ $ms -lt 3000 ] || fail "the server took $ms ms to stop with 4 clients connected"
awk '$2 == "open" || $2 > 3 { exit 1 }' "$tmpdir/clients" ||
  fail "clients not closed at the stop: $(cat "$tmpdir/clients")"
[ ! -e "$ctl" ] || fail "the control socket was left behind"
echo "  stopped in $ms ms with 4 clients connected"
echo "idle and slow clients: OK"
echo "$0: PASS"
