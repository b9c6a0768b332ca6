#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The plugin's structure (nbdkit-plugin/, not its tests): no include or
# call cycle among its modules, no global variable read outside the
# module that defines it, each module with its own header, no file over
# 700 lines.  A module is a name: X.c, X.h and the files X-*.c, X-*.h
# (members.c, members-rebuild.c and members-internal.h are one module,
# members).  Call and data references come from the built objects (nm).

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_cmd nm

"$PY" - "$top/nbdkit-plugin" <<'PYEOF' || exit 1
import glob, os, re, subprocess, sys

d = sys.argv[1]
srcs = [f for f in glob.glob(d + '/*.[ch]')
        if not os.path.basename(f).startswith('test-')]

def module(path):
    return os.path.splitext(os.path.basename(path))[0].split('-')[0]

mods = {module(f) for f in srcs}
bad = []

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

inc = {m: set() for m in mods}
for f in srcs:
    m = module(f)
    for h in re.findall(r'#include "([^"/]+)\.h"', open(f).read()):
        if module(h) in mods and module(h) != m:
            inc[m].add(module(h))
    n = sum(1 for _ in open(f))
    if n > 700:
        bad.append('%s: %d lines (at most 700)' % (os.path.basename(f), n))
for m in mods:
    if glob.glob('%s/%s.c' % (d, m)) + glob.glob('%s/%s-*.c' % (d, m)) \
       and not os.path.exists('%s/%s.h' % (d, m)) and m != 'gpuraid':
        bad.append('module %s has no header of its own (%s.h)' % (m, m))

defs, refs, data = {}, {}, {}
for o in glob.glob(d + '/*.o'):
    m = module(o)
    if m not in mods:
        continue
    for line in subprocess.run(['nm', o], capture_output=True,
                               text=True).stdout.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] in 'TDBRC':
            defs[p[2]] = m
            if p[1] in 'DBC':
                data[p[2]] = m
        elif len(p) == 2 and p[0] == 'U':
            refs.setdefault(m, set()).add(p[1])
calls = {m: set() for m in mods}
for m, syms in refs.items():
    for s in syms:
        if s in defs and defs[s] != m:
            calls[m].add(defs[s])
            if s in data:
                bad.append('%s reads %s, a global of %s' % (m, s, data[s]))
for c in cycles(inc):
    bad.append('include cycle: ' + ' -> '.join(c))
for c in cycles(calls):
    bad.append('call cycle: ' + ' -> '.join(c))
if not defs:
    bad.append('no objects found in ' + d)
for b in bad:
    print('FAIL:', b)
print('%d modules, %d checks failed' % (len(mods), len(bad)))
sys.exit(1 if bad else 0)
PYEOF
echo "$0: PASS"
