#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Flush and FUA: the export advertises both; flushes, FUA writes and FUA
# zeroes succeed and the data reads back (also after a restart), with
# consistent parity.

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_py

k=2 m=1 chunk=4096 code=rs
ref=$tmpdir/ref.img

make_members 3 2M
start_array chunk=$chunk code=$code create=true || exit 1
randio zeroref "$uri" "$ref"
randio flushfua "$uri" "$ref" --seed "$TEST_SEED" --ops 80 --chunk $chunk --k $k ||
  { echo "$0: FAIL: flush/FUA"; exit 1; }
# nbdsh one-liners too, as a client would use them.
nbdsh -u "$uri" -c '
import nbd
h.flush()
h.pwrite(b"fua!" * 1024, 4096, nbd.CMD_FLAG_FUA)
h.flush()
assert h.pread(4096, 4096) == b"fua!" * 1024
' || { echo "$0: FAIL: nbdsh flush/FUA"; exit 1; }
printf 'fua!%.0s' $(seq 1024) | dd of="$ref" bs=4096 seek=1 conv=notrunc status=none
stop_nbdkit "$pid"
check_parity $k $m $chunk $code "${members[@]}"
start_array || exit 1
expect_verify "$uri" "$ref" "after restart"
stop_nbdkit "$pid"
echo "$0: PASS"
