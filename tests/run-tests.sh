#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# gpuraid test runner: runs each test given on the command line with a
# timeout, keeps its output in tests/logs/, and ends with the line
# "N passed, N failed, N skipped".  Exit status 77 from a test means skip
# (it must print why); anything else non-zero is a failure.
#   TEST_TIMEOUT  seconds per test (default 600)
#   VERBOSE=1     print every test's output, not only failures'
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
logs=$top/tests/logs
mkdir -p "$logs"
timeout_s=${TEST_TIMEOUT:-600}
pass=0 fail=0 skip=0
failed=()
for t in "$@"; do
  name=$(echo "$t" | tr '/' '_')
  log=$logs/$name.log
  start=$(date +%s)
  timeout --kill-after=10 "$timeout_s" "$top/$t" >"$log" 2>&1 </dev/null
  rc=$?
  secs=$(( $(date +%s) - start ))
  case $rc in
    0)  pass=$((pass + 1)); echo "PASS: $t (${secs}s)" ;;
    77) skip=$((skip + 1))
        why=$(grep -i 'skip' "$log" | tail -n 1)
        echo "SKIP: $t: ${why:-no reason printed}" ;;
    124|137) fail=$((fail + 1)); failed+=("$t"); echo "FAIL: $t (timed out after ${timeout_s}s)" ;;
    *)  fail=$((fail + 1)); failed+=("$t"); echo "FAIL: $t (exit $rc, ${secs}s)" ;;
  esac
  if [ "$rc" != 0 ] && [ "$rc" != 77 ] || [ "${VERBOSE:-0}" = 1 ]; then
    echo "---- $log (last 40 lines)"; tail -n 40 "$log"; echo "----"
  fi
done
echo "${pass} passed, ${fail} failed, ${skip} skipped"
[ "$fail" -eq 0 ]
