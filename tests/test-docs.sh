#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The parameters in nbdkit PLUGIN --help (config_help lines "key=...")
# must be exactly the "=item B<key=>" entries of
# docs/nbdkit-gpuraid-plugin.pod, and podchecker must pass if installed.
# In the spirit of nbdkit's test-plugin-docs.sh.  And tests/README.md's
# table has a row for every test that make check, check-gpu and
# check-long run (CHECK_TESTS, GPU_TESTS, LONG_TESTS, as the Makefile and
# its fragments say), and no row for anything else.  Every script in
# scripts/ answers --help (exit 0, what it does, nothing run).

source "$(dirname "$0")/functions.sh"
requires_plugin

pod=$top/docs/nbdkit-gpuraid-plugin.pod
if [ ! -f "$pod" ]; then
  echo "$0: FAIL: $pod does not exist"
  exit 1
fi

run_nbdkit "$PLUGIN" --help > "$tmpdir/help" 2>&1 ||
  { cat "$tmpdir/help"; echo "$0: FAIL: --help failed"; exit 1; }
# The plugin's config_help comes after the "plugin: gpuraid" line.
sed -n '/^plugin: gpuraid/,$p' "$tmpdir/help" > "$tmpdir/phelp"
if [ ! -s "$tmpdir/phelp" ]; then
  cat "$tmpdir/help"
  echo "$0: FAIL: no 'plugin: gpuraid' section in --help"
  exit 1
fi
grep -Eo '^[[:space:]]*\[?[a-z][a-z0-9_-]*=' "$tmpdir/phelp" |
  tr -d ' \t[=' | sort -u > "$tmpdir/help-keys"
grep -E '^=item B<[a-z][a-z0-9_-]*=>' "$pod" |
  sed -E 's/^=item B<([a-z][a-z0-9_-]*)=>.*/\1/' | sort -u > "$tmpdir/pod-keys"
echo "keys in --help:"; cat "$tmpdir/help-keys"
echo "keys in the pod:"; cat "$tmpdir/pod-keys"
if [ ! -s "$tmpdir/help-keys" ]; then
  echo "$0: FAIL: no key= lines in --help"
  exit 1
fi
if ! diff -u "$tmpdir/help-keys" "$tmpdir/pod-keys"; then
  echo "$0: FAIL: --help and $pod document different parameters (- help, + pod)"
  exit 1
fi
# The contract's parameters must all be there.
for key in member m chunk code create force backend accel gpu-device; do
  grep -qx "$key" "$tmpdir/help-keys" ||
    { echo "$0: FAIL: parameter $key= missing from --help"; exit 1; }
done
# The test table: the lists as make sees them (the Makefile and every
# fragment, nothing built), against the rows' first column.
readme=$top/tests/README.md
if command -v make >/dev/null; then
  env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL \
    make -s --no-print-directory -C "$top" -f Makefile -f - gr-list-tests \
    >"$tmpdir/make-tests" <<'EOF' || fail "make could not list the tests"
gr-list-tests: ; @printf '%s\n' $(sort $(CHECK_TESTS) $(GPU_TESTS) $(LONG_TESTS))
EOF
  sed -n 's/^| `\([^`]*\)` |.*/\1/p' "$readme" | sort -u >"$tmpdir/readme-tests"
  [ -s "$tmpdir/make-tests" ] || fail "make listed no tests"
  echo "tests make runs: $(wc -l <"$tmpdir/make-tests"), rows in $readme: $(wc -l <"$tmpdir/readme-tests")"
  diff -u "$tmpdir/make-tests" "$tmpdir/readme-tests" ||
    fail "$readme's table and the tests make runs differ (-: no row; +: a row for no such test)"
else
  echo "$0: make not installed, not checking $readme's test table"
fi
if command -v podchecker >/dev/null; then
  for p in "$pod" "$top/docs/gpuraidctl.pod"; do
    podchecker "$p" || { echo "$0: FAIL: podchecker $p"; exit 1; }
  done
else
  echo "$0: podchecker not installed, not checking pod syntax"
fi
# Every script answers --help: exit 0, what it does on stdout (its
# header's first line), nothing else run (in a folder of its own, which
# stays empty).
mkdir "$tmpdir/help-cwd"
for f in "$top"/scripts/*; do
  [ -f "$f" ] && [ -x "$f" ] || continue
  name=${f##*/}
  (cd "$tmpdir/help-cwd" && "$f" --help) >"$tmpdir/out" 2>"$tmpdir/err" ||
    fail "scripts/$name --help: exit $? ($(head -2 "$tmpdir/err"))"
  if [ "$name" = nbdbench ]; then
    want='usage: nbdbench'
  else
    want=$(sed -n '3s/^# \{0,1\}//p' "$f" | cut -c1-40)
  fi
  grep -qF "$want" "$tmpdir/out" || fail "scripts/$name --help does not say '$want': $(head -3 "$tmpdir/out")"
  [ -z "$(ls -A "$tmpdir/help-cwd")" ] || fail "scripts/$name --help made files: $(ls -A "$tmpdir/help-cwd")"
  echo "  scripts/$name --help: $(head -1 "$tmpdir/out")"
done
echo "$0: PASS"
