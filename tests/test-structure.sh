#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The structure of the plugin (nbdkit-plugin/) and of the libraries it
# shares with gpuraidctl (storage/, format/), not their tests: no include
# or call cycle among the modules of a folder, no global variable read
# outside the module that defines it, no file over 700 lines.  A module
# is a name: X.c, X.h and the files X-*.c, X-*.h (members.c,
# members-rebuild.c and members-internal.h are one module, members).
# In the plugin each module has its own header.  A library has one
# public header, named after its folder (storage/storage.h), its other
# headers are private (*-internal.h), and it is pure of the plugin: it
# includes no nbdkit or plugin header and calls no nbdkit function and
# nothing of the plugin's.  docs/design.md, the map of the house, has a
# section for every plugin module and library and none for one that does
# not exist.  Call and data references come from the built objects (nm).
# The shell helpers the tests and benchmarks source (tests/functions.sh,
# scripts/bench-functions.sh) define no function twice.

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_cmd nm

"$PY" - "$top" <<'PYEOF' || exit 1
import glob, os, re, subprocess, sys

top = sys.argv[1]
PLUGIN = top + '/nbdkit-plugin'
LIBRARIES = [top + '/storage', top + '/format']
bad = []


def module(path):
    return os.path.splitext(os.path.basename(path))[0].split('-')[0]


def sources(d):
    return [f for f in glob.glob(d + '/*.[ch]')
            if not os.path.basename(f).startswith('test-')]


def symbols(o):
    """(defined, data, undefined) symbols of object o."""
    defs, data, refs = set(), set(), set()
    for line in subprocess.run(['nm', o], capture_output=True,
                               text=True).stdout.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] in 'TDBRC':
            defs.add(p[2])
            if p[1] in 'DBC':
                data.add(p[2])
        elif len(p) == 2 and p[0] == 'U':
            refs.add(p[1])
    return defs, data, refs


def cycles(g):
    state, found = {}, []
    def dfs(u, path):
        state[u] = 1
        path.append(u)
        for v in sorted(g[u]):
            if state.get(v) == 1:
                found.append(path[path.index(v):] + [v])
            elif v not in state:
                dfs(v, path)
        path.pop()
        state[u] = 2
    for u in sorted(g):
        if u not in state:
            dfs(u, [])
    return found


def check(d, library):
    """Check folder d; the symbols its objects define."""
    name = os.path.basename(d)
    srcs = sources(d)
    mods = {module(f) for f in srcs}
    inc = {m: set() for m in mods}
    for f in srcs:
        m = module(f)
        text = open(f).read()
        for h in re.findall(r'#include "([^"/]+)\.h"', text):
            if module(h) in mods and module(h) != m:
                inc[m].add(module(h))
        n = text.count('\n')
        if n > 700:
            bad.append('%s/%s: %d lines (at most 700)'
                       % (name, os.path.basename(f), n))
        if library:
            for h in re.findall(r'#include [<"]([^>"]+)[>"]', text):
                if 'nbdkit' in h:
                    bad.append('%s/%s includes %s: a library is pure of '
                               'nbdkit and the plugin'
                               % (name, os.path.basename(f), h))
    if library:
        for f in glob.glob(d + '/*.h'):
            h = os.path.basename(f)
            if h != name + '.h' and not h.endswith('-internal.h'):
                bad.append('%s/%s: a library has one public header (%s.h), '
                           'the others are *-internal.h' % (name, h, name))
        if not os.path.exists('%s/%s.h' % (d, name)):
            bad.append('%s has no public header %s.h' % (name, name))
    else:
        for m in mods:
            if glob.glob('%s/%s.c' % (d, m)) + glob.glob('%s/%s-*.c' % (d, m)) \
               and not os.path.exists('%s/%s.h' % (d, m)) and m != 'gpuraid':
                bad.append('module %s has no header of its own (%s.h)'
                           % (m, m))

    defs, data, refs = {}, {}, {}
    for o in glob.glob(d + '/*.o'):
        m = module(o)
        if m not in mods:
            continue
        dd, da, r = symbols(o)
        for s in dd:
            defs[s] = m
        for s in da:
            data[s] = m
        refs.setdefault(m, set()).update(r)
    calls = {m: set() for m in mods}
    for m, syms in refs.items():
        for s in syms:
            if s in defs and defs[s] != m:
                calls[m].add(defs[s])
                if s in data:
                    bad.append('%s: %s reads %s, a global of %s'
                               % (name, m, s, data[s]))
    for c in cycles(inc):
        bad.append('%s: include cycle: %s' % (name, ' -> '.join(c)))
    for c in cycles(calls):
        bad.append('%s: call cycle: %s' % (name, ' -> '.join(c)))
    if not defs:
        bad.append('no objects found in ' + d)
    print('%s: %d modules' % (name, len(mods)))
    return set(defs), refs


plugin_defs, _ = check(PLUGIN, False)
for d in LIBRARIES:
    _, refs = check(d, True)
    for m, syms in sorted(refs.items()):
        for s in sorted(syms):
            if s.startswith('nbdkit_') or s in plugin_defs:
                bad.append('%s/%s calls %s, of %s' % (
                    os.path.basename(d), m, s,
                    'nbdkit' if s.startswith('nbdkit_') else 'the plugin'))
# The map of the house (docs/design.md): a section (### `name`) for
# every plugin module and library, none for one that does not exist.
plugin_mods = {module(f) for f in sources(PLUGIN)}
known = plugin_mods | {os.path.basename(d) for d in LIBRARIES}
mapped = set(re.findall(r'^### `([^`]+)`', open(top + '/docs/design.md')
                        .read(), re.M))
for m in sorted(known - mapped):
    bad.append('docs/design.md has no section for module %s' % m)
for m in sorted(mapped - known):
    bad.append('docs/design.md maps module %s, which does not exist' % m)
# The shell helpers the tests and benchmarks source: a second definition
# of a name silently replaces the first for every script.
for lib in ('tests/functions.sh', 'scripts/bench-functions.sh'):
    names = re.findall(r'^([A-Za-z_][A-Za-z0-9_]*) *\(\)', open(
        os.path.join(top, lib)).read(), re.M)
    for n in sorted({n for n in names if names.count(n) > 1}):
        bad.append('%s defines %s () more than once' % (lib, n))
for b in bad:
    print('FAIL:', b)
print('%d checks failed' % len(bad))
sys.exit(1 if bad else 0)
PYEOF
echo "$0: PASS"
