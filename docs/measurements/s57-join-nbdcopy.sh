#!/bin/bash
# Session 57: joined writes on and off with nbdcopy (1 MiB requests, from
# a tmpfs file), 10+4 (requests end inside stripes) and 8+8 (they do not:
# a control), alternated once.
for flags in "" "-D gpuraid.join=0"; do
  echo "=== nbdcopy, flags: ${flags:-none}"
  FLAGS="$flags" CLIENT=nbdcopy SERVERS="10:4:cpu 10:4:gpu 8:8:gpu" CONNS="8 16" SEQ=8G REPEAT=2 \
    scripts/bench-connections 2>&1 | grep -E "^row|x the MB/s"
done
