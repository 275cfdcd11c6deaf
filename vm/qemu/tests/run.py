#!/usr/bin/env python3
"""Tests of the QEMU MKTME platform model, as one TAP stream.

  run.py QEMU KAT_TEST PAYLOAD WORKDIR

QEMU is the model's qemu-system-x86_64, KAT_TEST the test-crypto-mktme
unit test, PAYLOAD the multiboot test payload (tests/payload).  Exits
non-zero if any test fails.
"""

import hashlib
import os
import re
import shutil
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from qmp import QMP  # noqa: E402

if sys.argv[1:2] in (["-h"], ["--help"]):
    sys.stdout.write(__doc__)
    sys.exit(0)
if len(sys.argv) != 5:
    sys.stderr.write(__doc__)
    sys.exit(2)
QEMU, KAT, PAYLOAD, WORK = sys.argv[1:5]
# Debian's firmware (qemu-system-data, seabios), as its own QEMU finds it
FIRMWARE = ["-L", "/usr/share/seabios", "-L", "/usr/share/qemu"]

# Known key of KeyID 1 in the payload: data key 00..0f, tweak key 10..1f
DATA_KEY = bytes(range(0x00, 0x10))
TWEAK_KEY = bytes(range(0x10, 0x20))
BUF_PA = 0x2000000
PAGE = 4096

results = []


def ok(cond, name, diag=None):
    results.append(bool(cond))
    print("%sok %d - %s" % ("" if cond else "not ", len(results), name))
    if diag and not cond:
        for line in str(diag).splitlines():
            print("#   " + line)
    sys.stdout.flush()


def note(msg):
    print("# " + msg)
    sys.stdout.flush()


def pattern(n):
    return bytes((i * 7 + 3 + (i >> 8)) & 0xFF for i in range(n))


def qemu_args(name, cpu_extra="", smp="1", append="", qmp=None, extra=(),
              mem="256"):
    args = [QEMU] + FIRMWARE + ["-M", "q35", "-m", mem,
            "-cpu", "max,vendor=GenuineIntel,tme=on,pconfig=on" + cpu_extra, "-smp", smp,
            "-accel", "tcg", "-display", "none", "-nodefaults",
            # Keep the 64-bit PCI window below the KeyID aliases
            "-global", "q35-pcihost.pci-hole64-size=1G",
            "-kernel", PAYLOAD, "-append", append,
            "-debugcon", "file:" + os.path.join(WORK, name + ".log"),
            "-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"]
    if qmp:
        # Held runs are reset over QMP: no -no-reboot there
        args += ["-qmp", "unix:%s,server=on,wait=off" % qmp, "-S"]
    else:
        args += ["-no-reboot"]
    return args + list(extra)


def guest_tap(name, prefix):
    """Re-emit a guest run's TAP lines as our own tests."""
    path = os.path.join(WORK, name + ".log")
    text = open(path, errors="replace").read() if os.path.exists(path) else ""
    seen = 0
    for line in text.splitlines():
        m = re.match(r"(not )?ok \d+ - (.*)", line)
        if m:
            seen += 1
            ok(m.group(1) is None, "%s: %s" % (prefix, m.group(2)))
        elif line.startswith("Bail out!"):
            ok(False, "%s: %s" % (prefix, line))
    plan = re.search(r"^1\.\.(\d+)$", text, re.M)
    ok(plan and int(plan.group(1)) == seen, "%s: guest ran its whole plan" % prefix,
       text[-2000:])
    return text


def run_guest(name, prefix, **kw):
    proc = subprocess.run(qemu_args(name, **kw), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=300)
    text = guest_tap(name, prefix)
    # isa-debug-exit: status (code << 1) | 1; code 0 means all passed
    ok(proc.returncode == 1, "%s: guest exited cleanly (status %d)"
       % (prefix, proc.returncode), proc.stdout.decode(errors="replace"))
    return text


def start_held(name, **kw):
    sock = os.path.join(WORK, name + ".qmp")
    if os.path.exists(sock):
        os.unlink(sock)
    proc = subprocess.Popen(qemu_args(name, qmp=sock, **kw),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return proc, QMP(sock)


def wait_hold(name, proc, timeout=300):
    path = os.path.join(WORK, name + ".log")
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(path) and "# hold" in open(path, errors="replace").read():
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.2)
    return False


def stop(proc, qmp):
    try:
        qmp.cmd("quit")
    except Exception:  # noqa: BLE001 - QEMU may close first
        pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def openssl_ecb(key, data, decrypt=False):
    args = ["openssl", "enc", "-aes-128-ecb", "-nopad", "-K", key.hex()]
    if decrypt:
        args.append("-d")
    return subprocess.run(args, input=data, stdout=subprocess.PIPE,
                          check=True).stdout


def xor(a, b):
    return bytes(x ^ y for x, y in zip(a, b))


def xts_decrypt_blocks(data, pa, data_key=DATA_KEY, tweak_key=TWEAK_KEY):
    """Decrypt memory as the model stores it, with openssl's AES.

    Each 16-byte block is a one-block IEEE 1619 XTS data unit whose
    sequence number i is the block's physical address: T = AES-K2(i as
    128-bit little endian), P = AES-1-K1(C ^ T) ^ T.  (openssl's enc
    command has no XTS, so XTS is composed here from AES-128-ECB.)
    """
    tweaks = b"".join((pa + off).to_bytes(16, "little")
                      for off in range(0, len(data), 16))
    t = openssl_ecb(tweak_key, tweaks)
    return xor(openssl_ecb(data_key, xor(data, t), decrypt=True), t)


def keyid_entry(info, package, keyid):
    pkg = [p for p in info["packages"] if p["package"] == package][0]
    return [k for k in pkg["keyids"] if k["keyid"] == keyid][0]


def test_kat():
    note("(a) AES-XTS-128 and AES-XTS-256 known answers (IEEE 1619 vectors "
         "1-5 and 10-14) on the model's cipher path")
    proc = subprocess.run([KAT, "--tap"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT)
    out = proc.stdout.decode(errors="replace")
    n = 0
    for line in out.splitlines():
        m = re.match(r"(not )?ok \d+ (\S+)", line)
        if m:
            n += 1
            ok(m.group(1) is None, "KAT " + m.group(2))
    vectors = len(re.findall(r"ok \d+ /crypto/mktme/ieee1619-vector-[1-5]\b", out))
    ok(proc.returncode == 0 and n >= 6 and vectors == 5,
       "KAT: unit test passed with vectors 1-5", out[-2000:])
    vectors = len(re.findall(r"ok \d+ /crypto/mktme/ieee1619-vector-1[0-4]\b", out))
    ok(proc.returncode == 0 and vectors == 5 and
       re.search(r"^ok \d+ /crypto/mktme/address-tweak-256$", out, re.M),
       "KAT: XTS-AES-256 vectors 10-14 and the 256-bit address tweak",
       out[-2000:])


def test_guest():
    note("(b) guest CPUID/MSR/PCONFIG/memory semantics (6 KeyID bits, default)")
    run_guest("guest6", "guest")
    note("(b) mktme-keyid-bits=3")
    run_guest("guest3", "guest bits=3", cpu_extra=",mktme-keyid-bits=3",
              append="keyid_bits=3")
    note("(b) mktme-algorithms=aes-xts-256: 256-bit keys, PCONFIG rules")
    run_guest("guest256", "guest aes-xts-256",
              cpu_extra=",mktme-algorithms=aes-xts-256", append="algs=4")
    note("(b) mktme-algorithms=both")
    run_guest("guestboth", "guest both", cpu_extra=",mktme-algorithms=both",
              append="algs=5")


def test_host_ram():
    note("(c) host view of guest RAM over QMP, fault injection")
    name = "host"
    proc, qmp = start_held(name, append="inject hold")
    try:
        qmp.cmd("x-mktme-inject-pconfig-error", package=0, count=1,
                status="device-busy")
        info = qmp.cmd("query-mktme")
        ok(info["packages"][0]["inject-remaining"] == 1,
           "query-mktme shows the injected failure pending")
        qmp.cmd("cont")
        held = wait_hold(name, proc)
        ok(held, "guest reached its hold point")
        if not held:
            return
        info = qmp.cmd("query-mktme")
        shift = info["keyid-shift"]
        k1 = keyid_entry(info, 0, 1)
        want_fp = hashlib.sha256(DATA_KEY + TWEAK_KEY).hexdigest()[:16]
        ok(k1["state"] == "direct", "query-mktme: package 0 KeyID 1 is direct")
        ok(k1.get("fingerprint") == want_fp,
           "query-mktme: fingerprint is truncated SHA-256 of the keys", k1)
        pkg0 = info["packages"][0]
        ok(pkg0["fail-count"] >= 1 and pkg0["inject-remaining"] == 0,
           "injected DEVICE_BUSY was consumed", pkg0)
        states = {k["keyid"]: k["state"] for k in pkg0["keyids"]}
        ok(states[2] == "no-encrypt" and states[3] == "clear" and
           states[4] == "random" and states[6] == "unprogrammed",
           "query-mktme: no-encrypt, clear, random, unprogrammed states", states)
        raw_path = os.path.join(WORK, "keyid0.bin")
        qmp.cmd("pmemsave", val=BUF_PA, size=PAGE, filename=raw_path)
        raw = open(raw_path, "rb").read()
        want = pattern(PAGE)
        ok(len(raw) == PAGE and raw != want and
           all(raw[i:i + 16] != want[i:i + 16] for i in range(0, PAGE, 16)),
           "pmemsave at the KeyID-0 address: ciphertext, not the pattern")
        plain = xts_decrypt_blocks(raw, BUF_PA)
        ok(plain == want,
           "host AES-XTS-128 decrypt (tweak = block address) gives the pattern")
        alias_path = os.path.join(WORK, "keyid1.bin")
        qmp.cmd("pmemsave", val=(1 << shift) | BUF_PA, size=PAGE,
                filename=alias_path)
        ok(open(alias_path, "rb").read() == want,
           "pmemsave through the KeyID-1 alias (no CPU: the home package's key) decrypts")
        xp = qmp.hmp("xp /2gx 0x%x" % BUF_PA)
        words = [int(w, 16) for w in re.findall(r"0x[0-9a-f]{16}", xp)]
        ok(len(words) >= 2 and words[0] == int.from_bytes(raw[0:8], "little"),
           "HMP xp reads the same ciphertext", xp)
        hmp = qmp.hmp("info mktme")
        ok("keyid 1: direct key " + want_fp in hmp, "HMP info mktme", hmp)
        qmp.cmd("stop")
        qmp.cmd("system_reset")
        for _ in range(100):
            info = qmp.cmd("query-mktme")
            states = set(k["state"] for p in info["packages"]
                         for k in p["keyids"])
            if states == {"unprogrammed"}:
                break
            time.sleep(0.1)
        ok(states == {"unprogrammed"}, "system_reset loses every key", states)
    finally:
        stop(proc, qmp)


def cache_info(qmp):
    return qmp.cmd("query-mktme").get("cache") or {}


VIOLATION_KINDS = ("fill", "stale-write-back", "pconfig-dirty")


def run_to_hold(name, **kw):
    """Start a held guest, let it run to its hold point; (proc, qmp, held)."""
    proc, qmp = start_held(name, **kw)
    qmp.cmd("cont")
    held = wait_hold(name, proc)
    ok(held, "guest reached its hold point")
    return proc, qmp, held


def test_cache_clean():
    note("(i) a guest that flushes as it must: no coherence violation")
    proc, qmp, held = run_to_hold("clean", append="hold")
    try:
        if not held:
            return
        c = cache_info(qmp)
        ok(c.get("lines") == 262144 and c.get("misses", 0) > 0 and
           c.get("write-backs", 0) > 0,
           "query-mktme: a 262144-line cache that filled and wrote back", c)
        ok(all(c.get(k + "-violations") == 0
               for k in VIOLATION_KINDS),
           "query-mktme: 0 violations of each kind", c)
        props = {p: qmp.cmd("qom-get", path="/machine/mktme", property=p)
                 for p in ("type", "packages", "keyid-bits", "cipher",
                           "cache-lines", "cache-strict")}
        ok(props == {"type": "x86-mktme", "packages": 1, "keyid-bits": 6,
                     "cipher": True, "cache-lines": 262144,
                     "cache-strict": False},
           "the platform is QOM device /machine/mktme with the CPU's "
           "mktme-* settings as properties", props)
    finally:
        stop(proc, qmp)


def test_cache_violations():
    note("(j) a guest that breaks each rule once: the model counts each, "
         "sends an event, and the host writes dirty lines back on demand")
    proc, qmp, held = run_to_hold("violate", append="violate hold")
    try:
        if not held:
            return
        c = cache_info(qmp)
        for kind in VIOLATION_KINDS:
            ok(c.get(kind + "-violations") == 1,
               "query-mktme: exactly one %s violation" % kind, c)
        events = [e["data"] for e in qmp.events
                  if e.get("event") == "MKTME_COHERENCE_VIOLATION"]
        ok([e["kind"] for e in events] == list(VIOLATION_KINDS),
           "MKTME_COHERENCE_VIOLATION events: fill, stale-write-back, "
           "pconfig-dirty, in order", events)
        ok(events and events[0]["keyid"] == 2 and
           events[0]["other-keyid"] == 1,
           "the fill event names KeyID 2 filling over KeyID 1's dirty lines",
           events)
        pa = 0x3000000 + 14 * PAGE
        path = os.path.join(WORK, "dirty.bin")
        ok(c.get("dirty", 0) >= PAGE // 64,
           "the guest's last page is still dirty in the cache", c)
        qmp.cmd("pmemsave", val=pa, size=PAGE, filename=path)
        ok(open(path, "rb").read() == bytes(PAGE),
           "before a write-back RAM still holds the old zeros")
        qmp.cmd("x-mktme-cache-write-back")
        qmp.cmd("pmemsave", val=pa, size=PAGE, filename=path)
        raw = open(path, "rb").read()
        ok(xts_decrypt_blocks(raw, pa) == pattern(PAGE) and raw != pattern(PAGE),
           "after x-mktme-cache-write-back RAM holds the page's ciphertext "
           "(host AES-XTS-128 decrypt gives the pattern)")
        ok(cache_info(qmp).get("dirty") == 0,
           "x-mktme-cache-write-back leaves no dirty line")
    finally:
        stop(proc, qmp)


def test_cache_strict():
    note("(k) mktme-cache-strict=on: QEMU stops at the first violation")
    name = "strict"
    proc = subprocess.run(qemu_args(name, cpu_extra=",mktme-cache-strict=on",
                                    append="violate"),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=300)
    out = proc.stdout.decode(errors="replace")
    log = open(os.path.join(WORK, name + ".log"), errors="replace").read()
    ok(proc.returncode == 1 and
       "cache coherence violation (fill): KeyID 2" in out,
       "strict: QEMU exits 1 naming the fill violation", out[-1500:])
    ok("# violate: fill" in log and "# violate: stale" not in log and
       "1.." not in log, "strict: the guest got no further than the first "
       "violation", log[-800:])


def test_cache_eviction():
    note("(l) a two-page cache: a replaced page's dirty lines are written "
         "back, and replacement does not count as a flush")
    proc, qmp, held = run_to_hold("evict", cpu_extra=",mktme-cache-lines=128",
                                  append="evict hold")
    try:
        guest_tap("evict", "evict")
        if not held:
            return
        c = cache_info(qmp)
        ok(c.get("lines") == 128 and c.get("used") <= 128 and
           c.get("evictions", 0) >= 2,
           "query-mktme: a 128-line cache that replaced pages", c)
        ok(c.get("fill-violations") == 1 and
           c.get("stale-write-back-violations") == 0 and
           c.get("pconfig-dirty-violations") == 0,
           "KeyID 2 reading a replaced, never flushed KeyID-1 page: exactly "
           "one fill violation", c)
    finally:
        stop(proc, qmp)


def migrate_to_file(qmp, path):
    """Migrate a stopped guest into PATH; the final status."""
    qmp.cmd("migrate", uri="exec:cat > " + path)
    for _ in range(600):
        status = qmp.cmd("query-migrate").get("status")
        if status not in ("setup", "active", "device", None):
            return status
        time.sleep(0.1)
    return "timeout"


def test_migration():
    note("(o) migration: the key tables go with the guest; the cache of "
         "KeyID lines does not, so it blocks migration")
    name = "migrate-cache"
    proc, qmp, held = run_to_hold(name, append="hold")
    try:
        if held:
            qmp.cmd("stop")
            try:
                qmp.cmd("migrate", uri="exec:cat > /dev/null")
                refused = ""
            except RuntimeError as e:
                refused = str(e)
            ok("mktme-cache-lines=0" in refused,
               "with the cache, migrate is refused, naming "
               "mktme-cache-lines=0", refused or "migrate was accepted")
    finally:
        stop(proc, qmp)

    name = "migrate-src"
    image = os.path.join(WORK, name + ".state")
    proc, qmp, held = run_to_hold(name, cpu_extra=",mktme-cache-lines=0",
                                  append="hold")
    try:
        if not held:
            return
        before = qmp.cmd("query-mktme")
        qmp.cmd("stop")
        status = migrate_to_file(qmp, image)
        ok(status == "completed", "mktme-cache-lines=0: the guest migrates "
           "to a file", status)
    finally:
        stop(proc, qmp)
    if status != "completed":
        return
    name = "migrate-dst"
    proc, qmp = start_held(name, cpu_extra=",mktme-cache-lines=0",
                           append="hold",
                           extra=("-incoming", "exec:cat " + image))
    try:
        for _ in range(600):
            if qmp.cmd("query-status").get("status") != "inmigrate":
                break
            time.sleep(0.1)
        after = qmp.cmd("query-mktme")
        ok(after["packages"] == before["packages"],
           "query-mktme after loading: every KeyID's state, fingerprint "
           "and counters as before", (before["packages"], after["packages"]))
        alias_path = os.path.join(WORK, name + "-keyid1.bin")
        qmp.cmd("pmemsave", val=(1 << after["keyid-shift"]) | BUF_PA,
                size=PAGE, filename=alias_path)
        ok(open(alias_path, "rb").read() == pattern(PAGE),
           "the KeyID-1 alias decrypts the guest's pattern with the key "
           "that came with it")
        qmp.cmd("system_reset")
        info = qmp.cmd("query-mktme")
        ok(set(k["state"] for p in info["packages"] for k in p["keyids"]) ==
           {"unprogrammed"}, "a reset after loading still loses every key")
    finally:
        stop(proc, qmp)
    name = "migrate-nocipher"
    proc = subprocess.run(
        qemu_args(name, cpu_extra=",mktme-cache-lines=0,mktme-cipher=off",
                  append="hold", extra=("-incoming", "exec:cat " + image)),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    out = proc.stdout.decode(errors="replace")
    ok(proc.returncode != 0 and "the source has mktme-cipher=on" in out,
       "a destination with mktme-cipher=off refuses the stream, saying why",
       out[-1500:])


def test_two_sockets():
    note("(d) two sockets: PCONFIG on socket 0 leaves socket 1 unprogrammed")
    name = "sockets"
    proc, qmp = start_held(name, smp="2,sockets=2", append="hold")
    try:
        qmp.cmd("cont")
        held = wait_hold(name, proc)
        ok(held, "2-socket guest reached its hold point")
        if not held:
            return
        info = qmp.cmd("query-mktme")
        ok(len(info["packages"]) == 2, "query-mktme lists two packages")
        ok(keyid_entry(info, 0, 1)["state"] == "direct",
           "package 0 KeyID 1 is programmed")
        pkg1 = info["packages"][1]
        ok(pkg1["program-count"] == 0 and
           all(k["state"] == "unprogrammed" for k in pkg1["keyids"]),
           "package 1 is unprogrammed", pkg1)
    finally:
        stop(proc, qmp)


def test_hotadded_cpu():
    note("(g) a CPU hot-added with more KeyID bits (7) than the key tables "
         "have (6, the first CPU's): PCONFIG beyond the table")
    name = "hotcpu"
    proc, qmp = start_held(name, smp="1,maxcpus=2,sockets=2",
                           append="ap_keyid_bits=7 hold", extra=["-no-reboot"])
    try:
        qmp.cmd("device_add", driver="max-x86_64-cpu", id="hotcpu",
                **{"socket-id": 1, "core-id": 0, "thread-id": 0,
                   "mktme-keyid-bits": 7})
        qmp.cmd("cont")
        held = wait_hold(name, proc)
        guest_tap(name, "hot-added CPU")
        ok(held and proc.poll() is None,
           "hot-added CPU: QEMU runs on to the guest's hold point (no abort)",
           proc.stdout.read().decode(errors="replace") if proc.poll() is not None
           else None)
        if not held:
            return
        info = qmp.cmd("query-mktme")
        pkg1 = info["packages"][1]
        ok([k["keyid"] for k in pkg1["keyids"]] == list(range(1, 64)),
           "package 1's key table has KeyIDs 1-63 (the first CPU's 6 bits)")
        ok(keyid_entry(info, 1, 63)["state"] == "direct" and
           pkg1["program-count"] == 1 and pkg1["fail-count"] == 0,
           "package 1: KeyID 63 programmed, the refused KeyIDs left no trace",
           pkg1)
    finally:
        stop(proc, qmp)


def test_hotplugged_memory():
    note("(h) a DIMM plugged after boot: each KeyID sees it, as a memory "
         "controller encrypts whatever address a KeyID reaches")
    for cipher in ("on", "off"):
        name = "dimm-cipher-" + cipher
        proc, qmp = start_held(name, cpu_extra=",mktme-cipher=" + cipher,
                               mem="256,slots=1,maxmem=512M")
        try:
            qmp.cmd("object-add", **{"qom-type": "memory-backend-ram",
                                     "id": "dimm-ram", "size": 128 << 20})
            qmp.cmd("device_add", driver="pc-dimm", id="dimm",
                    memdev="dimm-ram")
            dimm = [d["data"] for d in qmp.cmd("query-memory-devices")
                    if d["data"].get("id") == "dimm"]
            ok(len(dimm) == 1, "cipher %s: query-memory-devices lists the "
               "plugged DIMM" % cipher, dimm)
            if not dimm:
                continue
            base = dimm[0]["addr"]
            shift = qmp.cmd("query-mktme")["keyid-shift"]
            if cipher == "off":
                # Plain aliases: the same host memory as the DIMM itself.
                hva = [qmp.hmp("gpa2hva 0x%x" % a).strip()
                       for a in (base + 4096, (7 << shift) + base + 4096)]
                got = [re.sub(r"^Host virtual address for 0x[0-9a-f]+ ", "", h)
                       for h in hva]
                ok(hva[0].startswith("Host virtual address") and
                   got[0] == got[1],
                   "cipher off: the DIMM and its KeyID 7 alias are the same "
                   "host memory", hva)
                continue
            # I/O windows: the flat view names them.
            tree = qmp.hmp("info mtree -f")
            for keyid in (1, 7):
                alias = (keyid << shift) | base
                # The flat view's line of the range that holds the alias.
                where = [line.strip() for line in tree.splitlines()
                         if re.match(r"\s*([0-9a-f]+)-([0-9a-f]+) ", line) and
                         int(line.split("-")[0], 16) <= alias + (128 << 20) - 1 and
                         int(line.split("-")[1].split()[0], 16) >= alias]
                ok(where and all("mktme-keyid%d" % keyid in w for w in where),
                   "cipher on: the DIMM's KeyID %d alias at 0x%x is KeyID %d's "
                   "window" % (keyid, alias, keyid),
                   "\n".join(where) or "no range of the flat views holds it")
        finally:
            stop(proc, qmp)


def bench_ratio(name, cpu_extra):
    proc = subprocess.run(qemu_args(name, cpu_extra=cpu_extra,
                                    append="benchonly"),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=600)
    text = open(os.path.join(WORK, name + ".log"), errors="replace").read()
    m = re.search(r"# bench keyid0 (\d+) keyid1 (\d+) ratio_x1000 (\d+)", text)
    ok(proc.returncode == 1 and m, "%s: benchmark ran" % name, text[-1000:])
    return int(m.group(3)) / 1000.0 if m else None


def test_bench():
    """Cost ratios, measured side by side in one run and printed: a timing
    is a figure for the notes, never a pass/fail criterion."""
    note("(e) cost: 4 MiB write+read pass, KeyID 1 vs KeyID 0, best of 7")
    enc = bench_ratio("bench-cipher", "")
    alias = bench_ratio("bench-alias", ",mktme-cipher=off")
    if enc is not None:
        note("encrypting KeyID / KeyID 0: %.2fx" % enc)
    if alias is not None:
        note("alias-only KeyID / KeyID 0: %.3fx" % alias)


def kernel_or_skip(what):
    """MKTME_TEST_KERNEL, or None after a SKIP line naming WHAT."""
    kernel = os.environ.get("MKTME_TEST_KERNEL")
    if not kernel:
        results.append(True)
        print("ok %d # SKIP %s: set MKTME_TEST_KERNEL to a bzImage"
              % (len(results), what))
    return kernel


def test_kernel():
    """A real kernel (e.g. Debian's 6.1) on the model, if one is given."""
    kernel = kernel_or_skip("real kernel boot")
    if not kernel:
        return
    note("(f) %s with mktme-keyid-bits=3" % kernel)
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.join(WORK, "kinit")
    for d in ("proc", "dev"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    subprocess.run(["gcc", "-static", "-O2", "-o", os.path.join(root, "init"),
                    os.path.join(here, "kinit", "init.c")], check=True)
    initrd = os.path.join(WORK, "kinit.cpio")
    files = subprocess.run(["find", "."], cwd=root, stdout=subprocess.PIPE,
                           check=True).stdout
    with open(initrd, "wb") as out:
        subprocess.run(["cpio", "-o", "-H", "newc", "--quiet"], cwd=root,
                       input=files, stdout=out, check=True)
    proc = subprocess.run(
        [QEMU] + FIRMWARE + ["-M", "q35", "-m", "1G", "-smp", "2",
         "-cpu", "max,vendor=GenuineIntel,tme=on,pconfig=on,mktme-keyid-bits=3",
         "-accel", "tcg", "-display", "none", "-nodefaults",
         "-serial", "stdio", "-global", "q35-pcihost.pci-hole64-size=1G",
         "-kernel", kernel, "-initrd", initrd,
         "-append", "console=ttyS0 panic=-1", "-no-reboot"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    log = proc.stdout.decode(errors="replace")
    open(os.path.join(WORK, "kernel.log"), "w").write(log)
    flags = re.search(r"KINIT flags\s*:(.*)", log)
    flags = flags.group(1).split() if flags else []
    ok("x86/tme: enabled by BIOS" in log, "kernel: x86/tme: enabled by BIOS",
       log[-1500:])
    ok("x86/mktme: 7 KeyIDs available" in log, "kernel: 7 KeyIDs available")
    ok("tme" in flags and "pconfig" in flags,
       "kernel: /proc/cpuinfo flags have tme and pconfig")
    ok("37 bits physical" in log,
       "kernel: x86_phys_bits lowered by the 3 KeyID bits (40 -> 37)")
    # As on client parts that activate AES-XTS-256 alone (TME-MK rev 1.3):
    # a 6.1 kernel knows only AES-XTS-128 and leaves MKTME off.
    proc = subprocess.run(
        [QEMU] + FIRMWARE + ["-M", "q35", "-m", "1G", "-smp", "2",
         "-cpu", "max,vendor=GenuineIntel,tme=on,pconfig=on,"
         "mktme-keyid-bits=3,mktme-algorithms=aes-xts-256",
         "-accel", "tcg", "-display", "none", "-nodefaults",
         "-serial", "stdio", "-global", "q35-pcihost.pci-hole64-size=1G",
         "-kernel", kernel, "-initrd", initrd,
         "-append", "console=ttyS0 panic=-1", "-no-reboot"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    log = proc.stdout.decode(errors="replace")
    open(os.path.join(WORK, "kernel-256.log"), "w").write(log)
    # (A kernel that knows AES-XTS-256, such as ours, lists it instead.)
    ok(("x86/tme: Unknown policy is active: 0x2" in log and
        "x86/mktme: No known encryption algorithm is supported: 0x4" in log) or
       re.search(r"x86/mktme: .*algorithms: aes-xts-256$", log, re.M),
       "kernel, mktme-algorithms=aes-xts-256: policy 2 and only AES-XTS-256 "
       "activated, as on client parts (Debian's 6.1 does not know it)",
       log[-1500:])


def test_code_patching():
    """(m) A kernel rewriting its static keys while other vCPUs run them."""
    kernel = kernel_or_skip("code patching")
    if not kernel:
        return
    # Two guests at once on a 2-core host: vCPU threads get preempted in
    # the middle of a store to code, which is what widens the races.
    note("(m) vm/qemu/bootloop: 4 boots of %s, 2 at once, -smp 2 under "
         "MTTCG" % kernel)
    here = os.path.dirname(os.path.abspath(__file__))
    proc = subprocess.run(
        [sys.executable, os.path.join(here, "..", "bootloop"), "--qemu", QEMU,
         "--kernel", kernel, "--count", "4", "--jobs", "2", "--smp", "2",
         "--timeout", "300",
         "--work", os.path.join(WORK, "bootloop")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=1200)
    out = proc.stdout.decode(errors="replace")
    ok(proc.returncode == 0 and "4 passed, 0 failed" in out,
       "text_poke_bp() under MTTCG: 4 boots each toggle sched_schedstats and "
       "the sched_switch tracepoint 200 times with a busy task per vCPU, "
       "no stale int3, no stall", out[-2000:])


KID0_PA = 0x5000000


def blocks_differ(a, b):
    """No 16-byte block of a equals b's at the same offset."""
    return len(a) == len(b) and all(a[i:i + 16] != b[i:i + 16]
                                    for i in range(0, len(a), 16))


def save(qmp, name, cmd, **kw):
    path = os.path.join(WORK, name)
    qmp.cmd(cmd, filename=path, **kw)
    return open(path, "rb").read()


def test_tme_bypass():
    note("(p) TME encryption bypass: off, DRAM holds KeyID 0 encrypted "
         "with the TME key; on (default), the plaintext")
    want = pattern(PAGE)
    for bypass in ("off", "on"):
        name = "bypass-" + bypass
        words = "kid0 hold" + (" bypass_off" if bypass == "off" else "")
        proc, qmp, held = run_to_hold(name, append=words,
                                      cpu_extra=",mktme-tme-bypass=" + bypass)
        try:
            if not held:
                continue
            guest_tap(name, "guest bypass=" + bypass)
            info = qmp.cmd("query-mktme")
            ok(info.get("tme-bypass") is (bypass == "on"),
               "query-mktme: tme-bypass %s" % bypass, info.get("tme-bypass"))
            dram = save(qmp, name + "-kid0.dram", "x-mktme-dram-save",
                        address=KID0_PA, size=PAGE)
            cpu = save(qmp, name + "-kid0.mem", "pmemsave", val=KID0_PA,
                       size=PAGE)
            ok(cpu == want, "bypass %s: pmemsave (a read through KeyID 0) "
               "finds the guest's KeyID-0 pattern" % bypass)
            ciph = save(qmp, name + "-buf.dram", "x-mktme-dram-save",
                        address=BUF_PA, size=PAGE)
            ok(xts_decrypt_blocks(ciph, BUF_PA) == want,
               "bypass %s: raw DRAM of KeyID 1's page decrypts with KeyID "
               "1's key alone (host AES-XTS-128)" % bypass)
            if bypass == "off":
                ok(blocks_differ(dram, want) and want[:64] not in dram,
                   "bypass off: raw DRAM (x-mktme-dram-save) of the KeyID-0 "
                   "page does not hold the plaintext in any block")
                ok(xts_decrypt_blocks(dram, KID0_PA) != want,
                   "bypass off: nor does it decrypt with KeyID 1's key")
                mem = save(qmp, name + "-buf.mem", "pmemsave", val=BUF_PA,
                           size=PAGE)
                ok(mem != ciph and xts_decrypt_blocks(mem, BUF_PA) != want,
                   "bypass off: a read through KeyID 0 of KeyID 1's page is "
                   "not its ciphertext (the TME key decrypted it)")
            else:
                ok(dram == want,
                   "bypass on (positive control): raw DRAM of the KeyID-0 "
                   "page is the plaintext")
        finally:
            stop(proc, qmp)
    proc = subprocess.run(qemu_args("bypass-nocipher",
                                    cpu_extra=",mktme-tme-bypass=off,"
                                              "mktme-cipher=off"),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=60)
    out = proc.stdout.decode(errors="replace")
    ok(proc.returncode == 1 and "mktme-tme-bypass" in out,
       "mktme-tme-bypass=off with mktme-cipher=off is refused", out)


NUMA_2 = ["-object", "memory-backend-ram,id=m0,size=128M",
          "-object", "memory-backend-ram,id=m1,size=128M",
          "-numa", "node,nodeid=0,cpus=0,memdev=m0",
          "-numa", "node,nodeid=1,cpus=1,memdev=m1"]


def test_home_package():
    note("(q) home-package key tables: an address is encrypted with the "
         "key table of its memory's package, whichever CPU accesses it")
    pa1 = BUF_PA + (128 << 20)
    name = "home-numa"
    proc, qmp, held = run_to_hold(name, smp="2,sockets=2", extra=NUMA_2,
                                  append="home=%d hold" % ((128 << 20) // PAGE))
    try:
        if held:
            guest_tap(name, "guest home numa")
            h0 = qmp.cmd("x-mktme-query-home", address=BUF_PA)
            h1 = qmp.cmd("x-mktme-query-home", address=pa1)
            h1k = qmp.cmd("x-mktme-query-home",
                          address=(1 << qmp.cmd("query-mktme")["keyid-shift"]) | pa1)
            ok(h0 == {"package": 0, "node": 0, "interleave": 0} and
               h1 == {"package": 1, "node": 1, "interleave": 0} and h1k == h1,
               "x-mktme-query-home: node 0's RAM is package 0's, node 1's "
               "package 1's (KeyID bits ignored)", [h0, h1, h1k])
            info = qmp.cmd("query-mktme")
            k1 = [keyid_entry(info, p, 1) for p in (0, 1)]
            ok(all(k["state"] == "random" for k in k1) and
               k1[0].get("fingerprint") != k1[1].get("fingerprint"),
               "query-mktme: SET_KEY_RANDOM on each package gave KeyID 1 a "
               "different key in each table", k1)
            k2 = [keyid_entry(info, p, 2) for p in (0, 1)]
            key1 = (bytes(range(0xe0, 0xf0)), bytes(range(0xf0, 0x100)))
            ok(k2[0].get("fingerprint") ==
               hashlib.sha256(DATA_KEY + TWEAK_KEY).hexdigest()[:16] and
               k2[1].get("fingerprint") ==
               hashlib.sha256(key1[0] + key1[1]).hexdigest()[:16],
               "query-mktme: KeyID 2 has package 0's key 00../10.. and "
               "package 1's e0../f0..", k2)
            want = pattern(PAGE)
            c0 = save(qmp, "home-c0.dram", "x-mktme-dram-save",
                      address=BUF_PA + 2 * PAGE, size=PAGE)
            c1 = save(qmp, "home-c1.dram", "x-mktme-dram-save",
                      address=pa1 + 2 * PAGE, size=PAGE)
            ok(xts_decrypt_blocks(c0, BUF_PA + 2 * PAGE) == want,
               "KeyID 2 in node 0's memory is encrypted with package 0's key")
            ok(xts_decrypt_blocks(c1, pa1 + 2 * PAGE, *key1) == want and
               xts_decrypt_blocks(c1, pa1 + 2 * PAGE) != want,
               "KeyID 2 in node 1's memory is encrypted with package 1's key "
               "(written by package 0's CPU), not package 0's")
            alias = save(qmp, "home-alias.mem", "pmemsave",
                         val=(2 << info["keyid-shift"]) | (pa1 + 2 * PAGE),
                         size=PAGE)
            ok(alias == want, "pmemsave through the KeyID-2 alias (no CPU) "
               "uses the home package's key too")
    finally:
        stop(proc, qmp)
    name = "home-interleave"
    proc, qmp, held = run_to_hold(name, smp="2,sockets=2", append="home=1 hold")
    try:
        if held:
            guest_tap(name, "guest home interleaved")
            h = [qmp.cmd("x-mktme-query-home", address=BUF_PA + i * PAGE)
                 for i in range(3)]
            ok([x["package"] for x in h] == [0, 1, 0] and
               all(x["interleave"] == PAGE and "node" not in x for x in h),
               "x-mktme-query-home without NUMA: 4 KiB pages alternate "
               "between the packages", h)
            c1 = save(qmp, "home-i1.dram", "x-mktme-dram-save",
                      address=BUF_PA + 3 * PAGE, size=PAGE)
            ok(xts_decrypt_blocks(c1, BUF_PA + 3 * PAGE,
                                  bytes(range(0xe0, 0xf0)),
                                  bytes(range(0xf0, 0x100))) == pattern(PAGE),
               "KeyID 2 in an odd page is encrypted with package 1's key")
    finally:
        stop(proc, qmp)


def test_machine_options():
    """(n) MKTME only on request; a 64-bit PCI window over the aliases."""
    note("(n) -cpu max without tme=on has no MKTME; the default 64-bit PCI "
         "window is refused with MKTME")
    base = [QEMU] + FIRMWARE + ["-M", "q35", "-m", "256", "-accel", "tcg",
                                "-display", "none", "-nodefaults"]
    sock = os.path.join(WORK, "plainmax.qmp")
    if os.path.exists(sock):
        os.unlink(sock)
    proc = subprocess.Popen(base + ["-cpu", "max,vendor=GenuineIntel", "-S",
                                    "-qmp", "unix:%s,server=on,wait=off" % sock],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    qmp = QMP(sock)
    try:
        path = qmp.cmd("query-cpus-fast")[0]["qom-path"]
        flags = [qmp.cmd("qom-get", path=path, property=f)
                 for f in ("tme", "pconfig")]
        ok(flags == [False, False],
           "-cpu max: tme and pconfig are off unless asked for", flags)
        info = qmp.cmd("query-mktme")
        ok(info.get("enabled") is False and info.get("packages") == [],
           "-cpu max: query-mktme says MKTME is not enabled", info)
    finally:
        stop(proc, qmp)
    # q35's default 64-bit PCI window is 32 GiB above RAM; KeyID 1 starts
    # at 16 GiB (6 KeyID bits of 40): refused, naming the option.
    proc = subprocess.run(base + ["-cpu", "max,vendor=GenuineIntel,tme=on,"
                                  "pconfig=on", "-S"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=60)
    out = proc.stdout.decode(errors="replace")
    ok(proc.returncode == 1 and
       "q35-pcihost.pci-hole64-size" in out and "KeyID" in out,
       "MKTME with q35's default 32 GiB 64-bit PCI window: QEMU refuses "
       "(status %d), naming -global q35-pcihost.pci-hole64-size"
       % proc.returncode, out)
    for line in out.strip().splitlines():
        note(line)
    # 12 GiB of window from 4 GiB (256 MiB of RAM) ends at 16 GiB: fits
    sock = os.path.join(WORK, "hole.qmp")
    if os.path.exists(sock):
        os.unlink(sock)
    proc = subprocess.Popen(base + ["-cpu", "max,vendor=GenuineIntel,tme=on,"
                                    "pconfig=on", "-global",
                                    "q35-pcihost.pci-hole64-size=12G", "-S",
                                    "-qmp", "unix:%s,server=on,wait=off" % sock],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    status = None
    try:
        qmp = QMP(sock)
        status = qmp.cmd("query-status")["status"]
        stop(proc, qmp)
    except (OSError, RuntimeError, ValueError) as e:
        proc.kill()
        status = "%s: %s" % (type(e).__name__, e)
    out = proc.communicate()[0].decode(errors="replace")
    ok(status == "prelaunch",
       "MKTME with a 12 GiB 64-bit PCI window (ends at 16 GiB, where KeyID "
       "1's aliases start): QEMU starts", "%s\n%s" % (status, out))
    proc = subprocess.run(base + ["-cpu", "max,vendor=GenuineIntel,tme=on,"
                                  "pconfig=on,mktme-algorithms=aes-xts-512",
                                  "-global", "q35-pcihost.pci-hole64-size=1G",
                                  "-S"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=60)
    out = proc.stdout.decode(errors="replace")
    ok(proc.returncode == 1 and "mktme-algorithms" in out,
       "mktme-algorithms=aes-xts-512 is refused, naming the property", out)


def main():
    os.makedirs(WORK, exist_ok=True)
    if not shutil.which("openssl"):
        print("Bail out! openssl not installed")
        return 1
    for t in (test_kat, test_guest, test_host_ram, test_cache_clean,
              test_cache_violations, test_cache_strict, test_cache_eviction,
              test_two_sockets,
              test_bench, test_migration, test_kernel, test_code_patching,
              test_hotadded_cpu,
              test_hotplugged_memory, test_tme_bypass, test_home_package,
              test_machine_options):
        try:
            t()
        except Exception as e:  # noqa: BLE001 - report, go on
            ok(False, "%s raised %s: %s" % (t.__name__, type(e).__name__, e))
    print("1..%d" % len(results))
    passed = sum(results)
    print("%d passed, %d failed" % (passed, len(results) - passed))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
