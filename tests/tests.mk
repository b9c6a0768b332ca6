# SPDX-License-Identifier: BSD-3-Clause
# tests/ - integration tests of the plugin through NBD (see tests/functions.sh).
#   tests/gpuraid-check    offline parity checker (links the gf/ and raidmap/ libs)
#   tests/test-concurrent  concurrent libnbd writers (driven by test-concurrent.sh)

tests/gpuraid-check: tests/gpuraid-check.o $(LIBGF) $(LIBMAP)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(GF_LDLIBS)

tests/test-concurrent: tests/test-concurrent.o
	$(CC) $(LDFLAGS_ALL) -o $@ $^ -lnbd

TESTS_PROGS = tests/gpuraid-check tests/test-concurrent

# Cheapest first.  All but test-bench-ratios.sh, test-sanitize-report.sh
# and test-racecheck-filter.sh need the plugin (and skip loudly without
# it).
TESTS_SCRIPTS = \
	tests/test-gpuraid-check.sh \
	tests/test-structure.sh \
	tests/test-bench-ratios.sh \
	tests/test-sanitize-report.sh \
	tests/test-racecheck-filter.sh \
	tests/test-nbdbench.sh \
	tests/test-concurrent-selftest.sh \
	tests/test-dump-plugin.sh \
	tests/test-install.sh \
	tests/test-deb.sh \
	tests/test-docs.sh \
	tests/test-bad-input.sh \
	tests/test-flush-fua.sh \
	tests/test-random-io.sh \
	tests/test-trim-zero.sh \
	tests/test-extents.sh \
	tests/test-stale.sh \
	tests/test-member-order.sh \
	tests/test-sb-crash.sh \
	tests/test-failed-array.sh \
	tests/test-write-hole.sh \
	tests/test-crash-loop.sh \
	tests/test-runtime-failure.sh \
	tests/test-member-eio.sh tests/test-read-errors.sh \
	tests/test-degraded.sh \
	tests/test-concurrent.sh \
	tests/test-backends.sh \
	tests/test-mount.sh \
	tests/test-resync.sh \
	tests/test-bitmap.sh \
	tests/test-control.sh \
	tests/test-events.sh \
	tests/test-rebuild.sh \
	tests/test-rebuild-resume.sh tests/test-rebuild-crash.sh \
	tests/test-rebuild-gpu-sums.sh \
	tests/test-readd.sh tests/test-written.sh tests/test-scan.sh \
	tests/test-replace-live.sh \
	tests/test-crash-corrupt.sh \
	tests/test-scrub.sh \
	tests/test-integrity.sh \
	tests/test-spare.sh \
	tests/test-fault.sh \
	tests/test-remote.sh \
	tests/test-remote-tls.sh \
	tests/test-drill.sh \
	tests/test-group-commit.sh \
	tests/test-join.sh \
	tests/test-accel-auto.sh \
	tests/test-request-pin.sh \
	tests/test-direct-io.sh \
	tests/test-gpu-array.sh

CHECK_PROGS += $(TESTS_PROGS)
CHECK_TESTS += $(TESTS_SCRIPTS)
# make check-long: the crash tests at length (hundreds of kill -9, more
# geometries); about half an hour on two cores.
LONG_TESTS += tests/test-sb-crash.sh tests/test-write-hole.sh \
              tests/test-crash-loop.sh tests/test-crash-corrupt.sh
LONG_ENV = CRASHES=40 \
  GEOMETRIES="4:2:16384:rs 2:1:4096:crs 3:3:4096:rs 6:2:65536:crs 1:1:4096:rs 4:2:16384:rs:gpu"

# Concurrent requests, for `make TSAN=1 check-tsan` (tests that start
# nbdkit in the background: under a preloaded libtsan the shell of a
# captive `nbdkit --run` crashes, so those cannot run there).
TSAN_TESTS += tests/test-concurrent.sh tests/test-group-commit.sh \
              tests/test-member-eio.sh tests/test-accel-auto.sh \
              tests/test-bitmap.sh tests/test-control.sh tests/test-rebuild.sh \
              tests/test-scrub.sh tests/test-spare.sh tests/test-integrity.sh \
              tests/test-request-pin.sh nbdkit-plugin/test-router \
              nbdkit-plugin/test-scratch tests/test-rebuild-gpu-sums.sh \
              tests/test-rebuild-crash.sh tests/test-join.sh \
              nbdkit-plugin/test-join
# On the GPU machine: GPU parity inside the array (skips without a GPU).
GPU_TESTS += tests/test-gpu-array.sh tests/test-gpu-request-pin.sh
CLEAN_FILES += $(TESTS_PROGS) tests/logs/*.log
