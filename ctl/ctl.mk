# SPDX-License-Identifier: BSD-3-Clause
# ctl/ - gpuraidctl, the operator's command (examine members offline;
# status, fail, rate and wait through the plugin's control=PATH socket).
# It decides with the assembly code the plugin uses (format/) and reads
# members (files, devices, NBD exports) with the storage library
# (storage/); it links those libraries and raidmap, no plugin object.
CTL = ctl/gpuraidctl

all: $(CTL)

# The libraries' fragments are included after this one: named literally.
ctl/gpuraidctl.o ctl/offline.o: CFLAGS_ALL += -I.
$(CTL): ctl/gpuraidctl.o ctl/offline.o format/libgrformat.a \
        storage/libgrstorage.a \
        raidmap/libgrmap.a
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(FORMAT_LDLIBS) $(STORAGE_LDLIBS)

CLEAN_FILES += $(CTL)
