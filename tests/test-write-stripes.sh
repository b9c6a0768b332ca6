#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# accel=gpu writes that span several stripes in part and whole: one plan
# each (write-stripes), whose encodes go to the group commit as one entry,
# so a request waits for the GPU once, not once a part.  On the stand-in
# GPU (-D gpuraid.fake_gpu=2: the plugin's GPU path on the CPU), a 3+2
# array with 64K chunks (a stripe holds 192K of data, so a 1 MiB request
# is part of a stripe, whole ones and part of another), written by
# nbdcopy (2 connections, 1 MiB requests) and by 4 KiB-aligned requests
# that are not chunk-aligned (coding ranges of several lengths in one
# plan): the exit log must count more encode operations than requests'
# entries in the group commit; the image is read back on the CPU,
# healthy and with two members gone, and the parity is checked offline.

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_py
requires_cmd nbdcopy nbdinfo cmp

k=3 m=2 chunk=65536 n=5
make_members $n 12M
set_args
: >"$nbdkit_log"
start_nbdkit -P "$pid" -U "$sock" -v -D gpuraid.fake_gpu=2 \
  -D gpuraid.verbose=1 "$PLUGIN" "${args[@]}" m=$m chunk=$chunk code=rs \
  create=true || exit 1
size=$(nbdinfo --size "$uri")
head -c "$size" /dev/urandom >"$tmpdir/img"
nbdcopy -C 2 --request-size=1048576 "$tmpdir/img" "$uri" ||
  fail "nbdcopy"
# Requests of 100 KiB at 4 KiB steps from 68 KiB: parts of chunks at both
# ends of a stripe.
"$PY" - "$uri" "$tmpdir/img" <<'EOF' || fail "unaligned writes"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
img = bytearray(open(sys.argv[2], 'rb').read())
off, ln = 68 * 1024, 100 * 1024
while off + ln <= len(img):
    data = bytes((off // 4096 + i) & 0xff for i in range(ln))
    h.pwrite(data, off)
    img[off:off + ln] = data
    off += 3 * ln + 4096
h.shutdown()
open(sys.argv[2], 'wb').write(img)
EOF
stop_nbdkit "$pid"
grep -q 'fake working GPU coder' "$nbdkit_log" ||
  fail "the stand-in GPU coder was not used"
gpu_worked "$nbdkit_log" || fail "the stand-in GPU did not code"
plans=$(grep -c 'plan write-stripes' "$nbdkit_log" || true)
echo "write-stripes plans: $plans"
[ "$plans" -gt 0 ] || fail "no write of several stripes was one plan"
line=$(grep -o 'encodes in the group commit (batches, requests, operations, windows run out): [0-9, ]*' "$nbdkit_log") ||
  fail "no count of the group commit's encodes at exit"
echo "$line"
read -r batches entries ops timeouts < <(sed 's/.*: \([0-9]*\), \([0-9]*\), \([0-9]*\), \([0-9]*\).*/\1 \2 \3 \4/' <<<"$line")
[ "$ops" -gt "$entries" ] ||
  fail "every request's encodes went to the group commit one at a time ($line)"
[ "$batches" -le "$entries" ] && [ "$timeouts" -le "$batches" ] ||
  fail "the group commit's counts do not add up ($line)"
check_parity $k $m $chunk rs "${members[@]}"

start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" || exit 1
rm -f "$tmpdir/out"
nbdcopy "$uri" "$tmpdir/out" && cmp "$tmpdir/out" "$tmpdir/img" ||
  fail "data read back differs"
stop_nbdkit "$pid"
mv "${members[0]}" "$tmpdir/gone0"; mv "${members[3]}" "$tmpdir/gone3"
start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" || exit 1
rm -f "$tmpdir/out"
nbdcopy "$uri" "$tmpdir/out" && cmp "$tmpdir/out" "$tmpdir/img" ||
  fail "degraded read back differs"
stop_nbdkit "$pid"
echo "$0: PASS"
