#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Members opened with O_DIRECT (direct=), 4+2, 16K chunks, on tmpfs files
# (direct=on; tmpfs takes O_DIRECT on kernels since 6.6, and asks no
# alignment: gpuraid aligns as for a 4096-byte device all the same) and
# on loop devices with direct I/O over tmpfs files (direct=auto: on for
# block devices; 512-byte alignment, which the kernel enforces), with
# integrity on and off:
#   1. every member's descriptor has O_DIRECT (/proc/PID/fdinfo); writes
#      and reads at unaligned offsets and lengths (one byte, a sector, a
#      block's last bytes, across chunks and stripes, the last byte), then
#      random unaligned I/O, against a reference image; no member write of
#      part of a block had to read the block below the plan (the planner
#      plans whole blocks for O_DIRECT members: the debug count at
#      shutdown); parity checked offline;
#   2. two members left out: degraded reads and writes against the
#      reference; gpuraidctl examine (O_DIRECT on block devices) reads
#      the survivors' superblocks, which record the two as failed;
#   3. both replaced online (gpuraidctl replace) and rebuilt in one pass,
#      then scrubbed (no mismatch), none of their I/O through the bounce
#      buffer (their lanes' buffers are aligned: the debug count at
#      shutdown): every byte reads back, a restart with the new members
#      is healthy, parity checked offline;
#   4. kill -9 during writes (tests/crashloop.py: flushes and FUA), three
#      times: no durable write lost, no block holding anything not written
#      to it, the resync after each, parity checked offline;
# on tmpfs files (direct=on, aligned as 4096) and loop devices (512),
# whole-stripe writes from a page-locked request buffer under a GPU (the
# stand-in: -D gpuraid.fake_gpu=2 fake_auto=2): their data copied into
# scratch by the "GPU" before the encode (its count at shutdown, none
# left to memcpy), bounced bytes under a quarter of accel=cpu's writes;
# then degraded reads for a page-locked request buffer under it (their
# checksums, the "GPU"'s of the writes, verified first by accel=cpu's
# degraded reads), two members gone: every
# byte right, the survivors that would have gone through O_DIRECT's
# bounce buffer (the request's buffer not aligned for the member) read
# into scratch and copied in by the "GPU" (its count at shutdown, none
# left to memcpy), the bounced bytes under a quarter of accel=cpu's in
# the same reads (where those bounce at all: AddressSanitizer's malloc
# aligns nbdkit's buffers to 512, and the test then says so and checks
# the bytes alone); healthy reads right and not copied by it;
# and on loop devices the page cache: 1 GiB written through the array
# with direct=auto grows the members' page cache (mincore over the loop
# devices, while the server holds them) by at most 64 MiB; with
# direct=off by more than 512 MiB (the measure works).  On tmpfs members
# there is no page cache to grow: their pages are the storage.

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_py
requires_ctl
requires_cmd nbdcopy nbdinfo cmp

k=4 m=2 n=6 chunk=16384 msize=8M
shm=$(mktemp -d /dev/shm/gpuraid-direct.XXXXXX) ||
  { echo "$0: SKIP: no /dev/shm"; exit 77; }
cleanup_fn rm -rf "$shm"
ref=$tmpdir/ref.img

# member_fds_direct PID PATH...: PID holds each PATH open with O_DIRECT.
member_fds_direct ()
{
  local p=$1 f fd flags found
  shift
  for f in "$@"; do
    found=0
    for fd in /proc/"$p"/fd/*; do
      [ "$(readlink "$fd")" = "$f" ] || continue
      flags=$(awk '/^flags:/ { print $2 }' "/proc/$p/fdinfo/${fd##*/}")
      (( 8#$flags & 8#40000 )) || fail "$f is open without O_DIRECT (flags $flags)"
      found=1
    done
    [ $found = 1 ] || fail "$f is not open"
  done
}

# unaligned URI REF: writes at unaligned offsets and lengths, mirrored in
# REF, then each range read back with its neighbours.
unaligned ()
{
  "$PY" - "$1" "$2" $chunk $k <<'EOF' || fail "unaligned requests"
import os, sys, nbd
uri, path, chunk, k = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
h = nbd.NBD()
h.connect_uri(uri)
size, width = h.get_size(), chunk * k
cases = [(1, 1), (511, 2), (4095, 2), (512, 512), (3584, 1024),
         (3 * 4096 + 100, 5000), (chunk - 1, 2), (width - 3, 7),
         (width + chunk - 700, 9000), (size - 1, 1), (size - 4097, 4097)]
with open(path, "r+b") as f:
    for off, n in cases:
        b = os.urandom(n)
        h.pwrite(b, off)
        f.seek(off)
        f.write(b)
    for off, n in cases:
        a, e = max(0, off - 1000), min(size, off + n + 1000)
        f.seek(a)
        if h.pread(e - a, a) != f.read(e - a):
            sys.exit("unaligned: [%d, +%d) reads back wrong" % (off, n))
h.shutdown()
EOF
}

# no_partial_writes: every member closed since the log began read no
# block below the plan to write part of it.
no_partial_writes ()
{
  local bad
  grep -q 'O_DIRECT: .* writes of parts of blocks' "$nbdkit_log" ||
    fail "no O_DIRECT member reported at shutdown"
  bad=$(grep 'writes of parts of blocks' "$nbdkit_log" | grep -v ' 0 of them writes' || true)
  [ -z "$bad" ] || fail "writes of parts of blocks read below the plan: $bad"
}

# serve MEMBER... -- OPTIONS...: serve the members (verbose) with options.
serve ()
{
  local a=()
  while [ "$1" != -- ]; do a+=("member=$1"); shift; done
  shift
  start_nbdkit -P "$pid" -U "$sock" -v -D gpuraid.bitmap_ms=100 "$PLUGIN" \
    "${a[@]}" "$@" || fail "start"
}

# crash_loop BACKING MEMBER... -- OPTIONS...: a fresh array, then three
# kill -9 during writes, each restart verified, resynced and checked.
crash_loop ()
{
  local backing=() mem=() opts c wpid seed=$TEST_SEED
  while [ "$1" != -- ]; do backing+=("$1"); shift; done
  shift
  mem=("${backing[@]:n}") backing=("${backing[@]:0:n}")
  opts=("$@")
  rm -f "$tmpdir/state.json"
  serve "${mem[@]}" -- "${opts[@]}" create=true force=true m=$m chunk=$chunk
  stop_nbdkit "$pid"
  for (( c = 0; c < 3; c++ )); do
    serve "${mem[@]}" -- "${opts[@]}"
    seed=$(( seed + 1 ))
    "$PY" "$top/tests/crashloop.py" write "$uri" "$tmpdir/state.json" $seed &
    wpid=$!
    sleep "$(printf '0.%03d' $(( RANDOM % 600 + 100 )))"
    crash_nbdkit "$pid"
    wait "$wpid"
    serve "${mem[@]}" -- "${opts[@]}"
    "$PY" "$top/tests/crashloop.py" verify "$uri" "$tmpdir/state.json" ||
      fail "crash $c lost or corrupted data"
    wait_resync
    stop_nbdkit "$pid"
    check_parity $k $m $chunk rs "${backing[@]}" >/dev/null
  done
  echo "  3 crashes: no durable write lost, parity consistent after each"
}

# direct_case LABEL INTEGRITY DIRECT BACKING... -- MEMBER... [-- NEW1 NEW3
# NEWBACKING1 NEWBACKING3]: the cases above on members MEMBER (their
# bytes in BACKING: the same files, or the loop devices' files).
direct_case ()
{
  local label=$1 integ=$2 direct=$3 backing=() mem=() new=() i deg=() bounced
  shift 3
  while [ "$1" != -- ]; do backing+=("$1"); shift; done
  shift
  for (( i = 0; i < n; i++ )); do mem+=("$1"); shift; done
  shift
  new=("$@")
  local opts=(direct="$direct")

  echo "=== $label, integrity=$integ, direct=$direct"
  : >"$nbdkit_log"
  serve "${mem[@]}" -- "${opts[@]}" m=$m chunk=$chunk create=true force=true \
    integrity="$integ"
  member_fds_direct "$(cat "$pid")" "${mem[@]}"
  randio zeroref "$uri" "$ref"
  unaligned "$uri" "$ref"
  randio write "$uri" "$ref" --seed "$TEST_SEED" --ops 150 --chunk $chunk --k $k ||
    fail "random I/O"
  expect_verify "$uri" "$ref" "healthy"
  stop_nbdkit "$pid"
  no_partial_writes
  check_parity $k $m $chunk rs "${backing[@]}" >/dev/null
  echo "  healthy: unaligned and random I/O right, parity consistent"

  # 2. Members 1 and 3 left out.
  deg=("${mem[0]}" "${mem[2]}" "${mem[4]}" "${mem[5]}")
  serve "${deg[@]}" -- "${opts[@]}"
  expect_verify "$uri" "$ref" "degraded"
  unaligned "$uri" "$ref"
  randio write "$uri" "$ref" --seed $(( TEST_SEED + 1 )) --ops 60 --chunk $chunk --k $k ||
    fail "degraded random I/O"
  expect_verify "$uri" "$ref" "degraded, after writes"
  "$CTL" examine "${mem[0]}" >"$tmpdir/examine" || fail "gpuraidctl examine"
  grep -Eq 'failed members +1 3$' "$tmpdir/examine" ||
    fail "examine of ${mem[0]}: $(cat "$tmpdir/examine")"
  stop_nbdkit "$pid"
  no_partial_writes
  echo "  degraded: reads and writes right; examine sees members 1 and 3 failed"

  # 3. Both rebuilt onto new members in one pass.
  args=("${deg[@]/#/member=}")
  ctl_serve "${opts[@]}"             # (the log begins anew)
  "$CTL" -c "$ctl" replace 1 "${new[0]}" >/dev/null || fail "replace 1"
  "$CTL" -c "$ctl" replace 3 "${new[1]}" >/dev/null || fail "replace 3"
  timeout 120 "$CTL" -c "$ctl" wait >/dev/null || fail "wait for the rebuild"
  [ "$(ctl_json 's["state"]')" = healthy ] || fail "not healthy after the rebuild"
  "$CTL" -c "$ctl" scrub >/dev/null || fail "scrub"
  timeout 120 "$CTL" -c "$ctl" wait | grep -q '^scrub done: 100.0%' ||
    fail "the scrub did not end"
  "$CTL" -c "$ctl" status | grep -q '^scrub .* 0 did not match' ||
    fail "the scrub found mismatches: $("$CTL" -c "$ctl" status | grep '^scrub')"
  member_fds_direct "$(cat "$pid")" "${new[0]}" "${new[1]}"
  stop_nbdkit "$pid"
  # The rebuild and the scrub (all that server did) read and wrote in
  # their lanes' buffers, aligned for O_DIRECT: nothing through the
  # bounce buffer.
  bounced=$(grep 'O_DIRECT: ' "$nbdkit_log" |
              grep -v 'O_DIRECT: 0 accesses' || true)
  grep -q 'O_DIRECT: ' "$nbdkit_log" ||
    fail "the rebuild's server reported no O_DIRECT member"
  [ -z "$bounced" ] || fail "the rebuild or scrub went through the bounce buffer: $bounced"
  mem[1]=${new[0]} mem[3]=${new[1]}
  backing[1]=${new[2]} backing[3]=${new[3]}
  i=$(wc -l <"$nbdkit_log")
  serve "${mem[@]}" -- "${opts[@]}"
  expect_verify "$uri" "$ref" "restarted after the rebuild"
  stop_nbdkit "$pid"
  if tail -n +"$(( i + 1 ))" "$nbdkit_log" | grep -q 'warning:'; then
    fail "the restart after the rebuild warned: $(tail -n +"$(( i + 1 ))" "$nbdkit_log" | grep 'warning:')"
  fi
  no_partial_writes
  check_parity $k $m $chunk rs "${backing[@]}" >/dev/null
  echo "  rebuilt: members 1 and 3 in one pass, scrubbed, nothing bounced, every byte right, parity consistent"

  # 4. Crashes.
  crash_loop "${backing[@]}" "${mem[@]}" -- "${opts[@]}" integrity="$integ"
}

# resident BLOCKDEV...: bytes of their page cache resident now (mincore
# over a mapping of each; fincore reads a block device as empty).
resident ()
{
  "$PY" - "$@" <<'EOF2'
import ctypes, mmap, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                      ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
total = 0
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY)
    size = os.lseek(fd, 0, os.SEEK_END)
    a = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    if a is None or a == ctypes.c_void_p(-1).value:
        sys.exit("mmap %s: %s" % (p, os.strerror(ctypes.get_errno())))
    vec = (ctypes.c_ubyte * ((size + 4095) // 4096))()
    if libc.mincore(ctypes.c_void_p(a), size, vec) != 0:
        sys.exit("mincore %s: %s" % (p, os.strerror(ctypes.get_errno())))
    total += sum(b & 1 for b in vec) * 4096
    libc.munmap(ctypes.c_void_p(a), size)
    os.close(fd)
print(total)
EOF2
}

# write_gib URI GIB: GIB GiB of data written from offset 0 in 4 MiB
# requests, then a flush.
write_gib ()
{
  "$PY" - "$1" "$2" <<'EOF2' || fail "writing $2 GiB"
import os, sys, nbd
h = nbd.NBD()
h.connect_uri(sys.argv[1])
buf = bytearray(os.urandom(4 << 20))
end = min(h.get_size(), int(sys.argv[2]) << 30) // len(buf) * len(buf)
for off in range(0, end, len(buf)):
    buf[0:8] = off.to_bytes(8, "little")
    h.pwrite(buf, off)
h.flush()
h.shutdown()
EOF2
}

loops=()
# loop_attach FILE: a loop device over FILE, direct I/O (appended to loops).
loop_attach ()
{
  local d
  d=$(losetup -f --show --direct-io=on "$1") || fail "losetup $1"
  cleanup_fn losetup -d "$d"
  loops+=("$d")
}

# bounced: the bytes the members' O_DIRECT sent through the bounce buffer
# (their counts at shutdown, summed from the log).
bounced ()
{
  sed -n 's/.*O_DIRECT: [0-9]* accesses (\([0-9]*\) bytes).*/\1/p' "$nbdkit_log" |
    awk '{ s += $1 } END { print s + 0 }'
}
# serve_read LABEL [fake] OPTIONS -- MEMBER...: a session (its log alone)
# that reads the whole export, which must equal $ref; with "fake", the
# stand-in GPU (page-locked request buffers, every operation on it).
# Leaves the GPU's copies in $copies ("CALLS MEMCPY", or empty).
serve_read ()
{
  local label=$1 a=() o=() d=()
  shift
  if [ "$1" = fake ]; then
    d=(-D gpuraid.fake_gpu=2 -D gpuraid.fake_auto=2)
    o=(accel=auto)
    shift
  fi
  while [ "$1" != -- ]; do o+=("$1"); shift; done
  shift
  for x in "$@"; do a+=("member=$x"); done
  : >"$nbdkit_log"
  start_nbdkit -P "$pid" -U "$sock" -v "${d[@]}" "$PLUGIN" "${a[@]}" "${o[@]}" ||
    fail "start ($label)"
  nbdcopy "$uri" "$tmpdir/out" || fail "nbdcopy from the array ($label)"
  cmp "$tmpdir/out" "$ref" || fail "$label: reads back wrong"
  stop_nbdkit "$pid"
  copies=$(host_copies "$nbdkit_log")
  echo "  $label: every byte right; copies into the request by the GPU, by memcpy: ${copies:-none}; bounced $(bounced) bytes"
}

# copies_replaced WHAT CPU_BOUNCED: the session just stopped (its log;
# $copies) made its copies for the members' alignment on the "GPU" (none
# left to memcpy) and bounced under a quarter of accel=cpu's CPU_BOUNCED
# bytes; where nothing bounced on the CPU, it asked for no copy.
copies_replaced ()
{
  local what=$1 cpu=$2
  if [ "$cpu" = 0 ]; then
    # nbdkit's request buffers come from malloc: glibc's large ones lie
    # 16 bytes past a page boundary, AddressSanitizer's are aligned.
    echo "  note ($what): nothing bounced on the CPU (the request buffers here are aligned for the members: a sanitizer's allocator?); the GPU's copies not asked for, only the bytes checked"
    [ -z "$copies" ] || fail "$what: copies by the GPU with aligned requests: $copies"
    return 0
  fi
  [ "${copies%% *}" -gt 0 ] 2>/dev/null || fail "$what: the GPU made no copy"
  [ "${copies##* }" = 0 ] || fail "$what: copies left to memcpy"
  # Nearly every access is aligned (a request buffer that shares pages
  # with one registered already is not page-locked: its bytes bounce, as
  # on the CPU).
  [ $(( $(bounced) * 4 )) -lt "$cpu" ] ||
    fail "$what: $(bounced) bytes bounced, against $cpu on the CPU"
}

# copies_case LABEL DIRECT MEMBER...: a fresh array on the members
# (direct=DIRECT), filled on the CPU; written again under the stand-in
# GPU, whose copies of the data into scratch must have replaced the
# bounce; read with members 1 and 3 gone on the CPU (the checksums the
# "GPU" gave the writes verified), then under the stand-in GPU, whose
# copies must have replaced the bounce; then healthy under it, not
# copied.
copies_case ()
{
  local label=$1 direct=$2 mem=() deg=() cpu_bounced
  shift 2
  mem=("$@")
  echo "=== $label, direct=$direct: a full-stripe write's data and a degraded read's survivors for a page-locked request go through scratch, copied by the GPU (stand-in)"
  : >"$nbdkit_log"
  serve "${mem[@]}" -- direct="$direct" m=$m chunk=$chunk create=true force=true
  head -c "$(nbdinfo --size "$uri")" /dev/urandom >"$ref"
  nbdcopy --request-size=$(( 4 * k * chunk )) "$ref" "$uri" || fail "nbdcopy to the array"
  stop_nbdkit "$pid"
  cpu_bounced=$(bounced)
  [ -z "$(host_copies "$nbdkit_log")" ] || fail "accel=cpu: copies by a GPU"
  echo "  accel=cpu write: bounced $cpu_bounced bytes"
  head -c "$(stat -c %s "$ref")" /dev/urandom >"$ref"
  : >"$nbdkit_log"
  start_nbdkit -P "$pid" -U "$sock" -v -D gpuraid.fake_gpu=2 -D gpuraid.fake_auto=2 \
    "$PLUGIN" "${mem[@]/#/member=}" direct="$direct" accel=auto ||
    fail "start (stand-in GPU writes)"
  nbdcopy --request-size=$(( 4 * k * chunk )) "$ref" "$uri" || fail "nbdcopy to the array (stand-in GPU)"
  stop_nbdkit "$pid"
  copies=$(host_copies "$nbdkit_log")
  echo "  stand-in GPU write: copies into scratch by the GPU, by memcpy: ${copies:-none}; bounced $(bounced) bytes"
  copies_replaced write "$cpu_bounced"
  deg=("${mem[0]}" "$shm/gone1" "${mem[2]}" "$shm/gone3" "${mem[4]}" "${mem[5]}")
  serve_read "accel=cpu, members 1 and 3 gone" direct="$direct" accel=cpu -- "${deg[@]}"
  cpu_bounced=$(bounced)
  serve_read "stand-in GPU, members 1 and 3 gone" fake direct="$direct" -- "${deg[@]}"
  copies_replaced degraded "$cpu_bounced"
  # Healthy reads keep reading into the request (the GPU's copies did
  # not pay there: docs/performance.md).
  serve_read "stand-in GPU, healthy" fake direct="$direct" -- "${mem[@]}"
  [ -z "$copies" ] || fail "healthy: copies by the GPU: $copies"
  rm -f "$tmpdir/out"
}

# --- tmpfs files, direct=on -------------------------------------------------

if "$PY" -c 'import os, sys; os.close(os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_DIRECT))' \
     "$shm/probe" 2>/dev/null; then
  for integ in on off; do
    files=()
    for (( i = 0; i < n + 2; i++ )); do
      truncate -s $msize "$shm/t$integ$i.img"
      files+=("$shm/t$integ$i.img")
    done
    direct_case "tmpfs files" $integ on "${files[@]:0:n}" -- "${files[@]:0:n}" -- \
      "${files[n]}" "${files[n+1]}" "${files[n]}" "${files[n+1]}"
    rm -f "${files[@]}"
  done
  files=()
  for (( i = 0; i < n; i++ )); do
    truncate -s $msize "$shm/c$i.img"
    files+=("$shm/c$i.img")
  done
  copies_case "tmpfs files" on "${files[@]}"
  rm -f "${files[@]}"
  tmpfs_done=yes
else
  echo "$0: note: tmpfs here refuses O_DIRECT (a kernel before 6.6): its cases left out"
  tmpfs_done=no
fi

# --- loop devices with direct I/O, direct=auto ---------------------------

if [ "$(id -u)" != 0 ] || ! command -v losetup >/dev/null ||
   ! losetup -f >/dev/null 2>&1; then
  echo "$0: SKIP: loop devices need root and losetup (the tmpfs cases ran: $tmpfs_done)"
  exit 77
fi
for integ in on off; do
  files=() loops=()
  for (( i = 0; i < n + 2; i++ )); do
    truncate -s $msize "$shm/l$integ$i.img"
    files+=("$shm/l$integ$i.img")
    loop_attach "$shm/l$integ$i.img"
  done
  direct_case "loop devices" $integ auto "${files[@]:0:n}" -- "${loops[@]:0:n}" -- \
    "${loops[n]}" "${loops[n+1]}" "${files[n]}" "${files[n+1]}"
done

# --- reads copied into the request by the GPU --------------------------------

loops=()
for (( i = 0; i < n; i++ )); do
  truncate -s $msize "$shm/g$i.img"
  loop_attach "$shm/g$i.img"
done
copies_case "loop devices" auto "${loops[@]}"

# --- the page cache: 1 GiB through the array --------------------------------

echo "=== page cache growth of the members (loop devices), 1 GiB written"
loops=()
for (( i = 0; i < n; i++ )); do
  truncate -s 260M "$shm/p$i.img"
  loop_attach "$shm/p$i.img"
done
for direct in auto off; do
  serve "${loops[@]}" -- direct=$direct m=$m create=true force=true
  before=$(resident "${loops[@]}")
  buffers0=$(awk '/^Buffers:/ { print $2 }' /proc/meminfo)
  write_gib "$uri" 1
  after=$(resident "${loops[@]}")
  buffers1=$(awk '/^Buffers:/ { print $2 }' /proc/meminfo)
  stop_nbdkit "$pid"
  grown=$(( (after - before) >> 20 ))
  echo "  direct=$direct: members' page cache grew by $grown MiB (resident $(( before >> 20 )) -> $(( after >> 20 )) MiB; Buffers in /proc/meminfo $(( (buffers1 - buffers0) >> 10 )) MiB)"
  if [ $direct = auto ]; then
    [ $grown -le 64 ] || fail "direct=auto: the page cache grew by $grown MiB (at most 64)"
  else
    [ $grown -gt 512 ] ||
      fail "direct=off: the page cache grew by only $grown MiB: the measure does not see it"
  fi
done
echo "$0: PASS"
