#!/bin/bash
# Session 57: joined writes (join.h), a request's parts planned in
# ascending order (the first version, not kept), on and off (-D gpuraid.join=0) in one
# call, alternated twice; 10+4 on tmpfs, 1 MiB sequential writes
# (nbdbench, 16 in flight per connection) at 8 and 16 connections; then
# once with nbdcopy.  STATS=1: the plan account (write-joined plans) and
# the group commit's.
for round in 1 2; do
  for flags in "" "-D gpuraid.join=0"; do
    echo "=== round $round, flags: ${flags:-none}"
    FLAGS="$flags" STATS=1 SERVERS="10:4:cpu 10:4:gpu" CONNS="8 16" SEQ=8G REPEAT=2 \
      scripts/bench-connections 2>&1 | grep -E "^row|plans run|encodes in|ratios|x the MB/s"
  done
done
for flags in "" "-D gpuraid.join=0"; do
  echo "=== nbdcopy, flags: ${flags:-none}"
  FLAGS="$flags" CLIENT=nbdcopy SERVERS="10:4:cpu 10:4:gpu" CONNS="8 16" SEQ=8G REPEAT=2 \
    scripts/bench-connections 2>&1 | grep -E "^row|x the MB/s"
done
