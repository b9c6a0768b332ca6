# nbdkit-plugin/ - the gpuraid nbdkit plugin.
PLUGIN_SO = nbdkit-plugin/nbdkit-gpuraid-plugin.so
PLUGIN_OBJS = nbdkit-plugin/gpuraid.o nbdkit-plugin/array.o nbdkit-plugin/plan.o \
              nbdkit-plugin/accel.o \
              nbdkit-plugin/io.o nbdkit-plugin/superblock.o nbdkit-plugin/uring.o

# liburing (optional): parallel chunk reads.  NOURING=1 leaves it out.
ifneq ($(NOURING),1)
URING_LIBS := $(shell pkg-config --libs liburing 2>/dev/null)
endif
URING_CPPFLAGS := $(if $(URING_LIBS),-DGR_HAVE_URING)

# Callbacks have fixed signatures: unused parameters are normal there.
# GPU_CPPFLAGS (gpu/gpu.mk) brings -DGR_HAVE_CUDA when CUDA is built.
$(PLUGIN_OBJS) nbdkit-plugin/test-superblock.o: \
  CFLAGS_ALL += -I. -Wno-unused-parameter $(URING_CPPFLAGS) \
                $(if $(HAVE_CUDA),$(GPU_CPPFLAGS))

# raidmap.mk is included after this file: name its library literally.
$(PLUGIN_SO): $(PLUGIN_OBJS) raidmap/libgrmap.a $(LIBGF) \
              $(if $(HAVE_CUDA),$(LIBGPU)) nbdkit-plugin/plugin.syms
	$(CC) $(LDFLAGS_ALL) -shared \
	  -Wl,--version-script=nbdkit-plugin/plugin.syms -o $@ \
	  $(PLUGIN_OBJS) raidmap/libgrmap.a $(LIBGF) $(GF_LDLIBS) \
	  $(if $(HAVE_CUDA),$(LIBGPU) $(GPU_LDLIBS)) $(URING_LIBS)

nbdkit-plugin/test-superblock: nbdkit-plugin/test-superblock.o \
                               nbdkit-plugin/superblock.o
	$(CC) $(LDFLAGS_ALL) -o $@ $^

CHECK_PROGS += nbdkit-plugin/test-superblock
CHECK_TESTS += nbdkit-plugin/test-superblock nbdkit-plugin/test-sb-state.sh \
               nbdkit-plugin/test-degraded-reads.sh \
               nbdkit-plugin/test-gpu-fallback.sh
CLEAN_FILES += nbdkit-plugin/test-superblock

nbdkit-plugin/test-plan: nbdkit-plugin/test-plan.o nbdkit-plugin/plan.o
	$(CC) $(LDFLAGS_ALL) -o $@ $^

nbdkit-plugin/test-plan.o: CFLAGS_ALL += -I.
CHECK_PROGS += nbdkit-plugin/test-plan
CHECK_TESTS += nbdkit-plugin/test-plan
CLEAN_FILES += nbdkit-plugin/test-plan
