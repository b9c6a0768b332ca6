#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The benchmarks' client and its account of a run's phases:
#  1. scripts/nbdbench against nbdkit's memory plugin, sequential writes
#     then reads of 64 MiB on 2 connections: its RESULT line counts every
#     byte, its phases are in order (the last connection ready and the
#     first reply before the last reply, that before the end), and the
#     MB/s of the four quarters from the first reply to the last add up
#     to the bytes moved (within their rounding, the ends to a tick);
#     with -P, the server's CPU from the first reply to the last (sampled
#     from /proc) at most its CPU over the whole run (read here, a tick
#     more), and four CPU-s/GB, none negative; -P of no process refused
#     with a message before any I/O;
#  2. bench-connections with STATS=1 (a 4+2 array on the CPU, one run a
#     connection count): a "client's run" line for the writes and the
#     reads, its times in order, its MB/s positive and its quarters'
#     server CPU-s/GB four numbers (not under a sanitizer build:
#     bench-connections runs nbdkit without their preload; said).

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_cmd nbdkit awk
NBDBENCH=$top/scripts/nbdbench
[ -x "$NBDBENCH" ] || { echo "$0: SKIP: $NBDBENCH not built (make)"; exit 77; }

# 1. nbdbench's RESULT line
sock=$tmpdir/sock
start_nbdkit -P "$tmpdir/pid" -U "$sock" memory 256M || fail "nbdkit memory"
srv=$(cat "$tmpdir/pid")
srv_cpu () { awk '{ print $14 + $15 }' "/proc/$srv/stat"; }
for mode in write read; do
  c0=$(srv_cpu)
  out=$("$NBDBENCH" -m $mode -b 1M -q 4 -c 2 -S 64M -P "$srv" \
        "$(sock_uri "$sock")") ||
    fail "nbdbench -m $mode failed: $out"
  c1=$(srv_cpu)
  echo "$out (the server's CPU over the run: $(( c1 - c0 )) ticks)"
  awk -v want=$(( 64 << 20 )) -v ticks=$(( c1 - c0 )) -v hz="$(getconf CLK_TCK)" '
    function field(n,   i) { for (i = 1; i <= NF; i++)
                               if (index($i, n "=") == 1)
                                 return substr($i, length(n) + 2)
                             print "no " n; bad = 1 }
    /^RESULT/ {
      got = 1
      b = field("bytes"); s = field("secs"); r = field("ready_s")
      f = field("first_s"); l = field("last_s"); q = field("quarters_MBps")
      if (b != want) { print "bytes " b " not " want; bad = 1 }
      if (!(r >= 0 && r <= s)) { print "ready_s " r " outside 0 .. " s; bad = 1 }
      if (!(f > 0 && f <= l && l <= s)) { print "first " f ", last " l ", secs " s " out of order"; bad = 1 }
      if (split(q, v, ",") != 4) { print "quarters: " q; bad = 1 }
      # the ticks of 10 ms from the first reply'"'"'s to the last'"'"'s, in
      # quarters (first_s and last_s are printed to the ms: a tick either
      # side at each end)
      a0 = int(f * 100); e0 = int(l * 100) + 1; ok = 0
      for (a = a0 - 1; a <= a0 + 1; a++)
        for (e = e0 - 1; e <= e0 + 1; e++) {
          if (e <= a) continue
          sum = 0; err = 0
          for (i = 0; i < 4; i++) {
            n = int((e - a) * (i + 1) / 4) - int((e - a) * i / 4)
            sum += v[i + 1] * 1e6 * n / 100
            err += 0.5e6 * n / 100
          }
          if (sum >= b - err - 1 && sum <= b + err + 1) ok = 1
        }
      if (!ok) { print "the quarters do not add up to " b " bytes: " q; bad = 1 }
      c = field("srv_cpu_s"); cq = field("srv_quarters_cpu_GB")
      if (!(c >= 0 && c <= (ticks + 1) / hz + 0.005)) {
        print "srv_cpu_s " c " outside 0 .. the run'"'"'s " ticks " ticks"; bad = 1 }
      if (split(cq, w, ",") != 4) { print "srv_quarters_cpu_GB: " cq; bad = 1 }
      for (i = 1; i <= 4; i++)
        if (!(w[i] >= 0)) { print "srv_quarters_cpu_GB: " cq; bad = 1 }
    }
    END { if (!got) print "no RESULT line"; exit !got || bad }' <<<"$out" ||
    fail "nbdbench -m $mode: its RESULT line"
done
out=$("$NBDBENCH" -m read -S 1M -P 999999999 "$(sock_uri "$sock")" 2>&1) &&
  fail "nbdbench -P of no process ran: $out"
grep -q "^nbdbench: -P 999999999: no process whose CPU time /proc tells$" <<<"$out" ||
  fail "nbdbench -P of no process: $out"
stop_nbdkit "$tmpdir/pid"

# 2. bench-connections' account of the client's runs.  It starts nbdkit
# itself, without the sanitizers' preload (tests/sanitizer-env.sh).
if [ -n "${NBDKIT_PRELOAD:-}" ]; then
  echo "$0: part 2 (bench-connections) not run: the plugin is built with sanitizers, which bench-connections' nbdkit does not preload"
  echo "$0: PASS"
  exit 0
fi
out=$(BENCH_DIR=$tmpdir SERVERS="4:2:cpu" CONNS=2 SEQ=64M REPEAT=1 STATS=1 \
      WARM=0 GPURAID_PLUGIN=$PLUGIN "$top/scripts/bench-connections" 2>&1) ||
  fail "bench-connections failed: $out"
for mode in write read; do
  line=$(grep "^stats: 4+2 accel=cpu: $mode at 2 connections, the client's run" <<<"$out") ||
    fail "no client's run line for $mode: $out"
  echo "$line"
  read -r r f l s mbs < <(sed -n 's/.*ready at \([0-9]*\) ms, the first reply at \([0-9]*\), the last at \([0-9]*\), all shut down at \([0-9]*\); \([0-9]*\) MB\/s.*/\1 \2 \3 \4 \5/p' <<<"$line")
  [ -n "${mbs:-}" ] && (( f <= l && l <= s && r <= s && mbs > 0 )) ||
    fail "$mode: the client's run line out of order: $line"
  grep -Eq ' at [0-9]+[.][0-9]{2}, [0-9]+[.][0-9]{2}, [0-9]+[.][0-9]{2}, [0-9]+[.][0-9]{2} server CPU-s/GB$' <<<"$line" ||
    fail "$mode: no quarters' server CPU-s/GB in the client's run line: $line"
done
echo "$0: PASS"
