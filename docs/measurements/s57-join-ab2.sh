#!/bin/bash
# Session 57: joined writes (join.h), whole stripes first and the parts
# of stripes last, on and off (-D gpuraid.join=0) in one call, alternated
# twice; 10+4 on tmpfs, 1 MiB sequential writes (nbdbench, 16 in flight
# per connection) at 8 and 16 connections.  STATS=1: the plan account
# (write-joined plans); LOGS: the servers' logs, whose exit line counts
# the parts joined.
out=${OUT:-/tmp}
for round in 1 2; do
  for flags in "" "-D gpuraid.join=0"; do
    echo "=== round $round, flags: ${flags:-none}"
    d=$out/logs-r$round${flags:+-off}
    FLAGS="$flags" STATS=1 LOGS=$d SERVERS="10:4:cpu 10:4:gpu" CONNS="8 16" SEQ=8G REPEAT=2 \
      scripts/bench-connections 2>&1 | grep -E "^row|plans run|x the MB/s"
    grep -h "joined writes" $d/*.log | sed 's/.*gpuraid: /  /'
  done
done
