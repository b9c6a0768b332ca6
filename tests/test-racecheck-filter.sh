#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# make check-gpu-sanitize-racecheck instruments only the kernels named by
# its --kernel-name filters (gpu/gpu.mk): every kernel of the engine that
# has shared memory (__shared__, in CUDA source or in the source jit.cu
# compiles at run time) must be among them, or racecheck would pass
# without looking at it.  Reads the sources; needs nothing built.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
fail () { echo "$0: FAIL: $*"; exit 1; }

# The filters: the names after kns= in the racecheck recipe.
filters=$(sed -n '/^check-gpu-sanitize-racecheck:/,/^[^\t]/p' "$top/gpu/gpu.mk" |
  grep -o 'kns=[A-Za-z0-9_]*' | sed 's/^kns=//' | sort -u)
[ -n "$filters" ] || fail "no --kernel-name kns= filter in gpu/gpu.mk's racecheck recipe"

# Each kernel (the first name before a "(" after __global__, on its line
# or the next, __launch_bounds__ aside; jit.cu's kernel is in a string)
# whose body has __shared__, in the sources of the engine's objects.
kernels () {
  awk '
    FNR == 1 { kernel = ""; want = 0 }
    /__global__/ {
      want = 1
      sub (/.*__global__/, "")
      gsub (/__launch_bounds__[ ]*\([^)]*\)/, "")
    }
    want {
      if (match ($0, /[A-Za-z_][A-Za-z0-9_]*[ ]*\(/)) {
        name = substr ($0, RSTART, RLENGTH)
        sub (/[ ]*\($/, "", name)
        kernel = name
        want = 0
      }
    }
    /__shared__/ && kernel != "" { print kernel }
  ' "$@" | sort -u
}
srcs=()
for o in $(sed -n 's/^GPU_OBJS = //p' "$top/gpu/gpu.mk"); do
  srcs+=("$top/${o%.o}.cu")
done
[ "${#srcs[@]}" -ge 4 ] || fail "GPU_OBJS in gpu/gpu.mk: ${srcs[*]:-none}"
found=$(kernels "${srcs[@]}")
[ -n "$found" ] || fail "no kernel with shared memory found in ${srcs[*]}"
for kern in $found; do
  grep -qx "$kern" <<<"$filters" ||
    fail "kernel $kern has shared memory but check-gpu-sanitize-racecheck does not instrument it (filters: $(echo $filters))"
  echo "ok: $kern instrumented by racecheck"
done

# The finder itself: it names the kernels with shared memory, only
# those, each file's on its own (a file's __shared__ before its first
# kernel is not the previous file's last).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%s\n' 'static __global__ void __launch_bounds__ (256)' \
  'other_kernel (int *p)' '{' '  __shared__ int t[32];' '}' \
  'static __global__ void' 'plain_kernel (int *p)' '{' '}' \
  '__global__ void one_line (int *p) {' '  __shared__ int u[32];' '}' \
  > "$tmp/x.cu"
[ "$(kernels "$tmp/x.cu" | tr '\n' ' ')" = "one_line other_kernel " ] ||
  fail "the finder saw '$(kernels "$tmp/x.cu")' in a kernel with shared memory and one without"
printf '%s\n' 'static __global__ void' 'plain_kernel (int *p)' '{' '}' \
  > "$tmp/w.cu"
printf '%s\n' '/* __shared__ tables: none in this file */' > "$tmp/y.cu"
[ -z "$(kernels "$tmp/w.cu" "$tmp/y.cu")" ] ||
  fail "the finder saw '$(kernels "$tmp/w.cu" "$tmp/y.cu")' in a kernel without shared memory and a file without a kernel"
echo "ok: the finder names only the kernels with shared memory"
echo "test-racecheck-filter: all passed"
