#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Block status (.extents): `nbdinfo --map` of a sparse array shows data
# exactly at the chunks written (a 4K write, a write across chunks, whole
# stripes) and holes elsewhere; a trim of whole stripes turns them back
# into holes; with a member missing, its chunks are data exactly in the
# stripes that hold data (decided from the stripe's live chunks); with
# the members behind stock NBD servers (remote members, block status of
# the server) the map is the same.  Every
# extent reported as a hole reads back as zeros and the whole array
# equals the reference image (nothing reported lies).

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_py
requires_cmd nbdinfo nbdcopy cmp

k=4 m=2 chunk=65536
n=$(( k + m ))
make_members $n 16M
start_array chunk=$chunk create=true || exit 1
size=$(nbdinfo --size "$uri")
width=$(( k * chunk ))

# map: the data chunks that nbdinfo --map reports, one number a line;
# fails if an extent is neither data (0) nor hole,zero (3).  (That holes
# read as zeros is checked by comparing the whole image.)
map ()
{
  nbdinfo --map "$uri" >"$tmpdir/map" || fail "nbdinfo --map"
  cat "$tmpdir/map" >&2
  awk -v c=$chunk '
    $3 == 0 { if ($1 % c || $2 % c) { print "unaligned data extent " $0 > "/dev/stderr"; exit 1 }
              for (o = $1; o < $1 + $2; o += c) print o / c; next }
    $3 == 3 { next }
    { print "unexpected extent type: " $0 > "/dev/stderr"; exit 1 }' "$tmpdir/map" ||
    fail "map: bad extent"
}

# Expected data chunks from write ranges "off:len ...".
chunks_of ()
{
  for r in "$@"; do
    o=${r%:*} l=${r#*:}
    for (( c = o / chunk; c <= (o + l - 1) / chunk; c++ )); do echo $c; done
  done | sort -n -u
}

# Writes: the reference image and the array.
head -c "$size" /dev/zero >"$tmpdir/ref"
writes=("1150976:4096" "10485760:300000" "$(( 20 * width )):$(( 2 * width ))")
$PY - "$uri" "$tmpdir/ref" "${writes[@]}" <<'PYEOF' || fail "writes"
import nbd, os, sys
h = nbd.NBD(); h.connect_uri(sys.argv[1])
with open(sys.argv[2], "r+b") as ref:
    for i, r in enumerate(sys.argv[3:]):
        off, ln = map(int, r.split(":"))
        buf = bytes((i * 37 + j) % 251 + 1 for j in range(ln))
        h.pwrite(buf, off); ref.seek(off); ref.write(buf)
h.flush(); h.shutdown()
PYEOF

check ()
{
  local what=$1; shift
  map | sort -n -u >"$tmpdir/got"
  printf '%s\n' "$@" | sort -n -u | grep . >"$tmpdir/want" || true
  diff -u "$tmpdir/want" "$tmpdir/got" >&2 || fail "$what: data chunks differ (want, got)"
  nbdcopy "$uri" "$tmpdir/back" || fail "$what: nbdcopy"
  cmp "$tmpdir/ref" "$tmpdir/back" || fail "$what: the array differs from the reference"
  echo "$what: $(wc -l <"$tmpdir/got") data chunks, as expected; the image verifies"
}

want=$(chunks_of "${writes[@]}")
# shellcheck disable=SC2086
check "after writes" $want

# A trim of whole stripes (20 and 21) holes them again.
$PY - "$uri" $(( 2 * width )) $(( 20 * width )) <<'PYEOF' || fail "trim"
import nbd, sys
h = nbd.NBD(); h.connect_uri(sys.argv[1])
h.trim(int(sys.argv[2]), int(sys.argv[3])); h.flush(); h.shutdown()
PYEOF
$PY - "$tmpdir/ref" $(( 20 * width )) $(( 2 * width )) <<'PYEOF'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2])); f.write(bytes(int(sys.argv[3])))
PYEOF
writes=("1150976:4096" "10485760:300000")
want=$(chunks_of "${writes[@]}")
# shellcheck disable=SC2086
check "after a trim of stripes 20-21" $want

# Member 2 missing: its chunks are data where their stripe holds data
# (chunks 16 and 165 here, written in neither).
gone=2
stop_nbdkit "$pid"
mv "${members[$gone]}" "$tmpdir/gone"
start_array || fail "degraded start"
degraded=$($PY - $k $m $gone $want <<'PYEOF'
import sys
k, m, gone = map(int, sys.argv[1:4]); n = k + m
data = set(int(c) for c in sys.argv[4:])
out = set(data)
for s in set(c // k for c in data):
    for d in range(k):
        if (d - s) % n == gone:     # raidmap: code index d of stripe s on member (d - s) mod n
            out.add(s * k + d)
print(" ".join(map(str, sorted(out))))
PYEOF
)
# shellcheck disable=SC2086
[ "$(echo $degraded)" != "$(echo $want)" ] ||
  fail "member $gone holds no unwritten chunk of a stripe with data: the degraded case would test nothing"
# shellcheck disable=SC2086
check "member $gone missing" $degraded
stop_nbdkit "$pid"
mv "$tmpdir/gone" "${members[$gone]}"

# The same members as remote ones (stock nbdkit file servers on Unix
# sockets, which answer block status from SEEK_DATA), member 2 local:
# the same map as healthy.
if ! run_nbdkit "$PLUGIN" --dump-plugin | grep -qx 'gpuraid_nbd_members=yes'; then
  echo "$0: SKIP of the remote part: plugin built without libnbd"
  echo "$0: PASS"
  exit 0
fi
args=()
for (( i = 0; i < n; i++ )); do
  if [ $i = 2 ]; then args+=("member=${members[$i]}"); continue; fi
  nbdkit -P "$tmpdir/host$i.pid" -U "$tmpdir/host$i.sock" file "${members[$i]}" ||
    fail "nbdkit file for member $i"
  cleanup_fn kill "$(cat "$tmpdir/host$i.pid")"
  args+=("member=nbd+unix:///?socket=$tmpdir/host$i.sock")
done
start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" m=$m || fail "remote start"
# shellcheck disable=SC2086
check "remote members" $want
echo "$0: PASS"
