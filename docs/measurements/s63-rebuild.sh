#!/bin/bash
# Session 63: issue 24's rebuild goal again on the 16-core H200 (the
# tree with the engine set up before serving): bench-rebuild, 16+16 with
# 1 GiB members and 8+8 with 2 GiB members, m members rebuilt in one
# pass, accel=gpu then cpu, RUNS runs each (the first a warm-up: a
# machine's first rebuilds run slow), foreground reads left out.
for run in $(seq ${RUNS:-3}); do
  for g in 16:16:1G 8:8:2G; do
    echo "=== run $run, ${g%:*} members of ${g##*:}"
    GEOMS=${g%:*} MEMBER_SIZE=${g##*:} ACCELS="gpu cpu" FG=0 WARM=0 \
      scripts/bench-rebuild 2>&1 | grep -E "^[0-9]+\+[0-9]+ "
  done
done
