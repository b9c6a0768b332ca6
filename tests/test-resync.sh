#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Resync after an unclean shutdown (the write hole).  The server is killed
# (-9) after writes, so the array is left dirty; then two parity chunks
# are overwritten on disk, as a write torn by the crash would leave them.
# The next start with every member must resync: it logs the rewritten
# chunks, parity checks clean offline, and reads with two members gone
# (rebuilt from the repaired parity) return the right data.  A dirty array
# started degraded cannot be resynced: it warns, and the dirty flag stays
# set across a clean shutdown (the next start warns again).  A data chunk
# silently corrupt in a region the crash left dirty is located by the
# resync (two chunks of redundancy) and rewritten, not laundered into the
# parity.  Without
# block checksums (integrity=off): with them, the damaged blocks fail
# their checksums and are rebuilt before the parity is compared
# (tests/test-integrity.sh).

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_py

ref=$tmpdir/ref.img
k=4 m=2 chunk=65536 n=6
doff=$(data_offset $chunk)
seed=$TEST_SEED

for code in rs crs; do
  echo "=== code=$code"
  make_members $n 8M
  set_args
  start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" \
    m=$m chunk=$chunk code=$code create=true integrity=off || exit 1
  randio zeroref "$uri" "$ref"
  seed=$(( seed + 1 ))
  randio write "$uri" "$ref" --seed $seed --ops 40 --chunk $chunk --k $k || exit 1
  stop_nbdkit "$pid"

  # A crash after writes: the array stays dirty.
  start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" || exit 1
  seed=$(( seed + 1 ))
  randio write "$uri" "$ref" --seed $seed --ops 10 --chunk $chunk --k $k || exit 1
  crash_nbdkit "$pid"

  # Torn writes: parity 0 of stripe 3 (member (4-3) mod 6 = 1) and
  # parity 1 of stripe 7 (member (5-7) mod 6 = 4) no longer match.
  head -c $chunk /dev/urandom |
    dd of="${members[1]}" bs=$chunk seek=$(( doff / chunk + 3 )) conv=notrunc status=none
  head -c $chunk /dev/urandom |
    dd of="${members[4]}" bs=$chunk seek=$(( doff / chunk + 7 )) conv=notrunc status=none
  # And silent corruption in the same (dirty) region: 16 bytes of data
  # chunk 2 of stripe 11 (member (2-11) mod 6 = 3).  The resync must not
  # recompute the parity from it: with two chunks of redundancy it is
  # located (the other chunks agree) and rewritten from them.
  head -c 16 /dev/urandom |
    dd of="${members[3]}" bs=1 seek=$(( doff + 11 * chunk + 100 )) conv=notrunc status=none
  # Negative control: the damage is visible offline.
  expect_check_fails "gpuraid-check did not see the damaged parity" \
    -k $k -m $m -c $chunk -t $code -o "$doff" "${members[@]}"

  : >"$nbdkit_log"
  start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" || exit 1
  wait_resync
  grep -E 'resync' "$nbdkit_log"
  fixed=$(sed -n 's/.*resync done: [0-9]* stripes checked, \([0-9]*\) parity chunks.*/\1/p' "$nbdkit_log")
  if [ -z "$fixed" ] || [ "$fixed" -lt 2 ]; then
    echo "$0: FAIL: resync did not report the 2 damaged parity chunks (got '${fixed}')"; exit 1
  fi
  expect_verify "$uri" "$ref" "after resync"
  grep -q 'resync: stripe 11: data chunk 2 (member 3) does not match the other chunks, which agree: rewritten from them' \
    "$nbdkit_log" || { echo "$0: FAIL: the resync did not say it located the corrupt data chunk"; exit 1; }
  stop_nbdkit "$pid"
  check_parity $k $m $chunk $code "${members[@]}"

  snapshot_members "$tmpdir/healthy"
  cp "$ref" "$tmpdir/healthy-ref"

  # Reads that rebuild from the repaired parity: members 3 and 5 gone.
  mv "${members[3]}" "$tmpdir/gone3"; mv "${members[5]}" "$tmpdir/gone5"
  start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" || exit 1
  expect_verify "$uri" "$ref" "degraded after resync"

  # A crash while degraded: every write was journaled, so the next start
  # repairs the stripes being written, and the array is clean after it.
  seed=$(( seed + 1 ))
  randio write "$uri" "$ref" --seed $seed --ops 10 --chunk $chunk --k $k || exit 1
  crash_nbdkit "$pid"
  : >"$nbdkit_log"
  start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" || exit 1
  grep -q 'repaired from the journal; it is consistent' "$nbdkit_log" ||
    { echo "$0: FAIL: no journal repair for a crash while degraded"; cat "$nbdkit_log"; exit 1; }
  expect_verify "$uri" "$ref" "crashed degraded, repaired"
  stop_nbdkit "$pid"
  : >"$nbdkit_log"
  start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" || exit 1
  if grep -q 'not shut down cleanly' "$nbdkit_log"; then
    echo "$0: FAIL: the warning stays after the repair"; cat "$nbdkit_log"; exit 1
  fi
  stop_nbdkit "$pid"

  # A crash while healthy, then started degraded: the writes in flight
  # were not journaled, so no resync is possible; the dirty flag (and the
  # warning) must survive a clean stop.
  mv "$tmpdir/gone3" "${members[3]}"; mv "$tmpdir/gone5" "${members[5]}"
  restore_members "$tmpdir/healthy"
  start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" || exit 1
  seed=$(( seed + 1 ))
  cp "$tmpdir/healthy-ref" "$ref"
  randio write "$uri" "$ref" --seed $seed --ops 10 --chunk $chunk --k $k || exit 1
  crash_nbdkit "$pid"
  mv "${members[3]}" "$tmpdir/gone3"; mv "${members[5]}" "$tmpdir/gone5"
  : >"$nbdkit_log"
  start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" || exit 1
  grep -q 'cannot be resynced' "$nbdkit_log" ||
    { echo "$0: FAIL: no warning for a dirty degraded start"; cat "$nbdkit_log"; exit 1; }
  stop_nbdkit "$pid"
  : >"$nbdkit_log"
  start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" || exit 1
  grep -q 'not shut down cleanly' "$nbdkit_log" ||
    { echo "$0: FAIL: a clean stop hid the unsynced dirty state"; cat "$nbdkit_log"; exit 1; }
  stop_nbdkit "$pid"
  rm -f "${members[@]}" "$tmpdir"/gone*
  rm -rf "$tmpdir/healthy"
done
echo "$0: PASS"
