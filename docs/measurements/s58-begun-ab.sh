#!/bin/bash
# Session 58: a request's plans that read nothing (its whole stripes, the
# stripes it joins) begun together, their encodes queued at once, and a
# part of a stripe taken by whichever neighbour reaches it first, against
# the tree before (d22e512, given parts, plans run one after another);
# alternated twice in one call; 10+4 on tmpfs, 1 MiB sequential writes
# (nbdbench, 16 in flight per connection) at 8 and 16 connections.
# STATS=1: the plan account; LOGS: the servers' logs (joins, group
# commit, plans begun).
out=${OUT:-/tmp}
base=${BASE:-.device/exp/plugins/s58-base.so}
for round in 1 2; do
  for which in new base; do
    echo "=== round $round: $which"
    d=$out/logs-r$round-$which
    plugin=$PWD/nbdkit-plugin/nbdkit-gpuraid-plugin.so
    [ $which = base ] && plugin=$PWD/$base
    env GPURAID_PLUGIN=$plugin STATS=1 LOGS=$d SERVERS="10:4:cpu 10:4:gpu" \
      CONNS="8 16" SEQ=8G REPEAT=2 scripts/bench-connections 2>&1 |
      grep -E "^row|plans run|x the MB/s|group commit"
    grep -h "joined writes\|begun with\|encodes in the group" $d/*.log |
      sed 's/.*gpuraid: /  /'
  done
done
