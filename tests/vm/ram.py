#!/usr/bin/env python3
"""QMP and pattern helper of the guest RAM checks of tests/vm/hosted.bash.

  ram.py shift SOCKET            the model's KeyID shift (query-mktme)
  ram.py dump SOCKET ADDR FILE   4 KiB of guest-physical memory at ADDR to
                                 FILE (pmemsave; no CPU: the keys of the
                                 address's home package),
                                 after writing the model's dirty KeyID
                                 lines back, so RAM is what the guest wrote
  ram.py check FILE SEED [PAGE]  prints "pattern" if FILE is page PAGE
                                 (default 0) of what tests/guest/mktme.c's
                                 fill() writes for SEED, "absent" if none
                                 of that page's 16-byte blocks is anywhere
                                 in FILE, else "partial"
  ram.py xts FILE KEY TWEAK PA SEED
                                 prints "ciphertext" if FILE is page 0 of
                                 fill(SEED) encrypted as MKTME does at
                                 physical address PA with data key KEY and
                                 tweak key TWEAK (hex, 16 or 32 bytes:
                                 AES-XTS-128 or -256), else where it
                                 differs first
  ram.py xts-kat                 the same computation against IEEE 1619's
                                 known answers; prints them, status 1 if
                                 any differs

MKTME encrypts each 16-byte block as an XTS data unit of its own whose
tweak is the block's physical address (128-bit little-endian). For one
block IEEE 1619 gives C = E(K1, P ^ T) ^ T with T = E(K2, tweak): computed
with openssl's AES-ECB (its "enc" has no XTS), one call for every T and
one for every block.

The QMP client is vm/qmp.py's.
"""

import os
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "vm"))
from qmp import QMP  # noqa: E402

PAGE = 4096


def pattern(seed, page=0):
    """Page number page of fill() of tests/guest/mktme.c."""
    return bytes((seed * 0x35 + i * 7 + (i >> 8) * 3 + 1) & 0xFF
                 for i in range(page * PAGE, (page + 1) * PAGE))


def aes_ecb(key, data):
    """AES (128 or 256 by the key's length) in ECB mode, from openssl."""
    cipher = "-aes-%d-ecb" % (len(key) * 8)
    return subprocess.run(["openssl", "enc", cipher, "-nopad", "-K", key.hex()],
                          input=data, stdout=subprocess.PIPE, check=True).stdout


def xts_blocks(key, tweak_key, first_tweak, data):
    """data encrypted as one-block XTS data units, tweaks first_tweak + 16n."""
    n = len(data) // 16
    tweaks = b"".join((first_tweak + 16 * i).to_bytes(16, "little") for i in range(n))
    t = aes_ecb(tweak_key, tweaks)
    masked = bytes(a ^ b for a, b in zip(data, t))
    return bytes(a ^ b for a, b in zip(aes_ecb(key, masked), t))


# IEEE 1619-2007 annex B, vectors 1 and 10: the first 16-byte block of each
# (for a one-block data unit the rest of the data unit does not matter).
KATS = [
    ("AES-XTS-128 vector 1", "00" * 16, "00" * 16, 0, "00" * 16,
     "917cf69ebd68b2ec9b9fe9a3eadda692"),
    ("AES-XTS-256 vector 10",
     "2718281828459045235360287471352662497757247093699959574966967627",
     "3141592653589793238462643383279502884197169399375105820974944592",
     0xff, "000102030405060708090a0b0c0d0e0f",
     "1c3b3a102f770386e4836c99e370cf9b"),
]


def xts_kat():
    bad = 0
    for name, k1, k2, i, pt, ct in KATS:
        got = xts_blocks(bytes.fromhex(k1), bytes.fromhex(k2), i, bytes.fromhex(pt)).hex()
        print("%s: %s (want %s)" % (name, got, ct))
        bad += got != ct
    return 1 if bad else 0


def main(argv):
    if argv[1:2] in (["-h"], ["--help"]):
        sys.stdout.write(__doc__)
        return 0
    if len(argv) == 3 and argv[1] == "shift":
        print(QMP(argv[2]).cmd("query-mktme")["keyid-shift"])
    elif len(argv) == 5 and argv[1] == "dump":
        qmp = QMP(argv[2])
        if qmp.cmd("query-mktme").get("cache"):
            qmp.cmd("x-mktme-cache-write-back")
        qmp.cmd("pmemsave", val=int(argv[3], 0), size=PAGE,
                filename=os.path.abspath(argv[4]))
    elif len(argv) in (4, 5) and argv[1] == "check":
        data = open(argv[2], "rb").read()
        want = pattern(int(argv[3]), int(argv[4]) if len(argv) == 5 else 0)
        blocks = {want[i:i + 16] for i in range(0, PAGE, 16)}
        if data == want:
            print("pattern")
        elif any(data[i:i + 16] in blocks for i in range(0, len(data), 16)):
            print("partial")
        else:
            print("absent")
    elif len(argv) == 7 and argv[1] == "xts":
        data = open(argv[2], "rb").read()
        want = xts_blocks(bytes.fromhex(argv[3]), bytes.fromhex(argv[4]),
                          int(argv[5], 0), pattern(int(argv[6])))
        if data == want:
            print("ciphertext")
        else:
            at = next(i for i in range(min(len(data), len(want)))
                      if data[i] != want[i]) if len(data) == len(want) else -1
            print("differs at byte %d" % at)
    elif len(argv) == 2 and argv[1] == "xts-kat":
        return xts_kat()
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
