#!/bin/bash
# Session 63: a fresh server's first run.  10+4 writes at 8 connections,
# REPEAT runs per server (each run's MB/s in order, STATS=1), accel=cpu
# once per round and accel=gpu with -D gpuraid.warm=W for each W in
# WARMS (the experiment's flag: 0 nothing before serving; 1 the engine's
# slots and the encode kernel set up before serving; 2 page-locked
# scratch spares allocated before serving; 3 both), ROUNDS rounds.
# The flag is s63-warm.patch's (an experiment, not in the tree).
for round in $(seq ${ROUNDS:-2}); do
  for w in cpu ${WARMS:-0 1 3}; do
    if [ "$w" = cpu ]; then s=10:4:cpu fl=""; else s=10:4:gpu fl="-D gpuraid.warm=$w"; fi
    echo "=== round $round, $s $fl"
    env -u ROUNDS SERVERS="$s" FLAGS="$fl" CONNS=8 SEQ=${SEQ:-4G} \
      REPEAT=${REPEAT:-3} STATS=1 WARM=${WARMTMP:-1} LOGS=/tmp/warmlogs \
      scripts/bench-connections 2>&1 | grep -E "^row|write at 8"
    grep -ho "GPU engine set up.*\|page-locked scratch: .*" \
      /tmp/warmlogs/10x4-gpu.log 2>/dev/null
  done
done
