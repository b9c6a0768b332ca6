#!/bin/bash
# Session 49: the engine's copy rule (copy kernel only for jobs of short
# runs) against the copy kernel for every known page-locked job (before),
# on rebuilds and degraded reads; run after `source .device/unpack.sh`.
A=$PWD/.device/exp/plugin-always.so
echo "### rebuild 16+16 1G, gpu only (before = always, after = rule)"
GEOMS=16:16 .device/exp/ab-rebuild.sh "always|GPURAID_PLUGIN=$A|" "rule||" "always|GPURAID_PLUGIN=$A|" "rule||" "always|GPURAID_PLUGIN=$A|" "rule||"
echo "### degraded reads 8+8, 8 lost, 16 connections"
for p in always rule always rule; do
  echo "== $p"
  if [ $p = always ]; then export GPURAID_PLUGIN=$A; else unset GPURAID_PLUGIN; fi
  VARIANTS="accel=gpu" CONNS=16 SECS=6 SIZE=4G scripts/bench-steady-reads 2>&1 | grep -vE "^==> "
done
