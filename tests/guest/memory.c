// SPDX-License-Identifier: GPL-2.0
/*
 * Encrypted anonymous memory behaves as memory: zero-filled, reads back,
 * fork/COW, shared anonymous memory refused, mremap, MADV_DONTNEED/MADV_FREE,
 * transparent huge pages (fault, split, COW, MADV_COLLAPSE), the vmstat counters of KeyID changes, and keys invalidated or revoked
 * while it is mapped.
 */
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mktme.h"

#define RW (PROT_READ | PROT_WRITE)
#define N 16 /* pages */

static key_serial_t key;

/* len bytes of anonymous memory encrypted with k; bails out on failure. */
static char *encrypted(size_t len, int flags, key_serial_t k)
{
	char *p = map_anon(len, flags);

	if (!p || encrypt_mprotect(p, len, RW, k))
		bail_out("encrypted memory of %zu bytes: %s", len, strerror(errno));
	return p;
}

static void test_fill_fork(void)
{
	char *p = encrypted(N * PAGE, MAP_PRIVATE, key), c = 0;
	long k = keyid_of(p);
	int c2p[2], p2c[2], status = -1, bits;
	pid_t pid;

	ok(k > 0, "encrypt_mprotect gives the VMA KeyID %ld", k);
	ok(all_zero(p, N * PAGE), "fresh pages read as zeros");
	fill(p, N * PAGE, 1);
	ok(mismatch(p, N * PAGE, 1) == -1, "%d pages written read back", N);

	if (pipe(c2p) || pipe(p2c))
		bail_out("pipe: %s", strerror(errno));
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		bits = (mismatch(p, N * PAGE, 1) != -1) |
		       (k <= 0 || keyid_of(p) != k) << 1;
		fill(p, PAGE, 2);
		if (write(c2p[1], "w", 1) != 1 || read(p2c[0], &c, 1) != 1)
			_exit(255);
		bits |= (mismatch(p + PAGE, PAGE, 4) == -1) << 2;
		bits |= (mismatch(p, PAGE, 2) != -1) << 3;
		_exit(bits);
	}
	if (read(c2p[0], &c, 1) == 1) {
		ok(mismatch(p, PAGE, 1) == -1,
		   "fork: the child's write to a page is private to the child");
		fill(p + PAGE, PAGE, 4);
	} else {
		ok(0, "fork: the child ran");
	}
	if (write(p2c[1], "c", 1) != 1 || waitpid(pid, &status, 0) != pid)
		status = -1;
	bits = WIFEXITED(status) ? WEXITSTATUS(status) : 255;
	ok(!(bits & 1), "fork: the child sees the parent's data");
	ok(!(bits & 2), "fork: the child's smaps shows the same KeyID");
	ok(!(bits & 4), "fork: the parent's later write is private to the parent");
	ok(!(bits & 8), "fork: the child reads back its own write");
	if (bits)
		diag("  child status 0x%x", status);
	munmap(p, N * PAGE);
}

/*
 * MAP_SHARED | MAP_ANONYMOUS is shmem: its pages belong to a file, not to
 * the VMA, and encrypt_mprotect() refuses it before changing anything.
 */
static void test_shared(void)
{
	char *p = map_anon(4 * PAGE, MAP_SHARED);
	long ret;

	if (!p)
		bail_out("shared anonymous mmap: %s", strerror(errno));
	fill(p, 4 * PAGE, 5);
	errno = 0;
	ret = encrypt_mprotect(p, 4 * PAGE, RW, key);
	ok(ret == -1 && errno == EINVAL,
	   "shared anonymous memory (shmem) is refused with EINVAL (got %ld, %s)",
	   ret, strerror(errno));
	ok(mismatch(p, 4 * PAGE, 5) == -1 && keyid_of(p) == 0,
	   "... and keeps its data and KeyID 0");
	munmap(p, 4 * PAGE);
}

static void test_mremap(void)
{
	char *p = encrypted(4 * PAGE, MAP_PRIVATE, key), *to, *q;
	long k = keyid_of(p);

	fill(p, 4 * PAGE, 6);
	to = mmap(NULL, 4 * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	q = mremap(p, 4 * PAGE, 4 * PAGE, MREMAP_MAYMOVE | MREMAP_FIXED, to);
	ok(q == to && mismatch(q, 4 * PAGE, 6) == -1 && k > 0 && keyid_of(q) == k,
	   "mremap to another address keeps the data and KeyID %ld", k);
	p = mremap(q, 4 * PAGE, 64 * PAGE, MREMAP_MAYMOVE);
	ok(p != MAP_FAILED && mismatch(p, 4 * PAGE, 6) == -1 &&
	   keyid_of(p) == k && keyid_of(p + 63 * PAGE) == k,
	   "mremap to 16 times the size keeps the data and the KeyID");
	if (p == MAP_FAILED)
		bail_out("mremap: %s", strerror(errno));
	ok(all_zero(p + 4 * PAGE, 60 * PAGE), "the grown part reads as zeros");
	fill(p + 4 * PAGE, 60 * PAGE, 7);
	ok(mismatch(p + 4 * PAGE, 60 * PAGE, 7) == -1,
	   "data written to the grown part reads back");
	munmap(p, 64 * PAGE);
}

static void test_madvise(void)
{
	char *p = encrypted(N * PAGE, MAP_PRIVATE, key), *copy = malloc(N * PAGE);
	long k = keyid_of(p);
	int i, bad = 0;

	fill(p, N * PAGE, 8);
	ok(madvise(p, N * PAGE, MADV_DONTNEED) == 0 && all_zero(p, N * PAGE) &&
	   k > 0 && keyid_of(p) == k, "MADV_DONTNEED: zeros, KeyID kept");
	fill(p, N * PAGE, 9);
	ok(mismatch(p, N * PAGE, 9) == -1, "and data written after reads back");

	memcpy(copy, p, N * PAGE);
	ok(madvise(p, N * PAGE, MADV_FREE) == 0 && k > 0 && keyid_of(p) == k,
	   "MADV_FREE: success, KeyID kept");
	for (i = 0; i < N; i++)
		bad += memcmp(p + i * PAGE, copy + i * PAGE, PAGE) &&
		       !all_zero(p + i * PAGE, PAGE);
	ok(!bad, "after MADV_FREE every page holds its data or zeros (%d do not)",
	   bad);
	fill(p, N * PAGE, 10);
	ok(mismatch(p, N * PAGE, 10) == -1, "and data written after reads back");
	free(copy);
	munmap(p, N * PAGE);
}

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1; glibc 2.36 does not name it */
#endif
#define HUGE (2UL << 20)

/* n huge pages' worth at a 2 MiB boundary, encrypted with key; *m to unmap. */
static char *encrypted_huge(size_t n, int advice, char **m)
{
	char *p;

	*m = map_anon((n + 1) * HUGE, MAP_PRIVATE);
	p = (char *)(((uintptr_t)*m + HUGE - 1) & ~(HUGE - 1));
	if (!*m || madvise(p, n * HUGE, advice) ||
	    encrypt_mprotect(p, n * HUGE, RW, key))
		bail_out("THP region: %s", strerror(errno));
	return p;
}

/*
 * Transparent huge pages in encrypted memory: a fault, MADV_COLLAPSE of
 * 4 KiB pages, a split, and copy-on-write of a huge page; the data and
 * the KeyID stay. (tests/guest/mm.c has the host's view and khugepaged.)
 */
#define SPLIT_HUGE_PAGES "/sys/kernel/debug/split_huge_pages"

static void test_thp(void)
{
	size_t len = 2 * HUGE;
	char *m, *p = encrypted_huge(2, MADV_HUGEPAGE, &m);
	long k = keyid_of(p), anon;
	int status = -1, ret, fd;
	char split[80];
	pid_t pid;

	/* A write fault first: a read would map the huge zero page */
	p[0] = 1;
	p[HUGE] = 1;
	ok(all_zero(p + 1, HUGE - 1) && all_zero(p + HUGE + 1, HUGE - 1) &&
	   k > 0,
	   "THP: 4 MiB with MADV_HUGEPAGE, a byte written in each 2 MiB: the rest reads as zeros, KeyID %ld",
	   k);
	fill(p, len, 11);
	anon = smaps_field(0, p, "AnonHugePages");
	ok(anon >= 2048 && mismatch(p, len, 11) == -1,
	   "THP: written, it is backed by huge pages (AnonHugePages %ld kB) and reads back",
	   anon);

	/* A 4 KiB page made read-only splits the huge PMD */
	ret = mprotect(p + PAGE, PAGE, PROT_READ);
	ok(!ret && mismatch(p, len, 11) == -1 && keyid_of(p) == k &&
	   keyid_of(p + PAGE) == k,
	   "THP split by mprotect() of one 4 KiB page: the data reads back, KeyID %ld (AnonHugePages %ld kB)",
	   keyid_of(p + PAGE), smaps_field(0, p + 2 * PAGE, "AnonHugePages"));
	munmap(m, len + HUGE);

	/* Copy-on-write of a huge page: the child writes, the parent keeps */
	p = encrypted_huge(1, MADV_HUGEPAGE, &m);
	fill(p, HUGE, 12);
	anon = smaps_field(0, p, "AnonHugePages");
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		int bad = mismatch(p, HUGE, 12) != -1;

		fill(p + HUGE / 2, PAGE, 13);
		bad |= (mismatch(p + HUGE / 2, PAGE, 13) != -1) << 1;
		bad |= (mismatch(p, HUGE / 2, 12) != -1) << 2;
		_exit(bad);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		status = -1;
	ok(anon == 2048 && status == 0 && mismatch(p, HUGE, 12) == -1 &&
	   keyid_of(p) == k,
	   "THP copy-on-write: a child's write to a huge page (AnonHugePages %ld kB) is its own, both read their data (child status 0x%x)",
	   anon, status);
	munmap(m, 2 * HUGE);

	/* MADV_COLLAPSE of 4 KiB pages into a huge page of the KeyID */
	p = encrypted_huge(1, MADV_NOHUGEPAGE, &m);
	fill(p, HUGE, 14);
	anon = smaps_field(0, p, "AnonHugePages");
	ret = madvise(p, HUGE, MADV_HUGEPAGE) ? -1 : madvise(p, HUGE, MADV_COLLAPSE);
	ok(anon == 0 && ret == 0 &&
	   smaps_field(0, p, "AnonHugePages") == 2048 &&
	   mismatch(p, HUGE, 14) == -1 && keyid_of(p) == k,
	   "MADV_COLLAPSE: 512 encrypted 4 KiB pages (AnonHugePages %ld kB) become one huge page (%s; AnonHugePages %ld kB) with the data and KeyID %ld",
	   anon, ret ? strerror(errno) : "0", smaps_field(0, p, "AnonHugePages"),
	   keyid_of(p));

	/*
	 * A split of the huge page itself, not only of its mapping: debugfs
	 * split_huge_pages splits the folio and maps its 4 KiB pages again
	 * (remap_page()), each with the KeyID it keeps in page_ext.
	 */
	anon = smaps_field(0, p, "AnonHugePages");
	snprintf(split, sizeof(split), "%d,%#lx,%#lx", getpid(),
		 (unsigned long)p, (unsigned long)(p + HUGE));
	fd = open(SPLIT_HUGE_PAGES, O_WRONLY);
	if (fd < 0) {
		skip(strerror(errno), "THP split: %s", SPLIT_HUGE_PAGES);
	} else {
		ret = write(fd, split, strlen(split)) == (ssize_t)strlen(split);
		close(fd);
		ok(ret && anon == 2048 &&
		   smaps_field(0, p, "AnonHugePages") == 0 &&
		   mismatch(p, HUGE, 14) == -1 && keyid_of(p) == k,
		   "THP split by split_huge_pages: the huge page (AnonHugePages %ld kB) becomes 4 KiB pages (%ld kB) with the data and KeyID %ld",
		   anon, smaps_field(0, p, "AnonHugePages"), keyid_of(p));
	}
	munmap(m, 2 * HUGE);
}

/*
 * /proc/vmstat counts each page that gets a KeyID, each that gives it back
 * at free, and a flush of its cache lines at both. Pinned to one CPU: a
 * page waiting in another CPU's LRU batch would be freed later.
 */
static void test_vmstat(void)
{
	long set = vmstat("keyid_page_set"), flush = vmstat("keyid_page_flush");
	long clear;
	char *p = map_anon(N * PAGE, MAP_PRIVATE);
	cpu_set_t old;
	int pinned;

	if (!p || madvise(p, N * PAGE, MADV_NOHUGEPAGE) ||
	    encrypt_mprotect(p, N * PAGE, RW, key))
		bail_out("vmstat region: %s", strerror(errno));
	pinned = pin_cpu(&old, "vmstat");
	fill(p, N * PAGE, 16);
	set = vmstat("keyid_page_set") - set;
	flush = vmstat("keyid_page_flush") - flush;
	ok(set == N && flush == N,
	   "vmstat: %d pages written: keyid_page_set +%ld, keyid_page_flush +%ld",
	   N, set, flush);
	clear = vmstat("keyid_page_clear");
	flush = vmstat("keyid_page_flush");
	munmap(p, N * PAGE);
	clear = vmstat("keyid_page_clear") - clear;
	flush = vmstat("keyid_page_flush") - flush;
	ok(clear == N && flush == N,
	   "and unmapped: keyid_page_clear +%ld, keyid_page_flush +%ld",
	   clear, flush);
	if (pinned)
		sched_setaffinity(0, sizeof(old), &old);
}

static void test_keys(void)
{
	key_serial_t k2 = mktme_add("second", CPU_KEY);
	key_serial_t k3 = mktme_add("third", CPU_KEY);
	char *a = encrypted(2 * PAGE, MAP_PRIVATE, key);
	char *b = encrypted(2 * PAGE, MAP_PRIVATE, k2);
	char *c = encrypted(2 * PAGE, MAP_PRIVATE, k3);
	char *d = encrypted(PAGE, MAP_PRIVATE, key);
	struct timespec gc = { 0, 500000000 };

	ok(keyid_of(a) > 0 && keyid_of(a) == keyid_of(d) &&
	   keyid_of(b) > 0 && keyid_of(b) != keyid_of(a),
	   "one key, one KeyID (%ld, %ld); another key, another (%ld)",
	   keyid_of(a), keyid_of(d), keyid_of(b));

	fill(b, 2 * PAGE, 12);
	fill(c, 2 * PAGE, 13);
	keyctl_invalidate(k2);
	keyctl_revoke(k3);
	nanosleep(&gc, NULL); /* let the key garbage collector run */
	ok(mismatch(b, 2 * PAGE, 12) == -1 && keyid_of(b) > 0,
	   "key invalidated while mapped: the data still reads back");
	fill(b, 2 * PAGE, 14);
	ok(mismatch(b, 2 * PAGE, 14) == -1, "and new data written reads back");
	ok(mismatch(c, 2 * PAGE, 13) == -1 && keyid_of(c) > 0,
	   "key revoked while mapped: the data still reads back");
	fill(c, 2 * PAGE, 15);
	ok(mismatch(c, 2 * PAGE, 15) == -1, "and new data written reads back");
	munmap(a, 2 * PAGE);
	munmap(b, 2 * PAGE);
	munmap(c, 2 * PAGE);
	munmap(d, PAGE);
	keyctl_invalidate(k3);
}

int main(void)
{
	int local = 0, vmas, bad;

	plan(1 + 8 + 2 + 4 + 5 + 6 + 2 + 5 + 2);
	require_mktme();
	key = mktme_add("memory", CPU_KEY);
	if (key == -1)
		bail_out("add_key of a cpu key: %s", strerror(errno));

	test_fill_fork();
	test_shared();
	test_mremap();
	test_madvise();
	test_thp();
	test_vmstat();
	test_keys();

	bad = smaps_vmas_without_keyid(&vmas);
	ok(vmas > 0 && bad == 0,
	   "smaps: each of %d VMAs has one \"KeyID: <n>\" line (%d do not)",
	   vmas, bad);
	ok(keyid_of(&local) == 0, "plain memory (the stack) has KeyID 0");
	keyctl_invalidate(key);
	return done();
}
