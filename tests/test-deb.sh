#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# make deb (scripts/make-deb): the package names itself and its version,
# depends on nbdkit and the packages of the libraries it links, and holds
# the plugin in nbdkit's plugin directory, gpuraidctl and the man page;
# unpacked (dpkg-deb -x) the plugin runs by its installed path and
# gpuraidctl runs.  Installing it for real (dpkg -i) is .ci/run's, as
# root.

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_cmd dpkg-deb pod2man pkg-config make ldd
plugindir=$(pkg-config nbdkit --variable=plugindir) ||
  { echo "$0: SKIP: pkg-config knows no nbdkit (nbdkit-plugin-dev)"; exit 77; }

make -s -C "$top" docs/nbdkit-gpuraid-plugin.1 >/dev/null
deb=$("$top/scripts/make-deb" "$tmpdir" 2>"$tmpdir/err") ||
  fail "make-deb: $(cat "$tmpdir/err")"
[ -f "$deb" ] || fail "no package: $deb"
echo "built $deb"
dpkg-deb -f "$deb" Package Version Depends >"$tmpdir/fields"
cat "$tmpdir/fields"
grep -q '^Package: nbdkit-gpuraid-plugin$' "$tmpdir/fields" || fail "Package"
version=$(sed -n 's/^#define GR_VERSION "\(.*\)"/\1/p' "$top/nbdkit-plugin/config.h")
grep -q "^Version: $version\$" "$tmpdir/fields" || fail "Version is not $version"
for p in nbdkit libisal2 libnbd0; do
  grep -Eq "^Depends: .*\\b$p\\b" "$tmpdir/fields" || fail "Depends lacks $p"
done
dpkg-deb -c "$deb" >"$tmpdir/list"
for f in ".$plugindir/nbdkit-gpuraid-plugin.so" ./usr/bin/gpuraidctl \
         ./usr/share/man/man1/nbdkit-gpuraid-plugin.1; do
  grep -q " $f\$" "$tmpdir/list" || fail "not in the package: $f ($(cat "$tmpdir/list"))"
done
dpkg-deb -x "$deb" "$tmpdir/root"
so=$tmpdir/root$plugindir/nbdkit-gpuraid-plugin.so
run_nbdkit "$so" --dump-plugin >"$tmpdir/dump" || fail "--dump-plugin of the packaged plugin"
grep -q '^name=gpuraid$' "$tmpdir/dump" || fail "dump: $(cat "$tmpdir/dump")"
"$tmpdir/root/usr/bin/gpuraidctl" --help >"$tmpdir/ctl" 2>&1 || true
grep -q 'examine' "$tmpdir/ctl" || fail "packaged gpuraidctl: $(head -3 "$tmpdir/ctl")"
echo "$0: PASS"
