#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Remote members (storage/: storage.h, remote.c): a 4+2 array, 64K chunks, of four
# NBD exports on four "hosts" (stock nbdkit file servers) and two local
# files.  Each host is a network namespace of its own with a veth pair
# and addresses of its own (nbd://10.x.y.2/) where the test may create
# namespaces (root, ip netns); otherwise a Unix socket (nbd+unix://).
#   1. create and fill over the network; the status names the URIs;
#      gpuraidctl examine reads a remote member's superblock;
#   2. a host stops answering (its link down, or the server stopped with
#      SIGSTOP) in the middle of writes: the writes complete within the
#      timeout, the member fails (timed out, logged), 0 wrong bytes;
#   3. the host comes back: gpuraidctl replace onto the same export
#      rebuilds it; healthy, every byte verified;
#   4. a host's server is killed in the middle of reads: the connection
#      is lost, new connections are refused, the member fails after the
#      retries, the reads return the right bytes; the server restarted,
#      replace, rebuild, verified;
#   5. the array stopped: every stripe's parity checked offline on the
#      hosts' files; started again from the remote superblocks, verified;
#   6. refusals: replace onto an export that does not exist, onto a
#      read-only export (one line each); a host down at start: the array
#      starts degraded with that member missing.

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_ctl
requires_cmd nbdcopy nbdinfo python3 cmp timeout
run_nbdkit "$PLUGIN" --dump-plugin | grep -q '^gpuraid_nbd_members=yes$' ||
  { echo "$0: SKIP: the plugin was built without libnbd (NONBD=1)"; exit 77; }

k=4 m=2 chunk=65536 size=32M timeout_s=3
nhosts=4

# --- hosts --------------------------------------------------------------------
# GPURAID_TEST_HOSTS=unix: Unix sockets even where namespaces work.
mode=unix
if [ "${GPURAID_TEST_HOSTS:-}" != unix ] && [ "$(id -u)" = 0 ] &&
   command -v ip >/dev/null && ip netns add "grt$$-probe" 2>/dev/null; then
  ip netns del "grt$$-probe"
  mode=netns
fi
echo "hosts: $mode"
net=$(( 16 + RANDOM % 200 ))    # 10.$net.H.0/24 for host H

host_cleanup ()
{
  local h
  for (( h = 0; h < nhosts + 1; h++ )); do
    [ -f "$tmpdir/host$h.pid" ] && kill -CONT "$(cat "$tmpdir/host$h.pid")" 2>/dev/null
    [ -f "$tmpdir/host$h.pid" ] && kill -9 "$(cat "$tmpdir/host$h.pid")" 2>/dev/null
    if [ $mode = netns ]; then
      ip netns del "grt$$-h$h" 2>/dev/null
      ip link del "grt$$v$h" 2>/dev/null
    fi
  done
  return 0
}
cleanup_fn host_cleanup

# host_setup H: the namespace (or nothing) of host H.
host_setup ()
{
  local h=$1
  [ $mode = netns ] || return 0
  ip netns add "grt$$-h$h"
  ip link add "grt$$v$h" type veth peer name "grt$$p$h"
  ip link set "grt$$p$h" netns "grt$$-h$h"
  ip addr add "10.$net.$h.1/24" dev "grt$$v$h"
  ip link set "grt$$v$h" up
  ip -n "grt$$-h$h" addr add "10.$net.$h.2/24" dev "grt$$p$h"
  ip -n "grt$$-h$h" link set "grt$$p$h" up
  ip -n "grt$$-h$h" link set lo up
}

# host_uri H: member H's URI.
host_uri ()
{
  if [ $mode = netns ]; then echo "nbd://10.$net.$1.2:10809/"
  else echo "nbd+unix:///?socket=$tmpdir/host$1.sock"; fi
}

# host_start H [nbdkit options]: serve $tmpdir/host$H.img from host H.
host_start ()
{
  local h=$1 i
  shift
  rm -f "$tmpdir/host$h.pid" "$tmpdir/host$h.sock"
  if [ $mode = netns ]; then
    ip netns exec "grt$$-h$h" nbdkit "$@" -P "$tmpdir/host$h.pid" \
      -i "10.$net.$h.2" -p 10809 file "$tmpdir/host$h.img" ||
      fail "host $h: nbdkit"
  else
    nbdkit "$@" -P "$tmpdir/host$h.pid" -U "$tmpdir/host$h.sock" \
      file "$tmpdir/host$h.img" || fail "host $h: nbdkit"
  fi
  for (( i = 0; i < 100; i++ )); do
    nbdinfo --size "$(host_uri "$h")" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  fail "host $h does not answer"
}

# host_hang H / host_unhang H: host H stops answering / answers again.
host_hang ()
{
  if [ $mode = netns ]; then ip link set "grt$$v$1" down
  else kill -STOP "$(cat "$tmpdir/host$1.pid")"; fi
}
host_unhang ()
{
  if [ $mode = netns ]; then ip link set "grt$$v$1" up
  else kill -CONT "$(cat "$tmpdir/host$1.pid")"; fi
}

host_kill ()
{
  crash_nbdkit "$tmpdir/host$1.pid"
}

# slowcat [FILE]: FILE (or stdin) to stdout at about 50 MiB/s, so that
# the I/O it feeds or drains is still going when a host stops.
slowcat ()
{
  python3 -c '
import sys, time
f = open(sys.argv[1], "rb") if len(sys.argv) > 1 else sys.stdin.buffer
while True:
    b = f.read(1 << 20)
    if not b:
        break
    sys.stdout.buffer.write(b)
    time.sleep(0.02)
' "$@"
}

wait_healthy ()
{
  local i
  for (( i = 0; i < 600; i++ )); do
    [ "$(ctl_json 's["state"]')" = healthy ] && return 0
    sleep 0.1
  done
  fail "not healthy after 60 s: $("$CTL" -c "$ctl" status)"
}

wait_failed ()
{
  local i
  for (( i = 0; i < 300; i++ )); do
    [ "$(ctl_json "s[\"members\"][$1][\"state\"]")" = failed ] && return 0
    sleep 0.1
  done
  fail "member $1 not failed: $("$CTL" -c "$ctl" status)"
}

for (( h = 0; h < nhosts; h++ )); do
  truncate -s $size "$tmpdir/host$h.img"
  host_setup $h
  host_start $h
done
truncate -s $size "$tmpdir/local4.img" "$tmpdir/local5.img"
members=()
for (( h = 0; h < nhosts; h++ )); do members+=("$(host_uri $h)"); done
members+=("$tmpdir/local4.img" "$tmpdir/local5.img")
files=("$tmpdir/host0.img" "$tmpdir/host1.img" "$tmpdir/host2.img"
       "$tmpdir/host3.img" "$tmpdir/local4.img" "$tmpdir/local5.img")
set_args

echo "=== 1. create and fill over the network"
ctl_serve m=$m chunk=$chunk create=true remote-timeout=$timeout_s
asize=$(nbdinfo --size "$uri")
head -c "$asize" /dev/urandom >"$tmpdir/expect"
nbdcopy "$tmpdir/expect" "$uri" || fail "fill"
verify "created on remote members"
[ "$(ctl_json 's["members"][1]["path"]')" = "$(host_uri 1)" ] ||
  fail "status path: $(ctl_json 's["members"][1]')"
"$CTL" examine "$(host_uri 0)" >"$tmpdir/examine" 2>&1 ||
  fail "examine $(host_uri 0): $(cat "$tmpdir/examine")"
grep -q "index *0" "$tmpdir/examine" || fail "examine: $(cat "$tmpdir/examine")"

echo "=== 2. a host stops answering during writes"
head -c "$asize" /dev/urandom >"$tmpdir/expect"
slowcat "$tmpdir/expect" | nbdcopy - "$uri" & copy=$!
sleep 0.5
host_hang 1
SECONDS=0
wait $copy || fail "writes failed while host 1 hung"
echo "  writes done $SECONDS s after the host stopped answering"
wait_failed 1
[ $SECONDS -le $(( 4 * timeout_s + 2 )) ] ||
  fail "writes went on for $SECONDS s with a timeout of $timeout_s s"
grep -q "member 1 .* failed: .*timed out" "$nbdkit_log" ||
  fail "no timeout in the log: $(grep 'member 1' "$nbdkit_log" | tail -3)"
verify "host 1 not answering"

echo "=== 3. the host comes back: replace onto it, rebuild"
host_unhang 1
# The operator replaces once the host answers again (the writes it took
# before it stopped are done by then: nbdkit-gpuraid-plugin(1), REMOTE
# MEMBERS).
nbdinfo --size "$(host_uri 1)" >/dev/null || fail "host 1 is not back"
"$CTL" -c "$ctl" replace 1 "$(host_uri 1)" || fail "replace 1"
"$CTL" -c "$ctl" wait >/dev/null || fail "wait for the rebuild of member 1"
wait_healthy
verify "member 1 rebuilt on its host"

echo "=== 4. a host's server killed during reads"
rm -f "$tmpdir/back"
nbdcopy "$uri" - | slowcat >"$tmpdir/back" & copy=$!
sleep 0.5
host_kill 2
wait $copy || fail "reads failed while host 2 was killed"
cmp "$tmpdir/back" "$tmpdir/expect" || fail "data read while host 2 died differs"
wait_failed 2
grep -E "member 2 .* failed: .*(not connected|refused|reset|No such file)" \
  "$nbdkit_log" || fail "member 2's failure: $(grep 'member 2' "$nbdkit_log" | tail -3)"
verify "host 2 gone"
host_start 2
"$CTL" -c "$ctl" replace 2 "$(host_uri 2)" || fail "replace 2"
"$CTL" -c "$ctl" wait >/dev/null || fail "wait for the rebuild of member 2"
wait_healthy
verify "member 2 rebuilt on its host"

echo "=== 6a. refusals"
"$CTL" -c "$ctl" fail 3 >/dev/null || fail "fail 3"
ctl_refused "replace onto a missing export" "refused|No such|timed out|cannot" \
  "$CTL" -c "$ctl" replace 3 "nbd+unix:///?socket=$tmpdir/nowhere.sock"
truncate -s $size "$tmpdir/host4.img"
host_setup 4
host_start 4 -r
ctl_refused "replace onto a read-only export" "read-only" \
  "$CTL" -c "$ctl" replace 3 "$(host_uri 4)"
"$CTL" -c "$ctl" replace 3 "$(host_uri 3)" || fail "replace 3 onto itself"
"$CTL" -c "$ctl" wait >/dev/null || fail "wait for the rebuild of member 3"
wait_healthy
verify "member 3 rebuilt"

echo "=== 5. stopped: parity offline; started again from the hosts"
stop_nbdkit "$pid"
check_parity $k $m $chunk rs "${files[@]}"
ctl_serve remote-timeout=$timeout_s
[ "$(ctl_json 's["state"]')" = healthy ] || fail "not healthy: $("$CTL" -c "$ctl" status)"
verify "assembled from remote members"
stop_nbdkit "$pid"

echo "=== 6b. a host down at start"
host_kill 0
ctl_serve remote-timeout=$timeout_s
[ "$(ctl_json 's["state"]')" = degraded ] || fail "not degraded: $("$CTL" -c "$ctl" status)"
[ "$(ctl_json 's["members"][0]["state"]')" = missing ] ||
  fail "member 0: $(ctl_json 's["members"][0]')"
verify "started without host 0"
stop_nbdkit "$pid"
echo "$0: PASS"
