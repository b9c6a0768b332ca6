# SPDX-License-Identifier: BSD-3-Clause
# gpuraid - random I/O against an NBD export, mirrored in a reference image.
#
# Run with a python3 that has the nbd module (/usr/bin/python3 on Debian).
#
#   randio.py write URI REF --seed S --ops N --chunk C --k K
#       random writes (unaligned, spanning chunk and stripe boundaries),
#       mirrored into the reference image REF (which must exist and hold
#       the export's current contents), with random reads checked in between
#   randio.py verify URI REF           whole export must equal REF
#   randio.py zeroref URI REF          create REF: zeros, size of the export
#   randio.py trimzero URI REF --seed S --chunk C --k K
#       zero and trim requests (partial and whole stripes); zeroed ranges
#       must read back as zeros, trimmed ones as old data or zeros; REF is
#       updated to what the export now holds
#   randio.py flushfua URI REF --seed S --chunk C --k K
#       flushes and FUA writes
#
# Exit status 0 on success, 1 on a data mismatch or an NBD error.

import argparse
import random
import sys

import nbd

MAXREQ = 4 * 1024 * 1024


def connect(uri):
    h = nbd.NBD()
    h.set_handle_name("randio")
    h.connect_uri(uri)
    return h


def load_ref(path, size):
    with open(path, "rb") as f:
        ref = bytearray(f.read())
    if len(ref) != size:
        sys.exit("randio: %s is %d bytes but the export is %d bytes"
                 % (path, len(ref), size))
    return ref


def save_ref(path, ref):
    with open(path, "wb") as f:
        f.write(ref)


def first_diff(a, b):
    for i in range(len(a)):
        if a[i] != b[i]:
            return i
    return -1


def check_range(h, ref, off, length, what):
    got = h.pread(length, off)
    exp = bytes(ref[off:off + length])
    if got != exp:
        i = first_diff(got, exp)
        print("randio: MISMATCH (%s) in [%d, +%d): first differing byte at "
              "offset %d: read 0x%02x, expected 0x%02x"
              % (what, off, length, off + i, got[i], exp[i]))
        return False
    return True


def verify(h, ref):
    size = len(ref)
    bad = 0
    off = 0
    while off < size:
        n = min(MAXREQ, size - off)
        got = h.pread(n, off)
        if got != bytes(ref[off:off + n]):
            # Report mismatching 4K blocks (up to 10).
            for b in range(0, n, 4096):
                if got[b:b + 4096] != bytes(ref[off + b:off + b + 4096]):
                    if bad < 10:
                        i = first_diff(got[b:b + 4096], ref[off + b:off + b + 4096])
                        print("randio: MISMATCH in block at offset %d "
                              "(first byte %d)" % (off + b, off + b + i))
                    bad += 1
        off += n
    if bad:
        print("randio: verify: %d mismatching 4K blocks" % bad)
        return False
    print("randio: verify: %d bytes OK" % size)
    return True


def random_range(rng, size, chunk, width):
    """An (offset, length) chosen to exercise the layout's corner cases."""
    kind = rng.randrange(7)
    if kind == 0:                       # tiny, anywhere
        off = rng.randrange(size)
        length = rng.randint(1, 600)
    elif kind == 1:                     # across a chunk boundary
        b = rng.randrange(1, max(2, size // chunk)) * chunk
        off = b - rng.randint(1, chunk)
        length = rng.randint(2, 2 * chunk)
    elif kind == 2:                     # across a stripe boundary
        b = rng.randrange(1, max(2, size // width)) * width
        off = b - rng.randint(1, width)
        length = rng.randint(2, width + chunk)
    elif kind == 3:                     # whole stripe(s), aligned
        off = rng.randrange(size // width) * width
        length = width * rng.randint(1, 2)
    elif kind == 4:                     # one aligned chunk
        off = rng.randrange(size // chunk) * chunk
        length = chunk
    elif kind == 5:                     # large, unaligned
        off = rng.randrange(size)
        length = rng.randint(width // 2, 2 * width + 3 * chunk)
    else:                               # 512-aligned sectors
        off = rng.randrange(size // 512) * 512
        length = rng.randint(1, 64) * 512
    off = max(0, off)
    length = max(1, min(length, size - off, MAXREQ))
    return off, length


def write_random(h, ref, rng, off, length, flags=0):
    """Write random bytes (from rng) at [off, off + length) of the export
    and of the reference."""
    buf = rng.randbytes(length)
    h.pwrite(buf, off, flags)
    ref[off:off + length] = buf


def cmd_write(h, ref, a):
    rng = random.Random(a.seed)
    size = len(ref)
    width = a.chunk * a.k
    ok = True
    for i in range(a.ops):
        off, length = random_range(rng, size, a.chunk, width)
        write_random(h, ref, rng, off, length)
        if i % 4 == 3:
            roff, rlen = random_range(rng, size, a.chunk, width)
            ok = check_range(h, ref, roff, rlen, "read after %d writes" % (i + 1)) and ok
            ok = check_range(h, ref, off, length, "read back of write %d" % i) and ok
        if not ok:
            break
    print("randio: write: %d writes done (seed %d)" % (a.ops, a.seed))
    return ok


def cmd_trimzero(h, ref, a):
    rng = random.Random(a.seed)
    size = len(ref)
    width = a.chunk * a.k
    ok = True
    print("randio: can_trim=%s can_zero=%s can_fast_zero=%s"
          % (h.can_trim(), h.can_zero(), h.can_fast_zero()))
    ops = []
    # Fixed cases: a whole stripe, a partial chunk, a range across a
    # stripe boundary, a whole chunk, the last byte of the export.
    ops.append((0, width))
    ops.append((width + 100, 3000))
    ops.append((2 * width - a.chunk // 2, a.chunk))
    ops.append((3 * width + a.chunk, a.chunk))
    ops.append((size - 1, 1))
    for _ in range(a.ops):
        ops.append(random_range(rng, size, a.chunk, width))
    for i, (off, length) in enumerate(ops):
        old = bytes(ref[off:off + length])
        what = rng.randrange(3) if i >= 5 else i % 3
        if what == 0:
            h.zero(length, off)
            ref[off:off + length] = bytes(length)
            ok = check_range(h, ref, off, length, "zero #%d" % i) and ok
        elif what == 1:
            h.zero(length, off, nbd.CMD_FLAG_NO_HOLE)
            ref[off:off + length] = bytes(length)
            ok = check_range(h, ref, off, length, "zero no-hole #%d" % i) and ok
        else:
            if not h.can_trim():
                continue
            h.trim(length, off)
            got = h.pread(length, off)
            for j in range(length):
                if got[j] != old[j] and got[j] != 0:
                    print("randio: MISMATCH after trim #%d [%d, +%d): byte %d "
                          "is 0x%02x, neither old 0x%02x nor zero"
                          % (i, off, length, off + j, got[j], old[j]))
                    ok = False
                    break
            ref[off:off + length] = got
            # A second read must give the same bytes (trim is settled).
            ok = check_range(h, ref, off, length, "re-read after trim #%d" % i) and ok
        # Some data written after, partly overlapping, to mix RMW in.
        if rng.randrange(2):
            woff, wlen = random_range(rng, size, a.chunk, width)
            write_random(h, ref, rng, woff, wlen)
    print("randio: trimzero: %d requests done (seed %d)" % (len(ops), a.seed))
    return ok


def cmd_flushfua(h, ref, a):
    rng = random.Random(a.seed)
    size = len(ref)
    width = a.chunk * a.k
    ok = True
    print("randio: can_flush=%s can_fua=%s" % (h.can_flush(), h.can_fua()))
    if not h.can_flush():
        print("randio: FAIL: the export does not advertise flush")
        return False
    if not h.can_fua():
        print("randio: FAIL: the export does not advertise FUA")
        return False
    h.flush()
    for i in range(a.ops):
        off, length = random_range(rng, size, a.chunk, width)
        write_random(h, ref, rng, off, length,
                     nbd.CMD_FLAG_FUA if i % 2 == 0 else 0)
        if i % 5 == 4:
            h.flush()
        if i % 3 == 0:
            h.zero(min(length, 5000), off, nbd.CMD_FLAG_FUA)
            ref[off:off + min(length, 5000)] = bytes(min(length, 5000))
    h.flush()
    ok = check_range(h, ref, 0, min(size, MAXREQ), "after flushes") and ok
    print("randio: flushfua: %d writes done (seed %d)" % (a.ops, a.seed))
    return ok


def main():
    p = argparse.ArgumentParser()
    p.add_argument("cmd", choices=["write", "verify", "zeroref", "trimzero",
                                   "flushfua"])
    p.add_argument("uri")
    p.add_argument("ref")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--ops", type=int, default=200)
    p.add_argument("--chunk", type=int, default=65536)
    p.add_argument("--k", type=int, default=1)
    a = p.parse_args()

    h = connect(a.uri)
    size = h.get_size()
    if a.cmd == "zeroref":
        with open(a.ref, "wb") as f:
            f.truncate(size)
        print("randio: export size %d" % size)
        return 0
    ref = load_ref(a.ref, size)
    if a.cmd == "verify":
        ok = verify(h, ref)
    elif a.cmd == "write":
        ok = cmd_write(h, ref, a)
        save_ref(a.ref, ref)
        ok = verify(h, ref) and ok
    elif a.cmd == "trimzero":
        ok = cmd_trimzero(h, ref, a)
        save_ref(a.ref, ref)
        ok = verify(h, ref) and ok
    else:
        ok = cmd_flushfua(h, ref, a)
        save_ref(a.ref, ref)
        ok = verify(h, ref) and ok
    h.shutdown()
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except nbd.Error as e:
        print("randio: NBD error: %s" % e)
        sys.exit(1)
