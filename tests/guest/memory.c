// SPDX-License-Identifier: GPL-2.0
/*
 * Encrypted anonymous memory behaves as memory: zero-filled, reads back,
 * fork/COW, shared anonymous memory refused, mremap, MADV_DONTNEED/MADV_FREE,
 * THP, the vmstat counters of KeyID changes, and keys invalidated or revoked
 * while it is mapped.
 */
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

static void test_thp(void)
{
	size_t huge = 2UL << 20, len = 2 * huge;
	char *m = map_anon(len + huge, MAP_PRIVATE);
	char *p = (char *)(((uintptr_t)m + huge - 1) & ~(huge - 1));

	if (!m || madvise(p, len, MADV_HUGEPAGE) ||
	    encrypt_mprotect(p, len, RW, key))
		bail_out("THP region: %s", strerror(errno));
	ok(all_zero(p, len) && keyid_of(p) > 0,
	   "4 MiB with MADV_HUGEPAGE read as zeros (AnonHugePages %ld kB)",
	   smaps_field(0, p, "AnonHugePages"));
	fill(p, len, 11);
	ok(mismatch(p, len, 11) == -1, "and read back what is written");
	munmap(m, len + huge);
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

	plan(1 + 8 + 2 + 4 + 5 + 2 + 2 + 5 + 2);
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
