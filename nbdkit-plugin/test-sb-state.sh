#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Superblock state transitions on disk, as docs/format.md describes them:
# creation (event 1, clean, indexes, same UUID, crc32c), no change for a
# read-only session, dirty + event+1 before the first write and clean +
# event+1 at a clean shutdown, dirty left after a crash (and the warning
# at the next start), and a degraded write recording the missing member
# in the failed bitmap and keeping the degraded map, so that it is
# re-added by the map when it comes back.
source "$(dirname "$0")/../tests/functions.sh"
requires_plugin
requires_py

# sb.py FILE: print "uuid index k m code chunk flags doff dsize event failed
# region cksum degraded_since" after checking magic, version, size field,
# reserved bytes and crc32c.
cat > "$tmpdir/sb.py" <<'PYEOF'
import struct, sys
def crc32c(b):
    c = 0xffffffff
    for x in b:
        c ^= x
        for _ in range(8):
            c = (c >> 1) ^ 0x82f63b78 if c & 1 else c >> 1
    return c ^ 0xffffffff
assert crc32c(b"123456789") == 0xe3069283
b = open(sys.argv[1], "rb").read(4096)
if b[:8] != b"GPURAID\0": sys.exit("bad magic")
ver, size = struct.unpack_from("<II", b, 8)
if ver != 1 or size != 4096: sys.exit("bad version/size")
# Zero here: the scrub's position and record, the removed set; past 288
# reserved.  (The rebuild's record, 136-191, is set by a re-add.)
if any(b[128:136]) or any(b[200:4092]): sys.exit("reserved bytes not zero")
if struct.unpack_from("<I", b, 4092)[0] != crc32c(b[:4092]): sys.exit("bad crc")
k, m, code, chunk, idx, flags = struct.unpack_from("<6I", b, 32)
doff, dsize, event, ctime = struct.unpack_from("<4Q", b, 56)
failed = [i for i in range(256) if b[88 + i // 8] >> (i % 8) & 1]
region = struct.unpack_from("<Q", b, 120)[0]
cksum = struct.unpack_from("<Q", b, 192)[0]
dsince = struct.unpack_from("<Q", b, 144)[0]
print(b[16:32].hex(), idx, k, m, code, chunk, flags, doff, dsize, event,
      ",".join(map(str, failed)) or "-", region, cksum, dsince)
PYEOF

sb () { $PY "$tmpdir/sb.py" "$1" || fail "$1: invalid superblock"; }
field () { sb "$1" | cut -d' ' -f"$2"; }      # 1 uuid 2 idx ... 10 event 11 failed

n=3
args=()
for (( i = 0; i < n; i++ )); do
  truncate -s 3M "$tmpdir/d$i"
  args+=("member=$tmpdir/d$i")
done
io () {           # io URI w|r BYTE
  $PY -c "
import nbd, sys
h = nbd.NBD(); h.connect_uri(sys.argv[1])
pat = bytes([int(sys.argv[3])]) * 70000
if sys.argv[2] == 'w': h.pwrite(pat, 12345); h.flush()
else: assert h.pread(70000, 12345) == pat, 'data differs'
" "$@"
}
start () {       # start ARGS...: a server on $sock, its log alone in $nbdkit_log
  : >"$nbdkit_log"
  start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "$@" || fail "server did not start"
}

# 1. Creation.
run_nbdkit -U - "$PLUGIN" "${args[@]}" m=1 chunk=8K code=crs create=true \
  --run true || fail "create"
uuid=$(field "$tmpdir/d0" 1)
for (( i = 0; i < n; i++ )); do
  read -r u idx k m code chunk flags doff dsize event failed region cksum \
    dsince <<<"$(sb "$tmpdir/d$i")"
  # The bitmap region: 64 MiB of a member in 8 KiB chunks; flags 16: the
  # written map kept (all clear: nothing written yet); no degraded map.
  [ "$u $idx $k $m $code $chunk $flags $event $failed $region $dsince" = \
    "$uuid $i 2 1 2 8192 16 1 - 8192 0" ] || fail "member $i after create: $(sb "$tmpdir/d$i")"
  # Checksums (the default): their area at 1 MiB, 4 bytes for each 4 KiB
  # of the 2 MiB after it (one block), the data at the next chunk.
  [ "$cksum" = 1048576 ] && [ "$doff" = $(( 1048576 + 8192 )) ] &&
    [ "$dsize" = $(( 2 * 1024 * 1024 - 8192 )) ] ||
    fail "member $i: checksums/data offset/size $cksum $doff $dsize"
done
echo "create: OK ($(sb "$tmpdir/d0"))"

# 2. A read-only session changes nothing.
cp "$tmpdir/d0" "$tmpdir/before"
start "${args[@]}"
$PY -c "import nbd,sys; h=nbd.NBD(); h.connect_uri(sys.argv[1]); h.pread(4096,0)" "$uri"
stop_nbdkit "$pid"
cmp -s "$tmpdir/d0" "$tmpdir/before" || fail "a read-only session changed member 0"
echo "read-only session: OK"

# 3. Dirty while writing, clean after a clean shutdown.
start "${args[@]}"
io "$uri" w 171
# Flags 21: dirty (1), the write-intent bitmap kept (4), the written map
# (16).
[ "$(field "$tmpdir/d1" 7) $(field "$tmpdir/d1" 10)" = "21 2" ] ||
  fail "while writing: want dirty+bitmap, event 2: $(sb "$tmpdir/d1")"
stop_nbdkit "$pid"
for (( i = 0; i < n; i++ )); do
  [ "$(field "$tmpdir/d$i" 7) $(field "$tmpdir/d$i" 10)" = "16 3" ] ||
    fail "after clean stop, member $i: $(sb "$tmpdir/d$i")"
done
echo "dirty/clean: OK"

# 4. A crash leaves the array dirty; the next start warns.
start "${args[@]}"
io "$uri" w 172
kill -9 "$(cat "$pid")"; wait "$(cat "$pid")" 2>/dev/null; rm -f "$pid"
[ "$(field "$tmpdir/d2" 7)" = 21 ] || fail "after a crash: not dirty: $(sb "$tmpdir/d2")"
start "${args[@]}"
grep -q "not shut down cleanly" "$nbdkit_log" || fail "no dirty warning: $(cat "$nbdkit_log")"
wait_resync
stop_nbdkit "$pid"
for (( i = 0; i < n; i++ )); do
  [ "$(field "$tmpdir/d$i" 7)" = 16 ] ||
    fail "after the resync and a clean stop, member $i: $(sb "$tmpdir/d$i")"
done
echo "crash: OK"

# 5. Degraded write: the missing member is recorded failed, then stale.
mv "$tmpdir/d1" "$tmpdir/d1.away"
ev=$(field "$tmpdir/d0" 10)
start "${args[@]}"
grep -q "member 1 is missing" "$nbdkit_log" || fail "missing member 1 not logged"
io "$uri" w 173
stop_nbdkit "$pid"
for i in 0 2; do
  [ "$(field "$tmpdir/d$i" 11)" = 1 ] ||
    fail "member $i does not record member 1 failed: $(sb "$tmpdir/d$i")"
  [ "$(field "$tmpdir/d$i" 10)" -gt "$ev" ] || fail "event not bumped"
  # The degraded map is kept from the update that recorded it (the dirty
  # one, event + 1).
  [ "$(field "$tmpdir/d$i" 14)" = $(( ev + 1 )) ] ||
    fail "member $i: degraded since $(field "$tmpdir/d$i" 14), not $(( ev + 1 ))"
done
mv "$tmpdir/d1.away" "$tmpdir/d1"
# The member that was away still holds byte 172 over the range: reads
# must give 173, before and after it is re-added (the degraded map covers
# it), and the array ends healthy with no degraded map.
start "${args[@]}"
io "$uri" r 173 || fail "restart with the member back: wrong data"
grep -Eq "member 1 .*failed at event $ev .*re-added" "$nbdkit_log" ||
  fail "member 1 not re-added: $(cat "$nbdkit_log")"
for (( j = 0; j < 100; j++ )); do
  grep -q "re-add of member 1 .* done" "$nbdkit_log" && break
  sleep 0.1
done
grep "re-add of member 1 .* done" "$nbdkit_log" || fail "no re-add: $(cat "$nbdkit_log")"
io "$uri" r 173 || fail "after the re-add: wrong data"
stop_nbdkit "$pid"
for (( i = 0; i < n; i++ )); do
  [ "$(field "$tmpdir/d$i" 11) $(field "$tmpdir/d$i" 14)" = "- 0" ] ||
    fail "after the re-add, member $i: $(sb "$tmpdir/d$i")"
done
echo "degraded write + the member back, re-added: OK"
echo "$0: PASS"
