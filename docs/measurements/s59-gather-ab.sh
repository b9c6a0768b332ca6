#!/bin/bash
# Session 59: a write batch coded where its blocks are (gpu/engine.cu
# run_gathered: the generic kernel reads the request buffers and writes
# the parity through the device's mapping of page-locked memory, nothing
# copied) against the tree before (0a1823d, its chunks copied up and
# down); 10+4 on tmpfs, 1 MiB sequential writes (nbdbench, 16 in flight
# per connection) at 8 and 16 connections, alternated ROUNDS times.
out=${OUT:-/tmp}
base=${BASE:-.device/exp/plugins/s59-base.so}
for round in $(seq 1 ${ROUNDS:-1}); do
  for which in new base; do
    echo "=== round $round: $which"
    d=$out/logs-r$round-$which
    plugin=$PWD/nbdkit-plugin/nbdkit-gpuraid-plugin.so
    [ $which = base ] && plugin=$PWD/$base
    env GPURAID_PLUGIN=$plugin STATS=1 LOGS=$d SERVERS="${SERVERS:-10:4:cpu 10:4:gpu}" \
      CONNS="8 16" SEQ=8G REPEAT=2 scripts/bench-connections 2>&1 |
      grep -E "^row|x the MB/s|group commit|GPU engine"
  done
done
