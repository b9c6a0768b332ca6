#!/bin/bash
# Session 55: a plugin against the plugin before the session's changes
# (4b77030, built as .device/exp/plugins/s55-base.so), alternated ROUNDS
# times in one call (PLUGS ["base new"]; "new" is the tree's plugin):
# bench-connections on tmpfs members, 1 MiB writes in order, CLIENT
# [nbdbench], 8 and 16 connections, SERVERS ["10:4:cpu 10:4:gpu 16:16:cpu
# 16:16:gpu"], one round each time, so that each gpu row has its own cpu
# row.  Used for the direct submissions' wait asleep (the tree with
# s55-slot-wait.patch applied, not kept: h200-slot-wait-ab-s55.log) and
# for one parity update per read-modify-write (h200-rmw-one-update-ab*-s55.log).
cd "$(dirname "$0")/../.."
source .device/unpack.sh >/dev/null
nvidia-smi --query-gpu=name --format=csv,noheader; nproc
declare -A so=([base]=$PWD/.device/exp/plugins/s55-base.so [new]=$PWD/nbdkit-plugin/nbdkit-gpuraid-plugin.so)
for r in $(seq 1 "${ROUNDS:-2}"); do
  for p in ${PLUGS:-base new}; do
    echo "##### round $r plugin $p"
    GPURAID_PLUGIN=${so[$p]} ROUNDS=1 REPEAT=1 SEQ=${SEQ:-16G} CONNS="8 16" \
      CLIENT=${CLIENT:-nbdbench} SERVERS="${SERVERS:-10:4:cpu 10:4:gpu 16:16:cpu 16:16:gpu}" \
      scripts/bench-connections 2>&1 | grep -v "^==>" | sed -n '/^write MB\/s/,$p'
  done
done
