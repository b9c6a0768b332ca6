# shellcheck shell=bash
# SPDX-License-Identifier: BSD-3-Clause
# gpuraid - shell functions shared by the benchmarks (source me).
#   progress TEXT...     a progress line, with the load average (the
#                        machine may be shared)
#   ratio A B            A / B to two places, or - where B is 0
# For the benchmarks that serve one nbdkit at a time, in the background:
#   bench_tmpdir NAME    $tmp: a private folder under BENCH_DIR (default
#                        /dev/shm), removed at exit, with the server
#   bench_start ARGS...  nbdkit -f ARGS on $tmp/sock ($tmp/pid, stderr in
#                        $tmp/log) as $server; waits (60 s at most) for the
#                        pid file, the socket and bench_ready ARGS (a
#                        script may define it: say when the server is
#                        ready for it); non-zero, the log's tail printed,
#                        if the server exits or is not ready in time
#   bench_stop           stop $server and wait for it
#   bench_warm BYTES     where $tmp is on tmpfs: BYTES (at most what it has
#                        free, less 1 GiB) written there once and deleted,
#                        so that the runs' tmpfs pages come from memory the
#                        machine has touched before (one just started backs
#                        its memory on first touch: the first runs of a
#                        session were up to 2.6 times slow, whichever side
#                        ran first; docs/performance.md).  WARM=0: not
#   cpu_ticks            $server's CPU time so far (utime + stime of all
#                        its threads), in clock ticks
#   machine_ticks        the machine's busy time so far (user, nice,
#                        system, irq, softirq, steal of every core), in
#                        clock ticks: the server's, the client's and the
#                        kernel's threads that work for them (loop devices,
#                        io_uring workers), and whatever else runs: a
#                        quiet machine's figure
#   cpu_per_gb TICKS BYTES  those ticks as CPU-seconds per GB of BYTES
#   lanes_busy first|last  a job's lanes' busy seconds from the server's
#                        log ($tmp/log), its first or last job's: "read X
#                        s, code Y s, write Z s" (summed over the lanes)
# Ratios between servers measured in the same run:
#   bench_record ROW ACCEL MB CPU MACHINE  one result (ROW names what was
#                        measured, without spaces: 8+8/write/8conns;
#                        ACCEL: cpu, gpu, auto or a variant's name),
#                        kept in $tmp/records
#   bench_ratios TITLE   for each ROW recorded with accel cpu and gpu:
#                        gpu / cpu of the MB/s and of both CPU-s/GB;
#                        with auto too: auto / the better of the two;
#                        after an empty line and TITLE, if there is any

progress () { printf '==> %s  [load %s]\n' "$*" "$(cut -d' ' -f1-3 /proc/loadavg)"; }
ratio () { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "-" }'; }

bench_tmpdir ()
{
  tmp=$(mktemp -d "${BENCH_DIR:-/dev/shm}/gpuraid-$1.XXXXXX")
  server=
  trap _bench_cleanup EXIT
}

# shellcheck disable=SC2317 # called from the EXIT trap
_bench_cleanup ()
{
  if [ -n "$server" ]; then
    kill "$server" 2>/dev/null || true
  fi
  wait 2>/dev/null || true
  rm -rf "$tmp"
}

bench_ready () { true; }

bench_warm ()
{
  local mib avail
  [ "${WARM:-1}" != 0 ] || return 0
  [ "$(stat -f -c %T "$tmp")" = tmpfs ] || return 0
  mib=$(( ($1 + 1048575) / 1048576 ))
  avail=$(( $(df --output=avail -B1M "$tmp" | tail -1) - 1024 ))
  (( mib <= avail )) || mib=$avail
  (( mib > 0 )) || return 0
  progress "warming $mib MiB of tmpfs (WARM=0: not)"
  dd if=/dev/zero of="$tmp/warm" bs=1M count="$mib" status=none || true
  rm -f "$tmp/warm"
}

bench_start ()
{
  local i
  rm -f "$tmp/sock" "$tmp/pid"
  nbdkit -f -U "$tmp/sock" -P "$tmp/pid" "$@" 2>"$tmp/log" &
  server=$!
  for (( i = 0; i < 600; i++ )); do
    [ -s "$tmp/pid" ] && [ -S "$tmp/sock" ] && bench_ready "$@" && return 0
    kill -0 "$server" 2>/dev/null || break
    sleep 0.1
  done
  tail -n 20 "$tmp/log" >&2
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  server=
  return 1
}

bench_stop () { kill "$server"; wait "$server" 2>/dev/null || true; server=; }

cpu_ticks () { awk '{print $14 + $15}' "/proc/$server/stat"; }
machine_ticks () { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }

lanes_busy ()
{
  sed -n 's/.*lanes were reading \([0-9.]*\) s, coding \([0-9.]*\) s and writing \([0-9.]*\) s.*/read \1 s, code \2 s, write \3 s/p' \
    "$tmp/log" | if [ "$1" = first ]; then head -1; else tail -1; fi
}

cpu_per_gb ()
{
  awk -v t="$1" -v hz="$(getconf CLK_TCK)" -v b="$2" \
    'BEGIN { printf "%.2f", (t / hz) / (b / 1e9) }'
}

bench_record () { echo "$*" >>"$tmp/records"; }

bench_ratios ()
{
  [ -s "$tmp/records" ] || return 0
  awk -v title="$1" '
    function r(a, b) { return b > 0 ? sprintf("%.2f", a / b) : "-" }
    { mb[$1, $2] = $3; c[$1, $2] = $4; mc[$1, $2] = $5
      if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
    END {
      for (i = 1; i <= n; i++) {
        k = order[i]
        if (!(((k, "cpu") in mb) && ((k, "gpu") in mb)))
          continue
        line = sprintf("%s: gpu / cpu %s x the MB/s, %s x the server CPU-s/GB, %s x the machine CPU-s/GB",
                       k, r(mb[k, "gpu"], mb[k, "cpu"]), r(c[k, "gpu"], c[k, "cpu"]),
                       r(mc[k, "gpu"], mc[k, "cpu"]))
        if ((k, "auto") in mb) {
          b = mb[k, "gpu"] > mb[k, "cpu"] ? "gpu" : "cpu"
          line = line sprintf("; auto / %s (the better) %s x the MB/s", b,
                              r(mb[k, "auto"], mb[k, b]))
        }
        if (!said++)
          printf "\n%s\n", title
        print line
      }
    }' "$tmp/records"
}
