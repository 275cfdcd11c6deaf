/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the MKTME API tests (mktme.c): the system call, keys,
 * /proc/PID/smaps and /sys/kernel/mm/mktme, memory patterns, children.
 */
#ifndef MKTME_H
#define MKTME_H

#include <keyutils.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tap.h"

#define SYS_encrypt_mprotect 335 /* x86-64 */
#define PAGE 4096UL
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/*
 * The encryption algorithms of the mktme key type, in the order that
 * /sys/kernel/mm/mktme/algorithms lists the activated ones (issue 18):
 * aes-xts-128 (key= and tweak= of 32 hexadecimal digits), the seeds' only
 * one, and aes-xts-256 (64 digits), the only one on client parts.
 */
enum { ALG_128, ALG_256, ALG_NR };
#define ALG_BIT(a) (1U << (a))
extern const char *const alg_names[ALG_NR];	/* "aes-xts-128", ... */
extern const int alg_digits[ALG_NR];		/* 32, 64 */
#ifndef MKTME_ALGORITHMS	/* another file: checks of this code on a host */
#define MKTME_ALGORITHMS "/sys/kernel/mm/mktme/algorithms"
#endif

/*
 * The algorithms the kernel activated, one ALG_BIT() each: those that
 * MKTME_ALGORITHMS names (other names in it are left out); without that
 * file (kernels before issue 18), ALG_BIT(ALG_128). Read once; errno is
 * left alone. Every C test asks here, not the file; the shell tests ask
 * tests/guest/mktme-algorithms.bash, which follows the same rule.
 */
unsigned int mktme_algorithms(void);
/* What mktme_algorithms() read, for diagnostics ("aes-xts-128 (no ...)"). */
const char *mktme_algorithms_text(void);
static inline int alg_active(int alg)
{
	return !!(mktme_algorithms() & ALG_BIT(alg));
}
/*
 * The algorithm of CPU_KEY and USER_KEY: aes-xts-128 when activated, so
 * that they are the payloads of before issue 18 byte for byte, else
 * aes-xts-256.
 */
int mktme_algorithm(void);

/*
 * Hexadecimal digits for key= and tweak= of n digits (n <= 64): the first
 * n of HEX64 and HEX64_B. HEX32 and HEX32_B are those of aes-xts-128.
 */
#define HEX32 "00112233445566778899aabbccddeeff"
#define HEX32_B "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
#define HEX64 HEX32 "ffeeddccbbaa99887766554433221100"
#define HEX64_B HEX32_B "f0e1d2c3b4a5968778695a4b3c2d1e0f"

/*
 * Payloads of mktme_algorithm(), static strings: "type=cpu
 * algorithm=ALG" and "type=user algorithm=ALG key=KEY tweak=TWEAK" with
 * the first alg_digits[] digits of HEX64 and HEX64_B.
 */
const char *mktme_cpu_key(void);
const char *mktme_user_key(void);
#define CPU_KEY mktme_cpu_key()
#define USER_KEY mktme_user_key()

long encrypt_mprotect(void *addr, size_t len, int prot, key_serial_t key);

/* add_key("mktme", desc, payload) into the process keyring. */
key_serial_t mktme_add(const char *desc, const char *payload);

/* The number in a file such as a sysfs attribute, or -1. */
long read_long(const char *path);
/*
 * Run on the current CPU only: 1 if so, with the old affinity in *old
 * (restore it with sched_setaffinity()); 0 with a diagnostic naming what.
 */
int pin_cpu(cpu_set_t *old, const char *what);
/* A counter of /proc/vmstat, or -1 when the kernel has none of that name. */
long vmstat(const char *name);
/* A value of /sys/kernel/mm/mktme/NAME, or -1. */
long mktme_sysfs(const char *name);
/*
 * The first line of a file such as a sysfs attribute into buf (with its
 * newline; "" when the file cannot be read): buf.
 */
char *read_line(const char *path, char *buf, size_t size);
/* Write text to a sysfs file in one write(2): 0, or its errno. */
int sysfs_write(const char *path, const char *text);
/*
 * The kernel's direct map in kB, every KeyID's copy counted: the sum of
 * the DirectMap lines of /proc/meminfo; -1 if unreadable.
 */
long direct_map_kib(void);
/* A number in /sys/devices/system/cpu/cpuCPU/FILE, or -1. */
long cpu_value(int cpu, const char *file);
/* Write "0" or "1" to cpuCPU/online with write(2): 0 or its errno. */
int cpu_set_online(int cpu, int on);
/*
 * Print "PROG: pause NAME" for the host harness (tests/vm/hosted.bash) and
 * wait for its line on stdin, at most 120 s.
 */
void pause_for_host(const char *prog, const char *name);
/* Poll keyids_in_use for up to timeout_ms until it is want; the last value. */
long wait_keyids_in_use(long want, int timeout_ms);
/* keyids_in_use once it has not changed for a second (at most 10 s). */
long settled_keyids_in_use(void);

/*
 * /sys/kernel/debug/mktme/pte_check (CONFIG_X86_INTEL_MKTME_PTE_CHECK):
 * how many user page table entries the kernel checked as it wrote them,
 * and how many mapped their page through another KeyID than the page's.
 */
#define PTE_CHECK_DEBUGFS "/sys/kernel/debug/mktme/pte_check"

struct pte_check {
	unsigned long checked;
	long mismatched;
};

/*
 * Read it into *c: 0, or -1 (errno set) when it cannot be read, with *c
 * then { 0, -1 }, which no later reading matches.
 */
int read_pte_check(struct pte_check *c);

/*
 * One TAP point: since *before, the kernel checked entries and found no
 * mismatch. what names the work in between. Inline: TAP's counters are
 * the calling program's (tap.h).
 */
static inline void ok_pte_check(const struct pte_check *before,
				const char *what)
{
	struct pte_check now;

	if (read_pte_check(&now)) {
		ok(0, "PTE check: %s: %s: %s", what, PTE_CHECK_DEBUGFS,
		   strerror(errno));
		return;
	}
	ok(now.checked > before->checked &&
	   now.mismatched == before->mismatched,
	   "PTE check: %s: %lu user page table entries checked as written, %ld mapped their page through another KeyID",
	   what, now.checked - before->checked,
	   now.mismatched - before->mismatched);
}

/* /sys/kernel/debug/mktme/keyids: who holds each KeyID in use. */
#define KEYIDS_DEBUGFS "/sys/kernel/debug/mktme/keyids"

struct keyid_holders {
	long keyid, refs, key, vmas, pages, pages_found, serial;
	char state[16], key_state[16];
};

/*
 * Its lines into h[] (at most max); their number, or -1 when it cannot be
 * read. With show, each line is printed as a diagnostic.
 */
int read_keyid_holders(struct keyid_holders *h, int max, int show);

/*
 * The value of the "FIELD:" line of the VMA holding addr in
 * /proc/PID/smaps (pid 0: self): -1 if the VMA has no such line, -2 if no
 * VMA holds addr.
 */
long smaps_field(pid_t pid, const void *addr, const char *field);
#define keyid_of(addr) smaps_field(0, (addr), "KeyID")
/* VMAs of /proc/self/smaps without exactly one "KeyID: <decimal>" line. */
int smaps_vmas_without_keyid(int *nr_vmas);
/* PROT_* bits of the VMA holding addr from /proc/self/maps, or -1. */
int vma_prot(const void *addr);

/*
 * /proc/self/pagemap (PFNs need root): the entries of n pages from p into
 * e; 0, or -1 if it cannot be read. PM_PFN is the PFN of a present page
 * (its KeyID-0 address >> 12), or swap type | offset << 5 of a swapped one.
 */
#define PM_PRESENT (1ULL << 63)
#define PM_SWAP (1ULL << 62)
#define PM_PFN(e) ((e) & ((1ULL << 55) - 1))
int pagemap(const void *p, size_t n, uint64_t *e);
/* The physical (KeyID 0) address of the page at p, 0 if it is not present. */
uint64_t phys_addr(const void *p);
/* move_pages(2) of the calling process, without libnuma. */
long sys_move_pages(unsigned long n, void **pages, const int *nodes,
		    int *status, int flags);
/* How many of the n pages from p are on NUMA node node; -1 on error. */
int pages_on_node(void *p, int n, int node);

void sleep_ms(int ms);

/*
 * cgroup v2 and its misc controller, where KeyIDs are the "mktme"
 * resource. Paths are relative to CGROUP_ROOT; "" is the root.
 */
#define CGROUP_ROOT "/sys/fs/cgroup"

/*
 * Make cgroup path, with the misc controller enabled in its parent, which
 * then can hold no process: 0, or an errno.
 */
int cg_create(const char *path);
/* Write text to the file of cgroup path: 0, or its errno. */
int cg_write(const char *path, const char *file, const char *text);
/*
 * In the file of cgroup path (misc.current, misc.max, misc.events,
 * misc.capacity), the value on the line of name ("mktme", "mktme.max"):
 * "max" is LONG_MAX; -1 if the file or the line is missing.
 */
long cg_misc(const char *path, const char *file, const char *name);
/* Poll misc.current of path for up to timeout_ms until it is want. */
long cg_wait_current(const char *path, long want, int timeout_ms);
/* rmdir cgroup path: 0, or an errno. */
int cg_remove(const char *path);
/* Move this process into cgroup path ("" is the root): 0, or an errno. */
int cg_enter(const char *path);
/*
 * The cgroup this process is in, as cg_enter() takes it, into buf: 0, or
 * -1 when /proc/self/cgroup has no cgroup v2 line.
 */
int cg_current(char *buf, size_t size);

/* mmap of anonymous memory (flags MAP_PRIVATE or MAP_SHARED), NULL on failure. */
void *map_anon(size_t len, int flags);
void fill(void *p, size_t len, unsigned int seed);
/* Offset of the first byte that differs from fill()'s pattern, or -1. */
long mismatch(const void *p, size_t len, unsigned int seed);
int all_zero(const void *p, size_t len);

/*
 * Run fn(arg) in a child process; its return value is the child's exit
 * status. Returns that status, or 128 + signal if the child was killed.
 */
int in_child(int (*fn)(void *), void *arg);

/* NULL if MKTME is there (sysfs and the key type), else why not. */
const char *mktme_missing(void);

/*
 * First test point of every program: no MKTME is a failure, not a skip.
 * Then it waits for the KeyIDs of keys a program before it invalidated to
 * come back (the key garbage collector releases them later): with 7
 * KeyIDs, a pool still draining would give ENOKEY.
 */
static inline void require_mktme(void)
{
	const char *why = mktme_missing();

	if (!ok(!why, "MKTME: /sys/kernel/mm/mktme and the mktme key type"))
		bail_out("%s", why);
	diag("nr_keyids %ld, keyids_in_use %ld, algorithms %s",
	     mktme_sysfs("nr_keyids"), settled_keyids_in_use(),
	     mktme_algorithms_text());
}

#endif
