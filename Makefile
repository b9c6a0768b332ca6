# SPDX-License-Identifier: BSD-3-Clause
# gpuraid - top-level Makefile (GNU make, non-recursive).
#
#   make                 build nbdkit-plugin/nbdkit-gpuraid-plugin.so
#   make check           all tests that need no GPU (what CI runs)
#   make check-gpu       GPU tests (skip loudly without a GPU; minutes)
#   make check-gpu-long  gpu/test-gpu exhaustive, in parts (-default, -jit,
#                        -plain, -stage), each within a GPU machine call
#   make SANITIZE=1 ...  build with AddressSanitizer + UBSan
#   make TSAN=1 check-tsan  the concurrency tests under ThreadSanitizer
#   make check-long      the crash tests at length (hundreds of kill -9)
#   make NOCUDA=1 ...    build without CUDA even when nvcc is present
#   make deps            install Debian build/test dependencies (root)
#   make install         after make: the plugin into nbdkit's plugin
#                        directory, gpuraidctl, gpuraid-fault and
#                        gpuraid-drill, the man pages, the example systemd
#                        units (PREFIX, DESTDIR, PLUGINDIR, BINDIR, MANDIR,
#                        DOCDIR); make uninstall
#   make deb             after make: a Debian package of this build
#   make demo | bench | bench-gpu
#
# Each folder contributes a fragment (gf/gf.mk, ...) that appends to:
#   CHECK_TESTS  test programs/scripts run by `make check`
#   GPU_TESTS    run by `make check-gpu`
#   TSAN_TESTS   run by `make check-tsan` (concurrent requests)
#   LONG_TESTS   run by `make check-long` (crash loops at length)
#   CHECK_PROGS  binaries `make check` must build first
#   CLEAN_FILES  files `make clean` removes

CC ?= gcc
OPT ?= -O2 -g
WARN = -Wall -Wextra -Werror -Wshadow -Wvla -Wstrict-prototypes \
       -Wpointer-arith -Wformat-security
ifeq ($(SANITIZE),1)
SAN = -fsanitize=address,undefined -fno-omit-frame-pointer \
      -fno-sanitize-recover=undefined
endif
# ThreadSanitizer: `make clean && make TSAN=1 check-tsan` runs the plugin's
# concurrency tests with nbdkit under the TSan runtime.
ifeq ($(TSAN),1)
ifeq ($(SANITIZE),1)
$(error SANITIZE=1 and TSAN=1 cannot be combined)
endif
SAN = -fsanitize=thread -fno-omit-frame-pointer
# TSan runs the atexit handlers that CUDA's registration code (gpu/*.o)
# puts in, at exit, after nbdkit has dlclosed the plugin: a SEGV, unless
# the plugin stays mapped.
SAN_LD = -Wl,-z,nodelete
endif
CFLAGS_ALL = -std=gnu11 -fPIC -D_GNU_SOURCE -pthread $(OPT) $(WARN) $(SAN) $(CFLAGS)
LDFLAGS_ALL = -pthread $(SAN) $(SAN_LD) $(LDFLAGS)

# CUDA: used whenever nvcc is found, unless NOCUDA=1.
ifneq ($(NOCUDA),1)
NVCC ?= $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
endif
ifneq ($(strip $(NVCC)),)
HAVE_CUDA = 1
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
endif

# Every object depends on every header: simple and always correct.
HEADERS = $(wildcard */*.h)

all: nbdkit-plugin/nbdkit-gpuraid-plugin.so

CHECK_TESTS :=
GPU_TESTS :=
TSAN_TESTS :=
LONG_TESTS :=
CHECK_PROGS :=
CLEAN_FILES :=

include $(sort $(wildcard */*.mk))
include $(wildcard tests/vm/*.mk)

%.o: %.c $(HEADERS)
	$(CC) $(CFLAGS_ALL) -c -o $@ $<

# `make check` first installs missing Debian packages (scripts/install-deps),
# then builds and runs the tests in a second make so the build sees them.
check: deps
	$(MAKE) --no-print-directory check-tests

check-tests: all $(CHECK_PROGS)
	@tests/run-tests.sh $(CHECK_TESTS)

check-gpu: all $(CHECK_PROGS)
	@tests/run-tests.sh $(GPU_TESTS)

# The crash tests at length (LONG_TESTS under LONG_ENV, from the
# fragments).
check-long: deps
	$(MAKE) --no-print-directory all $(CHECK_PROGS)
	@$(LONG_ENV) TEST_TIMEOUT=3600 tests/run-tests.sh $(LONG_TESTS)

# The tests that run requests concurrently (TSAN_TESTS, from the
# fragments), on smaller data; meant for a TSAN=1 build.
check-tsan: deps
	$(MAKE) --no-print-directory all $(CHECK_PROGS)
	@TEST_SMALL=1 tests/run-tests.sh $(TSAN_TESTS)

deps:
	scripts/install-deps

# Installation.  The plugin goes where nbdkit looks for plugins by name
# (so that `nbdkit gpuraid ...` works), whatever PREFIX says; install
# does not build (run make first: a build under other flags is not
# replaced behind the caller's back).
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
DOCDIR ?= $(PREFIX)/share/doc/gpuraid
PLUGINDIR ?= $(shell pkg-config nbdkit --variable=plugindir 2>/dev/null)
GR_VERSION := $(shell sed -n 's/^\#define GR_VERSION "\(.*\)"/\1/p' \
                nbdkit-plugin/config.h)
MAN1 = docs/nbdkit-gpuraid-plugin.1
MAN8 = docs/gpuraidctl.8
# The operator's scripts (they find gpuraidctl and the plugin beside them
# in a build, else installed); the benchmarks stay in the source tree.
INSTALL_SCRIPTS = scripts/gpuraid-fault scripts/gpuraid-drill
EXAMPLES = docs/examples/gpuraid.socket docs/examples/gpuraid.service

$(MAN1): docs/nbdkit-gpuraid-plugin.pod
	pod2man --section=1 --center=gpuraid --release="gpuraid $(GR_VERSION)" \
	  --name=NBDKIT-GPURAID-PLUGIN $< $@

$(MAN8): docs/gpuraidctl.pod
	pod2man --section=8 --center=gpuraid --release="gpuraid $(GR_VERSION)" \
	  --name=GPURAIDCTL $< $@

install: $(MAN1) $(MAN8)
	@test -n "$(PLUGINDIR)" || { echo "make install: nbdkit's plugin directory is unknown: install nbdkit-plugin-dev (pkg-config nbdkit) or give PLUGINDIR=" >&2; exit 1; }
	@for f in nbdkit-plugin/nbdkit-gpuraid-plugin.so ctl/gpuraidctl; do \
	  test -f $$f || { echo "make install: $$f is not built: run make first" >&2; exit 1; }; done
	install -d $(DESTDIR)$(PLUGINDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 \
	  $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(DOCDIR)/examples
	install -m 0755 nbdkit-plugin/nbdkit-gpuraid-plugin.so $(DESTDIR)$(PLUGINDIR)/
	install -m 0755 ctl/gpuraidctl $(INSTALL_SCRIPTS) $(DESTDIR)$(BINDIR)/
	install -m 0644 $(MAN1) $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 $(MAN8) $(DESTDIR)$(MANDIR)/man8/
	install -m 0644 $(EXAMPLES) $(DESTDIR)$(DOCDIR)/examples/

uninstall:
	@test -n "$(PLUGINDIR)" || { echo "make uninstall: nbdkit's plugin directory is unknown: give PLUGINDIR=" >&2; exit 1; }
	rm -f $(DESTDIR)$(PLUGINDIR)/nbdkit-gpuraid-plugin.so \
	  $(DESTDIR)$(BINDIR)/gpuraidctl $(DESTDIR)$(MANDIR)/man1/nbdkit-gpuraid-plugin.1 \
	  $(DESTDIR)$(MANDIR)/man8/gpuraidctl.8 \
	  $(addprefix $(DESTDIR)$(BINDIR)/,$(notdir $(INSTALL_SCRIPTS))) \
	  $(addprefix $(DESTDIR)$(DOCDIR)/examples/,$(notdir $(EXAMPLES)))
	-rmdir $(DESTDIR)$(DOCDIR)/examples $(DESTDIR)$(DOCDIR) 2>/dev/null

# A binary Debian package of this build (scripts/make-deb): to carry to a
# machine with no package registry.
deb: $(MAN1) $(MAN8)
	scripts/make-deb

CLEAN_FILES += $(MAN1) $(MAN8) nbdkit-gpuraid-plugin_*.deb

clean:
	rm -f */*.o */*.a */*.so $(CLEAN_FILES)

.PHONY: all check check-tests check-gpu check-tsan check-long deps clean demo bench bench-gpu \
        install uninstall deb
