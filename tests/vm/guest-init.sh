#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# /init of the gpuraid VM test guest (busybox sh, copied into the initramfs
# by run-vm-test.sh).  The kernel command line says what to do:
#   grvm.phase=1   mkfs.ext4 on the NBD disk, write files, verify, print sums
#   grvm.phase=2   (array degraded on the host) verify the files from phase 1,
#                  print their recomputed sums, then write and verify while
#                  degraded
#   grvm.mb=N      size of the pseudo-random file in MiB (phase 1)
# Every line the host looks for starts with "GRVM".  On any failure the guest
# prints "GRVM-RESULT phase=N FAIL" and powers off.

/bin/busybox --install -s
export PATH=/hostbin:/sbin:/bin:/usr/sbin:/usr/bin

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
# Kernel warnings and errors (nbd I/O errors, ext4 errors) stay on the console.
echo 4 > /proc/sys/kernel/printk

phase=
mb=20
for w in $(cat /proc/cmdline); do
  case $w in
    grvm.phase=*) phase=${w#grvm.phase=} ;;
    grvm.mb=*) mb=${w#grvm.mb=} ;;
  esac
done

say ()
{
  echo "GRVM: $*"
}

finish ()
{
  echo "GRVM-RESULT phase=$phase $1"
  sync
  poweroff -f
  sleep 60
}

fail ()
{
  say "FAIL: $*"
  cd /
  umount /mnt 2>/dev/null
  nbd-client -d /dev/nbd0 >/dev/null 2>&1
  finish FAIL
}

run ()
{
  "$@" || fail "command failed ($?): $*"
}

# Print the sha256 of every file listed in a checksum file, recomputed now
# (never the stored list itself), between marker lines for the host.
print_sums ()
{
  echo "GRVM-SUMS-BEGIN phase=$phase"
  (cd /mnt && sha256sum $(cut -c67- "$1")) || fail "sha256sum for print"
  echo "GRVM-SUMS-END phase=$phase"
}

# Verify a checksum list (names relative to /mnt); on a mismatch print the
# files that differ and fail.
check_sums ()
{
  (cd /mnt && sha256sum -c "$1") > /tmp/check.out 2>&1 && return 0
  grep -v ': OK$' /tmp/check.out | head -20
  fail "$2"
}

# Unmount, drop caches, check the file system with e2fsck -fn, mount again.
remount_check ()
{
  cd /
  run umount /mnt
  sync
  echo 3 > /proc/sys/vm/drop_caches
  run e2fsck -fn /dev/nbd0
  run mount -t ext4 "$@" /dev/nbd0 /mnt
}

say "init phase=$phase kernel=$(uname -r)"
[ "$phase" = 1 ] || [ "$phase" = 2 ] || fail "no grvm.phase on the command line"

for m in nbd virtio_pci virtio_console crc32c_generic ext4; do
  run modprobe $m
done

i=0
while [ ! -e /dev/vport0p1 ]; do
  i=$((i + 1))
  [ $i -le 100 ] || fail "no /dev/vport0p1 (virtio-serial port)"
  sleep 0.1
done

# Bridge the virtio-serial port (connected to nbdkit's unix socket on the
# host) to a unix socket the kernel NBD client can connect to.
socat UNIX-LISTEN:/tmp/nbd.sock OPEN:/dev/vport0p1 &
i=0
while [ ! -S /tmp/nbd.sock ]; do
  i=$((i + 1))
  [ $i -le 100 ] || fail "socat did not create /tmp/nbd.sock"
  sleep 0.1
done

run nbd-client -u /tmp/nbd.sock /dev/nbd0 -b 4096
run sh -c 'echo 1024 > /sys/block/nbd0/queue/max_sectors_kb'
say "nbd0 size=$(cat /sys/block/nbd0/size) sectors" \
    "max_sectors_kb=$(cat /sys/block/nbd0/queue/max_sectors_kb)"
mkdir -p /mnt

if [ "$phase" = 1 ]; then
  run mkfs.ext4 -q -F /dev/nbd0
  run mount -t ext4 /dev/nbd0 /mnt
  run dd if=/dev/urandom of=/mnt/random.bin bs=1M count="$mb"
  run mkdir /mnt/small
  for i in $(seq 1 50); do
    run dd if=/dev/urandom of=/mnt/small/f$i bs=1k count=$((i * 7)) 2>/dev/null
  done
  run sync
  (cd /mnt && sha256sum random.bin small/*) > /tmp/sums || fail "sha256sum"
  run cp /tmp/sums /mnt/SHA256SUMS
  run sync
  remount_check
  check_sums /tmp/sums "checksums differ after remount"
  print_sums /tmp/sums
  cd /
  run umount /mnt
else
  run mount -t ext4 -o ro /dev/nbd0 /mnt
  [ -f /mnt/SHA256SUMS ] || fail "no SHA256SUMS on the file system"
  check_sums /mnt/SHA256SUMS "checksums differ (degraded read)"
  cp /mnt/SHA256SUMS /tmp/sums
  print_sums /tmp/sums
  say "degraded read verified"
  # Write while degraded, then read back through the server.
  remount_check -o rw
  run dd if=/dev/urandom of=/mnt/degraded.bin bs=1M count=8
  run sync
  (cd /mnt && sha256sum degraded.bin) > /tmp/sums2 || fail "sha256sum"
  remount_check -o ro
  check_sums /tmp/sums2 "degraded write read back wrong"
  check_sums /mnt/SHA256SUMS "old files wrong after degraded write"
  say "degraded write verified"
  cd /
  run umount /mnt
fi

run e2fsck -fn /dev/nbd0
run nbd-client -d /dev/nbd0
finish PASS
