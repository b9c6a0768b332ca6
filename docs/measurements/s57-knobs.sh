#!/bin/bash
# session 57: the group commit's window and batches on the GPU, 10+4 on the H200
cd "$(dirname "$0")/../.." 2>/dev/null || true
exp=.device/exp/plugins/s57-exp.so
run () { echo "=== $1"; shift; env "$@" STATS=1 SERVERS="10:4:gpu" CONNS="16" SEQ=8G REPEAT=2 scripts/bench-connections 2>&1 | grep -E "^row|^stats|encodes in"; }
STATS=1 SERVERS="10:4:cpu" CONNS=16 SEQ=8G REPEAT=2 scripts/bench-connections 2>&1 | grep -E "^row|^stats"
for round in 1 2; do
run "default" GPURAID_PLUGIN=$PWD/$exp
run "wait 50" GPURAID_PLUGIN=$PWD/$exp GPURAID_EXP_WAIT_US=50
run "inflight 4" GPURAID_PLUGIN=$PWD/$exp GPURAID_EXP_INFLIGHT=4
run "wait 50 inflight 4" GPURAID_PLUGIN=$PWD/$exp GPURAID_EXP_WAIT_US=50 GPURAID_EXP_INFLIGHT=4
done
