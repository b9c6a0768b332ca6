#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# GPU parity inside the array: an array written with accel=gpu reads back
# with accel=cpu (healthy and with m members gone), and an array written
# degraded with accel=cpu reads back degraded with accel=gpu, and back;
# parity on disk is checked offline against the reference coder.  Both
# codes, 10+4, chunk 64K (stripe width 640K).  Writes go through nbdcopy
# (several connections): 4 MiB requests (whole stripes plus partial
# ones, which neighbours join into whole stripes: nbdkit-plugin/join.h;
# their batches coded where the request buffers hold them, as the exit
# log counts) and requests nbdcopy makes of its 4 KiB (the plugin's preferred
# size, 1 MiB).  Small unaligned writes (tests/test-concurrent, 6
# connections) are gathered across requests on the GPU (counted in the
# exit log): with checksums as reconstruct-writes' encodes of part of a
# chunk's height, without as read-modify-writes' parity updates (encodes
# of the data's delta); read back with accel=cpu with m members gone.
# A data block and a parity chunk corrupted on the members are found (by
# their block checksums: integrity=on, the default) and repaired by a
# scrub with accel=gpu, checked offline and read back with accel=cpu.  Then member 3 is rebuilt onto a blank file with accel=gpu (gpuraidctl
# replace) and read back degraded with accel=cpu, parity checked offline.
# The server sets up the GPU engine and compiles the encode kernel before
# it serves (its log says so).
# Every session with accel=gpu must have coded on the GPU and never fallen
# back to the CPU (gpu_worked: counted from the plugin's own log), else a
# GPU failing mid-run would pass unseen.
# On loop devices with direct I/O (root): full-stripe writes have their
# data copied into scratch by the GPU before the encode (the request's
# buffer not aligned to 512: O_DIRECT would bounce it), none left to
# memcpy, and writes of parts of stripes are right beside them; reads
# healthy and with two members gone: a degraded read's survivors whose
# O_DIRECT would bounce are read into scratch and copied in by the GPU,
# none left to memcpy; healthy reads are not.
# Needs no python, so it also runs on the GPU machine's kit.
# Skips, saying why, where the plugin has no CUDA or there is no GPU.

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_cmd nbdcopy nbdinfo cmp

if ! run_nbdkit "$PLUGIN" --dump-plugin | grep -qx 'gpuraid_cuda=yes'; then
  echo "$0: SKIP: plugin built without CUDA (gpuraid_cuda=no)"
  exit 77
fi

ref=$tmpdir/ref.img
k=10 m=4 chunk=64K
n=$(( k + m ))
seed=$TEST_SEED

# Does a GPU answer?  accel=gpu refuses to start without one.
make_members $n 8M probe
if ! start_array create=true accel=gpu; then
  echo "$0: SKIP: no usable GPU: $(grep -i 'gpu' "$nbdkit_log" | tail -n 1)"
  exit 77
fi
stop_nbdkit "$pid"
rm -f "${members[@]}"

# put SRC REQSIZE: copy image SRC to the export from offset 0.
put ()
{
  nbdcopy --request-size="$2" "$1" "$uri" || { echo "$0: FAIL: nbdcopy to the array"; exit 1; }
  echo "put $1 in requests of $2 (at ${SECONDS}s)"
}
# verify WHAT: the whole export must equal $expect.
verify ()
{
  rm -f "$tmpdir/out"
  nbdcopy "$uri" "$tmpdir/out" || { echo "$0: FAIL: nbdcopy from the array ($1)"; exit 1; }
  if ! cmp "$tmpdir/out" "$expect"; then
    echo "$0: FAIL: data mismatch ($1)"; exit 1
  fi
  echo "ok: $1 (at ${SECONDS}s)"
  rm -f "$tmpdir/out"
}
# overlay SRC: the expected image gets SRC at offset 0.
overlay () { dd if="$1" of="$expect" conv=notrunc status=none; }

# The offline parity check uses ISA-L's coder (gf/'s CRS schedules for
# crs), itself checked against "ref" by gf/test-coder: "ref" CRS needs
# minutes for these members, and the plugin's parity here is the GPU's.
check_backend=isal

expect=$tmpdir/expect.img
# Sizes keep make check-gpu within a few minutes: the 4 KiB requests
# (each a GPU operation) dominate.
head -c 48M /dev/urandom >"$tmpdir/a.img"
head -c 2M /dev/urandom >"$tmpdir/b.img"
head -c 12M /dev/urandom >"$tmpdir/c.img"
head -c 1M /dev/urandom >"$tmpdir/d.img"

for code in rs crs; do
  echo "=== code=$code: write with accel=gpu"
  make_members $n 48M
  : >"$nbdkit_log"
  # shellcheck disable=SC2046
  start_nbdkit -P "$pid" -U "$sock" -v "$PLUGIN" $(member_args "${members[@]}") \
    m=$m chunk=$chunk code=$code create=true accel=gpu || exit 1
  # The GPU coder is made after nbdkit forks (after the pidfile): wait
  # for its log line, which names the GPU and the cuda backend.
  for (( i = 0; i < 100; i++ )); do
    grep -q 'using GPU .*backend cuda' "$nbdkit_log" && break
    sleep 0.1
  done
  if ! grep -m 1 'using GPU .*backend cuda' "$nbdkit_log"; then
    echo "$0: FAIL: the startup log does not name the GPU and the cuda backend"; exit 1
  fi
  # The engine was set up and the encode kernel compiled before serving,
  # not in the first batches (the generic kernel, said, where NVRTC
  # cannot compile one: as test-gpu's JIT part, a note, not a failure).
  setup=$(grep -m 1 -o "GPU engine set up in .*" "$nbdkit_log") ||
    fail "$code: the engine was not set up before serving (no 'GPU engine set up' line)"
  echo "$setup"
  case $setup in
    *"encode kernel compiled for the array's matrix"*) ;;
    *"encode kernel generic: "*) echo "note: no encode kernel compiled: ${setup#*generic: }" ;;
    *) fail "$code: the engine's set-up line says neither kernel: $setup" ;;
  esac
  size=$(nbdinfo --size "$uri")
  rm -f "$expect"; truncate -s "$size" "$expect"
  put "$tmpdir/a.img" 4194304; overlay "$tmpdir/a.img"
  put "$tmpdir/b.img" 4096; overlay "$tmpdir/b.img"
  verify "written and read with accel=gpu"
  stop_nbdkit "$pid"
  gpu_worked "$nbdkit_log" || fail "$code: accel=gpu write session"
  # The 4 MiB requests end inside stripes, on chunk bounds: neighbours'
  # parts joined into whole stripes, coded on the GPU from both buffers.
  read -r taken written back <<<"$(joined "$nbdkit_log")"
  echo "parts of stripes joined: ${written:-0} of ${taken:-0} taken (${back:-0} handed back)"
  [ "${written:-0}" -gt 0 ] || fail "$code: no neighbouring writes joined"
  # Their whole and joined stripes begun together, one GPU wait.
  echo "plans begun together: $(begun "$nbdkit_log")"
  [ "$(begun "$nbdkit_log")" -gt 0 ] 2>/dev/null ||
    fail "$code: no plan begun with its request's others"
  # Their batches coded where the blocks lie (request buffers
  # page-locked, 10+4's tables of 4 rows: gpu/engine.cu run_gathered).
  echo "jobs coded where their blocks are: $(gathered_jobs "$nbdkit_log")"
  [ "$(gathered_jobs "$nbdkit_log")" -gt 0 ] 2>/dev/null ||
    fail "$code: no write batch coded where its blocks are"
  check_parity $k $m 65536 $code "${members[@]}"

  set_args

  echo "=== code=$code: scrub --repair on the GPU"
  # A data chunk (index 2 of stripe 5) and a parity chunk (index k+1 of
  # stripe 17) overwritten on their members; the scrub's batches are
  # coded on the GPU; the CPU then reads every byte and the offline
  # checker finds every stripe consistent.
  doff=$(data_offset 65536)
  head -c 4096 /dev/urandom | dd of="${members[$(( (2 - 5 + n) % n ))]}" \
    bs=4096 seek=$(( (doff + 5 * 65536 + 8192) / 4096 )) conv=notrunc status=none
  head -c 65536 /dev/zero | dd of="${members[$(( (k + 1 - 17 + n) % n ))]}" \
    bs=65536 seek=$(( (doff + 17 * 65536) / 65536 )) conv=notrunc status=none
  expect_check_fails "$code: the corruption is not seen offline" -k $k -m $m -c 65536 -t $code \
    -o "$doff" -b isal -q "${members[@]}"
  : >"$nbdkit_log"
  rm -f "$tmpdir/ctl"
  start_nbdkit -P "$pid" -U "$sock" -v "$PLUGIN" "${args[@]}" accel=gpu \
    control="$tmpdir/ctl" || exit 1
  for (( i = 0; i < 50; i++ )); do [ -S "$tmpdir/ctl" ] && break; sleep 0.1; done
  "$top/ctl/gpuraidctl" -c "$tmpdir/ctl" scrub --repair || fail "$code: scrub --repair"
  timeout 300 "$top/ctl/gpuraidctl" -c "$tmpdir/ctl" wait || fail "$code: the GPU scrub"
  "$top/ctl/gpuraidctl" -c "$tmpdir/ctl" status | sed -n '/^scrub/,/^io/p' | tee "$tmpdir/scrub.st"
  # The data block and the parity chunk's 16 blocks, by their checksums
  # (before the syndrome is computed: no stripe left to report).
  grep -q "0 did not match, 0 located, 0 repaired; 17 blocks failed their checksums, rebuilt and rewritten" \
    "$tmpdir/scrub.st" || fail "$code: scrub counts"
  stop_nbdkit "$pid"
  gpu_worked "$nbdkit_log" || fail "$code: accel=gpu scrub session"
  check_parity $k $m 65536 $code "${members[@]}"

  start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" accel=cpu || exit 1
  verify "written by gpu, scrubbed by gpu, read by cpu"
  stop_nbdkit "$pid"

  for i in 0 3 7 12; do mv "${members[$i]}" "$tmpdir/gone$i"; done
  start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" accel=cpu || exit 1
  verify "written by gpu, members 0 3 7 12 gone, read by cpu"
  put "$tmpdir/c.img" 65536; overlay "$tmpdir/c.img"
  stop_nbdkit "$pid"
  : >"$nbdkit_log"
  start_nbdkit -P "$pid" -U "$sock" -v "$PLUGIN" "${args[@]}" accel=gpu || exit 1
  verify "degraded, written by cpu, read by gpu"
  put "$tmpdir/d.img" 4096; overlay "$tmpdir/d.img"
  verify "degraded, written and read by gpu"
  stop_nbdkit "$pid"
  gpu_worked "$nbdkit_log" || fail "$code: accel=gpu degraded session"
  # Its degraded reads were verified against the checksums the GPU's
  # reconstructs computed of the blocks they read.
  given=$(sed -n "s/.*block checksums verified against the coding's: \([0-9]*\) reads.*/\1/p" "$nbdkit_log")
  echo "$code: degraded reads verified against the GPU's checksums: ${given:-none}"
  [ "${given:-0}" -gt 0 ] || fail "$code: no degraded read verified against the GPU's checksums"
  start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" accel=cpu || exit 1
  verify "degraded, written by gpu, read by cpu"
  stop_nbdkit "$pid"

  echo "=== code=$code: member 3 rebuilt on the GPU, checked by the CPU"
  : >"$nbdkit_log"
  rm -f "$tmpdir/ctl"
  start_nbdkit -P "$pid" -U "$sock" -v "$PLUGIN" "${args[@]}" accel=gpu \
    control="$tmpdir/ctl" || exit 1
  for (( i = 0; i < 50; i++ )); do [ -S "$tmpdir/ctl" ] && break; sleep 0.1; done
  truncate -s 48M "$tmpdir/new3.img"
  "$top/ctl/gpuraidctl" -c "$tmpdir/ctl" replace 3 "$tmpdir/new3.img" || fail "$code: replace 3"
  timeout 300 "$top/ctl/gpuraidctl" -c "$tmpdir/ctl" wait || fail "$code: the GPU rebuild"
  stop_nbdkit "$pid"
  gpu_worked "$nbdkit_log" || fail "$code: accel=gpu rebuild session"
  grep -q 'rebuild of member 3 .* done' "$nbdkit_log" || fail "$code: rebuild not done"
  args[3]=member=$tmpdir/new3.img
  # Members 0, 7 and 12 still gone: 11 of 14, so most stripes are read
  # through the rebuilt member.
  start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" accel=cpu || exit 1
  verify "member 3 rebuilt by the gpu, read degraded by the cpu"
  stop_nbdkit "$pid"
  check_parity $k $m 65536 $code - "${members[1]}" "${members[2]}" \
    "$tmpdir/new3.img" "${members[@]:4:3}" - "${members[@]:8:4}" - "${members[13]}"
  rm -f "${members[@]}" "$tmpdir"/gone* "$tmpdir/new3.img"
done

# gpu_copies LABEL [coded]: the session in $nbdkit_log made every copy
# for the members' alignment on the GPU (a write's data into scratch, a
# degraded read's survivors out of it; none left to memcpy) and never
# fell back to the CPU; with "coded", it coded on the GPU too.
gpu_copies ()
{
  local c
  c=$(host_copies "$nbdkit_log")
  echo "$1: copies for the alignment by the GPU, by memcpy: ${c:-none}"
  grep -m 1 "copies for direct members' alignment" "$nbdkit_log" | sed 's/^.*gpuraid: /  /'
  [ "${c%% *}" -gt 0 ] 2>/dev/null || fail "$1: the GPU copied nothing"
  [ "${c##* }" = 0 ] || fail "$1: copies left to memcpy"
  ! grep -q 'GPU .* failed: .*redoing it' "$nbdkit_log" ||
    fail "$1: the GPU failed: $(grep -m 1 'GPU .* failed' "$nbdkit_log")"
  [ "${2:-}" != coded ] || gpu_worked "$nbdkit_log" || fail "$1: accel=gpu session"
}

# With checksums (integrity=on) they are reconstruct-writes; without,
# read-modify-writes whose parity updates are encodes of the data's
# deltas (one for all the chunks a write changes), gathered the same way.
for integrity in on off; do
  echo "=== small unaligned writes with accel=gpu, integrity=$integrity, read back with accel=cpu"
  make_members $n 12M
  : >"$nbdkit_log"
  # shellcheck disable=SC2046
  start_nbdkit -P "$pid" -U "$sock" -v -D gpuraid.verbose=1 "$PLUGIN" \
    $(member_args "${members[@]}") m=$m chunk=$chunk integrity=$integrity \
    create=true accel=gpu || exit 1
  "$top/tests/test-concurrent" write "$uri" $seed 6 ||
    fail "small writes with accel=gpu (seed $seed)"
  stop_nbdkit "$pid"
  gpu_worked "$nbdkit_log" || fail "accel=gpu small writes session"
  encodes=$(gathered "$nbdkit_log" | cut -d ' ' -f 3)
  read -r rmw rmw_several <<<"$(rmw_plans "$nbdkit_log" $m)"
  echo "small encodes gathered on the GPU: ${encodes:-none}; read-modify-writes: $rmw ($rmw_several of several chunks, each one update)"
  [ "${encodes:-0}" -gt 0 ] || fail "no small write's encode was gathered"
  [ $integrity = on ] || [ "$rmw" -gt 0 ] || fail "integrity=off: no read-modify-write"
  [ $integrity = on ] || [ "$rmw_several" -gt 0 ] ||
    fail "integrity=off: no read-modify-write of several chunks"
  check_parity $k $m 65536 rs "${members[@]}"
  set_args
  for (( i = 0; i < m; i++ )); do mv "${members[$i]}" "${members[$i]}.gone"; done
  start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" accel=cpu || exit 1
  "$top/tests/test-concurrent" verify "$uri" $seed 6 ||
    fail "small writes of accel=gpu read back degraded with accel=cpu"
  stop_nbdkit "$pid"
  rm -f "${members[@]}" "${members[@]/%/.gone}"
done

echo "=== loop devices with direct I/O (512-byte alignment): a write's data and a degraded read's survivors go through scratch, copied by the GPU"
if [ "$(id -u)" != 0 ] || ! command -v losetup >/dev/null ||
   ! losetup -f >/dev/null 2>&1; then
  echo "$0: note: loop devices need root and losetup: this part left out"
else
  # 3+2: a stripe of 192K, so that 1 MiB requests write whole stripes and
  # parts of stripes (reconstruct-writes, not copied: measured slower)
  # both.
  k=3 m=2 n=5
  members=()
  for (( i = 0; i < n; i++ )); do
    truncate -s 16M "$tmpdir/loop$i.img"
    d=$(losetup -f --show --direct-io=on "$tmpdir/loop$i.img") || fail "losetup"
    cleanup_fn losetup -d "$d"
    members+=("$d")
  done
  : >"$nbdkit_log"
  set_args
  start_nbdkit -P "$pid" -U "$sock" -v -D gpuraid.verbose=1 "$PLUGIN" "${args[@]}" \
    m="$m" chunk=64K create=true accel=gpu || exit 1
  size=$(nbdinfo --size "$uri")
  rm -f "$expect"; truncate -s "$size" "$expect"
  head -c $(( size / 2 )) /dev/urandom >"$tmpdir/e.img"
  put "$tmpdir/e.img" 1048576; overlay "$tmpdir/e.img"
  stop_nbdkit "$pid"
  for kind in write-full write-rcw; do
    grep -q "plan $kind " "$nbdkit_log" || fail "no plan $kind in the log"
  done
  gpu_copies "written in whole stripes and parts of stripes" coded
  : >"$nbdkit_log"
  set_args
  start_nbdkit -P "$pid" -U "$sock" -v "$PLUGIN" "${args[@]}" accel=gpu || exit 1
  verify "direct loop members, read with accel=gpu"
  stop_nbdkit "$pid"
  ! grep -q "copies for direct members' alignment" "$nbdkit_log" ||
    fail "healthy reads copied by the GPU"
  : >"$nbdkit_log"
  start_nbdkit -P "$pid" -U "$sock" -v "$PLUGIN" member="${members[0]}" \
    member="$tmpdir/gone1" member="${members[2]}" member="$tmpdir/gone3" \
    member="${members[4]}" accel=gpu || exit 1
  verify "direct loop members 1 and 3 gone, read with accel=gpu"
  stop_nbdkit "$pid"
  gpu_copies "degraded" coded
fi
echo "$0: PASS"
