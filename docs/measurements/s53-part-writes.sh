#!/bin/bash
# Session 53: writes of parts of stripes to direct loop members, their
# covered chunks' data copied into scratch by the GPU ("this plugin": the
# experiment's tree, a GPU copy step per plan for pieces of whole chunks;
# measured slower and removed since) or not (session 52's, built from
# 77f3525 into .device/exp/plugins/s52.so), or copied for any covered range
# (anysize.so, the experiment's rule without its whole-chunk condition).
# PART=tests: the GPU array tests.  PART=seq: 10+4, 1 MiB requests in
# order (half the data in parts of stripes).  PART=rand: 10+4, random
# requests of 4K and 64K.  Logs: h100-part-writes-*-s53.log or h200-...
cd "$(dirname "$0")/../.."
source .device/unpack.sh >/dev/null
nvidia-smi --query-gpu=name --format=csv,noheader; nproc
old=$PWD/.device/exp/plugins/s52.so any=$PWD/.device/exp/plugins/anysize.so
bd () { scripts/bench-direct 2>&1 | grep -v "^==>"; }
for part in ${PART:-tests seq rand}; do
  case $part in
    tests)
      tests/run-tests.sh tests/test-gpu-array.sh tests/test-gpu-request-pin.sh 2>&1 | tail -3
      grep -E "=== loop|copies|alignment|bounced" tests/logs/tests_test-gpu-array.sh.log | tail -8
      [ -n "${OUT:-}" ] && cp tests/logs/*.log "$OUT/" 2>/dev/null ;;
    seq)
      export STORAGES=loop GEOM=10:4 DIRECTS=on CONNS="8 16" REPEAT=3 SEQ=4G REBUILD=0
      echo "##### this plugin"; ACCELS="cpu;gpu" bd
      echo "##### session 52's plugin"; GPURAID_PLUGIN=$old ACCELS="gpu" bd ;;
    rand)
      export STORAGES=loop GEOM=10:4 DIRECTS=on CONNS=8 REPEAT=3 SEQ=4G REBUILD=0 PATTERN=rand SECS=5
      for bs in 4K 64K; do
        echo "##### BS=$bs this plugin"; BS=$bs ACCELS="cpu;gpu" bd
        echo "##### BS=$bs session 52's plugin"; BS=$bs GPURAID_PLUGIN=$old ACCELS="gpu" bd
        echo "##### BS=$bs any covered range copied"; BS=$bs GPURAID_PLUGIN=$any ACCELS="gpu" bd
      done ;;
  esac
done
