# SPDX-License-Identifier: BSD-3-Clause
# gf/ - GF(2^8) math, RS and CRS coding, CPU backends.
#   LIBGF      the static library
#   GF_LDLIBS  what a program linking LIBGF must also link
LIBGF = gf/libgrgf.a
GF_LDLIBS = -lisal -lgf_complete
GF_OBJS = gf/field.o gf/coder.o gf/backend.o gf/ref.o gf/crs.o gf/isal.o gf/gfc.o

$(LIBGF): $(GF_OBJS)
	rm -f $@
	$(AR) rcs $@ $^

GF_TESTS = gf/test-field gf/test-coder
$(GF_TESTS:=.o): CFLAGS_ALL += -I.

gf/test-%: gf/test-%.o $(LIBGF)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(GF_LDLIBS)

CHECK_PROGS += $(GF_TESTS)
CHECK_TESTS += $(GF_TESTS)
CLEAN_FILES += $(GF_TESTS)

# CPU coding benchmark (not part of check).
gf/bench-gf: gf/bench-gf.o $(LIBGF)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(GF_LDLIBS)

bench-cpu: gf/bench-gf
	gf/bench-gf

CLEAN_FILES += gf/bench-gf
.PHONY: bench-cpu
