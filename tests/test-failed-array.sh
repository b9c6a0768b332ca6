#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A failure past m is recorded, and a failed array never serves wrong
# data.  2+1 on files: member 0 is missing, the array is written
# degraded, then member 1 fails under a write (its file made immutable):
# that write fails with EIO.  Restarted with all three members answering
# again, the array must refuse to start, naming the members recorded
# failed, with nothing written to any member.  With salvage=true it comes
# up read-only with member 1 brought back (the most recently updated of
# the two marked failed; member 0 missed the degraded writes and stays
# out), says so and since when it may be out of date, refuses writes, and
# reads back the data written before, everywhere but in the stripe of the
# failed write (its parity was written, its data chunk not: rebuilt
# through both, that stripe may be wrong, as the warning says).

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_py
requires_cmd chattr nbdinfo

k=2 m=1 n=3 chunk=4096
ref=$tmpdir/ref.img
make_members $n 2M
start_array chunk=$chunk create=true || exit 1
randio zeroref "$uri" "$ref"
randio write "$uri" "$ref" --seed "$TEST_SEED" --ops 30 --chunk $chunk --k $k ||
  exit 1
stop_nbdkit "$pid"

# Degraded: member 0 away, a write; then member 1 fails under a write.
mv "${members[0]}" "$tmpdir/away0"
# shellcheck disable=SC2046
start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" $(member_args "${members[@]}") || exit 1
randio write "$uri" "$ref" --seed $(( TEST_SEED + 1 )) --ops 10 --chunk $chunk --k $k ||
  exit 1
chattr +i "${members[1]}"
if "$PY" -c '
import nbd, sys
h = nbd.NBD(); h.connect_uri(sys.argv[1])
h.pwrite(bytes([0x5a]) * 8192, 0)' "$uri" 2>"$tmpdir/w.err"; then
  chattr -i "${members[1]}"
  echo "$0: FAIL: a write with 2 of 3 members failed succeeded"; exit 1
fi
chattr -i "${members[1]}"
cat "$tmpdir/w.err"
stop_nbdkit "$pid"
mv "$tmpdir/away0" "${members[0]}"

# Every member answers again: the array has failed and must say so.
sums "${members[@]}" >"$tmpdir/before"
# shellcheck disable=SC2046
expect_refusal "$tmpdir/refused.log" \
  'array has failed.*member 0.*member 1|array has failed.*members? 0, 1' \
  nbdkit "$PLUGIN" $(member_args "${members[@]}")
sums "${members[@]}" | cmp -s - "$tmpdir/before" ||
  { echo "$0: FAIL: a refused start changed a member"; exit 1; }

# salvage=true: read-only, what may be wrong said, the old data read.
: >"$nbdkit_log"
# shellcheck disable=SC2046
start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" $(member_args "${members[@]}") \
  salvage=true || exit 1
cat "$nbdkit_log"
grep -Eq 'warning: salvage: .* with member 1 \(.*, last updated at event [0-9]+\) brought back.*member 0 is marked failed' \
  "$nbdkit_log" ||
  { echo "$0: FAIL: salvage does not say what it brought back and what not"; exit 1; }
nbdinfo "$uri" | grep -q 'is_read_only: true' ||
  { echo "$0: FAIL: a salvaged array is not read-only"; exit 1; }
if "$PY" -c '
import nbd, sys
h = nbd.NBD(); h.connect_uri(sys.argv[1])
h.pwrite(bytes(4096), 0)' "$uri" 2>/dev/null; then
  echo "$0: FAIL: a write to a salvaged array succeeded"; exit 1
fi
"$PY" - "$uri" "$ref" $(( k * chunk )) <<'PYEOF' ||
import nbd, sys
h = nbd.NBD(); h.connect_uri(sys.argv[1])
ref = open(sys.argv[2], "rb").read()
skip = int(sys.argv[3])
got = h.pread(len(ref) - skip, skip)
sys.exit(0 if got == ref[skip:] else "salvaged data differs past the stripe of the failed write")
PYEOF
  { echo "$0: FAIL: salvaged data differs"; exit 1; }
stop_nbdkit "$pid"
sums "${members[@]}" | cmp -s - "$tmpdir/before" ||
  { echo "$0: FAIL: salvage changed a member"; exit 1; }
echo "$0: PASS"
