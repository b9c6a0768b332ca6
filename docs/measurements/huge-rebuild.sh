#!/bin/bash
# Session 48's lead: the rebuild goal with members on a tmpfs of huge pages
# (its per-page bookkeeping and LRU activations 512 x fewer), against
# /dev/shm, in one call.  usage: .device/exp/huge-rebuild.sh [GEOM] [SIZE]
# (run after `source .device/unpack.sh`; output under $OUT)
geom=${1:-16:16} size=${2:-1G}
mkdir -p /mnt/huge
grep -q ' /mnt/huge ' /proc/mounts || mount -t tmpfs -o size=${HUGE_SIZE:-110G},huge=always tmpfs /mnt/huge || exit 1
for dir in ${DIRS:-/mnt/huge /dev/shm /mnt/huge /dev/shm}; do
  echo "== $dir"
  timeout 150 env BENCH_DIR=$dir ACCELS="gpu cpu" GEOMS=$geom MEMBER_SIZE=$size FG=0 \
    scripts/bench-rebuild 2>&1 | tee -a "${OUT:-/tmp}/huge-rebuild.log" |
    grep -E "rebuild (gpu|cpu)|gpu/cpu"
  grep -i shmemhugepages /proc/meminfo
done
