#!/bin/bash
# Session 57: the group commit's followers woken by semaphores (s57-sem.so)
# against by conditions under the lock (s57-exp.so, the tree of 9c4c7bc with
# the commit's timing account), each with at most 2 and 4 batches on the
# GPU (GPURAID_EXP_INFLIGHT, a temporary knob of both builds), alternated
# twice; 10+4, 8+8 and 16+16 at 8 and 16 connections on tmpfs.
p=$PWD/.device/exp/plugins
one () { echo "=== $1 ${2:+inflight $2}"; env GPURAID_PLUGIN=$p/$1.so ${2:+GPURAID_EXP_INFLIGHT=$2} STATS=1 SERVERS="${3:-10:4:gpu 8:8:gpu 16:16:gpu}" CONNS="8 16" SEQ=8G REPEAT=2 scripts/bench-connections 2>&1 | grep -E "^row|encodes in|plans run|gathered" ; }
one s57-exp "" "10:4:cpu 8:8:cpu 16:16:cpu"
for round in 1 2; do
  one s57-exp
  one s57-sem
  one s57-sem 4
  one s57-exp 4
done
