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
#   nbdcopy_mbs write|read CONNS BYTES  MB/s of nbdcopy, CONNS connections
#                        of 1 MiB requests, copying $tmp/src (BYTES) to
#                        the server on $tmp/sock, or its export to null:
#   lanes_busy first|last  a job's lanes' busy seconds from the server's
#                        log ($tmp/log), its first or last job's: "read X
#                        s, code Y s, write Z s" (summed over the lanes)
# Ratios between servers measured in the same run:
#   bench_record ROW ACCEL MB CPU MACHINE  one result (ROW names what was
#                        measured, without spaces: 8+8/write/8conns;
#                        ACCEL: cpu, gpu, auto or a variant's name),
#                        kept in $tmp/records, of round $bench_round (1
#                        unless the script sets it)
#   bench_ratios TITLE   for each ROW recorded with accel cpu and gpu:
#                        gpu / cpu of the MB/s and of both CPU-s/GB;
#                        with auto too: auto / the better of the two;
#                        after an empty line and TITLE, if there is any;
#                        with several rounds, each ratio is the median of
#                        the rounds' (each round's servers' own), with
#                        their range

progress () { printf '==> %s  [load %s]\n' "$*" "$(cut -d' ' -f1-3 /proc/loadavg)"; }
ratio () { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "-" }'; }
nbdcopy_mbs () {
  local s0 s1 uri="nbd+unix:///?socket=$tmp/sock"
  s0=$(date +%s.%N)
  if [ "$1" = write ]; then
    nbdcopy --connections="$2" --request-size=1048576 "$tmp/src" "$uri"
  else
    nbdcopy --connections="$2" --request-size=1048576 "$uri" null:
  fi
  s1=$(date +%s.%N)
  awk -v a="$s0" -v b="$s1" -v n="$3" 'BEGIN { printf "%.1f\n", n / (b - a) / 1e6 }'
}

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

# The bytes free where the bench's files go.
bench_free () { df --output=avail -B1 "$tmp" | tail -1; }

# bench_fits BYTES WHAT: exit with one line unless BYTES fit there (a
# fill that meets ENOSPC half way has cost minutes).
bench_fits ()
{
  local free
  free=$(bench_free)
  (( $1 <= free )) && return 0
  echo "$(basename "$0"): $2 need $(numfmt --to=iec "$1") in $tmp, $(numfmt --to=iec "$free") free (BENCH_DIR, or a larger tmpfs)" >&2
  exit 1
}

bench_warm ()
{
  local mib avail
  [ "${WARM:-1}" != 0 ] || return 0
  [ "$(stat -f -c %T "$tmp")" = tmpfs ] || return 0
  mib=$(( ($1 + 1048575) / 1048576 ))
  avail=$(( $(bench_free) / 1048576 - 1024 ))
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

bench_round=1
bench_record () { echo "$bench_round $*" >>"$tmp/records"; }

bench_ratios ()
{
  [ -s "$tmp/records" ] || return 0
  awk -v title="$1" '
    # The median of the n values v[1..n] (sorted here), with their range
    # where there are several.
    function med(v, n,   i, j, t, m) {
      for (i = 2; i <= n; i++)
        for (j = i; j > 1 && v[j - 1] > v[j]; j--) {
          t = v[j]; v[j] = v[j - 1]; v[j - 1] = t
        }
      m = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
      return n > 1 ? sprintf("%.2f (%.2f-%.2f)", m, v[1], v[n]) \
                   : sprintf("%.2f", m)
    }
    # The ratios of row k, one a round, as strings (cpu and gpu in it).
    function ratios(k,   rd, n, na, b, x, y, z, a, line) {
      n = na = 0
      for (rd = 1; rd <= nr; rd++) {
        if (!(((rd, k, "cpu") in mb) && ((rd, k, "gpu") in mb)) ||
            mb[rd, k, "cpu"] <= 0 || c[rd, k, "cpu"] <= 0 ||
            mc[rd, k, "cpu"] <= 0)
          continue
        n++
        x[n] = mb[rd, k, "gpu"] / mb[rd, k, "cpu"]
        y[n] = c[rd, k, "gpu"] / c[rd, k, "cpu"]
        z[n] = mc[rd, k, "gpu"] / mc[rd, k, "cpu"]
        if ((rd, k, "auto") in mb) {
          b = mb[rd, k, "gpu"] > mb[rd, k, "cpu"] ? "gpu" : "cpu"
          a[++na] = mb[rd, k, "auto"] / mb[rd, k, b]
          better[b]++
        }
      }
      if (n == 0)
        return ""
      line = sprintf("%s: gpu / cpu %s x the MB/s, %s x the server CPU-s/GB, %s x the machine CPU-s/GB",
                     k, med(x, n), med(y, n), med(z, n))
      if (na > 0)
        line = line sprintf("; auto / %s %s x the MB/s",
                            better["gpu"] && better["cpu"] ? "the better of each round" \
                            : better["gpu"] ? "gpu (the better)" : "cpu (the better)",
                            med(a, na))
      delete better
      if (n < nr)
        line = line sprintf("  [%d of %d rounds]", n, nr)
      else if (nr > 1)
        line = line sprintf("  [%d rounds]", n)
      return line
    }
    { mb[$1, $2, $3] = $4; c[$1, $2, $3] = $5; mc[$1, $2, $3] = $6
      if ($1 > nr) nr = $1
      if (!($2 in seen)) { seen[$2] = 1; order[++n] = $2 } }
    END {
      for (i = 1; i <= n; i++) {
        line = ratios(order[i])
        if (line == "")
          continue
        if (!said++)
          printf "\n%s\n", title
        print line
      }
    }' "$tmp/records"
}
