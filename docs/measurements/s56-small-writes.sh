#!/bin/bash
# Session 56: small writes under accel=gpu.  "This plugin": the tree's
# (6a1c49d + 4f339da: a parity update's encode reads the deltas alone,
# one submission when not gathered); "s55base" (4b77030,
# .device/exp/plugins/s55-base.so): each update an encode of the whole
# stripe with zeros for the unchanged data.
# PART=tests: the GPU array tests.  PART=rand: 10+4 on direct loop
# members, random requests of BSS [4K 16K] for 5 s a run, against
# OTHERS [s55base].  PART=seq: 10+4 on tmpfs members, 1 MiB requests in
# order (bench-connections, nbdbench and nbdcopy), against OTHERS.
# Logs: h200-small-writes-*-s56.log.
cd "$(dirname "$0")/../.."
source .device/unpack.sh >/dev/null
nvidia-smi --query-gpu=name --format=csv,noheader; nproc
declare -A so=([s55base]=$PWD/.device/exp/plugins/s55-base.so)
bd () { scripts/bench-direct 2>&1 | grep -v "^==>"; }
bc () { scripts/bench-connections 2>&1 | grep -v "^==>" | sed -n '/^write MB\/s/,$p'; }
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
        for o in ${OTHERS:-s55base}; do
          echo "##### BS=$bs plugin $o"; BS=$bs GPURAID_PLUGIN=${so[$o]} ACCELS="gpu" bd
        done
      done ;;
    seq)
      for client in ${CLIENTS:-nbdbench nbdcopy}; do
        export ROUNDS=1 REPEAT=1 SEQ=16G CONNS="8 16" CLIENT=$client
        echo "##### $client this plugin"; SERVERS="10:4:cpu 10:4:gpu" bc
        for o in ${OTHERS:-s55base}; do
          echo "##### $client plugin $o"; GPURAID_PLUGIN=${so[$o]} SERVERS="10:4:gpu" bc
        done
      done ;;
  esac
done
