#!/bin/bash
# Session 54: small writes under accel=gpu, their reconstruct-writes'
# encodes of part of a chunk's height gathered across requests ("this
# plugin") or each its own GPU submission (session 53's, built from
# e93123b into .device/exp/plugins/s53.so).  PART=tests: the GPU array
# tests.  PART=rand: 10+4 on direct loop members, random requests of
# BSS [4K 16K] for 5 s a run.  Logs: h100-small-writes-*-s54.log or
# h200-...
cd "$(dirname "$0")/../.."
source .device/unpack.sh >/dev/null
nvidia-smi --query-gpu=name --format=csv,noheader; nproc
old=$PWD/.device/exp/plugins/s53.so
bd () { scripts/bench-direct 2>&1 | grep -v "^==>"; }
for part in ${PART:-tests rand}; do
  case $part in
    tests)
      tests/run-tests.sh tests/test-gpu-array.sh tests/test-gpu-request-pin.sh 2>&1 | tail -3
      grep -E "small encodes gathered" tests/logs/tests_test-gpu-array.sh.log
      [ -n "${OUT:-}" ] && cp tests/logs/*.log "$OUT/" 2>/dev/null ;;
    rand)
      export STORAGES=${STORAGES:-loop} GEOM=10:4 DIRECTS=${DIRECTS:-on} CONNS=8 REPEAT=3 SEQ=4G REBUILD=0 PATTERN=rand SECS=5
      for bs in ${BSS:-4K 16K}; do
        echo "##### BS=$bs this plugin"; BS=$bs ACCELS="${ACCELS:-cpu;gpu}" bd
        echo "##### BS=$bs session 53's plugin"; BS=$bs GPURAID_PLUGIN=$old ACCELS="gpu" bd
      done ;;
  esac
done
