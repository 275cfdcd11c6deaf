#!/usr/bin/env python3
"""Key tables of the MKTME platform model over QMP, for tests/vm/hotplug.sh
and tests/vm/faults.bash (the QMP client is vm/qmp.py's).

  mktme_qmp.py state SOCKET PKG STATE KEYID...
        every KEYID of package PKG's table is in STATE (unprogrammed,
        direct, random, clear, no-encrypt), with a fingerprint if STATE is
        direct or random; prints each, status 1 if any is not
  mktme_qmp.py agree SOCKET [KEYID...]
        every package's table agrees with package 0's, KeyID by KeyID, for
        every KeyID or only those given: the same state; for a direct key
        the same fingerprint, for a random key (a cpu key, which each
        package makes itself) a different one; prints the disagreements
        and package 0's programmed KeyIDs, status 1 if there is any
  mktme_qmp.py fingerprint SOCKET PKG KEYID
        prints the state and fingerprint ("-" if none) of KEYID in package
        PKG's table
  mktme_qmp.py field SOCKET PKG NAME
        prints package PKG's NAME (program-count, fail-count,
        inject-remaining)
  mktme_qmp.py inject SOCKET PKG COUNT STATUS
        x-mktme-inject-pconfig-error (STATUS entropy-error or device-busy)
  mktme_qmp.py hotadd SOCKET SOCKET_ID CORE_ID [PROP=VALUE...]
        device_add of a CPU into the free slot SOCKET_ID/CORE_ID (thread
        0) of query-hotpluggable-cpus, of the slot's CPU type, with the
        CPU properties given (VALUE true, false, an integer or a string);
        prints the command
  mktme_qmp.py dimm-add SOCKET ID MB
        plug a pc-dimm ID of MB MiB (QMP object-add memory-backend-ram
        ID-ram, device_add pc-dimm); prints its address and size
  mktme_qmp.py dimm-del SOCKET ID
        unplug pc-dimm ID (device_del, which the guest completes by
        ejecting it through ACPI), wait up to 120 s until
        query-memory-devices no longer lists it, then object-del its
        backend; status 1 if it stays
  mktme_qmp.py blockstats SOCKET DRIVE
        prints the write requests and bytes, then the read requests and
        bytes, that drive DRIVE (its -drive id) completed so far
        (query-blockstats), on one line
"""

import os
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "vm"))
from qmp import QMP  # noqa: E402


def packages(sock):
    info = QMP(sock).cmd("query-mktme")
    if not info.get("enabled"):
        raise RuntimeError("query-mktme: MKTME is not enabled")
    return info["packages"]


def keyids(pkg):
    """KeyID -> (state, fingerprint or "-") of one package."""
    return {k["keyid"]: (k["state"], k.get("fingerprint", "-"))
            for k in pkg["keyids"]}


def state(sock, pkg, want, ids):
    table = keyids(packages(sock)[pkg])
    bad = 0
    for k in ids:
        st, fp = table.get(k, ("absent", "-"))
        good = st == want and (fp != "-") == (want in ("direct", "random"))
        print("package %d KeyID %d: %s %s%s" % (pkg, k, st, fp,
                                               "" if good else " (want %s)" % want))
        bad += not good
    return 1 if bad else 0


def agree(sock, only):
    pkgs = packages(sock)
    ref = keyids(pkgs[0])
    bad = 0
    for p in pkgs[1:]:
        table = keyids(p)
        for k in sorted(only or set(ref) | set(table)):
            mine, theirs = ref.get(k, ("absent", "-")), table.get(k, ("absent", "-"))
            if mine[0] == "random":
                good = theirs[0] == "random" and "-" not in (mine[1], theirs[1]) \
                    and mine[1] != theirs[1]
            else:
                good = mine == theirs
            if not good:
                print("KeyID %d: package 0 %s, package %d %s" %
                      (k, " ".join(mine), p["package"], " ".join(theirs)))
                bad += 1
    programmed = ["%d %s %s" % (k, st, fp) for k, (st, fp) in sorted(ref.items())
                  if st != "unprogrammed"]
    print("%d packages; programmed on package 0: %s" %
          (len(pkgs), ", ".join(programmed) or "none"))
    return 1 if bad else 0


def prop_value(text):
    if text in ("true", "false"):
        return text == "true"
    try:
        return int(text, 0)
    except ValueError:
        return text


def hotadd(sock, socket_id, core_id, props):
    qmp = QMP(sock)
    for slot in qmp.cmd("query-hotpluggable-cpus"):
        where = slot["props"]
        if (where.get("socket-id") == socket_id and where.get("core-id") == core_id
                and where.get("thread-id", 0) == 0 and "qom-path" not in slot):
            args = dict(where)
            args.update(driver=slot["type"], id="hotadd-%d-%d" % (socket_id, core_id))
            for prop in props:
                name, _, value = prop.partition("=")
                args[name] = prop_value(value)
            print("device_add %s" % " ".join("%s=%s" % kv for kv in sorted(args.items())))
            qmp.cmd("device_add", **args)
            return 0
    print("no free CPU slot at socket %d core %d" % (socket_id, core_id))
    return 1


def dimms(qmp):
    return {d["data"].get("id"): d["data"] for d in qmp.cmd("query-memory-devices")}


def dimm_add(sock, name, mb):
    qmp = QMP(sock)
    qmp.cmd("object-add", **{"qom-type": "memory-backend-ram",
                             "id": name + "-ram", "size": mb << 20})
    qmp.cmd("device_add", driver="pc-dimm", id=name, memdev=name + "-ram")
    dimm = dimms(qmp)[name]
    print("pc-dimm %s at 0x%x, %d MiB" % (name, dimm["addr"], dimm["size"] >> 20))
    return 0


def dimm_del(sock, name):
    qmp = QMP(sock)
    qmp.cmd("device_del", id=name)
    start = time.time()
    while name in dimms(qmp):
        if time.time() - start > 120:
            print("pc-dimm %s still plugged after 120 s" % name)
            return 1
        time.sleep(0.5)
    qmp.cmd("object-del", id=name + "-ram")
    print("pc-dimm %s unplugged in %.1f s" % (name, time.time() - start))
    return 0


def blockstats(sock, drive):
    for dev in QMP(sock).cmd("query-blockstats"):
        if dev.get("device") == drive:
            st = dev["stats"]
            print(st["wr_operations"], st["wr_bytes"], st["rd_operations"],
                  st["rd_bytes"])
            return 0
    sys.stderr.write("query-blockstats lists no drive %s\n" % drive)
    return 1


def main(argv):
    if argv[1:2] in (["-h"], ["--help"]):
        sys.stdout.write(__doc__)
        return 0
    if len(argv) >= 6 and argv[1] == "state":
        return state(argv[2], int(argv[3]), argv[4], [int(k) for k in argv[5:]])
    if len(argv) >= 3 and argv[1] == "agree":
        return agree(argv[2], [int(k) for k in argv[3:]])
    if len(argv) == 5 and argv[1] == "fingerprint":
        print(" ".join(keyids(packages(argv[2])[int(argv[3])])
                       .get(int(argv[4]), ("absent", "-"))))
        return 0
    if len(argv) == 5 and argv[1] == "field":
        print(packages(argv[2])[int(argv[3])][argv[4]])
        return 0
    if len(argv) == 6 and argv[1] == "inject":
        QMP(argv[2]).cmd("x-mktme-inject-pconfig-error", package=int(argv[3]),
                         count=int(argv[4]), status=argv[5])
        return 0
    if len(argv) >= 5 and argv[1] == "hotadd":
        return hotadd(argv[2], int(argv[3]), int(argv[4]), argv[5:])
    if len(argv) == 5 and argv[1] == "dimm-add":
        return dimm_add(argv[2], argv[3], int(argv[4]))
    if len(argv) == 4 and argv[1] == "dimm-del":
        return dimm_del(argv[2], argv[3])
    if len(argv) == 4 and argv[1] == "blockstats":
        return blockstats(argv[2], argv[3])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
