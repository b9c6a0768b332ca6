#!/bin/bash
# Session 62: an ended thread's page-locked range kept for a later
# thread's buffer at the same pages (page frames compared through
# /proc/self/pagemap; glibc told to keep freed memory: mallopt), against
# unregistering it when its thread ends (GPURAID_REQPIN_NOKEEP=1, as
# 790c53d), one build, in turn: tmpfs, 1 MiB sequential writes then reads
# (nbdbench, 16 in flight per connection) of 4 GiB at 8 and 16
# connections, 10+4 in ROUNDS rounds, then 16+16 with the first 8
# members lost once each.
plugin=$PWD/${PLUGIN:-.device/exp/plugins/s62-keep.so}
logs=/tmp/s62-keep-logs
uptime
one () {   # SIDE SERVERS LOST ROUND
  echo "=== $1 ${2} lost $3 round $4"
  env -u ROUNDS $([ $1 = nokeep ] && echo GPURAID_REQPIN_NOKEEP=1) \
    GPURAID_PLUGIN=$plugin STATS=1 \
    LOGS=$logs/$1-$4 SERVERS="$2" CONNS="8 16" SEQ=${SEQ:-4G} \
    REPEAT=${REPEAT:-2} LOST=$3 scripts/bench-connections 2>&1 |
    grep -E "^row|x the MB/s|^stats.*(GPU engine|read,|write,)"
}
for round in $(seq ${ROUNDS:-2}); do
  for side in keep nokeep; do one $side "10:4:cpu 10:4:gpu" 0 $round; done
done
for side in keep nokeep; do one $side "16:16:cpu 16:16:gpu" 8 1; done
uptime
for f in $logs/*/*gpu*.log; do
  echo "--- $f"
  grep -o "request buffers page-locked: [0-9].*" "$f" | cut -c1-420
done
