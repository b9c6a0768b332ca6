#!/bin/bash
# Session 51: make check-gpu's array tests, then degraded reads of direct loop members,
# accel=cpu against accel=gpu with and without the GPU's copies (h100-gpu-copies-degraded-loop-s51.log).
cd "$(dirname "$0")/../.."
source .device/unpack.sh >/dev/null
tests/run-tests.sh tests/test-gpu-array.sh tests/test-gpu-request-pin.sh 2>&1 | tail -3
grep -E "=== loop|copies|ok: direct|healthy reads" tests/logs/tests_test-gpu-array.sh.log | tail -8
V="accel=cpu;accel=gpu;accel=gpu -D gpuraid.gpu_copies=0;accel=cpu;accel=gpu;accel=gpu -D gpuraid.gpu_copies=0"
for geo in "8 8 8" "16 16 8"; do
  set -- $geo
  echo "##### K=$1 M=$2 LOST=$3 STORAGE=loop"
  K=$1 M=$2 LOST=$3 STORAGE=loop VARIANTS="$V" CONNS="8 16" SECS=5 SIZE=4G scripts/bench-steady-reads 2>&1 | grep -v "^==>\|request buffers\|gathered rec"
done
