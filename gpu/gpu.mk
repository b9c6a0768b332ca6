# SPDX-License-Identifier: BSD-3-Clause
# gpu/ - the CUDA coding engine (backend "cuda").
#   LIBGPU         gpu/libgrgpu.a, empty without CUDA
#   GPU_LDLIBS     what a program linking LIBGPU must also link
#   GPU_CPPFLAGS   -DGR_HAVE_CUDA when the engine is built
# Targets: check-gpu (gpu/test-gpu's tier: every kernel the engine can
# choose, a few minutes), check-gpu-long (its exhaustive parts, one make
# target each so that each fits a call on the GPU machine:
# check-gpu-long-default, -jit, -plain, -stage), check-gpu-sanitize
# (compute-sanitizer on QUICK=1 runs, in two parts that each fit a call:
# check-gpu-sanitize-memcheck, its reports judged by gpu/sanitize-report,
# and check-gpu-sanitize-racecheck), bench-gpu
# (gpu/bench-gpu).

ifeq ($(HAVE_CUDA),1)
LIBGPU = gpu/libgrgpu.a
GPU_CPPFLAGS = -DGR_HAVE_CUDA
GPU_LDLIBS = -L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt -lpthread -lstdc++
GPU_ARCH = -gencode arch=compute_90,code=sm_90 \
           -gencode arch=compute_90,code=compute_90
NVCCFLAGS = -O3 -std=c++17 -lineinfo $(GPU_ARCH) -Werror all-warnings \
            -Xcompiler -fPIC,-pthread,-Wall,-Wextra,-Werror,-Wshadow,-Wvla
GPU_OBJS = gpu/engine.o gpu/kernels.o gpu/jit.o gpu/cksum.o
COMPUTE_SANITIZER ?= $(CUDA_HOME)/bin/compute-sanitizer

gpu/%.o: gpu/%.cu $(HEADERS)
	$(NVCC) $(NVCCFLAGS) -c -o $@ $<

$(LIBGPU): $(GPU_OBJS)
	rm -f $@
	$(AR) rcs $@ $^

gpu/test-gpu: gpu/test-gpu.o $(LIBGPU) $(LIBGF)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(GF_LDLIBS) $(GPU_LDLIBS)

gpu/bench-gpu: gpu/bench-gpu.o $(LIBGPU) $(LIBGF)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(GF_LDLIBS) $(GPU_LDLIBS) -lm

bench-gpu: gpu/bench-gpu
	gpu/bench-gpu

# Built with the tests wherever CUDA is, so that a change to the engine's
# interface cannot leave the benchmark unbuildable unnoticed.
CHECK_PROGS += gpu/bench-gpu

# check-gpu-sanitize: two parts, one make target each so that each fits a
# call on the GPU machine.  memcheck's reports must all be of the failed
# CUDA calls test-gpu makes on purpose (run_stale_error, run_reg_list's
# second unregister), which it counts as errors: gpu/sanitize-report says
# so or prints the others.  racecheck looks for hazards on shared memory,
# so it instruments only the kernels that have it (the staged JIT kernels,
# the checksums'): with every kernel instrumented the tier outlasts a
# call (docs/performance.md).
check-gpu-sanitize: check-gpu-sanitize-memcheck check-gpu-sanitize-racecheck
check-gpu-sanitize-memcheck: gpu/test-gpu
	{ QUICK=1 $(COMPUTE_SANITIZER) --tool memcheck --leak-check full \
	    gpu/test-gpu; echo $$? > gpu/sanitize-memcheck.rc; } 2>&1 | \
	  tee gpu/sanitize-memcheck.log
	@r=$$(cat gpu/sanitize-memcheck.rc); [ "$$r" = 0 ] || \
	  { echo "$@: test-gpu under memcheck exited $$r"; exit 1; }
	gpu/sanitize-report gpu/sanitize-memcheck.log
check-gpu-sanitize-racecheck: gpu/test-gpu
	QUICK=1 $(COMPUTE_SANITIZER) --tool racecheck --error-exitcode 1 \
	  --kernel-name kns=gr_jit --kernel-name kns=cksum_kernel gpu/test-gpu
else
LIBGPU =
GPU_CPPFLAGS =
GPU_LDLIBS =

# Without CUDA, test-gpu is built all the same and skips.
gpu/test-gpu: gpu/test-gpu.o $(LIBGF)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(GF_LDLIBS)

bench-gpu check-gpu-sanitize check-gpu-sanitize-memcheck \
  check-gpu-sanitize-racecheck:
	@echo "$@: built without CUDA (no nvcc, or NOCUDA=1)"; exit 1
endif

gpu/test-gpu.o: CFLAGS_ALL += -I. $(GPU_CPPFLAGS)

GPU_TESTS += gpu/test-gpu
GPU_LONG_PARTS = default jit plain stage

check-gpu-long: $(addprefix check-gpu-long-,$(GPU_LONG_PARTS))
$(addprefix check-gpu-long-,$(GPU_LONG_PARTS)): check-gpu-long-%: gpu/test-gpu
	TEST_GPU_PART=$* gpu/test-gpu; r=$$?; [ $$r = 77 ] || exit $$r
CHECK_TESTS += gpu/test-gpu
CHECK_PROGS += gpu/test-gpu
CLEAN_FILES += gpu/test-gpu gpu/bench-gpu gpu/sanitize-memcheck.log \
  gpu/sanitize-memcheck.rc

.PHONY: check-gpu-sanitize check-gpu-sanitize-memcheck \
        check-gpu-sanitize-racecheck check-gpu-long \
        $(addprefix check-gpu-long-,$(GPU_LONG_PARTS))
