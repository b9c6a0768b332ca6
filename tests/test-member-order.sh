#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Members in any command-line order, and a missing member, are reported
# truthfully and once: a healthy array given in a shuffled order starts
# without a warning; with one member missing (left off the command line,
# so that the others shift, or given but gone) exactly one warning names
# it, no member that opened is said to be missing or unopenable, and no
# guess is made from a shifted order.  The data reads back every time.

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_py

ref=$tmpdir/ref.img
k=4 m=2 n=6 chunk=16384

make_members $n 2M
start_array chunk=$chunk create=true || exit 1
randio zeroref "$uri" "$ref"
randio write "$uri" "$ref" --seed "$TEST_SEED" --ops 30 --chunk $chunk --k $k ||
  exit 1
stop_nbdkit "$pid"

# start_order LOG MEMBER...: start with these member= paths, log in LOG.
start_order ()
{
  local log=$1 saved=$nbdkit_log
  shift
  : >"$log"
  nbdkit_log=$log
  # shellcheck disable=SC2046
  start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" $(member_args "$@") ||
    { nbdkit_log=$saved; echo "$0: FAIL: start: $(cat "$log")"; exit 1; }
  nbdkit_log=$saved
  expect_verify "$uri" "$ref" "members: $*"
  stop_nbdkit "$pid"
}

warnings () { grep -c 'warning:' "$1" || true; }

# 1. Healthy, shuffled: nothing to warn about.
m=("${members[@]}")
start_order "$tmpdir/log1" "${m[3]}" "${m[0]}" "${m[5]}" "${m[1]}" "${m[4]}" "${m[2]}"
if [ "$(warnings "$tmpdir/log1")" != 0 ]; then
  echo "$0: FAIL: a healthy array in another order warns:"; cat "$tmpdir/log1"; exit 1
fi

# 2. Member 1 gone and left off the command line: the others shift.
mv "${m[1]}" "$tmpdir/away.img"
start_order "$tmpdir/log2" "${m[0]}" "${m[2]}" "${m[3]}" "${m[4]}" "${m[5]}"
cat "$tmpdir/log2"
[ "$(warnings "$tmpdir/log2")" = 1 ] ||
  { echo "$0: FAIL: want exactly one warning"; exit 1; }
grep -q 'warning: starting degraded .*member 1 is missing' "$tmpdir/log2" ||
  { echo "$0: FAIL: the missing member 1 is not named"; exit 1; }
if grep -Eq 'probably|cannot be opened|Success' "$tmpdir/log2"; then
  echo "$0: FAIL: a guess or a false statement about members that opened"; exit 1
fi

# 3. Member 1 given in its place but gone: named once, with its path.
start_order "$tmpdir/log3" "${m[@]}"
cat "$tmpdir/log3"
[ "$(warnings "$tmpdir/log3")" = 1 ] ||
  { echo "$0: FAIL: want exactly one warning"; exit 1; }
grep -q "member 1 is missing; probably member=${m[1]}, which cannot be opened: No such file" \
  "$tmpdir/log3" || { echo "$0: FAIL: the missing path is not named"; exit 1; }
[ "$(grep -v "^+ nbdkit" "$tmpdir/log3" | grep -o "${m[1]}" | wc -l)" = 1 ] ||
  { echo "$0: FAIL: the missing member is reported more than once"; exit 1; }
mv "$tmpdir/away.img" "${m[1]}"
echo "$0: PASS"
