#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A crash at every step of every superblock update leaves an array that
# starts again with every member that holds current data trusted.
#
# nbdkit runs under strace, which kills it (SIGKILL) on a thread's N-th
# fdatasync (strace counts per thread, and one thread makes an update):
# each member's superblock is written, then synced, one member after
# another, so the N-th fdatasync of an update is the moment after N
# members have the new superblock.  Four updates, each crashed after
# every one of its member writes:
#   dirty     the first write after start marks the array dirty;
#   bitmap    then, before its data, it sets its region's bit in the
#             write-intent bitmap of every member (a write with RWF_DSYNC,
#             pwritev2, one member after another: killed at the N-th);
#   clean     the clean shutdown after a write marks it clean (after
#             syncing every member);
#   failure   a member that fails at run time (its file made immutable
#             under the server) is recorded failed on the others.
# After each crash the array must start again (nothing refused), no member
# with current data may be called stale or missing (only the member that
# failed, after a failure), the data reads back as written, and parity is
# consistent.  After a failure and a crash in the same moment the write in
# flight was not journaled (the array was healthy): a chunk of the failed
# member in a stripe being written then cannot be rebuilt with confidence,
# so reading it must fail with EIO (bitmap regions of one stripe here:
# only the chunk of member 5 in stripe 1, the one rewritten), and every
# other block must read back as written.

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_py
requires_cmd strace chattr

k=4 m=2 n=6 chunk=65536
ref=$tmpdir/ref.img
make_members $n 4M
start_array chunk=$chunk create=true bitmap-chunk=64K || exit 1
randio zeroref "$uri" "$ref"
randio write "$uri" "$ref" --seed "$TEST_SEED" --ops 40 --chunk $chunk --k $k ||
  exit 1
stop_nbdkit "$pid"
snapshot_members "$tmpdir/snap"
cp "$ref" "$tmpdir/ref0.img"

# io WRITE|REWRITE: one write through libnbd, no flush.  WRITE puts new
# bytes in the reference; REWRITE writes a whole stripe with the bytes it
# already holds (so that an interrupted one changes nothing).  The
# connection may die under it (the crash): that is not an error here.
io ()
{
  "$PY" - "$uri" "$ref" "$1" $(( k * chunk )) <<'PYEOF' || true
import nbd, sys
uri, ref, mode, width = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
data = bytearray(open(ref, "rb").read())
h = nbd.NBD()
h.connect_uri(uri)
if mode == "WRITE":
    b = bytes((i * 7 + 1) & 0xff for i in range(4096))
    data[12288:12288 + 4096] = b
    open(ref, "wb").write(data)     # old or new bytes: see after ()
try:
    if mode == "WRITE":
        h.pwrite(b, 12288)
    else:
        h.pwrite(bytes(data[width:2 * width]), width)
    h.shutdown()
except nbd.Error as e:
    print("io: %s: %s (the crash)" % (mode, e))
PYEOF
}

# crash_at N CASE: run CASE with the server killed at a thread's N-th
# fdatasync (pwritev2 for "bitmap"), counted from the start of the server,
# or for "clean" and "failure" from strace's attaching to it after the
# first write, which made it dirty and set the bitmap.
crash_at ()
{
  local at=$1 case=$2 i call=fdatasync
  [ "$case" = bitmap ] && call=pwritev2
  local inject="-qq -o $tmpdir/strace.log -e trace=$call
    -e inject=$call:signal=SIGKILL:when=$at"
  restore_members "$tmpdir/snap"
  cp "$tmpdir/ref0.img" "$ref"
  rm -f "$tmpdir/strace.log"
  local wrapper="strace -f $inject"
  case $case in clean|failure) wrapper= ;; esac
  NBDKIT_WRAPPER=$wrapper start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" \
    $(member_args "${members[@]}") || exit 1
  case $case in
    # The dirty flag is on every member before any data is written: the
    # write never got to the members.
    # So is its bit in the bitmap.
    dirty|bitmap) io WRITE; cp "$tmpdir/ref0.img" "$ref" ;;
    clean) io WRITE; attach; kill "$(cat "$pid")" ;;
    failure)
      io WRITE
      attach
      chattr +i "${members[$((n - 1))]}"
      io REWRITE ;;
  esac
  # The server must have been killed by the injection, not have ended.
  for (( i = 0; i < 100; i++ )); do
    kill -0 "$(cat "$pid" 2>/dev/null)" 2>/dev/null || break
    sleep 0.1
  done
  chattr -i "${members[$((n - 1))]}"
  if ! grep -q 'killed by SIGKILL' "$tmpdir/strace.log"; then
    kill -9 "$(cat "$pid")" 2>/dev/null
    echo "$0: FAIL: $case: no crash at $call $at"; exit 1
  fi
  rm -f "$pid"
}

# attach: strace attaches to the running server, with $inject.
attach ()
{
  # shellcheck disable=SC2086
  strace -f -p "$(cat "$pid")" $inject &
  for (( i = 0; i < 50; i++ )); do
    grep -q TracerPid:.[1-9] "/proc/$(cat "$pid")/status" && break
    sleep 0.1
  done
}

# after CASE N: the array starts again and is whole.
after ()
{
  local case=$1 at=$2 log=$tmpdir/restart.log saved=$nbdkit_log
  : >"$log"
  nbdkit_log=$log
  # shellcheck disable=SC2046
  start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" $(member_args "${members[@]}") ||
    { nbdkit_log=$saved; echo "$0: FAIL: $case, crash at fdatasync $at: the array does not start again"; exit 1; }
  nbdkit_log=$saved
  if grep -Eq 'stale|too many' "$log" ||
     { [ "$case" != failure ] && grep -q 'starting degraded' "$log"; } ||
     { [ "$case" = failure ] && grep 'starting degraded' "$log" |
         grep -Eq "member [0-$((n - 2))] "; }; then
    echo "$0: FAIL: $case, crash at fdatasync $at: members with current data not trusted:"
    cat "$log"; exit 1
  fi
  if [ "$case" = failure ]; then
    # Stripe 1's data chunk 0 is on member (0 - 1) mod 6 = 5.
    "$PY" - "$uri" "$ref" $(( k * chunk )) $chunk <<'PYEOF' ||
import errno, nbd, sys
uri, ref, lo, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
data = open(ref, "rb").read()
h = nbd.NBD()
h.connect_uri(uri)
eio = bad = 0
for off in range(0, len(data), 4096):
    try:
        if h.pread(4096, off) != data[off:off + 4096]:
            bad += 1
    except nbd.Error as e:
        if e.errnum != errno.EIO or not lo <= off < lo + n:
            raise
        eio += 1
print("failure: %d blocks refused with EIO (stripe 1, member 5), %d wrong"
      % (eio, bad))
sys.exit(bad > 0)
PYEOF
      { echo "$0: FAIL: $case, crash at fdatasync $at: data"; exit 1; }
  else
    expect_verify "$uri" "$ref" "$case, crash at fdatasync $at"
  fi
  nbdkit_log=$log wait_resync
  stop_nbdkit "$pid"
  check_parity $k $m $chunk rs "${members[@]}" >/dev/null
}

# Each update runs in one thread: the dirty one and then the bitmap in the
# thread of the first write, the clean one in the main thread after it
# synced the n members, the failure in the thread of the write that met
# it.
for (( j = 1; j <= n; j++ )); do
  crash_at "$j" dirty; after dirty "$j"
  crash_at "$j" bitmap; after bitmap "$j"
  crash_at $(( n + j )) clean; after clean "$j"
done
for (( j = 1; j < n; j++ )); do
  crash_at "$j" failure; after failure "$j"
done
echo "$0: PASS ($(( 4 * n - 1 )) crash points)"
