#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Crash loops with silent corruption (issue 22): 4 KiB overwritten on the
# members' files (random members, data and parity chunks, at most one a
# stripe), then kill -9 in the middle of an operation, a restart, and:
# every restart accepted, 0 wrong bytes and 0 EIO when the whole array is
# read back, the operation ended, a check-only scrub finding nothing, no
# block of a rebuilt member failing its checksum, and the parity
# consistent offline.  4+2, 16K chunks, 8M members.  Cases
# (CASES, default all; CRASHES crashes each, default 3):
#   rebuild   integrity=on: member 1 fails at run time, writes, a
#             replacement rebuilt at a limited rate while writes land;
#             kill -9; restart with the replacement as member 1 (resumed)
#   takeover  the same with a hot spare (spare=) taking member 1's place
#   scrub-on  integrity=on: scrub --repair at a limited rate; kill -9;
#             restart; read back at once; scrub --repair to the end
#   scrub-off integrity=off: the same; the read-back after the repair
#             (without checksums a read cannot tell a corrupt chunk)
#   resync-on integrity=on: writes, kill -9 while they land or just
#             after (bitmap regions of one stripe, cleared after 2 s
#             idle): the resync of the written stripes must rebuild
#             corrupt chunks, not launder them into parity
#   resync-off integrity=off: corrupt stripes in the crash's bitmap
#             region (64 MiB, the default) that no write touched: the
#             resync (m=2) locates each and rewrites it
#   beyond    past redundancy outside the crash's regions (see
#             beyond_case): EIO, never wrong bytes
#   torn      torn writes (see torn_case and torn_row): a full stripe of
#             which a parity did not land, one block, half a stripe:
#             taken as written
#   replay    a degraded array's crash: the journal's replay repairs a
#             block, and a torn row elsewhere in the regions written at
#             the crash is still decided (see replay_case)

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_ctl
requires_cmd nbdcopy nbdinfo python3 cmp
requires_py

k=4 m=2 n=6 chunk=16384
width=$(( k * chunk ))
crashes=${CRASHES:-3}
cases=${CASES:-rebuild takeover scrub-on scrub-off resync-on resync-off beyond torn replay}
fault=$top/scripts/gpuraid-fault
RANDOM=$TEST_SEED
total_corrupt=0 total_crash=0 total_restart=0 beyond_eio=0

# fresh NAME INTEGRITY [create options]: a new array of random data,
# stopped; made once, its members snapshotted in $tmpdir/snap-NAME.
fresh ()
{
  local name=$1 integ=$2
  shift 2
  if [ -d "$tmpdir/snap-$name" ]; then
    members=("${base_members[@]}")
    restore_members "$tmpdir/snap-$name"
    cp "$tmpdir/expect-$name" "$tmpdir/expect"
    return
  fi
  make_members $n 8M
  base_members=("${members[@]}")
  set_args
  ctl_serve m=$m chunk=$chunk create=true integrity="$integ" "$@"
  size=$(nbdinfo --size "$uri")
  head -c "$size" /dev/urandom >"$tmpdir/expect"
  nbdcopy "$tmpdir/expect" "$uri" || fail "fill"
  stop_nbdkit "$pid"
  snapshot_members "$tmpdir/snap-$name"
  cp "$tmpdir/expect" "$tmpdir/expect-$name"
}

# corrupt N NOT [S0 S1]: N stripes in [S0, S1) (default all), each with
# 4 KiB of one chunk (data or parity, random) overwritten, on members
# other than member NOT (-1: any); the corrupt stripes in $corrupted.
corrupt ()
{
  local want=$1 not=$2 s0=${3:-1} s1=${4:-$(( size / width - 1 ))} s c j out mb
  local -A used=()
  corrupted=()
  while [ ${#corrupted[@]} -lt "$want" ]; do
    s=$(( s0 + RANDOM % (s1 - s0) ))
    [ -z "${used[$s]:-}" ] || continue
    used[$s]=1
    if (( RANDOM % 3 == 0 )); then
      j=$(( RANDOM % m ))
      out=$("$fault" corrupt --parity $j $(( s * width + 4096 )) 4K "${members[@]}") ||
        fail "corrupt: $out"
    else
      c=$(( RANDOM % k ))
      out=$("$fault" corrupt $(( s * width + c * chunk + 8192 )) 4K "${members[@]}") ||
        fail "corrupt: $out"
    fi
    mb=$(sed -n 's/^corrupted [0-9]* bytes of member \([0-9]*\) .*/\1/p' <<<"$out")
    if [ "$mb" = "$not" ]; then
      fail "corrupt: hit member $not, which must stay clean ($out)"
    fi
    corrupted+=("$s")
  done
  total_corrupt=$(( total_corrupt + want ))
}

# corrupt_avoiding N MEMBER: N data chunks corrupt in N stripes (one a
# stripe: with MEMBER lost too that is all the redundancy), none on
# MEMBER.
corrupt_avoiding ()
{
  local got=0 s c out mb
  local -A used=()
  while [ $got -lt "$1" ]; do
    s=$(( 1 + RANDOM % (size / width - 2) ))
    [ -z "${used[$s]:-}" ] || continue
    c=$(( RANDOM % k ))
    out=$("$CTL" map $(( s * width + c * chunk )) "${members[@]}") || fail "map"
    mb=$(sed -n 's/^  data *member \([0-9]*\) .*/\1/p' <<<"$out")
    [ "$mb" != "$2" ] || continue
    used[$s]=1
    "$fault" corrupt $(( s * width + c * chunk + 4096 )) 4K "${members[@]}" >/dev/null ||
      fail "corrupt stripe $s"
    got=$(( got + 1 ))
  done
  total_corrupt=$(( total_corrupt + $1 ))
}

# write_at OFF FILE: FILE's bytes written to the array at byte OFF and
# flushed (the server on $sock).
write_at ()
{
  python3 - "$sock" "$1" "$2" <<'PY'
import sys, nbd
h = nbd.NBD(); h.connect_unix(sys.argv[1])
h.pwrite(open(sys.argv[3], "rb").read(), int(sys.argv[2])); h.flush(); h.shutdown()
PY
}

kill9 ()
{
  crash_nbdkit "$pid"
  rm -f "$ctl"
  total_crash=$(( total_crash + 1 ))
}

restart ()
{
  set_args
  ctl_serve "$@"
  total_restart=$(( total_restart + 1 ))
}

# finish WHAT [CLEAN]: the running operation ends, a check-only scrub
# finds nothing, every byte reads back, no block of member CLEAN (the
# replacement: nothing was injected there) failed its checksum, and
# offline the parity is consistent.
finish ()
{
  local clean=${2:-}
  "$CTL" -c "$ctl" rate 0 >/dev/null
  timeout 120 "$CTL" -c "$ctl" wait >/dev/null ||
    fail "$1: the operation did not end: $(grep -i 'error' "$nbdkit_log" | tail -3)"
  "$CTL" -c "$ctl" scrub >/dev/null || fail "$1: scrub"
  timeout 120 "$CTL" -c "$ctl" wait | grep -q '^scrub done: 100.0%' || fail "$1: the scrub did not end"
  "$CTL" -c "$ctl" status | grep -q '^scrub .* 0 did not match' ||
    fail "$1: the check found mismatches: $("$CTL" -c "$ctl" status | grep '^scrub')"
  verify "$1"
  if [ -n "$clean" ]; then
    e=$(ctl_json 's["members"]['"$clean"']["cksum_errors"]')
    [ "$e" = 0 ] || fail "$1: $e blocks of member $clean, rebuilt, failed their checksums: $(grep 'checksum error' "$nbdkit_log" | head -3)"
  fi
  stop_nbdkit "$pid"
  check_parity $k $m $chunk rs "${members[@]}" >/dev/null
}

heal_case ()   # rebuild | takeover
{
  local how=$1 new
  fresh on on
  new=$tmpdir/new1.img
  rm -f "$new"; truncate -s 8M "$new"
  if [ "$how" = takeover ]; then
    restart resync-rate=2000000 spare="$new"
  else
    restart
  fi
  corrupt_avoiding 4 1
  "$CTL" -c "$ctl" fail 1 >/dev/null || fail "fail 1"
  small_writes 0 8
  if [ "$how" = rebuild ]; then
    "$CTL" -c "$ctl" rate 2000000 >/dev/null
    "$CTL" -c "$ctl" replace 1 "$new" >/dev/null || fail "replace 1"
  fi
  wait_front 4
  # Acknowledged before the kill (a write the kill cuts off may or may
  # not have landed: the reference could not say which).
  small_writes 20 40
  sleep "0.$(( RANDOM % 9 + 1 ))"
  kill9
  members[1]=$new
  restart
  # The rebuild resumes in the background, once the start is done.
  for (( t = 0; t < 100; t++ )); do
    grep -q 'resuming the rebuild of member 1' "$nbdkit_log" && break
    sleep 0.1
  done
  grep -q 'resuming the rebuild of member 1' "$nbdkit_log" ||
    fail "$how: not resumed: $(grep -i 'rebuil\|refus' "$nbdkit_log" | head -3)"
  verify "$how: after kill -9, while rebuilding"
  finish "$how" 1
}

scrub_case ()  # on | off
{
  local integ=$1
  fresh "$integ" "$integ"
  restart resync-rate=3000000
  corrupt 6 -1
  "$CTL" -c "$ctl" scrub --repair >/dev/null || fail "scrub --repair"
  sleep "0.$(( RANDOM % 9 + 1 ))"
  kill9
  restart
  [ "$integ" = off ] || verify "scrub-$integ: after kill -9, mid-scrub"
  timeout 120 "$CTL" -c "$ctl" wait >/dev/null   # a resync first, if any
  "$CTL" -c "$ctl" rate 0 >/dev/null
  "$CTL" -c "$ctl" scrub --repair >/dev/null || fail "scrub --repair again"
  timeout 120 "$CTL" -c "$ctl" wait | grep -q '^scrub done: 100.0%' || fail "the scrub --repair did not end"
  finish "scrub-$integ"
}

resync_case () # on | off
{
  local integ=$1
  if [ "$integ" = on ]; then
    fresh on-bm on bitmap-chunk=16K
    nbdkit_opts="-D gpuraid.bitmap_ms=2000" restart
  else
    fresh off off
    restart
  fi
  # Writes acknowledged, then the kill while their bitmap bits are set.
  if [ "$integ" = on ]; then
    corrupt 6 -1 0 40
    small_writes 0 40
  else
    # Stripes the writes do not touch, in the region they dirty.
    corrupt 4 -1 60 120
    small_writes 0 40
  fi
  sleep "0.$(( RANDOM % 5 + 1 ))"
  kill9
  restart
  grep -q 'cannot be resynced\|refus' "$nbdkit_log" &&
    fail "resync-$integ: $(grep 'cannot be resynced\|refus' "$nbdkit_log")"
  timeout 120 "$CTL" -c "$ctl" wait >/dev/null ||
    fail "resync-$integ: the resync did not end: $(grep -i error "$nbdkit_log" | tail -3)"
  verify "resync-$integ: after the resync"
  finish "resync-$integ"
}

# beyond: one row of a stripe corrupt in three chunks (past m = 2; or in
# two, a member holding a third failed), outside the regions a crash left
# dirty (regions of one stripe): the array starts (its resync, or its
# degraded start's verification of the dirty regions, goes on) and the
# row's reads answer EIO, never the corrupt bytes.  (Inside such a region
# a row like it cannot be told from a write torn by the crash: see
# torn_row.)
beyond_case ()  # healthy | degraded
{
  local s=100 c r mb
  fresh on-bm on bitmap-chunk=16K
  restart
  for c in 0 1; do
    "$fault" corrupt $(( s * width + c * chunk + 4096 )) 4K "${members[@]}" >/dev/null || fail "corrupt"
  done
  if [ "$1" = degraded ]; then
    # The third chunk lost instead: the member of data chunk 2 fails, and
    # the start after the crash verifies the regions written (no resync
    # can run degraded): it must start, and answer EIO in the row.
    mb=$("$CTL" map $(( s * width + 2 * chunk )) "${members[@]}" | sed -n 's/^  data *member \([0-9]*\) .*/\1/p')
    "$CTL" -c "$ctl" fail "$mb" >/dev/null || fail "fail $mb"
  else
    "$fault" corrupt --parity 0 $(( s * width + 4096 )) 4K "${members[@]}" >/dev/null || fail "corrupt parity"
  fi
  small_writes 0 4                      # the region dirty
  kill9
  restart
  r=$(python3 - "$sock" $(( s * width )) $(( 2 * chunk )) "$tmpdir/expect" <<'PY'
import sys, nbd
h = nbd.NBD(); h.connect_unix(sys.argv[1])
off, n = int(sys.argv[2]), int(sys.argv[3])
with open(sys.argv[4], "rb") as f:
    f.seek(off); want = f.read(n)
wrong = eio = 0
for o in range(0, n, 4096):
    try:
        got = h.pread(4096, off + o)
        wrong += got != want[o:o + 4096]
    except nbd.Error:
        eio += 1
print(wrong, eio)
PY
)
  [ "${r%% *}" = 0 ] || fail "beyond: $r (wrong blocks, EIO): corrupt bytes served past redundancy"
  [ "${r##* }" -ge 2 ] || fail "beyond: $r (wrong blocks, EIO): the corrupt row was not refused"
  echo "  beyond redundancy: $r (wrong blocks, EIO blocks)"
  beyond_eio=$(( beyond_eio + ${r##* } ))
  stop_nbdkit "$pid"
}

# torn: the crash tore a full-stripe write: one 4 KiB row of stripe 120
# has its new data and first parity on the members, the second parity
# old, and every checksum old (the cache not written).  Not corruption:
# the blocks that fail their checksums are one codeword on their own.
# They must be taken as written (no EIO), the resync then makes the row
# one codeword again.
torn_case ()
{
  local s=120 j f mb at
  fresh on on
  restart
  head -c "$width" /dev/urandom >"$tmpdir/new-stripe"
  write_at $(( s * width )) "$tmpdir/new-stripe" || fail "full-stripe write"
  stop_nbdkit "$pid"
  mkdir -p "$tmpdir/B"; for f in "${members[@]}"; do cp --sparse=always "$f" "$tmpdir/B/"; done
  # Where the row is: data chunks 0-3 and parity 0, 4 KiB in.
  places=()
  for (( j = 0; j < k; j++ )); do
    "$CTL" map $(( s * width + j * chunk + 4096 )) "${members[@]}" >"$tmpdir/map"
    places+=("$(sed -n 's/^  data *member [0-9]* (\(.*\)) at byte \([0-9]*\).*/\1 \2/p' "$tmpdir/map")")
  done
  places+=("$(sed -n 's/^  parity *member [0-9]* (\(.*\)) at byte \([0-9]*\).*/\1 \2/p' "$tmpdir/map" | head -1)")
  # The old array, crashed after a write elsewhere in the region; then
  # the torn row put in place.
  fresh on on
  restart
  small_writes 0 4
  kill9
  for f in "${places[@]}"; do
    read -r mb at <<<"$f"
    dd if="$tmpdir/B/$(basename "$mb")" of="$mb" bs=4096 skip=$(( at / 4096 )) seek=$(( at / 4096 )) count=1 conv=notrunc status=none
  done
  for (( j = 0; j < k; j++ )); do
    dd if="$tmpdir/new-stripe" of="$tmpdir/expect" bs=4096 skip=$(( (j * chunk + 4096) / 4096 )) \
      seek=$(( (s * width + j * chunk + 4096) / 4096 )) count=1 conv=notrunc status=none
  done
  restart
  timeout 120 "$CTL" -c "$ctl" wait >/dev/null || true
  verify "torn: the row taken as written"
  finish "torn"
  echo "  a torn full-stripe write taken as written: no EIO"
}

# torn_row LABEL S WOFF WLEN LANDED CKSUM NEW: a write of WLEN bytes at
# byte WOFF of stripe S (random data), torn by the crash in the row 4 KiB
# into the chunks as the checksum pages (written by member, at a bitmap
# clear elsewhere) can leave it: the blocks of LANDED (d0..d3, p0, p1)
# hold the new data with their checksums not written, those of CKSUM the
# old data with the new checksum; the rest of the write did not land.  A
# restart must answer no EIO, the data chunks of NEW read back new, the
# others old, and the array ends consistent (finish).
torn_row ()
{
  local label=$1 s=$2 woff=$3 wlen=$4 landed=$5 ck=$6 new=$7
  local f mb at d0 c0 ch j lo=$(( s * width + 4096 ))
  local -A place=()
  fresh on on
  restart
  head -c "$wlen" /dev/urandom >"$tmpdir/new-data"
  write_at $(( s * width + woff )) "$tmpdir/new-data" || fail "$label: the write"
  stop_nbdkit "$pid"
  mkdir -p "$tmpdir/C"; for f in "${members[@]}"; do cp --sparse=always "$f" "$tmpdir/C/"; done
  # Where the row's blocks are: data chunk j's from the map of its
  # offset, the parity's from any of them.
  for (( j = 0; j < k; j++ )); do
    "$CTL" map $(( lo + j * chunk )) "${members[@]}" >"$tmpdir/map" || fail "map"
    place[d$j]=$(sed -n 's/^  data *member [0-9]* (\(.*\)) at byte \([0-9]*\).*/\1 \2/p' "$tmpdir/map")
  done
  for (( j = 0; j < m; j++ )); do
    place[p$j]=$(sed -n 's/^  parity *member [0-9]* (\(.*\)) at byte \([0-9]*\).*/\1 \2/p' "$tmpdir/map" |
                 sed -n "$(( j + 1 ))p")
  done
  "$CTL" examine "${members[0]}" >"$tmpdir/examine" || fail "examine"
  d0=$(sed -n 's/^  data .* from offset \([0-9]*\)$/\1/p' "$tmpdir/examine")
  c0=$(sed -n 's/^  integrity .* from offset \([0-9]*\)$/\1/p' "$tmpdir/examine")
  [ -n "$d0" ] && [ -n "$c0" ] && [ -n "${place[p$(( m - 1 ))]}" ] ||
    fail "$label: map or examine: $(cat "$tmpdir/map" "$tmpdir/examine")"
  # The old array, crashed after a write elsewhere in the region; then
  # the torn row put in place.
  fresh on on
  restart
  small_writes 0 4
  kill9
  for ch in $landed; do
    read -r mb at <<<"${place[$ch]}"
    dd if="$tmpdir/C/$(basename "$mb")" of="$mb" bs=4096 skip=$(( at / 4096 )) \
      seek=$(( at / 4096 )) count=1 conv=notrunc status=none
  done
  for ch in $ck; do
    read -r mb at <<<"${place[$ch]}"
    f=$(( c0 + (at - d0) / 4096 * 4 ))
    dd if="$tmpdir/C/$(basename "$mb")" of="$mb" bs=1 skip=$f seek=$f count=4 \
      conv=notrunc status=none
  done
  for ch in $new; do
    j=${ch#d}
    dd if="$tmpdir/new-data" of="$tmpdir/expect" bs=4096 count=1 status=none conv=notrunc \
      skip=$(( (j * chunk + 4096 - woff) / 4096 )) seek=$(( (lo + j * chunk) / 4096 ))
  done
  restart
  timeout 120 "$CTL" -c "$ctl" wait >/dev/null || true
  verify "$label: the row as the crash left it"
  finish "$label"
  echo "  $label: no EIO, the row as the crash left it"
}

# replay: a degraded array (the member of stripe A's data chunk 2 failed
# at run time) crashes after writes to stripes A and B = A + 1 (regions of
# one stripe, both journaled; the checksums of what they wrote not on
# the members: the cache is written when a region's bit is cleared).  In
# A the write of data chunk 0 landed and its parity did not (put back from
# before the write): the journal's replay at start-up finds that block
# failing its checksum, rebuilds it from the others and writes it.  B's
# write landed whole.  B's region must still be verified at the start
# (it was written at the crash): its row, whose data and parity blocks
# disagree with their old checksums, is taken as written, never EIO.
# Before, the bits were read from the members after the replay, whose
# repair had written its own over them: B's region was not verified and
# its row answered EIO ("3 blocks failed their checksums and the others
# cannot rebuild them"; test-crash-loop met it under load).
replay_case ()
{
  local a=100 b=101 j mb at failed out
  local -a old=()
  fresh on-bm on bitmap-chunk=16K
  "$CTL" map $(( a * width + 2 * chunk )) "${members[@]}" >"$tmpdir/map" || fail "map"
  failed=$(sed -n 's/^  data *member \([0-9]*\) .*/\1/p' "$tmpdir/map")
  "$CTL" map $(( a * width + 8192 )) "${members[@]}" >"$tmpdir/map" || fail "map"
  mapfile -t old < <(sed -n 's/^  parity *member [0-9]* (\(.*\)) at byte \([0-9]*\).*/\1 \2/p' "$tmpdir/map")
  [ -n "$failed" ] && [ ${#old[@]} = "$m" ] || fail "replay: map: $(cat "$tmpdir/map")"
  restart
  "$CTL" -c "$ctl" fail "$failed" >/dev/null || fail "replay: fail $failed"
  small_writes $a $(( a + 1 ))          # A: data chunk 0, 8 KiB in
  head -c 4096 /dev/urandom >"$tmpdir/b-row0"
  write_at $(( b * width )) "$tmpdir/b-row0" || fail "replay: the write of B"
  dd if="$tmpdir/b-row0" of="$tmpdir/expect" bs=4096 seek=$(( b * width / 4096 )) conv=notrunc status=none
  kill9
  # A's parity as before the write; its data block then reads back old.
  for j in "${old[@]}"; do
    read -r mb at <<<"$j"
    dd if="$tmpdir/snap-on-bm/$(basename "$mb")" of="$mb" bs=4096 skip=$(( at / 4096 )) \
      seek=$(( at / 4096 )) count=1 conv=notrunc status=none
  done
  dd if="$tmpdir/expect-on-bm" of="$tmpdir/expect" bs=4096 skip=$(( (a * width + 8192) / 4096 )) \
    seek=$(( (a * width + 8192) / 4096 )) count=1 conv=notrunc status=none
  restart
  grep -q 'member [0-9]*: checksum error .*stripe '$a', data chunk 0' "$nbdkit_log" ||
    fail "replay: A's block not repaired: $(grep -i 'checksum\|journal' "$nbdkit_log" | head -5)"
  out=$(sed -n 's/.*the block checksums of the \([0-9]*\) regions written at the crash were verified.*/\1/p' "$nbdkit_log")
  [ "$out" = 2 ] ||
    fail "replay: ${out:-no} regions written at the crash verified at the start, not A's and B's (2): $(grep -i 'checksum\|journal' "$nbdkit_log" | head -5)"
  verify "replay: A's write undone, B's taken as written"
  stop_nbdkit "$pid"
  out=()
  for (( j = 0; j < n; j++ )); do
    if [ $j = "$failed" ]; then out+=(-); else out+=("${members[$j]}"); fi
  done
  check_parity $k $m $chunk rs "${out[@]}" >/dev/null
  echo "  a degraded crash whose replay repaired a block: both regions written at the crash verified, no EIO"
}

for c in $cases; do
  echo "=== $c, $crashes crashes"
  for (( i = 0; i < crashes; i++ )); do
    case $c in
      rebuild|takeover) heal_case "$c" ;;
      scrub-on|scrub-off) scrub_case "${c#scrub-}" ;;
      resync-on|resync-off) resync_case "${c#resync-}" ;;
      beyond) beyond_case healthy; beyond_case degraded ;;
      replay) replay_case ;;
      torn)
        torn_case
        # One block (data 1): it and parity 0 landed, parity 1's checksum
        # did: the other data and those two are one codeword of 5 > k.
        torn_row "torn one-block write" 121 $(( chunk + 4096 )) 4096 "d1 p0" p1 d1
        # A full stripe, half of it landed: no k + 1 blocks of either
        # codeword; taken as the crash left it (data 0 and 1 new).
        torn_row "torn full-stripe write, half landed" 122 0 $width "d0 d1 p0" "" "d0 d1" ;;
      *) fail "unknown case $c" ;;
    esac
    [ "$c" = beyond ] || [ "$c" = torn ] || [ "$c" = replay ] || echo "  crash $(( i + 1 )): 0 wrong bytes, 0 EIO"
  done
done
echo "crashes $total_crash, restarts accepted $total_restart, corruptions injected $total_corrupt (recoverable): 0 wrong bytes, 0 EIO; past redundancy: $beyond_eio blocks refused with EIO, 0 wrong"
echo "$0: PASS"
