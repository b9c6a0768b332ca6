#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A stale member must not be trusted.  Member 1 of a 2+1 and of a 4+2
# array is removed, the array is written degraded (covering every chunk,
# so member 1's old contents are wrong everywhere).  For 2+1, putting the
# stale member back while removing another one leaves only one trusted
# member: the server must refuse to start, nothing written.  Then member 1
# is put back: it is re-added (its chunks written since it left rebuilt
# from the others, never read as they are): the data must read back
# correctly, during the re-add and after restarts and more writes, the
# offline decode without member 1 must match, and once re-added its
# chunks are right (parity checked with it).

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_py

chunk=4096 code=rs
ref=$tmpdir/ref.img
seed=$TEST_SEED

for g in 2:1 4:2; do
  IFS=: read -r k m <<<"$g"
  n=$(( k + m ))
  echo "=== $k+$m"
  make_members "$n" 1536K
  start_array chunk=$chunk code=$code create=true || exit 1
  randio zeroref "$uri" "$ref"
  seed=$(( seed + 1 ))
  randio write "$uri" "$ref" --seed $seed --ops 60 --chunk $chunk --k $k ||
    { echo "$0: FAIL: healthy random I/O"; exit 1; }
  stop_nbdkit "$pid"
  check_parity $k $m $chunk $code "${members[@]}"

  # Member 1 goes away; overwrite the whole export degraded.
  mv "${members[1]}" "$tmpdir/stale.img"
  start_array || { echo "$0: FAIL: degraded start"; exit 1; }
  size=$(stat -c %s "$ref")
  head -c "$size" /dev/urandom > "$ref"
  # Whole-image write through nbdsh, 1 MiB at a time.
  nbdsh -u "$uri" -c "
f = open('$ref', 'rb')
off = 0
while True:
    b = f.read(1048576)
    if not b:
        break
    h.pwrite(b, off)
    off += len(b)
" || { echo "$0: FAIL: degraded full write"; exit 1; }
  expect_verify "$uri" "$ref" "degraded after full write"
  stop_nbdkit "$pid"

  # The stale member comes back.
  mv "$tmpdir/stale.img" "${members[1]}"
  # Negative control: the member really is stale (before the array sees it).
  expect_check_fails "member 1 is not stale: the test proves nothing" \
    -k $k -m $m -c $chunk -t $code -q "${members[@]}"
  if [ "$m" = 1 ]; then
    # Stale member 1 + member 0 gone: only member 2 can be trusted.
    echo "=== $k+$m: stale member 1 present, member 0 removed: must refuse"
    mv "${members[0]}" "$tmpdir/gone.img"
    sums "${members[1]}" "${members[2]}" > "$tmpdir/before.sum"
    set_args
    expect_refusal "$tmpdir/refuse.log" 'too many|tolerat|not enough|cannot start|refus' \
      nbdkit "$PLUGIN" "${args[@]}" m=$m
    sha256sum -c --quiet "$tmpdir/before.sum" ||
      { echo "$0: FAIL: members changed by the refused start"; exit 1; }
    mv "$tmpdir/gone.img" "${members[0]}"
  fi
  : >"$nbdkit_log"
  start_array || { echo "$0: FAIL: start with the stale member back"; exit 1; }
  expect_verify "$uri" "$ref" "stale member 1 back"
  grep -q "member 1 (.*) is back: re-adding it" "$nbdkit_log" ||
    { echo "$0: FAIL: member 1 not re-added: $(cat "$nbdkit_log")"; exit 1; }
  seed=$(( seed + 1 ))
  randio write "$uri" "$ref" --seed $seed --ops 40 --chunk $chunk --k $k ||
    { echo "$0: FAIL: random I/O with the stale member present"; exit 1; }
  for (( i = 0; i < 100; i++ )); do
    grep -q "re-add of member 1 .* done" "$nbdkit_log" && break
    sleep 0.1
  done
  grep -q "re-add of member 1 .* done" "$nbdkit_log" ||
    { echo "$0: FAIL: the re-add did not end: $(cat "$nbdkit_log")"; exit 1; }
  stop_nbdkit "$pid"
  start_array || { echo "$0: FAIL: restart with the stale member"; exit 1; }
  expect_verify "$uri" "$ref" "restart with stale member 1 present"
  stop_nbdkit "$pid"
  check_decode $k $m $chunk $code "$ref" "without the stale member" 1
  check_decode $k $m $chunk $code "$ref" "with member 1 re-added"
done
echo "$0: PASS"
