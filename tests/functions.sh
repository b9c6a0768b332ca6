# shellcheck shell=bash
# SPDX-License-Identifier: BSD-3-Clause
# gpuraid - shell functions shared by the integration tests (source me).
#
# Modelled on nbdkit's tests/functions.sh.  Provides:
#   requires CMD [ARGS...]     skip (exit 77) unless CMD [ARGS] succeeds
#   requires_cmd CMD...        skip unless each CMD is on $PATH
#   requires_plugin, requires_check, requires_py
#   fail MESSAGE...            print "$0: FAIL: MESSAGE" and exit 1
#   gpu_worked LOG             did the server of LOG (run with -v) code on
#                              its GPU, and never fall back to the CPU?
#   wait_resync [SECONDS]      wait until every background resync that
#                              $nbdkit_log says started has said it is done
#   cleanup_fn CMD [ARGS...]   run CMD on exit (last registered runs first)
#   start_nbdkit -P PIDFILE ...  start nbdkit -f in the background, wait for
#                              the pidfile, kill it (by pid) on exit; its
#                              stderr goes to $nbdkit_log (appended); under
#                              $NBDKIT_WRAPPER if set
#   stop_nbdkit PIDFILE        kill that server and wait until it is gone
#   run_nbdkit ...             run nbdkit in the foreground (sanitizer env)
#   expect_refusal LOG RE nbdkit ARGS...  nbdkit must refuse to start
#   make_members N SIZE [PREFIX], member_args FILE..., set_args,
#   start_array [PLUGIN OPTIONS...],
#   data_offset CHUNK, snapshot_members DIR, restore_members DIR,
#   check_parity K M CHUNK CODE [gpuraid-check args] MEMBER...,
#   check_decode K M CHUNK CODE REF WHAT [GONE...],
#   expect_check_fails WHY ARGS..., expect_verify URI REF, randio ARGS...
#   small_writes S0 S1, rebuild_front, wait_front S  (a rebuild's tests:
#                              4K writes into stripes, its front)
#   $tmpdir                    a private temporary directory (removed on
#                              exit; KEEP_TMPDIR=1 keeps it on failure)
#   $sock, $pid, $uri          a Unix socket, a pid file and its NBD URI
#                              in $tmpdir, for the test's server
#   $top, $PLUGIN (override: GPURAID_PLUGIN=path), $CTL (gpuraidctl;
#   override: GPURAID_CTL=path), $PY (python3 with the
#   nbd module, also first on $PATH for nbdsh), $CHECK (gpuraid-check),
#   $TEST_SEED (printed; set it to repeat a run)
#
# Sanitizers: when the plugin is linked against libasan (make SANITIZE=1)
# or libtsan (make TSAN=1), nbdkit (not instrumented) is run with the
# sanitizer runtimes preloaded ("${NBDKIT_CMD[@]}" instead of nbdkit),
# only for nbdkit itself, and reports are written to $tmpdir/asan.* or
# $tmpdir/tsan.*; any such report fails the test at exit.

set -u

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PLUGIN=${GPURAID_PLUGIN:-$top/nbdkit-plugin/nbdkit-gpuraid-plugin.so}
CHECK=$top/tests/gpuraid-check
PY=/usr/bin/python3
export top PLUGIN CHECK PY

# glibc malloc perturbation, as nbdkit's test suite does.
export MALLOC_CHECK_=1
export MALLOC_PERTURB_=$(( (RANDOM % 254) + 1 ))

# Test seed: printed and overridable.
if [ -z "${TEST_SEED:-}" ]; then
  TEST_SEED=$(( (RANDOM << 15) | RANDOM ))
fi
export TEST_SEED
echo "$0: TEST_SEED=$TEST_SEED"

# ---- cleanup stack ---------------------------------------------------------

_cleanup_fns=()
_test_failed_by_sanitizer=0

cleanup_fn ()
{
  _cleanup_fns+=("$(printf '%q ' "$@")")
}

_run_cleanup_fns ()
{
  local status=$? i
  set +e
  for (( i = ${#_cleanup_fns[@]} - 1; i >= 0; i-- )); do
    eval "${_cleanup_fns[$i]}"
  done
  _check_sanitizer_logs
  if [ "$_test_failed_by_sanitizer" = 1 ] && { [ "$status" = 0 ] || [ "$status" = 77 ]; }; then
    status=1
  fi
  if [ -n "${tmpdir:-}" ] && [ -d "$tmpdir" ]; then
    if [ "$status" != 0 ] && [ "$status" != 77 ] && [ -n "${KEEP_TMPDIR:-}" ]; then
      echo "$0: keeping $tmpdir"
    else
      rm -rf "$tmpdir"
    fi
  fi
  exit "$status"
}
trap _run_cleanup_fns EXIT
trap 'exit 1' INT QUIT TERM

# ---- temporary directory -------------------------------------------------

# Under /var/tmp rather than /tmp: test members are sparse files that may
# be larger than a tmpfs should hold.
tmpdir=$(mktemp -d "${TMPDIR:-/var/tmp}/gpuraid-$(basename "$0" .sh).XXXXXX")
nbdkit_log=$tmpdir/nbdkit.log

# nbdsh runs "python3 -m nbd" from $PATH; make that the python3 which has
# the nbd module (a pyenv python3 earlier on $PATH may lack it).
mkdir "$tmpdir/bin"
ln -s "$PY" "$tmpdir/bin/python3"
export PATH=$tmpdir/bin:$PATH

# fail MESSAGE...: print "$0: FAIL: MESSAGE" and fail the test.
fail ()
{
  echo "$0: FAIL: $*"
  exit 1
}

# ---- requires --------------------------------------------------------------

requires ()
{
  if ! "$@" >/dev/null 2>&1; then
    echo "$0: SKIP: '$*' failed or not found, test requires it"
    exit 77
  fi
}

# requires_cmd CMD...: each CMD must be on $PATH (or an absolute path).
requires_cmd ()
{
  local c
  for c in "$@"; do
    if ! command -v "$c" >/dev/null 2>&1; then
      echo "$0: SKIP: $c not found, test requires it"
      exit 77
    fi
  done
}

requires_plugin ()
{
  if [ ! -f "$PLUGIN" ]; then
    echo "$0: SKIP: $PLUGIN not found (run make first)"
    exit 77
  fi
  requires_cmd nbdkit
}

requires_check ()
{
  if [ ! -x "$CHECK" ]; then
    echo "$0: SKIP: $CHECK not found (make $CHECK)"
    exit 77
  fi
}

requires_py ()
{
  if ! "$PY" -c 'import nbd' >/dev/null 2>&1; then
    echo "$0: SKIP: $PY with the nbd module (python3-libnbd) not found"
    exit 77
  fi
}

# ---- the control socket (tests of gpuraidctl) -------------------------------

CTL=${GPURAID_CTL:-$top/ctl/gpuraidctl}
ctl=$tmpdir/ctl

# requires_ctl: skip unless gpuraidctl is built.
requires_ctl ()
{
  [ -x "$CTL" ] || { echo "$0: SKIP: $CTL not built (make)"; exit 77; }
}

# ctl_serve [plugin options...]: start nbdkit (verbose, on $sock) with the
# members in ${args[@]}, control=$ctl and the options; $nbdkit_opts (nbdkit's
# own options) go before the plugin.  Waits for the control socket.
ctl_serve ()
{
  local i
  : >"$nbdkit_log"
  # shellcheck disable=SC2086
  start_nbdkit -P "$pid" -U "$sock" -v ${nbdkit_opts:-} "$PLUGIN" "${args[@]}" \
    control="$ctl" "$@" || fail "start"
  for (( i = 0; i < 50; i++ )); do [ -S "$ctl" ] && break; sleep 0.1; done
  [ -S "$ctl" ] || fail "no control socket at $ctl"
}

# ctl_create_filled [plugin options...]: create the array of ${args[@]}
# (m=$m chunk=$chunk, with ctl_serve), fill it with random bytes, kept in
# $tmpdir/expect ($size: the array's size), and stop it.
ctl_create_filled ()
{
  ctl_serve m="$m" chunk="$chunk" create=true "$@"
  size=$(nbdinfo --size "$uri")
  head -c "$size" /dev/urandom >"$tmpdir/expect"
  nbdcopy "$tmpdir/expect" "$uri" || fail "fill"
  stop_nbdkit "$pid"
}

# wait_log PATTERN [SECS]: wait (30 s at most) for a line of $nbdkit_log
# matching PATTERN (grep's); false if none came.  For what the server says
# in the background after its start, such as a rebuild's resumption.
wait_log ()
{
  local i
  for (( i = 0; i < ${2:-30} * 10; i++ )); do
    grep -q "$1" "$nbdkit_log" && return 0
    sleep 0.1
  done
  grep -q "$1" "$nbdkit_log"
}

# ctl_json EXPR: a python expression over the status JSON (as s), printed.
ctl_json ()
{
  "$CTL" -c "$ctl" status --json |
    python3 -c "import json, sys; s = json.load(sys.stdin); print($1)"
}

# small_writes S0 S1: 4K of new data at byte 8192 of data chunk (s mod
# k) of each stripe s in [S0, S1), through one NBD connection on $sock,
# and into $tmpdir/expect ($k, $chunk, $width: the array's).
small_writes ()
{
  python3 - "$1" "$2" "$width" "$chunk" "$k" "$tmpdir/expect" "$sock" <<'EOF' ||
import os, sys, nbd
s0, s1, width, chunk, k = map(int, sys.argv[1:6])
h = nbd.NBD(); h.connect_unix(sys.argv[7])
with open(sys.argv[6], "r+b") as f:
    for s in range(s0, s1):
        off = s * width + (s % k) * chunk + 8192
        buf = os.urandom(4096)
        h.pwrite(buf, off)
        f.seek(off); f.write(buf)
h.shutdown()
EOF
    fail "small writes"
}

# rebuild_front: the running rebuild's front, in stripes ($width).
rebuild_front () { echo $(( $(ctl_json 's["rebuild"]["done_bytes"]') / width )); }

# wait_front S: until the rebuild's front is past stripe S.
wait_front ()
{
  local i
  for (( i = 0; i < 300; i++ )); do
    [ "$(rebuild_front)" -gt "$1" ] && return 0
    sleep 0.1
  done
  fail "the rebuild's front did not pass stripe $1 (at $(rebuild_front))"
}

# wait_healthy: until the array on $ctl is healthy, every member active
# (30 s), else fail.
wait_healthy ()
{
  local i
  for (( i = 0; i < 300; i++ )); do
    [ "$(ctl_json 's["state"], all(mb["state"] == "active" for mb in s["members"] if mb["index"] is not None)' 2>/dev/null)" = "healthy True" ] &&
      return 0
    sleep 0.1
  done
  fail "not healthy: $("$CTL" -c "$ctl" status)"
}

# write_ref OFF LEN: LEN random bytes at array byte OFF through NBD on
# $sock (in 64 KiB requests), flushed, and into $tmpdir/expect.
write_ref ()
{
  head -c "$2" /dev/urandom >"$tmpdir/write_ref"
  python3 - "$sock" "$1" "$tmpdir/write_ref" "$tmpdir/expect" <<'EOF' || fail "write at $1"
import sys, nbd
h = nbd.NBD(); h.connect_unix(sys.argv[1])
off = int(sys.argv[2]); data = open(sys.argv[3], "rb").read()
for o in range(0, len(data), 65536):
    h.pwrite(data[o:o + 65536], off + o)
h.flush(); h.shutdown()
with open(sys.argv[4], "r+b") as f:
    f.seek(off); f.write(data)
EOF
}

# array_uuid FILE: the array UUID in FILE's superblock (gpuraidctl examine).
array_uuid () { "$CTL" examine "$1" | sed -n 's/^  array uuid *//p'; }

# ctl_refused WHY REGEX CMD...: CMD must exit non-zero with one line on
# stderr matching REGEX.
ctl_refused ()
{
  local why=$1 re=$2 rc
  shift 2
  "$@" >"$tmpdir/out" 2>"$tmpdir/err"; rc=$?
  [ $rc -ne 0 ] || fail "$why: exit status 0"
  [ "$(wc -l <"$tmpdir/err")" = 1 ] || fail "$why: not one line: $(cat "$tmpdir/err")"
  grep -Eq -- "$re" "$tmpdir/err" || fail "$why: $(cat "$tmpdir/err")"
  echo "  refused ($why): $(cat "$tmpdir/err")"
}

# ---- sanitizers ------------------------------------------------------------

# shellcheck source=tests/sanitizer-env.sh
. "$top/tests/sanitizer-env.sh"
gr_sanitizer_env "$PLUGIN" "$tmpdir"

_check_sanitizer_logs ()
{
  local f
  [ -n "${tmpdir:-}" ] || return 0
  for f in "$tmpdir"/asan.* "$tmpdir"/tsan.*; do
    [ -e "$f" ] || continue
    echo "$0: FAIL: sanitizer report $f:"
    cat "$f"
    _test_failed_by_sanitizer=1
  done
}

# Run nbdkit in the foreground with the sanitizer environment (not the
# clients started by --run).
run_nbdkit ()
{
  gr_nbdkit "$@"
}

# ---- starting and stopping servers -----------------------------------------

# start_nbdkit -P PIDFILE [nbdkit args...]
# Runs nbdkit -f in the background (stderr appended to $nbdkit_log), waits
# for the pidfile, registers a cleanup that kills it.  Returns non-zero
# (after printing the log) if nbdkit exits before writing the pidfile.
start_nbdkit ()
{
  local pidfile i bgpid
  if [ "$1" != -P ] || [ $# -lt 2 ]; then
    echo "$0: start_nbdkit: first argument must be -P pidfile"
    exit 1
  fi
  pidfile=$2
  rm -f "$pidfile"
  # nbdkit leaves its Unix socket behind when killed: remove a stale one.
  local a prev=""
  for a in "$@"; do
    if [ "$prev" = -U ] && [ "$a" != - ]; then rm -f "$a"; fi
    prev=$a
  done
  echo "+ nbdkit -f $*" >>"$nbdkit_log"
  # A simple command, so that $! is nbdkit's own pid (env execs it).
  # NBDKIT_WRAPPER (a command and its arguments, word-split) runs nbdkit
  # under another program, e.g. strace injecting faults.
  # shellcheck disable=SC2086
  ${NBDKIT_WRAPPER:-} "${NBDKIT_CMD[@]}" -f "$@" </dev/null >>"$nbdkit_log" 2>&1 &
  bgpid=$!
  cleanup_fn _kill_pid "$bgpid"
  for (( i = 0; i < 600; i++ )); do
    if [ -s "$pidfile" ]; then
      return 0
    fi
    _wait_exit "$bgpid" 1
    if [ "$wait_status" != running ]; then
      echo "$0: start_nbdkit: nbdkit exited ($wait_status) before writing $pidfile; log:"
      tail -n 20 "$nbdkit_log"
      case $wait_status in
        0|deadlocked) return 1 ;;
        *) return "$wait_status" ;;
      esac
    fi
  done
  echo "$0: start_nbdkit: $pidfile not created after 60 s"
  exit 1
}

# host_copies LOG: "CALLS MEMCPY" from the plugin's account at shutdown of
# a plan's copies made by the GPU (a degraded read's survivors, a
# full-stripe write's data, that an O_DIRECT member would have bounced),
# or nothing if it made none.
host_copies ()
{
  sed -n "s/.*copies for direct members' alignment: \([0-9]*\) calls by the GPU.*, \([0-9]*\) by memcpy.*/\1 \2/p" "$1"
}

# gathered LOG: "PLANS SUBMISSIONS ENCODES" from the plugin's count at
# shutdown of the small GPU operations gathered across requests (plans
# gathered, the submissions they went in, the encodes among the
# operations), or nothing if the log has no such count.
gathered ()
{
  sed -n 's/.*small operations gathered: [0-9]* of \([0-9]*\) plans in \([0-9]*\) submissions (\([0-9]*\) of them encodes).*/\1 \2 \3/p' "$1" | tail -n 1
}

# joined LOG: "TAKEN WRITTEN BACK" from the plugin's count at shutdown of
# the writes' parts of stripes joined with a concurrent write's
# (nbdkit-plugin/join.h): taken by the write that had the rest, written
# with it as whole stripes, handed back; or nothing if the log has none.
joined ()
{
  sed -n 's/.*joined writes: \([0-9]*\) parts .*, \([0-9]*\) written with it as whole stripes, \([0-9]*\) handed back.*/\1 \2 \3/p' "$1" | tail -n 1
}

# gathered_jobs LOG: the GPU engine's direct jobs coded where their
# blocks are, nothing copied (gpu.h gr_gpu_many_stats), in the plugin's
# account at shutdown (-v), or nothing if the log has none.
gathered_jobs ()
{
  sed -n 's/.*GPU engine: .* jobs direct (\([0-9]*\) of them coded where their blocks are.*/\1/p' "$1" | tail -n 1
}

# begun LOG: the plans begun with their request's others (exec.h: whole
# and joined stripes, their encodes queued together on the GPU) in the
# plugin's count at shutdown, or nothing if the log has none.
begun ()
{
  sed -n 's/.*queued together, and finished after: \([0-9]*\).*/\1/p' "$1" | tail -n 1
}

# rmw_plans LOG M: "ALL SEVERAL": the read-modify-writes planned in the
# -v -D gpuraid.verbose=1 log LOG of an array of M parity members, and
# those of several data chunks (more reads than M + 1, all parity
# live), whose parity update is one operation for all their chunks.
rmw_plans ()
{
  awk -v m="$2" '/plan write-rmw/ {
      all++
      for (i = 2; i <= NF; i++)
        if ($i == "reads," && $(i - 1) > m + 1) several++
    }
    END { print all + 0, several + 0 }' "$1"
}

# gpu_worked LOG: the server whose -v log is LOG (one server, stopped)
# ran coding operations on its GPU (or stand-in), and none failed over to
# the CPU.  Prints what it found; returns non-zero otherwise.
gpu_worked ()
{
  local log=$1 ops
  if grep -q 'GPU .* failed: .*redoing it' "$log"; then
    echo "gpu_worked: the GPU failed, the CPU took over: $(grep -m 1 'GPU .* failed' "$log")"
    return 1
  fi
  if grep -q 'the checksums its reconstruct computed disagree' "$log"; then
    echo "gpu_worked: the GPU's checksums were wrong, the CPU took over"
    return 1
  fi
  ops=$(sed -n 's/.*coding operations on the GPU: \([0-9]*\);.*/\1/p' "$log" | tail -n 1)
  if [ -z "$ops" ] || [ "$ops" -eq 0 ]; then
    echo "gpu_worked: no coding operation on the GPU (count: '${ops}')"
    return 1
  fi
  echo "gpu_worked: $ops coding operations on the GPU, no fallback"
}

# wait_resync [SECONDS]: the log may hold several servers' lines: wait
# (default 120 s) until as many resyncs are done as were started; fail if
# one stopped or the time runs out.
wait_resync ()
{
  local t=${1:-120} i started done
  for (( i = 0; i < t * 10; i++ )); do
    started=$(grep -c 'resyncing the parity of' "$nbdkit_log")
    done=$(grep -c 'resync done:' "$nbdkit_log")
    [ "$done" -ge "$started" ] && return 0
    if grep -q 'resync stopped' "$nbdkit_log"; then
      fail "$(grep 'resync stopped' "$nbdkit_log" | tail -1)"
    fi
    sleep 0.1
  done
  fail "the resync did not finish in $t s"
}

# _wait_exit PID TENTHS: wait up to TENTHS/10 s for PID (a child) to exit.  Sets
# wait_status to its exit status, or to "deadlocked" (then kills it, see
# above) or "running".
_wait_exit ()
{
  local pid=$1 tenths=$2 i
  for (( i = 0; i < tenths; i++ )); do
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid" 2>/dev/null
      wait_status=$?
      return 0
    fi
    if (( i % 5 == 4 || i == tenths - 1 )) && _exit_deadlocked "$pid"; then
      echo "$0: note: pid $pid deadlocked in exit() (known libasan/glibc issue), killed"
      kill -9 "$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
      wait_status=deadlocked
      return 0
    fi
    sleep 0.1
  done
  wait_status=running
}

_kill_pid ()
{
  local pid=$1
  kill -0 "$pid" 2>/dev/null || return 0
  kill "$pid" 2>/dev/null
  _wait_exit "$pid" 100
  if [ "$wait_status" = running ]; then
    echo "$0: pid $pid did not exit on SIGTERM, killing it"
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  fi
  return 0
}

# stop_nbdkit PIDFILE: stop the server started with that pidfile and wait
# until it has exited (so members are closed before the next start).
# Fails the test if the server had already died (a crash).
stop_nbdkit ()
{
  local pidfile=$1 pid
  pid=$(cat "$pidfile")
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "$0: FAIL: nbdkit (pid $pid) died before stop_nbdkit; log:"
    tail -n 30 "$nbdkit_log"
    exit 1
  fi
  _kill_pid "$pid"
  rm -f "$pidfile"
}

# crash_nbdkit PIDFILE: kill -9 the server started with that pidfile and
# wait until it is gone (under ASan its exit takes a while, and until then
# its sockets still take connections), its pidfile removed.  A server
# that is not this shell's child (started under a wrapper or in another
# namespace) is waited for by polling, for up to 10 s.
crash_nbdkit ()
{
  local pid i
  pid=$(cat "$1")
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  for (( i = 0; i < 100; i++ )); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  rm -f "$1"
}

# ---- gpuraid helpers ---------------------------------------------------------

# sock_uri SOCKET
sock_uri ()
{
  echo "nbd+unix:///?socket=$1"
}

# member_args FILE...: "member=FILE member=FILE ..."
member_args ()
{
  local f
  for f in "$@"; do
    printf 'member=%s ' "$f"
  done
}

# set_args: args=(member=M ...) for each M in ${members[@]}, in order (a
# function may declare args local first and call it).
set_args ()
{
  local f
  args=()
  for f in "${members[@]}"; do
    args+=("member=$f")
  done
}

# start_array [PLUGIN OPTIONS...]: start_nbdkit serving the array of
# ${members[@]} with m=$m and the options on $sock; its exit status.
start_array ()
{
  local args
  set_args
  start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" m="$m" "$@"
}

# data_offset CHUNK [FILE...]: where the data starts on the members: the
# data offset in the superblock of the first of FILE... (else of
# ${members[@]}) that has one (an array with integrity has its checksum
# area before the data), else the rule for an array without (1 MiB, or
# the chunk if larger) where 4 journal slots fit in it (docs/format.md).
data_offset ()
{
  local chunk=$1 f
  shift
  for f in "$@" "${members[@]}"; do
    if [ -f "$f" ] &&
       [ "$(head -c 7 "$f" 2>/dev/null | tr -d '\0')" = GPURAID ]; then
      od -An -t u8 -j 56 -N 8 "$f" | tr -d ' '
      return
    fi
  done
  if [ "$chunk" -gt 1048576 ]; then echo "$chunk"; else echo 1048576; fi
}

# parse_size 64K -> 65536
parse_size ()
{
  numfmt --from=iec "$1"
}

# randio ARGS...: the random I/O helper (tests/randio.py) under $PY.
randio ()
{
  "$PY" "$top/tests/randio.py" "$@"
}

# sums FILE...: sha256 of each file, one line per file
sums ()
{
  sha256sum "$@"
}

# make_members N SIZE [PREFIX]: create N sparse member files of SIZE in
# $tmpdir, named PREFIX0.img ... (default "disk"); sets the array members.
make_members ()
{
  local n=$1 size=$2 prefix=${3:-disk} i f
  members=()
  for (( i = 0; i < n; i++ )); do
    f=$tmpdir/$prefix$i.img
    rm -f "$f"
    truncate -s "$size" "$f"
    members+=("$f")
  done
}

# check_parity K M CHUNK CODE [gpuraid-check args...] MEMBER...
# Runs the offline parity checker; fails the test on any mismatch.  Its
# coder is "ref" (plainly correct, slow: CRS at a few MB/s), or the
# backend named in $check_backend.
check_parity ()
{
  local k=$1 m=$2 chunk=$3 code=$4
  shift 4
  local off
  off=$(data_offset "$chunk" "$@")
  echo "+ gpuraid-check -k $k -m $m -c $chunk -t $code -o $off ${check_backend:+-b $check_backend }$*"
  # shellcheck disable=SC2086
  if ! "$CHECK" -k "$k" -m "$m" -c "$chunk" -t "$code" \
       -o "$off" ${check_backend:+-b "$check_backend"} "$@"; then
    echo "$0: FAIL: gpuraid-check found parity errors (k=$k m=$m chunk=$chunk code=$code)"
    exit 1
  fi
}

# check_decode K M CHUNK CODE REF WHAT [GONE...]: offline, the members
# (${members[@]}, those at the indices GONE left out as missing) must
# have consistent parity and decode to the logical image REF; fails the
# test with "offline decode WHAT differs from the reference" otherwise.
check_decode ()
{
  local k=$1 m=$2 chunk=$3 code=$4 ref=$5 what=$6 i
  local check_members=("${members[@]}")
  shift 6
  for i in "$@"; do
    check_members[i]=-
  done
  check_parity "$k" "$m" "$chunk" "$code" -d "$tmpdir/dump.img" "${check_members[@]}"
  cmp "$tmpdir/dump.img" "$ref" || fail "offline decode $what differs from the reference"
}

# expect_check_fails WHY GPURAID-CHECK-ARGS...: a negative control: the
# offline checker must find something wrong, else the test proves nothing
# and fails with "FAIL: WHY".
expect_check_fails ()
{
  local why=$1
  shift
  if "$CHECK" "$@" >/dev/null; then
    echo "$0: FAIL: $why"
    exit 1
  fi
}

# verify WHAT: the whole export at $uri equals $tmpdir/expect (nbdcopy).
verify ()
{
  rm -f "$tmpdir/back"
  nbdcopy "$uri" "$tmpdir/back" || fail "read back ($1)"
  cmp "$tmpdir/back" "$tmpdir/expect" || fail "data differs ($1)"
  echo "  data verified: $1"
}

# expect_verify URI REF [what]: the export must equal REF.
expect_verify ()
{
  if ! randio verify "$1" "$2"; then
    echo "$0: FAIL: data mismatch${3:+ ($3)}"
    exit 1
  fi
}

# snapshot_members DIR / restore_members DIR: sparse copies of the members.
snapshot_members ()
{
  local dir=$1 f
  mkdir -p "$dir"
  for f in "${members[@]}"; do
    cp --sparse=always "$f" "$dir/"
  done
}

restore_members ()
{
  local dir=$1 f
  for f in "${members[@]}"; do
    cp --sparse=always "$dir/$(basename "$f")" "$f"
  done
}

# expect_refusal LOGFILE REGEX nbdkit ARGS...: that nbdkit command must
# refuse to start: it is run as a server (-f, a Unix socket, a pidfile, the
# sanitizer preload) and must exit, non-zero, without writing its pidfile
# (a server that starts is killed and fails the test; so does one that
# hangs), printing a line that says "error" and matches REGEX (extended,
# case-insensitive).
expect_refusal ()
{
  local log=$1 re=$2 bgpid i
  shift 3                       # LOGFILE REGEX nbdkit
  local rpid=$tmpdir/refusal.pid rsock=$tmpdir/refusal.sock
  rm -f "$rpid" "$rsock"
  echo "+ nbdkit -f -P $rpid -U $rsock $*"
  "${NBDKIT_CMD[@]}" -f -P "$rpid" -U "$rsock" "$@" >"$log" 2>&1 </dev/null &
  bgpid=$!
  cleanup_fn _kill_pid "$bgpid"
  wait_status=running
  for (( i = 0; i < ${REFUSAL_TIMEOUT:-60} * 2; i++ )); do
    if [ -s "$rpid" ]; then
      break
    fi
    _wait_exit "$bgpid" 5
    [ "$wait_status" != running ] && break
  done
  cat "$log"
  if [ -s "$rpid" ]; then
    _kill_pid "$bgpid"
    echo "$0: FAIL: expected nbdkit to refuse to start, but it started"
    exit 1
  fi
  case $wait_status in
    running)
      _kill_pid "$bgpid"
      echo "$0: FAIL: nbdkit neither started nor exited within ${REFUSAL_TIMEOUT:-60} s (hung)"
      exit 1 ;;
    0)
      echo "$0: FAIL: nbdkit exited with status 0 without starting"
      exit 1 ;;
  esac
  if ! grep -i 'error' "$log" | grep -Eqi -- "$re"; then
    echo "$0: FAIL: exit status $wait_status but no error line matching /$re/"
    exit 1
  fi
  echo "  (refused: exit status $wait_status, message matches /$re/)"
}

# sb_failed_bits FILE: the failed-member bitmap of FILE's superblock
# (docs/format.md: 32 bytes at offset 88) as a list of member indices.
sb_failed_bits ()
{
  od -An -v -tu1 -j 88 -N 32 "$1" | tr -s ' ' '\n' | grep -v '^$' |
    awk '{ for (b = 0; b < 8; b++) if (int($1 / 2^b) % 2) printf "%d ", (NR - 1) * 8 + b }'
}

# sb_event FILE: the event counter of FILE's superblock (offset 72).
sb_event ()
{
  od -An -v -tu8 -j 72 -N 8 "$1" | tr -d ' '
}

# Where a test serves its array: the socket, the pid file and the URI.
sock=$tmpdir/sock
pid=$tmpdir/nbdkit.pid
uri=$(sock_uri "$sock")
