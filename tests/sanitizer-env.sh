# SPDX-License-Identifier: BSD-3-Clause
# shellcheck shell=bash
# gpuraid - sanitizer environment for scripts that start nbdkit (source me).
#
# gr_sanitizer_env PLUGIN [LOGDIR]
#   When PLUGIN is linked against libasan (make SANITIZE=1) or libtsan
#   (make TSAN=1), nbdkit (not instrumented) must run with the sanitizer
#   runtimes preloaded.  Sets NBDKIT_PRELOAD (the runtimes, empty for a
#   plain build) and NBDKIT_CMD (an array: the command that runs nbdkit so,
#   always starting with env), and exports ASAN_OPTIONS and UBSAN_OPTIONS,
#   or TSAN_OPTIONS, so that any report stops the server; reports go to
#   LOGDIR/asan.* or LOGDIR/tsan.* when LOGDIR is given, else to stderr.
#   Commands run by --run (the clients) get no preload.
gr_sanitizer_env ()
{
  local plugin=$1 logdir=${2:-} lib p log= nbdkit ldso
  NBDKIT_PRELOAD=
  NBDKIT_CMD=(env nbdkit)
  # gcc links libasan into a shared object, but leaves TSan's symbols
  # undefined: look for those.
  if [ -f "$plugin" ] && nm -D "$plugin" 2>/dev/null | grep -q ' U __tsan_init'; then
    NBDKIT_PRELOAD=$(${CC:-gcc} -print-file-name=libtsan.so)
    # Through the dynamic loader's --preload, not LD_PRELOAD: nbdkit's
    # children (the /bin/sh of a captive --run) must not inherit libtsan,
    # dash and bash crash with it preloaded (their main calls setjmp
    # before anything has initialised the runtime: a jump to address 0).
    if nbdkit=$(command -v nbdkit); then
      ldso=$(readelf -l "$nbdkit" | sed -n 's/.*program interpreter: \(.*\)]$/\1/p')
      NBDKIT_CMD=(env "$ldso" --preload "$NBDKIT_PRELOAD" "$nbdkit")
    fi
    [ -n "$logdir" ] && log=" log_path=$logdir/tsan"
    # No lock-order detector: a batch of stripes (a rebuild's, a scrub's,
    # a large write's) holds up to the whole stripe lock table, and TSan's
    # detector stops with a CHECK failure beyond 64 locks held by one
    # thread.  The table is always locked in its order (exec.c).
    export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS }halt_on_error=1 detect_deadlocks=0$log"
    echo "$0: plugin built with ThreadSanitizer, nbdkit run as: ${NBDKIT_CMD[*]}"
  elif [ -f "$plugin" ] && ldd "$plugin" 2>/dev/null | grep -q libasan; then
    for lib in libasan.so libubsan.so; do
      p=$(${CC:-gcc} -print-file-name=$lib)
      if [ -f "$p" ]; then
        NBDKIT_PRELOAD=${NBDKIT_PRELOAD:+$NBDKIT_PRELOAD:}$p
      fi
    done
    NBDKIT_CMD=(env LD_PRELOAD="$NBDKIT_PRELOAD" nbdkit)
    [ -n "$logdir" ] && log=:log_path=$logdir/asan
    # nbdkit itself is not instrumented and keeps some allocations until
    # exit, so leak checking is off unless asked for.
    export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}:abort_on_error=1:halt_on_error=1:protect_shadow_gap=0$log"
    export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1$log"
    echo "$0: plugin built with sanitizers, nbdkit LD_PRELOAD=$NBDKIT_PRELOAD"
  fi
}

# _exit_deadlocked PID: true if PID is a single-threaded process asleep
# on a futex, repeatedly: nothing can ever wake it (nbdkit uses no
# process-shared futexes).  That is the signature of a known deadlock in
# exit() when nbdkit runs with libasan preloaded (make SANITIZE=1): after
# the plugin called strerror (even through %m), glibc's setlocale lock is
# found corrupt in p11-kit's destructor (freelocale) during _dl_fini.  It
# happens after nbdkit has unloaded the plugin, so killing the process
# then loses no sanitizer report (leak checking is off).
_exit_deadlocked ()
{
  local pid=$1 j
  for (( j = 0; j < 5; j++ )); do
    [ "$(ls "/proc/$pid/task" 2>/dev/null | wc -l)" = 1 ] || return 1
    grep -q futex "/proc/$pid/wchan" 2>/dev/null || return 1
    sleep 0.1
  done
  return 0
}

# gr_nbdkit ARGS...: run nbdkit in the foreground, with the sanitizer
# preload when the plugin needs it.  Under the preload nbdkit can hang in
# exit() (above); the --run command's exit status is then recorded on
# the side, the hung process killed, and that status returned, so captive
# runs (nbdkit -U - ... --run CMD) behave as without sanitizers.
gr_nbdkit ()
{
  local args=() a next_is_run=0 sf pid rc p killed=0
  if [ -z "${NBDKIT_PRELOAD:-}" ]; then
    command nbdkit "$@"   # the binary, even where a function wraps it
    return
  fi
  sf=$(mktemp)
  for a in "$@"; do
    if [ "$next_is_run" = 1 ]; then
      a="{ unset LD_PRELOAD; $a
}; _gr_s=\$?; echo \$_gr_s > '$sf'; exit \$_gr_s"
      next_is_run=0
    fi
    [ "$a" = --run ] && next_is_run=1
    args+=("$a")
  done
  "${NBDKIT_CMD[@]}" "${args[@]}" &
  pid=$!
  # In captive mode nbdkit forks: the hang can be in the server child.
  while kill -0 "$pid" 2>/dev/null; do
    for p in "$pid" $(pgrep -P "$pid"); do
      if _exit_deadlocked "$p"; then
        echo "$0: note: nbdkit pid $p deadlocked in exit() (known libasan/p11-kit issue), killed" >&2
        kill -9 "$p" 2>/dev/null
        killed=1
      fi
    done
    sleep 0.2
  done
  wait "$pid"
  rc=$?
  # After a kill, the recorded status of the --run command is the truth.
  if [ "$killed" = 1 ] && [ -s "$sf" ]; then
    rc=$(cat "$sf")
  fi
  rm -f "$sf"
  return "$rc"
}
