# SPDX-License-Identifier: BSD-3-Clause
# storage/ - member storage: local files and block devices (disk.c; their
# O_DIRECT alignment, disk-direct.c), NBD exports (remote.c), batched I/O
# through io_uring (uring.c), whole transfers (fullio.c), what shell
# patterns name (scan.c), behind storage/storage.h.  No nbdkit: the plugin and
# gpuraidctl link it.
#   LIBSTORAGE       the static library
#   STORAGE_LDLIBS   what a program linking LIBSTORAGE must also link
LIBSTORAGE = storage/libgrstorage.a
STORAGE_OBJS = storage/disk.o storage/disk-direct.o storage/remote.o \
               storage/uring.o storage/fullio.o storage/scan.o

# liburing (optional): local reads in batches.  NOURING=1 leaves it out.
ifneq ($(NOURING),1)
URING_LIBS := $(shell pkg-config --libs liburing 2>/dev/null)
endif

# libnbd (optional): remote members (member=nbd://...).  NONBD=1 leaves it
# out.
ifneq ($(NONBD),1)
LIBNBD_CFLAGS := $(shell pkg-config --cflags libnbd 2>/dev/null)
LIBNBD_LIBS := $(shell pkg-config --libs libnbd 2>/dev/null)
endif
STORAGE_LDLIBS = $(URING_LIBS) $(LIBNBD_LIBS)

# The stubs (without liburing, libnbd) leave their parameters unused.
$(STORAGE_OBJS): CFLAGS_ALL += -Wno-unused-parameter
# Build options, each confined to the one file that has stubs for it.
storage/uring.o: CFLAGS_ALL += $(if $(URING_LIBS),-DGR_HAVE_URING)
storage/remote.o: CFLAGS_ALL += $(if $(LIBNBD_LIBS),-DGR_HAVE_LIBNBD \
                                $(LIBNBD_CFLAGS))

$(LIBSTORAGE): $(STORAGE_OBJS)
	rm -f $@
	$(AR) rcs $@ $^

# Unit test: the local files' write turns.
storage/test-disk.o: CFLAGS_ALL += -I.
storage/test-disk: storage/test-disk.o $(LIBSTORAGE)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(STORAGE_LDLIBS)

CHECK_PROGS += storage/test-disk
CHECK_TESTS += storage/test-disk
TSAN_TESTS += storage/test-disk
CLEAN_FILES += storage/test-disk
