# Session 61, call 7: host memory page-locked in a context of the
# engine's own (own) or in the primary context (primary: S61_PRIMARY=1,
# a temporary switch in this build only), the same plugin otherwise
# (d5275e5: registrations made by each thread's first request, waits
# accounted); accel=gpu, 4 GiB at 8 and 16 connections, two rounds
# alternated; then the test-gpu tier.
source .device/unpack.sh >/dev/null
plugin=$PWD/.device/exp/plugins/s61-envprimary.so
for round in 1 2; do
  for v in own primary; do
    [ $v = own ] && unset S61_PRIMARY || export S61_PRIMARY=1
    for set in "10:4:gpu|0" "16:16:gpu|8"; do
      rm -rf /tmp/lg
      echo "=== round $round, $v, ${set%|*} lost ${set#*|}"
      GPURAID_PLUGIN=$plugin STATS=1 LOGS=/tmp/lg SERVERS="${set%|*}" \
        CONNS="8 16" SEQ=4G REPEAT=2 LOST=${set#*|} \
        scripts/bench-connections 2>&1 | grep -E "^row|GPU engine"
      grep -h "request buffers page-locked:\|host memory is page-locked" \
        /tmp/lg/*.log | sed 's/.*gpuraid: //'
    done
  done
done > $OUT/c7.log 2>&1
unset S61_PRIMARY
grep -E "^===|^row|request buffers|host memory" $OUT/c7.log | cut -c1-330
timeout 330 gpu/test-gpu > $OUT/tier.log 2>&1; tail -3 $OUT/tier.log
