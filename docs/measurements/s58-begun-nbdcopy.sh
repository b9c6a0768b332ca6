#!/bin/bash
# Session 58: the plugin with a request's plans begun together (and parts
# taken by the first to reach them) against d22e512's, with nbdcopy (1 MiB
# requests from a tmpfs file, client-bound), 10+4, alternated once.
base=${BASE:-.device/exp/plugins/s58-base.so}
for which in new base; do
  echo "=== nbdcopy: $which"
  plugin=$PWD/nbdkit-plugin/nbdkit-gpuraid-plugin.so
  [ $which = base ] && plugin=$PWD/$base
  env GPURAID_PLUGIN=$plugin CLIENT=nbdcopy SERVERS="10:4:cpu 10:4:gpu" \
    CONNS="8 16" SEQ=8G REPEAT=2 scripts/bench-connections 2>&1 |
    grep -E "^row|x the MB/s"
done
