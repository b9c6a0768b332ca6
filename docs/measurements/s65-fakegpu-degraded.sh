#!/bin/bash
# Session 65, on the 2-core machine without a GPU: 8+8 reads with 8
# members lost, accel=cpu against the plugin's stand-in GPU (-D
# gpuraid.fake_gpu=2: a second CPU coder behind the GPU path, each
# submission 200 us longer as a round trip; with FAKE_AUTO=2 it also
# emulates page-locking nbdkit's buffers in place, as the real GPU path
# does).  The coding is ISA-L's on both sides, so the difference is what
# the GPU path's plugin side (gathering, hand-offs, page-locking) and the
# stand-in add.  Three reads of SEQ each side, then perf (-F 1999, frame
# pointers) over three more, the top symbols printed.
#   SEQ [1G]  C [8] connections  TH [4] nbdkit threads  FAKE_AUTO [2]
set -e
cd "$(dirname "$0")/../.."
P=$PWD/nbdkit-plugin/nbdkit-gpuraid-plugin.so
T=/dev/shm/s65fx; rm -rf $T; mkdir -p $T
bytes=$(numfmt --from=iec "${SEQ:-1G}"); C=${C:-8}; TH=${TH:-4}
msize=$(( bytes / 8 + bytes / 8 / 512 + 128 * 1048576 + 65 * 8 * 65536 ))
args=(m=8 chunk=64K)
for i in $(seq 0 15); do truncate -s $msize $T/d$i; args+=(member=$T/d$i); done
up () { for _ in $(seq 1 50); do [ -S $T/sock ] && return; sleep 0.2; done; exit 1; }
nbdkit -f -U $T/sock -P $T/pid -t "$TH" "$P" "${args[@]}" create=true accel=cpu 2>$T/log & up
scripts/nbdbench -m write -c "$C" -q 16 -b 1048576 -S "$bytes" "nbd+unix:///?socket=$T/sock" >/dev/null
kill "$(cat $T/pid)"; wait
for i in $(seq 0 7); do rm -f $T/d$i; done
for side in cpu fake; do
  extra=()
  [ $side = fake ] && extra=(-D gpuraid.fake_gpu=2 -D gpuraid.fake_gpu_us=200)
  [ $side = fake ] && [ "${FAKE_AUTO:-2}" != 0 ] && extra+=(-D gpuraid.fake_auto="${FAKE_AUTO:-2}")
  rm -f $T/sock
  nbdkit -f -U $T/sock -P $T/pid -t "$TH" "${extra[@]}" "$P" "${args[@]}" create=false accel=cpu 2>$T/log-$side & up
  pid=$(cat $T/pid)
  for r in 1 2 3; do
    echo "$side: $(scripts/nbdbench -m read -c "$C" -q 16 -b 1048576 -S "$bytes" -P "$pid" "nbd+unix:///?socket=$T/sock" | grep -o 'MBps=[0-9.]* \|srv_cpu_s=[0-9.]* srv_quarters_cpu_GB=[0-9.,]*' | tr '\n' ' ')"
  done
  perf record -q -F 1999 -g -p "$pid" -o $T/perf.data 2>/dev/null & pp=$!
  sleep 0.3
  for r in 1 2 3; do
    echo "$side, profiled: $(scripts/nbdbench -m read -c "$C" -q 16 -b 1048576 -S "$bytes" -P "$pid" "nbd+unix:///?socket=$T/sock" | grep -o 'MBps=[0-9.]* \|srv_cpu_s=[0-9.]*' | tr '\n' ' ')"
  done
  kill -INT $pp; wait $pp || true
  kill "$pid"; wait "$pid" || true
  echo "$side: the server's top symbols (self)"
  perf report -i $T/perf.data --no-children --sort dso,sym --stdio -g none 2>/dev/null | grep '%' | grep -v '^#' | head -20
done
rm -rf $T
