#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# make check-gpu-sanitize's verdict (gpu/sanitize-report) on memcheck
# logs made here in the form compute-sanitizer writes them: the failed
# calls test-gpu makes on purpose alone pass; a bad access, a leak, the
# same failed call from elsewhere, more errors in the summary than
# reports, or a log without its summary fail, the other reports printed.
# Needs nothing built.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
report=$top/gpu/sanitize-report
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail () { echo "$0: FAIL: $*"; exit 1; }

# The two reports of one unregister of memory never registered, from
# function $1 (as memcheck printed them on the H200, session 64).
purposeful () {
  cat <<LOG
========= Program hit cudaErrorHostMemoryNotRegistered (error 713) due to "pointer does not correspond to a registered memory region" on CUDA API call to cudaHostUnregister.
=========     Saved host backtrace up to driver entry point at error
=========         Host Frame: gr_gpu_host_unregister [0x1d884] in test-gpu
=========         Host Frame: $1 in test-gpu.c:1384 [0x116a0] in test-gpu
=========         Host Frame: main in test-gpu.c:2016 [0xad09] in test-gpu
========= 
========= Program hit cudaErrorHostMemoryNotRegistered (error 713) due to "pointer does not correspond to a registered memory region" on CUDA API call to cudaGetLastError.
=========     Saved host backtrace up to driver entry point at error
=========         Host Frame: gr_gpu_fail(cudaError, char const*) [0x18143] in test-gpu
=========         Host Frame: $1 in test-gpu.c:1384 [0x116a0] in test-gpu
=========         Host Frame: main in test-gpu.c:2016 [0xad09] in test-gpu
========= 
LOG
}
bad_read () {
  cat <<'LOG'
========= Invalid __global__ read of size 16 bytes
=========     at gr_jit+0x1f0
=========     by thread (5,0,0) in block (2,0,0)
=========     Address 0x7f0000001000 is out of bounds
========= 
LOG
}
leak () {
  cat <<'LOG'
========= Leaked 4096 bytes at 0x7f1200000000
=========     Saved host backtrace up to driver entry point at cudaMalloc time
=========         Host Frame: slot_setup [0x1a2b3] in test-gpu
========= 
LOG
}
# log NAME ERRORS PARTS...: a log of those parts and the summary's count
log () {
  local name=$1 errors=$2
  shift 2
  {
    echo "========= COMPUTE-SANITIZER"
    echo "test-gpu: TEST_SEED=1"
    for part in "$@"; do "$part"; echo "  some test output"; done
    echo "test-gpu: 847 checks, 0 failed"
    echo "========= LEAK SUMMARY: 0 bytes leaked in 0 allocations"
    echo "========= ERROR SUMMARY: $errors errors"
  } > "$tmp/$name"
}
stale () { purposeful run_stale_error; }
reglist () { purposeful run_reg_list; }
elsewhere () { purposeful run_many; }
none () { :; }

# expect NAME STATUS [TEXT]: the verdict's exit status, and TEXT in what
# it printed
expect () {
  local out st=0
  out=$("$report" "$tmp/$1" 2>&1) || st=$?
  [ "$st" = "$2" ] || fail "$1: exit $st, wanted $2: $out"
  [ -z "${3:-}" ] || grep -qF -- "$3" <<<"$out" || fail "$1: no '$3' in: $out"
  echo "ok: $1 (exit $st)"
}

log clean 0 none
expect clean 0 "0 report(s) of the failed calls test-gpu makes on purpose, 0 other(s)"
log purposeful 4 stale reglist
expect purposeful 0 "4 report(s) of the failed calls test-gpu makes on purpose, 0 other(s)"
log bad-read 5 stale bad_read reglist
expect bad-read 1 "Invalid __global__ read of size 16 bytes"
grep -q "1 other(s)" <("$report" "$tmp/bad-read" || true) || fail "bad-read: not one other report"
log leak 1 leak
expect leak 1 "Leaked 4096 bytes"
log elsewhere 2 elsewhere
expect elsewhere 1 "Host Frame: run_many"
log uncounted 3 stale
expect uncounted 1 "summary: 3 error(s)"
head -n -1 "$tmp/purposeful" > "$tmp/cut"
expect cut 1 "no summary (the run did not end)"
expect missing 1 "cannot read it"
echo "test-sanitize-report: all passed"
