#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Rebuild what was written (issue 23, 6): the written map (bitmap.h)
# marks every region written since creation; a rebuild decodes only
# those and zeroes the rest on its replacement; a trim of whole regions
# unmarks them; the resync without a bitmap resyncs only them.  4+2, 16K
# chunks, 32M members, bitmap-chunk=512K (write-intent regions of 32
# stripes; map regions of 1 MiB of each member, 64 stripes):
#   1. 10 % of the array written (a contiguous run and a few small
#      writes elsewhere), a member failed and replaced onto a file full
#      of random bytes: the rebuild decodes only the written regions
#      (log, status JSON rebuilt_bytes and skipped_bytes, the
#      rebuild-finished event's counts), zeroes the rest (the old bytes
#      are gone), every byte reads back, parity checks offline, a scrub
#      finds nothing (the zeroed blocks' checksums right); the stripes
#      never written are punched on the replacement, not written;
#   2. a trim of the contiguous run (whole regions): once durable, a
#      rebuild skips those regions too, and they read as zeros;
#   3. a crash whose session kept no bitmap (the flag cleared on the
#      members): the resync covers only the written regions;
#   4. an array from before the written map (the flag cleared, the map
#      area zero): the next session takes every region as written and
#      keeps the map from then on (flag set); its rebuild skips nothing;
#   5. an array without a journal (512K chunks: no slot fits before the
#      data) and without checksums: a replacement's never-written
#      stripes read as zeros after its rebuild (they were left as the
#      junk they held when the rebuild's fallocate was not let through
#      below the write front).
source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_ctl
requires_cmd nbdcopy nbdinfo python3 cmp

k=4 m=2 n=6 chunk=16384
width=$(( k * chunk ))
region=$(( 64 * width ))                 # array bytes a map region covers
nbdkit_opts="-D gpuraid.bitmap_ms=100"

# sb_flags FILE / sb_patch_flags FILE AND OR: the superblock's flags, and
# a rewrite of them (crc32c made again), as an older or crashed writer
# would have left them.
sb_flags () { od -An -v -tu4 -j 52 -N 4 "$1" | tr -d ' '; }
sb_patch_flags ()
{
  python3 - "$@" <<'EOF' || fail "patch $1"
import struct, sys
def crc32c(b):
    c = 0xffffffff
    for x in b:
        c ^= x
        for _ in range(8):
            c = (c >> 1) ^ 0x82f63b78 if c & 1 else c >> 1
    return c ^ 0xffffffff
with open(sys.argv[1], "r+b") as f:
    b = bytearray(f.read(4096))
    fl = struct.unpack_from("<I", b, 52)[0]
    struct.pack_into("<I", b, 52, (fl & int(sys.argv[2])) | int(sys.argv[3]))
    struct.pack_into("<I", b, 4092, crc32c(bytes(b[:4092])))
    f.seek(0); f.write(b)
EOF
}

# rebuild_onto_junk I: fail member I, replace it onto a file of random
# bytes, wait; the log's last "rebuild of member I" line into $done_line.
rebuild_onto_junk ()
{
  local i=$1 junk=$tmpdir/junk$1.$RANDOM.img
  head -c 32M /dev/urandom >"$junk"
  "$CTL" -c "$ctl" fail "$i" >/dev/null || fail "fail $i"
  "$CTL" -c "$ctl" replace "$i" "$junk" >/dev/null || fail "replace $i"
  "$CTL" -c "$ctl" wait >/dev/null || fail "wait"
  members[i]=$junk
  done_line=$(grep "rebuild of member $i .* done" "$nbdkit_log" | tail -n 1)
  [ -n "$done_line" ] || fail "no rebuild done line"
  echo "  $done_line"
}

# counts: "REBUILT ZEROED" stripes from $done_line.
counts () { sed -n 's/.*(\([0-9]*\) rebuilt, \([0-9]*\) never written: zeroed).*/\1 \2/p' <<<"$done_line"; }

make_members $n 32M
set_args
ctl_serve m=$m chunk=$chunk create=true bitmap-chunk=512K
size=$(nbdinfo --size "$uri")
stripes=$(( size / width ))
head -c "$size" /dev/zero >"$tmpdir/expect"
[ "$(sb_flags "${members[0]}")" = 16 ] || fail "flags after create: $(sb_flags "${members[0]}")"

echo "=== 1. 10 % written: the rebuild decodes only that"
run=$(( size / 10 / region * region ))  # whole regions
write_ref $(( 4 * region )) "$run"
write_ref $(( size - 3 * region + 4096 )) 8192
write_ref 100 10
[ "$(sb_flags "${members[0]}")" = 21 ] || fail "flags while writing: $(sb_flags "${members[0]}")"
written_regions=$(( run / region + 2 ))
"$CTL" -c "$ctl" monitor --json >"$tmpdir/events" 2>&1 &
mon=$!
cleanup_fn _kill_pid "$mon"
sleep 0.3
rebuild_onto_junk 2
read -r rebuilt zeroed <<<"$(counts)"
[ "$rebuilt" = $(( written_regions * 64 )) ] && [ $(( rebuilt + zeroed )) = "$stripes" ] ||
  fail "rebuilt $rebuilt, zeroed $zeroed of $stripes stripes; $written_regions regions written"
[ "$(ctl_json 's["rebuild"]["rebuilt_bytes"], s["rebuild"]["skipped_bytes"]')" = \
  "$(( rebuilt * width )) $(( zeroed * width ))" ] ||
  fail "status: $(ctl_json 's["rebuild"]')"
"$CTL" -c "$ctl" status | grep -q "rebuild .*; $(( rebuilt * width >> 20 )) MiB rebuilt, $(( zeroed * width >> 20 )) MiB skipped (not written)" ||
  fail "status text: $("$CTL" -c "$ctl" status | grep rebuild)"
sleep 0.3
kill "$mon"
grep -q "\"event\": \"rebuild-finished\", .*\"member\": 2, .*\"result\": \"done\", .*\"rebuilt_stripes\": $rebuilt, \"zeroed_stripes\": $zeroed" \
  "$tmpdir/events" || fail "event: $(grep rebuild-finished "$tmpdir/events")"
verify "after the rebuild of 10 %"
# The never-written stripes were punched on the replacement (a journaled
# array degraded still fallocates them: the rebuild's writes are not
# journaled), not written with zeros: most of the junk file is a hole.
alloc=$(( $(stat -c '%b * %B' "${members[2]}") ))
(( alloc < 16 << 20 )) || fail "replacement has $alloc bytes allocated: its never-written stripes were written, not punched"
"$CTL" -c "$ctl" scrub >/dev/null && "$CTL" -c "$ctl" wait >/dev/null || fail "scrub"
[ "$(ctl_json 's["scrub"]["mismatched_stripes"], s["scrub"]["cksum_repaired"]')" = "0 0" ] ||
  fail "scrub: $(ctl_json 's["scrub"]')"
stop_nbdkit "$pid"
set_args
check_parity $k $m $chunk rs "${members[@]}"
echo "OK"

echo "=== 2. a trim of whole regions: not written any more"
ctl_serve
python3 - "$sock" $(( 4 * region )) "$run" <<'EOF' || fail "trim"
import sys, nbd
h = nbd.NBD(); h.connect_unix(sys.argv[1])
h.trim(int(sys.argv[3]), int(sys.argv[2])); h.flush(); h.shutdown()
EOF
head -c "$run" /dev/zero | dd of="$tmpdir/expect" bs=1M seek=$(( 4 * region )) oflag=seek_bytes conv=notrunc status=none
sleep 1                                  # the clearing pass after the trim
rebuild_onto_junk 4
read -r rebuilt zeroed <<<"$(counts)"
[ "$rebuilt" = 128 ] || fail "after the trim rebuilt $rebuilt stripes, not the 2 regions left"
verify "after the trim and a rebuild"
stop_nbdkit "$pid"
set_args
check_parity $k $m $chunk rs "${members[@]}"
echo "OK"

echo "=== 3. a crash without the bitmap: only written regions resynced"
ctl_serve
write_ref $(( 8 * region )) "$region"
crash_nbdkit "$pid"
for f in "${members[@]}"; do sb_patch_flags "$f" $(( ~4 & 0xffffffff )) 0; done
ctl_serve
# 3 map regions written: 6 write-intent regions.
grep -q "resyncing the parity of 6 of [0-9]* regions .*every region written" "$nbdkit_log" ||
  fail "resync: $(grep resync "$nbdkit_log")"
wait_resync
verify "after the resync"
stop_nbdkit "$pid"
echo "OK"

echo "=== 4. an array from before the written map"
for f in "${members[@]}"; do sb_patch_flags "$f" $(( ~16 & 0xffffffff )) 0; done
ctl_serve
write_ref 0 4096
[ $(( $(sb_flags "${members[0]}") & 16 )) = 16 ] || fail "the written map not kept from now on"
rebuild_onto_junk 0
read -r rebuilt zeroed <<<"$(counts)"
[ "$rebuilt $zeroed" = "$stripes 0" ] || fail "rebuilt $rebuilt, zeroed $zeroed"
verify "after the upgrade and a rebuild"
stop_nbdkit "$pid"
echo "OK"

echo "=== 5. no journal, no checksums: the never-written stripes zeroed"
make_members $n 32M nj
set_args
ctl_serve m=$m chunk=512K create=true integrity=off
size=$(nbdinfo --size "$uri")
head -c "$size" /dev/zero >"$tmpdir/expect"
write_ref 0 $(( 2 * k * 512 * 1024 ))
rebuild_onto_junk 1
read -r rebuilt zeroed <<<"$(counts)"
(( zeroed > 0 && rebuilt > 0 )) || fail "rebuilt $rebuilt, zeroed $zeroed"
verify "after a rebuild without a journal"
stop_nbdkit "$pid"
set_args
check_parity $k $m $(( 512 * 1024 )) rs "${members[@]}"
echo "OK"
