#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Crash loop: kill -9 the server at random moments while it writes, and
# check after every restart that nothing flushed or written with FUA was
# lost, that no block holds anything but what was written to it (blocks
# never written included), and, after a clean stop, that parity is
# consistent (offline check) once the background resync of the regions
# in the write-intent bitmap is done: a region missed by the bitmap would
# show there.  Healthy arrays, and degraded ones (one member gone: the
# journal repairs the stripes being written).
#   CRASHES   crashes per geometry and state (default 8)
#   GEOMETRIES  k:m:chunk:code[:gpu] list (default "4:2:16384:rs
#             2:1:4096:crs 4:2:16384:rs:gpu"); :gpu codes on the
#             stand-in GPU (-D gpuraid.fake_gpu=2: a CPU coder behind the
#             GPU's paths, the group commit and the coding's checksums; a
#             round trip of 100 us, so that batches gather requests)
#   WRITERS   writers at once, a list (default "1 3": each takes half of
#             the crashes, on an array of its own); several share the
#             array's stripes, each owning units of 16 KiB and checking
#             its own (tests/crashloop.py)
# make check runs the short form; make check-long: CRASHES=40 and more
# geometries (tests/tests.mk's LONG_ENV).

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_py

crashes=${CRASHES:-8}
writer_sets=${WRITERS:-"1 3"}
geometries=${GEOMETRIES:-"4:2:16384:rs 2:1:4096:crs 4:2:16384:rs:gpu"}
seed=$TEST_SEED
total=0 restarts=0

crash_once ()   # args...: start, $nw writers, kill at a random moment
{
  local w delay
  local -a wpids=()
  start_nbdkit -P "$pid" -U "$sock" -D gpuraid.bitmap_ms=100 "${gpu[@]}" "$PLUGIN" "$@" ||
    { echo "$0: FAIL: restart refused"; exit 1; }
  restarts=$(( restarts + 1 ))
  for (( w = 0; w < nw; w++ )); do
    seed=$(( seed + 1 ))
    "$PY" "$top/tests/crashloop.py" write "$uri" "$tmpdir/state$w.json" $seed $w "$nw" &
    wpids+=($!)
  done
  delay=$(( RANDOM % 600 + 50 ))
  sleep "$(printf '0.%03d' "$delay")"
  crash_nbdkit "$pid"
  wait "${wpids[@]}"
  total=$(( total + 1 ))
}

# Every writer's blocks hold what they may after the crash.
verify_all ()
{
  local w
  for (( w = 0; w < nw; w++ )); do
    "$PY" "$top/tests/crashloop.py" verify "$uri" "$tmpdir/state$w.json" $w "$nw" ||
      return 1
  done
}

nsets=$(wc -w <<<"$writer_sets")

for g in $geometries; do
  IFS=: read -r k m chunk code accel <<<"$g"
  gpu=()
  if [ "${accel:-cpu}" = gpu ]; then
    gpu=(-v -D gpuraid.fake_gpu=2 -D gpuraid.fake_gpu_us=100)
  fi
  n=$(( k + m ))
  for state in healthy degraded; do
  for nw in $writer_sets; do
    echo "=== $k+$m chunk=$chunk $code${accel:+ accel=$accel}, $state, $nw writer(s)"
    make_members $n 6M
    rm -f "$tmpdir"/state*.json
    # Bitmap regions of one to four stripes, cleared after 0.1 to 0.2 s
    # idle: crashes land while bits are set, cleared and set again.
    start_array chunk=$chunk code=$code create=true bitmap-chunk=16K || exit 1
    stop_nbdkit "$pid"
    args=() check=()
    for (( i = 0; i < n; i++ )); do
      if [ $state = degraded ] && [ $i = 1 ]; then
        mv "${members[$i]}" "$tmpdir/gone"
        check+=(-)
      else
        args+=("member=${members[$i]}")
        check+=("${members[$i]}")
      fi
    done
    for (( c = 0; c < (crashes + nsets - 1) / nsets; c++ )); do
      crash_once "${args[@]}"
      start_nbdkit -P "$pid" -U "$sock" -D gpuraid.bitmap_ms=100 "${gpu[@]}" "$PLUGIN" "${args[@]}" ||
        { echo "$0: FAIL: restart after crash $c refused"; cat "$nbdkit_log"; exit 1; }
      restarts=$(( restarts + 1 ))
      verify_all ||
        { echo "$0: FAIL: $k+$m $state, $nw writer(s): crash $c lost or corrupted data"
          echo "the server's last errors and what it did since its start:"
          grep -E 'error|EIO|resync|journal|replay' "$nbdkit_log" | tail -n 12
          exit 1; }
      wait_resync
      stop_nbdkit "$pid"
      check_parity $k $m $chunk $code "${check[@]}" >/dev/null
    done
    if grep -q 'cannot be resynced' "$nbdkit_log"; then
      echo "$0: FAIL: a crash left an array that cannot be resynced"; exit 1
    fi
    rm -f "${members[@]}" "$tmpdir/gone"
  done
  done
done
# The stand-in GPU coded (its clean stops' counts).
if [[ " $geometries" == *:gpu* ]]; then
  gops=$(sed -n 's/.*coding operations on the GPU: \([0-9]*\);.*/\1/p' "$nbdkit_log" |
         awk '{ s += $1 } END { print s + 0 }')
  greqs=$(sed -n 's/.*encodes in the group commit (batches, requests, windows run out): [0-9]*, \([0-9]*\),.*/\1/p' "$nbdkit_log" |
          awk '{ s += $1 } END { print s + 0 }')
  echo "$0: the stand-in GPU's clean stops: $gops coding operations, $greqs requests' encodes in the group commit"
  [ "$gops" -gt 0 ] && [ "$greqs" -gt 0 ] ||
    { echo "$0: FAIL: the stand-in GPU's paths were not used"; exit 1; }
fi
# What the restarts found (the log holds every server's lines).
resyncs=$(grep -c 'resync done:' "$nbdkit_log")
regions=$(sed -n 's/.*resync done: .*(\([0-9]*\) of [0-9]* regions.*/\1/p' "$nbdkit_log" |
          awk '{ s += $1 } END { print s + 0 }')
clean=$(grep -c 'nothing to resync' "$nbdkit_log")
journal=$(grep -c 'repaired from the journal; it is consistent' "$nbdkit_log")
echo "$0: restarts after a crash: $resyncs resynced $regions bitmap regions in all, $clean found nothing to resync (bitmap clear), $journal repaired from the journal"
echo "$0: PASS: $total crashes, $restarts restarts accepted, 0 durable writes lost, 0 corrupt blocks, parity consistent after each"
