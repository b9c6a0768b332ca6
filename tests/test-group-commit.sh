#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Group commit of full-stripe encodes on the GPU path: whole-stripe
# writes from several connections at once are gathered into shared
# batches.  Runs the plugin's GPU code path on the CPU with
# -D gpuraid.fake_gpu=2 (a working stand-in GPU coder), so it needs no
# GPU.  nbdcopy (4 connections, many requests in flight, 1 MiB requests
# = 4 whole stripes of a 4+2 array with 64K chunks) writes a random
# image; the log must show batches taken from several requests, never
# more than two of them on the (slowed) stand-in at once, and leaders
# that waited for one to end; the array is then read back on the plain CPU path, healthy and with two
# members gone (every block verified against the checksums that came
# with the stand-in's encodes), and its parity is checked offline.  Then
# the degraded
# reads on the stand-in GPU: their reconstructs, gathered across
# requests (the exit log counts more operations than submissions), give
# the image back; and with a stand-in whose every operation fails, the
# gathered batches are redone on the CPU.  The gathered reconstructs
# compute the checksums of the blocks they read, and the reads are
# verified against them: blocks corrupt on the members (one member lost)
# are found so, repaired, and the right data served.  Last, small
# unaligned writes from several connections: their reconstruct-writes'
# encodes of part of a chunk's height, and their read-modify-writes'
# parity updates, are gathered across requests, and the array reads
# back whole on the CPU (also after a failing stand-in).

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_cmd nbdcopy cmp

k=4 m=2 chunk=65536 n=6
# TEST_SMALL=1 (make check-tsan): a smaller image.
member_size=34M
[ "${TEST_SMALL:-0}" = 1 ] && member_size=9M

# read_on_fake FAKE WHAT: the image read back degraded (nbdcopy, 4
# connections) from a server on stand-in GPU FAKE, its log afresh; fail
# with WHAT if it differs.
read_on_fake ()
{
  : >"$nbdkit_log"
  start_nbdkit -P "$pid" -U "$sock" -v -D gpuraid.fake_gpu=$1 \
    "$PLUGIN" "${args[@]}" || exit 1
  rm -f "$tmpdir/out"
  nbdcopy -C 4 --request-size=1048576 "$uri" "$tmpdir/out" &&
    cmp "$tmpdir/out" "$tmpdir/img" || fail "$2"
  stop_nbdkit "$pid"
}

# The server's count at exit of reads verified against the checksums
# their coding computed (empty: none).
coding_verified ()
{
  sed -n "s/.*block checksums verified against the coding's: \([0-9]*\) reads.*/\1/p" "$nbdkit_log"
}

for code in rs crs; do
  echo "=== code=$code"
  make_members $n $member_size
  set_args
  : >"$nbdkit_log"
  # A stand-in round trip of 2 ms, so that batches are on the
  # "GPU" when the next leaders' windows end.
  start_nbdkit -P "$pid" -U "$sock" -v -D gpuraid.fake_gpu=2 \
    -D gpuraid.fake_gpu_us=2000 -D gpuraid.verbose=1 "$PLUGIN" "${args[@]}" \
    m=$m chunk=$chunk code=$code create=true || exit 1
  size=$(nbdinfo --size "$uri")
  head -c "$size" /dev/urandom >"$tmpdir/img"
  # Requests meet in the leader's window only when they overlap; on a
  # loaded machine one pass may happen not to: up to three passes.
  for (( pass = 1; pass <= 3; pass++ )); do
    nbdcopy -C 4 --request-size=1048576 "$tmpdir/img" "$uri" ||
      { echo "$0: FAIL: nbdcopy"; exit 1; }
    grep -q 'group commit:' "$nbdkit_log" && break
  done
  stop_nbdkit "$pid"
  grep -q 'fake working GPU coder' "$nbdkit_log" ||
    { echo "$0: FAIL: the stand-in GPU coder was not used"; exit 1; }
  gpu_worked "$nbdkit_log" || fail "the stand-in GPU did not code"
  batches=$(grep -c 'group commit:' "$nbdkit_log")
  echo "batches gathered from several requests: $batches"
  grep -m 3 'group commit:' "$nbdkit_log"
  # Under ThreadSanitizer (TEST_SMALL=1) requests are too slow to meet in
  # the 200 us window: races, data and parity are what is checked there.
  if [ "$batches" -lt 1 ] && [ "${TEST_SMALL:-0}" != 1 ]; then
    echo "$0: FAIL: no encode batch gathered stripes of several requests"; exit 1
  fi
  # At most two batches on the GPU at once (these writes are whole
  # stripes: every encode is the group commit's); a leader whose window
  # ends while two are there waits, its batch growing.
  most=$(sed -n 's/.*fake GPU: .*; at most \([0-9]*\) submissions at once.*/\1/p' "$nbdkit_log")
  waited=$(sed -n 's/.*batches that then waited for one on the GPU: \([0-9]*\).*/\1/p' "$nbdkit_log")
  echo "group commit: at most ${most:-?} batches on the stand-in at once; ${waited:-?} batches waited for one to end"
  [ -n "$most" ] && [ "$most" -ge 1 ] && [ "$most" -le 2 ] ||
    fail "the group commit had ${most:-no count of} batches on the GPU at once (at most 2)"
  [ -n "$waited" ] || fail "no count at exit of the batches that waited for the GPU"
  # The executor's account of where its plans' time went: every
  # whole-stripe plan's coding waited for a round trip of the stand-in.
  full=$(sed -n 's/.*plans run one at a time, mean us .*write-full \([0-9]*\): [0-9]*, [0-9]*, \([0-9]*\), [0-9]*.*/\1 \2/p' "$nbdkit_log")
  echo "whole-stripe plans, and their mean us coding: ${full:-none}"
  read -r nfull fullcode <<<"${full:-0 0}"
  [ "$nfull" -gt 0 ] || fail "no account at exit of the whole-stripe plans' time"
  [ "$fullcode" -ge 2000 ] ||
    fail "whole-stripe plans' coding took $fullcode us on a stand-in of 2000 us a round trip"
  # Each request's time in the group commit: waiting for its batch to
  # go, its batch on the stand-in (at least its round trip), woken.
  times=$(sed -n 's/.*request waited for its batch to go, on the GPU, then to be woken: \([0-9]*\), \([0-9]*\), \([0-9]*\).*/\1 \2 \3/p' "$nbdkit_log")
  echo "group commit, mean us a request waited for its batch to go, on the GPU, to be woken: ${times:-none}"
  read -r _ ongpu _ <<<"${times:-0 0 0}"
  [ "$ongpu" -ge 2000 ] ||
    fail "a request's batch was on the stand-in for $ongpu us of its 2000 us round trip"
  if [ "$waited" -lt 1 ] && [ "${TEST_SMALL:-0}" != 1 ]; then
    fail "no batch waited for one on the GPU to end"
  fi
  check_parity $k $m $chunk $code "${members[@]}"
  # The writes' block checksums came with their (stand-in) GPU encodes;
  # the reads below, on the CPU, verify every block against them.
  given=$(sed -n 's/.*block checksums set from the coding.s: \([0-9]*\) writes.*/\1/p' "$nbdkit_log")
  echo "writes whose block checksums came with the encode: ${given:-none}"
  [ "${given:-0}" -gt 0 ] ||
    fail "no write's block checksums came with its GPU encode"

  start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" || exit 1
  rm -f "$tmpdir/out"
  nbdcopy "$uri" "$tmpdir/out" && cmp "$tmpdir/out" "$tmpdir/img" ||
    { echo "$0: FAIL: data read back differs"; exit 1; }
  stop_nbdkit "$pid"
  mv "${members[0]}" "$tmpdir/gone0"; mv "${members[3]}" "$tmpdir/gone3"
  start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" || exit 1
  rm -f "$tmpdir/out"
  nbdcopy "$uri" "$tmpdir/out" && cmp "$tmpdir/out" "$tmpdir/img" ||
    { echo "$0: FAIL: degraded read back differs"; exit 1; }
  stop_nbdkit "$pid"
  for fake in 2 1; do
    : >"$nbdkit_log"
    start_nbdkit -P "$pid" -U "$sock" -v -D gpuraid.fake_gpu=$fake \
      -D gpuraid.fake_gpu_us=300 -D gpuraid.verbose=1 "$PLUGIN" "${args[@]}" || exit 1
    for (( pass = 1; pass <= 3; pass++ )); do
      rm -f "$tmpdir/out"
      nbdcopy -C 4 --request-size=1048576 "$uri" "$tmpdir/out" &&
        cmp "$tmpdir/out" "$tmpdir/img" ||
        fail "degraded read on the stand-in GPU (fake_gpu=$fake) differs"
      [ $fake = 1 ] || grep -q 'gathered: ' "$nbdkit_log" && break
    done
    stop_nbdkit "$pid"
    line=$(gathered "$nbdkit_log")
    [ -n "$line" ] || fail "fake_gpu=$fake: no count of gathered reconstructs at exit"
    read -r plans subs _ <<<"$line"
    echo "fake_gpu=$fake: small operations gathered: $plans plans in $subs submissions"
    [ "$plans" -gt 0 ] || fail "fake_gpu=$fake: no reconstruct went to the stand-in GPU"
    # (fake_gpu=1: after the first failure the CPU codes everything.)
    if [ $fake = 2 ]; then
      grep -o 'gathered operations, mean per plan: [0-9]* us queued, [0-9]* us in its submission.*' "$nbdkit_log" ||
        fail "fake_gpu=2: no account at exit of where the gathered plans' time went"
    fi
    if [ $fake = 2 ] && [ "$plans" -le "$subs" ] && [ "${TEST_SMALL:-0}" != 1 ]; then
      fail "fake_gpu=$fake: no submission gathered reconstructs of several requests ($line)"
    fi
    if [ $fake = 1 ]; then
      grep -q 'GPU reconstruct failed' "$nbdkit_log" ||
        fail "fake_gpu=1: the failing stand-in was not seen to fail"
    else
      # The reads of the gathered reconstructs were verified against the
      # checksums the (stand-in) GPU computed of the blocks it read.
      given=$(coding_verified)
      echo "fake_gpu=2: reads verified against the coding's checksums: ${given:-none}"
      [ "${given:-0}" -gt 0 ] ||
        fail "fake_gpu=2: no degraded read verified against its reconstruct's checksums"
    fi
  done
  # Silent corruption of blocks the GPU's reconstructs read, with one
  # member lost: found by those checksums (after the reconstruct), rebuilt
  # from the others, rewritten, and the right data served.
  mv "$tmpdir/gone0" "${members[0]}"; mv "$tmpdir/gone3" "${members[3]}"
  width=$(( k * chunk ))
  for (( s = 2; s < 10; s++ )); do
    "$top/scripts/gpuraid-fault" corrupt $(( s * width + chunk + 8192 )) 4096 \
      "${members[@]}" >>"$tmpdir/damage" || fail "corrupt"
  done
  ncorrupt=$(grep -vc "(${members[0]})" "$tmpdir/damage")
  mv "${members[0]}" "$tmpdir/gone0"
  read_on_fake 2 "degraded read of corrupt blocks on the stand-in GPU differs"
  repaired=$(grep -c 'checksum error at byte .* rebuilt from the other chunks and rewritten' "$nbdkit_log")
  given=$(coding_verified)
  echo "corrupt blocks on surviving members: $ncorrupt, repaired: $repaired, reads verified against the coding's checksums: ${given:-none}"
  [ "$repaired" = "$ncorrupt" ] ||
    fail "$ncorrupt corrupt blocks on surviving members, $repaired repaired"
  [ "${given:-0}" -gt 0 ] || fail "no read verified against its reconstruct's checksums"
  # A GPU whose checksums are wrong (the stand-in of fake_gpu=4): caught
  # at its first reconstruct, not used again, nothing repaired that was
  # not broken, the right data served.
  read_on_fake 4 "degraded read with the GPU's checksums wrong differs"
  [ "$(grep -c 'the checksums its reconstruct computed disagree' "$nbdkit_log")" = 1 ] ||
    fail "wrong checksums from the GPU not caught once"
  ! grep -q 'rebuilt from the other chunks and rewritten' "$nbdkit_log" ||
    fail "a block repaired on the word of wrong checksums"
  rm -f "${members[@]}" "$tmpdir"/gone* "$tmpdir/img" "$tmpdir/out" "$tmpdir/damage"
done

# Small writes, 6+2: tests/test-concurrent's writers (unaligned ranges
# of 1 to 6000 bytes, 6 connections).  With checksums (integrity=on) a
# write of part of a block is a reconstruct-write, whose encode covers
# only the rows it touches; without, most are read-modify-writes, whose
# parity updates run as such encodes (of the data's delta).  Either
# way they are gathered across requests on the stand-in GPU (the exit
# log counts them).  The array must read back whole on the CPU, with
# parity right, healthy and with m members gone; and with a stand-in
# whose every operation fails, the gathered encodes are redone on the
# CPU.
prog=$top/tests/test-concurrent
[ -x "$prog" ] || fail "$prog not built"
seed=$TEST_SEED
k=6 m=2 n=8
for cfg in 2:on 2:off 1:off; do
  fake=${cfg%:*} integrity=${cfg#*:}
  echo "=== small writes, fake_gpu=$fake integrity=$integrity"
  make_members $n 6M
  set_args
  : >"$nbdkit_log"
  start_nbdkit -P "$pid" -U "$sock" -v -D gpuraid.fake_gpu=$fake \
    -D gpuraid.fake_gpu_us=300 -D gpuraid.verbose=1 "$PLUGIN" "${args[@]}" \
    m=$m chunk=$chunk integrity=$integrity create=true || exit 1
  seed=$(( seed + 1 ))
  "$prog" write "$uri" $seed 6 || fail "small writes on fake_gpu=$fake (seed $seed)"
  stop_nbdkit "$pid"
  line=$(gathered "$nbdkit_log")
  [ -n "$line" ] || fail "fake_gpu=$fake: no count of gathered operations at exit"
  read -r plans subs encodes <<<"$line"
  echo "fake_gpu=$fake: small operations gathered: $plans plans in $subs submissions, $encodes encodes"
  # Those of several chunks: one update of all their deltas (one
  # gathered encode on the stand-in).
  read -r rmw rmw_several <<<"$(rmw_plans "$nbdkit_log" $m)"
  echo "read-modify-writes: $rmw ($rmw_several of several chunks)"
  if [ "$integrity" = off ]; then
    [ "$rmw" -gt 0 ] || fail "integrity=off: no read-modify-write"
    [ "$rmw_several" -gt 0 ] ||
      fail "integrity=off: no read-modify-write of several chunks"
  fi
  if [ $fake = 2 ]; then
    gpu_worked "$nbdkit_log" || fail "the stand-in GPU did not code the small writes"
    [ "$encodes" -gt 0 ] || fail "no small write's encode was gathered"
    [ "$plans" -gt "$subs" ] || [ "${TEST_SMALL:-0}" = 1 ] ||
      fail "no submission gathered encodes of several requests ($line)"
  else
    grep -q 'GPU encode failed' "$nbdkit_log" ||
      fail "fake_gpu=1: the failing stand-in was not seen to fail"
  fi
  check_parity $k $m $chunk rs "${members[@]}"
  start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" || exit 1
  "$prog" verify "$uri" $seed 6 || fail "small writes read back (fake_gpu=$fake)"
  stop_nbdkit "$pid"
  mv "${members[1]}" "$tmpdir/gone1"; mv "${members[6]}" "$tmpdir/gone6"
  start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" || exit 1
  "$prog" verify "$uri" $seed 6 ||
    fail "small writes read back with 2 members gone (fake_gpu=$fake)"
  stop_nbdkit "$pid"
  rm -f "${members[@]}" "$tmpdir"/gone*
done
echo "$0: PASS"
