# Session 61, call 5 (the tree of d5275e5 with c59481d): bench-gpu (r), then 10+4 accel=gpu at 4 GiB with request buffers page-locked and not (-D gpuraid.pin_requests=0), the request-pin account from the logs.
source .device/unpack.sh >/dev/null
QUICK=1 BENCH_ONLY=r timeout 200 gpu/bench-gpu 2>&1 | sed -n '/^(r)/,/small launches alone/p' > $OUT/r.log; cat $OUT/r.log
for f in "" "-D gpuraid.pin_requests=0"; do
  echo "=== FLAGS=$f"
  rm -rf /tmp/lg; FLAGS="$f" LOGS=/tmp/lg STATS=1 SERVERS="10:4:gpu" CONNS="8 16" SEQ=4G REPEAT=1 scripts/bench-connections 2>&1 | grep -E "^row|stats: .*(read|write)," 
  grep -h "request buffers page-locked\|page-locked scratch" /tmp/lg/*.log | sed 's/.*gpuraid: //'
done > $OUT/c5.log 2>&1
cat $OUT/c5.log
