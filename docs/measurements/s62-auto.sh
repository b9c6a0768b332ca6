#!/bin/bash
# Session 62: issue 24's accel=auto rows again (790c53d): tmpfs, 1 MiB
# sequential writes then reads (nbdbench, 16 in flight per connection)
# of SEQ at 8 and 16 connections, cpu / gpu / auto in turn (ROUNDS),
# 10+4, and 8+8 and 16+16 with the first 8 members lost.
for set in "10:4|0" "8:8|8" "16:16|8"; do
  g=${set%|*}
  echo "=== $g lost ${set#*|}"
  env SERVERS="$g:cpu $g:gpu $g:auto" CONNS="8 16" SEQ=${SEQ:-4G} \
    REPEAT=${REPEAT:-2} ROUNDS=${ROUNDS:-1} LOST=${set#*|} \
    LOGS=/tmp/s62-auto-logs/$g scripts/bench-connections 2>&1 |
    grep -E "^row|x the |^route"
done
# the routers' decisions, from the accel=auto servers' logs
for f in /tmp/s62-auto-logs/*/*auto*.log; do
  echo "--- $f"
  grep -o "accel=auto: .*" "$f" | sort | uniq -c | sort -rn | head -12 | cut -c1-300
done
