#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Self-test of the offline parity checker (no plugin needed): an all-zero
# array is consistent; one corrupted byte in a data chunk or a parity
# chunk is reported (exit 1) with the right stripe; with the member that
# holds the corrupted block marked missing the array decodes cleanly;
# more than m missing members is a usage error (exit 2).

source "$(dirname "$0")/functions.sh"
requires_check

chunk=4096
off=$(data_offset $chunk)
# 3+2: stripe s, code index i lives on member (i - s) mod 5.
make_members 5 $(( off + 8 * chunk ))
m=("${members[@]}")

"$CHECK" -k 3 -m 2 -c $chunk "${m[@]}" || { echo "$0: FAIL: zero array"; exit 1; }
"$CHECK" -k 3 -m 2 -c $chunk -t crs "${m[@]}" || { echo "$0: FAIL: zero array (crs)"; exit 1; }

# Corrupt data index 1 of stripe 2: member (1 - 2) mod 5 = 4, byte 100.
printf '\x5a' | dd of="${m[4]}" bs=1 seek=$(( off + 2 * chunk + 100 )) conv=notrunc status=none
out=$("$CHECK" -k 3 -m 2 -c $chunk "${m[@]}"); rc=$?
echo "$out"
[ "$rc" = 1 ] || { echo "$0: FAIL: corrupt data not detected (rc=$rc)"; exit 1; }
echo "$out" | grep -q '^stripe 2: parity index 3' ||
  { echo "$0: FAIL: stripe 2 not reported"; exit 1; }
[ "$(echo "$out" | grep -c '^stripe ')" = 2 ] ||
  { echo "$0: FAIL: expected exactly the two parity blocks of stripe 2 reported"; exit 1; }
# With member 4 missing, the stripe decodes from parity (the 0x5a is gone).
"$CHECK" -k 3 -m 2 -c $chunk -d "$tmpdir/dump" "${m[0]}" "${m[1]}" "${m[2]}" "${m[3]}" - ||
  { echo "$0: FAIL: member 4 missing should be consistent"; exit 1; }
[ "$(stat -c %s "$tmpdir/dump")" = $(( 8 * 3 * chunk )) ] || { echo "$0: FAIL: dump size"; exit 1; }
cmp -s "$tmpdir/dump" <(head -c $(( 8 * 3 * chunk )) /dev/zero) ||
  { echo "$0: FAIL: decoded image is not all zero"; exit 1; }
# ... and with -x 4 likewise.
"$CHECK" -k 3 -m 2 -c $chunk -x 4 -q "${m[@]}" || { echo "$0: FAIL: -x 4"; exit 1; }
# With member 0 missing instead, the remaining parity still disagrees.
"$CHECK" -k 3 -m 2 -c $chunk -q - "${m[1]}" "${m[2]}" "${m[3]}" "${m[4]}" >/dev/null
[ $? = 1 ] || { echo "$0: FAIL: corruption hidden by one missing member"; exit 1; }
# The dump with member 4 present holds the corrupt byte at its logical place.
"$CHECK" -k 3 -m 2 -c $chunk -d "$tmpdir/dump" -q "${m[@]}" >/dev/null
b=$(od -An -tx1 -j $(( (2 * 3 + 1) * chunk + 100 )) -N1 "$tmpdir/dump" | tr -d ' ')
[ "$b" = 5a ] || { echo "$0: FAIL: dump has $b at the logical offset, expected 5a"; exit 1; }

# Repair, then corrupt parity index 4 of stripe 5: member (4 - 5) mod 5 = 4.
printf '\x00' | dd of="${m[4]}" bs=1 seek=$(( off + 2 * chunk + 100 )) conv=notrunc status=none
printf '\x01' | dd of="${m[4]}" bs=1 seek=$(( off + 5 * chunk + 7 )) conv=notrunc status=none
out=$("$CHECK" -k 3 -m 2 -c $chunk "${m[@]}"); rc=$?
echo "$out"
[ "$rc" = 1 ] && echo "$out" | grep -q '^stripe 5: parity index 4 (member 4' ||
  { echo "$0: FAIL: corrupt parity not reported as stripe 5 index 4"; exit 1; }

# Usage errors.
"$CHECK" -k 3 -m 2 -c $chunk - - - "${m[3]}" "${m[4]}" 2>/dev/null
[ $? = 2 ] || { echo "$0: FAIL: 3 missing of m=2 should exit 2"; exit 1; }
"$CHECK" -k 3 -m 2 -c $chunk "${m[@]:1}" 2>/dev/null
[ $? = 2 ] || { echo "$0: FAIL: wrong member count should exit 2"; exit 1; }
echo "$0: PASS"
