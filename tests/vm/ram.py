#!/usr/bin/env python3
"""QMP and pattern helper of tests/vm/ram.sh and tests/vm/mm.sh.

  ram.py shift SOCKET            the model's KeyID shift (query-mktme)
  ram.py dump SOCKET ADDR FILE   4 KiB of guest-physical memory at ADDR to
                                 FILE (pmemsave; no CPU: package 0's keys)
  ram.py check FILE SEED [PAGE]  prints "pattern" if FILE is page PAGE
                                 (default 0) of what tests/guest/mktme.c's
                                 fill() writes for SEED, "absent" if none
                                 of that page's 16-byte blocks is anywhere
                                 in FILE, else "partial"

The QMP client is the one of vm/qemu/tests/run.py, cut down (run.py reads
its arguments when imported, so it cannot be imported).
"""

import json
import os
import socket
import sys
import time

PAGE = 4096


class QMP:
    def __init__(self, path):
        for _ in range(100):
            try:
                self.sock = socket.socket(socket.AF_UNIX)
                self.sock.connect(path)
                break
            except OSError:
                self.sock.close()
                time.sleep(0.1)
        else:
            raise RuntimeError("no QMP socket at " + path)
        self.file = self.sock.makefile("rw")
        json.loads(self.file.readline())  # greeting
        self.cmd("qmp_capabilities")

    def cmd(self, name, **args):
        msg = {"execute": name}
        if args:
            msg["arguments"] = args
        self.file.write(json.dumps(msg) + "\n")
        self.file.flush()
        while True:
            resp = json.loads(self.file.readline())
            if "return" in resp:
                return resp["return"]
            if "error" in resp:
                raise RuntimeError("%s: %s" % (name, resp["error"]))


def pattern(seed, page=0):
    """Page number page of fill() of tests/guest/mktme.c."""
    return bytes((seed * 0x35 + i * 7 + (i >> 8) * 3 + 1) & 0xFF
                 for i in range(page * PAGE, (page + 1) * PAGE))


def main(argv):
    if len(argv) == 3 and argv[1] == "shift":
        print(QMP(argv[2]).cmd("query-mktme")["keyid-shift"])
    elif len(argv) == 5 and argv[1] == "dump":
        QMP(argv[2]).cmd("pmemsave", val=int(argv[3], 0), size=PAGE,
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
