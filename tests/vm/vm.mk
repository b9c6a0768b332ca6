# SPDX-License-Identifier: BSD-3-Clause
# tests/vm: the kernel's NBD client against gpuraid in a qemu guest (TCG).
# Slow (minutes) and downloads a guest kernel package into tests/vm/cache/,
# so it is NOT part of `make check`: run `make check-vm`.

check-vm: all tests/gpuraid-check
	tests/vm/run-vm-test.sh

clean-vm-cache:
	rm -rf tests/vm/cache

.PHONY: check-vm clean-vm-cache
