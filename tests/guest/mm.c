// SPDX-License-Identifier: GPL-2.0
/*
 * Encrypted anonymous memory through the memory manager: the first faults,
 * fork and copy-on-write, mremap, MADV_DONTNEED and MADV_FREE, swap,
 * migration (move_pages, migrate_pages, mbind, compaction) and its race
 * with encrypt_mprotect(), KSM, THP and
 * khugepaged, hugetlb VMAs split in two, process_vm_readv and ptrace, core dumps. Each scenario has a
 * control (no-encrypt and plain memory, or a plain region) where the
 * assertion could otherwise pass for the wrong reason.
 *
 * The guest half of tests/vm/mm.sh, which boots the VM with two NUMA
 * nodes and a virtio-blk disk as the swap device. Each scenario that
 * writes data reports pages of it and pauses while the host reads them
 * from guest RAM (tests/vm/hosted.bash):
 *
 *   region NAME kind=KIND pa=0x... keyid=K seed=S page=I
 *   ...
 *   mm: pause SCENARIO
 *
 * KIND is cpu, noenc or plain; the page at pa (its KeyID-0 address) holds
 * page I of fill(seed S) of tests/guest/mktme.c. When the host's line
 * comes, the program checks that those pages stayed where they were, and
 * goes on. Needs root.
 */
#include <fcntl.h>
#include <pthread.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <linux/mempolicy.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/swap.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mktme.h"

#ifndef MPOL_MF_MOVE
#define MPOL_MF_MOVE (1 << 1)
#endif

#define RW (PROT_READ | PROT_WRITE)
#define HUGE (2UL << 20)

/* Test points per scenario: a scenario cut short fails the rest. */
#define FAULT_POINTS 7
#define COW_POINTS 4
#define MREMAP_POINTS 10
#define MADVISE_POINTS 10
#define SWAP_POINTS 17
#define MIGRATION_POINTS (17 + NR_KINDS + 1)
#define KSM_POINTS 8
#define KSM_STALE_POINTS 4
#define THP_POINTS (NR_KINDS + 6)
#define THP_ZERO_POINTS 4
#define HUGETLB_POINTS 5
#define MIGRATION_RACE_POINTS 4
#define PTRACE_POINTS 8
#define CORE_POINTS 7

static key_serial_t cpu_key, noenc_key;

/* Fail the points of a scenario that did not run: n planned from first. */
static void finish(int first, int n, const char *what, const char *why)
{
	int ran = tap_run - first;

	if (ran > n)
		diag("%s: %d points, %d planned: fix the count in mm.c", what,
		     ran, n);
	for (; ran < n; ran++)
		ok(0, "%s: not run: %s", what, why ? why : "see above");
}

/* Files of /proc and /sys. */

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY), ret = -1, err;
	size_t n = strlen(s);

	if (fd < 0)
		return -1;
	if (write(fd, s, n) == (ssize_t)n)
		ret = 0;
	err = errno;
	close(fd);
	errno = err;
	return ret;
}

static int write_long(const char *path, long v)
{
	char s[32];

	snprintf(s, sizeof(s), "%ld", v);
	return write_file(path, s);
}

/* The file's first size - 1 bytes, without a trailing newline. */
static int read_file(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	if (n && buf[n - 1] == '\n')
		buf[n - 1] = '\0';
	return 0;
}

/* Regions: anonymous memory, encrypted (cpu), no-encrypt or plain. */

struct region {
	const char *kind; /* cpu, noenc, plain */
	char *p;
	size_t pages;
	unsigned int seed;
	long keyid; /* when it was filled */
};

static const char *const kinds[] = { "cpu", "noenc", "plain" };
#define NR_KINDS 3

static key_serial_t key_of(const char *kind)
{
	if (!strcmp(kind, "cpu"))
		return cpu_key;
	if (!strcmp(kind, "noenc"))
		return noenc_key;
	return 0;
}

/* Map and encrypt (unless plain), not touched yet; bails out on failure. */
static void region_map(struct region *r, const char *kind, size_t pages,
		       unsigned int seed)
{
	key_serial_t k = key_of(kind);

	r->kind = kind;
	r->pages = pages;
	r->seed = seed;
	r->p = map_anon(pages * PAGE, MAP_PRIVATE);
	if (!r->p || (k && encrypt_mprotect(r->p, pages * PAGE, RW, k)))
		bail_out("%s region of %zu pages: %s", kind, pages,
			 strerror(errno));
	r->keyid = keyid_of(r->p);
}

/* region_map(), then fill with fill(seed). */
static void region_new(struct region *r, const char *kind, size_t pages,
		       unsigned int seed)
{
	region_map(r, kind, pages, seed);
	fill(r->p, pages * PAGE, seed);
}

static void region_free(struct region *r)
{
	munmap(r->p, r->pages * PAGE);
}

/* The KeyID is the one it had, > 0 unless the region is plain, then 0. */
static int keyid_right(const struct region *r)
{
	long k = keyid_of(r->p);

	return k == r->keyid && (strcmp(r->kind, "plain") ? k > 0 : k == 0);
}

/* The region holds its pattern and its KeyID. */
static int intact(const struct region *r)
{
	return mismatch(r->p, r->pages * PAGE, r->seed) == -1 && keyid_right(r);
}

/* Pagemap entries of the region into e (zeros if unreadable). */
static void region_pagemap(const struct region *r, uint64_t *e)
{
	if (pagemap(r->p, r->pages, e))
		memset(e, 0, r->pages * sizeof(*e));
}

/*
 * Print the region lines of the first and the last page of each of the
 * NR_KINDS regions, pause for the host, and return how many of those pages
 * have moved (or are no longer present) meanwhile.
 */
static int report_and_pause(const char *scenario, const struct region *rs)
{
	uint64_t pa[NR_KINDS][2];
	size_t idx[2];
	int i, j, moved = 0;

	for (i = 0; i < NR_KINDS; i++) {
		idx[0] = 0;
		idx[1] = rs[i].pages - 1;
		for (j = 0; j < 2; j++) {
			pa[i][j] = phys_addr(rs[i].p + idx[j] * PAGE);
			printf("region %s-%s-p%zu kind=%s pa=0x%llx keyid=%ld seed=%u page=%zu\n",
			       scenario, rs[i].kind, idx[j], rs[i].kind,
			       (unsigned long long)pa[i][j], keyid_of(rs[i].p),
			       rs[i].seed, idx[j]);
		}
	}
	pause_for_host("mm", scenario);
	for (i = 0; i < NR_KINDS; i++) {
		idx[1] = rs[i].pages - 1;
		moved += !pa[i][0] || phys_addr(rs[i].p) != pa[i][0];
		moved += !pa[i][1] || phys_addr(rs[i].p + idx[1] * PAGE) != pa[i][1];
	}
	return moved;
}

/* report_and_pause(), and a test point: no reported page moved meanwhile. */
static void host_reads(const char *what, const char *scenario,
		       const struct region *rs)
{
	int moved = report_and_pause(scenario, rs);

	ok(moved == 0, "%s: the reported pages stayed at their addresses while the host read them (%d moved)",
	   what, moved);
}

static void regions_free(struct region *rs)
{
	int i;

	for (i = 0; i < NR_KINDS; i++)
		region_free(&rs[i]);
}

/*
 * First faults: a write fault gets a zeroed page (cleared through the
 * KeyID's mapping, after the KeyID is set), a read fault the zero page.
 */
#define FAULT_PAGES 4

static void test_fault(void)
{
	struct region rs[NR_KINDS];
	int first = tap_run, i;
	size_t j, half = FAULT_PAGES / 2;
	int zeros;

	for (i = 0; i < NR_KINDS; i++) {
		region_map(&rs[i], kinds[i], FAULT_PAGES, 11 + i);
		zeros = 1;
		for (j = 0; j < half; j++) {
			rs[i].p[j * PAGE] = 1;
			zeros &= all_zero(rs[i].p + j * PAGE + 1, PAGE - 1);
		}
		zeros &= all_zero(rs[i].p + half * PAGE, (FAULT_PAGES - half) * PAGE);
		ok(zeros && keyid_right(&rs[i]),
		   "fault: %s: fresh pages read zeros after a write fault and after a read fault (KeyID %ld)",
		   rs[i].kind, keyid_of(rs[i].p));
		fill(rs[i].p, FAULT_PAGES * PAGE, rs[i].seed);
		ok(intact(&rs[i]), "fault: %s: the data written reads back",
		   rs[i].kind);
	}
	host_reads("fault", "fault", rs);
	regions_free(rs);
	finish(first, FAULT_POINTS, "fault", NULL);
}

/*
 * Fork and copy-on-write: the child writes every page of its copies of
 * the regions and reports them while the parent's pages keep theirs. The
 * child prints no TAP; its exit status has a bit per failed check.
 */
#define COW_PAGES 4

static int cow_child(struct region *rs, const uint64_t *parent_pa)
{
	int i, bad = 0;

	for (i = 0; i < NR_KINDS; i++) {
		rs[i].seed += 100;
		fill(rs[i].p, COW_PAGES * PAGE, rs[i].seed);
		if (phys_addr(rs[i].p) == parent_pa[i])
			bad |= 1; /* the write did not copy */
		if (!intact(&rs[i]))
			bad |= 2;
	}
	if (report_and_pause("cowchild", rs))
		bad |= 4;
	fflush(stdout); /* the child leaves with _exit() */
	return bad;
}

static void test_cow(void)
{
	struct region rs[NR_KINDS];
	uint64_t parent_pa[NR_KINDS];
	int first = tap_run, i, moved, status = -1;
	pid_t pid;

	for (i = 0; i < NR_KINDS; i++) {
		region_new(&rs[i], kinds[i], COW_PAGES, 21 + i);
		parent_pa[i] = phys_addr(rs[i].p);
	}
	fflush(stdout);
	pid = fork();
	if (pid == 0)
		_exit(cow_child(rs, parent_pa));
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		status = -1;
	ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	   "cow: the child's writes went to new pages that read back, KeyIDs kept, and stayed put during its pause (status 0x%x: 1 no copy, 2 data, 4 moved)",
	   status);
	for (i = 0, moved = 0; i < NR_KINDS; i++)
		moved += !intact(&rs[i]) || phys_addr(rs[i].p) != parent_pa[i];
	ok(moved == 0, "cow: the parent's pages kept their data, KeyIDs and addresses (%d regions did not)",
	   moved);
	host_reads("cow", "cowparent", rs);
	ok(smaps_vmas_without_keyid(&i) == 0,
	   "cow: every VMA of the parent still has one KeyID line in smaps (%d VMAs)",
	   i);
	regions_free(rs);
	finish(first, COW_POINTS, "cow", NULL);
}

/*
 * mremap: moved to a reserved place and grown from 4 to 8 pages; the moved
 * pages keep their data, KeyID and physical address, the new ones get the
 * VMA's KeyID.
 */
#define MREMAP_PAGES 4

static void test_mremap(void)
{
	struct region rs[NR_KINDS];
	int first = tap_run, i;
	size_t old_len = MREMAP_PAGES * PAGE, new_len = 2 * old_len;
	uint64_t pa;
	char *to, *q;

	for (i = 0; i < NR_KINDS; i++) {
		region_new(&rs[i], kinds[i], MREMAP_PAGES, 31 + i);
		pa = phys_addr(rs[i].p);
		to = mmap(NULL, new_len, PROT_NONE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		q = to == MAP_FAILED ? MAP_FAILED :
			mremap(rs[i].p, old_len, new_len,
			       MREMAP_MAYMOVE | MREMAP_FIXED, to);
		if (!ok(q != MAP_FAILED && q == to,
			"mremap: %s: moved to a new address and grown from %d to %d pages",
			rs[i].kind, MREMAP_PAGES, 2 * MREMAP_PAGES))
			bail_out("mremap: %s", strerror(errno));
		rs[i].p = q;
		rs[i].pages = 2 * MREMAP_PAGES;
		ok(mismatch(q, old_len, rs[i].seed) == -1 && keyid_right(&rs[i]) &&
		   phys_addr(q) == pa,
		   "mremap: %s: the moved pages keep their data, their physical address and KeyID %ld",
		   rs[i].kind, keyid_of(q));
		fill(q, new_len, rs[i].seed);
		ok(intact(&rs[i]),
		   "mremap: %s: the grown part reads back, the whole VMA has KeyID %ld",
		   rs[i].kind, keyid_of(q + new_len - PAGE));
	}
	host_reads("mremap", "mremap", rs);
	regions_free(rs);
	finish(first, MREMAP_POINTS, "mremap", NULL);
}

/*
 * MADV_DONTNEED drops the pages: the next reads give zeros. MADV_FREE lets
 * reclaim drop them lazily (MADV_PAGEOUT reclaims them at once): zeros
 * again, never another page's data. Either way the VMA keeps its KeyID,
 * and data written again is encrypted again.
 */
#define MADVISE_PAGES 4

static void test_madvise(void)
{
	struct region rs[NR_KINDS];
	static char want[MADVISE_PAGES * PAGE];
	size_t len = MADVISE_PAGES * PAGE, j;
	int first = tap_run, i, lazy, pinned;
	cpu_set_t old;

	/*
	 * As for swap: MADV_PAGEOUT drains only this CPU's LRU batches, so
	 * fault, MADV_FREE and page out on one CPU. Unpinned, one page of
	 * four once stayed in another CPU's batch and was not dropped.
	 */
	pinned = pin_cpu(&old, "madvise");
	for (i = 0; i < NR_KINDS; i++) {
		region_new(&rs[i], kinds[i], MADVISE_PAGES, 41 + i);
		ok(!madvise(rs[i].p, len, MADV_DONTNEED) &&
		   all_zero(rs[i].p, len) && keyid_right(&rs[i]),
		   "madvise: %s: after MADV_DONTNEED the region reads zeros, KeyID %ld",
		   rs[i].kind, keyid_of(rs[i].p));
		fill(rs[i].p, len, rs[i].seed);
		fill(want, len, rs[i].seed);
		/*
		 * MADV_PAGEOUT makes reclaim drop the lazily freed pages at
		 * once: they are clean, so they are freed, not swapped.
		 */
		lazy = madvise(rs[i].p, len, MADV_FREE) ||
		       madvise(rs[i].p, len, MADV_PAGEOUT) ? -1 : 0;
		for (j = 0; lazy >= 0 && j < MADVISE_PAGES; j++) {
			if (all_zero(rs[i].p + j * PAGE, PAGE))
				lazy++;
			else if (memcmp(rs[i].p + j * PAGE, want + j * PAGE, PAGE))
				lazy = -1;
		}
		ok(lazy == MADVISE_PAGES && keyid_right(&rs[i]),
		   "madvise: %s: after MADV_FREE and MADV_PAGEOUT the pages were dropped: zeros (%d of %d pages; -1: garbage), KeyID %ld",
		   rs[i].kind, lazy, MADVISE_PAGES, keyid_of(rs[i].p));
		rs[i].seed = 51 + i;
		fill(rs[i].p, len, rs[i].seed);
		ok(intact(&rs[i]), "madvise: %s: data written again reads back",
		   rs[i].kind);
	}
	if (pinned)
		sched_setaffinity(0, sizeof(old), &old);
	host_reads("madvise", "madvise", rs);
	regions_free(rs);
	finish(first, MADVISE_POINTS, "madvise", NULL);
}

/*
 * Swap
 *
 * The swap device, read directly (O_DIRECT) at a swap slot: slot s is
 * page s of a swap disk or partition, or of a swap file, which FIEMAP
 * then maps to the file system's block device
 * (reading the file itself would give zeros: fallocate's extents stay
 * "unwritten" for the file system while swap writes their blocks).
 */
struct swapdev {
	int fd;
	struct fiemap *fm; /* a swap file's extents; NULL: a partition */
	char name[256];
};

#define MAX_EXTENTS 512

/* Active swap areas in /proc/swaps. */
static int swap_areas(void)
{
	char buf[4096], *s;
	int n = -1; /* the header line */

	if (read_file("/proc/swaps", buf, sizeof(buf)))
		return -1;
	for (s = buf; *s; s++)
		n += *s == '\n';
	return n + (s > buf && s[-1] != '\n');
}

/*
 * The block device dev, O_DIRECT: /dev/block/M:m (udev), /dev/DEVNAME
 * (devtmpfs, from sysfs), or a node of our own.
 */
static int open_blockdev(dev_t dev)
{
	char path[320], uevent[256], tmp[] = "/tmp/mm-blockdev.XXXXXX", *name;
	int fd;

	snprintf(path, sizeof(path), "/dev/block/%u:%u", major(dev), minor(dev));
	fd = open(path, O_RDONLY | O_DIRECT);
	if (fd >= 0)
		return fd;
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/uevent", major(dev),
		 minor(dev));
	if (!read_file(path, uevent, sizeof(uevent)) &&
	    (name = strstr(uevent, "DEVNAME="))) {
		name += strlen("DEVNAME=");
		name[strcspn(name, "\n")] = '\0';
		snprintf(path, sizeof(path), "/dev/%s", name);
		fd = open(path, O_RDONLY | O_DIRECT);
		if (fd >= 0)
			return fd;
	}
	if (!mkdtemp(tmp))
		return -1;
	snprintf(path, sizeof(path), "%s/dev", tmp);
	if (!mknod(path, S_IFBLK | 0400, dev))
		fd = open(path, O_RDONLY | O_DIRECT);
	if (fd < 0)
		diag("  block device %u:%u: %s", major(dev), minor(dev),
		     strerror(errno));
	unlink(path);
	rmdir(tmp);
	return fd;
}

/* Open swap area number type (its line in /proc/swaps): 0, or -1. */
static int swapdev_open(struct swapdev *d, unsigned int type)
{
	char line[512], kind[32];
	unsigned int n = 0;
	struct stat st;
	FILE *f = fopen("/proc/swaps", "r");
	int fd, found = 0;

	d->fd = -1;
	d->fm = NULL;
	if (!f)
		return -1;
	if (!fgets(line, sizeof(line), f)) /* the header */
		n = type + 1;
	while (n <= type && fgets(line, sizeof(line), f)) {
		if (n++ == type)
			found = sscanf(line, "%255s %31s", d->name, kind) == 2;
	}
	fclose(f);
	if (!found)
		return -1;
	if (strcmp(kind, "file")) {
		d->fd = open(d->name, O_RDONLY | O_DIRECT);
		return d->fd < 0 ? -1 : 0;
	}
	fd = open(d->name, O_RDONLY);
	if (fd < 0)
		return -1;
	d->fm = calloc(1, sizeof(*d->fm) +
			      MAX_EXTENTS * sizeof(struct fiemap_extent));
	if (!d->fm)
		bail_out("out of memory");
	d->fm->fm_length = FIEMAP_MAX_OFFSET;
	d->fm->fm_extent_count = MAX_EXTENTS;
	if (fstat(fd, &st) || ioctl(fd, FS_IOC_FIEMAP, d->fm) ||
	    !d->fm->fm_mapped_extents) {
		diag("  %s: fstat or FIEMAP: %s", d->name, strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	d->fd = open_blockdev(st.st_dev);
	return d->fd < 0 ? -1 : 0;
}

/* The 4 KiB of swap slot s into buf (4 KiB aligned): 0, or -1. */
static int swapdev_read(const struct swapdev *d, uint64_t slot, void *buf)
{
	uint64_t off = slot * PAGE, at = off;
	unsigned int i;

	if (d->fd < 0)
		return -1;
	if (d->fm) {
		for (i = 0; i < d->fm->fm_mapped_extents; i++) {
			const struct fiemap_extent *x = &d->fm->fm_extents[i];

			if (off >= x->fe_logical &&
			    off + PAGE <= x->fe_logical + x->fe_length)
				break;
		}
		if (i == d->fm->fm_mapped_extents)
			return -1;
		at = d->fm->fm_extents[i].fe_physical + off -
		     d->fm->fm_extents[i].fe_logical;
	}
	return pread(d->fd, buf, PAGE, (off_t)at) == (ssize_t)PAGE ? 0 : -1;
}

static void swapdev_close(struct swapdev *d)
{
	if (d->fd >= 0)
		close(d->fd);
	free(d->fm);
}

/* Wait (up to 10 s) until no page is under writeback. */
static long writeback_done(void)
{
	long v = -1;
	int t;

	for (t = 0; t < 10000; t += 50) {
		v = vmstat("nr_writeback");
		if (v == 0)
			break;
		sleep_ms(50);
	}
	return v;
}

#define SWAP_PAGES 64
#define MOST(n) ((n) * 3 / 4)

/* The lowest and highest swap slot of the swapped pages of n. */
static void slot_range(const uint64_t *e, size_t n, uint64_t *lo, uint64_t *hi)
{
	size_t i;

	*lo = ~0ULL;
	*hi = 0;
	for (i = 0; i < n; i++) {
		uint64_t slot = PM_PFN(e[i]) >> 5;

		if ((e[i] & (PM_SWAP | PM_PRESENT)) != PM_SWAP)
			continue;
		*lo = slot < *lo ? slot : *lo;
		*hi = slot > *hi ? slot : *hi;
	}
}

/* Pages of the region swapped out (and not present); *present the others. */
static int swapped_out(const struct region *r, uint64_t *e, int *present)
{
	size_t i;
	int n = 0;

	region_pagemap(r, e);
	*present = 0;
	for (i = 0; i < r->pages; i++) {
		n += (e[i] & (PM_SWAP | PM_PRESENT)) == PM_SWAP;
		*present += !!(e[i] & PM_PRESENT);
	}
	return n;
}

/*
 * The swapped pages of the region, read from the swap device, are its
 * plaintext; diagnostics for the first page that is not.
 */
static int device_holds_plaintext(const struct region *r, const uint64_t *e,
				  const struct swapdev *d, int *checked)
{
	size_t len = r->pages * PAGE, i;
	char *want = malloc(len), *buf = NULL;
	int good = 0, told = 0;

	*checked = 0;
	if (!want || posix_memalign((void **)&buf, PAGE, PAGE))
		bail_out("out of memory");
	fill(want, len, r->seed);
	for (i = 0; i < r->pages; i++) {
		uint64_t slot = PM_PFN(e[i]) >> 5;

		if ((e[i] & (PM_SWAP | PM_PRESENT)) != PM_SWAP)
			continue;
		++*checked;
		if (!swapdev_read(d, slot, buf) &&
		    !memcmp(buf, want + i * PAGE, PAGE)) {
			good++;
			continue;
		}
		if (!told++)
			diag("  %s page %zu, swap type %llu slot %llu: %s", r->kind,
			     i, (unsigned long long)(PM_PFN(e[i]) & 31),
			     (unsigned long long)slot,
			     swapdev_read(d, slot, buf) ? "unreadable" :
			     all_zero(buf, PAGE) ? "zeros on the device" :
						   "something else on the device");
	}
	free(buf);
	free(want);
	return good;
}

/*
 * No page holds the encrypted regions' KeyIDs any more, within 5 s of their
 * unmapping: unmapped pages leave the swap cache at munmap(), and a page
 * read ahead for a VMA of another KeyID, which its own VMA mapped only as
 * a copy, must leave it when it is copied.
 */
static int keyid_pages_gone(const struct region *rs)
{
	struct keyid_holders h[16];
	int i, j, n, t, left = 0;

	for (t = 0; t < 25; t++) {
		write_file("/proc/sys/vm/compact_memory", "1");
		n = read_keyid_holders(h, 16, 0);
		left = 0;
		for (i = 0; i < NR_KINDS; i++)
			for (j = 0; j < n && j < 16; j++)
				if (rs[i].keyid > 0 && h[j].keyid == rs[i].keyid)
					left += h[j].pages + h[j].pages_found;
		if (n >= 0 && !left)
			return 1;
		usleep(200 * 1000);
	}
	read_keyid_holders(NULL, 0, 1);
	return 0;
}

static void test_swap(void)
{
	struct region rs[NR_KINDS];
	uint64_t e[NR_KINDS][SWAP_PAGES];
	unsigned char vec[SWAP_PAGES];
	int first = tap_run, i, j, sw[NR_KINDS], present, checked, good;
	int total = 0, incore = 0, areas = swap_areas();
	struct swapdev dev = { .fd = -1 };
	cpu_set_t old;
	int pinned;
	long pswpin, wb;
	uint64_t type = ~0ULL;
	size_t len = SWAP_PAGES * PAGE;
	char mode[16];

	if (!ok(areas > 0, "swap: /proc/swaps lists an active swap area (%d)",
		areas)) {
		finish(first, SWAP_POINTS, "swap",
		       "no swap: tests/vm/mm.sh runs swapon before ./mm");
		return;
	}
	/*
	 * MADV_PAGEOUT drains only this CPU's LRU batch: fill and page out
	 * on one CPU, so that no fresh page waits in another CPU's batch.
	 */
	pinned = pin_cpu(&old, "swap");

	for (i = 0; i < NR_KINDS; i++)
		region_new(&rs[i], kinds[i], SWAP_PAGES, 31 + i);
	for (i = 0; i < NR_KINDS; i++) {
		int ret = madvise(rs[i].p, len, MADV_PAGEOUT), err = errno;
		uint64_t lo, hi;

		sw[i] = swapped_out(&rs[i], e[i], &present);
		slot_range(e[i], SWAP_PAGES, &lo, &hi);
		ok(ret == 0 && sw[i] >= MOST(SWAP_PAGES),
		   "swap %s: MADV_PAGEOUT swaps out %d of %d pages (pagemap: swapped, not present; want >= %d)",
		   rs[i].kind, sw[i], SWAP_PAGES, MOST(SWAP_PAGES));
		diag("swap %s: after MADV_PAGEOUT (%s): %d swapped (slots %llu-%llu), %d present, %d neither",
		     rs[i].kind, ret ? strerror(err) : "0", sw[i],
		     (unsigned long long)lo, (unsigned long long)hi, present,
		     SWAP_PAGES - sw[i] - present);
	}

	/* Once written, the device holds the plaintext of every kind. */
	wb = writeback_done();
	if (wb)
		diag("swap: nr_writeback still %ld after 10 s", wb);
	for (i = 0; i < NR_KINDS && type == ~0ULL; i++)
		for (j = 0; j < SWAP_PAGES && type == ~0ULL; j++)
			if ((e[i][j] & (PM_SWAP | PM_PRESENT)) == PM_SWAP)
				type = PM_PFN(e[i][j]) & 31;
	if (type == ~0ULL)
		diag("swap: no page swapped out: nothing to read on the device");
	else if (swapdev_open(&dev, (unsigned int)type))
		diag("swap: cannot read swap area %llu (%s) directly",
		     (unsigned long long)type, dev.name);
	else
		diag("swap: reading swap area %llu from %s%s",
		     (unsigned long long)type, dev.name,
		     dev.fm ? " (a swap file: block device + FIEMAP)" : "");
	for (i = 0; i < NR_KINDS; i++) {
		good = device_holds_plaintext(&rs[i], e[i], &dev, &checked);
		ok(checked > 0 && good == checked,
		   "swap %s: the swap device holds the plaintext of the swapped pages (%d of %d do)",
		   rs[i].kind, good, checked);
	}
	swapdev_close(&dev);

	/*
	 * Read faults map the swap-cache pages again, clean, keeping their
	 * swap slots; a second MADV_PAGEOUT then frees them without writing,
	 * so that the next read comes from the device.
	 */
	for (i = 0; i < NR_KINDS; i++)
		ok(intact(&rs[i]),
		   "swap %s: the data reads back from the swap cache, KeyID %ld",
		   rs[i].kind, keyid_of(rs[i].p));
	for (i = 0; i < NR_KINDS; i++) {
		madvise(rs[i].p, len, MADV_PAGEOUT);
		sw[i] = swapped_out(&rs[i], e[i], &present);
		if (mincore(rs[i].p, len, vec))
			memset(vec, 1, sizeof(vec));
		for (j = 0, checked = 0; j < SWAP_PAGES; j++)
			checked += (e[i][j] & (PM_SWAP | PM_PRESENT)) == PM_SWAP &&
				   (vec[j] & 1);
		diag("swap %s: second MADV_PAGEOUT: %d swapped (%d of them still in the swap cache), %d present",
		     rs[i].kind, sw[i], checked, present);
		total += sw[i];
		incore += checked;
	}
	ok(total >= MOST(NR_KINDS * SWAP_PAGES) && incore == 0,
	   "swap: a second MADV_PAGEOUT drops the clean swap-cache pages: %d of %d swapped out, %d still in the swap cache (mincore)",
	   total, NR_KINDS * SWAP_PAGES, incore);

	/*
	 * Swap-in reads ahead: by VMA (within the faulting VMA) or, when a
	 * swap device is rotational, by cluster of 2^page-cluster slots,
	 * which crosses into the neighbouring regions' slots.
	 */
	diag("swap: readahead: vma_ra_enabled %s, page-cluster %ld",
	     read_file("/sys/kernel/mm/swap/vma_ra_enabled", mode, sizeof(mode)) ?
		     "?" : mode,
	     read_long("/proc/sys/vm/page-cluster"));
	pswpin = vmstat("pswpin");
	for (i = 0; i < NR_KINDS; i++) {
		ok(intact(&rs[i]),
		   "swap %s: the data reads back from the swap device, KeyID %ld",
		   rs[i].kind, keyid_of(rs[i].p));
		sw[i] = swapped_out(&rs[i], e[i], &present);
		diag("swap %s: after swap-in: %d present, %d swapped", rs[i].kind,
		     present, sw[i]);
	}
	pswpin = vmstat("pswpin") - pswpin;
	ok(total > 0 && pswpin >= total,
	   "swap: the pages came back from the device: pswpin +%ld (want >= %d)",
	   pswpin, total);

	host_reads("swap", "swap", rs);
	regions_free(rs);
	ok(keyid_pages_gone(rs),
	   "swap: once the regions are unmapped, no page holds their KeyIDs, none left in the swap cache (%s)",
	   KEYIDS_DEBUGFS);
	if (pinned)
		sched_setaffinity(0, sizeof(old), &old);
	finish(first, SWAP_POINTS, "swap", NULL);
}

/*
 * Migration
 */
#define MIGRATE_PAGES 16
#define NR_MIGRATE (NR_KINDS * MIGRATE_PAGES)

/* How many of the n pages move_pages() says are on node. */
static int on_node(void **pages, int n, int node, int *status)
{
	int i, c = 0;

	if (sys_move_pages(n, pages, NULL, status, 0))
		return -1;
	for (i = 0; i < n; i++)
		c += status[i] == node;
	return c;
}

static void pfns(const struct region *r, uint64_t *pfn)
{
	uint64_t e[MIGRATE_PAGES];
	size_t i;

	region_pagemap(r, e);
	for (i = 0; i < r->pages; i++)
		pfn[i] = e[i] & PM_PRESENT ? PM_PFN(e[i]) : 0;
}

/*
 * Once the regions are unmapped (and the LRU batches drained), no VMA
 * references their KeyIDs, and the pool counts as many page references as
 * there are pages with the KeyID: a migration that gave a page its KeyID
 * twice counts one more. Pages of earlier scenarios may still hold it
 * (swap cache), and the keys do.
 */
static int page_refs_settle(const struct region *rs)
{
	struct keyid_holders h[16];
	int i, j, n, good = 0, want = 0;

	write_file("/proc/sys/vm/compact_memory", "1");
	n = read_keyid_holders(h, 16, 0);
	for (i = 0; i < NR_KINDS; i++) {
		if (rs[i].keyid <= 0)
			continue;
		want++;
		for (j = 0; j < n && j < 16; j++)
			if (h[j].keyid == rs[i].keyid && !h[j].vmas &&
			    h[j].pages == h[j].pages_found)
				good++;
	}
	if (good != want)
		read_keyid_holders(NULL, 0, 1);
	return want && good == want;
}

static void test_migration(void)
{
	struct region rs[NR_KINDS];
	void *pages[NR_MIGRATE];
	int nodes[NR_MIGRATE], status[NR_MIGRATE];
	uint64_t before[NR_KINDS][MIGRATE_PAGES], after[MIGRATE_PAGES];
	unsigned long from_mask, to_mask;
	int first = tap_run, i, j, from, to, c, moved, err, pinned;
	long ret;
	cpu_set_t old;

	if (!ok(access("/sys/devices/system/node/node1", F_OK) == 0,
		"migration: two NUMA nodes (/sys/devices/system/node/node1)")) {
		finish(first, MIGRATION_POINTS, "migration",
		       "one NUMA node: tests/vm/mm.sh boots 2 sockets");
		return;
	}
	/* All pages from one node: the one of this CPU. */
	pinned = pin_cpu(&old, "migration");
	for (i = 0; i < NR_KINDS; i++) {
		region_new(&rs[i], kinds[i], MIGRATE_PAGES, 61 + i);
		for (j = 0; j < MIGRATE_PAGES; j++)
			pages[i * MIGRATE_PAGES + j] = rs[i].p + j * PAGE;
		pfns(&rs[i], before[i]);
	}
	from = sys_move_pages(1, pages, NULL, status, 0) ? -1 : status[0];
	from = from == 1 ? 1 : 0;
	to = !from;
	diag("migration: %d of %d pages on node %d", on_node(pages, NR_MIGRATE,
							      from, status),
	     NR_MIGRATE, from);

	for (i = 0; i < NR_MIGRATE; i++)
		nodes[i] = to;
	ret = sys_move_pages(NR_MIGRATE, pages, nodes, status, MPOL_MF_MOVE);
	err = errno;
	for (i = 0, c = 0; i < NR_MIGRATE; i++)
		c += status[i] == to;
	if (!ok(ret == 0 && c == NR_MIGRATE,
		"move_pages to node %d: returns 0 (%ld), every page's status is node %d (%d of %d)",
		to, ret, to, c, NR_MIGRATE))
		diag("  %s; status[0] %d", ret ? strerror(err) : "", status[0]);
	for (i = 0; i < NR_KINDS; i++) {
		ok(intact(&rs[i]),
		   "move_pages %s: data intact, KeyID %ld unchanged", rs[i].kind,
		   keyid_of(rs[i].p));
		c = on_node(pages + i * MIGRATE_PAGES, MIGRATE_PAGES, to, status);
		pfns(&rs[i], after);
		for (j = 0, moved = 0; j < MIGRATE_PAGES; j++)
			moved += after[j] && after[j] != before[i][j];
		ok(c == MIGRATE_PAGES && moved == MIGRATE_PAGES,
		   "move_pages %s: all %d pages on node %d (%d are), at new physical addresses (%d are)",
		   rs[i].kind, MIGRATE_PAGES, to, c, moved);
	}
	host_reads("migration", "migration", rs);

	/* The whole process back to where it was. */
	from_mask = 1UL << to;
	to_mask = 1UL << from;
	ret = syscall(SYS_migrate_pages, 0, 8 * sizeof(unsigned long),
		      &from_mask, &to_mask);
	err = errno;
	c = on_node(pages, NR_MIGRATE, from, status);
	ok(ret >= 0 && c == NR_MIGRATE,
	   "migrate_pages from node %d to node %d: returns %ld (%s), every page of the regions on node %d (%d of %d)",
	   to, from, ret, ret < 0 ? strerror(err) : "the count it could not move",
	   from, c, NR_MIGRATE);
	for (i = 0; i < NR_KINDS; i++) {
		ok(intact(&rs[i]),
		   "migrate_pages %s: data intact, KeyID %ld unchanged",
		   rs[i].kind, keyid_of(rs[i].p));
		pfns(&rs[i], before[i]);
	}

	/* Compaction may move the pages, or not. */
	c = write_file("/proc/sys/vm/compact_memory", "1");
	ok(c == 0, "compaction: /proc/sys/vm/compact_memory accepts 1 (%s)",
	   c ? strerror(errno) : "0");
	for (i = 0; i < NR_KINDS; i++) {
		pfns(&rs[i], after);
		for (j = 0, moved = 0; j < MIGRATE_PAGES; j++)
			moved += after[j] != before[i][j];
		ok(intact(&rs[i]),
		   "compaction %s: data intact, KeyID %ld unchanged (%d of %d pages moved)",
		   rs[i].kind, keyid_of(rs[i].p), moved, MIGRATE_PAGES);
	}

	/*
	 * mbind(MPOL_MF_MOVE) allocates the new pages for the VMA, so they
	 * come with its KeyID before the copy gives them the old pages'.
	 */
	to_mask = 1UL << to;
	for (i = 0; i < NR_KINDS; i++) {
		ret = syscall(SYS_mbind, rs[i].p, rs[i].pages * PAGE, MPOL_BIND,
			      &to_mask, 8 * sizeof(unsigned long), MPOL_MF_MOVE);
		err = errno;
		c = on_node(pages + i * MIGRATE_PAGES, MIGRATE_PAGES, to, status);
		ok(ret == 0 && c == MIGRATE_PAGES && intact(&rs[i]),
		   "mbind(MPOL_MF_MOVE) %s to node %d: returns 0 (%s), all %d pages there (%d are), data intact, KeyID %ld",
		   rs[i].kind, to, ret ? strerror(err) : "0", MIGRATE_PAGES, c,
		   keyid_of(rs[i].p));
	}
	regions_free(rs);
	ok(page_refs_settle(rs),
	   "migration: the regions freed, no VMA references their KeyIDs, and as many pages as are found with them (%s)",
	   KEYIDS_DEBUGFS);
	if (pinned)
		sched_setaffinity(0, sizeof(old), &old);
	finish(first, MIGRATION_POINTS, "migration", NULL);
}

/*
 * encrypt_mprotect() against migration that holds no mmap_lock
 * (move_pages() migrates after dropping it): a page whose migration
 * completes while encrypt_mprotect() has changed the VMA's KeyID but not
 * yet zapped the range must not be mapped, even briefly, through the new
 * KeyID while it holds data of the old one. One thread moves the pages
 * between the nodes, one reads the first word of every page (0, or the
 * pattern written under the current key, is right; anything else is data
 * read through the wrong KeyID), and the main thread switches the region
 * between two keys and writes the pattern again, for a few seconds.
 */
#define RACE_PAGES 64
#define RACE_SECONDS 8
#define RACE_STAMP 0x5241434500000000ULL

struct race {
	char *p;
	volatile int stop;
	long moves, passes, bad;
	uint64_t bad_value;
	int bad_page;
};

static void *race_mover(void *arg)
{
	struct race *r = arg;
	void *pages[RACE_PAGES];
	int nodes[RACE_PAGES], status[RACE_PAGES], i, to = 0;

	for (i = 0; i < RACE_PAGES; i++)
		pages[i] = r->p + i * PAGE;
	while (!r->stop) {
		to ^= 1;
		for (i = 0; i < RACE_PAGES; i++)
			nodes[i] = to;
		if (sys_move_pages(RACE_PAGES, pages, nodes, status,
				   MPOL_MF_MOVE) >= 0)
			r->moves++;
	}
	return NULL;
}

static void *race_reader(void *arg)
{
	struct race *r = arg;
	uint64_t v;
	int i;

	while (!r->stop) {
		for (i = 0; i < RACE_PAGES; i++) {
			v = *(volatile uint64_t *)(r->p + i * PAGE);
			if (v && v != (RACE_STAMP | i) && !r->bad++) {
				r->bad_value = v;
				r->bad_page = i;
			}
		}
		r->passes++;
	}
	return NULL;
}

static void test_migration_race(void)
{
	struct race r = { 0 };
	key_serial_t keys[2];
	pthread_t mover, reader;
	long rounds = 0, failed = 0, k;
	int first = tap_run, i, good;
	struct timespec t0, t;

	keys[0] = cpu_key;
	keys[1] = mktme_add("mm-race", CPU_KEY);
	r.p = map_anon(RACE_PAGES * PAGE, MAP_PRIVATE);
	if (!ok(keys[1] != -1 && r.p &&
		!encrypt_mprotect(r.p, RACE_PAGES * PAGE, RW, keys[0]) &&
		access("/sys/devices/system/node/node1", F_OK) == 0,
		"migration race: %d pages encrypted, a second key, two NUMA nodes",
		RACE_PAGES)) {
		finish(first, MIGRATION_RACE_POINTS, "migration race", strerror(errno));
		goto out;
	}
	for (i = 0; i < RACE_PAGES; i++)
		*(volatile uint64_t *)(r.p + i * PAGE) = RACE_STAMP | i;
	if (pthread_create(&mover, NULL, race_mover, &r))
		bail_out("migration race: pthread_create: %s", strerror(errno));
	if (pthread_create(&reader, NULL, race_reader, &r))
		bail_out("migration race: pthread_create: %s", strerror(errno));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		if (encrypt_mprotect(r.p, RACE_PAGES * PAGE, RW, keys[++rounds & 1]))
			failed++;
		for (i = 0; i < RACE_PAGES; i++)
			*(volatile uint64_t *)(r.p + i * PAGE) = RACE_STAMP | i;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (t.tv_sec - t0.tv_sec < RACE_SECONDS);
	r.stop = 1;
	pthread_join(mover, NULL);
	pthread_join(reader, NULL);
	/* Enough to have raced at all: 12 rounds under load, 30 idle. */
	ok(!failed && rounds >= 5 && r.moves >= 5,
	   "migration race: %ld encrypt_mprotect() rounds (%ld failed), %ld move_pages() calls, %ld reader passes in %d s",
	   rounds, failed, r.moves, r.passes, RACE_SECONDS);
	ok(!r.bad,
	   "migration race: no read saw data through the wrong KeyID (%ld bad reads; first: page %d read %#llx)",
	   r.bad, r.bad_page, (unsigned long long)r.bad_value);
	k = keyid_of(r.p);
	for (good = 1, i = 0; i < RACE_PAGES; i++)
		good &= *(uint64_t *)(r.p + i * PAGE) == (RACE_STAMP | i);
	ok(good && k > 0, "migration race: every page reads back its last pattern, KeyID %ld", k);
	finish(first, MIGRATION_RACE_POINTS, "migration race", NULL);
out:
	if (r.p)
		munmap(r.p, RACE_PAGES * PAGE);
	if (keys[1] != -1)
		keyctl_invalidate(keys[1]);
}

/*
 * KSM
 */
#define KSM_DIR "/sys/kernel/mm/ksm/"
#define KSM_PAGES 32
#define KSM_STAMP 0x4b534d0000000000ULL

static long ksm(const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), KSM_DIR "%s", name);
	return read_long(path);
}

static int ksm_set(const char *name, long v)
{
	char path[128];

	snprintf(path, sizeof(path), KSM_DIR "%s", name);
	return write_long(path, v);
}

/* fill(seed), then each page's index in its first 8 bytes: no two alike. */
static void ksm_content(char *p, unsigned int seed)
{
	uint64_t stamp;
	size_t i;

	fill(p, KSM_PAGES * PAGE, seed);
	for (i = 0; i < KSM_PAGES; i++) {
		stamp = KSM_STAMP | i;
		memcpy(p + i * PAGE, &stamp, sizeof(stamp));
	}
}

static void ksm_region(struct region *r, const char *kind, unsigned int seed)
{
	region_new(r, kind, KSM_PAGES, seed);
	ksm_content(r->p, seed);
}

static int ksm_intact(const struct region *r)
{
	char *want = malloc(KSM_PAGES * PAGE);
	int same;

	if (!want)
		bail_out("out of memory");
	ksm_content(want, r->seed);
	same = !memcmp(r->p, want, KSM_PAGES * PAGE) && keyid_right(r);
	free(want);
	return same;
}

/* Pages i of a and b that share a physical page. */
static int merged_pairs(const struct region *a, const struct region *b)
{
	uint64_t ea[KSM_PAGES], eb[KSM_PAGES];
	int i, n = 0;

	region_pagemap(a, ea);
	region_pagemap(b, eb);
	for (i = 0; i < KSM_PAGES; i++)
		n += (ea[i] & PM_PRESENT) && (eb[i] & PM_PRESENT) &&
		     PM_PFN(ea[i]) == PM_PFN(eb[i]);
	return n;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* All pages of a and b present, no two at one physical address. */
static int distinct_pages(const struct region *a, const struct region *b)
{
	uint64_t e[2 * KSM_PAGES];
	int i;

	region_pagemap(a, e);
	region_pagemap(b, e + KSM_PAGES);
	for (i = 0; i < 2 * KSM_PAGES; i++) {
		if (!(e[i] & PM_PRESENT))
			return 0;
		e[i] = PM_PFN(e[i]);
	}
	qsort(e, 2 * KSM_PAGES, sizeof(e[0]), cmp_u64);
	for (i = 1; i < 2 * KSM_PAGES; i++)
		if (e[i] == e[i - 1])
			return 0;
	return 1;
}

static void test_ksm(void)
{
	struct region a, b, c, d;
	long old_run = ksm("run"), old_scan = ksm("pages_to_scan");
	long old_sleep = ksm("sleep_millisecs");
	long shared0, sharing0, scans0, shared1, sharing1, scans, shared, sharing;
	int first = tap_run, t, madv, madv_c, madv_d, err = 0, pairs1, pairs;

	if (!ok(old_run >= 0 && !ksm_set("pages_to_scan", 5000) &&
		!ksm_set("sleep_millisecs", 10) && !ksm_set("run", 1),
		"KSM: " KSM_DIR " takes run=1, pages_to_scan=5000, sleep_millisecs=10")) {
		finish(first, KSM_POINTS, "KSM", "no KSM (CONFIG_KSM)");
		goto restore;
	}
	diag("KSM: was run=%ld pages_to_scan=%ld sleep_millisecs=%ld", old_run,
	     old_scan, old_sleep);

	/* Control: plain pages with equal content merge. */
	ksm_region(&a, "plain", 71);
	ksm_region(&b, "plain", 71);
	shared0 = ksm("pages_shared");
	sharing0 = ksm("pages_sharing");
	scans0 = ksm("full_scans");
	madv = madvise(a.p, KSM_PAGES * PAGE, MADV_MERGEABLE) |
	       madvise(b.p, KSM_PAGES * PAGE, MADV_MERGEABLE);
	for (t = 0; t < 20000; t += 100) {
		scans = ksm("full_scans");
		if (scans >= scans0 + 2 &&
		    ksm("pages_sharing") >= sharing0 + KSM_PAGES)
			break;
		sleep_ms(100);
	}
	ksm_set("run", 0); /* stops ksmd between two batches */
	shared1 = ksm("pages_shared");
	sharing1 = ksm("pages_sharing");
	pairs1 = merged_pairs(&a, &b);
	scans = ksm("full_scans") - scans0;
	ok(madv == 0 && shared1 > shared0 && sharing1 > sharing0,
	   "KSM control: two plain regions of %d equal pages merge: pages_shared +%ld, pages_sharing +%ld after %ld full scans (%.1f s)",
	   KSM_PAGES, shared1 - shared0, sharing1 - sharing0, scans,
	   t / 1000.0);
	ok(pairs1 > 0,
	   "KSM control: %d of %d page pairs of the plain regions share a physical page (pagemap)",
	   pairs1, KSM_PAGES);

	/* Encrypted pages with equal content, one key: never merged. */
	ksm_region(&c, "cpu", 72);
	ksm_region(&d, "cpu", 72);
	madv_c = madvise(c.p, KSM_PAGES * PAGE, MADV_MERGEABLE);
	if (madv_c)
		err = errno;
	madv_d = madvise(d.p, KSM_PAGES * PAGE, MADV_MERGEABLE);
	if (madv_d)
		err = errno;
	diag("KSM: MADV_MERGEABLE on the encrypted regions: %d, %d (%s)", madv_c,
	     madv_d, err ? strerror(err) : "accepted");
	scans0 = ksm("full_scans");
	ksm_set("run", 1);
	for (t = 0; t < 20000 && ksm("full_scans") < scans0 + 3; t += 100)
		sleep_ms(100);
	ksm_set("run", 0);
	scans = ksm("full_scans") - scans0;
	shared = ksm("pages_shared") - shared1;
	sharing = ksm("pages_sharing") - sharing1;
	pairs = merged_pairs(&a, &b) - pairs1;
	ok(scans >= 2, "KSM: %ld full scans ran over the encrypted regions (want >= 2)",
	   scans);
	ok(shared == pairs && sharing == pairs,
	   "KSM encrypted: pages_shared +%ld and pages_sharing +%ld, all from the control's late merges (+%d): no encrypted page merged",
	   shared, sharing, pairs);
	ok(distinct_pages(&c, &d),
	   "KSM encrypted: all %d pages of the two regions present at distinct physical addresses (pagemap)",
	   2 * KSM_PAGES);
	ok(ksm_intact(&c) && ksm_intact(&d) && c.keyid == d.keyid,
	   "KSM encrypted: both regions read back, KeyIDs %ld and %ld (one key)",
	   keyid_of(c.p), keyid_of(d.p));

	t = ksm_set("run", 2);
	shared = ksm("pages_shared");
	sharing = ksm("pages_sharing");
	ok(!t && shared == 0 && sharing == 0 && ksm_intact(&a) && ksm_intact(&b),
	   "KSM: run=2 unmerges all (pages_shared %ld, pages_sharing %ld), the control regions read back",
	   shared, sharing);
	region_free(&a);
	region_free(&b);
	region_free(&c);
	region_free(&d);
	finish(first, KSM_POINTS, "KSM", NULL);
restore:
	ksm_set("run", 0);
	if (old_scan > 0)
		ksm_set("pages_to_scan", old_scan);
	if (old_sleep >= 0)
		ksm_set("sleep_millisecs", old_sleep);
}

/*
 * KSM's unstable tree holds the pages scanned in this pass by address. A
 * plain page a scanned into it, whose range is then encrypt_mprotect()ed
 * and given the content of a plain page b that the same pass scans next,
 * must not merge with b: b's KSM page would be mapped under a's KeyID.
 * One page per batch, KSM_STALE_SLEEP ms apart, puts the change between
 * the two scans: a pass is a batch for a, one for b, one that ends it.
 */
#define KSM_STALE_SLEEP 6000

static void test_ksm_stale(void)
{
	long old_run = ksm("run"), old_scan = ksm("pages_to_scan");
	long old_sleep = ksm("sleep_millisecs"), scans0, scans, k;
	int first = tap_run, t, merged, moved;
	uint64_t e[2];
	char *a, *b;

	a = map_anon(2 * PAGE, MAP_PRIVATE);
	if (!a)
		bail_out("mmap of 2 pages: %s", strerror(errno));
	b = a + PAGE;
	fill(a, PAGE, 81);
	fill(b, PAGE, 82);
	if (!ok(old_run >= 0 && !madvise(a, 2 * PAGE, MADV_MERGEABLE) &&
		!ksm_set("pages_to_scan", 1) &&
		!ksm_set("sleep_millisecs", KSM_STALE_SLEEP) && !ksm_set("run", 1),
		"KSM stale: two plain pages, MADV_MERGEABLE, one page per batch every %d ms",
		KSM_STALE_SLEEP)) {
		finish(first, KSM_STALE_POINTS, "KSM stale", "no KSM (CONFIG_KSM)");
		goto restore;
	}
	/*
	 * Two passes see a's content unchanged (a page enters the unstable
	 * tree only then); at the end of the next, the pass that inserts
	 * a starts: a is scanned one sleep later, b two.
	 */
	scans0 = ksm("full_scans");
	for (t = 0; t < 60000 && ksm("full_scans") < scans0 + 2; t += 50)
		sleep_ms(50);
	scans = ksm("full_scans");
	sleep_ms(KSM_STALE_SLEEP * 3 / 2);
	moved = !encrypt_mprotect(a, PAGE, RW, cpu_key);
	if (moved)
		fill(a, PAGE, 82);
	for (t = 0; t < 60000 && ksm("full_scans") < scans + 1; t += 50)
		sleep_ms(50);
	ksm_set("run", 0);
	pagemap(a, 2, e);
	merged = (e[0] & PM_PRESENT) && (e[1] & PM_PRESENT) &&
		 PM_PFN(e[0]) == PM_PFN(e[1]);
	k = keyid_of(a);
	ok(moved && ksm("full_scans") > scans,
	   "KSM stale: a encrypt_mprotect()ed and given b's content 1.5 sleeps into the pass that scans a, then b (full scans %ld -> %ld)",
	   scans, ksm("full_scans"));
	ok(!merged, "KSM stale: a and b are not merged (physical pages %#llx, %#llx)",
	   (unsigned long long)PM_PFN(e[0]), (unsigned long long)PM_PFN(e[1]));
	ok(k > 0 && mismatch(a, PAGE, 82) == -1 && mismatch(b, PAGE, 82) == -1 &&
	   keyid_of(b) == 0,
	   "KSM stale: both read back b's content, a with KeyID %ld, b with 0", k);
	finish(first, KSM_STALE_POINTS, "KSM stale", NULL);
restore:
	ksm_set("run", 2);
	ksm_set("run", 0);
	munmap(a, 2 * PAGE);
	if (old_scan > 0)
		ksm_set("pages_to_scan", old_scan);
	if (old_sleep >= 0)
		ksm_set("sleep_millisecs", old_sleep);
}

/*
 * THP and khugepaged
 */
#define THP_DIR "/sys/kernel/mm/transparent_hugepage/"
#define KHUGEPAGED THP_DIR "khugepaged/"

/* 4 MiB at a 2 MiB boundary inside a 6 MiB mapping at *m. */
static char *huge_aligned(char **m)
{
	*m = map_anon(3 * HUGE, MAP_PRIVATE);
	if (!*m)
		bail_out("mmap of 6 MiB: %s", strerror(errno));
	return (char *)(((uintptr_t)*m + HUGE - 1) & ~(HUGE - 1));
}

/*
 * A region of one huge page's worth at a 2 MiB boundary of *m, with
 * advice, of kind, not touched yet.
 */
static void region_map_huge(struct region *r, const char *kind, int advice,
			    unsigned int seed, char **m)
{
	key_serial_t k = key_of(kind);

	r->kind = kind;
	r->pages = HUGE / PAGE;
	r->seed = seed;
	r->p = huge_aligned(m);
	if (madvise(r->p, HUGE, advice) ||
	    (k && encrypt_mprotect(r->p, HUGE, RW, k)))
		bail_out("THP: %s region: %s", kind, strerror(errno));
	r->keyid = keyid_of(r->p);
}

/* khugepaged: quick passes until the region is a huge page (<= 20 s). */
static long khugepaged_collapses(const struct region *r, long *scans)
{
	long old_scan = read_long(KHUGEPAGED "scan_sleep_millisecs");
	long old_alloc = read_long(KHUGEPAGED "alloc_sleep_millisecs");
	long scans0 = read_long(KHUGEPAGED "full_scans"), anon = 0;
	int t;

	write_long(KHUGEPAGED "alloc_sleep_millisecs", 10);
	write_long(KHUGEPAGED "scan_sleep_millisecs", 10);
	for (t = 0; t < 20000; t += 100) {
		anon = smaps_field(0, r->p, "AnonHugePages");
		if (anon == HUGE / 1024)
			break;
		sleep_ms(100);
	}
	*scans = read_long(KHUGEPAGED "full_scans") - scans0;
	if (old_scan >= 0)
		write_long(KHUGEPAGED "scan_sleep_millisecs", old_scan);
	if (old_alloc >= 0)
		write_long(KHUGEPAGED "alloc_sleep_millisecs", old_alloc);
	return anon;
}

/*
 * Swap-out of a whole huge page needs a huge swap cluster, which only a
 * non-rotational swap device has (cluster_info, set up at swapon()); the
 * virtio-blk swap disk says it is rotational, which test_swap() wants
 * (cluster readahead across regions of other KeyIDs). Turn the first
 * swap area's disk non-rotational, or back, around a swapoff() and
 * swapon(): 0, or -1 with a diagnostic.
 */
static int swap_set_rotational(int rotational)
{
	char line[512], name[256], kind[32], path[320], *base;
	FILE *f = fopen("/proc/swaps", "r");
	int found, failed;

	found = f && fgets(line, sizeof(line), f) &&
		fgets(line, sizeof(line), f) &&
		sscanf(line, "%255s %31s", name, kind) == 2 &&
		!strcmp(kind, "partition");
	if (f)
		fclose(f);
	if (!found) {
		diag("THP swap: /proc/swaps has no swap partition first");
		return -1;
	}
	base = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
	snprintf(path, sizeof(path), "/sys/class/block/%s/queue/rotational", base);
	if (swapoff(name)) {
		diag("THP swap: swapoff %s: %s", name, strerror(errno));
		return -1;
	}
	/* Swap on again even when the flag cannot change: later tests swap. */
	failed = write_long(path, rotational);
	if (swapon(name, 0) || failed) {
		diag("THP swap: %s = %d, then swapon %s: %s", path, rotational,
		     name, strerror(errno));
		return -1;
	}
	diag("THP swap: %s is %srotational for swapon()", name,
	     rotational ? "" : "non-");
	return 0;
}

/*
 * Reclaim of an encrypted huge page splits it first (its swap I/O goes
 * through a bounce page per 4 KiB page), and writes its plaintext out; a
 * KeyID-0 huge page on the same swap area is swapped out whole, which
 * shows that the area could have taken the encrypted one whole too.
 */
static void thp_swap(const struct region *enc, const struct region *plain)
{
	long swpout = vmstat("thp_swpout"), fallback = vmstat("thp_swpout_fallback");
	long d_swpout, d_fallback;
	uint64_t e[HUGE / PAGE], pe[HUGE / PAGE];
	int sw, psw, present, checked = 0, good = 0, setup, type = -1;
	struct swapdev dev = { .fd = -1 };
	size_t i;
	cpu_set_t old;
	int pinned;

	setup = !swap_set_rotational(0);
	pinned = pin_cpu(&old, "THP swap");
	madvise(plain->p, HUGE, MADV_PAGEOUT);
	psw = swapped_out(plain, pe, &present);
	d_swpout = vmstat("thp_swpout") - swpout;
	ok(setup && psw == HUGE / PAGE && d_swpout == 1,
	   "THP swap: control: MADV_PAGEOUT swaps a KeyID-0 huge page out whole (%d of %lu pages swapped, thp_swpout +%ld)",
	   psw, HUGE / PAGE, d_swpout);

	swpout = vmstat("thp_swpout");
	madvise(enc->p, HUGE, MADV_PAGEOUT);
	sw = swapped_out(enc, e, &present);
	d_swpout = vmstat("thp_swpout") - swpout;
	d_fallback = vmstat("thp_swpout_fallback") - fallback;
	ok(sw >= MOST((int)(HUGE / PAGE)) && d_swpout == 0 && d_fallback == 1,
	   "THP swap: the encrypted huge page is split, then swapped out (%d of %lu pages swapped, %d present, thp_swpout +%ld, thp_swpout_fallback +%ld)",
	   sw, HUGE / PAGE, present, d_swpout, d_fallback);
	if (pinned)
		sched_setaffinity(0, sizeof(old), &old);

	if (writeback_done())
		diag("THP swap: nr_writeback not 0 after 10 s");
	for (i = 0; i < HUGE / PAGE && type < 0; i++)
		if ((e[i] & (PM_SWAP | PM_PRESENT)) == PM_SWAP)
			type = (int)(PM_PFN(e[i]) & 31);
	if (type >= 0 && swapdev_open(&dev, (unsigned int)type))
		diag("THP swap: cannot read swap area %d directly", type);
	else if (type >= 0)
		good = device_holds_plaintext(enc, e, &dev, &checked);
	swapdev_close(&dev);
	ok(checked > 0 && good == checked,
	   "THP swap: the swap device holds the plaintext of the encrypted huge page's swapped pages (%d of %d do)",
	   good, checked);
	ok(intact(enc) && intact(plain),
	   "THP swap: both read back, KeyID %ld and %ld", keyid_of(enc->p),
	   keyid_of(plain->p));
	if (setup)
		swap_set_rotational(1);
}

/*
 * Transparent huge pages of each kind: a fault with MADV_HUGEPAGE gives a
 * huge page with the region's KeyID, whose RAM the host reads (encrypted:
 * ciphertext); khugepaged collapses encrypted 4 KiB pages into one; and
 * swap-out splits an encrypted huge page and writes its data intact.
 */
static void test_thp(void)
{
	struct region rs[NR_KINDS], c;
	char *m[NR_KINDS], *cm, mode[128];
	long anon, scans, collapsed;
	int first = tap_run, i;

	if (!read_file(THP_DIR "enabled", mode, sizeof(mode)) &&
	    strstr(mode, "[never]"))
		diag("THP: enabled is [never]: the THP points fail");
	for (i = 0; i < NR_KINDS; i++) {
		region_map_huge(&rs[i], kinds[i], MADV_HUGEPAGE, 81 + i, &m[i]);
		fill(rs[i].p, HUGE, rs[i].seed);
		anon = smaps_field(0, rs[i].p, "AnonHugePages");
		ok(anon == HUGE / 1024 && intact(&rs[i]),
		   "THP %s: 2 MiB with MADV_HUGEPAGE, written, is a huge page (AnonHugePages %ld kB) that reads back, KeyID %ld",
		   rs[i].kind, anon, keyid_of(rs[i].p));
	}
	host_reads("THP", "thp", rs);

	/* khugepaged collapses encrypted 4 KiB pages with their KeyID */
	region_map_huge(&c, "cpu", MADV_NOHUGEPAGE, 84, &cm);
	fill(c.p, HUGE, c.seed);
	anon = smaps_field(0, c.p, "AnonHugePages");
	if (madvise(c.p, HUGE, MADV_HUGEPAGE))
		diag("THP: MADV_HUGEPAGE: %s", strerror(errno));
	collapsed = khugepaged_collapses(&c, &scans);
	ok(anon == 0 && collapsed == HUGE / 1024 && intact(&c),
	   "khugepaged: 512 encrypted 4 KiB pages (AnonHugePages %ld kB) became a huge page after %ld full scans (AnonHugePages %ld kB), data and KeyID %ld",
	   anon, scans, collapsed, keyid_of(c.p));
	munmap(cm, 3 * HUGE);

	thp_swap(&rs[0], &rs[NR_KINDS - 1]);
	for (i = 0; i < NR_KINDS; i++)
		munmap(m[i], 3 * HUGE);
	finish(first, THP_POINTS, "THP", NULL);
}

/* /proc/kpageflags bits (include/uapi/linux/kernel-page-flags.h). */
#define KPF_THP 22
#define KPF_ZERO_PAGE 24

static uint64_t kpageflags(uint64_t pfn)
{
	uint64_t flags = 0;
	int fd = open("/proc/kpageflags", O_RDONLY);

	if (fd < 0)
		return 0;
	if (pread(fd, &flags, sizeof(flags), (off_t)(pfn * sizeof(flags))) !=
	    (ssize_t)sizeof(flags))
		flags = 0;
	close(fd);
	return flags;
}

/*
 * The huge zero page split inside encrypt_mprotect(): mlock() of a
 * read-only THP region maps the huge zero page; encrypt_mprotect() with
 * PROT_WRITE populates the still-locked range for writing before it
 * zaps it, and the write fault splits the huge zero PMD into PTEs of
 * the zero page, which must keep KeyID 0 (the zero page is the same for
 * every KeyID only through KeyID 0). With CONFIG_X86_INTEL_MKTME_PTE_CHECK
 * a zero-page PTE with the new KeyID is a kernel warning.
 */
static void test_thp_zero(void)
{
	const char *use_zero = THP_DIR "use_zero_page";
	int first = tap_run, rc, err, huge_zero, pte_read;
	struct pte_check before, after;
	char mode[128], *m, *p;
	long old_use_zero;
	uint64_t e = 0;
	size_t off;

	if (!read_file(THP_DIR "enabled", mode, sizeof(mode)) &&
	    strstr(mode, "[never]")) {
		for (rc = 0; rc < THP_ZERO_POINTS; rc++)
			skip("THP is never: no huge zero page", "THP zero");
		return;
	}
	old_use_zero = read_long(use_zero);
	if (old_use_zero == 0)
		write_long(use_zero, 1);
	p = huge_aligned(&m);
	if (mprotect(p, HUGE, PROT_READ) || madvise(p, HUGE, MADV_HUGEPAGE) ||
	    mlock(p, HUGE))
		bail_out("THP zero: mprotect, madvise or mlock: %s", strerror(errno));
	huge_zero = !pagemap(p, 1, &e) && (e & PM_PRESENT) &&
		    (kpageflags(PM_PFN(e)) & (1ULL << KPF_ZERO_PAGE | 1ULL << KPF_THP)) ==
		    (1ULL << KPF_ZERO_PAGE | 1ULL << KPF_THP);
	if (!ok(huge_zero,
		"THP zero: mlock() of a read-only 2 MiB THP region maps the huge zero page (pfn %#llx)",
		(unsigned long long)PM_PFN(e))) {
		finish(first, THP_ZERO_POINTS, "THP zero", "no huge zero page");
		goto out;
	}
	pte_read = !read_pte_check(&before);
	rc = encrypt_mprotect(p, HUGE, RW, cpu_key);
	err = errno;
	ok(rc == 0, "THP zero: encrypt_mprotect(PROT_READ | PROT_WRITE) of the locked region: %s",
	   rc ? strerror(err) : "0");
	pte_read = !read_pte_check(&after) && pte_read;
	for (off = 0; off < HUGE && !p[off]; off++)
		;
	ok(off == HUGE && keyid_of(p) > 0 && pte_read &&
	   after.mismatched == before.mismatched,
	   "THP zero: it reads as zeros (first nonzero byte at %zu of %lu), KeyID %ld, %ld PTE check mismatches%s",
	   off, HUGE, keyid_of(p), after.mismatched - before.mismatched,
	   pte_read ? "" : " (" PTE_CHECK_DEBUGFS " unreadable)");
	fill(p, HUGE, 93);
	ok(mismatch(p, HUGE, 93) == -1, "THP zero: what is written then reads back");
	finish(first, THP_ZERO_POINTS, "THP zero", NULL);
out:
	munlock(p, HUGE);
	munmap(m, 3 * HUGE);
	if (old_use_zero == 0)
		write_long(use_zero, 0);
}

/*
 * process_vm_readv and ptrace
 */
#define PT_PAGES 4
#define PT_LEN (PT_PAGES * PAGE)
#define PT_PARENT_SEED 91
#define PT_CHILD_SEED 92
#define PT_POKE_AT (PAGE + 8)
#define PT_MAGIC 0x6d6b746d65706f6bULL

/* What the child's region holds after the parent's PTRACE_POKEDATA. */
static void pt_expected(char *buf)
{
	uint64_t magic = PT_MAGIC;

	fill(buf, PT_LEN, PT_CHILD_SEED);
	memcpy(buf + PT_POKE_AT, &magic, sizeof(magic));
}

/* The child: its own pattern, then wait for EOF, then check the region. */
static int pt_holder(char *p, int ready, int hold)
{
	char c, *want = malloc(PT_LEN);
	ssize_t n;

	fill(p, PT_LEN, PT_CHILD_SEED);
	if (!want || write(ready, "r", 1) != 1)
		return 2;
	while ((n = read(hold, &c, 1)) > 0 || (n < 0 && errno == EINTR))
		;
	pt_expected(want);
	return memcmp(p, want, PT_LEN) != 0;
}

struct target {
	pid_t pid;
	char *addr;
	int attach;
};

/* As uid 65534: 0 if reading (or attaching to) the target gives EPERM. */
static int unauthorised(void *arg)
{
	struct target *t = arg;
	char buf[64];
	struct iovec l = { buf, sizeof(buf) }, r = { t->addr, sizeof(buf) };
	long ret;

	if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
		return 100;
	errno = 0;
	if (t->attach)
		ret = ptrace(PTRACE_ATTACH, t->pid, NULL, NULL);
	else
		ret = process_vm_readv(t->pid, &l, 1, &r, 1, 0);
	if (ret != -1)
		return 101;
	return errno == EPERM ? 0 : errno > 0 && errno < 100 ? errno : 99;
}

/* Exit status of unauthorised() in words. */
static const char *unauth_why(int st)
{
	static char s[64];

	if (st == 0)
		return "EPERM";
	if (st == 100)
		return "setresuid failed";
	if (st == 101)
		return "it succeeded";
	snprintf(s, sizeof(s), "status %d (errno %s)", st,
		 st < 99 ? strerror(st) : "?");
	return s;
}

static void test_ptrace(void)
{
	char *p = map_anon(PT_LEN, MAP_PRIVATE), *buf = malloc(PT_LEN);
	char *want = malloc(PT_LEN), c;
	int first = tap_run, ready[2], hold[2], status = 0, st, bad = 0, seized;
	uint64_t word = 0;
	long k, ck, w;
	struct target t;
	struct iovec l, r;
	ssize_t got;
	size_t off;
	pid_t pid;

	if (!p || !buf || !want || encrypt_mprotect(p, PT_LEN, RW, cpu_key) ||
	    pipe(ready) || pipe(hold))
		bail_out("ptrace: setup: %s", strerror(errno));
	fill(p, PT_LEN, PT_PARENT_SEED);
	k = keyid_of(p);
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		bail_out("fork: %s", strerror(errno));
	if (pid == 0) {
		close(ready[0]);
		close(hold[1]);
		_exit(pt_holder(p, ready[1], hold[0]));
	}
	close(ready[1]);
	close(hold[0]);
	if (read(ready[0], &c, 1) != 1) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		finish(first, PTRACE_POINTS, "ptrace", "the child did not start");
		goto out;
	}

	memset(buf, 0, PT_LEN);
	l = (struct iovec){ buf, PT_LEN };
	r = (struct iovec){ p, PT_LEN };
	got = process_vm_readv(pid, &l, 1, &r, 1, 0);
	ok(got == (ssize_t)PT_LEN && mismatch(buf, PT_LEN, PT_CHILD_SEED) == -1,
	   "process_vm_readv by the parent (root): the child's %lu bytes of encrypted memory hold the child's pattern (read %zd)",
	   PT_LEN, got);
	ck = smaps_field(pid, p, "KeyID");
	ok(k > 0 && ck == k,
	   "the child's smaps gives the region KeyID %ld (the parent's: %ld)",
	   ck, k);

	t = (struct target){ pid, p, 0 };
	st = in_child(unauthorised, &t);
	ok(st == 0, "uid 65534: process_vm_readv of the child fails with EPERM (%s)",
	   unauth_why(st));
	t.attach = 1;
	st = in_child(unauthorised, &t);
	ok(st == 0, "uid 65534: PTRACE_ATTACH to the child fails with EPERM (%s)",
	   unauth_why(st));

	errno = 0;
	seized = ptrace(PTRACE_SEIZE, pid, NULL, NULL) == 0 &&
		 ptrace(PTRACE_INTERRUPT, pid, NULL, NULL) == 0 &&
		 waitpid(pid, &status, 0) == pid && WIFSTOPPED(status);
	st = errno;
	ok(seized, "PTRACE_SEIZE + PTRACE_INTERRUPT stop the child (status 0x%x%s%s)",
	   status, st ? ", " : "", st ? strerror(st) : "");
	fill(want, PT_LEN, PT_CHILD_SEED);
	for (off = 0; seized && off < PT_LEN; off += 512) {
		errno = 0;
		w = ptrace(PTRACE_PEEKDATA, pid, p + off, NULL);
		bad += errno != 0 || memcmp(&w, want + off, sizeof(w));
	}
	ok(seized && bad == 0,
	   "PTRACE_PEEKDATA: %lu words across the region are the child's pattern (%d are not)",
	   PT_LEN / 512, bad);

	w = 0;
	if (seized &&
	    !ptrace(PTRACE_POKEDATA, pid, p + PT_POKE_AT, (void *)(uintptr_t)PT_MAGIC)) {
		errno = 0;
		w = ptrace(PTRACE_PEEKDATA, pid, p + PT_POKE_AT, NULL);
		l = (struct iovec){ &word, sizeof(word) };
		r = (struct iovec){ p + PT_POKE_AT, sizeof(word) };
		if (process_vm_readv(pid, &l, 1, &r, 1, 0) != sizeof(word))
			word = 0;
	}
	ok((uint64_t)w == PT_MAGIC && word == PT_MAGIC,
	   "PTRACE_POKEDATA writes a word; PTRACE_PEEKDATA (0x%lx) and process_vm_readv (0x%llx) read it back",
	   (unsigned long)w, (unsigned long long)word);

	if (seized && ptrace(PTRACE_DETACH, pid, NULL, NULL))
		diag("PTRACE_DETACH: %s", strerror(errno));
	close(hold[1]);
	hold[1] = -1;
	if (waitpid(pid, &status, 0) != pid)
		status = -1;
	ok(WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
	   mismatch(p, PT_LEN, PT_PARENT_SEED) == -1,
	   "after PTRACE_DETACH the child exits 0: its region holds its pattern and the poked word; the parent's copy is its own (status 0x%x)",
	   status);
	finish(first, PTRACE_POINTS, "ptrace", NULL);
out:
	if (hold[1] >= 0)
		close(hold[1]);
	close(ready[0]);
	munmap(p, PT_LEN);
	free(buf);
	free(want);
}

/*
 * Core dumps
 */
#define CORE_PATTERN "/proc/sys/kernel/core_pattern"
#define CORE_ENC_SEED 0x6d6b746d65ULL
#define CORE_PLAIN_SEED 0x706c61696eULL
#define CORE_NONE_SEED 0x6e6f6e65ULL
#define NEEDLE_AT 1024
#define NEEDLE 64

/* xorshift64*: a 4 KiB pattern no other code of this program writes. */
static void prng_fill(void *p, size_t len, uint64_t seed)
{
	uint64_t s = seed | 1, v = 0;
	uint8_t *b = p;
	size_t i;

	for (i = 0; i < len; i++) {
		if (i % 8 == 0) {
			s ^= s >> 12;
			s ^= s << 25;
			s ^= s >> 27;
			v = s * 0x2545f4914f6cdd1dULL;
		}
		b[i] = (uint8_t)(v >> (8 * (i % 8)));
	}
}

/* The 64 bytes at NEEDLE_AT of prng_fill(seed) are in the file's data. */
static int core_has(const void *core, size_t size, uint64_t seed)
{
	uint8_t page[PAGE];

	prng_fill(page, PAGE, seed);
	return memmem(core, size, page + NEEDLE_AT, NEEDLE) != NULL;
}

static void test_core(void)
{
	char saved[512], now[512], dir[] = "/tmp/mm-core.XXXXXX", pattern[64];
	char path[96], *enc, *plain;
	int first = tap_run, status = 0, fd = -1, have;
	struct stat st = { 0 };
	void *core = NULL;
	pid_t pid;

	have = !read_file(CORE_PATTERN, saved, sizeof(saved));
	if (!mkdtemp(dir))
		bail_out("mkdtemp: %s", strerror(errno));
	snprintf(pattern, sizeof(pattern), "%s/core.%%p", dir);
	if (!ok(have && !write_file(CORE_PATTERN, pattern) &&
		!read_file(CORE_PATTERN, now, sizeof(now)) && !strcmp(now, pattern),
		"core dump: core_pattern set to %s (was \"%s\")", pattern,
		have ? saved : "unreadable")) {
		rmdir(dir);
		finish(first, CORE_POINTS, "core dump", "core_pattern not set");
		return;
	}

	/* The child writes both pages: no copy of the patterns before fork. */
	enc = map_anon(PAGE, MAP_PRIVATE);
	plain = map_anon(PAGE, MAP_PRIVATE);
	if (!enc || !plain || encrypt_mprotect(enc, PAGE, RW, cpu_key))
		bail_out("core dump: setup: %s", strerror(errno));
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };

		setrlimit(RLIMIT_CORE, &rl);
		prng_fill(enc, PAGE, CORE_ENC_SEED);
		prng_fill(plain, PAGE, CORE_PLAIN_SEED);
		abort();
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		status = -1;
	ok(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT &&
	   WCOREDUMP(status),
	   "core dump: the child killed by SIGABRT dumped core (status 0x%x)",
	   status);

	snprintf(path, sizeof(path), "%s/core.%d", dir, (int)pid);
	fd = open(path, O_RDONLY);
	if (fd >= 0 && !fstat(fd, &st) && st.st_size > 0) {
		core = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (core == MAP_FAILED)
			core = NULL;
	}
	ok(core != NULL, "core dump: %s exists (%lld bytes)", path,
	   (long long)st.st_size);
	ok(core && core_has(core, st.st_size, CORE_PLAIN_SEED),
	   "core dump (control): the plain page's 64-byte sequence is in the core");
	ok(core && core_has(core, st.st_size, CORE_ENC_SEED),
	   "core dump: the encrypted page's 64-byte sequence is in the core (plaintext)");
	ok(core && !core_has(core, st.st_size, CORE_NONE_SEED),
	   "core dump (control): a 64-byte sequence never written is not in the core");
	if (core)
		munmap(core, st.st_size);
	if (fd >= 0)
		close(fd);
	unlink(path);
	rmdir(dir);
	munmap(enc, PAGE);
	munmap(plain, PAGE);

	ok(!write_file(CORE_PATTERN, saved) &&
	   !read_file(CORE_PATTERN, now, sizeof(now)) && !strcmp(now, saved),
	   "core dump: core_pattern restored to \"%s\"", saved);
	finish(first, CORE_POINTS, "core dump", NULL);
}

/*
 * hugetlb: encrypt_mprotect() refuses it, and splitting its VMA (mprotect()
 * or munmap() of one huge page of two) keeps both halves. A split of a
 * hugetlb VMA runs hugetlb_split(), which needs the file's i_mmap lock
 * held for writing: with lockdep, a split that takes it too late is a
 * kernel report that vm/run counts.
 */
#define HUGETLB_DIR "/sys/kernel/mm/hugepages/hugepages-2048kB/"

static int hugetlb_intact(const char *first, const char *second)
{
	return (!first || mismatch(first, HUGE, 91) == -1) &&
	       mismatch(second, HUGE, 92) == -1;
}

static void test_hugetlb(void)
{
	long old_nr = read_long(HUGETLB_DIR "nr_hugepages"), free_pages;
	int first = tap_run, err, rc;
	char *h;

	free_pages = old_nr < 0 ? -1 :
		     write_long(HUGETLB_DIR "nr_hugepages", old_nr + 2) ? -1 :
		     read_long(HUGETLB_DIR "free_hugepages");
	h = free_pages >= 2 ? mmap(NULL, 2 * HUGE, RW,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB,
				   -1, 0) : MAP_FAILED;
	if (!ok(h != MAP_FAILED, "hugetlb: 2 huge pages of 2 MiB reserved (%ld free) and mapped",
		free_pages)) {
		finish(first, HUGETLB_POINTS, "hugetlb", "no 2 MiB huge pages");
		goto restore;
	}
	fill(h, HUGE, 91);
	fill(h + HUGE, HUGE, 92);
	rc = encrypt_mprotect(h, 2 * HUGE, RW, cpu_key);
	err = errno;
	ok(rc == -1 && err == EINVAL && hugetlb_intact(h, h + HUGE) &&
	   keyid_of(h) == 0,
	   "hugetlb: encrypt_mprotect() of a hugetlb mapping fails with EINVAL (%s) and leaves its bytes",
	   rc ? strerror(err) : "succeeded");
	ok(!mprotect(h + HUGE, HUGE, PROT_READ),
	   "hugetlb: mprotect() of the second huge page alone splits the VMA");
	ok(hugetlb_intact(h, h + HUGE),
	   "hugetlb: both huge pages read back after the split");
	ok(!munmap(h, HUGE) && hugetlb_intact(NULL, h + HUGE),
	   "hugetlb: munmap() of the first huge page alone leaves the second's bytes");
	munmap(h + HUGE, HUGE);
	finish(first, HUGETLB_POINTS, "hugetlb", NULL);
restore:
	if (old_nr >= 0)
		write_long(HUGETLB_DIR "nr_hugepages", old_nr);
}

int main(void)
{
	const char *nb = "/proc/sys/kernel/numa_balancing";
	struct pte_check pte_check_before;
	long numa_balancing = read_long(nb);

	plan(1 + FAULT_POINTS + COW_POINTS + MREMAP_POINTS + MADVISE_POINTS +
	     SWAP_POINTS + MIGRATION_POINTS + MIGRATION_RACE_POINTS + KSM_POINTS + KSM_STALE_POINTS +
	     THP_POINTS + THP_ZERO_POINTS + HUGETLB_POINTS + PTRACE_POINTS + CORE_POINTS + 1);
	require_mktme();
	if (geteuid())
		bail_out("mm needs root: pagemap PFNs, sysfs, core_pattern");
	cpu_key = mktme_add("mm-cpu", CPU_KEY);
	noenc_key = mktme_add("mm-noenc", "type=no-encrypt");
	if (cpu_key == -1 || noenc_key == -1)
		bail_out("add_key: %s", strerror(errno));
	/* Automatic NUMA balancing would move pages behind our back. */
	if (numa_balancing > 0)
		write_long(nb, 0);
	read_pte_check(&pte_check_before);

	test_fault();
	test_cow();
	test_mremap();
	test_madvise();
	test_swap();
	test_migration();
	test_migration_race();
	test_ksm();
	test_ksm_stale();
	test_thp();
	test_thp_zero();
	test_hugetlb();
	test_ptrace();
	test_core();
	ok_pte_check(&pte_check_before, "mm");

	if (numa_balancing > 0)
		write_long(nb, numa_balancing);
	keyctl_invalidate(cpu_key);
	keyctl_invalidate(noenc_key);
	return done();
}
