// SPDX-License-Identifier: GPL-2.0
/*
 * The KeyID reference stress (issue 22): threads of one process share a few
 * mktme keys and race add_key, keyctl update (to cpu, user, clear,
 * no-encrypt), keyctl invalidate (also of keys whose memory is mapped),
 * encrypt_mprotect of fresh anonymous ranges of 1-32 pages and re-encryption
 * of mapped ones, writes checked byte for byte on read-back, fork with a
 * child that checks and writes its copy, mprotect, mremap, MADV_DONTNEED
 * and munmap (whole or in part). Then every key is invalidated and every
 * mapping unmapped, and keyids_in_use must come back to where it started
 * within 10 s. Needs root. TAP on stdout.
 *
 *   stress [SECONDS]   run time, else $MKTME_STRESS_SECONDS, else 60
 *
 * $MKTME_STRESS_SEED picks the seed (printed either way), $MKTME_STRESS_THREADS
 * the number of threads (default 4), and MKTME_STRESS_HOTPLUG=1 adds a thread
 * that takes the last CPU offline and back (a whole package on vm/run
 * --sockets 2; boot with mktme_savekeys when user keys are in use). Worker i
 * runs on CPU i modulo the online CPUs, and the cleanup on CPU 0, so that
 * pages freed on one CPU may have been faulted on another, as any
 * multi-threaded program's are.
 *
 * If keyids_in_use is not back, one more point tells a lost reference from
 * pages that wait in another CPU's LRU batches: it drains them
 * (vm.compact_memory runs lru_add_drain_all()) and looks again, and the
 * KeyIDs' holders (/sys/kernel/debug/mktme/keyids) are printed.
 *
 * Before the race, the debugfs view is checked on one key and 4 pages of
 * its memory: it names the key and counts the VMA and the pages while they
 * exist, and lists nothing once they are gone; after the race, it lists
 * nothing either.
 *
 * The race runs in a cgroup of its own (CGROUP_ROOT/mktme-stress-PID),
 * where the misc controller charges every KeyID its keys take: sampled
 * during the run, misc.current must have been above 0, and it must be 0
 * once everything is gone.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mktme.h"

#define RW (PROT_READ | PROT_WRITE)
#define NR_SLOTS 8		/* keys shared by the threads */
#define MAX_THREADS 16
#define MAX_REGIONS 12		/* per thread */
#define MAX_PAGES 32
#define MAX_REPORTS 20		/* diagnostics of failures printed */

/* The payloads add and update choose from: number i of NR_PAYLOADS. */
#define NR_PAYLOADS 4
static const char *payload_nr(unsigned int i)
{
	static const char *const others[] = { "type=clear", "type=no-encrypt" };

	return i == 0 ? CPU_KEY : i == 1 ? USER_KEY : others[(i - 2) % 2];
}

/* Key serials of the slots, 0 for none: any thread adds or drops them. */
static _Atomic key_serial_t slots[NR_SLOTS];

struct region {
	char *p;
	size_t len;
	unsigned int seed;	/* byte i holds pattern(seed, i) */
	key_serial_t key;	/* what it was encrypted with */
};

enum op {
	OP_ADD, OP_UPDATE, OP_INVALIDATE, OP_ENCRYPT, OP_REENCRYPT, OP_WRITE,
	OP_FORK, OP_MPROTECT, OP_MREMAP, OP_DONTNEED, OP_MUNMAP, NR_OPS
};

static const char *const op_names[NR_OPS] = {
	"add_key", "update", "invalidate", "encrypt", "re-encrypt", "write",
	"fork", "mprotect", "mremap", "dontneed", "munmap",
};

/* Relative weights of the operations. */
static const int op_weight[NR_OPS] = {
	[OP_ADD] = 4, [OP_UPDATE] = 3, [OP_INVALIDATE] = 2, [OP_ENCRYPT] = 10,
	[OP_REENCRYPT] = 3, [OP_WRITE] = 10, [OP_FORK] = 1, [OP_MPROTECT] = 4,
	[OP_MREMAP] = 3, [OP_DONTNEED] = 3, [OP_MUNMAP] = 6,
};

struct worker {
	pthread_t thread;
	int id, cpu;
	unsigned int rand;
	struct region regions[MAX_REGIONS];
	int nr_regions;
	unsigned long ops[NR_OPS], done[NR_OPS];	/* tried, succeeded */
	unsigned long checks, children;
};

static struct worker workers[MAX_THREADS];
static int nr_workers = 4;
static atomic_int stop;
static atomic_ulong bad_errno, bad_data, bad_children, hotplug_cycles;
static atomic_int reports;

__attribute__((format(printf, 1, 2)))
static void report(const char *fmt, ...)
{
	va_list ap;

	if (atomic_fetch_add(&reports, 1) >= MAX_REPORTS)
		return;
	va_start(ap, fmt);
	vdiag(fmt, ap);
	va_end(ap);
}

/* An error the documentation gives for the call, or a failure. */
static int expected(const char *what, int err, const int *allowed)
{
	for (; *allowed; allowed++)
		if (err == *allowed)
			return 1;
	atomic_fetch_add(&bad_errno, 1);
	report("  %s: unexpected %s (%d)", what, strerror(err), err);
	return 0;
}

static const int add_errors[] = { ENOKEY, EBUSY, EDQUOT, 0 };
static const int update_errors[] = { EBUSY, ENOKEY, EKEYREVOKED, 0 };
static const int invalidate_errors[] = { ENOKEY, EKEYREVOKED, 0 };
static const int encrypt_errors[] = { ENOKEY, EKEYREVOKED, EKEYREJECTED, 0 };

static uint8_t pattern(unsigned int seed, size_t i)
{
	return (uint8_t)(seed * 0x9d + i * 13 + (i >> 12) * 7 + 1);
}

static void fill_at(char *p, size_t from, size_t to, unsigned int seed)
{
	size_t i;

	for (i = from; i < to; i++)
		p[i] = (char)pattern(seed, i);
}

/* Offset of the first byte of [from, to) that is not the pattern, or -1. */
static long check_at(const char *p, size_t from, size_t to, unsigned int seed)
{
	size_t i;

	for (i = from; i < to; i++)
		if ((uint8_t)p[i] != pattern(seed, i))
			return (long)i;
	return -1;
}

static long nonzero_at(const char *p, size_t from, size_t to)
{
	size_t i;

	for (i = from; i < to; i++)
		if (p[i])
			return (long)i;
	return -1;
}

static int data_ok(struct worker *w, const char *what, const struct region *r,
		   long off, const char *want)
{
	w->checks++;
	if (off < 0)
		return 1;
	atomic_fetch_add(&bad_data, 1);
	report("  thread %d, %s: %zu bytes at %p (key %d, seed %u): byte %ld is 0x%02x, want %s",
	       w->id, what, r->len, (void *)r->p, r->key, r->seed, off,
	       (uint8_t)r->p[off], want);
	return 0;
}

static int check_region(struct worker *w, const char *what,
			const struct region *r)
{
	return data_ok(w, what, r, check_at(r->p, 0, r->len, r->seed),
		       "the pattern");
}

static unsigned int rnd(struct worker *w, unsigned int n)
{
	return (unsigned int)rand_r(&w->rand) % n;
}

static size_t rnd_pages(struct worker *w)
{
	return (1 + rnd(w, MAX_PAGES)) * PAGE;
}

static key_serial_t any_key(struct worker *w)
{
	return atomic_load(&slots[rnd(w, NR_SLOTS)]);
}

static void new_seed(struct worker *w, struct region *r)
{
	r->seed = (unsigned int)rand_r(&w->rand);
	fill_at(r->p, 0, r->len, r->seed);
}

static void drop_region(struct worker *w, int i)
{
	w->regions[i] = w->regions[--w->nr_regions];
}

/* add_key of a slot's description: a new key, or an update of its key. */
static void op_add(struct worker *w)
{
	int slot = (int)rnd(w, NR_SLOTS);
	const char *payload = payload_nr(rnd(w, NR_PAYLOADS));
	key_serial_t k, none = 0;
	char desc[32];

	snprintf(desc, sizeof(desc), "stress-%d", slot);
	k = mktme_add(desc, payload);
	if (k == -1) {
		expected("add_key", errno, add_errors);
		return;
	}
	w->done[OP_ADD]++;
	if (!atomic_compare_exchange_strong(&slots[slot], &none, k))
		atomic_store(&slots[slot], k);
}

static void op_update(struct worker *w)
{
	key_serial_t k = any_key(w);
	const char *payload = payload_nr(rnd(w, NR_PAYLOADS));

	if (!k)
		return;
	if (keyctl_update(k, payload, strlen(payload)) == -1)
		expected("keyctl update", errno, update_errors);
	else
		w->done[OP_UPDATE]++;
}

static void op_invalidate(struct worker *w)
{
	int slot = (int)rnd(w, NR_SLOTS);
	key_serial_t k = atomic_exchange(&slots[slot], 0);

	if (!k)
		return;
	if (keyctl_invalidate(k) == -1)
		expected("keyctl invalidate", errno, invalidate_errors);
	else
		w->done[OP_INVALIDATE]++;
}

/* A fresh range encrypted with a shared key: zeros, then the pattern. */
static void op_encrypt(struct worker *w)
{
	struct region r = { .len = rnd_pages(w), .key = any_key(w) };
	long keyid;

	if (w->nr_regions == MAX_REGIONS || !r.key)
		return;
	r.p = map_anon(r.len, MAP_PRIVATE);
	if (!r.p) {
		expected("mmap", errno, (const int[]){ ENOMEM, 0 });
		return;
	}
	if (encrypt_mprotect(r.p, r.len, RW, r.key)) {
		expected("encrypt_mprotect", errno, encrypt_errors);
		munmap(r.p, r.len);
		return;
	}
	w->done[OP_ENCRYPT]++;
	if (!rnd(w, 8)) {
		keyid = keyid_of(r.p);
		if (keyid <= 0) {
			atomic_fetch_add(&bad_data, 1);
			report("  thread %d: encrypted range has KeyID %ld in smaps",
			       w->id, keyid);
		}
	}
	data_ok(w, "fresh encrypted range", &r, nonzero_at(r.p, 0, r.len),
		"zeros");
	new_seed(w, &r);
	w->regions[w->nr_regions++] = r;
}

/*
 * Another key's KeyID discards the data (the region's VMA still holds its
 * old KeyID, so a live key other than the old one has another KeyID); the
 * same key keeps it.
 */
static void op_reencrypt(struct worker *w)
{
	struct region *r;
	key_serial_t k = any_key(w);

	if (!w->nr_regions || !k)
		return;
	r = &w->regions[rnd(w, w->nr_regions)];
	if (encrypt_mprotect(r->p, r->len, RW, k)) {
		expected("encrypt_mprotect (mapped)", errno, encrypt_errors);
		return;
	}
	w->done[OP_REENCRYPT]++;
	if (k == r->key)
		check_region(w, "re-encrypted with its own key", r);
	else
		data_ok(w, "re-encrypted with another key", r,
			nonzero_at(r->p, 0, r->len), "zeros");
	r->key = k;
	new_seed(w, r);
}

static void op_write(struct worker *w)
{
	struct region *r;

	if (!w->nr_regions)
		return;
	r = &w->regions[rnd(w, w->nr_regions)];
	check_region(w, "read back", r);
	new_seed(w, r);
	check_region(w, "read back after writing", r);
	w->done[OP_WRITE]++;
}

/* The child checks its copy of this thread's regions, writes, checks. */
static int child_main(struct worker *w)
{
	int i, bad = 0;
	struct region *r;

	for (i = 0; i < w->nr_regions; i++) {
		r = &w->regions[i];
		bad |= check_at(r->p, 0, r->len, r->seed) != -1;
		fill_at(r->p, 0, r->len, r->seed + 1);
		bad |= check_at(r->p, 0, r->len, r->seed + 1) != -1;
		if (i & 1)
			munmap(r->p, r->len);
	}
	return bad;
}

static void op_fork(struct worker *w)
{
	int status = -1;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0)
		_exit(child_main(w));
	if (pid < 0) {
		expected("fork", errno, (const int[]){ EAGAIN, ENOMEM, 0 });
		return;
	}
	w->children++;
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status)) {
		atomic_fetch_add(&bad_children, 1);
		report("  thread %d: child %d: status 0x%x", w->id, (int)pid,
		       status);
		return;
	}
	w->done[OP_FORK]++;
	/* The parent's data is its own. */
	for (int i = 0; i < w->nr_regions; i++)
		check_region(w, "after fork (parent)", &w->regions[i]);
}

/* Part of a region read-only (a split), read, then back (a merge). */
static void op_mprotect(struct worker *w)
{
	struct region *r;
	size_t pages, from, n;

	if (!w->nr_regions)
		return;
	r = &w->regions[rnd(w, w->nr_regions)];
	pages = r->len / PAGE;
	from = rnd(w, (unsigned int)pages);
	n = 1 + rnd(w, (unsigned int)(pages - from));
	if (mprotect(r->p + from * PAGE, n * PAGE, PROT_READ)) {
		expected("mprotect", errno, (const int[]){ ENOMEM, 0 });
		return;
	}
	check_region(w, "partly read-only", r);
	if (mprotect(r->p, r->len, RW)) {
		expected("mprotect back", errno, (const int[]){ ENOMEM, 0 });
		return;
	}
	w->done[OP_MPROTECT]++;
	new_seed(w, r);
}

static void op_mremap(struct worker *w)
{
	struct region *r;
	size_t len = rnd_pages(w), keep;
	char *q;

	if (!w->nr_regions)
		return;
	r = &w->regions[rnd(w, w->nr_regions)];
	q = mremap(r->p, r->len, len, MREMAP_MAYMOVE);
	if (q == MAP_FAILED) {
		expected("mremap", errno, (const int[]){ ENOMEM, 0 });
		return;
	}
	w->done[OP_MREMAP]++;
	keep = len < r->len ? len : r->len;
	r->p = q;
	r->len = keep;
	check_region(w, "after mremap", r);
	r->len = len;
	data_ok(w, "grown by mremap", r, nonzero_at(q, keep, len), "zeros");
	new_seed(w, r);
}

static void op_dontneed(struct worker *w)
{
	struct region *r;
	size_t pages, from, n;
	long off;

	if (!w->nr_regions)
		return;
	r = &w->regions[rnd(w, w->nr_regions)];
	pages = r->len / PAGE;
	from = rnd(w, (unsigned int)pages);
	n = 1 + rnd(w, (unsigned int)(pages - from));
	if (madvise(r->p + from * PAGE, n * PAGE, MADV_DONTNEED)) {
		expected("madvise", errno, (const int[]){ 0 });
		return;
	}
	w->done[OP_DONTNEED]++;
	off = nonzero_at(r->p, from * PAGE, (from + n) * PAGE);
	data_ok(w, "MADV_DONTNEED range", r, off, "zeros");
	off = check_at(r->p, 0, from * PAGE, r->seed);
	if (off < 0)
		off = check_at(r->p, (from + n) * PAGE, r->len, r->seed);
	data_ok(w, "around MADV_DONTNEED", r, off, "the pattern");
	fill_at(r->p, from * PAGE, (from + n) * PAGE, r->seed);
}

/* All of a region, or its tail. */
static void op_munmap(struct worker *w)
{
	int i;
	struct region *r;
	size_t pages, n;

	if (!w->nr_regions)
		return;
	i = (int)rnd(w, w->nr_regions);
	r = &w->regions[i];
	pages = r->len / PAGE;
	n = rnd(w, 2) ? pages : 1 + rnd(w, (unsigned int)pages);
	if (munmap(r->p + (pages - n) * PAGE, n * PAGE)) {
		expected("munmap", errno, (const int[]){ 0 });
		return;
	}
	w->done[OP_MUNMAP]++;
	if (n == pages) {
		drop_region(w, i);
		return;
	}
	r->len -= n * PAGE;
	check_region(w, "after munmap of the tail", r);
}

static void (*const op_fn[NR_OPS])(struct worker *) = {
	op_add, op_update, op_invalidate, op_encrypt, op_reencrypt, op_write,
	op_fork, op_mprotect, op_mremap, op_dontneed, op_munmap,
};

static enum op pick(struct worker *w)
{
	int total = 0, i, x;

	for (i = 0; i < NR_OPS; i++)
		total += op_weight[i];
	x = (int)rnd(w, (unsigned int)total);
	for (i = 0; x >= op_weight[i]; i++)
		x -= op_weight[i];
	return (enum op)i;
}

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);	/* best effort */
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	enum op op;
	int i;

	pin(w->cpu);
	while (!atomic_load(&stop)) {
		op = pick(w);
		w->ops[op]++;
		op_fn[op](w);
	}
	/*
	 * The last pass: every region read back, and its first page
	 * faulted in again on this CPU, as the last thing the thread does.
	 */
	for (i = 0; i < w->nr_regions; i++) {
		struct region *r = &w->regions[i];

		check_region(w, "final read back", r);
		madvise(r->p, PAGE, MADV_DONTNEED);
		fill_at(r->p, 0, PAGE, r->seed);
	}
	return NULL;
}

/* Takes the last CPU offline and back while the workers run. */
static void *hotplug_main(void *arg)
{
	int cpu = (int)(intptr_t)arg, err;

	while (!atomic_load(&stop)) {
		sleep_ms(1500);
		err = cpu_set_online(cpu, 0);
		if (err) {
			if (err != EBUSY)
				expected("CPU offline", err, (const int[]){ EBUSY, 0 });
			continue;
		}
		sleep_ms(500);
		err = cpu_set_online(cpu, 1);
		if (err && err != EPERM)
			expected("CPU online", err, (const int[]){ EPERM, 0 });
		if (!err)
			atomic_fetch_add(&hotplug_cycles, 1);
		while (err == EPERM && !atomic_load(&stop)) {
			/* Refused while a user key's data is not kept. */
			sleep_ms(200);
			err = cpu_set_online(cpu, 1);
		}
	}
	return NULL;
}

/* VMAs of /proc/self/smaps whose KeyID is not 0. */
static int smaps_encrypted_vmas(void)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char *line = NULL;
	size_t n = 0;
	int count = 0;

	if (!f)
		return -1;
	while (getline(&line, &n, f) > 0)
		if (!strncmp(line, "KeyID:", 6) && strtol(line + 6, NULL, 10))
			count++;
	free(line);
	fclose(f);
	return count;
}

/*
 * The debugfs view on one key with a VMA of 4 pages: the key's line while
 * they exist, no line once the key is invalidated and the memory unmapped.
 */
static void check_holders_view(void)
{
	long before = settled_keyids_in_use(), keyid = -1, now;
	key_serial_t key = mktme_add("stress-holders", CPU_KEY);
	char *p = key == -1 ? NULL : map_anon(4 * PAGE, MAP_PRIVATE);
	struct keyid_holders h[16];
	int n, i, seen = 0, after;

	if (p && !encrypt_mprotect(p, 4 * PAGE, RW, key)) {
		fill(p, 4 * PAGE, 1);
		keyid = keyid_of(p);
	}
	n = read_keyid_holders(h, 16, 1);
	for (i = 0; i < n && i < 16; i++)
		if (h[i].keyid == keyid && h[i].serial == key)
			seen = !strcmp(h[i].state, "allocated") &&
			       !strcmp(h[i].key_state, "live") &&
			       h[i].key == 1 && h[i].vmas == 1 &&
			       h[i].pages == 4 && h[i].pages_found == 4 &&
			       h[i].refs == 6;
	ok(seen, "debugfs: KeyID %ld held by key %d (live), 1 VMA, 4 pages, 6 references",
	   keyid, key);
	if (p)
		munmap(p, 4 * PAGE);
	if (key != -1)
		keyctl_invalidate(key);
	now = wait_keyids_in_use(before, 10000);
	after = read_keyid_holders(h, 16, 1);
	ok(now == before && after == before,
	   "debugfs: once the key and its memory are gone, keyids_in_use is back to %ld within 10 s (%ld) and debugfs lists as many KeyIDs (%d)",
	   before, now, after);
}

static long env_long(const char *name, long dflt)
{
	const char *v = getenv(name);

	return v && *v ? strtol(v, NULL, 0) : dflt;
}

int main(int argc, char **argv)
{
	long seconds = argc > 1 ? strtol(argv[1], NULL, 0) :
		       env_long("MKTME_STRESS_SECONDS", 60);
	unsigned int seed = (unsigned int)env_long("MKTME_STRESS_SEED",
						   (long)time(NULL) ^ getpid());
	int hotplug = env_long("MKTME_STRESS_HOTPLUG", 0) == 1;
	long ncpus = sysconf(_SC_NPROCESSORS_ONLN), before, now, drained;
	unsigned long ops[NR_OPS] = { 0 }, done_ops[NR_OPS] = { 0 };
	unsigned long checks = 0, children = 0, total = 0;
	struct pte_check pte_check_before;
	char cgroup[64], home[512];
	long charged, peak_charged = -1;
	struct timespec t0, t1;
	pthread_t hp;
	int i, j, leftover, last_cpu = (int)ncpus - 1, cg_err, cg_made = 0;

	nr_workers = (int)env_long("MKTME_STRESS_THREADS", 4);
	if (nr_workers < 1 || nr_workers > MAX_THREADS || seconds < 1)
		bail_out("usage: stress [SECONDS]; 1-%d MKTME_STRESS_THREADS",
			 MAX_THREADS);
	plan(1 + 2 + 4 + 4 + 1 + 1);
	require_mktme();
	check_holders_view();
	read_pte_check(&pte_check_before);
	before = settled_keyids_in_use();
	diag("seed %u (MKTME_STRESS_SEED), %ld s, %d threads on %ld CPUs%s",
	     seed, seconds, nr_workers, ncpus,
	     hotplug ? ", CPU hotplug of the last CPU" : "");
	diag("keyids_in_use at the start: %ld of %ld", before,
	     mktme_sysfs("nr_keyids"));

	/* Every thread and child of the race charges its KeyIDs there. */
	snprintf(cgroup, sizeof(cgroup), "mktme-stress-%d", (int)getpid());
	cg_err = cg_current(home, sizeof(home)) ? ENOENT : cg_create(cgroup);
	cg_made = !cg_err;
	if (!cg_err)
		cg_err = cg_enter(cgroup);
	if (cg_err)
		diag("no cgroup %s for the race: %s", cgroup, strerror(cg_err));

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < nr_workers; i++) {
		workers[i].id = i;
		workers[i].cpu = (int)(i % ncpus);
		workers[i].rand = seed + 7919 * (unsigned int)i;
		if (pthread_create(&workers[i].thread, NULL, worker_main,
				   &workers[i]))
			bail_out("pthread_create: %s", strerror(errno));
	}
	hotplug = hotplug && last_cpu > 0;
	if (hotplug && pthread_create(&hp, NULL, hotplug_main,
				      (void *)(intptr_t)last_cpu))
		bail_out("pthread_create: %s", strerror(errno));
	for (i = 0; i < seconds * 10; i++) {
		sleep_ms(100);
		charged = cg_misc(cgroup, "misc.current", "mktme");
		if (charged > peak_charged)
			peak_charged = charged;
	}
	atomic_store(&stop, 1);
	for (i = 0; i < nr_workers; i++)
		pthread_join(workers[i].thread, NULL);
	if (hotplug) {
		pthread_join(hp, NULL);
		cpu_set_online(last_cpu, 1);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);

	for (i = 0; i < nr_workers; i++) {
		for (j = 0; j < NR_OPS; j++) {
			ops[j] += workers[i].ops[j];
			done_ops[j] += workers[i].done[j];
			total += workers[i].ops[j];
		}
		checks += workers[i].checks;
		children += workers[i].children;
	}
	diag("%lu operations in %.1f s; tried/succeeded:", total,
	     (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	for (j = 0; j < NR_OPS; j++)
		diag("  %-10s %8lu %8lu", op_names[j], ops[j], done_ops[j]);
	if (hotplug)
		diag("  CPU %d offline and back %lu times", last_cpu,
		     atomic_load(&hotplug_cycles));

	ok(done_ops[OP_ADD] > 0 && done_ops[OP_ENCRYPT] > 0,
	   "keys were made (%lu) and memory encrypted with them (%lu)",
	   done_ops[OP_ADD], done_ops[OP_ENCRYPT]);
	ok(!atomic_load(&bad_errno),
	   "no error outside the documented ones (%lu)", atomic_load(&bad_errno));
	ok(!atomic_load(&bad_data), "every read-back matched (%lu checks, %lu bad)",
	   checks, atomic_load(&bad_data));
	ok(!atomic_load(&bad_children),
	   "every child read back and wrote its copy (%lu children, %lu bad)",
	   children, atomic_load(&bad_children));

	/* Cleanup on CPU 0: every key invalidated, every mapping unmapped. */
	pin(0);
	for (i = 0; i < NR_SLOTS; i++) {
		key_serial_t k = atomic_exchange(&slots[i], 0);

		if (k)
			keyctl_invalidate(k);
	}
	keyctl_clear(KEY_SPEC_PROCESS_KEYRING);
	for (i = 0; i < nr_workers; i++)
		for (j = 0; j < workers[i].nr_regions; j++)
			munmap(workers[i].regions[j].p, workers[i].regions[j].len);
	leftover = smaps_encrypted_vmas();
	ok(leftover == 0, "after cleanup no mapping has a nonzero KeyID (%d)",
	   leftover);

	now = wait_keyids_in_use(before, 10000);
	ok(now == before,
	   "keys invalidated, memory unmapped: keyids_in_use is back to %ld within 10 s (%ld)",
	   before, now);

	/* Lost reference, or pages parked in another CPU's LRU batches? */
	drained = now;
	if (now != before) {
		FILE *f = fopen("/proc/sys/vm/compact_memory", "w");

		if (f) {
			fputs("1\n", f);
			fclose(f);
		}
		drained = wait_keyids_in_use(before, 3000);
	}
	ok(drained == before,
	   "after draining the per-CPU LRU batches (vm.compact_memory) it is %ld (%ld)",
	   before, drained);
	if (now != before && drained == before)
		diag("  the KeyID was held by freed pages waiting in another CPU's LRU batch");
	leftover = read_keyid_holders(NULL, 0, drained != before);
	ok(leftover == (int)drained,
	   "debugfs lists as many KeyIDs as are in use (%d, %ld)", leftover, drained);
	charged = cg_wait_current(cgroup, 0, 3000);
	if (!cg_err)
		cg_err = cg_enter(home);
	if (cg_made) {
		int rm_err = cg_remove(cgroup);

		cg_err = cg_err ?: rm_err;
	}
	ok(!cg_err && peak_charged > 0 && charged == 0,
	   "cgroup %s: misc.current mktme peaked at %ld (sampled every 0.1 s), %ld at the end (%s)",
	   cgroup, peak_charged, charged,
	   cg_err ? strerror(cg_err) : "removed");
	ok_pte_check(&pte_check_before, "stress");
	return done();
}
