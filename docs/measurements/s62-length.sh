#!/bin/bash
# Session 62: 10+4 writes at 8 connections, accel=cpu against gpu, in
# runs of 4 GiB and of 16 GiB in turn (ROUNDS): is accel=gpu's shortfall
# in 4 GiB runs a cost of each run's start (new connections, threads,
# buffers) or of its whole length?
for round in $(seq ${ROUNDS:-2}); do
  for seq in 4G 16G; do
    echo "=== round $round, $seq"
    env SERVERS="10:4:cpu 10:4:gpu" CONNS=8 SEQ=$seq REPEAT=${REPEAT:-2} \
      STATS=1 scripts/bench-connections 2>&1 | grep -E "^row|x the |^stats"
  done
done
