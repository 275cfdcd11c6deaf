"""A minimal QMP client for the MKTME platform model's tests: vm/qemu/tests,
tests/vm. Connects to a unix socket (retrying while QEMU starts), runs
commands and returns their "return" value, or raises on "error". Events
that arrive while it waits for a reply are kept, in order, in .events.
"""

import json
import socket
import time


class QMP:
    def __init__(self, path):
        self.events = []
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
            if "event" in resp:
                self.events.append(resp)

    def hmp(self, line):
        return self.cmd("human-monitor-command", **{"command-line": line})
