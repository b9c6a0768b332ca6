# Session 61, call 6: the registrar (reqpin's registrations off the
# requests' path) with page-locking in a context of its own, against
# 407f09a: two alternated rounds of s61-lockctx-ab.sh, the request-pin
# account from the new servers' logs, then the GPU tests.
source .device/unpack.sh >/dev/null
for order in "new base" "base new"; do
  rm -rf /tmp/ab
  OUT=/tmp/ab ORDER="$order" docs/measurements/s61-lockctx-ab.sh
  grep -h "request buffers page-locked:" /tmp/ab/logs-new/*.log | sed 's/.*gpuraid: //'
done > $OUT/ab.log 2>&1
grep -E "^===|x the MB/s|request buffers" $OUT/ab.log | cut -c1-400
TEST_GPU_PART=many timeout 200 gpu/test-gpu > $OUT/many.log 2>&1; tail -2 $OUT/many.log
tests/run-tests.sh tests/test-gpu-array.sh tests/test-gpu-request-pin.sh tests/test-join.sh 2>&1 | tail -4
