#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Self-test of tests/test-concurrent (no gpuraid plugin involved): against
# a deliberately racy server, an nbdkit sh plugin whose writes are
# unlocked read-modify-writes of whole 4K blocks, it must report lost
# updates; against the same plugin with requests serialized it must pass.
# This shows the concurrency test can fail.

source "$(dirname "$0")/functions.sh"
prog=$top/tests/test-concurrent
if [ ! -x "$prog" ]; then
  echo "$0: SKIP: $prog not built"
  exit 77
fi
requires nbdkit sh --version

cat > "$tmpdir/rmw.sh" <<'SHEOF'
#!/bin/bash
# Not the gpuraid plugin: no sanitizer runtime for dd & co.
unset LD_PRELOAD
f=$DISK
case "$1" in
  thread_model) echo "$MODEL" ;;
  get_size) echo 65536 ;;
  open) echo h ;;
  can_write) exit 0 ;;
  pread) dd if="$f" bs=1 skip="$4" count="$3" iflag=skip_bytes,count_bytes status=none ;;
  pwrite)
    count=$3 off=$4
    start=$(( off / 4096 * 4096 )); end=$(( (off + count + 4095) / 4096 * 4096 ))
    t=$(mktemp)
    dd if="$f" of="$t" bs=4096 skip=$(( start / 4096 )) count=$(( (end - start) / 4096 )) status=none
    sleep 0.02
    dd of="$t" bs=1 seek=$(( off - start )) oflag=seek_bytes conv=notrunc status=none
    dd if="$t" of="$f" bs=4096 seek=$(( start / 4096 )) conv=notrunc status=none
    rm -f "$t" ;;
  *) exit 2 ;;
esac
SHEOF
chmod +x "$tmpdir/rmw.sh"
export DISK=$tmpdir/disk

for model in parallel serialize_all_requests; do
  rm -f "$DISK"; truncate -s 64K "$DISK"
  MODEL=$model start_nbdkit -P "$pid" -U "$sock" sh "$tmpdir/rmw.sh" || exit 1
  "$prog" write "$uri" "$TEST_SEED" 4 65536 4 > "$tmpdir/out" 2>&1
  rc=$?
  tail -n 3 "$tmpdir/out"
  stop_nbdkit "$pid"
  if [ "$model" = parallel ]; then
    if [ "$rc" = 0 ] || ! grep -q 'MISMATCH' "$tmpdir/out"; then
      echo "$0: FAIL: test-concurrent did not detect the racy server (rc=$rc)"
      exit 1
    fi
  elif [ "$rc" != 0 ]; then
    echo "$0: FAIL: test-concurrent failed against the serialized server"
    exit 1
  fi
done
echo "$0: PASS"
