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

The QMP client is vm/qmp.py's.
"""

import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "vm"))
from qmp import QMP  # noqa: E402

PAGE = 4096


def pattern(seed, page=0):
    """Page number page of fill() of tests/guest/mktme.c."""
    return bytes((seed * 0x35 + i * 7 + (i >> 8) * 3 + 1) & 0xFF
                 for i in range(page * PAGE, (page + 1) * PAGE))


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
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
