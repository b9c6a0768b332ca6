#!/bin/bash
# Session 63: a degraded GPU server's first read run.  8+8 with its first
# 8 members lost: each stripe's lost code indices depend on the stripe's
# rotation, so its reads use up to 16 decode tables, each of whose
# kernels the engine compiles (in a child forked from the busy server)
# when a large batch first uses it.  The plugin of s63-jit.patch
# (GPURAID_PLUGIN) with -D gpuraid.jit_min_mib=N: default (JIT as
# today) against 1048576 (nothing compiled while serving; the encode
# kernel still compiled before serving), ROUNDS rounds; each run's MB/s
# in order (STATS=1) and the count of kernels compiled.
for round in $(seq ${ROUNDS:-2}); do
  for j in -1 1048576; do
    echo "=== round $round, jit_min_mib=$j"
    env -u ROUNDS SERVERS="8:8:gpu" FLAGS="-D gpuraid.jit_min_mib=$j" \
      CONNS="8 16" SEQ=4G REPEAT=3 LOST=8 STATS=1 LOGS=/tmp/jitlogs \
      WARM=${WARMTMP:-1} scripts/bench-connections 2>&1 |
      grep -E "^row|lost: read at"
    grep -ho "EXPERIMENT: .*" /tmp/jitlogs/8x8-gpu-lost.log
  done
done
