// SPDX-License-Identifier: GPL-2.0
/*
 * Device memory and the KeyID copies of the direct map, the guest half of
 * tests/vm/devmem.sh, which boots with legacy persistent memory
 * (memmap=SIZE!ADDR). The pmem driver maps it with memremap_pages(),
 * which goes through arch_add_memory() as hot-added RAM does; but device
 * memory (pmem, a PCI BAR for peer-to-peer DMA) is never encrypted
 * (encrypted VMAs are anonymous memory), and a BAR's address with KeyID
 * bits reaches nothing, so it must get no KeyID copies:
 *
 *   bound     each legacy pmem namespace is bound to nd_pmem
 *   unbind    unbinding the first one (memunmap_pages(), so
 *             arch_remove_memory()) shrinks the direct map by the
 *             namespace's size only, not by (1 + KeyIDs) times it
 *   rebind    binding it again grows the direct map by its size only
 *
 * The direct map's size is the sum of the DirectMap lines of
 * /proc/meminfo, which count every KeyID's copy.
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include "mktme.h"

#define ND "/sys/bus/nd/devices"
#define MAX_NS 8

/* The legacy (e820) pmem namespaces' names: "namespaceN.0"; their count. */
static int namespaces(char names[][32])
{
	DIR *d = opendir(ND);
	struct dirent *e;
	int n = 0;
	unsigned int r;

	if (!d)
		return 0;
	while ((e = readdir(d)) && n < MAX_NS)
		if (sscanf(e->d_name, "namespace%u.0", &r) == 1 && strlen(e->d_name) < 32)
			strcpy(names[n++], e->d_name);
	closedir(d);
	return n;
}

static unsigned long ns_value(const char *ns, const char *attr)
{
	char path[320], buf[64];

	snprintf(path, sizeof(path), ND "/%s/%s", ns, attr);
	return strtoul(read_line(path, buf, sizeof(buf)), NULL, 0);
}

static int ns_bound(const char *ns)
{
	char path[320];

	snprintf(path, sizeof(path), ND "/%s/driver", ns);
	return !access(path, F_OK);
}

/* Write ns to nd_pmem's bind or unbind file: 0 or the errno. */
static int ns_driver(const char *ns, const char *op)
{
	char path[320];

	snprintf(path, sizeof(path), "/sys/bus/nd/drivers/nd_pmem/%s", op);
	return sysfs_write(path, ns);
}

/* The change of the direct map by op on ns, in kB; LONG_MIN on error. */
static long direct_map_change(const char *ns, const char *op)
{
	long before = direct_map_kib(), after;
	int err = ns_driver(ns, op);

	after = direct_map_kib();
	if (err || before < 0 || after < 0) {
		diag("%s %s: %s; DirectMap %ld -> %ld kB", op, ns,
		     err ? strerror(err) : "ok", before, after);
		return LONG_MIN;
	}
	return after - before;
}

int main(void)
{
	char names[MAX_NS][32];
	long keyids, size_kib, change;
	int n, i, bound = 0;

	plan(1 + 3);
	require_mktme();
	keyids = mktme_sysfs("nr_keyids");
	n = namespaces(names);
	for (i = 0; i < n; i++) {
		diag("%s: %#lx bytes at %#lx, %s", names[i], ns_value(names[i], "size"),
		     ns_value(names[i], "resource"),
		     ns_bound(names[i]) ? "bound" : "not bound");
		bound += ns_bound(names[i]);
	}
	if (!ok(n > 0 && bound == n,
		"bound: %d of %d legacy pmem namespaces are bound to nd_pmem (their memory was added)",
		bound, n))
		bail_out("no pmem to check (memmap=SIZE!ADDR on the command line?)");

	size_kib = ns_value(names[0], "size") >> 10;
	change = direct_map_change(names[0], "unbind");
	ok(change == -size_kib,
	   "unbind: the direct map shrinks by %s's %ld kB, not (1 + %ld KeyIDs) x %ld kB (by %ld kB)",
	   names[0], size_kib, keyids, size_kib, -change);
	change = direct_map_change(names[0], "bind");
	ok(change == size_kib,
	   "rebind: the direct map grows by %s's %ld kB only (by %ld kB)",
	   names[0], size_kib, change);
	return done();
}
