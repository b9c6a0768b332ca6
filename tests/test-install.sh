#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# make install into a temporary root (DESTDIR, PREFIX=/usr): the plugin in
# nbdkit's plugin directory (pkg-config nbdkit), gpuraidctl, the man page
# (pod2man); the installed plugin runs (--dump-plugin, --help), the
# installed gpuraidctl runs, the man page renders; make uninstall leaves
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
for f in "$so" "$root/usr/bin/gpuraidctl" "$root/usr/share/man/man1/nbdkit-gpuraid-plugin.1"; do
  [ -f "$f" ] || fail "not installed: $f ($(find "$root" -type f))"
done
run_nbdkit "$so" --dump-plugin >"$tmpdir/dump" || fail "--dump-plugin of the installed plugin"
grep -q '^name=gpuraid$' "$tmpdir/dump" || fail "dump: $(cat "$tmpdir/dump")"
grep -q "^path=$so\$" "$tmpdir/dump" || fail "not the installed file: $(grep ^path "$tmpdir/dump")"
run_nbdkit "$so" --help >"$tmpdir/help" 2>&1 || fail "--help"
grep -q 'member=PATH' "$tmpdir/help" || fail "help: $(head -3 "$tmpdir/help")"
"$root/usr/bin/gpuraidctl" --help >"$tmpdir/ctl" 2>&1 || true
grep -q 'examine' "$tmpdir/ctl" || fail "installed gpuraidctl: $(head -3 "$tmpdir/ctl")"
man1=$root/usr/share/man/man1/nbdkit-gpuraid-plugin.1
grep -q '^\.SH "*NAME' "$man1" || fail "the man page has no NAME section"
if command -v man >/dev/null; then
  MANWIDTH=80 man -l "$man1" 2>/dev/null | grep -q 'nbdkit-gpuraid-plugin - ' ||
    fail "man -l does not render it"
fi
make -s -C "$top" uninstall DESTDIR="$root" PREFIX=/usr >"$tmpdir/out" 2>&1 ||
  fail "make uninstall: $(cat "$tmpdir/out")"
left=$(find "$root" -type f)
[ -z "$left" ] || fail "left after uninstall: $left"
echo "install and uninstall into $root: OK"

# Before make: refused, one line, nothing installed.
mkdir -p "$tmpdir/src"
cp "$top/Makefile" "$tmpdir/src/"
mkdir -p "$tmpdir/src/docs" "$tmpdir/src/nbdkit-plugin"
cp "$top/docs/nbdkit-gpuraid-plugin.pod" "$tmpdir/src/docs/"
cp "$top/nbdkit-plugin/config.h" "$tmpdir/src/nbdkit-plugin/"
if make -s -C "$tmpdir/src" install DESTDIR="$tmpdir/root2" >"$tmpdir/out" 2>"$tmpdir/err"; then
  fail "make install without a build succeeded"
fi
grep -q 'is not built: run make first' "$tmpdir/err" || fail "refusal: $(cat "$tmpdir/err")"
[ ! -e "$tmpdir/root2" ] || fail "installed something: $(find "$tmpdir/root2")"
echo "$0: PASS"
