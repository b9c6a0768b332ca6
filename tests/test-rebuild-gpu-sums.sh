#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A rebuild whose reconstructs run on the GPU, with integrity on: the
# reconstructs compute the checksums of the blocks they read and of those
# they rebuild, the reads are verified against them after the coding (not
# on the CPU before it) and the rebuilt chunks' checksums are set from
# them.  On the stand-in GPU (-D gpuraid.fake_gpu=2: the plugin's GPU
# path on the CPU), 4+2, chunk 64K, member 1 replaced and rebuilt:
#   1. with blocks corrupt on surviving members: each is found after the
#      reconstruct, repaired, and the batch coded again; the server's
#      exit log counts reads verified and writes set from the coding's
#      checksums; the data reads back on the CPU, healthy and with two
#      other members gone (the rebuilt chunks' checksums verified), and
#      the parity checks offline;
#   2. with a stand-in whose checksums are wrong (fake_gpu=4): caught
#      once, the GPU not used again, nothing "repaired", the rebuild
#      finishes on the CPU and the data reads back;
#   3. member 0 failed too and left so (its chunks lost but not rebuilt):
#      member 1 rebuilt on the stand-in, its reads verified against the
#      coding's checksums, no fallback, the data reads back.

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_ctl
requires_cmd nbdcopy nbdinfo cmp python3

k=4 m=2 n=6 chunk=65536
width=$(( k * chunk ))

# rebuild_on FAKE WHAT [ALSO]: member 1 failed (and member ALSO, left
# failed), replaced by a blank file and rebuilt on stand-in GPU FAKE;
# the data verified (WHAT).
rebuild_on ()
{
  nbdkit_opts="-D gpuraid.fake_gpu=$1" ctl_serve
  if [ -n "${3:-}" ]; then
    "$CTL" -c "$ctl" fail "$3" || fail "fail $3"
  fi
  "$CTL" -c "$ctl" fail 1 || fail "fail 1"
  truncate -s 16M "$tmpdir/new1.img"
  "$CTL" -c "$ctl" replace 1 "$tmpdir/new1.img" >/dev/null || fail "replace"
  timeout 120 "$CTL" -c "$ctl" wait | tee "$tmpdir/wait" || fail "wait"
  grep -q '^rebuild done: 100.0%' "$tmpdir/wait" || fail "$2: $(cat "$tmpdir/wait")"
  verify "$2"
  stop_nbdkit "$pid"
  members[1]=$tmpdir/new1.img
  set_args
}

# The data read back on the CPU alone, healthy and with members 0 and 3
# gone (their chunks rebuilt from the others, member 1's among them).
read_back_cpu ()
{
  ctl_serve
  verify "$1, on the CPU"
  stop_nbdkit "$pid"
  mv "${members[0]}" "$tmpdir/gone0"; mv "${members[3]}" "$tmpdir/gone3"
  ctl_serve
  verify "$1, on the CPU, members 0 and 3 gone"
  stop_nbdkit "$pid"
  mv "$tmpdir/gone0" "${members[0]}"; mv "$tmpdir/gone3" "${members[3]}"
}

fresh ()
{
  rm -f "$tmpdir/new1.img"
  make_members $n 16M
  set_args
  ctl_create_filled
}

echo "=== 1. blocks corrupt on surviving members"
fresh
: >"$tmpdir/damage"
for (( s = 3; s < 40; s += 4 )); do
  "$top/scripts/gpuraid-fault" corrupt $(( s * width + 2 * chunk + 12288 )) \
    4096 "${members[@]}" >>"$tmpdir/damage" || fail "corrupt"
done
ncorrupt=$(grep -vc "(${members[1]})" "$tmpdir/damage")
rebuild_on 2 "rebuilt on the stand-in GPU"
gpu_worked "$nbdkit_log" || fail "the rebuild did not code on the stand-in GPU"
verified=$(sed -n "s/.*block checksums verified against the coding's: \([0-9]*\) reads.*/\1/p" "$nbdkit_log")
set_from=$(sed -n "s/.*block checksums set from the coding's: \([0-9]*\) writes.*/\1/p" "$nbdkit_log")
repaired=$(grep -c 'checksum error at byte .* rebuilt from the other chunks and rewritten' "$nbdkit_log")
echo "corrupt on survivors: $ncorrupt, repaired: $repaired; reads verified against the coding's checksums: ${verified:-none}, writes whose checksums it set: ${set_from:-none}"
[ "${verified:-0}" -gt 0 ] ||
  fail "no read of the rebuild verified against its reconstructs' checksums"
[ "${set_from:-0}" -gt 0 ] ||
  fail "no rebuilt chunk's checksums set from its reconstruct's"
[ "$ncorrupt" -gt 0 ] && [ "$repaired" = "$ncorrupt" ] ||
  fail "$ncorrupt corrupt blocks on surviving members, $repaired repaired"
check_parity $k $m $chunk rs "${members[@]}"
read_back_cpu "after the rebuild"
echo "corrupt survivors: OK"

echo "=== 2. a GPU whose checksums are wrong"
fresh
rebuild_on 4 "rebuilt with the GPU's checksums wrong"
[ "$(grep -c 'the checksums its reconstruct computed disagree' "$nbdkit_log")" = 1 ] ||
  fail "wrong checksums from the GPU not caught once"
! grep -q 'rebuilt from the other chunks and rewritten' "$nbdkit_log" ||
  fail "a block repaired on the word of wrong checksums"
check_parity $k $m $chunk rs "${members[@]}"
read_back_cpu "after the rebuild with wrong GPU checksums"
echo "wrong checksums: OK"

echo "=== 3. one of two failed members rebuilt"
# Member 0's chunks, lost but not rebuilt, are passed to the reconstructs
# as blocks that are not there (gf.h); their checksums still verify the
# reads.
fresh
rebuild_on 2 "member 1 rebuilt on the stand-in GPU, member 0 failed" 0
gpu_worked "$nbdkit_log" ||
  fail "member 1's rebuild did not code on the stand-in GPU alone"
verified=$(sed -n "s/.*block checksums verified against the coding's: \([0-9]*\) reads.*/\1/p" "$nbdkit_log")
[ "${verified:-0}" -gt 0 ] ||
  fail "no read of member 1's rebuild verified against its reconstructs' checksums"
echo "one of two failed members rebuilt: OK ($verified reads verified)"
echo "$0: PASS"
