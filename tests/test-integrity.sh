#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Block checksums (integrity=on, the default; cksum.h, docs/format.md
# "Checksums"): silent corruption put straight on the members is never
# served, never laundered into parity, and repaired in place.
#   1. 4+2, 16K chunks: 12 random 4 KiB blocks of data and parity chunks
#      overwritten (each in its own stripe) on a stopped array; every byte
#      reads back right, each data block read is counted on its member
#      (status cksum_errors) and logged; a scrub repairs the parity ones;
#      then every member's data area equals what it was before the damage;
#   2. 2+1 (m = 1): a corrupt data block reads back right (from parity);
#      a corrupt parity block is found by scrub; a row with both its data
#      and its parity corrupt answers EIO, never the wrong bytes, and the
#      rest of the array reads right;
#   3. a rebuild does not launder: a data block corrupt, then the member
#      holding a parity chunk of its stripe failed and rebuilt: the data
#      reads right, the offline checker finds every stripe consistent;
#   3b. with m = 1 a rebuild that meets a corrupt block has nothing to
#      rebuild it from: it goes on, and the rebuilt block of that row is
#      marked unreadable: reads there answer EIO, never wrong bytes, every
#      other byte reads right, the array ends healthy;
#   4. the resync does not launder: a data block corrupt in a region that
#      a kill -9 leaves dirty (written meanwhile): after the restart's
#      resync every byte reads right and every stripe is consistent;
#   5. writes of parts of blocks (random sizes and places) keep the
#      checksums right: after a clean restart a scrub finds 0 errors;
#   6. integrity=off: no checksum area (the data at 1 MiB), status says
#      so, and a corrupt block is served as it is (what 1 prevents).
# The last scrub that ran to its end is kept in the superblock: status
# (text and JSON) and examine show it after a restart and a kill -9, and
# "none" on an array never scrubbed.
source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_ctl
requires_py
requires_cmd nbdcopy nbdinfo cmp

fault=$top/scripts/gpuraid-fault

# fill: random data over the whole export into $tmpdir/expect and the array.
fill ()
{
  local size
  size=$(nbdinfo --size "$uri")
  head -c "$size" /dev/urandom >"$tmpdir/expect"
  nbdcopy "$tmpdir/expect" "$uri" || fail "fill"
}

# data_areas OUT: each member's data area (from the data offset on) summed.
data_areas ()
{
  local f doff
  doff=$(data_offset "$chunk")
  for f in "${members[@]}"; do
    tail -c +$(( doff + 1 )) "$f" | sha256sum
  done >"$1"
}

cksum_total () { ctl_json 'sum(m["cksum_errors"] for m in s["members"])'; }

# new_array K M CHUNK SIZE [OPTIONS]: a fresh K+M array of SIZE members
# filled with random data ($tmpdir/expect), stopped; sets k m n chunk width.
new_array ()
{
  k=$1 m=$2 n=$(( $1 + $2 )) chunk=$3 width=$(( $1 * $3 ))
  make_members $n "$4"
  shift 4
  set_args
  ctl_serve m=$m chunk=$chunk create=true "$@"
  fill
  stop_nbdkit "$pid"
}

scrub_wait ()
{
  "$CTL" -c "$ctl" scrub "$@" >/dev/null || fail "scrub"
  timeout 120 "$CTL" -c "$ctl" wait >/dev/null || fail "scrub wait"
}

t0=$(date +%s)
echo "=== 1. 4+2: corrupt data and parity blocks, read, scrub"
new_array 4 2 16384 8M
data_areas "$tmpdir/before"
ndata=0 nparity=0
for (( i = 0; i < 12; i++ )); do
  s=$(( i * 7 + 3 ))                    # its own stripe
  blk=$(( (i * 5) % (chunk / 4096) ))
  if (( i % 3 == 2 )); then
    "$fault" corrupt --parity $(( i % m )) $(( s * width + blk * 4096 )) 4096 \
      "${members[@]}" >>"$tmpdir/damage" || fail "corrupt parity"
    nparity=$(( nparity + 1 ))
  else
    "$fault" corrupt $(( s * width + (i % k) * chunk + blk * 4096 )) 4096 \
      "${members[@]}" >>"$tmpdir/damage" || fail "corrupt data"
    ndata=$(( ndata + 1 ))
  fi
done
data_areas "$tmpdir/damaged"
cmp -s "$tmpdir/before" "$tmpdir/damaged" && fail "the corruption did not reach the members"
ctl_serve
[ "$(ctl_json 's["integrity"]')" = True ] || fail "integrity is not on by default"
verify "corrupt data blocks read back right"
got=$(cksum_total)
[ "$got" = "$ndata" ] || fail "checksum errors counted after the reads: $got, want $ndata"
[ "$(grep -c 'checksum error at byte .* rebuilt from the other chunks and rewritten' "$nbdkit_log")" = "$ndata" ] ||
  fail "each repair is not logged once"
scrub_wait
got=$(ctl_json '"%d %d" % (s["scrub"]["cksum_repaired"], len(s["scrub"]["reports"]))')
[ "$got" = "$nparity 0" ] || fail "scrub (checksum repairs, reports): $got, want $nparity 0"
[ "$(cksum_total)" = $(( ndata + nparity )) ] || fail "total checksum errors $(cksum_total)"
"$CTL" -c "$ctl" status | grep -q '^integrity  on' || fail "status does not say integrity on"
stop_nbdkit "$pid"
data_areas "$tmpdir/after"
cmp "$tmpdir/before" "$tmpdir/after" || fail "the members' data areas were not repaired in place"
check_parity $k $m $chunk rs "${members[@]}"
# The scrub's record survives a restart and a kill -9 (the superblock).
for how in restart kill; do
  ctl_serve
  got=$(ctl_json '"%d %d %d %s" % (s["last_scrub"]["cksum_repaired"], s["last_scrub"]["mismatched_stripes"], s["last_scrub"]["end"] >= '"$t0"', s["scrub"])')
  [ "$got" = "$nparity 0 1 None" ] || fail "the last scrub after a $how (cksum repaired, mismatched, end >= start, running): $got"
  "$CTL" -c "$ctl" status | grep -q "^last scrub done .*; $nparity blocks failed their checksums and were rebuilt, 0 past repair" ||
    fail "status does not show the last scrub after a $how"
  if [ $how = kill ]; then
    crash_nbdkit "$pid"; rm -f "$ctl"
  else
    stop_nbdkit "$pid"
  fi
done
"$CTL" examine "${members[0]}" | grep -q "last scrub     done .* $nparity blocks rebuilt for their checksums" ||
  fail "examine does not show the last scrub"
echo "read and scrub repairs: OK ($ndata data, $nparity parity blocks)"

echo "=== 2. 2+1: m = 1, and more corrupt than it can rebuild"
new_array 2 1 8192 4M
"$fault" corrupt $(( 5 * width + 4096 )) 4096 "${members[@]}" >/dev/null || fail "corrupt"
"$fault" corrupt --parity 0 $(( 9 * width )) 4096 "${members[@]}" >/dev/null || fail "corrupt"
ctl_serve
verify "m = 1: a corrupt data block read"
[ "$(cksum_total)" = 1 ] || fail "m = 1: checksum errors after the read: $(cksum_total)"
scrub_wait
[ "$(ctl_json 's["scrub"]["cksum_repaired"]')" = 1 ] || fail "m = 1: the scrub did not repair the parity block"
stop_nbdkit "$pid"
# Stripe 20: data chunk 1's first block and the parity's first block.
"$fault" corrupt $(( 20 * width + chunk )) 4096 "${members[@]}" >/dev/null || fail "corrupt"
"$fault" corrupt --parity 0 $(( 20 * width )) 4096 "${members[@]}" >/dev/null || fail "corrupt"
ctl_serve
"$PY" - "$uri" "$tmpdir/expect" $(( 20 * width + chunk )) <<'PYEOF' || fail "m = 1 reads"
import nbd, sys
h = nbd.NBD(); h.connect_uri(sys.argv[1])
ref = open(sys.argv[2], "rb").read()
bad = int(sys.argv[3])
try:
    got = h.pread(4096, bad)
    sys.exit("a block with no good copy left read back %s" %
             ("right?" if got == ref[bad:bad + 4096] else "WRONG"))
except nbd.Error as e:
    print("the unrecoverable block: %s" % e)
# Everything else reads right (the first corrupt block included).
for off in range(0, len(ref), 65536):
    n = min(65536, len(ref) - off)
    if off <= bad < off + n:
        a = h.pread(bad - off, off) if bad > off else b""
        b = h.pread(off + n - bad - 4096, bad + 4096)
        if a != ref[off:bad] or b != ref[bad + 4096:off + n]:
            sys.exit("data differs near the unrecoverable block")
        continue
    if h.pread(n, off) != ref[off:off + n]:
        sys.exit("data differs at %d" % off)
print("every other byte right")
PYEOF
grep -q 'failed their checksums and the others cannot rebuild them' "$nbdkit_log" ||
  fail "the unrecoverable block is not logged"
# A scrub goes on past it, counts it and reports its stripe.
scrub_wait
got=$(ctl_json '"%d %s" % (s["scrub"]["cksum_unrecoverable"], ",".join(str(r["stripe"]) for r in s["scrub"]["reports"]))')
[ "$got" = "1 20" ] || fail "scrub over the unrecoverable row (count, stripes reported): $got"
[ "$(ctl_json 's["scrub"]["state"]')" = done ] || fail "the scrub did not end done"
stop_nbdkit "$pid"
echo "m = 1: OK"

echo "=== 3. a rebuild does not launder a corrupt data block"
new_array 4 2 16384 8M
s=11
"$fault" corrupt $(( s * width + 8192 )) 4096 "${members[@]}" >/dev/null || fail "corrupt"
pm=$(( (k - s % n + n) % n ))            # parity 0 of stripe s
ctl_serve
"$CTL" -c "$ctl" fail $pm >/dev/null || fail "fail $pm"
truncate -s 8M "$tmpdir/new.img"
"$CTL" -c "$ctl" replace $pm "$tmpdir/new.img" >/dev/null || fail "replace"
timeout 120 "$CTL" -c "$ctl" wait | grep -q '^rebuild done' || fail "rebuild"
[ "$(cksum_total)" -ge 1 ] || fail "the rebuild did not meet the corrupt block"
verify "after the rebuild"
stop_nbdkit "$pid"
members[pm]=$tmpdir/new.img
check_parity $k $m $chunk rs "${members[@]}"
echo "rebuild: OK"

echo "=== 4. the resync does not launder a corrupt data block"
set_args
ctl_serve
s=2
"$fault" corrupt $(( s * width + chunk )) 4096 "${members[@]}" >/dev/null || fail "corrupt"
# A write in the same bitmap region (another stripe), then kill -9 before
# the region's bit is cleared.
head -c 4096 /dev/urandom >"$tmpdir/w"
"$PY" -c '
import nbd, sys
h = nbd.NBD(); h.connect_uri(sys.argv[1])
h.pwrite(open(sys.argv[2], "rb").read(), int(sys.argv[3])); h.flush()' \
  "$uri" "$tmpdir/w" $(( 6 * width )) || fail "write"
dd if="$tmpdir/w" of="$tmpdir/expect" bs=1 seek=$(( 6 * width )) conv=notrunc status=none
crash_nbdkit "$pid"; rm -f "$ctl"
ctl_serve
wait_resync
grep -q 'not shut down cleanly' "$nbdkit_log" || fail "no resync after kill -9"
verify "after the resync"
stop_nbdkit "$pid"
check_parity $k $m $chunk rs "${members[@]}"
echo "resync: OK"

echo "=== 5. writes of parts of blocks keep the checksums right"
ctl_serve
randio write "$uri" "$tmpdir/expect" --seed "$TEST_SEED" --ops 200 --chunk $chunk --k $k ||
  fail "random writes"
stop_nbdkit "$pid"
ctl_serve
verify "after random writes and a restart"
scrub_wait
got=$(ctl_json '"%d %d %d" % (s["scrub"]["cksum_repaired"], len(s["scrub"]["reports"]), sum(m["cksum_errors"] for m in s["members"]))')
[ "$got" = "0 0 0" ] || fail "after writes of parts of blocks: $got"
stop_nbdkit "$pid"
echo "partial writes: OK"

echo "=== 3b. m = 1: a rebuild over a block past repair"
new_array 2 1 8192 4M
s=7
"$fault" corrupt $(( s * width + 4096 )) 4096 "${members[@]}" >/dev/null || fail "corrupt"
pm=$(( (k - s % n + n) % n ))            # the parity of stripe s
ctl_serve
"$CTL" -c "$ctl" fail $pm >/dev/null || fail "fail $pm"
rm -f "$tmpdir/new.img"; truncate -s 4M "$tmpdir/new.img"
"$CTL" -c "$ctl" replace $pm "$tmpdir/new.img" >/dev/null || fail "replace"
timeout 120 "$CTL" -c "$ctl" wait | grep -q '^rebuild done' || fail "the rebuild did not go on"
[ "$(ctl_json 's["state"]')" = healthy ] || fail "not healthy after the rebuild"
grep -q 'marked unreadable' "$nbdkit_log" || fail "the rebuilt block is not marked unreadable"
"$PY" - "$uri" "$tmpdir/expect" $(( s * width + 4096 )) <<'PYEOF' || fail "reads after the rebuild"
import nbd, sys
h = nbd.NBD(); h.connect_uri(sys.argv[1])
ref = open(sys.argv[2], "rb").read()
bad = int(sys.argv[3])
try:
    h.pread(4096, bad)
    sys.exit("the block past repair was served")
except nbd.Error:
    pass
if h.pread(bad, 0) != ref[:bad] or h.pread(len(ref) - bad - 4096, bad + 4096) != ref[bad + 4096:]:
    sys.exit("data differs outside the block past repair")
print("EIO for the block past repair only")
PYEOF
stop_nbdkit "$pid"
echo "m = 1 rebuild: OK"

echo "=== 6. integrity=off"
new_array 2 1 8192 4M integrity=off
[ "$(data_offset $chunk)" = 1048576 ] || fail "integrity=off: data at $(data_offset $chunk)"
"$fault" corrupt $(( 3 * width )) 4096 "${members[@]}" >/dev/null || fail "corrupt"
ctl_serve
[ "$(ctl_json 's["integrity"]')" = False ] || fail "integrity=off: status says on"
[ "$(ctl_json 's["last_scrub"]')" = None ] || fail "a scrub is recorded on an array never scrubbed"
"$CTL" -c "$ctl" status | grep -q '^last scrub none' || fail "status: last scrub"
"$PY" - "$uri" "$tmpdir/expect" $(( 3 * width )) <<'PYEOF' || fail "integrity=off read"
import nbd, sys
h = nbd.NBD(); h.connect_uri(sys.argv[1])
ref = open(sys.argv[2], "rb").read()
at = int(sys.argv[3])
if h.pread(4096, at) == ref[at:at + 4096]:
    sys.exit("the corruption is not there to be served: this test proves nothing")
print("integrity=off serves the corrupt block, as documented")
PYEOF
stop_nbdkit "$pid"
expect_refusal "$tmpdir/refused.log" 'integrity=on does not match the array' \
  nbdkit "$PLUGIN" "${args[@]}" integrity=on
echo "integrity=off: OK"
echo "$0: PASS"
