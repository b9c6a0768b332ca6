#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# nbdkit's request buffers page-locked in place (nbdkit-plugin/reqpin.h),
# through nbdkit, without a GPU: the stand-in GPU (-D gpuraid.fake_gpu=2
# -D gpuraid.fake_auto=2: every operation on it, its "page-locked"
# memory and registrations emulated and counted) in a 4+2 array, 64K
# chunks.
#  1. One connection whose requests grow (64 KiB to 8 MiB, so nbdkit
#     reallocs its buffer), then connections that come and go (several at
#     once, random sizes): every read equals the reference; buffers were
#     registered, again when they grew; none was left registered at exit,
#     none unregistered or marked in use wrongly; page-locked scratch of
#     threads that ended was taken over by later threads (not allocated
#     again); parity checked offline.  Then the whole array read by a
#     new connection: its buffer not page-locked (nothing to code).
#  2. Every registration fails (-D gpuraid.fake_pin=1): one warning,
#     the data right all the same (staged), parity checked.
#  3. Two members gone: the degraded reads equal the reference, of whole
#     stripes and of parts of them (a lost chunk a read does not want
#     left alone: gf.h); with registration the stand-in's reconstructs
#     had blocks in the request buffers (rebuilt straight into them), and
#     its block checksums verified the reads (none found wrong, no
#     fallback), with -D gpuraid.pin_requests=0 none did.
#  4. -D gpuraid.group_commit=0: whole-stripe writes from 4 connections
#     coded each on its own (no "group commit:" batch), data right.

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_py
requires_cmd nbdcopy cmp

k=4 m=2 chunk=65536 n=6 code=rs
seed=${TEST_SEED:-$(( (RANDOM << 15) | RANDOM ))}
echo "$0: TEST_SEED=$seed"
ref=$tmpdir/ref

fail () { echo "$0: FAIL: $*"; tail -15 "$nbdkit_log"; exit 1; }

make_members $n 24M
set_args
fake=(-v -D gpuraid.fake_gpu=2 -D gpuraid.fake_auto=2)

# serve [NBDKIT ARGS...]: the array on $sock (created the first time),
# the log fresh.
create=create=true
serve ()
{
  : >"$nbdkit_log"
  start_nbdkit -P "$pid" -U "$sock" "$@" "$PLUGIN" "${args[@]}" m=$m \
    chunk=$chunk code=$code $create || fail "nbdkit did not start"
  create=
}

# io.py MODE: requests against the reference image $ref (created by
# "grow").  grow: one connection, sizes growing to 8 MiB; conns: 8 rounds
# of 3 connections at once, random sizes and offsets; read: the whole
# image read back in 1 MiB requests; readodd: in requests of 3 chunks
# (parts of stripes).  Every read is compared.
cat >"$tmpdir/io.py" <<'EOF'
import os, random, sys, threading, nbd
mode, uri, ref, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rng = random.Random(seed)
def conn():
    h = nbd.NBD(); h.connect_uri(uri); return h
if mode == "grow":
    h = conn(); size = h.get_size()
    img = bytearray(size)
    off = 0
    for sz in [65536, 98304, 131072, 262144, 1048576, 1572864, 4194304,
               8388608, 65536, 8388608]:
        off = (off + 8388608) % (size - sz) // 4096 * 4096
        b = rng.randbytes(sz); h.pwrite(b, off); img[off:off + sz] = b
        assert h.pread(sz, off) == b, "grow: read %d at %d" % (sz, off)
    open(ref, "wb").write(img)
elif mode == "conns":
    img = bytearray(open(ref, "rb").read()); size = len(img)
    lock = threading.Lock(); errs = []
    def worker(s):
        r = random.Random(s); h = conn()
        for _ in range(12):
            sz = r.randrange(1, 3 << 20); off = r.randrange(0, size - sz)
            if r.random() < 0.6:
                with lock:                  # one writer of a range at a time
                    b = r.randbytes(sz); h.pwrite(b, off); img[off:off + sz] = b
            else:
                with lock:
                    want = bytes(img[off:off + sz])
                    if h.pread(sz, off) != want: errs.append((sz, off))
        h.shutdown()
    for rnd in range(8):
        ts = [threading.Thread(target=worker, args=(seed * 100 + rnd * 3 + i,))
              for i in range(3)]
        for t in ts: t.start()
        for t in ts: t.join()
    assert not errs, "conns: reads differ: %r" % errs[:3]
    open(ref, "wb").write(img)
elif mode in ("read", "readodd"):
    img = open(ref, "rb").read(); h = conn()
    step = 1 << 20 if mode == "read" else 3 << 16
    for off in range(0, len(img), step):
        n = min(step, len(img) - off)
        assert h.pread(n, off) == img[off:off + n], "read at %d" % off
print(mode, "ok")
EOF
io () { "$PY" "$tmpdir/io.py" "$1" "$uri" "$ref" "$seed" || fail "io.py $1"; }

# fake_count LOG WHAT: from the stand-in's report, the number before WHAT.
fake_count ()
{
  grep -o "fake GPU: .*" "$1" | grep -o "[0-9]* $2" | head -1 | cut -d' ' -f1
}

# The report of a clean run: nothing left, nothing done wrongly.
clean_report ()
{
  grep -q "fake GPU: .* 0 left registered, 0 bad unregisters, 0 bad in-use marks" \
    "$nbdkit_log" || fail "$1: $(grep -o 'fake GPU: .*' "$nbdkit_log")"
}

echo "=== 1. growing buffers, connections coming and going"
serve "${fake[@]}"
io grow
io conns
stop_nbdkit "$pid"
grep -q 'fake working GPU coder' "$nbdkit_log" || fail "no stand-in GPU"
gpu_worked "$nbdkit_log" || fail "the stand-in did not code"
regs=$(grep -c 'request buffer of a thread page-locked' "$nbdkit_log")
grep -o 'request buffers page-locked: .*' "$nbdkit_log"
grep -o 'fake GPU: .*' "$nbdkit_log"
[ "$regs" -ge 10 ] || fail "only $regs registrations"
grep -q 'request buffers page-locked: .*([1-9][0-9]* moved or grown' \
  "$nbdkit_log" || fail "no buffer was registered again when it grew"
grep -q '0 ranges (0 bytes) at exit' "$nbdkit_log" ||
  fail "ranges of ended threads left registered"
clean_report "growing"
line=$(grep -o 'page-locked scratch: [0-9]* buffers allocated, [0-9]* taken over' "$nbdkit_log") ||
  fail "no account of the page-locked scratch at exit"
echo "$line"
taken=$(sed 's/.*allocated, \([0-9]*\) taken.*/\1/' <<<"$line")
[ "$taken" -gt 0 ] ||
  fail "no page-locked scratch passed from an ended thread to a later one"
[ "$(fake_count "$nbdkit_log" "with blocks in request buffers")" -gt 0 ] ||
  fail "no operation coded from a page-locked request buffer"
check_parity $k $m $chunk $code "${members[@]}"

echo "=== 1b. reads of a whole array: nothing to code, nothing page-locked"
serve "${fake[@]}"
io read
stop_nbdkit "$pid"
grep -q 'request buffers page-locked: 0 registrations' "$nbdkit_log" ||
  fail "a read of the whole array page-locked its buffer: $(grep -o 'request buffers page-locked: .*' "$nbdkit_log")"

echo "=== 2. every registration fails"
serve "${fake[@]}" -D gpuraid.fake_pin=1
io conns
io read
stop_nbdkit "$pid"
nwarn=$(grep -c 'cannot page-lock a request buffer' "$nbdkit_log")
[ "$nwarn" = 1 ] || fail "$nwarn warnings of the failure, not 1"
grep 'cannot page-lock' "$nbdkit_log"
grep -q 'request buffers page-locked: 0 registrations .*stopped after a failure' \
  "$nbdkit_log" || fail "registration did not stop after the failure"
clean_report "failing"
check_parity $k $m $chunk $code "${members[@]}"

echo "=== 3. degraded reads into the request"
mv "${members[1]}" "$tmpdir/gone1"; mv "${members[4]}" "$tmpdir/gone4"
serve "${fake[@]}" -D gpuraid.pin_requests=0
io read
stop_nbdkit "$pid"
grep -q 'not page-locked (pin_requests=0)' "$nbdkit_log" ||
  fail "pin_requests=0 not taken"
r0=$(fake_count "$nbdkit_log" "with blocks in request buffers")
serve "${fake[@]}"
io read
io readodd
stop_nbdkit "$pid"
clean_report "degraded"
gpu_worked "$nbdkit_log" || fail "degraded: the stand-in's coding fell back"
r1=$(fake_count "$nbdkit_log" "with blocks in request buffers")
echo "reconstructs with blocks in request buffers: $r1 registered, $r0 not"
[ "$r0" = 0 ] || fail "pin_requests=0: $r0 operations in request buffers"
[ "$r1" -gt 0 ] || fail "no degraded read's reconstruct in the request"
mv "$tmpdir/gone1" "${members[1]}"; mv "$tmpdir/gone4" "${members[4]}"

echo "=== 4. group commit off"
head -c 8M /dev/urandom >"$tmpdir/part"
serve "${fake[@]}" -D gpuraid.verbose=1 -D gpuraid.group_commit=0
nbdcopy -C 4 --request-size=1048576 "$tmpdir/part" "$uri" ||
  fail "nbdcopy"
rm -f "$tmpdir/out"
nbdcopy "$uri" "$tmpdir/out" || fail "nbdcopy back"
stop_nbdkit "$pid"
cmp -n 8388608 "$tmpdir/out" "$tmpdir/part" || fail "data read back differs"
! grep -q 'group commit:' "$nbdkit_log" ||
  fail "group_commit=0: a batch was gathered"
check_parity $k $m $chunk $code "${members[@]}"
echo "$0: PASS"
