# SPDX-License-Identifier: BSD-3-Clause
# ctl/ - gpuraidctl, the operator's command (examine members offline;
# status, fail, rate and wait through the plugin's control=PATH socket).
# It decides with the plugin's own pure assembly code and reads members
# (files, devices, NBD exports) with the storage library (storage/).
CTL = ctl/gpuraidctl

all: $(CTL)

ctl/gpuraidctl.o: CFLAGS_ALL += -I.
$(CTL): ctl/gpuraidctl.o nbdkit-plugin/assemble.o nbdkit-plugin/superblock.o \
        storage/libgrstorage.a raidmap/libgrmap.a
	$(CC) $(LDFLAGS_ALL) -o $@ $^ -lisal $(STORAGE_LDLIBS)

CLEAN_FILES += $(CTL)
