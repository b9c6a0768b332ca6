#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# accel=auto's routing between GPU and CPU, tested without a GPU through
# the stand-in GPU coders (-D gpuraid.fake_gpu=N -D gpuraid.fake_auto=M):
#  1. fake_auto=1: the start-up measurement runs and logs, for encode,
#     reconstruct (1 and m lost) and parity update, the time per call on
#     each side and the size from which the GPU is used, then a summary;
#     random I/O (partial, whole-stripe, degraded) reads back right.
#     1b. With m = 4 the reconstructs are measured with 1, 2 and 4 lost.
#  2. fake_auto=2: every operation on the stand-in GPU through the same
#     paths (degraded reads rebuilt in scratch from the page-locked pool
#     and copied out, updates through pdelta); data and parity checked,
#     healthy and with two members gone; the operation counts are logged.
#  3. fake_gpu=3 (a GPU that rebuilds wrong bytes): the start-up check
#     catches it, says so once, and everything runs on the CPU, correctly.
#  4. fake_gpu=1 (a GPU whose every call fails): the measurement stops
#     with one logged failure, the server starts and serves from the CPU.
#  5. The router tries both sides while degraded reads run and keeps the
#     better (router.h): with a stand-in 5 ms slower a submission it
#     decides for the CPU, with the CPU coder 5 ms slower an operation
#     for the stand-in, logging each side's figures; every read right;
#     gpuraidctl status (text and JSON) shows the kind's route.
#  6. Whole-stripe writes on 4 connections with the CPU coder slower: the
#     router puts the encodes on the stand-in and none is sent to the CPU
#     for want of room on the GPU; parity right.

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_py
requires_ctl
NBDBENCH=$top/scripts/nbdbench
[ -x "$NBDBENCH" ] || { echo "$0: SKIP: $NBDBENCH not built (make)"; exit 77; }

k=4 m=2 chunk=65536 n=6
ref=$tmpdir/ref
seed=${TEST_SEED:-$(( (RANDOM << 15) | RANDOM ))}
echo "$0: TEST_SEED=$seed"

fail () { echo "$0: FAIL: $*"; tail -15 "$nbdkit_log"; exit 1; }

make_members $n 8M
set_args

# serve [NBDKIT-OPTION...] [-- PLUGIN-PARAM...]: serve the array.
serve () {
  local opts=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  : >"$nbdkit_log"
  start_nbdkit -P "$pid" -U "$sock" -v "${opts[@]}" "$PLUGIN" "${args[@]}" \
    "$@" || fail "server did not start (${opts[*]} $*)"
  # nbdkit writes its pid file before after_fork, where the measurement
  # runs: wait for its outcome (slow under sanitizers).
  if [[ " ${opts[*]} " == *fake_auto* ]]; then
    for (( t = 0; t < 600; t++ )); do
      grep -Eq 'accel=auto: (on the GPU from|measurement not completed)' \
        "$nbdkit_log" && break
      sleep 0.1
    done
  fi
}

# measured WHAT: the start-up measurement's line for WHAT, well formed
# (sizes, each with a CPU and a GPU time, and a decision); printed.
measured () {
  local line
  line=$(grep "accel=auto: $1, us per call CPU/GPU:" "$nbdkit_log") ||
    fail "no measurement logged for: $1"
  grep -Eq '( [0-9.]+[KM] [0-9]+/[0-9]+){3,}; GPU from ([0-9.]+[KM]|never)$' \
    <<<"$line" || fail "measurement line malformed: $line"
  echo "${line#*debug: }"
}

# --- 1. measured routing -------------------------------------------------
serve -D gpuraid.fake_gpu=2 -D gpuraid.fake_auto=1 -- m=$m chunk=$chunk \
  create=true
grep -q 'fake working GPU coder .* routed as accel=auto' "$nbdkit_log" ||
  fail "the stand-in GPU was not routed as accel=auto"
for what in "encode" "reconstruct with 1 of $k+$m lost" \
            "reconstruct with $m of $k+$m lost" \
            "parity update from one data delta"; do
  measured "$what"
done
grep -Eq 'accel=auto: on the GPU from \(data bytes per operation\): encode ([0-9.]+[KM]|never), reconstruct' \
  "$nbdkit_log" || fail "no summary of the routing decision"
randio zeroref "$uri" "$ref" || fail "zeroref"
randio write "$uri" "$ref" --seed "$seed" --ops 150 --chunk $chunk --k $k ||
  fail "random I/O with measured routing"
stop_nbdkit "$pid"
check_parity $k $m $chunk rs "${members[@]}"

# --- 1b. m = 4: reconstructs also measured with (m + 1) / 2 = 2 lost -------
saved=("${members[@]}")
make_members 8 8M half
set_args
serve -D gpuraid.fake_gpu=2 -D gpuraid.fake_auto=1 -- m=4 chunk=$chunk \
  create=true
for e in 1 2 4; do
  measured "reconstruct with $e of 4+4 lost"
done
grep -Eq 'reconstruct ([0-9.]+[KM]|never) \(1 lost\) / ([0-9.]+[KM]|never) \(2 lost\) / ([0-9.]+[KM]|never) \(4 lost\)' \
  "$nbdkit_log" || fail "4+4: the summary does not name the three reconstructs"
stop_nbdkit "$pid"
rm -f "${members[@]}"
members=("${saved[@]}")
set_args

# --- 2. every operation on the stand-in GPU, pool-backed scratch ----------
serve -D gpuraid.fake_gpu=2 -D gpuraid.fake_auto=2
grep -q 'every operation to the fake GPU' "$nbdkit_log" ||
  fail "fake_auto=2 not in effect"
randio write "$uri" "$ref" --seed $(( seed + 1 )) --ops 150 --chunk $chunk \
  --k $k || fail "random I/O, all on the stand-in GPU"
stop_nbdkit "$pid"
# The counts logged at exit: operations went to the (stand-in) GPU.
line=$(grep 'coding operations on the GPU: ' "$nbdkit_log") ||
  fail "no GPU operation counts logged at exit"
echo "${line#*debug: }"
[[ $line =~ GPU:\ ([0-9]+)\; ]] && [ "${BASH_REMATCH[1]}" -gt 0 ] ||
  fail "no operation ran on the stand-in GPU"
check_parity $k $m $chunk rs "${members[@]}"
mv "${members[1]}" "$tmpdir/gone1"; mv "${members[4]}" "$tmpdir/gone4"
serve -D gpuraid.fake_gpu=2 -D gpuraid.fake_auto=2
expect_verify "$uri" "$ref" "degraded read rebuilt on the stand-in GPU"
randio write "$uri" "$ref" --seed $(( seed + 2 )) --ops 80 --chunk $chunk \
  --k $k || fail "degraded random I/O on the stand-in GPU"
stop_nbdkit "$pid"
# Written degraded: read back on the plain CPU path with the same two
# members still gone.
serve
expect_verify "$uri" "$ref" "degraded array read on the CPU"
stop_nbdkit "$pid"

# expect_gpu_dropped FAKE WHAT MESSAGE: with -D gpuraid.fake_gpu=FAKE the
# start-up step must log MESSAGE exactly once, give up the measurement
# (all coding on the CPU) and still serve the right data.
expect_gpu_dropped () {
  local c
  serve -D gpuraid.fake_gpu="$1" -D gpuraid.fake_auto=1
  c=$(grep -c "$3" "$nbdkit_log")
  [ "$c" = 1 ] || fail "$2: expected one message '$3', got $c"
  grep -q 'measurement not completed; all coding on the CPU' "$nbdkit_log" ||
    fail "$2: GPU not taken out of use"
  expect_verify "$uri" "$ref" "degraded read after: $2"
  stop_nbdkit "$pid"
}

# --- 3. a GPU that rebuilds wrong bytes is caught at start-up -------------
expect_gpu_dropped 3 "wrong GPU" 'GPU check: the GPU rebuilt different bytes'
# --- 4. a GPU whose calls fail during the measurement ---------------------
expect_gpu_dropped 1 "failing GPU" 'error: GPU .* failed'

# --- 5. the router's trials, degraded reads (members 1 and 4 gone) --------
# expect_route SLOWER SIDE: serve with SLOWER (the stand-in's or the CPU
# coder's delay) and degraded reads without a pause (a pause abandons a
# trial): random 1 MiB reads, one connection, two in flight (the delay
# weighs on each read), until the reconstructs with 2 of 2 lost have a
# decision, which must be SIDE; then the array read back right.
expect_route () {
  local what="reconstruct with 2 of $m lost, 64K to 1M" line t
  serve -D gpuraid.fake_gpu=2 -D gpuraid.fake_auto=1 -D "$1" -- \
    control="$ctl"
  grep -q 'accel=auto: each kind of operation tried on both sides' \
    "$nbdkit_log" || fail "$1: the router is not adaptive"
  # (Runs of 4 s that end by themselves: nbdkit 1.32 can abort when a
  # client is killed with requests in flight.)
  for (( t = 4; t <= 40; t += 4 )); do
    "$NBDBENCH" -m randread -b 1M -q 2 -c 1 -t 4 "$uri" >"$tmpdir/bench" ||
      fail "$1: reads failed: $(cat "$tmpdir/bench")"
    line=$(grep "accel=auto: $what: CPU .* for [0-9]* s" "$nbdkit_log" | head -1)
    [ -n "$line" ] && break
  done
  rm -f "$tmpdir/out"
  nbdcopy "$uri" "$tmpdir/out" && cmp -s "$tmpdir/out" "$ref" ||
    fail "$1: degraded read differs"
  "$CTL" -c "$ctl" status >"$tmpdir/status"
  [ "$(ctl_json "[r['side'] for r in s['coder']['routes']
                  if r['kind'] == '$what'][0]")" = "${2,,}" ] ||
    fail "$1: status --json: no route to the $2 for $what"
  stop_nbdkit "$pid"
  grep -q "^route      $what: $2 ([0-9]* trials" "$tmpdir/status" ||
    fail "$1: status: no route to the $2 for $what: $(cat "$tmpdir/status")"
  grep 'accel=auto: .*\(for [0-9]* s\|trials,\|no trial\)' "$nbdkit_log" |
    sed 's/.*debug: /  /'
  [ -n "$line" ] || fail "$1: no decision for $what after $t s of reads"
  # Every reconstruct is of that kind, whatever part of its stripe's
  # lost chunks a read wants: the kinds follow the members lost.
  ! grep -q "accel=auto: reconstruct with [^2] of $m lost" "$nbdkit_log" ||
    fail "$1: degraded reads with 2 members lost routed as another kind: $(grep -m1 -o "reconstruct with [^2] of $m lost[^:]*" "$nbdkit_log")"
  [[ $line == *"on the $2 for 4 s ("* ]] ||
    fail "$1: expected the $2: ${line#*debug: }"
  grep '^coder\|^route' "$tmpdir/status"
  echo "$1: $2 (within $t s of reads)"
}
expect_route gpuraid.fake_gpu_us=5000 CPU
expect_route gpuraid.fake_cpu_us=5000 GPU

# --- 6. a kind the router puts on the GPU goes there whole ----------------
# Whole-stripe writes, 4 connections with 8 in flight each, the CPU coder
# 20 ms slower: the router puts the encodes on the stand-in, and none is
# sent to the CPU for want of room on the GPU (the cap of 2 that the
# routing by thresholds alone keeps would leave the group commit two
# writes to gather); parity right after.
make_members $n 16M w
set_args
serve -D gpuraid.fake_gpu=2 -D gpuraid.fake_auto=1 \
  -D gpuraid.fake_cpu_us=20000 -- m=$m chunk=$chunk create=true
what="encode, 64K to 1M"
for (( t = 4; t <= 40; t += 4 )); do
  "$NBDBENCH" -m randwrite -b $(( k * chunk )) -q 8 -c 4 -t 4 "$uri" \
    >"$tmpdir/bench" || fail "writes failed: $(cat "$tmpdir/bench")"
  line=$(grep "accel=auto: $what: CPU .* for [0-9]* s" "$nbdkit_log" |
         head -1)
  [ -n "$line" ] && break
done
stop_nbdkit "$pid"
[ -n "$line" ] || fail "no decision for $what after $t s of writes"
[[ $line == *"on the GPU for 4 s ("* ]] ||
  fail "writes: expected the GPU: ${line#*debug: }"
ops=$(grep -o 'coding operations on the GPU: [0-9]*; sent to the CPU because 2 were already on the GPU: [0-9]*' "$nbdkit_log") ||
  fail "no operation counts at exit"
echo "writes: ${line#*debug: }; $ops"
[[ $ops =~ GPU:\ ([0-9]+)\;.*GPU:\ ([0-9]+)$ ]] &&
  [ "${BASH_REMATCH[1]}" -gt 0 ] && [ "${BASH_REMATCH[2]}" = 0 ] ||
  fail "writes routed to the GPU were sent to the CPU: $ops"
check_parity $k $m $chunk rs "${members[@]}"
echo "$0: PASS"
