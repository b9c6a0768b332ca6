#!/bin/bash
# does the GPU's DMA of host memory slow the CPU side's degraded reads?
cd "$(dirname "$0")/../.."
source .device/unpack.sh >/dev/null
X=${X:-$PWD/.device/exp}  # dmaload built from docs/measurements/dma-load.cu
run () {  # accel dmarate
  a=$1 r=$2
  if [ "$r" != 0 ]; then
    ( for i in $(seq 600); do
        pid=$(for p in $(pgrep nbdkit); do c=$(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null); [[ $c == *accel=$a* && $c != *create=true* ]] && echo $p; done | head -1)
        [ -n "$pid" ] && break; sleep 0.1
      done; $X/dmaload $r 7 ) &
  fi
  echo "== accel=$a, background DMA $r GB/s each way"
  K=8 M=8 LOST=8 VARIANTS="accel=$a" CONNS=16 SECS=6 SIZE=4G scripts/bench-steady-reads 2>&1 | grep -E "CPU-s/GB|GPU engine"
  wait
}
$X/dmaload 20 2
for round in 1 2; do
  run cpu 0; run cpu 12; run gpu 0; run cpu 24
done
