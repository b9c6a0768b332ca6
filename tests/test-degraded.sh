#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Degraded mode, 4+2: with every subset of up to m = 2 members removed
# (renamed away) the array starts and all data reads back; writes while
# degraded (one and two members gone) read back degraded, after a restart,
# and the on-disk state decodes offline to the reference with consistent
# remaining parity; with 3 members gone the server refuses to start and
# the member files are not modified.

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_py

k=4 m=2 chunk=16384 code=${GR_CODE:-rs}
n=$(( k + m ))
ref=$tmpdir/ref.img

make_members "$n" 2M
start_array chunk=$chunk code=$code create=true || exit 1
randio zeroref "$uri" "$ref"
randio write "$uri" "$ref" --seed "$TEST_SEED" --ops 150 --chunk $chunk --k $k ||
  { echo "$0: FAIL: random I/O while healthy"; exit 1; }
stop_nbdkit "$pid"
check_parity $k $m $chunk $code "${members[@]}"
snapshot_members "$tmpdir/healthy"
cp "$ref" "$tmpdir/healthy-ref.img"

# start_without I...: start with members I... renamed away.
start_without ()
{
  local i args
  set_args
  for i in "$@"; do
    mv "${members[$i]}" "${members[$i]}.gone"
  done
  start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" m=$m
}

put_back ()
{
  local i
  for i in "$@"; do
    mv "${members[$i]}.gone" "${members[$i]}"
  done
}

# Every subset of size 1 and 2: read everything back.
subsets=()
for (( a = 0; a < n; a++ )); do
  subsets+=("$a")
  for (( b = a + 1; b < n; b++ )); do
    subsets+=("$a,$b")
  done
done
for s in "${subsets[@]}"; do
  IFS=, read -r -a gone <<<"$s"
  echo "=== members ${gone[*]} missing: read"
  restore_members "$tmpdir/healthy"
  start_without "${gone[@]}" ||
    { echo "$0: FAIL: did not start with members ${gone[*]} missing"; exit 1; }
  expect_verify "$uri" "$ref" "members ${gone[*]} missing"
  stop_nbdkit "$pid"
  put_back "${gone[@]}"
done

# Degraded writes: one member gone (parity still checkable), two gone.
seed=$TEST_SEED
for s in 2 0,5 1,3; do
  IFS=, read -r -a gone <<<"$s"
  echo "=== members ${gone[*]} missing: write"
  restore_members "$tmpdir/healthy"
  cp "$tmpdir/healthy-ref.img" "$ref"
  start_without "${gone[@]}" ||
    { echo "$0: FAIL: did not start with members ${gone[*]} missing"; exit 1; }
  seed=$(( seed + 1 ))
  randio write "$uri" "$ref" --seed "$seed" --ops 100 --chunk $chunk --k $k ||
    { echo "$0: FAIL: degraded random I/O, members ${gone[*]} missing (seed $seed)"; exit 1; }
  stop_nbdkit "$pid"
  # The survivors' superblocks record the missing members as failed
  # (docs/format.md: written before any data while degraded).
  want=$(printf '%s\n' "${gone[@]}" | sort -n | tr '\n' ' ')
  for (( i = 0; i < n; i++ )); do
    [ -e "${members[$i]}" ] || continue
    bits=$(sb_failed_bits "${members[$i]}")
    if [ "$bits" != "$want" ]; then
      echo "$0: FAIL: member $i's superblock marks '${bits}' failed, expected '$want'"
      exit 1
    fi
  done
  # Offline: decode with the missing members, compare with the reference;
  # with one member missing the other parity is checked as well.
  check_decode $k $m $chunk $code "$ref" "after degraded writes" "${gone[@]}"
  # Restart, still degraded (the members are still away): data must be there.
  start_without ||
    { echo "$0: FAIL: degraded restart"; exit 1; }
  expect_verify "$uri" "$ref" "degraded restart, members ${gone[*]} missing"
  stop_nbdkit "$pid"
  put_back "${gone[@]}"
done

# More than m missing: must refuse, files untouched.
restore_members "$tmpdir/healthy"
for s in 0,1,2 1,3,5; do
  IFS=, read -r -a gone <<<"$s"
  echo "=== members ${gone[*]} missing: must refuse"
  for i in "${gone[@]}"; do mv "${members[$i]}" "${members[$i]}.gone"; done
  present=()
  for (( i = 0; i < n; i++ )); do
    [ -e "${members[$i]}" ] && present+=("${members[$i]}")
  done
  sums "${present[@]}" > "$tmpdir/before.sum"
  set_args
  expect_refusal "$tmpdir/refuse.log" 'too many|tolerat|not enough|cannot start|refus' \
    nbdkit "$PLUGIN" "${args[@]}" m=$m
  sha256sum -c --quiet "$tmpdir/before.sum" ||
    { echo "$0: FAIL: member files changed by the refused start"; exit 1; }
  put_back "${gone[@]}"
done
echo "$0: PASS"
