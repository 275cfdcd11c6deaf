// SPDX-License-Identifier: GPL-2.0
/*
 * Side-by-side costs of MKTME, measured in one run (tests/bench/run):
 *   fault    first touch of fresh anonymous pages, encrypted vs plain, with
 *            THP off on both sides and on both sides (MADV_HUGEPAGE)
 *   protect  encrypt_mprotect() vs mprotect() of the same unpopulated range
 *   memory   memory-bound work: a write pass and a read pass over 8 MiB,
 *            encrypted vs plain, warm (populated, in the platform's
 *            caches) and cold (a fresh mapping each round: page faults,
 *            zeroing and the first fills included); no THP on either side
 *   job      an allocation-heavy job: processes that fork, write their
 *            copy of the parent's memory (copy-on-write), allocate, fill
 *            and free scratch memory, and exit; all encrypted vs all plain
 *   addkey   add_key() of a cpu key (programs every online package) +
 *            invalidate, with 1, 2 and 4 packages online and as many CPUs
 *            online each time: CPUs go offline for a round (needs root)
 * Prints "name: A us, B us, ratio R" lines; the rounds alternate between
 * the sides so that drift in the machine's speed hits them alike. Fault
 * and job also print the page flushes per encrypted page that
 * /proc/vmstat's keyid_page_* counters show over their encrypted rounds.
 *
 *   bench fault|protect|memory|job|addkey...   the measurements named, in that order
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mktme.h"

#define ROUNDS 7

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return v[n / 2];
}

static void report(const char *name, double *a, double *b)
{
	double ma = median(a, ROUNDS), mb = median(b, ROUNDS);

	printf("%s: %.0f us, %.0f us, ratio %.2f\n", name, ma, mb, ma / mb);
}

/*
 * What the kernel flushed for KeyID changes (/proc/vmstat): under TCG a
 * CLFLUSH costs nothing, so time ratios hide what dominates on silicon;
 * the count does not.
 */
struct flushes {
	long pages;	/* keyid_page_set: pages given a KeyID */
	long flushes;	/* keyid_page_flush: pages flushed */
};

static struct flushes flushes_now(void)
{
	return (struct flushes){ vmstat("keyid_page_set"),
				 vmstat("keyid_page_flush") };
}

static void report_flushes(const char *name, struct flushes before)
{
	struct flushes now = flushes_now();
	long pages = now.pages - before.pages;
	long flushes = now.flushes - before.flushes;

	if (before.pages < 0 || before.flushes < 0) {
		printf("%s: no keyid_page_* counters in /proc/vmstat\n", name);
		return;
	}
	printf("%s: %.2f page flushes per encrypted page (%ld flushes, %ld pages given a KeyID)\n",
	       name, pages ? (double)flushes / pages : 0.0, flushes, pages);
}

/* 8 MiB: well inside the model's default 16 MiB cache of KeyID pages */
#define PASS_LEN (8UL << 20)

/* Fresh anonymous memory without THP, encrypted with key or plain. */
static uint64_t *pass_memory(key_serial_t key)
{
	uint64_t *p = map_anon(PASS_LEN, MAP_PRIVATE);

	if (!p || madvise(p, PASS_LEN, MADV_NOHUGEPAGE) ||
	    (key && encrypt_mprotect(p, PASS_LEN, PROT_READ | PROT_WRITE, key)))
		bail_out("pass memory: %s", strerror(errno));
	return p;
}

/* A write pass and a read pass over every 8-byte word of p. */
static double pass_round(uint64_t *p)
{
	volatile uint64_t *v = p;
	size_t i, n = PASS_LEN / sizeof(*p);
	uint64_t sum = 0;
	double t = now_us();

	for (i = 0; i < n; i++)
		v[i] = i;
	for (i = 0; i < n; i++)
		sum += v[i];
	t = now_us() - t;
	if (sum != (uint64_t)n * (n - 1) / 2)
		bail_out("pass: read back a wrong sum");
	return t;
}

/* The same on a fresh mapping: faults, zeroing and first fills too. */
static double cold_pass_round(key_serial_t key)
{
	uint64_t *p = pass_memory(key);
	double t = pass_round(p);

	munmap(p, PASS_LEN);
	return t;
}

/*
 * Touch every page of len fresh bytes, encrypted with key or plain, with
 * advice MADV_HUGEPAGE or MADV_NOHUGEPAGE (the same on both sides).
 */
static double fault_round(size_t len, key_serial_t key, int advice)
{
	char *p = map_anon(len, MAP_PRIVATE);
	double t;
	size_t i;

	if (!p || madvise(p, len, advice) ||
	    (key && encrypt_mprotect(p, len, PROT_READ | PROT_WRITE, key)))
		bail_out("map %zu bytes: %s", len, strerror(errno));
	t = now_us();
	for (i = 0; i < len; i += PAGE)
		p[i] = 1;
	t = now_us() - t;
	munmap(p, len);
	return t;
}

/* First touch, encrypted and plain with the same THP advice, interleaved. */
static void fault_bench(size_t len, key_serial_t key, int advice,
			const char *thp)
{
	struct flushes before = flushes_now();
	double a[ROUNDS], b[ROUNDS];
	char name[96];
	int r;

	for (r = 0; r < ROUNDS; r++) {
		a[r] = fault_round(len, key, advice);
		b[r] = fault_round(len, 0, advice);
	}
	snprintf(name, sizeof(name),
		 "fault 64 MiB, %s on both sides, encrypted vs plain", thp);
	report(name, a, b);
	snprintf(name, sizeof(name), "fault 64 MiB, %s", thp);
	report_flushes(name, before);
}

static double protect_round(char *p, size_t len, key_serial_t key)
{
	double t = now_us();
	int i;

	for (i = 0; i < 100; i++) {
		if ((key ? encrypt_mprotect(p, len, i & 1 ? PROT_READ : PROT_READ | PROT_WRITE, key) :
			   mprotect(p, len, i & 1 ? PROT_READ : PROT_READ | PROT_WRITE)))
			bail_out("protect: %s", strerror(errno));
	}
	return (now_us() - t) / 100;
}

/* Fresh memory of len bytes, encrypted with key unless key is 0. */
static char *job_memory(size_t len, key_serial_t key)
{
	char *p = map_anon(len, MAP_PRIVATE);

	if (!p || (key && encrypt_mprotect(p, len, PROT_READ | PROT_WRITE, key)))
		return NULL;
	return p;
}

/* One process of the job: its copy of shared, then its own scratch. */
static int job_child(char *shared, size_t len, key_serial_t key)
{
	char *scratch = job_memory(len, key);
	unsigned long sum = 0;
	size_t i;

	if (!scratch)
		return 1;
	for (i = 0; i < len; i += PAGE)
		shared[i]++;
	memcpy(scratch, shared, len);
	for (i = 0; i < len; i += 64)
		sum += scratch[i];
	munmap(scratch, len);
	return sum == 0;
}

/*
 * 16 processes, one after the other, each touching 8 MiB of copy-on-write
 * memory and 8 MiB of its own: the process churn of a build, with every
 * page of it encrypted (key) or plain (0). Includes the exits' frees.
 */
static double job_round(key_serial_t key)
{
	size_t len = 8UL << 20;
	char *shared = job_memory(len, key);
	double t;
	int i, status;
	pid_t pid;

	if (!shared)
		bail_out("job memory: %s", strerror(errno));
	memset(shared, 1, len);
	t = now_us();
	for (i = 0; i < 16; i++) {
		pid = fork();
		if (pid == 0)
			_exit(job_child(shared, len, key));
		if (pid < 0 || waitpid(pid, &status, 0) != pid ||
		    !WIFEXITED(status) || WEXITSTATUS(status))
			bail_out("job process %d failed", i);
	}
	t = now_us() - t;
	munmap(shared, len);
	return t;
}

static double addkey_round(int n)
{
	key_serial_t keys[64];
	char desc[32];
	double t = now_us();
	int i;

	for (i = 0; i < n; i++) {
		snprintf(desc, sizeof(desc), "bench-%d", i);
		keys[i] = mktme_add(desc, CPU_KEY);
		if (keys[i] == -1)
			bail_out("add_key: %s", strerror(errno));
	}
	t = (now_us() - t) / n;
	for (i = 0; i < n; i++)
		keyctl_invalidate(keys[i]);
	wait_keyids_in_use(0, 10000);
	return t;
}

static int wanted(int argc, char **argv, const char *name)
{
	int i;

	for (i = 1; i < argc; i++)
		if (!strcmp(argv[i], name))
			return 1;
	return 0;
}

#define MAX_CPUS 64

/*
 * Each CPU's package and its rank there (all CPUs online at start), the
 * number of packages, and of CPUs per package.
 */
static int cpu_package[MAX_CPUS], cpu_rank[MAX_CPUS], nr_cpus, nr_packages;
static int per_package;

static void read_topology(void)
{
	int cpu, other;
	long pkg;

	for (nr_cpus = 0; nr_cpus < MAX_CPUS; nr_cpus++) {
		pkg = cpu_value(nr_cpus, "topology/physical_package_id");
		if (pkg < 0)
			break;
		cpu_package[nr_cpus] = pkg;
		if (pkg >= nr_packages)
			nr_packages = pkg + 1;
	}
	if (!nr_cpus || cpu_package[0])
		bail_out("CPU 0 is not on package 0, or no topology");
	for (cpu = 0; cpu < nr_cpus; cpu++)
		for (other = 0; other < cpu; other++)
			cpu_rank[cpu] += cpu_package[other] == cpu_package[cpu];
	per_package = nr_cpus / nr_packages;
}

/*
 * Packages 0 .. n - 1 online with per_package / n CPUs each, the other
 * CPUs offline: as many CPUs online whatever n, so that only the number of
 * packages that PCONFIG must program differs. CPU 0 stays online.
 */
static void packages_online(int n)
{
	int cpu, on, err;

	for (cpu = 1; cpu < nr_cpus; cpu++) {
		on = cpu_package[cpu] < n && cpu_rank[cpu] < per_package / n;
		if (cpu_value(cpu, "online") == on)
			continue;
		err = cpu_set_online(cpu, on);
		if (err)
			bail_out("CPU %d %s: %s", cpu, on ? "online" : "offline",
				 strerror(err));
	}
}

/*
 * add_key() latency with 1, 2 and 4 packages online (those that divide
 * both the packages and the CPUs per package), rounds alternating.
 */
static void addkey_packages(void)
{
	int counts[3], nr_counts = 0, c, n, r;
	double t[3][ROUNDS];

	read_topology();
	for (n = 1; n <= 4; n *= 2)
		if (n <= nr_packages && per_package % n == 0)
			counts[nr_counts++] = n;
	for (r = 0; r < ROUNDS; r++)
		for (c = 0; c < nr_counts; c++) {
			packages_online(counts[c]);
			t[c][r] = addkey_round(16);
		}
	packages_online(nr_packages);
	for (c = 0; c < nr_counts; c++)
		printf("addkey: %d package(s) online, %d CPUs: %.0f us per key (median of %d rounds of 16)\n",
		       counts[c], per_package, median(t[c], ROUNDS), ROUNDS);
	for (c = 1; c < nr_counts; c++)
		printf("addkey ratio %d:1 packages %.2f\n", counts[c],
		       median(t[c], ROUNDS) / median(t[0], ROUNDS));
}

int main(int argc, char **argv)
{
	size_t len = 64UL << 20;
	double a[ROUNDS], b[ROUNDS];
	struct flushes before;
	key_serial_t key;
	char *p;
	int r;

	if (argc < 2) {
		fprintf(stderr, "usage: %s fault|protect|memory|job|addkey...\n", argv[0]);
		return 2;
	}
	if (wanted(argc, argv, "addkey"))
		addkey_packages();

	key = mktme_add("bench", CPU_KEY);
	if (key == -1)
		bail_out("add_key: %s", strerror(errno));
	if (wanted(argc, argv, "fault")) {
		fault_bench(len, key, MADV_NOHUGEPAGE, "THP off");
		fault_bench(len, key, MADV_HUGEPAGE, "THP on");
	}

	if (wanted(argc, argv, "protect")) {
		p = map_anon(len, MAP_PRIVATE);
		for (r = 0; r < ROUNDS; r++) {
			a[r] = protect_round(p, len, key);
			b[r] = protect_round(p, len, 0);
		}
		report("encrypt_mprotect vs mprotect, 64 MiB unpopulated", a, b);
		munmap(p, len);
	}

	if (wanted(argc, argv, "memory")) {
		uint64_t *enc = pass_memory(key), *plain = pass_memory(0);

		pass_round(enc);	/* populate: the warm rounds fault nothing */
		pass_round(plain);
		for (r = 0; r < ROUNDS; r++) {
			a[r] = pass_round(enc);
			b[r] = pass_round(plain);
		}
		report("memory pass 8 MiB warm, encrypted vs plain", a, b);
		munmap(enc, PASS_LEN);
		munmap(plain, PASS_LEN);
		for (r = 0; r < ROUNDS; r++) {
			a[r] = cold_pass_round(key);
			b[r] = cold_pass_round(0);
		}
		report("memory pass 8 MiB cold (fresh mapping), encrypted vs plain",
		       a, b);
	}

	if (wanted(argc, argv, "job")) {
		before = flushes_now();
		for (r = 0; r < ROUNDS; r++) {
			a[r] = job_round(key);
			b[r] = job_round(0);
		}
		report("job of 16 processes (8 MiB copy-on-write + 8 MiB scratch each), encrypted vs plain",
		       a, b);
		report_flushes("job", before);
	}
	keyctl_invalidate(key);
	return 0;
}
