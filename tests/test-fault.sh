#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The fault-injection script (scripts/gpuraid-fault) on live arrays, 4+2,
# 16K chunks:
#   1. corrupt: a data chunk and (--parity 1) a parity chunk overwritten
#      where the script says; a scrub finds them by their block checksums
#      (integrity, the default) on exactly those members and brings every
#      byte back (test-scrub checks the syndrome's location without);
#   2. kill: the server killed during writes; the restart resyncs and the
#      offline checker finds every stripe consistent;
#   3. flaky (needs FUSE): member 5 served through the error and delay
#      filters; slow, it works; with EIO on half its requests it is failed
#      (status) while writes go on, and every byte reads back.

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_ctl
requires_cmd nbdcopy nbdinfo python3 cmp

fault=$top/scripts/gpuraid-fault
k=4 m=2 n=6 chunk=16384

make_members $n 8M
set_args
ctl_serve m=$m chunk=$chunk create=true
size=$(nbdinfo --size "$uri")
head -c "$size" /dev/urandom >"$tmpdir/expect"
nbdcopy "$tmpdir/expect" "$uri" || fail "fill"

echo "=== 1. corrupt"
off1=$(( 5 * k * chunk + 2 * chunk + 1000 )); off2=$(( 17 * k * chunk + 10 ))
"$fault" corrupt "$off1" 300 "${members[@]}" | tee "$tmpdir/c1" || fail "corrupt data"
"$fault" corrupt --parity 1 "$off2" 20K "${members[@]}" | tee "$tmpdir/c2" || fail "corrupt parity (20K)"
read -r mb1 at1 < <(sed -n 's/^corrupted 300 bytes of member \([0-9]*\) .* at byte \([0-9]*\)$/\1 \2/p' "$tmpdir/c1")
read -r mb2 at2 < <(sed -n 's/^corrupted [0-9]* bytes of member \([0-9]*\) .* at byte \([0-9]*\)$/\1 \2/p' "$tmpdir/c2")
[ "$mb1" = $(( (2 - 5 % n + n) % n )) ] || fail "data chunk 2 of stripe 5 is not on member $mb1"
[ "$mb2" = $(( (k + 1 - 17 % n + 2 * n) % n )) ] || fail "parity 1 of stripe 17 is not on member $mb2"
[ "$at1" = $(( $(data_offset $chunk) + 5 * chunk + 1000 )) ] || fail "data corrupted at $at1"
grep -q "^corrupted 16374 bytes" "$tmpdir/c2" || fail "the parity corruption went past its chunk: $(cat "$tmpdir/c2")"
"$CTL" -c "$ctl" scrub --repair >/dev/null || fail "scrub"
timeout 60 "$CTL" -c "$ctl" wait >/dev/null || fail "wait"
# 300 bytes in one 4 KiB block; 16374 bytes of parity: its chunk from
# byte 10 on, 4 blocks.
got=$(ctl_json '"%d %d %d" % (s["scrub"]["cksum_repaired"], s["members"]['"$mb1"']["cksum_errors"], s["members"]['"$mb2"']["cksum_errors"])')
[ "$got" = "5 1 4" ] || fail "scrub repaired (blocks, member $mb1, member $mb2): $got"
got=$(ctl_json 'sum(m["cksum_errors"] for m in s["members"])')
[ "$got" = 5 ] || fail "checksum errors on other members: $got"
got=$(ctl_json 'len(s["scrub"]["reports"])')
[ "$got" = 0 ] || fail "the scrub found stripes inconsistent after the checksums' repairs: $got"
verify "repaired"
echo "corrupt: OK"

echo "=== 2. kill during writes"
"$fault" kill "$pid" "$uri" 0.3 || fail "kill"
rm -f "$sock"
ctl_serve
wait_resync
stop_nbdkit "$pid"
check_parity $k $m $chunk rs "${members[@]}"
echo "kill: OK"

echo "=== 3. flaky member"
if ! command -v nbdfuse >/dev/null || [ ! -w /dev/fuse ] ||
   [ ! -f "$(nbdkit --dump-config | sed -n 's/^filterdir=//p')/nbdkit-error-filter.so" ]; then
  echo "$0: SKIP part 3: nbdfuse, /dev/fuse or nbdkit's error filter missing"
  echo "$0: PASS"
  exit 0
fi
truncate -s 8M "$tmpdir/flaky.img"
"$fault" flaky "$tmpdir/flaky.img" "$tmpdir/fl" --eio-rate 50 --delay 2 >"$tmpdir/flaky.out" 2>&1 &
cleanup_fn _kill_pid $!
for (( i = 0; i < 100; i++ )); do grep -q '^member=' "$tmpdir/flaky.out" && break; sleep 0.1; done
grep -q "^member=$tmpdir/fl/fuse/member" "$tmpdir/flaky.out" || fail "flaky: $(cat "$tmpdir/flaky.out")"
# Unmounted before anything else is stopped (cleanups run last-first).
cleanup_fn "$fault" flaky-stop "$tmpdir/fl"
members[5]=$tmpdir/fl/fuse/member
set_args
ctl_serve m=$m chunk=$chunk create=true force=true
head -c "$size" /dev/urandom >"$tmpdir/expect"
nbdcopy "$tmpdir/expect" "$uri" || fail "fill through the slow member"
verify "slow member"
[ "$(ctl_json 's["members"][5]["state"]')" = active ] || fail "the slow member is not active"
touch "$tmpdir/fl/eio"
head -c 4M /dev/urandom >"$tmpdir/w3"
nbdcopy --request-size=65536 "$tmpdir/w3" "$uri" || fail "write with member 5 failing"
dd if="$tmpdir/w3" of="$tmpdir/expect" conv=notrunc status=none
verify "member 5 returning EIO"
rm -f "$tmpdir/fl/eio"
[ "$(ctl_json 's["members"][5]["state"]')" = failed ] || fail "member 5 not failed: $(ctl_json 's["members"][5]')"
grep -q "member 5 .*failed" "$nbdkit_log" || fail "no log line for member 5"
stop_nbdkit "$pid"
echo "flaky: OK"
echo "$0: PASS"
