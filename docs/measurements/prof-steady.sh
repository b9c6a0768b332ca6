#!/bin/bash
# Session 50: perf of the server during bench-steady-reads' random degraded
# reads, one variant per run: prof-steady.sh ACCEL... (K, M, LOST, CONNS,
# SIZE from the environment; PERF [.device/exp/perfw]).  Run from the
# project root.
P=${PERF:-$PWD/.device/exp/perfw}
for a in "$@"; do
  out=/tmp/prof-$a.data
  rm -f "$out"
  ( for i in $(seq 300); do
      # the variant's server: accel=$a, not the fill's (create=true)
      pid=$(for p in $(pgrep nbdkit); do c=$(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null); [[ $c == *accel=$a* && $c != *create=true* ]] && echo $p; done | head -1)
      [ -n "$pid" ] && break; sleep 0.1
    done
    sleep 2; echo "profiling nbdkit pid $pid"
    $P record -q -F 999 -g -p "$pid" -o "$out" -- sleep 5 ) &
  VARIANTS="accel=$a" CONNS=${CONNS:-16} SECS=10 SIZE=${SIZE:-4G} scripts/bench-steady-reads 2>&1 | grep -E "CPU-s/GB|GPU engine"
  wait
  echo "--- $a: by dso"; $P report -i "$out" --no-children --sort dso --stdio 2>/dev/null | grep -E "^ +[0-9]" | head -12
  echo "--- $a: by symbol"; $P report -i "$out" --no-children --sort dso,sym --stdio 2>/dev/null | grep -E "^ +[0-9]" | head -45
done
