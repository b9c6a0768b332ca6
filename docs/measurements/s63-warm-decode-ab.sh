#!/bin/bash
# Session 63: a degraded GPU server's first read run, with its decode
# plans (one per rotation of the lost members' code indices) made before
# serving or on first use.  The plugin of s63-warm-decode.patch
# (GPURAID_PLUGIN), 8+8 with its first 8 members lost, -D
# gpuraid.warm_decode=0 and 1 in turn, ROUNDS rounds; each run's MB/s in
# order (STATS=1).
for round in $(seq ${ROUNDS:-2}); do
  for w in 0 1; do
    echo "=== round $round, warm_decode=$w"
    env -u ROUNDS SERVERS="8:8:gpu" FLAGS="-D gpuraid.warm_decode=$w" \
      CONNS="8 16" SEQ=4G REPEAT=3 LOST=8 STATS=1 LOGS=/tmp/wdlogs \
      WARM=${WARMTMP:-1} scripts/bench-connections 2>&1 |
      grep -E "^row|lost: read at"
    grep -ho "EXPERIMENT: .*" /tmp/wdlogs/8x8-gpu-lost.log
  done
done
