#!/bin/bash
# Session 64: degraded reads (LOST members of each array lost) with the
# gathered GPU path's wait asleep (s64-gather-sleep.patch, the plugin in
# GPURAID_PLUGIN: -D gpuraid.gather_sleep=1) or spinning (0), beside
# accel=cpu in the same bench-connections run, ROUNDS rounds of V in
# VALUES; bench-connections' rows and ratios.
: "${GPURAID_PLUGIN:?the plugin built with s64-gather-sleep.patch}"
for round in $(seq ${ROUNDS:-2}); do
  for v in ${VALUES:-0 1}; do
    echo "=== round $round, gather_sleep=$v"
    env -u ROUNDS SERVERS="${SERVERS:-8:8:cpu 8:8:gpu}" \
      FLAGS="-D gpuraid.gather_sleep=$v" CONNS="${CONNS:-8 16}" \
      SEQ=${SEQ:-4G} REPEAT=${REPEAT:-3} LOST=${LOST:-8} ROUNDS=1 \
      WARM=${WARMTMP:-1} scripts/bench-connections 2>&1 |
      grep -E "^row|x the "
  done
done
