#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A real filesystem on the array: nbdfuse exposes the NBD export as a
# file, a loop device sits on it, mkfs.ext4, mount, write files, sync,
# unmount; parity is checked offline; the array is restarted with m
# members gone, mounted again, and every file's sha256 must match.
# Skips (saying why) without root, /dev/fuse, loop devices, nbdfuse or
# the permission to mount.  Loop devices and FUSE mounts are cleaned up
# in all cases.

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_cmd nbdfuse fusermount3 losetup mkfs.ext4 mount umount sha256sum
if [ "$(id -u)" != 0 ]; then
  echo "$0: SKIP: must run as root (loop devices, mount)"
  exit 77
fi
if [ ! -c /dev/fuse ] || [ ! -r /dev/fuse ] || [ ! -w /dev/fuse ]; then
  echo "$0: SKIP: /dev/fuse missing or not accessible"
  exit 77
fi
if [ ! -e /dev/loop-control ] && ! ls /dev/loop[0-9]* >/dev/null 2>&1; then
  echo "$0: SKIP: no /dev/loop* devices"
  exit 77
fi

# umount_all and detach are registered as cleanups; they tolerate
# things that are already gone.
loops=()
fmnt=$tmpdir/fuse
mnt=$tmpdir/mnt
mkdir -p "$fmnt" "$mnt"

cleanup_mounts ()
{
  local l
  if mountpoint -q "$mnt"; then umount "$mnt" || umount -l "$mnt"; fi
  for l in "${loops[@]}"; do
    losetup -d "$l" 2>/dev/null
  done
  loops=()
  if mountpoint -q "$fmnt"; then
    fusermount3 -u "$fmnt" || fusermount3 -uz "$fmnt"
  fi
  return 0
}
cleanup_fn cleanup_mounts

# Probe: can we use a loop device and mount here at all?
truncate -s 8M "$tmpdir/probe.img"
if ! probe=$(losetup -f --show "$tmpdir/probe.img" 2>&1); then
  echo "$0: SKIP: losetup does not work here: $probe"
  exit 77
fi
loops+=("$probe")
if ! mkfs.ext4 -q "$probe" >/dev/null 2>&1 || ! mount "$probe" "$mnt" 2>"$tmpdir/mount.err"; then
  echo "$0: SKIP: cannot mount a loop device here: $(cat "$tmpdir/mount.err")"
  exit 77
fi
umount "$mnt"
losetup -d "$probe"
loops=()
rm -f "$tmpdir/probe.img"

k=4 m=2 chunk=65536 code=rs
n=$(( k + m ))
fpid=$tmpdir/nbdfuse.pid
uri=$(sock_uri "$sock")

# attach: nbdfuse + loop device; sets $loop.
attach ()
{
  local i
  rm -f "$fpid"
  nbdfuse -P "$fpid" "$fmnt/disk" "$uri" >>"$tmpdir/nbdfuse.log" 2>&1 &
  cleanup_fn _kill_pid $!
  for (( i = 0; i < 100; i++ )); do
    [ -s "$fpid" ] && [ -f "$fmnt/disk" ] && break
    sleep 0.1
  done
  if [ ! -f "$fmnt/disk" ]; then
    cat "$tmpdir/nbdfuse.log"
    echo "$0: FAIL: nbdfuse did not expose $fmnt/disk"
    exit 1
  fi
  # Run cleanup_mounts before the servers are killed (LIFO).
  cleanup_fn cleanup_mounts
  loop=$(losetup -f --show "$fmnt/disk") ||
    { echo "$0: FAIL: losetup on the nbdfuse file"; exit 1; }
  loops+=("$loop")
}

# detach: unmount everything and wait for nbdfuse to exit.
detach ()
{
  local p
  p=$(cat "$fpid")
  umount "$mnt" || { echo "$0: FAIL: umount"; exit 1; }
  losetup -d "$loop"
  loops=()
  fusermount3 -u "$fmnt" || { echo "$0: FAIL: fusermount3 -u"; exit 1; }
  _kill_pid "$p"
}

make_members "$n" 24M
start_array chunk=$chunk code=$code create=true || exit 1
attach
mkfs.ext4 -q -F "$loop" || { echo "$0: FAIL: mkfs.ext4"; exit 1; }
mount "$loop" "$mnt" || { echo "$0: FAIL: mount"; exit 1; }
mkdir "$mnt/dir"
for (( i = 0; i < 24; i++ )); do
  head -c $(( (RANDOM % 2048 + 1) * 517 )) /dev/urandom > "$mnt/dir/file$i"
done
cp -r "$mnt/dir" "$mnt/copy"
(cd "$mnt" && find . -type f ! -path './lost+found/*' -print0 | sort -z |
   xargs -0 sha256sum) > "$tmpdir/sums"
sync
detach
stop_nbdkit "$pid"
check_parity $k $m $chunk $code "${members[@]}"

# Degraded: members 0 and 3 gone.
set_args
mv "${members[0]}" "$tmpdir/gone0"
mv "${members[3]}" "$tmpdir/gone3"
start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" m=$m ||
  { echo "$0: FAIL: degraded start"; exit 1; }
attach
mount "$loop" "$mnt" || { echo "$0: FAIL: degraded mount"; exit 1; }
(cd "$mnt" && sha256sum --quiet -c "$tmpdir/sums") ||
  { echo "$0: FAIL: checksums differ on the degraded array"; exit 1; }
echo "$(wc -l < "$tmpdir/sums") files verified on the degraded array"
detach
stop_nbdkit "$pid"
echo "$0: PASS"
