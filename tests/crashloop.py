# SPDX-License-Identifier: BSD-3-Clause
"""gpuraid crash-loop helper: writes that can be checked after a crash.

  crashloop.py write URI STATE SEED [W N]   write until the server dies,
                                      keeping in STATE what each block may
                                      hold
  crashloop.py verify URI STATE [W N]  check every block against STATE

With W N (writer W of N, 0 <= W < N), the writer owns the units of 4
blocks (16 KiB) whose number is W mod N, writes 1 to 4 blocks inside one
of them at a time, and verify checks only those: N writers run at once
on one array, each with its own STATE, their writes interleaved in the
same stripes.

Every 4 KiB block written holds (write id, block number, pattern), so its
contents say which write put it there.  STATE records, for each block,
the write id made durable (by a flush, or a FUA write, acknowledged) and
the ids written to it since (acknowledged or in flight when the server
died): after a crash a block may hold the durable one or any later one,
nothing else.  A block never written holds zeros (id 0).  verify prints
the counts (blocks checked, lost durable writes, corrupt blocks) and
fails on any of the last two.
"""

import hashlib
import json
import random
import sys

import nbd

BLOCK = 4096


def block_bytes(wid, blk):
    if wid == 0:
        return bytes(BLOCK)
    head = wid.to_bytes(8, "little") + blk.to_bytes(8, "little")
    pat = hashlib.blake2b(head, digest_size=64).digest()
    return head + pat * ((BLOCK - 16) // 64) + pat[:(BLOCK - 16) % 64]


def load(path, nblocks):
    try:
        with open(path) as f:
            s = json.load(f)
    except FileNotFoundError:
        s = {"next": 1, "durable": {}, "since": {}}
    return s


def save(path, s):
    with open(path, "w") as f:
        json.dump(s, f)


UNIT = 4         # blocks: what one of several writers owns at a time


def owned(b, w, nw):
    return nw == 1 or (b // UNIT) % nw == w


def write(uri, path, seed, w=0, nw=1):
    h = nbd.NBD()
    h.connect_uri(uri)
    nblocks = h.get_size() // BLOCK
    s = load(path, nblocks)
    rng = random.Random(seed)
    durable, since = s["durable"], s["since"]
    units = [u for u in range(nblocks // UNIT) if u % nw == w]
    try:
        while True:
            wid = s["next"]
            s["next"] += 1
            if nw == 1:
                start = rng.randrange(nblocks)
                n = min(rng.choice([1, 1, 2, 3, 8, 16, 64]), nblocks - start)
            else:
                first = rng.randrange(UNIT)
                start = rng.choice(units) * UNIT + first
                n = rng.randint(1, UNIT - first)
            fua = rng.random() < 0.1
            for b in range(start, start + n):
                since.setdefault(str(b), []).append(wid)
            save(path, s)       # in flight: it may land
            data = b"".join(block_bytes(wid, b) for b in range(start, start + n))
            h.pwrite(data, start * BLOCK, nbd.CMD_FLAG_FUA if fua else 0)
            if fua:
                for b in range(start, start + n):
                    durable[str(b)] = wid
                    since[str(b)] = [x for x in since[str(b)] if x > wid]
            if rng.random() < 0.15:
                h.flush()
                for b, ids in since.items():
                    durable[b] = max([durable.get(b, 0)] + ids)
                since.clear()
            save(path, s)
    except nbd.Error as e:
        print("crashloop: write %d: %s (the crash)" % (s["next"] - 1, e))


def verify(uri, path, w=0, nw=1):
    h = nbd.NBD()
    h.connect_uri(uri)
    nblocks = h.get_size() // BLOCK
    s = load(path, nblocks)
    durable, since = s["durable"], s["since"]
    lost = corrupt = 0
    step = 256
    for base in range(0, nblocks, step):
        n = min(step, nblocks - base)
        got = h.pread(n * BLOCK, base * BLOCK)
        for i in range(n):
            b = base + i
            if not owned(b, w, nw):
                continue
            d = durable.get(str(b), 0)
            allowed = [d] + [x for x in since.get(str(b), []) if x > d]
            blk = got[i * BLOCK:(i + 1) * BLOCK]
            wid = int.from_bytes(blk[:8], "little")
            if blk == block_bytes(wid, b) and wid in allowed:
                continue
            if blk == block_bytes(wid, b) and wid < d:
                lost += 1
                print("crashloop: block %d: durable write %d lost (holds %d)"
                      % (b, d, wid))
            else:
                corrupt += 1
                print("crashloop: block %d: corrupt (first bytes %s, may "
                      "hold %s)" % (b, blk[:16].hex(), allowed))
    print("crashloop: verify: %d blocks%s, %d durable writes lost, %d corrupt"
          % (nblocks, "" if nw == 1 else " (writer %d of %d: its own)"
             % (w, nw), lost, corrupt))
    return lost == 0 and corrupt == 0


def settle(uri, path, w=0, nw=1):
    """After a verify: each block's contents become its durable value."""
    h = nbd.NBD()
    h.connect_uri(uri)
    nblocks = h.get_size() // BLOCK
    s = load(path, nblocks)
    durable = {}
    step = 256
    for base in range(0, nblocks, step):
        n = min(step, nblocks - base)
        got = h.pread(n * BLOCK, base * BLOCK)
        for i in range(n):
            wid = int.from_bytes(got[i * BLOCK:i * BLOCK + 8], "little")
            if wid and owned(base + i, w, nw):
                durable[str(base + i)] = wid
    s["durable"], s["since"] = durable, {}
    save(path, s)


if __name__ == "__main__":
    mode, uri, path = sys.argv[1], sys.argv[2], sys.argv[3]
    if mode == "write":
        write(uri, path, int(sys.argv[4]), *map(int, sys.argv[5:7]))
    elif mode == "verify":
        wn = list(map(int, sys.argv[4:6]))
        ok = verify(uri, path, *wn)
        if ok:
            settle(uri, path, *wn)
        sys.exit(0 if ok else 1)
    else:
        sys.exit("crashloop.py: unknown mode " + mode)
