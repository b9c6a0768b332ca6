#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# make install into a temporary root (DESTDIR, PREFIX=/usr): the plugin in
# nbdkit's plugin directory (pkg-config nbdkit), gpuraidctl, gpuraid-fault
# and gpuraid-drill, the man pages (pod2man: nbdkit-gpuraid-plugin(1),
# gpuraidctl(8)), the example systemd units; the installed plugin runs
# (--dump-plugin, --help), the installed gpuraidctl and scripts run (the
# scripts find the installed gpuraidctl on PATH), the man pages render,
# the units pass systemd-analyze verify where it is installed, and the
# service's command line, with the members made real, serves an array
# under socket activation (as systemd starts it); make uninstall leaves
# no file behind.  make install before make is refused with one line.

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_cmd pod2man pkg-config make
plugindir=$(pkg-config nbdkit --variable=plugindir) ||
  { echo "$0: SKIP: pkg-config knows no nbdkit (nbdkit-plugin-dev)"; exit 77; }

root=$tmpdir/root
make -s -C "$top" install DESTDIR="$root" PREFIX=/usr >"$tmpdir/out" 2>&1 ||
  fail "make install: $(cat "$tmpdir/out")"
so=$root$plugindir/nbdkit-gpuraid-plugin.so
ex=$root/usr/share/doc/gpuraid/examples
for f in "$so" "$root/usr/bin/gpuraidctl" "$root/usr/share/man/man1/nbdkit-gpuraid-plugin.1" \
         "$root/usr/share/man/man8/gpuraidctl.8" "$root/usr/bin/gpuraid-fault" \
         "$root/usr/bin/gpuraid-drill" "$ex/gpuraid.socket" "$ex/gpuraid.service"; do
  [ -f "$f" ] || fail "not installed: $f ($(find "$root" -type f))"
done
run_nbdkit "$so" --dump-plugin >"$tmpdir/dump" || fail "--dump-plugin of the installed plugin"
grep -q '^name=gpuraid$' "$tmpdir/dump" || fail "dump: $(cat "$tmpdir/dump")"
grep -q "^path=$so\$" "$tmpdir/dump" || fail "not the installed file: $(grep ^path "$tmpdir/dump")"
run_nbdkit "$so" --help >"$tmpdir/help" 2>&1 || fail "--help"
grep -q 'member=PATH' "$tmpdir/help" || fail "help: $(head -3 "$tmpdir/help")"
"$root/usr/bin/gpuraidctl" --help >"$tmpdir/ctl" 2>&1 || true
grep -q 'examine' "$tmpdir/ctl" || fail "installed gpuraidctl: $(head -3 "$tmpdir/ctl")"
for man in "man1/nbdkit-gpuraid-plugin.1:nbdkit-gpuraid-plugin - " "man8/gpuraidctl.8:gpuraidctl - "; do
  page=$root/usr/share/man/${man%%:*}
  grep -q '^\.SH "*NAME' "$page" || fail "$page has no NAME section"
  if command -v man >/dev/null; then
    MANWIDTH=80 man -l "$page" 2>/dev/null | grep -q "${man#*:}" ||
      fail "man -l does not render $page"
  fi
done
# The installed scripts: --help, and gpuraidctl found on PATH (not beside
# them, as in the source tree).
for s in gpuraid-fault gpuraid-drill; do
  "$root/usr/bin/$s" --help >"$tmpdir/shelp" 2>&1 || fail "$s --help: exit $?"
  grep -q "usage\|$s" "$tmpdir/shelp" || fail "$s --help: $(head -3 "$tmpdir/shelp")"
done
PATH=/usr/bin:/bin "$root/usr/bin/gpuraid-fault" fail "$tmpdir/nosock" 0 >"$tmpdir/fout" 2>&1 &&
  fail "gpuraid-fault without gpuraidctl: exit 0"
grep -q 'gpuraidctl not found' "$tmpdir/fout" || fail "gpuraid-fault without gpuraidctl: $(cat "$tmpdir/fout")"
PATH=$root/usr/bin:$PATH "$root/usr/bin/gpuraid-fault" fail "$tmpdir/nosock" 0 >"$tmpdir/fout" 2>&1 &&
  fail "gpuraid-fault fail on no socket: exit 0"
grep -q '^gpuraidctl: .*nosock' "$tmpdir/fout" || fail "installed gpuraid-fault did not run gpuraidctl: $(cat "$tmpdir/fout")"
# The example units.
if command -v systemd-analyze >/dev/null; then
  systemd-analyze verify "$ex/gpuraid.socket" "$ex/gpuraid.service" >"$tmpdir/verify" 2>&1 ||
    fail "systemd-analyze verify: $(cat "$tmpdir/verify")"
  echo "  the example units pass systemd-analyze verify"
else
  echo "  systemd-analyze not installed: the units' syntax not verified"
fi
# The service's command, as systemd would run it (socket activation:
# LISTEN_FDS, through nbdinfo), on six new files in place of /srv/raid,
# with create=true (they are blank) and the plugin by its built path.
cmd=$(sed -n '/^ExecStart=/,/[^\\]$/p' "$ex/gpuraid.service" | sed 's/\\$//; s/^ExecStart=//' | tr '\n' ' ')
for (( i = 0; i < 6; i++ )); do truncate -s 8M "$tmpdir/m$i"; done
read -r -a argv <<<"$(sed "s|/srv/raid/|$tmpdir/|g; s|/run/gpuraid.ctl|$tmpdir/unit.ctl|; s| gpuraid | $PLUGIN |" <<<"$cmd")"
[ "${argv[0]}" = /usr/bin/nbdkit ] || fail "the service runs ${argv[0]}, not /usr/bin/nbdkit"
argv=("${NBDKIT_CMD[@]}" "${argv[@]:1}")       # nbdkit as the tests run it
size=$(nbdinfo --size -- [ "${argv[@]}" create=true ] 2>"$tmpdir/sa") ||
  fail "the service's command under socket activation: $(cat "$tmpdir/sa")"
[ "$size" -gt 0 ] || fail "socket activation: size $size"
echo "  the service's command serves a $size-byte array under socket activation"
make -s -C "$top" uninstall DESTDIR="$root" PREFIX=/usr >"$tmpdir/out" 2>&1 ||
  fail "make uninstall: $(cat "$tmpdir/out")"
left=$(find "$root" -type f)
[ -z "$left" ] || fail "left after uninstall: $left"
echo "install and uninstall into $root: OK"

# Before make: refused, one line, nothing installed.
mkdir -p "$tmpdir/src"
cp "$top/Makefile" "$tmpdir/src/"
mkdir -p "$tmpdir/src/docs" "$tmpdir/src/nbdkit-plugin"
cp "$top/docs/nbdkit-gpuraid-plugin.pod" "$top/docs/gpuraidctl.pod" "$tmpdir/src/docs/"
cp "$top/nbdkit-plugin/config.h" "$tmpdir/src/nbdkit-plugin/"
if make -s -C "$tmpdir/src" install DESTDIR="$tmpdir/root2" >"$tmpdir/out" 2>"$tmpdir/err"; then
  fail "make install without a build succeeded"
fi
grep -q 'is not built: run make first' "$tmpdir/err" || fail "refusal: $(cat "$tmpdir/err")"
[ ! -e "$tmpdir/root2" ] || fail "installed something: $(find "$tmpdir/root2")"
echo "$0: PASS"
