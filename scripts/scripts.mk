# SPDX-License-Identifier: BSD-3-Clause
# scripts/ - end-to-end demo and NBD benchmark.
#   make demo    scripts/demo: 4+2 array, mount, fail two members, verify
#   make bench   scripts/bench: array vs nbdkit file plugin through NBD

NBD_CFLAGS := $(shell pkg-config --cflags libnbd 2>/dev/null)
NBD_LIBS := $(shell pkg-config --libs libnbd 2>/dev/null || echo -lnbd)

scripts/nbdbench.o: CFLAGS += $(NBD_CFLAGS)

scripts/nbdbench: scripts/nbdbench.o
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(NBD_LIBS)

# Both build `all` first.  demo must work on a fresh machine, so it installs
# the dependencies before building (as `make check` does): `deps` first, then
# `all` in a second make that sees the installed headers.  scripts/demo runs
# install-deps and make again itself; both are no-ops by then.
demo: deps
	$(MAKE) --no-print-directory all
	scripts/demo

bench: all scripts/nbdbench
	scripts/bench

CLEAN_FILES += scripts/nbdbench
# tests/test-accel-auto.sh reads with it.
CHECK_PROGS += scripts/nbdbench

# On a GPU machine: 10+4 and 8+8 arrays on tmpfs, accel=gpu vs accel=cpu.
bench-array-gpu: all scripts/nbdbench
	scripts/bench-array-gpu

# NBD with 1, 4, 8 and 16 connections: file plugin and arrays, MB/s and
# server CPU-s/GB (docs/performance.md).
bench-connections: all scripts/nbdbench
	scripts/bench-connections

# Where the server's CPU goes on writes (perf): file plugin and arrays,
# accel=cpu and gpu, CPU-s/GB in categories (docs/performance.md).
bench-cpu-profile: all scripts/nbdbench
	scripts/bench-cpu-profile

# Rebuild of one member onto a blank file, accel=cpu and gpu.
bench-rebuild: all scripts/nbdbench
	scripts/bench-rebuild

# Silent corruption injected against block checksums (docs/reliability.md).
bench-corruption: all
	scripts/bench-corruption

# The cost of block checksums: integrity=on against off, same run.
bench-integrity: all scripts/nbdbench
	scripts/bench-integrity

# bench-rebuild alternately with another build (BASE_PLUGIN=) and this one:
# medians and before/after in the same run.
bench-alternate: all scripts/nbdbench
	scripts/bench-alternate

# A 4+2 array on local files, on NBD exports (remote members) and on the
# same exports through nbdfuse (docs/performance.md).
bench-remote: all scripts/nbdbench
	scripts/bench-remote

# Direct I/O members (direct=on) against buffered ones, on tmpfs files and
# loop devices (DISK_DIR, STORAGES: on a disk too), accel=cpu and gpu: MB/s,
# the server's and the machine's CPU-s/GB, the page cache's growth, a
# rebuild (docs/performance.md).
bench-direct: all scripts/nbdbench
	scripts/bench-direct

# Degraded reads on connections kept open: accel=cpu, gpu and gpu with
# request buffers not page-locked (docs/performance.md).
bench-steady-reads: all scripts/nbdbench
	scripts/bench-steady-reads

.PHONY: bench-steady-reads bench-direct bench-alternate bench-corruption bench-integrity bench-array-gpu bench-connections bench-cpu-profile bench-rebuild \
        bench-remote

# Rebuild of an array 10 % written against fully written, re-add after 1 %
# written against a full rebuild (docs/performance.md).
bench-written: all
	scripts/bench-written
