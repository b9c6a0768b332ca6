#!/bin/bash
# Session 54: small writes under accel=gpu.  "This plugin": the tree's;
# session 53's (e93123b, .device/exp/plugins/s53.so): each reconstruct-
# write's encode of part of a chunk's height its own GPU submission;
# "rcw" (c28d751, .device/exp/plugins/s54-rcw.so): those encodes
# gathered across requests, every write of part of a stripe under
# accel=gpu still a reconstruct-write.  The tree after it also lets
# accel=gpu make read-modify-writes, its parity updates gathered encodes.
# PART=tests: the GPU array tests.  PART=rand: 10+4 on direct loop
# members, random requests of BSS [4K 16K] for 5 s a run, against
# OTHERS [s53] of those plugins.  PART=seq: 10+4 on tmpfs members, 1 MiB
# requests in order (bench-connections, nbdbench and nbdcopy), against
# OTHERS.  Logs: h100-small-writes-*-s54.log or h200-...
cd "$(dirname "$0")/../.."
source .device/unpack.sh >/dev/null
nvidia-smi --query-gpu=name --format=csv,noheader; nproc
declare -A so=([s53]=$PWD/.device/exp/plugins/s53.so [rcw]=$PWD/.device/exp/plugins/s54-rcw.so)
# PLUGINS="name=path ...": more plugins for OTHERS (later sessions').
for np in ${PLUGINS:-}; do so[${np%%=*}]=$PWD/${np#*=}; done
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
        for o in ${OTHERS:-s53}; do
          echo "##### BS=$bs plugin $o"; BS=$bs GPURAID_PLUGIN=${so[$o]} ACCELS="gpu" bd
        done
      done ;;
    seq)
      for client in ${CLIENTS:-nbdbench nbdcopy}; do
        export ROUNDS=1 REPEAT=1 SEQ=16G CONNS="8 16" CLIENT=$client
        echo "##### $client this plugin"; SERVERS="10:4:cpu 10:4:gpu" bc
        for o in ${OTHERS:-s53}; do
          echo "##### $client plugin $o"; GPURAID_PLUGIN=${so[$o]} SERVERS="10:4:gpu" bc
        done
      done ;;
  esac
done
