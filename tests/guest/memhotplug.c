// SPDX-License-Identifier: GPL-2.0
/*
 * Memory hotplug and KeyIDs, the guest half of tests/vm/memhotplug.sh.
 * The kernel maps hot-added memory at KeyID 0's direct map and at every
 * KeyID's copy of it; hot-remove must unmap all of them, or each
 * remove leaves (KeyIDs) stale mappings of memory that is gone, and page
 * tables that nothing frees. The guest sees the mappings in the DirectMap
 * lines of /proc/meminfo, which count every copy.
 *
 *   add          the host plugs a DIMM: its memory blocks come online
 *                (memhp_default_state=online_movable), the direct map
 *                grows by (1 + KeyIDs) times its size
 *   ram-added    encrypted pages placed in it: the host finds ciphertext
 *                at their addresses and the pattern through their KeyID
 *   (offline)    the blocks go offline with the encrypted pages still
 *                mapped: they migrate out with their KeyID and read back
 *   remove       the host unplugs the DIMM: its blocks are gone, the
 *                direct map is back to its size before the add
 *   readd        the host plugs a DIMM again, at the same address
 *   ram-readded  encrypted pages in it again, checked as before
 *
 * Prints "region NAME kind=cpu pa=0x... keyid=K seed=S page=I" for the
 * host's checks of guest RAM (tests/vm/hosted.bash).
 */
#include <dirent.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mktme.h"

#define PROG "memhotplug"
#define RW (PROT_READ | PROT_WRITE)
#define LEN (16UL << 20)
#define NPAGES (LEN / PAGE)
#define MAX_BLOCKS 4096
/* Pages of a region that the host checks, at most. */
#define HOST_PAGES 3

static unsigned long block_size(void)
{
	char buf[64];

	return strtoul(read_line("/sys/devices/system/memory/block_size_bytes",
				 buf, sizeof(buf)), NULL, 16);
}

/* The numbers of the memory blocks in sysfs, into ids; their count. */
static int memory_blocks(long *ids)
{
	DIR *d = opendir("/sys/devices/system/memory");
	struct dirent *e;
	int n = 0;
	long id;

	if (!d)
		return -1;
	while ((e = readdir(d)) && n < MAX_BLOCKS)
		if (sscanf(e->d_name, "memory%ld", &id) == 1)
			ids[n++] = id;
	closedir(d);
	return n;
}

static int block_state_is(long id, const char *want)
{
	char path[96], buf[32];

	snprintf(path, sizeof(path), "/sys/devices/system/memory/memory%ld/state", id);
	return !strncmp(read_line(path, buf, sizeof(buf)), want, strlen(want));
}

/* Write "offline" to the block's state: 0 or the errno. */
static int block_offline(long id)
{
	char path[96];

	snprintf(path, sizeof(path), "/sys/devices/system/memory/memory%ld/state", id);
	return sysfs_write(path, "offline");
}

static long boot_blocks[MAX_BLOCKS];
static int nr_boot_blocks;

/* The blocks that are not boot blocks, into ids; their count. */
static int new_blocks(long *ids)
{
	long all[MAX_BLOCKS];
	int n = memory_blocks(all), i, j, found = 0;

	for (i = 0; i < n; i++) {
		for (j = 0; j < nr_boot_blocks && boot_blocks[j] != all[i]; j++)
			;
		if (j == nr_boot_blocks)
			ids[found++] = all[i];
	}
	return found;
}

/*
 * Up to 60 s until want new blocks are there, all online (want > 0), or
 * none is left (want 0). Their ids into ids; the count seen last.
 */
static int wait_new_blocks(long *ids, int want)
{
	int n = 0, i, online, s;

	for (s = 0; s < 600; s++) {
		n = new_blocks(ids);
		for (i = 0, online = 0; i < n; i++)
			online += block_state_is(ids[i], "online");
		if (n == want && online == n)
			return n;
		sleep_ms(100);
	}
	return n;
}

struct region {
	const char *name;
	uint8_t *p;
	key_serial_t key;
	long keyid;
	unsigned int seed;
};

/*
 * A region of LEN bytes encrypted with a cpu key, filled: how many of its
 * pages sit in [lo, hi), the hot-added memory. The first HOST_PAGES of
 * those are reported for the host.
 */
static long new_region(struct region *r, uint64_t lo, uint64_t hi)
{
	static uint64_t pm[NPAGES];
	long in = 0;
	size_t i;

	r->key = mktme_add(r->name, CPU_KEY);
	r->p = map_anon(LEN, MAP_PRIVATE);
	if (r->key == -1 || !r->p || encrypt_mprotect(r->p, LEN, RW, r->key))
		bail_out("%s: key %d, map %p: %s", r->name, r->key, r->p,
			 strerror(errno));
	fill(r->p, LEN, r->seed);
	r->keyid = keyid_of(r->p);
	if (pagemap(r->p, NPAGES, pm))
		bail_out("pagemap: %s", strerror(errno));
	for (i = 0; i < NPAGES; i++) {
		uint64_t pa = PM_PFN(pm[i]) << 12;

		if (!(pm[i] & PM_PRESENT) || pa < lo || pa >= hi)
			continue;
		if (in++ < HOST_PAGES)
			printf("region %s-p%zu kind=cpu pa=0x%llx keyid=%ld seed=%u page=%zu\n",
			       r->name, i, (unsigned long long)pa, r->keyid,
			       r->seed, i);
	}
	return in;
}

/* How many pages of the region sit in [lo, hi); -1 if pagemap fails. */
static long pages_in(const struct region *r, uint64_t lo, uint64_t hi)
{
	static uint64_t pm[NPAGES];
	long in = 0;
	size_t i;

	if (pagemap(r->p, NPAGES, pm))
		return -1;
	for (i = 0; i < NPAGES; i++)
		in += (pm[i] & PM_PRESENT) && (PM_PFN(pm[i]) << 12) >= lo &&
		      (PM_PFN(pm[i]) << 12) < hi;
	return in;
}

static int reads_back(const struct region *r)
{
	long at = mismatch(r->p, LEN, r->seed);

	if (at != -1)
		diag("%s: byte %ld differs from pattern %u", r->name, at, r->seed);
	return at == -1;
}

/*
 * After a plug (pause name): the new blocks come online, the direct map
 * grows by (1 + KeyIDs) times their size. [*lo, *hi) is their range.
 */
static void plugged(const char *name, long before_kib, long copies,
		    uint64_t *lo, uint64_t *hi)
{
	long ids[MAX_BLOCKS], kib;
	unsigned long bs = block_size();
	int n, i;

	pause_for_host(PROG, name);
	n = wait_new_blocks(ids, 2);
	*lo = UINT64_MAX;
	*hi = 0;
	for (i = 0; i < n; i++) {
		if ((uint64_t)ids[i] * bs < *lo)
			*lo = (uint64_t)ids[i] * bs;
		if ((uint64_t)(ids[i] + 1) * bs > *hi)
			*hi = (uint64_t)(ids[i] + 1) * bs;
	}
	if (!ok(n == 2, "%s: the DIMM's 2 memory blocks of %lu MiB come online (movable): %d seen, [0x%llx, 0x%llx)",
		name, bs >> 20, n, (unsigned long long)*lo,
		(unsigned long long)*hi))
		bail_out("no hot-added memory");
	kib = direct_map_kib();
	ok(kib - before_kib == copies * (long)((*hi - *lo) >> 10),
	   "%s: the direct map grew by %ld kB, (1 + %ld KeyIDs) x %llu kB: KeyID 0 and every copy map the new memory",
	   name, kib - before_kib, copies - 1,
	   (unsigned long long)((*hi - *lo) >> 10));
}

int main(void)
{
	struct region r1 = { .name = "hot1", .seed = 31 };
	struct region r2 = { .name = "hot2", .seed = 32 };
	long ids[MAX_BLOCKS], keyids, before_kib, in, in_use;
	uint64_t lo, hi;
	int n, i, err, failed;

	if (access("/sys/devices/system/memory/block_size_bytes", R_OK)) {
		printf("1..0 # SKIP no memory hotplug (CONFIG_MEMORY_HOTPLUG)\n");
		return 0;
	}
	plan(1 + 14);
	require_mktme();
	keyids = mktme_sysfs("nr_keyids");
	in_use = settled_keyids_in_use();
	nr_boot_blocks = memory_blocks(boot_blocks);
	before_kib = direct_map_kib();
	diag("%d memory blocks at boot, DirectMap %ld kB, %ld KeyIDs",
	     nr_boot_blocks, before_kib, keyids);

	plugged("add", before_kib, 1 + keyids, &lo, &hi);
	in = new_region(&r1, lo, hi);
	ok(in > 0 && r1.keyid > 0,
	   "hot1: %ld of %lu pages encrypted with KeyID %ld sit in the hot-added memory",
	   in, NPAGES, r1.keyid);
	pause_for_host(PROG, "ram-added");
	ok(reads_back(&r1), "hot1: the data reads back");

	/* Offline with the pages mapped: they have to migrate. */
	n = new_blocks(ids);
	for (i = 0, failed = 0; i < n; i++) {
		err = block_offline(ids[i]);
		if (err) {
			diag("memory%ld: offline: %s", ids[i], strerror(err));
			failed++;
		}
	}
	ok(n == 2 && !failed, "offline: both blocks go offline (%d of %d failed)",
	   failed, n);
	ok(pages_in(&r1, lo, hi) == 0 && keyid_of(r1.p) == r1.keyid,
	   "offline: no page of hot1 is left in the offlined memory, its VMA keeps KeyID %ld",
	   r1.keyid);
	ok(reads_back(&r1), "offline: hot1 reads back after its pages migrated");

	pause_for_host(PROG, "remove");
	n = wait_new_blocks(ids, 0);
	ok(n == 0, "remove: the hot-added blocks are gone (%d left)", n);
	ok(direct_map_kib() == before_kib,
	   "remove: the direct map is back to %ld kB (now %ld kB): KeyID 0's mapping and every copy are gone",
	   before_kib, direct_map_kib());

	plugged("readd", before_kib, 1 + keyids, &lo, &hi);
	in = new_region(&r2, lo, hi);
	ok(in > 0 && r2.keyid > 0,
	   "hot2: %ld of %lu pages encrypted with KeyID %ld sit in the memory added again",
	   in, NPAGES, r2.keyid);
	pause_for_host(PROG, "ram-readded");
	ok(reads_back(&r2) && reads_back(&r1), "hot2 and hot1 read back");

	munmap(r1.p, LEN);
	munmap(r2.p, LEN);
	keyctl_invalidate(r1.key);
	keyctl_invalidate(r2.key);
	ok(wait_keyids_in_use(in_use, 10000) == in_use,
	   "KeyIDs in use back to %ld", in_use);
	return done();
}
