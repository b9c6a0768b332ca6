#!/bin/bash
# Session 63: a degraded GPU server's first read run.  8+8 with its first
# 8 members lost, served by the plugin of one of the session's experiment
# patches (GPURAID_PLUGIN) with -D gpuraid.FLAG=V for each V in VALUES,
# ROUNDS rounds; each run's MB/s in order (STATS=1) and the experiment's
# exit or start line from the degraded server's log.
#   s63-jit.patch:          FLAG=jit_min_mib VALUES="-1 1048576" (the
#     engine's gr_gpu_jit_min in MiB: a huge one, nothing compiled while
#     serving; logs the count of kernels compiled)
#   s63-warm-decode.patch:  FLAG=warm_decode VALUES="0 1" (1: the decode
#     plans of whole-stripe reads, one per rotation, made before serving)
: "${FLAG:?FLAG=jit_min_mib or warm_decode}" "${VALUES:?}"
for round in $(seq ${ROUNDS:-2}); do
  for v in $VALUES; do
    echo "=== round $round, $FLAG=$v"
    env -u ROUNDS SERVERS="8:8:gpu" FLAGS="-D gpuraid.$FLAG=$v" \
      CONNS="8 16" SEQ=4G REPEAT=3 LOST=8 STATS=1 LOGS=/tmp/firstrun \
      WARM=${WARMTMP:-1} scripts/bench-connections 2>&1 |
      grep -E "^row|lost: read at"
    grep -ho "EXPERIMENT: .*" /tmp/firstrun/8x8-gpu-lost.log
  done
done
