#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# gpuraid: the Linux kernel's own NBD client (nbd-client, /dev/nbd0, ext4)
# against the gpuraid nbdkit plugin, in a qemu guest (TCG, no KVM needed).
#
#   boot 1: 4+2 array created on 6 sparse files; the guest runs mkfs.ext4,
#           writes files, remounts, verifies, prints their sha256 sums;
#   then:   nbdkit stopped, TWO members renamed away, array restarted degraded;
#   boot 2: the guest mounts it, verifies the files and recomputes the sums,
#           writes while degraded and reads back; the host checks that the
#           sums printed by both boots are identical.
#
# Exit 0 pass, 1 fail, 77 skip (qemu or the guest kernel unavailable).
# Slow (a few minutes under TCG) and downloads a kernel package once, into
# tests/vm/cache/: run by `make check-vm`, not by `make check`.
#
# Environment:
#   VM_TIMEOUT=600     seconds allowed for each qemu boot
#   VM_MEMBER_SIZE=256M  size of each of the 6 member files
#   VM_DATA_MB=20      MiB of pseudo-random data written in boot 1
#   VM_KEEP=1          keep the temporary folder (members, logs)
#   QEMU=qemu-system-x86_64  the qemu binary
#   PLUGIN=path        the nbdkit plugin (default: the one built in the tree)
#   VM_SERVER=file     harness self-test: nbdkit's file plugin instead of
#                      gpuraid (no degraded phase; NOT a test of gpuraid)
#   VM_BETWEEN_BOOTS=cmd  harness self-test: bash command run between the
#                      boots, nbdkit stopped, with VM_WORK=the temp folder
#                      (members are $VM_WORK/member0..5, or $VM_WORK/disk)

set -u -o pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
cache=${VM_CACHE:-$here/cache}
PLUGIN=${PLUGIN:-$top/nbdkit-plugin/nbdkit-gpuraid-plugin.so}
VM_TIMEOUT=${VM_TIMEOUT:-600}
VM_MEMBER_SIZE=${VM_MEMBER_SIZE:-256M}
VM_DATA_MB=${VM_DATA_MB:-20}
VM_SERVER=${VM_SERVER:-gpuraid}
QEMU=${QEMU:-qemu-system-x86_64}
MODULES="nbd virtio_pci virtio_console crc32c_generic ext4"
HOSTBINS="nbd-client mkfs.ext4 e2fsck socat"

t_start=$(date +%s)
work=
nbdkit_pid=
qemu_pid=

msg () { echo "run-vm-test: $*"; }
die () { echo "run-vm-test: FAIL: $*" >&2; exit 1; }
skip () { echo "SKIP: $*"; exit 77; }

cleanup ()
{
  if [ -n "$qemu_pid" ]; then
    kill "$qemu_pid" 2>/dev/null
    wait "$qemu_pid" 2>/dev/null
  fi
  if [ -n "$nbdkit_pid" ] && kill -0 "$nbdkit_pid" 2>/dev/null; then
    kill "$nbdkit_pid" 2>/dev/null
    wait "$nbdkit_pid" 2>/dev/null
  fi
  if [ -n "$work" ] && [ -d "$work" ]; then
    # Keep the logs of the last run next to the cache.
    mkdir -p "$cache/last-run" 2>/dev/null &&
      cp -f "$work"/*.log "$cache/last-run/" 2>/dev/null
    if [ "${VM_KEEP:-0}" = 1 ]; then
      msg "kept $work"
    else
      rm -rf "$work"
    fi
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- 1. packages -----------------------------------------------------------

need_pkgs=
command -v "$QEMU" >/dev/null || need_pkgs+=" qemu-system-x86"
command -v socat >/dev/null || need_pkgs+=" socat"
dpkg-query -W -f='${Status}\n' busybox-static 2>/dev/null |
  grep -q 'install ok installed' || need_pkgs+=" busybox-static"
command -v nbd-client >/dev/null || [ -x /usr/sbin/nbd-client ] ||
  need_pkgs+=" nbd-client"
PATH=$PATH:/usr/sbin:/sbin
command -v mkfs.ext4 >/dev/null || need_pkgs+=" e2fsprogs"
command -v nbdkit >/dev/null || need_pkgs+=" nbdkit"
if [ -n "$need_pkgs" ]; then
  if [ "$(id -u)" != 0 ]; then
    skip "missing packages:$need_pkgs (as root: apt-get install -y$need_pkgs)"
  fi
  msg "installing$need_pkgs"
  # shellcheck disable=SC2086
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y $need_pkgs \
       >/dev/null 2>&1; then
    apt-get update >/dev/null 2>&1
    DEBIAN_FRONTEND=noninteractive apt-get install -y $need_pkgs >/dev/null ||
      skip "cannot install:$need_pkgs"
  fi
fi
for c in "$QEMU" socat nbd-client mkfs.ext4 e2fsck nbdkit \
         dpkg-deb busybox gzip; do
  command -v "$c" >/dev/null || skip "$c not found"
done
ldd /bin/busybox >/dev/null 2>&1 && skip "/bin/busybox is not static (install busybox-static)"
"$QEMU" -version >/dev/null 2>&1 || skip "$QEMU does not run"

checker=$top/tests/gpuraid-check
if [ "$VM_SERVER" = gpuraid ]; then
  [ -f "$PLUGIN" ] || die "plugin $PLUGIN not built (run make first)"
  [ -x "$checker" ] || make -C "$top" --no-print-directory tests/gpuraid-check \
    >/dev/null || die "cannot build tests/gpuraid-check"
elif [ "$VM_SERVER" != file ]; then
  die "VM_SERVER must be gpuraid or file"
fi

# ---- 1b. guest kernel: linux-image-amd64 -> linux-image-X.Y.Z-N-amd64 ------

mkdir -p "$cache" || die "cannot create $cache"
apt_download ()
{
  (cd "$cache" && apt-get download "$1" >>"$cache/apt.log" 2>&1) && return 0
  [ "$(id -u)" = 0 ] || return 1
  apt-get update >>"$cache/apt.log" 2>&1
  (cd "$cache" && apt-get download "$1" >>"$cache/apt.log" 2>&1)
}

if ! apt_download linux-image-amd64; then
  msg "apt-get download linux-image-amd64 failed; trying the cache"
fi
meta=$(ls -t "$cache"/linux-image-amd64_*.deb 2>/dev/null | head -1)
[ -n "$meta" ] || skip "cannot download linux-image-amd64 (see $cache/apt.log)"
kpkg=$(dpkg-deb -f "$meta" Depends | tr ',|' '\n\n' | sed 's/(.*//; s/ //g' |
       grep '^linux-image-[0-9]' | head -1)
[ -n "$kpkg" ] || die "no linux-image-<version> dependency in $meta"
if ! ls "$cache/$kpkg"_*.deb >/dev/null 2>&1; then
  msg "downloading $kpkg"
  apt_download "$kpkg" || skip "cannot download $kpkg (see $cache/apt.log)"
fi
kdeb=$(ls -t "$cache/$kpkg"_*.deb | head -1)
ktree=$cache/$kpkg
if [ ! -f "$ktree/.unpacked" ]; then
  msg "unpacking $(basename "$kdeb")"
  rm -rf "$ktree" "$ktree.tmp"
  dpkg-deb -x "$kdeb" "$ktree.tmp" || die "dpkg-deb -x $kdeb"
  kver=$(ls "$ktree.tmp/lib/modules")
  busybox depmod -b "$ktree.tmp" "$kver" || die "busybox depmod"
  touch "$ktree.tmp/.unpacked"
  mv "$ktree.tmp" "$ktree" || die "mv $ktree"
fi
kver=$(ls "$ktree/lib/modules")
kernel=$ktree/boot/vmlinuz-$kver
[ -f "$kernel" ] || die "no $kernel"
msg "guest kernel $kver"

work=$(mktemp -d "${TMPDIR:-/tmp}/grvm.XXXXXX") || die "mktemp"

# ---- 2. initramfs ----------------------------------------------------------

ird=$work/initramfs
mkdir -p "$ird"/{bin,sbin,usr/bin,usr/sbin,hostbin,proc,sys,dev,tmp,mnt,etc} \
         "$ird/lib/modules/$kver" || die "mkdir $ird"
cp /bin/busybox "$ird/bin/busybox" || die "cp busybox"
ln -s busybox "$ird/bin/sh"
cp "$here/guest-init.sh" "$ird/init" && chmod 755 "$ird/init" || die "cp init"
ln -s /proc/mounts "$ird/etc/mtab"

# Host binaries with every library ldd names, at the same paths.
for b in $HOSTBINS; do
  p=$(command -v "$b") || die "$b not found"
  cp -L "$p" "$ird/hostbin/$b" || die "cp $p"
  for lib in $(ldd "$p" | grep -o '/[^ ]*'); do
    mkdir -p "$ird$(dirname "$lib")"
    [ -e "$ird$lib" ] || cp -L "$lib" "$ird$lib" || die "cp $lib"
  done
done

# Modules and everything they depend on (modules.dep from busybox depmod).
depfile=$ktree/lib/modules/$kver/modules.dep
todo=$MODULES
mods=
while [ -n "$todo" ]; do
  set -- $todo
  name=$1
  shift
  todo=$*
  line=$(grep -E "(^|/)${name}\.ko:" "$depfile" | head -1)
  [ -n "$line" ] || die "module $name not in $depfile"
  path=${line%%:*}
  case " $mods " in *" $path "*) continue ;; esac
  mods+=" $path"
  for d in ${line#*:}; do
    d=${d##*/}
    todo+=" ${d%.ko}"
  done
done
: > "$ird/lib/modules/$kver/modules.dep"
for path in $mods; do
  mkdir -p "$ird/lib/modules/$kver/$(dirname "$path")"
  cp "$ktree/lib/modules/$kver/$path" "$ird/lib/modules/$kver/$path" ||
    die "cp $path"
  grep -E "^${path}:" "$depfile" >> "$ird/lib/modules/$kver/modules.dep"
done
msg "modules:$(for p in $mods; do b=${p##*/}; printf ' %s' "${b%.ko}"; done)"

initrd=$work/initramfs.gz
(cd "$ird" && find . | busybox cpio -o -H newc -R 0:0 2>/dev/null |
   gzip -1 > "$initrd") || die "cpio"
msg "initramfs $(du -k "$initrd" | cut -f1) KiB"

# ---- 3. the array ----------------------------------------------------------

sock=$work/nbd.sock
pidf=$work/nbdkit.pid
nbdlog=$work/nbdkit.log
members=()
for i in 0 1 2 3 4 5; do
  members+=("$work/member$i")
done

start_nbdkit ()
{
  rm -f "$sock" "$pidf"
  echo "=== nbdkit $*" >> "$nbdlog"
  nbdkit -f --exit-with-parent -P "$pidf" -U "$sock" "$@" 2>>"$nbdlog" &
  nbdkit_pid=$!
  local i
  for i in $(seq 1 300); do
    [ -S "$sock" ] && [ -s "$pidf" ] && return 0
    kill -0 "$nbdkit_pid" 2>/dev/null || break
    sleep 0.1
  done
  cat "$nbdlog" >&2
  die "nbdkit did not start: nbdkit $*"
}

stop_nbdkit ()
{
  kill "$nbdkit_pid" 2>/dev/null
  wait "$nbdkit_pid"
  local rc=$?
  nbdkit_pid=
  # 143 = killed by our SIGTERM, the normal way nbdkit -f stops.
  [ $rc = 0 ] || [ $rc = 143 ] || die "nbdkit exited with $rc (see $nbdlog)"
}

start_array ()
{
  local args=() m
  if [ "$VM_SERVER" = file ]; then
    [ -f "$work/disk" ] || truncate -s 1G "$work/disk"
    start_nbdkit file "$work/disk"
    return
  fi
  for m in "${members[@]}"; do
    args+=("member=$m")
  done
  start_nbdkit "$PLUGIN" "${args[@]}" m=2 "$@"
}

# ---- 4. qemu ---------------------------------------------------------------

boot ()
{
  local phase=$1 log=$work/console$1.log t0 rc
  t0=$(date +%s)
  msg "boot $phase (timeout ${VM_TIMEOUT}s)..."
  : > "$log"
  timeout "$VM_TIMEOUT" "$QEMU" \
    -accel tcg -smp 1 -m 1024 -nodefaults -nic none -display none \
    -no-reboot -kernel "$kernel" -initrd "$initrd" \
    -append "console=ttyS0 panic=1 quiet grvm.phase=$phase grvm.mb=$VM_DATA_MB" \
    -serial "file:$log" \
    -chardev "socket,id=nbd,path=$sock" \
    -device virtio-serial -device virtserialport,chardev=nbd,name=nbd \
    > "$work/qemu$phase.log" 2>&1 &
  # In the background so that a signal to this script is acted on at once.
  qemu_pid=$!
  wait "$qemu_pid"
  rc=$?
  qemu_pid=
  tr -d '\r' < "$log" > "$log.txt" && mv "$log.txt" "$log"
  grep '^GRVM' "$log" | grep -v '^[0-9a-f]\{64\} ' | sed "s/^/  guest$phase: /"
  msg "boot $phase: qemu exit $rc after $(( $(date +%s) - t0 )) s"
  if ! grep -q '^GRVM: init' "$log"; then
    if [ $rc != 0 ] && [ $rc != 124 ] && [ ! -s "$log" ]; then
      cat "$work/qemu$phase.log" >&2
      skip "$QEMU cannot run a guest here (exit $rc)"
    fi
    tail -40 "$log" >&2
    die "boot $phase: the guest never reached /init"
  fi
  if ! grep -qx "GRVM-RESULT phase=$phase PASS" "$log"; then
    echo "--- console $phase (last 60 lines) ---" >&2
    tail -60 "$log" >&2
    echo "--- nbdkit log (last 30 lines) ---" >&2
    tail -30 "$nbdlog" >&2
    [ $rc = 124 ] && die "boot $phase timed out after ${VM_TIMEOUT}s"
    die "boot $phase did not pass"
  fi
}

sums_of ()
{
  sed -n "/^GRVM-SUMS-BEGIN phase=$1\$/,/^GRVM-SUMS-END phase=$1\$/p" \
    "$work/console$1.log" | grep -E '^[0-9a-f]{64}  '
}

# ---- 5. boot 1: fresh array; boot 2: two members gone --------------------

for m in "${members[@]}"; do
  truncate -s "$VM_MEMBER_SIZE" "$m" || die "truncate $m"
done
start_array create=true
boot 1
stop_nbdkit
sums_of 1 > "$work/sums1"
n1=$(wc -l < "$work/sums1")
[ "$n1" = 51 ] || die "boot 1 printed $n1 checksums, expected 51"

if [ "$VM_SERVER" = gpuraid ]; then
  # Every stripe the kernel wrote (1 MiB writes, TRIM, FLUSH) must have
  # consistent parity: recomputed offline with the reference backend.
  "$checker" -k 4 -m 2 -q "${members[@]}" > "$work/check.log" 2>&1 ||
    { head -20 "$work/check.log" >&2; die "gpuraid-check: parity inconsistent after boot 1"; }
  msg "gpuraid-check: parity of every stripe consistent after boot 1"
  mv "${members[1]}" "${members[1]}.away" || die "mv"
  mv "${members[4]}" "${members[4]}.away" || die "mv"
  msg "members 1 and 4 renamed away; restarting the array degraded"
else
  msg "VM_SERVER=file: harness self-test, no degraded phase"
fi
if [ -n "${VM_BETWEEN_BOOTS:-}" ]; then
  msg "running VM_BETWEEN_BOOTS: $VM_BETWEEN_BOOTS"
  VM_WORK=$work bash -c "$VM_BETWEEN_BOOTS" || die "VM_BETWEEN_BOOTS failed"
fi
start_array
grep -i -E 'missing|degraded' "$nbdlog" | sed 's/^/  nbdkit: /'
boot 2
stop_nbdkit
sums_of 2 > "$work/sums2"

# ---- 6. verdict ------------------------------------------------------------

if ! cmp -s "$work/sums1" "$work/sums2"; then
  diff "$work/sums1" "$work/sums2" | head -20 >&2
  die "checksums printed by boot 2 differ from boot 1"
fi
msg "$n1 files, sha256 identical across both boots:"
grep ' random.bin$' "$work/sums1" | sed 's/^/  /'
msg "PASS in $(( $(date +%s) - t_start )) s"
exit 0
