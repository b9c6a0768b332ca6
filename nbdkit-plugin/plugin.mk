# SPDX-License-Identifier: BSD-3-Clause
# nbdkit-plugin/ - the gpuraid nbdkit plugin.
PLUGIN_SO = nbdkit-plugin/nbdkit-gpuraid-plugin.so
# The data path, top-down: gpuraid (callbacks) -> io (requests) -> plan
# (what to do) -> exec (doing it; a job's batches in lanes) -> members
# (member I/O and state) and coding (where coding runs); array opens and
# closes (assemble decides, replay and resync repair); the jobs (rebuild,
# scrub, resync) run on one skeleton (job) whose batches are plans;
# heal owns them; control serves gpuraidctl; config, calibrate, gpudev,
# fakegpu, log, uring beside.  docs/design.md is the map.
# members do their I/O through disk (local files; remote: NBD exports).
PLUGIN_OBJS = $(addprefix nbdkit-plugin/, gpuraid.o config.o array.o \
              assemble.o resync.o journal.o bitmap.o io.o extents.o plan.o plan-jobs.o exec.o \
              exec-lanes.o job.o replay.o \
              members.o replacing.o disk.o remote.o fullio.o control.o \
              status.o pace.o rebuild.o scrub.o heal.o \
              coding.o scratch.o \
              steps.o calibrate.o gpudev.o fakegpu.o log.o uring.o \
              superblock.o)

# liburing (optional): member I/O in batches.  NOURING=1 leaves it out.
ifneq ($(NOURING),1)
URING_LIBS := $(shell pkg-config --libs liburing 2>/dev/null)
endif

# libnbd (optional): remote members (member=nbd://...).  NONBD=1 leaves it
# out.
ifneq ($(NONBD),1)
LIBNBD_CFLAGS := $(shell pkg-config --cflags libnbd 2>/dev/null)
LIBNBD_LIBS := $(shell pkg-config --libs libnbd 2>/dev/null)
endif

# Callbacks have fixed signatures: unused parameters are normal there.
$(PLUGIN_OBJS) nbdkit-plugin/test-superblock.o nbdkit-plugin/test-plan.o \
nbdkit-plugin/test-assemble.o nbdkit-plugin/test-scratch.o \
nbdkit-plugin/test-pace.o: \
  CFLAGS_ALL += -I. -Wno-unused-parameter
# Build options, each confined to the one file that has stubs for it.
nbdkit-plugin/uring.o: CFLAGS_ALL += $(if $(URING_LIBS),-DGR_HAVE_URING)
nbdkit-plugin/remote.o: CFLAGS_ALL += $(if $(LIBNBD_LIBS),-DGR_HAVE_LIBNBD \
                                      $(LIBNBD_CFLAGS))
nbdkit-plugin/gpudev.o: CFLAGS_ALL += $(if $(HAVE_CUDA),$(GPU_CPPFLAGS))

# raidmap.mk is included after this file: name its library literally.
$(PLUGIN_SO): $(PLUGIN_OBJS) raidmap/libgrmap.a $(LIBGF) \
              $(if $(HAVE_CUDA),$(LIBGPU)) nbdkit-plugin/plugin.syms
	$(CC) $(LDFLAGS_ALL) -shared \
	  -Wl,--version-script=nbdkit-plugin/plugin.syms -o $@ \
	  $(PLUGIN_OBJS) raidmap/libgrmap.a $(LIBGF) $(GF_LDLIBS) \
	  $(if $(HAVE_CUDA),$(LIBGPU) $(GPU_LDLIBS)) $(URING_LIBS) \
	  $(LIBNBD_LIBS)

# Unit tests without nbdkit.
nbdkit-plugin/test-superblock: nbdkit-plugin/test-superblock.o \
                               nbdkit-plugin/superblock.o
	$(CC) $(LDFLAGS_ALL) -o $@ $^ -lisal

nbdkit-plugin/test-plan: nbdkit-plugin/test-plan.o nbdkit-plugin/plan.o \
                         nbdkit-plugin/plan-jobs.o \
                         nbdkit-plugin/steps.o \
                         raidmap/libgrmap.a $(LIBGF)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(GF_LDLIBS)

nbdkit-plugin/test-assemble: nbdkit-plugin/test-assemble.o \
                             nbdkit-plugin/assemble.o \
                             nbdkit-plugin/superblock.o raidmap/libgrmap.a
	$(CC) $(LDFLAGS_ALL) -o $@ $^ -lisal

nbdkit-plugin/test-scratch: nbdkit-plugin/test-scratch.o \
                            nbdkit-plugin/scratch.o
	$(CC) $(LDFLAGS_ALL) -o $@ $^

nbdkit-plugin/test-pace: nbdkit-plugin/test-pace.o nbdkit-plugin/pace.o
	$(CC) $(LDFLAGS_ALL) -o $@ $^ -lpthread

PLUGIN_TESTS = nbdkit-plugin/test-superblock nbdkit-plugin/test-plan \
               nbdkit-plugin/test-assemble nbdkit-plugin/test-scratch \
               nbdkit-plugin/test-pace
CHECK_PROGS += $(PLUGIN_TESTS)
CHECK_TESTS += $(PLUGIN_TESTS) nbdkit-plugin/test-sb-state.sh \
               nbdkit-plugin/test-degraded-reads.sh \
               nbdkit-plugin/test-gpu-fallback.sh
CLEAN_FILES += $(PLUGIN_TESTS)
