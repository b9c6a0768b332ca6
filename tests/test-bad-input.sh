#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Create safety and bad input.  For each bad configuration nbdkit must
# exit non-zero, print an error line naming the problem, and leave every
# member file byte-identical (sha256).  Members given in a shuffled order
# are placed by the index in their superblock (the data verifies), and
# force=true allows re-creating an existing array.

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_py

ref=$tmpdir/ref.img
ncase=0

# refuse REGEX FILES -- NBDKIT-PLUGIN-ARGS...: nbdkit must refuse; FILES
# (space-separated) must not change.
refuse ()
{
  local re=$1 files=$2
  shift 3
  ncase=$(( ncase + 1 ))
  echo "=== case $ncase: $*" | cut -c1-200
  # shellcheck disable=SC2086
  sums $files > "$tmpdir/before.sum"
  expect_refusal "$tmpdir/case$ncase.log" "$re" \
    nbdkit "$PLUGIN" "$@"
  if ! sha256sum -c --quiet "$tmpdir/before.sum"; then
    echo "$0: FAIL: case $ncase changed member files"
    exit 1
  fi
}

# Fresh (no superblock) members, 2+1 with 4K chunks.
make_members 3 2M fresh
f0=${members[0]} f1=${members[1]} f2=${members[2]}
fresh="$f0 $f1 $f2"
ok="member=$f0 member=$f1 member=$f2"

# shellcheck disable=SC2086
{
refuse 'foo|unknown|unrecognized|invalid' "$fresh" -- $ok m=1 create=true foo=bar
refuse '\bm\b|m=|parity' "$fresh" -- $ok m=x create=true
refuse '\bm\b|m=|parity' "$fresh" -- $ok m=0 create=true
refuse '\bm\b|m=|parity' "$fresh" -- $ok m=-1 create=true
refuse '\bm\b|m=|parity|member' "$fresh" -- $ok m=3 create=true
refuse '\bm\b|m=|parity|member' "$fresh" -- $ok m=4 create=true
refuse 'chunk|3000' "$fresh" -- $ok m=1 chunk=3000 create=true
refuse 'chunk|power' "$fresh" -- $ok m=1 chunk=12288 create=true
refuse 'chunk|4096|small' "$fresh" -- $ok m=1 chunk=2048 create=true
refuse 'chunk|size' "$fresh" -- $ok m=1 chunk=64Q create=true
refuse 'code|foo' "$fresh" -- $ok m=1 code=foo create=true
refuse 'create|maybe|bool' "$fresh" -- $ok m=1 create=maybe
refuse 'force|maybe|bool' "$fresh" -- $ok m=1 create=true force=maybe
refuse 'backend|nosuch' "$fresh" -- $ok m=1 create=true backend=nosuch
refuse 'member' "$fresh" -- m=1 create=true
# Each error names the key and the value given.
refuse 'm=abc' "$fresh" -- $ok m=abc create=true
refuse 'force=2' "$fresh" -- $ok m=1 create=true force=2
refuse 'create=maybe' "$fresh" -- $ok m=1 create=maybe
refuse 'chunk=9999999999999999999' "$fresh" -- $ok m=1 chunk=9999999999999999999 create=true
refuse 'chunk=99999999999999999999999' "$fresh" -- $ok m=1 chunk=99999999999999999999999 create=true
refuse 'gpu-device=99999999999' "$fresh" -- $ok m=1 create=true gpu-device=99999999999
refuse 'gpu-device=x' "$fresh" -- $ok m=1 create=true gpu-device=x
refuse 'salvage=2' "$fresh" -- $ok salvage=2
refuse 'scratch-max=x' "$fresh" -- $ok m=1 create=true scratch-max=x
refuse 'scratch-max=100K.*at least 1M' "$fresh" -- $ok m=1 create=true scratch-max=100K
refuse 'bitmap-chunk=3000.*power of two' "$fresh" -- $ok m=1 create=true bitmap-chunk=3000
refuse 'bitmap-chunk=1K' "$fresh" -- $ok m=1 create=true bitmap-chunk=1K
refuse 'resync-rate=fast' "$fresh" -- $ok m=1 create=true resync-rate=fast
refuse 'remote-timeout=0.*from 1' "$fresh" -- $ok m=1 create=true remote-timeout=0
refuse 'remote-timeout=soon' "$fresh" -- $ok m=1 create=true remote-timeout=soon
refuse 'remote-retries=99.*at most' "$fresh" -- $ok m=1 create=true remote-retries=99
refuse 'max-read-errors=2000000.*at most 1000000' "$fresh" -- $ok m=1 create=true max-read-errors=2000000
refuse 'max-read-errors=-1.*negative' "$fresh" -- $ok m=1 create=true max-read-errors=-1
refuse 'direct=bogus: must be on, off or auto' "$fresh" -- $ok m=1 create=true direct=bogus
refuse 'direct=.*more than once' "$fresh" -- $ok m=1 create=true direct=on direct=off
refuse 'control=: empty' "$fresh" -- $ok m=1 create=true control=
refuse 'control=.*shorter than' "$fresh" -- $ok m=1 create=true control=/$(printf 'x%.0s' {1..120})
refuse 'control=.*more than once' "$fresh" -- $ok m=1 create=true control=$tmpdir/c1 control=$tmpdir/c2
refuse 'control=.*nosuchdir.*bind' "$fresh" -- $ok m=1 create=true control=$tmpdir/nosuchdir/c
refuse 'superblock|create|not a|member|gpuraid' "$fresh" -- $ok m=1
# Duplicated members: same path, a hard link, a symlink.
ln "$f0" "$tmpdir/hardlink.img"
ln -s "$f0" "$tmpdir/symlink.img"
refuse 'dup|same|twice|more than once|already' "$fresh" -- \
  member=$f0 member=$f1 member=$f0 m=1 create=true
refuse 'dup|same|twice|more than once|already' "$fresh" -- \
  member=$f0 member=$f1 member=$tmpdir/hardlink.img m=1 create=true
refuse 'dup|same|twice|more than once|already' "$fresh" -- \
  member=$f0 member=$tmpdir/symlink.img member=$f2 m=1 create=true
}
rm "$tmpdir/hardlink.img" "$tmpdir/symlink.img"

# Unequal sizes; too small.
truncate -s 3M "$tmpdir/big.img"
truncate -s 512K "$tmpdir/small0.img" "$tmpdir/small1.img"
# shellcheck disable=SC2086
{
refuse 'size|equal|differ|same' "$fresh $tmpdir/big.img" -- \
  member=$f0 member=$f1 member=$tmpdir/big.img m=1 create=true
refuse 'small|size' "$tmpdir/small0.img $tmpdir/small1.img" -- \
  member=$tmpdir/small0.img member=$tmpdir/small1.img m=1 create=true
}

# k + m > 256: 257 tiny sparse members (data offset + one chunk each).
many=()
for (( i = 0; i < 257; i++ )); do
  truncate -s $(( 1048576 + 4096 )) "$tmpdir/many$i.img"
  many+=("member=$tmpdir/many$i.img")
done
# shellcheck disable=SC2086
refuse '256|257|too many|members' "$(echo "$tmpdir"/many*.img)" -- \
  "${many[@]}" m=1 chunk=4096 create=true
rm -f "$tmpdir"/many*.img

# Two real arrays, A (2+1) and B (2+1).
make_members 3 2M a
a=("${members[@]}")
# shellcheck disable=SC2046
start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" $(member_args "${a[@]}") \
  m=1 chunk=4096 create=true || exit 1
randio zeroref "$uri" "$ref"
randio write "$uri" "$ref" --seed "$TEST_SEED" --ops 60 --chunk 4096 --k 2 ||
  { echo "$0: FAIL: random I/O on array A"; exit 1; }
stop_nbdkit "$pid"
make_members 3 2M b
b=("${members[@]}")
# shellcheck disable=SC2046
start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" $(member_args "${b[@]}") \
  m=1 chunk=4096 create=true || exit 1
stop_nbdkit "$pid"

# shellcheck disable=SC2086,SC2046
{
refuse 'force|exist|already' "${a[*]}" -- $(member_args "${a[@]}") m=1 create=true
refuse 'force|exist|already' "${a[*]}" -- $(member_args "${a[@]}") m=1 chunk=4096 create=true
refuse 'array|uuid|differ|mismatch|belong' "${a[*]} ${b[*]}" -- \
  member=${a[0]} member=${a[1]} member=${b[2]} m=1
refuse 'array|uuid|differ|mismatch|belong' "${a[*]} ${b[*]}" -- \
  member=${b[0]} member=${a[1]} member=${a[2]} m=1
# The odd member is the one blamed, wherever it stands.
refuse "member 0 \\(${b[0]}\\) belongs to another array" "${a[*]} ${b[*]}" -- \
  member=${b[0]} member=${a[1]} member=${a[2]} m=1
refuse "member 1 \\(${b[1]}\\) belongs to another array" "${a[*]} ${b[*]}" -- \
  member=${a[0]} member=${b[1]} member=${a[2]} m=1
# Fresh file mixed into an existing array, without create.
refuse 'superblock|not a|member|gpuraid|create' "${a[*]} $f2" -- \
  member=${a[0]} member=${a[1]} member=$f2 m=1
# The bitmap's region is chosen when the array is created.
refuse 'bitmap-chunk=.*create=true' "${a[*]}" -- $(member_args "${a[@]}") \
  bitmap-chunk=1M
}

# direct=on where O_DIRECT is refused (ramfs): one line naming the member
# (or spare), nothing written.
if "$PY" -c 'import os, sys; os.close(os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT))' \
     "${a[0]}" 2>/dev/null && [ "$(id -u)" = 0 ] && mkdir "$tmpdir/ramfs" &&
   mount -t ramfs ramfs "$tmpdir/ramfs" 2>/dev/null; then
  cleanup_fn umount "$tmpdir/ramfs"
  rf=$tmpdir/ramfs
  truncate -s 2M "$rf/r0.img" "$rf/r1.img" "$rf/r2.img"
  # shellcheck disable=SC2086,SC2046
  {
  refuse "member 0 \\($rf/r0.img\\): O_DIRECT refused.*direct=on" "$rf/r0.img $rf/r1.img $rf/r2.img" -- \
    member=$rf/r0.img member=$rf/r1.img member=$rf/r2.img m=1 create=true direct=on
  refuse "member 2 \\($rf/r2.img\\): O_DIRECT refused" "$fresh $rf/r2.img" -- \
    member=$f0 member=$f1 member=$rf/r2.img m=1 create=true direct=on
  refuse "spare=$rf/r0.img: it refuses O_DIRECT .*direct=on" "${a[*]} $rf/r0.img" -- \
    $(member_args "${a[@]}") m=1 direct=on spare=$rf/r0.img
  }
else
  echo "  (no O_DIRECT here, or no ramfs to refuse it: those cases left out)"
fi

# nbdkit -r with create=true: refused, nothing written.
ncase=$(( ncase + 1 ))
sums $fresh > "$tmpdir/before.sum"
# shellcheck disable=SC2086
expect_refusal "$tmpdir/case$ncase.log" 'read-only' \
  nbdkit -r "$PLUGIN" $ok m=1 create=true
sha256sum -c --quiet "$tmpdir/before.sum" ||
  { echo "$0: FAIL: create=true under nbdkit -r wrote to the members"; exit 1; }

# accel=gpu without a usable GPU driver: say so, and what to do.
if run_nbdkit "$PLUGIN" --dump-plugin | grep -qx 'gpuraid_cuda=yes' &&
   ! nvidia-smi >/dev/null 2>&1; then
  # shellcheck disable=SC2086
  refuse 'accel=gpu: .*no usable NVIDIA GPU driver.*accel=cpu' "$fresh" -- \
    $ok m=1 create=true accel=gpu
fi

# Shuffled order: placed by superblock index.
for order in "2 0 1" "1 2 0"; do
  echo "=== shuffled order $order"
  args=()
  for i in $order; do args+=("member=${a[$i]}"); done
  start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" m=1 ||
    { echo "$0: FAIL: did not start with members in order $order"; exit 1; }
  expect_verify "$uri" "$ref" "members in order $order"
  stop_nbdkit "$pid"
done

# force=true re-creates (same geometry): it starts, the superblocks are
# rewritten, and the new array works.
echo "=== create=true force=true on an existing array"
sums "${a[@]}" > "$tmpdir/before.sum"
# shellcheck disable=SC2046
start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" $(member_args "${a[@]}") \
  m=1 chunk=4096 create=true force=true ||
  { echo "$0: FAIL: force=true re-create refused"; exit 1; }
nbdcopy "$uri" "$ref"
randio write "$uri" "$ref" --seed $(( TEST_SEED + 1 )) --ops 40 --chunk 4096 --k 2 ||
  { echo "$0: FAIL: random I/O on the re-created array"; exit 1; }
stop_nbdkit "$pid"
if sha256sum -c --quiet "$tmpdir/before.sum" 2>/dev/null; then
  echo "$0: FAIL: force=true re-create left the members unchanged"
  exit 1
fi
if [ -x "$CHECK" ]; then
  check_parity 2 1 4096 rs "${a[@]}"
fi
echo "$0: PASS ($ncase refusal cases)"
