// SPDX-License-Identifier: GPL-2.0
/*
 * encrypt_anon.so: an LD_PRELOAD shim that encrypts every private anonymous
 * mapping a program makes with mmap(), so that a test written for plain
 * memory (the kernel's tools/testing/selftests/vm, tests/vm/selftests.sh)
 * runs on encrypted memory unchanged.
 *
 *   MKTME_SHIM_KEY=SERIAL LD_PRELOAD=./encrypt_anon.so PROGRAM...
 *
 * SERIAL is an mktme key the program can use (e.g. one in the session
 * keyring, which children inherit). Each mmap(MAP_PRIVATE | MAP_ANONYMOUS),
 * or MAP_PRIVATE of /dev/zero, without MAP_HUGETLB, that succeeds is
 * followed by encrypt_mprotect(addr, len, prot, SERIAL) with the same prot:
 * the mapping is the same, but its pages carry the key's KeyID. If that
 * call fails, the mapping is unmapped and mmap() fails with its errno, so
 * that a refusal is seen by the test instead of a plain mapping passing for
 * an encrypted one. Memory glibc maps for itself (malloc arenas, thread
 * stacks) does not go through the mmap symbol and stays plain.
 *
 * With MKTME_SHIM_LOG=PATH, each call appends a line to PATH,
 * "encrypted PID LEN" or "refused PID LEN ERRNO", which is how the runner
 * shows that the shim did something.
 */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define SYS_encrypt_mprotect 335 /* x86-64 */

static long shim_key;

/* The unchanged system call: glibc's mmap() is what this file replaces. */
static void *raw_mmap(void *addr, size_t len, int prot, int flags, int fd,
		      off_t off)
{
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

static void shim_say(const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n > 0)
		(void)!write(2, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

__attribute__((constructor)) static void shim_init(void)
{
	const char *s = getenv("MKTME_SHIM_KEY");
	char *end;

	if (!s || !*s) {
		shim_say("encrypt_anon: MKTME_SHIM_KEY is not set\n");
		_exit(125);
	}
	errno = 0;
	shim_key = strtol(s, &end, 10);
	if (errno || *end || shim_key <= 0) {
		shim_say("encrypt_anon: MKTME_SHIM_KEY=%s is not a key serial\n", s);
		_exit(125);
	}
}

/*
 * One line per call to MKTME_SHIM_LOG, written at once: processes that end
 * with _exit() (kselftest_harness's children) run no destructor.
 */
static void shim_log(const char *fmt, ...)
{
	const char *path = getenv("MKTME_SHIM_LOG");
	char line[160];
	va_list ap;
	int fd, n;

	if (!path || !*path)
		return;
	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (n >= (int)sizeof(line))
		n = sizeof(line) - 1;
	if (n > 0)
		(void)!write(fd, line, n);
	close(fd);
}

/* A private mapping of /dev/zero is anonymous memory too (gup_test). */
static int dev_zero(int fd)
{
	struct stat st;

	return fd >= 0 && !fstat(fd, &st) && S_ISCHR(st.st_mode) &&
	       st.st_rdev == makedev(1, 5);
}

static int encryptable(int flags, int fd)
{
	return (flags & MAP_TYPE) == MAP_PRIVATE && !(flags & MAP_HUGETLB) &&
	       ((flags & MAP_ANONYMOUS) || dev_zero(fd));
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	void *p = raw_mmap(addr, len, prot, flags, fd, off);
	int err;

	if (p == MAP_FAILED || !encryptable(flags, fd))
		return p;
	if (syscall(SYS_encrypt_mprotect, p, len, prot, shim_key) == 0) {
		shim_log("encrypted %d %zu\n", (int)getpid(), len);
		return p;
	}
	err = errno;
	shim_log("refused %d %zu %d\n", (int)getpid(), len, err);
	shim_say("encrypt_anon: encrypt_mprotect(%p, %zu, %#x, %ld): %s\n", p,
		 len, prot, shim_key, strerror(err));
	/* MAP_FIXED replaced what was there: that cannot be undone. */
	munmap(p, len);
	errno = err;
	return MAP_FAILED;
}

/* The same symbol under its LFS name (one function on 64-bit glibc). */
void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
	__attribute__((alias("mmap")));
