# SPDX-License-Identifier: BSD-3-Clause
# format/ - the on-disk format (pure): the superblock, the metadata
# area's layout (write-intent bitmap, journal entries), the assembly
# decision, behind format/format.h.  No I/O, no nbdkit: the plugin and
# gpuraidctl link it.
#   LIBFORMAT       the static library
#   FORMAT_LDLIBS   what a program linking LIBFORMAT must also link
LIBFORMAT = format/libgrformat.a
FORMAT_LDLIBS = -lisal -luuid
FORMAT_OBJS = format/superblock.o format/metadata.o format/assemble.o

$(FORMAT_OBJS): CFLAGS_ALL += -I.

$(LIBFORMAT): $(FORMAT_OBJS)
	rm -f $@
	$(AR) rcs $@ $^

# Unit tests (raidmap.mk is included after this file: its library named
# literally).
FORMAT_TESTS = format/test-superblock format/test-metadata \
               format/test-assemble
$(FORMAT_TESTS:=.o): CFLAGS_ALL += -I.

format/test-%: format/test-%.o $(LIBFORMAT) raidmap/libgrmap.a
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(FORMAT_LDLIBS)

CHECK_PROGS += $(FORMAT_TESTS)
CHECK_TESTS += $(FORMAT_TESTS)
CLEAN_FILES += $(FORMAT_TESTS)
