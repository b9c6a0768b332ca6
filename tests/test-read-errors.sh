#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Read errors are repaired, not fatal (md's way): a 4+2 array, 16K chunks,
# integrity=off (so that only the read error can tell the chunk is bad),
# member 2 an NBD export of nbdkit's eval plugin that models a disk with
# a bad sector: while $tmpdir/bad names a byte range of it, reads that
# touch the range fail with EIO, and a write over it remaps it (the range
# is forgotten) unless $tmpdir/badw exists (then the write fails too):
#   1. 4 KiB of member 2's copy of one data chunk is overwritten on its
#      file and made a bad sector, then the chunk is read through the
#      array: the right bytes come back (from the other chunks), the bad
#      sector is rewritten on member 2 (its file holds the right bytes
#      again, the bad sector is gone),
#      member 2 stays active and its read_errors count is 1 (status, JSON
#      and text), logged, and a read-error-repaired event reaches
#      gpuraidctl monitor;
#   2. max-read-errors=2: the third read error fails the member (the
#      reason names the limit); every byte still reads right;
#   3. a read error whose rewrite fails too fails the member at once;
#   4. max-read-errors=0: the first read error fails the member, as
#      before this existed;
#   5. with integrity=on, a scrub meets a bad sector: it is rewritten,
#      counted as a read error (not a checksum error), the scrub finds
#      nothing and ends; parity checked offline.
source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_ctl
requires_cmd nbdcopy nbdinfo python3 cmp
run_nbdkit "$PLUGIN" --dump-plugin | grep -q '^gpuraid_nbd_members=yes$' ||
  { echo "$0: SKIP: the plugin was built without libnbd (NONBD=1)"; exit 77; }
plugins=$(nbdkit --dump-config | sed -n 's/^plugindir=//p')
[ -f "$plugins/nbdkit-eval-plugin.so" ] ||
  { echo "$0: SKIP: nbdkit's eval plugin is not installed"; exit 77; }

k=4 m=2 n=6 chunk=16384
width=$(( k * chunk ))

# serve2: member 2's file on a socket through the eval plugin: a bad
# sector where $bad says ("LO HI", member bytes), $badw: its rewrite fails.
bad=$tmpdir/bad badw=$tmpdir/badw
serve2 ()
{
  local f=$tmpdir/m2.img hit
  hit='[ -f '"$bad"' ] && read -r lo hi <'"$bad"' && [ $(( $4 < hi && $4 + $3 > lo )) = 1 ]'
  rm -f "$tmpdir/m2.sock"
  nbdkit -P "$tmpdir/m2.pid" -U "$tmpdir/m2.sock" eval \
    get_size="stat -c %s $f" can_write='exit 0' can_flush='exit 0' flush='exit 0' \
    pread="if $hit; then echo 'EIO bad sector' >&2; exit 1; fi
           dd if=$f skip=\$4 count=\$3 iflag=skip_bytes,count_bytes status=none" \
    pwrite="if $hit; then
              if [ -f $badw ]; then echo 'EIO write failed' >&2; exit 1; fi
              rm -f $bad
            fi
            dd of=$f seek=\$4 oflag=seek_bytes conv=notrunc status=none" ||
    fail "member 2's server"
}
stop2 () { [ ! -f "$tmpdir/m2.pid" ] || _kill_pid "$(cat "$tmpdir/m2.pid")"; }
cleanup_fn stop2

# new_array [plugin options]: a new array, filled with random data
# ($tmpdir/expect), served with control=$ctl.
new_array ()
{
  local i
  stop2
  rm -f "$tmpdir"/m*.img "$bad" "$badw"
  members=()
  for (( i = 0; i < n; i++ )); do
    truncate -s 8M "$tmpdir/m$i.img"
    members+=("$tmpdir/m$i.img")
  done
  serve2
  members[2]="nbd+unix:///?socket=$tmpdir/m2.sock"
  set_args
  ctl_serve m=$m chunk=$chunk integrity="${integrity:-off}" create=true "$@"
  size=$(nbdinfo --size "$uri")
  head -c "$size" /dev/urandom >"$tmpdir/expect"
  nbdcopy "$tmpdir/expect" "$uri" || fail "fill"
}

# read_at OFF LEN: LEN bytes at array byte OFF read through the array
# must equal the reference.
read_at ()
{
  python3 - "$sock" "$1" "$2" "$tmpdir/expect" <<'EOF' || fail "read at $1+$2"
import sys, nbd
h = nbd.NBD(); h.connect_unix(sys.argv[1])
off, n = int(sys.argv[2]), int(sys.argv[3])
got = h.pread(n, off)
with open(sys.argv[4], "rb") as f:
    f.seek(off); want = f.read(n)
h.shutdown()
sys.exit(0 if got == want else 1)
EOF
}

# chunk_on_2 S: stripe S's data chunk on member 2, if it has one: its
# array offset ($aoff) and member offset ($moff); else status 1.
chunk_on_2 ()
{
  local s=$1 off
  off=$(( s * width ))
  for (( c = 0; c < k; c++ )); do
    "$CTL" map $(( off + c * chunk )) "${members[@]/#nbd*/$tmpdir/m2.img}" >"$tmpdir/map" 2>&1 ||
      fail "map: $(cat "$tmpdir/map")"
    if grep -q "^  data *member 2 " "$tmpdir/map"; then
      aoff=$(( off + c * chunk ))
      moff=$(sed -n 's/^  data *member 2 (.*) at byte [0-9]* (chunk at \([0-9]*\)).*/\1/p' "$tmpdir/map")
      return 0
    fi
  done
  return 1
}

# find_on_2 S: the first stripe from S on with a data chunk on member 2.
find_on_2 ()
{
  local s
  for (( s = $1; s < $1 + 12; s++ )); do chunk_on_2 $s && return 0; done
  fail "no data chunk on member 2 in stripes $1 to $(( $1 + 11 ))"
}
state2 () { ctl_json 's["members"][2]["state"]'; }
rerr2 () { ctl_json 's["members"][2].get("read_errors")'; }

echo "=== 1. a read error: answered from the other chunks, rewritten"
new_array
find_on_2 5
"$CTL" -c "$ctl" monitor --json >"$tmpdir/events" 2>&1 &
mon=$!
cleanup_fn _kill_pid "$mon"
sleep 0.3
# Its second 4 KiB: a bad sector, whose bytes are wrong besides.
head -c 4096 /dev/urandom | dd of="$tmpdir/m2.img" bs=4096 seek=$(( moff / 4096 + 1 )) conv=notrunc status=none
echo "$(( moff + 4096 )) $(( moff + 8192 ))" >"$bad"
read_at "$aoff" $chunk
[ ! -e "$bad" ] || fail "the bad sector was not rewritten"
[ "$(state2)" = active ] || fail "member 2 is $(state2) after one read error"
[ "$(rerr2)" = 1 ] || fail "member 2's read_errors: $(rerr2), not 1"
# The event, within 1 s (events.h).
for (( i = 0; i < 20; i++ )); do
  grep -q '"event": "read-error-repaired"' "$tmpdir/events" && break
  sleep 0.05
done
python3 - "$tmpdir/events" "$(( moff + 4096 ))" <<'EOF' || fail "read-error-repaired event: $(cat "$tmpdir/events")"
import json, sys
e = [json.loads(l) for l in open(sys.argv[1]) if "read-error-repaired" in l][0]
assert e["member"] == 2 and e["read_errors"] == 1, e
assert e["offset"] <= int(sys.argv[2]) < e["offset"] + e["bytes"], e
EOF
kill "$mon"
"$CTL" -c "$ctl" status >"$tmpdir/st"
col=$(awk '$1 == "index" { for (i = 1; i <= NF; i++) if ($i == "rd-err") print i }' "$tmpdir/st")
[ -n "$col" ] && [ "$(awk -v c="$col" '$1 == "2" { print $c }' "$tmpdir/st")" = 1 ] ||
  fail "the text status does not show the read error: $(cat "$tmpdir/st")"
cmp <(dd if="$tmpdir/m2.img" bs=$chunk skip=$(( moff / chunk )) count=1 status=none) \
    <(dd if="$tmpdir/expect" bs=1 skip="$aoff" count=$chunk status=none 2>/dev/null) ||
  fail "the chunk was not rewritten on member 2"
grep -q 'member 2: read error at byte .*rewritten' "$nbdkit_log" ||
  fail "no log line for the repaired read error: $(grep -i 'read error' "$nbdkit_log")"
verify "after a read error repaired"
stop_nbdkit "$pid"
check_parity $k $m $chunk rs "${members[@]/#nbd*/$tmpdir/m2.img}" >/dev/null
echo "  repaired: member 2 active, 1 read error, its chunk rewritten"

echo "=== 2. max-read-errors=2: the third fails the member"
new_array max-read-errors=2
hits=0
for (( s = 3; s < 40 && hits < 3; s++ )); do
  chunk_on_2 $s || continue
  echo "$moff $(( moff + 4096 ))" >"$bad"
  read_at "$aoff" $chunk
  hits=$(( hits + 1 ))
done
[ "$(state2)" = failed ] || fail "member 2 is $(state2) after 3 read errors (max 2)"
grep -q 'member 2 .*failed.*3 read errors (max-read-errors=2)' "$nbdkit_log" ||
  fail "the failure does not name the limit: $(grep -i 'member 2' "$nbdkit_log" | tail -2)"
verify "degraded after the read errors"
stop_nbdkit "$pid"
echo "  failed at the third read error"

echo "=== 3. a read error whose rewrite fails"
new_array
find_on_2 7
echo "$moff $(( moff + 4096 ))" >"$bad"
touch "$badw"
read_at "$aoff" $chunk
rm -f "$badw"
[ "$(state2)" = failed ] || fail "member 2 is $(state2) after its rewrite failed"
verify "degraded after the failed rewrite"
stop_nbdkit "$pid"
echo "  failed when the rewrite failed"

echo "=== 4. max-read-errors=0: the first read error fails the member"
new_array max-read-errors=0
find_on_2 2
echo "$moff $(( moff + 4096 ))" >"$bad"
read_at "$aoff" $chunk
[ "$(state2)" = failed ] || fail "member 2 is $(state2) with max-read-errors=0"
verify "degraded"
stop_nbdkit "$pid"
echo "  failed at once"
echo "=== 5. a scrub meets a bad sector, integrity=on"
integrity=on new_array
find_on_2 4
echo "$(( moff + 8192 )) $(( moff + 12288 ))" >"$bad"
"$CTL" -c "$ctl" scrub >/dev/null || fail "scrub"
timeout 120 "$CTL" -c "$ctl" wait | grep -q '^scrub done: 100.0%' ||
  fail "the scrub did not finish: $(grep -i 'error' "$nbdkit_log" | tail -3)"
"$CTL" -c "$ctl" status | grep -q '^scrub .* 0 did not match' ||
  fail "the scrub found mismatches: $("$CTL" -c "$ctl" status | grep '^scrub')"
[ "$(state2)" = active ] || fail "member 2 is $(state2) after the scrub's read error"
[ "$(rerr2)" = 1 ] || fail "member 2's read_errors after the scrub: $(rerr2)"
[ ! -e "$bad" ] || fail "the scrub did not rewrite the bad sector"
[ "$(ctl_json 's["members"][2]["cksum_errors"]')" = 0 ] || fail "a read error counted as a checksum error"
verify "after the scrub"
stop_nbdkit "$pid"
check_parity $k $m $chunk rs "${members[@]/#nbd*/$tmpdir/m2.img}" >/dev/null
echo "  the scrub repaired it: 1 read error, no mismatch"
echo "$0: PASS"
