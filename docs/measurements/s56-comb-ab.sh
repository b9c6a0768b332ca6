#!/bin/bash
# Session 56: the group commit with at most two batches on the GPU
# (a leader whose window ended waits for one to end, its batch growing
# meanwhile) against the plugin before it (4f339da,
# .device/exp/plugins/s56-base.so: a batch cut at its window's end,
# then waiting for an engine slot).  ROUNDS [3] alternations of
# SERVERS_NEW [10:4:cpu 10:4:gpu 8:8:gpu 16:16:gpu] with this tree's
# plugin and SERVERS_BASE [10:4:gpu 8:8:gpu 16:16:gpu] with the base,
# tmpfs members, nbdbench, 1 MiB requests, SEQ [8G], CONNS ["8 16"],
# STATS=1 (the group commit's and the engine's accounts).
cd "$(dirname "$0")/../.."
source .device/unpack.sh >/dev/null
nvidia-smi --query-gpu=name --format=csv,noheader; nproc
export SEQ=${SEQ:-8G} CONNS=${CONNS:-8 16} REPEAT=${REPEAT:-1} STATS=1
for r in $(seq 1 "${ROUNDS:-3}"); do
  echo "##### round $r: this tree"
  SERVERS="${SERVERS_NEW:-10:4:cpu 10:4:gpu 8:8:gpu 16:16:gpu}" scripts/bench-connections 2>&1 | grep -E "^(row|stats):"
  echo "##### round $r: base (4f339da)"
  GPURAID_PLUGIN=$PWD/.device/exp/plugins/s56-base.so SERVERS="${SERVERS_BASE:-10:4:gpu 8:8:gpu 16:16:gpu}" scripts/bench-connections 2>&1 | grep -E "^(row|stats):"
done
