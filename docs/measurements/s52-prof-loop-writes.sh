#!/bin/bash
# Session 52: where the whole machine's CPU goes on sequential 1 MiB writes to
# direct loop members (GEOM, CONNS, SEQ from the environment), for each variant
# ("cpu", "gpu", "gpu -D gpuraid.gpu_copies=0"): perf record -a -g over one
# nbdbench run after a fill; reported by command (the server, the loop
# workers, the client) and, for the server and the loop workers, by symbol.
# PERF [.device/exp/perfw]; SYMS: the server's symbols whose callers to show.  Run from the project root, as root.
cd "$(dirname "$0")/../.."
P=${PERF:-$PWD/.device/exp/perfw}
geom=${GEOM:-16:16} conns=${CONNS:-16} seq=${SEQ:-4G}
# Session 53: BS=SIZE (4K, 64K, ...) makes the runs random writes of that
# size in the first SEQ bytes for SECS [5] s (the first run a warm-up).
bs=${BS:-} secs=${SECS:-5}
k=${geom%:*} m=${geom#*:} n=$(( k + m ))
bytes=$(numfmt --from=iec "$seq")
msize=$(( (bytes / k / 1048576 + 5) * 1048576 + 65536 ))
d=$(mktemp -d /dev/shm/s52prof.XXXXXX)
loops=()
trap 'for l in "${loops[@]}"; do losetup -d "$l"; done; rm -rf "$d"' EXIT
for (( i = 0; i < n; i++ )); do
  truncate -s "$msize" "$d/m$i"
  loops+=("$(losetup -f --show --direct-io=on "$d/m$i")")
done
hz=$(getconf CLK_TCK)
mt () { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }
IFS=';' read -r -a variants <<<"${VARIANTS:-cpu;gpu;gpu -D gpuraid.gpu_copies=0}"
for v in "${variants[@]}"; do
  read -r accel extra <<<"$v"
  read -r -a extra <<<"${extra:-}"
  args=(); for l in "${loops[@]}"; do args+=("member=$l"); done
  rm -f "$d/sock" "$d/pid"
  uri="nbd+unix:///?socket=$d/sock" bytes=$(numfmt --from=iec "$seq")
  if [ -n "$bs" ]; then
    load=(-m randwrite -b "$bs" -q 16 -c "$conns" -t "$secs" -r "$bytes" -F "$uri")
  else
    load=(-m write -b 1M -q 16 -c "$conns" -S "$bytes" -F "$uri")
  fi
  nbdkit -f -v -U "$d/sock" -P "$d/pid" -t 16 "${extra[@]}" nbdkit-plugin/nbdkit-gpuraid-plugin.so \
    "${args[@]}" m=$m chunk=64K create=true force=true accel=$accel 2>"$d/log" &
  for i in $(seq 100); do [ -S "$d/sock" ] && break; sleep 0.1; done
  scripts/nbdbench "${load[@]}" >/dev/null
  pid=$(cat "$d/pid")
  s0=$(awk '{ print $14 + $15 }' /proc/$pid/stat) m0=$(mt)
  $P record -q -a -g -F 999 -o "$d/perf.data" -- \
    scripts/nbdbench "${load[@]}" >"$d/out" 2>"$d/perf.err" || tail -3 "$d/perf.err"
  s1=$(awk '{ print $14 + $15 }' /proc/$pid/stat) m1=$(mt)
  kill "$pid"; wait
  bytes=$(sed -n 's/.* bytes=\([0-9]*\).*/\1/p' "$d/out")   # written in the profiled run
  echo "######## $geom accel=$accel ${extra[*]}: $(grep -o 'MBps=[0-9.]*' "$d/out"); server $(awk -v t=$(( s1 - s0 )) -v h=$hz -v b=$bytes 'BEGIN { printf "%.2f", t / h / (b / 1e9) }') CPU-s/GB, machine $(awk -v t=$(( m1 - m0 )) -v h=$hz -v b=$bytes 'BEGIN { printf "%.2f", t / h / (b / 1e9) }') (profiled run, perf's own cost included)"
  echo "--- by command (whole machine)"
  $P report -i "$d/perf.data" --no-children --sort comm --stdio 2>/dev/null | grep -E "^ +[0-9]" | head -12
  echo "--- the server by symbol"
  $P report -i "$d/perf.data" --pid "$pid" --no-children --percentage relative -g none --sort dso,sym --stdio 2>/dev/null | grep -E "^ +[0-9]" | head -25
  for sym in ${SYMS:-}; do
    # The server's samples whose leaf is sym: their stacks' next frames
    # (up to 8 of them, the offsets and unnamed addresses left out).
    echo "--- the server's $sym, by the frames above it"
    $P script -i "$d/perf.data" --pid "$pid" -F ip,sym 2>/dev/null | awk -v s="$sym" '
      function flush() { if (n > 0 && leaf == s) { c[path]++; t++ } n = 0; path = ""; leaf = "" }
      /^[ \t]*$/ { flush(); next }
      { f = $2; sub(/\+0x[0-9a-f]+$/, "", f)
        if (n == 0) leaf = f
        else if (f != "[unknown]" && f !~ /^0x/ && k < 8 && n <= 12) path = path " < " f
        n++ }
      END { flush(); for (p in c) printf "%6.1f%%  %s\n", 100 * c[p] / t, p }' | sort -rn | head -12
  done
  echo "--- the loop workers by symbol"
  $P report -i "$d/perf.data" --comms "$(perf_comms=$($P report -i "$d/perf.data" --no-children --sort comm --stdio 2>/dev/null | grep -oE 'kworker[^ ]*|loop[0-9]+' | sort -u | tr '\n' ','); echo "${perf_comms%,}")" --no-children --percentage relative -g none --sort sym --stdio 2>/dev/null | grep -E "^ +[0-9]" | head -12
  grep -E "copies for direct|coding operations on the GPU" "$d/log" | sed 's/^.*gpuraid: /  log: /' | head -2
done
