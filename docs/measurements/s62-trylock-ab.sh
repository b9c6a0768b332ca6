#!/bin/bash
# Session 62: a request finding another thread page-locking (or letting
# go) stages its data and tries again at its next request (trylock),
# against requests waiting in line for the registry (head, 790c53d) and
# against 407f09a (base: before whole-array reads stopped page-locking):
# tmpfs, 1 MiB sequential writes then reads (nbdbench, 16 in flight per
# connection) of SEQ (4G: the runs where the connections' new threads
# weigh most) at 8 and 16 connections, 10+4, and 16+16 with reads of the
# first 8 members lost.  The sides take turns within each array.
out=${OUT:-/tmp}
p=.device/exp/plugins
for set in "10:4:cpu 10:4:gpu|0" "16:16:cpu 16:16:gpu|8"; do
  for side in ${SIDES:-trylock:$p/s62-trylock.so head:$p/s62-head.so base:$p/s61-base.so}; do
    which=${side%%:*}
    echo "=== $which ${set%|*} lost ${set#*|}"
    env GPURAID_PLUGIN=$PWD/${side#*:} STATS=1 LOGS=$out/logs-$which \
      SERVERS="${set%|*}" CONNS="8 16" SEQ=${SEQ:-4G} REPEAT=${REPEAT:-2} \
      LOST=${set#*|} scripts/bench-connections 2>&1 |
      grep -E "^row|x the MB/s|^stats"
  done
done
for f in $out/logs-*/*.log; do
  echo "--- $f"
  grep -o "request buffers page-locked: [0-9].*" "$f" | cut -c1-400
done
