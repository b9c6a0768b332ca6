#!/bin/bash
# Session 60: write batches of 8+8 and 16+16 coded where their blocks are
# (8 output rows a pass; 16+16's second pass reads the inputs the first
# kept in device memory) against the tree before (ca53696: copied up and
# down); tmpfs, 1 MiB sequential writes (nbdbench, 16 in flight per
# connection) at 8 and 16 connections, then reads with the first LOST
# members gone; ORDER says which tree runs first.
out=${OUT:-/tmp}
base=${BASE:-.device/exp/plugins/s60-base.so}
for which in ${ORDER:-new base}; do
  echo "=== $which"
  plugin=$PWD/nbdkit-plugin/nbdkit-gpuraid-plugin.so
  [ $which = base ] && plugin=$PWD/$base
  env GPURAID_PLUGIN=$plugin STATS=1 LOGS=$out/logs-$which \
    SERVERS="${SERVERS:-8:8:cpu 8:8:gpu 16:16:cpu 16:16:gpu}" \
    CONNS="8 16" SEQ=${SEQ:-8G} REPEAT=${REPEAT:-2} LOST=${LOST:-8} \
    scripts/bench-connections 2>&1 |
    grep -E "^row|x the MB/s|group commit|GPU engine|gathered|degraded"
done
