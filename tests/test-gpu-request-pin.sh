#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# nbdkit's request buffers page-locked in place on a real GPU
# (nbdkit-plugin/reqpin.h; tests/test-request-pin.sh is the same without
# a GPU, through the stand-in).  10+4, chunk 64K and 8+8, chunk 1M,
# accel=gpu:
#  1. written by nbdcopy in requests that grow from 64 KiB to 32 MiB, one
#     connection each (nbdkit reallocs each thread's buffer, and threads
#     come and go with the connections), then 4 connections at once: read
#     back with accel=cpu equal to the image; the log shows buffers
#     registered, none left at exit, no failure, no fallback to the CPU;
#     parity checked offline;
#  2. m members gone, read with accel=gpu in 1 MiB and 8 MiB requests
#     (reconstructs written straight into the request buffers) and with
#     -D gpuraid.pin_requests=0 (staged): both equal the image;
#  3. 8+8, chunk 1M, 40M members: a SIGTERM right after the first large
#     writes (the kernel's compile running) stops the server cleanly.
# Needs no python.  Skips, saying why, where the plugin has no CUDA or
# there is no GPU.

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_cmd nbdcopy cmp

if ! run_nbdkit "$PLUGIN" --dump-plugin | grep -qx 'gpuraid_cuda=yes'; then
  echo "$0: SKIP: plugin built without CUDA (gpuraid_cuda=no)"
  exit 77
fi
k=10 m=4
make_members 14 8M probe
if ! start_array create=true accel=gpu; then
  echo "$0: SKIP: no usable GPU: $(grep -i 'gpu' "$nbdkit_log" | tail -n 1)"
  exit 77
fi
stop_nbdkit "$pid"
rm -f "${members[@]}"
check_backend=isal

# read_back WHAT [NBDKIT ARGS...] -- [PLUGIN ARGS...]: the whole export
# read in requests of $rsize must equal $img.
read_back ()
{
  local what=$1 opts=()
  shift
  while [ "$1" != -- ]; do opts+=("$1"); shift; done
  shift
  : >"$nbdkit_log"
  set_args
  start_nbdkit -P "$pid" -U "$sock" -v "${opts[@]}" "$PLUGIN" "${args[@]}" \
    m=$m "$@" || fail "$what: nbdkit did not start"
  rm -f "$tmpdir/out"
  nbdcopy --request-size="$rsize" "$uri" "$tmpdir/out" ||
    fail "$what: nbdcopy from the array"
  stop_nbdkit "$pid"
  cmp -n "$(stat -c %s "$img")" "$tmpdir/out" "$img" ||
    fail "$what: data differs"
  echo "ok: $what"
}

# k:m:chunk:member size (8+8 with 1 MiB chunks keeps 35 MiB of each
# member for its journal's 4 slots and the checksums: 40 stripes left).
for geom in 10:4:64K:40M 8:8:1M:75M; do
  IFS=: read -r k m chunk msize <<<"$geom"
  n=$(( k + m ))
  case $chunk in 64K) cbytes=65536 ;; *) cbytes=1048576 ;; esac
  echo "=== $k+$m chunk $chunk"
  make_members $n "$msize"
  set_args
  img=$tmpdir/img
  : >"$nbdkit_log"
  start_nbdkit -P "$pid" -U "$sock" -v "$PLUGIN" "${args[@]}" m=$m \
    chunk=$chunk create=true accel=gpu || fail "nbdkit did not start"
  size=$(nbdinfo --size "$uri")
  head -c "$size" /dev/urandom >"$img"
  for rs in 65536 262144 1048576 4194304 16777216 33554432; do
    nbdcopy -C 1 --request-size=$rs "$img" "$uri" ||
      fail "nbdcopy in requests of $rs"
  done
  nbdcopy -C 4 --request-size=4194304 "$img" "$uri" || fail "nbdcopy -C 4"
  stop_nbdkit "$pid"
  gpu_worked "$nbdkit_log" || fail "the GPU did not code, or fell back"
  grep -o 'request buffers page-locked: .*' "$nbdkit_log"
  grep -q 'request buffers page-locked: [1-9]' "$nbdkit_log" ||
    fail "no request buffer was page-locked"
  grep -q '0 ranges (0 bytes) at exit' "$nbdkit_log" ||
    fail "ranges of ended threads left registered"
  ! grep -q 'cannot page-lock\|cannot unregister' "$nbdkit_log" ||
    fail "$(grep -m1 'cannot page-lock\|cannot unregister' "$nbdkit_log")"
  check_parity $k $m $cbytes rs "${members[@]}"
  rsize=4194304 read_back "healthy, accel=cpu" -- accel=cpu

  for (( i = 0; i < m; i++ )); do mv "${members[i]}" "$tmpdir/gone$i"; done
  for rsize in 1048576 8388608; do
    read_back "degraded, accel=gpu, requests of $rsize" -- accel=gpu
    gpu_worked "$nbdkit_log" || fail "degraded: the GPU fell back"
    read_back "degraded, accel=gpu, pin_requests=0, requests of $rsize" \
      -D gpuraid.pin_requests=0 -- accel=gpu
  done
  for (( i = 0; i < m; i++ )); do mv "$tmpdir/gone$i" "${members[i]}"; done
  rm -f "${members[@]}" "$img"
done
echo "=== 8+8 chunk 1M: a SIGTERM just after the first large writes"
# The first batch of 4 MiB or more starts compiling its kernel (NVRTC,
# gpu/jit.cu), which takes a few hundred ms; with the compiler in the
# server's process, a SIGTERM then ended the server with status 4 before
# its cleanup, the array left dirty (5 runs of 5).  It compiles in a
# child process now.
make_members 16 40M sig
set_args
: >"$nbdkit_log"
start_nbdkit -P "$pid" -U "$sock" -v "$PLUGIN" "${args[@]}" m=8 chunk=1M \
  create=true accel=gpu || fail "nbdkit did not start"
head -c "$(nbdinfo --size "$uri")" /dev/urandom >"$tmpdir/img"
nbdcopy "$tmpdir/img" "$uri" || fail "nbdcopy"
stop_nbdkit "$pid"
grep -q 'debug: gpuraid: cleanup' "$nbdkit_log" ||
  fail "the server ended before its cleanup: $(tail -n 3 "$nbdkit_log")"
: >"$nbdkit_log"
start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" m=8 accel=gpu ||
  fail "nbdkit did not start again"
stop_nbdkit "$pid"
! grep -q 'not shut down cleanly' "$nbdkit_log" ||
  fail "$(grep -m1 'not shut down cleanly' "$nbdkit_log")"
echo "ok: stopped cleanly"
echo "$0: PASS"
