#!/bin/bash
# Session 61: host memory page-locked in a CUDA context of the engine's
# own (new) against the primary context (base, 407f09a), where a
# registration holds the driver's lock that launches and copies take:
# tmpfs, 1 MiB sequential writes (nbdbench, 16 in flight per connection)
# of SEQ (4G: the runs where the connections' starts weigh most) at 8
# and 16 connections, 10+4, and 16+16 with reads of the first 8 members
# lost; ORDER says which tree runs first.
out=${OUT:-/tmp}
base=${BASE:-.device/exp/plugins/s61-base.so}
for which in ${ORDER:-new base}; do
  plugin=$PWD/nbdkit-plugin/nbdkit-gpuraid-plugin.so
  [ $which = base ] && plugin=$PWD/$base
  for set in "10:4:cpu 10:4:gpu|0" "16:16:cpu 16:16:gpu|8"; do
    echo "=== $which ${set%|*} lost ${set#*|}"
    env GPURAID_PLUGIN=$plugin STATS=1 LOGS=$out/logs-$which \
      SERVERS="${set%|*}" CONNS="8 16" SEQ=${SEQ:-4G} REPEAT=${REPEAT:-2} \
      LOST=${set#*|} scripts/bench-connections 2>&1 |
      grep -E "^row|x the MB/s|^stats"
  done
done
