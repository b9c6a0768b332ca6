#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Scrub (gpuraidctl scrub, scrub.h), 4+2, 16K chunks, on a running array:
#   1. a clean array scrubs with zero reports, every stripe checked;
#   2. corruption put straight on the members at random (seeded) places:
#      a flipped bit in a data chunk, an overwritten range of a parity
#      chunk, a zeroed data chunk, and both parity chunks of one stripe
#      (which no single chunk explains).  A check-only scrub reports all
#      four stripes, names the member and the chunk of the first three,
#      and writes nothing (the members' checksums are unchanged);
#   3. scrub --repair rewrites the three located chunks and no other byte
#      (the members equal the uncorrupted ones but for the fourth
#      stripe's parity), every byte reads back, the fourth stripe stays
#      reported; once the client rewrites it the offline checker finds
#      every stripe consistent and a new scrub reports nothing;
#   4. a scrub --repair while a client writes: no stripe reported, the
#      data and parity verify (the scrub holds the stripes it checks);
#   5. degraded (one member failed, one chunk of redundancy left): a
#      corrupt chunk is found but not located, and nothing is written,
#      with --repair too;
#   6. stop and go on: scrub --stop, a clean restart, a kill -9: the next
#      scrub goes on from the recorded stripe (status and its answer say
#      where) and ends done;
#   7. refusals, each one line and a non-zero exit: a scrub while one
#      runs, replace during a scrub, --stop with none running, a scrub
#      with m members failed, an unknown option;
#   8. on the stand-in GPU coder (fake_gpu=2, every operation there): the
#      corrupt chunk repaired, coded there (its count), no fallback.
# On the GPU machine test-gpu-array scrubs with the real GPU.  The arrays
# keep no block checksums (integrity=off): the syndrome's own location is
# tested here; tests/test-integrity.sh has scrubs that use checksums.

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_py
requires_cmd nbdcopy python3 cmp
requires_ctl

k=4 m=2 n=6 chunk=16384 doff=1048576
scrub ()        # scrub [--repair]: run one to its end
{
  "$CTL" -c "$ctl" scrub "$@" >"$tmpdir/scrub.out" || fail "scrub $*: $(cat "$tmpdir/scrub.out")"
  timeout 120 "$CTL" -c "$ctl" wait >"$tmpdir/wait" || fail "scrub $*: wait: $(cat "$tmpdir/wait")"
  grep -q '^scrub done: 100.0%' "$tmpdir/wait" || fail "scrub $*: $(cat "$tmpdir/wait")"
}
counts () { ctl_json '"%d %d %d %d" % (s["scrub"]["mismatched_stripes"], s["scrub"]["located"], s["scrub"]["repaired"], s["scrub"]["checked_stripes"])'; }
member_of () { echo $(( (($1 - $2) % n + n) % n )); }   # member_of INDEX STRIPE
# corrupt STRIPE INDEX OFFSET LEN [zero]: random (or zero) bytes over
# [OFFSET, OFFSET+LEN) of code index INDEX's chunk of STRIPE.
corrupt ()
{
  local f=${members[$(member_of "$2" "$1")]}
  local at=$(( doff + $1 * chunk + $3 ))
  if [ "${5:-}" = zero ]; then
    head -c "$4" /dev/zero
  else
    python3 -c "import os, sys; b = bytearray(open(sys.argv[1], 'rb').read()[$at:$at + $4]); b = bytes(x ^ 0xff for x in b) if $4 > 1 else bytes([b[0] ^ 0x10]); sys.stdout.buffer.write(b)" "$f"
  fi | dd of="$f" bs=1 seek="$at" conv=notrunc status=none
}
data_sums ()    # the members' data areas (a scrub updates superblocks)
{
  local f
  for f in "${members[@]}"; do tail -c +$(( doff + 1 )) "$f" | sha256sum; done
}

make_members $n 8M
set_args
ctl_serve m=$m chunk=$chunk create=true integrity=off
size=$(nbdinfo --size "$uri")
stripes=$(( size / (k * chunk) ))
head -c "$size" /dev/urandom >"$tmpdir/expect"
nbdcopy "$tmpdir/expect" "$uri" || fail "fill"

echo "=== 1. a clean array"
scrub
[ "$(counts)" = "0 0 0 $stripes" ] || fail "clean scrub: $(counts)"
grep -q 'scrub: 50%' "$nbdkit_log" || fail "no progress logged"
echo "clean scrub: OK ($stripes stripes, nothing reported)"

echo "=== 2. corruption found and named, nothing written"
RANDOM=$(( TEST_SEED % 32768 ))
s1=$(( RANDOM % (stripes / 4) )); s2=$(( stripes / 4 + RANDOM % (stripes / 4) ))
s3=$(( stripes / 2 + RANDOM % (stripes / 4) )); s4=$(( 3 * stripes / 4 + RANDOM % (stripes / 4) ))
i1=$(( RANDOM % k )); i2=$(( k + RANDOM % m )); i3=$(( RANDOM % k ))
for f in "${members[@]}"; do cp --sparse=always "$f" "$f.good"; done
corrupt $s1 $i1 $(( RANDOM % chunk )) 1                 # one bit
corrupt $s2 $i2 $(( RANDOM % (chunk - 4096) )) 4096     # a range of parity
corrupt $s3 $i3 0 $chunk zero                           # a whole chunk
corrupt $s4 $k 100 512; corrupt $s4 $(( k + 1 )) 9000 512
echo "  stripe $s1 index $i1, $s2 index $i2, $s3 index $i3, $s4 indexes $k and $((k + 1))"
data_sums >"$tmpdir/sums.before"
scrub
[ "$(counts)" = "4 3 0 $stripes" ] || fail "check-only scrub: $(counts)"
got=$(ctl_json '" ".join("%d:%d:%d:%d" % (r["stripe"], r["member"], r["index"], r["offset"]) for r in s["scrub"]["reports"])')
want="$s1:$(member_of $i1 $s1):$i1:$(( s1 * k * chunk + i1 * chunk )) $s2:$(member_of $i2 $s2):$i2:$(( s2 * k * chunk ))"
want+=" $s3:$(member_of $i3 $s3):$i3:$(( s3 * k * chunk + i3 * chunk )) $s4:-1:-1:$(( s4 * k * chunk ))"
[ "$got" = "$want" ] || fail "reports: $got, expected $want"
data_sums | cmp -s - "$tmpdir/sums.before" || fail "a check-only scrub wrote to the members"
grep -q "scrub: stripe $s1 .*member $(member_of $i1 $s1) .*its data chunk.*not repaired (gpuraidctl scrub --repair)" "$nbdkit_log" ||
  fail "no log line for stripe $s1"
grep -q "scrub: stripe $s4 .*no single chunk explains it" "$nbdkit_log" || fail "no log line for stripe $s4"
"$CTL" -c "$ctl" status | grep -q "stripe $s3, array bytes .*member $(member_of $i3 $s3) (data chunk) corrupt, not repaired" ||
  fail "status text: $("$CTL" -c "$ctl" status)"
echo "check-only scrub: OK"

echo "=== 3. scrub --repair"
scrub --repair
[ "$(counts)" = "4 3 3 $stripes" ] || fail "repairing scrub: $(counts)"
verify "after the repair"
stop_nbdkit "$pid"
# Every byte as before the corruption, but for the fourth stripe's parity.
for (( i = 0; i < n; i++ )); do
  f=${members[$i]}
  if [ "$i" = "$(member_of $k $s4)" ] || [ "$i" = "$(member_of $((k + 1)) $s4)" ]; then
    at=$(( doff + s4 * chunk ))
    cmp -s -i $doff -n $(( at - doff )) "$f" "$f.good" || fail "member $i differs before stripe $s4"
    cmp -s -i $(( at + chunk )) "$f" "$f.good" || fail "member $i differs after stripe $s4"
  else
    cmp -s -i $doff "$f" "$f.good" || fail "member $i not repaired exactly"
  fi
done
expect_check_fails "stripe $s4's parity was left as it was" -k $k -m $m -c $chunk -t rs -o $doff -q "${members[@]}"
ctl_serve
dd if="$tmpdir/expect" of="$tmpdir/s4" bs=$(( k * chunk )) skip=$s4 count=1 status=none
"$PY" -c "import nbd, sys; h = nbd.NBD(); h.connect_uri(sys.argv[1]); h.pwrite(open(sys.argv[2], 'rb').read(), int(sys.argv[3])); h.shutdown()" \
  "$uri" "$tmpdir/s4" $(( s4 * k * chunk )) || fail "rewrite stripe $s4"
scrub
[ "$(counts)" = "0 0 0 $stripes" ] || fail "scrub after the rewrite: $(counts)"
verify "stripe $s4 rewritten"
stop_nbdkit "$pid"
check_parity $k $m $chunk rs "${members[@]}"
echo "repair: OK"

echo "=== 4. scrub --repair while a client writes"
ctl_serve
"$CTL" -c "$ctl" rate 6000000 >/dev/null || fail "rate"
"$CTL" -c "$ctl" scrub --repair >/dev/null || fail "scrub --repair"
head -c 12M /dev/urandom >"$tmpdir/w4"
nbdcopy --request-size=4096 "$tmpdir/w4" "$uri" || fail "write during the scrub"
dd if="$tmpdir/w4" of="$tmpdir/expect" conv=notrunc status=none
[ "$(ctl_json 's["scrub"]["state"]')" = running ] || fail "the scrub ended before the writes did (not concurrent)"
"$CTL" -c "$ctl" rate 0 >/dev/null
timeout 120 "$CTL" -c "$ctl" wait >/dev/null || fail "wait"
[ "$(counts)" = "0 0 0 $stripes" ] || fail "scrub during writes: $(counts)"
verify "written during the scrub"
stop_nbdkit "$pid"
check_parity $k $m $chunk rs "${members[@]}"
echo "scrub during writes: OK"

echo "=== 5. degraded: found, not located, nothing written"
ctl_serve
"$CTL" -c "$ctl" fail 0 >/dev/null || fail "fail 0"
s5=$(( stripes / 3 )); i5=$(( (0 + s5 + 1) % n ))       # not on member 0
[ "$(member_of $i5 $s5)" != 0 ] || fail "test bug: the chunk is on member 0"
cp --sparse=always "${members[$(member_of $i5 $s5)]}" "$tmpdir/keep5"
corrupt $s5 $i5 0 4096
data_sums >"$tmpdir/sums.before"
scrub --repair
[ "$(counts)" = "1 0 0 $stripes" ] || fail "degraded scrub: $(counts)"
[ "$(ctl_json 's["scrub"]["reports"][0]["member"]')" = -1 ] || fail "degraded scrub named a member"
grep -q "scrub: stripe $s5 .*cannot be told with one chunk of redundancy left: not repaired" "$nbdkit_log" ||
  fail "no log line for stripe $s5"
data_sums | cmp -s - "$tmpdir/sums.before" || fail "a degraded scrub wrote to the members"
stop_nbdkit "$pid"
cp --sparse=always "$tmpdir/keep5" "${members[$(member_of $i5 $s5)]}"
echo "degraded scrub: OK"

echo "=== 6. stop and go on"
make_members $n 8M c
set_args
ctl_serve m=$m chunk=$chunk create=true integrity=off
nbdcopy "$tmpdir/expect" "$uri" || fail "fill"
"$CTL" -c "$ctl" rate 2000000 >/dev/null || fail "rate"
scrub_started () { "$CTL" -c "$ctl" scrub | tee "$tmpdir/scrub.out" || fail "scrub: $(cat "$tmpdir/scrub.out")"; }
scrub_started; sleep 1
"$CTL" -c "$ctl" scrub --stop | grep -q 'scrub stopped' || fail "scrub --stop"
[ "$(ctl_json 's["scrub"]["state"]')" = stopped ] || fail "not stopped: $(ctl_json 's["scrub"]["state"]')"
done1=$(ctl_json 's["scrub"]["done_bytes"]')
[ "$done1" -gt 0 ] && [ "$done1" -lt "$size" ] || fail "stopped at $done1 of $size"
scrub_started
grep -q "going on from array byte $done1 " "$tmpdir/scrub.out" || fail "did not go on from $done1"
[ "$(ctl_json 's["scrub"]["done_bytes"]')" -ge "$done1" ] || fail "progress went back"
"$CTL" -c "$ctl" rate 0 >/dev/null
timeout 60 "$CTL" -c "$ctl" wait | grep -q '^scrub done: 100.0%' || fail "wait"
[ "$(ctl_json 's["scrub"]["checked_stripes"]')" = $(( stripes - done1 / (k * chunk) )) ] ||
  fail "went on: checked $(ctl_json 's["scrub"]["checked_stripes"]')"
echo "  stopped at $(( done1 >> 10 )) KiB, went on from there"
"$CTL" -c "$ctl" rate 2000000 >/dev/null
scrub_started
grep -q "going on" "$tmpdir/scrub.out" && fail "a finished scrub went on: $(cat "$tmpdir/scrub.out")"
sleep 1
stop_nbdkit "$pid"
ctl_serve
"$CTL" -c "$ctl" status | grep -q '^scrub      stopped at array byte [1-9][0-9]*: gpuraidctl scrub goes on' ||
  fail "restart: $("$CTL" -c "$ctl" status | grep scrub)"
"$CTL" -c "$ctl" rate 2000000 >/dev/null
scrub_started
grep -q "going on from array byte [1-9]" "$tmpdir/scrub.out" || fail "did not go on after a restart"
sleep 4
crash_nbdkit "$pid"
rm -f "$sock"
ctl_serve
wait_resync
scrub_started
grep -q "going on from array byte [1-9]" "$tmpdir/scrub.out" || fail "did not go on after kill -9"
timeout 60 "$CTL" -c "$ctl" wait | grep -q '^scrub done: 100.0%' || fail "wait after kill -9"
[ "$(ctl_json 's["scrub"]["mismatched_stripes"]')" = 0 ] || fail "mismatches after kill -9"
verify "after kill -9 during a scrub"
echo "stop and go on: OK"

echo "=== 7. refusals"
"$CTL" -c "$ctl" rate 1000000 >/dev/null
scrub_started >/dev/null
ctl_refused "scrub while one runs" 'scrub: a resync, rebuild, scrub or live replacement is running' "$CTL" -c "$ctl" scrub
"$CTL" -c "$ctl" fail 5 >/dev/null || fail "fail 5 during a scrub"
truncate -s 8M "$tmpdir/new5.img"
ctl_refused "replace during a scrub" 'replace 5: .*a resync, rebuild, scrub or live replacement is running' "$CTL" -c "$ctl" replace 5 "$tmpdir/new5.img"
"$CTL" -c "$ctl" scrub --stop >/dev/null || fail "stop"
ctl_refused "stop with none running" 'scrub stop: no scrub is running' "$CTL" -c "$ctl" scrub --stop
"$CTL" -c "$ctl" fail 4 >/dev/null || fail "fail 4"
ctl_refused "m members failed" 'scrub: 2 members have failed: no parity is left' "$CTL" -c "$ctl" scrub
ctl_refused "unknown option" 'scrub --bogus: the options are --repair and --stop' "$CTL" -c "$ctl" scrub --bogus
stop_nbdkit "$pid"
echo "refusals: OK"

echo "=== 8. the scrub's coding on a stand-in GPU coder"
make_members $n 8M d
set_args
nbdkit_opts="-D gpuraid.fake_gpu=2" ctl_serve m=$m chunk=$chunk create=true integrity=off
nbdcopy "$tmpdir/expect" "$uri" || fail "fill"
corrupt 7 1 300 1000
scrub --repair
[ "$(counts)" = "1 1 1 $stripes" ] || fail "stand-in GPU scrub: $(counts)"
verify "scrubbed with the stand-in GPU"
stop_nbdkit "$pid"
gpu_worked "$nbdkit_log" || fail "the scrub did not code on the stand-in GPU"
check_parity $k $m $chunk rs "${members[@]}"
echo "stand-in GPU: OK"
echo "$0: PASS"
