#!/bin/bash
# Session 62: a request whose thread's buffer is not page-locked yet,
# finding the registry busy (or its thread young), copies its data
# through a slot of a page-locked arena made at start (bounce) instead of
# waiting in line (head, 790c53d).  SIDES: name:plugin:policy:after
# (GPURAID_REQPIN_POLICY 1 = try the lock, bounce when busy;
# GPURAID_REQPIN_AFTER: register only once the thread's requests have
# moved that many bytes).  tmpfs, 1 MiB sequential writes then reads
# (nbdbench, 16 in flight per connection) of SEQ at 8 and 16
# connections: 10+4, and 16+16 and 8+8 with the first 8 members lost
# (SETS, comma-separated), ROUNDS times over (ROUNDS reaches
# bench-connections too: each of its calls runs its servers that many
# times in turn).
out=${OUT:-/tmp}
p=.device/exp/plugins
logs=/tmp/s62-logs
uptime; nproc
for round in $(seq ${ROUNDS:-1}); do
IFS=, read -r -a sets <<<"${SETS:-10:4:cpu 10:4:gpu|0,16:16:cpu 16:16:gpu|8,8:8:cpu 8:8:gpu|8}"
for set in "${sets[@]}"; do
  for side in ${SIDES:-head:$p/s62-head.so:0:0 try:$p/s62-bounce.so:1:0 try16m:$p/s62-bounce.so:1:16777216 bounce:$p/s62-bounce.so:1:1000000000000000}; do
    IFS=: read -r which plugin pol after <<<"$side"
    echo "=== $which ${set%|*} lost ${set#*|} round $round"
    env GPURAID_PLUGIN=$PWD/$plugin GPURAID_REQPIN_POLICY=$pol \
      GPURAID_REQPIN_AFTER=$after STATS=1 LOGS=$logs/$which-$round \
      SERVERS="${set%|*}" CONNS="8 16" SEQ=${SEQ:-4G} REPEAT=${REPEAT:-2} \
      LOST=${set#*|} scripts/bench-connections 2>&1 |
      grep -E "^row|x the MB/s|^stats"
  done
done
done
uptime
for f in $logs/*/*gpu*.log; do
  echo "--- $f"
  grep -o "request buffers page-locked: [0-9].*" "$f" | cut -c1-500
done
