#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Degraded reads and writes against a reference, over several geometries
# and both codes: for every set of up to min(m, 2) missing members, 400
# random reads (odd offsets and lengths, inside and across chunks and
# stripes) and a full read must match; then writes with one member
# missing, read back with it (and, for m >= 2, one more) missing.
source "$(dirname "$0")/../tests/functions.sh"
requires_plugin
requires_py
seed=$TEST_SEED

cat > "$tmpdir/io.py" <<'PYEOF'
import nbd, random, sys
uri, ref, seed, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
h = nbd.NBD()
h.connect_uri(uri)
sz = h.get_size()
data = bytearray(sz) if mode == "init" else bytearray(open(ref, "rb").read())
rng = random.Random(seed)
def rlen():
    return rng.choice([1, 3, 511, 4096, 4097, 8191, 8192, 12345, 40000,
                       70000, 200000])
if mode in ("init", "write"):
    for _ in range(150):
        n = rlen(); off = rng.randrange(0, sz - n)
        b = rng.randbytes(n); h.pwrite(b, off); data[off:off + n] = b
    open(ref, "wb").write(data)
for _ in range(400):
    n = rlen(); off = rng.randrange(0, sz - n)
    if h.pread(n, off) != data[off:off + n]:
        print("%s: MISMATCH reading %d bytes at %d" % (mode, n, off))
        sys.exit(1)
if h.pread(sz, 0) != data:
    print("%s: full read MISMATCH" % mode)
    sys.exit(1)
PYEOF

# serve SEED MODE: run io.py against the members present.
serve ()
{
  run_nbdkit -U - "$PLUGIN" "${args[@]}" \
    --run "$PY $tmpdir/io.py \"\$uri\" $tmpdir/ref $1 $2" 2>>"$tmpdir/log"
}
away () { local x; for x in "$@"; do mv "$tmpdir/d$x" "$tmpdir/x$x"; done; }
back () { local x; for x in "$@"; do mv "$tmpdir/x$x" "$tmpdir/d$x"; done; }

run ()
{
  local k=$1 m=$2 chunk=$3 code=$4 n i j
  n=$(( k + m ))
  rm -f "$tmpdir"/d* "$tmpdir/ref"
  args=()
  for (( i = 0; i < n; i++ )); do
    truncate -s 3M "$tmpdir/d$i"
    args+=("member=$tmpdir/d$i")
  done
  run_nbdkit -U - "$PLUGIN" "${args[@]}" m=$m chunk=$chunk code=$code \
    create=true --run "$PY $tmpdir/io.py \"\$uri\" $tmpdir/ref $seed init" ||
    fail "$k+$m $code: healthy writes"
  for (( i = 0; i < n; i++ )); do
    away $i
    serve $(( seed + i )) read || fail "$k+$m $code: member $i missing"
    back $i
    if [ "$m" -ge 2 ]; then
      for (( j = i + 1; j < n; j++ )); do
        away $i $j
        serve $(( seed + i * n + j )) read ||
          fail "$k+$m $code: members $i $j missing"
        back $i $j
      done
    fi
  done
  away $(( n - 1 ))
  serve $(( seed + 1000 )) write || fail "$k+$m $code: degraded writes"
  if [ "$m" -ge 2 ]; then
    away 0
    serve $(( seed + 1001 )) read ||
      fail "$k+$m $code: read after degraded writes, one more missing"
    back 0
  fi
  back $(( n - 1 ))
  echo "$0: $k+$m chunk=$chunk code=$code: OK"
}

run 3 1 4096 rs
run 4 2 8192 crs
run 5 3 4096 rs
run 2 2 16384 crs
echo "$0: PASS"
