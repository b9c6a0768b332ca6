# SPDX-License-Identifier: BSD-3-Clause
# raidmap/ - array geometry (pure).
LIBMAP = raidmap/libgrmap.a

raidmap/libgrmap.a: raidmap/raidmap.o
	$(AR) rcs $@ $^

raidmap/test-raidmap.o: CFLAGS_ALL += -I.
raidmap/test-raidmap: raidmap/test-raidmap.o $(LIBMAP)
	$(CC) $(LDFLAGS_ALL) -o $@ $^

CHECK_PROGS += raidmap/test-raidmap
CHECK_TESTS += raidmap/test-raidmap
CLEAN_FILES += raidmap/test-raidmap
