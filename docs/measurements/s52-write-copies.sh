#!/bin/bash
# Session 52: the GPU array tests, then full-stripe writes to direct loop members,
# accel=cpu against accel=gpu with and without the GPU's copies of the data into
# scratch (h100-write-copies-loop-s52.log or h200-...).
cd "$(dirname "$0")/../.."
source .device/unpack.sh >/dev/null
nvidia-smi --query-gpu=name --format=csv,noheader; nproc
tests/run-tests.sh tests/test-gpu-array.sh tests/test-gpu-request-pin.sh 2>&1 | tail -3
grep -E "=== loop|copies|alignment" tests/logs/tests_test-gpu-array.sh.log | tail -8
[ -n "${OUT:-}" ] && cp tests/logs/*.log "$OUT/" 2>/dev/null
for g in 8:8 16:16; do
  echo "##### GEOM=$g STORAGES=loop DIRECTS=on"
  STORAGES=loop GEOM=$g DIRECTS=on CONNS="8 16" REPEAT=3 SEQ=${SEQ:-4G} REBUILD=0 \
    ACCELS="cpu;gpu;gpu -D gpuraid.gpu_copies=0" scripts/bench-direct 2>&1 | grep -v "^==>"
done
