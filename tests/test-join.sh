#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Joined writes (nbdkit-plugin/join.h): nbdcopy writes a random image in
# 1 MiB requests from 4 connections onto a 5+2 array with 64 KiB chunks
# (320 KiB stripes: a request ends inside a stripe, on a chunk bound,
# where the next one starts).  The parts of the stripes that neighbours
# share are joined into whole-stripe writes: the exit log counts parts
# taken by the neighbour that had the rest and written with it
# (write-joined plans, which read nothing, begun with the request's
# whole stripes: exec.h), the image reads back whole
# (and with two members gone), and the parity checks offline.  On the
# CPU, on the stand-in GPU (-D gpuraid.fake_gpu=2: its encodes take
# blocks from both requests' buffers), on a stand-in that fails from its
# 20th operation on (the encodes begun redone on the CPU), and with
# integrity=on (the joined stripes' block checksums, verified by the
# reads).  With
# -D gpuraid.join=0 nothing is joined and the image is the same.

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_cmd nbdcopy cmp

k=5 m=2 chunk=65536 n=7
member_size=26M
[ "${TEST_SMALL:-0}" = 1 ] && member_size=9M

# read_back WHAT: the image read back through a fresh server (CPU),
# compared.
read_back ()
{
  start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" || exit 1
  rm -f "$tmpdir/out"
  nbdcopy -C 4 --request-size=1048576 "$uri" "$tmpdir/out" &&
    cmp "$tmpdir/out" "$tmpdir/img" || fail "$1: the image read back differs"
  stop_nbdkit "$pid"
}

for cfg in cpu fake failing integrity off; do
  echo "=== $cfg"
  flags=() opts=() run=()
  case $cfg in
    # The stand-in, also where a real GPU is (accel=cpu leaves that out).
    fake) flags=(-D gpuraid.fake_gpu=2) run=(accel=cpu) ;;
    # A stand-in that fails from its 20th operation on: the encodes
    # begun and queued by then are redone on the CPU when waited for.
    failing) flags=(-D gpuraid.fake_gpu=2 -D gpuraid.fake_fail_after=20)
             run=(accel=cpu) ;;
    integrity) opts=(integrity=on) ;;
    off) flags=(-D gpuraid.join=0) ;;
  esac
  make_members $n $member_size
  set_args
  : >"$nbdkit_log"
  start_nbdkit -P "$pid" -U "$sock" -v "${flags[@]}" "$PLUGIN" \
    "${args[@]}" m=$m chunk=$chunk create=true "${opts[@]}" "${run[@]}" ||
    exit 1
  size=$(nbdinfo --size "$uri")
  head -c "$size" /dev/urandom >"$tmpdir/img"
  # Neighbours meet only while both are in flight; on a loaded machine
  # one pass may happen to join none: up to three passes.
  for (( pass = 1; pass <= 3; pass++ )); do
    nbdcopy -C 4 --request-size=1048576 "$tmpdir/img" "$uri" ||
      fail "$cfg: nbdcopy"
    [ "$cfg" = off ] && break
    # The account is logged at exit: a pass's count needs a restart.
    stop_nbdkit "$pid"
    read -r taken written back <<<"$(joined "$nbdkit_log")"
    echo "pass $pass: parts of stripes taken ${taken:-0}, written joined ${written:-0}, handed back ${back:-0}"
    [ "${written:-0}" -gt 0 ] && break
    [ $pass = 3 ] && fail "$cfg: no write's part of a stripe was joined"
    : >"$nbdkit_log"
    start_nbdkit -P "$pid" -U "$sock" -v "${flags[@]}" "$PLUGIN" \
      "${args[@]}" "${run[@]}" || exit 1
  done
  if [ "$cfg" = off ]; then
    stop_nbdkit "$pid"
    [ -z "$(joined "$nbdkit_log")" ] ||
      fail "gpuraid.join=0: parts joined: $(joined "$nbdkit_log")"
    grep -q 'write-joined' "$nbdkit_log" &&
      fail "gpuraid.join=0: write-joined plans run"
  else
    # Each part taken was written with its stripe or handed back.
    [ $((taken)) -eq $((written + back)) ] ||
      fail "$cfg: $taken parts taken, $written written and $back back"
    plans=$(sed -n 's/.*plans run one at a time.* write-joined \([0-9]*\):.*/\1/p' "$nbdkit_log")
    echo "write-joined plans: ${plans:-none}"
    [ "${plans:-0}" -eq "$written" ] ||
      fail "$cfg: ${plans:-no} write-joined plans for $written parts joined"
    [ "$cfg" != fake ] || gpu_worked "$nbdkit_log" ||
      fail "the stand-in GPU did not code"
    [ "$cfg" != failing ] ||
      grep -q 'GPU .* failed.*redoing it and all later coding on the CPU' \
        "$nbdkit_log" || fail "failing: no encode redone on the CPU"
    # On the GPU the whole and joined stripes are begun together, their
    # encodes queued at once; on the CPU each is coded as it comes.
    begun=$(begun "$nbdkit_log")
    echo "plans begun together: ${begun:-none}"
    if [ "$cfg" = fake ] || [ "$cfg" = failing ]; then
      [ "${begun:-0}" -gt 0 ] || fail "$cfg: no plan begun with others"
    else
      [ -z "$begun" ] || fail "$cfg: $begun plans begun on the CPU"
    fi
  fi
  check_parity $k $m $chunk rs "${members[@]}"
  read_back "$cfg"
  mv "${members[1]}" "$tmpdir/gone1"; mv "${members[4]}" "$tmpdir/gone4"
  read_back "$cfg, two members gone"
done
echo "$0: PASS"
