#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Runtime GPU -> CPU fallback, tested without a GPU: -D gpuraid.fake_gpu=1
# puts a coder whose every operation fails (and scribbles on its output)
# in front of the CPU coder.  For a first coding operation of each kind
# (parity update, full encode, reconstruct) the requests must succeed,
# the failure must be logged exactly once, and the data must read back
# both healthy and with a member removed (so parity is right).
source "$(dirname "$0")/../tests/functions.sh"
requires_plugin
requires_py
seed=$TEST_SEED

# io.py MODE URI REF SEED: "update" (first op is a read-modify-write),
# "encode" (first op a full-stripe write), then random writes; "verify".
cat > "$tmpdir/io.py" <<'PYEOF'
import nbd, random, sys
mode, uri, ref, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
h = nbd.NBD()
h.connect_uri(uri)
size = h.get_size()
if mode == "verify":
    want = open(ref, "rb").read()
    got = h.pread(size, 0) if size <= 32 << 20 else None
    if got != want:
        bad = next(i for i in range(size) if got[i] != want[i])
        print("verify: MISMATCH at byte %d" % bad)
        sys.exit(1)
    print("verify: %d bytes OK" % size)
    sys.exit(0)
rng = random.Random(seed)
data = bytearray(open(ref, "rb").read())
k, chunk = int(sys.argv[5]), int(sys.argv[6])
width = k * chunk
def write(off, n):
    b = rng.randbytes(n)
    h.pwrite(b, off)
    data[off:off + n] = b
if mode == "update":
    write(0, 4096)                  # one small piece: read-modify-write
elif mode == "encode":
    write(0, 2 * width)             # whole stripes
for _ in range(60):
    n = rng.choice([1, 512, 4096, 5000, width, 2 * width + 123])
    off = rng.randrange(0, size - n)
    write(off, n)
if bytes(h.pread(size, 0)) != bytes(data):
    print("%s: read back differs" % mode)
    sys.exit(1)
open(ref, "wb").write(data)
print("%s: writes read back OK" % mode)
PYEOF

# run CASE K M: members, create, first op through the fake GPU.
run_case ()
{
  local case=$1 k=$2 m=$3 chunk=4096 n i args=() log
  n=$(( k + m ))
  rm -f "$tmpdir"/d* "$tmpdir/ref"
  for (( i = 0; i < n; i++ )); do
    truncate -s 2M "$tmpdir/d$i"
    args+=("member=$tmpdir/d$i")
  done
  run_nbdkit -U - "$PLUGIN" "${args[@]}" m=$m chunk=$chunk create=true \
    --run "$PY -c 'import nbd,sys; h=nbd.NBD(); h.connect_uri(sys.argv[1]); open(sys.argv[2],\"wb\").write(bytes(h.get_size()))' \"\$uri\" $tmpdir/ref" ||
    fail "$case: create"
  log=$tmpdir/$case.log
  if [ "$case" = reconstruct ]; then
    # Data first (no fake GPU), then the fake GPU on a degraded array:
    # the first coding operation is the rebuild of member 0's chunks.
    run_nbdkit -U - "$PLUGIN" "${args[@]}" \
      --run "$PY $tmpdir/io.py plain \"\$uri\" $tmpdir/ref $seed $k $chunk" ||
      fail "$case: writing the data"
    mv "$tmpdir/d0" "$tmpdir/d0.away"
    run_nbdkit -v -U - -D gpuraid.fake_gpu=1 "$PLUGIN" "${args[@]}" \
      --run "$PY $tmpdir/io.py verify \"\$uri\" $tmpdir/ref 0" 2>"$log" ||
      { tail -20 "$log"; fail "$case: degraded read through the fake GPU"; }
    mv "$tmpdir/d0.away" "$tmpdir/d0"
  else
    run_nbdkit -v -U - -D gpuraid.fake_gpu=1 "$PLUGIN" "${args[@]}" \
      --run "$PY $tmpdir/io.py $case \"\$uri\" $tmpdir/ref $seed $k $chunk" \
      2>"$log" || { tail -20 "$log"; fail "$case: I/O through the fake GPU"; }
  fi
  grep -q "fake failing GPU coder" "$log" ||
    fail "$case: the fake GPU coder was not used"
  local count
  count=$(grep -c "error: GPU .* failed" "$log")
  [ "$count" = 1 ] || fail "$case: expected one GPU failure message, got $count"
  grep "error: GPU .* failed" "$log"
  # The check the GPU tests rely on must see this fallback.
  if gpu_worked "$log"; then
    fail "$case: gpu_worked did not notice the fallback"
  fi
  # Parity must be right: read everything back with each member removed
  # in turn (for the reconstruct case the array is already degraded: it
  # is refused with a second member gone only if m = 1).
  if [ "$case" != reconstruct ]; then
    for (( i = 0; i < n; i++ )); do
      mv "$tmpdir/d$i" "$tmpdir/away"
      run_nbdkit -U - "$PLUGIN" "${args[@]}" \
        --run "$PY $tmpdir/io.py verify \"\$uri\" $tmpdir/ref 0" 2>/dev/null ||
        fail "$case: data differs with member $i removed"
      mv "$tmpdir/away" "$tmpdir/d$i"
    done
  fi
  echo "$0: $case: OK"
}

run_case update 4 1
run_case encode 3 2
run_case reconstruct 3 2
echo "$0: PASS"
