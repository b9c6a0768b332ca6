#!/bin/bash
# Session 58: three plugins alternated, three rounds, 10+4 cpu and gpu.
out=${OUT:-/tmp}
for round in 1 2 3; do
  for which in together apart base; do
    echo "=== round $round: $which"
    plugin=$PWD/nbdkit-plugin/nbdkit-gpuraid-plugin.so flags=""
    [ $which = base ] && plugin=$PWD/.device/exp/plugins/s58-base.so
    [ $which = apart ] && flags="-D gpuraid.exp_together=0"
    env GPURAID_PLUGIN=$plugin FLAGS="$flags" STATS=1 SERVERS="10:4:cpu 10:4:gpu" \
      CONNS="8 16" SEQ=8G REPEAT=2 scripts/bench-connections 2>&1 |
      grep -E "^row|x the MB/s|group commit"
  done
done
