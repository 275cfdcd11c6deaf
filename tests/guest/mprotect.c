// SPDX-License-Identifier: GPL-2.0
/*
 * encrypt_mprotect(): its errors (with nothing changed by a refused call),
 * the protection it sets, the pages it discards, and how it stacks with
 * mprotect() and pkey_mprotect(), and a UFFDIO_COPY that it overtakes.
 */
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mktme.h"

#define RW (PROT_READ | PROT_WRITE)

static key_serial_t key;

static int write_byte(void *p)
{
	*(volatile uint8_t *)p = 1;
	return 0;
}

struct pkey_page {
	int pkey;
	uint8_t *p;
};

static int read_with_pkey_disabled(void *arg)
{
	struct pkey_page *pp = arg;

	pkey_set(pp->pkey, PKEY_DISABLE_ACCESS);
	return *(volatile uint8_t *)pp->p == 12 ? 0 : 1;
}

/* A serial that names no key. */
static key_serial_t no_such_key(void)
{
	key_serial_t s;

	for (s = 0x7ffffff0; s > 0; s--)
		if (keyctl_describe(s, NULL, 0) == -1 && errno == ENOKEY)
			return s;
	return 0;
}

static void test_alignment(void)
{
	char *p = map_anon(2 * PAGE, MAP_PRIVATE);

	is_errno(encrypt_mprotect(p, PAGE + 1, RW, key), EINVAL,
		 "len of a page and a byte: EINVAL");
	is_errno(encrypt_mprotect(p, 100, RW, key), EINVAL,
		 "len of 100 bytes: EINVAL");
	is_errno(encrypt_mprotect(p + 1, PAGE, RW, key), EINVAL,
		 "addr not page aligned: EINVAL");
	is_errno(encrypt_mprotect(p, PAGE, 0x80, key), EINVAL,
		 "unknown prot bit: EINVAL");
	munmap(p, 2 * PAGE);
}

static void test_not_anonymous(void)
{
	char path[] = "/var/tmp/mktme-test.XXXXXX";
	int fd = mkstemp(path);
	char *a = map_anon(2 * PAGE, MAP_PRIVATE), *f;

	unlink(path);
	if (fd < 0 || ftruncate(fd, 2 * PAGE))
		diag("temporary file: %s", strerror(errno));
	f = mmap(NULL, PAGE, RW, MAP_PRIVATE, fd, 0);
	is_errno(encrypt_mprotect(f, PAGE, RW, key), EINVAL,
		 "private file mapping: EINVAL");
	munmap(f, PAGE);

	/* Anonymous page, then a file page: the range is refused whole. */
	fill(a, PAGE, 7);
	f = mmap(a + PAGE, PAGE, RW, MAP_PRIVATE | MAP_FIXED, fd, 0);
	if (f == MAP_FAILED)
		diag("mmap of the file over the second page: %s", strerror(errno));
	is_errno(encrypt_mprotect(a, 2 * PAGE, PROT_READ, key), EINVAL,
		 "anonymous page + file page: EINVAL");
	ok(mismatch(a, PAGE, 7) == -1, "the anonymous page keeps its data");
	ok(vma_prot(a) == RW && keyid_of(a) == 0,
	   "and its protection (rw) and KeyID 0 (got prot %d, KeyID %ld)",
	   vma_prot(a), keyid_of(a));
	munmap(a, 2 * PAGE);
	close(fd);

	/* A hole in the range. */
	a = map_anon(3 * PAGE, MAP_PRIVATE);
	fill(a, PAGE, 8);
	fill(a + 2 * PAGE, PAGE, 9);
	munmap(a + PAGE, PAGE);
	is_errno(encrypt_mprotect(a, 3 * PAGE, PROT_READ, key), ENOMEM,
		 "a hole in the range: ENOMEM");
	ok(mismatch(a, PAGE, 8) == -1 && mismatch(a + 2 * PAGE, PAGE, 9) == -1 &&
	   vma_prot(a) == RW && vma_prot(a + 2 * PAGE) == RW &&
	   keyid_of(a) == 0 && keyid_of(a + 2 * PAGE) == 0,
	   "the pages around the hole keep data, protection and KeyID 0");
	munmap(a, 3 * PAGE);
}

static void test_bad_keys(void)
{
	char *p = map_anon(PAGE, MAP_PRIVATE);
	key_serial_t user = add_key("user", "not-mktme", "x", 1,
				    KEY_SPEC_PROCESS_KEYRING);
	key_serial_t ring = keyctl_get_keyring_ID(KEY_SPEC_PROCESS_KEYRING, 1);
	key_serial_t gone = mktme_add("gone", CPU_KEY);
	key_serial_t noview = mktme_add("noview", CPU_KEY);

	keyctl_invalidate(gone);
	is_errno(encrypt_mprotect(p, PAGE, RW, no_such_key()), ENOKEY,
		 "serial of no key: ENOKEY");
	is_errno(encrypt_mprotect(p, PAGE, RW, user), ENOKEY,
		 "a user key: ENOKEY");
	is_errno(encrypt_mprotect(p, PAGE, RW, ring), ENOKEY,
		 "a keyring: ENOKEY");
	is_errno(encrypt_mprotect(p, PAGE, RW, gone), ENOKEY,
		 "an invalidated mktme key: ENOKEY");

	/* Every permission but view, for the possessor only. */
	fill(p, PAGE, 10);
	keyctl_setperm(noview, KEY_POS_ALL & ~KEY_POS_VIEW);
	is_errno(encrypt_mprotect(p, PAGE, PROT_READ, noview), EACCES,
		 "no view permission on the key: EACCES");
	ok(mismatch(p, PAGE, 10) == -1 && keyid_of(p) == 0 && vma_prot(p) == RW,
	   "the refused call left data, KeyID 0 and protection alone");
	keyctl_setperm(noview, KEY_POS_ALL);
	ok(encrypt_mprotect(p, PAGE, RW, noview) == 0 && keyid_of(p) > 0,
	   "with view permission back: success, KeyID %ld", keyid_of(p));
	munmap(p, PAGE);
	keyctl_invalidate(user);
	keyctl_invalidate(noview);
}

static void test_split_discard(void)
{
	char *r = map_anon(3 * PAGE, MAP_PRIVATE);
	long k;

	fill(r, PAGE, 1);
	fill(r + PAGE, PAGE, 2);
	fill(r + 2 * PAGE, PAGE, 3);
	ok(encrypt_mprotect(r + PAGE, PAGE, RW, key) == 0,
	   "encrypt_mprotect of the middle page of three");
	k = keyid_of(r + PAGE);
	ok(keyid_of(r) == 0 && k > 0 && keyid_of(r + 2 * PAGE) == 0,
	   "its VMA is split: KeyIDs 0, %ld, 0", k);
	ok(all_zero(r + PAGE, PAGE), "the data it had is discarded: zeros");
	ok(mismatch(r, PAGE, 1) == -1 && mismatch(r + 2 * PAGE, PAGE, 3) == -1,
	   "the pages on either side keep their data");
	ok(mprotect(r, 3 * PAGE, PROT_READ) == 0 && keyid_of(r) == 0 &&
	   k > 0 && keyid_of(r + PAGE) == k && keyid_of(r + 2 * PAGE) == 0 &&
	   vma_prot(r + PAGE) == PROT_READ,
	   "mprotect over all three keeps each KeyID (no merge across KeyIDs)");
	munmap(r, 3 * PAGE);
}

static void test_prot(void)
{
	char *p = map_anon(PAGE, MAP_PRIVATE);
	key_serial_t other = mktme_add("other", CPU_KEY);
	long k;

	ok(encrypt_mprotect(p, PAGE, PROT_READ, key) == 0 &&
	   vma_prot(p) == PROT_READ && keyid_of(p) > 0,
	   "encrypt_mprotect(PROT_READ): read-only, KeyID %ld", keyid_of(p));
	ok(in_child(write_byte, p) == 128 + SIGSEGV, "a write to it: SIGSEGV");
	ok(all_zero(p, PAGE), "it reads as zeros");
	k = keyid_of(p);
	ok(mprotect(p, PAGE, RW) == 0 && k > 0 && keyid_of(p) == k &&
	   vma_prot(p) == RW,
	   "a later mprotect(rw) keeps KeyID %ld", k);
	fill(p, PAGE, 11);
	ok(encrypt_mprotect(p, PAGE, RW, other) == 0 && all_zero(p, PAGE),
	   "encrypt_mprotect with another key discards the data: zeros");
	ok(keyid_of(p) > 0 && keyid_of(p) != k,
	   "and gives the other key's KeyID (%ld, was %ld)", keyid_of(p), k);
	munmap(p, PAGE);
	keyctl_invalidate(other);
}

static void test_pkey(void)
{
	int pkey = pkey_alloc(0, 0);
	char *p = map_anon(PAGE, MAP_PRIVATE);
	struct pkey_page pp = { pkey, (uint8_t *)p };
	long k;

	if (pkey < 0 && (errno == ENOSPC || errno == EINVAL || errno == ENOSYS)) {
		for (k = 0; k < 4; k++)
			skip("no protection keys", "pkey with a KeyID");
		munmap(p, PAGE);
		return;
	}
	ok(pkey_mprotect(p, PAGE, RW, pkey) == 0 &&
	   encrypt_mprotect(p, PAGE, RW, key) == 0,
	   "pkey_mprotect(pkey %d), then encrypt_mprotect", pkey);
	fill(p, PAGE, 12);
	k = keyid_of(p);
	ok(smaps_field(0, p, "ProtectionKey") == pkey && k > 0,
	   "smaps: ProtectionKey %ld, KeyID %ld",
	   smaps_field(0, p, "ProtectionKey"), k);
	ok(in_child(read_with_pkey_disabled, &pp) == 128 + SIGSEGV,
	   "the pkey still guards it: a read with access disabled faults");
	ok(pkey_mprotect(p, PAGE, RW, 0) == 0 && k > 0 && keyid_of(p) == k &&
	   smaps_field(0, p, "ProtectionKey") == 0 && mismatch(p, PAGE, 12) == -1,
	   "pkey_mprotect(pkey 0) afterwards keeps the KeyID and the data");
	munmap(p, PAGE);
	pkey_free(pkey);
}

/* The number of lines of /proc/self/maps: the VMAs, and [vsyscall]. */
static int maps_lines(void)
{
	char line[512];
	int n = 0;
	FILE *f = fopen("/proc/self/maps", "r");

	while (f && fgets(line, sizeof(line), f))
		n++;
	if (f)
		fclose(f);
	return n;
}

/* VmData of /proc/self/status, in kB; 0 if not found. */
static unsigned long vm_data_kb(void)
{
	char line[256];
	unsigned long kb = 0;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		sscanf(line, "VmData: %lu kB", &kb);
	if (f)
		fclose(f);
	return kb;
}

static int write_file(const char *path, long value)
{
	FILE *f = fopen(path, "w");
	int ret;

	if (!f)
		return -1;
	ret = fprintf(f, "%ld\n", value) < 0;
	return fclose(f) || ret ? -1 : 0;
}

/*
 * A failing encrypt_mprotect() changes nothing: not a byte of the memory,
 * not a KeyID. Old kernels discarded the range's pages first, then failed
 * on a check that comes later (a VMA split past vm.max_map_count, a range
 * made writable past RLIMIT_DATA).
 */
static void test_failure_keeps_data(void)
{
	long max_map = read_long("/proc/sys/vm/max_map_count");
	char *p = map_anon(3 * PAGE, MAP_PRIVATE);
	struct rlimit old, low;
	long rc;

	if (p)
		fill(p, 3 * PAGE, 31);
	/* Two splits needed for the middle page, at most one allowed. */
	ok(p && max_map > 0 && !write_file("/proc/sys/vm/max_map_count",
					    maps_lines()),
	   "vm.max_map_count lowered to the process's mappings (was %ld)",
	   max_map);
	rc = p ? encrypt_mprotect(p + PAGE, PAGE, PROT_READ | PROT_WRITE, key) : 0;
	is_errno(rc, ENOMEM, "encrypt_mprotect that must split past max_map_count: ENOMEM");
	write_file("/proc/sys/vm/max_map_count", max_map);
	ok(p && mismatch(p, 3 * PAGE, 31) == -1 && keyid_of(p + PAGE) == 0,
	   "... every byte and the KeyID (0) as they were");
	if (p)
		munmap(p, 3 * PAGE);

	/* A writable page with data, then a read-only page: two VMAs. */
	p = map_anon(2 * PAGE, MAP_PRIVATE);
	if (p) {
		fill(p, PAGE, 32);
		mprotect(p + PAGE, PAGE, PROT_READ);
	}
	getrlimit(RLIMIT_DATA, &old);
	low = old;
	low.rlim_cur = vm_data_kb() * 1024;
	ok(p && low.rlim_cur && !setrlimit(RLIMIT_DATA, &low),
	   "RLIMIT_DATA lowered to the data the process has (%lu kB)",
	   (unsigned long)low.rlim_cur / 1024);
	rc = p ? encrypt_mprotect(p, 2 * PAGE, PROT_READ | PROT_WRITE, key) : 0;
	is_errno(rc, ENOMEM, "encrypt_mprotect making the read-only page data past RLIMIT_DATA: ENOMEM");
	setrlimit(RLIMIT_DATA, &old);
	ok(p && mismatch(p, PAGE, 32) == -1 && keyid_of(p) == 0 &&
	   keyid_of(p + PAGE) == 0 && vma_prot(p + PAGE) == PROT_READ,
	   "... the data of the writable page, both KeyIDs (0) and the read-only page as they were");
	if (p)
		munmap(p, 2 * PAGE);
}

/* A userfaultfd for missing pages of [p, p + len), or -1. */
static int uffd_register(void *p, size_t len)
{
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg = {
		.range = { .start = (unsigned long)p, .len = len },
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};
	int fd = syscall(SYS_userfaultfd, O_CLOEXEC);

	if (fd < 0)
		return -1;
	if (ioctl(fd, UFFDIO_API, &api) || ioctl(fd, UFFDIO_REGISTER, &reg)) {
		close(fd);
		return -1;
	}
	return fd;
}

struct uffd_copy {
	int uffd;
	char *dst, *src;
	long ret;
	int err;
};

static void *uffd_copy_thread(void *arg)
{
	struct uffd_copy *c = arg;
	struct uffdio_copy copy = {
		.dst = (unsigned long)c->dst,
		.src = (unsigned long)c->src,
		.len = PAGE,
	};

	c->ret = ioctl(c->uffd, UFFDIO_COPY, &copy);
	c->err = errno;
	return NULL;
}

/*
 * UFFDIO_COPY from a source page that is not present fills its page after
 * dropping mmap_lock, then installs it. A second userfaultfd holds that
 * fill on the source's fault while the destination is encrypt_mprotect()ed:
 * the page installed must carry the new KeyID and read back as the source.
 */
static void test_uffd_copy_overtaken(void)
{
	char *dst = map_anon(PAGE, MAP_PRIVATE);
	char *src = map_anon(PAGE, MAP_PRIVATE);
	char *pattern = map_anon(PAGE, MAP_PRIVATE);
	struct uffd_copy c = { .dst = dst, .src = src, .ret = -1 };
	struct pollfd pfd = { .events = POLLIN };
	struct uffd_msg msg;
	pthread_t thread;
	int src_uffd;
	long k;

	c.uffd = uffd_register(dst, PAGE);
	src_uffd = uffd_register(src, PAGE);
	if (c.uffd < 0 || src_uffd < 0) {
		for (int i = 0; i < 4; i++)
			skip("no userfaultfd (CONFIG_USERFAULTFD)",
			     "UFFDIO_COPY overtaken by encrypt_mprotect");
		goto out;
	}
	fill(pattern, PAGE, 41);
	pthread_create(&thread, NULL, uffd_copy_thread, &c);
	pfd.fd = src_uffd;
	ok(poll(&pfd, 1, 10000) == 1 &&
	   read(src_uffd, &msg, sizeof(msg)) == sizeof(msg) &&
	   msg.event == UFFD_EVENT_PAGEFAULT &&
	   (msg.arg.pagefault.address & ~(PAGE - 1)) == (unsigned long)src,
	   "UFFDIO_COPY into a plain page waits on its source's fault");
	ok(encrypt_mprotect(dst, PAGE, RW, key) == 0,
	   "meanwhile encrypt_mprotect of its destination");
	{
		struct uffdio_copy fill_src = {
			.dst = (unsigned long)src,
			.src = (unsigned long)pattern,
			.len = PAGE,
		};

		if (ioctl(src_uffd, UFFDIO_COPY, &fill_src))
			diag("UFFDIO_COPY into the source: %s", strerror(errno));
	}
	pthread_join(thread, NULL);
	ok(c.ret == 0, "the UFFDIO_COPY completes: %ld (%s)", c.ret,
	   c.ret ? strerror(c.err) : "ok");
	k = keyid_of(dst);
	ok(k > 0 && mismatch(dst, PAGE, 41) == -1,
	   "the destination reads back as the source, with the key's KeyID (%ld)", k);
out:
	if (c.uffd >= 0)
		close(c.uffd);
	if (src_uffd >= 0)
		close(src_uffd);
	munmap(dst, PAGE);
	munmap(src, PAGE);
	munmap(pattern, PAGE);
}

int main(void)
{
	plan(1 + 4 + 6 + 7 + 5 + 6 + 4 + 6 + 4);
	require_mktme();
	key = mktme_add("mprotect", CPU_KEY);
	if (key == -1)
		bail_out("add_key of a cpu key: %s", strerror(errno));

	test_alignment();
	test_not_anonymous();
	test_bad_keys();
	test_split_discard();
	test_prot();
	test_pkey();
	test_failure_keeps_data();
	test_uffd_copy_overtaken();
	keyctl_invalidate(key);
	return done();
}
