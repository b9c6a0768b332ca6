#!/bin/bash
# Session 50: perf of the server during bench-steady-reads' random degraded
# reads, one variant per run: prof-steady.sh ACCEL... (K, M, LOST, CONNS,
# SIZE, STORAGE from the environment; PERF [.device/exp/perfw]).  Run
# from the project root.  The whole machine is sampled (perf -p opens an
# event a thread and CPU, past the descriptor limit with nbdkit's
# threads) and the server's samples reported.
P=${PERF:-$PWD/.device/exp/perfw}
for a in "$@"; do
  out=/tmp/prof-$a.data
  rm -f "$out" "$out.pid"
  ( for i in $(seq 300); do
      # the variant's server: accel=$a, not the fill's (create=true)
      pid=$(for p in $(pgrep nbdkit); do c=$(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null); [[ $c == *accel=$a* && $c != *create=true* ]] && echo $p; done | head -1)
      [ -n "$pid" ] && break; sleep 0.1
    done
    sleep 2; echo "profiling nbdkit pid $pid"; echo "$pid" >"$out.pid"
    $P record -q -a -F 999 -g -o "$out" -- sleep 5 ) &
  VARIANTS="accel=$a" CONNS=${CONNS:-16} SECS=10 SIZE=${SIZE:-4G} scripts/bench-steady-reads 2>&1 | grep -E "CPU-s/GB|GPU engine"
  wait
  pid=$(cat "$out.pid")
  # by symbol, relative to the server's samples; the shares by object
  # summed from it (perf's own --sort dso leaves the kernel out when
  # filtering by pid)
  $P report -i "$out" --pid "$pid" --percentage relative --no-children -g none \
    --sort dso,sym --stdio 2>/dev/null | grep -E "^ +[0-9]" >"$out.sym"
  echo "--- $a: by object"
  awk '{ sub(/%/, "", $1); s[$2] += $1 } END { for (d in s) printf "%8.2f%%  %s\n", s[d], d }' "$out.sym" | sort -rn | head -10
  echo "--- $a: by symbol"; head -45 "$out.sym"
  echo "--- $a: the whole machine by command (io_uring's workers are iou-wrk-*)"
  $P report -i "$out" --no-children -g none --sort comm --stdio 2>/dev/null | grep -E "^ +[0-9]" |
    awk '{ sub(/%/, "", $1); c = $2; sub(/-[0-9]+$/, "-*", c); s[c] += $1 } END { for (x in s) printf "%8.2f%%  %s\n", s[x], x }' | sort -rn | head -6
done
