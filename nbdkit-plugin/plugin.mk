# SPDX-License-Identifier: BSD-3-Clause
# nbdkit-plugin/ - the gpuraid nbdkit plugin.
PLUGIN_SO = nbdkit-plugin/nbdkit-gpuraid-plugin.so
# The data path, top-down: gpuraid (callbacks) -> io (requests) -> plan
# (what to do; a job's batches too) -> exec (doing it; a job's batches
# in lanes) -> members (member I/O and state; members.c and
# members-rebuild.c) and coding (where coding runs); array opens and
# closes (the format library's assembly decides, replay and resync
# repair); the jobs (rebuild, scrub, resync) run on one skeleton (job)
# whose batches are plans; heal owns them; control serves gpuraidctl;
# config, calibrate, gpudev, fakegpu, log beside.  An access goes gr_io
# (plan) -> gr_mio (members) -> gr_dio (the storage library, storage/:
# local files and devices, io_uring, NBD exports).  The superblock, the
# bitmap's and journal's layout are the format library's (format/);
# bitmap.c and journal.c keep them at run time.  Linked with format/,
# storage/, raidmap/, gf/ and gpu/ (with CUDA).  docs/design.md is the
# map.
PLUGIN_OBJS = $(addprefix nbdkit-plugin/, gpuraid.o config.o array.o array-probe.o \
              resync.o journal.o bitmap.o bitmap-maps.o cksum.o exec-repair.o exec-cksum.o exec-times.o io.o join.o extents.o plan.o \
              plan-jobs.o plan-read.o exec.o exec-lanes.o exec-work.o job.o replay.o \
              members.o members-io.o members-rebuild.o control.o control-answer.o \
              status.o pace.o rebuild.o copy.o scrub.o heal.o heal-replace.o \
              coding.o coding-batch.o reqpin.o scratch.o pool.o \
              steps.o calibrate.o router.o gpudev.o fakegpu.o log.o events.o)

# Callbacks have fixed signatures: unused parameters are normal there.
$(PLUGIN_OBJS) nbdkit-plugin/test-plan.o nbdkit-plugin/test-scratch.o \
nbdkit-plugin/test-pace.o nbdkit-plugin/test-reqpin.o \
nbdkit-plugin/test-pool.o nbdkit-plugin/test-router.o \
nbdkit-plugin/test-join.o: \
  CFLAGS_ALL += -I. -Wno-unused-parameter
# A build option confined to the one file that has stubs for it (those
# of member storage are in storage/storage.mk).
nbdkit-plugin/gpudev.o: CFLAGS_ALL += $(if $(HAVE_CUDA),$(GPU_CPPFLAGS))

# raidmap.mk and storage.mk are included after this file: name their
# libraries literally.
$(PLUGIN_SO): $(PLUGIN_OBJS) $(LIBFORMAT) storage/libgrstorage.a \
              raidmap/libgrmap.a $(LIBGF) $(if $(HAVE_CUDA),$(LIBGPU)) \
              nbdkit-plugin/plugin.syms
	$(CC) $(LDFLAGS_ALL) -shared \
	  -Wl,--version-script=nbdkit-plugin/plugin.syms -o $@ \
	  $(PLUGIN_OBJS) $(LIBFORMAT) storage/libgrstorage.a \
	  raidmap/libgrmap.a $(LIBGF) $(GF_LDLIBS) $(FORMAT_LDLIBS) \
	  $(if $(HAVE_CUDA),$(LIBGPU) $(GPU_LDLIBS)) $(STORAGE_LDLIBS)

# Unit tests without nbdkit.
nbdkit-plugin/test-plan: nbdkit-plugin/test-plan.o nbdkit-plugin/plan.o \
                         nbdkit-plugin/plan-jobs.o nbdkit-plugin/plan-read.o \
                         nbdkit-plugin/steps.o nbdkit-plugin/pool.o \
                         raidmap/libgrmap.a $(LIBGF)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(GF_LDLIBS) -lpthread

nbdkit-plugin/test-scratch: nbdkit-plugin/test-scratch.o \
                            nbdkit-plugin/scratch.o
	$(CC) $(LDFLAGS_ALL) -o $@ $^

nbdkit-plugin/test-pace: nbdkit-plugin/test-pace.o nbdkit-plugin/pace.o
	$(CC) $(LDFLAGS_ALL) -o $@ $^ -lpthread

nbdkit-plugin/test-reqpin: nbdkit-plugin/test-reqpin.o \
                           nbdkit-plugin/reqpin.o
	$(CC) $(LDFLAGS_ALL) -o $@ $^ -lpthread

nbdkit-plugin/test-pool: nbdkit-plugin/test-pool.o nbdkit-plugin/pool.o
	$(CC) $(LDFLAGS_ALL) -o $@ $^ -lpthread

nbdkit-plugin/test-join: nbdkit-plugin/test-join.o nbdkit-plugin/join.o \
                         raidmap/libgrmap.a
	$(CC) $(LDFLAGS_ALL) -o $@ $^ -lpthread

nbdkit-plugin/test-router: nbdkit-plugin/test-router.o \
                           nbdkit-plugin/router.o
	$(CC) $(LDFLAGS_ALL) -o $@ $^ -lpthread

PLUGIN_TESTS = nbdkit-plugin/test-plan nbdkit-plugin/test-scratch \
               nbdkit-plugin/test-pace nbdkit-plugin/test-reqpin \
               nbdkit-plugin/test-pool nbdkit-plugin/test-router \
               nbdkit-plugin/test-join
CHECK_PROGS += $(PLUGIN_TESTS)
CHECK_TESTS += $(PLUGIN_TESTS) nbdkit-plugin/test-sb-state.sh \
               nbdkit-plugin/test-degraded-reads.sh \
               nbdkit-plugin/test-gpu-fallback.sh
CLEAN_FILES += $(PLUGIN_TESTS)
