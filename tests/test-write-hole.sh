#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# No write hole while degraded: a crash between the data and the parity
# write of a degraded partial-stripe write must not corrupt the chunk of
# the missing member, which was never written.
#
# 2+1 (and 4+2 with two members gone, with chunks of 4 KiB and of 512
# KiB): the member holding data chunk 0 of
# stripe 0 is missing, and a few bytes of data chunk 1 of that stripe are
# written (2+1 with 64 KiB chunks: the whole of data chunk 1, 16 blocks
# of 4 KiB, each failing its checksum after a crash at the parity write:
# the journal's replay repairs every one).  That write reconstructs chunk
# 0, writes chunk 1, then the parity.  A first run under strace counts the writing thread's pwrite
# calls; a second run kills nbdkit (SIGKILL) at the last of them, the
# parity write, after the data write; more runs at each of its pwritev2
# calls, the bitmap and journal writes before the data.  Restarted still
# degraded, chunk 0 must read back as it was, the written bytes as old or
# new, and after a clean stop the next start must not warn about an
# unclean shutdown.

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_py
requires_cmd strace

ref=$tmpdir/ref.img

# write_one: the partial write of chunk 1 of stripe 0, wlen bytes at
# byte woff of the array (no flush).
write_one ()
{
  "$PY" - "$uri" "$woff" "$wlen" <<'PYEOF' || true
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
try:
    h.pwrite(bytes([0xa7]) * int(sys.argv[3]), int(sys.argv[2]))
    h.shutdown()
except nbd.Error as e:
    print("write: %s (the crash)" % e)
PYEOF
}

# crash_and_check CALL N: from the snapshot, the write with the server
# killed at the writing thread's N-th CALL; restarted still degraded, the
# missing chunk must read back as it was and the written bytes as old or
# new; after a clean stop, no warning at the next start.
crash_and_check ()
{
  local call=$1 at=$2 i
  echo "--- $k+$m: crash at the writing thread's $call number $at"
  restore_members "$tmpdir/snap"
  NBDKIT_WRAPPER="strace -f -qq -o $tmpdir/crash.log -e trace=$call
    -e inject=$call:signal=SIGKILL:when=$at" \
    start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" || exit 1
  write_one
  for (( i = 0; i < 50; i++ )); do
    kill -0 "$(cat "$pid")" 2>/dev/null || break
    sleep 0.1
  done
  grep -q 'killed by SIGKILL' "$tmpdir/crash.log" ||
    { echo "$0: FAIL: no crash at $call $at"; exit 1; }
  rm -f "$pid"

  # Restart, still degraded.
  : >"$nbdkit_log"
  start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" || exit 1
  cat "$nbdkit_log"
  "$PY" - "$uri" "$ref" $chunk "$woff" "$wlen" <<'PYEOF' ||
import nbd, sys
h = nbd.NBD(); h.connect_uri(sys.argv[1])
ref = open(sys.argv[2], "rb").read()
chunk, woff, wlen = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
got = h.pread(chunk, 0)
if got != ref[:chunk]:
    bad = sum(1 for a, b in zip(got, ref[:chunk]) if a != b)
    sys.exit("chunk 0 of stripe 0, never written, reads back wrong: %d of %d bytes" % (bad, chunk))
w = h.pread(wlen, woff)
if w != ref[woff:woff + wlen] and w != bytes([0xa7]) * wlen:
    sys.exit("the written bytes are neither old nor new")
if woff + wlen < 2 * chunk and \
   h.pread(2 * chunk - woff - wlen, woff + wlen) != ref[woff + wlen:2 * chunk]:
    sys.exit("chunk 1 past the written bytes differs")
rest = h.pread(len(ref) - 2 * chunk, 2 * chunk)
if rest != ref[2 * chunk:]:
    sys.exit("data outside stripe 0 differs")
print("chunk 0 intact, written bytes %s" % ("new" if w[0] == 0xa7 else "old"))
PYEOF
    { echo "$0: FAIL: $k+$m, crash at $call $at: the write hole"; exit 1; }
  stop_nbdkit "$pid"
  : >"$nbdkit_log"
  start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" || exit 1
  stop_nbdkit "$pid"
  if grep -q 'not shut down cleanly' "$nbdkit_log"; then
    echo "$0: FAIL: $k+$m, crash at $call $at: the warning stays after the repair"; cat "$nbdkit_log"; exit 1
  fi
}

# k:m:members gone:chunk:member size[:whole].  4+2 with 512 KiB chunks:
# before arrays were created with room for GR_JOURNAL_MIN_SLOTS journal
# slots, its 1 MiB metadata area held none, and its degraded writes were
# not journaled.  whole: the write is the whole of data chunk 1, more
# blocks than the replay once repaired (it gave up after 8 and the
# restart was refused), else 512 bytes at byte 1024 of it.
for g in 2:1:0:4096:2M 4:2:0,5:4096:2M 4:2:0,5:524288:12M 2:1:0:65536:4M:whole; do
  IFS=: read -r k m gone chunk msize whole <<<"$g"
  n=$(( k + m ))
  if [ -n "$whole" ]; then
    woff=$chunk wlen=$chunk
  else
    woff=$(( chunk + 1024 )) wlen=512
  fi
  echo "=== $k+$m, members $gone gone, chunk $chunk"
  make_members $n "$msize"
  start_array chunk=$chunk create=true || exit 1
  randio zeroref "$uri" "$ref"
  randio write "$uri" "$ref" --seed "$TEST_SEED" --ops 40 --chunk $chunk --k $k ||
    exit 1
  head -c $(( k * chunk )) /dev/urandom >"$tmpdir/stripe0"
  nbdcopy "$tmpdir/stripe0" "$uri" ||
    { echo "$0: FAIL: writing stripe 0"; exit 1; }
  dd if="$tmpdir/stripe0" of="$ref" conv=notrunc status=none
  stop_nbdkit "$pid"
  for i in ${gone//,/ }; do mv "${members[$i]}" "$tmpdir/gone$i"; done
  snapshot_members "$tmpdir/snap"
  args=()
  for (( i = 0; i < n; i++ )); do
    [[ ",$gone," == *",$i,"* ]] || args+=("member=${members[$i]}")
  done

  # Dry run: the writing thread's pwrite64 calls (data, then parity last)
  # and pwritev2 calls (RWF_DSYNC: the bitmap on each live member, then the
  # journal entry's copies).
  NBDKIT_WRAPPER="strace -f -qq -o $tmpdir/dry.log -e trace=pwrite64,pwritev2" \
    start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" || exit 1
  write_one
  stop_nbdkit "$pid"
  # (The thread that journals the write: its data write, of a whole
  # 4 KiB block with checksums, starts with the block's old bytes.)
  tid=$(grep -a 'GRJOURNL' "$tmpdir/dry.log" | head -n 1 | cut -d' ' -f1)
  last=$(grep -c "^$tid .*pwrite64(" "$tmpdir/dry.log")
  nv2=$(grep -c "^$tid .*pwritev2(" "$tmpdir/dry.log")
  echo "writing thread $tid: $last pwrite calls, $nv2 pwritev2 calls"
  [ -n "$tid" ] && [ "$last" -ge 2 ] && [ "$nv2" -ge 2 ] ||
    { echo "$0: FAIL: dry run did not see the write"; cat "$tmpdir/dry.log"; exit 1; }

  # The crash at the parity write, and at each bitmap and journal write.
  crash_and_check pwrite64 "$last"
  for (( w = 1; w <= nv2; w++ )); do crash_and_check pwritev2 "$w"; done
  rm -f "${members[@]}" "$tmpdir"/gone*
  rm -rf "$tmpdir/snap"
done
echo "$0: PASS"
